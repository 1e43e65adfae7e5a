//go:build linux && amd64

package zlib

import (
	"os"
	"testing"

	"github.com/leakscope/leakscope/internal/testutil"
	"github.com/leakscope/leakscope/probe/kernel"
)

func TestReadLayoutSystemLibz(t *testing.T) {
	const libz = "/usr/lib/x86_64-linux-gnu/libz.so.1"
	if _, err := os.Stat(libz); err != nil {
		testutil.SkipOrFail(t, "no "+libz)
	}
	l := ReadLayout(libz)
	if l.Version == "" {
		t.Fatalf("no zlib version found in %s", libz)
	}
	if l.Version == "1.2.13" && (!l.Known || l.InflateState != 7160 || l.DeflateState != 5952) {
		t.Errorf("layout %+v, want zlib 1.2.13's 7160 and 5952, known", l)
	}
	if ok := LayoutOf(l.Version).Known; ok != l.Known {
		t.Errorf("layout %+v: known = %v, want %v", l, l.Known, ok)
	}
}

func TestReadLayoutUnknownAssumes1213(t *testing.T) {
	l := ReadLayout("/proc/self/exe") // no zlib in a Go test binary
	if l.Version != "" || l.Known || l.InflateState != 7160 || l.DeflateState != 5952 {
		t.Errorf("layout %+v, want no version, zlib 1.2.13's sizes assumed", l)
	}
}

// With malloc not traced, zlib's init probes carry cookies that make the
// kernel compute each stream's bytes: its state, with the z_stream where
// counted, and which init it is (kernel.TestCookiesDecodeAsKernel ties
// the encoding to the kernel's decoder). inflate() is not probed.
func TestComputedCookies(t *testing.T) {
	l := Layout{InflateState: 7160, DeflateState: 5952, ZStream: JNIZStreamSize}
	want := map[string]kernel.ZlibCookie{
		"inflateInit_":     {State: 7160 + JNIZStreamSize, Init: kernel.ZinitInflate},
		"inflateInit2_":    {State: 7160 + JNIZStreamSize, Init: kernel.ZinitInflate2},
		"inflateBackInit_": {State: 7160 + JNIZStreamSize, Init: kernel.ZinitBack},
		"deflateInit_":     {State: 5952 + JNIZStreamSize, Init: kernel.ZinitDeflate},
		"deflateInit2_":    {State: 5952 + JNIZStreamSize, Init: kernel.ZinitDeflate2},
	}
	for _, p := range ComputedFamily(l) {
		if p.Symbol == "inflate" {
			t.Error("inflate() probed with the bytes computed")
		}
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
		t.Errorf("ComputedFamily has no cookie for %v", want)
	}
}

// In a zlib library inflate() is not probed; in zlib built into another
// object it is.
func TestTracedFamily(t *testing.T) {
	has := func(specs []string) bool {
		for _, s := range specs {
			if s == "inflate" {
				return true
			}
		}
		return false
	}
	names := func(library bool) []string {
		var out []string
		for _, p := range TracedFamily(library) {
			out = append(out, p.Symbol)
		}
		return out
	}
	if has(names(true)) || !has(names(false)) || len(names(false)) != len(Family) {
		t.Errorf("library %v, built in %v", names(true), names(false))
	}
	if !Library("/usr/lib/x86_64-linux-gnu/libz.so.1") || Library("/usr/lib/jvm/java-17-openjdk-amd64/lib/libzip.so") {
		t.Error("Library")
	}
}
