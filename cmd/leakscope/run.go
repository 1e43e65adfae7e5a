package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"
)

type runOptions struct {
	captureOptions
	Command     []string
	KeepRunning bool          // --keep-running: leave the command running at the end
	KillAfter   time.Duration // --kill-after: SIGTERM's grace before SIGKILL
}

func newRunCmd(io ioStreams, runF func(context.Context, *runOptions) error) *cobra.Command {
	opts := &runOptions{}
	cmd := &cobra.Command{
		Use:   "run [flags] -- COMMAND [ARGS...]",
		Short: "Start a command with tracing attached and report what it leaked",
		Long: `run starts COMMAND with the probes attached before its first instruction,
traces until it exits (or --duration passes, or Ctrl-C), then reports the
call stacks that still hold memory. The command's own output is passed through.

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
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runRun(cmd.Context(), opts, io)
		},
	}
	opts.addFlags(cmd.Flags())
	cmd.Flags().BoolVar(&opts.KeepRunning, "keep-running", false, "at --duration or Ctrl-C, leave the command running instead of terminating it")
	cmd.Flags().DurationVar(&opts.KillAfter, "kill-after", 5*time.Second, "when tracing ends before the command does, send SIGTERM to it and everything it started, then SIGKILL to what still runs after this long")
	return cmd
}
