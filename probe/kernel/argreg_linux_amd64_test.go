package kernel

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// argRegs is every enum arg_reg of this target.
var argRegs = []uint32{ArgRegDI, ArgRegSI, ArgRegDX, ArgRegCX, ArgRegR8, ArgRegR9, ArgRegAX,
	ArgRegBX, ArgRegBP, ArgRegR10, ArgRegR11, ArgRegR12, ArgRegR13, ArgRegR14, ArgRegR15}

// siteArgFields is the field of x86-64's struct pt_regs each enum arg_reg
// names.
func siteArgFields() []siteArgField {
	var r unix.PtraceRegs
	return []siteArgField{
		{ArgRegDI, unsafe.Offsetof(r.Rdi)}, {ArgRegSI, unsafe.Offsetof(r.Rsi)},
		{ArgRegDX, unsafe.Offsetof(r.Rdx)}, {ArgRegCX, unsafe.Offsetof(r.Rcx)},
		{ArgRegR8, unsafe.Offsetof(r.R8)}, {ArgRegR9, unsafe.Offsetof(r.R9)},
		{ArgRegAX, unsafe.Offsetof(r.Rax)}, {ArgRegBX, unsafe.Offsetof(r.Rbx)},
		{ArgRegBP, unsafe.Offsetof(r.Rbp)}, {ArgRegR10, unsafe.Offsetof(r.R10)},
		{ArgRegR11, unsafe.Offsetof(r.R11)}, {ArgRegR12, unsafe.Offsetof(r.R12)},
		{ArgRegR13, unsafe.Offsetof(r.R13)}, {ArgRegR14, unsafe.Offsetof(r.R14)},
		{ArgRegR15, unsafe.Offsetof(r.R15)},
	}
}
