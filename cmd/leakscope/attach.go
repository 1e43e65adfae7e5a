package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/leakscope/leakscope/probe"
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

func runAttach(ctx context.Context, opts *attachOptions, io ioStreams) error {
	if err := opts.checkOutputs(); err != nil {
		return err
	}
	warnf := func(f string, a ...any) { printLine(io.Err, "leakscope: warning: "+f, a...) }
	t, err := probe.Attach(opts.Pid, opts.probeOptions(ctx, warnf))
	if err != nil {
		return fmt.Errorf("attach pid %d: %w", opts.Pid, err)
	}
	c, why, err := traceLoop(ctx, t, exited(opts.Pid), nil, nil, &opts.captureOptions, io.Err)
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
