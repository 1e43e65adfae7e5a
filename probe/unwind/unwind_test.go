package unwind

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/arch/x86/x86asm"

	"github.com/leakscope/leakscope/internal/testutil"
)

const (
	libc = "/lib/x86_64-linux-gnu/libc.so.6"
	libz = "/lib/x86_64-linux-gnu/libz.so.1"
)

// libjvms returns the HotSpot libraries installed on this machine.
func libjvms() []string {
	paths, _ := filepath.Glob("/usr/lib/jvm/*/lib/server/libjvm.so")
	seen := map[string]bool{}
	var out []string
	for _, p := range paths {
		real, err := filepath.EvalSymlinks(p)
		if err != nil || seen[real] {
			continue
		}
		seen[real] = true
		out = append(out, p)
	}
	return out
}

// libName names a library for subtests: its base name, prefixed with the
// JDK for libjvm.so.
func libName(path string) string {
	name := filepath.Base(path)
	if name == "libjvm.so" {
		name = filepath.Base(filepath.Dir(filepath.Dir(filepath.Dir(path)))) + "-" + name
	}
	return name
}

// checkShape asserts what every table holds, of either row type: Stats
// counts its rows, stops and .plt rows; the rows are in PC order, merged
// with neighbours of the same rules; a stop row is nothing but its stop;
// the last row is classUndefined.
func checkShape[R tableRow[R]](t testing.TB, rows []R, st Stats) {
	t.Helper()
	if st.Rows != len(rows) {
		t.Fatalf("Stats.Rows = %d, len(rows) = %d", st.Rows, len(rows))
	}
	unsupported, plt := 0, 0
	for i, r := range rows {
		if i > 0 && rows[i-1].pc() >= r.pc() {
			t.Fatalf("rows %d and %d out of order: %v, %v", i-1, i, rows[i-1], r)
		}
		if i > 0 && sameRules(rows[i-1], r) {
			t.Fatalf("rows %d and %d not merged: %v, %v", i-1, i, rows[i-1], r)
		}
		switch c := r.class(); c {
		case classUndefined, classUnsupported:
			if r.at(0) != r.stop(c) {
				t.Fatalf("row %d: stop row with more: %v", i, r)
			}
			if c == classUnsupported {
				unsupported++
			}
		case classPLT:
			plt++
		}
	}
	if n := len(rows); n > 0 && rows[n-1].class() != classUndefined {
		t.Fatalf("last row %v is not undefined", rows[n-1])
	}
	if unsupported != st.Unsupported || plt != st.PLT {
		t.Fatalf("Stats.Unsupported, PLT = %d, %d; counted %d, %d", st.Unsupported, st.PLT, unsupported, plt)
	}
}

// checkTable asserts the invariants every table from build must hold.
func checkTable(t testing.TB, rows []Row, st Stats) {
	t.Helper()
	checkShape(t, rows, st)
	for i, r := range rows {
		if r.CFARule() > RulePLT || r.RBPRule() > RBPUndefined {
			t.Fatalf("row %d: bad rule %#x", i, r.Rule)
		}
		if r.RBPRule() == RBPSaved && r.RBPOffset%8 != 0 {
			t.Fatalf("row %d: rbp offset %d is not a multiple of 8", i, r.RBPOffset)
		}
		if r.RBPRule() != RBPSaved && r.RBPOffset != 0 {
			t.Fatalf("row %d: rbp offset without RBPSaved: %v", i, r)
		}
	}
}

func TestTableLookup(t *testing.T) {
	rows := []Row{{PC: 0x10, CFAOffset: 8}, {PC: 0x20, CFAOffset: 16}, {PC: 0x30, Rule: RuleUndefined}}
	for _, tc := range []struct {
		pc   uint32
		want int // index into rows, -1 for none
	}{{0, -1}, {0xf, -1}, {0x10, 0}, {0x1f, 0}, {0x20, 1}, {0x30, 2}, {0xffffffff, 2}} {
		got, ok := lookup(rows, tc.pc)
		if tc.want < 0 {
			if ok {
				t.Errorf("lookup(%#x) = %v, want none", tc.pc, got)
			}
			continue
		}
		if !ok || got != rows[tc.want] {
			t.Errorf("lookup(%#x) = %v, %v; want %v", tc.pc, got, ok, rows[tc.want])
		}
	}
}

// Hand-assembled call frame sections.

const testBase = 0x2000 // vaddr of the synthetic sections

// cieZR is a gcc-style CIE: "zR", code align 1, data align -8, RA column
// 16, FDE addresses pcrel|sdata4, CFA = rsp+8 and the return address at
// CFA-8 (the first CIE of libc, byte for byte).
func cieZR(aug string, initial ...byte) []byte {
	body := []byte{0, 0, 0, 0, 1}
	body = append(body, aug...)
	body = append(body, 0, 1, 0x78, 0x10)
	switch aug {
	case "zR", "zRS":
		body = append(body, 1, 0x1b)
	}
	body = append(body, initial...)
	for len(body)%8 != 4 {
		body = append(body, 0) // DW_CFA_nop
	}
	return append(binary.LittleEndian.AppendUint32(nil, uint32(len(body))), body...)
}

var gccInitial = []byte{0x0c, 0x07, 0x08, 0x90, 0x01} // def_cfa rsp+8; offset ra c-8

// appendFDE appends an FDE for [pc, pc+size) referring to the CIE at
// section offset cie, with pcrel|sdata4 addresses and program prog.
func appendFDE(sec []byte, cie int, pc, size uint32, prog ...byte) []byte {
	start := len(sec)
	body := binary.LittleEndian.AppendUint32(nil, uint32(start+4-cie))
	body = binary.LittleEndian.AppendUint32(body, pc-uint32(testBase+start+8))
	body = binary.LittleEndian.AppendUint32(body, size)
	body = append(body, 0) // augmentation data length
	body = append(body, prog...)
	for len(body)%8 != 4 {
		body = append(body, 0)
	}
	sec = binary.LittleEndian.AppendUint32(sec, uint32(len(body)))
	return append(sec, body...)
}

// seedFrame is a small .eh_frame: a leaf, a function that pushes rbx, a
// frame-pointer function and the .plt FDE binutils writes.
func seedFrame() []byte {
	sec := cieZR("zR", gccInitial...)
	sec = appendFDE(sec, 0, 0x1000, 0x10)
	sec = appendFDE(sec, 0, 0x1010, 0x10,
		0x41, 0x0e, 0x10, 0x83, 0x02, // +1: cfa rsp+16; rbx c-16
		0x4a, 0x0e, 0x08) // +10: cfa rsp+8
	sec = appendFDE(sec, 0, 0x1040, 0x20,
		0x41, 0x0e, 0x10, 0x86, 0x02, // push rbp: rsp+16, rbp c-16
		0x43, 0x0d, 0x06, // mov rbp,rsp: rbp+16
		0x58, 0x0c, 0x07, 0x08) // leave: rsp+8
	sec = appendFDE(sec, 0, 0x0f00, 0x40,
		0x0e, 0x10, 0x46, 0x0e, 0x18, 0x4a,
		0x0f, 0x0b, 0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22)
	return sec
}

func TestBuildSynthetic(t *testing.T) {
	rsp := func(pc uint32, off int16) Row { return Row{PC: pc, CFAOffset: off, Rule: RegRSP} }
	stop := func(pc uint32, rule uint8) Row { return Row{PC: pc, Rule: rule} }
	for _, tc := range []struct {
		name    string
		sec     []byte
		want    []Row
		reasons map[string]int
	}{
		{
			name: "seed",
			sec:  seedFrame(),
			want: []Row{
				rsp(0xf00, 16), rsp(0xf06, 24), {PC: 0xf10, CFAOffset: 8, Rule: RulePLT}, stop(0xf40, RuleUndefined),
				rsp(0x1000, 8), rsp(0x1011, 16), rsp(0x101b, 8), stop(0x1020, RuleUndefined),
				rsp(0x1040, 8), {PC: 0x1041, CFAOffset: 16, RBPOffset: -16, Rule: RegRSP | RBPSaved<<4},
				{PC: 0x1044, CFAOffset: 16, RBPOffset: -16, Rule: RegRBP | RBPSaved<<4},
				{PC: 0x105c, CFAOffset: 8, RBPOffset: -16, Rule: RegRSP | RBPSaved<<4}, stop(0x1060, RuleUndefined),
			},
		},
		{
			name: "remember and restore state",
			sec: appendFDE(cieZR("zR", gccInitial...), 0, 0x1000, 0x20,
				0x41, 0x0e, 0x10, 0x86, 0x02, // rsp+16, rbp c-16
				0x0a,             // remember
				0x41, 0x0e, 0x08, // rsp+8 (an early return)
				0xc6,       // restore rbp: same
				0x41, 0x0b, // restore state
				0x41, 0x12, 0x07, 0x7c, // def_cfa_sf rsp, -4*-8 = 32
				0x11, 0x06, 0x7d, // offset_extended_sf rbp, -3*-8: c+24
				0x41, 0x2e, 0x10, // GNU_args_size: ignored
				0x13, 0x7e, // def_cfa_offset_sf -2*-8 = 16
				0x41, 0x07, 0x06, // undefined rbp
				0x41, 0x08, 0x06, // same_value rbp
			),
			want: []Row{
				rsp(0x1000, 8), {PC: 0x1001, CFAOffset: 16, RBPOffset: -16, Rule: RegRSP | RBPSaved<<4},
				rsp(0x1002, 8), // rbp restored to the CIE's rule
				{PC: 0x1003, CFAOffset: 16, RBPOffset: -16, Rule: RegRSP | RBPSaved<<4},
				{PC: 0x1004, CFAOffset: 32, RBPOffset: 24, Rule: RegRSP | RBPSaved<<4},
				{PC: 0x1005, CFAOffset: 16, RBPOffset: 24, Rule: RegRSP | RBPSaved<<4},
				{PC: 0x1006, CFAOffset: 16, Rule: RegRSP | RBPUndefined<<4},
				rsp(0x1007, 16), stop(0x1020, RuleUndefined),
			},
		},
		{
			name: "adjacent FDEs need no gap row, overlapping ones are cut",
			sec: appendFDE(appendFDE(appendFDE(cieZR("zR", gccInitial...),
				0, 0x1000, 0x10, 0x41, 0x0e, 0x10),
				0, 0x1010, 0x10, 0x41, 0x0e, 0x18),
				0, 0x1018, 0x10),
			want: []Row{
				rsp(0x1000, 8), rsp(0x1001, 16), rsp(0x1010, 8), rsp(0x1011, 24), rsp(0x1018, 8), stop(0x1028, RuleUndefined),
			},
		},
		{
			name: "unsupported rules stop the walk",
			sec: appendFDE(cieZR("zR", gccInitial...), 0, 0x1000, 0x20,
				0x41, 0x0c, 0x05, 0x08, // def_cfa rdi+8
				0x41, 0x0c, 0x07, 0x10, 0x86, 0x20, // rsp+16, rbp at c-256
				0x41, 0x86, 0x02, // rbp c-16
				0x41, 0x0f, 0x02, 0x77, 0x08, // def_cfa_expression
				0x41, 0x0c, 0x07, 0x08, 0x09, 0x06, 0x03, // rbp in rbx
				0x41, 0x08, 0x06, 0x07, 0x10, // ra undefined: outermost
				0x41, 0x0b, // restore_state with nothing remembered
			),
			want: []Row{
				rsp(0x1000, 8), stop(0x1001, RuleUnsupported),
				{PC: 0x1003, CFAOffset: 16, RBPOffset: -16, Rule: RegRSP | RBPSaved<<4},
				stop(0x1004, RuleUnsupported), stop(0x1006, RuleUndefined), stop(0x1007, RuleUnsupported),
				stop(0x1020, RuleUndefined),
			},
			reasons: map[string]int{"cfa register": 1, "rbp offset range": 1, "cfa expression": 1, "rbp rule": 1, "bad CFA program": 1},
		},
		{
			name: "signal frames and IBT PLT entries are unsupported",
			sec: func() []byte {
				sec := appendFDE(cieZR("zRS", gccInitial...), 0, 0x1000, 0x10)
				cie := len(sec)
				sec = append(sec, cieZR("zR", gccInitial...)...)
				return appendFDE(sec, cie, 0x1010, 0x10, // the IBT .plt expression: lit9
					0x0f, 0x0b, 0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x39, 0x2a, 0x33, 0x24, 0x22)
			}(),
			want:    []Row{stop(0x1000, RuleUnsupported), stop(0x1020, RuleUndefined)},
			reasons: map[string]int{"signal frame": 1, "cfa expression: plt variant": 1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows, st, err := build(source{data: tc.sec, addr: testBase})
			if err != nil {
				t.Fatal(err)
			}
			checkTable(t, rows, st)
			if !equalRows(rows, tc.want) {
				t.Errorf("rows:\n%s\nwant:\n%s", fmtRows(rows), fmtRows(tc.want))
			}
			if tc.reasons == nil {
				tc.reasons = map[string]int{}
			}
			if fmt.Sprint(st.Reasons) != fmt.Sprint(tc.reasons) {
				t.Errorf("Reasons = %v, want %v", st.Reasons, tc.reasons)
			}
		})
	}
}

func TestBuildDebugFrame(t *testing.T) {
	// A DWARF 4 .debug_frame: CIE id 0xffffffff, address and segment sizes,
	// an absolute CIE offset and absolute addresses.
	cie := []byte{0xff, 0xff, 0xff, 0xff, 4, 0, 8, 0, 1, 0x78, 0x10, 0x0c, 0x07, 0x08, 0x90, 0x01}
	sec := binary.LittleEndian.AppendUint32(nil, uint32(len(cie)))
	sec = append(sec, cie...)
	fde := binary.LittleEndian.AppendUint32(nil, 0) // CIE at offset 0
	fde = binary.LittleEndian.AppendUint64(fde, 0x401000)
	fde = binary.LittleEndian.AppendUint64(fde, 0x20)
	fde = append(fde, 0x44, 0x0e, 0x10, 0x83, 0x02, 0x00, 0x00, 0x00)
	sec = binary.LittleEndian.AppendUint32(sec, uint32(len(fde)))
	sec = append(sec, fde...)
	rows, st, err := build(source{data: sec, debug: true})
	if err != nil {
		t.Fatal(err)
	}
	checkTable(t, rows, st)
	want := []Row{{PC: 0x401000, CFAOffset: 8}, {PC: 0x401004, CFAOffset: 16}, {PC: 0x401020, Rule: RuleUndefined}}
	if !equalRows(rows, want) || st.Section != ".debug_frame" {
		t.Errorf("rows %s:\n%s\nwant:\n%s", st.Section, fmtRows(rows), fmtRows(want))
	}
}

func TestBuildMalformed(t *testing.T) {
	good := seedFrame()
	for _, tc := range []struct {
		name string
		sec  []byte
		want string
	}{
		{"length past the end", good[:len(good)-3], "eh_frame: entry at 0x"},
		{"truncated length", append(append([]byte(nil), good...), 1, 2), "eh_frame: entry at 0x"},
		{"CIE pointer outside", appendFDE(cieZR("zR", gccInitial...), -0x1000, 0x1000, 0x10), "eh_frame: FDE at 0x18: CIE pointer"},
		{"CIE pointer to an FDE", appendFDE(appendFDE(cieZR("zR", gccInitial...), 0, 0x1000, 0x10), 0x18, 0x1000, 0x10), "does not point to a CIE"},
		{"unknown augmentation", appendFDE(cieZR("eh", gccInitial...), 0, 0x1000, 0x10), `eh_frame: CIE at 0x0: augmentation "eh": unsupported`},
		{"above 4 GiB", appendFDE(cieZR("zR", gccInitial...), 0, 0x80002000, 0x7fffffff), "code above 4 GiB"},
		{"wrapping range", appendFDE(cieZR("zR", gccInitial...), 0, 0x1000, 0xffffffff), "wraps around"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows, _, err := build(source{data: tc.sec, addr: testBase})
			if err == nil || !strings.Contains(err.Error(), tc.want) || rows != nil {
				t.Fatalf("build = %d rows, %v; want an error containing %q", len(rows), err, tc.want)
			}
		})
	}
}

func equalRows(a, b []Row) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func fmtRows(rows []Row) string {
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "\t%v\n", r)
	}
	return b.String()
}

func TestBuildNoFrames(t *testing.T) {
	if _, err := exec.LookPath("objcopy"); err != nil {
		testutil.SkipOrFail(t, "objcopy (binutils) not installed")
	}
	bin := compile(t, "prog", "-O2")
	out, err := exec.Command("objcopy", "--remove-section=.eh_frame", "--remove-section=.eh_frame_hdr", bin).CombinedOutput()
	if err != nil {
		t.Fatalf("objcopy: %v\n%s", err, out)
	}
	if _, _, err := BuildFile(bin); !errors.Is(err, ErrNoFrames) {
		t.Fatalf("BuildFile = %v, want ErrNoFrames", err)
	}
}

// TestBuildGo reads a Go executable: Go writes only .debug_frame
// (compressed), with its own CIE conventions. The test binary itself has
// no DWARF, so it builds one.
func TestBuildGo(t *testing.T) {
	if testing.Short() {
		testutil.SkipOrFail(t, "builds a Go program; skipped in -short mode")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hi\") }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "hi")
	cmd := exec.Command("go", "build", "-o", bin, src)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		testutil.SkipOrFail(t, fmt.Sprintf("go build: %v\n%s", err, out))
	}
	rows, st, err := BuildFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	checkTable(t, rows, st)
	t.Logf("%s: %d FDEs, %d rows, %d unsupported %v", st.Section, st.FDEs, st.Rows, st.Unsupported, st.Reasons)
	if st.Section != ".debug_frame" || st.FDEs < 1000 {
		t.Errorf("stats %+v", st)
	}
	if _, err := exec.LookPath("readelf"); err == nil {
		a := compareReadelf(t, bin, rows, st.Section)
		t.Logf("readelf rows agreeing: %d/%d; table rows agreeing: %d/%d", a.agree, a.rows, a.rever, a.reverse)
		for _, b := range a.bad {
			t.Error(b)
		}
	}
}

// Agreement with readelf.

// readelfAgreement counts how a table compares with readelf's frames-interp.
type readelfAgreement struct {
	rows, agree    int // readelf rows checked, and those the table matches
	stops          int // agreeing rows where both say stop (unsupported, undefined)
	plt            int // agreeing rows readelf shows as "exp" inside .plt and the table as RulePLT
	reverse, rever int // table rows checked against readelf's row at their PC, and those that match
	gaps           int // FDE ends with no adjoining FDE where the table says RuleUndefined
	bad            []string
}

var readelfReg = regexp.MustCompile(`r(\d+) \((\w+)\)`)

type readelfRow struct {
	loc  uint64
	vals map[string]string
}

type readelfFDE struct {
	start, end uint64
	signal     bool
	rows       []readelfRow
}

// parseReadelf reads the FDEs of section (".eh_frame" or ".debug_frame")
// from `readelf --debug-dump=frames-interp`. An FDE whose program holds
// only nops gets no table from readelf; it inherits its CIE's row.
func parseReadelf(t *testing.T, path, section string) []readelfFDE {
	t.Helper()
	// readelf exits 1 over warnings about separate debug files it follows
	// (libc6-dbg's NOBITS .eh_frame); its table is still complete.
	out, err := exec.Command("readelf", "--debug-dump=frames-interp", path).Output()
	if err != nil && len(out) == 0 {
		t.Fatalf("readelf %s: %v", path, err)
	}
	// "r2 (rcx)", a register rule, is the one value with a space.
	out = readelfReg.ReplaceAll(out, []byte("r$1($2)"))
	type cieInfo struct {
		signal bool
		rows   []readelfRow
	}
	var (
		fdes    []readelfFDE
		cies    = map[string]*cieInfo{}
		inSec   bool
		cols    []string
		curCIE  *cieInfo
		curFDE  *readelfFDE
		fdeCIE  string
		flushed = true
	)
	flush := func() {
		if curFDE != nil {
			if len(curFDE.rows) == 0 {
				c := cies[fdeCIE]
				if c == nil || len(c.rows) == 0 {
					t.Fatalf("readelf %s: FDE at %#x: CIE %s has no row", path, curFDE.start, fdeCIE)
				}
				curFDE.rows = []readelfRow{{loc: curFDE.start, vals: c.rows[0].vals}}
			}
			curFDE.signal = cies[fdeCIE].signal
			fdes = append(fdes, *curFDE)
		}
		curFDE, curCIE, flushed = nil, nil, true
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "Contents of the ") {
			flush()
			inSec = strings.HasPrefix(line, "Contents of the "+section+" section")
			continue
		}
		if !inSec {
			continue
		}
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
			flush()
		case len(f) >= 5 && f[3] == "CIE":
			flush()
			curCIE = &cieInfo{signal: strings.Contains(strings.Trim(f[4], `"`), "S")}
			cies[f[0]] = curCIE
			flushed = false
		case len(f) >= 6 && f[3] == "FDE":
			flush()
			fdeCIE = strings.TrimPrefix(f[4], "cie=")
			lo, hi, ok := strings.Cut(strings.TrimPrefix(f[5], "pc="), "..")
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(hi, 16, 64)
			if !ok || err1 != nil || err2 != nil {
				t.Fatalf("readelf %s: bad FDE line %q", path, line)
			}
			curFDE = &readelfFDE{start: start, end: end}
			flushed = false
		case f[0] == "LOC":
			cols = f[1:]
		case len(f[0]) == 16 && len(f) == len(cols)+1 && !flushed:
			loc, err := strconv.ParseUint(f[0], 16, 64)
			if err != nil {
				continue
			}
			row := readelfRow{loc: loc, vals: map[string]string{}}
			for i, c := range cols {
				row.vals[c] = f[i+1]
			}
			switch {
			case curFDE != nil:
				curFDE.rows = append(curFDE.rows, row)
			case curCIE != nil:
				curCIE.rows = append(curCIE.rows, row)
			}
		}
	}
	flush()
	sort.SliceStable(fdes, func(i, j int) bool { return fdes[i].start < fdes[j].start })
	return fdes
}

// expect translates a readelf row into the row the table should hold.
// rbpEither is set when readelf's "u" for rbp may be the default (same
// value) or an explicit DW_CFA_undefined, which readelf prints alike.
func expect(v map[string]string, signal, inPLT bool) (want Row, rbpEither bool) {
	stop := Row{Rule: RuleUnsupported}
	if signal {
		return stop, false
	}
	switch ra := v["ra"]; ra {
	case "c-8":
	case "u":
		return Row{Rule: RuleUndefined}, false
	default:
		return stop, false
	}
	cfa := v["CFA"]
	switch {
	case cfa == "exp" && inPLT:
		want = Row{CFAOffset: 8, Rule: RulePLT}
	case strings.HasPrefix(cfa, "rsp+"), strings.HasPrefix(cfa, "rbp+"):
		off, err := strconv.ParseInt(cfa[4:], 10, 64)
		if err != nil || off > 32767 {
			return stop, false
		}
		want.CFAOffset = int16(off)
		if cfa[:3] == "rbp" {
			want.Rule = RegRBP
		}
	default:
		return stop, false
	}
	if s, ok := v["rsp"]; ok && s != "u" {
		return stop, false
	}
	switch rbp, ok := v["rbp"]; {
	case !ok, rbp == "s":
	case rbp == "u":
		rbpEither = true
	case strings.HasPrefix(rbp, "c"):
		off, err := strconv.ParseInt(rbp[1:], 10, 64)
		if err != nil || off%8 != 0 || off < -128 || off > 127 {
			return stop, false
		}
		want.RBPOffset = int8(off)
		want.Rule |= RBPSaved << 4
	default:
		return stop, false
	}
	return want, rbpEither
}

// matches reports whether got is the row expect described.
func matches(got, want Row, rbpEither bool) bool {
	got.PC, want.PC = 0, 0
	if got == want {
		return true
	}
	if rbpEither && want.RBPRule() == RBPSame {
		want.Rule = want.Rule&0xf | RBPUndefined<<4
		return got == want
	}
	return false
}

// compareReadelf checks rows against readelf in both directions: every
// readelf row against the table row covering its LOC, and every table row
// against readelf's row covering its PC (no FDE covering it: RuleUndefined).
func compareReadelf(t *testing.T, path string, rows []Row, section string) readelfAgreement {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	// Lazy .plt entries carry binutils' expression, which the table holds
	// as RulePLT, except with IBT (.plt.sec present), where it is
	// RuleUnsupported: the entries push at offset 9, not 11.
	var plts []span
	if s := f.Section(".plt"); s != nil && f.Section(".plt.sec") == nil {
		plts = append(plts, span{s.Addr, s.Addr + s.Size})
	}
	f.Close()
	inPLT := func(pc uint64) bool { return inside(plts, pc, pc) }
	fdes := parseReadelf(t, path, section)
	if len(fdes) == 0 {
		t.Fatalf("readelf shows no FDEs in %s of %s", section, path)
	}
	var a readelfAgreement
	bad := func(format string, args ...any) {
		if len(a.bad) < 20 {
			a.bad = append(a.bad, fmt.Sprintf(format, args...))
		}
	}
	starts := map[uint64]bool{}
	for _, fd := range fdes {
		starts[fd.start] = true
	}
	for _, fd := range fdes {
		for _, r := range fd.rows {
			if r.loc < fd.start || r.loc >= fd.end {
				continue
			}
			a.rows++
			want, either := expect(r.vals, fd.signal, inPLT(r.loc))
			got, _ := lookup(rows, uint32(r.loc))
			if !matches(got, want, either) {
				bad("readelf %#x %v: table %v, want %v", r.loc, r.vals, got, want)
				continue
			}
			a.agree++
			switch want.CFARule() {
			case RuleUndefined, RuleUnsupported:
				a.stops++
			case RulePLT:
				a.plt++
			}
		}
		if fd.end > fd.start && !starts[fd.end] {
			if got, _ := lookup(rows, uint32(fd.end)); got.CFARule() == RuleUndefined {
				a.gaps++
			} else {
				bad("FDE %#x-%#x: table at its end %v, want RuleUndefined", fd.start, fd.end, got)
			}
		}
	}
	for _, r := range rows {
		a.reverse++
		i := sort.Search(len(fdes), func(i int) bool { return fdes[i].start > uint64(r.PC) }) - 1
		var want Row
		either := false
		if i < 0 || uint64(r.PC) >= fdes[i].end {
			want = Row{Rule: RuleUndefined}
		} else {
			fd := fdes[i]
			j := sort.Search(len(fd.rows), func(j int) bool { return fd.rows[j].loc > uint64(r.PC) }) - 1
			if j < 0 {
				bad("table row %v precedes readelf's first row of FDE %#x", r, fd.start)
				continue
			}
			want, either = expect(fd.rows[j].vals, fd.signal, inPLT(uint64(r.PC)))
		}
		if !matches(r, want, either) {
			bad("table row %v: readelf says %v", r, want)
			continue
		}
		a.rever++
	}
	return a
}

func TestReadelfAgreement(t *testing.T) {
	if _, err := exec.LookPath("readelf"); err != nil {
		testutil.SkipOrFail(t, "readelf (binutils) not installed")
	}
	paths := []string{libc, libz}
	if !testing.Short() {
		paths = append(paths, libjvms()...)
	}
	for _, path := range paths {
		t.Run(libName(path), func(t *testing.T) {
			if _, err := os.Stat(path); err != nil {
				testutil.SkipOrFail(t, fmt.Sprintf("%s not installed", path))
			}
			rows, st, err := BuildFile(path)
			if err != nil {
				t.Fatal(err)
			}
			checkTable(t, rows, st)
			a := compareReadelf(t, path, rows, st.Section)
			t.Logf("%s: %d FDEs, %d rows (%d unsupported, %d PLT, %d gap rows), reasons %v",
				path, st.FDEs, st.Rows, st.Unsupported, st.PLT, st.Gaps, st.Reasons)
			t.Logf("readelf rows agreeing: %d/%d (%d stop rows, %d .plt rows); table rows agreeing with readelf: %d/%d; FDE ends closed: %d",
				a.agree, a.rows, a.stops, a.plt, a.rever, a.reverse, a.gaps)
			for _, b := range a.bad {
				t.Error(b)
			}
		})
	}
}

// Compiled programs.

const testProgram = `
#include <stdio.h>
#include <stdlib.h>

/* x lives across the call, so -O2 keeps it in rbx: push %rbx. */
__attribute__((noinline)) long one(long x) {
	long y = (long)getenv("LEAKSCOPE_X");
	return y + x;
}

/* Six callee-saved registers and a stack adjustment. */
__attribute__((noinline)) long many(long *p, long n) {
	long s = 0;
	for (long i = 0; i < n; i++)
		s += (long)getenv("A") * p[i] + p[n - 1 - i];
	return s;
}

/* A 4 KiB frame. */
__attribute__((noinline)) long big(long n) {
	volatile char buf[4096];
	for (long i = 0; i < n && i < 4096; i++)
		buf[i] = (char)i;
	return buf[n % 4096] + (long)getenv("B");
}

int main(int argc, char **argv) {
	long v[4] = {argc, 2, 3, 4};
	printf("%ld %ld %ld\n", one(argc), many(v, 4), big(argc));
	return 0;
}
`

// compile builds testProgram with gcc and extra flags into a temporary
// directory.
func compile(t *testing.T, name string, flags ...string) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		testutil.SkipOrFail(t, "gcc not installed")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "prog.c")
	if err := os.WriteFile(src, []byte(testProgram), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, name)
	args := append(append([]string{}, flags...), "-o", bin, src)
	if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %v: %v\n%s", args, err, out)
	}
	return bin
}

// function returns the address and code of the named function.
func function(t *testing.T, f *elf.File, name string) (uint64, []byte) {
	t.Helper()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range syms {
		if s.Name != name || elf.ST_TYPE(s.Info) != elf.STT_FUNC {
			continue
		}
		for _, sec := range f.Sections {
			if sec.Flags&elf.SHF_EXECINSTR == 0 || s.Value < sec.Addr || s.Value+s.Size > sec.Addr+sec.Size {
				continue
			}
			data, err := sec.Data()
			if err != nil {
				t.Fatal(err)
			}
			return s.Value, data[s.Value-sec.Addr : s.Value-sec.Addr+s.Size]
		}
	}
	t.Fatalf("no function %s", name)
	return 0, nil
}

// simulate walks the straight-line code of a function from its entry,
// tracking the CFA and rbp rules that push, pop, sub/add rsp, mov rbp,rsp
// and leave imply, and checks the table row at every instruction boundary.
// It stops at the first unconditional jump, return, or instruction that
// changes rsp in a way it does not model; conditional jumps and calls fall
// through. It returns the rows it expected, by address.
func simulate(t *testing.T, rows []Row, addr uint64, code []byte) map[uint64]Row {
	t.Helper()
	cur := Row{CFAOffset: 8, Rule: RegRSP}
	rbpKnown := true
	seen := map[uint64]Row{}
	check := func(pc uint64) {
		got, ok := lookup(rows, uint32(pc))
		want := cur
		if !rbpKnown {
			want.Rule = want.Rule&0xf | got.Rule&0xf0
			want.RBPOffset = got.RBPOffset
		}
		want.PC = got.PC
		if !ok || got != want {
			t.Errorf("at %#x: table %v, want %v (%s)", pc, got, cur, "rbp checked: "+strconv.FormatBool(rbpKnown))
		}
		seen[pc] = cur
	}
	for pc := uint64(0); pc < uint64(len(code)); {
		check(addr + pc)
		if bytes.HasPrefix(code[pc:], []byte{0xf3, 0x0f, 0x1e, 0xfa}) { // endbr64
			pc += 4
			continue
		}
		inst, err := x86asm.Decode(code[pc:], 64)
		if err != nil {
			t.Fatalf("decode at %#x: %v", addr+pc, err)
		}
		pc += uint64(inst.Len)
		dst, _ := inst.Args[0].(x86asm.Reg)
		imm, _ := inst.Args[1].(x86asm.Imm)
		byRSP := cur.CFARule() == RegRSP
		switch {
		case inst.Op == x86asm.PUSH:
			if byRSP {
				cur.CFAOffset += 8
			}
			if dst == x86asm.RBP {
				cur.Rule |= RBPSaved << 4
				cur.RBPOffset = -int8(cur.CFAOffset)
			}
		case inst.Op == x86asm.POP:
			if byRSP {
				cur.CFAOffset -= 8
			}
			if dst == x86asm.RBP {
				rbpKnown = false // gcc may leave the rule at its slot, which still holds it
			}
		case inst.Op == x86asm.SUB && dst == x86asm.RSP && imm != 0 && byRSP:
			cur.CFAOffset += int16(imm)
		case inst.Op == x86asm.ADD && dst == x86asm.RSP && imm != 0 && byRSP:
			cur.CFAOffset -= int16(imm)
		case inst.Op == x86asm.MOV && dst == x86asm.RBP && inst.Args[1] == x86asm.RSP:
			cur.Rule = cur.Rule&0xf0 | RegRBP
		case inst.Op == x86asm.LEAVE:
			cur = Row{CFAOffset: 8, Rule: RegRSP}
			rbpKnown = false
		case inst.Op == x86asm.RET, inst.Op == x86asm.JMP, inst.Op == x86asm.UD1, inst.Op == x86asm.HLT:
			return seen
		case inst.Op == x86asm.CALL, strings.HasPrefix(inst.Op.String(), "J"):
		case dst == x86asm.RSP || (dst == x86asm.RBP && !byRSP):
			return seen // rsp, or the CFA register, changes in a way not modelled
		}
	}
	return seen
}

func TestCompiled(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
		strip bool // remove .eh_frame so the table comes from .debug_frame
	}{
		{name: "O2", flags: []string{"-O2"}},
		{name: "O0-fp", flags: []string{"-O0", "-fno-omit-frame-pointer"}},
		{name: "O2-cet", flags: []string{"-O2", "-fcf-protection", "-Wl,-z,ibtplt"}},
		{name: "O2-debug_frame", flags: []string{"-O2", "-g", "-fno-asynchronous-unwind-tables"}, strip: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := compile(t, "prog", tc.flags...)
			if tc.strip {
				if _, err := exec.LookPath("objcopy"); err != nil {
					testutil.SkipOrFail(t, "objcopy (binutils) not installed")
				}
				out, err := exec.Command("objcopy", "--remove-section=.eh_frame", "--remove-section=.eh_frame_hdr", bin).CombinedOutput()
				if err != nil {
					t.Fatalf("objcopy: %v\n%s", err, out)
				}
			}
			rows, st, err := BuildFile(bin)
			if err != nil {
				t.Fatal(err)
			}
			checkTable(t, rows, st)
			if want := map[bool]string{false: ".eh_frame", true: ".debug_frame"}[tc.strip]; st.Section != want {
				t.Fatalf("table from %s, want %s", st.Section, want)
			}
			f, err := elf.Open(bin)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			for _, fn := range []string{"one", "many", "big", "main"} {
				addr, code := function(t, f, fn)
				seen := simulate(t, rows, addr, code)
				if len(seen) < 2 {
					t.Errorf("%s: simulated only %d instructions", fn, len(seen))
				}
			}

			// The cases the brief spells out.
			addr, code := function(t, f, "one")
			if bytes.HasPrefix(code, []byte{0xf3, 0x0f, 0x1e, 0xfa}) {
				addr, code = addr+4, code[4:]
			}
			first, err := x86asm.Decode(code, 64)
			if err != nil {
				t.Fatal(err)
			}
			entry, _ := lookup(rows, uint32(addr))
			after, _ := lookup(rows, uint32(addr)+uint32(first.Len))
			if entry.CFARule() != RegRSP || entry.CFAOffset != 8 {
				t.Errorf("one: at entry %v, want rsp+8", entry)
			}
			switch tc.name {
			case "O0-fp":
				second, err := x86asm.Decode(code[first.Len:], 64)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := lookup(rows, uint32(addr)+uint32(first.Len+second.Len))
				if first.String() != "PUSH RBP" || second.String() != "MOV RBP, RSP" {
					t.Fatalf("one starts %v; %v, want push %%rbp; mov %%rsp,%%rbp", first, second)
				}
				if after.CFARule() != RegRSP || after.CFAOffset != 16 || after.RBPRule() != RBPSaved || after.RBPOffset != -16 {
					t.Errorf("one: after push %%rbp %v, want rsp+16 rbp=c-16", after)
				}
				if body.CFARule() != RegRBP || body.CFAOffset != 16 || body.RBPRule() != RBPSaved || body.RBPOffset != -16 {
					t.Errorf("one: after mov %%rsp,%%rbp %v, want rbp+16 rbp=c-16", body)
				}
			default:
				if first.String() != "PUSH RBX" {
					t.Fatalf("one starts %v, want push %%rbx", first)
				}
				if after.CFARule() != RegRSP || after.CFAOffset != 16 || after.RBPRule() != RBPSame {
					t.Errorf("one: after push %%rbx %v, want rsp+16 rbp=s", after)
				}
			}
			if tc.name == "O2-cet" {
				// IBT .plt entries carry an expression the Row format cannot
				// hold (lit9); .plt.sec is plain rsp+8.
				if st.Reasons["cfa expression: plt variant"] == 0 {
					t.Errorf("no IBT .plt expression seen; reasons %v", st.Reasons)
				}
				if sec := f.Section(".plt.sec"); sec != nil {
					if r, _ := lookup(rows, uint32(sec.Addr)); r.CFARule() != RegRSP || r.CFAOffset != 8 {
						t.Errorf(".plt.sec at %#x: %v, want rsp+8", sec.Addr, r)
					}
				}
			}
			if _, err := exec.LookPath("readelf"); err == nil {
				a := compareReadelf(t, bin, rows, st.Section)
				t.Logf("readelf rows agreeing: %d/%d; table rows agreeing: %d/%d", a.agree, a.rows, a.rever, a.reverse)
				for _, b := range a.bad {
					t.Error(b)
				}
			}
		})
	}
}

// FuzzBuild feeds arbitrary bytes to the section parser as .eh_frame and
// as .debug_frame, and as the CFA program of an FDE in a well-formed
// .eh_frame, which reaches the interpreter far more often. Whatever the
// input, build must return either an error and no rows, or a table that
// satisfies every invariant of Row.
func FuzzBuild(f *testing.F) {
	seed := seedFrame()
	f.Add(seed, false)
	f.Add(seed[:len(seed)/2], false)
	f.Add(appendFDE(cieZR("zRS", gccInitial...), 0, 0x1000, 0x10), false)
	if ef, err := elf.Open(libz); err == nil {
		if s := ef.Section(".eh_frame"); s != nil {
			if data, err := s.Data(); err == nil {
				f.Add(data, false)
			}
		}
		ef.Close()
	}
	f.Add([]byte{0x41, 0x0e, 0x10, 0x86, 0x02, 0x0a, 0x43, 0x0d, 0x06, 0x41, 0x0b, 0x0f, 0x01, 0x77}, true)
	f.Fuzz(func(t *testing.T, data []byte, debug bool) {
		check := func(src source) {
			rows, st, err := build(src)
			if err != nil {
				if rows != nil {
					t.Fatalf("build returned %d rows and %v", len(rows), err)
				}
				return
			}
			checkTable(t, rows, st)
		}
		check(source{data: data, addr: testBase, debug: debug})
		if len(data) < 1<<12 {
			sec := appendFDE(cieZR("zR", gccInitial...), 0, 0x1000, 0x100, data...)
			check(source{data: appendFDE(sec, 0, 0x1080, 0x100, data...), addr: testBase})
		}
	})
}

// BenchmarkBuild measures Build, section read included, on real libraries.
func BenchmarkBuild(b *testing.B) {
	for _, path := range append([]string{libc, libz}, libjvms()...) {
		b.Run(libName(path), func(b *testing.B) {
			f, err := elf.Open(path)
			if err != nil {
				testutil.SkipOrFail(b, fmt.Sprintf("%s: %v", path, err))
			}
			defer f.Close()
			var st Stats
			for b.Loop() {
				if _, st, err = Build(f); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(st.Rows), "rows")
			b.ReportMetric(float64(st.FDEs), "FDEs")
		})
	}
}

// RBPRule returns the RBP rule, the high nibble of r.Rule.
func (r Row) RBPRule() uint8 { return r.Rule >> 4 }

// String formats r like readelf's frames-interp columns, in test failures: "0x1139 rsp+16 rbp=c-16".
func (r Row) String() string {
	var cfa string
	switch r.CFARule() {
	case RegRSP:
		cfa = fmt.Sprintf("rsp%+d", r.CFAOffset)
	case RegRBP:
		cfa = fmt.Sprintf("rbp%+d", r.CFAOffset)
	case RuleUndefined:
		cfa = "undefined"
	case RuleUnsupported:
		cfa = "unsupported"
	case RulePLT:
		cfa = "plt"
	default:
		cfa = fmt.Sprintf("rule%d", r.CFARule())
	}
	var rbp string
	switch r.RBPRule() {
	case RBPSame:
		rbp = "s"
	case RBPSaved:
		rbp = fmt.Sprintf("c%+d", r.RBPOffset)
	case RBPUndefined:
		rbp = "u"
	default:
		rbp = fmt.Sprintf("rule%d", r.RBPRule())
	}
	return fmt.Sprintf("%#x %s rbp=%s", r.PC, cfa, rbp)
}

// lookup returns the row covering pc, the last row whose PC is at most pc,
// as the BPF walker's binary search finds it. It reports false when pc is
// below the first row.
func lookup(rows []Row, pc uint32) (Row, bool) {
	i := sort.Search(len(rows), func(i int) bool { return rows[i].PC > pc })
	if i == 0 {
		return Row{}, false
	}
	return rows[i-1], true
}
