package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

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
