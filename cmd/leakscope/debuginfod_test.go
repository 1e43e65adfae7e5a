package main

import (
	"context"
	"strings"
	"testing"
)

// TestDebuginfodOption: --debuginfod wins over DEBUGINFOD_URLS, an empty one turns
// fetching off, and the cache is under $XDG_CACHE_HOME.
func TestDebuginfodOption(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", "/var/cache/test")
	for _, tc := range []struct {
		env    string
		args   []string
		want   string // URLs, "" for none
		notice string
	}{
		{"", nil, "", ""},
		{"https://debuginfod.debian.net", nil, "https://debuginfod.debian.net", ""},
		{"http://a:8002/  https://b", nil, "http://a:8002 https://b", ""},
		{"https://debuginfod.debian.net", []string{"--debuginfod", ""}, "", ""},
		{"https://debuginfod.debian.net", []string{"--debuginfod", "http://127.0.0.1:8002"}, "http://127.0.0.1:8002", ""},
		{"file:///srv/debug https://b", nil, "https://b", `ignored debuginfod URL "file:///srv/debug"`},
	} {
		t.Run(tc.env+" "+strings.Join(tc.args, " "), func(t *testing.T) {
			t.Setenv("DEBUGINFOD_URLS", tc.env)
			io, _, _ := streams()
			var got *runOptions
			cmd := newRunCmd(io, func(_ context.Context, o *runOptions) error { got = o; return nil })
			cmd.SetArgs(append(tc.args, "--", "./prog"))
			if err := cmd.Execute(); err != nil {
				t.Fatal(err)
			}
			urls := ""
			if d := got.debuginfod; d != nil {
				urls = strings.Join(d.URLs, " ")
				if d.CacheDir != "/var/cache/test/leakscope/debuginfod" {
					t.Errorf("CacheDir = %q", d.CacheDir)
				}
			}
			if urls != tc.want || !strings.Contains(got.debuginfodNote, tc.notice) || (tc.notice == "") != (got.debuginfodNote == "") {
				t.Errorf("URLs %q, notice %q; want %q, %q", urls, got.debuginfodNote, tc.want, tc.notice)
			}
		})
	}
}
