package symbolize

import (
	"debug/elf"
	"encoding/binary"
)

// maxCallBytes is the longest call instruction recognized: two prefixes,
// REX, opcode, ModRM, SIB and a 32-bit displacement.
const maxCallBytes = 10

// CallPrecedes reports whether the instruction just before vaddr is a call
// that ends exactly at vaddr, i.e. whether vaddr is a plausible return
// address. A frame-pointer walk through code built without frame pointers
// yields values that are not; checking filters most of them out.
//
// On x86-64 it recognizes call rel32 (e8, whose target must be code in
// this object) and the indirect call ff /2 in all its register and memory
// forms, with optional REX and segment, address-size, notrack or bnd
// prefixes. On arm64 it recognizes BL and BLR (and the pointer
// authenticating BLRAA/BLRAB variants). For other machines, and for vaddr
// outside the object's code, it reports false.
func (o *Object) CallPrecedes(vaddr uint64) bool {
	switch o.machine {
	case elf.EM_X86_64:
		n := uint64(maxCallBytes)
		if p := o.segment(vaddr - 1); p == nil || p.Flags&elf.PF_X == 0 {
			return false
		} else if avail := vaddr - p.Vaddr; avail < n {
			n = avail // do not read across the segment start
		}
		buf := make([]byte, n)
		if o.readCode(vaddr-n, buf) != int(n) {
			return false
		}
		if len(buf) >= 5 && buf[len(buf)-5] == 0xe8 {
			rel := int32(binary.LittleEndian.Uint32(buf[len(buf)-4:]))
			if o.isCode(vaddr + uint64(int64(rel))) {
				return true
			}
		}
		return indirectCallEndsAt(buf)
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

// indirectCallEndsAt reports whether some suffix of code decodes as one
// indirect near call, ff /2 (call *%rax, call *8(%rbx), call
// *0x1234(%rip), ...), that ends at the end of code.
func indirectCallEndsAt(code []byte) bool {
	for start := len(code) - 2; start >= 0; start-- {
		if n, ok := indirectCallLen(code[start:]); ok && n == len(code)-start {
			return true
		}
	}
	return false
}

// indirectCallLen decodes code as [prefixes] [REX] ff ModRM [SIB] [disp]
// with ModRM.reg == 2 and returns its length.
func indirectCallLen(code []byte) (int, bool) {
	i := 0
	for i < len(code) && i < 2 && isCallPrefix(code[i]) {
		i++
	}
	if i < len(code) && code[i]&0xf0 == 0x40 { // REX
		i++
	}
	if i+1 >= len(code) || code[i] != 0xff {
		return 0, false
	}
	modrm := code[i+1]
	i += 2
	mod, reg, rm := modrm>>6, (modrm>>3)&7, modrm&7
	if reg != 2 {
		return 0, false
	}
	if mod == 3 {
		return i, true // register operand
	}
	disp := 0
	switch mod {
	case 0:
		if rm == 5 {
			disp = 4 // RIP-relative
		}
	case 1:
		disp = 1
	case 2:
		disp = 4
	}
	if rm == 4 { // SIB follows
		if i >= len(code) {
			return 0, false
		}
		if mod == 0 && code[i]&7 == 5 {
			disp = 4 // no base register, disp32
		}
		i++
	}
	return i + disp, true
}

// isCallPrefix reports whether b is a legacy prefix that can precede an
// indirect call: segment overrides (3e doubles as CET notrack), address
// size, and bnd (f2).
func isCallPrefix(b byte) bool {
	switch b {
	case 0x26, 0x2e, 0x36, 0x3e, 0x64, 0x65, 0x67, 0xf2:
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
