//go:build linux && amd64

package probe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/leakscope/leakscope/internal/testutil"
	"github.com/leakscope/leakscope/probe/kernel"
	"os"
	"os/exec"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestReadZlibLayoutSystemLibz(t *testing.T) {
	const libz = "/usr/lib/x86_64-linux-gnu/libz.so.1"
	if _, err := os.Stat(libz); err != nil {
		testutil.SkipOrFail(t, fmt.Sprintf("no %s", libz))
	}
	l := readZlibLayout(libz)
	if l.version == "" {
		t.Fatalf("no zlib version found in %s", libz)
	}
	if l.version == "1.2.13" && (!l.known || l.inflateState != 7160 || l.deflateState != 5952) {
		t.Errorf("layout %+v, want zlib 1.2.13's 7160 and 5952, known", l)
	}
	if ok := zlibLayoutOf(l.version).known; ok != l.known {
		t.Errorf("layout %+v: known = %v, want %v", l, l.known, ok)
	}
}

// Every zlib release from 1.2.9 has its sizes; a version between releases
// or after the last takes the release before it, marked assumed.
func TestZlibLayoutOf(t *testing.T) {
	for _, tc := range []struct {
		version         string
		inflate, deflat uint32
		known           bool
		assumed         string
	}{
		{"1.2.11", 7160, 5952, true, ""},
		{"1.2.12", 7160, 5952, true, ""},
		{"1.2.13", 7160, 5952, true, ""},
		{"1.3", 7160, 5952, true, ""},
		{"1.3.1", 7160, 5952, true, ""},
		{"1.3.2", 7160, 5968, true, ""},
		{"1.3.1.1-motley", 7160, 5952, false, "1.3.1"},
		{"1.3.2.1-motley", 7160, 5968, false, "1.3.2"},
		{"1.4", 7160, 5968, false, "1.3.2"},
		{"1.2.8", 7160, 5952, false, "1.2.13"},
		{"", 7160, 5952, false, "1.2.13"},
		{"1.3.0.zlib-ng", 7160, 5952, false, "1.2.13"},
	} {
		l := zlibLayoutOf(tc.version)
		if l.inflateState != tc.inflate || l.deflateState != tc.deflat || l.known != tc.known || (!l.known && l.assumed != tc.assumed) {
			t.Errorf("zlibLayoutOf(%q) = %+v, want %d, %d, known %v, assumed %q", tc.version, l, tc.inflate, tc.deflat, tc.known, tc.assumed)
		}
	}
}

func TestReadZlibLayoutUnknownAssumes1213(t *testing.T) {
	l := readZlibLayout("/proc/self/exe") // no zlib in a Go test binary
	if l.version != "" || l.known || l.inflateState != 7160 || l.deflateState != 5952 {
		t.Errorf("layout %+v, want no version, zlib 1.2.13's sizes assumed", l)
	}
	if s := l.String(); s != "zlib of unknown version: inflate_state 7160 B, deflate_state 5952 B (zlib 1.2.13's, assumed)" {
		t.Errorf("String() = %q", s)
	}
}

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

// With malloc not traced, zlib's init probes carry cookies that make the
// kernel compute each stream's bytes: its state, with the z_stream where
// counted, and which init it is (kernel.TestCookiesDecodeAsKernel ties
// the encoding to the kernel's decoder).
func TestZlibComputedCookies(t *testing.T) {
	l := zlibLayout{inflateState: 7160, deflateState: 5952, zstream: jniZStreamSize}
	want := map[string]kernel.ZlibCookie{
		"inflateInit_":     {State: 7160 + jniZStreamSize, Init: kernel.ZinitInflate},
		"inflateInit2_":    {State: 7160 + jniZStreamSize, Init: kernel.ZinitInflate2},
		"inflateBackInit_": {State: 7160 + jniZStreamSize, Init: kernel.ZinitBack},
		"deflateInit_":     {State: 5952 + jniZStreamSize, Init: kernel.ZinitDeflate},
		"deflateInit2_":    {State: 5952 + jniZStreamSize, Init: kernel.ZinitDeflate2},
	}
	for _, p := range zlibComputedFamily(l) {
		w, ok := want[p.Symbol]
		if !ok {
			continue
		}
		if p.Cookie != w.Encode() {
			t.Errorf("%s: cookie %#x, want %#x (%+v)", p.Symbol, p.Cookie, w.Encode(), w)
		}
		delete(want, p.Symbol)
	}
	if len(want) > 0 {
		t.Errorf("zlibComputedFamily has no cookie for %v", want)
	}
}
