package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leakscope/leakscope/internal/testutil"
)

// The CI job of docs/ci.md on a real run: --report-dir gets every artifact
// and junit.xml fails the rule that matched, and leakscope exits 1.
func TestRunReportDir(t *testing.T) {
	testutil.RequireBPF(t)
	leakscope, prog := buildAll(t, "leaky")
	dir := filepath.Join(t.TempDir(), "artifacts")
	cmd := exec.Command(leakscope, "run", "--fail-on", "kind=malloc,count>=100", "--fail-on", "bytes>1GiB", "--report-dir", dir, "--", prog)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &bytes.Buffer{}, &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit = %v, want 1\n%s", err, stderr.String())
	}
	read := func(name string) string {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	r, err := parseReport(strings.NewReader(read("report.json")))
	if err != nil {
		t.Fatal(err)
	}
	if r.Leaks[0].Frames[0].Function != "leak_request_buffer" || r.Leaks[0].OutstandingCount != 100 {
		t.Errorf("report.json rank 1 = %+v", r.Leaks[0])
	}
	if html := read("report.html"); !strings.Contains(html, "<code>leak_request_buffer</code>") {
		t.Error("report.html lacks leak_request_buffer")
	}
	junit := read("junit.xml")
	for _, want := range []string{
		`<testsuites name="leakscope" tests="2" failures="1"`,
		`<testcase name="fail-on kind=malloc,count&gt;=100" classname="leakscope" time="0">`,
		`<failure message="1 leak rows match --fail-on kind=malloc,count&gt;=100" type="leak">rank 1: malloc, 100 live, 400.0 KiB, in leak_request_buffer`,
		`<testcase name="fail-on bytes&gt;1GiB" classname="leakscope" time="0"></testcase>`,
	} {
		if !strings.Contains(junit, want) {
			t.Errorf("junit.xml lacks %s:\n%s", want, junit)
		}
	}
	for _, name := range []string{"report.txt", "profile.pb.gz"} {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Size() == 0 || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v", name, err)
		}
	}
}
