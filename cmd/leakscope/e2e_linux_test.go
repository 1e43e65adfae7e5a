package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leakscope/leakscope/internal/testutil"
	"github.com/leakscope/leakscope/report"
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
	r, err := report.ParseJSON(f)
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
	time.Sleep(2 * time.Second)
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
	r, err := report.ParseJSON(&stdout)
	if err != nil {
		t.Fatalf("report after Ctrl-C: %v\n%s", err, stderr.String())
	}
	var inWorker uint64
	for _, l := range r.Leaks {
		if l.Frames[0].Function == "leak_in_worker" {
			inWorker += l.OutstandingCount
		}
	}
	// 25 blocks per completed thread-round; at least one round each.
	if inWorker == 0 || inWorker%25 != 0 {
		t.Errorf("leak_in_worker outstanding %d, want a positive multiple of 25", inWorker)
	}
}
