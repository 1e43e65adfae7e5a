package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/leakscope/leakscope/probe"
)

type attachOptions struct {
	captureOptions
	Pid int
	// Follow (--follow) traces the processes the target starts after
	// attach; MaxProcesses (--max-processes) bounds them.
	Follow       bool
	MaxProcesses int
}

func newAttachCmd(io ioStreams, runF func(context.Context, *attachOptions) error) *cobra.Command {
	opts := &attachOptions{}
	cmd := &cobra.Command{
		Use:   "attach --pid PID [flags]",
		Short: "Trace a running process and report what it leaked",
		Long: `attach traces a running process without restarting it. It stops at
--duration, at Ctrl-C or SIGTERM, or when the target exits, and always writes
the final report. Allocations made before attaching are not known; their
frees are counted as unknown frees.

--follow traces the processes the target starts after attach too (a server
forking a worker per connection), each from its first instruction, as run
does: the kernel stops a new process until leakscope has attached to it.
Without it, the report says how many processes the target started untraced.`,
		Example: `  leakscope attach --pid 4242 --duration 5m
  leakscope attach --pid 4242 --format json -o leaks.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Pid <= 0 {
				return fmt.Errorf("--pid is required: the process id to trace")
			}
			if err := opts.validate(); err != nil {
				return err
			}
			if opts.MaxProcesses < 1 {
				return fmt.Errorf("--max-processes must be at least 1, got %d", opts.MaxProcesses)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runAttach(cmd.Context(), opts, io)
		},
	}
	cmd.Flags().IntVarP(&opts.Pid, "pid", "p", 0, "process id to trace")
	cmd.Flags().BoolVar(&opts.Follow, "follow", false, "also trace the processes the target starts after attach, and theirs")
	cmd.Flags().IntVar(&opts.MaxProcesses, "max-processes", probe.DefaultMaxProcesses, "with --follow, trace at most this many of them at once (each holds its own kernel tables, ~50 MiB)")
	opts.addFlags(cmd.Flags())
	return cmd
}
