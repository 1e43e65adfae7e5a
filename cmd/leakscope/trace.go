//go:build linux && amd64

// What needs the tracer: eBPF uprobes and a stack walker that is x86-64
// code, so Linux on amd64. trace_other.go stands in for it elsewhere.

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/safefile"
	"github.com/leakscope/leakscope/probe"
)

// traceLoop snapshots the tracer every interval until ctx ends (Ctrl-C,
// SIGTERM), the duration passes or targetDone closes, then stops the tracer
// and returns the capture. why says which of those ended it.
// ending, if not nil, runs once the loop has ended and before the tracer
// stops, while the probes still trace (run ends its command there, and
// sees the frees it makes on its way out). finalize, if not nil,
// completes the capture (the target's exit code) before it is saved.
func traceLoop(ctx context.Context, t *probe.Tracer, targetDone <-chan struct{}, ending func(why string), finalize func(*analyze.Capture), opts *captureOptions, stderr io.Writer) (c *analyze.Capture, why string, err error) {
	prog := newProgressLine(stderr, opts.Progress)
	save, err := openSave(t, opts.Save, opts.outputOptions())
	if err != nil {
		t.Stop()
		return nil, "", err
	}
	// An interrupt lets the processes waiting to be followed run on at
	// once, whatever the loop is doing.
	stopInterrupt := context.AfterFunc(ctx, t.Interrupt)
	defer stopInterrupt()
	tick := time.NewTicker(opts.Interval)
	defer tick.Stop()
	var deadline <-chan time.Time
	if opts.Duration > 0 {
		timer := time.NewTimer(opts.Duration)
		defer timer.Stop()
		deadline = timer.C
	}
loop:
	for {
		select {
		case <-ctx.Done():
			why = "interrupted"
			break loop
		case <-deadline:
			why = "duration reached"
			break loop
		case <-targetDone:
			why = "target exited"
			if ctx.Err() != nil {
				// run passes the interrupt on to its command, which
				// may exit before this loop sees the interrupt.
				why = "interrupted"
			}
			break loop
		case <-tick.C:
			p, err := t.Snapshot()
			if err != nil {
				prog.clear()
				printLine(stderr, "leakscope: snapshot: %v", err)
				continue
			}
			memProfile("snapshot")
			prog.show(t.Pid(), p)
			if err := save.snapshot(t); err != nil {
				prog.clear()
				printLine(stderr, "leakscope: %v", err)
			}
		}
	}
	prog.clear()
	if ending != nil {
		ending(why)
	}
	memProfile("before-stop")
	c, err = t.Stop()
	memProfile("after-stop")
	if err == nil {
		if finalize != nil {
			finalize(c)
		}
		err = save.close(c)
	}
	return c, why, err
}

// tracedWhat names the probe set for the closing line on stderr.
func tracedWhat(t *probe.Tracer) string {
	if t.MallocTraced() {
		return "malloc family in " + t.Allocator()
	}
	return "malloc family not traced (--malloc)"
}

// saveFile is the --save capture, appended to at every snapshot so a
// capture cut short (leakscope killed) is readable up to its last one.
type saveFile struct {
	f  *os.File
	cw *analyze.CaptureWriter
}

func openSave(t *probe.Tracer, path string, opts safefile.Options) (*saveFile, error) {
	if path == "" {
		return nil, nil
	}
	// A new file of mode 0600 replaces the entry: an existing capture
	// is never truncated in place, nor written through a link.
	f, err := safefile.Create(path, opts)
	if err != nil {
		return nil, fmt.Errorf("--save: %w", err)
	}
	cw, err := analyze.NewCaptureWriter(f, t.Header())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("--save %s: %w", path, err)
	}
	return &saveFile{f: f, cw: cw}, nil
}

func (s *saveFile) snapshot(t *probe.Tracer) error {
	if s == nil {
		return nil
	}
	sites, snap := t.LastSnapshot()
	if err := s.cw.WriteSnapshotOf(sites, snap); err != nil {
		return fmt.Errorf("--save %s: %w", s.f.Name(), err)
	}
	if m := t.LastMemory(); m != nil && m.At == snap.At {
		if err := s.cw.WriteMemory(*m); err != nil {
			return fmt.Errorf("--save %s: %w", s.f.Name(), err)
		}
	}
	return nil
}

// close writes the end record.
func (s *saveFile) close(c *analyze.Capture) error {
	if s == nil {
		return nil
	}
	err := s.cw.Close(c)
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("--save %s: %w", s.f.Name(), err)
	}
	return nil
}

// progressLine rewrites one status line on a terminal.
type progressLine struct {
	w       io.Writer
	enabled bool
	shown   bool
}

func newProgressLine(w io.Writer, mode string) *progressLine {
	enabled := mode == "always"
	if mode == "auto" {
		enabled = isTerminal(w)
	}
	return &progressLine{w: w, enabled: enabled}
}

func (p *progressLine) show(pid int, pr probe.Progress) {
	if !p.enabled {
		return
	}
	fmt.Fprintf(p.w, "\r\x1b[Kleakscope: pid %d  %s  %d live allocations  %s live  %d sites",
		pid, pr.Elapsed.Truncate(time.Second), pr.LiveCount, analyze.FormatBytes(pr.LiveBytes), pr.Sites)
	if pr.Stops.Count > 0 {
		fmt.Fprintf(p.w, "  longest stop %s", analyze.FormatDuration(pr.Stops.Longest))
	}
	p.shown = true
}

func (p *progressLine) clear() {
	if p.shown {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.shown = false
	}
}

// canTrace says that this build has the tracer (and its BPF object).
const canTrace = true

// runShim runs leakscope as run's exec shim when it was started as one
// (probe.RunShim), and returns otherwise.
func runShim() { probe.RunShim() }

func runRun(ctx context.Context, opts *runOptions, io ioStreams) error {
	if err := opts.checkOutputs(); err != nil {
		return err
	}
	warnf := func(f string, a ...any) { printLine(io.Err, "leakscope: warning: "+f, a...) }
	po := opts.probeOptions(ctx, warnf)
	po.Follow, po.MaxProcesses = !opts.NoFollow, opts.MaxProcesses
	t, proc, err := probe.Launch(opts.Command, probe.Stdio{In: io.In, Out: io.Out, Err: io.Err}, po)
	if err != nil {
		return err
	}
	// On Ctrl-C the terminal signals the command too; on SIGTERM or
	// SIGHUP, pass it on.
	stopFwd := context.AfterFunc(ctx, func() {
		if !opts.KeepRunning {
			_ = proc.Signal(os.Interrupt)
		}
	})
	defer stopFwd()
	var ended string  // Target.Ended
	var endedCmd bool // leakscope ended the command itself
	ending := func(why string) {
		if opts.KeepRunning {
			return
		}
		select {
		case <-proc.Done():
		default:
			if why == "interrupted" {
				// It had the interrupt: a moment to act on it.
				select {
				case <-proc.Done():
				case <-time.After(min(opts.KillAfter, time.Second)):
				}
			}
		}
		tm := proc.Terminate(opts.KillAfter)
		var parts []string
		switch tm.Signal {
		case syscall.SIGKILL:
			parts = append(parts, fmt.Sprintf("killed by leakscope %s, %s after SIGTERM", whyEnded(why), opts.KillAfter))
		case syscall.SIGTERM:
			parts = append(parts, "terminated by leakscope "+whyEnded(why))
		}
		endedCmd = tm.Signal != 0
		if tm.Others > 0 {
			p := fmt.Sprintf("%d other processes it started were terminated", tm.Others)
			if tm.Killed > 0 {
				p += fmt.Sprintf(" (%d killed %s after SIGTERM)", tm.Killed, opts.KillAfter)
			}
			parts = append(parts, p)
		}
		ended = strings.Join(parts, "; ")
	}
	var exitCode *int
	finalize := func(c *analyze.Capture) {
		select {
		case <-proc.Done():
			code := proc.ExitCode()
			c.Target.ExitCode = &code
			exitCode = &code
		default:
			c.Target.KeptRunning = true
		}
		c.Target.Ended = ended
	}
	c, why, err := traceLoop(ctx, t, t.TreeDone(proc.Done()), ending, finalize, &opts.captureOptions, io.Err)
	if err != nil {
		return err
	}
	printLine(io.Err, "leakscope: traced pid %d (%s), %s; %s", t.Pid(), c.Duration.Round(1e6), tracedWhat(t), why)
	err = finish(c, &opts.captureOptions, io)
	// The command failed by itself (not ended by leakscope, nor by the
	// interrupt that ended tracing): never a success.
	if exitCode != nil && *exitCode != 0 && !endedCmd && why != "interrupted" {
		failed := fmt.Errorf("the command %s", c.Target.Status())
		var ee *exitError
		if err == nil {
			return &exitError{code: 3, err: failed}
		}
		if errors.As(err, &ee) && ee.code == 1 {
			printLine(io.Err, "leakscope: %v", failed)
		}
	}
	return err
}

// whyEnded says why tracing ended before the command, for Target.Ended.
func whyEnded(why string) string {
	if why == "duration reached" {
		return "at --duration"
	}
	return "after the interrupt (Ctrl-C, SIGTERM or SIGHUP)"
}

func runAttach(ctx context.Context, opts *attachOptions, io ioStreams) error {
	if err := opts.checkOutputs(); err != nil {
		return err
	}
	warnf := func(f string, a ...any) { printLine(io.Err, "leakscope: warning: "+f, a...) }
	po := opts.probeOptions(ctx, warnf)
	po.Follow, po.MaxProcesses = opts.Follow, opts.MaxProcesses
	t, err := probe.Attach(opts.Pid, po)
	if err != nil {
		return fmt.Errorf("attach pid %d: %w", opts.Pid, err)
	}
	c, why, err := traceLoop(ctx, t, t.TreeDone(exited(opts.Pid)), nil, nil, &opts.captureOptions, io.Err)
	if err != nil {
		return err
	}
	printLine(io.Err, "leakscope: traced pid %d (%s), %s; %s", t.Pid(), c.Duration.Round(1e6), tracedWhat(t), why)
	return finish(c, &opts.captureOptions, io)
}

// exited returns a channel closed when process pid ends (pidfd readable).
func exited(pid int) <-chan struct{} {
	done := make(chan struct{})
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return done // never closes: duration or a signal ends the trace
	}
	go func() {
		defer unix.Close(fd)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			n, err := unix.Poll(fds, -1)
			if err == unix.EINTR {
				continue
			}
			if n > 0 || err != nil {
				close(done)
				return
			}
		}
	}()
	return done
}

func runDoctor(opts *doctorOptions, io ioStreams) error {
	dbg, notice, err := opts.Debuginfod.source()
	if err != nil {
		return err
	}
	if notice != "" {
		printLine(io.Err, "leakscope: warning: %s", notice)
	}
	failed := 0
	for _, c := range probe.Doctor(opts.Pid, dbg) {
		mark := "ok  "
		if !c.OK {
			mark = "FAIL"
			switch c.Name {
			case "frame pointers", "JVM", "debuginfod", "debug info", "no allocator": // stacks or names suffer, or a kind is not traced; counts do not
				mark = "note"
			default:
				failed++
			}
		}
		printLine(io.Out, "%s %-22s %s", mark, c.Name, c.Detail)
	}
	if failed > 0 {
		return &exitError{code: 2, err: fmt.Errorf("%d check(s) failed", failed)}
	}
	return nil
}
