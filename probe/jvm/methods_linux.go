package jvm

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/leakscope/leakscope/probe/procfs"
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
	blobs map[uint64]string // CodeBlob::_name pointer → the name
	lines lineLayout
	where map[methodBCI]Method
}

// Method is a Java method at a bytecode: named, and placed in its source
// file when the class has a line number table.
type Method struct {
	Name string // "package.Class.method"
	File string // the class's source file ("KafkaRecovery.java"), "" if unknown
	Line int    // 0 if unknown
}

type methodBCI struct {
	method uint64
	bci    int
}

// lineLayout is what reading line numbers takes; ok is false when this
// JVM's VMStructs lack part of it (names still work).
type lineLayout struct {
	ok                                  bool
	flags, codeSize, sourceFile, cmSize uint64
	hasLineTable                        uint16
	invocationEntryBCI                  int
}

// Code describes a JVM's code cache for the kernel's stack walk.
type Code struct {
	Interpreter [2]uint64 // the template interpreter, [start, end)
	Cache       [2]uint64 // the whole code cache, [start, end)
	Heaps       []CodeHeap
	// Where a Method's bytecodes start: *(Method* + ConstMethodOffset) +
	// ConstMethodSize; both 0 when line numbers cannot be read.
	ConstMethodOffset, ConstMethodSize uint32
}

// CodeHeap is one of the code cache's heaps (HotSpot's CodeHeap): the
// code blob holding a pc is found with its segment map.
type CodeHeap struct {
	Low, High       uint64 // reserved segments, [Low, High)
	Segmap          uint64 // one byte per segment
	Log2Segment     uint32
	BlobOffset      uint32 // sizeof(HeapBlock): the CodeBlob follows it
	FrameSizeOffset uint32 // CodeBlob::_frame_size, in words
	// CompileIDOffset is nmethod::_compile_id (0: unknown): the kernel
	// keeps a return address's blob while the id there is the same.
	CompileIDOffset uint32
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
	codeBegin, codeEnd, blobName, cmMethod, scopesData        uint64
	metadataOff, scopesPcsOff, dependenciesOff, pcOffset      uint64
	scopeOffset, pcDescSize, compileID                        uint64
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
	{"CodeBlob::_code_begin", func(l *methodLayout) *uint64 { return &l.codeBegin }},
	{"CodeBlob::_code_end", func(l *methodLayout) *uint64 { return &l.codeEnd }},
	{"CodeBlob::_name", func(l *methodLayout) *uint64 { return &l.blobName }},
	{"CompiledMethod::_method", func(l *methodLayout) *uint64 { return &l.cmMethod }},
	{"CompiledMethod::_scopes_data_begin", func(l *methodLayout) *uint64 { return &l.scopesData }},
	{"nmethod::_metadata_offset", func(l *methodLayout) *uint64 { return &l.metadataOff }},
	{"nmethod::_scopes_pcs_offset", func(l *methodLayout) *uint64 { return &l.scopesPcsOff }},
	{"nmethod::_dependencies_offset", func(l *methodLayout) *uint64 { return &l.dependenciesOff }},
	{"PcDesc::_pc_offset", func(l *methodLayout) *uint64 { return &l.pcOffset }},
	{"PcDesc::_scope_decode_offset", func(l *methodLayout) *uint64 { return &l.scopeOffset }},
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
	m := &Methods{r: reader{mem}, names: map[uint64]string{}, blobs: map[uint64]string{}, where: map[methodBCI]Method{}}
	m.lines = linesLayout(vs)
	if f, ok := vs.Fields["nmethod::_compile_id"]; ok && !f.Static && f.Offset < 1<<16 {
		m.off.compileID = f.Offset
	}
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
	size := vs.Sizes["ConstantPool"]
	m.off.poolSize = size
	m.off.heapBlock = vs.Sizes["HeapBlock"]
	m.off.pcDescSize = vs.Sizes["PcDesc"]
	// Sizes are read from the target: bound them before reading with them.
	for _, c := range []struct {
		name    string
		v, most uint64
	}{{"ConstantPool", size, 4096}, {"HeapBlock", m.off.heapBlock, 64}, {"PcDesc", m.off.pcDescSize, 64}} {
		if c.v == 0 || c.v > c.most {
			return nil, fmt.Errorf("this JVM's VMStructs give an implausible size of %s (%d)", c.name, c.v)
		}
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
	if m.lines.ok {
		m.code.ConstMethodOffset, m.code.ConstMethodSize = uint32(m.off.constMethod), uint32(m.lines.cmSize)
	}
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
		h.CompileIDOffset = uint32(m.off.compileID)
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
	r, err := procfs.OpenFile(nil, path, procfs.ObjectLimits)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	f, err := elf.NewFile(r)
	if err != nil {
		return 0, fmt.Errorf("parse elf %s: %w", path, err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && off >= p.Off && off < p.Off+p.Filesz {
			return start - (p.Vaddr + off - p.Off), nil
		}
	}
	return 0, fmt.Errorf("%s: no loadable segment at file offset %#x", path, off)
}

// Limits on what one code blob may hold; anything larger is corrupt.
const (
	maxSegmapHops = 1 << 12
	maxPcDescs    = 1 << 16
	maxScopes     = 64
)

// Blob names the code blob holding pc, found the way HotSpot's
// CodeHeap::find_start does. For a compiled Java method it returns the
// method and, innermost first, the methods the JIT inlined at the call
// that returns to pc (from the nmethod's PcDesc and scope data), with kind
// KindMethod; for a stub or adapter its name and KindStub. The blob is
// read as it is now: code freed and reused since pc was recorded is named
// as what is there now.
func (m *Methods) Blob(pc uint64) (Frame, error) {
	blob, err := m.findBlob(pc)
	if err != nil {
		return Frame{}, err
	}
	begin, err := m.r.u64(blob + m.off.codeBegin)
	if err != nil {
		return Frame{}, err
	}
	end, err := m.r.u64(blob + m.off.codeEnd)
	if err != nil {
		return Frame{}, err
	}
	if pc < begin || pc >= end {
		return Frame{}, fmt.Errorf("%#x is outside the code of its blob at %#x", pc, blob)
	}
	np, err := m.r.u64(blob + m.off.blobName)
	if err != nil {
		return Frame{}, err
	}
	bn, ok := m.blobs[np]
	if !ok {
		if bn, err = m.r.stringAt(blob + m.off.blobName); err != nil {
			return Frame{}, err
		}
		m.blobs[np] = bn
	}
	// A compiled method, or a native method's wrapper ("native nmethod").
	if bn != "nmethod" && bn != "native nmethod" {
		return Frame{Name: bn, Kind: KindStub, Chained: true}, nil
	}
	method, err := m.r.u64(blob + m.off.cmMethod)
	if err != nil {
		return Frame{}, err
	}
	name, err := m.Name(method)
	if err != nil {
		return Frame{}, err
	}
	f := Frame{Name: name, Kind: KindMethod, Chained: true}
	// Inlining and lines are refinements: without them the frame is
	// still named.
	scopes, _ := m.scopes(blob, pc-begin)
	n := len(scopes)
	if n == 0 || scopes[n-1].method != method {
		return f, nil
	}
	chain := make([]Method, 0, n)
	for _, sc := range scopes {
		w, err := m.At(sc.method, sc.bci)
		if err != nil {
			return f, nil
		}
		chain = append(chain, w)
	}
	f.File, f.Line = chain[n-1].File, chain[n-1].Line
	if n > 1 {
		f.Inlined = chain[:n-1]
	}
	return f, nil
}

// scope is one level of a compiled call's scope chain.
type scope struct {
	method uint64 // Method*
	bci    int
}

// findBlob returns the CodeBlob holding pc: its heap's segment map leads
// back to the first segment of the block, whose header the blob follows.
func (m *Methods) findBlob(pc uint64) (uint64, error) {
	for _, h := range m.code.Heaps {
		if pc < h.Low || pc >= h.High {
			continue
		}
		seg := (pc - h.Low) >> h.Log2Segment
		for hops := 0; ; hops++ {
			if hops == maxSegmapHops {
				return 0, fmt.Errorf("segment map of %#x has no block start", pc)
			}
			b, err := m.r.read(h.Segmap+seg, 1)
			if err != nil {
				return 0, err
			}
			if b[0] == 0xff || uint64(b[0]) > seg {
				return 0, fmt.Errorf("%#x is in no code blob", pc)
			}
			if b[0] == 0 {
				break
			}
			seg -= uint64(b[0])
		}
		return h.Low + seg<<h.Log2Segment + uint64(h.BlobOffset), nil
	}
	return 0, fmt.Errorf("%#x is in no code heap", pc)
}

// scopes returns, innermost first, the scope chain (method and bytecode
// index) of the call whose return address is at offset off in the nmethod
// at blob.
func (m *Methods) scopes(blob, off uint64) ([]scope, error) {
	var offs [3]uint32
	for i, f := range []uint64{m.off.scopesPcsOff, m.off.dependenciesOff, m.off.metadataOff} {
		v, err := m.r.u32(blob + f)
		if err != nil {
			return nil, err
		}
		offs[i] = v
	}
	pcs, pcsEnd, meta := blob+uint64(offs[0]), blob+uint64(offs[1]), blob+uint64(offs[2])
	if pcsEnd < pcs || pcsEnd-pcs > maxPcDescs*m.off.pcDescSize {
		return nil, fmt.Errorf("implausible PcDescs [%#x, %#x)", pcs, pcsEnd)
	}
	descs, err := m.r.read(pcs, int(pcsEnd-pcs))
	if err != nil {
		return nil, err
	}
	decode := int64(-1)
	for p := uint64(0); p+m.off.pcDescSize <= uint64(len(descs)); p += m.off.pcDescSize {
		if uint64(binary.LittleEndian.Uint32(descs[p+m.off.pcOffset:])) == off {
			decode = int64(int32(binary.LittleEndian.Uint32(descs[p+m.off.scopeOffset:])))
			break
		}
	}
	if decode <= 0 {
		return nil, errors.New("no scope for this call")
	}
	data, err := m.r.u64(blob + m.off.scopesData)
	if err != nil {
		return nil, err
	}
	var chain []scope
	for decode > 0 && len(chain) < maxScopes {
		b, err := m.readUpTo(data+uint64(decode), 16)
		if err != nil {
			return nil, err
		}
		st := compressedStream{b: b}
		sender, idx, bci := st.int(), st.int(), st.int()
		if st.err || idx <= 0 {
			return nil, errors.New("corrupt scope")
		}
		method, err := m.r.u64(meta + uint64(idx-1)*8)
		if err != nil {
			return nil, err
		}
		// DebugInfoReadStream::read_bci: stored + InvocationEntryBci.
		chain = append(chain, scope{method, int(bci) + m.lines.invocationEntryBCI})
		decode = int64(sender)
	}
	return chain, nil
}

// readUpTo reads up to n bytes at addr: fewer where readable memory ends.
func (m *Methods) readUpTo(addr uint64, n int) ([]byte, error) {
	b := make([]byte, n)
	k, err := m.r.m.ReadAt(b, int64(addr))
	if k == 0 {
		return nil, fmt.Errorf("read at %#x: %w", addr, err)
	}
	return b[:k], nil
}

// compressedStream reads HotSpot's CompressedReadStream ints: UNSIGNED5
// (Pack200's coding) with 192 one-byte codes, at most five bytes.
type compressedStream struct {
	b   []byte
	pos int
	err bool
}

func (c *compressedStream) int() int32 {
	const lgH, l, maxI = 6, 192, 4
	var sum uint32
	shift := uint(0)
	for i := 0; ; i++ {
		if c.pos >= len(c.b) {
			c.err = true
			return 0
		}
		b := uint32(c.b[c.pos])
		c.pos++
		sum += b << shift
		if b < l || i == maxI {
			return int32(sum)
		}
		shift += lgH
	}
}

// linesLayout finds in vs what line numbers need; a JVM that lacks any of
// it still names methods.
func linesLayout(vs *VMStructs) lineLayout {
	l := lineLayout{cmSize: vs.Sizes["ConstMethod"]}
	for name, dst := range map[string]*uint64{
		"ConstMethod::_flags":                   &l.flags,
		"ConstMethod::_code_size":               &l.codeSize,
		"ConstantPool::_source_file_name_index": &l.sourceFile,
	} {
		f, ok := vs.Fields[name]
		if !ok || f.Static {
			return l
		}
		*dst = f.Offset
	}
	has, ok1 := vs.Constants["ConstMethod::_has_linenumber_table"]
	entry, ok2 := vs.Constants["InvocationEntryBci"]
	if !ok1 || !ok2 || has <= 0 || has > 0xffff || l.cmSize == 0 || l.cmSize > 4096 {
		return l
	}
	l.hasLineTable, l.invocationEntryBCI, l.ok = uint16(has), int(entry), true
	return l
}

// maxLineTable bounds the compressed line number table read for a method.
const maxLineTable = 1 << 16

// At names the method ptr at bytecode index bci (-1: unknown) and places
// it in its source file and line, as HotSpot's Method::line_from_bci does.
func (m *Methods) At(ptr uint64, bci int) (Method, error) {
	k := methodBCI{ptr, bci}
	if w, ok := m.where[k]; ok {
		return w, nil
	}
	name, err := m.Name(ptr)
	if err != nil {
		return Method{}, err
	}
	w := Method{Name: name}
	if m.lines.ok {
		// Lines are a refinement: a method without them is still named.
		w.File, w.Line, _ = m.line(ptr, bci)
	}
	m.where[k] = w
	return w, nil
}

func (m *Methods) line(ptr uint64, bci int) (string, int, error) {
	cm, err := m.r.u64(ptr + m.off.constMethod)
	if err != nil {
		return "", 0, err
	}
	cp, err := m.r.u64(cm + m.off.constants)
	if err != nil {
		return "", 0, err
	}
	file := ""
	if idx, err := m.r.u16(cp + m.lines.sourceFile); err == nil && idx != 0 {
		if n, err := m.r.u32(cp + m.off.poolLength); err == nil && uint32(idx) < n {
			if sym, err := m.r.u64(cp + m.off.poolSize + uint64(idx)*8); err == nil {
				file, _ = m.symbol(sym)
			}
		}
	}
	flags, err := m.r.u16(cm + m.lines.flags)
	if err != nil || flags&m.lines.hasLineTable == 0 || bci < 0 {
		return file, 0, err
	}
	size, err := m.r.u16(cm + m.lines.codeSize)
	if err != nil || bci >= int(size) {
		return file, 0, err
	}
	table, err := m.readUpTo(cm+m.lines.cmSize+uint64(size), maxLineTable)
	if err != nil {
		return file, 0, err
	}
	return file, lineFromBCI(table, bci), nil
}

// lineFromBCI reads a compressed line number table (HotSpot's
// CompressedLineNumberReadStream: a pair per byte, bci delta << 3 | line
// delta, or 0xFF and two signed UNSIGNED5 deltas; 0 ends it) and returns
// the line of bci: the pair at bci, else the last one before it; 0 if none.
func lineFromBCI(table []byte, bci int) int {
	st := compressedStream{b: table}
	cur, line, best, bestBCI := 0, 0, 0, -1
	for st.pos < len(st.b) {
		next := st.b[st.pos]
		st.pos++
		switch next {
		case 0:
			return best
		case 0xff:
			cur += int(signed(st.int()))
			line += int(signed(st.int()))
			if st.err {
				return best
			}
		default:
			cur += int(next >> 3)
			line += int(next & 7)
		}
		if cur == bci {
			return line
		}
		if cur < bci && cur >= bestBCI {
			best, bestBCI = line, cur
		}
	}
	return best
}

// signed undoes HotSpot's sign folding of compressed ints.
func signed(v int32) int32 { return int32(uint32(v)>>1) ^ -(v & 1) }
