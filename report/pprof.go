package report

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/google/pprof/profile"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/termtext"
)

// pprofAllocSpaceComment explains the one sample value leakscope cannot
// measure exactly.
const pprofAllocSpaceComment = "leakscope: alloc_objects are the allocations made during the capture; alloc_space is alloc_objects × the mean size of the site's live blocks (the sizes of freed allocations are not recorded); inuse_* is what is outstanding at the end; leak_* (the default) is inuse_* of the rows classed leak, growing, held or pool growth, 0 for plateaus and filled pools"

// Pprof writes r's capture as a gzipped pprof profile (profile.proto), the
// format of Go heap profiles, so `go tool pprof -inuse_space`, Pyroscope
// and Parca read it. It has the sample types alloc_objects/count,
// alloc_space/bytes, inuse_objects/count, inuse_space/bytes, leak_objects/count
// and leak_space/bytes (the default), and one sample per site of the
// capture: all of them, whatever r.Options.Top and MinAge, because pprof has
// its own filters. Each sample carries the labels kind (e.g.
// "zlib.inflate") and class (the verdict's label).
//
// alloc_* are allocations over the capture: alloc_objects the site's
// allocations, alloc_space those times the mean size of its live blocks,
// an estimate, because the tracer does not record the sizes of freed
// allocations. inuse_* is what is outstanding at the end. leak_* is inuse_*
// for the rows classed leak, growing, held (too few facts to tell) or pool growth and 0 for the others
// (plateau, a filled pool), so pprof's default view ranks leaks, not
// caches. The profile says so in a comment.
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
			{Type: "leak_objects", Unit: "count"},
			{Type: "leak_space", Unit: "bytes"},
		},
		DefaultSampleType: "leak_space",
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
	values := make([]int64, 6*len(c.Sites))
	classes := pprofClasses(r)
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
		kind, culprit, class string
		pid                  int // when the capture traced more than one process
	}
	labels := map[labelKey]map[string][]string{}
	culprits := analyze.NewCulprits(r.Options.CulpritSkip).In(c)
	p.Sample = make([]*profile.Sample, len(c.Sites))
	// By site ID, not the capture's order of sites, which differs between
	// a live capture of several processes and the same capture read from
	// its file: locations and functions are numbered as they are met.
	order := make([]int, len(c.Sites))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(c.Sites[a].ID, c.Sites[b].ID) })
	for n, i := range order {
		s := &c.Sites[i]
		k := labelKey{kind: string(s.Kind), class: classes[s.ID].Label}
		if f, ok := culprits.FindOrSite(s); ok {
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
			if k.class != "" {
				label["class"] = []string{k.class}
			}
			if k.pid != 0 {
				label["pid"] = []string{strconv.Itoa(k.pid)}
			}
			labels[k] = label
		}
		v := values[6*i : 6*i+6 : 6*i+6]
		allocs := max(s.Allocs, s.LiveCount)
		allocBytes := s.LiveBytes
		if s.LiveCount > 0 && allocs > s.LiveCount {
			allocBytes = uint64(float64(s.LiveBytes) / float64(s.LiveCount) * float64(allocs))
		}
		v[0], v[1], v[2], v[3] = clampInt64(allocs), clampInt64(allocBytes), clampInt64(s.LiveCount), clampInt64(s.LiveBytes)
		if cl, ok := classes[s.ID]; ok && pprofLeaks(cl) {
			v[4], v[5] = v[2], v[3]
		}
		start := len(locs)
		for _, f := range s.Stack.Frames {
			locs = append(locs, b.location(*f))
		}
		if s.Stack.Truncated != "" {
			locs = append(locs, b.location(analyze.Frame{Function: "[truncated: " + s.Stack.Truncated + "]"}))
		}
		smp := &samples[n]
		smp.Value, smp.Label = v, label
		if len(locs) > start {
			smp.Location = locs[start:len(locs):len(locs)]
		}
		p.Sample[n] = smp
	}
	return p
}

// pprofClasses is the verdict of every site of r's capture by ID: r's
// rows, and for the sites --top cut off, a ranking of them all.
func pprofClasses(r *analyze.Result) map[uint64]analyze.Verdict {
	out := make(map[uint64]analyze.Verdict, len(r.Capture.Sites))
	leaks := r.Leaks
	if len(leaks) < len(r.Capture.Sites) {
		o := r.Options
		o.Top, o.MinAge = 0, 0
		o.Kinds, o.Focus, o.Ignore, o.GroupBy = nil, nil, nil, "" // r.Capture is already filtered
		leaks = analyze.Rank(r.Capture, o).Leaks
	}
	for _, l := range leaks {
		out[l.Site.ID] = l.Verdict
	}
	return out
}

// pprofLeaks says whether a row's live memory counts in leak_*.
func pprofLeaks(v analyze.Verdict) bool {
	return v.Class == analyze.ClassLeak || v.Class == analyze.ClassGrowing || v.Class == analyze.ClassHeld || v.Label == "pool growth"
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
