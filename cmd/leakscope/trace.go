package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/safefile"
	"github.com/leakscope/leakscope/probe"
)

// traceLoop snapshots the tracer every interval until ctx ends (Ctrl-C,
// SIGTERM), the duration passes or targetDone closes, then stops the tracer
// and returns the capture. why says which of those ended it.
// ending, if not nil, runs once the loop has ended and before the tracer
// stops, while the probes still trace (run ends its command there, and
// sees the frees it makes on its way out). finalize, if not nil,
// completes the capture (the target's exit code) before it is saved.
func traceLoop(ctx context.Context, t *probe.Tracer, targetDone <-chan struct{}, ending func(why string), finalize func(*analyze.Capture), opts *captureOptions, stderr io.Writer) (c *analyze.Capture, why string, err error) {
	prog := newProgressLine(stderr, opts.Progress)
	save, err := openSave(t, opts.Save, opts.outputOptions())
	if err != nil {
		t.Stop()
		return nil, "", err
	}
	tick := time.NewTicker(opts.Interval)
	defer tick.Stop()
	var deadline <-chan time.Time
	if opts.Duration > 0 {
		timer := time.NewTimer(opts.Duration)
		defer timer.Stop()
		deadline = timer.C
	}
loop:
	for {
		select {
		case <-ctx.Done():
			why = "interrupted"
			break loop
		case <-deadline:
			why = "duration reached"
			break loop
		case <-targetDone:
			why = "target exited"
			if ctx.Err() != nil {
				// run passes the interrupt on to its command, which
				// may exit before this loop sees the interrupt.
				why = "interrupted"
			}
			break loop
		case <-tick.C:
			p, err := t.Snapshot()
			if err != nil {
				prog.clear()
				printLine(stderr, "leakscope: snapshot: %v", err)
				continue
			}
			memProfile("snapshot")
			prog.show(t.Pid(), p)
			if err := save.snapshot(t); err != nil {
				prog.clear()
				printLine(stderr, "leakscope: %v", err)
			}
		}
	}
	prog.clear()
	if ending != nil {
		ending(why)
	}
	memProfile("before-stop")
	c, err = t.Stop()
	memProfile("after-stop")
	if err == nil {
		if finalize != nil {
			finalize(c)
		}
		err = save.close(c)
	}
	return c, why, err
}

// tracedWhat names the probe set for the closing line on stderr.
func tracedWhat(t *probe.Tracer) string {
	if t.MallocTraced() {
		return "malloc family in " + t.Allocator()
	}
	return "malloc family not traced (--malloc)"
}

// saveFile is the --save capture, appended to at every snapshot so a
// capture cut short (leakscope killed) is readable up to its last one.
type saveFile struct {
	f  *os.File
	cw *analyze.CaptureWriter
}

func openSave(t *probe.Tracer, path string, opts safefile.Options) (*saveFile, error) {
	if path == "" {
		return nil, nil
	}
	// A new file of mode 0600 replaces the entry: an existing capture
	// is never truncated in place, nor written through a link.
	f, err := safefile.Create(path, opts)
	if err != nil {
		return nil, fmt.Errorf("--save: %w", err)
	}
	cw, err := analyze.NewCaptureWriter(f, t.Header())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("--save %s: %w", path, err)
	}
	return &saveFile{f: f, cw: cw}, nil
}

func (s *saveFile) snapshot(t *probe.Tracer) error {
	if s == nil {
		return nil
	}
	sites, snap := t.LastSnapshot()
	if err := s.cw.WriteSnapshotOf(sites, snap); err != nil {
		return fmt.Errorf("--save %s: %w", s.f.Name(), err)
	}
	return nil
}

// close writes the end record.
func (s *saveFile) close(c *analyze.Capture) error {
	if s == nil {
		return nil
	}
	err := s.cw.Close(c)
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("--save %s: %w", s.f.Name(), err)
	}
	return nil
}

// progressLine rewrites one status line on a terminal.
type progressLine struct {
	w       io.Writer
	enabled bool
	shown   bool
}

func newProgressLine(w io.Writer, mode string) *progressLine {
	enabled := mode == "always"
	if mode == "auto" {
		if f, ok := w.(*os.File); ok {
			_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
			enabled = err == nil
		}
	}
	return &progressLine{w: w, enabled: enabled}
}

func (p *progressLine) show(pid int, pr probe.Progress) {
	if !p.enabled {
		return
	}
	fmt.Fprintf(p.w, "\r\x1b[Kleakscope: pid %d  %s  %d live allocations  %s live  %d sites",
		pid, pr.Elapsed.Truncate(time.Second), pr.LiveCount, analyze.FormatBytes(pr.LiveBytes), pr.Sites)
	if pr.Stops.Count > 0 {
		fmt.Fprintf(p.w, "  longest stop %s", analyze.FormatDuration(pr.Stops.Longest))
	}
	p.shown = true
}

func (p *progressLine) clear() {
	if p.shown {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.shown = false
	}
}
