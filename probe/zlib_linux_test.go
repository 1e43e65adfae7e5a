package probe

import (
	"os"
	"testing"
)

func TestReadZlibLayoutSystemLibz(t *testing.T) {
	const libz = "/usr/lib/x86_64-linux-gnu/libz.so.1"
	if _, err := os.Stat(libz); err != nil {
		t.Skipf("no %s", libz)
	}
	l := readZlibLayout(libz)
	if l.version == "" {
		t.Fatalf("no zlib version found in %s", libz)
	}
	if l.version == "1.2.13" && (!l.known || l.inflateState != 7160 || l.deflateState != 5952) {
		t.Errorf("layout %+v, want zlib 1.2.13's 7160 and 5952, known", l)
	}
	if _, ok := zlibStateSizes[l.version]; ok != l.known {
		t.Errorf("layout %+v: known = %v, want %v", l, l.known, ok)
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
