package report

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/termtext"
)

// Diff writes d for a terminal: a summary line, then the fixed, new and
// changed sites, each with its kind, what it holds before and after, and
// its stack (leaf first, joined by " < "). Empty sections are left out.
// Names, kinds and command lines are sanitized as Text sanitizes them.
func Diff(w io.Writer, d *analyze.DiffResult) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "old:       %s\nnew:       %s\n", captureLine(d.Old), captureLine(d.New))
	fmt.Fprintf(&b, "summary:   %d fixed, %d new, %d changed, %d unchanged\n",
		len(d.Fixed), len(d.Added), len(d.Changed), d.Unchanged)
	section := func(title string, ds []analyze.SiteDiff, line func(analyze.SiteDiff) string) {
		if len(ds) == 0 {
			return
		}
		fmt.Fprintf(&b, "\n%s (%d):\n", title, len(ds))
		for _, sd := range ds {
			fmt.Fprintf(&b, "  %-12s %s\n", termtext.Sanitize(string(sd.Kind)), line(sd))
			fmt.Fprintf(&b, "  %-12s %s\n", "", stackLine(sd.Stack))
		}
	}
	section("fixed: held memory in old, nothing in new", d.Fixed, func(sd analyze.SiteDiff) string {
		return "was " + held(sd.Old)
	})
	section("new: holds memory only in new", d.Added, func(sd analyze.SiteDiff) string {
		return held(sd.New)
	})
	section("changed", d.Changed, func(sd analyze.SiteDiff) string {
		return fmt.Sprintf("%s%s, %+d allocations: %s -> %s",
			sign(sd.BytesDelta()), analyze.FormatBytes(uint64(absInt(sd.BytesDelta()))), sd.CountDelta(), held(sd.Old), held(sd.New))
	})
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("write diff report: %w", err)
	}
	return nil
}

func captureLine(c *analyze.Capture) string {
	s := fmt.Sprintf("pid %d", c.Target.Pid)
	if len(c.Target.Command) > 0 {
		s += ", " + termtext.Sanitize(command(c.Target.Command))
	}
	return s + fmt.Sprintf(", started %s, %s", c.StartedAt.UTC().Format("2006-01-02T15:04:05Z07:00"), analyze.FormatDuration(c.Duration))
}

func held(h analyze.Held) string {
	return fmt.Sprintf("%s in %d allocations", analyze.FormatBytes(h.Bytes), h.Count)
}

func stackLine(names []string) string {
	if len(names) == 0 {
		return "(no frames)"
	}
	return termtext.Sanitize(strings.Join(names, " < "))
}

func sign(n int64) string {
	if n < 0 {
		return "-"
	}
	return "+"
}

func absInt(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}
