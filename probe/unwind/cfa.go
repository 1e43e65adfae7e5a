package unwind

import (
	"debug/elf"
	"errors"
	"fmt"
	"math"
)

// DWARF register numbers the tables describe: the x86-64 psABI's rbp and
// rsp, and AArch64's x29 (the frame pointer), x30 (the link register)
// and sp ("DWARF for the Arm 64-bit Architecture").
const (
	dwRBP   = 6
	dwRSP   = 7
	dwX29   = 29
	dwX30   = 30
	dwSPA64 = 31
)

// noReg is a register number no DWARF register has.
const noReg = ^uint64(0)

// archRegs are the registers of one architecture that the stack walk
// needs rules for.
type archRegs struct {
	machine elf.Machine
	sp, fp  uint64
	lr      uint64 // the link register a call leaves the return address in; noReg where the call pushes it
}

var (
	archX86_64  = &archRegs{machine: elf.EM_X86_64, sp: dwRSP, fp: dwRBP, lr: noReg}
	archAArch64 = &archRegs{machine: elf.EM_AARCH64, sp: dwSPA64, fp: dwX29, lr: dwX30}
)

// Register rule kinds of the DWARF CFA model.
const (
	ruleUnset     = iota // never mentioned: a callee-saved register keeps its value
	ruleUndefined        // DW_CFA_undefined
	ruleSame             // DW_CFA_same_value
	ruleOffset           // saved at CFA+off
	ruleValOffset        // the value is CFA+off
	ruleRegister         // held in register off
	ruleExpr             // saved at an address computed by an expression
	ruleValExpr          // the value is computed by an expression
)

// regRule is the rule for one register.
type regRule struct {
	kind uint8
	off  int64
}

// state holds the rules the table needs at one location: the CFA, the
// frame and stack pointers (rbp and rsp, x29 and sp) and the return
// address column. Other registers' rules are decoded and dropped.
type state struct {
	cfaIsExpr bool
	cfaExpr   []byte
	cfaReg    uint64
	cfaOff    int64
	fp        regRule
	sp        regRule
	ra        regRule
	raSigned  bool // AArch64: the return address is signed (DW_CFA_AARCH64_negate_ra_state toggles it)
}

// maxRemember bounds DW_CFA_remember_state nesting; compilers nest one or
// two deep, and the bound keeps hostile input from growing the stack.
const maxRemember = 64

// noCFA marks a CFA that no DW_CFA_def_cfa has set yet.
const noCFA = ^uint64(0)

// interp runs CFA programs. One interp is reused across FDEs so its
// remember stack is allocated once.
type interp struct {
	arch  *archRegs
	c     *cie
	st    state
	stack []state
	base  uint64 // vaddr of the program's first byte, for pcrel DW_CFA_set_loc
	fn    uint64 // the FDE's initial location, for funcrel DW_CFA_set_loc
}

var (
	errRestore   = errors.New("DW_CFA_restore_state without DW_CFA_remember_state")
	errRemember  = fmt.Errorf("DW_CFA_remember_state nested deeper than %d", maxRemember)
	errBackwards = errors.New("location moves backwards")
)

// slot returns the tracked rule for reg, or nil for registers the table
// does not need.
func (it *interp) slot(reg uint64) *regRule {
	switch reg {
	case it.c.raReg:
		return &it.st.ra
	case it.arch.fp:
		return &it.st.fp
	case it.arch.sp:
		return &it.st.sp
	}
	return nil
}

func (it *interp) set(reg uint64, rule regRule) {
	if s := it.slot(reg); s != nil {
		*s = rule
	}
}

// restore returns reg to its rule after the CIE's initial instructions.
func (it *interp) restore(reg uint64) {
	s := it.slot(reg)
	if s == nil {
		return
	}
	switch reg {
	case it.c.raReg:
		*s = it.c.init.ra
	case it.arch.fp:
		*s = it.c.init.fp
	case it.arch.sp:
		*s = it.c.init.sp
	}
}

// exec runs instructions from r until one moves the location, returning the
// new location and true, or until the program ends, returning false.
func (it *interp) exec(r *reader, loc uint64) (uint64, bool, error) {
	c := it.c
	for r.left() > 0 {
		op := r.u8()
		switch op >> 6 {
		case 1: // DW_CFA_advance_loc
			return loc + uint64(op&0x3f)*c.codeAlign, true, nil
		case 2: // DW_CFA_offset
			off := int64(r.uleb()) * c.dataAlign
			it.set(uint64(op&0x3f), regRule{ruleOffset, off})
			continue
		case 3: // DW_CFA_restore
			it.restore(uint64(op & 0x3f))
			continue
		}
		switch op {
		case 0x00: // DW_CFA_nop
		case 0x01: // DW_CFA_set_loc
			var v uint64
			if c.addrSize == 4 && c.fdeEnc == peAbsptr {
				v = uint64(r.u32())
			} else {
				var err error
				if v, err = r.pointer(c.fdeEnc, it.base, it.fn); err != nil {
					return 0, false, fmt.Errorf("DW_CFA_set_loc: %w", err)
				}
			}
			if r.err != nil {
				return 0, false, r.err
			}
			return v, true, nil
		case 0x02: // DW_CFA_advance_loc1
			d := uint64(r.u8())
			return loc + d*c.codeAlign, true, r.err
		case 0x03: // DW_CFA_advance_loc2
			d := uint64(r.u16())
			return loc + d*c.codeAlign, true, r.err
		case 0x04: // DW_CFA_advance_loc4
			d := uint64(r.u32())
			return loc + d*c.codeAlign, true, r.err
		case 0x1d: // DW_CFA_MIPS_advance_loc8
			d := r.u64()
			return loc + d*c.codeAlign, true, r.err
		case 0x05: // DW_CFA_offset_extended
			reg := r.uleb()
			it.set(reg, regRule{ruleOffset, int64(r.uleb()) * c.dataAlign})
		case 0x06: // DW_CFA_restore_extended
			it.restore(r.uleb())
		case 0x07: // DW_CFA_undefined
			it.set(r.uleb(), regRule{kind: ruleUndefined})
		case 0x08: // DW_CFA_same_value
			it.set(r.uleb(), regRule{kind: ruleSame})
		case 0x09: // DW_CFA_register
			reg := r.uleb()
			it.set(reg, regRule{ruleRegister, int64(r.uleb())})
		case 0x0a: // DW_CFA_remember_state
			if len(it.stack) >= maxRemember {
				return 0, false, errRemember
			}
			it.stack = append(it.stack, it.st)
		case 0x0b: // DW_CFA_restore_state
			if len(it.stack) == 0 {
				return 0, false, errRestore
			}
			it.st = it.stack[len(it.stack)-1]
			it.stack = it.stack[:len(it.stack)-1]
		case 0x0c: // DW_CFA_def_cfa
			it.st.cfaReg = r.uleb()
			it.st.cfaOff = int64(r.uleb())
			it.st.cfaIsExpr = false
		case 0x0d: // DW_CFA_def_cfa_register
			it.st.cfaReg = r.uleb()
			it.st.cfaIsExpr = false
		case 0x0e: // DW_CFA_def_cfa_offset
			it.st.cfaOff = int64(r.uleb())
		case 0x0f: // DW_CFA_def_cfa_expression
			it.st.cfaExpr = r.bytes(int(min(r.uleb(), uint64(r.left())+1)))
			it.st.cfaIsExpr = true
		case 0x10: // DW_CFA_expression
			reg := r.uleb()
			r.bytes(int(min(r.uleb(), uint64(r.left())+1)))
			it.set(reg, regRule{kind: ruleExpr})
		case 0x11: // DW_CFA_offset_extended_sf
			reg := r.uleb()
			it.set(reg, regRule{ruleOffset, r.sleb() * c.dataAlign})
		case 0x12: // DW_CFA_def_cfa_sf
			it.st.cfaReg = r.uleb()
			it.st.cfaOff = r.sleb() * c.dataAlign
			it.st.cfaIsExpr = false
		case 0x13: // DW_CFA_def_cfa_offset_sf
			it.st.cfaOff = r.sleb() * c.dataAlign
		case 0x14: // DW_CFA_val_offset
			reg := r.uleb()
			it.set(reg, regRule{ruleValOffset, int64(r.uleb()) * c.dataAlign})
		case 0x15: // DW_CFA_val_offset_sf
			reg := r.uleb()
			it.set(reg, regRule{ruleValOffset, r.sleb() * c.dataAlign})
		case 0x16: // DW_CFA_val_expression
			reg := r.uleb()
			r.bytes(int(min(r.uleb(), uint64(r.left())+1)))
			it.set(reg, regRule{kind: ruleValExpr})
		case 0x2d: // DW_CFA_AARCH64_negate_ra_state (DW_CFA_GNU_window_save elsewhere)
			if it.arch.machine != elf.EM_AARCH64 {
				return 0, false, fmt.Errorf("unknown opcode %#x", op)
			}
			it.st.raSigned = !it.st.raSigned
		case 0x2e: // DW_CFA_GNU_args_size: outgoing argument bytes, irrelevant here
			r.uleb()
		case 0x2f: // DW_CFA_GNU_negative_offset_extended
			reg := r.uleb()
			it.set(reg, regRule{ruleOffset, -int64(r.uleb()) * c.dataAlign})
		default:
			return 0, false, fmt.Errorf("unknown opcode %#x", op)
		}
		if r.err != nil {
			return 0, false, r.err
		}
	}
	return 0, false, nil
}

// prepare runs c's initial instructions once, recording the state every
// FDE starts from, or why c's FDEs are unsupported.
func (c *cie) prepare(it *interp) {
	if c.prepared {
		return
	}
	c.prepared = true
	if c.signal {
		c.reason = "signal frame"
		return
	}
	if c.raReg == it.arch.fp || c.raReg == it.arch.sp {
		c.reason = "return address column"
		return
	}
	it.c = c
	it.st = state{cfaReg: noCFA}
	it.stack = it.stack[:0]
	c.init = it.st // DW_CFA_restore inside the initial instructions restores to unset
	r := reader{b: c.initial}
	if _, adv, err := it.exec(&r, 0); err != nil || adv {
		c.reason = "bad CIE program"
		return
	}
	c.init = it.st
	c.stack = append([]state(nil), it.stack...)
}

// row converts the current x86-64 state into a Row, or returns the reason
// it cannot be expressed.
func (it *interp) row() (Row, string) {
	st := &it.st
	switch {
	case st.ra.kind == ruleUndefined:
		return Row{Rule: RuleUndefined}, "" // the outermost frame: the walk ends here
	case st.ra.kind != ruleOffset:
		return Row{Rule: RuleUnsupported}, "return address rule"
	case st.ra.off != -8:
		return Row{Rule: RuleUnsupported}, "return address offset"
	}
	var r Row
	if st.cfaIsExpr {
		base, lit, ok := matchPLT(st.cfaExpr)
		switch {
		case !ok:
			return Row{Rule: RuleUnsupported}, "cfa expression"
		case base != 8 || lit != 11:
			return Row{Rule: RuleUnsupported}, "cfa expression: plt variant"
		}
		r = Row{CFAOffset: 8, Rule: RulePLT}
	} else {
		switch st.cfaReg {
		case dwRSP:
			r.Rule = RegRSP
		case dwRBP:
			r.Rule = RegRBP
		default:
			return Row{Rule: RuleUnsupported}, "cfa register"
		}
		if st.cfaOff < math.MinInt16 || st.cfaOff > math.MaxInt16 {
			return Row{Rule: RuleUnsupported}, "cfa offset range"
		}
		r.CFAOffset = int16(st.cfaOff)
	}
	switch {
	case st.sp.kind == ruleUnset:
	case st.sp.kind == ruleValOffset && st.sp.off == 0:
	default:
		return Row{Rule: RuleUnsupported}, "rsp rule"
	}
	switch st.fp.kind {
	case ruleUnset, ruleSame:
	case ruleUndefined:
		r.Rule |= RBPUndefined << 4
	case ruleOffset:
		if st.fp.off%8 != 0 || st.fp.off < math.MinInt8 || st.fp.off > math.MaxInt8 {
			return Row{Rule: RuleUnsupported}, "rbp offset range"
		}
		r.RBPOffset = int8(st.fp.off)
		r.Rule |= RBPSaved << 4
	case ruleRegister:
		if st.fp.off != dwRBP {
			return Row{Rule: RuleUnsupported}, "rbp rule"
		}
	default:
		return Row{Rule: RuleUnsupported}, "rbp rule"
	}
	return r, ""
}

// matchPLT recognises the CFA expression binutils emits for lazy .plt
// entries, DW_OP_breg7 base; DW_OP_breg16 0; DW_OP_lit15; DW_OP_and;
// DW_OP_litN; DW_OP_ge; DW_OP_lit3; DW_OP_shl; DW_OP_plus, which means
// CFA = rsp + base + ((rip & 15) >= N ? 8 : 0). N is 11 for classic PLT
// entries (jmp *GOT; push; jmp) and 9 for IBT ones (endbr64; push; jmp).
func matchPLT(e []byte) (base int64, lit int, ok bool) {
	r := reader{b: e}
	if r.u8() != 0x77 { // DW_OP_breg7 (rsp)
		return 0, 0, false
	}
	base = r.sleb()
	if r.u8() != 0x80 || r.sleb() != 0 { // DW_OP_breg16 (rip) 0
		return 0, 0, false
	}
	if r.u8() != 0x3f || r.u8() != 0x1a { // DW_OP_lit15 DW_OP_and
		return 0, 0, false
	}
	l := r.u8()
	if l < 0x30 || l > 0x4f { // DW_OP_lit0..31
		return 0, 0, false
	}
	for _, want := range []byte{0x2a, 0x33, 0x24, 0x22} { // DW_OP_ge DW_OP_lit3 DW_OP_shl DW_OP_plus
		if r.u8() != want {
			return 0, 0, false
		}
	}
	if r.err != nil || r.left() != 0 {
		return 0, 0, false
	}
	return base, int(l - 0x30), true
}

// tableRow is what a table holds: a Row (the kernel's x86-64 format) or
// a Rule (either architecture).
type tableRow[R any] interface {
	comparable
	pc() uint32
	at(pc uint32) R    // the same rules from pc
	class() rowClass   // whether it stops the walk, and how
	stop(c rowClass) R // a stop row of class classUndefined or classUnsupported, at PC 0
}

// rowClass sorts rows for Stats and the writer.
type rowClass uint8

const (
	classRule        rowClass = iota // the walk continues
	classPLT                         // the .plt stubs' rule (x86-64)
	classUndefined                   // no FDE covers the PC, or the outermost frame: stop
	classUnsupported                 // a rule the table cannot express: stop
)

// writer accumulates rows, merging neighbours with identical rules.
type writer[R tableRow[R]] struct {
	rows      []R
	reasons   map[string]int
	outermost int
}

// emit appends r, replacing a row at the same PC and dropping r when the
// row before it has the same rules. It reports whether r is in the table.
func (w *writer[R]) emit(r R) bool {
	n := len(w.rows)
	if n > 0 {
		last := &w.rows[n-1]
		if (*last).pc() == r.pc() {
			if n > 1 && sameRules(w.rows[n-2], r) {
				w.rows = w.rows[:n-1]
				return false
			}
			*last = r
			return true
		}
		if sameRules(*last, r) {
			return false
		}
	}
	w.rows = append(w.rows, r)
	return true
}

// sameRules reports whether a and b say the same but for their PCs.
func sameRules[R tableRow[R]](a, b R) bool {
	return a.at(0) == b.at(0)
}

// unsupported emits a stop row at pc for something the table cannot
// express, and counts why.
func (w *writer[R]) unsupported(pc uint64, reason string) {
	w.reasons[reason]++
	var z R
	w.emit(z.stop(classUnsupported).at(uint32(pc)))
}

// run emits the rows of f for locations below end (f's end, or where the
// next FDE starts when they overlap), each made from its state by conv.
// base is the section's vaddr.
func run[R tableRow[R]](it *interp, f *fde, end, base uint64, w *writer[R], conv func(*interp) (R, string)) {
	c := f.cie
	c.prepare(it)
	if c.reason != "" {
		w.unsupported(f.start, c.reason)
		return
	}
	it.c = c
	it.st = c.init
	it.stack = append(it.stack[:0], c.stack...)
	it.base = base + uint64(f.progOff)
	it.fn = f.start
	r := reader{b: f.prog}
	loc := f.start
	for {
		next, adv, err := it.exec(&r, loc)
		if err == nil && adv && next < loc {
			err = errBackwards
		}
		if err != nil {
			w.unsupported(loc, "bad CFA program")
			return
		}
		row, reason := conv(it)
		if reason != "" {
			w.unsupported(loc, reason)
		} else {
			if row.class() == classUndefined {
				w.outermost++
			}
			w.emit(row.at(uint32(loc)))
		}
		if !adv {
			return
		}
		loc = next
		if loc >= end {
			return
		}
	}
}
