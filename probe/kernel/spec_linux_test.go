//go:build linux

package kernel

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/cilium/ebpf"
)

// The embedded object parses without privileges, and its maps have the
// layout the Go side decodes into (a C struct edited without make generate
// fails here).
func TestSpecLayout(t *testing.T) {
	spec, err := loadLeak()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		key, value uintptr
	}{
		{"allocs", unsafe.Sizeof(leakHandleKey{}), unsafe.Sizeof(leakAllocInfo{})},
		{"sites", unsafe.Sizeof(leakSiteKey{}), unsafe.Sizeof(uint32(0))},
		{"site_slots", unsafe.Sizeof(uint32(0)), unsafe.Sizeof(leakSiteSlot{})},
		{"site_counts", unsafe.Sizeof(uint32(0)), unsafe.Sizeof(leakSiteStats{})},
		{"stacks", 8, unsafe.Sizeof(leakStack{})},
		{"exec_ranges", 4, unsafe.Sizeof(leakExecRange{})},
		{"range_ctls", 4, unsafe.Sizeof(leakRangeCtl{})},
		{"stats", 4, 8},
	} {
		m := spec.Maps[tc.name]
		if m == nil {
			t.Errorf("map %s missing", tc.name)
			continue
		}
		if uintptr(m.KeySize) != tc.key || uintptr(m.ValueSize) != tc.value {
			t.Errorf("map %s: key %d value %d bytes, Go decodes %d and %d", tc.name, m.KeySize, m.ValueSize, tc.key, tc.value)
		}
	}
	if n := spec.Maps["stats"].MaxEntries; n != uint32(leakStatIndexSTAT_MAX) {
		t.Errorf("stats has %d entries, STAT_MAX is %d", n, leakStatIndexSTAT_MAX)
	}
	if n := spec.Maps["exec_ranges"].MaxEntries; int(n) != 2*MaxRanges {
		t.Errorf("exec_ranges has %d entries, Go writes %d", n, 2*MaxRanges)
	}
	// Per-thread state lives in task storage, which the kernel frees
	// with each thread: nothing can outlive the threads.
	if typ := spec.Maps["threads"].Type; typ != ebpf.TaskStorage {
		t.Errorf("per-thread state is in a %v map, want task storage", typ)
	}
	for name, prog := range spec.Programs {
		if strings.HasSuffix(name, "_multi") {
			// A twin: the same body as its plain program, attached
			// with uprobe_multi links.
			plain := spec.Programs[strings.TrimSuffix(name, "_multi")]
			if plain == nil || prog.SectionName != plain.SectionName+".multi" {
				t.Errorf("program %s in section %s is no twin of a plain program", name, prog.SectionName)
			}
			continue
		}
		if prog.AttachTo == "" && prog.SectionName != "uprobe" && prog.SectionName != "uretprobe" && prog.SectionName != "uprobe.session" {
			t.Errorf("program %s in section %s", name, prog.SectionName)
		}
	}
	if len(spec.Programs) != 39 {
		t.Errorf("%d programs, want 39 (malloc family 9, return, session, zlib 5, pair acquire and release, exec, exit, fork, loader hook, exit call; --maps: mmap, munmap and mremap exits, thread start and exit; and 11 uprobe_multi twins: return, free, zlib, pairs, loader hook, exit call)", len(spec.Programs))
	}
}
