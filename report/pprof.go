package report

import (
	"fmt"
	"io"
	"strconv"

	"github.com/google/pprof/profile"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/termtext"
)

// pprofAllocSpaceComment explains the one sample value leakscope cannot
// measure exactly.
const pprofAllocSpaceComment = "leakscope: alloc_space counts only bytes still live at the end of the capture; the sizes of freed allocations are not recorded"

// Pprof writes r's capture as a gzipped pprof profile (profile.proto), the
// format of Go heap profiles, so `go tool pprof -inuse_space`, Pyroscope
// and Parca read it. It has the sample types alloc_objects/count,
// alloc_space/bytes, inuse_objects/count and inuse_space/bytes (the
// default), and one sample per site of the capture: all of them, whatever
// r.Options.Top and MinAge, because pprof has its own filters. Each sample
// carries the label kind (e.g. "zlib.inflate").
//
// inuse_* are the site's live totals at the end of the capture and
// alloc_objects its allocations during the capture. alloc_space is a lower
// bound, the live bytes, because the tracer does not record the sizes of
// freed allocations; the profile says so in a comment.
//
// The profile's comments (go tool pprof -comments) also list every loss
// counter of the capture, zero or not, one line each ("leakscope: lost
// allocations_dropped 3", named as in the JSON report), the sampling gap
// when allocations were sampled, and each warning of the capture
// ("leakscope: warning: ..."), sanitized as the text report is, since
// pprof prints comments as they are.
//
// Locations are leaf first, with one mapping per module, carrying the build
// ID of the matching Capture.Objects entry. Mappings are marked as
// symbolized, so pprof never re-symbolizes frames with whatever binary now
// sits at that path. A truncated stack ends in a pseudo-frame named
// "[truncated: <reason>]".
func Pprof(w io.Writer, r *analyze.Result) error {
	if err := pprofProfile(r).Write(w); err != nil {
		return fmt.Errorf("write pprof profile: %w", err)
	}
	return nil
}

func pprofProfile(r *analyze.Result) *profile.Profile {
	c := r.Capture
	p := &profile.Profile{
		SampleType: []*profile.ValueType{
			{Type: "alloc_objects", Unit: "count"},
			{Type: "alloc_space", Unit: "bytes"},
			{Type: "inuse_objects", Unit: "count"},
			{Type: "inuse_space", Unit: "bytes"},
		},
		DefaultSampleType: "inuse_space",
		PeriodType:        &profile.ValueType{Type: "space", Unit: "bytes"},
		Period:            1,
		DurationNanos:     c.Duration.Nanoseconds(),
		Comments:          pprofComments(c),
	}
	if !c.StartedAt.IsZero() {
		p.TimeNanos = c.StartedAt.UnixNano()
	}
	b := pprofBuilder{
		p:         p,
		buildIDs:  map[string]string{},
		mappings:  map[string]*profile.Mapping{},
		functions: map[[2]string]*profile.Function{},
		locations: map[analyze.Frame]*profile.Location{},
	}
	for _, o := range c.Objects {
		b.buildIDs[o.Path] = o.BuildID
	}
	// One allocation each for the samples, their values and their
	// locations, and one label map per kind, shared (the encoder only
	// reads them): a map, a value slice and a location slice grown by
	// append for each of 100k sites were most of a 210 MB peak.
	samples := make([]profile.Sample, len(c.Sites))
	values := make([]int64, 4*len(c.Sites))
	nloc := 0
	for i := range c.Sites {
		nloc += len(c.Sites[i].Stack.Frames)
		if c.Sites[i].Stack.Truncated != "" {
			nloc++
		}
	}
	locs := make([]*profile.Location, 0, nloc)
	// Samples of one kind and culprit share their label map.
	type labelKey struct {
		kind, culprit string
		pid           int // when the capture traced more than one process
	}
	labels := map[labelKey]map[string][]string{}
	culprits := analyze.NewCulprits(r.Options.CulpritSkip)
	p.Sample = make([]*profile.Sample, len(c.Sites))
	for i := range c.Sites {
		s := &c.Sites[i]
		k := labelKey{kind: string(s.Kind)}
		if f, ok := culprits.FindOr(s.Stack); ok {
			k.culprit = shortFrame(f)
		}
		if len(c.Processes) > 0 {
			k.pid = pidOf(c, s)
		}
		label, ok := labels[k]
		if !ok {
			label = map[string][]string{"kind": {k.kind}}
			if k.culprit != "" {
				label["culprit"] = []string{k.culprit}
			}
			if k.pid != 0 {
				label["pid"] = []string{strconv.Itoa(k.pid)}
			}
			labels[k] = label
		}
		v := values[4*i : 4*i+4 : 4*i+4]
		v[0], v[1], v[2], v[3] = clampInt64(max(s.Allocs, s.LiveCount)), clampInt64(s.LiveBytes), clampInt64(s.LiveCount), clampInt64(s.LiveBytes)
		start := len(locs)
		for _, f := range s.Stack.Frames {
			locs = append(locs, b.location(*f))
		}
		if s.Stack.Truncated != "" {
			locs = append(locs, b.location(analyze.Frame{Function: "[truncated: " + s.Stack.Truncated + "]"}))
		}
		smp := &samples[i]
		smp.Value, smp.Label = v, label
		if len(locs) > start {
			smp.Location = locs[start:len(locs):len(locs)]
		}
		p.Sample[i] = smp
	}
	return p
}

// pprofComments returns the profile's comments for c: what alloc_space
// means, the loss counters, the sampling gap and the warnings.
func pprofComments(c *analyze.Capture) []string {
	l := c.Lost
	cs := []string{
		pprofAllocSpaceComment,
		fmt.Sprintf("leakscope: lost allocations_dropped %d", l.AllocationsDropped),
		fmt.Sprintf("leakscope: lost unknown_frees %d", l.UnknownFrees),
		fmt.Sprintf("leakscope: lost stack_errors %d", l.StackErrors),
		fmt.Sprintf("leakscope: lost frees_missed %d", l.FreesMissed),
		fmt.Sprintf("leakscope: lost pending_dropped %d", l.PendingDropped),
	}
	if st := c.Target.Status(); st != "" {
		cs = append(cs, "leakscope: target "+termtext.Sanitize(st))
	}
	for _, e := range c.Target.Execs {
		cs = append(cs, "leakscope: exec'd "+termtext.Sanitize(e))
	}
	for _, pr := range c.Processes {
		cs = append(cs, "leakscope: process "+termtext.Sanitize(processLine(pr)))
	}
	if sc := c.Target.Scope(); sc != "" {
		cs = append(cs, "leakscope: scope: "+sc)
	}
	if st := c.Target.Stops; st != nil {
		cs = append(cs, "leakscope: stops "+st.String())
	}
	if c.SampleBytes > 0 {
		cs = append(cs, fmt.Sprintf("leakscope: sample_bytes %d: allocations were sampled, so malloc counts and bytes are estimates", c.SampleBytes))
	}
	for _, w := range c.Warnings {
		cs = append(cs, "leakscope: warning: "+termtext.Sanitize(w))
	}
	return cs
}

// pprofBuilder interns mappings, functions and locations, numbering each
// kind from 1 in order of first use so the profile is deterministic.
type pprofBuilder struct {
	p         *profile.Profile
	buildIDs  map[string]string // object path to build ID
	mappings  map[string]*profile.Mapping
	functions map[[2]string]*profile.Function // name, file
	locations map[analyze.Frame]*profile.Location
}

func (b *pprofBuilder) location(f analyze.Frame) *profile.Location {
	if l, ok := b.locations[f]; ok {
		return l
	}
	l := &profile.Location{
		ID:      uint64(len(b.p.Location) + 1),
		Address: f.Address,
		Mapping: b.mapping(f),
	}
	if f.Function != "" {
		l.Line = []profile.Line{{Function: b.function(f), Line: int64(f.Line)}}
	}
	b.locations[f] = l
	b.p.Location = append(b.p.Location, l)
	return l
}

// mapping returns the mapping of f's module, nil when f has none. Its range
// grows to cover every address seen in it; Start is the load base.
func (b *pprofBuilder) mapping(f analyze.Frame) *profile.Mapping {
	if f.Module == "" {
		return nil
	}
	m, ok := b.mappings[f.Module]
	if !ok {
		m = &profile.Mapping{
			ID:           uint64(len(b.p.Mapping) + 1),
			Start:        f.Address - min(f.Offset, f.Address),
			Limit:        f.Address + 1,
			File:         f.Module,
			BuildID:      b.buildIDs[f.Module],
			HasFunctions: true,
		}
		b.mappings[f.Module] = m
		b.p.Mapping = append(b.p.Mapping, m)
	}
	m.Limit = max(m.Limit, f.Address+1)
	m.HasFilenames = m.HasFilenames || f.File != ""
	m.HasLineNumbers = m.HasLineNumbers || f.Line > 0
	return m
}

func (b *pprofBuilder) function(f analyze.Frame) *profile.Function {
	key := [2]string{f.Function, f.File}
	if fn, ok := b.functions[key]; ok {
		return fn
	}
	fn := &profile.Function{
		ID:         uint64(len(b.p.Function) + 1),
		Name:       f.Function,
		SystemName: f.Function,
		Filename:   f.File,
	}
	b.functions[key] = fn
	b.p.Function = append(b.p.Function, fn)
	return fn
}

// clampInt64 converts n to pprof's int64 values, saturating.
func clampInt64(n uint64) int64 {
	return int64(min(n, 1<<63-1))
}
