package main

import (
	"context"
	"fmt"
	"os"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/probe"
	"github.com/leakscope/leakscope/report"
)

type reportOptions struct {
	captureOptions
	webOptions
	File string
}

func newReportCmd(io ioStreams, runF func(context.Context, *reportOptions) error) *cobra.Command {
	opts := &reportOptions{}
	cmd := &cobra.Command{
		Use:   "report [flags] CAPTURE",
		Short: "Render a capture saved with --save, in any format",
		Long: `report re-renders a capture written by run or attach --save, without the
target. A capture cut short (leakscope killed mid-run) renders up to its last
snapshot, with a warning.`,
		Example: `  leakscope report --format json leaks.capture
  leakscope report --format pprof -o leaks.pb.gz leaks.capture && go tool pprof -top -inuse_space leaks.pb.gz
  leakscope report --http 127.0.0.1:8080 leaks.capture     # pprof's web UI, until Ctrl-C`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.File = args[0]
			opts.Interval, opts.MaxAllocations, opts.MaxSites, opts.MaxStacks, opts.Progress = 1, 1, 1, 1, "never"
			opts.Unwind = probe.UnwindAuto
			if err := opts.validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			if opts.HTTP != "" {
				return runWeb(cmd.Context(), opts, io)
			}
			return runReport(opts, io)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&opts.Format, "format", "text", "report format: text, json, html or pprof")
	fs.StringVarP(&opts.Output, "output", "o", "", "write the report to this file (default: standard output)")
	fs.DurationVar(&opts.MinAge, "min-age", 0, "count only allocations at least this old at the end")
	fs.IntVar(&opts.Top, "top", 10, "leaks listed in the report, and stacks printed in full by the text format")
	opts.addReportFlags(fs)
	opts.addWebFlags(fs)
	return cmd
}

func readCaptureFile(path string) (*analyze.Capture, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c, err := analyze.ReadCapture(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// One collection now, while the reader's garbage (several times the
	// capture: ~200 MB for 100k sites) is most of the heap: ranking and
	// rendering then start from the capture alone, not from a heap at
	// its goal (leakscope report's peak RSS at 100k sites, 95-103 MiB,
	// is 92-93 with it; the same CPU).
	runtime.GC()
	return c, nil
}

func runReport(opts *reportOptions, io ioStreams) error {
	c, err := readCaptureFile(opts.File)
	if err != nil {
		return err
	}
	memProfile("after-read")
	return finish(c, &opts.captureOptions, io)
}

type diffOptions struct {
	Old, New string
}

func newDiffCmd(io ioStreams, runF func(context.Context, *diffOptions) error) *cobra.Command {
	opts := &diffOptions{}
	return &cobra.Command{
		Use:   "diff OLD NEW",
		Short: "Compare two captures: leaks fixed, new and changed",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Old, opts.New = args[0], args[1]
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			old, err := readCaptureFile(opts.Old)
			if err != nil {
				return err
			}
			cur, err := readCaptureFile(opts.New)
			if err != nil {
				return err
			}
			return report.Diff(io.Out, analyze.Diff(old, cur))
		},
	}
}
