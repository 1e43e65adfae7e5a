package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/report"
)

// writeReport ranks the capture and renders it to opts.Output or stdout.
// A file is written whole or not at all: it is rendered in memory, written
// to a temporary file beside the target (mode 0600) and renamed into place.
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
	return res, writeFileAtomic(opts.Output, buf.Bytes())
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

// writeFileAtomic writes data to path whole or not at all, mode 0600,
// through a temporary file beside it renamed into place.
// An existing path that is not a regular file (/dev/null, /dev/stdout, a
// pipe) is written in place: renaming over it would replace the device
// with a file. A symbolic link is followed, so the link stays.
func writeFileAtomic(path string, data []byte) error {
	if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() {
		return writeInPlace(path, data)
	}
	path = followLinks(path)
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// followLinks resolves symbolic links in the last element of path, also
// a link to a file that does not exist yet.
func followLinks(path string) string {
	for range 40 {
		st, err := os.Lstat(path)
		if err != nil || st.Mode()&os.ModeSymlink == 0 {
			return path
		}
		target, err := os.Readlink(path)
		if err != nil {
			return path
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(path), target)
		}
		path = target
	}
	return path
}

// writeInPlace writes data to an existing file that is not a regular one.
func writeInPlace(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// checkOutputWritable fails early, before a long capture, when -o cannot
// be written.
func checkOutputWritable(path string) error {
	if path == "" || path == "-" {
		return nil
	}
	if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() {
		// Opening a pipe here would wait for its reader.
		if err := unix.Access(path, unix.W_OK); err != nil {
			return fmt.Errorf("output %s is not writable: %w", path, err)
		}
		return nil
	}
	dir := filepath.Dir(followLinks(path))
	f, err := os.CreateTemp(dir, ".leakscope-check-*")
	if err != nil {
		return fmt.Errorf("output %s is not writable: %w", path, err)
	}
	f.Close()
	return os.Remove(f.Name())
}
