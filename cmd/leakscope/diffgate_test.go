package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leakscope/leakscope/report"
)

// diff as a regression gate: exit 1 and one line per new or grown site a
// rule matches, 0 when nothing grew, 2 for a rule a diff cannot apply; the
// JSON form carries the same sites and matches.
func TestDiffGate(t *testing.T) {
	empty, leaky := writeTestCapture(t, "empty"), writeTestCapture(t, "leaky")
	cases := []struct {
		args   []string
		code   int
		stderr []string
	}{
		// report/testdata/captures/leaky.json holds four sites.
		{[]string{"diff", "--fail-on", "count>0", empty, leaky}, 1, []string{
			`leakscope: --fail-on "count>0" matched a new site: malloc, +100 allocations, +4400000 bytes, in cache_put`,
			`leakscope: --fail-on "count>0" matched a new site: malloc, +16 allocations, +4194304 bytes, in foo_buffer_new`,
			`leakscope: --fail-on "count>0" matched a new site: zlib.inflate, +3 allocations, +21480 bytes, in decode_chunk`,
			`leakscope: --fail-on "count>0" matched a new site: malloc, +4 allocations, +4096 bytes, in scratch_alloc`,
		}},
		{[]string{"diff", "--fail-on", "kind=malloc,bytes>4KiB", empty, leaky}, 1, []string{
			`leakscope: --fail-on "kind=malloc,bytes>4KiB" matched a new site: malloc, +100 allocations, +4400000 bytes, in cache_put`,
			`leakscope: --fail-on "kind=malloc,bytes>4KiB" matched a new site: malloc, +16 allocations, +4194304 bytes, in foo_buffer_new`,
		}},
		{[]string{"diff", "--fail-on", "count>0", leaky, leaky}, 0, nil},
		{[]string{"diff", "--fail-on", "count>0", leaky, empty}, 0, nil},
		{[]string{"diff", "--fail-on", "age>1s", empty, leaky}, 2, []string{"it takes kind, count and bytes, not age"}},
		{[]string{"diff", "--fail-on", "kind=maloc", empty, leaky}, 2, []string{"kind=maloc matches none of the kinds traced"}},
		{[]string{"diff", "--format", "xml", empty, leaky}, 2, []string{`unknown --format "xml"`}},
	}
	for _, c := range cases {
		io, _, errb := streams()
		code := execute(context.Background(), c.args, io)
		lines := strings.Split(strings.TrimSuffix(errb.String(), "\n"), "\n")
		if errb.Len() == 0 {
			lines = nil
		}
		if code != c.code || len(lines) != len(c.stderr) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %d lines", c.args, code, errb.String(), c.code, len(c.stderr))
			continue
		}
		for i, want := range c.stderr {
			if !strings.Contains(lines[i], want) {
				t.Errorf("%q: stderr line %d = %q, want %q", c.args, i, lines[i], want)
			}
		}
	}

	out := filepath.Join(t.TempDir(), "diff.json")
	io, _, errb := streams()
	if code := execute(context.Background(), []string{"diff", "--format", "json", "-o", out, "--fail-on", "bytes>4KiB", empty, leaky}, io); code != 1 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var d report.DiffV1
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	if d.Schema != report.DiffSchemaV1 || len(d.Added) != 4 || len(d.Fixed) != 0 || len(d.Changed) != 0 || len(d.Matches) != 3 ||
		d.Matches[0].Rule != "bytes>4KiB" || d.Matches[0].Site.CountDelta != 100 || d.Matches[0].Site.BytesDelta != 4400000 ||
		d.Matches[0].Site.Stack[0] != "cache_put" || d.Matches[2].Site.Kind != "zlib.inflate" {
		t.Errorf("diff JSON = %s", data)
	}
}
