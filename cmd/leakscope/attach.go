package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
)

type attachOptions struct {
	captureOptions
	Pid int
}

func newAttachCmd(io ioStreams, runF func(context.Context, *attachOptions) error) *cobra.Command {
	opts := &attachOptions{}
	cmd := &cobra.Command{
		Use:   "attach --pid PID [flags]",
		Short: "Trace a running process and report what it leaked",
		Long: `attach traces a running process without restarting it. It stops at
--duration, at Ctrl-C or SIGTERM, or when the target exits, and always writes
the final report. Allocations made before attaching are not known; their
frees are counted as unknown frees.`,
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
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runAttach(cmd.Context(), opts, io)
		},
	}
	cmd.Flags().IntVarP(&opts.Pid, "pid", "p", 0, "process id to trace")
	opts.addFlags(cmd.Flags())
	return cmd
}
