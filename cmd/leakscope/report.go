package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/safefile"
	"github.com/leakscope/leakscope/probe"
	"github.com/leakscope/leakscope/probe/procfs"
	"github.com/leakscope/leakscope/report"
)

type reportOptions struct {
	captureOptions
	webOptions
	inputOptions
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
			opts.Interval, opts.MaxAllocations, opts.MaxSites, opts.MaxStacks, opts.Progress = minInterval, 1, 1, 1, "never"
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
			return runReport(cmd.Context(), opts, io)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&opts.Format, "format", "text", "report format: text, json, html or pprof")
	fs.StringVarP(&opts.Output, "output", "o", "", "write the report to this file (default: standard output)")
	fs.DurationVar(&opts.MinAge, "min-age", 0, "count only allocations at least this old at the end")
	fs.IntVar(&opts.Top, "top", 10, "leaks listed in the report, and stacks printed in full by the text format")
	opts.addReportFlags(fs)
	opts.addWebFlags(fs)
	opts.inputOptions.addFlags(fs)
	return cmd
}

// defaultMaxInput bounds a capture file read by report and diff: a
// capture of 1M live allocations on 100k stacks is ~100 MB.
const defaultMaxInput = "1GiB"

// inputOptions bound what report and diff read.
type inputOptions struct {
	MaxInput string // --max-input
}

func (o *inputOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.MaxInput, "max-input", defaultMaxInput, "refuse a capture file larger than this (B, KiB, MiB, GiB)")
}

func (o *inputOptions) limit() (uint64, error) {
	n, err := analyze.ParseSize(o.MaxInput)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("--max-input %q: want a positive size such as 4GiB", o.MaxInput)
	}
	return n, nil
}

// readCaptureFile reads a capture file: a regular file no larger than
// the limit (a FIFO, a device or a directory is refused without being
// read or waited on), read until ctx ends (Ctrl-C).
func readCaptureFile(ctx context.Context, path string, in inputOptions) (*analyze.Capture, error) {
	limit, err := in.limit()
	if err != nil {
		return nil, err
	}
	f, st, err := openRegular(path, "a capture file: give the file run or attach --save wrote")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if uint64(st.Size()) > limit {
		return nil, fmt.Errorf("%s is %s, more than --max-input %s: raise --max-input to read it", path, analyze.FormatBytes(uint64(st.Size())), analyze.FormatBytes(limit))
	}
	c, err := analyze.ReadCapture(&interruptible{ctx: ctx, f: f, left: int64(limit)})
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: interrupted while reading", path)
		}
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

// openRegular opens an input file the user named, refusing (with what,
// the file that was expected) anything but a regular file: it is first
// opened with O_PATH and checked (procfs.OpenFile), so a FIFO is not
// waited on and a device is never opened (opening some has effects).
func openRegular(path, what string) (*os.File, os.FileInfo, error) {
	f, err := procfs.OpenFile(nil, path, procfs.FileLimits{Owner: procfs.AnyOwner, FollowLink: true})
	if errors.Is(err, procfs.ErrUnsafeFile) {
		return nil, nil, fmt.Errorf("%s is not %s: %w", path, what, err)
	}
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, st, nil
}

// interruptible reads f until ctx ends, and no more than left bytes (a
// file that grows while it is read).
type interruptible struct {
	ctx  context.Context
	f    *os.File
	left int64
}

func (r *interruptible) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	if r.left <= 0 {
		// Exactly the limit read: the end, unless the file grew.
		var b [1]byte
		if n, _ := r.f.Read(b[:]); n == 0 {
			return 0, io.EOF
		}
		return 0, errors.New("the file grew past --max-input while it was read")
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.f.Read(p)
	r.left -= int64(n)
	return n, err
}

// Seek lets the reader decode the end record as it reads it.
func (r *interruptible) Seek(off int64, whence int) (int64, error) {
	cur, err := r.f.Seek(0, io.SeekCurrent)
	if err != nil {
		return 0, err
	}
	pos, err := r.f.Seek(off, whence)
	if err == nil {
		r.left += cur - pos
	}
	return pos, err
}

func runReport(ctx context.Context, opts *reportOptions, io ioStreams) error {
	c, err := readCaptureFile(ctx, opts.File, opts.inputOptions)
	if err != nil {
		return err
	}
	memProfile("after-read")
	return finish(c, &opts.captureOptions, io)
}

type diffOptions struct {
	inputOptions
	Old, New string
	Format   string   // --format: text or json
	Output   string   // -o
	Force    bool     // --force, as for run's outputs
	FailOn   []string // --fail-on, applied to new and grown sites
	rules    []analyze.Rule
}

func (o *diffOptions) validate() error {
	if o.Format != "text" && o.Format != "json" {
		return fmt.Errorf("unknown --format %q: diff writes text or json", o.Format)
	}
	var err error
	if o.rules, err = parseRules(o.FailOn); err != nil {
		return err
	}
	if err := analyze.CheckDiffRules(o.rules); err != nil {
		return fmt.Errorf("--fail-on: %w", err)
	}
	return nil
}

// runDiff compares the captures, writes the diff and applies the gate:
// exit 1 and one stderr line per new or grown site a rule matched.
func runDiff(ctx context.Context, opts *diffOptions, io ioStreams) error {
	old, err := readCaptureFile(ctx, opts.Old, opts.inputOptions)
	if err != nil {
		return err
	}
	cur, err := readCaptureFile(ctx, opts.New, opts.inputOptions)
	if err != nil {
		return err
	}
	if err := analyze.CheckRuleKinds(opts.rules, cur); err != nil {
		return fmt.Errorf("--fail-on: %w", err)
	}
	d := analyze.Diff(old, cur)
	matches := analyze.MatchDiffRules(d, opts.rules)
	var buf bytes.Buffer
	if opts.Format == "json" {
		err = report.DiffJSON(&buf, d, matches)
	} else {
		err = report.Diff(&buf, d)
	}
	if err != nil {
		return err
	}
	if opts.Output == "" || opts.Output == "-" {
		if _, err := io.Out.Write(buf.Bytes()); err != nil {
			return err
		}
	} else if err := safefile.WriteFile(opts.Output, buf.Bytes(), safefile.Options{Force: opts.Force}); err != nil {
		return err
	}
	for _, m := range matches {
		top := "?"
		if len(m.Site.Stack) > 0 {
			top = m.Site.Stack[0]
		}
		what := "new site"
		if m.Site.Old.Count > 0 {
			what = "grown site"
		}
		printLine(io.Err, "leakscope: --fail-on %q matched a %s: %s, %+d allocations, %+d bytes, in %s",
			m.Rule.String(), what, m.Site.Kind, m.Site.CountDelta(), m.Site.BytesDelta(), top)
	}
	if len(matches) > 0 {
		return &exitError{code: 1}
	}
	return nil
}

func newDiffCmd(io ioStreams, runF func(context.Context, *diffOptions) error) *cobra.Command {
	opts := &diffOptions{}
	cmd := &cobra.Command{
		Use:   "diff OLD NEW",
		Short: "Compare two captures: leaks fixed, new and changed",
		Long: `diff compares what two captures written by run or attach --save still held
at their end, typically of one program before and after a fix. Sites match
by kind and the function names of their stacks (addresses differ between
runs). It lists the leaks fixed (held memory in OLD, nothing in NEW), new
(held nothing in OLD) and changed (a different live count or size).

With --fail-on it is a regression gate between a baseline capture and a new
one: exit 1 when a site that is new or grew meets a rule, its count and
bytes being what it gained (count>0: any site holding more allocations than
in the baseline).`,
		Example: `  leakscope run --save before.capture -- ./server --iterations 1000
  leakscope run --save after.capture -- ./server-fixed --iterations 1000
  leakscope diff before.capture after.capture
  leakscope diff --fail-on 'bytes>64KiB' --format json -o diff.json baseline.capture new.capture`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Old, opts.New = args[0], args[1]
			if err := opts.validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runDiff(cmd.Context(), opts, io)
		},
	}
	fs := cmd.Flags()
	opts.inputOptions.addFlags(fs)
	fs.StringVar(&opts.Format, "format", "text", "diff format: text or json (schema leakscope.diff/v1)")
	fs.StringVarP(&opts.Output, "output", "o", "", "write the diff to this file (default: standard output)")
	fs.BoolVar(&opts.Force, "force", false, "write -o even through a symbolic link or over a file another user owns (the entry is replaced)")
	fs.StringArrayVar(&opts.FailOn, "fail-on", nil, "exit 1 when a new or grown site meets every condition of RULE: kind=GLOB, count>N and bytes>SIZE, applied to what the site gained (repeatable)")
	return cmd
}
