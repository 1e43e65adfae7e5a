//go:build linux && amd64

package probe

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"github.com/leakscope/leakscope/probe/procfs"
	"github.com/leakscope/leakscope/probe/symbolize"
)

// shimArg makes the leakscope binary act as the exec shim: it waits until
// the probes are attached to its pid, then execs the command in place, so
// tracing covers the command's first instruction.
const shimArg = "__leakscope_exec_shim"

// The shim must exec from the main thread. The probes are perf events bound
// to the leader task; an exec from another thread makes that thread the
// leader and leaves the events on a dead task, so nothing would be traced.
// init runs on the main thread, and locking here keeps main there.
func init() {
	if len(os.Args) > 1 && os.Args[1] == shimArg {
		runtime.LockOSThread()
	}
}

// RunShim must be called first in main. When the process was started as the
// shim it never returns: it execs the command or exits 127. Started as the
// watchdog (watchdogArg) it never returns either.
func RunShim() {
	if len(os.Args) > 1 && os.Args[1] == watchdogArg {
		runWatchdog(os.Args[2:])
	}
	if len(os.Args) < 4 || os.Args[1] != shimArg {
		return
	}
	gate := os.NewFile(3, "gate")
	var b [1]byte
	if n, _ := gate.Read(b[:]); n != 1 {
		os.Exit(127) // leakscope went away before the probes were ready
	}
	gate.Close()
	path, argv := os.Args[2], os.Args[3:]
	err := syscall.Exec(path, argv, os.Environ())
	fmt.Fprintf(os.Stderr, "leakscope: exec %s: %v\n", path, err)
	os.Exit(127)
}

// Process is a command started by Launch.
type Process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	dog  *watchdog
	// startTicks is the command's start time (/proc/PID/stat): the
	// orphans reparented to leakscope that started later are its.
	startTicks uint64
}

// startLocked starts the command from an OS thread that stays locked, and
// so alive, until the command has exited: the parent-death signal
// (SIGCONT) must come only when leakscope itself ends.
func (p *Process) startLocked() error {
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := p.cmd.Start(); err != nil {
			started <- err
			return // the goroutine ends locked: the runtime retires the thread
		}
		if st, err := procfs.ReadStat(p.cmd.Process.Pid); err == nil {
			p.startTicks = st.StartTime
		}
		started <- nil
		p.err = p.cmd.Wait()
		close(p.done)
		runtime.UnlockOSThread()
	}()
	return <-started
}

// Done is closed when the command has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// ExitCode is the command's exit status once Done is closed: its exit code,
// or 128+signal when a signal killed it.
func (p *Process) ExitCode() int {
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return p.cmd.ProcessState.ExitCode()
}

// Signal forwards sig to the command.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Stdio is where a launched command's standard streams go.
type Stdio struct {
	In       io.Reader
	Out, Err io.Writer
}

// Launch starts argv with probes attached before its first instruction.
func Launch(argv []string, stdio Stdio, opts Options) (*Tracer, *Process, error) {
	if len(argv) == 0 {
		return nil, nil, errors.New("no command given")
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, nil, fmt.Errorf("command %q: %w", argv[0], err)
	}
	if path, err = absPath(path); err != nil {
		return nil, nil, err
	}
	env := os.Environ()
	elfPath := path
	if interp, ok := scriptInterpreter(path); ok {
		elfPath = interp
	}
	// The dynamic linker expands $ORIGIN from the real file, as maps name
	// it: /usr/bin/java is a symlink, and its libjli.so is found only
	// from /usr/lib/jvm/*/bin.
	if real, err := filepath.EvalSymlinks(elfPath); err == nil {
		elfPath = real
	}
	cache := symbolize.NewCache()
	alloc, objects, err := allocatorForExec(elfPath, env, cache, nil)
	if opts, err = withoutAllocator(opts, err); err != nil {
		return nil, nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, nil, fmt.Errorf("find leakscope's own binary: %w", err)
	}
	gateR, gateW, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("create exec gate: %w", err)
	}
	cmd := exec.Command(self, append([]string{shimArg, path}, argv...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdio.In, stdio.Out, stdio.Err
	cmd.ExtraFiles = []*os.File{gateR}
	cmd.Env = env
	// The kernel stops the command (SIGSTOP from the BPF side) until
	// leakscope has written its tables; only leakscope continues it. If
	// leakscope dies first, however it dies (kill -9 included), the kernel
	// sends the command SIGCONT: the parent-death signal, kept across the
	// shim's exec. It is sent when the thread that started the command
	// ends, so that thread stays locked until the command has exited
	// (startLocked). By then leakscope's probes are gone with its file
	// descriptors: no stop comes after the SIGCONT.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGCONT}
	if err := setSubreaper(); err != nil {
		gateR.Close()
		gateW.Close()
		return nil, nil, err
	}
	proc := &Process{cmd: cmd, done: make(chan struct{})}
	if err := proc.startLocked(); err != nil {
		gateR.Close()
		gateW.Close()
		return nil, nil, fmt.Errorf("start %s: %w", path, err)
	}
	gateR.Close()
	dog, err := startWatchdog(self, cmd.Process.Pid, proc.startTicks)
	if err != nil {
		gateW.Close() // the shim exits without running the command
		<-proc.done
		return nil, nil, err
	}
	proc.dog = dog
	go proc.reapLoop()
	topts := forTarget(opts, objects)
	var fol *follower
	if topts.Follow {
		fol = newFollower(topts) // loads alongside the command's collection
	}
	t, err := newTracer(cmd.Process.Pid, alloc, objects, cache, modeLaunch, topts)
	if err != nil {
		gateW.Close() // the shim exits without running the command
		<-proc.done
		dog.release()
		if fol != nil {
			fol.stop()
		}
		return nil, nil, err
	}
	t.watchdog = dog
	if fol != nil {
		t.mu.Lock()
		fol.root, t.tree = t, fol
		t.mu.Unlock()
		fol.waitSpare(5 * time.Second)
	}
	t.command = argv
	t.view.expectExec(elfPath)
	if _, err := gateW.Write([]byte{1}); err != nil {
		gateW.Close()
		t.close()
		return nil, nil, fmt.Errorf("release %s: %w", path, err)
	}
	gateW.Close()
	return t, proc, nil
}

func absPath(p string) (string, error) {
	if len(p) > 0 && p[0] == '/' {
		return p, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	return wd + "/" + p, nil
}
