package main

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/safefile"
	"github.com/leakscope/leakscope/report"
)

// writeReport ranks the capture and renders it to opts.Output or stdout.
// A file is written whole or not at all: it is rendered in memory, written
// to a new file beside the target (mode 0600) and renamed into place
// (safefile.WriteFile).
func writeReport(c *analyze.Capture, opts *captureOptions, stdout io.Writer) (*analyze.Result, error) {
	res := analyze.Rank(c, opts.rankOptions(opts.Top))
	correlateGoroutines(res, opts)
	var buf bytes.Buffer
	var err error
	switch opts.Format {
	case "json":
		err = report.JSON(&buf, res)
	case "html":
		err = report.HTML(&buf, res)
	case "pprof":
		err = report.Pprof(&buf, res)
	default:
		err = report.Text(&buf, res, report.TextOptions{Top: opts.Top})
	}
	if err != nil {
		return nil, fmt.Errorf("render %s report: %w", opts.Format, err)
	}
	if opts.Output == "" || opts.Output == "-" {
		_, err := stdout.Write(buf.Bytes())
		return res, err
	}
	return res, safefile.WriteFile(opts.Output, buf.Bytes(), opts.outputOptions())
}

// finish writes the report, then applies the --fail-on rules to every
// leak (not only the top N) the filters keep, grouped as the report is:
// exit 1 and one stderr line per matching row.
func finish(c *analyze.Capture, opts *captureOptions, io ioStreams) error {
	if _, err := writeReport(c, opts, io.Out); err != nil {
		return err
	}
	memProfile("after-report")
	if err := writeReportDir(c, opts); err != nil {
		return err
	}
	if len(opts.rules) == 0 {
		return nil
	}
	if err := analyze.CheckRuleKinds(opts.rules, c); err != nil {
		return fmt.Errorf("--fail-on: %w", err)
	}
	all := analyze.Rank(c, opts.rankOptions(0))
	matches := analyze.MatchRules(all, opts.rules)
	for _, m := range matches {
		top := "?"
		if f := m.Leak.Site.Stack.Frames; len(f) > 0 {
			top = frameLabel(*f[0])
		}
		printLine(io.Err, "leakscope: --fail-on %q matched rank %d: %s, %d live, %s, in %s",
			m.Rule.String(), m.Leak.Rank, m.Leak.Site.Kind, m.Leak.Count, analyze.FormatBytes(m.Leak.Bytes), top)
	}
	if len(matches) > 0 {
		return &exitError{code: 1}
	}
	return nil
}

func frameLabel(f analyze.Frame) string {
	if f.Function != "" {
		return f.Function
	}
	return fmt.Sprintf("%s+0x%x", filepath.Base(f.Module), f.Offset)
}

// outputOptions say how output files are created: never through a
// symbolic link or over a file another user owns, unless --force.
func (o *captureOptions) outputOptions() safefile.Options {
	return safefile.Options{Force: o.Force}
}

// checkOutputs fails early, before a long capture, when -o, --save or
// --report-dir cannot be written.
func (o *captureOptions) checkOutputs() error {
	if err := checkOutputWritable(o.Output, o.outputOptions()); err != nil {
		return err
	}
	if o.Save != "" {
		if err := safefile.Check(o.Save, o.outputOptions()); err != nil {
			return fmt.Errorf("--save: %w", err)
		}
	}
	return checkReportDir(o.ReportDir, o.outputOptions())
}

// checkOutputWritable fails early, before a long capture, when -o cannot
// be written.
func checkOutputWritable(path string, opts safefile.Options) error {
	if path == "" || path == "-" {
		return nil
	}
	if err := safefile.Check(path, opts); err != nil {
		return fmt.Errorf("output is not writable: %w", err)
	}
	return nil
}
