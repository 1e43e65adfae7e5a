package main

import (
	"context"

	"github.com/spf13/cobra"
)

type doctorOptions struct {
	Pid        int
	Debuginfod debuginfodOption
}

func newDoctorCmd(io ioStreams, runF func(context.Context, *doctorOptions) error) *cobra.Command {
	opts := &doctorOptions{}
	cmd := &cobra.Command{
		Use:   "doctor [--pid PID]",
		Short: "Check what will and won't work on this host and target",
		Long: `doctor checks the host (kernel BTF, privileges, uprobes, loading the BPF
programs) and, with --pid, the target: which allocator will be traced and,
for each loaded object, whether stacks can be walked through it and named
(debug info, and the debuginfod servers of --debuginfod or DEBUGINFOD_URLS).
It exits 2 when a host check fails.`,
		Example: `  leakscope doctor              # can this host trace at all?
  leakscope doctor --pid 4242   # and this process: allocator, probe sites, stacks`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runDoctor(opts, io)
		},
	}
	cmd.Flags().IntVarP(&opts.Pid, "pid", "p", 0, "also check this process")
	opts.Debuginfod.addFlag(cmd.Flags())
	return cmd
}
