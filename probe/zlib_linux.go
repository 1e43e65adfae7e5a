//go:build linux && amd64

package probe

import (
	"cmp"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/leakscope/leakscope/probe/kernel"
	"github.com/leakscope/leakscope/probe/procfs"
	"github.com/leakscope/leakscope/probe/target"
	"github.com/leakscope/leakscope/probe/uprobe"
)

// zlibLayout is what computing a stream's bytes from its init arguments
// (--malloc off) needs to know of one copy of zlib: the sizes of its
// internal state structs, which differ across zlib versions, and whether
// the z_stream of its streams is java.util.zip's (zstream).
type zlibLayout struct {
	version      string // from the object's copyright string; "" if not found
	inflateState uint32 // sizeof(struct inflate_state)
	deflateState uint32 // sizeof(struct deflate_state)
	known        bool   // the sizes are this version's (else assumed is)
	assumed      string // the release whose sizes stand in when !known
	// zstream is sizeof(z_stream) when each stream's z_stream is a calloc
	// of java.util.zip's JNI init, counted with the stream (jniZStreamSize),
	// else 0: a native program's z_stream is its own memory.
	zstream uint32
}

// zlibRelease is one zlib release's struct sizes on x86-64.
type zlibRelease struct {
	version                    string
	inflateState, deflateState uint32
}

// zlibReleases are sizeof(struct inflate_state) and sizeof(deflate_state)
// on x86-64 for every zlib release whose allocations the BPF programs
// compute (1.2.9 on: ebpf/leakscope.bpf.c), oldest first. 1.2.9 to 1.3.1:
// compiled from each release's inflate.h and deflate.h (tags of
// github.com/madler/zlib; gcc -O2, default options: LIT_MEM, an option of
// 1.3.1, makes deflate_state 5960 B and pending_buf a fifth bigger, and is
// not handled). 1.2.13 also measured: the calloc Debian 12's zlib1g
// 1:1.2.13.dfsg-1 makes for each (examples/c/jdkzipbytes.c on OpenJDK 17).
// 1.3.2: measured the same way on Temurin 25's libzip.so, which bundles
// it: its deflate_state is 16 B bigger (deflate streams 268,112 B against
// 268,096 B).
var zlibReleases = []zlibRelease{
	{"1.2.9", 7160, 5952},
	{"1.2.10", 7160, 5952},
	{"1.2.11", 7160, 5952},
	{"1.2.12", 7160, 5952},
	{"1.2.13", 7160, 5952},
	{"1.3", 7160, 5952},
	{"1.3.1", 7160, 5952},
	{"1.3.2", 7160, 5968},
}

// zlibAssumed is the release whose sizes stand in for a zlib of unknown
// version.
const zlibAssumed = "1.2.13"

// zlibVersionREs find the version zlib embeds in every build:
// inflate_copyright (inftrees.c, kept by the linker: inflate_table
// references it) and deflate_copyright (deflate.c), in a library that has
// only one of them.
var zlibVersionREs = []*regexp.Regexp{
	regexp.MustCompile(` inflate ([0-9][0-9a-z.-]*) Copyright`),
	regexp.MustCompile(` deflate ([0-9][0-9a-z.-]*) Copyright`),
}

// readZlibLayout reads the zlib version of the object at path from its
// read-only data and returns the state sizes of that version.
func readZlibLayout(path string) zlibLayout {
	v := ""
	if r, err := procfs.OpenFile(nil, path, procfs.ObjectLimits); err == nil {
		defer r.Close()
		v = zlibVersion(r)
	}
	return zlibLayoutOf(v)
}

// zlibLayoutOf returns the layout of zlib version v: its release's sizes,
// known; for a version between releases (a development version such as
// 1.3.1.1-motley) or after the last one, the sizes of the release before
// it, assumed; for one older than 1.2.9 or not a version, zlibAssumed's.
func zlibLayoutOf(v string) zlibLayout {
	l := zlibLayout{version: v}
	for _, r := range zlibReleases {
		if r.version == v {
			l.inflateState, l.deflateState, l.known = r.inflateState, r.deflateState, true
			return l
		}
	}
	l.assumed = zlibAssumed
	if n := versionNumbers(v); n != nil && compareVersions(n, versionNumbers(zlibReleases[0].version)) > 0 {
		for _, r := range zlibReleases {
			if compareVersions(versionNumbers(r.version), n) < 0 {
				l.assumed = r.version
			}
		}
	}
	for _, r := range zlibReleases {
		if r.version == l.assumed {
			l.inflateState, l.deflateState = r.inflateState, r.deflateState
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

// zlibVersion finds zlib's copyright string in the read-only data of the
// ELF object r, "" if there is none.
func zlibVersion(r io.ReaderAt) string {
	if f, err := elf.NewFile(r); err == nil {
		for _, name := range []string{".rodata", ".rdata"} {
			sec := f.Section(name)
			if sec == nil {
				continue
			}
			if b, err := sec.Data(); err == nil {
				for _, re := range zlibVersionREs {
					if m := re.FindSubmatch(b); m != nil {
						return string(m[1])
					}
				}
			}
		}
	}
	return ""
}

func (l zlibLayout) String() string {
	v := l.version
	if v == "" {
		v = "of unknown version"
	}
	s := fmt.Sprintf("zlib %s: inflate_state %d B, deflate_state %d B", v, l.inflateState, l.deflateState)
	if !l.known {
		s += " (zlib " + l.assumed + "'s, assumed)"
	}
	if l.zstream != 0 {
		s += fmt.Sprintf(", z_stream %d B (java.util.zip's)", l.zstream)
	}
	return s
}

// zlibComputedFamily is zlibFamily with the cookies that make the BPF
// programs compute each stream's bytes from its init arguments, for a zlib
// of layout l, instead of taking them from zlib's mallocs.
func zlibComputedFamily(l zlibLayout) []uprobe.Spec {
	// The kernel adds the state's size (bits 0-15) to what it computes:
	// the z_stream, where counted, goes with it.
	initCookie := func(state uint32, init uint32) uint64 {
		return kernel.ZlibCookie{State: state + l.zstream, Init: init}.Encode()
	}
	cookies := map[string]uint64{
		"inflateInit_":     initCookie(l.inflateState, kernel.ZinitInflate),
		"inflateInit2_":    initCookie(l.inflateState, kernel.ZinitInflate2),
		"inflateBackInit_": initCookie(l.inflateState, kernel.ZinitBack),
		"deflateInit_":     initCookie(l.deflateState, kernel.ZinitDeflate),
		"deflateInit2_":    initCookie(l.deflateState, kernel.ZinitDeflate2),
		"inflateEnd":       1,
		"inflateBackEnd":   1,
	}
	var out []uprobe.Spec
	for _, p := range zlibFamily {
		if p.Symbol == "inflate" {
			// Not probed: a trap per call. The window is read from the
			// stream's state instead (readWindowsLocked, target_exit).
			continue
		}
		p.Cookie = cookies[p.Symbol]
		out = append(out, p)
	}
	return out
}

// zlibTracedFamily is zlibFamily for the malloc family traced: a stream's
// bytes are the mallocs zlib makes for it. Its window is allocated inside
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
func zlibTracedFamily(library bool) []uprobe.Spec {
	if !library {
		return zlibFamily
	}
	return slices.DeleteFunc(slices.Clone(zlibFamily), func(p uprobe.Spec) bool { return p.Symbol == "inflate" })
}

// zlibComputed reports whether a zlib's stream bytes are computed from the
// init arguments (zlibComputedFamily) rather than taken from its mallocs:
// without the malloc family, and when sampling with a zlib library, where
// its mallocs are sampled like any other and its window, allocated inside
// inflate(), could only be traced by probing every inflate() call. There
// the kernel traces none of an init's mallocs (pending_enter) nor a
// window's (zwindow_owner): each stream counts its computed bytes, and its
// window once zlib has made it. zlib's other mallocs (a gzFile's buffers)
// are sampled like any other.
func zlibComputed(mallocTraced, sampled, library bool) bool {
	return !mallocTraced || (sampled && library)
}

// zlibLibrary reports whether the object at path is a zlib library of its
// own (libz.so.1), not a program or library zlib is built into.
func zlibLibrary(path string) bool {
	return strings.HasPrefix(filepath.Base(path), "libz.so")
}

// windowReads is what the last read of the target's memory found of the
// inflate streams whose window the kernel has not counted (zwindows).
type windowReads struct {
	bytes   map[windowKey]uint64 // the window zlib allocated, by stream
	stacks  map[windowKey]uint64 // those streams' stacks (zwindow.stack_id)
	checked map[windowKey]bool   // streams read, with a window or without
	unread  int                  // streams whose state could not be read
}

// windowKey is a live inflate stream: its z_stream and kind (zlib.inflate,
// or the JNI fallback's kind).
type windowKey struct {
	strm uint64
	kind uint32
}

// readWindowsLocked reads from the target's memory, for every live inflate
// stream of the current image in zwindows, whether zlib allocated its
// window: state->window, of 1 << state->wbits bytes, the state as the init
// left it (the kernel's zwindow_settle, which counts it for good when the
// target exits), unless the window is a traced block itself. A state that does not point back at its stream is not
// the stream's: unread. gone says the target's memory could not be read
// at all (it exited): r is empty then.
func (t *Tracer) readWindowsLocked() (r windowReads, gone bool, err error) {
	var keys []windowKey
	var ws []kernel.Window
	span := 0 // the state from its back pointer to the window
	err = t.objs.ForEachWindow(func(k kernel.Handle, w kernel.Window) {
		if !k.Orphan && k.Gen == t.execGen {
			keys = append(keys, windowKey{k.Addr, k.Kind})
			ws = append(ws, w)
			span = max(span, int(w.WindowOff)+8, int(w.WbitsOff)+4)
		}
	})
	if err != nil || len(keys) == 0 {
		return r, false, err
	}
	states, ok := make([]uint64, len(keys)), make([]bool, len(keys))
	var unknown []uint64 // streams whose state the kernel could not read
	for i, w := range ws {
		states[i], ok[i] = w.State, w.State != 0
		if w.State == 0 {
			unknown = append(unknown, keys[i].strm)
		}
	}
	if len(unknown) > 0 {
		words, wok, err := readWords(t.pid, unknown, kernel.ZstreamStateOff) // offsetof(z_stream, state)
		if errors.Is(err, unix.ESRCH) {
			return windowReads{}, true, nil
		}
		k := 0
		for i, w := range ws {
			if w.State == 0 {
				states[i], ok[i] = words[k], wok[k]
				k++
			}
		}
	}
	var live []uint64
	for i, s := range states {
		if ok[i] && s != 0 {
			live = append(live, s)
		}
	}
	buf, bufOK, err := readRemote(t.pid, live, span)
	if errors.Is(err, unix.ESRCH) {
		return windowReads{}, true, nil
	}
	r.checked = map[windowKey]bool{}
	j := 0
	for i, k := range keys {
		if !ok[i] || states[i] == 0 {
			r.unread++
			continue
		}
		b, good := buf[j*span:(j+1)*span], bufOK[j]
		j++
		if !good || binary.LittleEndian.Uint64(b) != k.strm {
			r.unread++
			continue
		}
		r.checked[k] = true
		w := ws[i]
		window := binary.LittleEndian.Uint64(b[w.WindowOff:])
		if window == 0 {
			continue // not allocated (yet)
		}
		// A window sampling traced as a block (the application's own
		// zalloc) is counted as that block (zwindow_settle).
		if traced, err := t.objs.BlockTraced(window, t.execGen); err != nil {
			return windowReads{}, false, err
		} else if traced {
			continue
		}
		bytes := uint64(w.Bytes)
		if wbits := binary.LittleEndian.Uint32(b[w.WbitsOff:]); wbits >= 8 && wbits <= 15 {
			bytes = 1 << wbits
		}
		if r.bytes == nil {
			r.bytes, r.stacks = map[windowKey]uint64{}, map[windowKey]uint64{}
		}
		r.bytes[k], r.stacks[k] = bytes, w.Stack
	}
	return r, false, nil
}

// readWords reads the 64-bit word at addr+off of every addr in pid's
// memory; ok says which reads succeeded (readRemote).
func readWords(pid int, addrs []uint64, off uint64) ([]uint64, []bool, error) {
	at := make([]uint64, len(addrs))
	for i, a := range addrs {
		at[i] = a + off
	}
	b, ok, err := readRemote(pid, at, 8)
	words := make([]uint64, len(addrs))
	for i := range words {
		words[i] = binary.LittleEndian.Uint64(b[i*8:])
	}
	return words, ok, err
}

// readRemote reads size bytes at each of addrs in pid's memory with
// process_vm_readv, up to 1024 ranges a call; ok says which ranges were
// read whole. A range the kernel cannot read (EFAULT) ends a call's reads:
// the rest are read again from the one after it. Any other error (ESRCH:
// the process is gone; EPERM) ends the reading and is returned.
func readRemote(pid int, addrs []uint64, size int) (buf []byte, ok []bool, err error) {
	buf = make([]byte, len(addrs)*size)
	ok = make([]bool, len(addrs))
	const batch = 1024
	local := make([]unix.Iovec, 0, batch)
	remote := make([]unix.RemoteIovec, 0, batch)
	for i := 0; i < len(addrs); {
		n := min(batch, len(addrs)-i)
		local, remote = local[:0], remote[:0]
		for k := i; k < i+n; k++ {
			iov := unix.Iovec{Base: &buf[k*size]}
			iov.SetLen(size)
			local = append(local, iov)
			remote = append(remote, unix.RemoteIovec{Base: uintptr(addrs[k]), Len: size})
		}
		got, err := unix.ProcessVMReadv(pid, local, remote, 0)
		if err != nil && got <= 0 {
			if err != unix.EFAULT {
				return buf, ok, err
			}
			i++ // the first range failed: skip it
			continue
		}
		whole := got / size
		for k := i; k < i+whole; k++ {
			ok[k] = true
		}
		if whole == n {
			i += n
		} else {
			i += whole + 1 // the range that failed, or was cut, is skipped
		}
	}
	return buf, ok, nil
}

// addWindowsLocked adds to this read's site totals the windows zlib
// allocated for live inflate streams that the kernel has not counted
// (readWindowsLocked): a snapshot's bytes include them, though the kernel's
// tables do not until the target exits. Called by readSitesLocked after
// the sites are read. Once the target is gone, what the last read found
// stands for the streams still uncounted (the kernel counts them as the
// target exits, where it can: target_exit).
func (t *Tracer) addWindowsLocked() error {
	w, gone, err := t.readWindowsLocked()
	if err != nil {
		return fmt.Errorf("read inflate windows: %w", err)
	}
	if gone {
		left := map[windowKey]bool{}
		if err := t.objs.ForEachWindow(func(k kernel.Handle, _ kernel.Window) {
			if !k.Orphan && k.Gen == t.execGen {
				left[windowKey{k.Addr, k.Kind}] = true
			}
		}); err != nil {
			return fmt.Errorf("read inflate windows: %w", err)
		}
		maps.DeleteFunc(t.windows.bytes, func(k windowKey, _ uint64) bool { return !left[k] })
		maps.DeleteFunc(t.windows.stacks, func(k windowKey, _ uint64) bool { return !left[k] })
		maps.DeleteFunc(t.windows.checked, func(k windowKey, _ bool) bool { return !left[k] })
		t.windowsGone = true
		w = t.windows
	}
	t.windows = w
	// An entry stands for a live stream (its End removes it), whose
	// stack the kernel kept with it: no kernel table lookup per stream.
	st := t.sites
	for k, bytes := range w.bytes {
		slot, ok := st.streams[target.SiteKey{Stack: w.stacks[k], Kind: k.kind}]
		if ok && st.mark[slot] == st.read {
			st.acc[slot].LiveBytes += bytes
		}
	}
	return nil
}

// warnWindowsLocked says, at the end of a capture with malloc not traced,
// how many live inflate streams' windows could not be read: their bytes
// leave the window out.
func (t *Tracer) warnWindowsLocked() {
	n, _ := t.objs.Stat(kernel.StatWindowsUnread)
	settled, _ := t.objs.ExitSettled()
	switch {
	case !t.windowsGone:
		n += uint64(t.windows.unread)
	case settled != t.execGen+1:
		// The target exited and the kernel did not count its windows
		// (the probes were detached first, or this kernel's exit
		// tracepoint comes too late): what the last read of its memory
		// did not see is unknown.
		var left uint64
		_ = t.objs.ForEachWindow(func(k kernel.Handle, _ kernel.Window) {
			if !k.Orphan && k.Gen == t.execGen && !t.windows.checked[windowKey{k.Addr, k.Kind}] {
				left++
			}
		})
		if left > 0 {
			t.warnOnce(fmt.Sprintf("%d live inflate streams may have a window (up to 32 KiB each) that is not counted: the target exited after the last read of its memory, and the kernel did not count windows as it exited (the capture ended first, or this kernel's sched_process_exit comes after the memory is gone); --malloc on counts windows from zlib's mallocs", left))
		}
	}
	if n > 0 {
		t.warnOnce(fmt.Sprintf("%d live inflate streams' windows could not be read from the target's memory (its z_stream was overwritten or unreadable): their bytes leave out the window (up to 32 KiB each); --malloc on counts windows from zlib's mallocs", n))
	}
}

// jniZStreamSize is sizeof(z_stream) on x86-64: java.util.zip's JNI init
// callocs one per stream (OpenJDK's Inflater.c and Deflater.c).
const jniZStreamSize = 112

// jniZlibBytes returns, for a JNI fallback pair of kind zlib.inflate or
// zlib.deflate (preset jvm) with malloc not traced, the bytes its cookie
// gives each stream (struct pair_cookie's bytes, ebpf/leakscope.h): the
// z_stream the JNI init callocs and what zlib of layout l allocates in the
// init: its state, and for deflate the buffers of the JDK's Deflater
// (windowBits 15, memLevel 8). l.zstream must be set: the JNI init's
// z_stream is always java.util.zip's. For inflate, window is 1 (the
// cookie's zwindow) to have the window counted once zlib makes it, on the
// acquire and release probes both.
func jniZlibBytes(kind string, l zlibLayout) (computed, window uint32) {
	switch kind {
	case "zlib.inflate":
		return l.zstream + l.inflateState, 1
	case "zlib.deflate":
		return l.zstream + l.deflateState + 1<<17 + 1<<17, 0
	}
	return 0, 0
}

// javaZipZlib reports whether the zlib copy in the object at path is the
// one java.util.zip's JNI code uses in a JVM, whose streams' z_streams are
// its init's callocs (jniZStreamSize, counted with each stream as the JNI
// fallback counts it): a JDK's libzip.so with zlib compiled in (its
// symbols in .symtab, as Temurin ships it), or the shared libz.so.1 a
// distribution's libzip.so loads. Other callers of that libz in a JVM
// count the 112 B too: the JDK's own (the launcher's and libzip's reading
// of JAR and jimage entries) keep their z_stream on the stack for one call,
// so it is never live at a snapshot; a JNI library of an application that
// keeps a stream across calls must allocate its z_stream as java.util.zip
// does.
func javaZipZlib(path string) bool {
	base := path[strings.LastIndex(path, "/")+1:]
	return base == "libzip.so" || strings.HasPrefix(base, "libz.so")
}
