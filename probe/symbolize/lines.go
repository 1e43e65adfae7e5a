package symbolize

import (
	"cmp"
	"debug/dwarf"
	"errors"
	"io"
	"slices"
)

// lineRow is one row of a DWARF line table. A row covers the addresses
// from addr up to the next row's; line < 0 marks an end of sequence, after
// which no row covers anything until the next sequence starts.
type lineRow struct {
	addr uint64
	file uint32 // index into lineTable.files
	line int32
}

// lineTable is every line-table row of an object, sorted by address: the
// index built on the first Symbolize call that needs a line.
type lineTable struct {
	rows  []lineRow
	files []string
}

// newLineTable reads the line programs of all compilation units. Sequences
// that start at address 0 while 0 is not code (keepSeq says so) describe
// functions the linker discarded and are dropped, or they would claim the
// addresses of real code near the start of the object.
func newLineTable(d *dwarf.Data, keepSeq func(start uint64) bool) (lineTable, error) {
	var t lineTable
	fileIndex := map[string]uint32{}
	r := d.Reader()
	for {
		e, err := r.Next()
		if err != nil {
			return t, err
		}
		if e == nil {
			break
		}
		if e.Tag != dwarf.TagCompileUnit && e.Tag != dwarf.TagPartialUnit {
			r.SkipChildren()
			continue
		}
		lr, err := d.LineReader(e)
		r.SkipChildren()
		if err != nil || lr == nil {
			continue // a unit without a usable line table still leaves the others
		}
		var seq []lineRow
		for {
			var le dwarf.LineEntry
			err := lr.Next(&le)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				break
			}
			if le.EndSequence {
				if len(seq) > 0 && keepSeq(seq[0].addr) {
					t.rows = append(t.rows, seq...)
					t.rows = append(t.rows, lineRow{addr: le.Address, line: -1})
				}
				seq = seq[:0]
				continue
			}
			name := ""
			if le.File != nil {
				name = le.File.Name
			}
			fi, ok := fileIndex[name]
			if !ok {
				fi = uint32(len(t.files))
				fileIndex[name] = fi
				t.files = append(t.files, name)
			}
			seq = append(seq, lineRow{addr: le.Address, file: fi, line: int32(le.Line)})
		}
	}
	// Stable, and an end of sequence sorts before rows at the same address:
	// a sequence may begin exactly where the previous one ends.
	slices.SortStableFunc(t.rows, func(a, b lineRow) int {
		if c := cmp.Compare(a.addr, b.addr); c != 0 {
			return c
		}
		return cmp.Compare(min(a.line, 0), min(b.line, 0))
	})
	return t, nil
}

// lookup returns the file and line of the last row at or below vaddr, as
// addr2line does, or "", 0 outside every sequence.
func (t *lineTable) lookup(vaddr uint64) (string, int) {
	i, found := slices.BinarySearchFunc(t.rows, vaddr, func(r lineRow, v uint64) int { return cmp.Compare(r.addr, v) })
	if found {
		// Take the last of several rows at exactly vaddr.
		for i+1 < len(t.rows) && t.rows[i+1].addr == vaddr {
			i++
		}
	} else {
		i--
	}
	if i < 0 || t.rows[i].line < 0 {
		return "", 0
	}
	return t.files[t.rows[i].file], int(t.rows[i].line)
}
