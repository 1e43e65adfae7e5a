package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leakscope/leakscope/internal/testutil"
)

// run's exit status for every combination of the command's own ending, a
// --fail-on verdict and leakscope's errors (docs/ci.md, Exit codes); and
// how it ends a command that outlives tracing.
func TestRunExitStatusCombinations(t *testing.T) {
	testutil.RequireBPF(t)
	leakscope, _ := buildAll(t, "leaky")
	prog := filepath.Join(t.TempDir(), "exitwith")
	if b, err := exec.Command("gcc", "-O2", "-g", "-fno-omit-frame-pointer", "-o", prog, filepath.Join("testdata", "exitwith.c")).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, b)
	}
	// A marker no other process has in its command line: the processes
	// a run left behind are found by it.
	marker := strconv.Itoa(int(time.Now().UnixNano()%1e6) + 10_000_000)
	rule := "kind=malloc,count>4" // exitwith 5 leaks 5 blocks; 0 leaks none
	cases := []struct {
		name     string
		args     []string
		code     int
		stderr   string // a line of stderr must contain it
		exitCode int    // the report's target.exit_code; -1: none
		ended    string // in target.ended
	}{
		{"clean", []string{"--fail-on", rule, "--", prog, "0", "exit", "0"}, 0, "target exited", 0, ""},
		{"command fails", []string{"--fail-on", rule, "--", prog, "0", "exit", "3"}, 3, "leakscope: the command exited with code 3", 3, ""},
		{"command crashes", []string{"--", prog, "0", "signal", "11"}, 3, "leakscope: the command exited with code 139 (killed by SIGSEGV)", 139, ""},
		{"leak", []string{"--fail-on", rule, "--", prog, "5", "exit", "0"}, 1, `--fail-on "kind=malloc,count>4" matched rank 2: malloc, 5 live, 500 B, in main`, 0, ""},
		{"leak and command fails", []string{"--fail-on", rule, "--", prog, "5", "exit", "4"}, 1, "leakscope: the command exited with code 4", 4, ""},
		{"duration ends it", []string{"--duration", "1s", "--", prog, "0", "sleep", "30000"}, 0, "duration reached", 143, "terminated by leakscope at --duration"},
		{"SIGTERM ignored", []string{"--duration", "1s", "--kill-after", "1s", "--", prog, "0", "ignore-term", "sleep", "30000"}, 0, "duration reached", 137,
			"killed by leakscope at --duration, 1s after SIGTERM"},
		{"children ended too", []string{"--duration", "1s", "--", "sh", "-c", prog + " 0 sleep 3" + marker + " & " + prog + " 0 sleep 4" + marker + "; true"}, 0, "duration reached", 143,
			"terminated by leakscope at --duration; 2 other processes it started were terminated"},
		// Followed, a process the command left running is traced on
		// (a daemon): --duration ends it. Not followed, the command's
		// exit ends tracing, and its orphans with it.
		{"orphans traced until --duration", []string{"--duration", "1s", "--", "sh", "-c", prog + " 0 sleep 5" + marker + " & exit 0"}, 0, "duration reached", 0,
			"1 other processes it started were terminated"},
		{"orphans of a command that exited, --no-follow", []string{"--no-follow", "--", "sh", "-c", prog + " 0 sleep 5" + marker + " & exit 0"}, 0, "target exited", 0,
			"1 other processes it started were terminated"},
		{"leakscope error", []string{"-o", "/nonexistent-dir/r.json", "--", prog, "0", "exit", "3"}, 2, "output is not writable", -1, ""},
		{"command not found", []string{"--", "/nonexistent/prog"}, 2, "/nonexistent/prog", -1, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "r.json")
			args := append([]string{"run", "--progress", "never", "--format", "json", "-o", out}, c.args...)
			if c.exitCode < 0 {
				args = append([]string{"run", "--progress", "never"}, c.args...)
			}
			cmd := exec.Command(leakscope, args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			start := time.Now()
			_ = cmd.Run()
			took := time.Since(start)
			if got := cmd.ProcessState.ExitCode(); got != c.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", got, c.code, stderr.String())
			}
			if !strings.Contains(stderr.String(), c.stderr) {
				t.Errorf("stderr has no %q:\n%s", c.stderr, stderr.String())
			}
			if c.exitCode >= 0 {
				r := readReport(t, out)
				// The kernel stopped the command at least at its first
				// traced call; the report says how often and how long.
				if st := r.Target.Stops; st == nil || st.Count == 0 || st.LongestSeconds <= 0 || st.LongestSeconds > st.TotalSeconds {
					t.Errorf("target.stops = %+v, want the stops counted and timed", st)
				}
				if r.Target.ExitCode == nil || *r.Target.ExitCode != c.exitCode || !strings.Contains(r.Target.Ended, c.ended) ||
					(c.ended == "") != (r.Target.Ended == "") || r.Target.KeptRunning {
					t.Errorf("target %+v (exit code %v), want exit code %d, ended %q", r.Target, deref(r.Target.ExitCode), c.exitCode, c.ended)
				}
			}
			if strings.Contains(c.name, "ended") || strings.Contains(c.name, "orphans") || strings.Contains(c.name, "duration") {
				if left := processesWith(marker); len(left) > 0 {
					t.Errorf("processes left behind: %v", left)
				}
				if took > 8*time.Second {
					t.Errorf("took %s", took)
				}
			}
		})
	}

	t.Run("keep running", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "r.json")
		cmd := exec.Command(leakscope, "run", "--progress", "never", "--format", "json", "-o", out, "--duration", "1s", "--keep-running", "--", prog, "0", "sleep", "6"+marker)
		var stdout bytes.Buffer
		cmd.Stdout = &stdout
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		// leakscope ends at --duration; the command, still writing to the
		// same stdout, keeps it open, so Wait returns only after it.
		deadline := time.Now().Add(15 * time.Second)
		var left []int
		for time.Now().Before(deadline) {
			if _, err := os.Stat(out); err == nil {
				if left = processesWith(marker); len(left) > 0 {
					break
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		if len(left) != 1 {
			t.Fatalf("with --keep-running, processes running after the report: %v, want the command", left)
		}
		r := readReport(t, out)
		if r.Target.ExitCode != nil || !r.Target.KeptRunning || r.Target.Ended != "" {
			t.Errorf("target %+v", r.Target)
		}
		syscall.Kill(left[0], syscall.SIGKILL)
		<-done
	})
}

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

// processesWith lists the processes whose command line holds s.
func processesWith(s string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && bytes.Contains(b, []byte(s)) && !bytes.HasPrefix(b, []byte("sh\x00")) {
			st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if !bytes.Contains(st, []byte(") Z ")) {
				out = append(out, pid)
			}
		}
	}
	return out
}
