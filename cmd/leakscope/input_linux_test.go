package main

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Inputs to report and diff that are not capture files, or are too big,
// get one clear line within seconds: no read of a sparse file's 2 GB, no
// wait on a FIFO's writer, no endless read of a device.
func TestReportRefusesHostileInputs(t *testing.T) {
	dir := t.TempDir()
	sparse := filepath.Join(dir, "sparse.capture")
	if f, err := os.Create(sparse); err != nil {
		t.Fatal(err)
	} else {
		if err := f.Truncate(2 << 30); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	sparseSmall := filepath.Join(dir, "zeros.capture")
	if f, err := os.Create(sparseSmall); err != nil {
		t.Fatal(err)
	} else {
		if err := f.Truncate(512 << 20); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	good := writeTestCapture(t, "leaky")

	cases := []struct {
		name string
		args []string
		want string
	}{
		{"oversized", []string{"report", sparse}, "is 2.0 GiB, more than --max-input 1.0 GiB: raise --max-input"},
		{"over a lowered limit", []string{"report", "--max-input", "1KiB", good}, "more than --max-input 1.0 KiB"},
		{"zeros under the limit", []string{"report", sparseSmall}, "not a leakscope capture: a record begins with '\\x00'"},
		{"FIFO", []string{"report", fifo}, "is not a capture file: give the file run or attach --save wrote: open " + fifo + ": refused: a FIFO, not a regular file"},
		{"device", []string{"report", "/dev/zero"}, "refused: a character device, not a regular file"},
		{"directory", []string{"report", dir}, "refused: a directory, not a regular file"},
		{"diff FIFO", []string{"diff", good, fifo}, "refused: a FIFO, not a regular file"},
		{"diff device", []string{"diff", "/dev/urandom", good}, "refused: a character device, not a regular file"},
		{"-o FIFO without a reader", []string{"report", "-o", fifo, good}, "a FIFO or socket with no reader"},
		{"bad limit", []string{"report", "--max-input", "lots", good}, `--max-input "lots": want a positive size`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			io, stdout, errb := streams()
			code := execute(context.Background(), c.args, io)
			took := time.Since(start)
			runtime.ReadMemStats(&after)
			if code != 2 || stdout.Len() != 0 || strings.Count(errb.String(), "\n") != 1 || !strings.Contains(errb.String(), c.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2 and one line containing %q", code, stdout.String(), errb.String(), c.want)
			}
			if took > 5*time.Second {
				t.Errorf("took %s", took)
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
				t.Errorf("allocated %d MiB to refuse it", grew>>20)
			}
		})
	}
}

// A read that Ctrl-C interrupts ends with an error that says so.
func TestReadCaptureInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := readCaptureFile(ctx, writeTestCapture(t, "leaky"), inputOptions{MaxInput: defaultMaxInput})
	if err == nil || !strings.Contains(err.Error(), "interrupted while reading") {
		t.Errorf("err = %v", err)
	}
}

// A capture of exactly --max-input bytes is read whole.
func TestReportAtExactlyMaxInput(t *testing.T) {
	good := writeTestCapture(t, "leaky")
	st, err := os.Stat(good)
	if err != nil {
		t.Fatal(err)
	}
	io, _, errb := streams()
	limit := strconv.FormatInt(st.Size(), 10) + "B"
	if code := execute(context.Background(), []string{"report", "--max-input", limit, good}, io); code != 0 {
		t.Errorf("--max-input %s on a file of that size: exit %d, %s", limit, code, errb.String())
	}
	io, _, errb = streams()
	limit = strconv.FormatInt(st.Size()-1, 10) + "B"
	if code := execute(context.Background(), []string{"report", "--max-input", limit, good}, io); code != 2 || !strings.Contains(errb.String(), "raise --max-input") {
		t.Errorf("--max-input %s: exit %d, %s", limit, code, errb.String())
	}
}
