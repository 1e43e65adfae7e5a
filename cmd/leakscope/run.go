package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/probe"
)

type runOptions struct {
	captureOptions
	Command     []string
	KeepRunning bool          // --keep-running: leave the command running at the end
	KillAfter   time.Duration // --kill-after: SIGTERM's grace before SIGKILL
	// NoFollow (--no-follow) traces the command's process alone;
	// MaxProcesses (--max-processes) bounds the others traced at once.
	NoFollow     bool
	MaxProcesses int
}

func newRunCmd(io ioStreams, runF func(context.Context, *runOptions) error) *cobra.Command {
	opts := &runOptions{}
	cmd := &cobra.Command{
		Use:   "run [flags] -- COMMAND [ARGS...]",
		Short: "Start a command with tracing attached and report what it leaked",
		Long: `run starts COMMAND with the probes attached before its first instruction,
traces until it exits (or --duration passes, or Ctrl-C), then reports the
call stacks that still hold memory. The command's own output is passed through.

run follows the command wherever it goes: into every program it execs (a
launch script exec'ing the real binary) and into every process it starts
(fork, vfork, posix_spawn) and theirs, each traced from its first
instruction with its own allocator; a report row names the process (PID
column) and the header lists every process traced. --no-follow traces the
command's process alone.

run owns the command: when tracing ends first (--duration, Ctrl-C, SIGTERM,
SIGHUP), the command and every process it started get SIGTERM, and SIGKILL
after --kill-after, as timeout(1) does; --keep-running leaves them running.
A command that fails by itself (a non-zero exit code, a crash) makes run exit
3 when no --fail-on rule matched (1) and leakscope had no error (2).`,
		Example: `  leakscope run -- ./bin/examples/leaky     # after make examples
  leakscope run --format json -o leaks.json -- ./server --port 8080`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Command = args
			if err := opts.validate(); err != nil {
				return err
			}
			if opts.MaxProcesses < 1 {
				return fmt.Errorf("--max-processes must be at least 1, got %d (--no-follow traces the command alone)", opts.MaxProcesses)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runRun(cmd.Context(), opts, io)
		},
	}
	opts.addFlags(cmd.Flags())
	cmd.Flags().BoolVar(&opts.NoFollow, "no-follow", false, "trace only the command's own process, not the processes it starts")
	cmd.Flags().IntVar(&opts.MaxProcesses, "max-processes", probe.DefaultMaxProcesses, "trace at most this many processes the command started at once (each holds its own kernel tables, ~50 MiB)")
	cmd.Flags().BoolVar(&opts.KeepRunning, "keep-running", false, "at --duration or Ctrl-C, leave the command running instead of terminating it")
	cmd.Flags().DurationVar(&opts.KillAfter, "kill-after", 5*time.Second, "when tracing ends before the command does, send SIGTERM to it and everything it started, then SIGKILL to what still runs after this long")
	return cmd
}

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
