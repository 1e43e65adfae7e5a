package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

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

// DiffSchemaV1 identifies the JSON diff format (DiffJSON).
const DiffSchemaV1 = "leakscope.diff/v1"

// DiffV1 is the JSON form of a diff.
type DiffV1 struct {
	Schema    string        `json:"schema"`
	Old       DiffV1Capture `json:"old"`
	New       DiffV1Capture `json:"new"`
	Fixed     []DiffV1Site  `json:"fixed"`     // held memory in old, nothing in new
	Added     []DiffV1Site  `json:"new_sites"` // hold memory only in new
	Changed   []DiffV1Site  `json:"changed"`   // hold memory in both, a different count or size
	Unchanged int           `json:"unchanged"`
	Matches   []DiffV1Match `json:"fail_on_matches"` // --fail-on rules met by new or grown sites
}

// DiffV1Capture says which capture a side of the diff is.
type DiffV1Capture struct {
	Pid             int       `json:"pid"`
	Command         []string  `json:"command"`
	StartedAt       time.Time `json:"started_at"`
	DurationSeconds float64   `json:"duration_seconds"`
}

// DiffV1Site is one site on both sides: what it holds at the end of each
// capture, and the change.
type DiffV1Site struct {
	Kind       string     `json:"kind"`
	Stack      []string   `json:"stack"` // leaf first: function names, or object+offset
	Old        DiffV1Held `json:"old"`
	New        DiffV1Held `json:"new"`
	CountDelta int64      `json:"count_delta"`
	BytesDelta int64      `json:"bytes_delta"`
}

// DiffV1Held is what a site holds at the end of a capture.
type DiffV1Held struct {
	Count uint64 `json:"count"`
	Bytes uint64 `json:"bytes"`
}

// DiffV1Match is a --fail-on rule met by a site.
type DiffV1Match struct {
	Rule string     `json:"rule"`
	Site DiffV1Site `json:"site"`
}

// DiffJSON writes d, and the rule matches of its gate, as DiffV1.
func DiffJSON(w io.Writer, d *analyze.DiffResult, matches []analyze.DiffMatch) error {
	side := func(c *analyze.Capture) DiffV1Capture {
		return DiffV1Capture{Pid: c.Target.Pid, Command: nonNil(c.Target.Command), StartedAt: c.StartedAt, DurationSeconds: c.Duration.Seconds()}
	}
	site := func(sd analyze.SiteDiff) DiffV1Site {
		return DiffV1Site{Kind: string(sd.Kind), Stack: nonNil(sd.Stack), Old: DiffV1Held(sd.Old), New: DiffV1Held(sd.New),
			CountDelta: sd.CountDelta(), BytesDelta: sd.BytesDelta()}
	}
	sites := func(ds []analyze.SiteDiff) []DiffV1Site {
		out := make([]DiffV1Site, 0, len(ds))
		for _, sd := range ds {
			out = append(out, site(sd))
		}
		return out
	}
	v := DiffV1{Schema: DiffSchemaV1, Old: side(d.Old), New: side(d.New), Fixed: sites(d.Fixed), Added: sites(d.Added),
		Changed: sites(d.Changed), Unchanged: d.Unchanged, Matches: []DiffV1Match{}}
	for _, m := range matches {
		v.Matches = append(v.Matches, DiffV1Match{Rule: m.Rule.String(), Site: site(*m.Site)})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write diff report: %w", err)
	}
	return nil
}
