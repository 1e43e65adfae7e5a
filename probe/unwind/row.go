package unwind

// Row says, from PC (an ELF virtual address of the object, inclusive) up to
// the next row's PC, how to find the caller:
// CFA = (CFA rule == RegRSP ? rsp : rbp) + CFAOffset; the return address is
// at CFA-8; the caller's rbp is at CFA + RBPOffset when the RBP rule is
// RBPSaved, unchanged when RBPSame; and the caller's rsp = CFA.
//
// Rule packs two rules: the low nibble is the CFA rule (RegRSP, RegRBP,
// RuleUndefined, RuleUnsupported or RulePLT), the high nibble the RBP rule
// (RBPSame, RBPSaved or RBPUndefined). Rows that stop the walk
// (RuleUndefined, RuleUnsupported) carry zero offsets and RBPSame.
//
// A table from Build is sorted by strictly increasing PC, no two neighbours
// have the same rule and offsets, and it ends with a RuleUndefined row. A PC
// below the first row is not covered by any FDE.
//
// This is the contract with the BPF walker: the loader
// (probe/kernel's Objects.AppendUnwindRows) copies each Row field by field
// into the type bpf2go generates from struct unwind_row in
// ebpf/leakscope.h, and the rule values are those of its enums unwind_cfa
// and unwind_rbp (probe/kernel's TestUnwindRulesMatchKernel checks that
// they agree).
type Row struct {
	PC        uint32 // ELF vaddr; objects with code above 4 GiB are rejected
	CFAOffset int16  // bytes added to rsp or rbp; 8 for RulePLT (its base)
	RBPOffset int8   // bytes from the CFA to the saved rbp, a multiple of 8
	Rule      uint8  // CFA rule | RBP rule<<4
}

// CFA rules, the low nibble of Row.Rule.
const (
	RegRSP          = 0 // CFA = rsp + CFAOffset
	RegRBP          = 1 // CFA = rbp + CFAOffset
	RuleUndefined   = 2 // no FDE covers this PC, or the return address is undefined (outermost frame): stop
	RuleUnsupported = 3 // a CFA, rbp or return address rule the table cannot express: stop
	RulePLT         = 4 // .plt stubs: CFA = rsp + 8 + ((rip & 15) >= 11 ? 8 : 0)
)

// RBP rules, the high nibble of Row.Rule.
const (
	RBPSame      = 0 // the caller's rbp is the current rbp
	RBPSaved     = 1 // the caller's rbp is at CFA + RBPOffset
	RBPUndefined = 2 // the caller's rbp is unknown
)

// CFARule returns the CFA rule, the low nibble of r.Rule.
func (r Row) CFARule() uint8 { return r.Rule & 0xf }

func (r Row) pc() uint32 { return r.PC }

func (r Row) at(pc uint32) Row {
	r.PC = pc
	return r
}

func (r Row) class() rowClass {
	switch r.CFARule() {
	case RuleUndefined:
		return classUndefined
	case RuleUnsupported:
		return classUnsupported
	case RulePLT:
		return classPLT
	}
	return classRule
}

func (Row) stop(c rowClass) Row {
	if c == classUndefined {
		return Row{Rule: RuleUndefined}
	}
	return Row{Rule: RuleUnsupported}
}
