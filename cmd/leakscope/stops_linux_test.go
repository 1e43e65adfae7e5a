package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leakscope/leakscope/internal/testutil"
	"github.com/leakscope/leakscope/probe/procfs"
)

// stopTries is how many times each scenario is cut short by each signal:
// 20, ~35 s a case on this machine kind (the ten cases are most of the
// package's time), or LEAKSCOPE_STOP_TRIES for a longer hunt.
func stopTries(t *testing.T) int {
	if s := os.Getenv("LEAKSCOPE_STOP_TRIES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("LEAKSCOPE_STOP_TRIES=%q: want a count of at least 1", s)
		}
		return n
	}
	return 20
}

// Under run, the kernel stops the command at its first traced call, at
// every dlopen and dlclose and in exit(), until leakscope has updated its
// tables. leakscope killed (kill -9) or hung up (SIGHUP) at any moment of
// that must never leave the command stopped: it runs on and finishes as
// it would have (with SIGHUP, --keep-running leaves it running), or, when
// leakscope died before releasing it, never starts. Left stopped is
// stopped 3 s after leakscope is gone, or 30 s while it still runs: after
// a SIGHUP, ending the captures of a followed tree takes seconds on a
// loaded machine, and the command may wait in exit() meanwhile.
func TestKilledRunNeverLeavesTargetStopped(t *testing.T) {
	testutil.RequireBPF(t)
	java := testutil.RequireJava(t)
	leakscope, forker := buildAll(t, "forker")
	dl := filepath.Join(t.TempDir(), "dlstorm")
	if b, err := exec.Command("gcc", "-O2", "-o", dl, filepath.Join("testdata", "dlstorm.c")).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, b)
	}
	scenarios := []struct {
		name   string
		argv   []string
		want   string        // in the command's output when it finished
		window time.Duration // the signal comes at a random moment in it
	}{
		{"start-up", []string{dl, "20"}, "dlstorm: done 20", 500 * time.Millisecond},
		{"dlopen storm", []string{dl, "1500"}, "dlstorm: done 1500", 1500 * time.Millisecond},
		{"exit", []string{dl, "1", "300"}, "dlstorm: done 1", 900 * time.Millisecond},
		{"JVM start-up", []string{java, "-version"}, `version "`, 1200 * time.Millisecond},
		// Each child is stopped from its fork until leakscope has
		// attached to it, and again at its first call and exit().
		{"fork storm", []string{forker, "--children", "4"}, "failed 0", 1500 * time.Millisecond},
	}
	tries := stopTries(t)
	for _, sc := range scenarios {
		for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGHUP} {
			t.Run(sc.name+"/"+sig.String(), func(t *testing.T) {
				var mu sync.Mutex
				var ran, never int
				var wg sync.WaitGroup
				work := make(chan int)
				for range 2 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := range work {
							delay := time.Duration(rand.Int64N(int64(sc.window)))
							finished, err := cutRun(leakscope, sc.argv, sc.want, sig, delay)
							mu.Lock()
							if err != nil {
								t.Errorf("try %d, %s after %s: %v", i, sig, delay.Round(time.Millisecond), err)
							} else if finished {
								ran++
							} else {
								never++
							}
							mu.Unlock()
						}
					}()
				}
				for i := range tries {
					work <- i
				}
				close(work)
				wg.Wait()
				t.Logf("%d tries: the command finished in %d, never started in %d", tries, ran, never)
				if ran == 0 {
					t.Errorf("the command never ran: the signal always came before leakscope released it, so nothing was tested")
				}
			})
		}
	}
}

// cutRun runs argv under leakscope run, sends leakscope sig after delay,
// and waits for the command. It reports whether the command finished
// (its output holds want) and fails if the command was left stopped, did
// not finish, or leakscope did not end as it should.
func cutRun(leakscope string, argv []string, want string, sig syscall.Signal, delay time.Duration) (finished bool, err error) {
	args := []string{"run", "--progress", "never", "-o", os.DevNull}
	if sig == syscall.SIGHUP {
		args = append(args, "--keep-running")
	}
	cmd := exec.Command(leakscope, append(append(args, "--"), argv...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// Setsid: the test's terminal, if any, plays no part.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return false, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }() // returns once every writer of out, the command too, is gone
	// The delay runs from the command's start (leakscope's child has
	// exec'd it): leakscope's own start-up takes longer on a loaded
	// machine, and a signal before it would test nothing of the stops.
	awaitExec(cmd.Process.Pid, argv[0], 30*time.Second)
	time.Sleep(delay)
	targets := childrenOf(cmd.Process.Pid)
	_ = cmd.Process.Signal(sig)

	stoppedSince := map[int]time.Time{}
	var leakscopeGone time.Time // when leakscope was first seen gone
	deadline := time.After(60 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case werr := <-done:
			output := out.String()
			finished = strings.Contains(output, want)
			code := cmd.ProcessState.ExitCode()
			// A SIGHUP in leakscope's first milliseconds, before the Go
			// runtime has installed its handlers, kills it as kill -9
			// does: the command must fare the same.
			killed := cmd.ProcessState.Sys().(syscall.WaitStatus).Signaled()
			switch {
			case sig == syscall.SIGKILL && !killed:
				// leakscope had exited by itself before the kill.
				if code != 0 || !finished {
					return finished, fmt.Errorf("leakscope exited %d (%v) before the kill, output:\n%s", code, werr, output)
				}
			case sig == syscall.SIGHUP && !killed && code != 0:
				return finished, fmt.Errorf("leakscope exited %d after SIGHUP, want 0 with its report; output:\n%s", code, output)
			}
			if !finished && strings.TrimSpace(stripLeakscopeLines(output)) != "" {
				return false, fmt.Errorf("the command did not finish correctly; output:\n%s", output)
			}
			return finished, nil
		case <-tick.C:
			// Left stopped: stopped 3 s after leakscope is gone, when
			// nothing but the watchdog can continue it; or for 30 s while
			// leakscope lives (ending the captures of a tree takes
			// seconds on a loaded machine, and a process may wait in
			// exit() or for its adoption meanwhile).
			alive := leakscopeAlive(cmd.Process.Pid)
			if !alive && leakscopeGone.IsZero() {
				leakscopeGone = time.Now()
			}
			limit := 3 * time.Second
			if alive {
				limit = 30 * time.Second
			}
			for _, pid := range descendants(targets) {
				st, err := procfs.ReadStat(pid)
				if err != nil || st.State != 'T' {
					delete(stoppedSince, pid)
					continue
				}
				if _, ok := stoppedSince[pid]; !ok {
					stoppedSince[pid] = time.Now()
				}
				from := stoppedSince[pid]
				if !alive && leakscopeGone.After(from) {
					from = leakscopeGone
				}
				if time.Since(from) > limit {
					cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
					_ = syscall.Kill(pid, syscall.SIGCONT)
					state := "after leakscope exited"
					if alive {
						state = "while leakscope ran"
					}
					return false, fmt.Errorf("pid %d (%s, parent %d) left stopped for %s %s (it got %s); output:\n%s",
						pid, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}), st.PPid, limit, state, sig, out.String())
				}
			}
		case <-deadline:
			for _, pid := range descendants(targets) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			return false, fmt.Errorf("the command did not finish within 60s; output:\n%s", out.String())
		}
	}
}

// leakscopeAlive reports whether leakscope's process pid still runs (not
// gone, not a zombie waiting to be reaped).
func leakscopeAlive(pid int) bool {
	st, err := procfs.ReadStat(pid)
	return err == nil && st.State != 'Z' && st.State != 'X'
}

// awaitExec waits, up to d, until a child of pid runs the program argv0
// (a path, or a name looked up in PATH).
func awaitExec(pid int, argv0 string, d time.Duration) {
	want, err := exec.LookPath(argv0)
	if err != nil {
		return
	}
	if real, err := filepath.EvalSymlinks(want); err == nil {
		want = real
	}
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
		for _, c := range childrenOf(pid) {
			if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", c)); err == nil && exe == want {
				return
			}
		}
	}
}

// descendants lists pids and every process descended from them.
func descendants(pids []int) []int {
	children := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := procfs.ReadStat(p); err == nil {
			children[st.PPid] = append(children[st.PPid], p)
		}
	}
	out := slices.Clone(pids)
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

// childrenOf lists the children of pid's threads.
func childrenOf(pid int) []int {
	var out []int
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, e := range ents {
		data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, e.Name()))
		for _, f := range strings.Fields(string(data)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// stripLeakscopeLines drops leakscope's own lines from combined output.
func stripLeakscopeLines(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(l, "leakscope: ") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}
