package unwind

import (
	"debug/elf"
	"fmt"
	"math"
)

// Rule says, from PC (an ELF virtual address of the object, inclusive) up
// to the next rule's PC, how to find the caller, on x86-64 or AArch64:
// CFA = (CFA == CFASP ? sp : fp) + CFAOffset; the return address is at
// CFA + RAOffset (RAAtCFA) or still in the link register (RAInLR, AArch64
// x30), and carries a pointer authentication code to strip when RASigned;
// the caller's frame pointer (rbp, x29) is at CFA + FPOffset (FPAtCFA),
// unchanged (FPSame) or unknown (FPUndefined); and the caller's stack
// pointer is the CFA.
//
// Unlike Row, which is the kernel's x86-64 format, a Rule holds the return
// address rule AArch64 needs (saved at any offset from the CFA, or in
// x30 at a function's first instructions and in leaves) and offsets of 32
// bits. A table from BuildRules has the invariants of Build's: sorted by
// strictly increasing PC, neighbours differ, the last rule is
// CFAUndefined, and a stop rule (CFAUndefined, CFAUnsupported) has every
// other field zero.
type Rule struct {
	PC        uint32
	CFA       uint8 // CFASP, CFAFP, CFAPLT, CFAUndefined or CFAUnsupported
	RA        uint8 // RAAtCFA or RAInLR
	FP        uint8 // FPSame, FPAtCFA or FPUndefined
	RASigned  bool  // AArch64: signed (DW_CFA_AARCH64_negate_ra_state); strip the PAC before use
	CFAOffset int32 // bytes added to sp or fp; 8 for CFAPLT (its base)
	RAOffset  int32 // RAAtCFA: bytes from the CFA to the return address
	FPOffset  int32 // FPAtCFA: bytes from the CFA to the caller's frame pointer
}

// CFA rules of a Rule.
const (
	CFASP          = 0 // CFA = sp + CFAOffset
	CFAFP          = 1 // CFA = fp (rbp, x29) + CFAOffset
	CFAUndefined   = 2 // no FDE covers this PC, or the return address is undefined (outermost frame): stop
	CFAUnsupported = 3 // a rule the table cannot express: stop
	CFAPLT         = 4 // x86-64 .plt stubs: CFA = rsp + 8 + ((rip & 15) >= 11 ? 8 : 0)
)

// Return address rules of a Rule.
const (
	RAAtCFA = 0 // at CFA + RAOffset
	RAInLR  = 1 // still in the link register (AArch64 x30): the function has not saved it, or never does
)

// Frame pointer rules of a Rule.
const (
	FPSame      = 0 // the caller's frame pointer is the current one
	FPAtCFA     = 1 // the caller's frame pointer is at CFA + FPOffset
	FPUndefined = 2 // the caller's frame pointer is unknown
)

// BuildRules returns the unwind rules of an x86-64 or AArch64 ELF
// executable or shared object, from its .eh_frame, or its .debug_frame
// when it has no .eh_frame; see Rule for the format. Stats count as
// Build's, with the reasons a rule is CFAUnsupported.
func BuildRules(f *elf.File) ([]Rule, Stats, error) {
	var arch *archRegs
	switch {
	case f.Class == elf.ELFCLASS64 && f.Machine == elf.EM_X86_64:
		arch = archX86_64
	case f.Class == elf.ELFCLASS64 && f.Machine == elf.EM_AARCH64:
		arch = archAArch64
	default:
		return nil, Stats{}, fmt.Errorf("%v %v object: only x86-64 and AArch64 are supported", f.Class, f.Machine)
	}
	src, err := sourceOf(f)
	if err != nil {
		return nil, Stats{}, err
	}
	src.arch = arch
	return buildTable(src, (*interp).rule)
}

// rule converts the current state into a Rule, or returns the reason it
// cannot be expressed.
func (it *interp) rule() (Rule, string) {
	st := &it.st
	stop := Rule{CFA: CFAUnsupported}
	var r Rule
	switch {
	case st.ra.kind == ruleUndefined:
		return Rule{CFA: CFAUndefined}, "" // the outermost frame: the walk ends here
	case st.ra.kind == ruleOffset:
		if !fits32(st.ra.off) {
			return stop, "return address offset range"
		}
		r.RA, r.RAOffset = RAAtCFA, int32(st.ra.off)
	case it.arch.lr != noReg && it.c.raReg == it.arch.lr &&
		(st.ra.kind == ruleUnset || st.ra.kind == ruleSame || (st.ra.kind == ruleRegister && uint64(st.ra.off) == it.arch.lr)):
		r.RA = RAInLR
	default:
		return stop, "return address rule"
	}
	if st.cfaIsExpr {
		base, lit, ok := matchPLT(st.cfaExpr)
		switch {
		case it.arch != archX86_64 || !ok:
			return stop, "cfa expression"
		case base != 8 || lit != 11:
			return stop, "cfa expression: plt variant"
		}
		r.CFA, r.CFAOffset = CFAPLT, 8
	} else {
		switch st.cfaReg {
		case it.arch.sp:
			r.CFA = CFASP
		case it.arch.fp:
			r.CFA = CFAFP
		default:
			return stop, "cfa register"
		}
		if !fits32(st.cfaOff) {
			return stop, "cfa offset range"
		}
		r.CFAOffset = int32(st.cfaOff)
	}
	switch {
	case st.sp.kind == ruleUnset:
	case st.sp.kind == ruleValOffset && st.sp.off == 0:
	default:
		return stop, "sp rule"
	}
	switch st.fp.kind {
	case ruleUnset, ruleSame:
	case ruleUndefined:
		r.FP = FPUndefined
	case ruleOffset:
		if !fits32(st.fp.off) {
			return stop, "fp offset range"
		}
		r.FP, r.FPOffset = FPAtCFA, int32(st.fp.off)
	case ruleRegister:
		if uint64(st.fp.off) != it.arch.fp {
			return stop, "fp rule"
		}
	default:
		return stop, "fp rule"
	}
	r.RASigned = st.raSigned
	return r, ""
}

// fits32 reports whether v fits an int32.
func fits32(v int64) bool { return v >= math.MinInt32 && v <= math.MaxInt32 }

func (r Rule) pc() uint32 { return r.PC }

func (r Rule) at(pc uint32) Rule {
	r.PC = pc
	return r
}

func (r Rule) class() rowClass {
	switch r.CFA {
	case CFAUndefined:
		return classUndefined
	case CFAUnsupported:
		return classUnsupported
	case CFAPLT:
		return classPLT
	}
	return classRule
}

func (Rule) stop(c rowClass) Rule {
	if c == classUndefined {
		return Rule{CFA: CFAUndefined}
	}
	return Rule{CFA: CFAUnsupported}
}
