package unwind

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/leakscope/leakscope/internal/testutil"
)

// checkRules asserts the invariants every table from BuildRules holds.
func checkRules(t testing.TB, rules []Rule, st Stats) {
	t.Helper()
	checkShape(t, rules, st)
	for i, r := range rules {
		if r.CFA > CFAPLT || r.RA > RAInLR || r.FP > FPUndefined {
			t.Fatalf("rule %d: bad rule %v", i, r)
		}
		if (r.RA != RAAtCFA && r.RAOffset != 0) || (r.FP != FPAtCFA && r.FPOffset != 0) {
			t.Fatalf("rule %d: offset without its rule: %v", i, r)
		}
	}
}

// String formats r in test failures: "0x864 sp+32 ra=c-24 fp=c-32 signed".
func (r Rule) String() string {
	var cfa string
	switch r.CFA {
	case CFASP:
		cfa = fmt.Sprintf("sp%+d", r.CFAOffset)
	case CFAFP:
		cfa = fmt.Sprintf("fp%+d", r.CFAOffset)
	case CFAUndefined:
		return fmt.Sprintf("%#x undefined", r.PC)
	case CFAUnsupported:
		return fmt.Sprintf("%#x unsupported", r.PC)
	case CFAPLT:
		cfa = "plt"
	default:
		cfa = fmt.Sprintf("rule%d", r.CFA)
	}
	ra := fmt.Sprintf("c%+d", r.RAOffset)
	if r.RA == RAInLR {
		ra = "lr"
	}
	fp := map[uint8]string{FPSame: "s", FPUndefined: "u"}[r.FP]
	if r.FP == FPAtCFA {
		fp = fmt.Sprintf("c%+d", r.FPOffset)
	}
	s := fmt.Sprintf("%#x %s ra=%s fp=%s", r.PC, cfa, ra, fp)
	if r.RASigned {
		s += " signed"
	}
	return s
}

// lookupRule returns the rule covering pc, as lookup does for rows.
func lookupRule(rules []Rule, pc uint32) (Rule, bool) {
	i := sort.Search(len(rules), func(i int) bool { return rules[i].PC > pc })
	if i == 0 {
		return Rule{}, false
	}
	return rules[i-1], true
}

// asRule is the Rule that says what row r says.
func asRule(r Row) Rule {
	u := Rule{PC: r.PC, CFAOffset: int32(r.CFAOffset), RAOffset: -8}
	switch r.CFARule() {
	case RegRSP:
		u.CFA = CFASP
	case RegRBP:
		u.CFA = CFAFP
	case RulePLT:
		u.CFA = CFAPLT
	default:
		var z Rule
		return z.stop(r.class()).at(r.PC)
	}
	switch r.RBPRule() {
	case RBPSaved:
		u.FP, u.FPOffset = FPAtCFA, int32(r.RBPOffset)
	case RBPUndefined:
		u.FP = FPUndefined
	}
	return u
}

// rowCanSay reports whether a Row can say what u says.
func rowCanSay(u Rule) bool {
	switch {
	case u.CFA != CFASP && u.CFA != CFAFP && u.CFA != CFAPLT,
		u.RA != RAAtCFA || u.RAOffset != -8 || u.RASigned,
		u.CFAOffset < -1<<15 || u.CFAOffset >= 1<<15,
		u.FP == FPAtCFA && (u.FPOffset%8 != 0 || u.FPOffset < -128 || u.FPOffset > 127):
		return false
	}
	return true
}

// On x86-64, BuildRules says what Build says wherever a Row can say it;
// where Build stops for a range a Row cannot hold (frames over 32 KiB, an
// rbp saved beyond 128 bytes), BuildRules may go on.
func TestBuildRulesX86MatchesBuild(t *testing.T) {
	paths := []string{libc, libz}
	if !testing.Short() {
		paths = append(paths, libjvms()...)
	}
	for _, path := range paths {
		t.Run(libName(path), func(t *testing.T) {
			f, err := elf.Open(path)
			if err != nil {
				testutil.SkipOrFail(t, fmt.Sprintf("%s: %v", path, err))
			}
			defer f.Close()
			rows, rst, err := Build(f)
			if err != nil {
				t.Fatal(err)
			}
			rules, st, err := BuildRules(f)
			if err != nil {
				t.Fatal(err)
			}
			checkRules(t, rules, st)
			beyond := 0
			for _, r := range rows {
				got, _ := lookupRule(rules, r.PC)
				if got.at(0) == asRule(r).at(0) {
					continue
				}
				if r.CFARule() == RuleUnsupported && !rowCanSay(got) {
					beyond++ // a rule only a Rule can hold
					continue
				}
				t.Errorf("at %#x: rule %v, row %v", r.PC, got, r)
			}
			for _, u := range rules {
				if r, _ := lookup(rows, u.PC); u.at(0) != asRule(r).at(0) && (r.CFARule() != RuleUnsupported || rowCanSay(u)) {
					t.Errorf("at %#x: rule %v, row %v", u.PC, u, r)
				}
			}
			t.Logf("%d rows, %d rules, %d where only a Rule goes on; reasons: Build %v, BuildRules %v",
				len(rows), len(rules), beyond, rst.Reasons, st.Reasons)
		})
	}
}

// compileAArch64 builds testProgram for AArch64 with the cross compiler
// and extra flags into a temporary directory.
func compileAArch64(t *testing.T, flags ...string) string {
	t.Helper()
	const cc = "aarch64-linux-gnu-gcc"
	if _, err := exec.LookPath(cc); err != nil {
		testutil.SkipOrFail(t, cc+" (gcc-aarch64-linux-gnu) not installed")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "prog.c")
	if err := os.WriteFile(src, []byte(testProgram), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "prog")
	args := append(append([]string{}, flags...), "-o", bin, src)
	if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", cc, args, err, out)
	}
	return bin
}

// AArch64 instructions the tests look for, by their fixed encodings.
const (
	insnPACIASP = 0xd503233f
	insnPACIBSP = 0xd503237f
	insnAUTIASP = 0xd50323bf
	insnAUTIBSP = 0xd50323ff
	insnRET     = 0xd65f03c0
)

// stpFrameRecord reports whether insn is stp x29, x30, [sp, #imm]! and
// its imm (the frame's size, negated).
func stpFrameRecord(insn uint32) (int32, bool) {
	if insn&0xffc07fff != 0xa9807bfd {
		return 0, false
	}
	imm7 := int32(insn>>15&0x7f) << 25 >> 25
	return imm7 * 8, true
}

// AArch64 tables from gcc's .eh_frame (and .debug_frame): at a function's
// entry the return address is in x30 and the CFA is sp; after the
// prologue's stp x29, x30, [sp, #-N]! both are saved below a CFA of
// sp+N; under -mbranch-protection the return address is signed from
// paciasp (pacibsp) to autiasp (autibsp); and every rule agrees with
// readelf's.
func TestBuildRulesAArch64(t *testing.T) {
	for _, tc := range []struct {
		name   string
		flags  []string
		signed bool
		strip  bool // remove .eh_frame so the table comes from .debug_frame
	}{
		{name: "O2", flags: []string{"-O2"}},
		{name: "O0", flags: []string{"-O0"}},
		{name: "O2-fp", flags: []string{"-O2", "-fno-omit-frame-pointer"}},
		{name: "O2-pac-ret", flags: []string{"-O2", "-mbranch-protection=pac-ret"}, signed: true},
		{name: "O2-pac-ret-b-key", flags: []string{"-O2", "-mbranch-protection=pac-ret+b-key"}, signed: true},
		// AArch64 gcc makes unwind tables unless told -fno-unwind-tables too.
		{name: "O2-debug_frame", flags: []string{"-O2", "-g", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables"}, strip: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := compileAArch64(t, tc.flags...)
			if tc.strip {
				const objcopy = "aarch64-linux-gnu-objcopy"
				out, err := exec.Command(objcopy, "--remove-section=.eh_frame", "--remove-section=.eh_frame_hdr", bin).CombinedOutput()
				if err != nil {
					t.Fatalf("%s: %v\n%s", objcopy, err, out)
				}
			}
			f, err := elf.Open(bin)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, _, err := Build(f); err == nil {
				t.Error("Build made x86-64 rows of an AArch64 object")
			}
			rules, st, err := BuildRules(f)
			if err != nil {
				t.Fatal(err)
			}
			checkRules(t, rules, st)
			if want := map[bool]string{false: ".eh_frame", true: ".debug_frame"}[tc.strip]; st.Section != want {
				t.Fatalf("table from %s, want %s", st.Section, want)
			}
			if st.Unsupported != 0 {
				t.Errorf("%d unsupported rules: %v", st.Unsupported, st.Reasons)
			}
			for _, fn := range []string{"one", "many", "big", "main"} {
				addr, code := function(t, f, fn)
				checkPrologue(t, rules, fn, addr, code)
				signs := checkSigned(t, rules, fn, addr, code)
				if tc.signed && fn == "one" && signs == 0 {
					t.Errorf("%s: no paciasp/pacibsp under %v", fn, tc.flags)
				}
			}
			if _, err := exec.LookPath("readelf"); err == nil {
				agree, total := compareReadelfAArch64(t, bin, rules, st.Section)
				t.Logf("readelf rows agreeing: %d/%d", agree, total)
			}
		})
	}
}

// checkPrologue checks fn's rule at its entry and, if its prologue saves
// its frame record with stp x29, x30, [sp, #-N]!, after that.
func checkPrologue(t *testing.T, rules []Rule, fn string, addr uint64, code []byte) {
	t.Helper()
	entry, ok := lookupRule(rules, uint32(addr))
	if want := (Rule{CFA: CFASP, RA: RAInLR}); !ok || entry.at(0) != want {
		t.Errorf("%s: at entry %v, want %v", fn, entry, want)
	}
	for off := 0; off+4 <= len(code); off += 4 {
		insn := binary.LittleEndian.Uint32(code[off:])
		if insn == insnRET {
			return
		}
		n, ok := stpFrameRecord(insn)
		if !ok {
			continue
		}
		got, _ := lookupRule(rules, uint32(addr)+uint32(off)+4)
		want := Rule{CFA: CFASP, CFAOffset: -n, RA: RAAtCFA, RAOffset: n + 8, FP: FPAtCFA, FPOffset: n, RASigned: got.RASigned}
		if got.at(0) != want {
			t.Errorf("%s: after stp x29, x30, [sp, #%d]! %v, want %v", fn, n, got, want)
		}
		return
	}
}

// checkSigned checks, up to fn's first ret, that each instruction's rule
// says the return address is signed exactly when a paciasp (pacibsp) ran
// and no autiasp (autibsp) since. It returns how many it saw.
func checkSigned(t *testing.T, rules []Rule, fn string, addr uint64, code []byte) int {
	t.Helper()
	signed, signs := false, 0
	for off := 0; off+4 <= len(code); off += 4 {
		got, _ := lookupRule(rules, uint32(addr)+uint32(off))
		if got.CFA != CFAUndefined && got.RASigned != signed {
			t.Errorf("%s+%#x: %v, want signed %v", fn, off, got, signed)
		}
		switch binary.LittleEndian.Uint32(code[off:]) {
		case insnPACIASP, insnPACIBSP:
			signed = true
			signs++
		case insnAUTIASP, insnAUTIBSP:
			signed = false
		case insnRET:
			return signs
		}
	}
	return signs
}

// compareReadelfAArch64 checks every row of readelf's frames-interp table
// against the rule covering its address: the CFA (sp+N or x29+N), x29's
// and the return address's rules. readelf prints "u" alike for a
// register never mentioned and an explicit DW_CFA_undefined: for x29 that
// is FPSame or FPUndefined, for ra RAInLR or CFAUndefined (the outermost
// frame). It returns the rows that agreed, of all.
func compareReadelfAArch64(t *testing.T, path string, rules []Rule, section string) (agree, total int) {
	t.Helper()
	for _, fde := range parseReadelf(t, path, section) {
		for _, row := range fde.rows {
			total++
			got, ok := lookupRule(rules, uint32(row.loc))
			if !ok {
				t.Errorf("%#x: no rule; readelf %v", row.loc, row.vals)
				continue
			}
			if msg := disagree(got, row.vals); msg != "" {
				t.Errorf("%#x: rule %v, readelf %v: %s", row.loc, got, row.vals, msg)
				continue
			}
			agree++
		}
	}
	return agree, total
}

// disagree says how rule r differs from readelf's columns v, or "".
func disagree(r Rule, v map[string]string) string {
	ra := v["ra"]
	if ra == "" {
		ra = "u" // the CIE's row has no ra column: never mentioned
	}
	if r.CFA == CFAUndefined {
		if ra != "u" {
			return "stops where readelf has a return address"
		}
		return ""
	}
	base, off, ok := strings.Cut(v["CFA"], "+")
	n, err := strconv.ParseInt(off, 10, 32)
	switch {
	case !ok || err != nil:
		return "unreadable CFA"
	case base == "sp" && r.CFA != CFASP, base == "x29" && r.CFA != CFAFP, base != "sp" && base != "x29":
		return "CFA register"
	case int32(n) != r.CFAOffset:
		return "CFA offset"
	}
	switch {
	case ra == "u" && r.RA != RAInLR:
		return "return address not in x30"
	case ra != "u" && (r.RA != RAAtCFA || ra != fmt.Sprintf("c%d", r.RAOffset)):
		return "return address"
	}
	switch fp := v["x29"]; {
	case fp == "" || fp == "u":
		if r.FP == FPAtCFA {
			return "x29 saved"
		}
	case fp == "s":
		if r.FP != FPSame {
			return "x29"
		}
	case r.FP != FPAtCFA || fp != fmt.Sprintf("c%d", r.FPOffset):
		return "x29"
	}
	return ""
}

// TestBuildRulesSynthetic runs AArch64 CFA programs, as gcc writes them,
// and the cases gcc does not write.
func TestBuildRulesSynthetic(t *testing.T) {
	// An AArch64 CIE: code align 4, data align -8, return address column
	// 30 (x30), CFA = sp+0 and nothing said of x30: it holds the return
	// address.
	cie := func(aug string) []byte {
		body := []byte{0, 0, 0, 0, 1}
		body = append(body, aug...)
		body = append(body, 0, 4, 0x78, 30, 1, 0x1b, 0x0c, 31, 0)
		for len(body)%8 != 4 {
			body = append(body, 0)
		}
		return append(binary.LittleEndian.AppendUint32(nil, uint32(len(body))), body...)
	}
	lr := func(pc uint32, cfa int32, signed bool) Rule {
		return Rule{PC: pc, CFA: CFASP, CFAOffset: cfa, RA: RAInLR, RASigned: signed}
	}
	framed := func(pc uint32, cfa uint8, off int32, signed bool) Rule {
		return Rule{PC: pc, CFA: cfa, CFAOffset: off, RA: RAAtCFA, RAOffset: -24, FP: FPAtCFA, FPOffset: -32, RASigned: signed}
	}
	stop := func(pc uint32, cfa uint8) Rule { return Rule{PC: pc, CFA: cfa} }
	for _, tc := range []struct {
		name    string
		sec     []byte
		want    []Rule
		reasons map[string]int
	}{
		{
			name: "pac-ret prologue and epilogue",
			sec: appendFDE(cie("zR"), 0, 0x1000, 0x40,
				0x41, 0x2d, // +4 paciasp: negate_ra_state
				0x41,       // +4
				0x0e, 0x20, // stp x29, x30, [sp, #-32]!: sp+32
				0x9d, 0x04, 0x9e, 0x03, // x29 c-32, x30 c-24
				0x41,           // +4
				0x0c, 29, 0x20, // mov x29, sp: x29+32
				0x0a,                    // remember
				0x48,                    // +32
				0xdd, 0xde, 0x0c, 31, 0, // ldp x29, x30, [sp], #32: restore both, sp+0
				0x41, 0x2d, // +4 autiasp
				0x41, 0x0b, // +4 ret; restore state for the code after it
			),
			want: []Rule{
				lr(0x1000, 0, false), lr(0x1004, 0, true), framed(0x1008, CFASP, 32, true),
				framed(0x100c, CFAFP, 32, true), lr(0x102c, 0, true), lr(0x1030, 0, false),
				framed(0x1034, CFAFP, 32, true), stop(0x1040, CFAUndefined),
			},
		},
		{
			name: "B key augmentation, x30 in itself, outermost frame",
			sec: appendFDE(cie("zRB"), 0, 0x2000, 0x10,
				0x41, 0x09, 30, 30, // +4: x30 in x30
				0x41, 0x07, 30, // +4: x30 undefined (_start)
			),
			want: []Rule{lr(0x2000, 0, false), stop(0x2008, CFAUndefined)},
		},
		{
			name: "what a Rule cannot say stops the walk",
			sec: appendFDE(cie("zR"), 0, 0x3000, 0x20,
				0x41, 0x0c, 19, 0x10, // +4: CFA x19+16
				0x41, 0x0c, 31, 0x10, 0x09, 30, 19, // +4: sp+16, x30 in x19
				0x41, 0x09, 30, 30, 0x09, 29, 19, // +4: x30 back, x29 in x19
				0x41, 0x09, 29, 29, 0x0f, 0x02, 0x8f, 0x10, // +4: x29 back, CFA expression
			),
			want: []Rule{
				lr(0x3000, 0, false), stop(0x3004, CFAUnsupported), stop(0x3020, CFAUndefined),
			},
			reasons: map[string]int{"cfa register": 1, "return address rule": 1, "fp rule": 1, "cfa expression": 1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rules, st, err := buildTable(source{data: tc.sec, addr: testBase, arch: archAArch64}, (*interp).rule)
			if err != nil {
				t.Fatal(err)
			}
			checkRules(t, rules, st)
			if fmt.Sprint(rules) != fmt.Sprint(tc.want) {
				t.Errorf("rules:\n%v\nwant:\n%v", rules, tc.want)
			}
			if tc.reasons == nil {
				tc.reasons = map[string]int{}
			}
			if fmt.Sprint(st.Reasons) != fmt.Sprint(tc.reasons) {
				t.Errorf("Reasons = %v, want %v", st.Reasons, tc.reasons)
			}
		})
	}

	// DW_CFA_AARCH64_negate_ra_state is DW_CFA_GNU_window_save elsewhere:
	// no x86-64 program has it.
	sec := appendFDE(cieZR("zR", gccInitial...), 0, 0x1000, 0x10, 0x41, 0x2d)
	rows, st, err := build(source{data: sec, addr: testBase})
	if err != nil {
		t.Fatal(err)
	}
	if want := []Row{{PC: 0x1000, CFAOffset: 8}, {PC: 0x1001, Rule: RuleUnsupported}, {PC: 0x1010, Rule: RuleUndefined}}; !equalRows(rows, want) ||
		st.Reasons["bad CFA program"] != 1 {
		t.Errorf("x86-64 0x2d: rows %v reasons %v, want %v", rows, st.Reasons, want)
	}
}
