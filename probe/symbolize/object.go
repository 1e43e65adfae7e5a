package symbolize

import (
	"cmp"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/leakscope/leakscope/probe/procfs"
)

// Object is one parsed ELF object (executable, shared library or its
// separate debug file's contents merged in). It keeps the file open to read
// code bytes; Cache.Close closes it. Methods are safe for concurrent use.
type Object struct {
	// BuildID is the GNU build ID in lowercase hex, "" when the object has
	// none. Objects with equal build IDs are the same object.
	BuildID string
	// Path is the path the object was first opened from; another path to
	// the same build ID returns this Object unchanged.
	Path string
	// DebugPath is the separate debug file that supplied symbols or DWARF,
	// "" when none was used.
	DebugPath string
	// GoVersion is the Go toolchain that built the object ("go1.26.8"),
	// from its .go.buildinfo; "" when it is not a Go binary.
	GoVersion string
	// GoModule is the path of the Go binary's main module
	// ("github.com/acme/server"; "command-line-arguments" for a build of
	// files), from its .go.buildinfo; "" when unknown.
	GoModule string

	machine  elf.Machine
	file     *os.File
	loads    []elf.ProgHeader // PT_LOAD segments sorted by file offset
	sections []elf.SectionHeader
	syms     symtab
	funcs    funcIndex
	gotab    *goTable // nil unless a Go binary's .gopclntab was read

	lines lineIndex

	// cache is the Cache the object was opened through, nil for none:
	// it fetches the object's debug file when Symbolize needs one
	// (askDebug).
	cache *Cache
	// needSyms and needLines are set by load when the object lacks
	// .symtab or DWARF and no local debug file supplied them; wantDebug
	// when either is and the object has a build ID to fetch one by.
	needSyms, needLines, wantDebug bool
	debug                          debugState
	// fetched holds what a debug file fetched after load supplied: nil
	// until it arrived. Set once, read without locks.
	fetched atomic.Pointer[fetchedNames]

	fpOnce  sync.Once
	fpShare float64
	fpFuncs int
	// fpShareC and fpFuncsC are FramePointerShare over the functions
	// outside the object's Go code (CFramePointerShare).
	fpShareC float64
	fpFuncsC int
}

// openObject reads path and the separate debug file found for it under
// root (see findDebugFile). It returns the object, or the build ID alone
// with a nil object when seen reports that build ID as already loaded.
func openObject(path, root string, seen func(id string) *Object) (*Object, error) {
	f, err := procfs.OpenFile(nil, path, procfs.ObjectLimits)
	if err != nil {
		return nil, err // it already says "open <path>: ..."
	}
	o := &Object{Path: path, file: f}
	keep := false
	defer func() {
		if !keep {
			o.close()
		}
	}()
	var ef *elf.File
	err = safely("parse elf "+path, func() error {
		var err error
		if ef, err = elf.NewFile(f); err != nil {
			return fmt.Errorf("parse elf %s: %w", path, err)
		}
		if o.BuildID, err = buildID(ef); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if prev := seen(o.BuildID); prev != nil {
		return prev, nil
	}
	err = safely("parse elf "+path, func() error { return o.load(ef, root) })
	if err != nil {
		return nil, err
	}
	keep = true
	return o, nil
}

// load reads segments, sections and symbols, completing them from a
// separate debug file when the object lacks .symtab or DWARF.
func (o *Object) load(ef *elf.File, root string) error {
	o.machine = ef.Machine
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD {
			o.loads = append(o.loads, p.ProgHeader)
		}
	}
	slices.SortFunc(o.loads, func(a, b elf.ProgHeader) int { return cmp.Compare(a.Off, b.Off) })
	for _, s := range ef.Sections {
		if s.Flags&elf.SHF_ALLOC != 0 && s.Size > 0 {
			o.sections = append(o.sections, s.SectionHeader)
		}
	}

	symSyms, err := ef.Symbols()
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		return fmt.Errorf("read symbols of %s: %w", o.Path, err)
	}
	dynSyms, err := ef.DynamicSymbols()
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		return fmt.Errorf("read dynamic symbols of %s: %w", o.Path, err)
	}
	if hasDWARF(ef) {
		o.lines.elf = ef
	}

	if symSyms == nil || o.lines.elf == nil {
		link, _ := readDebuglink(ef) // a bad debuglink only loses the debug file
		if d := findDebugFile(o.Path, root, o.BuildID, link); d != nil {
			used := false
			if symSyms == nil {
				if s, err := d.elf.Symbols(); err == nil {
					symSyms, used = s, true
				}
			}
			if o.lines.elf == nil && hasDWARF(d.elf) {
				o.lines.elf, o.lines.debug, used = d.elf, d, true
			}
			if used {
				o.DebugPath = d.path
			}
			if o.lines.debug == nil {
				d.close()
			}
		}
	}
	o.needSyms, o.needLines = symSyms == nil, o.lines.elf == nil
	o.wantDebug = o.BuildID != "" && (o.needSyms || o.needLines)
	o.syms = newSymtab(symSyms, dynSyms)
	o.funcs = newFuncIndex(symSyms, dynSyms)
	o.loadGo(ef, symSyms)
	return nil
}

// hasDWARF reports whether f carries DWARF line information of its own,
// rather than NOBITS placeholders.
func hasDWARF(f *elf.File) bool {
	for _, name := range []string{".debug_info", ".zdebug_info"} {
		if s := f.Section(name); s != nil && s.Type != elf.SHT_NOBITS && s.Size > 0 {
			return true
		}
	}
	return false
}

func (o *Object) close() {
	o.file.Close()
	o.lines.debug.close()
	if f := o.fetched.Load(); f != nil && f.lines != nil {
		f.lines.debug.close()
	}
}

// Symbolize returns the function containing vaddr (demangled), and the
// source file and line from DWARF. vaddr is an ELF virtual address; see
// VAddr. Empty results mean unknown: function "" when no symbol covers
// vaddr, file "" and line 0 when the object has no line information for it.
//
// file is as the DWARF line table names it: usually absolute, but relative
// to the compilation directory for some builds (libc's "malloc/malloc.c").
// The line is that of the innermost inlined code at vaddr while the
// function is the symbol, so for inlined calls the file may be a header
// and not the function's own source file. For a return address, pass the
// return address minus 1 to get the line of the call.
//
// In a Go binary, Go code is named from .gopclntab (see Frames), which
// stripping does not remove, with Go's names (main.(*connTable).open);
// C code linked in through cgo is named from the ELF symbols as usual.
func (o *Object) Symbolize(vaddr uint64) (function, file string, line int) {
	// A line without a file (corrupt debug data) says nothing.
	defer func() {
		if file == "" || line < 0 {
			line = 0
		}
	}()
	if o.wantDebug {
		o.askDebug()
	}
	if o.gotab != nil {
		if fn, file, line, ok := o.gotab.symbolize(vaddr); ok {
			return fn, file, line
		}
	}
	syms, lines := &o.syms, &o.lines
	if f := o.fetched.Load(); f != nil {
		if f.syms != nil {
			syms = f.syms
		}
		if f.lines != nil {
			lines = f.lines
		}
	}
	if s, ok := syms.lookup(vaddr, o.sectionOf); ok {
		function = demangled(unversioned(s.name))
	}
	file, line = lines.lookup(o, vaddr)
	return function, file, line
}

// lineIndex is an object's line table, built from the DWARF of elf on
// first use: it can take seconds and hundreds of megabytes for large C++
// libraries, and most objects on a stack never need it.
type lineIndex struct {
	once  sync.Once
	elf   *elf.File  // source of DWARF, nil when none; dropped once indexed
	debug *debugFile // the separate debug file elf was read from, if any
	table lineTable
}

// lookup returns the file and line of vaddr in o.
func (li *lineIndex) lookup(o *Object, vaddr uint64) (string, int) {
	li.once.Do(func() { li.build(o) })
	return li.table.lookup(vaddr)
}

func (li *lineIndex) build(o *Object) {
	if li.elf == nil {
		return
	}
	defer func() {
		li.elf = nil
		li.debug.close()
		li.debug = nil
	}()
	_ = safely("read dwarf", func() error {
		d, err := li.elf.DWARF()
		if err != nil {
			return err
		}
		// Keep what was read before a malformed unit.
		li.table, _ = newLineTable(d, func(start uint64) bool { return start != 0 || o.isCode(0) })
		return nil
	})
}

// sectionOf returns the index of the allocated section holding vaddr, or
// -1 when none does.
func (o *Object) sectionOf(vaddr uint64) int {
	for i, s := range o.sections {
		if s.Addr <= vaddr && vaddr-s.Addr < s.Size {
			return i
		}
	}
	return -1
}

// isCode reports whether vaddr lies in the file-backed part of an
// executable PT_LOAD segment.
func (o *Object) isCode(vaddr uint64) bool {
	p := o.segment(vaddr)
	return p != nil && p.Flags&elf.PF_X != 0
}

// segment returns the PT_LOAD segment whose file-backed part holds vaddr.
func (o *Object) segment(vaddr uint64) *elf.ProgHeader {
	for i := range o.loads {
		p := &o.loads[i]
		if p.Vaddr <= vaddr && vaddr-p.Vaddr < p.Filesz {
			return p
		}
	}
	return nil
}

// ReadCode is readCode: up to len(buf) bytes of the object's code at
// vaddr, as its file holds them.
func (o *Object) ReadCode(vaddr uint64, buf []byte) int { return o.readCode(vaddr, buf) }

// readCode reads up to len(buf) bytes of the object's file image at vaddr,
// stopping at the end of the segment. It returns the count read.
func (o *Object) readCode(vaddr uint64, buf []byte) int {
	p := o.segment(vaddr)
	if p == nil {
		return 0
	}
	off := vaddr - p.Vaddr
	if avail := p.Filesz - off; uint64(len(buf)) > avail {
		buf = buf[:avail]
	}
	if p.Off+off > 1<<62 {
		return 0
	}
	n, _ := o.file.ReadAt(buf, int64(p.Off+off))
	return n
}

// VAddr converts addr, a runtime address inside a mapping of this object
// that starts at mapStart and maps the file from byte mapOffset (the Start
// and Offset of a procfs.Mapping), to the ELF virtual address that
// Symbolize, Lookup and the symbol tables use.
//
// The file offset addr-mapStart+mapOffset is located in the PT_LOAD
// segment whose file range holds it, and translated with that segment's
// vaddr-offset difference; this is correct for PIE and non-PIE
// executables and shared libraries alike, whatever the load bias. The
// dynamic loader maps a segment from the page holding its first byte, so
// an offset in that page but before the segment still belongs to it; an
// offset outside every segment is translated with the nearest segment
// below it, or returned unchanged when there is none.
func (o *Object) VAddr(addr, mapStart, mapOffset uint64) uint64 {
	off := addr - mapStart + mapOffset
	page := uint64(os.Getpagesize())
	var below *elf.ProgHeader
	for i := range o.loads {
		p := &o.loads[i]
		mapped := p.Off &^ (page - 1) // where the loader's mapping starts
		if mapped > off {
			break // sorted by offset
		}
		if off-mapped < p.Off-mapped+p.Filesz {
			return p.Vaddr + (off - p.Off)
		}
		if p.Off <= off {
			below = p
		}
	}
	if below == nil {
		return off
	}
	return below.Vaddr + (off - below.Off)
}

// unversioned drops a .symtab symbol-version suffix: glibc's
// "__libc_start_main@@GLIBC_2.34" is __libc_start_main.
func unversioned(name string) string {
	if i := strings.IndexByte(name, '@'); i > 0 {
		return name[:i]
	}
	return name
}
