package probe

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
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
// command's. Fd 3 is a pipe from leakscope: a byte on it says leakscope
// has continued the command and released its probes, so the watchdog
// leaves quietly; end of file without it says leakscope died.
func runWatchdog(argv []string) {
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGPIPE)
	_, _ = unix.Setsid() // away from the terminal's signals and hang-up
	if len(argv) != 2 {
		os.Exit(2)
	}
	owner, err1 := strconv.Atoi(argv[0])
	target, err2 := strconv.Atoi(argv[1])
	if err1 != nil || err2 != nil {
		os.Exit(2)
	}
	ownerFD, err := unix.PidfdOpen(owner, 0)
	if err != nil || os.Getppid() != owner {
		ownerFD = -1 // leakscope is gone already
	}
	targetFD, err := unix.PidfdOpen(target, 0)
	if err != nil {
		os.Exit(0) // the command is gone: nothing to continue
	}
	// The command is leakscope's child: had leakscope died and the
	// command been reaped, the pid would have no process or another
	// parent.
	if ownerFD >= 0 {
		if ppid := parentOf(target); ppid != owner && ppid != 0 {
			os.Exit(0)
		}
	}
	gate := os.NewFile(3, "watchdog")
	released := make(chan bool, 1)
	go func() {
		var b [1]byte
		n, _ := gate.Read(b[:])
		released <- n == 1
	}()
	for {
		select {
		case ok := <-released:
			if ok {
				os.Exit(0)
			}
			released = nil // died: wait for its last thread below
		default:
		}
		fds := []unix.PollFd{{Fd: int32(targetFD), Events: unix.POLLIN}}
		if ownerFD >= 0 {
			fds = append(fds, unix.PollFd{Fd: int32(ownerFD), Events: unix.POLLIN})
		}
		n, err := unix.Poll(fds, 100)
		if err != nil && !errors.Is(err, unix.EINTR) {
			break
		}
		if n > 0 && fds[0].Revents != 0 {
			os.Exit(0) // the command exited
		}
		if ownerFD < 0 || n > 0 && fds[1].Revents != 0 {
			break // every thread of leakscope has exited: its probes are gone
		}
	}
	// A stop sent just before the last probe went is delivered by now;
	// continue a few times in case one was still on its way.
	for range 3 {
		_ = unix.PidfdSendSignal(targetFD, unix.SIGCONT, nil, 0)
		time.Sleep(20 * time.Millisecond)
	}
	os.Exit(0)
}

// parentOf is pid's parent, 0 when it cannot be read.
func parentOf(pid int) int {
	st, err := procfs.ReadStat(pid)
	if err != nil {
		return 0
	}
	return st.PPid
}

// watchdog is a started watchdog: release tells it leakscope has
// continued the command and leaves.
type watchdog struct {
	cmd  *exec.Cmd
	gate *os.File
}

// startWatchdog starts the watchdog of the command, pid.
func startWatchdog(self string, pid int) (*watchdog, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start the watchdog: %w", err)
	}
	cmd := exec.Command(self, watchdogArg, strconv.Itoa(os.Getpid()), strconv.Itoa(pid))
	cmd.ExtraFiles = []*os.File{r}
	cmd.Env = []string{}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("start the watchdog: %w", err)
	}
	r.Close()
	go cmd.Wait() //nolint:errcheck // reaped; its status says nothing
	return &watchdog{cmd: cmd, gate: w}, nil
}

// release tells the watchdog that leakscope has continued the command
// and its probes are closed: it leaves without signalling.
func (w *watchdog) release() {
	if w == nil || w.gate == nil {
		return
	}
	_, _ = w.gate.Write([]byte{1})
	w.gate.Close()
	w.gate = nil
}

// pid is the watchdog's pid, 0 if none.
func (w *watchdog) pid() int {
	if w == nil {
		return 0
	}
	return w.cmd.Process.Pid
}
