package jvm

import (
	"debug/elf"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Methods names a JVM's Method* pointers, as the kernel records them for
// interpreted frames, by reading HotSpot's metadata from the target's
// memory with the layout its VMStructs tables describe:
// Method → ConstMethod → ConstantPool → the holder class's name, and the
// method's name from the constant pool. A Methods is not safe for
// concurrent use.
type Methods struct {
	r     reader
	off   methodLayout
	names map[uint64]string
	code  Code
}

// Code describes a JVM's code cache for the kernel's stack walk.
type Code struct {
	Interpreter [2]uint64 // the template interpreter, [start, end)
	Cache       [2]uint64 // the whole code cache, [start, end)
	Heaps       []CodeHeap
}

// CodeHeap is one of the code cache's heaps (HotSpot's CodeHeap): the
// code blob holding a pc is found with its segment map.
type CodeHeap struct {
	Low, High       uint64 // reserved segments, [Low, High)
	Segmap          uint64 // one byte per segment
	Log2Segment     uint32
	BlobOffset      uint32 // sizeof(HeapBlock): the CodeBlob follows it
	FrameSizeOffset uint32 // CodeBlob::_frame_size, in words
}

// maxCodeHeaps bounds the heaps read: HotSpot has at most three.
const maxCodeHeaps = 4

// methodLayout holds the offsets and sizes Methods reads with.
type methodLayout struct {
	constMethod, constants, nameIndex, poolHolder, poolLength uint64
	poolSize, klassName, symLength, symBody                   uint64
	interpCode, stubBuffer, bufferLimit                       uint64
	heaps, lowBound, highBound, arrayLen, arrayData           uint64
	heapMemory, heapSegmap, heapLog2, spaceLow, spaceHigh     uint64
	frameSize, heapBlock                                      uint64
}

// layoutFields are the fields (and one size) Methods needs, by the name
// gHotSpotVMStructs gives them.
var layoutFields = []struct {
	name string
	dst  func(*methodLayout) *uint64
}{
	{"Method::_constMethod", func(l *methodLayout) *uint64 { return &l.constMethod }},
	{"ConstMethod::_constants", func(l *methodLayout) *uint64 { return &l.constants }},
	{"ConstMethod::_name_index", func(l *methodLayout) *uint64 { return &l.nameIndex }},
	{"ConstantPool::_pool_holder", func(l *methodLayout) *uint64 { return &l.poolHolder }},
	{"ConstantPool::_length", func(l *methodLayout) *uint64 { return &l.poolLength }},
	{"Klass::_name", func(l *methodLayout) *uint64 { return &l.klassName }},
	{"Symbol::_length", func(l *methodLayout) *uint64 { return &l.symLength }},
	{"Symbol::_body", func(l *methodLayout) *uint64 { return &l.symBody }},
	{"AbstractInterpreter::_code", func(l *methodLayout) *uint64 { return &l.interpCode }},
	{"StubQueue::_stub_buffer", func(l *methodLayout) *uint64 { return &l.stubBuffer }},
	{"StubQueue::_buffer_limit", func(l *methodLayout) *uint64 { return &l.bufferLimit }},
	{"CodeCache::_heaps", func(l *methodLayout) *uint64 { return &l.heaps }},
	{"CodeCache::_low_bound", func(l *methodLayout) *uint64 { return &l.lowBound }},
	{"CodeCache::_high_bound", func(l *methodLayout) *uint64 { return &l.highBound }},
	{"GrowableArrayBase::_len", func(l *methodLayout) *uint64 { return &l.arrayLen }},
	{"GrowableArray<int>::_data", func(l *methodLayout) *uint64 { return &l.arrayData }},
	{"CodeHeap::_memory", func(l *methodLayout) *uint64 { return &l.heapMemory }},
	{"CodeHeap::_segmap", func(l *methodLayout) *uint64 { return &l.heapSegmap }},
	{"CodeHeap::_log2_segment_size", func(l *methodLayout) *uint64 { return &l.heapLog2 }},
	{"VirtualSpace::_low", func(l *methodLayout) *uint64 { return &l.spaceLow }},
	{"VirtualSpace::_high_boundary", func(l *methodLayout) *uint64 { return &l.spaceHigh }},
	{"CodeBlob::_frame_size", func(l *methodLayout) *uint64 { return &l.frameSize }},
}

// NewMethods reads the VMStructs tables of the JVM whose memory is mem and
// whose libjvm.so, at path (readable by leakscope), is loaded with bias,
// and finds its interpreter. It fails while the JVM is still starting.
func NewMethods(mem Memory, path string, bias uint64) (*Methods, error) {
	syms, err := VMSymbols(path)
	if err != nil {
		return nil, err
	}
	vs, err := ReadVMStructs(mem, syms, bias)
	if err != nil {
		return nil, err
	}
	return newMethods(mem, vs)
}

func newMethods(mem Memory, vs *VMStructs) (*Methods, error) {
	m := &Methods{r: reader{mem}, names: map[uint64]string{}}
	for _, f := range layoutFields {
		v, ok := vs.Fields[f.name]
		if !ok {
			return nil, fmt.Errorf("this JVM's VMStructs do not describe %s", f.name)
		}
		if v.Static {
			*f.dst(&m.off) = v.Address
		} else {
			*f.dst(&m.off) = v.Offset
		}
	}
	size, ok := vs.Sizes["ConstantPool"]
	if !ok || size == 0 {
		return nil, errors.New("this JVM's VMStructs do not give the size of ConstantPool")
	}
	m.off.poolSize = size
	if m.off.heapBlock = vs.Sizes["HeapBlock"]; m.off.heapBlock == 0 {
		return nil, errors.New("this JVM's VMStructs do not give the size of HeapBlock")
	}
	code, err := m.r.u64(m.off.interpCode)
	if err != nil {
		return nil, fmt.Errorf("read the interpreter's code queue: %w", err)
	}
	if code == 0 {
		return nil, errors.New("the JVM has not generated its interpreter yet (still starting?)")
	}
	buf, err := m.r.u64(code + m.off.stubBuffer)
	if err != nil {
		return nil, fmt.Errorf("read the interpreter's code: %w", err)
	}
	limit, err := m.r.u32(code + m.off.bufferLimit)
	if err != nil {
		return nil, fmt.Errorf("read the interpreter's code size: %w", err)
	}
	if buf == 0 || limit == 0 || limit > 1<<30 {
		return nil, fmt.Errorf("implausible interpreter code at %#x, %d bytes", buf, limit)
	}
	m.code.Interpreter = [2]uint64{buf, buf + uint64(limit)}
	if err := m.readHeaps(); err != nil {
		return nil, err
	}
	return m, nil
}

// readHeaps reads the code cache's bounds and heaps; they are reserved
// when the JVM starts and do not move.
func (m *Methods) readHeaps() error {
	lo, err := m.r.u64(m.off.lowBound)
	if err != nil {
		return fmt.Errorf("read the code cache's bounds: %w", err)
	}
	hi, err := m.r.u64(m.off.highBound)
	if err != nil {
		return fmt.Errorf("read the code cache's bounds: %w", err)
	}
	if lo == 0 || hi <= lo {
		return fmt.Errorf("implausible code cache [%#x, %#x)", lo, hi)
	}
	m.code.Cache = [2]uint64{lo, hi}
	arr, err := m.r.u64(m.off.heaps)
	if err != nil || arr == 0 {
		return fmt.Errorf("read the code heaps: %v", err)
	}
	n, err := m.r.u32(arr + m.off.arrayLen)
	if err != nil {
		return fmt.Errorf("read the code heaps: %w", err)
	}
	data, err := m.r.u64(arr + m.off.arrayData)
	if err != nil {
		return fmt.Errorf("read the code heaps: %w", err)
	}
	if n == 0 || n > maxCodeHeaps {
		return fmt.Errorf("implausible number of code heaps %d", n)
	}
	for i := uint64(0); i < uint64(n); i++ {
		heap, err := m.r.u64(data + 8*i)
		if err != nil {
			return fmt.Errorf("read code heap %d: %w", i, err)
		}
		var h CodeHeap
		var log2 uint32
		for _, f := range []struct {
			dst  *uint64
			addr uint64
		}{
			{&h.Low, heap + m.off.heapMemory + m.off.spaceLow},
			{&h.High, heap + m.off.heapMemory + m.off.spaceHigh},
			{&h.Segmap, heap + m.off.heapSegmap + m.off.spaceLow},
		} {
			if *f.dst, err = m.r.u64(f.addr); err != nil {
				return fmt.Errorf("read code heap %d: %w", i, err)
			}
		}
		if log2, err = m.r.u32(heap + m.off.heapLog2); err != nil {
			return fmt.Errorf("read code heap %d: %w", i, err)
		}
		if h.Low < lo || h.High > hi || h.Low >= h.High || h.Segmap == 0 || log2 < 4 || log2 > 16 {
			return fmt.Errorf("implausible code heap %d: [%#x, %#x), segment map %#x, 2^%d-byte segments", i, h.Low, h.High, h.Segmap, log2)
		}
		h.Log2Segment = log2
		h.BlobOffset = uint32(m.off.heapBlock)
		h.FrameSizeOffset = uint32(m.off.frameSize)
		m.code.Heaps = append(m.code.Heaps, h)
	}
	return nil
}

// Code returns the JVM's code cache layout.
func (m *Methods) Code() Code { return m.code }

// Interpreter returns the template interpreter's code, [start, end): a
// return address there is an interpreted Java frame.
func (m *Methods) Interpreter() (start, end uint64) {
	return m.code.Interpreter[0], m.code.Interpreter[1]
}

// Name returns "package.Class.method" for the Method* ptr, as the perf map
// names compiled methods. Names are cached: metadata is not moved, and is
// freed only when its class is unloaded.
func (m *Methods) Name(ptr uint64) (string, error) {
	if n, ok := m.names[ptr]; ok {
		return n, nil
	}
	n, err := m.name(ptr)
	if err != nil {
		return "", fmt.Errorf("Method* %#x: %w", ptr, err)
	}
	m.names[ptr] = n
	return n, nil
}

func (m *Methods) name(ptr uint64) (string, error) {
	if ptr == 0 {
		return "", errors.New("null")
	}
	cm, err := m.r.u64(ptr + m.off.constMethod)
	if err != nil {
		return "", err
	}
	cp, err := m.r.u64(cm + m.off.constants)
	if err != nil {
		return "", err
	}
	idx, err := m.r.u16(cm + m.off.nameIndex)
	if err != nil {
		return "", err
	}
	n, err := m.r.u32(cp + m.off.poolLength)
	if err != nil {
		return "", err
	}
	if idx == 0 || uint32(idx) >= n {
		return "", fmt.Errorf("name index %d outside its constant pool of %d", idx, n)
	}
	nameSym, err := m.r.u64(cp + m.off.poolSize + uint64(idx)*8)
	if err != nil {
		return "", err
	}
	method, err := m.symbol(nameSym)
	if err != nil {
		return "", fmt.Errorf("method name: %w", err)
	}
	holder, err := m.r.u64(cp + m.off.poolHolder)
	if err != nil {
		return "", err
	}
	klassSym, err := m.r.u64(holder + m.off.klassName)
	if err != nil {
		return "", err
	}
	class, err := m.symbol(klassSym)
	if err != nil {
		return "", fmt.Errorf("class name: %w", err)
	}
	return strings.ReplaceAll(class, "/", ".") + "." + method, nil
}

// symbol reads a HotSpot Symbol: a u2 length and that many bytes of
// modified UTF-8, which for names is plain UTF-8 without NUL.
func (m *Methods) symbol(ptr uint64) (string, error) {
	if ptr == 0 {
		return "", errors.New("null symbol")
	}
	n, err := m.r.u16(ptr + m.off.symLength)
	if err != nil {
		return "", err
	}
	if n == 0 {
		return "", errors.New("empty symbol")
	}
	b, err := m.r.read(ptr+m.off.symBody, int(n))
	if err != nil {
		return "", err
	}
	if !utf8.Valid(b) || strings.ContainsAny(string(b), "\x00;[") {
		return "", fmt.Errorf("symbol at %#x is not a name", ptr)
	}
	return string(b), nil
}

// LoadBias returns the load bias of the ELF object at path mapped with
// file offset off at start.
func LoadBias(path string, start, off uint64) (uint64, error) {
	f, err := elf.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && off >= p.Off && off < p.Off+p.Filesz {
			return start - (p.Vaddr + off - p.Off), nil
		}
	}
	return 0, fmt.Errorf("%s: no loadable segment at file offset %#x", path, off)
}
