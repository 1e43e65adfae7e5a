//go:build linux

package kernel

import (
	"errors"
	"os"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// forEach calls fn for every entry of a hash map: in batches of 4096 where
// the kernel has batch lookups (one syscall a batch, where iterating costs
// two an entry: 0.45 s for 100k sites), one entry at a time otherwise.
// Entries the BPF side adds or removes meanwhile may or may not be seen.
func forEach[K, V any](m *ebpf.Map, fn func(*K, *V)) error {
	keys := make([]K, 4096)
	vals := make([]V, 4096)
	var cursor ebpf.MapBatchCursor
	for {
		n, err := m.BatchLookup(&cursor, keys, vals, nil)
		for i := 0; i < n; i++ {
			fn(&keys[i], &vals[i])
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil
		}
		if errors.Is(err, ebpf.ErrNotSupported) && n == 0 {
			break
		}
		if err != nil {
			return err
		}
	}
	var k K
	var v V
	it := m.Iterate()
	for it.Next(&k, &v) {
		fn(&k, &v)
	}
	return it.Err()
}

// forEachValue calls fn with a copy of every value of array m, read
// through its memory where it is mapped (BPF_F_MMAPABLE, an array whose
// values are laid out as V), by forEach otherwise: a batch lookup of
// alloc_buckets' 4 MiB took ~5 ms, a read of its memory ~0.7 ms. The
// mapping is made and dropped at each call (mapArray). Each value is
// copied whole before fn sees it, as a lookup copies it, while the
// programs may be writing it.
func forEachValue[V any](m *ebpf.Map, fn func(*V)) error {
	var v V
	if !mappable(m, unsafe.Sizeof(v)) {
		return forEach(m, func(_ *uint32, v *V) { fn(v) })
	}
	mem, err := mapArray(m, unix.PROT_READ)
	if err != nil {
		// No room for the mapping (an address-space limit): the
		// lookups read the same values, slower.
		return forEach(m, func(_ *uint32, v *V) { fn(v) })
	}
	defer unix.Munmap(mem)
	vs := unsafe.Slice((*V)(unsafe.Pointer(&mem[0])), m.MaxEntries())
	for i := range vs {
		v = vs[i]
		fn(&v)
	}
	return nil
}

// mappable reports whether array m's memory can be read as values of
// size bytes: it is mapped (BPF_F_MMAPABLE) and lays its values out so.
func mappable(m *ebpf.Map, size uintptr) bool {
	return m.Type() == ebpf.Array && m.Flags()&unix.BPF_F_MMAPABLE != 0 && uint64(size) == valueStride(m) && m.MaxEntries() > 0
}

// valueStride is how far apart array m's values lie in its memory.
func valueStride(m *ebpf.Map) uint64 { return (uint64(m.ValueSize()) + 7) &^ 7 }

// mapArray maps the memory of array m (BPF_F_MMAPABLE) with prot, for
// the caller to unmap when done: a mapping kept (cilium's Map.Memory)
// would hold the map's memory past its Close.
func mapArray(m *ebpf.Map, prot int) ([]byte, error) {
	page := uint64(os.Getpagesize())
	size := (valueStride(m)*uint64(m.MaxEntries()) + page - 1) &^ (page - 1)
	return unix.Mmap(m.FD(), 0, int(size), prot, unix.MAP_SHARED)
}
