//go:build linux

package kernel

import (
	"slices"
	"testing"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/leakscope/leakscope/internal/testutil"
)

// forEachValue reads an array through its memory where it is mapped, and
// by batch lookups where it is not, the same values in the same order,
// each a copy of its own.
func TestForEachValueReadsMappedArrays(t *testing.T) {
	testutil.RequireBPF(t)
	const n = 1000 // not a whole number of pages of 256-byte values
	for _, flags := range []uint32{unix.BPF_F_MMAPABLE, 0} {
		m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 256, MaxEntries: n, Flags: flags})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		var want []leakAllocBucket
		for i := range uint32(n) {
			var b leakAllocBucket
			if i%3 == 0 {
				b.Slot[i%4].Addr = uint64(i)<<4 | 0x7f0000000000
				b.Slot[i%4].Info.SizeBytes = uint64(i) + 1
			}
			if err := m.Put(i, b); err != nil {
				t.Fatal(err)
			}
			want = append(want, b)
		}
		if got := mappable(m, unsafe.Sizeof(leakAllocBucket{})); got != (flags != 0) {
			t.Fatalf("flags %#x: read through its memory: %v", flags, got)
		}
		var vals []leakAllocBucket
		if err := forEachValue(m, func(b *leakAllocBucket) { vals = append(vals, *b) }); err != nil {
			t.Fatalf("flags %#x: %v", flags, err)
		}
		if !slices.Equal(vals, want) {
			t.Errorf("flags %#x: %d values read, not the %d put", flags, len(vals), len(want))
		}
	}
	// alloc_buckets as Load makes it is read through its memory.
	o, err := Load(Config{MaxAllocations: 1 << 12, MaxSites: 1 << 10, MaxStacks: 1 << 10, MaxUnwindRows: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if !mappable(o.objs.AllocBuckets, unsafe.Sizeof(leakAllocBucket{})) {
		t.Errorf("alloc_buckets (flags %#x, value %d B) is not read through its memory", o.objs.AllocBuckets.Flags(), o.objs.AllocBuckets.ValueSize())
	}
}
