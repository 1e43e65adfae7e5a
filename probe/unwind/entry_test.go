package unwind

import (
	"encoding/hex"
	"testing"
)

func TestEntryRow(t *testing.T) {
	for _, tc := range []struct {
		name, code string
		want       string // Row.String, "" for none
	}{
		// Go 1.26's crosscall2 (runtime/cgo/asm_amd64.s): push %rbp; mov
		// %rsp,%rbp; sub $0x30,%rsp; mov %rbp,0x28(%rsp); lea
		// 0x28(%rsp),%rbp; the callee-saved registers; sub $0x18,%rsp;
		// the arguments; call runtime.cgocallback.
		{"crosscall2 go1.26", "554889e54883ec3048896c2428488d6c242848891c244c896424084c896c24104c897424184c897c24204883ec1848893c24488974240848894c2410e87f84ffff",
			"0x488b40 rsp+88 rbp=c-16"},
		// PUSH_REGS_HOST_TO_ABI0's shape: pushfq; cld; sub; %rbp stored
		// among the registers; sub; call.
		{"registers stored", "9cfc4883ec5848893c2448896c241048895c24184883ec18e800000000", "0x488b40 rsp+128 rbp=c-88"},
		// %rbp untouched: the caller's stays in it.
		{"rbp untouched", "4883ec18e800000000", "0x488b40 rsp+32 rbp=s"},
		// %rbp overwritten before it was saved: the caller's is lost.
		{"rbp clobbered", "31ed4883ec18e800000000", ""},
		// %rsp moved in a way not followed (and $-16).
		{"rsp aligned", "4883e4f0e800000000", ""},
		{"no call", "c3", ""},
	} {
		code, err := hex.DecodeString(tc.code)
		if err != nil {
			t.Fatal(err)
		}
		r, ok := EntryRow(code, 0x488b40)
		got := ""
		if ok {
			got = r.String()
		}
		if got != tc.want {
			t.Errorf("%s: EntryRow = %q, want %q", tc.name, got, tc.want)
		}
	}
}
