package zlib

import (
	"cmp"
	"debug/elf"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strings"
)

// Layout is what computing a stream's bytes from its init arguments
// (--malloc off) needs to know of one copy of zlib: the sizes of its
// internal state structs, which differ across zlib versions, and whether
// the z_stream of its streams is java.util.zip's (ZStream).
type Layout struct {
	Version      string // from the object's copyright string; "" if not found
	InflateState uint32 // sizeof(struct inflate_state)
	DeflateState uint32 // sizeof(struct deflate_state)
	Known        bool   // the sizes are this version's (else Assumed's are)
	Assumed      string // the release whose sizes stand in when !Known
	// ZStream is sizeof(z_stream) when each stream's z_stream is a calloc
	// of java.util.zip's JNI init, counted with the stream (JNIZStreamSize),
	// else 0: a native program's z_stream is its own memory.
	ZStream uint32
}

// Release is one zlib release's struct sizes on x86-64.
type Release struct {
	Version                    string
	InflateState, DeflateState uint32
}

// Releases are sizeof(struct inflate_state) and sizeof(deflate_state) on
// x86-64 for every zlib release whose allocations the BPF programs compute
// (1.2.9 on: ebpf/leakscope.bpf.c), oldest first. 1.2.9 to 1.3.1: compiled
// from each release's inflate.h and deflate.h (tags of
// github.com/madler/zlib; gcc -O2, default options: LIT_MEM, an option of
// 1.3.1, makes deflate_state 5960 B and pending_buf a fifth bigger, and is
// not handled). 1.2.13 also measured: the calloc Debian 12's zlib1g
// 1:1.2.13.dfsg-1 makes for each (examples/c/jdkzipbytes.c on OpenJDK 17).
// 1.3.2: measured the same way on Temurin 25's libzip.so, which bundles
// it: its deflate_state is 16 B bigger (deflate streams 268,112 B against
// 268,096 B).
var Releases = []Release{
	{"1.2.9", 7160, 5952},
	{"1.2.10", 7160, 5952},
	{"1.2.11", 7160, 5952},
	{"1.2.12", 7160, 5952},
	{"1.2.13", 7160, 5952},
	{"1.3", 7160, 5952},
	{"1.3.1", 7160, 5952},
	{"1.3.2", 7160, 5968},
}

// AssumedRelease is the release whose sizes stand in for a zlib of unknown
// version.
const AssumedRelease = "1.2.13"

// versionREs find the version zlib embeds in every build:
// inflate_copyright (inftrees.c, kept by the linker: inflate_table
// references it) and deflate_copyright (deflate.c), in a library that has
// only one of them.
var versionREs = []*regexp.Regexp{
	regexp.MustCompile(` inflate ([0-9][0-9a-z.-]*) Copyright`),
	regexp.MustCompile(` deflate ([0-9][0-9a-z.-]*) Copyright`),
}

// LayoutOf returns the layout of zlib version v: its release's sizes,
// known; for a version between releases (a development version such as
// 1.3.1.1-motley) or after the last one, the sizes of the release before
// it, assumed; for one older than 1.2.9 or not a version,
// AssumedRelease's.
func LayoutOf(v string) Layout {
	l := Layout{Version: v}
	for _, r := range Releases {
		if r.Version == v {
			l.InflateState, l.DeflateState, l.Known = r.InflateState, r.DeflateState, true
			return l
		}
	}
	l.Assumed = AssumedRelease
	if n := versionNumbers(v); n != nil && compareVersions(n, versionNumbers(Releases[0].Version)) > 0 {
		for _, r := range Releases {
			if compareVersions(versionNumbers(r.Version), n) < 0 {
				l.Assumed = r.Version
			}
		}
	}
	for _, r := range Releases {
		if r.Version == l.Assumed {
			l.InflateState, l.DeflateState = r.InflateState, r.DeflateState
		}
	}
	return l
}

// versionNumbers parses the dotted numbers v begins with ("1.3.1.1-motley"
// → 1 3 1 1); nil if it begins with none.
func versionNumbers(v string) []int {
	var out []int
	for _, part := range strings.Split(v, ".") {
		n, digits := 0, 0
		for digits < len(part) && part[digits] >= '0' && part[digits] <= '9' {
			n = n*10 + int(part[digits]-'0')
			digits++
		}
		if digits == 0 {
			break
		}
		out = append(out, n)
		if digits < len(part) {
			break
		}
	}
	return out
}

// compareVersions orders two versionNumbers, a missing number as 0.
func compareVersions(a, b []int) int {
	for i := range max(len(a), len(b)) {
		x, y := 0, 0
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if c := cmp.Compare(x, y); c != 0 {
			return c
		}
	}
	return 0
}

// Version finds zlib's copyright string in the read-only data of the ELF
// object r, "" if there is none. r is the target's: any bytes at all.
func Version(r io.ReaderAt) string {
	f, err := elf.NewFile(r)
	if err != nil {
		return ""
	}
	for _, name := range []string{".rodata", ".rdata"} {
		sec := f.Section(name)
		if sec == nil {
			continue
		}
		if b, err := sec.Data(); err == nil {
			for _, re := range versionREs {
				if m := re.FindSubmatch(b); m != nil {
					return string(m[1])
				}
			}
		}
	}
	return ""
}

func (l Layout) String() string {
	v := l.Version
	if v == "" {
		v = "of unknown version"
	}
	s := fmt.Sprintf("zlib %s: inflate_state %d B, deflate_state %d B", v, l.InflateState, l.DeflateState)
	if !l.Known {
		s += " (zlib " + l.Assumed + "'s, assumed)"
	}
	if l.ZStream != 0 {
		s += fmt.Sprintf(", z_stream %d B (java.util.zip's)", l.ZStream)
	}
	return s
}

// Computed reports whether a zlib's stream bytes are computed from the
// init arguments (ComputedFamily) rather than taken from its mallocs:
// without the malloc family, and when sampling with a zlib library, where
// its mallocs are sampled like any other and its window, allocated inside
// inflate(), could only be traced by probing every inflate() call. There
// the kernel traces none of an init's mallocs (pending_enter) nor a
// window's (zwindow_owner): each stream counts its computed bytes, and its
// window once zlib has made it. zlib's other mallocs (a gzFile's buffers)
// are sampled like any other.
func Computed(mallocTraced, sampled, library bool) bool {
	return !mallocTraced || (sampled && library)
}

// Library reports whether the object at path is a zlib library of its own
// (libz.so.1), not a program or library zlib is built into.
func Library(path string) bool {
	return strings.HasPrefix(filepath.Base(path), "libz.so")
}

// JNIZStreamSize is sizeof(z_stream) on x86-64: java.util.zip's JNI init
// callocs one per stream (OpenJDK's Inflater.c and Deflater.c).
const JNIZStreamSize = 112

// JNIBytes returns, for a JNI fallback pair of kind zlib.inflate or
// zlib.deflate (preset jvm) with malloc not traced, the bytes its cookie
// gives each stream (struct pair_cookie's bytes, ebpf/leakscope.h): the
// z_stream the JNI init callocs and what zlib of layout l allocates in the
// init: its state, and for deflate the buffers of the JDK's Deflater
// (windowBits 15, memLevel 8). l.ZStream must be set: the JNI init's
// z_stream is always java.util.zip's. For inflate, window is 1 (the
// cookie's zwindow) to have the window counted once zlib makes it, on the
// acquire and release probes both.
func JNIBytes(kind string, l Layout) (computed, window uint32) {
	switch kind {
	case "zlib.inflate":
		return l.ZStream + l.InflateState, 1
	case "zlib.deflate":
		return l.ZStream + l.DeflateState + 1<<17 + 1<<17, 0
	}
	return 0, 0
}

// JavaZip reports whether the zlib copy in the object at path is the one
// java.util.zip's JNI code uses in a JVM, whose streams' z_streams are its
// init's callocs (JNIZStreamSize, counted with each stream as the JNI
// fallback counts it): a JDK's libzip.so with zlib compiled in (its
// symbols in .symtab, as Temurin ships it), or the shared libz.so.1 a
// distribution's libzip.so loads. Other callers of that libz in a JVM
// count the 112 B too: the JDK's own (the launcher's and libzip's reading
// of JAR and jimage entries) keep their z_stream on the stack for one call,
// so it is never live at a snapshot; a JNI library of an application that
// keeps a stream across calls must allocate its z_stream as java.util.zip
// does.
func JavaZip(path string) bool {
	base := path[strings.LastIndex(path, "/")+1:]
	return base == "libzip.so" || strings.HasPrefix(base, "libz.so")
}
