//go:build linux && amd64

package probe

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/leakscope/leakscope/probe/kernel"
	"github.com/leakscope/leakscope/probe/procfs"
	"github.com/leakscope/leakscope/probe/target"
	"github.com/leakscope/leakscope/probe/unwind"
)

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
	for _, m := range t.view.Current() {
		if !m.FileBacked() {
			continue
		}
		t.goCallbackRows(m)
		if _, done := t.view.UnwindSpan(m.Path); done {
			continue
		}
		if t.opts.Unwind == UnwindAuto && t.view.KeepsFramePointers(m) {
			t.view.SetUnwindSpan(m.Path, target.Span{})
			continue
		}
		t.view.SetUnwindSpan(m.Path, t.uploadRows(m))
	}
}

// goCallbackRows gives the crosscall2 of a Go binary mapped at m, once,
// the row that unwinds it (unwind.EntryRow): C code calls back into Go
// through it, and it has no unwind information of its own. A
// frame-pointer walk through it reads the C caller's %rbp as a return
// address; with the row the walk continues into the C caller and, through
// runtime.asmcgocall, to the Go code that called C.
func (t *Tracer) goCallbackRows(m procfs.Mapping) {
	if _, done := t.view.CallbackSpan(m.Path); done {
		return
	}
	t.view.SetCallbackSpan(m.Path, target.Span{})
	obj, ok := t.view.Loaded(m.Path)
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
	t.view.SetCallbackSpan(m.Path, t.writeRows(m, []unwind.Row{row, {PC: uint32(end), Rule: unwind.RuleUndefined}}))
}

func (t *Tracer) uploadRows(m procfs.Mapping) target.Span {
	rows, _, err := unwind.BuildFile(procfs.ObjectPath(t.pid, m))
	if err != nil || len(rows) == 0 {
		return target.Span{}
	}
	return t.writeRows(m, rows)
}

// writeRows appends rows, an object's, to the kernel's unwind_rows.
func (t *Tracer) writeRows(m procfs.Mapping, rows []unwind.Row) target.Span {
	start, err := t.objs.AppendUnwindRows(rows)
	if errors.Is(err, kernel.ErrUnwindFull) {
		t.warnOnce(fmt.Sprintf("unwind table full (%d rows): %s is walked with frame pointers only; raise --max-unwind-rows", t.opts.MaxUnwindRows, filepath.Base(m.Path)))
		return target.Span{}
	}
	if err != nil {
		t.warnOnce(fmt.Sprintf("write unwind rows of %s: %v", filepath.Base(m.Path), err))
		return target.Span{}
	}
	return target.Span{Start: start, Count: uint32(len(rows)), Use: true}
}
