//go:build linux && amd64

package probe

import (
	"fmt"
	"hash/fnv"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/probe/jvm"
	"github.com/leakscope/leakscope/probe/symbolize"
)

// outermost are functions at the bottom of every stack: a walk that ends
// in one of them is complete even though libc has no frame pointers.
var outermost = map[string]bool{
	"_start":                 true,
	"__libc_start_main":      true,
	"__libc_start_call_main": true,
	"start_thread":           true,
	"clone":                  true,
	"clone3":                 true,
	"__clone":                true,
	"__clone3":               true,
	"runtime.goexit":         true, // bottom of every goroutine's stack
	"runtime.mstart":         true, // bottom of a Go thread's system stack
	"runtime.rt0_go":         true,
}

// cgoCallers are the Go functions that call C: the only Go code a C frame
// returns into. Any other Go frame right above C code means the walk
// skipped C frames that keep no frame pointers (see cgoGap).
var cgoCallers = map[string]bool{
	"runtime.asmcgocall":      true,
	"runtime.asmcgocall_no_g": true,
}

// resolvedStack is a kernel stack after validation and symbolization.
// Its frames are indices into its resolver's frame table, made into an
// analyze.Stack when a capture needs one (stack): 100k stacks of ~18
// frames were 14.5 MB of frame pointers while tracing, and are half that.
type resolvedStack struct {
	frames    []uint32 // nil for no frames; lostStack's are empty
	truncated string   // analyze.Stack.Truncated
	tab       *frameTable
	// pending is true when a frame in JIT code is not named yet; gen is
	// the namer's generation it was resolved with (retryNamesLocked).
	gen uint64
	// unmapped is true when a frame lay in no mapping seen so far: a
	// library mapped after the last read of the maps (a snapshot reads
	// them, then the tables: allocations in between may come from code
	// loaded meanwhile). seen is len(view.history) then.
	seen              int32
	pending, unmapped bool
	lost              bool // lostStack
	// debug is true when a frame lay in an object whose debug file was
	// being fetched (symbolize.Cache.UseDebuginfod); dgen is the cache's
	// DebugGeneration then.
	debug bool
	dgen  uint32
}

// stack is rs as a capture holds it: its frames are the table's shared
// ones, in a slice made for each call.
func (rs *resolvedStack) stack() analyze.Stack {
	st := analyze.Stack{Truncated: rs.truncated}
	if rs.frames != nil {
		st.Frames = make([]*analyze.Frame, len(rs.frames))
		for i, f := range rs.frames {
			st.Frames[i] = rs.tab.frames[f]
		}
	}
	return st
}

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

// stale reports whether rs may resolve better now: mappings, JIT names
// or debug files appeared since it was built.
func (r *stackResolver) stale(rs *resolvedStack) bool {
	return (rs.unmapped && len(r.view.history) != int(rs.seen)) ||
		(rs.pending && r.jit.namer != nil && r.jit.namer.Generation() != rs.gen) ||
		(rs.debug && uint32(r.view.cache.DebugGeneration()) != rs.dgen)
}

// stackResolver turns kernel stacks into symbolized, validated stacks. The
// kernel walk keeps frames only while they pass cheap checks; here each
// frame must also be a plausible return address (an executable mapping, a
// call instruction just before it). Walks that went through code without
// frame pointers are cut there, so one call site is one stack however
// much garbage %rbp held.
type stackResolver struct {
	view   *mappingView
	jit    jitNames // the target's runtime, naming frames in JIT code
	frames map[frameKey]frameInfo
	tab    *frameTable // the frames of every stack built
	// scratch is build's frame buffer: a stack keeps an exact-size copy.
	scratch []analyze.Frame
}

func newStackResolver(v *mappingView) *stackResolver {
	return &stackResolver{view: v, frames: map[frameKey]frameInfo{},
		tab: &frameTable{index: map[analyze.Frame]uint32{}}}
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

func (r *stackResolver) frameInfo(obj *symbolize.Object, vaddr uint64) frameInfo {
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

// lost is the stack of allocations whose stack could not be stored.
var lostStack = &resolvedStack{lost: true, frames: []uint32{},
	truncated: "stack not recorded: the stack table was full (raise --max-stacks)"}

// key is identical for every kernel stack that is the same site
// (stackKey). It is made when needed, not kept: 100k keys took 25 MB.
func (rs *resolvedStack) key() string {
	if rs.lost {
		return "lost"
	}
	st := rs.stack()
	return stackKey(st.Frames, st.Truncated)
}

// resolve returns the resolved stack of kernel stack id, as read into raw.
// A stack resolved is never changed: one that resolves better later is a
// new one. Its kernel site keeps it (siteTable.refs); resolved stacks were
// also kept by stack id here, 3 MB at 100k stacks, for the rare stack
// that is the site of two kinds.
func (r *stackResolver) resolve(id uint64, raw *leakStack) *resolvedStack {
	if id == 0 || raw == nil {
		return lostStack
	}
	return r.build(raw)
}

func (r *stackResolver) build(raw *leakStack) *resolvedStack {
	n := int(raw.Depth)
	if n > len(raw.Ips) {
		n = len(raw.Ips)
	}
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
	dgen := uint32(r.view.cache.DebugGeneration()) // before any frame asks
	for i := 0; i < n; i++ {
		addr := raw.Ips[i]
		if addr&stackJVMMethod != 0 {
			// The method of the interpreted frame just appended.
			if len(frames) > 0 {
				r.nameMethod(&frames[len(frames)-1], addr)
			}
			continue
		}
		m, mapped := r.view.lookup(addr)
		unmapped = unmapped || !mapped
		f := analyze.Frame{Address: addr}
		isGo := false
		if mapped {
			f.Module = m.Path
			if f.Module == "" {
				f.Module = "[anon]"
			}
		}
		var class string
		if mapped && fileBacked(m) {
			class = r.view.fpClass(m)
			if obj, err := r.view.object(m); err == nil {
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
			class = fpUnknown
			if r.jit.namer != nil {
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
		native = mapped && fileBacked(m)
		if jitCut != "" && i < n-1 {
			reason = jitCut
			break
		}
		// A walk that met code the kernel did not know yet (a command
		// just exec'd) followed frame pointers everywhere: apply the
		// frame-pointer rule now, whatever the object is walked with
		// since.
		dwarf := r.view.dwarfWalked(m) && raw.Flags&uint32(leakStackFlagSTACK_UNVERIFIED) == 0
		if class == fpNo && i < n-1 && !dwarf {
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
	rs := &resolvedStack{frames: kept, truncated: reason, tab: r.tab}
	if pending {
		rs.pending, rs.gen = true, r.jit.namer.Generation()
	}
	if unmapped {
		rs.unmapped, rs.seen = true, int32(len(r.view.history))
	}
	if debug {
		rs.debug, rs.dgen = true, dgen
	}
	return rs
}

func flagReason(bits uint32, frames []analyze.Frame) string {
	flags := leakStackFlag(bits)
	if len(frames) == 0 {
		return "empty stack"
	}
	last := frames[len(frames)-1]
	switch {
	case flags&leakStackFlagSTACK_NO_FP != 0:
		return noFPReason(last)
	case flags&leakStackFlagSTACK_UNWIND_UNSUPPORTED != 0:
		return fmt.Sprintf("the unwind table of %s has no usable rule in %s (signal frame, CFA expression or register, or a frame over 32 KiB)", baseName(last.Module), frameName(last))
	case flags&leakStackFlagSTACK_UNWIND_END != 0:
		return fmt.Sprintf("the unwind table of %s ends at %s", baseName(last.Module), frameName(last))
	case flags&leakStackFlagSTACK_BAD_FRAME != 0:
		return fmt.Sprintf("frame-pointer chain broke above %s (%s)", frameName(last), noFPCause(last))
	case flags&leakStackFlagSTACK_READ_ERROR != 0:
		return fmt.Sprintf("stack memory above %s could not be read", frameName(last))
	case flags&leakStackFlagSTACK_MAX_DEPTH != 0:
		return fmt.Sprintf("deeper than %d frames", len(frames))
	}
	return ""
}

// cgoGap says that a walk skipped frames between the C frame c and the
// Go function goFn of the Go binary at path. Go calls C only through
// runtime.asmcgocall; a C frame that seems to return anywhere else was
// reached through C code without frame pointers (gcc omits them at -O2,
// cgo's default), whose %rbp still held a Go frame pointer.
func cgoGap(c analyze.Frame, goFn, path string) string {
	return fmt.Sprintf("frames between %s and %s are missing: the C code in %s has no frame pointers "+
		"(build it with #cgo CFLAGS: -fno-omit-frame-pointer)", frameName(c), goFn, filepath.Base(path))
}

func noFPReason(f analyze.Frame) string {
	return fmt.Sprintf("%s has no frame pointers: callers of %s are unknown (rebuild it with -fno-omit-frame-pointer)",
		filepath.Base(f.Module), frameName(f))
}

func noFPCause(f analyze.Frame) string {
	if f.Module == "" {
		return "the previous frame is unmapped"
	}
	return fmt.Sprintf("%s does not keep frame pointers in %s", filepath.Base(f.Module), frameName(f))
}

func frameName(f analyze.Frame) string {
	if f.Function != "" {
		return f.Function
	}
	if f.Module != "" {
		return fmt.Sprintf("%s+0x%x", filepath.Base(f.Module), f.Offset)
	}
	return fmt.Sprintf("0x%x", f.Address)
}

// stackKey is the same for every walk that is one site. Native frames are
// told apart by address. A named Java frame is its method and line, never
// its address: interpreted frames share the interpreter's return
// addresses, the JIT compiles a method again (tier 3, then 4, after
// deoptimization) at new addresses, inlining more or less of it, and a
// native method runs in the interpreter's native entry until its wrapper
// is made, at an address of its own, made again if the code cache drops
// it. A frame without a line (a native method, called through either; an
// interpreted method without a line table; compiled code whose scopes
// could not be read) is its method alone. One source-level call path is
// one site however it ran. An unnamed Java frame, and the interpreter not
// named by its method, keep their address: a walk whose methods cannot be
// named (the JVM exited) is the one walked before the kernel knew the
// interpreter, and the interpreter's return address is the kind of call.
func stackKey(frames []*analyze.Frame, reason string) string {
	var b strings.Builder
	b.Grow(len(frames)*13 + len(reason))
	for _, f := range frames {
		if f.Module == jitModule && f.Function != "" && f.Function != jvm.Interpreted {
			b.WriteString(f.Function)
			if f.Line > 0 {
				b.WriteByte(':')
				b.WriteString(strconv.Itoa(f.Line))
			}
		} else {
			b.WriteString(strconv.FormatUint(f.Address, 16))
		}
		b.WriteByte(',')
	}
	b.WriteString(reason)
	return b.String()
}

// siteID is a capture-unique, deterministic id for a (kind, stack) site.
func siteID(kind analyze.Kind, key string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(kind))
	h.Write([]byte{0})
	h.Write([]byte(key))
	return h.Sum64()
}

// kindName maps enum alloc_kind to the analyze kind.
func kindName(k uint32) analyze.Kind {
	switch leakAllocKind(k) {
	case leakAllocKindKIND_MALLOC:
		return analyze.KindMalloc
	case leakAllocKindKIND_ZLIB_INFLATE:
		return analyze.KindZlibInflate
	case leakAllocKindKIND_ZLIB_DEFLATE:
		return analyze.KindZlibDeflate
	case leakAllocKindKIND_MMAP_ANON:
		return analyze.KindMmapAnon
	case leakAllocKindKIND_MMAP_FILE:
		return analyze.KindMmapFile
	case leakAllocKindKIND_THREAD:
		return analyze.KindThread
	}
	return analyze.Kind(fmt.Sprintf("kind%d", k))
}

func baseName(path string) string {
	if path == "" {
		return "unmapped code"
	}
	return filepath.Base(path)
}
