package probe

import (
	"context"
	"time"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/probe/symbolize"
	"github.com/leakscope/leakscope/probe/target"
	"github.com/leakscope/leakscope/probe/track"
	"github.com/leakscope/leakscope/probe/uprobe"
)

// Errors callers match with errors.Is.
var (
	// ErrTargetExited means the target process ended while it was traced.
	ErrTargetExited = uprobe.ErrTargetExited
	// ErrNoAllocator means no loaded object of the target exports malloc.
	ErrNoAllocator = target.ErrNoAllocator
	// ErrPrivilege means the kernel refused to load or attach BPF programs.
	ErrPrivilege = uprobe.ErrPrivilege
)

// Options size the kernel tables. Zero values take the defaults.
type Options struct {
	// MaxAllocations is the size of the live-allocation table. Allocations
	// made while it is full are not tracked and are counted as dropped.
	MaxAllocations uint32
	// MaxSites bounds the distinct (stack, kind) aggregates.
	MaxSites uint32
	// MaxStacks bounds the distinct stacks stored.
	MaxStacks uint32
	// Track lists the declared acquire/release pairs to trace besides the
	// malloc family and zlib (--track, --track-file, presets).
	Track []track.Pair
	// SampleBytes, when not 0, traces allocations by bytes: on average one
	// per SampleBytes allocated (Poisson, as tcmalloc samples), each
	// scaled by the inverse of its chance to be traced. Needs uprobe
	// sessions (Linux 6.13+). 0 traces every allocation exactly.
	SampleBytes uint64
	// SampleExact, when sampling, is the exact budget: on each CPU, up to
	// this many malloc-family calls a second (the first of every jiffy)
	// are traced whatever their size, each standing for itself, so a
	// program that allocates rarely is traced exactly. 0: none.
	SampleExact uint32
	// ProbesOnly attaches every probe as configured but makes each of its
	// programs return at once: the capture holds nothing, and the target
	// pays only for the probes themselves (the uprobe traps and the
	// programs' dispatch). For measuring that floor side by side with a
	// real run (make bench, docs/performance.md).
	ProbesOnly bool
	// Maps traces the target's mappings (mmap.anon, mmap.file) and
	// threads (thread) from the mmap, munmap and mremap syscalls and the
	// scheduler's fork and exit tracepoints (--maps).
	Maps bool
	// Unwind chooses, per object, how stacks are walked through it:
	// "auto" (default: frame pointers where the object keeps them, its
	// .eh_frame table elsewhere), "fp" (frame pointers only) or "dwarf"
	// (the table wherever there is one).
	Unwind string
	// MaxUnwindRows sizes the kernel table of unwind rows shared by all
	// objects (8 bytes each).
	MaxUnwindRows uint32
	// Malloc says whether the malloc family is traced: MallocAuto (the
	// default: on, except for a JVM target), MallocOn or MallocOff. Off
	// puts no probe on the allocator: zlib streams (their bytes computed
	// from the init arguments), declared pairs and, for a JVM, preset jvm
	// are traced, and leaks of plain malloc are not looked for.
	Malloc string
	// mallocWhy says how Malloc was decided (forTarget), for the report.
	mallocWhy string
	// noAllocator, when set, says why the target has no malloc to probe
	// (withoutAllocator): malloc is off.
	noAllocator string
	// Debuginfod fetches the debug files of objects on a stack that have
	// no symbols or DWARF and no local debug file, in the background: a
	// frame is named once its file arrived, and Stop waits for files
	// still on their way at most DebuginfodWait. nil fetches nothing.
	Debuginfod *symbolize.Debuginfod
	// Warnf receives notices worth a user's attention (a library that
	// could not be read, a range table that overflowed). May be nil.
	Warnf func(format string, args ...any)
	// Context bounds the I/O the tracer does with the target on its own
	// (a JVM's attach protocol, off the tracer's lock): once it ends
	// (Ctrl-C), a pending command is abandoned, none is sent, and Stop
	// does not wait for one. nil: context.Background().
	Context context.Context
	// Follow, for Launch, traces every process the command starts (fork,
	// vfork, posix_spawn) and theirs, each from its first instruction,
	// with the probes its own image needs (a child that execs is followed
	// into its new program). At most MaxProcesses at once; the others run
	// untraced, and the capture says how many.
	Follow bool
	// MaxProcesses bounds the processes traced at once besides the
	// command, when following (each holds its own BPF tables: ~50 MiB of
	// kernel memory at the default table sizes).
	MaxProcesses int
}

// Defaults for Options.
const (
	DefaultMaxAllocations = 1 << 20
	DefaultMaxSites       = 1 << 16
	DefaultMaxStacks      = 1 << 16
	DefaultMaxUnwindRows  = 1 << 20
	DefaultMaxProcesses   = 16
	// DefaultSampleExact is the exact budget of --sample-exact: 10,000
	// calls a second per CPU, at ~1.5 µs an exactly traced call ~1.5% of
	// a CPU (docs/performance.md).
	DefaultSampleExact = 10000
)

// DebuginfodWait bounds how long Stop waits for debug files still being
// fetched (Options.Debuginfod) before the capture's stacks are named for
// the last time.
const DebuginfodWait = 15 * time.Second

// Malloc modes (Options.Malloc).
const (
	MallocAuto = "auto"
	MallocOn   = "on"
	MallocOff  = "off"
)

// Unwind modes (Options.Unwind).
const (
	UnwindAuto  = "auto"
	UnwindFP    = "fp"
	UnwindDWARF = "dwarf"
)

func (o Options) withDefaults() Options {
	if o.MaxAllocations == 0 {
		o.MaxAllocations = DefaultMaxAllocations
	}
	if o.MaxSites == 0 {
		o.MaxSites = DefaultMaxSites
	}
	if o.MaxStacks == 0 {
		o.MaxStacks = DefaultMaxStacks
	}
	if o.Unwind == "" {
		o.Unwind = UnwindAuto
	}
	if o.Malloc == "" {
		o.Malloc = MallocAuto
	}
	if o.MaxUnwindRows == 0 {
		o.MaxUnwindRows = DefaultMaxUnwindRows
	}
	if o.MaxProcesses == 0 {
		o.MaxProcesses = DefaultMaxProcesses
	}
	if o.Warnf == nil {
		o.Warnf = func(string, ...any) {}
	}
	if o.Context == nil {
		o.Context = context.Background()
	}
	return o
}

// Progress is the target's state at the latest snapshot.
type Progress struct {
	Elapsed   time.Duration
	LiveCount uint64
	LiveBytes uint64
	Sites     int
	// Stops are run's stops of the command so far (Count 0 under attach).
	Stops analyze.Stops
}
