package probe

import (
	"debug/elf"
	"fmt"
	"regexp"
)

// zlibLayout is what computing a stream's bytes from its init arguments
// (--malloc off) needs to know of one copy of zlib: the sizes of its
// internal state structs, which differ across zlib versions.
type zlibLayout struct {
	version      string // from the object's copyright string; "" if not found
	inflateState uint32 // sizeof(struct inflate_state)
	deflateState uint32 // sizeof(struct deflate_state)
	known        bool   // the sizes are known for this version (else 1.2.13's are assumed)
}

// zlibStateSizes are sizeof(struct inflate_state) and sizeof(struct
// deflate_state) on x86-64, by zlib version. Measured: the calloc zlib
// 1.2.13 (Debian 12, zlib1g 1:1.2.13.dfsg-1) makes for each, traced with
// the malloc family (examples/c/zstreams.c's calibration agrees).
var zlibStateSizes = map[string][2]uint32{
	"1.2.13": {7160, 5952},
}

// zlibAssumed is the version whose sizes stand in for an unknown one.
const zlibAssumed = "1.2.13"

// zlibVersionRE finds the version zlib embeds in every build
// (inflate_copyright in inftrees.c, kept by the linker: inflate_table
// references it).
var zlibVersionRE = regexp.MustCompile(` inflate ([0-9][0-9a-z.-]*) Copyright`)

// readZlibLayout reads the zlib version of the object at path from its
// read-only data and returns the state sizes of that version.
func readZlibLayout(path string) zlibLayout {
	l := zlibLayout{}
	if f, err := elf.Open(path); err == nil {
		for _, name := range []string{".rodata", ".rdata"} {
			sec := f.Section(name)
			if sec == nil {
				continue
			}
			if b, err := sec.Data(); err == nil {
				if m := zlibVersionRE.FindSubmatch(b); m != nil {
					l.version = string(m[1])
					break
				}
			}
		}
		f.Close()
	}
	sizes, ok := zlibStateSizes[l.version]
	if !ok {
		sizes = zlibStateSizes[zlibAssumed]
	}
	l.inflateState, l.deflateState, l.known = sizes[0], sizes[1], ok
	return l
}

func (l zlibLayout) String() string {
	v := l.version
	if v == "" {
		v = "of unknown version"
	}
	s := fmt.Sprintf("zlib %s: inflate_state %d B, deflate_state %d B", v, l.inflateState, l.deflateState)
	if !l.known {
		s += " (zlib " + zlibAssumed + "'s, assumed)"
	}
	return s
}

// Which init function a zlib probe is on, for the computed bytes (ZINIT_*
// in ebpf/leakscope.bpf.c).
const (
	zinitInflate  = 1
	zinitInflate2 = 2
	zinitBack     = 3
	zinitDeflate  = 4
	zinitDeflate2 = 5
)

// zlibComputedFamily is zlibFamily with the cookies that make the BPF
// programs compute each stream's bytes from its init arguments, for a zlib
// of layout l, instead of taking them from zlib's mallocs.
func zlibComputedFamily(l zlibLayout) []probeSpec {
	initCookie := func(state uint32, init uint64) uint64 { return uint64(state) | init<<16 }
	cookies := map[string]uint64{
		"inflateInit_":     initCookie(l.inflateState, zinitInflate),
		"inflateInit2_":    initCookie(l.inflateState, zinitInflate2),
		"inflateBackInit_": initCookie(l.inflateState, zinitBack),
		"deflateInit_":     initCookie(l.deflateState, zinitDeflate),
		"deflateInit2_":    initCookie(l.deflateState, zinitDeflate2),
		"inflateEnd":       1,
		"inflateBackEnd":   1,
		"inflate":          1,
	}
	out := make([]probeSpec, len(zlibFamily))
	for i, p := range zlibFamily {
		p.cookie = cookies[p.symbol]
		out[i] = p
	}
	return out
}
