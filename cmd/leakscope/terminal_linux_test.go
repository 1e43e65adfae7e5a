package main

import (
	"bytes"
	"context"
	"fmt"
	"github.com/leakscope/leakscope/internal/testutil"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// openPty returns the two ends of a new pseudo-terminal.
func openPty(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		testutil.SkipOrFail(t, fmt.Sprintf("no pseudo-terminal: %v", err))
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return m, s
}

// --format pprof without -o is refused when standard output is a
// terminal, before anything is traced or read: exit 2, one line.
func TestBinaryFormatRefusedOnTerminal(t *testing.T) {
	_, tty := openPty(t)
	if !isTerminal(tty) {
		t.Fatal("the pty's slave is not a terminal")
	}
	capture := filepath.Join(t.TempDir(), "missing.capture")
	for _, args := range [][]string{
		{"run", "--format", "pprof", "--", "/nonexistent/leakscope-no-such-command"},
		{"attach", "--pid", "1", "--format", "pprof"},
		{"report", "--format", "pprof", capture},
		{"report", "--format", "pprof", "-o", "-", capture},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var errb bytes.Buffer
			code := execute(context.Background(), args, ioStreams{In: strings.NewReader(""), Out: tty, Err: &errb})
			msg := errb.String()
			if code != 2 || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, "--format pprof is binary and standard output is a terminal: give -o FILE") {
				t.Errorf("exit %d, stderr %q", code, msg)
			}
		})
	}
	// Not refused: a file, another format, or a pipe as standard output;
	// each then fails on the missing capture instead.
	for _, tc := range []struct {
		args []string
		out  *os.File
	}{
		{[]string{"report", "--format", "pprof", "-o", filepath.Join(t.TempDir(), "p.pb.gz"), capture}, tty},
		{[]string{"report", "--format", "text", capture}, tty},
	} {
		var errb bytes.Buffer
		code := execute(context.Background(), tc.args, ioStreams{In: strings.NewReader(""), Out: tc.out, Err: &errb})
		if code != 2 || !strings.Contains(errb.String(), "no such file") {
			t.Errorf("%q: exit %d, stderr %q, want the missing capture's error", tc.args, code, errb.String())
		}
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	var errb bytes.Buffer
	if code := execute(context.Background(), []string{"report", "--format", "pprof", capture}, ioStreams{Out: w, Err: &errb}); code != 2 || !strings.Contains(errb.String(), "no such file") {
		t.Errorf("pprof to a pipe: exit %d, stderr %q", code, errb.String())
	}
}
