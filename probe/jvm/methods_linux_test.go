package jvm

import (
	"encoding/binary"
	"fmt"
	"io"
	"testing"
)

// fakeMemory is a process's memory from base on: a JVM's tables and
// metadata laid out by vmImage, as OpenJDK 17 on x86-64 lays them out.
type fakeMemory struct {
	base uint64
	b    []byte
}

func (m *fakeMemory) ReadAt(p []byte, off int64) (int, error) {
	o := uint64(off)
	if o < m.base || o-m.base >= uint64(len(m.b)) {
		return 0, io.EOF
	}
	n := copy(p, m.b[o-m.base:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// vmImage builds a fake JVM: its exported symbols (file addresses, bias 0)
// and memory holding the VMStructs tables, one Method* (the returned
// method) of class a/b/C named "leak", an interpreter and one code heap.
type vmImage struct {
	mem  *fakeMemory
	syms map[string]uint64
	next uint64
	// A code heap of 16 segments of 128 bytes: an nmethod (of the
	// method, with inner inlined at one call) in the first block, a stub
	// in the second.
	heapLow, segmap, nmethodCode, stubCode uint64
}

const fakeBase = 0x10000

func (v *vmImage) alloc(n uint64) uint64 {
	a := v.next
	v.next += (n + 7) &^ 7
	if need := v.next - fakeBase; need > uint64(len(v.mem.b)) {
		v.mem.b = append(v.mem.b, make([]byte, need-uint64(len(v.mem.b)))...)
	}
	return a
}

func (v *vmImage) put64(a, x uint64) { binary.LittleEndian.PutUint64(v.mem.b[a-fakeBase:], x) }
func (v *vmImage) put32(a uint64, x uint32) {
	binary.LittleEndian.PutUint32(v.mem.b[a-fakeBase:], x)
}
func (v *vmImage) put16(a uint64, x uint16) {
	binary.LittleEndian.PutUint16(v.mem.b[a-fakeBase:], x)
}

func (v *vmImage) cstring(s string) uint64 {
	a := v.alloc(uint64(len(s)) + 1)
	copy(v.mem.b[a-fakeBase:], s)
	return a
}

// symbol makes a HotSpot Symbol: u2 length at 4, bytes at 6.
func (v *vmImage) symbol(s string) uint64 {
	a := v.alloc(6 + uint64(len(s)))
	v.put16(a+4, uint16(len(s)))
	copy(v.mem.b[a+6-fakeBase:], s)
	return a
}

type fakeField struct {
	typ, name string
	static    bool
	val       uint64 // offset, or address of a static
}

func newVMImage(t testing.TB) (*vmImage, uint64) {
	v := &vmImage{mem: &fakeMemory{base: fakeBase}, syms: map[string]uint64{}, next: fakeBase}
	for _, name := range vmSymbols {
		v.syms[name] = v.alloc(8)
	}
	// Statics the tables point at.
	interpCode, heaps, lowBound, highBound := v.alloc(8), v.alloc(8), v.alloc(8), v.alloc(8)
	fields := []fakeField{
		{"Method", "_constMethod", false, 8},
		{"ConstMethod", "_constants", false, 8},
		{"ConstMethod", "_name_index", false, 34},
		{"ConstantPool", "_pool_holder", false, 24},
		{"ConstantPool", "_length", false, 60},
		{"Klass", "_name", false, 24},
		{"Symbol", "_length", false, 4},
		{"Symbol", "_body", false, 6},
		{"AbstractInterpreter", "_code", true, interpCode},
		{"StubQueue", "_stub_buffer", false, 8},
		{"StubQueue", "_buffer_limit", false, 20},
		{"CodeCache", "_heaps", true, heaps},
		{"CodeCache", "_low_bound", true, lowBound},
		{"CodeCache", "_high_bound", true, highBound},
		{"GrowableArrayBase", "_len", false, 0},
		{"GrowableArray<int>", "_data", false, 8},
		{"CodeHeap", "_memory", false, 8},
		{"CodeHeap", "_segmap", false, 120},
		{"CodeHeap", "_log2_segment_size", false, 256},
		{"VirtualSpace", "_low", false, 16},
		{"VirtualSpace", "_high_boundary", false, 8},
		{"CodeBlob", "_frame_size", false, 28},
		{"CodeBlob", "_code_begin", false, 32},
		{"CodeBlob", "_code_end", false, 40},
		{"CodeBlob", "_name", false, 96},
		{"CompiledMethod", "_method", false, 112},
		{"CompiledMethod", "_scopes_data_begin", false, 120},
		{"nmethod", "_metadata_offset", false, 260},
		{"nmethod", "_scopes_pcs_offset", false, 268},
		{"nmethod", "_dependencies_offset", false, 272},
		{"PcDesc", "_pc_offset", false, 0},
		{"PcDesc", "_scope_decode_offset", false, 4},
	}
	const stride = 48
	structs := v.alloc(stride * uint64(len(fields)+1))
	for i, f := range fields {
		e := structs + uint64(i)*stride
		v.put64(e+0, v.cstring(f.typ))
		v.put64(e+8, v.cstring(f.name))
		if f.static {
			v.put32(e+24, 1)
			v.put64(e+40, f.val)
		} else {
			v.put64(e+32, f.val)
		}
	}
	sizes := map[string]uint64{"ConstantPool": 72, "HeapBlock": 16, "PcDesc": 16}
	types := v.alloc(stride * uint64(len(sizes)+1))
	i := uint64(0)
	for name, size := range sizes {
		e := types + i*stride
		v.put64(e, v.cstring(name))
		v.put64(e+32, size)
		i++
	}
	for name, val := range map[string]uint64{
		"gHotSpotVMStructs": structs, "gHotSpotVMStructEntryArrayStride": stride,
		"gHotSpotVMStructEntryTypeNameOffset": 0, "gHotSpotVMStructEntryFieldNameOffset": 8,
		"gHotSpotVMStructEntryIsStaticOffset": 24, "gHotSpotVMStructEntryOffsetOffset": 32,
		"gHotSpotVMStructEntryAddressOffset": 40,
		"gHotSpotVMTypes":                    types, "gHotSpotVMTypeEntryArrayStride": stride,
		"gHotSpotVMTypeEntryTypeNameOffset": 0, "gHotSpotVMTypeEntrySizeOffset": 32,
	} {
		v.put64(v.syms[name], val)
	}
	// The interpreter's code and one code heap.
	sq := v.alloc(32)
	v.put64(interpCode, sq)
	v.put64(sq+8, 0x7f0000001000)
	v.put32(sq+20, 0x2000)
	v.heapLow = v.alloc(16 * 128)
	v.segmap = v.alloc(16)
	for i := uint64(0); i < 16; i++ {
		v.mem.b[v.segmap+i-fakeBase] = byte(i % 8) // two blocks of 8 segments
	}
	v.put64(lowBound, v.heapLow)
	v.put64(highBound, v.heapLow+16*128)
	heap := v.alloc(264)
	v.put64(heap+8+16, v.heapLow)
	v.put64(heap+8+8, v.heapLow+16*128)
	v.put64(heap+120+16, v.segmap)
	v.put32(heap+256, 7)
	data := v.alloc(8)
	v.put64(data, heap)
	ga := v.alloc(16)
	v.put32(ga, 1)
	v.put64(ga+8, data)
	v.put64(heaps, ga)
	// Method "leak" of class a/b/C: Method → ConstMethod → ConstantPool.
	klass := v.alloc(32)
	v.put64(klass+24, v.symbol("a/b/C"))
	cp := v.alloc(72 + 4*8)
	v.put64(cp+24, klass)
	v.put32(cp+60, 4)
	v.put64(cp+72+2*8, v.symbol("leak"))
	v.put64(cp+72+3*8, v.symbol("inner"))
	newMethod := func(nameIndex uint16) uint64 {
		cm := v.alloc(48)
		v.put64(cm+8, cp)
		v.put16(cm+34, nameIndex)
		method := v.alloc(88)
		v.put64(method+8, cm)
		return method
	}
	method, inner := newMethod(2), newMethod(3)

	// The nmethod: code at +0x200, metadata {inner, method} at +0x340,
	// PcDescs at +0x380: the call returning to +0x10 has scope 1 (inner,
	// sent from scope 4, the method itself); the one at +0x20 scope 4.
	blob := v.heapLow + 16
	v.nmethodCode = blob + 0x200
	v.put64(blob+32, v.nmethodCode)
	v.put64(blob+40, v.nmethodCode+0x100)
	v.put64(blob+96, v.cstring("nmethod"))
	v.put64(blob+112, method)
	scopes := v.alloc(8)
	copy(v.mem.b[scopes-fakeBase:], []byte{0, 4, 1, 5, 0, 2, 7})
	v.put64(blob+120, scopes)
	v.put32(blob+260, 0x340)
	v.put64(blob+0x340, inner)
	v.put64(blob+0x348, method)
	v.put32(blob+268, 0x380)
	v.put32(blob+272, 0x3a0)
	v.put32(blob+0x380, 0x10)
	v.put32(blob+0x384, 1)
	v.put32(blob+0x390, 0x20)
	v.put32(blob+0x394, 4)
	// The stub, in the second block.
	stub := v.heapLow + 8*128 + 16
	v.stubCode = stub + 0x40
	v.put64(stub+32, v.stubCode)
	v.put64(stub+40, v.stubCode+0x80)
	v.put64(stub+96, v.cstring("StubRoutines (1)"))
	return v, method
}

func TestMethodsFromVMStructs(t *testing.T) {
	v, method := newVMImage(t)
	m, err := NewMethods(v.mem, "", 0)
	if err == nil {
		t.Fatal("NewMethods read an ELF object at an empty path")
	}
	vs, err := ReadVMStructs(v.mem, v.syms, 0)
	if err != nil {
		t.Fatal(err)
	}
	if m, err = newMethods(v.mem, vs); err != nil {
		t.Fatal(err)
	}
	if name, err := m.Name(method); err != nil || name != "a.b.C.leak" {
		t.Errorf("Name = %q, %v; want a.b.C.leak", name, err)
	}
	c := m.Code()
	want := fmt.Sprint(Code{
		Interpreter: [2]uint64{0x7f0000001000, 0x7f0000003000},
		Cache:       [2]uint64{v.heapLow, v.heapLow + 16*128},
		Heaps:       []CodeHeap{{Low: v.heapLow, High: v.heapLow + 16*128, Segmap: v.segmap, Log2Segment: 7, BlobOffset: 16, FrameSizeOffset: 28}},
	})
	if fmt.Sprint(c) != want {
		t.Errorf("Code = %v\nwant %v", c, want)
	}
	// The fake image has no line tables: names only.
	for _, tc := range []struct {
		pc   uint64
		want string // the frame; "" for an error
	}{
		{v.nmethodCode + 0x10, fmt.Sprint(Frame{Name: "a.b.C.leak", Kind: KindMethod, Chained: true, Inlined: []Method{{Name: "a.b.C.inner"}}})},
		{v.nmethodCode + 0x20, fmt.Sprint(Frame{Name: "a.b.C.leak", Kind: KindMethod, Chained: true})},
		{v.nmethodCode + 0x30, fmt.Sprint(Frame{Name: "a.b.C.leak", Kind: KindMethod, Chained: true})}, // no PcDesc: no inlining
		{v.stubCode + 0x7f, fmt.Sprint(Frame{Name: "StubRoutines (1)", Kind: KindStub, Chained: true})},
		{v.stubCode + 0x80, ""},     // past the stub's code
		{v.heapLow + 16*128, ""},    // past the heap
		{v.heapLow + 3*128 + 5, ""}, // in the nmethod's block, before its code
	} {
		f, err := m.Blob(tc.pc)
		got := fmt.Sprint(f)
		if err != nil {
			got = ""
		}
		if got != tc.want {
			t.Errorf("Blob(%#x) = %q (%v), want %q", tc.pc, got, err, tc.want)
		}
	}
	// Garbage where a Method* should be: an error, never a name.
	for _, bad := range []uint64{0, method + 8, 0xdead0000} {
		if name, err := m.Name(bad); err == nil {
			t.Errorf("Name(%#x) = %q, want an error", bad, name)
		}
	}
	// A JVM still starting: the entry strides are not filled in yet.
	v.put64(v.syms["gHotSpotVMStructEntryArrayStride"], 0)
	if _, err := ReadVMStructs(v.mem, v.syms, 0); err == nil {
		t.Error("tables of a starting JVM accepted")
	}
}

// FuzzMethods reads VMStructs tables and a method from corrupted memory: it
// must fail or answer, never panic or loop.
func FuzzMethods(f *testing.F) {
	v, method := newVMImage(f)
	f.Add(v.mem.b, 0, byte(0))
	f.Add(v.mem.b, 8, byte(0xff))
	f.Fuzz(func(t *testing.T, b []byte, at int, x byte) {
		mem := &fakeMemory{base: fakeBase, b: append([]byte(nil), b...)}
		if len(mem.b) > 0 {
			mem.b[uint(at)%uint(len(mem.b))] = x
		}
		vs, err := ReadVMStructs(mem, v.syms, 0)
		if err != nil {
			return
		}
		m, err := newMethods(mem, vs)
		if err != nil {
			return
		}
		m.Name(method)
		m.At(method, 3)
		m.Blob(v.nmethodCode + 0x10)
		m.Blob(v.stubCode)
	})
}

// HotSpot's UNSIGNED5 ints: bytes below 192 end a number; each further byte
// counts 64 times the one before.
func TestCompressedStream(t *testing.T) {
	for _, tc := range []struct {
		b    []byte
		x    byte // 1: JDK 21 and later, the zero byte excluded
		want int32
		err  bool
	}{
		{[]byte{6}, 1, 5, false},
		{[]byte{233, 13}, 1, 1000, false},
		{[]byte{0}, 1, 0, true}, // excluded
		{[]byte{5}, 0, 5, false},
		{[]byte{191}, 0, 191, false},
		{[]byte{200, 0}, 0, 200, false},
		{[]byte{232, 12}, 0, 1000, false},
		{[]byte{192, 192, 192, 192, 1}, 0, 192 + 192<<6 + 192<<12 + 192<<18 + 1<<24, false}, // five bytes at most
		{[]byte{232}, 0, 0, true},
		{nil, 0, 0, true},
	} {
		c := compressedStream{b: tc.b, x: tc.x}
		if got := c.int(); got != tc.want || c.err != tc.err {
			t.Errorf("%v: %d (err %v), want %d (err %v)", tc.b, got, c.err, tc.want, tc.err)
		}
	}
}

// lineFromBCI on tables as HotSpot's CompressedLineNumberWriteStream writes
// them: one byte per pair (bci delta << 3 | line delta) when the deltas
// are small, else 0xFF and two sign-folded UNSIGNED5 ints.
func TestLineFromBCI(t *testing.T) {
	// (bci 0, line 10) escaped, (4, 11), (9, 13), (30, 100) escaped, end.
	table := []byte{0xff, 0, 20, 4<<3 | 1, 5<<3 | 2, 0xff, 42, 174, 0}
	for bci, want := range map[int]int{0: 10, 3: 10, 4: 11, 8: 11, 9: 13, 29: 13, 30: 100, 31: 100} {
		if got := lineFromBCI(table, bci, 0); got != want {
			t.Errorf("bci %d: line %d, want %d", bci, got, want)
		}
	}
	if got := lineFromBCI([]byte{0xff, 0xc0}, 0, 0); got != 0 {
		t.Errorf("cut table: line %d, want 0", got)
	}
	if got := signed(3); got != -2 {
		t.Errorf("signed(3) = %d, want -2", got)
	}
}
