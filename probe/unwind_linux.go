//go:build linux && amd64

package probe

import (
	"fmt"
	"path/filepath"

	"github.com/leakscope/leakscope/probe/procfs"
	"github.com/leakscope/leakscope/probe/unwind"
)

// unwindSpan is one object's rows in the kernel's unwind_rows table.
type unwindSpan struct {
	start, count uint32
	use          bool // RANGE_DWARF: walk this object with its rows
}

// loadUnwindLocked gives every newly mapped object that needs it its
// .eh_frame rows in the kernel, per the unwind mode: "auto" for objects
// without frame pointers, or with them only in some functions (both
// walked wrong by %rbp; in a Go binary, its C code decides), "dwarf" for
// all, "fp" for none. Rows are built once per object and never moved;
// when the table is full, later objects fall back to frame pointers and
// a warning says so.
func (t *Tracer) loadUnwindLocked() {
	if t.opts.Unwind == UnwindFP {
		return
	}
	for _, m := range t.view.current {
		if !m.FileBacked() {
			continue
		}
		t.goCallbackRows(m)
		if _, done := t.view.unwind[m.Path]; done {
			continue
		}
		if t.opts.Unwind == UnwindAuto && t.view.unwindClass(m) == fpYes {
			t.view.unwind[m.Path] = unwindSpan{}
			continue
		}
		t.view.unwind[m.Path] = t.uploadRows(m)
	}
}

// goCallbackRows gives the crosscall2 of a Go binary mapped at m, once,
// the row that unwinds it (unwind.EntryRow): C code calls back into Go
// through it, and it has no unwind information of its own. A
// frame-pointer walk through it reads the C caller's %rbp as a return
// address; with the row the walk continues into the C caller and, through
// runtime.asmcgocall, to the Go code that called C.
func (t *Tracer) goCallbackRows(m procfs.Mapping) {
	if _, done := t.view.callback[m.Path]; done {
		return
	}
	t.view.callback[m.Path] = unwindSpan{}
	obj, ok := t.view.objs[m.Path]
	if !ok || !obj.Go() {
		return
	}
	start, end, ok := obj.GoFunc("crosscall2")
	if !ok || end > 1<<32 {
		return
	}
	code := make([]byte, min(end-start, 256))
	row, ok := unwind.EntryRow(code[:obj.ReadCode(start, code)], start)
	if !ok {
		return
	}
	t.view.callback[m.Path] = t.writeRows(m, []unwind.Row{row, {PC: uint32(end), Rule: unwind.RuleUndefined}})
}

func (t *Tracer) uploadRows(m procfs.Mapping) unwindSpan {
	rows, _, err := unwind.BuildFile(procfs.ObjectPath(t.pid, m))
	if err != nil || len(rows) == 0 {
		return unwindSpan{}
	}
	return t.writeRows(m, rows)
}

// writeRows appends rows, an object's, to the kernel's unwind_rows.
func (t *Tracer) writeRows(m procfs.Mapping, rows []unwind.Row) unwindSpan {
	if uint64(t.rowNext)+uint64(len(rows)) > uint64(t.opts.MaxUnwindRows) {
		t.warnOnce(fmt.Sprintf("unwind table full (%d rows): %s is walked with frame pointers only; raise --max-unwind-rows", t.opts.MaxUnwindRows, filepath.Base(m.Path)))
		return unwindSpan{}
	}
	if err := t.objs.WriteUnwindRows(t.rowNext, rows); err != nil {
		t.warnOnce(fmt.Sprintf("write unwind rows of %s: %v", filepath.Base(m.Path), err))
		return unwindSpan{}
	}
	span := unwindSpan{start: t.rowNext, count: uint32(len(rows)), use: true}
	t.rowNext += uint32(len(rows))
	return span
}

// Unwound reports whether frames in m are walked with unwind rows
// (stacks.Mappings).
func (v *mappingView) Unwound(m procfs.Mapping) bool {
	return v.unwind[m.Path].use
}
