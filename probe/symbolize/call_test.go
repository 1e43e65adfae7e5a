package symbolize

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestX86CallEndsAt(t *testing.T) {
	tests := []struct {
		code string // hex; the return address is right after the last byte
		want bool
	}{
		{"ffd0", true},           // call *%rax
		{"9090ffd2", true},       // call *%rdx after nops
		{"41ffd0", true},         // call *%r8
		{"ff10", true},           // call *(%rax)
		{"ff5008", true},         // call *0x8(%rax)
		{"41ff542408", true},     // call *0x8(%r12): SIB, disp8
		{"ff9080000000", true},   // call *0x80(%rax): disp32
		{"ff1578563412", true},   // call *0x12345678(%rip)
		{"ff14c578563412", true}, // call *0x12345678(,%rax,8): SIB without base
		{"ff94d878563412", true}, // call *0x12345678(%rax,%rbx,8)
		{"3effd0", true},         // notrack call *%rax
		{"f2ffd0", true},         // bnd call *%rax
		{"ffe0", false},          // jmp *%rax (reg 4)
		{"ff2578563412", false},  // jmp *0x12345678(%rip)
		{"ff1d78563412", false},  // lcall (reg 3)
		{"ffd090", false},        // call *%rax, then a nop before the address
		{"ff15785634", false},    // truncated displacement
		{"c3", false},            // ret
		{"", false},              // nothing
		{"e878563412", false},    // direct calls are checked by CallPrecedes itself
		{"4889e5ffd0", true},     // mov %rsp,%rbp; call *%rax
		{"ff14", false},          // SIB byte missing
	}
	for _, tt := range tests {
		code := unhex(t, tt.code)
		// Code spans the 16 bytes before the end of code.
		validTarget := func(rel int64) bool { return -16 <= rel && rel <= 0 }
		if got := x86CallEndsAt(code, validTarget); got != tt.want {
			t.Errorf("x86CallEndsAt(%s) = %v, want %v", tt.code, got, tt.want)
		}
	}
}

func TestArm64Call(t *testing.T) {
	tests := []struct {
		insn uint32
		want bool
	}{
		{0x94000000, true},  // bl .
		{0x97ffffff, true},  // bl .-4
		{0xd63f0100, true},  // blr x8
		{0xd63f03c0, true},  // blr x30
		{0xd73f0a11, true},  // blraa x16, x17
		{0xd63f0a1f, true},  // blraaz x16
		{0xd63f0e1f, true},  // blrabz x16
		{0x14000000, false}, // b .
		{0xd61f0100, false}, // br x8
		{0xd65f03c0, false}, // ret
		{0xd503201f, false}, // nop
	}
	for _, tt := range tests {
		if got := arm64Call(tt.insn); got != tt.want {
			t.Errorf("arm64Call(%#08x) = %v, want %v", tt.insn, got, tt.want)
		}
	}
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b := make([]byte, len(s)/2)
	for i := range b {
		v, err := strconv.ParseUint(s[2*i:2*i+2], 16, 8)
		if err != nil {
			t.Fatalf("bad hex %q", s)
		}
		b[i] = byte(v)
	}
	return b
}

// objdumpLine is "  1139:\tpush   %rbp" from objdump -d --no-show-raw-insn.
var objdumpLine = regexp.MustCompile(`^\s*([0-9a-f]+):\t(\S.*)$`)

// instructionEnds disassembles path with objdump and returns the address
// after each instruction, split by whether the instruction was a near call.
func instructionEnds(t *testing.T, path string) (afterCall, afterOther []uint64) {
	t.Helper()
	out := run(t, "objdump", "-d", "--no-show-raw-insn", path)
	var prevAddr uint64
	prevCall, have := false, false
	for _, line := range strings.Split(out, "\n") {
		m := objdumpLine.FindStringSubmatch(line)
		if m == nil {
			// A new function or section: only consecutive lines give an
			// instruction's end.
			have = false
			continue
		}
		addr, err := strconv.ParseUint(m[1], 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		if have && addr > prevAddr {
			if prevCall {
				afterCall = append(afterCall, addr)
			} else {
				afterOther = append(afterOther, addr)
			}
		}
		prevAddr, have = addr, true
		prevCall = false
		for _, f := range strings.Fields(m[2]) {
			if f == "call" || f == "callq" {
				prevCall = true
			}
		}
	}
	return afterCall, afterOther
}

// TestCallPrecedesObjdump checks CallPrecedes against objdump on compiled
// code: every address after a call is accepted, and few addresses after
// other instructions are.
func TestCallPrecedesObjdump(t *testing.T) {
	objects := []string{compile(t, "gcc", "prog.c", "-g", "-O0", "-fno-omit-frame-pointer")}
	if _, err := os.Stat("/lib/x86_64-linux-gnu/libz.so.1"); err == nil {
		objects = append(objects, "/lib/x86_64-linux-gnu/libz.so.1")
	} else {
		t.Logf("libz.so.1 missing, checking the test program only: %v", err)
	}
	for _, path := range objects {
		o := mustObject(t, path)
		calls, others := instructionEnds(t, path)
		if len(calls) < 5 {
			t.Fatalf("%s: objdump shows %d calls, want at least 5", path, len(calls))
		}
		for _, ret := range calls {
			if !o.CallPrecedes(ret) {
				t.Errorf("%s: CallPrecedes(%#x) = false after a call", path, ret)
			}
		}
		var wrong int
		for _, a := range others {
			if o.CallPrecedes(a) {
				wrong++
			}
		}
		// Bytes of other instructions sometimes decode as a call (ff d0
		// inside an immediate); a stack walker only needs most garbage
		// rejected.
		if share := float64(wrong) / float64(len(others)); share > 0.02 {
			t.Errorf("%s: CallPrecedes true after %d of %d non-call instructions (%.1f%%), want at most 2%%", path, wrong, len(others), 100*share)
		}
		t.Logf("%s: %d calls accepted; %d of %d other instruction ends accepted", path, len(calls), wrong, len(others))
	}
}

func TestCallPrecedesOutsideCode(t *testing.T) {
	o := mustObject(t, compile(t, "gcc", "prog.c", "-O0"))
	for _, v := range []uint64{0, 1, 1 << 62, ^uint64(0)} {
		if o.CallPrecedes(v) {
			t.Errorf("CallPrecedes(%#x) = true outside the code", v)
		}
	}
	for _, name := range []string{"leaf_alloc", "middle"} {
		// Both follow another function's ret.
		if v := mustLookup(t, o, name); o.CallPrecedes(v) {
			t.Errorf("CallPrecedes(%s) = true at a function entry", name)
		}
	}
}
