//go:build linux

package stacks

import (
	"cmp"
	"fmt"
	"iter"
	"path/filepath"
	"strings"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/probe/jvm"
	"github.com/leakscope/leakscope/probe/procfs"
	"github.com/leakscope/leakscope/probe/symbolize"
)

// Raw is one stack as the kernel walked it, decoded by the kernel layer.
type Raw struct {
	// Entries are the walk's entries, innermost first: the probed
	// function's return address, then its callers'.
	Entries []Entry
	Flags   Flags // how the walk ended
}

// Entry is one entry of a kernel stack: a return address or, right after
// the frame of an interpreted Java method, that method.
type Entry struct {
	// Addr is a return address, or for a Method entry the Method* of the
	// interpreted frame before it.
	Addr   uint64
	BCI    int  // a Method entry's bytecode index; -1 if unknown
	Method bool // Addr is a Method*, not a return address
}

// Flags say how the kernel's walk of a stack ended.
type Flags uint8

const (
	// NoFP: it met an object without frame pointers.
	NoFP Flags = 1 << iota
	// UnwindUnsupported: an unwind table had no usable rule.
	UnwindUnsupported
	// UnwindEnd: an unwind table ended.
	UnwindEnd
	// BadFrame: a frame pointer led nowhere plausible.
	BadFrame
	// ReadError: stack memory could not be read.
	ReadError
	// MaxDepth: the stack was deeper than the kernel keeps.
	MaxDepth
	// Unverified: the walk met code the kernel did not know yet (a
	// command just exec'd) and followed frame pointers everywhere.
	Unverified
)

// Mappings is what the resolver knows of the target's executable
// mappings.
type Mappings interface {
	// Lookup finds the mapping that holds addr, current or seen before.
	Lookup(addr uint64) (procfs.Mapping, bool)
	// Object returns the ELF object behind the file-backed mapping m.
	Object(m procfs.Mapping) (*symbolize.Object, error)
	// NoFramePointers reports whether the object behind m is known to
	// keep no frame pointers.
	NoFramePointers(m procfs.Mapping) bool
	// Unwound reports whether the kernel walks frames in m with the
	// object's unwind rows rather than frame pointers.
	Unwound(m procfs.Mapping) bool
	// Seen counts the mappings ever seen: it grows when one appears.
	Seen() int
	// DebugGeneration is the symbol cache's DebugGeneration: it changes
	// when a debug file arrives.
	DebugGeneration() uint64
}

// Namer names return addresses in anonymous executable memory, which no
// ELF object describes: a JVM's compiled methods, stubs and interpreter
// (*jvm.Namer).
type Namer interface {
	// Frame names addr; calledNative says the frame below it is native
	// code. The result also says whether the walk may go on above it.
	Frame(addr uint64, calledNative bool) jvm.Frame
	// Generation changes whenever names may have changed.
	Generation() uint64
	// Method names a method recorded for an interpreted frame at a
	// bytecode index (-1: unknown); its Name is "" if unknown.
	Method(ptr uint64, bci int) jvm.Method
}

// Resolved is a kernel stack after validation and symbolization.
// Its frames are indices into its resolver's frame table, made into an
// analyze.Stack when a capture needs one (Stack): 100k stacks of ~18
// frames were 14.5 MB of frame pointers while tracing, and are half that.
type Resolved struct {
	frames    []uint32 // nil for no frames; lost's are empty
	truncated string   // analyze.Stack.Truncated
	tab       *frameTable
	// pending is true when a frame in JIT code is not named yet; gen is
	// the namer's generation it was resolved with.
	gen uint64
	// unmapped is true when a frame lay in no mapping seen so far: a
	// library mapped after the last read of the maps (a snapshot reads
	// them, then the tables: allocations in between may come from code
	// loaded meanwhile). seen is Mappings.Seen then.
	seen              int32
	pending, unmapped bool
	lost              bool
	// debug is true when a frame lay in an object whose debug file was
	// being fetched (symbolize.Cache.UseDebuginfod); dgen is the cache's
	// DebugGeneration then.
	debug bool
	dgen  uint32
}

// Stack is s as a capture holds it: its frames are the table's shared
// ones, in a slice made for each call.
func (s *Resolved) Stack() analyze.Stack {
	st := analyze.Stack{Truncated: s.truncated}
	if s.frames != nil {
		st.Frames = make([]*analyze.Frame, len(s.frames))
		for i, f := range s.frames {
			st.Frames[i] = s.tab.frames[f]
		}
	}
	return st
}

// Frames yields s's frames, innermost first: the table's shared copies.
func (s *Resolved) Frames() iter.Seq[*analyze.Frame] {
	return func(yield func(*analyze.Frame) bool) {
		for _, i := range s.frames {
			if !yield(s.tab.frames[i]) {
				return
			}
		}
	}
}

// Named counts the frames of s that have a name.
func (s *Resolved) Named() int {
	n := 0
	for f := range s.Frames() {
		if f.Function != "" && f.Function != jvm.Interpreted {
			n++
		}
	}
	return n
}

// Pending reports whether a frame of s in JIT code is not named yet.
func (s *Resolved) Pending() bool { return s.pending }

// Key is identical for every kernel stack that is the same site (see
// Key). It is made when needed, not kept: 100k keys took 25 MB.
func (s *Resolved) Key() string {
	if s.lost {
		return "lost"
	}
	st := s.Stack()
	return Key(st.Frames, st.Truncated)
}

// lost is the stack of allocations whose stack could not be stored.
var lost = &Resolved{lost: true, frames: []uint32{},
	truncated: "stack not recorded: the stack table was full (raise --max-stacks)"}

// Lost returns the stack of allocations whose stack could not be stored
// or read: one value, the same for every such allocation.
func Lost() *Resolved { return lost }

// frameTable holds one copy of every frame a stack was built with: stacks
// share their frames (analyze.Stack), and 100k stacks of ~20 frames
// are then a few thousand frames, not 2M frames of 80 B (178 MB).
type frameTable struct {
	frames []*analyze.Frame
	index  map[analyze.Frame]uint32
}

// share returns the index of f's shared copy.
func (t *frameTable) share(f analyze.Frame) uint32 {
	if i, ok := t.index[f]; ok {
		return i
	}
	i := uint32(len(t.frames))
	t.frames = append(t.frames, &f)
	t.index[f] = i
	return i
}

// Resolver turns kernel stacks into symbolized, validated stacks. The
// kernel walk keeps frames only while they pass cheap checks; here each
// frame must also be a plausible return address (an executable mapping, a
// call instruction just before it). Walks that went through code without
// frame pointers are cut there, so one call site is one stack however
// much garbage %rbp held. A Resolver is not safe for concurrent use.
type Resolver struct {
	maps   Mappings
	namer  Namer // the target's runtime, naming frames in JIT code; nil if none
	frames map[frameKey]frameInfo
	tab    *frameTable // the frames of every stack built
	// scratch is build's frame buffer: a stack keeps an exact-size copy.
	scratch []analyze.Frame
}

// New returns a resolver of the stacks of the target whose mappings are m.
func New(m Mappings) *Resolver {
	return &Resolver{maps: m, frames: map[frameKey]frameInfo{},
		tab: &frameTable{index: map[analyze.Frame]uint32{}}}
}

// SetNamer gives frames in anonymous executable memory a namer, once the
// target's runtime is known.
func (r *Resolver) SetNamer(n Namer) { r.namer = n }

// Release drops the caches only resolving more needs (the frame table's
// index, every address's symbolization): the stacks resolved so far keep
// their frames. Stacks resolved afterwards share none with them.
func (r *Resolver) Release() {
	r.tab.index = nil
	r.tab = &frameTable{index: map[analyze.Frame]uint32{}}
	r.frames = map[frameKey]frameInfo{}
	r.scratch = nil
}

// Stale reports whether s may resolve better now: mappings, JIT names
// or debug files appeared since it was built.
func (r *Resolver) Stale(s *Resolved) bool {
	return (s.unmapped && r.maps.Seen() != int(s.seen)) ||
		(s.pending && r.namer != nil && r.namer.Generation() != s.gen) ||
		(s.debug && uint32(r.maps.DebugGeneration()) != s.dgen)
}

// frameKey is one return address in one object.
type frameKey struct {
	obj   *symbolize.Object
	vaddr uint64
}

// frameInfo is what symbolizing a return address found: stacks share
// most of their frames, so each address is decoded and named once
// (100k stacks of 17 frames: most of the first snapshot's time otherwise).
type frameInfo struct {
	call bool // a call instruction precedes it (or Go's goexit return)
	isGo bool
	sfs  []symbolize.Frame
	// fetched is the object's Fetched when sfs were made: a debug file
	// that arrived since names them better.
	fetched bool
}

func (r *Resolver) frameInfo(obj *symbolize.Object, vaddr uint64) frameInfo {
	k := frameKey{obj, vaddr}
	if fi, ok := r.frames[k]; ok && fi.fetched == obj.Fetched() {
		return fi
	}
	// A return address belongs to the call before it (vaddr - 1).
	fi := frameInfo{
		fetched: obj.Fetched(),
		call:    obj.CallPrecedes(vaddr) || goexitReturn(obj, vaddr),
		isGo:    obj.GoCode(vaddr - 1),
		sfs:     obj.Frames(vaddr - 1),
	}
	r.frames[k] = fi
	return fi
}

// Resolve returns the resolved stack of raw; nil is a stack that could not
// be read (Lost). A stack resolved is never changed: one that resolves
// better later (Stale) is a new one.
func (r *Resolver) Resolve(raw *Raw) *Resolved {
	if raw == nil {
		return lost
	}
	return r.build(raw)
}

// build is one stack being resolved: the frames so far and what they
// said of the walk.
type build struct {
	r      *Resolver
	frames []analyze.Frame
	// reason is why the walk was cut here (analyze.Stack.Truncated); gap
	// a cgo caller the kernel could not walk through.
	reason, gap string
	// jitCut is why a JIT frame's namer says the walk cannot go on above
	// it (a frame of the JVM's own it cannot walk through).
	jitCut string
	// unnamedJIT are the JIT frames neither VMStructs nor the perf map
	// named; partialJIT those whose inlined methods could not be read.
	unnamedJIT, partialJIT []string
	prevGo                 bool // the previous return address was in Go code
	native                 bool // the previous frame (first: the probed function) was native code
	// pending, unmapped and debug are Resolved's (Stale).
	pending, unmapped, debug bool
}

func (r *Resolver) build(raw *Raw) *Resolved {
	b := &build{r: r, frames: r.scratch[:0], native: true}
	defer func() { r.scratch = b.frames[:0] }()
	dgen := uint32(r.maps.DebugGeneration()) // before any frame asks
	for i, e := range raw.Entries {
		if !b.add(i, e, i == len(raw.Entries)-1, raw.Flags) {
			break
		}
	}
	return r.keep(b, b.truncation(raw.Flags), dgen)
}

// add appends entry i, e, of a walk: a frame and the functions inlined at
// its call, or an interpreted frame's method. It reports whether the walk
// goes on: not past a frame that is no return address, outside every
// mapping, in an object whose frame pointers it cannot trust, past a JIT
// frame the walk cannot go above, or past the program's or thread's entry.
func (b *build) add(i int, e Entry, last bool, flags Flags) bool {
	if e.Method {
		// The method of the interpreted frame just appended.
		if len(b.frames) > 0 {
			b.r.nameMethod(&b.frames[len(b.frames)-1], e)
		}
		return true
	}
	addr := e.Addr
	m, mapped := b.r.maps.Lookup(addr)
	b.unmapped = b.unmapped || !mapped
	f := analyze.Frame{Address: addr}
	isGo := false
	switch {
	case mapped && m.FileBacked():
		f.Module = m.Path
		var ok bool
		if isGo, ok = b.objectFrame(i, m, &f); !ok {
			return false
		}
	case mapped:
		f.Module = cmp.Or(m.Path, "[anon]")
		f.Offset = addr - m.Start
		b.jitFrame(&f)
	case i > 0:
		b.reason = fmt.Sprintf("walk stopped at 0x%x: not in any executable mapping (%s)", addr, noFPCause(b.frames[len(b.frames)-1]))
		return false
	}
	b.frames = append(b.frames, f)
	if outermost[f.Function] {
		// Frames below the program's or thread's entry say nothing
		// more, and walks of one site can differ there.
		b.reason = ""
		return false
	}
	b.prevGo = isGo
	b.native = mapped && m.FileBacked()
	if b.jitCut != "" && !last {
		b.reason = b.jitCut
		return false
	}
	// A walk that met code the kernel did not know yet (a command just
	// exec'd) followed frame pointers everywhere: apply the frame-pointer
	// rule now, whatever the object is walked with since.
	dwarf := b.r.maps.Unwound(m) && flags&Unverified == 0
	if mapped && m.FileBacked() && b.r.maps.NoFramePointers(m) && !last && !dwarf {
		b.reason = noFPReason(f)
		return false
	}
	return true
}

// objectFrame names f, entry i of the walk, in the ELF object behind m:
// the function whose call its return address follows, and before f the
// functions inlined at that call, innermost first. It reports whether the
// frame is Go code and whether it is a frame at all (a return address
// after a call instruction; the first entry, the probed function's, is).
func (b *build) objectFrame(i int, m procfs.Mapping, f *analyze.Frame) (isGo, ok bool) {
	obj, err := b.r.maps.Object(m)
	if err != nil {
		return false, true // unnamed: its module and address say where
	}
	vaddr := obj.VAddr(f.Address, m.Start, m.Offset)
	f.Offset = vaddr
	fi := b.r.frameInfo(obj, vaddr)
	// Its debug file on the way, or arrived since fi.
	b.debug = b.debug || obj.Debuginfo().Pending || fi.fetched != obj.Fetched()
	if i > 0 && !fi.call {
		b.reason = fmt.Sprintf("walk stopped at 0x%x in %s: not a return address (%s)",
			f.Address, filepath.Base(m.Path), noFPCause(b.frames[len(b.frames)-1]))
		return false, false
	}
	sfs := fi.sfs
	inner, last := sfs[:len(sfs)-1], sfs[len(sfs)-1]
	if i > 0 && fi.isGo && !b.prevGo && b.gap == "" && !cgoCallers[last.Function] {
		b.gap = cgoGap(b.frames[len(b.frames)-1], sfs[0].Function, m.Path)
	}
	for _, sf := range inner {
		g := *f
		g.Function, g.File, g.Line, g.Inlined = sf.Function, sf.File, sf.Line, true
		b.frames = append(b.frames, g)
	}
	f.Function, f.File, f.Line = last.Function, last.File, last.Line
	return fi.isGo, true
}

// jitFrame names f, in anonymous executable memory, with the target's
// runtime (a JVM's compiled methods, stubs and interpreter), and before it
// the methods inlined at its call.
func (b *build) jitFrame(f *analyze.Frame) {
	if b.r.namer == nil {
		return
	}
	inlined, cut, partial, unnamed := b.r.nameJIT(f, b.native)
	b.jitCut = cut
	b.frames = append(b.frames, inlined...)
	b.pending = b.pending || unnamed
	if unnamed {
		b.unnamedJIT = append(b.unnamedJIT, fmt.Sprintf("#%d at %#x", len(b.frames), f.Address))
	}
	if partial != "" {
		b.partialJIT = append(b.partialJIT, fmt.Sprintf("JIT frame #%d (%s): %s", len(b.frames), f.Function, partial))
	}
}

// truncation is what the stack says of its end: why the walk was cut
// (or how the kernel's walk ended, flags), after a cgo gap, JIT frames
// left unnamed and JIT frames whose inlined methods could not be read.
// A stack that reached the program's or thread's entry is whole.
func (b *build) truncation(flags Flags) string {
	reason := b.reason
	if reason == "" {
		reason = flagReason(flags, b.frames)
	}
	if len(b.frames) > 0 && outermost[b.frames[len(b.frames)-1].Function] {
		reason = ""
	}
	prepend := func(note string) {
		reason = strings.TrimSuffix(note+"; "+reason, "; ")
	}
	if b.gap != "" {
		prepend(b.gap)
	}
	if len(b.unnamedJIT) > 0 {
		// No silent gap: the frames are there, unnamed, and the stack
		// says why (a later perf map may still name them: pending).
		prepend(fmt.Sprintf("JIT frame %s unnamed: in no code blob of the JVM when leakscope read it, nor in its perf map (compiled code freed or replaced after the walk, or a perf map not had yet)", strings.Join(b.unnamedJIT, ", ")))
	}
	if len(b.partialJIT) > 0 {
		prepend(strings.Join(b.partialJIT, "; "))
	}
	return reason
}

// keep makes b's frames a Resolved, each frame the frame table's shared
// copy; dgen is the debug generation the walk began with.
func (r *Resolver) keep(b *build, truncated string, dgen uint32) *Resolved {
	var kept []uint32 // nil for no frames
	if len(b.frames) > 0 {
		kept = make([]uint32, len(b.frames))
		for i, f := range b.frames {
			kept[i] = r.tab.share(f)
		}
	}
	s := &Resolved{frames: kept, truncated: truncated, tab: r.tab}
	if b.pending {
		s.pending, s.gen = true, r.namer.Generation()
	}
	if b.unmapped {
		s.unmapped, s.seen = true, int32(r.maps.Seen())
	}
	if b.debug {
		s.debug, s.dgen = true, dgen
	}
	return s
}
