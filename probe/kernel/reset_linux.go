//go:build linux

package kernel

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"
)

// ErrResetTooLarge is Reset's refusal of a collection whose tables hold
// more entries than it was allowed to delete: loading a new one is as
// cheap as emptying it.
var ErrResetTooLarge = errors.New("tables too full to empty")

// Reset empties o's tables and globals to what Load with o's Config left
// them, so that the collection traces another process instead of being
// closed and a new one loaded (a load is ~0.5 s of CPU, most of it the
// verifier's; emptying a collection that traced a short-lived process is
// a few milliseconds). No link of o's programs may be open, and its
// ring buffers must have been read to the end: Reset refuses a
// collection with an unread record (a record names a process that may
// be waiting stopped for it). maxKeys bounds the hash entries it deletes
// (ErrResetTooLarge beyond, once up to 4,096 more went); on any error the
// collection is half emptied, to be closed, not used.
//
// Per-task storage (threads) is not emptied (it cannot be listed): its
// entries belong to tasks of the process traced before, which either
// exited (their storage goes with them) or, if one lives on, is not the
// next process's; the caller must not reuse a collection for a task it
// traced before.
func (o *Objects) Reset(maxKeys int) error {
	for _, r := range []struct {
		name string
		m    *ebpf.Map
	}{{"range_misses", o.objs.RangeMisses}, {"mmap_events", o.objs.MmapEvents}} {
		if unread, err := ringUnread(r.m); err != nil {
			return fmt.Errorf("reset %s: %w", r.name, err)
		} else if unread {
			return fmt.Errorf("reset %s: a record is unread", r.name)
		}
	}
	budget := maxKeys
	for _, nm := range o.tables() {
		var err error
		switch nm.m.Type() {
		case ebpf.Hash, ebpf.LRUHash:
			budget, err = emptyHash(nm.m, budget)
		case ebpf.Array:
			err = zeroArray(nm.m, false)
		case ebpf.PerCPUArray:
			err = zeroArray(nm.m, true)
		case ebpf.RingBuf, ebpf.TaskStorage:
			// Checked above; not listable (see the doc comment).
		default:
			err = fmt.Errorf("map type %v has no reset", nm.m.Type())
		}
		if err != nil {
			return fmt.Errorf("reset %s: %w", nm.name, err)
		}
	}
	if err := zeroArray(o.lazy.data.Bss, false); err != nil {
		return fmt.Errorf("reset .bss: %w", err)
	}
	// The one global Load sets in .bss (the others are .rodata).
	if err := o.objs.ExecSeen.Set(flag(o.config.ExecSeen)); err != nil {
		return fmt.Errorf("reset exec_seen: %w", err)
	}
	o.rangeSlot, o.rangeGen, o.rowsUsed = 0, 0, 0 // range_ctls and unwind_rows are zero
	return nil
}

type namedMap struct {
	name string
	m    *ebpf.Map
}

// tables lists every map of the collection but the global-data sections,
// by its name in the object.
func (o *Objects) tables() []namedMap { return namedMaps(&o.objs.leakMaps) }

// namedMaps lists the maps of m by their names in the object.
func namedMaps(m *leakMaps) []namedMap {
	var out []namedMap
	v := reflect.ValueOf(m).Elem()
	for i := range v.NumField() {
		if m, ok := v.Field(i).Interface().(*ebpf.Map); ok && m != nil {
			out = append(out, namedMap{v.Type().Field(i).Tag.Get("ebpf"), m})
		}
	}
	return out
}

// ringUnread reports whether ring buffer m holds a record not consumed.
func ringUnread(m *ebpf.Map) (bool, error) {
	if m == nil {
		return false, nil
	}
	r, err := ringbuf.NewReader(m)
	if err != nil {
		return false, err
	}
	defer r.Close()
	return r.AvailableBytes() != 0, nil
}

// byteArrays returns a slice of n values of size bytes each, the shape
// cilium's batch calls take for a map whose types are known only by size.
func byteArrays(n int, size uint32) any {
	return reflect.MakeSlice(reflect.SliceOf(reflect.ArrayOf(int(size), reflect.TypeFor[byte]())), n, n).Interface()
}

// emptyHash deletes every entry of hash map m, at most budget of them
// (ErrResetTooLarge beyond), and returns the budget left.
func emptyHash(m *ebpf.Map, budget int) (int, error) {
	const batch = 4096
	keys := byteArrays(batch, m.KeySize())
	vals := byteArrays(batch, m.ValueSize())
	for {
		var cursor ebpf.MapBatchCursor
		n, err := m.BatchLookupAndDelete(&cursor, keys, vals, nil)
		budget -= n
		if budget < 0 {
			return 0, ErrResetTooLarge
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return budget, nil
		}
		if errors.Is(err, ebpf.ErrNotSupported) && n == 0 {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	// No batch operations: one key at a time, listed before any goes.
	var listed [][]byte
	var prev any // nil: the first key
	for {
		k, err := m.NextKeyBytes(prev)
		if err != nil {
			return 0, err
		}
		if k == nil {
			break
		}
		if budget--; budget < 0 {
			return 0, ErrResetTooLarge
		}
		listed = append(listed, k)
		prev = k
	}
	for _, k := range listed {
		if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return 0, err
		}
	}
	return budget, nil
}

// zeros is what zeroArray writes, a piece at a time.
var zeros [1 << 16]byte

// zeroArray writes zeros to every entry of array m (perCPU: every CPU's
// copy): through its memory where it is mapped, in batches otherwise.
func zeroArray(m *ebpf.Map, perCPU bool) error {
	if !perCPU && m.Flags()&unix.BPF_F_MMAPABLE != 0 {
		mem, err := mapArray(m, unix.PROT_READ|unix.PROT_WRITE)
		if err != nil {
			return fmt.Errorf("map its memory: %w", err)
		}
		clear(mem)
		return unix.Munmap(mem)
	}
	cpus := 1
	if perCPU {
		n, err := ebpf.PossibleCPU()
		if err != nil {
			return err
		}
		cpus = n
	}
	if int(m.ValueSize()) > len(zeros) {
		return fmt.Errorf("value of %d bytes", m.ValueSize())
	}
	zero := zeros[:m.ValueSize()]
	const batch = 4096
	total := m.MaxEntries()
	size := min(total, batch)
	keys := make([]uint32, size)
	// Each value is a []byte: cilium copies those as they are (a value
	// of another type is marshalled field by field).
	vals := make([][]byte, int(size)*cpus)
	for i := range vals {
		vals[i] = zero
	}
	for start := uint32(0); start < total; start += size {
		n := min(size, total-start)
		for i := range n {
			keys[i] = start + i
		}
		var err error
		if perCPU {
			_, err = m.BatchUpdate(keys[:n], vals[:int(n)*cpus], nil)
		} else {
			_, err = m.BatchUpdate(keys[:n], byteArrays(int(n), m.ValueSize()), nil)
		}
		if err == nil {
			continue
		} else if !errors.Is(err, ebpf.ErrNotSupported) {
			return err
		}
		for i := range n {
			var val any = zero
			if perCPU {
				val = vals[:cpus]
			}
			if err := m.Update(start+i, val, ebpf.UpdateExist); err != nil {
				return err
			}
		}
	}
	return nil
}
