package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leakscope/leakscope/internal/testutil"
	"github.com/leakscope/leakscope/report"
)

func streams() (ioStreams, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	return ioStreams{In: strings.NewReader(""), Out: &out, Err: &errb}, &out, &errb
}

// parseReport reads a JSON report as its consumers do.
func parseReport(r io.Reader) (*report.V1, error) {
	v := new(report.V1)
	if err := testutil.DecodeJSON(r, report.SchemaV1, v); err != nil {
		return nil, err
	}
	return v, nil
}

func TestRunParsesOptions(t *testing.T) {
	io, _, _ := streams()
	var got *runOptions
	cmd := newRunCmd(io, func(_ context.Context, o *runOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"--format", "json", "-o", "out.json", "--interval", "250ms", "--min-age", "2s", "--top", "3", "--", "./prog", "--flag", "x"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.Format != "json" || got.Output != "out.json" || got.Interval != 250*time.Millisecond ||
		got.MinAge != 2*time.Second || got.Top != 3 || strings.Join(got.Command, " ") != "./prog --flag x" {
		t.Errorf("parsed %+v", got)
	}
}

func TestAttachParsesOptions(t *testing.T) {
	io, _, _ := streams()
	var got *attachOptions
	cmd := newAttachCmd(io, func(_ context.Context, o *attachOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"--pid", "4242", "--duration", "5m"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.Pid != 4242 || got.Duration != 5*time.Minute || got.Format != "text" || got.Interval != time.Second || got.Malloc != "auto" {
		t.Errorf("parsed %+v", got)
	}
}

// Bad input: one clear line on stderr, exit 2, nothing on stdout.
func TestBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"attach"}, "--pid is required"},
		{[]string{"attach", "--pid", "-3"}, "--pid is required"},
		{[]string{"attach", "--pid", "999999999"}, "999999999"},
		{[]string{"attach", "--pid", "1", "--format", "xml"}, `unknown --format "xml"`},
		{[]string{"run", "--interval", "0s", "--", "true"}, "--interval must be at least 100ms"},
		{[]string{"run", "--interval", "1ns", "--", "true"}, "--interval must be at least 100ms"},
		{[]string{"run", "--top", "-1", "--", "true"}, "--top cannot be negative"},
		{[]string{"run", "--max-processes", "0", "--", "true"}, "--max-processes must be at least 1"},
		{[]string{"run", "--progress", "sometimes", "--", "true"}, `unknown --progress "sometimes"`},
		{[]string{"run", "--malloc", "maybe", "--", "true"}, `unknown --malloc "maybe"`},
		{[]string{"attach", "--pid", "1", "--malloc", "off", "--sample-bytes", "512KiB"}, "--sample-bytes samples malloc calls"},
		{[]string{"run", "--debuginfod", "ftp://host", "--", "true"}, `--debuginfod: debuginfod URL "ftp://host": want http://HOST or https://HOST`},
		{[]string{"doctor", "--debuginfod", "host:8002"}, `--debuginfod: debuginfod URL "host:8002"`},
		{[]string{"run"}, "requires at least 1 arg"},
		{[]string{"report", "--memory-limit", "lots", "x.capture"}, `--memory-limit "lots": want a size such as 72MiB`},
		{[]string{"run", "--", "/nonexistent/leakscope-no-such-command"}, "no such file"},
		{[]string{"run", "-o", "/nonexistent-dir/report.json", "--", "true"}, "not writable"},
		{[]string{"frobnicate"}, "unknown command"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			io, out, errb := streams()
			code := execute(context.Background(), tc.args, io)
			if code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			if out.Len() != 0 {
				t.Errorf("stdout = %q, want nothing", out.String())
			}
			msg := errb.String()
			if !strings.HasPrefix(msg, "leakscope: ") || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, tc.want) {
				t.Errorf("stderr = %q, want one line containing %q", msg, tc.want)
			}
		})
	}
}

func TestBadRuleAndCapture(t *testing.T) {
	dir := t.TempDir()
	corrupt := dir + "/corrupt.capture"
	if err := os.WriteFile(corrupt, []byte(`{"schema":"leakscope.capture/v1","target":{"pid":1,"command":[],"runtime":"native","exit_code":null},"started_at":"2026-01-01T00:00:00Z"}`+"\n{not json\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	future := dir + "/future.capture"
	if err := os.WriteFile(future, []byte("{\"schema\":\"leakscope.capture/v9\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--fail-on", "bytes>1XB", "--", "true"}, `unknown size unit "XB"`},
		{[]string{"run", "--track", "pool", "--", "true"}, "want KIND=LIBRARY:ACQUIRE:RELEASE"},
		{[]string{"run", "--track", "preset:nosuch", "--", "true"}, `unknown preset "nosuch"`},
		{[]string{"run", "--track", "preset:stdio", "--track", "preset:stdio", "--", "true"}, "declared twice"},
		{[]string{"run", "--track-file", dir + "/missing.yaml", "--", "true"}, "--track-file"},
		{[]string{"report", dir + "/missing.capture"}, "no such file"},
		{[]string{"report", future}, "upgrade leakscope"},
		{[]string{"report", "--format", "svg", future}, `unknown --format "svg"`},
		{[]string{"diff", future}, "accepts 2 arg"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			io, out, errb := streams()
			if code := execute(context.Background(), tc.args, io); code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			if out.Len() != 0 || !strings.Contains(errb.String(), tc.want) || strings.Count(errb.String(), "\n") != 1 {
				t.Errorf("stdout %q, stderr %q, want one line with %q", out.String(), errb.String(), tc.want)
			}
		})
	}
	io, _, errb := streams()
	if code := execute(context.Background(), []string{"report", corrupt}, io); code != 2 || !strings.Contains(errb.String(), "line 2") {
		t.Errorf("corrupt capture: exit %d, %q", code, errb.String())
	}
}

// A --fail-on rule that could never match is an error, not a passing
// gate: a kind nothing traced (a typo), or conditions glued by ';'.
func TestFailOnThatCannotMatch(t *testing.T) {
	capture := writeTestCapture(t, "growing")
	for rule, want := range map[string]string{
		"kind=maloc":          `leakscope: --fail-on: rule "kind=maloc": kind=maloc matches none of the kinds traced`,
		"kind=malloc;count>0": `conditions are separated by ','`,
	} {
		io, _, errb := streams()
		code := execute(context.Background(), []string{"report", "-o", filepath.Join(t.TempDir(), "r.txt"), "--fail-on", rule, capture}, io)
		if code != 2 || strings.Count(errb.String(), "\n") != 1 || !strings.Contains(errb.String(), want) {
			t.Errorf("--fail-on %q: exit %d, stderr %q; want 2 and %q", rule, code, errb.String(), want)
		}
	}
}
