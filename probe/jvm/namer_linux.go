package jvm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

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
	// Partial says why the methods the JIT inlined at this call, and the
	// line, are unknown though this JVM's tables describe them ("" when
	// they are known, or when the JVM lacks the fields: Gaps).
	Partial string
}

// DefaultRefreshInterval is the least time between two perf map dumps a
// Namer asks the JVM for.
const DefaultRefreshInterval = time.Second

// Bounds on the I/O a Namer does with the JVM, which its target controls.
const (
	// refreshBudget bounds one refresh: starting the attach listener,
	// asking for the flag and the perf map (each exchange within
	// ReplyTimeout), reading the map.
	refreshBudget = 6 * time.Second
	// finalWait bounds how long Retry(true), at the end of a capture,
	// waits for a refresh to end.
	finalWait = 2 * time.Second
)

// Namer names return addresses in one JVM's code cache. It asks the JVM to
// write its perf map (Compiler.perfmap) the first time it needs it and
// again, at most once per RefreshInterval, when an address it does not
// know shows up; after the JVM exited it rereads the file if it changed
// (-XX:+DumpPerfMapAtExit writes it at exit).
//
// Asking the JVM and reading the map happen on a goroutine of their own,
// one refresh at a time, so that no caller waits on the JVM: a name found
// by a refresh is given from the next call on (Generation changes), and
// only Retry(true), at the end of a capture, waits for it, finalWait at
// most. A JVM that answers the attach protocol wrongly (too much, too
// late, garbage) is not asked again. Close, or the end of the context
// given to NewNamer (Ctrl-C), abandons a refresh. A Namer is not safe for
// concurrent use by its callers; Warnf is called on the callers'
// goroutine.
type Namer struct {
	VM              *VM
	RefreshInterval time.Duration
	// Warnf receives problems worth a user's attention, once each.
	Warnf func(format string, args ...any)

	ctx     context.Context
	cancel  context.CancelFunc
	nspid   int
	uid     int       // the JVM's effective uid: its perf map's owner
	started time.Time // the JVM's start: older perf maps are another process's
	// tmp is the JVM's /tmp (O_PATH), held so the map stays readable
	// after exit.
	tmp *os.File

	attempted time.Time            // last dump asked for (or file reread), success or not
	missed    map[uint64]time.Time // addresses not in perf, first miss
	noAttach  bool                 // stopped in exit(): not asked for a perf map (Exiting)
	waitedOut bool                 // a final Retry waited finalWait in vain: the next does not wait

	// methods names interpreted frames from the JVM's metadata; nil
	// until its VMStructs could be read (methodsTried: last attempt).
	methods      *Methods
	mem          *os.File
	methodsTried time.Time
	methodsOff   bool // the JVM's tables lack what naming takes: not read again
	// blobs caches Blob's answers by address for blobTTL: stacks share
	// their JIT frames, and each answer costs several reads of the
	// JVM's memory; code freed and reused is named afresh after that.
	blobs map[uint64]blobAnswer

	mu sync.Mutex // guards what follows, shared with the refresh goroutine
	// perf is the perf map, read from the file with stamp; gen counts
	// the maps read so far.
	perf  *PerfMap
	stamp fileStamp
	gen   uint64
	// covered: perf lists all code alive at this time.
	covered             time.Time
	fpKnown, preserveFP bool
	fpAsked             bool // the JVM itself answered
	exited              bool
	attachOff           bool          // the attach protocol failed: not asked again
	running             chan struct{} // closed when the running refresh ends; nil if none
	doing               string        // what the running refresh waits for
	closed              bool          // Close was called: the last refresh closes tmp
	// made are the files of the JVM's /tmp that were there only because
	// of a refresh (the perf map Compiler.perfmap wrote, the attach
	// listener's socket leakscope started it for), by name: Close
	// removes them.
	made     map[string]bool
	warned   map[string]bool
	warnings []string // for Warnf, on the callers' goroutine
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

// NewNamer prepares naming for vm; it does not attach to the JVM yet. ctx
// bounds the Namer's I/O with the JVM: once it ends, a pending command is
// abandoned and no new one is sent.
func NewNamer(ctx context.Context, vm *VM, warnf func(format string, args ...any)) (*Namer, error) {
	st, err := procfs.ReadStatus(vm.Pid)
	if err != nil {
		return nil, err
	}
	dir := fmt.Sprintf("/proc/%d/root/tmp", vm.Pid)
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open the /tmp of JVM %d: %w", vm.Pid, &os.PathError{Op: "open", Path: dir, Err: err})
	}
	if warnf == nil {
		warnf = func(string, ...any) {}
	}
	n := &Namer{
		VM:              vm,
		RefreshInterval: DefaultRefreshInterval,
		Warnf:           warnf,
		nspid:           st.OwnPid(),
		uid:             st.UID[1],
		started:         startTime(vm.Pid),
		tmp:             os.NewFile(uintptr(fd), dir),
		missed:          map[uint64]time.Time{},
		warned:          map[string]bool{},
	}
	n.ctx, n.cancel = context.WithCancel(ctx)
	n.preserveFP, n.fpKnown = CommandLineFlag(vm.Pid, "PreserveFramePointer")
	return n, nil
}

// Close abandons a running refresh and releases the JVM's /tmp and memory.
func (n *Namer) Close() error {
	n.cancel()
	if n.mem != nil {
		n.mem.Close()
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	if n.running != nil {
		return nil // the refresh removes what it made and closes tmp when it ends
	}
	n.removeMadeLocked()
	return n.tmp.Close()
}

// removeMadeLocked removes the files of the JVM's /tmp a refresh made
// (made), each if it still is what it was: a perf map that is a regular
// file of the JVM's user, a socket. A perf map the JVM writes itself at
// exit (-XX:+DumpPerfMapAtExit) was never counted as made.
func (n *Namer) removeMadeLocked() {
	for name := range n.made {
		var st unix.Stat_t
		if err := unix.Fstatat(int(n.tmp.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue
		}
		kind := st.Mode & unix.S_IFMT
		if (kind == unix.S_IFREG && int(st.Uid) == n.uid) || kind == unix.S_IFSOCK {
			if err := unix.Unlinkat(int(n.tmp.Fd()), name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
				// Queued, as warnOnce does (mu is held): Close's
				// caller flushes it (Stop warns after detaching).
				n.warnings = append(n.warnings, fmt.Sprintf("JVM %d: remove /tmp/%s, which leakscope caused: %v", n.VM.Pid, name, err))
			}
		}
	}
	n.made = nil
}

// exists reports whether the JVM's /tmp has a file name.
func (n *Namer) exists(name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(int(n.tmp.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil
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
	n.mu.Lock()
	exited := n.exited
	n.mu.Unlock()
	if exited || n.methodsOff || (!n.methodsTried.IsZero() && time.Since(n.methodsTried) < methodsRetry) {
		return false
	}
	n.methodsTried = time.Now()
	if n.mem == nil {
		mem, err := OpenMemory(n.VM.Pid)
		if err != nil {
			n.warnOnce("interpreted Java frames of JVM %d stay unnamed: %v", n.VM.Pid, err)
			if !alive(n.VM.Pid) {
				n.mu.Lock()
				n.exited = true
				n.mu.Unlock()
			}
			return false
		}
		n.mem = mem
	}
	m, err := NewMethods(n.mem, n.VM.Object, n.VM.Bias)
	var layout *LayoutError
	switch {
	case errors.As(err, &layout):
		// Permanent: this JVM's layout is not one leakscope knows.
		n.warnOnce("JVM %d (%s): Java frames stay unnamed ([interpreted]): %v", n.VM.Pid, n.VM.Build(), err)
		n.methodsOff = true
		return false
	case err != nil:
		if alive(n.VM.Pid) && time.Since(n.started) > 30*time.Second {
			n.warnOnce("interpreted Java frames of JVM %d stay unnamed: %v", n.VM.Pid, err)
		}
		return false
	}
	for _, g := range m.Gaps() {
		n.warnOnce("JVM %d (%s): %v", n.VM.Pid, n.VM.Build(), g)
	}
	n.methods = m
	return true
}

// Code returns the JVM's code cache layout once its VMStructs could be
// read: the kernel then records the Method* of each interpreted frame and
// walks compiled frames by their frame size.
func (n *Namer) Code() (Code, bool) {
	defer n.flush()
	if !n.loadMethods() {
		return Code{}, false
	}
	c := n.methods.Code()
	c.FramePointers, _ = n.PreserveFramePointer()
	return c, true
}

// Method names the Method* of an interpreted frame at bytecode index bci
// (-1: unknown) as "package.Class.method" with its source line; the name
// is "" if it cannot be read (the JVM exited, or the method's class was
// unloaded).
func (n *Namer) Method(ptr uint64, bci int) Method {
	defer n.flush()
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
func (n *Namer) PreserveFramePointer() (on, known bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.preserveFP, n.fpKnown
}

// Frame names the return address addr. calledNative says that the frame
// below it on the stack (its callee) is native code: the frame is then the
// JVM's transition to native code, a native method's wrapper or the
// interpreter, both of which keep a frame pointer. The JVM's code heap,
// read through its VMStructs, names the address where it can; an address
// neither it nor the perf map has starts a refresh (see Namer) and is
// unnamed for now.
func (n *Namer) Frame(addr uint64, calledNative bool) Frame {
	defer n.flush()
	// VMStructs first: the perf map, which takes the attach protocol and
	// files in the JVM's /tmp, only for what they cannot name.
	n.loadMethods()
	if n.methods != nil {
		if lo, hi := n.methods.Interpreter(); addr >= lo && addr < hi {
			return Frame{Name: Interpreted, Kind: KindInterpreter, Chained: true}
		}
	}
	if n.methods != nil && n.methods.Walks() {
		// The code heap names the blob itself: no perf map, no attach.
		if a, ok := n.blobs[addr]; ok && time.Since(a.at) < blobTTL {
			return wrapper(a.f, calledNative)
		}
		if f, err := n.methods.Blob(addr); err == nil {
			if n.blobs == nil || len(n.blobs) >= maxBlobAnswers {
				n.blobs = map[uint64]blobAnswer{}
			}
			n.blobs[addr] = blobAnswer{f, time.Now()}
			return wrapper(f, calledNative)
		}
	}
	n.mu.Lock()
	s, ok := n.perf.Lookup(addr)
	preserveFP, fpKnown := n.preserveFP, n.fpKnown
	n.mu.Unlock()
	if ok {
		delete(n.missed, addr)
	} else if n.shouldRefresh(addr) {
		n.startRefresh()
	}
	f := Frame{Name: s.Name, Kind: s.Kind}
	switch {
	case preserveFP && fpKnown, n.methods != nil && n.methods.Walks():
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
		if !fpKnown {
			why = "JVM's -XX:+PreserveFramePointer could not be checked"
		}
		// The flag is the remedy only because the tables are not: say
		// which fields leakscope could not find.
		if n.methodsOff {
			why = fmt.Sprintf("JVM's VMStructs (%s) do not describe its frames and it runs without -XX:+PreserveFramePointer", n.VM.Build())
		} else if n.methods != nil {
			why = fmt.Sprintf("JVM's VMStructs (%s) do not describe its code heap and it runs without -XX:+PreserveFramePointer", n.VM.Build())
		}
		f.Cut = fmt.Sprintf("%s: callers of %s are unknown (restart it with -XX:+PreserveFramePointer)", why, what)
	}
	return f
}

// wrapper drops Partial from a frame that called native code: a native
// method's wrapper, which has no scopes to read (its method is its name).
// For any other compiled frame, no scope at a return address means the
// code there is not the code the walk saw.
func wrapper(f Frame, calledNative bool) Frame {
	if calledNative {
		f.Partial = ""
	}
	return f
}

// Pending reports whether some address missed so far may still be named
// by a later refresh.
func (n *Namer) Pending() bool {
	n.mu.Lock()
	covered := n.covered
	n.mu.Unlock()
	for _, at := range n.missed {
		if !covered.After(at) {
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
// of a capture, while the JVM may still be alive). When final, it waits
// for the refresh, finalWait at most.
func (n *Namer) Retry(final bool) {
	defer n.flush()
	if n.Pending() && (final || time.Since(n.attempted) >= n.RefreshInterval) {
		n.attempted = time.Now()
		n.startRefresh()
	}
	if final && !n.waitedOut {
		n.waitedOut = !n.wait(finalWait)
	}
}

// Generation changes whenever a new perf map was read: names given before
// may have changed.
func (n *Namer) Generation() uint64 {
	defer n.flush()
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.gen
}

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
	n.mu.Lock()
	covered := n.covered
	n.mu.Unlock()
	if covered.After(first) {
		return false
	}
	if !n.attempted.IsZero() && now.Sub(n.attempted) < n.RefreshInterval {
		return false
	}
	n.attempted = now
	return true
}

// startRefresh starts a refresh on a goroutine of its own unless one is
// running (its map will serve) or the Namer is done.
func (n *Namer) startRefresh() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.running != nil || n.closed {
		return
	}
	done := make(chan struct{})
	n.running = done
	ask := !n.noAttach && !n.attachOff && !n.exited && n.ctx.Err() == nil
	go n.refresh(ask, done)
}

// wait waits for a running refresh to end, at most d, and reports whether
// none is running now. A refresh still waiting on the JVM then is
// reported. Once the Namer's context ended, a refresh reads the perf map
// file only, a short wait.
func (n *Namer) wait(d time.Duration) bool {
	n.mu.Lock()
	done := n.running
	n.mu.Unlock()
	if done == nil {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
	}
	n.mu.Lock()
	doing := n.doing
	n.mu.Unlock()
	if doing != "" {
		n.warnOnce("JVM attach protocol: pid %d: %s still unanswered %v after the capture ended; perf map not used", n.VM.Pid, doing, d)
	}
	return false
}

// refresh, on its own goroutine, asks a live JVM for a new perf map (ask),
// then reads the file if it changed: the map just written, one the JVM
// wrote at exit (-XX:+DumpPerfMapAtExit) or one someone else asked for.
// The file is read even once the Namer's context ended: it is a bounded
// read that neither blocks nor waits on the JVM.
func (n *Namer) refresh(ask bool, done chan struct{}) {
	defer func() {
		n.mu.Lock()
		n.running, n.doing = nil, ""
		closed := n.closed
		if closed {
			n.removeMadeLocked()
		}
		n.mu.Unlock()
		if closed {
			n.tmp.Close()
		}
		close(done)
	}()
	if ask && !alive(n.VM.Pid) {
		n.mu.Lock()
		n.exited = true
		n.mu.Unlock()
		ask = false
	}
	if ask {
		ctx, cancel := context.WithTimeout(n.ctx, refreshBudget)
		defer cancel()
		n.mu.Lock()
		fpAsked := n.fpAsked
		n.mu.Unlock()
		// What was not there before is leakscope's doing, removed at
		// Close: the listener's socket, and the perf map unless the JVM
		// writes one itself at exit.
		socket, perfMap := ".java_pid"+strconv.Itoa(n.nspid), "perf-"+strconv.Itoa(n.nspid)+".map"
		hadSocket, hadMap := n.exists(socket), n.exists(perfMap)
		atExit, _ := CommandLineFlag(n.VM.Pid, "DumpPerfMapAtExit")
		err := error(nil)
		if !fpAsked {
			err = n.checkFramePointers(ctx)
		}
		if err == nil {
			err = n.command(ctx, "jcmd", "Compiler.perfmap")
		}
		n.mu.Lock()
		for _, f := range []struct {
			name string
			had  bool
		}{{socket, hadSocket}, {perfMap, hadMap || atExit}} {
			if !f.had && n.exists(f.name) {
				if n.made == nil {
					n.made = map[string]bool{}
				}
				n.made[f.name] = true
			}
		}
		n.mu.Unlock()
		switch {
		case err == nil, errors.Is(err, ErrNotReady), n.ctx.Err() != nil:
			// Asked again later (a JVM still starting), or abandoned.
		case errors.Is(err, ErrCommandFailed):
			n.warnOnce("cannot name compiled Java frames of JVM %d: %v", n.VM.Pid, err)
		default:
			n.mu.Lock()
			n.attachOff = true
			n.mu.Unlock()
			n.warnOnce("%v; not asked again, perf map not used unless written already", err)
		}
	}
	// The map lists the code alive when it was written.
	if n.load() {
		n.mu.Lock()
		if n.stamp.mtime.After(n.covered) {
			n.covered = n.stamp.mtime
		}
		n.mu.Unlock()
	}
}

// command runs one attach-protocol command for refresh, saying what it
// waits for meanwhile.
func (n *Namer) command(ctx context.Context, cmd string, args ...string) error {
	_, err := n.commandOutput(ctx, cmd, args...)
	return err
}

func (n *Namer) commandOutput(ctx context.Context, cmd string, args ...string) (string, error) {
	n.mu.Lock()
	n.doing = strings.TrimSpace(cmd + " " + strings.Join(args, " "))
	n.mu.Unlock()
	return Execute(ctx, n.VM.Pid, cmd, args...)
}

// checkFramePointers asks the JVM whether it preserves frame pointers; the
// answer overrides what the command line said. A command the JVM rejects
// is not an error here: the perf map may still be had.
func (n *Namer) checkFramePointers(ctx context.Context) error {
	out, err := n.commandOutput(ctx, "printflag", "PreserveFramePointer")
	if errors.Is(err, ErrCommandFailed) {
		return nil
	}
	if err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	switch strings.TrimSpace(out) {
	case "-XX:+PreserveFramePointer":
		n.preserveFP, n.fpKnown, n.fpAsked = true, true, true
	case "-XX:-PreserveFramePointer":
		n.preserveFP, n.fpKnown, n.fpAsked = false, true, true
	}
	return nil
}

// load reads the perf map file if it changed since the last read and was
// written after the JVM started; it reports whether perf is now the file's
// content. The file must be a regular file of the JVM's user (or root),
// MaxPerfMapSize at most.
func (n *Namer) load() bool {
	name := "perf-" + strconv.Itoa(n.nspid) + ".map"
	f, err := procfs.OpenFile(n.tmp, name, procfs.FileLimits{MaxSize: procfs.MaxPerfMapSize, Owner: n.uid})
	if errors.Is(err, procfs.ErrUnsafeFile) {
		n.warnOnce("JVM %d: perf map not used: %v", n.VM.Pid, err)
		return false
	}
	if err != nil {
		return false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	stamp := fileStamp{fi.ModTime(), fi.Size()}
	n.mu.Lock()
	same := stamp == n.stamp && n.perf != nil
	n.mu.Unlock()
	if same {
		return true
	}
	if !n.started.IsZero() && stamp.mtime.Before(n.started.Add(-2*time.Second)) {
		return false // left by an earlier process with the same pid
	}
	m, err := ParsePerfMap(io.LimitReader(f, procfs.MaxPerfMapSize))
	if err != nil {
		n.warnOnce("read the perf map of JVM %d: %v", n.VM.Pid, err)
		return false
	}
	n.mu.Lock()
	n.perf, n.stamp = m, stamp
	n.gen++
	n.mu.Unlock()
	return true
}

// warnOnce queues a warning, once each, for flush to give to Warnf.
func (n *Namer) warnOnce(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.warned[msg] {
		return
	}
	n.warned[msg] = true
	n.warnings = append(n.warnings, msg)
}

// flush gives the queued warnings to Warnf, on the caller's goroutine.
func (n *Namer) flush() {
	n.mu.Lock()
	ws := n.warnings
	n.warnings = nil
	n.mu.Unlock()
	for _, w := range ws {
		n.Warnf("%s", w)
	}
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
