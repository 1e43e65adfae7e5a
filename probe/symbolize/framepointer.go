package symbolize

import (
	"bytes"
	"debug/elf"
	"strings"

	"golang.org/x/arch/x86/x86asm"
)

// Frame-pointer classification thresholds, as a FramePointerShare.
//
// Measured with FramePointerShare on Debian 12 (x86-64, gcc 12):
// libc.so.6 2.7% (1.9% without libc6-dbg's symbols) and libz.so.1 0%:
// distribution builds omit frame pointers, and the few hits are functions
// with variable-size frames, which need %rbp anyway. C built with gcc -O2:
// 0%; with -fno-omit-frame-pointer: all functions but crt's _start (91%
// for a ten-function program, tending to 100% for real ones). libjvm.so:
// 72% (OpenJDK 17 and Temurin 25): HotSpot keeps frame pointers in most
// functions but not all. (Counting only the exact bytes 55 48 89 e5 over
// every sized function gives libjvm 37% and the -fno-omit-frame-pointer
// program 9%, because gcc schedules other instructions into the
// prologue; hence the more careful hasFramePointerPrologue.) So:
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

// maxPrologueInsns is how many instructions may come between push %rbp and
// mov %rsp,%rbp: gcc -O2 -fno-omit-frame-pointer schedules argument set-up
// in between (push %rbp; mov %edi,%r8d; lea ...; xor %eax,%eax; mov
// %rsp,%rbp), 24 bytes in one measured case.
const maxPrologueInsns = 12

// prologueBytes is how much code is read per function: endbr64, push and
// maxPrologueInsns typical instructions.
const prologueBytes = 80

var endbr64 = []byte{0xf3, 0x0f, 0x1e, 0xfa} // CET landing pad that starts functions built with -fcf-protection

// FramePointerShare returns the share (0 to 1) of the object's functions
// that set up a frame pointer, and how many functions it examined. It
// tells whether frame-pointer stack walks through this object can be
// trusted (see FramePointerClass).
//
// It examines every function symbol of at least minPrologueFuncBytes (16)
// bytes; see hasFramePointerPrologue for what counts. Only x86-64 objects
// are measured; for others, and for objects without sized function
// symbols, it returns 0, 0. The result is computed once.
func (o *Object) FramePointerShare() (share float64, funcs int) {
	o.fpOnce.Do(func() {
		if o.machine != elf.EM_X86_64 {
			return
		}
		var with, withC int
		buf := make([]byte, prologueBytes)
		for _, s := range o.shareFuncs() {
			if s.size < minPrologueFuncBytes || !o.isCode(s.addr) {
				continue
			}
			n := o.readCode(s.addr, buf[:min(uint64(len(buf)), s.size)])
			fp := hasFramePointerPrologue(buf[:n])
			o.fpFuncs++
			if fp {
				with++
			}
			if !o.GoCode(s.addr) {
				o.fpFuncsC++
				if fp {
					withC++
				}
			}
		}
		if o.fpFuncs > 0 {
			o.fpShare = float64(with) / float64(o.fpFuncs)
		}
		if o.fpFuncsC > 0 {
			o.fpShareC = float64(withC) / float64(o.fpFuncsC)
		}
	})
	return o.fpShare, o.fpFuncs
}

// CFramePointerShare is FramePointerShare over the functions outside the
// object's Go code: in a Go binary, the C code cgo linked into it (the
// C of its packages and libraries, runtime/cgo's), which cgo compiles
// without frame pointers by default while every Go function keeps them.
// The two are walked apart: one share of both would follow the count of
// C functions (a binary with a few is "yes", with SQLite's thousands
// "mixed"). For an object without Go code it is FramePointerShare.
func (o *Object) CFramePointerShare() (share float64, funcs int) {
	o.FramePointerShare()
	return o.fpShareC, o.fpFuncsC
}

// shareFuncs lists the functions FramePointerShare examines: the sized
// ELF function symbols and, in a Go binary, every Go function of its
// .gopclntab (the only list a stripped Go binary has) in place of the
// symbols that cover Go code.
func (o *Object) shareFuncs() []symbol {
	var out []symbol
	for _, s := range o.syms.syms {
		if s.fn && (o.gotab == nil || !o.gotab.covers(s.addr)) {
			out = append(out, s)
		}
	}
	if o.gotab != nil {
		for _, r := range o.gotab.funcRanges() {
			out = append(out, symbol{addr: r[0], size: r[1], fn: true})
		}
	}
	return out
}

// hasFramePointerPrologue reports whether code, the start of a function,
// makes %rbp point at the saved %rbp: after an optional endbr64, push
// %rbp, then at most maxPrologueInsns instructions that neither touch %rsp
// or %rbp nor branch, then mov %rsp,%rbp (or enter). Matching only the
// bytes 55 48 89 e5 misses scheduled prologues, and searching for the mov
// anywhere nearby is fooled by code built without frame pointers that
// saves %rbp, pushes more registers and then uses %rbp to hold the address
// of a stack buffer (mov %rsp,%rbp), which gcc -O2 does.
//
// Go functions that may grow their stack first compare the stack pointer
// with the goroutine's stack bound and branch to morestack; that check is
// skipped (see skipGoStackCheck), since Go keeps frame pointers after it.
func hasFramePointerPrologue(code []byte) bool {
	code = bytes.TrimPrefix(code, endbr64)
	code = skipGoStackCheck(code)
	if len(code) > 0 && code[0] == 0xc8 { // enter $n,$0
		return true
	}
	if len(code) == 0 || code[0] != 0x55 { // push %rbp
		return false
	}
	code = code[1:]
	for range maxPrologueInsns {
		inst, err := x86asm.Decode(code, 64)
		if err != nil {
			return false
		}
		if inst.Op == x86asm.MOV && inst.Args[0] == x86asm.RBP && inst.Args[1] == x86asm.RSP {
			return true
		}
		if disturbsFrame(inst) {
			return false
		}
		code = code[inst.Len:]
	}
	return false
}

// skipGoStackCheck returns code past the stack-bound check that starts a
// Go function on amd64, or code itself when it does not start with one.
// The check compares the stack pointer, or %r12 computed from it for
// large frames, with the bound at 0x10(%r14) (g.stackguard0), then
// branches to morestack:
//
//	cmp 0x10(%r14),%rsp; jbe ...
//	lea -0x98(%rsp),%r12; cmp 0x10(%r14),%r12; jbe ...
//	mov %rsp,%r12; sub $0x10000,%r12; jb ...; cmp 0x10(%r14),%r12; jbe ...
func skipGoStackCheck(code []byte) []byte {
	rest := code
	for range 5 {
		inst, err := x86asm.Decode(rest, 64)
		if err != nil {
			return code
		}
		rest = rest[inst.Len:]
		switch {
		case inst.Op == x86asm.CMP:
			m, ok := inst.Args[1].(x86asm.Mem)
			if !ok || m.Base != x86asm.R14 || (inst.Args[0] != x86asm.RSP && inst.Args[0] != x86asm.R12) {
				return code
			}
			next, err := x86asm.Decode(rest, 64)
			if err != nil || !conditionalJump(next) {
				return code
			}
			return rest[next.Len:]
		case (inst.Op == x86asm.LEA || inst.Op == x86asm.MOV || inst.Op == x86asm.SUB) && inst.Args[0] == x86asm.R12:
		case conditionalJump(inst):
		default:
			return code
		}
	}
	return code
}

func conditionalJump(inst x86asm.Inst) bool {
	op := inst.Op.String()
	return strings.HasPrefix(op, "J") && inst.Op != x86asm.JMP
}

// disturbsFrame reports whether inst may move %rsp or %rbp, or leave the
// straight-line prologue, after which a later mov %rsp,%rbp no longer
// makes %rbp a frame pointer.
func disturbsFrame(inst x86asm.Inst) bool {
	switch inst.Op {
	case x86asm.PUSH, x86asm.POP, x86asm.PUSHF, x86asm.PUSHFQ, x86asm.POPF, x86asm.POPFQ,
		x86asm.CALL, x86asm.LCALL, x86asm.RET, x86asm.LRET, x86asm.ENTER, x86asm.LEAVE,
		x86asm.SYSCALL, x86asm.INT, x86asm.UD2, x86asm.HLT:
		return true
	}
	if op := inst.Op.String(); strings.HasPrefix(op, "J") || strings.HasPrefix(op, "LOOP") {
		return true
	}
	for _, a := range inst.Args {
		if r, ok := a.(x86asm.Reg); ok && stackReg(r) {
			return true
		}
	}
	return false
}

func stackReg(r x86asm.Reg) bool {
	switch r {
	case x86asm.RSP, x86asm.ESP, x86asm.SP, x86asm.SPB, x86asm.RBP, x86asm.EBP, x86asm.BP, x86asm.BPB:
		return true
	}
	return false
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
