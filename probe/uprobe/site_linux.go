//go:build linux && amd64

package uprobe

import (
	"bytes"
	"debug/elf"
	"fmt"
	"strings"

	"golang.org/x/arch/x86/x86asm"

	"github.com/leakscope/leakscope/probe/kernel"
	"github.com/leakscope/leakscope/probe/procfs"
)

// Probe-site selection.
//
// The kernel single-steps the instruction under a uprobe out of line
// (~7 µs here) unless arch/x86/kernel/uprobes.c emulates it (~0.7 µs,
// docs/performance.md). What it emulates (arch_uprobe_analyze_insn:
// branch_setup_xol_ops, push_setup_xol_ops; Linux 6.18):
//
//   - jmp rel8/rel32 (eb, e9), call rel32 (e8), jcc rel8/rel32 (70-7f,
//     0f 80-8f), with no 0x66 prefix (rejected: the probe would not attach)
//     and none of the prefixes uprobes refuse (es/cs/ss/ds, lock);
//   - push of a 64-bit register: 50-57, or 41 50-57 (r8-r15), nothing else;
//   - nops: 90, and the kernel's own nops x86_nops[1..8] byte for byte.
//     Later kernels (tip commit 8a5c6cbfe4a3, "x86/insn,uprobes,alternative:
//     Unify insn_is_nop()", October 2025) take any NOP/NOPL, mov %reg,%reg,
//     lea 0(%reg),%reg and jmp +0; the nops accepted here are emulated by
//     both. A 5-byte nop is even rewritten into a call to a trampoline
//     (optimized uprobes).
//
// Everything else, endbr64 included, is single-stepped. So a probe need
// not sit on a function's first instruction: it can sit on the first
// emulated one, if every instruction before it leaves alone what the
// probe's program reads. selectSite walks the first instructions:
//
//   - it walks past an instruction only if it is known to write nothing but
//     flags and general registers outside the program's read set (no memory
//     write, no stack-pointer change, no control transfer);
//   - it stops at the first emulated instruction, which becomes the site (a
//     push or a branch is the site itself: the probe runs before it);
//   - it never goes past a control transfer, leaves the function, or lets
//     the site be a jump target inside the function (the probe would run
//     again, or on a path that skipped the entry);
//   - anything else ends the walk at the entry (site 0).
//
// A program told where its arguments are (alloc_session, through its
// cookie: siteNeeds.follow) lets them move: the walk follows each argument
// through 64-bit register-to-register copies (mov %rdi,%rbx makes %rbx
// hold it too) and goes on while every argument the program reads is in
// some register, whichever that is at the site (Site.Args).
//
// Every program of ebpf/leakscope.bpf.c reads %rsp (pending and release
// records compare stack pointers; zcall_owner reads *(%rsp)), and a return
// probe (uretprobe, the return half of a uprobe session) hijacks *(%rsp)
// when its entry hits: so no site lies past a push, a sub from %rsp or a
// call, and the return probe can share the entry's site.

// regSet holds general-purpose registers, one bit per 64-bit register.
type regSet uint32

var regFamilies = [16][]x86asm.Reg{
	{x86asm.AL, x86asm.AH, x86asm.AX, x86asm.EAX, x86asm.RAX},
	{x86asm.CL, x86asm.CH, x86asm.CX, x86asm.ECX, x86asm.RCX},
	{x86asm.DL, x86asm.DH, x86asm.DX, x86asm.EDX, x86asm.RDX},
	{x86asm.BL, x86asm.BH, x86asm.BX, x86asm.EBX, x86asm.RBX},
	{x86asm.SPB, x86asm.SP, x86asm.ESP, x86asm.RSP},
	{x86asm.BPB, x86asm.BP, x86asm.EBP, x86asm.RBP},
	{x86asm.SIB, x86asm.SI, x86asm.ESI, x86asm.RSI},
	{x86asm.DIB, x86asm.DI, x86asm.EDI, x86asm.RDI},
	{x86asm.R8B, x86asm.R8W, x86asm.R8L, x86asm.R8},
	{x86asm.R9B, x86asm.R9W, x86asm.R9L, x86asm.R9},
	{x86asm.R10B, x86asm.R10W, x86asm.R10L, x86asm.R10},
	{x86asm.R11B, x86asm.R11W, x86asm.R11L, x86asm.R11},
	{x86asm.R12B, x86asm.R12W, x86asm.R12L, x86asm.R12},
	{x86asm.R13B, x86asm.R13W, x86asm.R13L, x86asm.R13},
	{x86asm.R14B, x86asm.R14W, x86asm.R14L, x86asm.R14},
	{x86asm.R15B, x86asm.R15W, x86asm.R15L, x86asm.R15},
}

var regBits = func() map[x86asm.Reg]regSet {
	m := map[x86asm.Reg]regSet{}
	for i, f := range regFamilies {
		for _, r := range f {
			m[r] = 1 << i
		}
	}
	return m
}()

// reg is the bit of r's 64-bit register; 0 for anything not a general
// register.
func reg(r x86asm.Reg) regSet { return regBits[r] }

var (
	regRSP = reg(x86asm.RSP)
	// argRegs are the System V integer argument registers, 1-based.
	argRegs = [...]regSet{0, reg(x86asm.RDI), reg(x86asm.RSI), reg(x86asm.RDX), reg(x86asm.RCX), reg(x86asm.R8), reg(x86asm.R9)}
)

// args returns the registers of the 1-based arguments ns (0: none).
func args(ns ...int) regSet {
	var s regSet
	for _, n := range ns {
		if n > 0 && n < len(argRegs) {
			s |= argRegs[n]
		}
	}
	return s
}

// siteNeeds says what a probe's programs read at its site.
type siteNeeds struct {
	reads regSet // registers the entry program reads; regRSP if it reads the stack pointer or the stack
	ret   bool   // a return probe shares the site: *(%rsp) must still be the return address
	// follow: the program reads arguments 1-3 among reads from whichever
	// register holds them at the site (its cookie says which), so they
	// may have moved.
	follow bool
}

// followArgs are the arguments whose register a program can be told.
const followArgs = 3

// Site is where a function's probe goes.
type Site struct {
	Off      uint64 // bytes past the function's entry
	Emulated bool   // the kernel emulates the instruction there instead of single-stepping it
	Inst     string // the instruction there, GNU syntax; "" if it did not decode
	// Args are the 64-bit registers holding arguments 1-3 at the site: 0
	// for one no register holds any more, which the program does not
	// read. Only a walk that follows the arguments (siteNeeds.follow)
	// finds one outside its own register.
	Args [followArgs]x86asm.Reg
}

func (s Site) String() string {
	how := "single-stepped"
	if s.Emulated {
		how = "emulated"
	}
	for i, r := range s.Args {
		if r != 0 && r != argReg64(i+1) {
			how += fmt.Sprintf("; arg%d in %%%s", i+1, strings.ToLower(r.String()))
		}
	}
	if s.Inst == "" {
		return fmt.Sprintf("+%d (%s)", s.Off, how)
	}
	return fmt.Sprintf("+%d %s (%s)", s.Off, s.Inst, how)
}

// argReg64 is the register System V passes the 1-based argument n in.
func argReg64(n int) x86asm.Reg {
	return reg64(argRegs[n])
}

// reg64 is the 64-bit register of the one register in s (the lowest if
// several), 0 if s is empty.
func reg64(s regSet) x86asm.Reg {
	for i, f := range regFamilies {
		if s&(1<<i) != 0 {
			return f[len(f)-1]
		}
	}
	return 0
}

// is64 reports whether r is a 64-bit general register.
func is64(r x86asm.Reg) bool {
	b := reg(r)
	return b != 0 && reg64(b) == r
}

// argHolders tracks which registers hold each of arguments 1-3 while the
// walk goes past instructions.
type argHolders [followArgs + 1]regSet // 1-based

func newArgHolders() argHolders {
	var h argHolders
	for n := 1; n <= followArgs; n++ {
		h[n] = argRegs[n]
	}
	return h
}

// step updates h past inst, which writes the registers w and nothing
// else: a 64-bit mov or xchg between registers copies what they hold, any
// other write loses it.
func (h *argHolders) step(inst x86asm.Inst, w regSet) {
	dst, dok := inst.Args[0].(x86asm.Reg)
	src, sok := inst.Args[1].(x86asm.Reg)
	copyRegs := dok && sok && is64(dst) && is64(src)
	for n := 1; n <= followArgs; n++ {
		switch {
		case copyRegs && inst.Op == x86asm.MOV:
			if h[n]&reg(src) != 0 {
				h[n] |= reg(dst)
			} else {
				h[n] &^= reg(dst)
			}
		case copyRegs && inst.Op == x86asm.XCHG:
			d, s := h[n]&reg(dst) != 0, h[n]&reg(src) != 0
			h[n] &^= reg(dst) | reg(src)
			if d {
				h[n] |= reg(src)
			}
			if s {
				h[n] |= reg(dst)
			}
		default:
			h[n] &^= w
		}
	}
}

// at is where each argument is: its own register if it still holds it,
// else the lowest register that does, 0 if none.
func (h argHolders) at() [followArgs]x86asm.Reg {
	var r [followArgs]x86asm.Reg
	for n := 1; n <= followArgs; n++ {
		if h[n]&argRegs[n] != 0 {
			r[n-1] = argReg64(n)
		} else {
			r[n-1] = reg64(h[n])
		}
	}
	return r
}

const (
	maxSiteWalk = 64      // bytes of a function's start searched for a site
	maxBodyScan = 1 << 20 // bytes of a function decoded for jump targets
)

// selectSite returns the probe site of the function whose code (from its
// entry) is code and whose symbol size is size (0: unknown).
func selectSite(code []byte, size uint64, needs siteNeeds) Site {
	if uint64(len(code)) > size && size > 0 {
		code = code[:size]
	}
	entry := describe(code)
	if size == 0 || len(code) == 0 {
		return entry // without the function's extent, its jump targets are unknown
	}
	reads := needs.reads
	if needs.ret {
		reads |= regRSP
	}
	// fixed must stay where they are; followed (arguments 1-3 the program
	// reads) only in some register.
	fixed, followed := reads, regSet(0)
	if needs.follow {
		followed = reads & args(1, 2, 3)
		fixed &^= followed
	}
	holders := newArgHolders()
	firstTarget, ok := firstJumpTarget(code)
	if !ok {
		return entry
	}
	for off := 0; off < maxSiteWalk && off < len(code); {
		if off > 0 && uint64(off) >= firstTarget {
			break // a jump inside the function lands at or before here
		}
		b := code[off:]
		if n := endbr(b); n > 0 {
			off += n
			continue
		}
		inst, err := decode(b)
		if err != nil {
			break
		}
		if emulated(b[:inst.Len]) {
			return Site{Off: uint64(off), Emulated: true, Inst: x86asm.GNUSyntax(inst, 0, nil), Args: holders.at()}
		}
		w, ok := writes(inst)
		if !ok || w&fixed != 0 {
			break
		}
		holders.step(inst, w)
		if !holders.hold(followed) {
			break
		}
		off += inst.Len
	}
	return entry
}

// hold reports whether every argument among the registers need is still
// in some register.
func (h argHolders) hold(need regSet) bool {
	for n := 1; n <= followArgs; n++ {
		if need&argRegs[n] != 0 && h[n] == 0 {
			return false
		}
	}
	return true
}

// describe is the site at the entry itself, every argument in its own
// register.
func describe(code []byte) Site {
	s := Site{Args: newArgHolders().at()}
	if endbr(code) > 0 {
		s.Inst = "endbr64"
		return s
	}
	inst, err := decode(code)
	if err != nil {
		return s
	}
	s.Emulated, s.Inst = emulated(code[:inst.Len]), x86asm.GNUSyntax(inst, 0, nil)
	return s
}

// decode decodes the instruction at the start of b. x86asm returns an
// instruction without an opcode, and no error, for some truncated input.
func decode(b []byte) (x86asm.Inst, error) {
	inst, err := x86asm.Decode(b, 64)
	if err == nil && (inst.Op == 0 || inst.Len <= 0 || inst.Len > len(b)) {
		err = fmt.Errorf("undecodable instruction % x", b[:min(len(b), 4)])
	}
	return inst, err
}

// endbr returns the length of an endbr64/endbr32 at the start of b, or 0.
// They write nothing; the kernel single-steps them.
func endbr(b []byte) int {
	if len(b) >= 4 && b[0] == 0xf3 && b[1] == 0x0f && b[2] == 0x1e && (b[3] == 0xfa || b[3] == 0xfb) {
		return 4
	}
	return 0
}

// kernelNops are x86_nops[1..8] of arch/x86/kernel/alternative.c (64-bit).
var kernelNops = [][]byte{
	{0x90},
	{0x66, 0x90},
	{0x0f, 0x1f, 0x00},
	{0x0f, 0x1f, 0x40, 0x00},
	{0x0f, 0x1f, 0x44, 0x00, 0x00},
	{0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00},
	{0x0f, 0x1f, 0x80, 0x00, 0x00, 0x00, 0x00},
	{0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00},
}

// emulated reports whether the kernel emulates the instruction b (exactly
// one instruction's bytes) under a uprobe; see the comment at the top.
func emulated(b []byte) bool {
	for _, n := range kernelNops {
		if bytes.Equal(b, n) {
			return true
		}
	}
	// push %reg: 50-57 or 41 50-57, nothing longer.
	if len(b) == 1 && b[0] >= 0x50 && b[0] <= 0x57 {
		return true
	}
	if len(b) == 2 && b[0] == 0x41 && b[1] >= 0x50 && b[1] <= 0x57 {
		return true
	}
	// Branches: at most a bnd (f2) prefix, no REX.
	if len(b) > 0 && b[0] == 0xf2 {
		b = b[1:]
	}
	switch {
	case len(b) == 2 && (b[0] == 0xeb || b[0] >= 0x70 && b[0] <= 0x7f):
		return true
	case len(b) == 5 && (b[0] == 0xe9 || b[0] == 0xe8):
		return true
	case len(b) == 6 && b[0] == 0x0f && b[1] >= 0x80 && b[1] <= 0x8f:
		return true
	}
	return false
}

// writes returns the registers inst writes, and false if it may write
// anything else (memory, the stack pointer implicitly, segment or vector
// state) or transfer control: the walk does not go past such an
// instruction.
func writes(inst x86asm.Inst) (regSet, bool) {
	for _, p := range inst.Prefix {
		if p == 0 {
			break
		}
		if p&0xff == 0xf0 { // lock
			return 0, false
		}
	}
	dest := func() (regSet, bool) {
		r, ok := inst.Args[0].(x86asm.Reg)
		if !ok || reg(r) == 0 {
			return 0, false
		}
		return reg(r), true
	}
	switch inst.Op {
	case x86asm.NOP:
		return 0, true
	case x86asm.TEST, x86asm.CMP, x86asm.BT:
		return 0, true // flags only
	case x86asm.MOV, x86asm.MOVZX, x86asm.MOVSX, x86asm.MOVSXD, x86asm.LEA,
		x86asm.ADD, x86asm.SUB, x86asm.AND, x86asm.OR, x86asm.XOR, x86asm.ADC, x86asm.SBB,
		x86asm.INC, x86asm.DEC, x86asm.NEG, x86asm.NOT,
		x86asm.SHL, x86asm.SHR, x86asm.SAR, x86asm.ROL, x86asm.ROR,
		x86asm.CMOVA, x86asm.CMOVAE, x86asm.CMOVB, x86asm.CMOVBE, x86asm.CMOVE, x86asm.CMOVG,
		x86asm.CMOVGE, x86asm.CMOVL, x86asm.CMOVLE, x86asm.CMOVNE, x86asm.CMOVNO, x86asm.CMOVNP,
		x86asm.CMOVNS, x86asm.CMOVO, x86asm.CMOVP, x86asm.CMOVS,
		x86asm.SETA, x86asm.SETAE, x86asm.SETB, x86asm.SETBE, x86asm.SETE, x86asm.SETG,
		x86asm.SETGE, x86asm.SETL, x86asm.SETLE, x86asm.SETNE, x86asm.SETNO, x86asm.SETNP,
		x86asm.SETNS, x86asm.SETO, x86asm.SETP, x86asm.SETS:
		return dest()
	case x86asm.IMUL:
		if inst.Args[1] == nil {
			return 0, false // one operand: writes rdx:rax
		}
		return dest()
	case x86asm.XCHG:
		w, ok := dest()
		r, isReg := inst.Args[1].(x86asm.Reg)
		if !ok || !isReg || reg(r) == 0 {
			return 0, false
		}
		return w | reg(r), true
	}
	return 0, false
}

// firstJumpTarget decodes the function code and returns the smallest
// positive offset a direct jump or call inside it lands at (len(code) if
// none), and false if part of it does not decode: then its targets are
// unknown. Jumps from other functions into this one (a cold part jumping
// back) are not seen; compilers jump back past the prologue, not into it.
func firstJumpTarget(code []byte) (uint64, bool) {
	if len(code) > maxBodyScan {
		return 0, false
	}
	first := uint64(len(code))
	for pc := 0; pc < len(code); {
		if n := endbr(code[pc:]); n > 0 {
			pc += n
			continue
		}
		inst, err := decode(code[pc:])
		if err != nil {
			// Padding after the last instruction (int3, zeros) may not
			// decode; anything else leaves the targets unknown.
			if allPadding(code[pc:]) {
				break
			}
			return 0, false
		}
		if rel, ok := inst.Args[0].(x86asm.Rel); ok {
			t := int64(pc) + int64(inst.Len) + int64(rel)
			if t > 0 && uint64(t) < first {
				first = uint64(t)
			}
		}
		pc += inst.Len
	}
	return first, true
}

func allPadding(b []byte) bool {
	for _, c := range b {
		if c != 0xcc && c != 0x00 {
			return false
		}
	}
	return true
}

// findSite returns the probe site of the function at vaddr, file offset
// off, in the object at path: the entry if anything about it is unknown.
func findSite(path string, vaddr, off uint64, needs siteNeeds) Site {
	size := funcSize(path, vaddr)
	n := size
	if n == 0 || n > maxBodyScan {
		n = maxSiteWalk
	}
	code, err := readCode(path, off, int(n))
	if err != nil {
		return Site{}
	}
	return selectSite(code, size, needs)
}

// readCode reads up to n bytes of the file at off (fewer at its end).
func readCode(path string, off uint64, n int) ([]byte, error) {
	f, err := procfs.OpenFile(nil, path, procfs.ObjectLimits)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	k, err := f.ReadAt(b, int64(off))
	if k == 0 {
		return nil, err
	}
	return b[:k], nil
}

// funcSize returns the size of the function symbol at vaddr (the largest,
// if several name it), 0 if no sized function symbol starts there.
func funcSize(path string, vaddr uint64) uint64 {
	r, err := procfs.OpenFile(nil, path, procfs.ObjectLimits)
	if err != nil {
		return 0
	}
	defer r.Close()
	f, err := elf.NewFile(r)
	if err != nil {
		return 0
	}
	var size uint64
	for _, read := range []func() ([]elf.Symbol, error){f.DynamicSymbols, f.Symbols} {
		syms, _ := read()
		for _, s := range syms {
			t := elf.ST_TYPE(s.Info)
			if s.Value == vaddr && (t == elf.STT_FUNC || t == elf.STT_GNU_IFUNC) && s.Size > size {
				size = s.Size
			}
		}
	}
	return size
}

// builtinReads are the argument registers each built-in entry program of
// ebpf/leakscope.bpf.c reads, by probed function: the malloc family's
// (alloc_session, or malloc_enter, calloc_enter, ...) the arguments the
// bytes, the old block or the result's pointer come from.
var builtinReads = map[string]regSet{
	"malloc": args(1), "calloc": args(1, 2), "realloc": args(1, 2),
	"reallocarray": args(1, 2, 3), "posix_memalign": args(1, 3), "aligned_alloc": args(2),
	"memalign": args(2), "valloc": args(1), "pvalloc": args(1),
	"free": args(1), // free_enter
	// zlib: every program reads the z_stream, the first argument; the
	// init programs also the arguments they compute the bytes from
	// (zlib_inflate_init_enter: windowBits; zlib_deflate_init_enter:
	// level, method, windowBits, memLevel).
	"inflateInit_": args(1, 2), "inflateInit2_": args(1, 2), "inflateBackInit_": args(1, 2),
	"deflateInit_": args(1, 2, 3, 4, 5), "deflateInit2_": args(1, 2, 3, 4, 5), "inflateEnd": args(1),
	"inflateBackEnd": args(1), "deflateEnd": args(1), "inflate": args(1),
}

// specNeeds is what the programs of p read at its site. Every program
// reads %rsp. A built-in probe's program reads what builtinReads says; a
// declared pair's programs read the arguments their cookie names
// (pair_acquire_enter, pair_release_enter: the handle's and the size's,
// struct pair_cookie). A cookie on a built-in function may be either
// (zlib's cookies hold no argument number there), so both count.
func specNeeds(p Spec) siteNeeds {
	n := siteNeeds{reads: regRSP, ret: p.Ret}
	r, builtin := builtinReads[p.Symbol]
	if builtin {
		n.reads |= r
	}
	if p.Cookie != 0 {
		pc := kernel.DecodePairCookie(p.Cookie)
		n.reads |= args(int(pc.Arg), int(pc.SizeArg))
	}
	if !builtin && p.Cookie == 0 {
		n.reads |= args(1, 2, 3, 4, 5, 6)
	}
	return n
}

// SiteFor returns where the probe of p goes: the first instruction the
// kernel emulates, where that keeps what the probe reads (selectSite); the
// entry otherwise. vaddr and off are the entry's address and file offset
// in the object at path.
func SiteFor(path string, vaddr, off uint64, p Spec) Site {
	return findSite(path, vaddr, off, specNeeds(p))
}
