package main

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leakscope/leakscope/internal/testutil"
	"github.com/leakscope/leakscope/report"
)

// buildGoE2E builds leakscope (without cgo, as the Makefile does) and the
// cgo example examples/go/<example> (with cgo) into a temporary directory.
func buildGoE2E(t *testing.T, example string) (leakscope, prog string) {
	t.Helper()
	dir := t.TempDir()
	leakscope = filepath.Join(dir, "leakscope")
	build := exec.Command("go", "build", "-o", leakscope, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build leakscope: %v\n%s", err, b)
	}
	prog = filepath.Join(dir, example)
	build = exec.Command("go", "build", "-o", prog, ".")
	build.Dir = filepath.Join("..", "..", "examples", "go", example)
	build.Env = append(os.Environ(), "CGO_ENABLED=1")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", example, err, b)
	}
	return leakscope, prog
}

// lineWatch collects a process's stderr and hands out lines as they
// arrive; a progress line ends in \r, not \n.
type lineWatch struct {
	mu    sync.Mutex
	text  strings.Builder
	lines chan string
}

func watchLines(r io.Reader) *lineWatch {
	w := &lineWatch{lines: make(chan string, 64)}
	go func() {
		sc := bufio.NewScanner(r)
		sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
			if i := bytes.IndexAny(data, "\r\n"); i >= 0 {
				return i + 1, data[:i], nil
			}
			if atEOF && len(data) > 0 {
				return len(data), data, nil
			}
			return 0, nil, nil
		})
		for sc.Scan() {
			w.mu.Lock()
			w.text.WriteString(sc.Text() + "\n")
			w.mu.Unlock()
			select {
			case w.lines <- sc.Text():
			default:
			}
		}
	}()
	return w
}

// await returns the first submatch of re in a line arriving within d.
func (w *lineWatch) await(t *testing.T, re *regexp.Regexp, d time.Duration) string {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case l := <-w.lines:
			if m := re.FindStringSubmatch(l); m != nil {
				return m[len(m)-1]
			}
		case <-deadline:
			w.mu.Lock()
			defer w.mu.Unlock()
			t.Fatalf("no line matching %s within %s; got:\n%s", re, d, w.text.String())
		}
	}
}

// The goroutine example: 12 goroutines each open a zlib stream through
// cgo and block forever in chan receive. attach with --goroutines pointed
// at its pprof endpoint links the blocked goroutines to the leaked
// streams; report re-renders the saved capture beside a dump file.
func TestAttachGoroutinesCorrelation(t *testing.T) {
	testutil.RequireBPF(t)
	leakscope, prog := buildGoE2E(t, "zgoroutines")
	gate := filepath.Join(t.TempDir(), "gate")
	target := exec.Command(prog, "-wait-file", gate)
	stderr, err := target.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := target.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		target.Process.Kill()
		target.Wait()
	})
	tw := watchLines(stderr)
	addr := tw.await(t, regexp.MustCompile(`pprof on (127\.0\.0\.1:\d+)`), 10*time.Second)

	dir := t.TempDir()
	out, capture := filepath.Join(dir, "report.json"), filepath.Join(dir, "leaks.capture")
	ls := exec.Command(leakscope, "attach", "--pid", strconv.Itoa(target.Process.Pid), "--duration", "5s", "--interval", "250ms",
		"--progress", "always", "--format", "json", "-o", out, "--save", capture, "--goroutines", "http://"+addr)
	lsErr, err := ls.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := ls.Start(); err != nil {
		t.Fatal(err)
	}
	lw := watchLines(lsErr)
	// The progress line appears once the probes are attached.
	lw.await(t, regexp.MustCompile(`leakscope: pid (\d+)`), 30*time.Second)
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tw.await(t, regexp.MustCompile(`(12 goroutines blocked with 12 inflate streams)`), 10*time.Second)
	if err := ls.Wait(); err != nil {
		lw.mu.Lock()
		t.Fatalf("leakscope attach: %v\n%s", err, lw.text.String())
	}

	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := parseReport(f)
	if err != nil {
		t.Fatal(err)
	}
	if r.Target.Runtime != "go" || r.Target.RuntimeVersion != runtime.Version() || len(r.Warnings) != 0 {
		t.Errorf("target %+v, warnings %q; want go %s and no warning", r.Target, r.Warnings, runtime.Version())
	}
	want := report.V1Goroutines{Count: 12, State: "chan receive", WaitMinutes: 0, Function: "main.(*decoder).run"}
	found := map[string]bool{}
	for _, l := range r.Leaks {
		var fns []string
		for _, fr := range l.Frames {
			fns = append(fns, fr.Function)
		}
		// main.main.gowrap2 is the wrapper of the go statement.
		if !strings.Contains(strings.Join(fns, ","), "main._Cfunc_open_inflater,main.(*decoder).run,main.main.gowrap2,runtime.goexit") {
			if len(l.Goroutines) != 0 {
				t.Errorf("%s leak through %v lists goroutines %+v", l.Kind, fns, l.Goroutines)
			}
			continue
		}
		// Ground truth (examples/README.md): 12 streams of 7160 bytes
		// and 12 z_streams of 112 bytes, one per blocked goroutine.
		switch {
		case l.Kind == "zlib.inflate" && l.OutstandingCount == 12 && l.OutstandingBytes == 12*7160:
		case l.Kind == "malloc" && l.OutstandingCount == 12 && l.OutstandingBytes == 12*112:
		default:
			t.Errorf("%s leak: %d live, %d bytes; want zlib.inflate 12/85920 or malloc 12/1344", l.Kind, l.OutstandingCount, l.OutstandingBytes)
		}
		found[l.Kind] = true
		if len(l.Goroutines) != 1 || l.Goroutines[0] != want {
			t.Errorf("%s leak: goroutines %+v, want %+v", l.Kind, l.Goroutines, want)
		}
	}
	if !found["zlib.inflate"] || !found["malloc"] {
		t.Errorf("leaks through main.(*decoder).run: %v, want zlib.inflate and malloc", found)
	}

	// The same capture re-rendered later beside a saved dump, whose
	// goroutines had waited half an hour.
	var text bytes.Buffer
	rep := exec.Command(leakscope, "report", "--goroutines", filepath.Join("..", "..", "testdata", "goroutines", "zgoroutines.txt"), capture)
	rep.Stdout, rep.Stderr = &text, &text
	if err := rep.Run(); err != nil {
		t.Fatalf("leakscope report: %v\n%s", err, text.String())
	}
	if n := strings.Count(text.String(), "12 goroutines in chan receive for 31m in main.(*decoder).run"); n != 2 {
		t.Errorf("text report names the blocked goroutines %d times, want 2 (stream and z_stream):\n%s", n, text.String())
	}
	if !strings.Contains(text.String(), "(go "+runtime.Version()+")") {
		t.Errorf("text report does not name the Go version:\n%s", text.String())
	}
}
