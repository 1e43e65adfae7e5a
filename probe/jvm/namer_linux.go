package jvm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/leakscope/leakscope/probe/procfs"
)

// Frame is a return address in the code cache, named.
type Frame struct {
	Name string // see Symbol.Name; "" when the perf map does not know the address
	Kind Kind
	// Chained reports whether this frame keeps the frame-pointer chain,
	// so that the next frame of a frame-pointer walk, its caller, can be
	// trusted. When it is false, Cut says why the callers are unknown.
	Chained bool
	Cut     string
	// File and Line place a Java frame in its source, when known.
	File string
	Line int
	// Inlined are the methods the JIT inlined at this call, innermost
	// first; the frame's own method (Name) called the last of them.
	Inlined []Method
}

// DefaultRefreshInterval is the least time between two perf map dumps a
// Namer asks the JVM for.
const DefaultRefreshInterval = time.Second

// commandTimeout bounds one attach command, the dump of a large code cache
// included.
const commandTimeout = 15 * time.Second

// Namer names return addresses in one JVM's code cache. It asks the JVM to
// write its perf map (Compiler.perfmap) the first time it needs it and
// again, at most once per RefreshInterval, when an address it does not
// know shows up; after the JVM exited it rereads the file if it changed
// (-XX:+DumpPerfMapAtExit writes it at exit). A Namer is not safe for
// concurrent use.
type Namer struct {
	VM              *VM
	RefreshInterval time.Duration
	// Warnf receives problems worth a user's attention, once each.
	Warnf func(format string, args ...any)

	nspid   int
	started time.Time // the JVM's start: older perf maps are another process's
	tmp     *os.Root  // the JVM's /tmp, held so the map stays readable after exit
	perf    *PerfMap
	stamp   fileStamp // of the perf map file perf was read from
	gen     uint64    // perf maps read so far

	fpKnown, preserveFP bool
	fpAsked             bool // the JVM itself answered

	attempted time.Time            // last dump asked for (or file reread), success or not
	covered   time.Time            // perf lists all code alive at this time
	missed    map[uint64]time.Time // addresses not in perf, first miss
	warned    map[string]bool
	exited    bool
	noAttach  bool // stopped in exit(): not asked for a perf map (Exiting)

	// methods names interpreted frames from the JVM's metadata; nil
	// until its VMStructs could be read (methodsTried: last attempt).
	methods      *Methods
	mem          *os.File
	methodsTried time.Time
	// blobs caches Blob's answers by address for blobTTL: stacks share
	// their JIT frames, and each answer costs several reads of the
	// JVM's memory; code freed and reused is named afresh after that.
	blobs map[uint64]blobAnswer
}

type blobAnswer struct {
	f  Frame
	at time.Time
}

// blobTTL bounds how long a code blob's name is trusted without reading
// the code heap again.
const blobTTL = time.Second

// maxBlobAnswers bounds the cache; it starts over when full.
const maxBlobAnswers = 1 << 16

type fileStamp struct {
	mtime time.Time
	size  int64
}

// NewNamer prepares naming for vm; it does not attach to the JVM yet.
func NewNamer(vm *VM, warnf func(format string, args ...any)) (*Namer, error) {
	st, err := procfs.ReadStatus(vm.Pid)
	if err != nil {
		return nil, err
	}
	tmp, err := os.OpenRoot(fmt.Sprintf("/proc/%d/root/tmp", vm.Pid))
	if err != nil {
		return nil, fmt.Errorf("open the /tmp of JVM %d: %w", vm.Pid, err)
	}
	if warnf == nil {
		warnf = func(string, ...any) {}
	}
	n := &Namer{
		VM:              vm,
		RefreshInterval: DefaultRefreshInterval,
		Warnf:           warnf,
		nspid:           st.OwnPid(),
		started:         startTime(vm.Pid),
		tmp:             tmp,
		missed:          map[uint64]time.Time{},
		warned:          map[string]bool{},
	}
	n.preserveFP, n.fpKnown = CommandLineFlag(vm.Pid, "PreserveFramePointer")
	return n, nil
}

// Close releases the JVM's /tmp and memory.
func (n *Namer) Close() error {
	if n.mem != nil {
		n.mem.Close()
	}
	return n.tmp.Close()
}

// methodsRetry is the least time between two attempts to read a starting
// JVM's VMStructs. An attempt costs a few milliseconds; stacks walked
// before one succeeds cannot be walked through compiled Java code.
const methodsRetry = 20 * time.Millisecond

// loadMethods reads the JVM's VMStructs the first time they are ready (a
// launched JVM fills them in while it starts), trying at most once per
// methodsRetry.
func (n *Namer) loadMethods() bool {
	if n.methods != nil {
		return true
	}
	if n.exited || (!n.methodsTried.IsZero() && time.Since(n.methodsTried) < methodsRetry) {
		return false
	}
	n.methodsTried = time.Now()
	if n.mem == nil {
		mem, err := OpenMemory(n.VM.Pid)
		if err != nil {
			n.warnOnce("interpreted Java frames of JVM %d stay unnamed: %v", n.VM.Pid, err)
			n.exited = !alive(n.VM.Pid)
			return false
		}
		n.mem = mem
	}
	m, err := NewMethods(n.mem, n.VM.Object, n.VM.Bias)
	if err != nil {
		if alive(n.VM.Pid) && time.Since(n.started) > 30*time.Second {
			n.warnOnce("interpreted Java frames of JVM %d stay unnamed: %v", n.VM.Pid, err)
		}
		return false
	}
	n.methods = m
	return true
}

// Code returns the JVM's code cache layout once its VMStructs could be
// read: the kernel then records the Method* of each interpreted frame and
// walks compiled frames by their frame size.
func (n *Namer) Code() (Code, bool) {
	if !n.loadMethods() {
		return Code{}, false
	}
	return n.methods.Code(), true
}

// Method names the Method* of an interpreted frame at bytecode index bci
// (-1: unknown) as "package.Class.method" with its source line; the name
// is "" if it cannot be read (the JVM exited, or the method's class was
// unloaded).
func (n *Namer) Method(ptr uint64, bci int) Method {
	if !n.loadMethods() {
		return Method{}
	}
	w, err := n.methods.At(ptr, bci)
	if err != nil && alive(n.VM.Pid) {
		n.warnOnce("JVM %d: an interpreted frame stays unnamed: %v", n.VM.Pid, err)
	}
	return w
}

// PreserveFramePointer reports whether the JVM runs with
// -XX:+PreserveFramePointer, and whether that is known.
func (n *Namer) PreserveFramePointer() (on, known bool) { return n.preserveFP, n.fpKnown }

// Frame names the return address addr. calledNative says that the frame
// below it on the stack (its callee) is native code: the frame is then the
// JVM's transition to native code, a native method's wrapper or the
// interpreter, both of which keep a frame pointer.
func (n *Namer) Frame(addr uint64, calledNative bool) Frame {
	if n.methods != nil {
		if lo, hi := n.methods.Interpreter(); addr >= lo && addr < hi {
			return Frame{Name: Interpreted, Kind: KindInterpreter, Chained: true}
		}
		// The code heap names the blob itself: no perf map, no attach.
		if a, ok := n.blobs[addr]; ok && time.Since(a.at) < blobTTL {
			return a.f
		}
		if f, err := n.methods.Blob(addr); err == nil {
			if n.blobs == nil || len(n.blobs) >= maxBlobAnswers {
				n.blobs = map[uint64]blobAnswer{}
			}
			n.blobs[addr] = blobAnswer{f, time.Now()}
			return f
		}
	}
	s, ok := n.perf.Lookup(addr)
	if !ok && n.shouldRefresh(addr) {
		n.refresh()
		s, ok = n.perf.Lookup(addr)
	}
	f := Frame{Name: s.Name, Kind: s.Kind}
	if ok {
		delete(n.missed, addr)
	}
	switch {
	case n.preserveFP && n.fpKnown, n.methods != nil:
		// The kernel walks compiled frames by their code blob's frame
		// size once it knows the code heaps (see Code).
		f.Chained = true
	case f.Kind == KindInterpreter:
		f.Chained = true // interpreter frames always keep %rbp
	case calledNative && f.Kind == KindMethod:
		f.Chained = true // a native method's wrapper sets up its frame
	default:
		what := "compiled " + f.Name
		switch f.Kind {
		case KindStub:
			what = "JVM stub " + f.Name
		case KindUnknown:
			what = fmt.Sprintf("JIT code at %#x (not in the perf map)", addr)
		}
		why := "JVM runs without -XX:+PreserveFramePointer"
		if !n.fpKnown {
			why = "JVM's -XX:+PreserveFramePointer could not be checked"
		}
		f.Cut = fmt.Sprintf("%s: callers of %s are unknown (restart it with -XX:+PreserveFramePointer)", why, what)
	}
	return f
}

// Pending reports whether some address missed so far may still be named
// by a later refresh.
func (n *Namer) Pending() bool {
	for _, at := range n.missed {
		if !n.covered.After(at) {
			return true
		}
	}
	return false
}

// Exiting says the JVM is stopped in exit() (leakscope run stops it there
// until its stacks are resolved): it is never asked for a perf map again,
// one already written is still read.
func (n *Namer) Exiting() { n.noAttach = true }

// Retry refreshes the perf map if an address was missed since the last
// refresh: at most once per RefreshInterval, or now when final (at the end
// of a capture, while the JVM may still be alive).
func (n *Namer) Retry(final bool) {
	if n.Pending() && (final || time.Since(n.attempted) >= n.RefreshInterval) {
		n.refresh()
	}
}

// Generation changes whenever a new perf map was read: names given before
// may have changed.
func (n *Namer) Generation() uint64 { return n.gen }

// shouldRefresh decides whether a miss of addr is worth a new perf map: not
// when a map taken after its first miss did not have it (the code was gone
// by then), nor more often than RefreshInterval.
func (n *Namer) shouldRefresh(addr uint64) bool {
	now := time.Now()
	first, ok := n.missed[addr]
	if !ok {
		n.missed[addr] = now
		first = now
	}
	if n.covered.After(first) {
		return false
	}
	return n.attempted.IsZero() || now.Sub(n.attempted) >= n.RefreshInterval
}

// refresh asks a live JVM for a new perf map, then reads the file if it
// changed: the map just written, one the JVM wrote at exit
// (-XX:+DumpPerfMapAtExit) or one someone else asked for.
func (n *Namer) refresh() {
	n.attempted = time.Now()
	if !n.exited && !alive(n.VM.Pid) {
		n.exited = true
	}
	if !n.exited && !n.noAttach {
		ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
		defer cancel()
		if !n.fpAsked {
			n.checkFramePointers(ctx)
		}
		if _, err := Execute(ctx, n.VM.Pid, "jcmd", "Compiler.perfmap"); err != nil && !errors.Is(err, ErrNotReady) {
			n.warnOnce("cannot name compiled Java frames of JVM %d: %v", n.VM.Pid, err)
		}
	}
	// The map lists the code alive when it was written.
	if n.load() && n.stamp.mtime.After(n.covered) {
		n.covered = n.stamp.mtime
	}
}

// checkFramePointers asks the JVM whether it preserves frame pointers; the
// answer overrides what the command line said.
func (n *Namer) checkFramePointers(ctx context.Context) {
	out, err := Execute(ctx, n.VM.Pid, "printflag", "PreserveFramePointer")
	if err != nil {
		return
	}
	switch strings.TrimSpace(out) {
	case "-XX:+PreserveFramePointer":
		n.preserveFP, n.fpKnown, n.fpAsked = true, true, true
	case "-XX:-PreserveFramePointer":
		n.preserveFP, n.fpKnown, n.fpAsked = false, true, true
	}
}

// load reads the perf map file if it changed since the last read and was
// written after the JVM started; it reports whether perf is now the file's
// content.
func (n *Namer) load() bool {
	name := "perf-" + strconv.Itoa(n.nspid) + ".map"
	f, err := n.tmp.Open(name)
	if err != nil {
		return false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	stamp := fileStamp{fi.ModTime(), fi.Size()}
	if stamp == n.stamp && n.perf != nil {
		return true
	}
	if !n.started.IsZero() && stamp.mtime.Before(n.started.Add(-2*time.Second)) {
		return false // left by an earlier process with the same pid
	}
	m, err := ParsePerfMap(f)
	if err != nil {
		n.warnOnce("read the perf map of JVM %d: %v", n.VM.Pid, err)
		return false
	}
	n.perf, n.stamp = m, stamp
	n.gen++
	return true
}

func (n *Namer) warnOnce(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if n.warned[msg] {
		return
	}
	n.warned[msg] = true
	n.Warnf("%s", msg)
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}

// userHz is the unit of /proc/<pid>/stat times (USER_HZ, 100 on every
// Linux architecture leakscope supports).
const userHz = 100

// startTime is when process pid started, to the tick, or zero if unknown.
func startTime(pid int) time.Time {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return time.Time{}
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return time.Time{}
	}
	// After ") ": state(3) ... starttime(22).
	f := strings.Fields(string(b[i+1:]))
	if len(f) <= 22-3 {
		return time.Time{}
	}
	ticks, err := strconv.ParseUint(f[22-3], 10, 64)
	if err != nil {
		return time.Time{}
	}
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}
	}
	for _, line := range strings.Split(string(stat), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			boot, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return time.Time{}
			}
			return time.Unix(boot, 0).Add(time.Duration(ticks) * time.Second / userHz)
		}
	}
	return time.Time{}
}
