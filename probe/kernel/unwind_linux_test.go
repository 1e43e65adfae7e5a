//go:build linux

package kernel

import (
	"testing"

	"github.com/leakscope/leakscope/probe/unwind"
)

// TestUnwindRulesMatchKernel checks the contract of unwind.Row with the
// BPF walker: AppendUnwindRows copies a Row's rule nibbles as they are, so the
// Go rule values must be those of ebpf/leakscope.h's enums.
func TestUnwindRulesMatchKernel(t *testing.T) {
	for _, c := range []struct {
		name      string
		goV, kern uint32
	}{
		{"RegRSP", unwind.RegRSP, uint32(leakUnwindCfaUNWIND_CFA_RSP)},
		{"RegRBP", unwind.RegRBP, uint32(leakUnwindCfaUNWIND_CFA_RBP)},
		{"RuleUndefined", unwind.RuleUndefined, uint32(leakUnwindCfaUNWIND_UNDEFINED)},
		{"RuleUnsupported", unwind.RuleUnsupported, uint32(leakUnwindCfaUNWIND_UNSUPPORTED)},
		{"RulePLT", unwind.RulePLT, uint32(leakUnwindCfaUNWIND_PLT)},
		{"RBPSame", unwind.RBPSame, uint32(leakUnwindRbpUNWIND_RBP_SAME)},
		{"RBPSaved", unwind.RBPSaved, uint32(leakUnwindRbpUNWIND_RBP_SAVED)},
		{"RBPUndefined", unwind.RBPUndefined, uint32(leakUnwindRbpUNWIND_RBP_UNDEFINED)},
	} {
		if c.goV != c.kern {
			t.Errorf("unwind.%s = %d, the kernel's %d", c.name, c.goV, c.kern)
		}
	}
}
