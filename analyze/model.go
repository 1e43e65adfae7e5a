package analyze

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Kind says what a site acquires: heap memory or a library resource.
type Kind string

// Built-in kinds. User-declared pairs use their own names.
const (
	KindMalloc      Kind = "malloc"
	KindZlibInflate Kind = "zlib.inflate"
	KindZlibDeflate Kind = "zlib.deflate"
	// Mappings made while traced and still mapped (mmap, munmap,
	// mremap), anonymous or of a file, and threads started and not yet
	// exited, by the bytes of their stack mappings (--maps).
	KindMmapAnon Kind = "mmap.anon"
	KindMmapFile Kind = "mmap.file"
	KindThread   Kind = "thread"
)

// Runtime names the kind of target process.
type Runtime string

// Runtimes leakscope recognizes.
const (
	RuntimeNative Runtime = "native"
	RuntimeJVM    Runtime = "jvm"
	RuntimeGo     Runtime = "go"
)

// Frame is one symbolized frame of a call stack.
type Frame struct {
	Address  uint64 `json:"address"`            // absolute address in the target
	Function string `json:"function,omitempty"` // "" when no symbol covers Address
	Module   string `json:"module,omitempty"`   // path of the mapped object, "" if unmapped
	Offset   uint64 `json:"offset"`             // address relative to the module's load base (ELF vaddr)
	File     string `json:"file,omitempty"`     // source file from DWARF or Go's .gopclntab, when present
	Line     int    `json:"line,omitempty"`
	// Inlined is true when the compiler inlined Function into the next
	// frame's function: both share one machine frame and Address.
	Inlined bool `json:"inlined,omitempty"`
}

// Stack is a call stack, leaf first: Frames[0] is the code that called the
// allocator.
//
// Stacks share frames: the tracer and the capture reader give every stack
// that holds the same frame the same *Frame (100k stacks of ~20 frames
// were 2M copies of a few thousand frames). A frame is therefore never
// changed in place: code that renames or rewrites one makes a new Frame
// and a new Frames slice. No element is nil.
type Stack struct {
	Frames []*Frame `json:"frames"`
	// Truncated is empty when the walk reached the outermost frame, and
	// otherwise says why it stopped early, naming the object (e.g.
	// "/usr/lib/x86_64-linux-gnu/libz.so.1.2.13 has no frame pointers"),
	// or which frames it skipped (cgo C code without frame pointers).
	Truncated string `json:"truncated,omitempty"`
}

// Alloc is one allocation still live at the end of a capture. Its
// sampling weight, when it has one, is in its site's LiveWeights: 1M
// allocations are 16 MB, not 24.
type Alloc struct {
	Size uint64        `json:"size"`
	Age  time.Duration `json:"age_ns"` // time between the allocation and the end of the capture
}

// Site is one allocating call stack and kind, with what it still holds.
type Site struct {
	ID        uint64  `json:"id"` // unique within a capture
	Kind      Kind    `json:"kind"`
	Stack     Stack   `json:"stack"`
	LiveCount uint64  `json:"live_count"` // allocated and not yet released
	LiveBytes uint64  `json:"live_bytes"`
	Allocs    uint64  `json:"allocs"` // acquisitions seen during the capture
	Frees     uint64  `json:"frees"`  // of those, released during the capture
	Live      []Alloc `json:"live,omitempty"`
	// Pid is the process that made the allocations when it is not the
	// target itself: one of Capture.Processes (run follows the processes
	// the command starts). 0 for the target.
	Pid int `json:"pid,omitempty"`
	// LiveWeights, when not nil, holds the weight of each of Live (same
	// length): how many allocations it stands for when the capture was
	// sampled (Capture.SampleBytes), the inverse of its chance to be
	// traced. 0 means 1 (every allocation traced); nil means 0 for all.
	// A capture file lists each weight with its allocation.
	LiveWeights []float64 `json:"-"`
	// Files, for a mmap.file site, are the files its live mappings map,
	// most bytes first.
	Files []MappedFile `json:"files,omitempty"`
}

// MappedFile is a file a site's live mappings map: how many of them, and
// their bytes.
type MappedFile struct {
	Path  string `json:"path"`
	Count uint64 `json:"count"`
	Bytes uint64 `json:"bytes"`
}

// SortFiles lists byPath's files by bytes, most first, then by path.
func SortFiles(byPath map[string]*MappedFile) []MappedFile {
	out := make([]MappedFile, 0, len(byPath))
	for _, f := range byPath {
		out = append(out, *f)
	}
	slices.SortFunc(out, func(a, b MappedFile) int {
		return cmp.Or(cmp.Compare(b.Bytes, a.Bytes), cmp.Compare(a.Path, b.Path))
	})
	return out
}

// Weight is the weight of s.Live[i] (LiveWeights).
func (s *Site) Weight(i int) float64 {
	if i < len(s.LiveWeights) {
		return s.LiveWeights[i]
	}
	return 0
}

// ExactBudget is a sampled capture's exact budget: PerSecond malloc-family
// calls a second per CPU traced whatever their size (the first of each
// kernel tick), of which the capture traced Calls. Past calls came after
// the budget was spent, and were sampled: while Past is 0, every call
// was traced exactly and no count is an estimate.
type ExactBudget struct {
	PerSecond uint32 `json:"per_second"`
	Calls     uint64 `json:"calls"`
	Past      uint64 `json:"past"`
}

// SitePoint is one site's totals at one snapshot.
type SitePoint struct {
	ID        uint64 `json:"id"`
	LiveCount uint64 `json:"live_count"`
	LiveBytes uint64 `json:"live_bytes"`
	Allocs    uint64 `json:"allocs"`
	Frees     uint64 `json:"frees"`
}

// Snapshot is the state of every site at one moment of the capture.
type Snapshot struct {
	At    time.Duration `json:"at_ns"` // since Capture.StartedAt
	Sites []SitePoint   `json:"sites"`
}

// Lost counts everything the capture could not account for. A report that
// silently undercounts is a wrong report, so every field is shown.
type Lost struct {
	AllocationsDropped uint64 `json:"allocations_dropped"` // live table or site table full
	UnknownFrees       uint64 `json:"unknown_frees"`       // releases of handles never seen acquired
	StackErrors        uint64 `json:"stack_errors"`        // stacks that could not be stored or read
	FreesMissed        uint64 `json:"frees_missed"`        // addresses reused while still recorded live
	PendingDropped     uint64 `json:"pending_dropped"`     // per-thread call state could not be allocated
}

// Object is one executable object mapped into the target.
type Object struct {
	Path         string  `json:"path"`
	BuildID      string  `json:"build_id,omitempty"`
	FramePointer string  `json:"frame_pointer"` // "yes", "no" or "mixed"
	FPShare      float64 `json:"fp_share"`      // share of functions with a frame-pointer prologue
	Allocator    bool    `json:"allocator,omitempty"`
}

// Target describes the traced process.
type Target struct {
	Pid      int      `json:"pid"`
	Command  []string `json:"command"`
	Runtime  Runtime  `json:"runtime"`
	ExitCode *int     `json:"exit_code"` // nil while running or when not known
	// RuntimeVersion is the runtime's version when known: for Go, the
	// toolchain that built the executable ("go1.26.8").
	RuntimeVersion string `json:"runtime_version,omitempty"`
	// GoModule is a Go program's main module path, when known: the
	// culprit of a stack is its code before a dependency's (Culprits).
	GoModule string `json:"go_module,omitempty"`
	// Ended says how leakscope ended the command of run, when it did:
	// "terminated by leakscope at --duration (SIGTERM)"; empty when the
	// command exited by itself, or was left running (KeptRunning).
	Ended       string `json:"ended,omitempty"`
	KeptRunning bool   `json:"kept_running,omitempty"` // run --keep-running left it running
	// Execs are the command lines of the program images the command
	// exec'd into after it started (a launch script exec'ing the real
	// program): the capture followed them.
	Execs []string `json:"execs,omitempty"`
	// Stops are the stops the kernel made of run's command while
	// leakscope updated its tables; nil when there were none (attach).
	Stops *Stops `json:"stops,omitempty"`
	// AttachedAfter is how long the process had been running when
	// attach began tracing it: what it allocated before is not seen.
	AttachedAfter time.Duration `json:"attached_after_ns,omitempty"`
	// Parent and StartedAfter are set for a process the target started
	// (Capture.Processes): its parent's pid, and how long after the
	// capture began it started.
	Parent       int           `json:"parent,omitempty"`
	StartedAfter time.Duration `json:"started_after_ns,omitempty"`
	// ExitedAfter is when it exited, since the capture began, when known
	// (the processes of a followed tree); 0 otherwise.
	ExitedAfter time.Duration `json:"exited_after_ns,omitempty"`
}

// Stops counts the stops the kernel made of a command under leakscope run
// (at its first traced call, around each dlopen and dlclose, at an exec,
// in exit()) until leakscope had updated its tables and continued it.
type Stops struct {
	Count   uint64        `json:"count"`
	Longest time.Duration `json:"longest_ns"`
	Total   time.Duration `json:"total_ns"`
}

// Add counts one stop that lasted d.
func (s *Stops) Add(d time.Duration) {
	s.Count++
	s.Total += d
	s.Longest = max(s.Longest, d)
}

// String says "12 stops, the longest 2.1ms, 9.8ms in all".
func (s *Stops) String() string {
	return fmt.Sprintf("%d, the longest %s, %s in all", s.Count, stopDuration(s.Longest), stopDuration(s.Total))
}

// stopDuration shows a stop to the microsecond below a millisecond, where
// FormatDuration would say 0s.
func stopDuration(d time.Duration) string {
	if d < time.Millisecond {
		return d.Round(time.Microsecond).String()
	}
	return FormatDuration(d)
}

// Status says how the target ended, or that it did not: "exited with
// code 0", "exited with code 143: terminated by leakscope at --duration
// (SIGTERM)", "still running (--keep-running)"; empty when not known.
func (t Target) Status() string {
	var s string
	if t.ExitCode != nil {
		s = fmt.Sprintf("exited with code %d", *t.ExitCode)
		if *t.ExitCode > 128 && *t.ExitCode < 128+65 {
			s += " (" + signalName(*t.ExitCode-128) + ")"
		}
	}
	switch {
	case t.Ended != "" && s != "":
		s += ": " + t.Ended
	case t.Ended != "":
		s = t.Ended
	case t.KeptRunning:
		s = "still running (--keep-running)"
	}
	return s
}

// Scope says what the capture cannot have seen, when something: the
// allocations a process made before attach began.
func (t Target) Scope() string {
	if t.AttachedAfter <= 0 {
		return ""
	}
	s := fmt.Sprintf("attached %s after the process started: what it allocated before is not seen (its releases count as unknown frees)",
		FormatDuration(t.AttachedAfter))
	if t.Runtime == RuntimeJVM {
		s += "; a JVM's start-up allocations are seen only with leakscope run"
	}
	return s
}

// signalName names the signals a process is commonly ended by.
func signalName(sig int) string {
	names := map[int]string{1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS",
		8: "SIGFPE", 9: "SIGKILL", 11: "SIGSEGV", 13: "SIGPIPE", 14: "SIGALRM", 15: "SIGTERM"}
	if n, ok := names[sig]; ok {
		return "killed by " + n
	}
	return fmt.Sprintf("killed by signal %d", sig)
}

// Capture is everything one capture recorded, symbolized while the
// target was alive and self-contained afterwards.
type Capture struct {
	Target    Target        `json:"target"`
	StartedAt time.Time     `json:"started_at"`
	Duration  time.Duration `json:"duration_ns"`
	Sites     []Site        `json:"sites"`
	Snapshots []Snapshot    `json:"snapshots,omitempty"`
	Lost      Lost          `json:"lost"`
	Objects   []Object      `json:"objects,omitempty"`
	Warnings  []string      `json:"warnings,omitempty"`
	// SampleBytes is the mean sampling gap in bytes when allocations were
	// sampled (--sample-bytes); 0 when every allocation was traced. With
	// sampling, counts and bytes are estimates.
	SampleBytes uint64 `json:"sample_bytes,omitempty"`
	// ExactBudget, when sampling with an exact budget (--sample-exact),
	// is the budget and the calls it traced; nil without one.
	ExactBudget *ExactBudget `json:"exact_budget,omitempty"`
	// Probes says what was traced; nil in captures made before it was
	// recorded (the malloc family, zlib and declared pairs).
	Probes *ProbeSet `json:"probes,omitempty"`
	// Processes are the other processes traced with the target: those it
	// started, and theirs (run follows every fork and exec), in the order
	// they started. Sites carry their Pid.
	Processes []Target `json:"processes,omitempty"`
	// Memory is the memory breakdown at each snapshot (Memory), oldest
	// first, thinned as Snapshots are; nil when none was taken.
	Memory []Memory `json:"memory,omitempty"`
}

// Process returns the traced process pid: the target, or one of
// Processes; nil if the capture has none with that pid.
func (c *Capture) Process(pid int) *Target {
	if pid == 0 || pid == c.Target.Pid {
		return &c.Target
	}
	for i := range c.Processes {
		if c.Processes[i].Pid == pid {
			return &c.Processes[i]
		}
	}
	return nil
}

// ProbeSet is what a capture traced.
type ProbeSet struct {
	// Malloc is true when the malloc family was traced. When false, no
	// probe was on the allocator: leaks of plain malloc were not looked
	// for (--malloc off, or auto for a JVM target).
	Malloc bool `json:"malloc"`
	// MallocReason says how Malloc was decided ("--malloc auto: JVM target").
	MallocReason string `json:"malloc_reason,omitempty"`
	// Kinds are the resource kinds traced besides malloc.
	Kinds []string `json:"kinds"`
	// NotTraced are the built-in kinds this capture did not trace, each
	// with how to trace it ("mmap.anon (--maps)").
	NotTraced []string `json:"not_traced,omitempty"`
	// ZlibBytes says where a zlib stream's bytes come from: zlib's own
	// mallocs, or computed from the init arguments for a named layout.
	ZlibBytes string `json:"zlib_bytes,omitempty"`
}

// String names what was traced, in one line, saying so when malloc was not.
func (p *ProbeSet) String() string {
	kinds := strings.Join(p.Kinds, ", ")
	not := ""
	if len(p.NotTraced) > 0 {
		not = "; not traced: " + strings.Join(p.NotTraced, ", ")
	}
	if p.Malloc {
		return "malloc family, " + kinds + not
	}
	s := kinds + "; malloc family NOT traced"
	if p.MallocReason != "" {
		s += " (" + p.MallocReason + ")"
	}
	return s + ": leaks of plain malloc are not looked for" + not
}

// sampled reports whether s's live allocations carry sampling weights.
func (s *Site) sampled() bool {
	return len(s.Live) > 0 && s.Weight(0) != 0
}
