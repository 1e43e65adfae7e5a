package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func streams() (ioStreams, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	return ioStreams{In: strings.NewReader(""), Out: &out, Err: &errb}, &out, &errb
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
	if got.Pid != 4242 || got.Duration != 5*time.Minute || got.Format != "text" || got.Interval != time.Second {
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
		{[]string{"run", "--interval", "0s", "--", "true"}, "--interval must be positive"},
		{[]string{"run", "--top", "-1", "--", "true"}, "--top cannot be negative"},
		{[]string{"run", "--progress", "sometimes", "--", "true"}, `unknown --progress "sometimes"`},
		{[]string{"run"}, "requires at least 1 arg"},
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
