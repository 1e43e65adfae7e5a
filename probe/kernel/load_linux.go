//go:build linux

package kernel

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/features"
	"golang.org/x/sys/unix"
)

// Config is how a collection is loaded for one traced process.
type Config struct {
	// Wait: the kernel stops the process until its tables are written,
	// at its first call, each exec, dlopen and exit (wait_exec,
	// stop_on_load): a launched command or a followed child.
	Wait bool
	// Follow: processes it starts are stopped for leakscope to follow
	// (follow_forks).
	Follow bool
	// ExecSeen: the process is a child treated as the command after its
	// exec (exec_seen).
	ExecSeen bool
	// SampleBytes is the sampling period in bytes, 0 for every call.
	SampleBytes uint64
	// SampleExact is the exact budget under sampling: calls traced with
	// weight 1 per jiffy on each CPU (sample_exact), 0 for none.
	SampleExact uint32
	// ProbesOnly: every program returns at once (probes_only).
	ProbesOnly bool
	// Maps traces mappings and threads (trace_maps, mmap_events).
	Maps bool
	// Table sizes in entries.
	MaxAllocations, MaxSites, MaxStacks, MaxUnwindRows uint32
	// Plain makes every probe a perf link of its own, as on kernels
	// without uprobe_multi links or sessions (tests check that path).
	Plain bool
	// Malloc: the malloc family will be probed, so its session program
	// is loaded with the rest (Prepare loads it later otherwise).
	Malloc bool
	// LazyReturns: the return program of zlib's inits and the declared
	// pairs (alloc_exit's uprobe_multi twin) is loaded when first
	// attached, not with the rest: a followed process's collection, most
	// of whose processes (a launch script's shells and tools) never call
	// them. The process that does waits ~0.2 s stopped for the load.
	LazyReturns bool
}

// Features are what the running kernel lacks, found at Load.
type Features struct {
	NoMulti    bool // no uprobe_multi links (before 6.6): one perf link per probe
	NoSession  bool // no uprobe sessions (before 6.13): plain probes for the malloc family
	NoExitHook bool // sched_process_exit comes after the memory is gone (before 6.13)
}

// Objects is one loaded collection: its programs, maps and globals.
type Objects struct {
	objs     leakObjects
	features Features
	// siteBuf and siteKeys are the buffers ForEachSite reads site_slots
	// into, countBuf and countKeys those it reads site_counts into, reused.
	siteBuf   []leakSiteSlot
	siteKeys  []uint32
	countBuf  []leakSiteStats
	countKeys []uint32
	// copies is site_copies: the copies of each site's totals.
	copies uint32
	// buckets is alloc_buckets_used: the buckets of alloc_buckets in use.
	buckets uint32
	stack   leakStack // Stack's read buffer: 528 B, not one per new stack
	// lazy holds the stack-walking programs until they are needed.
	lazy lazyPrograms
	// config is what the collection was loaded with (Reset restores it).
	config Config
	// rangeSlot is the half of the range table the walker reads and
	// rangeGen its generation (PublishRanges); rowsUsed the entries of
	// unwind_rows written (AppendUnwindRows). Reset zeroes them with the
	// maps.
	rangeSlot uint32
	rangeGen  uint64
	rowsUsed  uint32
}

// mapEventsBytes is the size of mmap_events: ~116k records between two
// reads (a snapshot drains it); a record that finds it full is counted
// (STAT_MAP_EVENTS_LOST) and the capture warns.
const mapEventsBytes = 8 << 20

// Load parses the embedded object, sets its constants and map sizes from
// c and loads it, with the stack-walking programs its target will use
// (lazyPrograms; Prepare loads the others). On kernels without
// uprobe_multi links or uprobe sessions it loads plain copies of those
// programs, never attached (Features says which).
func Load(c Config) (*Objects, error) {
	spec, err := leakSpec()
	if err != nil {
		return nil, fmt.Errorf("parse embedded BPF object: %w", err)
	}
	buckets, hashed := allocTables(c.MaxAllocations)
	copies := siteCopies()
	if err := setConstants(spec, c, buckets, copies); err != nil {
		return nil, err
	}
	if c.Maps {
		spec.Maps["mmap_events"].MaxEntries = mapEventsBytes
	}
	spec.Maps["alloc_buckets"].MaxEntries = max(buckets, 1)
	spec.Maps["allocs"].MaxEntries = hashed
	spec.Maps["sites"].MaxEntries = c.MaxSites
	spec.Maps["site_slots"].MaxEntries = c.MaxSites
	spec.Maps["site_counts"].MaxEntries = c.MaxSites * copies
	spec.Maps["stacks"].MaxEntries = c.MaxStacks
	spec.Maps["unwind_rows"].MaxEntries = c.MaxUnwindRows
	// The per-allocation and per-stack tables take memory as they fill,
	// not all at load: preallocated, their default sizes held 165 MiB of
	// kernel memory for any target, even one that allocates nothing
	// (docs/performance.md, "Fixed costs and the BPF maps").
	for _, name := range []string{"allocs", "sites", "stacks"} {
		spec.Maps[name].Flags |= unix.BPF_F_NO_PREALLOC
	}
	// Arrays are mapped into leakscope too, so that Reset empties one
	// with a memclr (a batch update writes each entry on its own: ~1 s
	// for the 1.5M entries of a collection's arrays).
	for name, m := range spec.Maps {
		if m.Type == ebpf.Array && !strings.HasPrefix(name, ".") {
			m.Flags |= unix.BPF_F_MMAPABLE
		}
	}
	o := &Objects{copies: copies, buckets: buckets, config: c}
	if c.Plain {
		o.features.NoMulti, o.features.NoSession = true, true
	}
	o.features.NoExitHook = !useExitHook(spec)
	o.lazy.deferWalkers(spec)
	if !c.Plain && !multiSupported() {
		o.plainTwins(spec)
	}
	var lo loadedObjects
	err = spec.LoadAndAssign(&lo, loadOptions())
	if err != nil && strings.Contains(err.Error(), "_multi") && !o.features.NoMulti {
		o.plainTwins(spec)
		err = spec.LoadAndAssign(&lo, loadOptions())
	}
	if err != nil {
		return nil, fmt.Errorf("load BPF programs: %w", verifierDetail(err))
	}
	o.objs = lo.leakObjects
	o.lazy.keepMaps(&lo)
	if err := o.prepareWalkers(c); err != nil {
		o.Close()
		return nil, err
	}
	return o, nil
}

// prepareWalkers loads the stack-walking programs a collection for c
// will use: the malloc family's session program, and the return program
// of every other acquire (zlib's inits, the declared pairs), as a
// uprobe_multi twin where the kernel has them (unless c.LazyReturns). A kernel without uprobe
// sessions (before 6.13) traces exact mode with plain uprobes and
// uretprobes; sampling needs sessions.
// The two load at once: each is the verifier's work in the loading
// thread.
func (o *Objects) prepareWalkers(c Config) error {
	var sessionErr error
	var wg sync.WaitGroup
	if c.Malloc && !c.Plain {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sessionErr = o.Prepare(AllocSession, false)
		}()
	}
	var err error
	if !o.features.NoMulti && !c.LazyReturns {
		err = o.Prepare(AllocExit, true)
	}
	wg.Wait()
	if err != nil {
		return err
	}
	if sessionErr != nil {
		// Only a kernel without uprobe sessions makes do with plain
		// probes: elsewhere the error is a refusal to report (the plain
		// walker is the same code).
		if c.SampleBytes > 0 || sessionsSupported() {
			return sessionErr
		}
		o.lazy.mu.Lock()
		o.features.NoSession = true
		o.lazy.mu.Unlock()
	}
	if f := o.Features(); f.NoMulti || (c.Malloc && f.NoSession) {
		return o.Prepare(AllocExit, false)
	}
	return nil
}

// setConstants sets the object's constants for c, with buckets buckets
// in alloc_buckets and copies copies of each site's totals.
func setConstants(spec *ebpf.CollectionSpec, c Config, buckets, copies uint32) error {
	for _, v := range []struct {
		name  string
		value any
	}{
		{"follow_forks", flag(c.Follow)},
		{"exec_seen", flag(c.ExecSeen)},
		{"wait_exec", flag(c.Wait)},
		{"stop_on_load", flag(c.Wait)},
		{"sample_bytes", c.SampleBytes},
		{"sample_exact", c.SampleExact},
		{"probes_only", flag(c.ProbesOnly)},
		{"page_size", uint64(os.Getpagesize())},
		{"trace_maps", flag(c.Maps)},
		{"max_sites", c.MaxSites},
		{"alloc_buckets_used", buckets},
		{"site_copies", copies},
	} {
		if err := spec.Variables[v.name].Set(v.value); err != nil {
			return fmt.Errorf("set %s: %w", v.name, err)
		}
	}
	return nil
}

// verifierDetail says which kernel's verifier refused which program, and
// why in a line: its reason (the last line of its log that is not a
// statistic) and how much it processed. A refusal's whole log runs to
// hundreds of kilobytes; LEAKSCOPE_VERIFIER_LOG=1 gives it instead. The
// error wraps err (errors.Is and As see the verifier's error and its
// errno).
func verifierDetail(err error) error {
	var ve *ebpf.VerifierError
	if !errors.As(err, &ve) {
		return err
	}
	// What cilium/ebpf put before the verifier's error: "program NAME: ".
	prefix, _ := strings.CutSuffix(err.Error(), ve.Error())
	prefix = strings.TrimSuffix(prefix, "load program: ")
	head := fmt.Sprintf("%sthe BPF verifier of Linux %s refused it", prefix, kernelRelease())
	if os.Getenv("LEAKSCOPE_VERIFIER_LOG") == "1" {
		return &verifierRefusal{err, fmt.Sprintf("%s: %+v", head, ve)}
	}
	cause := fmt.Sprint(ve.Cause)
	var errno unix.Errno
	if errors.As(ve.Cause, &errno) && unix.ErrnoName(errno) != "" {
		cause = unix.ErrnoName(errno)
	}
	if len(ve.Log) == 0 {
		return &verifierRefusal{err, fmt.Sprintf("%s (%s), without a log", head, cause)}
	}
	reason, stats := verifierReason(ve.Log)
	if stats != "" {
		cause = stats + "; " + cause
	}
	return &verifierRefusal{err, fmt.Sprintf("%s: %s (%s); LEAKSCOPE_VERIFIER_LOG=1 prints its whole log", head, reason, cause)}
}

// verifierRefusal is a refusal told in a line (verifierDetail), wrapping
// the error it tells.
type verifierRefusal struct {
	err error
	msg string
}

func (e *verifierRefusal) Error() string { return e.msg }
func (e *verifierRefusal) Unwrap() error { return e.err }

// verifierReason finds, in a verifier's log, the last line that says why
// it refused (not its statistics: time, stack depth) and its count of
// processed instructions.
func verifierReason(log []string) (reason, stats string) {
	for i := len(log) - 1; i >= 0 && reason == ""; i-- {
		l := strings.TrimSpace(log[i])
		switch {
		case strings.HasPrefix(l, "processed "):
			stats = l
		case l == "", strings.HasPrefix(l, "verification time"), strings.HasPrefix(l, "stack depth"):
		default:
			reason = l
		}
	}
	if reason == "" {
		reason = "no reason in its log"
	}
	return reason, stats
}

// kernelRelease is uname -r, "unknown" when it cannot be read.
func kernelRelease() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Release[:])
}

// maxAllocSlots is the most slots alloc_buckets has: 64Ki handles (heap
// blocks and pointer-handled resources), 4 MiB of kernel memory, taken at
// load.
const maxAllocSlots = 1 << 16

// allocTables splits room for max live handles between alloc_buckets
// (buckets of ALLOC_WAYS handles: a power of two, at most
// maxAllocSlots slots and half of max) and allocs (the rest): together
// they hold max. No buckets when max is too small for one.
func allocTables(max uint32) (buckets, hashed uint32) {
	slots := uint32(maxAllocSlots)
	for slots > max/2 {
		slots >>= 1
	}
	if slots < uint32(leakAllocTableALLOC_WAYS) {
		return 0, max
	}
	return slots / uint32(leakAllocTableALLOC_WAYS), max - slots
}

// TryLoad loads the object as the tracer does, malloc's programs and
// this kernel's fallbacks included, with small tables, and closes it:
// whether this process may load BPF programs here at all, and what the
// kernel lacks.
func TryLoad() (Features, error) {
	o, err := Load(Config{Malloc: true, MaxAllocations: 1024, MaxSites: 1024, MaxStacks: 1024, MaxUnwindRows: 1024})
	if err != nil {
		return Features{}, err
	}
	f := o.Features()
	return f, o.Close()
}

// siteCopies is how many copies of each site's totals the kernel keeps
// (site_copies): one per possible CPU, rounded down to a power of two, at
// most SITE_COPIES.
func siteCopies() uint32 {
	n, err := ebpf.PossibleCPU()
	if err != nil || n < 1 {
		n = 1
	}
	c := uint32(1)
	for c*2 <= uint32(n) && c*2 <= uint32(leakLimitsSITE_COPIES) {
		c *= 2
	}
	return c
}

func flag(on bool) uint32 {
	if on {
		return 1
	}
	return 0
}

// Features says what the running kernel lacks (NoSession is known once
// the session program was prepared).
func (o *Objects) Features() Features {
	o.lazy.mu.Lock()
	defer o.lazy.mu.Unlock()
	return o.features
}

// Close releases the programs and maps; links made of them stay until
// closed themselves.
func (o *Objects) Close() error {
	o.lazy.close()
	o.lazy.mu.Lock()
	defer o.lazy.mu.Unlock()
	err := o.objs.Close()
	return err
}

// parsedLeak is the embedded object, parsed once: each Load copies it.
var parsedLeak = sync.OnceValues(loadLeak)

// leakSpec returns a copy of the embedded object's spec, to be changed
// and loaded.
func leakSpec() (*ebpf.CollectionSpec, error) {
	spec, err := parsedLeak()
	if err != nil {
		return nil, err
	}
	return spec.Copy(), nil
}

// kernelTypes is the running kernel's BTF, decoded once for every load
// (each would decode its own: ~50 ms of CPU).
var kernelTypes = btf.NewCache()

// loadOptions are the options of every load of the object's programs.
func loadOptions() *ebpf.CollectionOptions {
	return &ebpf.CollectionOptions{Cache: kernelTypes}
}

// plainTwins readies spec for a kernel without uprobe_multi links
// (before 6.6): every probe is a perf link of its own. The twins are
// loaded as copies of their plain programs and never attached, and the
// stack walker's twin not at all.
func (o *Objects) plainTwins(spec *ebpf.CollectionSpec) {
	for name, ps := range spec.Programs {
		if plain, ok := strings.CutSuffix(name, "_multi"); ok && spec.Programs[plain] != nil {
			stand := spec.Programs[plain].Copy()
			stand.Name = ps.Name
			spec.Programs[name] = stand
		}
	}
	delete(o.lazy.specs, "alloc_exit_multi")
	o.features.NoMulti = true
}

// multiSupported reports whether the kernel makes uprobe_multi links
// (6.6). A twin loads on a kernel that does not (6.1 takes a kprobe
// program of any expected attach type); only its link fails, with
// EINVAL, which cannot be told from a bad argument. Asked once: every
// load asks.
var multiSupported = sync.OnceValue(func() bool {
	return features.HaveBPFLinkUprobeMulti() == nil
})

// sessionsSupported reports whether the kernel has uprobe sessions
// (6.13): whether its BTF has the kfunc alloc_session calls,
// bpf_session_is_return. Asked once: every load asks.
var sessionsSupported = sync.OnceValue(func() bool {
	spec, err := kernelTypes.Kernel()
	if err != nil {
		return false
	}
	var fn *btf.Func
	return spec.TypeByName("bpf_session_is_return", &fn) == nil
})

// exitHookSupported reports whether the kernel's sched_process_exit
// tracepoint has group_dead: since Linux 6.13 it comes before exit_mm(),
// with the exiting task's memory still readable, which target_exit needs.
// Asked once: every load asks.
var exitHookSupported = sync.OnceValue(func() bool {
	spec, err := kernelTypes.Kernel()
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
})

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
