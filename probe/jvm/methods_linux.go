package jvm

import (
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
	vs    *VMStructs // for Spaces
	off   methodLayout
	names map[uint64]string
	code  Code
	blobs map[uint64]string // CodeBlob::_name pointer → the name
	lines lineLayout
	where map[methodBCI]Method
	gaps  []Gap
	// found and absent are the fields of fieldSpecs the JVM describes
	// (by the name it gave each) and those it describes by none.
	found, absent []string
	// walks: compiled frames can be walked and named (useCode complete).
	walks bool
	// u5 is the UNSIGNED5 coding of the JVM's compressed streams (see
	// compressedStream): guessed from its tables, then learned from the
	// first scope chain that decodes only one way.
	u5      byte
	u5Known bool
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

// lineLayout is what reading line numbers takes beyond methodLayout; ok is
// false when this JVM's VMStructs lack part of it (names still work).
type lineLayout struct {
	ok           bool
	hasLineTable uint64
}

// Code describes a JVM's code cache for the kernel's stack walk.
type Code struct {
	Interpreter [2]uint64 // the template interpreter, [start, end)
	Cache       [2]uint64 // the whole code cache, [start, end); zero if not walked
	Heaps       []CodeHeap
	// Where a Method's bytecodes start: *(Method* + ConstMethodOffset) +
	// ConstMethodSize; both 0 when line numbers cannot be read.
	ConstMethodOffset, ConstMethodSize uint32
	// FramePointers: the JVM is known to run with
	// -XX:+PreserveFramePointer, so compiled code keeps %rbp as its frame
	// pointer and its frames can be walked by it, with no read of their
	// code blob (Namer.Code sets it).
	FramePointers bool
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

// invocationEntryBCI is HotSpot's InvocationEntryBci (-1 in every release)
// when the tables do not give it.
const invocationEntryBCI = -1

// NewMethods reads the VMStructs tables of the JVM whose memory is mem and
// whose libjvm.so, at path (readable by leakscope), is loaded with bias,
// and finds its interpreter. It fails while the JVM is still starting, and
// with a *LayoutError when its tables lack what naming any frame takes.
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

// LayoutError says that a JVM's VMStructs lack fields every Java frame's
// name needs: leakscope does not know this JVM's layout. It is permanent.
type LayoutError struct {
	Names []string // each field, by the names HotSpot gave it
}

func (e *LayoutError) Error() string {
	return "this JVM's VMStructs describe no " + strings.Join(e.Names, " nor ")
}

func newMethods(mem Memory, vs *VMStructs) (*Methods, error) {
	m := &Methods{r: reader{mem}, vs: vs, names: map[uint64]string{}, blobs: map[uint64]string{}, where: map[methodBCI]Method{}}
	l, missing := resolve(vs)
	if n := missing[useNames]; len(n) > 0 {
		return nil, &LayoutError{Names: n}
	}
	m.off = l
	for _, f := range fieldSpecs {
		if s, ok := lookup(vs, f.names, f.width); ok {
			m.found = append(m.found, s.name)
		} else {
			m.absent = append(m.absent, strings.Join(f.names, " or "))
		}
	}
	m.lines, missing = linesLayout(vs, &m.off, missing)
	// Sizes are read from the target: bound them before reading with them.
	for _, c := range []struct {
		name    string
		v, most uint64
		u       use
	}{
		{"ConstantPool", l.poolSize, 4096, useNames},
		{"HeapBlock", l.heapBlock, 64, useCode},
		{"PcDesc", l.pcDescSize, 64, useInline},
	} {
		if c.v == 0 || c.v > c.most {
			if c.u == useNames {
				return nil, fmt.Errorf("this JVM's VMStructs give an implausible size of %s (%d)", c.name, c.v)
			}
			missing[c.u] = append(missing[c.u], fmt.Sprintf("plausible sizeof(%s) (%d)", c.name, c.v))
		}
	}
	if e, ok := vs.Constants["InvocationEntryBci"]; ok {
		m.off.blob.entryBCI = int(e)
	} else {
		m.off.blob.entryBCI = invocationEntryBCI
	}
	// JDK 21 and later exclude the zero byte from UNSIGNED5 (JDK 20
	// already, from one build on): the tables give no flag for that,
	// so guess from a change of the same time, ConstMethod's flags
	// struct, until a scope chain tells (scopes).
	if l.flags.name == "ConstMethod::_flags._flags" {
		m.u5 = 1
	}
	m.gaps = gaps(missing)
	m.walks = len(missing[useCode]) == 0
	code, err := m.r.u64(m.off.interpCode.off)
	if err != nil {
		return nil, fmt.Errorf("read the interpreter's code queue: %w", err)
	}
	if code == 0 {
		return nil, errors.New("the JVM has not generated its interpreter yet (still starting?)")
	}
	buf, err := m.r.u64(code + m.off.stubBuffer.off)
	if err != nil {
		return nil, fmt.Errorf("read the interpreter's code: %w", err)
	}
	limit, err := m.r.uint(code+m.off.bufferLimit.off, m.off.bufferLimit.width)
	if err != nil {
		return nil, fmt.Errorf("read the interpreter's code size: %w", err)
	}
	if buf == 0 || limit == 0 || limit > 1<<30 {
		return nil, fmt.Errorf("implausible interpreter code at %#x, %d bytes", buf, limit)
	}
	m.code.Interpreter = [2]uint64{buf, buf + limit}
	if m.lines.ok {
		m.code.ConstMethodOffset, m.code.ConstMethodSize = uint32(m.off.constMethod.off), uint32(m.off.cmSize)
	}
	if m.walks {
		if err := m.readHeaps(); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Gaps lists what this JVM's tables lack beyond naming frames, and what
// leakscope cannot do without it; nil when it lacks nothing.
func (m *Methods) Gaps() []Gap { return m.gaps }

// Fields lists the VMStructs fields leakscope looks for that this JVM
// describes, by the name it gave each, and those it describes by none of
// their names (some only pick a layout, and their absence costs nothing:
// Gaps says what is lost).
func (m *Methods) Fields() (found, absent []string) { return m.found, m.absent }

// Walks reports whether compiled frames are walked by their frame size
// and named from the code heap.
func (m *Methods) Walks() bool { return m.walks }

// readHeaps reads the code cache's bounds and heaps; they are reserved
// when the JVM starts and do not move.
func (m *Methods) readHeaps() error {
	lo, err := m.r.u64(m.off.lowBound.off)
	if err != nil {
		return fmt.Errorf("read the code cache's bounds: %w", err)
	}
	hi, err := m.r.u64(m.off.highBound.off)
	if err != nil {
		return fmt.Errorf("read the code cache's bounds: %w", err)
	}
	if lo == 0 || hi <= lo {
		return fmt.Errorf("implausible code cache [%#x, %#x)", lo, hi)
	}
	m.code.Cache = [2]uint64{lo, hi}
	arr, err := m.r.u64(m.off.heaps.off)
	if err != nil || arr == 0 {
		return fmt.Errorf("read the code heaps: %v", err)
	}
	n, err := m.r.uint(arr+m.off.arrayLen.off, m.off.arrayLen.width)
	if err != nil {
		return fmt.Errorf("read the code heaps: %w", err)
	}
	data, err := m.r.u64(arr + m.off.arrayData.off)
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
		var log2 uint64
		for _, f := range []struct {
			dst  *uint64
			addr uint64
		}{
			{&h.Low, heap + m.off.heapMemory.off + m.off.spaceLow.off},
			{&h.High, heap + m.off.heapMemory.off + m.off.spaceHigh.off},
			{&h.Segmap, heap + m.off.heapSegmap.off + m.off.spaceLow.off},
		} {
			if *f.dst, err = m.r.u64(f.addr); err != nil {
				return fmt.Errorf("read code heap %d: %w", i, err)
			}
		}
		if log2, err = m.r.uint(heap+m.off.heapLog2.off, m.off.heapLog2.width); err != nil {
			return fmt.Errorf("read code heap %d: %w", i, err)
		}
		if h.Low < lo || h.High > hi || h.Low >= h.High || h.Segmap == 0 || log2 < 4 || log2 > 16 {
			return fmt.Errorf("implausible code heap %d: [%#x, %#x), segment map %#x, 2^%d-byte segments", i, h.Low, h.High, h.Segmap, log2)
		}
		h.Log2Segment = uint32(log2)
		h.BlobOffset = uint32(m.off.heapBlock)
		h.FrameSizeOffset = uint32(m.off.frameSize.off)
		h.CompileIDOffset = uint32(m.off.compileID.off)
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
	cm, err := m.r.u64(ptr + m.off.constMethod.off)
	if err != nil {
		return "", err
	}
	cp, err := m.r.u64(cm + m.off.constants.off)
	if err != nil {
		return "", err
	}
	idx, err := m.r.uint(cm+m.off.nameIndex.off, m.off.nameIndex.width)
	if err != nil {
		return "", err
	}
	n, err := m.r.uint(cp+m.off.poolLength.off, m.off.poolLength.width)
	if err != nil {
		return "", err
	}
	if idx == 0 || idx >= n {
		return "", fmt.Errorf("name index %d outside its constant pool of %d", idx, n)
	}
	nameSym, err := m.r.u64(cp + m.off.poolSize + idx*8)
	if err != nil {
		return "", err
	}
	method, err := m.symbol(nameSym)
	if err != nil {
		return "", fmt.Errorf("method name: %w", err)
	}
	holder, err := m.r.u64(cp + m.off.poolHolder.off)
	if err != nil {
		return "", err
	}
	klassSym, err := m.r.u64(holder + m.off.klassName.off)
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
	n, err := m.r.uint(ptr+m.off.symLength.off, m.off.symLength.width)
	if err != nil {
		return "", err
	}
	if n == 0 || n > maxSymbolLen {
		return "", fmt.Errorf("implausible symbol length %d", n)
	}
	b, err := m.r.read(ptr+m.off.symBody.off, int(n))
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
	segs, err := procfs.LoadSegments(path)
	if err != nil {
		return 0, err
	}
	for _, p := range segs {
		if off >= p.Off && off < p.Off+p.Filesz {
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
	if !m.walks {
		return Frame{}, errors.New("this JVM's code heap is not read (see Gaps)")
	}
	blob, err := m.findBlob(pc)
	if err != nil {
		return Frame{}, err
	}
	begin, end, err := m.codeRange(blob)
	if err != nil {
		return Frame{}, err
	}
	if pc < begin || pc >= end {
		return Frame{}, fmt.Errorf("%#x is outside the code of its blob at %#x", pc, blob)
	}
	np, err := m.r.u64(blob + m.off.blobName.off)
	if err != nil {
		return Frame{}, err
	}
	bn, ok := m.blobs[np]
	if !ok {
		if bn, err = m.r.stringAt(blob + m.off.blobName.off); err != nil {
			return Frame{}, err
		}
		m.blobs[np] = bn
	}
	// A compiled method, or a native method's wrapper ("native nmethod"):
	// by the blob's kind where the tables give it, else by its name.
	isMethod := bn == "nmethod" || bn == "native nmethod"
	if m.off.blobKind.ok() {
		k, err := m.r.uint(blob+m.off.blobKind.off, m.off.blobKind.width)
		if err != nil {
			return Frame{}, err
		}
		isMethod = k == m.off.nmethodKind
	}
	if !isMethod {
		return Frame{Name: bn, Kind: KindStub, Chained: true}, nil
	}
	method, err := m.r.u64(blob + m.off.method.off)
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
	scopes, err := m.scopes(blob, pc-begin, method)
	if err != nil && len(m.gaps) == 0 {
		// Not a field the JVM lacks (that is a Gap, warned about once):
		// this call's scope data could not be read. Said, not hidden.
		f.Partial = fmt.Sprintf("no inlined methods nor line (%v): if this is not a native method's wrapper, the compiled code there is not the code the walk saw, replaced since, and the name may be wrong", err)
	}
	n := len(scopes)
	if n == 0 {
		return f, nil
	}
	chain := make([]Method, 0, n)
	for _, sc := range scopes {
		w, err := m.At(sc.method, sc.bci)
		if err != nil {
			f.Partial = fmt.Sprintf("inlined methods and line unknown: %v", err)
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

// codeRange returns where the code of the blob at blob is, [begin, end):
// at pointers in the blob (JDK 9-22) or offsets from it (JDK 23 on).
func (m *Methods) codeRange(blob uint64) (begin, end uint64, err error) {
	begin, err = m.r.uint(blob+m.off.codeBegin.off, m.off.codeBegin.width)
	if err != nil {
		return 0, 0, err
	}
	end, err = m.r.uint(blob+m.off.codeEnd.off, m.off.codeEnd.width)
	if err != nil {
		return 0, 0, err
	}
	if m.off.blob.codeOffsets {
		if begin >= 1<<31 || end >= 1<<31 {
			return 0, 0, fmt.Errorf("implausible code offsets %#x, %#x in the blob at %#x", begin, end, blob)
		}
		begin, end = blob+begin, blob+end
	}
	return begin, end, nil
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

// Limits on what one nmethod's debug information may hold.
const (
	maxMetadata  = 1 << 16 // Metadata* slots
	maxScopeData = 1 << 24 // bytes of scopes
)

// debugInfo is where an nmethod keeps its debug information.
type debugInfo struct {
	pcs, pcsEnd uint64 // its PcDescs, [pcs, pcsEnd)
	scopes      uint64 // its serialized scopes
	meta        uint64 // its Metadata* table (a scope's method index - 1)
	metaLen     uint64 // slots in meta; 0 if unknown
}

// debug finds the debug information of the nmethod at blob, as its JVM
// lays it out (blobLayout).
func (m *Methods) debug(blob uint64) (debugInfo, error) {
	l := &m.off
	if !l.pcOffset.ok() || !l.scopeOffset.ok() || !l.scopesPcs.ok() || !l.pcsEnd.ok() || !l.scopesData.ok() || l.pcDescSize == 0 || l.pcDescSize > 64 {
		return debugInfo{}, errors.New("this JVM's scopes are not read (see Gaps)")
	}
	var d debugInfo
	get := func(s slot) (uint64, error) { return m.r.uint(blob+s.off, s.width) }
	pcs, err := get(l.scopesPcs)
	if err != nil {
		return d, err
	}
	end, err := get(l.pcsEnd)
	if err != nil {
		return d, err
	}
	data, err := get(l.scopesData)
	if err != nil {
		return d, err
	}
	if l.blob.immutable {
		// JDK 23 and later: offsets from the immutable data block.
		base, err := m.r.u64(blob + l.immutableData.off)
		if err != nil {
			return d, err
		}
		d.pcs, d.pcsEnd, d.scopes = base+pcs, base+end, base+data
	} else {
		// Offsets from the blob; the scopes at a pointer.
		d.pcs, d.pcsEnd, d.scopes = blob+pcs, blob+end, data
	}
	switch {
	case l.blob.mutableMetadata:
		// JDK 25 on: after the relocations in the mutable data.
		base, err := m.r.u64(blob + l.mutableData.off)
		if err != nil {
			return d, err
		}
		reloc, err := get(l.relocationSize)
		if err != nil {
			return d, err
		}
		d.meta = base + reloc
		if l.mutableDataSize.ok() {
			if size, err := get(l.mutableDataSize); err == nil && size >= reloc {
				d.metaLen = (size - reloc) / 8
			}
		}
	case l.metadata.ok() && l.blob.immutable:
		// JDK 23, 24: an offset from the data section.
		off, err := get(l.metadata)
		if err != nil {
			return d, err
		}
		_, dataBegin, err := m.codeRange(blob)
		if err != nil {
			return d, err
		}
		d.meta = dataBegin + off
	case l.metadata.ok():
		off, err := get(l.metadata)
		if err != nil {
			return d, err
		}
		d.meta = blob + off
	default:
		return d, errors.New("this JVM's nmethod metadata is not found (see Gaps)")
	}
	if d.metaLen == 0 || d.metaLen > maxMetadata {
		d.metaLen = maxMetadata
	}
	return d, nil
}

// scopes returns, innermost first, the scope chain (method and bytecode
// index) of the call whose return address is at offset off in the nmethod
// at blob, compiled from method: the chain ends at method, or it is not
// the nmethod's.
func (m *Methods) scopes(blob, off, method uint64) ([]scope, error) {
	d, err := m.debug(blob)
	if err != nil {
		return nil, err
	}
	if d.pcsEnd < d.pcs || d.pcsEnd-d.pcs > maxPcDescs*m.off.pcDescSize {
		return nil, fmt.Errorf("implausible PcDescs [%#x, %#x)", d.pcs, d.pcsEnd)
	}
	descs, err := m.r.read(d.pcs, int(d.pcsEnd-d.pcs))
	if err != nil {
		return nil, err
	}
	decode := int64(-1)
	po, so := m.off.pcOffset.off, m.off.scopeOffset.off
	for p := uint64(0); p+m.off.pcDescSize <= uint64(len(descs)) && po+4 <= m.off.pcDescSize && so+4 <= m.off.pcDescSize; p += m.off.pcDescSize {
		if uint64(binary.LittleEndian.Uint32(descs[p+po:])) == off {
			decode = int64(int32(binary.LittleEndian.Uint32(descs[p+so:])))
			break
		}
	}
	if decode <= 0 || decode >= maxScopeData {
		return nil, errors.New("no scope for this call")
	}
	if m.u5Known {
		return m.decodeScopes(d, decode, method, m.u5)
	}
	// The coding is not known yet: the one chain of the two that ends at
	// the nmethod's own method tells.
	guess, other := m.u5, 1-m.u5
	c1, err1 := m.decodeScopes(d, decode, method, guess)
	c2, err2 := m.decodeScopes(d, decode, method, other)
	switch {
	case err1 == nil && err2 != nil:
		m.u5Known = true
		return c1, nil
	case err1 != nil && err2 == nil:
		m.u5, m.u5Known = other, true
		m.where = map[methodBCI]Method{} // lines read with the guess
		return c2, nil
	}
	return c1, err1
}

// decodeScopes decodes the scope chain at offset decode of d's scopes with
// UNSIGNED5 coding x, and checks it ends at method.
func (m *Methods) decodeScopes(d debugInfo, decode int64, method uint64, x byte) ([]scope, error) {
	var chain []scope
	for decode > 0 && len(chain) < maxScopes {
		b, err := m.readUpTo(d.scopes+uint64(decode), 16)
		if err != nil {
			return nil, err
		}
		st := compressedStream{b: b, x: x}
		sender, idx, bci := st.int(), st.int(), st.int()
		if st.err || idx <= 0 || uint64(idx) > d.metaLen || sender < 0 || int64(sender) >= maxScopeData {
			return nil, errors.New("corrupt scope")
		}
		ptr, err := m.r.u64(d.meta + uint64(idx-1)*8)
		if err != nil {
			return nil, err
		}
		// DebugInfoReadStream::read_bci: stored + InvocationEntryBci.
		chain = append(chain, scope{ptr, int(bci) + m.off.blob.entryBCI})
		decode = int64(sender)
	}
	if len(chain) == 0 || chain[len(chain)-1].method != method {
		return nil, errors.New("the scope chain does not end at the nmethod's method")
	}
	for _, sc := range chain {
		if _, err := m.Name(sc.method); err != nil {
			return nil, err
		}
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
// (Pack200's coding) with 192 one-byte codes, at most five bytes, each
// byte x more than its digit: JDK 21 and later exclude the zero byte
// (x = 1), earlier ones nothing (x = 0).
type compressedStream struct {
	b   []byte
	pos int
	x   byte
	err bool
}

func (c *compressedStream) int() int32 {
	const lgH, l, maxI = 6, 192, 4
	var sum uint32
	shift := uint(0)
	for i := 0; ; i++ {
		if c.pos >= len(c.b) || c.b[c.pos] < c.x {
			c.err = true
			return 0
		}
		b := uint32(c.b[c.pos])
		c.pos++
		sum += (b - uint32(c.x)) << shift
		if b < l || i == maxI {
			return int32(sum)
		}
		shift += lgH
	}
}

// linesLayout finds in vs what line numbers need beyond l; a JVM that
// lacks any of it still names methods. It adds what is lacking to
// missing.
func linesLayout(vs *VMStructs, l *methodLayout, missing map[use][]string) (lineLayout, map[use][]string) {
	if len(missing[useLines]) > 0 {
		return lineLayout{}, missing
	}
	has, ok := constant(vs, hasLineTableNames)
	if !ok || has <= 0 || has > 0xffff {
		missing[useLines] = append(missing[useLines], strings.Join(hasLineTableNames, " or "))
		return lineLayout{}, missing
	}
	if l.cmSize == 0 || l.cmSize > 4096 {
		missing[useLines] = append(missing[useLines], fmt.Sprintf("plausible sizeof(ConstMethod) (%d)", l.cmSize))
		return lineLayout{}, missing
	}
	return lineLayout{ok: true, hasLineTable: uint64(has)}, missing
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
	l := &m.off
	cm, err := m.r.u64(ptr + l.constMethod.off)
	if err != nil {
		return "", 0, err
	}
	cp, err := m.r.u64(cm + l.constants.off)
	if err != nil {
		return "", 0, err
	}
	file := ""
	if idx, err := m.r.uint(cp+l.sourceFile.off, l.sourceFile.width); err == nil && idx != 0 {
		if n, err := m.r.uint(cp+l.poolLength.off, l.poolLength.width); err == nil && idx < n {
			if sym, err := m.r.u64(cp + l.poolSize + idx*8); err == nil {
				file, _ = m.symbol(sym)
			}
		}
	}
	flags, err := m.r.uint(cm+l.flags.off, l.flags.width)
	if err != nil || flags&m.lines.hasLineTable == 0 || bci < 0 {
		return file, 0, err
	}
	size, err := m.r.uint(cm+l.codeSize.off, l.codeSize.width)
	if err != nil || uint64(bci) >= size {
		return file, 0, err
	}
	table, err := m.readUpTo(cm+l.cmSize+size, maxLineTable)
	if err != nil {
		return file, 0, err
	}
	return file, lineFromBCI(table, bci, m.u5), nil
}

// lineFromBCI reads a compressed line number table (HotSpot's
// CompressedLineNumberReadStream: a pair per byte, bci delta << 3 | line
// delta, or 0xFF and two signed UNSIGNED5 deltas with coding x; 0 ends it)
// and returns the line of bci: the pair at bci, else the last one before
// it; 0 if none.
func lineFromBCI(table []byte, bci int, x byte) int {
	st := compressedStream{b: table, x: x}
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
