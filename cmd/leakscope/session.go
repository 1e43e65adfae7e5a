package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/probe"
)

// traceLoop snapshots the tracer every interval until ctx ends (Ctrl-C,
// SIGTERM), the duration passes or targetDone closes, then stops the tracer
// and returns the capture. why says which of those ended it.
func traceLoop(ctx context.Context, t *probe.Tracer, targetDone <-chan struct{}, opts *captureOptions, stderr io.Writer) (c *analyze.Capture, why string, err error) {
	prog := newProgressLine(stderr, opts.Progress)
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
			break loop
		case <-tick.C:
			p, err := t.Snapshot()
			if err != nil {
				prog.clear()
				fmt.Fprintf(stderr, "leakscope: snapshot: %v\n", err)
				continue
			}
			prog.show(t.Pid(), p)
		}
	}
	prog.clear()
	c, err = t.Stop()
	return c, why, err
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
	p.shown = true
}

func (p *progressLine) clear() {
	if p.shown {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.shown = false
	}
}
