package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leakscope/leakscope/internal/testutil"
)

// buildAll compiles leakscope and one C example into a temporary directory.
func buildAll(t *testing.T, example string) (leakscope, prog string) {
	t.Helper()
	dir := t.TempDir()
	leakscope = filepath.Join(dir, "leakscope")
	build := exec.Command("go", "build", "-o", leakscope, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	prog = filepath.Join(dir, example)
	src := filepath.Join("..", "..", "examples", "c", example+".c")
	if b, err := exec.Command("gcc", "-O2", "-g", "-pthread", "-fno-omit-frame-pointer", "-o", prog, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, b)
	}
	return leakscope, prog
}

func TestRunWritesJSONReport(t *testing.T) {
	testutil.RequireBPF(t)
	leakscope, prog := buildAll(t, "leaky")
	out := filepath.Join(t.TempDir(), "out.json")
	cmd := exec.Command(leakscope, "run", "--format", "json", "-o", out, "--", prog)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("leakscope run: %v\n%s", err, stderr.String())
	}
	st, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("report mode %v, want 0600", st.Mode().Perm())
	}
	f, _ := os.Open(out)
	defer f.Close()
	r, err := parseReport(f)
	if err != nil {
		t.Fatal(err)
	}
	if r.Target.ExitCode == nil || *r.Target.ExitCode != 0 || r.Target.Runtime != "native" || r.Target.Command[0] != prog {
		t.Errorf("target = %+v", r.Target)
	}
	if len(r.Leaks) < 2 {
		t.Fatalf("%d leaks", len(r.Leaks))
	}
	l := r.Leaks[0]
	if l.Rank != 1 || l.Kind != "malloc" || l.OutstandingCount != 100 || l.OutstandingBytes != 409600 ||
		l.Allocs != 100 || l.Frees != 0 || l.Frames[0].Function != "leak_request_buffer" {
		t.Errorf("rank 1 = %+v", l)
	}
	if r.Lost.AllocationsDropped != 0 || r.Lost.StackErrors != 0 {
		t.Errorf("lost = %+v", r.Lost)
	}
}

// Ctrl-C at a terminal signals the whole foreground process group: the
// target stops, and leakscope writes the final report and exits 0.
func TestRunCtrlCWritesReport(t *testing.T) {
	testutil.RequireBPF(t)
	leakscope, prog := buildAll(t, "churn")
	cmd := exec.Command(leakscope, "run", "--format", "json", "--interval", "200ms", "--", prog, "--forever", "--threads", "2", "--iterations", "2000", "--interval", "50")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Whatever happens, leave no traced --forever process behind.
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	// Interrupt once the command runs traced (leakscope's child has
	// exec'd it) and has done some rounds.
	waitForExec(t, cmd.Process.Pid, prog, 60*time.Second)
	time.Sleep(time.Second)
	syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("leakscope: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		t.Fatal("leakscope did not finish after SIGINT")
	}
	if !strings.Contains(stderr.String(), "interrupted") && !strings.Contains(stderr.String(), "target exited") {
		t.Errorf("stderr = %s", stderr.String())
	}
	r, err := parseReport(&stdout)
	if err != nil {
		t.Fatalf("report after Ctrl-C: %v\n%s", err, stderr.String())
	}
	var inWorker uint64
	for _, l := range r.Leaks {
		if l.Frames[0].Function == "leak_in_worker" {
			inWorker += l.OutstandingCount
		}
	}
	// The interrupt lands mid-round and tracing stops at once, so the
	// count is not a whole number of rounds; it must be there.
	if inWorker == 0 {
		t.Errorf("leak_in_worker missing from the report after Ctrl-C")
	}
}

// The CI gate on a real run: exit 1 and the matching row on stderr when a
// rule matches, 0 when none does; --save writes a capture that report
// re-renders without the target.
func TestRunFailOnAndSave(t *testing.T) {
	testutil.RequireBPF(t)
	leakscope, prog := buildAll(t, "leaky")
	capture := filepath.Join(t.TempDir(), "leaky.capture")
	cmd := exec.Command(leakscope, "run", "--save", capture, "--fail-on", "kind=malloc,count>=100,bytes>256KiB", "--", prog)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit = %v, want 1\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), `matched rank 1: malloc, 100 live, 400.0 KiB, in leak_request_buffer`) {
		t.Errorf("stderr does not name the matching row:\n%s", stderr.String())
	}
	if !strings.Contains(stdout.String(), "leak_request_buffer") {
		t.Errorf("no report on stdout:\n%s", stdout.String())
	}

	// The same leak under a rule it does not meet: exit 0.
	cmd = exec.Command(leakscope, "report", "--fail-on", "bytes>1MiB", "--format", "json", capture)
	stdout.Reset()
	stderr.Reset()
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("report: %v\n%s", err, stderr.String())
	}
	r, err := parseReport(&stdout)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Leaks) < 2 || r.Leaks[0].OutstandingCount != 100 || r.Leaks[0].OutstandingBytes != 409600 ||
		r.Leaks[1].OutstandingCount != 25 || r.Target.ExitCode == nil || *r.Target.ExitCode != 0 {
		t.Errorf("re-rendered capture: %+v", r)
	}
}

// waitForExec waits until a child of parent runs the executable prog.
func waitForExec(t *testing.T, parent int, prog string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		// Any of leakscope's threads may have forked it.
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", parent))
		for _, task := range tasks {
			kids, _ := os.ReadFile(task)
			for _, f := range strings.Fields(string(kids)) {
				if exe, err := os.Readlink("/proc/" + f + "/exe"); err == nil && exe == prog {
					return
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s was not started within %s", prog, limit)
}
