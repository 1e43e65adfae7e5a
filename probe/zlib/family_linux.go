//go:build linux && amd64

package zlib

import (
	"slices"

	"github.com/leakscope/leakscope/probe/kernel"
	"github.com/leakscope/leakscope/probe/procfs"
	"github.com/leakscope/leakscope/probe/uprobe"
)

// ReadLayout reads the zlib version of the object at path from its
// read-only data and returns the state sizes of that version.
func ReadLayout(path string) Layout {
	v := ""
	if r, err := procfs.OpenFile(nil, path, procfs.ObjectLimits); err == nil {
		defer r.Close()
		v = Version(r)
	}
	return LayoutOf(v)
}

// Family are zlib's stream lifecycles, keyed by the z_stream pointer (the
// first argument of each). Every init ends in an End of its kind.
// inflate() allocates the window lazily: it is probed only where a malloc
// inside it may go untraced or unrecognised (TracedFamily).
var Family = []uprobe.Spec{
	{Symbol: "inflateInit_", Prog: kernel.ZlibInflateInitEnter, Ret: true},
	{Symbol: "inflateInit2_", Prog: kernel.ZlibInflateInitEnter, Ret: true},
	{Symbol: "inflateBackInit_", Prog: kernel.ZlibInflateInitEnter, Ret: true},
	{Symbol: "deflateInit_", Prog: kernel.ZlibDeflateInitEnter, Ret: true},
	{Symbol: "deflateInit2_", Prog: kernel.ZlibDeflateInitEnter, Ret: true},
	{Symbol: "inflateEnd", Prog: kernel.ZlibInflateEndEnter},
	{Symbol: "inflateBackEnd", Prog: kernel.ZlibInflateEndEnter},
	{Symbol: "deflateEnd", Prog: kernel.ZlibDeflateEndEnter},
	{Symbol: "inflate", Prog: kernel.ZlibInflateEnter},
}

// ComputedFamily is Family with the cookies that make the BPF programs
// compute each stream's bytes from its init arguments, for a zlib of
// layout l, instead of taking them from zlib's mallocs.
func ComputedFamily(l Layout) []uprobe.Spec {
	// The kernel adds the state's size (bits 0-15) to what it computes:
	// the z_stream, where counted, goes with it.
	initCookie := func(state uint32, init uint32) uint64 {
		return kernel.ZlibCookie{State: state + l.ZStream, Init: init}.Encode()
	}
	cookies := map[string]uint64{
		"inflateInit_":     initCookie(l.InflateState, kernel.ZinitInflate),
		"inflateInit2_":    initCookie(l.InflateState, kernel.ZinitInflate2),
		"inflateBackInit_": initCookie(l.InflateState, kernel.ZinitBack),
		"deflateInit_":     initCookie(l.DeflateState, kernel.ZinitDeflate),
		"deflateInit2_":    initCookie(l.DeflateState, kernel.ZinitDeflate2),
		"inflateEnd":       1,
		"inflateBackEnd":   1,
	}
	var out []uprobe.Spec
	for _, p := range Family {
		if p.Symbol == "inflate" {
			// Not probed: a trap per call. The window is read from the
			// stream's state instead (the tracer's window reads,
			// target_exit).
			continue
		}
		p.Cookie = cookies[p.Symbol]
		out = append(out, p)
	}
	return out
}

// TracedFamily is Family for the malloc family traced: a stream's bytes
// are the mallocs zlib makes for it. Its window is allocated inside
// inflate(). Every malloc returns through the probes, and in a zlib
// library (libz.so) the kernel tells the window's apart by its state
// (zwindow_owner), so inflate() is not probed there (a trap per call). A
// zlib built into a bigger object (Node.js, a static build, a JDK's
// libzip.so) comes with that program's build and allocator: Node.js hands
// zlib its own zalloc (AllocForZlib, 16 B of header per block, its own
// callee-saved registers over zlib's), and its Chromium zlib asks for the
// window 16 B bigger, so neither the size nor the registers say window;
// inflate() is probed there, and a malloc made from that object while
// inflate() runs is its stream's (zcall_owner); when sampling, such a
// malloc is traced whether sampled or not.
func TracedFamily(library bool) []uprobe.Spec {
	if !library {
		return Family
	}
	return slices.DeleteFunc(slices.Clone(Family), func(p uprobe.Spec) bool { return p.Symbol == "inflate" })
}
