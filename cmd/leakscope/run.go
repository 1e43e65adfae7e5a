package main

import (
	"context"
	"os"

	"github.com/spf13/cobra"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/probe"
)

type runOptions struct {
	captureOptions
	Command []string
}

func newRunCmd(io ioStreams, runF func(context.Context, *runOptions) error) *cobra.Command {
	opts := &runOptions{}
	cmd := &cobra.Command{
		Use:   "run [flags] -- COMMAND [ARGS...]",
		Short: "Start a command with tracing attached and report what it leaked",
		Long: `run starts COMMAND with the probes attached before its first instruction,
traces until it exits (or --duration passes, or Ctrl-C), then reports the
call stacks that still hold memory. The command's own output is passed through.`,
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
	return cmd
}

func runRun(ctx context.Context, opts *runOptions, io ioStreams) error {
	if err := opts.checkOutputs(); err != nil {
		return err
	}
	warnf := func(f string, a ...any) { printLine(io.Err, "leakscope: warning: "+f, a...) }
	t, proc, err := probe.Launch(opts.Command, probe.Stdio{In: io.In, Out: io.Out, Err: io.Err}, opts.probeOptions(warnf))
	if err != nil {
		return err
	}
	// On Ctrl-C the terminal signals the command too; on SIGTERM, pass it on.
	stopFwd := context.AfterFunc(ctx, func() { _ = proc.Signal(os.Interrupt) })
	defer stopFwd()
	exitCode := func(c *analyze.Capture) {
		select {
		case <-proc.Done():
			code := proc.ExitCode()
			c.Target.ExitCode = &code
		default:
		}
	}
	c, why, err := traceLoop(ctx, t, proc.Done(), exitCode, &opts.captureOptions, io.Err)
	if err != nil {
		return err
	}
	printLine(io.Err, "leakscope: traced pid %d (%s), %s; %s", t.Pid(), c.Duration.Round(1e6), tracedWhat(t), why)
	return finish(c, &opts.captureOptions, io)
}
