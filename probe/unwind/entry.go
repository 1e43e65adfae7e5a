package unwind

import "golang.org/x/arch/x86/x86asm"

// maxEntryInsns bounds the instructions EntryRow follows to the call.
const maxEntryInsns = 64

// EntryRow returns the row that unwinds a return address at the first
// call of code, a function at entry (an ELF vaddr) with no unwind
// information of its own: hand-written assembly such as the Go runtime's
// crosscall2, through which C code calls back into Go. It follows the
// function's instructions from its entry to that call, as CFI directives
// would have described them: how far they moved the stack pointer, and
// where they saved the caller's %rbp. ok is false when an instruction on
// the way cannot be decoded, moves %rsp in a way it does not follow, or
// changes %rbp without saving the caller's first.
func EntryRow(code []byte, entry uint64) (Row, bool) {
	sp := int64(0)                // %rsp relative to its value at entry
	saved, held := int64(0), true // where the caller's %rbp was saved (relative to entry %rsp); whether %rbp still holds it
	found := false
	for n, off := 0, 0; n < maxEntryInsns && off < len(code); n++ {
		in, err := x86asm.Decode(code[off:], 64)
		if err != nil {
			return Row{}, false
		}
		off += in.Len
		dst, _ := in.Args[0].(x86asm.Reg)
		switch in.Op {
		case x86asm.CALL:
			if entry > 1<<32 || 8-sp > 1<<15-1 || (found && (saved-8-sp < -128 || saved-8-sp > 127)) {
				return Row{}, false
			}
			r := Row{PC: uint32(entry), CFAOffset: int16(8 - sp), Rule: RegRSP}
			switch {
			case found:
				// The CFA is entry %rsp + 8.
				r.RBPOffset, r.Rule = int8(saved-8), RegRSP|RBPSaved<<4
			case !held:
				return Row{}, false
			}
			return r, true
		case x86asm.PUSH:
			if held && dst == x86asm.RBP && !found {
				saved, found = sp-8, true
			}
			sp -= 8
			continue
		case x86asm.PUSHFQ:
			sp -= 8
			continue
		case x86asm.SUB, x86asm.ADD:
			if dst == x86asm.RSP {
				imm, ok := in.Args[1].(x86asm.Imm)
				if !ok {
					return Row{}, false
				}
				if in.Op == x86asm.SUB {
					sp -= int64(imm)
				} else {
					sp += int64(imm)
				}
				continue
			}
		case x86asm.MOV:
			if m, ok := in.Args[0].(x86asm.Mem); ok && m.Base == x86asm.RSP && m.Index == 0 && in.Args[1] == x86asm.RBP && held && !found {
				saved, found = sp+m.Disp, true
				continue
			}
		case x86asm.POP, x86asm.POPFQ, x86asm.RET, x86asm.JMP, x86asm.ENTER, x86asm.LEAVE:
			return Row{}, false
		}
		if dst == x86asm.RSP || dst == x86asm.ESP {
			return Row{}, false
		}
		if dst == x86asm.RBP || dst == x86asm.EBP {
			held = false
		}
	}
	return Row{}, false
}
