//go:build linux && amd64

package probe

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/testutil"
)

// buildGoExample builds examples/go/<name> with cgo into a temporary
// directory. The Makefile exports CGO_ENABLED=0 for leakscope itself; the
// examples need cgo. With edit, the source is first rewritten (to drop
// its #cgo CFLAGS, say) and built as a module of its own.
func buildGoExample(t *testing.T, name string, edit func(string) string, flags ...string) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		testutil.SkipOrFail(t, "cgo examples need gcc: "+err.Error())
	}
	dir := t.TempDir()
	out := filepath.Join(dir, name)
	src, err := filepath.Abs(filepath.Join("..", "examples", "go", name))
	if err != nil {
		t.Fatal(err)
	}
	pkg := "."
	if edit != nil {
		b, err := os.ReadFile(filepath.Join(src, "main.go"))
		if err != nil {
			t.Fatal(err)
		}
		src = filepath.Join(dir, "src")
		if err := os.MkdirAll(src, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(edit(string(b))), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module "+name+"\n\ngo 1.24\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", append(append([]string{"build", "-o", out}, flags...), pkg)...)
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", name, err, b)
	}
	return out
}

// attachGo starts bin, waiting on a gate file, attaches, opens the gate and
// traces until the example printed its summary line, then stops.
func attachGo(t *testing.T, bin string, opts ...Options) *analyze.Capture {
	t.Helper()
	o := Options{}
	if len(opts) > 0 {
		o = opts[0]
	}
	return traceGo(t, bin, true, o)
}

// traceGo is attachGo with more arguments for bin; libc says the program
// maps libc while starting (cgo), which the attach waits for.
func traceGo(t *testing.T, bin string, libc bool, o Options, args ...string) *analyze.Capture {
	t.Helper()
	o.Warnf = t.Logf
	gate := filepath.Join(t.TempDir(), "gate")
	cmd := exec.Command(bin, append(args, "-wait-file", gate, "-hold", "60s")...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	// The Go runtime maps libc while starting; wait for it.
	for i := 0; libc; i++ {
		b, _ := os.ReadFile("/proc/" + itoa(cmd.Process.Pid) + "/maps")
		if strings.Contains(string(b), "libc.so") {
			break
		}
		if i == 200 {
			t.Fatal("example never mapped libc")
		}
		time.Sleep(10 * time.Millisecond)
	}
	tr, err := Attach(cmd.Process.Pid, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	summary := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "leaked") {
				summary <- sc.Text()
			}
		}
	}()
	select {
	case line := <-summary:
		t.Log(line)
	case <-time.After(30 * time.Second):
		t.Fatal("example printed no summary within 30s")
	}
	if _, err := tr.Snapshot(); err != nil {
		t.Fatal(err)
	}
	c, err := tr.Stop()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// connLeak is cgoleak's ground truth (examples/README.md): 40 buffers
// of 3072 bytes opened by main.(*connTable).open and never freed, of
// 200 allocated.
func checkConnLeak(t *testing.T, c *analyze.Capture) analyze.Leak {
	t.Helper()
	checkNoLoss(t, c)
	if c.Target.Runtime != analyze.RuntimeGo || c.Target.RuntimeVersion != runtime.Version() {
		t.Errorf("target runtime %q %q, want go %s", c.Target.Runtime, c.Target.RuntimeVersion, runtime.Version())
	}
	res := analyze.Rank(c, analyze.Options{})
	if len(res.Leaks) == 0 {
		t.Fatal("no leaks")
	}
	l := res.Leaks[0]
	fns := functions(*l.Site)
	if !contains(fns, "main.(*connTable).open") || l.Count != 40 || l.Bytes != 40*3072 ||
		l.Site.Allocs != 200 || l.Site.Frees != 160 {
		t.Errorf("rank 1: %d blocks, %d bytes, %d allocs, %d frees in %v; want 40, 122880, 200, 160 through main.(*connTable).open",
			l.Count, l.Bytes, l.Site.Allocs, l.Site.Frees, fns)
	}
	if want := "called through cgo by main.(*connTable).buffer, inlined in main.(*connTable).open"; !contains(l.Reasons, want) {
		t.Errorf("rank 1 reasons %q, want %q", l.Reasons, want)
	}
	for _, other := range res.Leaks[1:] {
		if contains(functions(*other.Site), "main.(*connTable).open") {
			t.Errorf("open appears in a second leak: %v (%d blocks)", functions(*other.Site), other.Count)
		}
	}
	return l
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// After the C helper, the whole Go stack: the cgo call, the inlined
// helper, the method and main, down to the goroutine's bottom frame.
var goTail = []string{"main._Cfunc_conn_buffer", "main.(*connTable).buffer", "main.(*connTable).open",
	"main.serve", "main.main", "runtime.main", "runtime.goexit"}

func TestGoCgoLeakExact(t *testing.T) {
	testutil.RequireBPF(t)
	bin := buildGoExample(t, "cgoleak", nil)
	l := checkConnLeak(t, attachGo(t, bin))
	s := l.Site.Stack
	fns := functions(*l.Site)
	// With frame pointers in the cgo C code (the example's #cgo CFLAGS)
	// nothing is skipped: C helper, cgo stub, the switch back to the
	// goroutine's stack, Go.
	if len(fns) < 3 || fns[0] != "conn_buffer" || !strings.HasSuffix(fns[1], "_Cfunc_conn_buffer") ||
		fns[2] != "runtime.asmcgocall" || s.Truncated != "" {
		t.Errorf("stack %v (truncated %q), want conn_buffer, the cgo stub, runtime.asmcgocall, ...", fns, s.Truncated)
	}
	if got := strings.Join(fns[len(fns)-len(goTail):], ","); got != strings.Join(goTail, ",") {
		t.Errorf("stack ends %s, want %s", got, strings.Join(goTail, ","))
	}
	for _, f := range s.Frames {
		switch f.Function {
		case "main.(*connTable).buffer":
			if !f.Inlined || !strings.HasSuffix(f.File, "cgoleak/main.go") || f.Line == 0 {
				t.Errorf("inlined frame %+v, want Inlined with cgoleak/main.go:line", f)
			}
		case "main.(*connTable).open":
			if f.Inlined || !strings.HasSuffix(f.File, "cgoleak/main.go") || f.Line == 0 {
				t.Errorf("frame %+v, want cgoleak/main.go:line", f)
			}
		}
	}
}

// cgo's default CFLAGS (-O2, no -fno-omit-frame-pointer) leave the C code
// without frame pointers: the kernel walks it with its .eh_frame rows, its
// Go code by frame pointers, and switches to the goroutine's stack at
// runtime.asmcgocall, so the stack is the one built with frame pointers.
func TestGoCgoWithoutFramePointers(t *testing.T) {
	testutil.RequireBPF(t)
	bin := buildGoExample(t, "cgoleak", func(src string) string {
		return strings.Replace(src, "#cgo CFLAGS: -O2 -g -fno-omit-frame-pointer", "#cgo CFLAGS: -O2 -g", 1)
	})
	l := checkConnLeak(t, attachGo(t, bin))
	fns := functions(*l.Site)
	want := append([]string{"conn_buffer", "", "runtime.asmcgocall", "runtime.cgocall"}, goTail...)
	if len(fns) != len(want) || !strings.HasSuffix(fns[1], "_Cfunc_conn_buffer") || l.Site.Stack.Truncated != "" {
		t.Fatalf("stack %v (truncated %q), want %v with the cgo stub second", fns, l.Site.Stack.Truncated, want)
	}
	for i, w := range want {
		if w != "" && fns[i] != w {
			t.Errorf("frame %d is %s, want %s: %v", i, fns[i], w, fns)
		}
	}
}

// With --unwind fp nothing is walked with unwind rows: the frame-pointer
// walk leaves the C code at the Go frame its %rbp still points to, and the
// stack names the frames it skipped.
func TestGoCgoWithoutFramePointersUnwindFP(t *testing.T) {
	testutil.RequireBPF(t)
	bin := buildGoExample(t, "cgoleak", func(src string) string {
		return strings.Replace(src, "#cgo CFLAGS: -O2 -g -fno-omit-frame-pointer", "#cgo CFLAGS: -O2 -g", 1)
	})
	l := checkConnLeak(t, attachGo(t, bin, Options{Unwind: UnwindFP}))
	fns := functions(*l.Site)
	if got := strings.Join(fns[len(fns)-len(goTail):], ","); got != strings.Join(goTail, ",") {
		t.Errorf("stack ends %s, want %s", got, strings.Join(goTail, ","))
	}
	if tr := l.Site.Stack.Truncated; fns[0] != "conn_buffer" || !strings.Contains(tr, "frames between conn_buffer and") ||
		!strings.Contains(tr, "-fno-omit-frame-pointer") {
		t.Errorf("stack %v, truncated %q: want the skipped C frames named", fns, tr)
	}
}

// A stripped Go binary keeps .gopclntab: Go frames are still named, and
// inlined frames still expanded.
func TestGoStrippedBinary(t *testing.T) {
	testutil.RequireBPF(t)
	bin := buildGoExample(t, "cgoleak", nil, "-ldflags=-s -w")
	if out, _ := exec.Command("file", bin).Output(); len(out) > 0 && !strings.Contains(string(out), "stripped") {
		t.Logf("file: %s", out)
	}
	l := checkConnLeak(t, attachGo(t, bin))
	fns := functions(*l.Site)
	if got := strings.Join(fns[len(fns)-len(goTail):], ","); got != strings.Join(goTail, ",") {
		t.Errorf("stack ends %s, want %s", got, strings.Join(goTail, ","))
	}
	// The static C helper had only a .symtab name: it is an offset now.
	if f := l.Site.Stack.Frames[0]; f.Function != "" || f.Module != bin {
		t.Logf("frame 0 of the stripped binary: %+v", f)
	}
}

// run: the exec shim is leakscope itself, a Go program; the capture must
// describe the command it execs.
func TestLaunchGoProgram(t *testing.T) {
	testutil.RequireBPF(t)
	bin := buildGoExample(t, "cgoleak", nil)
	c, _ := launch(t, bin)
	l := checkConnLeak(t, c)
	fns := functions(*l.Site)
	if got := strings.Join(fns[len(fns)-len(goTail):], ","); got != strings.Join(goTail, ",") || l.Site.Stack.Truncated != "" {
		t.Errorf("stack %v (truncated %q), want it to end %s", fns, l.Site.Stack.Truncated, strings.Join(goTail, ","))
	}
}
