package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/leakscope/leakscope/analyze"
)

// SchemaV1 identifies the v1 JSON report. Within v1 fields may be added but
// never change meaning; see docs/json-report.md.
const SchemaV1 = "leakscope.report/v1"

// V1 is the JSON report, schema SchemaV1. Its field names and meanings are
// a contract with consumers, so it is kept apart from the analyze model.
type V1 struct {
	Schema          string    `json:"schema"`
	Target          V1Target  `json:"target"`
	StartedAt       time.Time `json:"started_at"` // RFC 3339
	DurationSeconds float64   `json:"duration_seconds"`
	Totals          V1Totals  `json:"totals"`
	Lost            V1Lost    `json:"lost"`
	Leaks           []V1Leak  `json:"leaks"`    // rank 1 first; [] when none
	Warnings        []string  `json:"warnings"` // [] when none
	// SampleBytes is the mean sampling gap when allocations were sampled
	// (--sample-bytes): malloc counts and bytes are then estimates.
	SampleBytes uint64 `json:"sample_bytes,omitempty"`
	// ExactBudget, when sampling with an exact budget (--sample-exact), is
	// the budget in calls a second per CPU, the calls it traced with
	// weight 1 and those past it, sampled (0: no row is an estimate).
	// Added within v1.
	ExactBudget *V1ExactBudget `json:"exact_budget,omitempty"`
	// Probes says what was traced; omitted when the capture does not
	// record it. Added within v1.
	Probes *V1Probes `json:"probes,omitempty"`
	// Processes are the other processes traced with the target (run
	// follows those it starts), in the order they started; omitted when
	// there were none. Each leak then has a pid. Added within v1.
	Processes []V1Target `json:"processes,omitempty"`
	// Memory is the target's memory breakdown at the capture's last
	// snapshot that took one; omitted when none did. Added within v1.
	Memory *V1Memory `json:"memory,omitempty"`
}

// V1ExactBudget is a sampled capture's exact budget.
type V1ExactBudget struct {
	PerSecond uint32 `json:"per_second"`
	Calls     uint64 `json:"calls"`
	Past      uint64 `json:"past"` // calls after it was spent, left to the byte sampler
}

// V1Memory is a process's RSS and the parts it is made of, which add up
// to it exactly.
type V1Memory struct {
	Pid       int            `json:"pid"`
	AtSeconds float64        `json:"at_seconds"` // since the capture started
	RSSBytes  uint64         `json:"rss_bytes"`
	Parts     []V1MemoryPart `json:"parts"`
	Untraced  string         `json:"untraced,omitempty"`
}

// V1MemoryPart is one part of a breakdown.
type V1MemoryPart struct {
	Name  string `json:"name"`
	Bytes uint64 `json:"bytes"`
	// OutstandingBytes, for a traced part, is what its sites hold (more
	// than bytes when some was never touched).
	OutstandingBytes uint64 `json:"outstanding_bytes,omitempty"`
	// Culprit names the culprit of the part's best-ranked leak; for a
	// pool's growth (Pool), the code that asked the pool, not the holder.
	Culprit string `json:"culprit,omitempty"`
	Pool    bool   `json:"pool,omitempty"`
}

// V1Probes is the probe set of a capture. Malloc false means no probe was
// on the allocator: leaks of plain malloc were not looked for.
type V1Probes struct {
	Malloc       bool     `json:"malloc"`
	MallocReason string   `json:"malloc_reason,omitempty"` // e.g. "--malloc auto: JVM target"
	Kinds        []string `json:"kinds"`                   // resource kinds traced besides malloc
	ZlibBytes    string   `json:"zlib_bytes,omitempty"`    // where a zlib stream's bytes come from
}

// V1Target describes the traced process.
type V1Target struct {
	Pid      int      `json:"pid"`
	Command  []string `json:"command"` // [] when unknown
	Runtime  string   `json:"runtime"` // "native", "jvm" or "go"
	ExitCode *int     `json:"exit_code"`
	// RuntimeVersion is omitted when unknown; for Go, the toolchain
	// that built the executable ("go1.26.8"). Added within v1.
	RuntimeVersion string `json:"runtime_version,omitempty"`
	// Ended says how leakscope ended run's command, when it did
	// ("terminated by leakscope at --duration (SIGTERM)"); KeptRunning
	// that run --keep-running left it running. Added within v1.
	Ended       string `json:"ended,omitempty"`
	KeptRunning bool   `json:"kept_running,omitempty"`
	// Execs are the command lines of the images the command exec'd into
	// after it started, followed by the capture. Added within v1.
	Execs []string `json:"execs,omitempty"`
	// AttachedAfterSeconds is how long the process had run when attach
	// began: its earlier allocations are not seen; Scope says so in
	// words. Added within v1.
	AttachedAfterSeconds float64 `json:"attached_after_seconds,omitempty"`
	// Stops are run's stops of the command while leakscope updated its
	// tables; omitted when there were none. Added within v1.
	Stops *V1Stops `json:"stops,omitempty"`
	Scope string   `json:"scope,omitempty"`
	// Parent and StartedAfterSeconds are set for one of V1.Processes:
	// the pid of the process that started it, and when it started,
	// since the capture began. Added within v1.
	Parent              int     `json:"parent,omitempty"`
	StartedAfterSeconds float64 `json:"started_after_seconds,omitempty"`
	// ExitedAfterSeconds is when the process exited, since the capture
	// began, when known (a capture of several processes). Added within v1.
	ExitedAfterSeconds float64 `json:"exited_after_seconds,omitempty"`
	// Memory, for one of V1.Processes, is its latest memory breakdown
	// (V1.Memory is the target's). Added within v1.
	Memory *V1Memory `json:"memory,omitempty"`
}

// V1Stops counts run's stops of the command: how many, the longest and
// all of them together, in seconds.
type V1Stops struct {
	Count          uint64  `json:"count"`
	LongestSeconds float64 `json:"longest_seconds"`
	TotalSeconds   float64 `json:"total_seconds"`
}

// V1Totals is what all sites still hold, after the min-age filter and the
// filters of analyze.Options (Kinds, Focus, Ignore): only the sites they keep.
type V1Totals struct {
	OutstandingCount uint64 `json:"outstanding_count"`
	OutstandingBytes uint64 `json:"outstanding_bytes"`
}

// V1Lost counts what the capture could not account for.
type V1Lost struct {
	AllocationsDropped uint64 `json:"allocations_dropped"`
	UnknownFrees       uint64 `json:"unknown_frees"`
	StackErrors        uint64 `json:"stack_errors"`
	FreesMissed        uint64 `json:"frees_missed"`
	PendingDropped     uint64 `json:"pending_dropped"`
}

// V1File is a file a mmap.file row's live mappings map.
type V1File struct {
	Path  string `json:"path"`
	Count uint64 `json:"count"`
	Bytes uint64 `json:"bytes"`
}

// V1Leak is one ranked allocation site.
type V1Leak struct {
	Rank             int       `json:"rank"`
	Kind             string    `json:"kind"`
	OutstandingCount uint64    `json:"outstanding_count"`
	OutstandingBytes uint64    `json:"outstanding_bytes"`
	Allocs           uint64    `json:"allocs"`
	Frees            uint64    `json:"frees"`
	OldestAgeSeconds float64   `json:"oldest_age_seconds"` // 0 when unknown
	Score            float64   `json:"score"`              // size, age and free rate only: the fixed v1 formula
	RankScore        float64   `json:"rank_score"`         // score × trend weight; leaks are ordered by it
	Confidence       float64   `json:"confidence"`         // 0 to 1: how much evidence says leak, not memory held on purpose
	Reasons          []string  `json:"reasons"`
	Truncated        string    `json:"truncated,omitempty"`
	Frames           []V1Frame `json:"frames"` // leaf first
	// Culprit names who is responsible: the first frame of the program's
	// own code (analyze.Culprit); omitted for a stack without frames.
	// Added within v1.
	Culprit *V1Culprit `json:"culprit,omitempty"`
	// Pid is the process the allocations were made in, when the capture
	// traced more than one (V1.Processes). Added within v1.
	Pid int `json:"pid,omitempty"`
	// Files, for a mmap.file row, are the files its live mappings map,
	// most bytes first. Added within v1.
	Files []V1File `json:"files,omitempty"`

	// Estimate is true on a malloc row of a sampled capture whose counts
	// are estimates (unless the exact budget traced every call);
	// CountError and BytesError are then the standard errors of
	// outstanding_count and outstanding_bytes, omitted when 0 (every
	// allocation of the row was traced by the budget) or unknown. Added
	// within v1.
	Estimate   bool    `json:"estimate,omitempty"`
	CountError float64 `json:"count_error,omitempty"`
	BytesError float64 `json:"bytes_error,omitempty"`

	// Growth fields are present only when the capture has enough
	// snapshots for a trend (analyze.MinTrendPoints).
	GrowthBytesPerSecond   *float64 `json:"growth_bytes_per_second,omitempty"`
	GrowthObjectsPerSecond *float64 `json:"growth_objects_per_second,omitempty"`
	Trend                  *V1Trend `json:"trend,omitempty"`

	// Verdict is the row's class and the facts that decided it and its
	// confidence (analyze.Verdict). Added within v1.
	Verdict *V1Verdict `json:"verdict,omitempty"`

	// Goroutines is present only with a goroutine dump (--goroutines), when
	// goroutines' stacks run through this leak's Go code. Added within v1.
	Goroutines []V1Goroutines `json:"goroutines,omitempty"`
}

// V1Verdict is a leak row's class, decided by the order of the program's
// allocation events, and its evidence.
type V1Verdict struct {
	Class    string   `json:"class"` // leak, growing, pool, held or plateau
	Label    string   `json:"label"` // as shown: "pool growth", "pool (filled)", or the class
	Evidence []string `json:"evidence"`
	// Events is the process's allocations during the capture, the clock of
	// the facts; events_since_oldest how many came after the oldest live
	// block (at least).
	Events            uint64 `json:"events"`
	EventsSinceOldest uint64 `json:"events_since_oldest"`
	// SiteAllocsSinceOldest and SiteFreesSinceOldest are the site's own
	// allocations and frees since its oldest live block (at least);
	// omitted when unknown.
	SiteAllocsSinceOldest *uint64 `json:"site_allocs_since_oldest,omitempty"`
	SiteFreesSinceOldest  *uint64 `json:"site_frees_since_oldest,omitempty"`
	FlatShare             float64 `json:"flat_share"`
	FlatInTime            bool    `json:"flat_in_time,omitempty"`
	Growth                bool    `json:"growth"`
	// Step: the row rose in one step only (a single block, or a burst
	// between two snapshots), which cannot tell growth from a fill.
	Step bool `json:"step,omitempty"`
	// Pool is the pool allocator frame of a pool row, Requester who asked
	// the pool for memory (never known to be the holder).
	Pool      string `json:"pool,omitempty"`
	Requester string `json:"requester,omitempty"`
}

// V1Goroutines is goroutines of one state and top frame whose stacks run
// through a leak's Go code.
type V1Goroutines struct {
	Count       int    `json:"count"`
	State       string `json:"state"`        // as the runtime prints it: "chan receive", "IO wait", ...
	WaitMinutes int    `json:"wait_minutes"` // the shortest wait in the group; 0 under a minute
	Function    string `json:"function"`     // innermost frame outside the Go runtime
}

// V1Trend is how a leak's live bytes moved across the capture's snapshots.
type V1Trend struct {
	Points         int     `json:"points"`           // snapshots
	SpanSeconds    float64 `json:"span_seconds"`     // first to last snapshot
	Rises          int     `json:"rises"`            // intervals in which live bytes rose
	Falls          int     `json:"falls"`            // intervals in which they fell
	Tau            float64 `json:"tau"`              // Mann–Kendall τ, in [−1, 1]
	FlatForSeconds float64 `json:"flat_for_seconds"` // since the last new high
	Plateau        bool    `json:"plateau"`          // grew, then flat for at least half the span
	Weight         float64 `json:"weight"`           // rank_score / score
}

// V1Frame is one frame of a leak's stack. Unknown strings are "" and an
// unknown line is 0.
type V1Frame struct {
	Function string `json:"function"`
	Module   string `json:"module"`
	File     string `json:"file"`
	Line     int    `json:"line"`
	Address  string `json:"address"` // absolute, hex with 0x prefix
	Offset   string `json:"offset"`  // from the module's load base, hex with 0x prefix
	// Inlined marks a function the compiler inlined into the next
	// frame's; omitted when false. Added within v1.
	Inlined bool `json:"inlined,omitempty"`
}

// V1Culprit is a leak's culprit frame.
type V1Culprit struct {
	Function string `json:"function"` // "" when no symbol covers it
	File     string `json:"file"`
	Line     int    `json:"line"`
	Module   string `json:"module"`
}

// JSON writes r as a v1 JSON report, indented by two spaces.
func JSON(w io.Writer, r *analyze.Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(toV1(r)); err != nil {
		return fmt.Errorf("write json report: %w", err)
	}
	return nil
}

func toV1(r *analyze.Result) *V1 {
	c := r.Capture
	v := &V1{
		Schema:          SchemaV1,
		Target:          v1Target(c.Target),
		StartedAt:       c.StartedAt,
		DurationSeconds: c.Duration.Seconds(),
		SampleBytes:     c.SampleBytes,
		ExactBudget:     (*V1ExactBudget)(c.ExactBudget),
		Totals: V1Totals{
			OutstandingCount: r.Totals.OutstandingCount,
			OutstandingBytes: r.Totals.OutstandingBytes,
		},
		// A conversion, not a copy by field: a counter added to
		// analyze.Lost stops this compiling until v1 decides on it.
		Lost:     V1Lost(c.Lost),
		Leaks:    make([]V1Leak, 0, len(r.Leaks)),
		Warnings: nonNil(c.Warnings),
	}
	for _, p := range c.Processes {
		vt := v1Target(p)
		vt.Memory = v1Memory(r, p.Pid)
		v.Processes = append(v.Processes, vt)
	}
	v.Memory = v1Memory(r, c.Target.Pid)
	if p := c.Probes; p != nil {
		v.Probes = &V1Probes{Malloc: p.Malloc, MallocReason: p.MallocReason, Kinds: nonNil(p.Kinds), ZlibBytes: p.ZlibBytes}
	}
	for _, l := range r.Leaks {
		s := l.Site
		jl := V1Leak{
			Rank:             l.Rank,
			Kind:             string(s.Kind),
			OutstandingCount: l.Count,
			Estimate:         l.Estimate,
			CountError:       l.CountError,
			BytesError:       l.BytesError,
			OutstandingBytes: l.Bytes,
			Allocs:           s.Allocs,
			Frees:            s.Frees,
			OldestAgeSeconds: l.OldestAge.Seconds(),
			Score:            l.BaseScore,
			RankScore:        l.Score,
			Confidence:       l.Confidence,
			Reasons:          nonNil(l.Reasons),
			Truncated:        s.Stack.Truncated,
			Frames:           make([]V1Frame, 0, len(s.Stack.Frames)),
		}
		for _, f := range s.Files {
			jl.Files = append(jl.Files, V1File{Path: f.Path, Count: f.Count, Bytes: f.Bytes})
		}
		if t := l.Trend; t != nil {
			jl.GrowthBytesPerSecond = &t.Growth
			jl.GrowthObjectsPerSecond = &t.GrowthObjects
			jl.Trend = &V1Trend{
				Points:         t.Points,
				SpanSeconds:    t.Span.Seconds(),
				Rises:          t.Rises,
				Falls:          t.Falls,
				Tau:            t.Tau,
				FlatForSeconds: t.FlatFor.Seconds(),
				Plateau:        t.Plateau,
				Weight:         t.Weight,
			}
		}
		if v := l.Verdict; v.Class != "" {
			jv := &V1Verdict{Class: string(v.Class), Label: v.Label, Evidence: nonNil(v.Evidence), Events: v.Events,
				EventsSinceOldest: v.EventsSinceOldest, FlatShare: v.FlatShare, FlatInTime: v.FlatInTime, Growth: v.Growth, Step: v.Step,
				Pool: v.Pool, Requester: v.Requester}
			if v.SinceKnown {
				a, f := v.SiteAllocsSinceOldest, v.SiteFreesSinceOldest
				jv.SiteAllocsSinceOldest, jv.SiteFreesSinceOldest = &a, &f
			}
			jl.Verdict = jv
		}
		for _, g := range l.Goroutines {
			jl.Goroutines = append(jl.Goroutines, V1Goroutines{
				Count:       g.Count,
				State:       g.State,
				WaitMinutes: int(g.Wait.Minutes()),
				Function:    g.Function,
			})
		}
		for _, f := range s.Stack.Frames {
			jl.Frames = append(jl.Frames, V1Frame{
				Function: f.Function,
				Module:   f.Module,
				File:     f.File,
				Line:     f.Line,
				Address:  hex(f.Address),
				Offset:   hex(f.Offset),
				Inlined:  f.Inlined,
			})
		}
		if f := l.Culprit; f != nil {
			jl.Culprit = &V1Culprit{Function: f.Function, File: f.File, Line: f.Line, Module: f.Module}
		}
		if len(c.Processes) > 0 {
			jl.Pid = pidOf(c, s)
		}
		v.Leaks = append(v.Leaks, jl)
	}
	return v
}

// v1Target is t in the v1 report.
func v1Target(t analyze.Target) V1Target {
	v := V1Target{
		Pid:      t.Pid,
		Command:  nonNil(t.Command),
		Runtime:  string(t.Runtime),
		ExitCode: t.ExitCode,

		RuntimeVersion: t.RuntimeVersion,

		Ended:                t.Ended,
		KeptRunning:          t.KeptRunning,
		Execs:                t.Execs,
		AttachedAfterSeconds: t.AttachedAfter.Seconds(),
		Scope:                t.Scope(),

		Parent:              t.Parent,
		StartedAfterSeconds: t.StartedAfter.Seconds(),
		ExitedAfterSeconds:  t.ExitedAfter.Seconds(),
	}
	if st := t.Stops; st != nil {
		v.Stops = &V1Stops{Count: st.Count, LongestSeconds: st.Longest.Seconds(), TotalSeconds: st.Total.Seconds()}
	}
	return v
}

func hex(n uint64) string { return "0x" + strconv.FormatUint(n, 16) }

// nonNil returns s, or an empty slice when s is nil, so that JSON shows []
// rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
