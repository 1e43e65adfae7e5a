package main

import (
	"bufio"
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

// buildFakeJVM compiles leakscope and testdata/fakejvm.c with its
// libjvm.so into a directory the user nobody can read.
func buildFakeJVM(t *testing.T) (leakscope, fakejvm string) {
	t.Helper()
	testutil.RequireBPF(t)
	for _, tool := range []string{"gcc", "setpriv"} {
		if _, err := exec.LookPath(tool); err != nil {
			testutil.SkipOrFail(t, "needs "+tool)
		}
	}
	dir := publicDir(t)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	leakscope = filepath.Join(t.TempDir(), "leakscope")
	build := exec.Command("go", "build", "-o", leakscope, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	lib := filepath.Join(dir, "libjvm.so")
	fakejvm = filepath.Join(dir, "fakejvm")
	for _, args := range [][]string{
		{"-shared", "-fPIC", "-o", lib, filepath.Join("testdata", "fakelibjvm.c")},
		{"-O1", "-fno-omit-frame-pointer", "-pthread", "-o", fakejvm, filepath.Join("testdata", "fakejvm.c"), lib, "-Wl,-rpath," + dir},
	} {
		if b, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
			t.Fatalf("gcc %v: %v\n%s", args, err, b)
		}
	}
	return leakscope, fakejvm
}

// startFakeJVM runs fakejvm in mode as nobody and returns its pid once it
// allocates.
func startFakeJVM(t *testing.T, fakejvm, mode string) int {
	t.Helper()
	cmd := exec.Command("setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", fakejvm, mode)
	cmd.Dir = filepath.Dir(fakejvm)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid // setpriv execs fakejvm
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		for _, f := range []string{"/tmp/.java_pid%d", "/tmp/perf-%d.map", "/tmp/.attach_pid%d"} {
			os.Remove(fmt.Sprintf(f, pid))
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if !strings.HasPrefix(line, "ready") {
		t.Fatalf("fakejvm %s: %q, %v; stderr:\n%s", mode, line, err, stderr.String())
	}
	return pid
}

// TestAttachFakeJVM attaches to a fake JVM of another user that answers
// the attach protocol with an endless reply, with silence, or writes its
// perf map as a FIFO: leakscope ends on time, small, with its report, and
// the report's warnings say what went wrong.
func TestAttachFakeJVM(t *testing.T) {
	leakscope, fakejvm := buildFakeJVM(t)
	for _, tc := range []struct{ mode, want string }{
		{"flood", "printflag: reply exceeded 1 MiB; not asked again"},
		{"silent", "printflag: no reply within 2s; not asked again"},
		{"forge", `printflag: bad result code "\x1b]0;pwned\a\x1b[2J\r"; not asked again`},
		{"fifo", "perf map not used: open /proc/%d/root/tmp/perf-%d.map: refused: a FIFO, not a regular file"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			pid := startFakeJVM(t, fakejvm, tc.mode)
			want := tc.want
			if strings.Contains(want, "%d") {
				want = fmt.Sprintf(want, pid, pid)
			}
			out := t.TempDir()
			jsonOut, capture := filepath.Join(out, "r.json"), filepath.Join(out, "capture")
			ls := exec.Command(leakscope, "attach", "--pid", strconv.Itoa(pid), "--duration", "4s", "--malloc", "on",
				"--format", "json", "-o", jsonOut, "--save", capture)
			var stderr bytes.Buffer
			ls.Stderr = &stderr
			start := time.Now()
			if err := ls.Start(); err != nil {
				t.Fatal(err)
			}
			timer := time.AfterFunc(30*time.Second, func() { ls.Process.Kill() })
			err := ls.Wait()
			timer.Stop()
			took := time.Since(start)
			if err != nil {
				t.Fatalf("leakscope attach: %v\n%s", err, stderr.String())
			}
			if took > 7*time.Second {
				t.Errorf("leakscope attach --duration 4s took %v, want 7s at most", took.Round(time.Millisecond))
			}
			if rss := ls.ProcessState.SysUsage().(*syscall.Rusage).Maxrss; rss >= 150<<10 {
				t.Errorf("leakscope's peak RSS was %d MiB, want under 150", rss>>10)
			}
			t.Logf("took %v; stderr:\n%s", took.Round(time.Millisecond), stderr.String())
			if !strings.Contains(stderr.String(), want) {
				t.Errorf("stderr does not say %q:\n%s", want, stderr.String())
			}
			r := readReport(t, jsonOut)
			if !containsString(r.Warnings, want) {
				t.Errorf("JSON warnings do not say %q: %q", want, r.Warnings)
			}
			text, err := exec.Command(leakscope, "report", capture).CombinedOutput()
			if err != nil {
				t.Fatalf("leakscope report: %v\n%s", err, text)
			}
			if !strings.Contains(string(text), want) {
				t.Errorf("text report does not say %q:\n%s", want, text)
			}
			// What the target sent never reaches a terminal raw.
			for name, b := range map[string]string{"stderr": stderr.String(), "text report": string(text)} {
				if strings.ContainsAny(b, "\x1b\a\r") {
					t.Errorf("%s holds a raw escape, BEL or CR:\n%q", name, b)
				}
				for _, l := range strings.Split(b, "\n") {
					if strings.HasPrefix(l, "leakscope: all good") {
						t.Errorf("%s holds the forged line %q", name, l)
					}
				}
			}
		})
	}
}

// TestAttachFakeJVMInterrupt interrupts leakscope while the fake JVM keeps
// it waiting for a reply: it ends within about a second, with its report.
func TestAttachFakeJVMInterrupt(t *testing.T) {
	leakscope, fakejvm := buildFakeJVM(t)
	pid := startFakeJVM(t, fakejvm, "silent")
	jsonOut := filepath.Join(t.TempDir(), "r.json")
	ls := exec.Command(leakscope, "attach", "--pid", strconv.Itoa(pid), "--duration", "60s", "--interval", "200ms", "--malloc", "on",
		"--format", "json", "-o", jsonOut)
	var stderr bytes.Buffer
	ls.Stderr = &stderr
	if err := ls.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ls.Process.Kill() })
	done := make(chan error, 1)
	go func() { done <- ls.Wait() }()
	// The first snapshots meet the JIT frames and start the exchange,
	// which the fake JVM leaves unanswered for 2 s.
	time.Sleep(1500 * time.Millisecond)
	ls.Process.Signal(os.Interrupt)
	start := time.Now()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("leakscope attach: %v\n%s", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("leakscope did not end within 10s of SIGINT; stderr:\n%s", stderr.String())
	}
	if took := time.Since(start); took > 1500*time.Millisecond {
		t.Errorf("leakscope took %v after SIGINT, want about a second at most", took.Round(time.Millisecond))
	}
	if !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("stderr does not say interrupted:\n%s", stderr.String())
	}
	f, err := os.Open(jsonOut)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := parseReport(f); err != nil {
		t.Errorf("report after SIGINT: %v", err)
	}
}

func containsString(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
