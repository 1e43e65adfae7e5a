package kernel

// The registers alloc_session's cookie can name for an argument (enum
// arg_reg): every general register but %rsp. x86-64's alone: enum arg_reg
// is the one generated type whose values differ per target (arm64's are
// x0-x30 by number), and only the x86-64 tracer (probe/uprobe) names them.
const (
	ArgRegDI  = uint32(leakArgRegARG_REG_DI)
	ArgRegSI  = uint32(leakArgRegARG_REG_SI)
	ArgRegDX  = uint32(leakArgRegARG_REG_DX)
	ArgRegCX  = uint32(leakArgRegARG_REG_CX)
	ArgRegR8  = uint32(leakArgRegARG_REG_R8)
	ArgRegR9  = uint32(leakArgRegARG_REG_R9)
	ArgRegAX  = uint32(leakArgRegARG_REG_AX)
	ArgRegBX  = uint32(leakArgRegARG_REG_BX)
	ArgRegBP  = uint32(leakArgRegARG_REG_BP)
	ArgRegR10 = uint32(leakArgRegARG_REG_R10)
	ArgRegR11 = uint32(leakArgRegARG_REG_R11)
	ArgRegR12 = uint32(leakArgRegARG_REG_R12)
	ArgRegR13 = uint32(leakArgRegARG_REG_R13)
	ArgRegR14 = uint32(leakArgRegARG_REG_R14)
	ArgRegR15 = uint32(leakArgRegARG_REG_R15)
)
