//go:build linux

package kernel

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/leakscope/leakscope/internal/testutil"
	"github.com/leakscope/leakscope/probe/unwind"
)

// resetConfig is a child's collection with small tables, as a followed
// process's is loaded (ExecSeen: the one global Load writes to .bss).
var resetConfig = Config{Wait: true, Follow: true, ExecSeen: true, Malloc: true,
	MaxAllocations: 1 << 12, MaxSites: 1 << 10, MaxStacks: 1 << 10, MaxUnwindRows: 1 << 12}

// A collection Reset after every one of its tables and globals was
// written reads, map for map and byte for byte, as a collection freshly
// loaded with the same Config: nothing of the process it traced before is
// left for the next one. Every map of the object is dirtied (listed from
// the generated objects, so a map added later is covered), then compared.
func TestResetMatchesFreshLoad(t *testing.T) {
	testutil.RequireBPF(t)
	used, err := Load(resetConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer used.Close()
	fresh, err := Load(resetConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()

	dirtied := 0
	for _, nm := range used.tables() {
		if dirty(t, nm.m) {
			dirtied++
		}
	}
	bss := bytes.Repeat([]byte{0xa5}, int(used.lazy.data.Bss.ValueSize()))
	if err := used.lazy.data.Bss.Update(uint32(0), bss, ebpf.UpdateExist); err != nil {
		t.Fatal(err)
	}
	if dirtied < 20 {
		t.Fatalf("only %d maps were dirtied: the test no longer reaches the tables", dirtied)
	}
	if same(t, used.lazy.data.Bss, fresh.lazy.data.Bss) {
		t.Fatal(".bss still reads as a fresh load's after it was written: the comparison cannot fail")
	}

	if err := used.Reset(1 << 20); err != nil {
		t.Fatal(err)
	}
	fm := map[string]*ebpf.Map{}
	for _, nm := range fresh.tables() {
		fm[nm.name] = nm.m
	}
	for _, nm := range used.tables() {
		if !same(t, nm.m, fm[nm.name]) {
			t.Errorf("%s after Reset differs from a fresh load's", nm.name)
		}
	}
	for _, d := range []struct {
		name        string
		used, fresh *ebpf.Map
	}{{".bss", used.lazy.data.Bss, fresh.lazy.data.Bss}, {".rodata", used.lazy.data.Rodata, fresh.lazy.data.Rodata}} {
		if !same(t, d.used, d.fresh) {
			t.Errorf("%s after Reset differs from a fresh load's", d.name)
		}
	}
	if seen, err := get[uint32](used.objs.ExecSeen); err != nil || seen != 1 {
		t.Errorf("exec_seen after Reset = %d (%v), want 1 as Load set it", seen, err)
	}
}

// A collection whose hash tables hold more entries than Reset may delete
// is refused (the caller closes it), one that holds as many is emptied.
func TestResetRefusesFullTables(t *testing.T) {
	testutil.RequireBPF(t)
	o, err := Load(resetConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	fill := func() {
		for i := range 100 {
			key := make([]byte, o.objs.Allocs.KeySize())
			key[0], key[1] = byte(i), 1
			if err := o.objs.Allocs.Update(key, make([]byte, o.objs.Allocs.ValueSize()), ebpf.UpdateAny); err != nil {
				t.Fatal(err)
			}
		}
	}
	fill()
	if err := o.Reset(99); !errors.Is(err, ErrResetTooLarge) {
		t.Fatalf("Reset(99) of 100 allocations = %v, want ErrResetTooLarge", err)
	}
	fill()
	if err := o.Reset(100); err != nil {
		t.Fatalf("Reset(100) of 100 allocations = %v", err)
	}
	if k, err := o.objs.Allocs.NextKeyBytes(nil); err != nil || k != nil {
		t.Fatalf("allocs not empty after Reset: key %x, %v", k, err)
	}
}

// dirty writes non-zero entries into m where user space can: the first
// and last entries of an array, three keys of a hash. It reports whether
// it wrote anything.
func dirty(t *testing.T, m *ebpf.Map) bool {
	t.Helper()
	val := func() any {
		b := bytes.Repeat([]byte{0x5a}, int(m.ValueSize()))
		if m.Type() != ebpf.PerCPUArray {
			return b
		}
		cpus, err := ebpf.PossibleCPU()
		if err != nil {
			t.Fatal(err)
		}
		vs := make([][]byte, cpus)
		for i := range vs {
			vs[i] = b
		}
		return vs
	}
	switch m.Type() {
	case ebpf.Array, ebpf.PerCPUArray:
		for _, k := range []uint32{0, m.MaxEntries() - 1} {
			if err := m.Update(k, val(), ebpf.UpdateExist); err != nil {
				t.Fatalf("dirty %v: %v", m, err)
			}
		}
	case ebpf.Hash, ebpf.LRUHash:
		for i := range 3 {
			key := bytes.Repeat([]byte{byte(i + 1)}, int(m.KeySize()))
			if err := m.Update(key, val(), ebpf.UpdateAny); err != nil {
				t.Fatalf("dirty %v: %v", m, err)
			}
		}
	default:
		return false
	}
	return true
}

// same reports whether maps a and b (same type and sizes) hold the same
// entries with the same bytes.
func same(t *testing.T, a, b *ebpf.Map) bool {
	t.Helper()
	da, db := dump(t, a), dump(t, b)
	return reflect.DeepEqual(da, db)
}

// dump lists m's entries as key bytes to value bytes (every CPU's, one
// after another); ring buffers and task storage list nothing.
func dump(t *testing.T, m *ebpf.Map) map[string]string {
	t.Helper()
	out := map[string]string{}
	switch m.Type() {
	case ebpf.RingBuf, ebpf.TaskStorage:
		return out
	}
	var prev any
	for {
		k, err := m.NextKeyBytes(prev)
		if err != nil {
			t.Fatal(err)
		}
		if k == nil {
			return out
		}
		var v string
		if m.Type() == ebpf.PerCPUArray {
			var vs [][]byte
			if err := m.Lookup(k, &vs); err != nil {
				t.Fatal(err)
			}
			v = fmt.Sprint(vs)
		} else {
			b, err := m.LookupBytes(k)
			if err != nil {
				t.Fatal(err)
			}
			v = string(b)
		}
		out[string(k)] = v
		prev = k
	}
}

// The range table flips between its halves, a generation a write, and
// unwind_rows fills from 0 up to its size; a Reset collection starts both
// over as a fresh one does (its maps are zero, so its walker reads slot 0
// at generation 0 and no row).
func TestRangeTableAndUnwindRowsStartOverAtReset(t *testing.T) {
	testutil.RequireBPF(t)
	o, err := Load(resetConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	ctl := func() leakRangeCtl {
		t.Helper()
		var c leakRangeCtl
		if err := o.objs.RangeCtls.Lookup(uint32(0), &c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	ranges := []Range{{Start: 0x1000, End: 0x2000, Flags: RangeDWARF}, {Start: 0x3000, End: 0x4000}}
	rows := make([]unwind.Row, 1000)
	for round := range 2 {
		for i, want := range []leakRangeCtl{{Slot: 1, Count: 2, Generation: 1}, {Slot: 0, Count: 1, Generation: 2}} {
			if err := o.PublishRanges(ranges[:2-i]); err != nil {
				t.Fatal(err)
			}
			if got := ctl(); got != want {
				t.Errorf("round %d, write %d: range_ctls %+v, want %+v", round, i, got, want)
			}
		}
		var half leakExecRange
		if err := o.objs.ExecRanges.Lookup(uint32(MaxRanges), &half); err != nil || half.Start != 0x1000 || half.Flags != RangeDWARF {
			t.Errorf("round %d: slot 1's first range %+v (%v), want the first write's", round, half, err)
		}
		for i, want := range []uint32{0, 1000, 2000, 3000} {
			if start, err := o.AppendUnwindRows(rows); err != nil || start != want {
				t.Fatalf("round %d, rows %d: start %d (%v), want %d", round, i, start, err, want)
			}
		}
		if _, err := o.AppendUnwindRows(rows[:97]); !errors.Is(err, ErrUnwindFull) {
			t.Errorf("round %d: 4,097 rows in a table of 4,096: %v, want ErrUnwindFull", round, err)
		}
		if start, err := o.AppendUnwindRows(rows[:96]); err != nil || start != 4000 {
			t.Errorf("round %d: the last 96 rows at %d (%v), want 4000", round, start, err)
		}
		if err := o.Reset(1 << 20); err != nil {
			t.Fatal(err)
		}
		if got := ctl(); got != (leakRangeCtl{}) {
			t.Fatalf("range_ctls %+v after Reset", got)
		}
	}
}
