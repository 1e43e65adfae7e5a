//go:build linux && amd64

package probe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leakscope/leakscope/probe/procfs"
)

// watchdogArg makes the leakscope binary act as the watchdog of a launched
// command: a process of its own that outlives leakscope and continues the
// command (SIGCONT) once leakscope has died, however it died. The BPF side
// stops the command (SIGSTOP) and only leakscope continues it; the
// parent-death signal alone is not enough, because it comes when the
// thread that started the command ends, while leakscope's other threads
// may still hold the probes that stop it again.
const watchdogArg = "__leakscope_watchdog"

// runWatchdog is the watchdog's main: argv is leakscope's pid and the
// command's. Fd 3 is a pipe from leakscope: a release record on it says
// leakscope has continued the command (and every process it followed)
// and released its probes, so the watchdog leaves quietly; end of file
// without it says leakscope died. A follow record names a process the
// command started that the kernel stopped for leakscope: it is continued
// too. So is every stopped descendant of the command and of those: the
// kernel stops a new process before leakscope has heard of it.
func runWatchdog(argv []string) {
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGPIPE)
	if len(argv) != 4 {
		os.Exit(2)
	}
	// "run": the command itself may be stopped; "attach": only the
	// processes it started after attach can be.
	continueTarget := argv[3] == "run"
	owner, err1 := strconv.Atoi(argv[0])
	target, err2 := strconv.Atoi(argv[1])
	startTicks, err3 := strconv.ParseUint(argv[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		os.Exit(2)
	}
	ownerFD, err := unix.PidfdOpen(owner, 0)
	if err == nil && os.Getppid() != owner {
		unix.Close(ownerFD)
		err = unix.ESRCH
	}
	if err != nil {
		ownerFD = -1 // leakscope is gone already
	}
	targetFD, err := unix.PidfdOpen(target, 0)
	if err != nil {
		os.Exit(0) // the command is gone: nothing to continue
	}
	// Only the command itself: the process with its pid that started
	// when it did (a pid is reused only after its process was reaped).
	if st, err := procfs.ReadStat(target); err != nil || st.StartTime != startTicks {
		os.Exit(0)
	}
	// The descendants leakscope may have stopped started after the
	// command did (run), or after the watchdog did (attach).
	since := startTicks
	if !continueTarget {
		if st, err := procfs.ReadStat(os.Getpid()); err == nil {
			since = st.StartTime
		}
	}
	gate := os.NewFile(3, "watchdog")
	released := make(chan bool, 1)
	var mu sync.Mutex
	var follows []int // pidfds of the followed processes
	go func() {
		for {
			var rec [5]byte
			if _, err := io.ReadFull(gate, rec[:1]); err != nil {
				released <- false
				return
			}
			switch rec[0] {
			case gateRelease:
				released <- true
				return
			case gateFollow:
				if _, err := io.ReadFull(gate, rec[1:]); err != nil {
					released <- false
					return
				}
				pid := int(binary.LittleEndian.Uint32(rec[1:]))
				if fd, err := unix.PidfdOpen(pid, 0); err == nil {
					mu.Lock()
					follows = append(follows, fd)
					mu.Unlock()
				}
			default:
				released <- false
				return
			}
		}
	}()
	targetGone := false
	for {
		select {
		case ok := <-released:
			if ok {
				os.Exit(0)
			}
			released = nil // died: wait for its last thread below
		default:
		}
		var fds []unix.PollFd
		if ownerFD >= 0 {
			fds = append(fds, unix.PollFd{Fd: int32(ownerFD), Events: unix.POLLIN})
		}
		if !targetGone {
			fds = append(fds, unix.PollFd{Fd: int32(targetFD), Events: unix.POLLIN})
		}
		n, err := unix.Poll(fds, 100)
		if err != nil && !errors.Is(err, unix.EINTR) {
			break
		}
		if ownerFD < 0 || n > 0 && fds[0].Revents != 0 {
			break // every thread of leakscope has exited: its probes are gone
		}
		if n > 0 && !targetGone && fds[len(fds)-1].Revents != 0 {
			// The command exited; the processes it started may still
			// be traced, and stopped.
			targetGone = true
		}
	}
	// A stop sent just before the last probe went is delivered by now;
	// continue a few times in case one was still on its way.
	for range 3 {
		if !targetGone && continueTarget {
			_ = unix.PidfdSendSignal(targetFD, unix.SIGCONT, nil, 0)
		}
		mu.Lock()
		for _, fd := range follows {
			_ = unix.PidfdSendSignal(fd, unix.SIGCONT, nil, 0)
		}
		mu.Unlock()
		continueStoppedDescendants(target, since)
		time.Sleep(20 * time.Millisecond)
	}
	os.Exit(0)
}

// Records on the watchdog's pipe.
const (
	gateRelease = 1 // leakscope continued everything and let go
	gateFollow  = 2 // then a little-endian uint32 pid: continue it too
)

// continueStoppedDescendants continues every stopped process descended
// from the command (pid, started at startTicks) that started after it:
// one the kernel stopped for leakscope before leakscope could name it to
// the watchdog.
func continueStoppedDescendants(pid int, startTicks uint64) {
	children := map[int][]int{}
	stats := map[int]procfs.Stat{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := procfs.ReadStat(p)
		if err != nil {
			continue
		}
		stats[p] = st
		children[st.PPid] = append(children[st.PPid], p)
	}
	todo := slices.Clone(children[pid])
	seen := map[int]bool{}
	for len(todo) > 0 {
		p := todo[0]
		todo = todo[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		todo = append(todo, children[p]...)
		if st := stats[p]; st.State == 'T' && st.StartTime >= startTicks {
			_ = unix.Kill(p, unix.SIGCONT)
		}
	}
}

// watchdog is a started watchdog: release tells it leakscope has
// continued the command and leaves.
type watchdog struct {
	cmd  *exec.Cmd
	mu   sync.Mutex // guards gate
	gate *os.File
	// target and since: the command, and the start (clock ticks after
	// boot) after which the processes of its tree leakscope may have
	// stopped began (sweep).
	target int
	since  uint64
}

// startWatchdog starts the watchdog of the command, pid, which started at
// startTicks (/proc/PID/stat): the watchdog continues only that process
// and the processes of its tree leakscope may have stopped.
func startWatchdog(self string, pid int, startTicks uint64) (*watchdog, error) {
	return startWatchdogFor(self, pid, startTicks, true)
}

// startWatchdogFor is startWatchdog; continueTarget false (attach) leaves
// the target itself alone: leakscope never stops it.
func startWatchdogFor(self string, pid int, startTicks uint64, continueTarget bool) (*watchdog, error) {
	mode := "run"
	if !continueTarget {
		mode = "attach"
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start the watchdog: %w", err)
	}
	cmd := exec.Command(self, watchdogArg, strconv.Itoa(os.Getpid()), strconv.Itoa(pid), strconv.FormatUint(startTicks, 10), mode)
	cmd.ExtraFiles = []*os.File{r}
	cmd.Env = []string{}
	// Detached from the terminal (setsid) from its first instruction: a
	// Ctrl-C or a hang-up of leakscope's terminal never reaches it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("start the watchdog: %w", err)
	}
	r.Close()
	helpers.add(cmd.Process.Pid)
	go func() {
		_ = cmd.Wait() // reaped here; its status says nothing
		helpers.remove(cmd.Process.Pid)
	}()
	since := startTicks
	if !continueTarget {
		if st, err := procfs.ReadStat(cmd.Process.Pid); err == nil {
			since = st.StartTime
		}
	}
	return &watchdog{cmd: cmd, gate: w, target: pid, since: since}, nil
}

// release tells the watchdog that leakscope has continued the command
// and its probes are closed: it leaves without signalling.
func (w *watchdog) release() {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gate == nil {
		return
	}
	_, _ = w.gate.Write([]byte{gateRelease})
	w.gate.Close()
	w.gate = nil
}

// sweep continues the stopped processes of the command's tree started
// after it (after attach, for attach), as the watchdog would if leakscope
// died: called once every probe is gone, it catches a process the kernel
// stopped as the probes went, whose record came too late to be read.
func (w *watchdog) sweep() {
	if w == nil {
		return
	}
	continueStoppedDescendants(w.target, w.since)
	// Run's orphans: leakscope is the command's subreaper.
	continueStoppedDescendants(os.Getpid(), w.since)
}

// follow tells the watchdog to continue pid too if leakscope dies: a
// process of the command's tree the kernel stopped for leakscope.
func (w *watchdog) follow(pid int) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gate == nil {
		return
	}
	rec := [5]byte{gateFollow}
	binary.LittleEndian.PutUint32(rec[1:], uint32(pid))
	_, _ = w.gate.Write(rec[:])
}
