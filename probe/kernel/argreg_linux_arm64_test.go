package kernel

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// argRegs is every enum arg_reg of this target: x0-x30, in order.
var argRegs = []uint32{
	uint32(leakArgRegARG_REG_X0), uint32(leakArgRegARG_REG_X1), uint32(leakArgRegARG_REG_X2), uint32(leakArgRegARG_REG_X3),
	uint32(leakArgRegARG_REG_X4), uint32(leakArgRegARG_REG_X5), uint32(leakArgRegARG_REG_X6), uint32(leakArgRegARG_REG_X7),
	uint32(leakArgRegARG_REG_X8), uint32(leakArgRegARG_REG_X9), uint32(leakArgRegARG_REG_X10), uint32(leakArgRegARG_REG_X11),
	uint32(leakArgRegARG_REG_X12), uint32(leakArgRegARG_REG_X13), uint32(leakArgRegARG_REG_X14), uint32(leakArgRegARG_REG_X15),
	uint32(leakArgRegARG_REG_X16), uint32(leakArgRegARG_REG_X17), uint32(leakArgRegARG_REG_X18), uint32(leakArgRegARG_REG_X19),
	uint32(leakArgRegARG_REG_X20), uint32(leakArgRegARG_REG_X21), uint32(leakArgRegARG_REG_X22), uint32(leakArgRegARG_REG_X23),
	uint32(leakArgRegARG_REG_X24), uint32(leakArgRegARG_REG_X25), uint32(leakArgRegARG_REG_X26), uint32(leakArgRegARG_REG_X27),
	uint32(leakArgRegARG_REG_X28), uint32(leakArgRegARG_REG_X29), uint32(leakArgRegARG_REG_X30),
}

// siteArgFields is the field of arm64's struct pt_regs (regs[n]) each
// enum arg_reg names.
func siteArgFields() []siteArgField {
	var r unix.PtraceRegs
	var fields []siteArgField
	for n, reg := range argRegs {
		fields = append(fields, siteArgField{reg, unsafe.Offsetof(r.Regs) + uintptr(n)*unsafe.Sizeof(r.Regs[0])})
	}
	return fields
}
