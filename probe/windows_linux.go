//go:build linux && amd64

package probe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"

	"golang.org/x/sys/unix"

	"github.com/leakscope/leakscope/probe/kernel"
	"github.com/leakscope/leakscope/probe/target"
)

// windowReads is what the last read of the target's memory found of the
// inflate streams whose window the kernel has not counted (a window word
// in the stream's record).
type windowReads struct {
	bytes   map[windowKey]uint64 // the window zlib allocated, by stream
	stacks  map[windowKey]uint64 // those streams' stacks (their records' stack_id)
	checked map[windowKey]bool   // streams read, with a window or without
	unread  int                  // streams whose state could not be read
}

// windowState is what the reads of the target's memory found of its
// inflate windows: the last read that saw the memory, and whether the
// memory was gone at a later one (the target exited).
type windowState struct {
	reads windowReads
	gone  bool
}

// windowKey is a live inflate stream: its z_stream and kind (zlib.inflate,
// or the JNI fallback's kind).
type windowKey struct {
	strm uint64
	kind uint32
}

// readWindowsLocked reads from the target's memory, for every live inflate
// stream of the current image with a window word, whether zlib allocated its
// window: state->window, of 1 << state->wbits bytes, the state as the init
// left it (the kernel's zwindow_settle, which counts it for good when the
// target exits), unless the window is a traced block itself. A state that does not point back at its stream is not
// the stream's: unread. gone says the target's memory could not be read
// at all (it exited): r is empty then.
func (t *Tracer) readWindowsLocked() (r windowReads, gone bool, err error) {
	var keys []windowKey
	var ws []kernel.Window
	// The state from its back pointer to the window.
	span := max(kernel.InflateStateWindowOff+8, kernel.InflateStateWbitsOff+4)
	err = t.objs.ForEachWindow(func(k kernel.Handle, w kernel.Window) {
		if !k.Orphan && k.Gen == t.execs.gen {
			keys = append(keys, windowKey{k.Addr, k.Kind})
			ws = append(ws, w)
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
		window := binary.LittleEndian.Uint64(b[kernel.InflateStateWindowOff:])
		if window == 0 {
			continue // not allocated (yet)
		}
		// A window sampling traced as a block (the application's own
		// zalloc) is counted as that block (zwindow_settle).
		if traced, err := t.objs.BlockTraced(window, t.execs.gen); err != nil {
			return windowReads{}, false, err
		} else if traced {
			continue
		}
		bytes := uint64(w.Bytes)
		if wbits := binary.LittleEndian.Uint32(b[kernel.InflateStateWbitsOff:]); wbits >= 8 && wbits <= 15 {
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
			if !k.Orphan && k.Gen == t.execs.gen {
				left[windowKey{k.Addr, k.Kind}] = true
			}
		}); err != nil {
			return fmt.Errorf("read inflate windows: %w", err)
		}
		maps.DeleteFunc(t.windows.reads.bytes, func(k windowKey, _ uint64) bool { return !left[k] })
		maps.DeleteFunc(t.windows.reads.stacks, func(k windowKey, _ uint64) bool { return !left[k] })
		maps.DeleteFunc(t.windows.reads.checked, func(k windowKey, _ bool) bool { return !left[k] })
		t.windows.gone = true
		w = t.windows.reads
	}
	t.windows.reads = w
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
	case !t.windows.gone:
		n += uint64(t.windows.reads.unread)
	case settled != t.execs.gen+1:
		// The target exited and the kernel did not count its windows
		// (the probes were detached first, or this kernel's exit
		// tracepoint comes too late): what the last read of its memory
		// did not see is unknown.
		var left uint64
		_ = t.objs.ForEachWindow(func(k kernel.Handle, _ kernel.Window) {
			if !k.Orphan && k.Gen == t.execs.gen && !t.windows.reads.checked[windowKey{k.Addr, k.Kind}] {
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
