package unwind

import (
	"encoding/binary"
	"fmt"
	"sort"
)

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
// This is the contract with the BPF walker; Marshal gives the layout it
// reads, mirrored in C as
//
//	struct unwind_row {
//		__u32 pc;
//		__s16 cfa_offset;
//		__s8  rbp_offset;
//		__u8  rule; /* cfa rule | rbp rule << 4 */
//	};
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

// RowSize is the size in bytes of one marshalled Row.
const RowSize = 8

// CFARule returns the CFA rule, the low nibble of r.Rule.
func (r Row) CFARule() uint8 { return r.Rule & 0xf }

// RBPRule returns the RBP rule, the high nibble of r.Rule.
func (r Row) RBPRule() uint8 { return r.Rule >> 4 }

// String formats r like readelf's frames-interp columns, for tests and
// debugging: "0x1139 rsp+16 rbp=c-16".
func (r Row) String() string {
	var cfa string
	switch r.CFARule() {
	case RegRSP:
		cfa = fmt.Sprintf("rsp%+d", r.CFAOffset)
	case RegRBP:
		cfa = fmt.Sprintf("rbp%+d", r.CFAOffset)
	case RuleUndefined:
		cfa = "undefined"
	case RuleUnsupported:
		cfa = "unsupported"
	case RulePLT:
		cfa = "plt"
	default:
		cfa = fmt.Sprintf("rule%d", r.CFARule())
	}
	var rbp string
	switch r.RBPRule() {
	case RBPSame:
		rbp = "s"
	case RBPSaved:
		rbp = fmt.Sprintf("c%+d", r.RBPOffset)
	case RBPUndefined:
		rbp = "u"
	default:
		rbp = fmt.Sprintf("rule%d", r.RBPRule())
	}
	return fmt.Sprintf("%#x %s rbp=%s", r.PC, cfa, rbp)
}

// Marshal encodes rows for a BPF array map: RowSize bytes per row, little
// endian u32 pc, s16 cfa_offset, s8 rbp_offset, u8 rule.
func Marshal(rows []Row) []byte {
	b := make([]byte, len(rows)*RowSize)
	for i, r := range rows {
		o := b[i*RowSize:]
		binary.LittleEndian.PutUint32(o, r.PC)
		binary.LittleEndian.PutUint16(o[4:], uint16(r.CFAOffset))
		o[6] = byte(r.RBPOffset)
		o[7] = r.Rule
	}
	return b
}

// Lookup returns the row covering pc, the last row whose PC is at most pc,
// as the BPF walker's binary search finds it. It reports false when pc is
// below the first row.
func Lookup(rows []Row, pc uint32) (Row, bool) {
	i := sort.Search(len(rows), func(i int) bool { return rows[i].PC > pc })
	if i == 0 {
		return Row{}, false
	}
	return rows[i-1], true
}
