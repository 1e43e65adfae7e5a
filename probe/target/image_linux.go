//go:build linux && amd64

package target

import (
	"os"
	"sort"
	"strconv"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/probe/jvm"
	"github.com/leakscope/leakscope/probe/kernel"
	"github.com/leakscope/leakscope/probe/procfs"
	"github.com/leakscope/leakscope/probe/symbolize"
)

// Frame-pointer classes of an object (analyze.Object.FramePointer, as
// symbolize.FramePointerClass names them), plus "unknown" for one that
// could not be read.
const (
	FPYes     = "yes"
	FPNo      = "no"
	FPMixed   = "mixed"
	FPUnknown = "unknown"
)

// Image is what leakscope knows of one traced process image (the program
// a process runs, until it execs another): its executable mappings, the
// current ones and every one ever seen, so frames in code that was
// unmapped (or a target that exited) still resolve; the ELF object and
// frame-pointer class behind each; its runtime (native or Go; a JVM's
// code cache once known); and what the kernel was told of each object
// (zlib probed, unwind rows), from which Ranges makes the kernel's range
// table. It is the stack resolver's stacks.Mappings. An Image is not safe
// for concurrent use.
type Image struct {
	pid     int
	cache   *symbolize.Cache
	current []procfs.Mapping
	history []procfs.Mapping
	fp      map[string]analyze.Object // by path as the target sees it
	objs    map[string]*symbolize.Object
	zlib    map[uint64]bool // objects whose zlib is probed, by inode: whether their streams' bytes are computed
	unwind  map[string]Span // by path: the object's rows in unwind_rows
	// callback holds, by path of a Go binary, the rows of its crosscall2,
	// where C calls back into Go.
	callback map[string]Span
	jvmCode  *jvm.Code // a JVM's code cache, once known
	gone     bool      // target exited: maps no longer readable
	// runtime and runtimeVersion describe the executable (detectRuntime);
	// "" until the mappings were first read.
	runtime        analyze.Runtime
	runtimeVersion string
	goModule       string // a Go executable's main module
}

// Span is one object's rows in the kernel's unwind_rows table.
type Span struct {
	Start, Count uint32
	Use          bool // RANGE_DWARF: walk this object with its rows
}

// New returns the image of process pid, its objects opened through cache;
// nothing is read until Refresh.
func New(pid int, cache *symbolize.Cache) *Image {
	return &Image{pid: pid, cache: cache, fp: map[string]analyze.Object{}, objs: map[string]*symbolize.Object{}, zlib: map[uint64]bool{}, unwind: map[string]Span{}, callback: map[string]Span{}}
}

// Exec forgets the mappings after the process exec'd: the address space
// is new. What is known of objects (by path and inode: classes, unwind
// rows, zlib probes) still holds.
func (v *Image) Exec() {
	v.current, v.history = nil, nil
	v.runtime, v.runtimeVersion, v.goModule = "", "", ""
	v.gone = false
}

// Refresh rereads /proc/PID/maps; changed reports whether the executable
// mappings differ from the last read.
func (v *Image) Refresh() (changed bool, err error) {
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
			v.Classify(m)
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

// Classify records the frame-pointer class of the object behind m the
// first time it is seen: Refresh does for every mapping it finds, the
// tracer for an object it prepares before the process maps it.
func (v *Image) Classify(m procfs.Mapping) {
	if !m.FileBacked() {
		return
	}
	if _, ok := v.fp[m.Path]; ok {
		return
	}
	o := analyze.Object{Path: m.Path, FramePointer: FPUnknown}
	if obj, err := v.cache.Object(procfs.ObjectPath(v.pid, m)); err == nil {
		v.objs[m.Path] = obj // opened while the target is alive
		share, funcs := obj.FramePointerShare()
		o.BuildID = obj.BuildID
		o.FPShare = share
		o.FramePointer = symbolize.FramePointerClass(share, funcs)
	}
	v.fp[m.Path] = o
}

// KeepsFramePointers reports whether the object behind m keeps frame
// pointers wherever the walk needs them, so that its unwind rows add
// nothing: its class (or for a Go binary the class of its C code alone:
// its Go code is always walked by frame pointers, splitGo) is yes.
func (v *Image) KeepsFramePointers(m procfs.Mapping) bool { return v.unwindClass(m) == FPYes }

// unwindClass is the frame-pointer class that decides whether the object
// behind m is walked with its unwind rows: fpClass, or for a Go binary the
// class of its C code alone; yes for one without C code, which has no rows
// to walk with.
func (v *Image) unwindClass(m procfs.Mapping) string {
	if o, ok := v.objs[m.Path]; ok && o.Go() {
		share, funcs := o.CFramePointerShare()
		if funcs == 0 {
			return FPYes
		}
		return symbolize.FramePointerClass(share, funcs)
	}
	return v.fpClass(m)
}

// NoFramePointers reports whether the object behind m is known to keep
// no frame pointers (stacks.Mappings).
func (v *Image) NoFramePointers(m procfs.Mapping) bool { return v.fpClass(m) == FPNo }

// Seen counts the mappings ever seen (stacks.Mappings).
func (v *Image) Seen() int { return len(v.history) }

// DebugGeneration is the symbol cache's (stacks.Mappings).
func (v *Image) DebugGeneration() uint64 { return v.cache.DebugGeneration() }

// fpClass is the frame-pointer class of the object behind m.
func (v *Image) fpClass(m procfs.Mapping) string {
	if o, ok := v.fp[m.Path]; ok {
		return o.FramePointer
	}
	return FPUnknown
}

// Ranges is the kernel's range table: current executable mappings,
// sorted by start, flagged where a frame-pointer walk may continue. Objects
// without frame pointers stop the walk; anonymous code (JIT) is walked with
// the kernel's sanity checks and validated in user space afterwards.
func (v *Image) Ranges() []kernel.Range {
	rs := make([]kernel.Range, 0, len(v.current))
	for i, m := range v.current {
		r := kernel.Range{Start: m.Start, End: m.End, Object: uint32(i)}
		if v.fpClass(m) != FPNo {
			r.Flags |= kernel.RangeHasFP
		}
		if computed, ok := v.zlib[m.Inode]; ok && m.Inode != 0 {
			r.Flags |= kernel.RangeZlib
			if computed {
				r.Flags |= kernel.RangeZlibComputed
			}
		}
		if v.goCode(m.Path) {
			r.Flags |= kernel.RangeGo
		}
		if span, ok := v.unwind[m.Path]; ok && span.Use {
			r.Flags |= kernel.RangeDWARF
			r.RowStart, r.RowCount = span.Start, span.Count
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
		// Compiled code keeps frame pointers under
		// -XX:+PreserveFramePointer: walked by them (as anonymous code
		// is), a frame costs no read of its code blob.
		for i := range rs {
			if !c.FramePointers && rs[i].Start >= c.Cache[0] && rs[i].End <= c.Cache[1] {
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
// with the rows the tracer made for it (SetCallbackSpan): the frame-pointer chain it
// keeps passes through a slot holding the C caller's %rbp.
func (v *Image) splitGo(rs []kernel.Range, m procfs.Mapping) []kernel.Range {
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
	if span := v.callback[m.Path]; span.Use {
		if start, end, ok := obj.GoFunc("crosscall2"); ok && start+bias >= m.Start && end+bias <= m.End {
			rs = splitRange(rs, start+bias, end+bias, goFlags|kernel.RangeDWARF)
			for i := range rs {
				if rs[i].Start == start+bias {
					rs[i].RowStart, rs[i].RowCount, rs[i].Bias = span.Start, span.Count, bias
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
func (v *Image) Lookup(addr uint64) (procfs.Mapping, bool) {
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
func (v *Image) Object(m procfs.Mapping) (*symbolize.Object, error) {
	if o, ok := v.objs[m.Path]; ok {
		return o, nil
	}
	return v.cache.Object(procfs.ObjectPath(v.pid, m))
}

// Objects lists every object seen, sorted by path, the allocator marked.
func (v *Image) Objects(allocator string) []analyze.Object {
	out := make([]analyze.Object, 0, len(v.fp))
	for _, o := range v.fp {
		o.Allocator = o.Path == allocator
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// Current is the executable mappings of the last Refresh.
func (v *Image) Current() []procfs.Mapping { return v.current }

// Loaded returns the ELF object at path as the process sees it, if it was
// opened while the process was alive.
func (v *Image) Loaded(path string) (*symbolize.Object, bool) {
	o, ok := v.objs[path]
	return o, ok
}

// Release forgets the objects opened (their symbol tables): nothing is
// resolved from now on.
func (v *Image) Release() { v.objs = map[string]*symbolize.Object{} }

// Unwound reports whether frames in m are walked with unwind rows
// (stacks.Mappings).
func (v *Image) Unwound(m procfs.Mapping) bool { return v.unwind[m.Path].Use }

// UnwindSpan is the unwind rows of the object at path; ok is false if none
// were decided for it yet.
func (v *Image) UnwindSpan(path string) (s Span, ok bool) {
	s, ok = v.unwind[path]
	return s, ok
}

// SetUnwindSpan records the unwind rows written for the object at path
// (a zero Span: walked by frame pointers).
func (v *Image) SetUnwindSpan(path string, s Span) { v.unwind[path] = s }

// CallbackSpan is the rows of the crosscall2 of the Go binary at path.
func (v *Image) CallbackSpan(path string) (s Span, ok bool) {
	s, ok = v.callback[path]
	return s, ok
}

// SetCallbackSpan records the rows written for the crosscall2 of the Go
// binary at path.
func (v *Image) SetCallbackSpan(path string, s Span) { v.callback[path] = s }

// ProbeZlib records that the zlib of the object of inode ino is probed:
// its ranges are flagged RANGE_ZLIB, and RANGE_ZLIB_COMPUTED when its
// streams' bytes are computed from their init arguments.
func (v *Image) ProbeZlib(ino uint64, computed bool) { v.zlib[ino] = computed }

// ZlibObjects counts the objects whose zlib is probed.
func (v *Image) ZlibObjects() int { return len(v.zlib) }

// JVMCode is a JVM's code cache layout, nil until SetJVMCode.
func (v *Image) JVMCode() *jvm.Code { return v.jvmCode }

// SetJVMCode records a JVM's code cache layout: its ranges are flagged
// for the kernel's JVM walk.
func (v *Image) SetJVMCode(c jvm.Code) { v.jvmCode = &c }

// Go targets need nothing special to trace: cgo and libraries call libc's
// malloc and zlib like any C code. What differs is how their stacks are
// read: Go code keeps frame pointers, so a walk continues through it
// (symbolize.Object.FramePointerShare recognizes Go's prologues); a cgo
// call runs C on the thread's stack while its frame pointers lead back to
// the goroutine's, so the kernel may follow that switch in objects
// flagged RANGE_GO; and Go code is named from the binary's .gopclntab,
// inlined calls included, even when it is stripped.

// detectRuntime records the runtime of the target's executable: Go, with
// the toolchain version, when the executable carries Go build information.
// It runs whenever the mappings change: before run's exec shim execs the
// command, the executable is leakscope itself.
func (v *Image) detectRuntime() {
	exe, err := os.Readlink("/proc/" + strconv.Itoa(v.pid) + "/exe")
	if err != nil {
		return
	}
	if self, err := os.Executable(); err == nil && exe == self {
		return // run's exec shim, not yet the command
	}
	v.runtime, v.runtimeVersion, v.goModule = analyze.RuntimeNative, "", ""
	if o, ok := v.objs[exe]; ok && o.GoVersion != "" {
		v.runtime, v.runtimeVersion, v.goModule = analyze.RuntimeGo, o.GoVersion, o.GoModule
	}
}

// ExpectExec records the runtime of the executable a launched command is
// about to exec, for a command that exits before its mappings are read.
func (v *Image) ExpectExec(path string) {
	v.runtime, v.runtimeVersion, v.goModule = analyze.RuntimeNative, "", ""
	if o, err := v.cache.Object(path); err == nil && o.GoVersion != "" {
		v.runtime, v.runtimeVersion, v.goModule = analyze.RuntimeGo, o.GoVersion, o.GoModule
	}
}

// goCode reports whether the object at path is a Go binary whose Go code
// the kernel walk may follow onto another stack.
func (v *Image) goCode(path string) bool {
	o, ok := v.objs[path]
	return ok && o.Go()
}

// Runtime is the runtime of the executable (native or Go, with the Go
// toolchain's version and main module); "" until the mappings were read.
func (v *Image) Runtime() (rt analyze.Runtime, version, goModule string) {
	return v.runtime, v.runtimeVersion, v.goModule
}
