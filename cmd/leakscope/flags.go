package main

import (
	"context"
	"fmt"
	"os"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/leakscope/leakscope/analyze"

	"github.com/leakscope/leakscope/probe"
	"github.com/leakscope/leakscope/probe/symbolize"
	"github.com/leakscope/leakscope/probe/track"
)

// captureOptions are the flags shared by run and attach.
type captureOptions struct {
	Format         string
	Output         string
	Interval       time.Duration
	Duration       time.Duration
	MinAge         time.Duration
	Top            int
	MaxAllocations uint32
	MaxSites       uint32
	MaxStacks      uint32
	Unwind         string
	Malloc         string // --malloc: auto, on or off
	MaxUnwindRows  uint32
	SampleBytes    string
	sampleBytes    uint64
	SampleExact    uint32 // --sample-exact: the exact budget under sampling, calls a second per CPU
	ProbesOnly     bool   // --probes-only (hidden): measure the probes' own cost
	Maps           bool   // --maps: trace mmap.anon, mmap.file and thread
	Progress       string // auto, always, never
	Save           string
	Track          []string
	TrackFile      string
	pairs          []track.Pair
	FailOn         []string
	rules          []analyze.Rule
	ReportDir      string // --report-dir: every format plus junit.xml; see reportdir.go
	Focus, Ignore  string // --focus, --ignore: regular expressions on frames
	focus, ignore  *regexp.Regexp
	CulpritSkip    string // --culprit-skip: frames a culprit is never
	culpritSkip    *regexp.Regexp
	PoolFrames     []string // --pool-frame: functions of pool allocators, besides Netty's
	pools          *regexp.Regexp
	Kinds          []string // --kind: path.Match patterns on a site's kind
	GroupBy        string   // --group-by: stack or frame
	Force          bool     // --force: write through other users' links and over their files
	Debuginfod     debuginfodOption
	debuginfod     *symbolize.Debuginfod // nil: no server
	debuginfodNote string                // DEBUGINFOD_URLS entries dropped

	Goroutines goroutineDump // --goroutines: see goroutines.go
}

var formats = []string{"text", "json", "html", "pprof"}

// minInterval is the shortest --interval: a snapshot at 100k stacks takes
// ~45 ms of CPU.
const minInterval = 100 * time.Millisecond

func (o *captureOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Format, "format", "text", "report format: text, json, html or pprof")
	fs.StringVarP(&o.Output, "output", "o", "", "write the report to this file (default: standard output)")
	fs.DurationVar(&o.Duration, "duration", 0, "stop tracing after this long (default: until the target exits or Ctrl-C)")
	fs.DurationVar(&o.MinAge, "min-age", 0, "count only allocations at least this old at the end")
	fs.IntVar(&o.Top, "top", 10, "leaks listed in the report, and stacks printed in full by the text format")
	fs.StringVar(&o.Progress, "progress", "auto", "progress line on stderr: auto (when a terminal), always, never")
	fs.StringVar(&o.Save, "save", "", "also write the capture to this file as it happens (re-render it with leakscope report)")
	o.addProbeFlags(fs, time.Second, "")
	o.addReportFlags(fs)
}

// addProbeFlags are the flags that say what is traced and how, shared by
// run, attach and agent (which has its own interval and sampling
// defaults: always-on cost).
func (o *captureOptions) addProbeFlags(fs *pflag.FlagSet, interval time.Duration, sampleBytes string) {
	fs.DurationVar(&o.Interval, "interval", interval, "time between snapshots of the kernel tables")
	fs.Uint32Var(&o.MaxAllocations, "max-allocations", probe.DefaultMaxAllocations, "size of the kernel's live-allocation table")
	fs.Uint32Var(&o.MaxSites, "max-sites", probe.DefaultMaxSites, "size of the kernel's per-stack table")
	fs.Uint32Var(&o.MaxStacks, "max-stacks", probe.DefaultMaxStacks, "size of the kernel's stack table")
	fs.StringVar(&o.SampleBytes, "sample-bytes", sampleBytes, "sample allocations: trace one per SIZE allocated on average (e.g. 512KiB); counts become estimates. off or '': trace every allocation")
	fs.Uint32Var(&o.SampleExact, "sample-exact", probe.DefaultSampleExact, "with --sample-bytes, trace up to N malloc-family calls a second per CPU exactly (the first of each kernel tick), whatever their size: a program that allocates rarely is reported exactly; 0: none")
	fs.StringVar(&o.Malloc, "malloc", probe.MallocAuto, "trace the malloc family: auto (on, except for a JVM target), on, or off (no allocator probes: zlib streams, declared pairs and JVM direct memory only; malloc leaks are not looked for)")
	fs.StringVar(&o.Unwind, "unwind", probe.UnwindAuto, "how stacks are walked per object: auto (frame pointers where kept, .eh_frame tables elsewhere), fp or dwarf")
	fs.Uint32Var(&o.MaxUnwindRows, "max-unwind-rows", probe.DefaultMaxUnwindRows, "size of the kernel's unwind table shared by all objects (8 bytes a row)")
	fs.StringArrayVar(&o.Track, "track", nil, "also trace an acquire/release pair: preset:NAME[,preset:NAME] (bzip2, stdio, dirent, openssl; zlib is always on) or KIND=LIBRARY:ACQUIRE[/HANDLE]:RELEASE[/HANDLE] (repeatable; see docs/tracking.md)")
	fs.StringVar(&o.TrackFile, "track-file", "", "read pairs and presets to trace from this YAML or JSON file")
	fs.BoolVar(&o.ProbesOnly, "probes-only", false, "attach every probe, but with programs that return at once: nothing is counted; measures what the probes alone cost the target (make bench)")
	_ = fs.MarkHidden("probes-only")
	fs.BoolVar(&o.Maps, "maps", false, "also trace mappings (mmap.anon, mmap.file: mmap, munmap, mremap) and threads started and not exited (thread), from syscall tracepoints")
	o.Debuginfod.addFlag(fs)
}

// addReportFlags are the flags of everything that renders a report.
func (o *captureOptions) addReportFlags(fs *pflag.FlagSet) {
	fs.StringArrayVar(&o.FailOn, "fail-on", nil, "exit 1 when a leak row meets every condition of RULE, e.g. 'kind=malloc,bytes>1MiB' (repeatable)")
	fs.BoolVar(&o.Force, "force", false, "write -o, --save and --report-dir files even through a symbolic link another user owns (the link is replaced, not followed) or over a file or directory another user owns")
	fs.StringVar(&o.ReportDir, "report-dir", "", "also write report.txt, report.json, report.html, profile.pb.gz and junit.xml into this directory (CI artifacts)")
	fs.StringVar(&o.Focus, "focus", "", "keep only the stacks with a frame whose function (or object, when unnamed) matches this regular expression; totals cover what is kept")
	fs.StringVar(&o.Ignore, "ignore", "", "drop the stacks with a frame whose function (or object, when unnamed) matches this regular expression")
	fs.StringArrayVar(&o.Kinds, "kind", nil, "keep only the leaks whose kind matches this pattern, e.g. 'zlib.*' (repeatable)")
	o.addCulpritFlags(fs)
	fs.StringVar(&o.GroupBy, "group-by", string(analyze.GroupByStack), "one leak per call stack (stack) or per first frame outside allocators and runtimes (frame)")
	o.addGoroutinesFlag(fs)
}

// addCulpritFlags are the flags that decide a row's culprit and class,
// which agent has too.
func (o *captureOptions) addCulpritFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.CulpritSkip, "culprit-skip", "", "also skip the frames whose function (or object, when unnamed) matches this regular expression when naming a leak's culprit, e.g. a third-party library's package")
	fs.StringArrayVar(&o.PoolFrames, "pool-frame", nil, "a row whose stack has a frame whose function matches this regular expression is a pool's growth, charged to who asked when the pool was full, never called the holder (repeatable; Netty's PoolArena and PoolChunk always are)")
}

// parseRules parses the --fail-on rules.
func parseRules(specs []string) ([]analyze.Rule, error) {
	var rules []analyze.Rule
	for _, spec := range specs {
		r, err := analyze.ParseRule(spec)
		if err != nil {
			return nil, fmt.Errorf("--fail-on: %w", err)
		}
		rules = append(rules, r)
	}
	return rules, nil
}

func (o *captureOptions) validate() error {
	ok := false
	for _, f := range formats {
		ok = ok || o.Format == f
	}
	if !ok {
		return fmt.Errorf("unknown --format %q: use text, json, html or pprof", o.Format)
	}
	if err := o.parseTrack(); err != nil {
		return err
	}
	var err error
	if o.debuginfod, o.debuginfodNote, err = o.Debuginfod.source(); err != nil {
		return err
	}
	if err := o.parseFilters(); err != nil {
		return err
	}
	if o.rules, err = parseRules(o.FailOn); err != nil {
		return err
	}
	if o.Interval < minInterval {
		return fmt.Errorf("--interval must be at least %s (a snapshot reads every kernel table), got %s", minInterval, o.Interval)
	}
	if o.Duration < 0 || o.MinAge < 0 {
		return fmt.Errorf("--duration and --min-age cannot be negative")
	}
	if o.Top < 0 {
		return fmt.Errorf("--top cannot be negative")
	}
	if o.MaxAllocations == 0 || o.MaxSites == 0 || o.MaxStacks == 0 {
		return fmt.Errorf("--max-allocations, --max-sites and --max-stacks must be positive")
	}
	o.sampleBytes = 0
	if o.SampleBytes != "" && o.SampleBytes != "off" {
		n, err := analyze.ParseSize(o.SampleBytes)
		if err != nil || n == 0 {
			return fmt.Errorf("--sample-bytes %q: want a positive size such as 512KiB", o.SampleBytes)
		}
		o.sampleBytes = n
	}
	switch o.Malloc {
	case "", probe.MallocAuto, probe.MallocOn, probe.MallocOff: // "": report, which has no --malloc
	default:
		return fmt.Errorf("unknown --malloc %q: use auto, on or off", o.Malloc)
	}
	if o.Malloc == probe.MallocOff && o.sampleBytes > 0 {
		return fmt.Errorf("--sample-bytes samples malloc calls: it needs --malloc on or auto")
	}
	switch o.Unwind {
	case probe.UnwindAuto, probe.UnwindFP, probe.UnwindDWARF:
	default:
		return fmt.Errorf("unknown --unwind %q: use auto, fp or dwarf", o.Unwind)
	}
	switch o.Progress {
	case "auto", "always", "never":
	default:
		return fmt.Errorf("unknown --progress %q: use auto, always or never", o.Progress)
	}
	return nil
}

// parseFilters checks --kind and --group-by and compiles --focus and
// --ignore; an empty expression filters nothing.
func (o *captureOptions) parseFilters() error {
	o.focus, o.ignore, o.culpritSkip = nil, nil, nil
	var err error
	if o.CulpritSkip != "" {
		if o.culpritSkip, err = analyze.ParseFilter("--culprit-skip", o.CulpritSkip); err != nil {
			return err
		}
	}
	if o.Focus != "" {
		if o.focus, err = analyze.ParseFilter("--focus", o.Focus); err != nil {
			return err
		}
	}
	if o.Ignore != "" {
		if o.ignore, err = analyze.ParseFilter("--ignore", o.Ignore); err != nil {
			return err
		}
	}
	o.pools = nil
	if len(o.PoolFrames) > 0 {
		alts := []string{analyze.DefaultPools.String()}
		for _, p := range o.PoolFrames {
			if _, err := analyze.ParseFilter("--pool-frame", p); err != nil {
				return err
			}
			alts = append(alts, "(?:"+p+")")
		}
		if o.pools, err = regexp.Compile(strings.Join(alts, "|")); err != nil {
			return fmt.Errorf("--pool-frame: %w", err)
		}
	}
	for _, k := range o.Kinds {
		if _, err := path.Match(k, ""); err != nil {
			return fmt.Errorf("--kind %q: %w", k, err)
		}
	}
	switch analyze.Grouping(o.GroupBy) {
	case analyze.GroupByStack, analyze.GroupByFrame:
	default:
		return fmt.Errorf("unknown --group-by %q: use stack or frame", o.GroupBy)
	}
	return nil
}

// rankOptions are the analyze options of a report: --min-age, the filters,
// --group-by, and at most top leaks (0 keeps all of them, as the --fail-on
// rules need).
func (o *captureOptions) rankOptions(top int) analyze.Options {
	return analyze.Options{
		MinAge:  o.MinAge,
		Top:     top,
		Kinds:   o.Kinds,
		Focus:   o.focus,
		Ignore:  o.ignore,
		GroupBy: analyze.Grouping(o.GroupBy),

		CulpritSkip: o.culpritSkip,
		Pools:       o.pools,
	}
}

// parseTrack reads --track and --track-file into pairs; a kind declared
// twice is an error.
func (o *captureOptions) parseTrack() error {
	o.pairs = o.pairs[:0]
	for _, spec := range o.Track {
		ps, err := track.Parse(spec)
		if err != nil {
			return err
		}
		o.pairs = append(o.pairs, ps...)
	}
	if o.TrackFile != "" {
		data, err := os.ReadFile(o.TrackFile)
		if err != nil {
			return fmt.Errorf("--track-file: %w", err)
		}
		ps, err := track.ParseFile(data)
		if err != nil {
			return fmt.Errorf("--track-file %s: %w", o.TrackFile, err)
		}
		o.pairs = append(o.pairs, ps...)
	}
	seen := map[string]bool{}
	for _, p := range o.pairs {
		if seen[p.Kind] {
			return fmt.Errorf("--track: kind %s is declared twice", p.Kind)
		}
		seen[p.Kind] = true
	}
	return nil
}

// probeOptions are the tracer's options; ctx (Ctrl-C, SIGTERM) bounds the
// tracer's own I/O with the target.
func (o *captureOptions) probeOptions(ctx context.Context, warnf func(string, ...any)) probe.Options {
	if o.debuginfodNote != "" && warnf != nil {
		warnf("%s", o.debuginfodNote)
	}
	return probe.Options{
		Debuginfod:     o.debuginfod,
		Context:        ctx,
		Track:          o.pairs,
		Unwind:         o.Unwind,
		Malloc:         o.Malloc,
		SampleBytes:    o.sampleBytes,
		SampleExact:    o.SampleExact,
		ProbesOnly:     o.ProbesOnly,
		Maps:           o.Maps,
		MaxUnwindRows:  o.MaxUnwindRows,
		MaxAllocations: o.MaxAllocations,
		MaxSites:       o.MaxSites,
		MaxStacks:      o.MaxStacks,
		Warnf:          warnf,
	}
}
