package unwind

import (
	"cmp"
	"debug/elf"
	"errors"
	"fmt"
	"slices"

	"github.com/leakscope/leakscope/probe/procfs"
)

// Errors callers can match with errors.Is.
var (
	// ErrNoFrames means the object has neither .eh_frame nor .debug_frame;
	// the walker can only fall back to frame pointers there.
	ErrNoFrames = errors.New("no .eh_frame or .debug_frame")
	// ErrHighAddress means the object has code at or above 4 GiB, which
	// Row.PC cannot hold.
	ErrHighAddress = errors.New("code above 4 GiB")
)

// Stats describes how a table was built.
type Stats struct {
	Section     string // ".eh_frame" or ".debug_frame"
	CIEs        int    // CIEs parsed
	FDEs        int    // FDEs whose rows are in the table
	Skipped     int    // FDEs left out: empty, outside executable segments, or hidden by an overlapping FDE
	Overlaps    int    // FDEs cut short because the next one starts inside them
	Rows        int    // len of the table
	Unsupported int    // rows with RuleUnsupported
	PLT         int    // rows with RulePLT
	Gaps        int    // RuleUndefined rows closing an FDE that the next FDE does not adjoin
	Outermost   int    // rows that stop because the return address is undefined (_start, thread entry)

	// Reasons counts why rows are RuleUnsupported, per row as the CFA
	// programs produce them, before neighbours are merged: "signal frame",
	// "cfa register", "cfa expression", "rbp offset range", ...
	Reasons map[string]int
}

// span is a half-open range of vaddrs.
type span struct{ start, end uint64 }

// source is a call frame section and what Build knows about its object.
type source struct {
	arch  *archRegs // nil: x86-64
	data  []byte
	addr  uint64 // the section's vaddr, the base of pcrel pointers
	debug bool   // .debug_frame layout rather than .eh_frame
	text  []span // executable segments; FDEs outside them are dropped (none: keep all)
}

// Build returns the unwind table of an x86-64 ELF executable or shared
// object, from .eh_frame, or from .debug_frame when there is no .eh_frame
// (as in some stripped-down objects and separate debug files). It needs no
// .eh_frame_hdr. The rows are sorted by PC; see Row for the format.
func Build(f *elf.File) ([]Row, Stats, error) {
	if f.Class != elf.ELFCLASS64 || f.Machine != elf.EM_X86_64 {
		return nil, Stats{}, fmt.Errorf("%v %v object: only x86-64 is supported", f.Class, f.Machine)
	}
	src, err := sourceOf(f)
	if err != nil {
		return nil, Stats{}, err
	}
	return build(src)
}

// sourceOf finds f's call frame section and executable segments.
func sourceOf(f *elf.File) (source, error) {
	if f.Type == elf.ET_REL {
		return source{}, errors.New("relocatable object: call frame addresses are not yet relocated")
	}
	var src source
	sec := f.Section(".eh_frame")
	if !usable(sec) {
		sec = f.Section(".debug_frame")
		src.debug = true
	}
	if !usable(sec) {
		return source{}, ErrNoFrames
	}
	for _, p := range f.Progs {
		if p.Type != elf.PT_LOAD || p.Flags&elf.PF_X == 0 {
			continue
		}
		s := span{p.Vaddr, p.Vaddr + p.Memsz}
		if s.end > 1<<32 || s.end < s.start {
			return source{}, fmt.Errorf("executable segment %#x-%#x: %w", s.start, s.end, ErrHighAddress)
		}
		src.text = append(src.text, s)
	}
	data, err := sec.Data()
	if err != nil {
		return source{}, fmt.Errorf("read %s: %w", sec.Name, err)
	}
	src.data, src.addr = data, sec.Addr
	return src, nil
}

// usable reports whether s holds call frame information in the file.
func usable(s *elf.Section) bool {
	return s != nil && s.Type != elf.SHT_NOBITS && s.Size > 0
}

// BuildFile opens the ELF object at path and returns Build's table. It reads
// only the headers and the one call frame section, and the table depends on
// nothing but the file's bytes, so callers may cache it by build ID.
func BuildFile(path string) ([]Row, Stats, error) {
	f, err := procfs.OpenELF(path)
	if err != nil {
		return nil, Stats{}, err
	}
	defer f.Close()
	rows, st, err := Build(f.File)
	if err != nil {
		return nil, st, fmt.Errorf("unwind %s: %w", path, err)
	}
	return rows, st, nil
}

// build turns one call frame section of an x86-64 object into a table of
// Rows.
func build(src source) ([]Row, Stats, error) {
	src.arch = archX86_64
	return buildTable(src, (*interp).row)
}

// buildTable turns one call frame section into a table of rows made by
// conv from each location's state.
func buildTable[R tableRow[R]](src source, conv func(*interp) (R, string)) ([]R, Stats, error) {
	st := Stats{Section: ".eh_frame", Reasons: map[string]int{}}
	if src.debug {
		st.Section = ".debug_frame"
	}
	fr, err := parseFrames(src.data, src.addr, src.debug)
	if err != nil {
		return nil, st, err
	}
	st.CIEs = fr.cies
	fdes := fr.fdes[:0]
	for _, f := range fr.fdes {
		if f.end == f.start || (len(src.text) > 0 && !inside(src.text, f.start, f.end)) {
			st.Skipped++
			continue
		}
		if f.end > 1<<32 {
			return nil, st, fmt.Errorf("%s: FDE at %#x: range %#x-%#x: %w", st.Section[1:], f.off, f.start, f.end, ErrHighAddress)
		}
		fdes = append(fdes, f)
	}
	// Linkers keep input order; sort so neighbours are neighbours in memory.
	slices.SortStableFunc(fdes, func(a, b fde) int { return cmp.Compare(a.start, b.start) })

	w := writer[R]{rows: make([]R, 0, 4*len(fdes)+1), reasons: st.Reasons}
	it := interp{arch: src.arch}
	var z R
	for i := range fdes {
		f := &fdes[i]
		end, next := f.end, uint64(1<<32)
		if i+1 < len(fdes) {
			next = fdes[i+1].start
		}
		if next < end {
			end = next
			st.Overlaps++
		}
		if end == f.start {
			st.Skipped++
			continue
		}
		st.FDEs++
		run(&it, f, end, src.addr, &w, conv)
		if end != next && end < 1<<32 && w.emit(z.stop(classUndefined).at(uint32(end))) {
			st.Gaps++
		}
	}
	for _, r := range w.rows {
		switch r.class() {
		case classUnsupported:
			st.Unsupported++
		case classPLT:
			st.PLT++
		}
	}
	st.Rows = len(w.rows)
	st.Outermost = w.outermost
	return w.rows, st, nil
}

// inside reports whether [start, end) lies within one of spans.
func inside(spans []span, start, end uint64) bool {
	for _, s := range spans {
		if s.start <= start && end <= s.end {
			return true
		}
	}
	return false
}
