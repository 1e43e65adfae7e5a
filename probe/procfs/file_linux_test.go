package procfs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestOpenFile checks that OpenFile opens a regular file, by path and
// relative to a directory, and refuses, without blocking, a FIFO, a
// symbolic link, a directory, a file over its size cap and one owned by
// another user.
func TestOpenFile(t *testing.T) {
	dir := t.TempDir()
	reg := filepath.Join(dir, "reg")
	if err := os.WriteFile(reg, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(reg, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	other := os.Getuid() + 1
	for _, tc := range []struct {
		dir  *os.File
		name string
		lim  FileLimits
		want string // "" for success
	}{
		{nil, reg, ObjectLimits, ""},
		{d, "reg", FileLimits{MaxSize: 10, Owner: os.Getuid()}, ""},
		{nil, filepath.Join(dir, "fifo"), ObjectLimits, "a FIFO, not a regular file"},
		{d, "fifo", ObjectLimits, "a FIFO, not a regular file"},
		{nil, filepath.Join(dir, "link"), FileLimits{Owner: AnyOwner}, "a symbolic link, not a regular file"},
		{nil, filepath.Join(dir, "link"), ObjectLimits, ""},
		{nil, dir, ObjectLimits, "a directory, not a regular file"},
		{d, "reg", FileLimits{MaxSize: 9, Owner: AnyOwner}, "10 bytes, more than the 9 bytes accepted"},
	} {
		start := time.Now()
		f, err := OpenFile(tc.dir, tc.name, tc.lim)
		if time.Since(start) > time.Second {
			t.Errorf("OpenFile(%s) took %v", tc.name, time.Since(start))
		}
		if tc.want == "" {
			if err != nil {
				t.Errorf("OpenFile(%s): %v", tc.name, err)
				continue
			}
			b := make([]byte, 20)
			if n, err := f.Read(b); err != nil || string(b[:n]) != "0123456789" {
				t.Errorf("read %s: %q, %v", tc.name, b[:n], err)
			}
			f.Close()
			continue
		}
		if err == nil {
			f.Close()
			t.Errorf("OpenFile(%s) opened it, want an error saying %q", tc.name, tc.want)
			continue
		}
		if !errors.Is(err, ErrUnsafeFile) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("OpenFile(%s) = %v, want ErrUnsafeFile saying %q", tc.name, err, tc.want)
		}
	}
	if os.Getuid() == 0 {
		if err := os.Chown(reg, 12345, 12345); err != nil {
			t.Fatal(err)
		}
		if _, err := OpenFile(d, "reg", FileLimits{Owner: other}); err == nil || !strings.Contains(err.Error(), "owned by uid 12345, not by the target's uid") {
			t.Errorf("OpenFile of another user's file = %v, want an owner error", err)
		}
		if f, err := OpenFile(d, "reg", FileLimits{Owner: 12345}); err != nil {
			t.Errorf("OpenFile of the owner's file: %v", err)
		} else {
			f.Close()
		}
	}
}
