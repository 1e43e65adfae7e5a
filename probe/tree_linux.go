//go:build linux && amd64

package probe

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leakscope/leakscope/probe/procfs"
)

// helpers are the processes leakscope itself starts while it traces (the
// dynamic linker's --list of an exec'd program, the watchdog): as children
// started after the command they would pass for its orphans.
var helpers helperSet

type helperSet struct {
	mu   sync.Mutex
	pids map[int]bool
}

func (h *helperSet) add(pid int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.pids == nil {
		h.pids = map[int]bool{}
	}
	h.pids[pid] = true
}

func (h *helperSet) remove(pid int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.pids, pid)
}

// started adds pid, returning what removes it (a Lister's Started).
func (h *helperSet) started(pid int) func() {
	h.add(pid)
	return func() { h.remove(pid) }
}

func (h *helperSet) has(pid int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pids[pid]
}

// setSubreaper makes leakscope the reaper of the command's orphans: a
// process whose parent exits (a shell that did not wait, a daemon's
// child) is reparented to leakscope rather than to init, so run still
// finds it, and ends it with the command.
func setSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("become the command's subreaper: %w", err)
	}
	return nil
}

// tree lists the processes the command started and that still run: the
// command, its descendants, and the orphans of those reparented to
// leakscope (started after the command, so not leakscope's own).
func (p *Process) tree() []int {
	stats := map[int]procfs.Stat{}
	children := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := procfs.ReadStat(pid)
		if err != nil || st.State == 'Z' || st.State == 'X' {
			continue // gone, or dead and waiting for its parent
		}
		stats[pid] = st
		children[st.PPid] = append(children[st.PPid], pid)
	}
	root := p.cmd.Process.Pid
	var todo []int
	select {
	case <-p.done:
		// Reaped: the pid may be another process's now. Its children
		// were reparented to leakscope, and are found below.
	default:
		if _, ok := stats[root]; ok {
			todo = append(todo, root)
		}
	}
	for _, c := range children[os.Getpid()] {
		if c != root && !helpers.has(c) && p.startTicks != 0 && stats[c].StartTime >= p.startTicks {
			todo = append(todo, c)
		}
	}
	var out []int
	seen := map[int]bool{}
	for len(todo) > 0 {
		pid := todo[0]
		todo = todo[1:]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		out = append(out, pid)
		todo = append(todo, children[pid]...)
	}
	return out
}

// Termination says what Terminate did.
type Termination struct {
	// Signal is the last signal sent to the command itself: SIGTERM,
	// SIGKILL, or 0 when it had exited already.
	Signal syscall.Signal
	// Others counts the other processes it started that were sent
	// SIGTERM; Killed, those of them still running after the grace,
	// sent SIGKILL.
	Others, Killed int
}

// Terminate ends the command and every process it started, as timeout(1)
// does: SIGTERM and SIGCONT (a stopped process must run to act on it),
// then SIGKILL to whatever still runs after grace.
func (p *Process) Terminate(grace time.Duration) Termination {
	var t Termination
	// signal sends sig to the tree and returns how many processes
	// besides the command it went to.
	signal := func(sig syscall.Signal) int {
		n := 0
		for _, pid := range p.tree() {
			if pid == p.cmd.Process.Pid {
				// Through exec.Cmd, which signals its own child by a
				// pidfd: never another process that took the pid.
				if p.cmd.Process.Signal(sig) == nil {
					t.Signal = sig
					if sig != syscall.SIGKILL {
						_ = p.cmd.Process.Signal(syscall.SIGCONT)
					}
				}
				continue
			}
			n++
			_ = unix.Kill(pid, sig)
			if sig != syscall.SIGKILL {
				_ = unix.Kill(pid, syscall.SIGCONT)
			}
		}
		return n
	}
	t.Others = signal(syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for {
		p.reapOrphans()
		if len(p.tree()) == 0 {
			p.waitDone()
			return t
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Killed = signal(syscall.SIGKILL)
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end) && len(p.tree()) > 0; {
		p.reapOrphans()
		time.Sleep(10 * time.Millisecond)
	}
	p.reapOrphans()
	p.waitDone()
	return t
}

// waitDone waits for exec.Cmd to have reaped the command, which has
// exited: its exit code is then known.
func (p *Process) waitDone() {
	select {
	case <-p.done:
	case <-time.After(2 * time.Second):
	}
}

// reapLoop reaps the command's exited orphans while it runs: a command
// that leaves short-lived processes behind does not fill leakscope with
// zombies. Terminate reaps those that exit after it.
func (p *Process) reapLoop() {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-p.done:
			return
		case <-tick.C:
			p.reapOrphans()
		}
	}
}

// reapOrphans waits for the orphans reparented to leakscope that have
// exited, never for the command itself (its Wait is exec.Cmd's).
func (p *Process) reapOrphans() {
	ents, _ := os.ReadDir("/proc/self/task")
	for _, e := range ents {
		data, err := os.ReadFile("/proc/self/task/" + e.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(data)) {
			pid, err := strconv.Atoi(f)
			if err != nil || pid == p.cmd.Process.Pid || helpers.has(pid) {
				continue
			}
			st, err := procfs.ReadStat(pid)
			if err != nil || st.State != 'Z' {
				continue
			}
			var ws unix.WaitStatus
			_, err = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
			if err != nil && !errors.Is(err, unix.ECHILD) {
				continue
			}
		}
	}
}
