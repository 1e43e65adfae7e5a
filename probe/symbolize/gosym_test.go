package symbolize

import (
	"debug/elf"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// buildGo builds testdata/goprog with extra go build flags into a fresh
// directory and returns the binary. The source is copied with a go.mod of
// its own, so the build needs nothing from this module.
func buildGo(tb testing.TB, flags ...string) string {
	tb.Helper()
	requireTool(tb, "go")
	dir := tb.TempDir()
	src, err := os.ReadFile(filepath.Join("testdata", "goprog", "main.go"))
	if err != nil {
		tb.Fatal(err)
	}
	for name, data := range map[string]string{"main.go": string(src), "go.mod": "module goprog\n\ngo 1.24\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	out := filepath.Join(dir, "goprog")
	cmd := exec.Command("go", append(append([]string{"build", "-o", out}, flags...), ".")...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("go build %v: %v\n%s", flags, err, b)
	}
	return out
}

// runtimeFrames runs goprog and returns the frames the Go runtime reports
// for its stack, innermost first.
func runtimeFrames(tb testing.TB, prog string) []Frame {
	tb.Helper()
	var out []Frame
	for _, l := range strings.Split(strings.TrimSpace(run(tb, prog)), "\n") {
		f := strings.Split(l, "|")
		if len(f) != 3 {
			tb.Fatalf("goprog printed %q", l)
		}
		line, _ := strconv.Atoi(f[2])
		out = append(out, Frame{Function: f[0], File: f[1], Line: line})
	}
	return out
}

// goEntry finds the entry address of Go function name in o's .gopclntab.
func goEntry(tb testing.TB, o *Object, name string) (entry, size uint64) {
	tb.Helper()
	if o.gotab == nil {
		tb.Fatalf("%s: no Go function table", o.Path)
	}
	for _, r := range o.gotab.funcRanges() {
		if fn, _, _, _ := o.gotab.symbolize(r[0]); fn == name {
			return r[0], r[1]
		}
	}
	tb.Fatalf("%s: no Go function %s", o.Path, name)
	return 0, 0
}

// goCallReturn returns the address after the call from Go function
// caller to callee.
func goCallReturn(tb testing.TB, o *Object, caller, callee string) uint64 {
	tb.Helper()
	from, size := goEntry(tb, o, caller)
	to, _ := goEntry(tb, o, callee)
	code := make([]byte, size)
	code = code[:o.readCode(from, code)]
	for i := 0; i+5 <= len(code); i++ {
		ret := from + uint64(i) + 5
		if code[i] == 0xe8 && ret+uint64(int64(int32(binary.LittleEndian.Uint32(code[i+1:])))) == to {
			return ret
		}
	}
	tb.Fatalf("no call from %s to %s", caller, callee)
	return 0
}

// TestGoFrames checks the .gopclntab reader against the Go runtime's own
// view of the same stack: Go names, file:line and inlined frames, in a
// normal build, a stripped one (no .symtab, no DWARF) and a stripped
// position-independent one (moduledata only reachable via relocations).
func TestGoFrames(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
	}{
		{"plain", nil},
		{"stripped", []string{"-ldflags=-s -w"}},
		{"pie-stripped", []string{"-buildmode=pie", "-ldflags=-s -w"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prog := buildGo(t, tc.flags...)
			want := runtimeFrames(t, prog)
			if len(want) < 4 || want[0].Function != "main.leaf" || want[2].Function != "main.(*table).outer" {
				t.Fatalf("goprog's own stack = %+v, want leaf, middle, outer, main", want)
			}
			o := mustObject(t, prog)
			if !o.Go() || !strings.HasPrefix(o.GoVersion, "go1.") {
				t.Fatalf("Go() = %v, GoVersion = %q", o.Go(), o.GoVersion)
			}
			if o.gotab.gofunc == 0 {
				t.Fatal("go:func.* not found: inline trees unreadable")
			}
			if tc.name != "plain" && len(o.syms.syms) > 0 {
				t.Logf("%d ELF code symbols left after stripping", len(o.syms.syms))
			}
			// The call to sink sits in outer, with leaf and middle inlined there.
			ret := goCallReturn(t, o, "main.(*table).outer", "main.sink")
			got := o.Frames(ret - 1)
			wantIn := []Frame{want[0], want[1], want[2]}
			wantIn[0].Inlined, wantIn[1].Inlined = true, true
			if !equalFrames(got, wantIn) {
				t.Errorf("Frames(return into outer) =\n  %+v\nwant\n  %+v", got, wantIn)
			}
			if fn, file, line := o.Symbolize(ret - 1); fn != "main.(*table).outer" || file != want[0].File || line != want[0].Line {
				t.Errorf("Symbolize = %s %s:%d; want the holding function with the innermost position", fn, file, line)
			}
			ret = goCallReturn(t, o, "main.main", "main.(*table).outer")
			if got := o.Frames(ret - 1); !equalFrames(got, want[3:4]) {
				t.Errorf("Frames(return into main) = %+v, want %+v", got, want[3:4])
			}
			// Go code keeps frame pointers: the object must not stop walks.
			share, funcs := o.FramePointerShare()
			if class := FramePointerClass(share, funcs); class != "yes" {
				t.Errorf("frame pointers: %s (%.0f%% of %d functions), want yes", class, 100*share, funcs)
			}
		})
	}
}

func equalFrames(a, b []Frame) bool {
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

// A C object is not Go, and Frames is Symbolize as one frame.
func TestFramesNotGo(t *testing.T) {
	prog := compile(t, "gcc", "prog.c", "-g", "-O0", "-fno-omit-frame-pointer")
	o := mustObject(t, prog)
	if o.Go() || o.GoVersion != "" {
		t.Fatalf("C program taken for Go: %q", o.GoVersion)
	}
	v := mustLookup(t, o, "middle")
	fn, file, line := o.Symbolize(v + 1)
	if got := o.Frames(v + 1); len(got) != 1 || got[0] != (Frame{Function: fn, File: file, Line: line}) {
		t.Errorf("Frames = %+v, want one frame %s %s:%d", got, fn, file, line)
	}
}

// Go's amd64 prologues, as the Go 1.26 compiler emits them: a stack-bound
// check against g.stackguard0 at 0x10(%r14), then the frame pointer.
func TestGoPrologues(t *testing.T) {
	for _, tc := range []struct {
		name string
		code []byte
		want bool
	}{
		{"small frame", []byte{0x49, 0x3b, 0x66, 0x10, 0x0f, 0x86, 0xb4, 0, 0, 0, 0x55, 0x48, 0x89, 0xe5}, true},
		{"large frame", []byte{0x4c, 0x8d, 0x64, 0x24, 0xd8, 0x4d, 0x3b, 0x66, 0x10, 0x0f, 0x86, 0xeb, 3, 0, 0, 0x55, 0x48, 0x89, 0xe5}, true},
		{"huge frame", []byte{0x49, 0x89, 0xe4, 0x49, 0x81, 0xec, 0xa8, 0x1f, 0, 0, 0x0f, 0x82, 0xb9, 0, 0, 0,
			0x4d, 0x3b, 0x66, 0x10, 0x0f, 0x86, 0xaf, 0, 0, 0, 0x55, 0x48, 0x89, 0xe5}, true},
		{"nosplit", []byte{0x55, 0x48, 0x89, 0xe5}, true},
		// The check without a frame after it: a frameless function.
		{"check, no frame", []byte{0x49, 0x3b, 0x66, 0x10, 0x76, 0x10, 0x48, 0x83, 0xec, 0x28, 0xc3}, false},
		// A compare against another register's memory is no stack check.
		{"other cmp", []byte{0x49, 0x3b, 0x67, 0x10, 0x76, 0x10, 0x55, 0x48, 0x89, 0xe5}, false},
	} {
		if got := hasFramePointerPrologue(tc.code); got != tc.want {
			t.Errorf("%s: hasFramePointerPrologue(% x) = %v, want %v", tc.name, tc.code, got, tc.want)
		}
	}
}

// FuzzGoTable feeds mutated .gopclntab contents to the reader: a malformed
// table may name nothing, but never panics, and every lookup yields at
// most one frame per inline level.
func FuzzGoTable(f *testing.F) {
	if _, err := exec.LookPath("go"); err == nil {
		ef, err := elf.Open(buildGo(f))
		if err != nil {
			f.Fatal(err)
		}
		data, err := ef.Section(".gopclntab").Data()
		ef.Close()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data) // a real table
	}
	hdr := make([]byte, 72)
	binary.LittleEndian.PutUint32(hdr, goMagic120)
	hdr[6], hdr[7] = 1, 8
	f.Add(hdr)
	f.Fuzz(func(t *testing.T, data []byte) {
		mem := func(vaddr uint64, buf []byte) int {
			for i := range buf {
				buf[i] = byte(vaddr) + byte(i)
			}
			return len(buf)
		}
		tab, _ := parseGoTable(data, mem)
		if tab == nil {
			return
		}
		tab.setText(0x401000)
		tab.gofunc = 0x500000
		for _, v := range []uint64{tab.textStart, tab.textStart + 1, tab.textStart + 0x40, tab.textEnd - 1, tab.textEnd} {
			if fs := tab.frames(v); len(fs) > maxInlineDepth+1 {
				t.Fatalf("%d frames at %#x", len(fs), v)
			}
			tab.funcRanges()
		}
	})
}

// GoText and GoFunc read .gopclntab alone: a stripped build gives the
// ranges the plain build's ELF symbols give. A binary without cgo has no
// C code for CFramePointerShare to measure.
func TestGoTextAndFunc(t *testing.T) {
	plain := mustObject(t, buildGo(t))
	ef, err := elf.Open(plain.Path)
	if err != nil {
		t.Fatal(err)
	}
	syms, err := ef.Symbols()
	ef.Close()
	if err != nil {
		t.Fatal(err)
	}
	addr := map[string]uint64{}
	for _, s := range syms {
		addr[s.Name] = s.Value
	}
	for _, tc := range []struct {
		name  string
		flags []string
	}{{"plain", nil}, {"stripped", []string{"-ldflags=-s -w"}}} {
		o := plain
		if tc.flags != nil {
			o = mustObject(t, buildGo(t, tc.flags...))
		}
		start, end, ok := o.GoText()
		if !ok || start != addr["runtime.text"] || end > addr["runtime.etext"] || end <= start {
			t.Errorf("%s: GoText = %#x-%#x %v; want from runtime.text %#x to at most runtime.etext %#x",
				tc.name, start, end, ok, addr["runtime.text"], addr["runtime.etext"])
		}
		fs, fe, ok := o.GoFunc("runtime.asmcgocall")
		if !ok || fs != addr["runtime.asmcgocall.abi0"] || fe <= fs || fe > end {
			t.Errorf("%s: GoFunc(runtime.asmcgocall) = %#x-%#x %v; want from runtime.asmcgocall.abi0 %#x, inside the Go text",
				tc.name, fs, fe, ok, addr["runtime.asmcgocall.abi0"])
		}
		if _, _, ok := o.GoFunc("main.nosuchfunction"); ok {
			t.Errorf("%s: GoFunc found a function that does not exist", tc.name)
		}
		if share, funcs := o.CFramePointerShare(); funcs != 0 {
			t.Errorf("%s: CFramePointerShare = %.2f of %d functions, want none", tc.name, share, funcs)
		}
	}
}
