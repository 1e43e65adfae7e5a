package analyze

import (
	"cmp"
	"fmt"
	"math"
	"regexp"
	"slices"
	"time"
)

// Options controls which sites and live allocations Rank counts, how it
// groups sites and how many leaks it keeps.
type Options struct {
	// MinAge counts only live allocations at least this old. It needs
	// per-allocation ages (Site.Live); a site without them is counted with
	// its totals (LiveCount, LiveBytes) and says so in its Reasons.
	MinAge time.Duration
	// Top keeps at most Top leaks; 0 or less keeps all of them.
	Top int
	// Kinds keeps only the sites whose Kind matches one of these
	// path.Match patterns, e.g. "zlib.*"; empty keeps every kind. A
	// malformed pattern matches nothing.
	Kinds []string
	// Focus keeps only the sites with at least one frame whose name
	// matches it; Ignore drops the sites with any such frame, as pprof's
	// -focus and -ignore do. A frame's name is its function, or the base
	// name of its module when no symbol covers it. nil filters nothing.
	// See ParseFilter.
	Focus, Ignore *regexp.Regexp
	// GroupBy is how sites become leaks: GroupByFrame merges the sites of
	// one kind that share a Culprit; GroupByStack or "" keeps one leak
	// per site. Grouping comes after the filters above.
	GroupBy Grouping
	// CulpritSkip skips, besides leakscope's own rules, the frames whose
	// name it matches when a leak's Culprit is chosen (--culprit-skip).
	CulpritSkip *regexp.Regexp
	// Pools matches the functions of pool allocators: a row whose stack
	// has such a frame is ClassPool (--pool-frame adds to it). nil means
	// DefaultPools.
	Pools *regexp.Regexp
}

// Totals is what every site of a capture still holds, after the Kinds,
// Focus and Ignore filters and the MinAge filter. It covers all sites those
// filters keep, including those Options.Top cut off.
type Totals struct {
	OutstandingCount uint64 // live allocations
	OutstandingBytes uint64
}

// Leak is one ranked site.
type Leak struct {
	Rank         int    // 1 is the most likely leak
	Site         *Site  // points into Result.Capture.Sites; a merged site with GroupByFrame
	Count, Bytes uint64 // live allocations counted after the MinAge filter
	// OldestAge is the age of the oldest counted allocation at the end of
	// the capture; 0 when AgeKnown is false.
	OldestAge time.Duration
	// AgeKnown is false when the site has no per-allocation ages
	// (Site.Live is empty), so OldestAge means nothing and MinAge was not
	// applied.
	AgeKnown bool
	// Estimate is set on a malloc row of a sampled capture
	// (Capture.SampleBytes) when Count and Bytes are estimates: unless
	// the exact budget traced every call of the capture
	// (ExactBudget.Past 0), some of its allocations may have been left
	// to chance. CountError and BytesError are then their standard
	// errors, Horvitz–Thompson's sqrt(Σ w(w−1)) and sqrt(Σ w(w−1)·size²)
	// over the counted allocations of weight w (Site.LiveWeights): 0 when
	// all of those were traced by the budget (weight 1), and when the site
	// has no per-allocation weights (an agent's rows: unknown).
	Estimate               bool
	CountError, BytesError float64
	// Trend is how the site's live memory moved across the capture's
	// snapshots; nil when the capture has fewer than MinTrendPoints
	// snapshots, so growth is unknown.
	Trend *Trend
	// BaseScore weighs Bytes by age and free rate only: the v1 score, kept
	// unchanged for consumers that depend on its formula. Score multiplies
	// it by the growth weight and is what leaks are ranked by; the two are
	// equal without a Trend. See Rank.
	BaseScore, Score float64
	// Confidence, from 0 to 1, is how much evidence says this is a leak
	// rather than memory held on purpose: set by its Verdict's class.
	Confidence float64
	// Verdict is the row's class and the facts that decided it.
	Verdict Verdict
	Reasons []string // human sentences stating the facts the score used
	// Goroutines are the goroutines of a Go target's dump whose stacks
	// run through this leak's Go code (CorrelateGoroutines); nil without
	// a dump or when none does.
	Goroutines []GoroutineGroup
	// Culprit is the frame that names who is responsible: the first of
	// the program's own code (Culprit), or the stack's first frame when
	// every frame is a library's; nil for a stack without frames.
	Culprit *Frame
}

// Result is a ranked capture.
type Result struct {
	Capture *Capture
	Options Options
	Totals  Totals
	// Leaks holds the sites that still hold at least one counted
	// allocation, best rank first. It is never nil.
	Leaks []Leak
}

// Rank scores every site of c and returns those still holding memory, most
// likely leak first. c must not be nil, and Rank never modifies it.
//
// The filters of opts (Kinds, Focus, Ignore) and its GroupBy apply first,
// so the leaks, their trends and Result.Totals cover only the sites they
// keep. Result.Capture is then a copy of c holding only those sites
// (merged by GroupBy), whose snapshots list only them; a merged site gets
// the reason "N stacks grouped by FRAME". Without filters or grouping,
// Result.Capture is c itself. Result.Leaks point into Result.Capture.
//
// The base score (v1) is the live bytes, weighted down for young sites and
// for sites that free most of what they allocate:
//
//	BaseScore  = Bytes × ageWeight × freeWeight
//	ageWeight  = 0.5 + 0.5 × min(1, OldestAge / Capture.Duration)
//	freeWeight = 1 − 0.5 × min(1, Frees / Allocs)
//
// Both weights lie in [0.5, 1], so a weight can at most halve the score:
// bytes dominate, and age and free rate decide between sites of similar
// size. ageWeight is 1 when the age is unknown (Site.Live empty) or the
// capture has no duration, and freeWeight is 1 when the site allocated
// nothing during the capture: missing evidence never lowers a score.
//
// With at least MinTrendPoints snapshots, the ranking score also weighs
// growth, because a leak is memory that keeps growing, while a pool or
// cache fills once and stays full:
//
//	Score = BaseScore × Trend.Weight
//	Trend.Weight = 0.1 + 0.9 × max(0, Tau) × (1 − FlatFor/Span)
//
// (see Trend). A site that grows steadily to the end keeps about its base
// score; one that stopped growing early keeps a tenth to a fifth of it, so
// it needs five to ten times the bytes to outrank a steady leak. The trend reads every
// live allocation in the snapshots, ignoring MinAge. With fewer snapshots
// Score equals BaseScore.
//
// Equal scores are ordered by Bytes, then Count (both descending), then
// Site.ID (ascending), so the order is deterministic. Classes then order
// the leaks within each successive rankChunk of that order (byClass), so
// the first N leaks are the same whatever Options.Top is.
func Rank(c *Capture, opts Options) *Result {
	clks := newClocks(c) // each process's allocations, before filters
	pools := opts.Pools
	if pools == nil {
		pools = DefaultPools
	}
	c, notes := filter(c, opts)
	r := &Result{Capture: c, Options: opts}
	// Scored in a compact form (56 B a site); a Leak (136 B) and its
	// Trend are made only for the leaks kept: 100k sites were 14 MB of
	// leaks and 8 MB of trends to keep ten.
	sc := make([]scored, 0, len(c.Sites))
	for i := range c.Sites {
		l := measure(&c.Sites[i], opts.MinAge)
		if l.Count == 0 {
			continue
		}
		r.Totals.OutstandingCount += l.Count
		r.Totals.OutstandingBytes += l.Bytes
		fw := freeWeight(l.Site)
		base := float64(l.Bytes) * ageWeight(l, c.Duration) * fw
		score := base
		clk := clks.of(l.Site)
		if share, ok := clk.ageShare(l); ok {
			score = float64(l.Bytes) * (0.5 + 0.5*share) * fw
		}
		p := clk.profile(l.Site)
		if p.ok && !p.step {
			// A single step weighs nothing: it is no fact of growth,
			// nor of a fill.
			score *= growthWeight(1, p.flat)
		}
		sc = append(sc, scored{count: l.Count, bytes: l.Bytes, oldest: l.OldestAge, base: base, score: score, site: i, ageKnown: l.AgeKnown, profiled: p.ok})
	}
	keepAll := opts.Top <= 0 || len(sc) <= opts.Top
	// The rows classes order: every row, or the first rankChunks by
	// rank score that hold the top ones.
	cand := len(sc)
	if !keepAll {
		cand = min(len(sc), (opts.Top+rankChunk-1)/rankChunk*rankChunk)
	}
	var trends []*Trend // by index in sc, when every leak is kept
	if keepAll {
		trends = make([]*Trend, len(sc))
	}
	trended := len(c.Snapshots) >= MinTrendPoints
	var best *bestTrends // the trends of the leaks that rank first, when cut
	if trended {
		top := opts.Top
		if !keepAll {
			top = cand
			best = &bestTrends{c: c, leaks: sc, top: cand}
		}
		fitTrends(c, clks, sc, top, trends, best)
	}
	leakOf := func(s *scored) Leak {
		return Leak{Site: &c.Sites[s.site], Count: s.count, Bytes: s.bytes, OldestAge: s.oldest, AgeKnown: s.ageKnown, BaseScore: s.base, Score: s.score}
	}
	// Confidence and reasons only for the leaks kept: in site order when
	// all are kept (memory order: ranked order took 40% longer for 100k
	// sites), after the cut otherwise.
	culprits := NewCulprits(opts.CulpritSkip).In(c)
	explain := func(leaks []Leak) {
		for i := range leaks {
			l := &leaks[i]
			if f, ok := culprits.FindOrSite(l.Site); ok {
				l.Culprit = &f
			}
			l.Estimate, l.CountError, l.BytesError = sampleError(l.Site, c, opts.MinAge)
			l.Verdict = verdict(l, c, clks.of(l.Site), pools, culprits)
			l.Reasons = reasons(*l, c.Duration, opts.MinAge)
			l.Reasons = append(l.Reasons, l.Verdict.Evidence...)
			if n, ok := notes[l.Site.ID]; ok {
				l.Reasons = append(l.Reasons, n)
			}
		}
	}
	if keepAll {
		r.Leaks = make([]Leak, len(sc))
		for i := range sc {
			r.Leaks[i] = leakOf(&sc[i])
			r.Leaks[i].Trend = trends[i]
		}
		sc, trends = nil, nil
		explain(r.Leaks)
		slices.SortFunc(r.Leaks, func(a, b Leak) int {
			return cmp.Or(
				cmp.Compare(b.Score, a.Score),
				cmp.Compare(b.Bytes, a.Bytes),
				cmp.Compare(b.Count, a.Count),
				cmp.Compare(a.Site.ID, b.Site.ID),
			)
		})
		byClass(r.Leaks)
	} else {
		slices.SortFunc(sc, func(a, b scored) int {
			return cmp.Or(
				cmp.Compare(b.score, a.score),
				cmp.Compare(b.bytes, a.bytes),
				cmp.Compare(b.count, a.count),
				cmp.Compare(c.Sites[a.site].ID, c.Sites[b.site].ID),
			)
		})
		r.Leaks = make([]Leak, cand)
		var missed []Leak // kept without a trend kept for them: none but for sites sharing an ID
		for i := range r.Leaks {
			r.Leaks[i] = leakOf(&sc[i])
			if trended {
				t, ok := best.trendOf(sc[i].site)
				if !ok {
					missed = append(missed, r.Leaks[i])
					continue
				}
				r.Leaks[i].Trend = t
			}
		}
		if len(missed) > 0 {
			trendsOf(c, clks, missed) // fitted again, as they were scored
			for _, m := range missed {
				for i := range r.Leaks {
					if r.Leaks[i].Site == m.Site {
						r.Leaks[i].Trend = m.Trend
					}
				}
			}
		}
		sc = nil
		explain(r.Leaks)
		byClass(r.Leaks)
		r.Leaks = slices.Clip(r.Leaks[:opts.Top])
	}
	if r.Leaks == nil {
		r.Leaks = []Leak{}
	}
	for i := range r.Leaks {
		r.Leaks[i].Rank = i + 1
	}
	return r
}

// rankChunk is how many rows, by rank score, classes order at a time
// (byClass).
const rankChunk = 256

// byClass orders leaks, sorted by rank score, by class within each
// successive rankChunk of them: leak, growing, pool growth, then the rows
// no fact says grow (held, plateau, a filled pool) by base score, then
// the runtimes' own. Classes say how strongly the facts point at a leak,
// not how much it holds: the 1,000th largest row of a launch script's
// shells, classed a leak for 96 bytes that grew until the shell exited,
// does not outrank the program's 3.5 MiB held at its exit. And the first
// N rows are the same whatever the number kept (Options.Top).
func byClass(leaks []Leak) {
	for i := 0; i < len(leaks); i += rankChunk {
		slices.SortStableFunc(leaks[i:min(i+rankChunk, len(leaks))], func(a, b Leak) int {
			ta, tb := a.Verdict.tier(), b.Verdict.tier()
			if ta == tb && ta == tierNoGrowth {
				// No fact says growth: by base score, the memory
				// weighed by its age in time and its free rate. A
				// rank score weighs age in allocations, known only to
				// the snapshot, which would make a burst's place
				// depend on where the snapshots fell.
				return cmp.Or(cmp.Compare(b.BaseScore, a.BaseScore), cmp.Compare(b.Bytes, a.Bytes))
			}
			return cmp.Compare(ta, tb)
		})
	}
}

// scored is a leak while Rank scores it: its counts, age and scores, and
// its site's index in the capture.
type scored struct {
	count, bytes uint64
	oldest       time.Duration
	base, score  float64
	site         int
	ageKnown     bool
	profiled     bool // its growth weight came from its live blocks' ages (clock.profile)
}

// trendChunk is how many series fitting reads at a time (seriesEach).
const trendChunk = 8192

// fitTrends fits the trend of leaks and weighs their scores by it; trends,
// when not nil, gets each leak's Trend (by index in leaks). With
// top > 0 only the leaks that can still rank in the first top are fitted:
// a trend's weight is at most 1, so a leak whose base score is below the
// top-th best score of those fitted cannot get in. The best by base score
// are fitted first, then, in one more pass over the snapshots, every other
// leak whose base score reaches the top-th score they set; the others keep
// no trend and score = base score and are cut off by Rank's top.
// (100k sites and 60 snapshots: 2.6 s fitting every one.)
func fitTrends(c *Capture, clks clocks, leaks []scored, top int, trends []*Trend, best *bestTrends) {
	var slopes []float64
	fit := func(batch []int) {
		index := make(map[uint64]int, len(batch))
		for k, i := range batch {
			index[c.Sites[leaks[i].site].ID] = k
		}
		seriesEach(c, index, trendChunk, func(k int, points []Point) {
			i := batch[k]
			l := &leaks[i]
			oldest := time.Duration(-1)
			if l.ageKnown {
				oldest = c.Duration - l.oldest
			}
			if trends != nil {
				t := trendOf(points, clks.of(&c.Sites[l.site]).ev, oldest, &slopes)
				if t != nil && !l.profiled {
					l.score *= t.Weight
				}
				trends[i] = t
				return
			}
			t, ok := trendValue(points, clks.of(&c.Sites[l.site]).ev, oldest, &slopes)
			if ok && !l.profiled {
				l.score *= t.Weight
			}
			if best != nil {
				best.offer(i, t, ok)
			}
		})
	}
	order := make([]int, len(leaks))
	for i := range order {
		order[i] = i
	}
	if top <= 0 || top >= len(leaks) {
		fit(order)
		return
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(leaks[b].base, leaks[a].base) })
	first := order[:min(max(4*top, 256), len(order))]
	fit(first)
	scores := make([]float64, len(first))
	for k, i := range first {
		scores[k] = leaks[i].score
	}
	slices.SortFunc(scores, func(a, b float64) int { return cmp.Compare(b, a) })
	threshold := scores[top-1]
	// Base scores are sorted: the rest that can reach the threshold
	// (ties included) come next.
	rest := order[len(first):]
	n, _ := slices.BinarySearchFunc(rest, threshold, func(i int, t float64) int {
		if leaks[i].base >= t {
			return -1
		}
		return 1
	})
	if n > 0 {
		fit(rest[:n])
	}
}

// bestTrends keeps, while fitTrends fits, the trends of the top leaks so
// far in Rank's order: the leaks Rank keeps are among those fitted (one
// not fitted scores below the top-th fitted), so their trends need no
// second pass over the snapshots, and the others' are not kept (8 MB for
// 100k sites that tie).
type bestTrends struct {
	c     *Capture
	leaks []scored
	top   int
	h     []bestTrend // a heap, the last in Rank's order first
	// bySite indexes h by site once fitting is done (trendOf).
	bySite map[int]int
}

type bestTrend struct {
	i     int // index in leaks while fitting (Rank sorts them after)
	site  int // the leak's site index
	trend Trend
	ok    bool // trendValue's ok: a nil Trend otherwise
}

// before reports whether leaks[a] ranks before leaks[b] (Rank's order).
func (b *bestTrends) before(x, y int) bool {
	l, m := &b.leaks[x], &b.leaks[y]
	return cmp.Or(
		cmp.Compare(m.score, l.score),
		cmp.Compare(m.bytes, l.bytes),
		cmp.Compare(m.count, l.count),
		cmp.Compare(b.c.Sites[l.site].ID, b.c.Sites[m.site].ID),
	) < 0
}

// offer adds leaks[i], its score final, and its trend.
func (b *bestTrends) offer(i int, t Trend, ok bool) {
	e := bestTrend{i, b.leaks[i].site, t, ok}
	if len(b.h) < b.top {
		b.h = append(b.h, e)
		for k := len(b.h) - 1; k > 0; { // up
			p := (k - 1) / 2
			if !b.before(b.h[p].i, b.h[k].i) {
				break
			}
			b.h[p], b.h[k] = b.h[k], b.h[p]
			k = p
		}
		return
	}
	if !b.before(i, b.h[0].i) {
		return
	}
	b.h[0] = e
	for k := 0; ; { // down: the root is the last in Rank's order
		l, r, m := 2*k+1, 2*k+2, k
		if l < len(b.h) && b.before(b.h[m].i, b.h[l].i) {
			m = l
		}
		if r < len(b.h) && b.before(b.h[m].i, b.h[r].i) {
			m = r
		}
		if m == k {
			break
		}
		b.h[k], b.h[m] = b.h[m], b.h[k]
		k = m
	}
}

// trendOf returns the trend kept for the leak of site index site (leaks
// may be sorted since).
func (b *bestTrends) trendOf(site int) (*Trend, bool) {
	if b.bySite == nil {
		b.bySite = make(map[int]int, len(b.h))
		for k, e := range b.h {
			b.bySite[e.site] = k
		}
	}
	k, found := b.bySite[site]
	if !found {
		return nil, false
	}
	if e := &b.h[k]; e.ok {
		t := e.trend
		return &t, true
	}
	return nil, true
}

// trendsOf sets the Trend of leaks, fitted as fitTrends fitted them (their
// scores already weigh it).
func trendsOf(c *Capture, clks clocks, leaks []Leak) {
	var slopes []float64
	index := make(map[uint64]int, len(leaks))
	for k := range leaks {
		index[leaks[k].Site.ID] = k
	}
	seriesEach(c, index, trendChunk, func(k int, points []Point) {
		oldest := time.Duration(-1)
		if leaks[k].AgeKnown {
			oldest = c.Duration - leaks[k].OldestAge
		}
		leaks[k].Trend = trendOf(points, clks.of(leaks[k].Site).ev, oldest, &slopes)
	})
}

// measure counts what s holds at least minAge old. Without per-allocation
// ages it falls back to the site totals.
func measure(s *Site, minAge time.Duration) Leak {
	l := Leak{Site: s}
	if len(s.Live) == 0 {
		l.Count, l.Bytes = s.LiveCount, s.LiveBytes
		return l
	}
	l.AgeKnown = true
	var count, bytes float64 // sampled allocations stand for Weight each
	for i, a := range s.Live {
		if a.Age < minAge {
			continue
		}
		w := s.Weight(i)
		if w == 0 {
			w = 1
		}
		count += w
		bytes += w * float64(a.Size)
		l.OldestAge = max(l.OldestAge, a.Age)
	}
	l.Count, l.Bytes = uint64(math.Round(count)), uint64(math.Round(bytes))
	return l
}

// sampleError says whether what s, a site of c, holds at least minAge
// old is an estimate, and its standard errors (Leak.Estimate).
func sampleError(s *Site, c *Capture, minAge time.Duration) (estimate bool, count, bytes float64) {
	if c.SampleBytes == 0 || s.Kind != KindMalloc || (c.ExactBudget != nil && c.ExactBudget.Past == 0) {
		return false, 0, 0
	}
	for i, a := range s.Live {
		if a.Age < minAge {
			continue
		}
		if w := s.Weight(i); w > 1 {
			v := w * (w - 1)
			count += v
			bytes += v * float64(a.Size) * float64(a.Size)
		}
	}
	return true, math.Sqrt(count), math.Sqrt(bytes)
}

// ageWeight is 0.5 for a site whose allocations are all brand new and 1 for
// one that has held memory since the capture began.
func ageWeight(l Leak, d time.Duration) float64 {
	if !l.AgeKnown || d <= 0 {
		return 1
	}
	return 0.5 + 0.5*min(1, float64(l.OldestAge)/float64(d))
}

// freeWeight is 1 for a site that never frees and 0.5 for one that frees
// everything it allocates.
func freeWeight(s *Site) float64 {
	if s.Allocs == 0 {
		return 1
	}
	return 1 - 0.5*min(1, float64(s.Frees)/float64(s.Allocs))
}

// reasons states, one sentence each, the facts behind l's score.
func reasons(l Leak, d, minAge time.Duration) []string {
	s := l.Site
	held := fmt.Sprintf("holds %s in %d allocations", FormatBytes(l.Bytes), l.Count)
	if l.AgeKnown && minAge > 0 {
		held += " at least " + FormatDuration(minAge) + " old"
		if n := uint64(len(s.Live)); n > l.Count && !s.sampled() {
			younger := n - l.Count
			held += fmt.Sprintf("; %d younger not counted", younger)
		}
	}
	rs := []string{held}

	switch {
	case s.Allocs == 0:
		rs = append(rs, "free rate unknown: no allocations seen during the capture")
	case s.Frees == 0:
		rs = append(rs, fmt.Sprintf("never freed: 0 of %d allocations released", s.Allocs))
	default:
		share := 100 * min(1, float64(s.Frees)/float64(s.Allocs))
		rs = append(rs, fmt.Sprintf("frees %.1f%%: %d of %d allocations released", share, s.Frees, s.Allocs))
	}

	switch {
	case !l.AgeKnown && minAge > 0:
		rs = append(rs, "age unknown: the capture has no per-allocation ages, so the min-age filter was not applied")
	case !l.AgeKnown:
		rs = append(rs, "age unknown: the capture has no per-allocation ages")
	case d > 0:
		share := 100 * min(1, float64(l.OldestAge)/float64(d))
		rs = append(rs, fmt.Sprintf("oldest %s, %.0f%% of the capture", FormatDuration(l.OldestAge), share))
	default:
		rs = append(rs, "oldest "+FormatDuration(l.OldestAge))
	}

	if l.Trend != nil {
		rs = append(rs, trendReasons(l.Trend)...)
	}
	if c := GoCaller(s.Stack); c != "" {
		rs = append(rs, "called through cgo by "+c)
	}
	if s.Stack.Truncated != "" {
		rs = append(rs, "stack truncated: "+s.Stack.Truncated)
	}
	return rs
}

func confidenceLabel(c float64) string {
	switch {
	case c >= 0.7:
		return "high"
	case c >= 0.45:
		return "medium"
	}
	return "low"
}
