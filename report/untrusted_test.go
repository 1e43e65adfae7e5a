package report

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/leakscope/leakscope/analyze"
)

// hostileTail is what a target can put in a name it controls: an OSC
// title, a clear screen, a C1 CSI, a bidi override, an invalid byte, and a
// CR LF that would start a forged line at column 0.
const hostileTail = "\x1b]0;pwned\x07\x1b[2J\u009b\u202e\xff\r\nleakscope: all good, no leaks"

// hostileEscaped is hostileTail as the text reports print it.
const hostileEscaped = `\x1b]0;pwned\a\x1b[2J\u009b\u202e\xff\r\nleakscope: all good, no leaks`

// hostile returns a string starting with marker, so each field's escaped
// form can be found in the output.
func hostile(marker string) string { return marker + hostileTail }

// hostileCapture holds a hostile string in every string field the text
// report and the diff print.
func hostileCapture() *analyze.Capture {
	return &analyze.Capture{
		Target: analyze.Target{
			Pid: 42, Command: []string{"/bin/app", hostile("arg")}, Runtime: analyze.RuntimeGo,
			RuntimeVersion: hostile("version"),
		},
		StartedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Duration:  time.Minute,
		Sites: []analyze.Site{
			{
				ID: 1, Kind: analyze.Kind(hostile("kind")), LiveCount: 2, LiveBytes: 64, Allocs: 2,
				Stack: analyze.Stack{
					Frames: []*analyze.Frame{
						{Address: 0x1000, Function: hostile("function"), Module: hostile("/lib/module"), Offset: 0x10, File: hostile("file.c"), Line: 7},
						{Address: 0x2000, Module: hostile("/lib/bare"), Offset: 0x20},
					},
					Truncated: hostile("truncated"),
				},
				Live: []analyze.Alloc{{Size: 32, Age: time.Second}, {Size: 32, Age: time.Second}},
			},
			{
				ID: 2, Kind: analyze.KindMalloc, LiveCount: 1, LiveBytes: 8, Allocs: 1,
				Stack: analyze.Stack{Frames: []*analyze.Frame{{Address: 0x3000, Module: hostile("/lib/top"), Offset: 0x30}}},
			},
		},
		Warnings: []string{hostile("warning")},
		Probes: &analyze.ProbeSet{
			Kinds: []string{hostile("probekind")}, MallocReason: hostile("reason"), ZlibBytes: hostile("zlibbytes"),
		},
	}
}

// checkTerminalSafe fails t when out holds anything a terminal acts on
// other than the line feeds that end its own lines, or a line that starts
// with "leakscope:".
func checkTerminalSafe(t *testing.T, what, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Errorf("%s is not valid UTF-8:\n%s", what, out)
	}
	for i, r := range out {
		if (r < 0x20 && r != '\n') || r == 0x7f || (r >= 0x80 && r <= 0x9f) || (r >= 0x202a && r <= 0x202e) {
			t.Errorf("%s: raw %U at byte %d:\n%q", what, r, i, out)
		}
	}
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, "leakscope:") {
			t.Errorf("%s: forged line %q", what, line)
		}
	}
}

func TestTextSanitizesUntrustedStrings(t *testing.T) {
	r := analyze.Rank(hostileCapture(), analyze.Options{})
	if len(r.Leaks) != 2 {
		t.Fatalf("%d leaks, want 2", len(r.Leaks))
	}
	for i := range r.Leaks {
		if r.Leaks[i].Site.ID == 1 {
			r.Leaks[i].Reasons = append(r.Leaks[i].Reasons, hostile("because"))
			r.Leaks[i].Goroutines = []analyze.GoroutineGroup{{Count: 1, State: hostile("state"), Function: hostile("goroutine")}}
		}
	}
	var b bytes.Buffer
	if err := Text(&b, r, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	checkTerminalSafe(t, "text report", out)
	for _, marker := range []string{
		"arg", "version", "kind", "function", "/lib/module", "file.c", "/lib/bare", "truncated",
		"warning", "probekind", "reason", "zlibbytes", "because", "state", "goroutine",
		"top", // the table's cell of a frame without a function: the module's base name
	} {
		if !strings.Contains(out, marker+hostileEscaped) {
			t.Errorf("text report lacks %s", marker+hostileEscaped)
		}
	}
	// The stack line of the hostile frame, whole.
	want := "  #0 function" + hostileEscaped + " (/lib/module" + hostileEscaped + "+0x10) file.c" + hostileEscaped + ":7\n"
	if !strings.Contains(out, want) {
		t.Errorf("text report lacks the line %q:\n%s", want, out)
	}
}

func TestDiffSanitizesUntrustedStrings(t *testing.T) {
	old := hostileCapture()
	cur := hostileCapture()
	cur.Sites[0].LiveCount, cur.Sites[0].LiveBytes = 3, 96
	cur.Sites = append(cur.Sites, analyze.Site{ID: 3, Kind: analyze.KindMalloc, LiveCount: 1, LiveBytes: 1,
		Stack: analyze.Stack{Frames: []*analyze.Frame{{Function: hostile("added")}, {Function: "main"}}}})
	var b bytes.Buffer
	if err := Diff(&b, analyze.Diff(old, cur)); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	checkTerminalSafe(t, "diff", out)
	for _, want := range []string{
		"arg" + hostileEscaped,
		"  kind" + hostileEscaped + " +32 B",
		"  function" + hostileEscaped + " < bare" + hostileEscaped + "+0x20",
		"  added" + hostileEscaped + " < main\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("diff lacks %q:\n%s", want, out)
		}
	}
}
