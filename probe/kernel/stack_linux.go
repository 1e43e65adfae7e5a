//go:build linux

package kernel

// StackFlags say how the kernel's walk of a stack ended (enum stack_flag).
type StackFlags uint32

// The stack flags.
const (
	StackNoFP              = StackFlags(leakStackFlagSTACK_NO_FP)
	StackBadFrame          = StackFlags(leakStackFlagSTACK_BAD_FRAME)
	StackUnverified        = StackFlags(leakStackFlagSTACK_UNVERIFIED)
	StackMaxDepth          = StackFlags(leakStackFlagSTACK_MAX_DEPTH)
	StackReadError         = StackFlags(leakStackFlagSTACK_READ_ERROR)
	StackUnwindEnd         = StackFlags(leakStackFlagSTACK_UNWIND_END)
	StackUnwindUnsupported = StackFlags(leakStackFlagSTACK_UNWIND_UNSUPPORTED)
)

// A kernel stack entry with stackJVMMethod set holds the Method* of the
// interpreted frame before it and its bytecode index + 1
// (STACK_JVM_METHOD in ebpf/leakscope.h, enum stack_jvm).
const (
	stackJVMMethod     = 1 << leakStackJvmSTACK_JVM_METHOD_BIT
	stackJVMMethodMask = 1<<leakStackJvmSTACK_JVM_BCI_SHIFT - 1
	stackJVMBCIShift   = leakStackJvmSTACK_JVM_BCI_SHIFT
	stackJVMBCIMask    = 1<<leakStackJvmSTACK_JVM_BCI_BITS - 1
)

// MethodEntry decodes a stack entry that holds the Method* of the
// interpreted frame before it: the Method* and the bytecode index (-1:
// unknown); ok is false for a return address.
func MethodEntry(entry uint64) (method uint64, bci int, ok bool) {
	if entry&stackJVMMethod == 0 {
		return 0, 0, false
	}
	return entry & stackJVMMethodMask, int(entry>>stackJVMBCIShift&stackJVMBCIMask) - 1, true
}

// Stack reads stack id: its entries, innermost first (return addresses
// and MethodEntry's), in the object's buffer, good until the next call.
func (o *Objects) Stack(id uint64) ([]uint64, StackFlags, error) {
	raw := &o.stack
	if err := o.objs.Stacks.Lookup(id, raw); err != nil {
		return nil, 0, err
	}
	n := min(int(raw.Depth), len(raw.Ips))
	return raw.Ips[:n], StackFlags(raw.Flags), nil
}
