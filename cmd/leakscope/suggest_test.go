package main

import (
	"context"
	"strings"
	"testing"
)

// A mistyped command or flag names the one meant, on one line.
func TestSuggestions(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"atach", "--pid", "1"}, `unknown command "atach" for "leakscope" (did you mean attach?)`},
		{[]string{"repot", "x.capture"}, `(did you mean report?)`},
		{[]string{"verison"}, `(did you mean version?)`},
		{[]string{"frobnicate"}, `unknown command "frobnicate" for "leakscope"`},
		{[]string{"attach", "--formt", "json"}, "unknown flag: --formt (did you mean --format?)"},
		{[]string{"run", "--intervall", "1s", "--", "true"}, "unknown flag: --intervall (did you mean --interval?)"},
		{[]string{"report", "--group", "frame", "x"}, "unknown flag: --group (did you mean --group-by?)"},
		{[]string{"run", "--max-site=3", "--", "true"}, "unknown flag: --max-site (did you mean --max-sites?)"},
		{[]string{"attach", "-format", "json"}, "in -format (did you mean --format?)"},
		{[]string{"doctor", "--memory-limt", "1MiB"}, "(did you mean --memory-limit?)"},
		{[]string{"attach", "--zzzzzz"}, "unknown flag: --zzzzzz"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			io, out, errb := streams()
			if code := execute(context.Background(), tc.args, io); code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			msg := errb.String()
			if out.Len() != 0 || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, tc.want) {
				t.Errorf("stdout %q, stderr %q, want one line with %q", out.String(), msg, tc.want)
			}
			if strings.HasSuffix(tc.want, "zzzzzz") || tc.args[0] == "frobnicate" {
				if strings.Contains(msg, "did you mean") {
					t.Errorf("suggested something for a name close to none: %q", msg)
				}
			}
		})
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"formt", "format", 1}, {"format", "format", 0}, {"pdi", "pid", 2}, {"", "abc", 3}, {"kitten", "sitting", 3}} {
		if d := editDistance(tc.a, tc.b); d != tc.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, d, tc.d)
		}
	}
}
