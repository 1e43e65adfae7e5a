package jvm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leakscope/leakscope/internal/testutil"
	"github.com/leakscope/leakscope/probe/procfs"
)

var kafkaRecovery = filepath.Join("..", "..", "examples", "java", "KafkaRecovery.java")

// lockedBuffer collects a child's stderr while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startJVM starts the example in a JVM that waits (for a file that never
// appears) and returns once main runs, and so the JVM handles SIGQUIT.
// cred runs it as another user; dir is its working directory. A failed
// test shows the JVM's attach log.
func startJVM(t *testing.T, java, classes, dir string, cred *syscall.Credential, flags ...string) *exec.Cmd {
	t.Helper()
	never := filepath.Join(t.TempDir(), "never")
	args := append(append([]string{"-Xlog:attach=trace:stderr"}, flags...), "-cp", classes, "KafkaRecovery", "--wait-file", never,
		"--warmup", "300", "--plain", "300")
	cmd := exec.Command(java, args...)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	cmd.Stdout = &stderr
	cmd.Dir = dir
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("JVM %d's attach log and thread dumps:\n%s", pid, attachLog(stderr.String()))
		}
		// A killed JVM cannot remove its files.
		os.Remove(fmt.Sprintf("/tmp/perf-%d.map", pid))
		os.Remove(fmt.Sprintf("/tmp/.java_pid%d", pid))
	})
	// Ready once main has run: the attach commands that run Java code
	// (properties) fail in a JVM still initialising its modules.
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if strings.Contains(stderr.String(), "KafkaRecovery: warmed up") {
			if st, err := procfs.ReadStatus(pid); err != nil || !st.Catches(int(syscall.SIGQUIT)) {
				t.Fatalf("JVM %d running main does not catch SIGQUIT (%v)", pid, err)
			}
			return cmd
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("JVM %d never said it was ready; output:\n%s", pid, stderr.String())
	return nil
}

// attachLog is a JVM's attach log lines and the headers of the thread
// dumps it printed (for each SIGQUIT that did not start the listener).
func attachLog(out string) string {
	var b strings.Builder
	for line := range strings.Lines(out) {
		if strings.Contains(line, "[attach]") || strings.HasPrefix(line, "Full thread dump") {
			b.WriteString(line)
		}
	}
	return b.String()
}

func execute(t *testing.T, pid int, cmd string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := Execute(ctx, pid, cmd, args...)
	if err != nil {
		t.Fatalf("Execute(%s %v): %v", cmd, args, err)
	}
	return out
}

// noTriggerLeft checks that no .attach_pid file is left behind.
func noTriggerLeft(t *testing.T, pid int, dir string) {
	t.Helper()
	for _, d := range []string{dir, "/tmp"} {
		if _, err := os.Stat(filepath.Join(d, fmt.Sprintf(".attach_pid%d", pid))); err == nil {
			t.Errorf("trigger file left in %s", d)
		}
	}
}

func TestExecute(t *testing.T) {
	java := testutil.RequireJava(t)
	classes := testutil.JavaClasses(t, kafkaRecovery)
	dir := t.TempDir()
	cmd := startJVM(t, java, classes, dir, nil)
	pid := cmd.Process.Pid

	// A socket left by a killed JVM that had the same pid is ignored.
	stale := fmt.Sprintf("/tmp/.java_pid%d", pid)
	l, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	hourAgo := time.Now().Add(-time.Hour)
	if err := os.Chtimes(stale, hourAgo, hourAgo); err != nil {
		t.Fatal(err)
	}

	// The first command starts the attach listener.
	props := execute(t, pid, "properties")
	if !strings.Contains(props, "java.vm.version=") {
		t.Errorf("properties without java.vm.version:\n%.500s", props)
	}
	noTriggerLeft(t, pid, dir)
	if _, err := os.Stat(fmt.Sprintf("/tmp/.java_pid%d", pid)); err != nil {
		t.Errorf("no listener socket: %v", err)
	}
	if got := strings.TrimSpace(execute(t, pid, "printflag", "PreserveFramePointer")); got != "-XX:-PreserveFramePointer" {
		t.Errorf("printflag PreserveFramePointer = %q", got)
	}
	execute(t, pid, "jcmd", "Compiler.perfmap")
	f, err := os.Open(fmt.Sprintf("/tmp/perf-%d.map", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := ParsePerfMap(f)
	if err != nil {
		t.Fatal(err)
	}
	var interp, methods int
	for _, s := range m.syms {
		switch s.Kind {
		case KindInterpreter:
			interp++
		case KindMethod:
			methods++
		}
	}
	if interp != 1 || methods == 0 {
		t.Errorf("perf map of %d symbols has %d interpreters and %d methods, want 1 and some", m.Len(), interp, methods)
	}

	// A command the JVM rejects is an error that carries its message.
	_, err = Execute(context.Background(), pid, "jcmd", "No.such.command")
	if !errors.Is(err, ErrCommandFailed) || !strings.Contains(err.Error(), "No.such.command") {
		t.Errorf("unknown jcmd: %v, want ErrCommandFailed naming it", err)
	}
	if _, err := Execute(context.Background(), pid, "jcmd", "a", "b", "c", "d"); err == nil {
		t.Error("four arguments accepted")
	}
}

// TestExecuteAsJVMUser attaches to a JVM of another user: the connect runs
// on a thread with the JVM's ids, and leakscope's own ids stay root.
func TestExecuteAsJVMUser(t *testing.T) {
	java := testutil.RequireJava(t)
	if os.Geteuid() != 0 {
		testutil.SkipOrFail(t, "needs root to start a JVM as another user")
	}
	classes := testutil.JavaClasses(t, kafkaRecovery)
	dir, err := os.MkdirTemp("", "leakscope-cwd-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755) // root's; the JVM (nobody) cannot write there
	cmd := startJVM(t, java, classes, dir, &syscall.Credential{Uid: 65534, Gid: 65534})
	pid := cmd.Process.Pid

	if got := strings.TrimSpace(execute(t, pid, "printflag", "PreserveFramePointer")); got != "-XX:-PreserveFramePointer" {
		t.Errorf("printflag = %q", got)
	}
	noTriggerLeft(t, pid, dir)
	fi, err := os.Stat(fmt.Sprintf("/tmp/.java_pid%d", pid))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 65534 {
		t.Errorf("socket owned by uid %d, want 65534 (the JVM's)", st.Uid)
	}
	// Later commands reuse the listener; each connects from a thread of
	// its own, wherever the scheduler puts the goroutine (the main thread
	// included, which must never keep the JVM's ids).
	execute(t, pid, "jcmd", "Compiler.perfmap")
	for i := 0; i < 20; i++ {
		execute(t, pid, "printflag", "PreserveFramePointer")
	}

	// Every thread of this process is root again once the connecting
	// threads have exited (they do so right after handing over the
	// socket).
	deadline := time.Now().Add(2 * time.Second)
	for {
		bad := nonRootThreads(t)
		if len(bad) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("threads with other credentials: %v", bad)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func nonRootThreads(t *testing.T) []string {
	var bad []string
	tasks, _ := filepath.Glob("/proc/self/task/*/status")
	for _, p := range tasks {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread exited meanwhile
		}
		st, err := procfs.ParseStatus(b)
		if err != nil {
			t.Fatal(err)
		}
		if st.UID != [4]int{} || st.GID != [4]int{} {
			bad = append(bad, fmt.Sprintf("%s: uids %v gids %v", p, st.UID, st.GID))
		}
	}
	return bad
}

func TestExecuteNotAJVMReady(t *testing.T) {
	// sleep does not handle SIGQUIT: Execute must not send it.
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	time.Sleep(50 * time.Millisecond)
	_, err := Execute(context.Background(), cmd.Process.Pid, "properties")
	if !errors.Is(err, ErrNotReady) {
		t.Errorf("Execute on sleep: %v, want ErrNotReady", err)
	}
	if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("sleep is gone: %v", err)
	}
	noTriggerLeft(t, cmd.Process.Pid, ".")
}

func TestFindAndName(t *testing.T) {
	java := testutil.RequireJava(t)
	classes := testutil.JavaClasses(t, kafkaRecovery)
	for _, pfp := range []bool{true, false} {
		t.Run(fmt.Sprintf("PreserveFramePointer=%v", pfp), func(t *testing.T) {
			var flags []string
			if pfp {
				flags = append(flags, "-XX:+PreserveFramePointer")
			}
			cmd := startJVM(t, java, classes, t.TempDir(), nil, flags...)
			pid := cmd.Process.Pid
			maps, err := procfs.ReadMaps(pid)
			if err != nil {
				t.Fatal(err)
			}
			vm, ok := Find(pid, maps)
			if !ok {
				t.Fatal("no HotSpot JVM found")
			}
			out, _ := exec.Command(java, "-XshowSettings:properties", "-version").CombinedOutput()
			if vm.Version == "" || !bytes.Contains(out, []byte(vm.Version)) || !strings.HasSuffix(vm.LibJVM, "/libjvm.so") {
				t.Errorf("VM = %+v; java -XshowSettings says:\n%.300s", vm, out)
			}

			// Addresses to name, from a map taken now.
			execute(t, pid, "jcmd", "Compiler.perfmap")
			f, err := os.Open(fmt.Sprintf("/tmp/perf-%d.map", pid))
			if err != nil {
				t.Fatal(err)
			}
			m, err := ParsePerfMap(f)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			var method, interp Symbol
			for _, s := range m.syms {
				if s.Kind == KindMethod && method.Name == "" {
					method = s
				}
				if s.Kind == KindInterpreter {
					interp = s
				}
			}
			os.Remove(fmt.Sprintf("/tmp/perf-%d.map", pid))

			var warnings []string
			n, err := NewNamer(context.Background(), vm, func(f string, a ...any) { warnings = append(warnings, fmt.Sprintf(f, a...)) })
			if err != nil {
				t.Fatal(err)
			}
			defer n.Close()
			// The perf map alone: as for a JVM whose VMStructs cannot
			// be read.
			n.methodsOff = true
			// The namer has no map yet: the first lookup asks for one,
			// in the background, and the frame is unnamed for now.
			if got := n.Frame(method.Start+1, false); got.Name != "" || !n.Pending() {
				t.Errorf("Frame(%s) before any map = %+v (pending %v), want it unnamed and pending", method.Name, got, n.Pending())
			}
			gen := n.Generation()
			n.Retry(true) // waits for the map
			if n.Generation() == gen {
				t.Fatalf("no new perf map after Retry(true); warnings: %v", warnings)
			}
			got := n.Frame(method.Start+1, false)
			if got.Name != method.Name || got.Kind != KindMethod || got.Chained != pfp {
				t.Errorf("Frame(%s) = %+v, want it named, chained=%v", method.Name, got, pfp)
			}
			if on, known := n.PreserveFramePointer(); on != pfp || !known {
				t.Errorf("PreserveFramePointer = %v, %v; want %v, true", on, known, pfp)
			}
			if !pfp && !strings.Contains(got.Cut, "without -XX:+PreserveFramePointer") {
				t.Errorf("cut %q does not name the flag", got.Cut)
			}
			// A native method's wrapper keeps its frame, and so does the
			// interpreter.
			if got := n.Frame(method.Start+1, true); !got.Chained {
				t.Errorf("frame that called native code is not chained: %+v", got)
			}
			if got := n.Frame(interp.Start+8, false); got.Name != Interpreted || !got.Chained {
				t.Errorf("interpreter frame = %+v", got)
			}
			// An address the map does not have triggers one dump, then
			// no more: the next map did not have it either.
			before := n.attempted
			n.RefreshInterval = 0
			if got := n.Frame(8, false); got.Name != "" || got.Kind != KindUnknown {
				t.Errorf("Frame(8) = %+v", got)
			}
			if !n.attempted.After(before) {
				t.Error("a miss did not refresh the map")
			}
			n.wait(finalWait)
			again := n.attempted
			n.Frame(8, false)
			if n.attempted != again || n.Pending() {
				t.Error("a miss the last map could not name refreshed it again")
			}
			if len(warnings) > 0 {
				t.Errorf("warnings: %v", warnings)
			}
		})
	}
}

// listDir lists the names in dir.
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// withPid keeps the names that hold pid.
func withPid(names []string, pid int) []string {
	return slices.DeleteFunc(slices.Clone(names), func(n string) bool { return !strings.Contains(n, fmt.Sprint(pid)) })
}

// TestNamerRemovesWhatItMade: a frame VMStructs cannot name has the namer
// ask for a perf map through the attach protocol; the perf map and the
// listener's socket that this put in the JVM's /tmp are removed by Close,
// and the JVM still answers the attach protocol afterwards.
func TestNamerRemovesWhatItMade(t *testing.T) {
	testutil.ForEachJDK(t, func(t *testing.T, jdk testutil.JDK) {
		classes := testutil.JavaClasses(t, kafkaRecovery)
		dir := t.TempDir()
		cmd := startJVM(t, jdk.Java, classes, dir, nil)
		pid := cmd.Process.Pid
		tmp, cwd := fmt.Sprintf("/proc/%d/root/tmp", pid), fmt.Sprintf("/proc/%d/cwd", pid)
		beforeTmp, beforeCwd := listDir(t, tmp), listDir(t, cwd)
		maps, err := procfs.ReadMaps(pid)
		if err != nil {
			t.Fatal(err)
		}
		vm, ok := Find(pid, maps)
		if !ok {
			t.Fatal("no HotSpot JVM found")
		}
		n, err := NewNamer(context.Background(), vm, t.Logf)
		if err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if _, ok := n.Code(); ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("VMStructs not read within 10s")
			}
		}
		// Address 8 is in no code blob: only a perf map could name it.
		n.RefreshInterval = 0
		n.Frame(8, false)
		n.wait(finalWait)
		made := fmt.Sprintf("perf-%d.map", pid)
		if _, err := os.Stat(filepath.Join(tmp, made)); err != nil {
			t.Fatalf("no perf map after a miss: %v", err)
		}
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
		// /tmp is shared with other processes: only names with the
		// JVM's pid are its own.
		if after := listDir(t, tmp); !slices.Equal(withPid(after, pid), withPid(beforeTmp, pid)) {
			t.Errorf("JVM's /tmp after Close: %v; before: %v", withPid(after, pid), withPid(beforeTmp, pid))
		}
		if after := listDir(t, cwd); !slices.Equal(after, beforeCwd) {
			t.Errorf("JVM's working directory after Close: %v; before: %v", after, beforeCwd)
		}
		// The listener starts again for the next tool that attaches.
		if out := execute(t, pid, "jcmd", "VM.version"); !strings.Contains(out, jdk.Feature+".") {
			t.Errorf("VM.version after Close: %q", out)
		}
	})
}
