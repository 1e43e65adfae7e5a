//go:build linux

package kernel

import "testing"

// Each cookie's fields lie within its 64 bits and do not overlap, and
// alloc_session's register fields have room for every enum arg_reg of
// this target and for arm64's x0-x30.
func TestCookieLayoutFields(t *testing.T) {
	type field struct {
		name        string
		shift, bits leakCookieLayout
	}
	layouts := map[string][]field{
		"pair": {
			{"kind", leakCookieLayoutCOOKIE_KIND_SHIFT, leakCookieLayoutCOOKIE_KIND_BITS},
			{"op", leakCookieLayoutCOOKIE_OP_SHIFT, leakCookieLayoutCOOKIE_OP_BITS},
			{"arg", leakCookieLayoutCOOKIE_ARG_SHIFT, leakCookieLayoutCOOKIE_ARG_BITS},
			{"size_arg", leakCookieLayoutCOOKIE_SIZE_ARG_SHIFT, leakCookieLayoutCOOKIE_SIZE_ARG_BITS},
			{"zwindow", leakCookieLayoutCOOKIE_ZWINDOW_SHIFT, leakCookieLayoutCOOKIE_ZWINDOW_BITS},
			{"bytes", leakCookieLayoutCOOKIE_BYTES_SHIFT, leakCookieLayoutCOOKIE_BYTES_BITS},
		},
		"zlib": {
			{"state", leakCookieLayoutZCOOKIE_STATE_SHIFT, leakCookieLayoutZCOOKIE_STATE_BITS},
			{"init", leakCookieLayoutZCOOKIE_INIT_SHIFT, leakCookieLayoutZCOOKIE_INIT_BITS},
		},
		"alloc": {
			{"fn", leakCookieLayoutACOOKIE_FN_SHIFT, leakCookieLayoutACOOKIE_FN_BITS},
			{"arg1", leakCookieLayoutACOOKIE_ARG1SHIFT, leakCookieLayoutACOOKIE_ARG_BITS},
			{"arg2", leakCookieLayoutACOOKIE_ARG2SHIFT, leakCookieLayoutACOOKIE_ARG_BITS},
			{"arg3", leakCookieLayoutACOOKIE_ARG3SHIFT, leakCookieLayoutACOOKIE_ARG_BITS},
		},
	}
	for name, fields := range layouts {
		var used uint64
		for _, f := range fields {
			if f.bits == 0 || f.shift+f.bits > 64 {
				t.Errorf("%s cookie: field %s (bits %d-%d) does not fit 64 bits", name, f.name, f.shift, f.shift+f.bits-1)
				continue
			}
			mask := (uint64(1)<<f.bits - 1) << f.shift
			if used&mask != 0 {
				t.Errorf("%s cookie: field %s (bits %d-%d) overlaps another", name, f.name, f.shift, f.shift+f.bits-1)
			}
			used |= mask
		}
	}
	regs := uint32(1) << leakCookieLayoutACOOKIE_ARG_BITS
	for _, r := range argRegs {
		if r >= regs {
			t.Errorf("enum arg_reg %d does not fit ACOOKIE_ARG_BITS (%d)", r, leakCookieLayoutACOOKIE_ARG_BITS)
		}
	}
	const arm64Regs = 31 // x0-x30
	if regs < arm64Regs {
		t.Errorf("ACOOKIE_ARG_BITS (%d) holds %d registers, arm64 has %d", leakCookieLayoutACOOKIE_ARG_BITS, regs, arm64Regs)
	}
}
