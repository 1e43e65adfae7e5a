package symbolize

import (
	"debug/elf"
	"encoding/binary"

	"golang.org/x/arch/x86/x86asm"
)

// maxCallBytes is the longest x86-64 call instruction looked for: a
// prefix (notrack, bnd or segment), REX, opcode, ModRM, SIB and a 32-bit
// displacement, with room for one more prefix.
const maxCallBytes = 10

// CallPrecedes reports whether the instruction just before vaddr is a call
// that ends exactly at vaddr, i.e. whether vaddr is a plausible return
// address. A frame-pointer walk through code built without frame pointers
// yields values that are not; checking filters most of them out.
//
// On x86-64 it recognizes call rel32 (e8, whose target must be code in
// this object) and the indirect call ff /2 in all its register and memory
// forms, with REX and prefixes such as notrack. On arm64 it recognizes BL,
// BLR and the pointer-authenticating BLRAA/BLRAB forms. For other machines,
// and for vaddr outside the object's code, it reports false.
func (o *Object) CallPrecedes(vaddr uint64) bool {
	switch o.machine {
	case elf.EM_X86_64:
		p := o.segment(vaddr - 1)
		if p == nil || p.Flags&elf.PF_X == 0 {
			return false
		}
		n := min(uint64(maxCallBytes), vaddr-p.Vaddr) // do not read across the segment start
		buf := make([]byte, n)
		if o.readCode(vaddr-n, buf) != int(n) {
			return false
		}
		return x86CallEndsAt(buf, func(rel int64) bool { return o.isCode(vaddr + uint64(rel)) })
	case elf.EM_AARCH64:
		if vaddr%4 != 0 || vaddr < 4 || !o.isCode(vaddr-4) {
			return false
		}
		var buf [4]byte
		if o.readCode(vaddr-4, buf[:]) != 4 {
			return false
		}
		return arm64Call(binary.LittleEndian.Uint32(buf[:]))
	}
	return false
}

// x86CallEndsAt reports whether some suffix of code decodes as exactly one
// near call instruction. For a direct call, validTarget is asked whether
// its target, relative to the end of code, is plausible.
func x86CallEndsAt(code []byte, validTarget func(rel int64) bool) bool {
	for start := len(code) - 2; start >= 0; start-- {
		inst, err := x86asm.Decode(code[start:], 64)
		if err != nil || inst.Op != x86asm.CALL || inst.Len != len(code)-start {
			continue
		}
		if rel, ok := inst.Args[0].(x86asm.Rel); ok && !validTarget(int64(rel)) {
			continue
		}
		return true
	}
	return false
}

// arm64Call reports whether insn is BL, BLR, or BLRAA/BLRAAZ/BLRAB/BLRABZ.
func arm64Call(insn uint32) bool {
	switch {
	case insn&0xfc000000 == 0x94000000: // BL imm26
		return true
	case insn&0xfffffc1f == 0xd63f0000: // BLR Xn
		return true
	case insn&0xfefff800 == 0xd63f0800: // BLRAA, BLRAB (Z forms included)
		return true
	}
	return false
}
