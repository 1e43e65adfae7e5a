//go:build linux && amd64

package probe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestForTargetMallocAuto(t *testing.T) {
	for _, tc := range []struct {
		malloc  string
		objects []string
		want    string
		why     string
		jvmPair bool
	}{
		{"", []string{"/bin/x", "/lib/libc.so.6"}, MallocOn, "--malloc auto", false},
		{MallocAuto, []string{"/usr/lib/jvm/j/bin/java", "/usr/lib/jvm/j/lib/libjli.so"}, MallocOff, "--malloc auto: JVM target", true},
		{MallocAuto, []string{"/usr/lib/jvm/j/lib/server/libjvm.so"}, MallocOff, "--malloc auto: JVM target", true},
		{MallocOn, []string{"/usr/lib/jvm/j/lib/server/libjvm.so"}, MallocOn, "--malloc on", true},
		{MallocOff, []string{"/bin/x"}, MallocOff, "--malloc off", false},
	} {
		o := forTarget(Options{Malloc: tc.malloc}, tc.objects)
		// Preset jvm: jvm.direct, and the JNI zlib fallback pairs.
		jvmPair := len(o.Track) == 3 && o.Track[0].Kind == "jvm.direct" && o.Track[1].FallbackFor == "zlib"
		if o.Malloc != tc.want || o.mallocWhy != tc.why || jvmPair != tc.jvmPair {
			t.Errorf("forTarget(%q, %v) = %q (%q), jvm.direct %v; want %q (%q), %v", tc.malloc, tc.objects, o.Malloc, o.mallocWhy, jvmPair, tc.want, tc.why, tc.jvmPair)
		}
	}
}

// readRemote reads what it can: a range on an unmapped page fails alone,
// the ranges after it are read, and a process that is gone ends the read
// with ESRCH.
func TestReadRemotePartial(t *testing.T) {
	page := os.Getpagesize()
	mem, err := unix.Mmap(-1, 0, 3*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	for i := range 3 {
		binary.LittleEndian.PutUint64(mem[i*page:], uint64(0x1000+i))
	}
	if _, _, errno := unix.Syscall(unix.SYS_MUNMAP, uintptr(unsafe.Pointer(&mem[page])), uintptr(page), 0); errno != 0 {
		t.Fatal(errno)
	}
	base := uint64(uintptr(unsafe.Pointer(&mem[0])))
	addrs := []uint64{base, base + uint64(page), base + 2*uint64(page), base + 8}
	words, ok, err := readWords(os.Getpid(), addrs, 0)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(ok) != "[true false true true]" || words[0] != 0x1000 || words[2] != 0x1002 || words[3] != 0 {
		t.Errorf("read %x, ok %v; want 1000, -, 1002, 0 and [true false true true]", words, ok)
	}
	// A range cut by the unmapped page counts as unread.
	if _, ok, _ := readRemote(os.Getpid(), []uint64{base + uint64(page) - 4}, 8); ok[0] {
		t.Error("a range across an unmapped page was read whole")
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := readRemote(cmd.Process.Pid, []uint64{base}, 8); !errors.Is(err, unix.ESRCH) {
		t.Errorf("read of an exited process: %v, want ESRCH", err)
	}
}
