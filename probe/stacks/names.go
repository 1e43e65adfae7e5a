//go:build linux

package stacks

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/probe/jvm"
	"github.com/leakscope/leakscope/probe/symbolize"
)

// JITModule is the module shown for frames in a runtime's JIT code.
const JITModule = "[jit]"

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

// goexitReturn reports whether vaddr is the return address Go plants at the
// bottom of every goroutine's stack: one instruction into runtime.goexit,
// after a NOP rather than a call, so CallPrecedes rejects it.
func goexitReturn(obj *symbolize.Object, vaddr uint64) bool {
	if !obj.GoCode(vaddr - 1) {
		return false
	}
	fn, _, _ := obj.Symbolize(vaddr - 1)
	return fn == "runtime.goexit"
}

// nameMethod names interpreted frame f with the method and bytecode index
// the kernel read from its frame (e): its name and source line.
func (r *Resolver) nameMethod(f *analyze.Frame, e Entry) {
	if r.namer == nil || e.Addr == 0 {
		return
	}
	if m := r.namer.Method(e.Addr, e.BCI); m.Name != "" {
		f.Function, f.File, f.Line = m.Name, m.File, m.Line
	}
}

// nameJIT names frame f, at a return address in anonymous executable
// memory, with the namer. It returns the methods the JIT inlined at the
// call, innermost first, as frames of their own marked inlined at f's
// address, why the walk cannot go on above f ("" if it can), why its
// inlined methods are unknown ("" if they are not) and whether f is still
// unnamed.
func (r *Resolver) nameJIT(f *analyze.Frame, calledNative bool) (inlined []analyze.Frame, cut, partial string, unnamed bool) {
	jf := r.namer.Frame(f.Address, calledNative)
	f.Module = JITModule
	f.Function, f.File, f.Line = jf.Name, jf.File, jf.Line
	for _, m := range jf.Inlined {
		g := *f
		g.Function, g.File, g.Line, g.Inlined = m.Name, m.File, m.Line, true
		inlined = append(inlined, g)
	}
	if !jf.Chained {
		cut = jf.Cut
	}
	return inlined, cut, jf.Partial, jf.Name == ""
}

func flagReason(flags Flags, frames []analyze.Frame) string {
	if len(frames) == 0 {
		return "empty stack"
	}
	last := frames[len(frames)-1]
	switch {
	case flags&NoFP != 0:
		return noFPReason(last)
	case flags&UnwindUnsupported != 0:
		return fmt.Sprintf("the unwind table of %s has no usable rule in %s (signal frame, CFA expression or register, or a frame over 32 KiB)", baseName(last.Module), FrameName(last))
	case flags&UnwindEnd != 0:
		return fmt.Sprintf("the unwind table of %s ends at %s", baseName(last.Module), FrameName(last))
	case flags&BadFrame != 0:
		return fmt.Sprintf("frame-pointer chain broke above %s (%s)", FrameName(last), noFPCause(last))
	case flags&ReadError != 0:
		return fmt.Sprintf("stack memory above %s could not be read", FrameName(last))
	case flags&MaxDepth != 0:
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
		"(build it with #cgo CFLAGS: -fno-omit-frame-pointer)", FrameName(c), goFn, filepath.Base(path))
}

func noFPReason(f analyze.Frame) string {
	return fmt.Sprintf("%s has no frame pointers: callers of %s are unknown (rebuild it with -fno-omit-frame-pointer)",
		filepath.Base(f.Module), FrameName(f))
}

func noFPCause(f analyze.Frame) string {
	if f.Module == "" {
		return "the previous frame is unmapped"
	}
	return fmt.Sprintf("%s does not keep frame pointers in %s", filepath.Base(f.Module), FrameName(f))
}

// FrameName is how a message names frame f: its function, else its
// offset in its module, else its address.
func FrameName(f analyze.Frame) string {
	if f.Function != "" {
		return f.Function
	}
	if f.Module != "" {
		return fmt.Sprintf("%s+0x%x", filepath.Base(f.Module), f.Offset)
	}
	return fmt.Sprintf("0x%x", f.Address)
}

// Key is the same for every walk that is one site. Native frames are
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
func Key(frames []*analyze.Frame, reason string) string {
	var b strings.Builder
	b.Grow(len(frames)*13 + len(reason))
	for _, f := range frames {
		if f.Module == JITModule && f.Function != "" && f.Function != jvm.Interpreted {
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

func baseName(path string) string {
	if path == "" {
		return "unmapped code"
	}
	return filepath.Base(path)
}
