//go:build linux && amd64

package probe

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/testutil"
	"github.com/leakscope/leakscope/probe/procfs"
)

// fakeMem is a process's memory at a few addresses.
type fakeMem map[uint64][]byte

func (m fakeMem) ReadAt(p []byte, off int64) (int, error) {
	for a, b := range m {
		if uint64(off) >= a && uint64(off)+uint64(len(p)) <= a+uint64(len(b)) {
			return copy(p, b[uint64(off)-a:]), nil
		}
	}
	return 0, os.ErrNotExist
}

func words(ws ...uint64) []byte {
	b := make([]byte, 8*len(ws))
	for i, w := range ws {
		binary.LittleEndian.PutUint64(b[8*i:], w)
	}
	return b
}

func region(start, end uint64, perms, path string, rss uint64) procfs.Region {
	r := procfs.Region{Mapping: procfs.Mapping{Start: start, End: end, Perms: perms, Path: path, Dev: "00:00"}, Rss: rss}
	if strings.HasPrefix(path, "/") {
		r.Inode = 7
	}
	return r
}

// Each kind of mapping goes to its part, the traced bytes within the
// allocator's, and the parts add up to RSS.
func TestBreakdownParts(t *testing.T) {
	const MiB = 1 << 20
	regions := []procfs.Region{
		region(0x400000, 0x401000, "r--p", "/bin/x", 4096),
		region(0x401000, 0x500000, "r-xp", "/bin/x", 512<<10),
		region(0x500000, 0x501000, "rw-p", "/bin/x", 4096),
		region(0x501000, 0x511000, "rw-p", "", 8192), // .bss
		region(0x1000000, 0x3000000, "rw-p", "[heap]", 16*MiB),
		// a glibc arena: 64 MiB aligned, heap_info fits
		region(0x7f0000000000, 0x7f0000400000, "rw-p", "", 3*MiB),
		region(0x7f0000400000, 0x7f0004000000, "---p", "", 0),
		// two mmapped chunks of 1 MiB, merged into one mapping
		region(0x7f1000000000, 0x7f1000200000, "rw-p", "", 2*MiB),
		// a thread stack: guard, then the stack holding a blocked sp
		region(0x7f2000000000, 0x7f2000001000, "---p", "", 0),
		region(0x7f2000001000, 0x7f2000801000, "rw-p", "", 256<<10),
		region(0x7f3000000000, 0x7f3000400000, "r--s", "/data/file", 4*MiB),
		region(0x7f4000000000, 0x7f4000800000, "rw-p", "", 8*MiB),
		region(0x7ffd00000000, 0x7ffd00021000, "rw-p", "[stack]", 64<<10),
		region(0x7ffd10000000, 0x7ffd10002000, "r-xp", "[vdso]", 8192),
	}
	mem := fakeMem{
		0x7f0000000000: words(0x7f0000000020, 0, 0x300000, 0x400000),
		0x7f1000000000: words(0, MiB|2),
		0x7f1000100000: words(0, MiB|2),
	}
	k := memoryKnown{runtime: analyze.RuntimeNative, glibc: true, traced: map[string]uint64{analyze.PartMalloc: 2*MiB - 8192, analyze.PartZlib: 100 << 10}}
	pm := breakdown(1234, regions, threadStacks{sps: []uint64{0x7f2000700000}}, k, mem)
	if err := pm.Check(); err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{
		analyze.PartMalloc:      2*MiB - 8192,
		analyze.PartZlib:        100 << 10,
		analyze.PartAllocator:   21*MiB - (2*MiB - 8192) - 100<<10,
		analyze.PartStacks:      256<<10 + 64<<10,
		analyze.PartCode:        512<<10 + 8192,
		analyze.PartData:        4096 + 4096 + 8192,
		analyze.PartFiles:       4 * MiB,
		analyze.PartUnexplained: 8 * MiB,
	}
	for _, p := range pm.Parts {
		if p.Bytes != want[p.Name] {
			t.Errorf("%s = %d, want %d", p.Name, p.Bytes, want[p.Name])
		}
	}
	if len(pm.Parts) != len(want) {
		t.Errorf("parts %+v, want %v", pm.Parts, want)
	}

	// More traced than the allocator holds resident (blocks never
	// touched): the traced parts share what is resident.
	k.traced = map[string]uint64{analyze.PartMalloc: 40 * MiB, analyze.PartDirect: 40 * MiB}
	pm = breakdown(1234, regions, threadStacks{}, k, mem)
	if err := pm.Check(); err != nil {
		t.Fatal(err)
	}
	if a, d := pm.Part(analyze.PartMalloc), pm.Part(analyze.PartDirect); a+d != 21*MiB || a != d || pm.Part(analyze.PartAllocator) != 0 {
		t.Errorf("malloc %d, direct %d, allocator %d: want 10.5 MiB, 10.5 MiB, 0", a, d, pm.Part(analyze.PartAllocator))
	}
	// Unknown stack pointers: the guard page pattern finds the stack.
	pm = breakdown(1234, regions, threadStacks{unknown: 1}, k, mem)
	if pm.Part(analyze.PartStacks) != 256<<10+64<<10 {
		t.Errorf("stacks %d without stack pointers", pm.Part(analyze.PartStacks))
	}
}

// vmRSS reads a process's VmRSS, in bytes.
func vmRSS(t *testing.T, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// checkBreakdown checks the latest breakdown of the capture against the
// process's VmRSS now: within 2%, unexplained under maxUnexplained of it.
func checkBreakdown(t *testing.T, c *analyze.Capture, rss uint64, maxUnexplained float64) *analyze.ProcessMemory {
	t.Helper()
	pm, _ := c.LastMemory(0)
	if pm == nil {
		t.Fatal("no memory breakdown in the capture")
	}
	if err := pm.Check(); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, p := range pm.Parts {
		b.WriteString("\n  " + p.Name + " " + analyze.FormatBytes(p.Bytes) + " (" + strconv.FormatUint(p.Bytes, 10) + ")")
	}
	un := float64(pm.Part(analyze.PartUnexplained)) / float64(pm.RSS)
	t.Logf("RSS %s (VmRSS %s), unexplained %.1f%%:%s", analyze.FormatBytes(pm.RSS), analyze.FormatBytes(rss), 100*un, b.String())
	if d := float64(pm.RSS) - float64(rss); d > 0.02*float64(rss) || -d > 0.02*float64(rss) {
		t.Errorf("breakdown RSS %d, VmRSS %d: more than 2%% apart", pm.RSS, rss)
	}
	if un >= maxUnexplained {
		t.Errorf("unexplained %.1f%% of RSS, want under %.0f%%", 100*un, 100*maxUnexplained)
	}
	return pm
}

// The breakdown of memparts: its malloc'd blocks as malloc outstanding,
// its file as a mapped file, its threads' stacks, and its anonymous
// mapping, exactly: unexplained untraced, a traced mapping with --maps.
func TestMemoryBreakdownC(t *testing.T) {
	testutil.RequireBPF(t)
	const MiB = 1 << 20
	bin := buildExample(t, "memparts", true)
	for _, maps := range []bool{false, true} {
		t.Run(fmt.Sprintf("maps=%v", maps), func(t *testing.T) {
			dir := t.TempDir()
			gate := filepath.Join(dir, "go")
			cmd := startExample(t, bin, "--malloc-mib", "64", "--anon-mib", "4", "--file-mib", "4",
				"--file", filepath.Join(dir, "data"), "--threads", "4", "--wait-file", gate)
			tr, err := Attach(cmd.Process.Pid, Options{Warnf: t.Logf, Maps: maps})
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(gate, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(20 * time.Second)
			for {
				ents, _ := os.ReadDir("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/task")
				if len(ents) >= 5 || time.Now().After(deadline) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			time.Sleep(300 * time.Millisecond)
			if _, err := tr.Snapshot(); err != nil {
				t.Fatal(err)
			}
			rss := vmRSS(t, cmd.Process.Pid)
			c, err := tr.Stop()
			if err != nil {
				t.Fatal(err)
			}
			pm := checkBreakdown(t, c, rss, 0.10)
			// 64 MiB and the few small blocks libc allocates for itself.
			if got := pm.Part(analyze.PartMalloc); got < 64*MiB || got > 64*MiB+64<<10 {
				t.Errorf("malloc outstanding %d, want 64 MiB", got)
			}
			if got := pm.Part(analyze.PartFiles); got < 4*MiB || got > 4*MiB+256<<10 {
				t.Errorf("mapped files %d, want 4 MiB", got)
			}
			if got := pm.Part(analyze.PartStacks); got < 4*256<<10 {
				t.Errorf("thread stacks %d, want at least 4 x 256 KiB", got)
			}
			anon, un := pm.Part(analyze.PartMappings), pm.Part(analyze.PartUnexplained)
			if !maps && (anon != 0 || un < 4*MiB || un > 4*MiB+MiB) {
				t.Errorf("traced mappings %d, unexplained %d; want none, and the 4 MiB anonymous mapping and at most 1 MiB more", anon, un)
			}
			if maps && (anon != 4*MiB || un > MiB) {
				t.Errorf("traced mappings %d, unexplained %d; want the 4 MiB anonymous mapping, and at most 1 MiB", anon, un)
			}
		})
	}
}
