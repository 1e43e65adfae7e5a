package probe

import (
	"fmt"
	"hash/fnv"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/leakscope/leakscope/analyze"
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
}

// resolvedStack is a kernel stack after validation and symbolization.
type resolvedStack struct {
	key   string // identical for every kernel stack that is the same site
	stack analyze.Stack
}

// stackResolver turns kernel stacks into symbolized, validated stacks. The
// kernel walk keeps frames only while they pass cheap checks; here each
// frame must also be a plausible return address (an executable mapping, a
// call instruction just before it). Walks that went through code without
// frame pointers are cut there, so one call site is one stack however
// much garbage %rbp held.
type stackResolver struct {
	view *mappingView
	byID map[uint64]resolvedStack
}

func newStackResolver(v *mappingView) *stackResolver {
	return &stackResolver{view: v, byID: map[uint64]resolvedStack{}}
}

// lost is the stack of allocations whose stack could not be stored.
var lostStack = resolvedStack{key: "lost", stack: analyze.Stack{
	Frames:    []analyze.Frame{},
	Truncated: "stack not recorded: the stack table was full (raise --max-stacks)",
}}

func (r *stackResolver) resolve(id uint64, raw *leakStack) resolvedStack {
	if id == 0 || raw == nil {
		return lostStack
	}
	if rs, ok := r.byID[id]; ok {
		return rs
	}
	rs := r.build(raw)
	r.byID[id] = rs
	return rs
}

func (r *stackResolver) build(raw *leakStack) resolvedStack {
	n := int(raw.Depth)
	if n > len(raw.Ips) {
		n = len(raw.Ips)
	}
	var frames []analyze.Frame
	reason := ""
	for i := 0; i < n; i++ {
		addr := raw.Ips[i]
		m, mapped := r.view.lookup(addr)
		f := analyze.Frame{Address: addr}
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
				if i > 0 && !obj.CallPrecedes(vaddr) {
					reason = fmt.Sprintf("walk stopped at 0x%x in %s: not a return address (%s)",
						addr, filepath.Base(m.Path), noFPCause(frames[i-1]))
					break
				}
				// A return address belongs to the call before it.
				f.Function, f.File, f.Line = obj.Symbolize(vaddr - 1)
			}
		} else if mapped {
			f.Offset = addr - m.Start
			class = fpUnknown
		} else if i > 0 {
			reason = fmt.Sprintf("walk stopped at 0x%x: not in any executable mapping (%s)", addr, noFPCause(frames[i-1]))
			break
		}
		frames = append(frames, f)
		if class == fpNo && i < n-1 {
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
	return resolvedStack{key: stackKey(frames, reason), stack: analyze.Stack{Frames: frames, Truncated: reason}}
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
	case flags&leakStackFlagSTACK_BAD_FRAME != 0:
		return fmt.Sprintf("frame-pointer chain broke above %s (%s)", frameName(last), noFPCause(last))
	case flags&leakStackFlagSTACK_READ_ERROR != 0:
		return fmt.Sprintf("stack memory above %s could not be read", frameName(last))
	case flags&leakStackFlagSTACK_MAX_DEPTH != 0:
		return fmt.Sprintf("deeper than %d frames", len(frames))
	}
	return ""
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

func stackKey(frames []analyze.Frame, reason string) string {
	var b strings.Builder
	for _, f := range frames {
		b.WriteString(strconv.FormatUint(f.Address, 16))
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
	}
	return analyze.Kind(fmt.Sprintf("kind%d", k))
}
