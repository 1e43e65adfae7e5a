//go:build linux && amd64

package probe

import (
	"sort"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/probe/jvm"
	"github.com/leakscope/leakscope/probe/kernel"
	"github.com/leakscope/leakscope/probe/procfs"
	"github.com/leakscope/leakscope/probe/symbolize"
)

// Frame-pointer classes of an object (symbolize.FramePointerClass), plus
// "unknown" for anonymous executable memory such as JIT code.
const (
	fpYes     = "yes"
	fpNo      = "no"
	fpMixed   = "mixed"
	fpUnknown = "unknown"
)

// mappingView is leakscope's record of the target's executable mappings:
// the current ones, and every one ever seen, so frames in code that was
// unmapped (or a target that exited) still resolve.
type mappingView struct {
	pid     int
	cache   *symbolize.Cache
	current []procfs.Mapping
	history []procfs.Mapping
	fp      map[string]analyze.Object // by path as the target sees it
	objs    map[string]*symbolize.Object
	zlib    map[uint64]bool       // inodes of objects whose zlib is probed
	unwind  map[string]unwindSpan // by path: the object's rows in unwind_rows
	// callback holds, by path of a Go binary, the rows of its crosscall2
	// (goCallbackRows), where C calls back into Go.
	callback map[string]unwindSpan
	jvmCode  *jvm.Code // a JVM's code cache, once known
	gone     bool      // target exited: maps no longer readable
	// runtime and runtimeVersion describe the executable (detectRuntime);
	// "" until the mappings were first read.
	runtime        analyze.Runtime
	runtimeVersion string
	goModule       string // a Go executable's main module
}

func newMappingView(pid int, cache *symbolize.Cache) *mappingView {
	return &mappingView{pid: pid, cache: cache, fp: map[string]analyze.Object{}, objs: map[string]*symbolize.Object{}, zlib: map[uint64]bool{}, unwind: map[string]unwindSpan{}, callback: map[string]unwindSpan{}}
}

// newImage forgets the mappings after the target exec'd: the address space
// is new. What is known of objects (by path and inode: classes, unwind
// rows, zlib probes) still holds.
func (v *mappingView) newImage() {
	v.current, v.history = nil, nil
	v.runtime, v.runtimeVersion, v.goModule = "", "", ""
	v.gone = false
}

// refresh rereads /proc/PID/maps; changed reports whether the executable
// mappings differ from the last read.
func (v *mappingView) refresh() (changed bool, err error) {
	if v.gone {
		return false, nil
	}
	maps, err := procfs.ReadMaps(v.pid)
	if err != nil {
		v.gone = true
		return false, err
	}
	var exec []procfs.Mapping
	for _, m := range maps {
		if m.Exec() && m.Path != "[vsyscall]" {
			exec = append(exec, m)
		}
	}
	if len(exec) == 0 {
		// An exited (zombie) process has an empty map: keep what we had.
		return false, nil
	}
	if equalMappings(exec, v.current) {
		return false, nil
	}
	v.current = exec
	for _, m := range exec {
		if !containsMapping(v.history, m) {
			v.history = append(v.history, m)
			v.classify(m)
		}
	}
	v.detectRuntime()
	return true, nil
}

func equalMappings(a, b []procfs.Mapping) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func containsMapping(ms []procfs.Mapping, m procfs.Mapping) bool {
	for _, x := range ms {
		if x == m {
			return true
		}
	}
	return false
}

// classify records the object's frame-pointer class the first time it is seen.
func (v *mappingView) classify(m procfs.Mapping) {
	if !m.FileBacked() {
		return
	}
	if _, ok := v.fp[m.Path]; ok {
		return
	}
	o := analyze.Object{Path: m.Path, FramePointer: fpUnknown}
	if obj, err := v.cache.Object(procfs.ObjectPath(v.pid, m)); err == nil {
		v.objs[m.Path] = obj // opened while the target is alive
		share, funcs := obj.FramePointerShare()
		o.BuildID = obj.BuildID
		o.FPShare = share
		o.FramePointer = symbolize.FramePointerClass(share, funcs)
	}
	v.fp[m.Path] = o
}

// unwindClass is the frame-pointer class that decides whether the object
// behind m is walked with its unwind rows: fpClass, or for a Go binary the
// class of its C code alone (its Go code is always walked by frame
// pointers, splitGo); yes for one without C code, which has no rows to
// walk with.
func (v *mappingView) unwindClass(m procfs.Mapping) string {
	if o, ok := v.objs[m.Path]; ok && o.Go() {
		share, funcs := o.CFramePointerShare()
		if funcs == 0 {
			return fpYes
		}
		return symbolize.FramePointerClass(share, funcs)
	}
	return v.fpClass(m)
}

// NoFramePointers reports whether the object behind m is known to keep
// no frame pointers (stacks.Mappings).
func (v *mappingView) NoFramePointers(m procfs.Mapping) bool { return v.fpClass(m) == fpNo }

// Seen counts the mappings ever seen (stacks.Mappings).
func (v *mappingView) Seen() int { return len(v.history) }

// DebugGeneration is the symbol cache's (stacks.Mappings).
func (v *mappingView) DebugGeneration() uint64 { return v.cache.DebugGeneration() }

// fpClass is the frame-pointer class of the object behind m.
func (v *mappingView) fpClass(m procfs.Mapping) string {
	if o, ok := v.fp[m.Path]; ok {
		return o.FramePointer
	}
	return fpUnknown
}

// execRanges is the kernel's range table: current executable mappings,
// sorted by start, flagged where a frame-pointer walk may continue. Objects
// without frame pointers stop the walk; anonymous code (JIT) is walked with
// the kernel's sanity checks and validated here afterwards.
func (v *mappingView) execRanges() []kernel.Range {
	rs := make([]kernel.Range, 0, len(v.current))
	for i, m := range v.current {
		r := kernel.Range{Start: m.Start, End: m.End, Object: uint32(i)}
		if v.fpClass(m) != fpNo {
			r.Flags |= kernel.RangeHasFP
		}
		if m.Inode != 0 && v.zlib[m.Inode] {
			r.Flags |= kernel.RangeZlib
		}
		if v.goCode(m.Path) {
			r.Flags |= kernel.RangeGo
		}
		if span, ok := v.unwind[m.Path]; ok && span.use {
			r.Flags |= kernel.RangeDWARF
			r.RowStart, r.RowCount = span.start, span.count
			if obj, err := v.Object(m); err == nil {
				r.Bias = m.Start - obj.VAddr(m.Start, m.Start, m.Offset)
			}
		}
		rs = append(rs, r)
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].Start < rs[j].Start })
	for _, m := range v.current {
		rs = v.splitGo(rs, m)
	}
	if c := v.jvmCode; c != nil {
		for i := range rs {
			if rs[i].Start >= c.Cache[0] && rs[i].End <= c.Cache[1] {
				rs[i].Flags |= kernel.RangeJVMCode
			}
		}
		rs = splitRange(rs, c.Interpreter[0], c.Interpreter[1], kernel.RangeJVMInterp|kernel.RangeHasFP)
	}
	return rs
}

// splitGo gives the Go code of a Go binary mapped at m ranges of its own,
// walked by frame pointers whatever the rest of the object (its C code)
// is walked with: Go keeps them in every function with a frame, and its
// .eh_frame describes only the C code. runtime.asmcgocall, where C frames
// return into Go from the system stack, is flagged RANGE_GO_CGOCALL: the
// walk switches to the goroutine's stack there (go_stack_switch in
// ebpf/walk.bpf.h). crosscall2, where C calls back into Go, is walked
// with the rows goCallbackRows made for it: the frame-pointer chain it
// keeps passes through a slot holding the C caller's %rbp.
func (v *mappingView) splitGo(rs []kernel.Range, m procfs.Mapping) []kernel.Range {
	if !v.goCode(m.Path) {
		return rs
	}
	obj, err := v.Object(m)
	if err != nil {
		return rs
	}
	bias := m.Start - obj.VAddr(m.Start, m.Start, m.Offset)
	goFlags := kernel.RangeHasFP | kernel.RangeGo
	if start, end, ok := obj.GoText(); ok && start+bias >= m.Start && end+bias <= m.End {
		rs = splitRange(rs, start+bias, end+bias, goFlags)
	}
	if start, end, ok := obj.GoFunc("runtime.asmcgocall"); ok && start+bias >= m.Start && end+bias <= m.End {
		rs = splitRange(rs, start+bias, end+bias, goFlags|kernel.RangeGoCgocall)
	}
	if span := v.callback[m.Path]; span.use {
		if start, end, ok := obj.GoFunc("crosscall2"); ok && start+bias >= m.Start && end+bias <= m.End {
			rs = splitRange(rs, start+bias, end+bias, goFlags|kernel.RangeDWARF)
			for i := range rs {
				if rs[i].Start == start+bias {
					rs[i].RowStart, rs[i].RowCount, rs[i].Bias = span.start, span.count, bias
				}
			}
		}
	}
	return rs
}

// splitRange gives [start, end), inside one range of rs (sorted), a range
// of its own with flags: the rest of the range it was in keeps its own.
func splitRange(rs []kernel.Range, start, end uint64, flags uint32) []kernel.Range {
	for i, r := range rs {
		if start < r.Start || end > r.End {
			continue
		}
		mid := r
		mid.Start, mid.End, mid.Flags = start, end, flags
		parts := []kernel.Range{}
		if r.Start < start {
			lo := r
			lo.End = start
			parts = append(parts, lo)
		}
		parts = append(parts, mid)
		if end < r.End {
			hi := r
			hi.Start = end
			parts = append(parts, hi)
		}
		out := append(append(append([]kernel.Range{}, rs[:i]...), parts...), rs[i+1:]...)
		return out
	}
	return rs
}

// Lookup finds the mapping that holds addr, preferring current mappings.
func (v *mappingView) Lookup(addr uint64) (procfs.Mapping, bool) {
	for _, set := range [][]procfs.Mapping{v.current, v.history} {
		for _, m := range set {
			if addr >= m.Start && addr < m.End {
				return m, true
			}
		}
	}
	return procfs.Mapping{}, false
}

// Object returns the ELF object behind a file-backed mapping, as opened
// when the mapping was first seen: /proc/PID/root is gone once the target
// exits.
func (v *mappingView) Object(m procfs.Mapping) (*symbolize.Object, error) {
	if o, ok := v.objs[m.Path]; ok {
		return o, nil
	}
	return v.cache.Object(procfs.ObjectPath(v.pid, m))
}

// objects lists every object seen, sorted by path.
func (v *mappingView) objects(allocator string) []analyze.Object {
	out := make([]analyze.Object, 0, len(v.fp))
	for _, o := range v.fp {
		o.Allocator = o.Path == allocator
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}
