//go:build linux && amd64

package probe

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/probe/kernel"
	"github.com/leakscope/leakscope/probe/procfs"
	"github.com/leakscope/leakscope/probe/stacks"
	"github.com/leakscope/leakscope/probe/symbolize"
	"github.com/leakscope/leakscope/probe/target"
	"github.com/leakscope/leakscope/probe/uprobe"
)

// Tracer traces one process. Snapshot may be called at any interval;
// Stop detaches and returns the capture.
type Tracer struct {
	mapping mapTables // the target's mappings and threads (mapevents_linux.go)
	mem     memoryLog // its memory breakdowns (memory_linux.go)
	pid     int
	opts    Options
	objs    *kernel.Objects
	uprobes *uprobe.Attacher // attaches t's uprobes (probes binds them)
	cache   *symbolize.Cache
	alloc   target.Allocator
	misses  *kernel.Misses
	started time.Time
	wg      sync.WaitGroup

	mu sync.Mutex // guards everything below
	// probes holds every link attached for t's process (and for the
	// children sharing its memory).
	probes     *uprobe.Set
	view       *target.Image
	sym        *stacks.Resolver
	jit        jitNames // the target's runtime, once found (jvm_linux.go)
	sites      *siteTable
	rawEntries []stacks.Entry // resolveLocked's decoded stack
	series     series         // the snapshots so far
	warnings   []string
	command    []string
	// execs are the program images the target exec'd into (exec_linux.go).
	execs execHistory
	// stops are the stops the kernel made for leakscope (run), measured
	// from the stop to the SIGCONT.
	stops analyze.Stops
	// watchdog continues a launched command if leakscope dies.
	watchdog *watchdog
	// attachedAfter is the process's age when attach's probes were on.
	attachedAfter time.Duration
	// res: the objects checked and probed for zlib and declared pairs
	// (resources_linux.go).
	res resourceState
	// unnamed: what the last read's frames left unnamed, per object,
	// kept for the tree to warn of (a process of a followed tree).
	unnamed []unnamedFrames
	// windows: the inflate windows found in the target's memory, not
	// counted by the kernel yet (malloc not traced; windows_linux.go).
	windows windowState
	exit    exitState // the target's exit, as the kernel reports it (capture_linux.go)
	// stopped: Stop read the capture and released the tables and the
	// symbol cache (releaseLocked); Snapshot and Stop fail from then on.
	stopped bool

	// tree follows the processes a launched command starts (Options.
	// Follow); shared by every Tracer of the tree, nil otherwise.
	tree   *follower
	member treeMember // t's place in the tree (follow_linux.go)
}

// isRoot reports whether t is the command's Tracer of a followed tree.
func (t *Tracer) isRoot() bool { return t.tree != nil && t.tree.root == t }

// errStopped is what Snapshot and Stop return after Stop.
var errStopped = errors.New("tracer already stopped")

// Attach starts tracing the running process pid.
func Attach(pid int, opts Options) (*Tracer, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("pid %d: %w", pid, procfs.ErrNoProcess)
	}
	if kt, err := procfs.IsKernelThread(pid); err != nil {
		return nil, err
	} else if kt {
		return nil, fmt.Errorf("process %d is a kernel thread: it has no user-space allocator to trace", pid)
	}
	maps, err := procfs.ReadMaps(pid)
	if err != nil {
		return nil, err
	}
	cache := symbolize.NewCache()
	alloc, err := target.FindAllocator(pid, maps, cache)
	if errors.Is(err, ErrNoAllocator) {
		// A dynamic program whose loader has not mapped its libraries
		// yet (just exec'd) will have one: only a static one has none.
		if static, serr := target.Static(fmt.Sprintf("/proc/%d/exe", pid)); serr != nil || !static {
			return nil, err
		}
	}
	if opts, err = withoutAllocator(opts, err); err != nil {
		return nil, err
	}
	cmdline, _ := procfs.Command(pid)
	var mapped []string
	for _, m := range maps {
		mapped = append(mapped, m.Path)
	}
	topts := forTarget(opts, mapped)
	var fol *follower
	var dog *watchdog
	if topts.Follow {
		// The kernel stops each process the target starts until
		// leakscope has attached to it: the watchdog continues them
		// should leakscope die, never the target (attach never stops it).
		st, err := procfs.ReadStat(pid)
		if err != nil {
			return nil, err
		}
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find leakscope's executable for the watchdog: %w", err)
		}
		if dog, err = startWatchdogFor(self, pid, st.StartTime, false); err != nil {
			return nil, err
		}
		fol = newFollower(topts) // loads alongside the target's collection
	}
	t, err := newTracer(pid, alloc, nil, cache, modeAttach, topts)
	if err != nil {
		if fol != nil {
			fol.stop()
		}
		dog.release()
		if gone(pid) {
			return nil, fmt.Errorf("process %d exited while leakscope attached: %w", pid, ErrTargetExited)
		}
		return nil, err
	}
	if fol != nil {
		t.mu.Lock()
		t.watchdog = dog
		fol.root, t.tree = t, fol
		t.mu.Unlock()
	}
	t.command = cmdline
	t.mu.Lock()
	t.probeUnloadedLocked(jdkLibDir(mapped))
	t.mu.Unlock()
	// Taken once the probes are on: what the process allocated before
	// now is not seen.
	if age, err := procfs.Age(pid); err == nil {
		t.attachedAfter = age
	}
	return t, nil
}

// gone reports whether process pid has exited (or is a zombie).
func gone(pid int) bool {
	st, err := procfs.ReadStat(pid)
	return err != nil || st.State == 'Z' || st.State == 'X'
}

// newTracer loads and attaches the probes. objects are files the target
// will load but has not mapped yet (a launched command): resource probes go
// on them before it runs. Mapped objects are found in /proc/PID/maps.
// tracerMode says how a Tracer got its process.
type tracerMode int

const (
	// modeAttach: a running process, never stopped.
	modeAttach tracerMode = iota
	// modeLaunch: run's command, before the shim's exec; the kernel
	// stops it until the tables are written (first call, exec, dlopen,
	// exit).
	modeLaunch
	// modeChild: a process a launched one started, stopped by the kernel
	// before its first instruction (or its exec'd program's), then
	// treated as the command is.
	modeChild
)

func newTracer(pid int, alloc target.Allocator, objects []string, cache *symbolize.Cache, mode tracerMode, opts Options) (*Tracer, error) {
	return newTracerFrom(pid, alloc, objects, cache, mode, opts, nil)
}

// newTracerFrom is newTracer with the BPF collection of spare, loaded
// ahead (nil: loaded now).
func newTracerFrom(pid int, alloc target.Allocator, objects []string, cache *symbolize.Cache, mode tracerMode, opts Options, spare *Tracer) (*Tracer, error) {
	waitExec := mode == modeLaunch
	opts = opts.withDefaults()
	cache.UseDebuginfod(opts.Debuginfod)
	t := &Tracer{
		pid:     pid,
		opts:    opts,
		cache:   cache,
		alloc:   alloc,
		started: time.Now(),
		view:    target.New(pid, cache),
		res:     resourceState{checked: map[uint64]bool{}},
	}
	t.probes = uprobe.NewSet(pid, t.warnOnce, gone)
	t.res.pairs = make([][]string, len(opts.Track))
	t.sym = stacks.New(t.view)
	t.sites = newSiteTable()
	if spare != nil {
		// Loaded ahead with the same options (follower.takeSpare).
		t.objs, t.misses, t.mapping.events = spare.objs, spare.misses, spare.mapping.events
		t.exit.noHook = spare.exit.noHook
	} else if err := t.load(mode); err != nil {
		return nil, err
	}
	t.uprobes = uprobe.New(t.objs, t.probes.Bind)
	if err := t.objs.SetTarget(pid); err != nil {
		t.close()
		return nil, err
	}
	if err := t.attach(); err != nil {
		t.close()
		return nil, err
	}
	for _, path := range objects {
		if err := t.attachResources(path, path); err != nil {
			t.close()
			return nil, err
		}
	}
	if err := t.attachLoaderHook(objects); err != nil {
		t.close()
		return nil, err
	}
	if waitExec {
		// A launched command: what it will map is read before it runs,
		// not while the kernel holds it stopped at its first call.
		for _, o := range objects {
			if real, err := filepath.EvalSymlinks(o); err == nil {
				t.prepareLocked(real)
			}
		}
		if lib := jdkLibDir(objects); lib != "" {
			t.probeUnloadedLocked(lib) // and a JVM's libjvm.so and JDK
		}
	}
	if mode != modeAttach {
		if err := t.attachExitHook(); err != nil {
			t.close()
			return nil, err
		}
	}
	if !waitExec {
		// Mappings known now go into the range table before tracing
		// matters. A launched command has not exec'd yet: its first
		// frames outside known ranges ask for a refresh.
		t.mu.Lock()
		t.refreshLocked()
		t.mu.Unlock()
	}

	t.wg.Add(1)
	go t.watchMisses()
	return t, nil
}

func (t *Tracer) load(mode tracerMode) error {
	if t.opts.ProbesOnly {
		t.warnOnce("--probes-only: every probe runs a program that returns at once; nothing is counted, and the report is empty")
	}
	// A child is treated as the command after its exec: stopped until
	// its tables are in at its first call, at each exec, dlopen and exit.
	objs, err := kernel.Load(kernel.Config{
		Wait:           mode != modeAttach,
		Follow:         t.opts.Follow,
		ExecSeen:       mode == modeChild,
		SampleBytes:    t.opts.SampleBytes,
		SampleExact:    exactPerJiffy(t.opts.SampleBytes, t.opts.SampleExact),
		ProbesOnly:     t.opts.ProbesOnly,
		Maps:           t.opts.Maps,
		MaxAllocations: t.opts.MaxAllocations,
		MaxSites:       t.opts.MaxSites,
		MaxStacks:      t.opts.MaxStacks,
		MaxUnwindRows:  t.opts.MaxUnwindRows,
		Plain:          forcePlainProbes,
		Malloc:         t.mallocTraced(),
		LazyReturns:    mode == modeChild,
	})
	if err != nil {
		if uprobe.IsPerm(err) {
			return fmt.Errorf("load BPF programs: %w", ErrPrivilege)
		}
		return err
	}
	f := objs.Features()
	t.objs, t.exit.noHook = objs, f.NoExitHook
	if t.misses, err = objs.OpenMisses(); err != nil {
		objs.Close()
		return err
	}
	if t.opts.Maps {
		if t.mapping.events, err = objs.OpenMapEvents(); err != nil {
			t.misses.Close()
			objs.Close()
			return err
		}
	}
	return nil
}

// mallocFamily is the malloc family as plain probes: an entry program for
// each function, the shared return program for each acquire.
var mallocFamily = []uprobe.Spec{
	{Symbol: "malloc", Prog: kernel.MallocEnter, Ret: true},
	{Symbol: "calloc", Prog: kernel.CallocEnter, Ret: true},
	{Symbol: "realloc", Prog: kernel.ReallocEnter, Ret: true},
	{Symbol: "reallocarray", Prog: kernel.ReallocarrayEnter, Ret: true},
	{Symbol: "posix_memalign", Prog: kernel.PosixMemalignEnter, Ret: true},
	{Symbol: "aligned_alloc", Prog: kernel.MemalignEnter, Ret: true},
	{Symbol: "memalign", Prog: kernel.MemalignEnter, Ret: true},
	{Symbol: "valloc", Prog: kernel.VallocEnter, Ret: true},
	{Symbol: "pvalloc", Prog: kernel.PvallocEnter, Ret: true},
	{Symbol: "free", Prog: kernel.FreeEnter},
}

// sessionFamily maps the malloc family to the functions of
// alloc_session's cookies (enum alloc_fn); free stays a plain entry probe.
var sessionFamily = []uprobe.SessionFunc{
	{Symbol: "malloc", Fn: kernel.FnMalloc},
	{Symbol: "calloc", Fn: kernel.FnCalloc},
	{Symbol: "realloc", Fn: kernel.FnRealloc},
	{Symbol: "reallocarray", Fn: kernel.FnReallocarray},
	{Symbol: "posix_memalign", Fn: kernel.FnPosixMemalign},
	{Symbol: "aligned_alloc", Fn: kernel.FnMemalign},
	{Symbol: "memalign", Fn: kernel.FnMemalign},
	{Symbol: "valloc", Fn: kernel.FnValloc},
	{Symbol: "pvalloc", Fn: kernel.FnPvalloc},
}

func (t *Tracer) attach() error {
	if t.mallocTraced() {
		if err := t.attachMalloc(); err != nil {
			return err
		}
	}
	return t.attachExecHook()
}

// attachMalloc probes the malloc family of t.alloc. Its links are kept
// apart (uprobe.Set.KeepMalloc): an exec into a JVM drops them.
func (t *Tracer) attachMalloc() error {
	obj, err := uprobe.Open(t.alloc.Path, t.alloc.Display, t.alloc.Obj.Lookup)
	if err != nil {
		return err
	}
	for _, required := range []string{"malloc", "free"} {
		if _, ok := t.alloc.Obj.Lookup(required); !ok {
			return fmt.Errorf("%s: symbol %s: %w", t.alloc.Display, required, ErrNoAllocator)
		}
	}
	// One uprobe-session link serves the whole malloc family where the
	// kernel has them: attaching and, above all, detaching take one step
	// instead of one per probe (each ~85 ms). free goes first: a block
	// allocated while free was not probed yet, and freed then, would stay
	// live for good (uprobe.Attacher.Family orders a family so too).
	free := mallocFamily[len(mallocFamily)-1:]
	ls, _, err := t.uprobes.Family(obj, free)
	t.probes.KeepMalloc(ls)
	if err != nil {
		return err
	}
	ls, sessionErr := t.uprobes.Session(obj, sessionFamily)
	t.probes.KeepMalloc(ls)
	if sessionErr != nil {
		if t.opts.SampleBytes > 0 {
			return sessionErr
		}
		// Plain uprobes and uretprobes, one pair per function.
		ls, _, err := t.uprobes.Family(obj, mallocFamily[:len(mallocFamily)-1])
		t.probes.KeepMalloc(ls)
		if err != nil {
			return err
		}
	}
	return nil
}

// attachLoaderHook probes the dynamic linker's _dl_debug_state, which it
// calls around every change of the loaded objects: the target's ld.so,
// among objects (a launched command's) or mapped now. A static target has
// none; nothing is probed then.
func (t *Tracer) attachLoaderHook(objects []string) error {
	isLoader := func(p string) bool { return strings.HasPrefix(filepath.Base(p), "ld-") }
	var candidates []string
	for _, o := range objects {
		if isLoader(o) {
			candidates = append(candidates, o)
		}
	}
	if maps, err := procfs.ReadMaps(t.pid); err == nil {
		for _, m := range maps {
			if m.FileBacked() && isLoader(m.Path) {
				candidates = append(candidates, procfs.ObjectPath(t.pid, m))
			}
		}
	}
	for _, c := range candidates {
		obj, err := t.cache.Object(c)
		if err != nil {
			continue
		}
		if _, ok := obj.Lookup("_dl_debug_state"); !ok {
			continue
		}
		o, err := uprobe.Open(c, c, obj.Lookup)
		if err != nil {
			return err
		}
		spec := uprobe.Spec{Symbol: "_dl_debug_state", Prog: kernel.DlDebugState}
		ls, _, err := t.uprobes.Family(o, []uprobe.Spec{spec})
		t.probes.Keep(ls)
		return err
	}
	return nil
}

// attachExitHook probes libc's exit() in a launched command (exit_call):
// it stops there until its stacks are resolved (exitingLocked). A target
// without it (a static Go program) is not probed.
func (t *Tracer) attachExitHook() error {
	if t.alloc.Obj == nil {
		return nil // no allocator, no libc (withoutAllocator)
	}
	if _, ok := t.alloc.Obj.Lookup("exit"); !ok {
		return nil
	}
	o, err := uprobe.Open(t.alloc.Path, t.alloc.Display, t.alloc.Obj.Lookup)
	if err != nil {
		return err
	}
	spec := uprobe.Spec{Symbol: "exit", Prog: kernel.ExitCall}
	ls, _, err := t.uprobes.Family(o, []uprobe.Spec{spec})
	t.probes.Keep(ls)
	return err
}

// attachExecHook attaches target_exec, which notices the target exec'ing,
// target_fork, which notices it forking, where windows are computed
// (windowsComputed) or the tree is followed, target_exit, which counts
// the windows of its live inflate streams as it exits and keeps its exit
// status (its parent reaps it before leakscope could read it), and with
// Options.Maps the mapping kinds' programs.
func (t *Tracer) attachExecHook() error {
	hooks := []kernel.Hook{kernel.HookExec, kernel.HookFork}
	if (t.windowsComputed() || t.opts.Follow) && !t.exit.noHook {
		hooks = append(hooks, kernel.HookExit)
		t.exit.hooked = true
	}
	if t.opts.Maps {
		t.mapping.maps = target.NewMappings(t.pid, uint64(os.Getpagesize()))
		t.mapping.refs = map[target.SiteKey]siteRef{}
		hooks = append(hooks, kernel.HookMaps)
	}
	links, err := t.objs.AttachHooks(hooks...)
	t.probes.KeepHooks(links)
	return err
}

// mallocTraced reports whether the malloc family is probed (--malloc).
func (t *Tracer) mallocTraced() bool { return t.opts.Malloc != MallocOff }

// windowsComputed reports whether inflate streams may count their window
// from their state (a window word in the stream's record) rather than
// from its malloc: without the malloc family, or when sampling it
// (zlib.Computed).
func (t *Tracer) windowsComputed() bool { return !t.mallocTraced() || t.opts.SampleBytes > 0 }

// MallocTraced reports whether the malloc family is traced: when not,
// leaks of plain malloc are not looked for (Options.Malloc).
func (t *Tracer) MallocTraced() bool { return t.mallocTraced() }

// probeSet says what this tracer traces, for the capture.
func (t *Tracer) probeSet() *analyze.ProbeSet {
	ps := &analyze.ProbeSet{Malloc: t.mallocTraced(), MallocReason: t.opts.mallocWhy,
		Kinds: []string{string(analyze.KindZlibInflate), string(analyze.KindZlibDeflate)}}
	for _, k := range []analyze.Kind{analyze.KindMmapAnon, analyze.KindMmapFile, analyze.KindThread} {
		if t.opts.Maps {
			ps.Kinds = append(ps.Kinds, string(k))
		} else {
			ps.NotTraced = append(ps.NotTraced, string(k)+" (--maps)")
		}
	}
	for i, p := range t.opts.Track {
		if p.FallbackFor != "" {
			// Its kind is listed already; say where it stood in.
			for _, o := range t.res.pairs[i] {
				ps.Kinds = append(ps.Kinds, fmt.Sprintf("%s (JNI fallback in %s)", p.Kind, filepath.Base(o)))
			}
			continue
		}
		ps.Kinds = append(ps.Kinds, p.Kind)
	}
	switch {
	case !ps.Malloc:
		ps.ZlibBytes = "computed from each stream's init arguments"
	case len(t.res.zlibLayouts) > 0:
		// Sampling: a zlib library's streams are computed, a zlib built
		// into a program counts its mallocs.
		ps.ZlibBytes = "computed from each stream's init arguments where zlib is a library of its own, elsewhere zlib's mallocs inside each stream's init and inflate() calls"
	default:
		ps.ZlibBytes = "zlib's mallocs inside each stream's init and inflate() calls"
	}
	if len(t.res.zlibLayouts) > 0 {
		ps.ZlibBytes += " (" + strings.Join(t.res.zlibLayouts, "; ") + ")"
	}
	return ps
}

// forcePlainProbes makes every probe a perf link of its own, as on kernels
// without uprobe_multi links or sessions; tests set it to check that path.
var forcePlainProbes bool

// watchMisses rereads the target's mappings when the kernel meets a frame in
// an unknown object (a library loaded after the last read).
func (t *Tracer) watchMisses() {
	defer t.wg.Done()
	for {
		m, err := t.misses.Read() // the last record is handled
		if err != nil {
			return // closed, or flushed by Stop: every record was read
		}
		if m.IP == kernel.MissVMFork {
			t.shareAsync(int(m.Generation), m.At)
			continue
		}
		if m.IP == kernel.MissFork || m.IP == kernel.MissSpawn {
			t.mu.Lock()
			tree := t.tree
			t.mu.Unlock()
			if tree == nil {
				continueStopped(int(m.Generation))
				continue
			}
			if m.IP == kernel.MissSpawn {
				t.mu.Lock()
				t.followedVMLocked(int(m.Generation))
				t.probes.Unshare(int(m.Generation)) // its own memory now
				t.mu.Unlock()
			}
			tree.adoptAsync(t, int(m.Generation), m.IP == kernel.MissSpawn, m.At)
			continue
		}
		t.mu.Lock()
		if m.IP == kernel.MissExec {
			t.followExecLocked()
		}
		t.refreshLocked()
		var resumed bool
		ended := uint64(0)
		if m.IP == kernel.MissExit && t.exit.continued != 0 {
			ended, t.exit.continued = t.exit.continued, 0 // by continueExit
		} else if m.IP == kernel.MissExit {
			t.exitingLocked()
			resumed = t.resumeLocked(true)
		} else {
			resumed = t.resumeLocked(false)
		}
		if resumed {
			ended = monotonicNow()
		}
		if ended != 0 && m.At != 0 && ended > m.At {
			t.stops.Add(time.Duration(ended - m.At))
		}
		tree := t.tree
		t.mu.Unlock()
		if m.IP == kernel.MissExit && tree != nil && tree.root != t {
			go tree.endExited(t)
		}
	}
}

// exitingLocked resolves every stack while a launched command that called
// exit() is stopped (exit_call): with its last names, as the capture will
// after it exited and its memory is gone.
// The JVM is stopped: its names come from its memory and from a perf map
// already written, never by asking it (the attach protocol would wait on a
// stopped process, and a SIGQUIT sent now would print a thread dump once
// it continues).
//
// Only a JVM's names and, with malloc not traced, zlib windows come from
// the target's memory: a native command with malloc traced is resolved
// from its files after it exited, and its stop in exit() lasts only the
// refresh before this.
func (t *Tracer) exitingLocked() {
	if t.jit.namer == nil && t.mallocTraced() {
		return
	}
	if n := t.jit.namer; n != nil {
		n.Exiting()
	}
	t.retryNamesLocked(true)
	if _, err := t.readSitesLocked(); err != nil {
		t.warnOnce(fmt.Sprintf("resolve stacks at exit: %v", err))
	}
}

// resumeLocked continues a launched command the kernel stopped, once the
// tables are written and new objects probed: at its first tracked call
// (stop_until_ranges) or when the dynamic linker changed its objects
// (dl_debug_state); and, when exited is set, once its stacks are resolved
// in exit() (exit_call), whose stop no other record continues. A SIGCONT
// also discards a stop not delivered yet.
func (t *Tracer) resumeLocked(exited bool) bool {
	stops, err := t.objs.Stops()
	if err != nil {
		return false
	}
	if stops.Exit && !exited {
		return false // stopped in exit(): its own record continues it
	}
	if stops == (kernel.Stops{}) {
		return false
	}
	if err := t.objs.ClearStops(); err != nil {
		t.warnOnce(fmt.Sprintf("continue pid %d: %v", t.pid, err))
	}
	if err := unix.Kill(t.pid, unix.SIGCONT); err != nil && !errors.Is(err, unix.ESRCH) {
		t.warnOnce(fmt.Sprintf("continue pid %d: %v", t.pid, err))
	}
	return true
}

// refreshLocked rereads /proc/PID/maps and, when the executable mappings
// changed, rewrites the inactive half of the range table and flips to it.
func (t *Tracer) refreshLocked() {
	t.checkExecLocked()
	changed, err := t.view.Refresh()
	if err != nil {
		return
	}
	if changed {
		t.findRuntimeLocked() // a JVM: name its JIT code
	}
	// A JVM's code cache is known once it started: the kernel then
	// names interpreted frames' methods and walks compiled frames.
	if !t.findJVMCodeLocked() && !changed {
		return
	}
	// The kernel gets the unwind rows and the range table before any
	// probe attached below fires: a stack walked without them ends early
	// (at attach, libjvm.so's 191k-231k rows take tens of milliseconds to
	// upload, in which a JVM makes thousands of direct-memory
	// allocations whose walks would stop at the first compiled frame).
	t.loadUnwindLocked()
	t.writeRangesLocked()
	// Libraries loaded since the last read (dlopen) may hold a zlib.
	zlibs := t.view.ZlibObjects()
	for _, m := range t.view.Current() {
		if m.FileBacked() && !t.res.checked[m.Inode] {
			if err := t.attachResources(procfs.ObjectPath(t.pid, m), m.Path); err != nil {
				t.warnOnce(err.Error())
			}
		}
	}
	if t.view.ZlibObjects() != zlibs {
		t.writeRangesLocked() // the zlib objects just probed are flagged
	}
}

// writeRangesLocked rewrites the inactive half of the kernel's range table
// from the current mappings and flips to it.
func (t *Tracer) writeRangesLocked() {
	ranges := t.view.Ranges()
	if len(ranges) > kernel.MaxRanges {
		t.warnOnce(fmt.Sprintf("target has %d executable mappings; the kernel range table holds %d, the rest are validated in user space only", len(ranges), kernel.MaxRanges))
		ranges = ranges[:kernel.MaxRanges]
	}
	if err := t.objs.PublishRanges(ranges); err != nil {
		t.warnOnce(fmt.Sprintf("write range table: %v", err))
	}
}

func (t *Tracer) warnOnce(msg string) {
	for _, w := range t.warnings {
		if w == msg {
			return
		}
	}
	t.warnings = append(t.warnings, msg)
	t.opts.Warnf("%s", msg)
}

// Snapshot reads the per-site totals, resolves stacks it has not seen yet
// (while the target's mappings still exist) and appends a point to the
// capture's time series.
func (t *Tracer) Snapshot() (Progress, error) {
	p, k, err := t.snapshot()
	if err == nil {
		t.recordMemory(k, p.Elapsed)
	}
	if err == nil && t.isRoot() {
		t.tree.snapshot(&p)
	}
	return p, err
}

func (t *Tracer) snapshot() (Progress, memoryKnown, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return Progress{}, memoryKnown{}, errStopped
	}
	t.refreshLocked()
	t.retryNamesLocked(false)
	// The snapshot's time is when its read began: the read resolves each
	// new site's stack as it meets it (a JVM stack can take tens of ms),
	// so a block allocated during the read may be missed by its site's
	// counter, read already; stamped after the read, the block's time
	// would fall before the snapshot that did not count it, and a site
	// that stopped growing would seem to grow into a later snapshot.
	at := time.Since(t.started)
	points, err := t.readSitesLocked()
	if err != nil {
		return Progress{}, memoryKnown{}, err
	}
	p := Progress{Elapsed: at, Stops: t.stops}
	for i := range points.len() {
		sp := points.at(i)
		p.LiveCount += sp.LiveCount
		p.LiveBytes += sp.LiveBytes
	}
	p.Sites = points.len()
	t.appendSnapshotLocked(points, at)
	return p, t.memoryKnownLocked(points), nil
}

// LastSnapshot returns the latest snapshot and the sites it refers to
// (kind and symbolized stack) that no earlier call returned, for writing a
// capture file as it happens: a capture writer defines each site once.
// Each site is made when the writer asks for it (analyze.SiteList); the
// list is good until Stop, which takes the sites' stacks for its capture
// (a site made after it has no stack: its Site panics).
func (t *Tracer) LastSnapshot() (analyze.SiteList, analyze.Snapshot) {
	ns, last := t.lastSnapshot()
	if !t.isRoot() {
		return ns, last
	}
	ts := &treeSites{}
	ts.add(ns, 0)
	last.Sites = slices.Clone(last.Sites)
	t.tree.lastSnapshot(ts, &last)
	return ts, last
}

func (t *Tracer) lastSnapshot() (analyze.SiteList, analyze.Snapshot) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.series.len() == 0 {
		return &newSites{}, analyze.Snapshot{}
	}
	// Made when asked for, not kept at every snapshot, and only the new
	// ones: every site of 100k was 12 MB at every snapshot.
	last := t.series.lastSnapshot()
	st := t.sites
	ns := &newSites{t: t, st: st}
	for _, p := range last.Sites {
		slot := st.slotOf[p.ID]
		if st.given[slot] {
			continue
		}
		st.given[slot] = true
		ns.ids = append(ns.ids, p.ID)
		ns.slots = append(ns.slots, int32(slot))
	}
	return ns, last
}

// newSites are the sites LastSnapshot returned, each made with its frames
// when asked for: 100k new sites made at once, with a []*Frame each, were
// ~25 MB at the first snapshot of a --save.
// lastSnapshotOf is lastSnapshot for a process of the tree other than the
// root, whose capture another goroutine may end (follower.endExited): its
// new sites are copied while its tables are known to be there, and
// stopped says the capture already ended (the caller reads it instead).
func (t *Tracer) lastSnapshotOf() (sites []analyze.Site, last analyze.Snapshot, stopped bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return nil, analyze.Snapshot{}, true
	}
	if t.series.len() == 0 {
		return nil, analyze.Snapshot{}, false
	}
	last = t.series.lastSnapshot()
	st := t.sites
	for _, p := range last.Sites {
		slot := st.slotOf[p.ID]
		if st.given[slot] {
			continue
		}
		st.given[slot] = true
		m := &st.slots[slot]
		sites = append(sites, analyze.Site{ID: p.ID, Kind: m.kind, Stack: m.stack.Stack()})
	}
	return sites, last, false
}

type newSites struct {
	t     *Tracer
	st    *siteTable
	ids   []uint64
	slots []int32
}

func (ns *newSites) Len() int        { return len(ns.ids) }
func (ns *newSites) ID(i int) uint64 { return ns.ids[i] }
func (ns *newSites) Site(i int) analyze.Site {
	ns.t.mu.Lock()
	defer ns.t.mu.Unlock()
	m := &ns.st.slots[ns.slots[i]]
	return analyze.Site{ID: ns.ids[i], Kind: m.kind, Stack: m.stack.Stack()}
}

// Header is the capture as known at the start: target and start time.
func (t *Tracer) Header() *analyze.Capture {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := &analyze.Capture{
		Target:    t.target(),
		StartedAt: t.started,
		Objects:   t.view.Objects(t.allocDisplay()),
		Probes:    t.probeSet(),
		// Snapshots read sampled malloc sites as estimates
		// (scaleTotalsLocked); a capture cut short says it was sampled
		// all the same.
		SampleBytes: t.opts.SampleBytes,
	}
	if !t.stopped {
		h.ExactBudget, _ = t.exactBudgetLocked() // so far: an agent's rows say whether they are exact
	}
	return h
}

// Pid is the traced process.
func (t *Tracer) Pid() int { return t.pid }

// Allocator is the path of the object whose malloc family is traced.
func (t *Tracer) Allocator() string { return t.alloc.Display }

// allocDisplay is the allocator marked in the capture's objects: none when
// the malloc family is not traced.
func (t *Tracer) allocDisplay() string {
	if !t.mallocTraced() {
		return ""
	}
	return t.alloc.Display
}

// detach closes every link of t at once (uprobe.Set.Detach), the release
// probes last: each uprobe unregistration waits for an RCU grace period
// (20-100 ms measured here), so one after another a detach took over a
// second. The links are taken under the lock, and the Set stays detached:
// the miss reader (an exec followed, a library loaded) attaches nothing
// after.
func (t *Tracer) detach() {
	t.mu.Lock()
	closeAll := t.probes.Detach()
	t.mu.Unlock()
	closeAll()
}

func (t *Tracer) close() {
	t.detach()
	if t.misses != nil {
		t.misses.Close()
	}
	if t.mapping.events != nil {
		t.mapping.events.Close()
	}
	t.objs.Close()
	if t.watchdog != nil {
		// Closed without the stop's record read: continue the
		// command, then let the watchdog go.
		_ = unix.Kill(t.pid, unix.SIGCONT)
		t.watchdog.release()
	}
}
