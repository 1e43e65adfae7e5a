package symbolize

import (
	"bytes"
	"debug/elf"
)

// Frame-pointer classification thresholds, as a FramePointerShare.
//
// Measured with FramePointerShare on Debian 12 (x86-64, gcc 12):
// libc.so.6 2.7% and libz.so.1 0% (distribution builds omit frame
// pointers; the few hits are functions with variable-size frames, which
// need %rbp anyway), C built with gcc -O2 0%, with -fno-omit-frame-pointer
// ~100% (all but crt's _start), and libjvm.so 71% (OpenJDK 17 and Temurin
// 25; HotSpot keeps frame pointers in most functions but not all). A
// simpler count over every sized function with the exact bytes
// 55 48 89 e5 gives libjvm 37% and misses gcc -O2 functions whose
// prologue was interleaved, which is why FramePointerShare skips tiny
// functions and allows that interleaving. So:
//
//   - at least FramePointerYes: built with frame pointers; the rest are
//     leaf functions and assembly, and a frame-pointer walk through the
//     object is trustworthy.
//   - below FramePointerNo: built without; a frame-pointer walk that
//     enters the object reads garbage from that frame on.
//   - in between: mixed; whether a walk survives depends on which
//     functions are on the stack, so stacks through the object may be
//     truncated or skip callers.
const (
	FramePointerYes = 0.9
	FramePointerNo  = 0.5
)

// minPrologueFuncBytes is the smallest function FramePointerShare examines.
// Shorter ones are leaf accessors and tail-call stubs (jmp malloc, 5
// bytes) that set up no frame whatever the flags and never appear as
// callers on a stack, so counting them would only dilute the share.
const minPrologueFuncBytes = 16

// movWindow is how far after push %rbp the mov %rsp,%rbp may start: gcc -O2
// -fno-omit-frame-pointer schedules other instructions in between (e.g.
// 55 48 63 ff 48 89 e5: push %rbp; movslq %edi,%rdi; mov %rsp,%rbp).
const movWindow = 12

var (
	endbr64  = []byte{0xf3, 0x0f, 0x1e, 0xfa} // CET landing pad that starts functions built with -fcf-protection
	pushRBP  = byte(0x55)                     // push %rbp
	movRSP   = []byte{0x48, 0x89, 0xe5}       // mov %rsp,%rbp
	movRSPv2 = []byte{0x48, 0x8b, 0xec}       // mov %rsp,%rbp, the other encoding some assemblers pick
)

// FramePointerShare returns the share (0 to 1) of the object's functions
// that set up a frame pointer, and how many functions it examined. It
// tells whether frame-pointer stack walks through this object can be
// trusted (see FramePointerClass).
//
// It examines every function symbol of at least minPrologueFuncBytes (16)
// bytes and counts those that start, after an optional endbr64, with
// push %rbp followed within movWindow bytes by mov %rsp,%rbp. Only x86-64
// objects are measured; for others, and for objects without sized
// function symbols, it returns 0, 0. The result is computed once.
func (o *Object) FramePointerShare() (share float64, funcs int) {
	o.fpOnce.Do(func() {
		if o.machine != elf.EM_X86_64 {
			return
		}
		var with int
		buf := make([]byte, len(endbr64)+1+movWindow+len(movRSP))
		for _, s := range o.syms.syms {
			if !s.fn || s.size < minPrologueFuncBytes || !o.isCode(s.addr) {
				continue
			}
			n := o.readCode(s.addr, buf[:min(uint64(len(buf)), s.size)])
			o.fpFuncs++
			if hasFramePointerPrologue(buf[:n]) {
				with++
			}
		}
		if o.fpFuncs > 0 {
			o.fpShare = float64(with) / float64(o.fpFuncs)
		}
	})
	return o.fpShare, o.fpFuncs
}

// hasFramePointerPrologue reports whether code starts with [endbr64]
// push %rbp and has mov %rsp,%rbp within the next movWindow bytes.
func hasFramePointerPrologue(code []byte) bool {
	code = bytes.TrimPrefix(code, endbr64)
	if len(code) < 1+len(movRSP) || code[0] != pushRBP {
		return false
	}
	window := code[1:min(len(code), 1+movWindow+len(movRSP))]
	return bytes.Contains(window, movRSP) || bytes.Contains(window, movRSPv2)
}

// FramePointerClass names a FramePointerShare result: "yes" when share is at
// least FramePointerYes, "no" below FramePointerNo or when no function
// could be examined (an object that cannot be judged is not trusted),
// "mixed" otherwise.
func FramePointerClass(share float64, funcs int) string {
	switch {
	case funcs == 0 || share < FramePointerNo:
		return "no"
	case share >= FramePointerYes:
		return "yes"
	}
	return "mixed"
}
