package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/testutil"
)

// evilName is a symbol name a target can have: it sets the terminal's
// title, clears the screen and forges a line of leakscope's own.
const evilName = "evil\x1b]0;pwned\x07\x1b[2J\r\nleakscope: all good, no leaks"

// evilEscaped is evilName as leakscope prints it on a terminal.
const evilEscaped = `evil\x1b]0;pwned\a\x1b[2J\r\nleakscope: all good, no leaks`

// checkTerminalSafe fails t when out, what leakscope printed, holds a
// control character other than the line feeds that end its lines, or a
// forged "leakscope: all good" line.
func checkTerminalSafe(t *testing.T, what, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Errorf("%s is not valid UTF-8: %q", what, out)
	}
	for i, r := range out {
		if (r < 0x20 && r != '\n') || r == 0x7f || (r >= 0x80 && r <= 0x9f) {
			t.Errorf("%s: raw %U at byte %d: %q", what, r, i, out)
			break
		}
	}
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, "leakscope: all good") {
			t.Errorf("%s: forged line %q", what, line)
		}
	}
}

// writeEvilCapture saves a capture whose leak's top frame is evilName
// with count live allocations, which also carries evilName in its command
// line and a warning.
func writeEvilCapture(t *testing.T, dir, name string, count uint64) string {
	t.Helper()
	c := &analyze.Capture{
		Target:    analyze.Target{Pid: 4242, Command: []string{"./evil", evilName}, Runtime: analyze.RuntimeNative},
		StartedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Duration:  time.Minute,
		Sites: []analyze.Site{{
			ID: 1, Kind: analyze.KindMalloc, LiveCount: count, LiveBytes: 100 * count, Allocs: count,
			Stack: analyze.Stack{Frames: []*analyze.Frame{
				{Address: 0x401000, Function: evilName, Module: "/tmp/evil", Offset: 0x1000},
				{Address: 0x402000, Function: "main", Module: "/tmp/evil", Offset: 0x2000},
			}},
		}},
		Warnings: []string{"JVM 4242 replied " + evilName},
	}
	return testutil.SaveCapture(t, filepath.Join(dir, name), c)
}

// A capture read back with hostile names prints them escaped in the text
// report, the --fail-on lines and the diff, and exactly in JSON.
func TestReportEscapesUntrustedNames(t *testing.T) {
	dir := t.TempDir()
	old := writeEvilCapture(t, dir, "old.capture", 3)
	cur := writeEvilCapture(t, dir, "new.capture", 5)

	io, out, errb := streams()
	if code := execute(context.Background(), []string{"report", "--fail-on", "count>0", cur}, io); code != 1 {
		t.Fatalf("report --fail-on: exit %d, want 1; stderr:\n%s", code, errb.String())
	}
	checkTerminalSafe(t, "text report", out.String())
	checkTerminalSafe(t, "stderr", errb.String())
	for _, want := range []string{
		"#0 " + evilEscaped + " (/tmp/evil+0x1000)",
		"warning:     JVM 4242 replied " + evilEscaped + "\n",
		`./evil "` + evilEscaped + `"`, // quoted by the report, as an argument with a \n
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, out.String())
		}
	}
	wantErr := `leakscope: --fail-on "count>0" matched rank 1: malloc, 5 live, 500 B, in ` + evilEscaped + "\n"
	if errb.String() != wantErr {
		t.Errorf("stderr:\n%q\nwant:\n%q", errb.String(), wantErr)
	}

	io, out, errb = streams()
	if code := execute(context.Background(), []string{"diff", old, cur}, io); code != 0 {
		t.Fatalf("diff: exit %d; stderr:\n%s", code, errb.String())
	}
	checkTerminalSafe(t, "diff", out.String())
	if want := "  " + evilEscaped + " < main\n"; !strings.Contains(out.String(), want) {
		t.Errorf("diff lacks %q:\n%s", want, out.String())
	}

	io, out, errb = streams()
	if code := execute(context.Background(), []string{"report", "--format", "json", cur}, io); code != 0 {
		t.Fatalf("report --format json: exit %d; stderr:\n%s", code, errb.String())
	}
	r, err := parseReport(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Leaks) != 1 || r.Leaks[0].Frames[0].Function != evilName {
		t.Errorf("JSON report does not hold the name exactly: %+v", r.Leaks)
	}
}

// An error that quotes a hostile string (here a path) prints on one line,
// escaped.
func TestErrorEscapesUntrustedStrings(t *testing.T) {
	path := filepath.Join(t.TempDir(), evilName)
	io, out, errb := streams()
	if code := execute(context.Background(), []string{"report", path}, io); code != 2 {
		t.Fatalf("exit %d, want 2; stderr:\n%s", code, errb.String())
	}
	checkTerminalSafe(t, "stderr", errb.String())
	if out.Len() != 0 {
		t.Errorf("stdout: %q", out.String())
	}
	if !strings.Contains(errb.String(), evilEscaped+": no such file or directory\n") || strings.Count(errb.String(), "\n") != 1 {
		t.Errorf("stderr is not one escaped line: %q", errb.String())
	}
}
