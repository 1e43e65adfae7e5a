//go:build linux && amd64

package probe

import (
	"fmt"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/leakscope/leakscope/internal/testutil"
)

// A site's totals are kept per CPU in the kernel and summed at each
// snapshot: blocks allocated on one CPU and freed on another, from one
// call site allocating on both (examples/c/cpuhop.c), are counted
// exactly.
func TestSiteCountsPerCPU(t *testing.T) {
	testutil.RequireBPF(t)
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	var cpus []int
	for i := 0; i < 1024 && len(cpus) < 2; i++ {
		if set.IsSet(i) {
			cpus = append(cpus, i)
		}
	}
	if len(cpus) < 2 {
		testutil.SkipOptional(t, "needs two CPUs")
	}
	bin := buildExample(t, "cpuhop", true)
	const rounds, blocks = 10, 1000
	c, _ := launch(t, bin, "--cpus", fmt.Sprintf("%d,%d", cpus[0], cpus[1]), "--rounds", itoa(rounds), "--blocks", itoa(blocks))
	checkNoLoss(t, c)
	var wantN, wantB uint64
	for k := 0; k < rounds*blocks; k++ {
		if k%4 == 0 || k >= (rounds-1)*blocks {
			wantN++
			wantB += uint64(16 + k*37%241)
		}
	}
	sites := siteOf(c, "hop_alloc")
	if len(sites) != 1 {
		t.Fatalf("hop_alloc is %d sites, want 1", len(sites))
	}
	s := sites[0]
	if s.LiveCount != wantN || s.LiveBytes != wantB || s.Allocs != rounds*blocks {
		t.Errorf("hop_alloc: %d live, %d bytes, %d allocations; want %d, %d, %d", s.LiveCount, s.LiveBytes, s.Allocs, wantN, wantB, rounds*blocks)
	}
	// The last snapshot's point, from the kernel's totals alone, agrees.
	if n := len(c.Snapshots); n > 0 {
		for _, p := range c.Snapshots[n-1].Sites {
			if p.ID == s.ID && (p.LiveCount != wantN || p.LiveBytes != wantB) {
				t.Errorf("last snapshot of hop_alloc: %d live, %d bytes; want %d, %d", p.LiveCount, p.LiveBytes, wantN, wantB)
			}
		}
	}
}
