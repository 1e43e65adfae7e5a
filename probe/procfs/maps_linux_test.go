package procfs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"

	"github.com/leakscope/leakscope/internal/testutil"
)

// TestReadMapsSelf finds the test binary's own code in its maps and opens it
// through ObjectPath.
func TestReadMapsSelf(t *testing.T) {
	maps, err := ReadMaps(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	pc := uint64(reflect.ValueOf(TestReadMapsSelf).Pointer())
	var code *Mapping
	for i, m := range maps {
		if m.Start <= pc && pc < m.End {
			code = &maps[i]
		}
		if i > 0 && maps[i-1].End > m.Start {
			t.Errorf("mappings overlap or are unsorted: %+v then %+v", maps[i-1], m)
		}
	}
	if code == nil {
		t.Fatalf("no mapping contains this test's code at %#x", pc)
	}
	if !code.Exec() {
		t.Errorf("code mapping %+v is not executable", *code)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if code.Path != exe {
		t.Errorf("code mapping path %q, want %q", code.Path, exe)
	}
	assertSameFile(t, ObjectPath(os.Getpid(), *code), exe)
}

// TestReadMapsDeleted maps a file, unlinks it, and opens it again through
// /proc/self/map_files.
func TestReadMapsDeleted(t *testing.T) {
	name := filepath.Join(t.TempDir(), "doomed lib.so")
	content := bytes.Repeat([]byte("leakscope"), 1000)
	if err := os.WriteFile(name, content, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mem, err := syscall.Mmap(int(f.Fd()), 0, len(content), syscall.PROT_READ, syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(mem)
	if err := os.Remove(name); err != nil {
		t.Fatal(err)
	}

	maps, err := ReadMaps(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	var found *Mapping
	for i, m := range maps {
		if m.Path == name {
			found = &maps[i]
		}
	}
	if found == nil {
		t.Fatalf("no mapping of %s", name)
	}
	if !found.Deleted {
		t.Errorf("mapping %+v: Deleted = false after unlink", *found)
	}
	path := ObjectPath(os.Getpid(), *found)
	got, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrPermission) {
		testutil.SkipOrFail(t, fmt.Sprintf("reading %s needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE: %v", path, err))
	}
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, content) {
		t.Errorf("%s: content differs from the deleted file", path)
	}
}

func assertSameFile(t *testing.T, a, b string) {
	t.Helper()
	ai, err := os.Stat(a)
	if err != nil {
		t.Fatal(err)
	}
	bi, err := os.Stat(b)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(ai, bi) {
		t.Errorf("%s and %s are different files", a, b)
	}
}

func TestReadMapsNoProcess(t *testing.T) {
	// PIDs are below PID_MAX_LIMIT (4194304), so this one never exists.
	const pid = 1 << 30
	_, err := ReadMaps(pid)
	if !errors.Is(err, ErrNoProcess) {
		t.Fatalf("ReadMaps(%d) = %v, want ErrNoProcess", pid, err)
	}
	if want := fmt.Sprintf("process %d not found", pid); err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}
