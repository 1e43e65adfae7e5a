package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/safefile"
	"github.com/leakscope/leakscope/internal/testutil"
)

// writeTestCapture saves report/testdata/captures/<name>.json as a capture
// file, as --save writes it, and returns its path.
func writeTestCapture(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "report", "testdata", "captures", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var c analyze.Capture
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	return testutil.SaveCapture(t, filepath.Join(t.TempDir(), name+".capture"), &c)
}

func TestReportDir(t *testing.T) {
	capture := writeTestCapture(t, "leaky")
	dir := filepath.Join(t.TempDir(), "artifacts", "leaks")
	io, out, errb := streams()
	code := execute(context.Background(), []string{"report", "--report-dir", dir,
		"--fail-on", "bytes>1MiB", "--fail-on", "kind=zlib.*,count>10", capture}, io)
	if code != 1 {
		t.Fatalf("exit %d, want 1 (a rule matched); stderr:\n%s", code, errb.String())
	}
	if !strings.Contains(out.String(), "foo_buffer_new") {
		t.Errorf("stdout lacks the text report:\n%s", out.String())
	}

	st, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o700 {
		t.Errorf("report dir mode %v, want 0700", st.Mode().Perm())
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", e.Name(), info.Mode().Perm())
		}
	}
	// Nothing else: no temporary files left behind.
	if got := strings.Join(names, " "); got != "junit.xml profile.pb.gz report.html report.json report.txt" {
		t.Errorf("report dir holds %s", got)
	}
	read := func(name string) []byte {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}

	if txt := string(read("report.txt")); !strings.HasPrefix(txt, "target:      pid 4242") || !strings.Contains(txt, "rank 1: malloc") {
		t.Errorf("report.txt:\n%s", txt)
	}
	js, err := parseReport(bytes.NewReader(read("report.json")))
	if err != nil {
		t.Fatal(err)
	}
	if len(js.Leaks) != 4 || js.Leaks[0].Frames[0].Function != "foo_buffer_new" {
		t.Errorf("report.json leaks %+v", js.Leaks)
	}
	if html := string(read("report.html")); !strings.Contains(html, "<title>leakscope: pid 4242") || !strings.Contains(html, `id="flame-data"`) {
		t.Error("report.html is not the HTML report")
	}
	p, err := profile.Parse(bytes.NewReader(read("profile.pb.gz")))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Sample) != 5 || p.DefaultSampleType != "leak_space" {
		t.Errorf("profile.pb.gz: %d samples, default %s", len(p.Sample), p.DefaultSampleType)
	}

	var ju junitSuites
	junit := read("junit.xml")
	if err := xml.Unmarshal(junit, &ju); err != nil {
		t.Fatalf("junit.xml: %v\n%s", err, junit)
	}
	if ju.Tests != 2 || ju.Failures != 1 || len(ju.Suites) != 1 || len(ju.Suites[0].Cases) != 2 {
		t.Fatalf("junit.xml:\n%s", junit)
	}
	s := ju.Suites[0]
	failed, passed := s.Cases[0], s.Cases[1]
	if failed.Name != "fail-on bytes>1MiB" || failed.Failure == nil || failed.Failure.Message != "2 leak rows match --fail-on bytes>1MiB" {
		t.Errorf("first case %+v", failed)
	} else {
		for _, want := range []string{
			"rank 1: malloc, 16 live, 4.0 MiB, in foo_buffer_new\n  #0 foo_buffer_new (/usr/lib/x86_64-linux-gnu/libfoo.so.1+0x2a10)",
			"  … stack truncated: /usr/lib/x86_64-linux-gnu/libfoo.so.1 has no frame pointers",
			"rank 2: malloc, 100 live, 4.2 MiB, in cache_put\n  #0 cache_put (/opt/leaky/bin/leaky+0x2200) src/cache.c:120",
		} {
			if !strings.Contains(failed.Failure.Text, want) {
				t.Errorf("failure text lacks %q:\n%s", want, failed.Failure.Text)
			}
		}
		if strings.Contains(failed.Failure.Text, "decode_chunk") {
			t.Errorf("failure lists a row that does not match:\n%s", failed.Failure.Text)
		}
	}
	if passed.Name != "fail-on kind=zlib.*,count>10" || passed.Failure != nil {
		t.Errorf("second case %+v", passed)
	}
	if s.Timestamp != "2025-03-01T12:00:00" || s.Time != "600.000" || !strings.Contains(s.SystemOut, "RANK  KIND") {
		t.Errorf("suite %q %q, system-out:\n%s", s.Timestamp, s.Time, s.SystemOut)
	}

	// No rules: one passing test case, exit 0, files replaced.
	io, _, errb = streams()
	if code := execute(context.Background(), []string{"report", "--report-dir", dir, "--format", "json", capture}, io); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	ju = junitSuites{}
	if err := xml.Unmarshal(read("junit.xml"), &ju); err != nil {
		t.Fatal(err)
	}
	if ju.Tests != 1 || ju.Failures != 0 || ju.Suites[0].Cases[0].Name != "leakscope" || ju.Suites[0].Cases[0].Failure != nil {
		t.Errorf("junit.xml without rules:\n%s", read("junit.xml"))
	}
}

func TestReportDirNotWritable(t *testing.T) {
	capture := writeTestCapture(t, "empty")
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	io, _, errb := streams()
	code := execute(context.Background(), []string{"report", "--report-dir", filepath.Join(file, "dir"), capture}, io)
	if code != 2 || !strings.HasPrefix(errb.String(), "leakscope: --report-dir: ") || strings.Count(errb.String(), "\n") != 1 {
		t.Errorf("exit %d, stderr %q", code, errb.String())
	}
	if err := checkReportDir(filepath.Join(file, "dir"), safefile.Options{}); err == nil || !strings.Contains(err.Error(), "--report-dir") {
		t.Errorf("checkReportDir under a file = %v", err)
	}
}

func TestFormatHTML(t *testing.T) {
	capture := writeTestCapture(t, "growing")
	out := filepath.Join(t.TempDir(), "leaks.html")
	io, stdout, errb := streams()
	if code := execute(context.Background(), []string{"report", "--format", "html", "-o", out, capture}, io); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if stdout.Len() != 0 || !strings.HasPrefix(string(data), "<!DOCTYPE html>") || !strings.Contains(string(data), "conn_new") {
		t.Errorf("stdout %q; file starts %.40q", stdout.String(), data)
	}
}
