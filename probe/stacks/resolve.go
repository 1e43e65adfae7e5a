//go:build linux

package stacks

import (
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

func (r *Resolver) build(raw *Raw) *Resolved {
	n := len(raw.Entries)
	frames := r.scratch[:0]
	defer func() { r.scratch = frames[:0] }()
	// unnamedJIT are the JIT frames neither VMStructs nor the perf map
	// named; partialJIT those whose inlined methods could not be read.
	var unnamedJIT, partialJIT []string
	reason, gap := "", ""
	prevGo := false // the previous return address was in Go code
	native := true  // the previous frame (first: the probed function) was native code
	pending, jitCut := false, ""
	unmapped, debug := false, false
	dgen := uint32(r.maps.DebugGeneration()) // before any frame asks
	for i := 0; i < n; i++ {
		e := raw.Entries[i]
		if e.Method {
			// The method of the interpreted frame just appended.
			if len(frames) > 0 {
				r.nameMethod(&frames[len(frames)-1], e)
			}
			continue
		}
		addr := e.Addr
		m, mapped := r.maps.Lookup(addr)
		unmapped = unmapped || !mapped
		f := analyze.Frame{Address: addr}
		isGo := false
		if mapped {
			f.Module = m.Path
			if f.Module == "" {
				f.Module = "[anon]"
			}
		}
		noFP := false
		if mapped && m.FileBacked() {
			noFP = r.maps.NoFramePointers(m)
			if obj, err := r.maps.Object(m); err == nil {
				vaddr := obj.VAddr(addr, m.Start, m.Offset)
				f.Offset = vaddr
				fi := r.frameInfo(obj, vaddr)
				// Its debug file on the way, or arrived since fi.
				debug = debug || obj.Debuginfo().Pending || fi.fetched != obj.Fetched()
				if i > 0 && !fi.call {
					reason = fmt.Sprintf("walk stopped at 0x%x in %s: not a return address (%s)",
						addr, filepath.Base(m.Path), noFPCause(frames[len(frames)-1]))
					break
				}
				// A return address belongs to the call before it. Go
				// code may expand into the functions inlined there,
				// innermost first, before the one that holds the code.
				isGo = fi.isGo
				sfs := fi.sfs
				last := sfs[len(sfs)-1]
				if i > 0 && isGo && !prevGo && gap == "" && !cgoCallers[last.Function] {
					gap = cgoGap(frames[len(frames)-1], sfs[0].Function, m.Path)
				}
				for _, sf := range sfs[:len(sfs)-1] {
					g := f
					g.Function, g.File, g.Line, g.Inlined = sf.Function, sf.File, sf.Line, true
					frames = append(frames, g)
				}
				f.Function, f.File, f.Line = last.Function, last.File, last.Line
			}
		} else if mapped {
			f.Offset = addr - m.Start
			if r.namer != nil {
				var inlined []analyze.Frame
				var unnamed bool
				var partial string
				inlined, jitCut, partial, unnamed = r.nameJIT(&f, native)
				frames = append(frames, inlined...)
				pending = pending || unnamed
				if unnamed {
					unnamedJIT = append(unnamedJIT, fmt.Sprintf("#%d at %#x", len(frames), addr))
				}
				if partial != "" {
					partialJIT = append(partialJIT, fmt.Sprintf("JIT frame #%d (%s): %s", len(frames), f.Function, partial))
				}
			}
		} else if i > 0 {
			reason = fmt.Sprintf("walk stopped at 0x%x: not in any executable mapping (%s)", addr, noFPCause(frames[len(frames)-1]))
			break
		}
		frames = append(frames, f)
		if outermost[f.Function] {
			// Frames below the program's or thread's entry say nothing
			// more, and walks of one site can differ there.
			reason = ""
			n = i + 1
			break
		}
		prevGo = isGo
		native = mapped && m.FileBacked()
		if jitCut != "" && i < n-1 {
			reason = jitCut
			break
		}
		// A walk that met code the kernel did not know yet (a command
		// just exec'd) followed frame pointers everywhere: apply the
		// frame-pointer rule now, whatever the object is walked with
		// since.
		dwarf := r.maps.Unwound(m) && raw.Flags&Unverified == 0
		if noFP && i < n-1 && !dwarf {
			// The kernel did not know this object yet; apply its rule now.
			reason = noFPReason(f)
			break
		}
	}
	if reason == "" {
		reason = flagReason(raw.Flags, frames)
	}
	if len(frames) > 0 && outermost[frames[len(frames)-1].Function] {
		reason = ""
	}
	if gap != "" {
		reason = strings.TrimSuffix(gap+"; "+reason, "; ")
	}
	if len(unnamedJIT) > 0 {
		// No silent gap: the frames are there, unnamed, and the stack
		// says why (a later perf map may still name them: pending).
		note := fmt.Sprintf("JIT frame %s unnamed: in no code blob of the JVM when leakscope read it, nor in its perf map (compiled code freed or replaced after the walk, or a perf map not had yet)", strings.Join(unnamedJIT, ", "))
		reason = strings.TrimSuffix(note+"; "+reason, "; ")
	}
	if len(partialJIT) > 0 {
		reason = strings.TrimSuffix(strings.Join(partialJIT, "; ")+"; "+reason, "; ")
	}
	var kept []uint32 // nil for no frames, as before the scratch buffer
	if len(frames) > 0 {
		kept = make([]uint32, len(frames))
		for i, f := range frames {
			kept[i] = r.tab.share(f)
		}
	}
	s := &Resolved{frames: kept, truncated: reason, tab: r.tab}
	if pending {
		s.pending, s.gen = true, r.namer.Generation()
	}
	if unmapped {
		s.unmapped, s.seen = true, int32(r.maps.Seen())
	}
	if debug {
		s.debug, s.dgen = true, dgen
	}
	return s
}
