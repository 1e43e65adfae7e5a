package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leakscope/leakscope/analyze"
)

func TestGoroutineURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:6060":                                  "http://127.0.0.1:6060/debug/pprof/goroutine?debug=2",
		"http://127.0.0.1:6060/":                                 "http://127.0.0.1:6060/debug/pprof/goroutine?debug=2",
		"http://h:1/debug/pprof/goroutine":                       "http://h:1/debug/pprof/goroutine?debug=2",
		"https://h/custom/dump?debug=2":                          "https://h/custom/dump?debug=2",
		"http://h:1/debug/pprof/goroutine?debug=1":               "http://h:1/debug/pprof/goroutine?debug=1",
		"http://h:1/debug/pprof/goroutine?seconds=1&debug=2&x=y": "http://h:1/debug/pprof/goroutine?seconds=1&debug=2&x=y",
	} {
		if got, err := goroutineURL(in); err != nil || got != want {
			t.Errorf("goroutineURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := goroutineURL("http://"); err == nil {
		t.Error("goroutineURL(http://) gave no error")
	}
}

func fixtureDump(t *testing.T) string {
	t.Helper()
	return filepath.Join("..", "..", "testdata", "goroutines", "zgoroutines.txt")
}

// zlibLeakResult is a ranked capture with one leak through the decoders of
// testdata/goroutines/zgoroutines.txt.
func zlibLeakResult() *analyze.Result {
	c := &analyze.Capture{Target: analyze.Target{Runtime: analyze.RuntimeGo}, Sites: []analyze.Site{{
		ID: 1, Kind: analyze.KindZlibInflate, LiveCount: 12, LiveBytes: 12 * 7160, Allocs: 12,
		Stack: analyze.Stack{Frames: []*analyze.Frame{
			{Function: "open_inflater"}, {Function: "runtime.asmcgocall"}, {Function: "runtime.cgocall"},
			{Function: "main._Cfunc_open_inflater"}, {Function: "main.(*decoder).run"}, {Function: "runtime.goexit"},
		}},
	}}}
	return analyze.Rank(c, analyze.Options{})
}

func TestCorrelateFromFileAndURL(t *testing.T) {
	data, err := os.ReadFile(fixtureDump(t))
	if err != nil {
		t.Fatal(err)
	}
	var asked string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = r.URL.String()
		w.Write(data)
	}))
	defer srv.Close()
	for _, src := range []string{fixtureDump(t), srv.URL} {
		res := zlibLeakResult()
		opts := &captureOptions{Goroutines: goroutineDump{src: src}}
		correlateGoroutines(res, opts)
		want := analyze.GoroutineGroup{Count: 12, State: "chan receive", Wait: 31 * time.Minute, Function: "main.(*decoder).run"}
		if g := res.Leaks[0].Goroutines; len(g) != 1 || g[0] != want || len(res.Capture.Warnings) != 0 {
			t.Errorf("%s: goroutines %+v, warnings %q; want %+v", src, g, res.Capture.Warnings, want)
		}
	}
	if asked != "/debug/pprof/goroutine?debug=2" {
		t.Errorf("fetched %q, want the debug=2 goroutine dump", asked)
	}
}

// A dump that cannot be read costs a warning in the report, once, never
// the report; it is read once however many reports are rendered.
func TestCorrelateUnreadableDump(t *testing.T) {
	notDump := filepath.Join(t.TempDir(), "profile.pb.gz")
	if err := os.WriteFile(notDump, []byte("\x1f\x8b\x08\x00binary"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	for src, want := range map[string]string{
		notDump:                      "no goroutine found",
		filepath.Join(notDump, "no"): "not a directory",
		srv.URL:                      "404 Not Found",
	} {
		res := zlibLeakResult()
		opts := &captureOptions{Goroutines: goroutineDump{src: src}}
		correlateGoroutines(res, opts)
		correlateGoroutines(res, opts)
		if w := res.Capture.Warnings; len(w) != 1 || !strings.HasPrefix(w[0], "--goroutines: ") || !strings.Contains(w[0], want) {
			t.Errorf("%s: warnings %q, want one containing %q", src, w, want)
		}
		if res.Leaks[0].Goroutines != nil {
			t.Errorf("%s: goroutines %+v from an unreadable dump", src, res.Leaks[0].Goroutines)
		}
	}
}

func TestGoroutinesFlagOnEveryReportCommand(t *testing.T) {
	io, _, _ := streams()
	var run *runOptions
	cmd := newRunCmd(io, func(_ context.Context, o *runOptions) error { run = o; return nil })
	cmd.SetArgs([]string{"--goroutines", "http://127.0.0.1:6060", "--", "./prog"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	var att *attachOptions
	cmd = newAttachCmd(io, func(_ context.Context, o *attachOptions) error { att = o; return nil })
	cmd.SetArgs([]string{"--pid", "1", "--goroutines", "dump.txt"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	var rep *reportOptions
	cmd = newReportCmd(io, func(_ context.Context, o *reportOptions) error { rep = o; return nil })
	cmd.SetArgs([]string{"--goroutines", "dump.txt", "leaks.capture"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if run.Goroutines.src != "http://127.0.0.1:6060" || att.Goroutines.src != "dump.txt" || rep.Goroutines.src != "dump.txt" {
		t.Errorf("parsed %q, %q, %q", run.Goroutines.src, att.Goroutines.src, rep.Goroutines.src)
	}
}
