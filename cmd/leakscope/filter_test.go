package main

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/testutil"
	"github.com/leakscope/leakscope/report"
)

// Bad --focus, --ignore, --kind or --group-by: one line on stderr, exit 2,
// nothing on stdout, on every command that renders a report.
func TestBadFilterFlags(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.capture") // never read: the flags fail first
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--focus", "(", "--", "true"}, "--focus \"(\": error parsing regexp: missing closing ): `(`"},
		{[]string{"attach", "--pid", "1", "--focus", "leak_[", "--duration", "1s"}, "--focus \"leak_[\": error parsing regexp: missing closing ]: `[`"},
		{[]string{"report", "--focus", "(", missing}, "--focus \"(\": error parsing regexp: missing closing ): `(`"},
		{[]string{"run", "--ignore", "a**", "--", "true"}, "--ignore \"a**\": error parsing regexp: invalid nested repetition operator: `**`"},
		{[]string{"report", "--ignore", "(?P<x", missing}, "--ignore \"(?P<x\": error parsing regexp: invalid named capture: `(?P<x`"},
		{[]string{"run", "--group-by", "function", "--", "true"}, `unknown --group-by "function": use stack or frame`},
		{[]string{"attach", "--pid", "1", "--group-by", "Frame"}, `unknown --group-by "Frame": use stack or frame`},
		{[]string{"report", "--group-by", "", missing}, `unknown --group-by "": use stack or frame`},
		{[]string{"run", "--kind", "zlib.[", "--", "true"}, `--kind "zlib.[": syntax error in pattern`},
		{[]string{"report", "--kind", "malloc", "--kind", "[", missing}, `--kind "[": syntax error in pattern`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			io, out, errb := streams()
			if code := execute(context.Background(), tc.args, io); code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			if out.Len() != 0 {
				t.Errorf("stdout = %q, want nothing", out.String())
			}
			if want := "leakscope: " + tc.want + "\n"; errb.String() != want {
				t.Errorf("stderr = %q, want %q", errb.String(), want)
			}
		})
	}
}

func TestFilterFlagsParse(t *testing.T) {
	flags := []string{"--focus", "leak_", "--ignore", "^cache_", "--kind", "malloc", "--kind", "zlib.*", "--group-by", "frame"}
	check := func(t *testing.T, o *captureOptions) {
		t.Helper()
		got := o.rankOptions(0)
		if got.Focus.String() != "leak_" || got.Ignore.String() != "^cache_" || !slices.Equal(got.Kinds, []string{"malloc", "zlib.*"}) ||
			got.GroupBy != analyze.GroupByFrame || got.Top != 0 {
			t.Errorf("rank options = %+v", got)
		}
	}
	io, _, _ := streams()
	run := newRunCmd(io, func(_ context.Context, o *runOptions) error { check(t, &o.captureOptions); return nil })
	run.SetArgs(append(flags, "--", "true"))
	attach := newAttachCmd(io, func(_ context.Context, o *attachOptions) error { check(t, &o.captureOptions); return nil })
	attach.SetArgs(append(flags, "--pid", "1"))
	rep := newReportCmd(io, func(_ context.Context, o *reportOptions) error { check(t, &o.captureOptions); return nil })
	rep.SetArgs(append(flags, "x.capture"))
	for _, cmd := range []interface{ Execute() error }{run, attach, rep} {
		if err := cmd.Execute(); err != nil {
			t.Fatal(err)
		}
	}

	// The defaults filter nothing.
	var got analyze.Options
	run = newRunCmd(io, func(_ context.Context, o *runOptions) error { got = o.rankOptions(3); return nil })
	run.SetArgs([]string{"--", "true"})
	if err := run.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.Filters() != "" || got.GroupBy != analyze.GroupByStack || got.Top != 3 {
		t.Errorf("default rank options = %+v", got)
	}
}

// writeFilterCapture saves a capture of two request paths and a cache:
// parse_header leaks through xmalloc and directly, log_line leaks, and
// cache_fill holds the most.
func writeFilterCapture(t *testing.T) string {
	t.Helper()
	const d = 10 * time.Second
	frames := func(fns ...string) analyze.Stack {
		var s analyze.Stack
		for i, fn := range fns {
			s.Frames = append(s.Frames, &analyze.Frame{Function: fn, Module: "/opt/app/server", Address: 0x401000 + uint64(i)*0x10, Offset: 0x1000 + uint64(i)*0x10})
		}
		return s
	}
	allocs := func(n int, size uint64) []analyze.Alloc {
		return slices.Repeat([]analyze.Alloc{{Size: size, Age: d}}, n)
	}
	c := &analyze.Capture{
		Target:    analyze.Target{Pid: 4242, Command: []string{"server"}, Runtime: analyze.RuntimeNative},
		StartedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Duration:  d,
		Sites: []analyze.Site{
			{ID: 1, Kind: analyze.KindMalloc, Stack: frames("xmalloc", "parse_header", "main"), LiveCount: 3, LiveBytes: 3072, Allocs: 3, Live: allocs(3, 1024)},
			{ID: 2, Kind: analyze.KindMalloc, Stack: frames("parse_header", "main"), LiveCount: 2, LiveBytes: 4096, Allocs: 2, Live: allocs(2, 2048)},
			{ID: 3, Kind: analyze.KindMalloc, Stack: frames("log_line", "main"), LiveCount: 5, LiveBytes: 500, Allocs: 5, Live: allocs(5, 100)},
			{ID: 4, Kind: analyze.KindMalloc, Stack: frames("cache_fill", "main"), LiveCount: 64, LiveBytes: 65536, Allocs: 64, Live: allocs(64, 1024)},
			{ID: 5, Kind: analyze.KindZlibInflate, Stack: frames("parse_header", "main"), LiveCount: 1, LiveBytes: 7000, Allocs: 1, Live: allocs(1, 7000)},
		},
	}
	return testutil.SaveCapture(t, filepath.Join(t.TempDir(), "filters.capture"), c)
}

// The filters shape the report, its totals and the --fail-on gate alike.
func TestReportFilters(t *testing.T) {
	capture := writeFilterCapture(t)
	type row struct {
		fn           string
		count, bytes uint64
	}
	for _, tc := range []struct {
		name   string
		args   []string
		rows   []row
		totals report.V1Totals
		reason string // a reason of rank 1
	}{
		{
			name:   "no filter",
			rows:   []row{{"cache_fill", 64, 65536}, {"parse_header", 1, 7000}, {"parse_header", 2, 4096}, {"xmalloc", 3, 3072}, {"log_line", 5, 500}},
			totals: report.V1Totals{OutstandingCount: 75, OutstandingBytes: 80204},
		},
		{
			name:   "focus",
			args:   []string{"--focus", "header"},
			rows:   []row{{"parse_header", 1, 7000}, {"parse_header", 2, 4096}, {"xmalloc", 3, 3072}},
			totals: report.V1Totals{OutstandingCount: 6, OutstandingBytes: 14168},
		},
		{
			name:   "ignore and kind",
			args:   []string{"--ignore", "^cache_", "--kind", "malloc"},
			rows:   []row{{"parse_header", 2, 4096}, {"xmalloc", 3, 3072}, {"log_line", 5, 500}},
			totals: report.V1Totals{OutstandingCount: 10, OutstandingBytes: 7668},
		},
		{
			name:   "group by frame",
			args:   []string{"--group-by", "frame", "--kind", "malloc", "--ignore", "cache"},
			rows:   []row{{"parse_header", 5, 7168}, {"log_line", 5, 500}},
			totals: report.V1Totals{OutstandingCount: 10, OutstandingBytes: 7668},
			reason: "2 stacks grouped by parse_header",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			io, out, errb := streams()
			if code := execute(context.Background(), append(append([]string{"report", "--format", "json"}, tc.args...), capture), io); code != 0 {
				t.Fatalf("exit %d: %s", code, errb.String())
			}
			r, err := parseReport(out)
			if err != nil {
				t.Fatal(err)
			}
			var rows []row
			for _, l := range r.Leaks {
				rows = append(rows, row{l.Frames[0].Function, l.OutstandingCount, l.OutstandingBytes})
			}
			if !slices.Equal(rows, tc.rows) {
				t.Errorf("rows:\n got %v\nwant %v", rows, tc.rows)
			}
			if r.Totals != tc.totals {
				t.Errorf("totals = %+v, want %+v", r.Totals, tc.totals)
			}
			if tc.reason != "" && !slices.Contains(r.Leaks[0].Reasons, tc.reason) {
				t.Errorf("rank 1 reasons %q lack %q", r.Leaks[0].Reasons, tc.reason)
			}
		})
	}

	// The gate sees what the report sees: the cache is ignored, so only
	// the request paths match, grouped as in the report.
	io, out, errb := streams()
	code := execute(context.Background(), []string{"report", "--fail-on", "bytes>1KiB", "--ignore", "^cache_", "--group-by", "frame", capture}, io)
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, errb.String())
	}
	want := `leakscope: --fail-on "bytes>1KiB" matched rank 1: malloc, 5 live, 7.0 KiB, in parse_header` + "\n" +
		`leakscope: --fail-on "bytes>1KiB" matched rank 2: zlib.inflate, 1 live, 6.8 KiB, in parse_header` + "\n"
	if errb.String() != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", errb.String(), want)
	}
	if !strings.Contains(out.String(), `filters:     ignore "^cache_", grouped by frame; totals cover only what they keep`) {
		t.Errorf("text report lacks the filters line:\n%s", out.String())
	}
	if strings.Contains(out.String(), "cache_fill") {
		t.Errorf("text report lists the ignored cache:\n%s", out.String())
	}
}
