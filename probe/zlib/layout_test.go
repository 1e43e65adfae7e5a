package zlib

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// Every zlib release from 1.2.9 has its sizes; a version between releases
// or after the last takes the release before it, marked assumed.
func TestLayoutOf(t *testing.T) {
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
		l := LayoutOf(tc.version)
		if l.InflateState != tc.inflate || l.DeflateState != tc.deflat || l.Known != tc.known || (!l.Known && l.Assumed != tc.assumed) {
			t.Errorf("LayoutOf(%q) = %+v, want %d, %d, known %v, assumed %q", tc.version, l, tc.inflate, tc.deflat, tc.known, tc.assumed)
		}
	}
}

func TestLayoutString(t *testing.T) {
	for _, tc := range []struct {
		l    Layout
		want string
	}{
		{LayoutOf(""), "zlib of unknown version: inflate_state 7160 B, deflate_state 5952 B (zlib 1.2.13's, assumed)"},
		{Layout{Version: "1.3.2", InflateState: 7160, DeflateState: 5968, Known: true, ZStream: JNIZStreamSize},
			"zlib 1.3.2: inflate_state 7160 B, deflate_state 5968 B, z_stream 112 B (java.util.zip's)"},
	} {
		if got := tc.l.String(); got != tc.want {
			t.Errorf("String() = %q, want %q", got, tc.want)
		}
	}
}

// Version finds nothing in what is not an ELF object or has no zlib
// (TestReadLayoutSystemLibz finds Debian's).
func TestVersion(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if v := Version(bytes.NewReader(b)); v != "" {
		t.Errorf("a Go test binary has zlib %q", v)
	}
	if v := Version(bytes.NewReader([]byte("not an ELF object"))); v != "" {
		t.Errorf("not an ELF object: zlib %q", v)
	}
}

// The JNI fallback's bytes are the z_stream and the init's allocations.
func TestJNIBytes(t *testing.T) {
	l := LayoutOf("1.2.13")
	l.ZStream = JNIZStreamSize
	if c, w := JNIBytes("zlib.inflate", l); c != 112+7160 || w != 1 {
		t.Errorf("inflate: %d bytes, window %d; want %d, 1", c, w, 112+7160)
	}
	if c, w := JNIBytes("zlib.deflate", l); c != 112+5952+1<<18 || w != 0 {
		t.Errorf("deflate: %d bytes, window %d; want %d, 0", c, w, 112+5952+1<<18)
	}
	if c, w := JNIBytes("malloc", l); c != 0 || w != 0 {
		t.Errorf("malloc: %d, %d", c, w)
	}
}

// FuzzVersion: an object of the target's, any bytes at all, never makes
// Version panic, and what it returns is a version's characters.
func FuzzVersion(f *testing.F) {
	f.Add([]byte("\x7fELF"))
	// Joined at run time: a literal would put zlib's copyright string in
	// this test binary's .rodata, which TestVersion reads.
	f.Add([]byte(strings.Join([]string{" inflate", "1.2.13", "Copyright 1995-2022 Mark Adler "}, " ")))
	f.Fuzz(func(t *testing.T, b []byte) {
		v := Version(bytes.NewReader(b))
		for _, c := range v {
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c == '.' || c == '-') {
				t.Fatalf("version %q", v)
			}
		}
		LayoutOf(v)
	})
}
