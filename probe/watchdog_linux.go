//go:build linux && amd64

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
	if len(argv) != 3 {
		os.Exit(2)
	}
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

// watchdog is a started watchdog: release tells it leakscope has
// continued the command and leaves.
type watchdog struct {
	cmd  *exec.Cmd
	gate *os.File
}

// startWatchdog starts the watchdog of the command, pid, which started at
// startTicks (/proc/PID/stat): the watchdog continues only that process.
func startWatchdog(self string, pid int, startTicks uint64) (*watchdog, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start the watchdog: %w", err)
	}
	cmd := exec.Command(self, watchdogArg, strconv.Itoa(os.Getpid()), strconv.Itoa(pid), strconv.FormatUint(startTicks, 10))
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
