package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leakscope/leakscope/internal/testutil"
	"github.com/leakscope/leakscope/report"
)

// A leakscope built with cgo (a plain go install, where gcc is found)
// traces exactly what the Makefile's cgo-free build does. run's exec shim
// is leakscope itself; built with cgo it is linked to libc and may call
// malloc before it execs the command (pthread_create for the runtime's
// threads), but the kernel side counts nothing until the traced process
// has exec'd (wait_exec in ebpf/leakscope.bpf.c), so none of those calls
// reach the report.
func TestCgoBuildTracesTheSame(t *testing.T) {
	testutil.RequireBPF(t)
	dir := t.TempDir()
	prog := filepath.Join(dir, "leaky")
	src := filepath.Join("..", "..", "examples", "c", "leaky.c")
	if b, err := exec.Command("gcc", "-O2", "-g", "-pthread", "-fno-omit-frame-pointer", "-o", prog, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, b)
	}
	var got [2]string
	for i, cgo := range []string{"0", "1"} {
		bin := filepath.Join(dir, "leakscope-cgo"+cgo)
		build := exec.Command("go", "build", "-o", bin, ".")
		build.Env = append(os.Environ(), "CGO_ENABLED="+cgo)
		if b, err := build.CombinedOutput(); err != nil {
			t.Fatalf("CGO_ENABLED=%s go build: %v\n%s", cgo, err, b)
		}
		if b, _ := exec.Command("file", "-L", bin).Output(); cgo == "1" && !bytes.Contains(b, []byte("dynamically linked")) {
			t.Fatalf("CGO_ENABLED=1 built a static binary, not a cgo one: %s", b)
		}
		out := filepath.Join(dir, "report-cgo"+cgo+".json")
		cmd := exec.Command(bin, "run", "--format", "json", "--top", "0", "-o", out, "--", prog)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("CGO_ENABLED=%s leakscope run: %v\n%s", cgo, err, stderr.String())
		}
		f, err := os.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		r, err := parseReport(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		got[i] = countsOf(r)
		t.Logf("CGO_ENABLED=%s:\n%s", cgo, got[i])
	}
	if got[0] != got[1] {
		t.Errorf("the cgo build traced differently:\nCGO_ENABLED=0:\n%s\nCGO_ENABLED=1:\n%s", got[0], got[1])
	}
	// leaky's ground truth (examples/c/leaky.c), so that two equally
	// wrong reports do not pass.
	for _, w := range []string{"malloc 100 409600 100 0 leak_request_buffer", "lost {0 0 0 0 0}"} {
		if !strings.Contains(got[0], w) {
			t.Errorf("no %q in\n%s", w, got[0])
		}
	}
}

// countsOf is a report's exact counts: totals, losses and every leak's
// kind, live count and bytes, allocs, frees and stack (function and
// object offset per frame; addresses differ run to run).
func countsOf(r *report.V1) string {
	var b strings.Builder
	fmt.Fprintf(&b, "totals %d %d\nlost %v\n", r.Totals.OutstandingCount, r.Totals.OutstandingBytes, r.Lost)
	for _, l := range r.Leaks {
		var frames []string
		for _, f := range l.Frames {
			frames = append(frames, f.Function+"@"+filepath.Base(f.Module)+"+"+f.Offset)
		}
		fn := "?"
		if len(l.Frames) > 0 {
			fn = l.Frames[0].Function
		}
		fmt.Fprintf(&b, "%s %d %d %d %d %s [%s]\n", l.Kind, l.OutstandingCount, l.OutstandingBytes, l.Allocs, l.Frees, fn, strings.Join(frames, " "))
	}
	return b.String()
}
