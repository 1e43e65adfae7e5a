package symbolize

import (
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"debug/gosym"
	"encoding/binary"
	"sort"
)

// Go binaries carry their own function table, .gopclntab, which the Go
// runtime needs for tracebacks and garbage collection, so it survives
// stripping (-ldflags=-s -w removes .symtab and DWARF, not the table). It
// names every Go function (main.(*connTable).open), gives file and line
// for every PC, and records where the compiler inlined calls.
//
// The Go 1.20+ layout (pcHeader magic 0xfffffff1, still current in Go
// 1.26) is read directly, because the inline trees it holds are not
// exposed by debug/gosym; older layouts go through debug/gosym, without
// inlined frames. References: runtime/symtab.go (pcHeader, moduledata,
// _func, pcvalue) and runtime/symtabinl.go (inlinedCall).

// Frame is one logical frame at a code address: a function, its source
// position, and whether the compiler inlined it into the next (outer)
// Frame, so that both share one machine frame.
type Frame struct {
	Function string // "" when nothing names the address
	File     string // "" when unknown
	Line     int    // 0 when unknown
	Inlined  bool
}

// Frames returns the logical frames at vaddr, innermost first. In Go code
// whose binary records inline trees there is one frame per function the
// compiler inlined at vaddr, then the function that holds the code;
// everywhere else there is exactly one frame, as Symbolize gives it. For
// a return address, pass the return address minus 1.
func (o *Object) Frames(vaddr uint64) []Frame {
	if o.gotab != nil {
		if fs := o.gotab.frames(vaddr); fs != nil {
			return fs
		}
	}
	fn, file, line := o.Symbolize(vaddr)
	return []Frame{{Function: fn, File: file, Line: line}}
}

// Go reports whether the object is a Go binary whose function table could
// be read: Symbolize and Frames then name Go code from it, whatever the
// ELF symbol tables hold.
func (o *Object) Go() bool { return o.gotab != nil }

// GoCode reports whether vaddr lies in the object's Go code, as opposed to
// C code linked into a Go binary through cgo, or any code of an object
// that is not Go.
func (o *Object) GoCode(vaddr uint64) bool { return o.gotab != nil && o.gotab.covers(vaddr) }

// GoText returns the object's Go code as [start, end) ELF vaddrs
// (runtime.text to the end of its last function), one contiguous range
// however the binary was linked; ok is false for an object without a
// Go function table, or with a pre-1.20 one.
func (o *Object) GoText() (start, end uint64, ok bool) {
	if o.gotab == nil || o.gotab.legacy != nil || o.gotab.textEnd <= o.gotab.textStart {
		return 0, 0, false
	}
	return o.gotab.textStart, o.gotab.textEnd, true
}

// GoFunc returns the [start, end) ELF vaddrs of the Go function named
// name (as the runtime names it: runtime.asmcgocall for its ABI0 body),
// from the function table, so that it is found in a stripped binary too.
func (o *Object) GoFunc(name string) (start, end uint64, ok bool) {
	t := o.gotab
	if t == nil || t.legacy != nil {
		return 0, 0, false
	}
	le := binary.LittleEndian
	for i := 0; i < t.nfunc; i++ {
		foff := uint64(le.Uint32(t.functab[8*i+4:]))
		if foff+funcHeaderSize > uint64(len(t.funcs)) {
			continue
		}
		if cstring(t.names, uint64(le.Uint32(t.funcs[foff+4:]))) != name {
			continue
		}
		s, e := le.Uint32(t.functab[8*i:]), le.Uint32(t.functab[8*i+8:])
		if e <= s {
			return 0, 0, false
		}
		return t.textStart + uint64(s), t.textStart + uint64(e), true
	}
	return 0, 0, false
}

// Magic numbers of the pcHeader, by the Go release that introduced them.
const (
	goMagic120 = 0xfffffff1 // Go 1.20 and later
	goMagic118 = 0xfffffff0
	goMagic116 = 0xfffffffa
	goMagic12  = 0xfffffffb
)

// Indexes of the per-function tables the inline expansion needs
// (internal/abi: PCDATA_InlTreeIndex, FUNCDATA_InlTree).
const (
	pcdataInlTreeIndex = 2
	funcdataInlTree    = 3
)

// Offsets in runtime.moduledata (Go 1.20 to 1.26, 64-bit) of the fields
// read from a stripped binary. Every candidate is checked against the
// pcHeader before it is believed.
const (
	mdFuncnametab = 8
	mdCutab       = 32
	mdMinPC       = 160
	mdText        = 176
	mdGofunc      = 320
	mdSize        = 328
)

const (
	funcHeaderSize  = 44 // runtime._func before its pcdata and funcdata arrays
	inlinedCallSize = 16 // runtime.inlinedCall
	maxInlineDepth  = 64 // guards against cycles in a malformed inline tree
)

// goTable is a Go binary's function table.
type goTable struct {
	textStart uint64 // runtime.text: function entries are offsets from it
	textEnd   uint64 // end of the last function
	quantum   uint64 // instruction size unit of pc deltas (1 on x86)
	nfunc     int
	functab   []byte // nfunc+1 pairs of uint32 (entry offset, _func offset)
	funcs     []byte // the pclntable the _func offsets point into
	names     []byte // funcnametab
	cutab     []byte
	filetab   []byte
	pctab     []byte
	// gofunc is the address of go:func.*, which funcdata offsets
	// (inline trees) are relative to; 0 when it could not be found, and
	// then frames are not expanded.
	gofunc uint64
	read   func(vaddr uint64, buf []byte) int // reads the object's file image

	legacy *gosym.Table // pre-1.20 layouts; the fields above are unused
}

// loadGo reads the Go function table and version of ef, if it is a Go
// binary. syms are the .symtab symbols (nil when stripped). Anything
// malformed leaves the object without Go symbolization, never fails it.
func (o *Object) loadGo(ef *elf.File, syms []elf.Symbol) {
	sec := ef.Section(".gopclntab")
	if sec == nil {
		sec = ef.Section(".data.rel.ro.gopclntab") // PIE builds of some releases
	}
	if sec == nil && ef.Section(".go.buildinfo") == nil {
		return
	}
	if bi, err := buildinfo.Read(o.file); err == nil {
		o.GoVersion = bi.GoVersion
		o.GoModule = bi.Main.Path
	}
	if sec == nil || sec.Type == elf.SHT_NOBITS || ef.Class != elf.ELFCLASS64 || ef.ByteOrder != binary.LittleEndian {
		return
	}
	data, err := sec.Data()
	if err != nil || len(data) < 72 {
		return
	}
	symAddr := map[string]uint64{}
	for _, s := range syms {
		switch s.Name {
		case "runtime.text", "go:func.*", "go.func.*", "runtime.firstmoduledata":
			symAddr[s.Name] = s.Value
		}
	}
	_ = safely("read .gopclntab of "+o.Path, func() error {
		o.gotab = newGoTable(ef, o, sec.Addr, data, symAddr)
		return nil
	})
}

func newGoTable(ef *elf.File, o *Object, hdr uint64, data []byte, sym map[string]uint64) *goTable {
	le := binary.LittleEndian
	magic := le.Uint32(data)
	if data[4] != 0 || data[5] != 0 || data[7] != 8 {
		return nil
	}
	text, hasText := sym["runtime.text"]
	if magic != goMagic120 {
		if magic != goMagic118 && magic != goMagic116 && magic != goMagic12 {
			return nil
		}
		if !hasText {
			if s := ef.Section(".text"); s != nil {
				text = s.Addr // right for internally linked binaries
			}
		}
		tab, err := gosym.NewTable(nil, gosym.NewLineTable(data, text))
		if err != nil || len(tab.Funcs) == 0 {
			return nil
		}
		return &goTable{legacy: tab}
	}

	t, offs := parseGoTable(data, o.readCode)
	if t == nil {
		return nil
	}
	t.gofunc = sym["go:func.*"]
	if t.gofunc == 0 {
		t.gofunc = sym["go.func.*"]
	}
	if !hasText || t.gofunc == 0 {
		md := findModuledata(ef, o, hdr, offs, sym["runtime.firstmoduledata"])
		if md.text != 0 && md.minPC == md.text+uint64(le.Uint32(t.functab)) {
			if !hasText {
				text, hasText = md.text, true
			}
			if t.gofunc == 0 && md.gofunc != 0 && !o.isCode(md.gofunc) && o.segment(md.gofunc) != nil {
				t.gofunc = md.gofunc
			}
		}
	}
	if !hasText {
		return nil
	}
	t.setText(text)
	return t
}

// parseGoTable reads the Go 1.20+ layout of a .gopclntab; offs are the
// offsets of its funcname and cu tables from the pcHeader. The table is
// not usable before setText.
func parseGoTable(data []byte, read func(vaddr uint64, buf []byte) int) (t *goTable, offs []uint64) {
	le := binary.LittleEndian
	if len(data) < 72 || le.Uint32(data) != goMagic120 || data[4] != 0 || data[5] != 0 || data[7] != 8 {
		return nil, nil
	}
	word := func(i int) uint64 { return le.Uint64(data[8+8*i:]) }
	t = &goTable{quantum: uint64(data[6]), read: read}
	nfunc := word(0)
	offs = []uint64{word(3), word(4), word(5), word(6), word(7)} // funcname, cu, file, pc, pcln
	for _, off := range offs {
		if off > uint64(len(data)) {
			return nil, nil
		}
	}
	if t.quantum == 0 || nfunc == 0 || nfunc > uint64(len(data))/8 {
		return nil, nil
	}
	t.nfunc = int(nfunc)
	t.names = data[offs[0]:]
	t.cutab = data[offs[1]:]
	t.filetab = data[offs[2]:]
	t.pctab = data[offs[3]:]
	t.funcs = data[offs[4]:]
	if uint64(len(t.funcs)) < (nfunc+1)*8 {
		return nil, nil
	}
	t.functab = t.funcs[:(nfunc+1)*8]
	return t, offs
}

// setText places the functions: their entries are offsets from text,
// runtime.text.
func (t *goTable) setText(text uint64) {
	t.textStart = text
	t.textEnd = text + uint64(binary.LittleEndian.Uint32(t.functab[8*t.nfunc:]))
}

// moduledata holds the runtime.moduledata fields a stripped binary needs.
type moduledata struct {
	text, minPC, gofunc uint64
}

// findModuledata locates runtime.moduledata, the one structure that holds
// runtime.text and go:func.* when the binary has no symbols: it is the
// pointer-sized word equal to the pcHeader's address followed by pointers
// to the pcHeader's own tables. In a position-independent binary those
// words are zero in the file and filled in by R_X86_64_RELATIVE
// relocations, whose addends hold the values.
func findModuledata(ef *elf.File, o *Object, hdr uint64, offs []uint64, at uint64) moduledata {
	relocs := relativeRelocs(ef)
	word := func(addr uint64) uint64 {
		if v, ok := relocs[addr]; ok {
			return v
		}
		var b [8]byte
		if o.readCode(addr, b[:]) != 8 {
			return 0
		}
		return binary.LittleEndian.Uint64(b[:])
	}
	valid := func(md uint64) bool {
		return word(md) == hdr && word(md+mdFuncnametab) == hdr+offs[0] && word(md+mdCutab) == hdr+offs[1]
	}
	read := func(md uint64) moduledata {
		return moduledata{text: word(md + mdText), minPC: word(md + mdMinPC), gofunc: word(md + mdGofunc)}
	}
	if at != 0 && valid(at) {
		return read(at)
	}
	for addr, v := range relocs {
		if v == hdr && valid(addr) {
			return read(addr)
		}
	}
	var want [8]byte
	binary.LittleEndian.PutUint64(want[:], hdr)
	for _, s := range ef.Sections {
		if s.Type != elf.SHT_PROGBITS || s.Flags&elf.SHF_WRITE == 0 || s.Flags&elf.SHF_ALLOC == 0 || s.Size > 64<<20 {
			continue
		}
		b, err := s.Data()
		if err != nil {
			continue
		}
		for i := 0; i+mdSize <= len(b); i += 8 {
			if bytes.Equal(b[i:i+8], want[:]) && valid(s.Addr+uint64(i)) {
				return read(s.Addr + uint64(i))
			}
		}
	}
	return moduledata{}
}

// relativeRelocs maps the address of every R_X86_64_RELATIVE relocation
// in .rela.dyn to the value the dynamic linker stores there (less the
// load bias). It is empty for binaries that are not position-independent.
func relativeRelocs(ef *elf.File) map[uint64]uint64 {
	out := map[uint64]uint64{}
	s := ef.Section(".rela.dyn")
	if s == nil || ef.Machine != elf.EM_X86_64 || s.Size > 256<<20 {
		return out
	}
	b, err := s.Data()
	if err != nil {
		return out
	}
	for i := 0; i+24 <= len(b); i += 24 {
		if elf.R_X86_64(binary.LittleEndian.Uint64(b[i+8:])&0xffffffff) == elf.R_X86_64_RELATIVE {
			out[binary.LittleEndian.Uint64(b[i:])] = binary.LittleEndian.Uint64(b[i+16:])
		}
	}
	return out
}

// covers reports whether vaddr lies in the table's Go code.
func (t *goTable) covers(vaddr uint64) bool {
	if t.legacy != nil {
		return t.legacy.PCToFunc(vaddr) != nil
	}
	return vaddr >= t.textStart && vaddr < t.textEnd
}

// goFunc is one runtime._func.
type goFunc struct {
	entry uint64
	raw   []byte // the _func and its pcdata and funcdata arrays
}

// lookup finds the function holding vaddr.
func (t *goTable) lookup(vaddr uint64) (goFunc, bool) {
	if !t.covers(vaddr) {
		return goFunc{}, false
	}
	le := binary.LittleEndian
	off := uint32(vaddr - t.textStart)
	// The last entry whose start is at or below off.
	i := sort.Search(t.nfunc, func(i int) bool { return le.Uint32(t.functab[8*i:]) > off }) - 1
	if i < 0 {
		return goFunc{}, false
	}
	foff := uint64(le.Uint32(t.functab[8*i+4:]))
	if foff+funcHeaderSize > uint64(len(t.funcs)) {
		return goFunc{}, false
	}
	raw := t.funcs[foff:]
	n := funcHeaderSize + 4*uint64(le.Uint32(raw[28:])) + 4*uint64(raw[43])
	if n > uint64(len(raw)) {
		return goFunc{}, false
	}
	return goFunc{entry: t.textStart + uint64(le.Uint32(raw)), raw: raw[:n]}, true
}

func (f goFunc) u32(off int) uint32 { return binary.LittleEndian.Uint32(f.raw[off:]) }

// pcdata returns the offset into pctab of table i, 0 when absent.
func (f goFunc) pcdata(i int) uint32 {
	if uint32(i) >= f.u32(28) {
		return 0
	}
	return f.u32(funcHeaderSize + 4*i)
}

// funcdata returns the offset from go:func.* of data i, and whether the
// function has it.
func (f goFunc) funcdata(i int) (uint32, bool) {
	if i >= int(f.raw[43]) {
		return 0, false
	}
	v := f.u32(funcHeaderSize + 4*int(f.u32(28)) + 4*i)
	return v, v != ^uint32(0)
}

// cstring reads a NUL-terminated string at off in the name or file table.
func cstring(tab []byte, off uint64) string {
	if off >= uint64(len(tab)) {
		return ""
	}
	b := tab[off:]
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// pcvalue evaluates the pc-value table at offset off for pc, as
// runtime.pcvalue does: pairs of a zig-zag value delta and a pc delta,
// starting from value -1 at the function's entry. ok is false when pc is
// past the table or the table is malformed.
func (t *goTable) pcvalue(f goFunc, off uint32, pc uint64) (val int32, ok bool) {
	if off == 0 || uint64(off) >= uint64(len(t.pctab)) {
		return -1, false
	}
	p := t.pctab[off:]
	cur, val := f.entry, int32(-1)
	for first := true; ; first = false {
		uv, n := binary.Uvarint(p)
		if n <= 0 || (uv == 0 && !first) {
			return -1, false
		}
		p = p[n:]
		d := uint32(uv)
		val += int32(-(d & 1) ^ (d >> 1))
		pd, n := binary.Uvarint(p)
		if n <= 0 {
			return -1, false
		}
		p = p[n:]
		cur += pd * t.quantum
		if pc < cur {
			return val, true
		}
	}
}

// position returns the file and line of pc in f: the innermost inlined
// code's position, as the runtime reports it.
func (t *goTable) position(f goFunc, pc uint64) (string, int) {
	line, ok := t.pcvalue(f, f.u32(24), pc)
	if !ok {
		return "", 0
	}
	fileno, ok := t.pcvalue(f, f.u32(20), pc)
	if !ok || fileno < 0 {
		return "", int(line)
	}
	idx := 4 * (uint64(f.u32(32)) + uint64(fileno))
	if idx+4 > uint64(len(t.cutab)) {
		return "", int(line)
	}
	foff := binary.LittleEndian.Uint32(t.cutab[idx:])
	if foff == ^uint32(0) {
		return "", int(line)
	}
	return cstring(t.filetab, uint64(foff)), int(line)
}

// symbolize returns the function holding vaddr and the source position of
// the innermost code there, like Object.Symbolize.
func (t *goTable) symbolize(vaddr uint64) (fn, file string, line int, ok bool) {
	defer func() {
		if recover() != nil { // a malformed table names nothing
			fn, file, line, ok = "", "", 0, false
		}
	}()
	if t.legacy != nil {
		file, line, f := t.legacy.PCToLine(vaddr)
		if f == nil {
			return "", "", 0, false
		}
		return f.Name, file, line, true
	}
	f, ok := t.lookup(vaddr)
	if !ok {
		return "", "", 0, false
	}
	file, line = t.position(f, vaddr)
	return cstring(t.names, uint64(f.u32(4))), file, line, true
}

// frames expands vaddr into its logical frames, innermost first, following
// the function's inline tree as runtime's inlineUnwinder does: the inline
// index at a pc names the inlined function there, and its parentPc is an
// instruction of the caller whose position is the call site. nil when
// vaddr is not Go code.
func (t *goTable) frames(vaddr uint64) (out []Frame) {
	defer func() {
		if recover() != nil {
			out = nil
		}
	}()
	fn, file, line, ok := t.symbolize(vaddr)
	if !ok {
		return nil
	}
	outer := Frame{Function: fn, File: file, Line: line}
	if t.legacy != nil || t.gofunc == 0 {
		return []Frame{outer}
	}
	f, _ := t.lookup(vaddr)
	tree, has := f.funcdata(funcdataInlTree)
	table := f.pcdata(pcdataInlTreeIndex)
	if !has || table == 0 {
		return []Frame{outer}
	}
	pc := vaddr
	for depth := 0; depth < maxInlineDepth; depth++ {
		idx, ok := t.pcvalue(f, table, pc)
		if !ok || idx < 0 {
			break
		}
		var call [inlinedCallSize]byte
		if t.read(t.gofunc+uint64(tree)+uint64(idx)*inlinedCallSize, call[:]) != inlinedCallSize {
			return []Frame{outer}
		}
		file, line := t.position(f, pc)
		name := cstring(t.names, uint64(binary.LittleEndian.Uint32(call[4:])))
		out = append(out, Frame{Function: name, File: file, Line: line, Inlined: true})
		parent := int64(int32(binary.LittleEndian.Uint32(call[8:])))
		if parent < 0 {
			return []Frame{outer}
		}
		pc = f.entry + uint64(parent)
	}
	if len(out) == 0 {
		return []Frame{outer}
	}
	file, line = t.position(f, pc)
	return append(out, Frame{Function: fn, File: file, Line: line})
}

// framed reports whether f ever has a stack frame, from its pcsp table
// (the stack pointer's distance from its value at entry, by pc). A Go
// function without one is a leaf that calls nothing, so it never appears
// as a caller on a stack, and the compiler gives it no frame pointer.
func (t *goTable) framed(f goFunc) bool {
	off := f.u32(16)
	if off == 0 || uint64(off) >= uint64(len(t.pctab)) {
		return false
	}
	p := t.pctab[off:]
	val := int32(-1)
	for first := true; ; first = false {
		uv, n := binary.Uvarint(p)
		if n <= 0 || (uv == 0 && !first) {
			return false
		}
		d := uint32(uv)
		val += int32(-(d & 1) ^ (d >> 1))
		if val > 0 {
			return true
		}
		_, m := binary.Uvarint(p[n:])
		if m <= 0 {
			return false
		}
		p = p[n+m:]
	}
}

// funcRanges lists the Go functions as (entry, size) pairs, for
// measuring frame pointers in a binary without ELF symbols. Functions
// that never set up a frame are left out (see framed).
func (t *goTable) funcRanges() [][2]uint64 {
	if t.legacy != nil {
		out := make([][2]uint64, 0, len(t.legacy.Funcs))
		for _, f := range t.legacy.Funcs {
			out = append(out, [2]uint64{f.Entry, f.End - f.Entry})
		}
		return out
	}
	le := binary.LittleEndian
	out := make([][2]uint64, 0, t.nfunc)
	for i := 0; i < t.nfunc; i++ {
		start, end := le.Uint32(t.functab[8*i:]), le.Uint32(t.functab[8*i+8:])
		if end <= start {
			continue
		}
		if f, ok := t.lookup(t.textStart + uint64(start)); ok && t.framed(f) {
			out = append(out, [2]uint64{t.textStart + uint64(start), uint64(end - start)})
		}
	}
	return out
}
