package main

import (
	"io"

	"github.com/spf13/cobra"
)

// ioStreams are the command's standard streams, injected for tests.
type ioStreams struct {
	In       io.Reader
	Out, Err io.Writer
}

func newRootCmd(io ioStreams) *cobra.Command {
	root := &cobra.Command{
		Use:   "leakscope",
		Short: "Find native memory and resources a process never released",
		Long: `leakscope traces a process's allocator with eBPF uprobes, keeps per-stack
counts of what is still outstanding in the kernel, and ranks the call stacks
that hold on to memory.

  leakscope run -- ./server --port 8080     trace a command from its first instruction
  leakscope attach --pid 4242 --duration 5m trace a running process
  leakscope agent --select comm=java        trace every JVM, for Prometheus and pprof scrapers
  leakscope doctor --pid 4242               say what will and won't work here`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(io.In)
	root.SetOut(io.Out)
	root.SetErr(io.Err)
	root.AddCommand(newRunCmd(io, nil), newAttachCmd(io, nil), newAgentCmd(io, nil), newReportCmd(io, nil), newDiffCmd(io, nil), newDoctorCmd(io, nil))
	root.AddCommand(newVersionCmd(io), newManCmd(io))
	addVersionFlag(root)
	return root
}
