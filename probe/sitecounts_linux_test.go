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

// Blocks malloc'd by producer threads and freed by consumer threads,
// thousands live at once (examples/c/handoff.c), are counted exactly:
// with the default tables, and with tables small enough that the live
// blocks fill their buckets, so that blocks move to the hash table while
// other threads free them.
func TestHandoffAcrossThreads(t *testing.T) {
	testutil.RequireBPF(t)
	bin := buildExample(t, "handoff", true)
	const producers, blocks = 2, 200000
	var wantN, wantB uint64
	for k := 0; k < blocks; k += 1000 {
		wantN += producers
		wantB += producers * uint64(16+k*37%241)
	}
	for _, max := range []uint32{0, 1 << 13} {
		c, _ := launchWith(t, Options{MaxAllocations: max}, bin, "--producers", itoa(producers), "--consumers", "2",
			"--blocks", itoa(blocks), "--ring", "3000")
		checkNoLoss(t, c)
		// Unknown frees there are: a thread's exit frees the chunks
		// its tcache holds, which the program freed before.
		if c.Lost.FreesMissed != 0 {
			t.Errorf("--max-allocations %d: %d frees missed", max, c.Lost.FreesMissed)
		}
		n, b, stacks := sumSites(c, "handoff_alloc")
		var allocs, frees uint64
		for _, s := range siteOf(c, "handoff_alloc") {
			allocs += s.Allocs
			frees += s.Frees
		}
		if n != wantN || b != wantB || allocs != producers*blocks || frees != allocs-wantN {
			t.Errorf("--max-allocations %d: handoff_alloc %d live, %d bytes, %d made, %d freed (%v); want %d, %d, %d, %d",
				max, n, b, allocs, frees, stacks, wantN, wantB, producers*blocks, producers*blocks-wantN)
		}
	}
}
