package probe

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"

	"github.com/leakscope/leakscope/probe/procfs"
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

// zstreamStateOff is offsetof(z_stream, state): ZSTREAM_STATE_OFF in
// ebpf/leakscope.h, which also has where the state holds its window.
const zstreamStateOff = 56

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
	if r, err := procfs.OpenFile(nil, path, procfs.ObjectLimits); err == nil {
		defer r.Close()
		l.version = zlibVersion(r)
	}
	sizes, ok := zlibStateSizes[l.version]
	if !ok {
		sizes = zlibStateSizes[zlibAssumed]
	}
	l.inflateState, l.deflateState, l.known = sizes[0], sizes[1], ok
	return l
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
				if m := zlibVersionRE.FindSubmatch(b); m != nil {
					return string(m[1])
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
	}
	var out []probeSpec
	for _, p := range zlibFamily {
		if p.symbol == "inflate" {
			// Not probed: a trap per call. The window is read from the
			// stream's state instead (readWindowsLocked, target_exit).
			continue
		}
		p.cookie = cookies[p.symbol]
		out = append(out, p)
	}
	return out
}

// zlibTracedFamily is zlibFamily for the malloc family traced: a stream's
// bytes are the mallocs zlib makes for it. Its window is allocated inside
// inflate(); in exact mode every malloc returns through the probes, and the
// kernel tells the window's apart by its state (zwindow_owner), so
// inflate() is not probed (a trap per call). When sampling, a malloc is
// traced only if sampled or made inside a call known to build a resource:
// inflate() is probed then, so that the window is always traced.
func zlibTracedFamily(sampled bool) []probeSpec {
	if sampled {
		return zlibFamily
	}
	return slices.DeleteFunc(slices.Clone(zlibFamily), func(p probeSpec) bool { return p.symbol == "inflate" })
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
// target exits). A state that does not point back at its stream is not
// the stream's: unread. gone says the target's memory could not be read
// at all (it exited): r is empty then.
func (t *Tracer) readWindowsLocked() (r windowReads, gone bool, err error) {
	var keys []windowKey
	var ws []leakZwindow
	pad := t.execGen << 1
	span := 0 // the state from its back pointer to the window
	err = forEach(t.objs.Zwindows, func(k *leakHandleKey, w *leakZwindow) {
		if k.Pad == pad {
			keys = append(keys, windowKey{k.Addr, k.Kind})
			ws = append(ws, *w)
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
		words, wok, err := readWords(t.pid, unknown, zstreamStateOff)
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
		if binary.LittleEndian.Uint64(b[w.WindowOff:]) == 0 {
			continue // not allocated (yet)
		}
		bytes := uint64(w.Bytes)
		if wbits := binary.LittleEndian.Uint32(b[w.WbitsOff:]); wbits >= 8 && wbits <= 15 {
			bytes = 1 << wbits
		}
		if r.bytes == nil {
			r.bytes, r.stacks = map[windowKey]uint64{}, map[windowKey]uint64{}
		}
		r.bytes[k], r.stacks[k] = bytes, w.StackId
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
		pad := t.execGen << 1
		if err := forEach(t.objs.Zwindows, func(k *leakHandleKey, _ *leakZwindow) {
			if k.Pad == pad {
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
		slot, ok := st.streams[kernelSite{w.stacks[k], k.kind}]
		if ok && st.mark[slot] == st.read {
			st.acc[slot].LiveBytes += bytes
		}
	}
	return nil
}

// exitHookSupported reports whether the kernel's sched_process_exit
// tracepoint has group_dead: since Linux 6.13 it comes before exit_mm(),
// with the exiting task's memory still readable, which target_exit needs.
func exitHookSupported() bool {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return false
	}
	var td *btf.Typedef
	if err := spec.TypeByName("btf_trace_sched_process_exit", &td); err != nil {
		return false
	}
	ptr, ok := td.Type.(*btf.Pointer)
	if !ok {
		return false
	}
	fp, ok := ptr.Target.(*btf.FuncProto)
	return ok && len(fp.Params) >= 3 // ctx, task, group_dead
}

// useExitHook reports whether target_exit can load on this kernel
// (exitHookSupported); where it cannot, it puts a stand-in in spec, never
// attached, that keeps the object loadable.
func useExitHook(spec *ebpf.CollectionSpec) bool {
	if exitHookSupported() {
		return true
	}
	stand := spec.Programs["target_exec"].Copy()
	stand.Name = "target_exit"
	spec.Programs["target_exit"] = stand
	return false
}

// warnWindowsLocked says, at the end of a capture with malloc not traced,
// how many live inflate streams' windows could not be read: their bytes
// leave the window out.
func (t *Tracer) warnWindowsLocked() {
	var perCPU []uint64
	var n uint64
	if err := t.objs.Stats.Lookup(uint32(leakStatIndexSTAT_WINDOWS_UNREAD), &perCPU); err == nil {
		for _, v := range perCPU {
			n += v
		}
	}
	var settled uint32
	_ = t.objs.ExitSettled.Get(&settled)
	switch {
	case !t.windowsGone:
		n += uint64(t.windows.unread)
	case settled != t.execGen+1:
		// The target exited and the kernel did not count its windows
		// (the probes were detached first, or this kernel's exit
		// tracepoint comes too late): what the last read of its memory
		// did not see is unknown.
		pad := t.execGen << 1
		var left uint64
		_ = forEach(t.objs.Zwindows, func(k *leakHandleKey, _ *leakZwindow) {
			if k.Pad == pad && !t.windows.checked[windowKey{k.Addr, k.Kind}] {
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

// jniZlibCookie returns, for a JNI fallback pair of kind zlib.inflate or
// zlib.deflate (preset jvm) with malloc not traced, the cookie bits that
// give each stream its bytes (COOKIE_BYTES in ebpf/leakscope.bpf.c): the
// z_stream the JNI init callocs and what zlib of layout l allocates in the
// init: its state, and for deflate the buffers of the JDK's Deflater
// (windowBits 15, memLevel 8). For inflate, window is the bit
// (COOKIE_ZWINDOW) that has the window counted once zlib makes it, on the
// acquire and release probes both.
func jniZlibCookie(kind string, l zlibLayout) (computed, window uint64) {
	switch kind {
	case "zlib.inflate":
		return uint64(jniZStreamSize+l.inflateState) << 32, 1 << 28
	case "zlib.deflate":
		return uint64(jniZStreamSize+l.deflateState+1<<17+1<<17) << 32, 0
	}
	return 0, 0
}
