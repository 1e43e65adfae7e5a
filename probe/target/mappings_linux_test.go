//go:build linux && amd64

package target

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// A mapped file is named from /proc/PID/maps by its inode, or, when the
// kernel could not read its inode (0), by the file mapping at its address;
// an address in an anonymous region is never named by that region's
// pseudo-path ([heap], [stack]: inode 0 as well).
func TestFilePaths(t *testing.T) {
	f := filepath.Join(t.TempDir(), "segment.index")
	if err := os.WriteFile(f, make([]byte, 8192), 0o600); err != nil {
		t.Fatal(err)
	}
	fd, err := os.Open(f)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	b, err := syscall.Mmap(int(fd.Fd()), 0, 8192, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(b)
	var st syscall.Stat_t
	if err := syscall.Stat(f, &st); err != nil {
		t.Fatal(err)
	}
	addr := uint64(uintptr(unsafe.Pointer(&b[0])))
	pid := os.Getpid()
	var fp filePaths
	if got := fp.path(pid, addr, 0, 0); got != f {
		t.Errorf("inode unknown, at the file's mapping: %q, want %q", got, f)
	}
	if got := fp.path(pid, addr, uint32(st.Dev), st.Ino); got != f {
		t.Errorf("by inode: %q, want %q", got, f)
	}
	// An address in the Go heap (anonymous) with inode unknown.
	heap := uint64(uintptr(unsafe.Pointer(new([4096]byte))))
	if got := fp.path(pid, heap, 0, 0); strings.HasPrefix(got, "[") || got == f {
		t.Errorf("inode unknown, in anonymous memory: %q, want no file's and no region's name", got)
	}
}
