package analyze

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// MinTrendPoints is the fewest snapshots a trend is computed from: two
// points always make a straight line, so they say nothing about noise.
const MinTrendPoints = 3

// maxPairPoints bounds the points the pairwise statistics (Theil–Sen and
// Mann–Kendall, quadratic in the number of points) look at. Longer series
// are sampled evenly, first and last point included, so a capture with
// thousands of snapshots still ranks in milliseconds per site. 24 points
// are 276 pairs, plenty for a median slope and a trend sign; 128 points made
// ranking 100k sites take 11.6 s and 8 GB (BenchmarkRank).
const maxPairPoints = 24

// Point is one site's live memory at one snapshot.
type Point struct {
	At        time.Duration // since Capture.StartedAt
	LiveCount uint64
	LiveBytes uint64
	// Allocs and Frees are the site's cumulative counters at the
	// snapshot: its acquisitions and releases since tracing began.
	Allocs, Frees uint64
}

// Trend is how one site's live memory moved across a capture's snapshots.
// Rank computes it for captures with at least MinTrendPoints snapshots.
type Trend struct {
	Points int           // snapshots the trend was computed from
	Span   time.Duration // from the first snapshot to the last; always > 0
	// Growth is the Theil–Sen slope of live bytes over time, in bytes per
	// second: the median of the slopes between every pair of snapshots,
	// which ignores up to 29% of wild points. GrowthObjects is the same
	// slope for the live allocation count, in allocations per second.
	Growth, GrowthObjects float64
	// Rises and Falls count the intervals (pairs of consecutive snapshots,
	// Points−1 in all) in which live bytes went up and down.
	Rises, Falls int
	// Tau is the Mann–Kendall τ of live bytes: the share of snapshot pairs
	// that rise minus the share that fall, in [−1, 1]. 1 means every later
	// snapshot holds more than every earlier one; noise pulls it toward 0
	// without flipping its sign.
	Tau float64
	// FlatFor is the time between the last snapshot that held more bytes
	// than every earlier one (a new high) and the last snapshot. Live bytes
	// pass through a median of three neighbours first, so a one-snapshot
	// spike is not a high. FlatFor is Span when live bytes never rose above
	// the first snapshot's.
	FlatFor time.Duration
	// Plateau is true when live bytes rose at some point and then made no
	// new high for at least the second half of the span: the shape of a
	// pool or cache that filled up and stays full.
	Plateau bool
	// GrowthPerEvent is the Theil–Sen slope of live bytes against the
	// process's allocations (Verdict.Events), in bytes per allocation:
	// growth per unit of the program's work, whatever its speed. Without
	// an event clock it is Growth.
	GrowthPerEvent float64
	// FlatShare, in [0, 1], is the share of the process's allocations,
	// from the snapshot before live bytes first rose to the last one,
	// made after the last new high: 0 for growth to the end, 1 for
	// memory that never rose above its first snapshot. When the process
	// allocated nothing after the last new high, there is no event to
	// measure by, and it is the same share of time (FlatInTime).
	FlatShare  float64
	FlatInTime bool
	// Weight is the growth weight Rank multiplies the rank score by:
	//
	//	Weight = 0.1 + 0.9 × max(0, Tau) × (1 − FlatShare)
	//
	// It is about 1 for memory that grows steadily to the end and 0.1 for
	// memory that stopped growing early or never grew.
	Weight float64

	// allocsAt and freesAt are the site's counters at the first snapshot
	// at or after its oldest live block; sinceKnown says they were found.
	allocsAt, freesAt uint64
	sinceKnown        bool
}

// Series returns the live memory of site id at every snapshot of c, in
// snapshot order. A snapshot that does not list the site counts it as
// holding nothing.
func (c *Capture) Series(id uint64) []Point {
	return series(c, map[uint64]int{id: 0})[0]
}

// series returns the series of every site in index, which maps a site ID to
// its position in the result, reading the snapshots once. The series share
// one backing array.
func series(c *Capture, index map[uint64]int) [][]Point {
	out := make([][]Point, len(index))
	seriesEach(c, index, len(index), func(i int, points []Point) { out[i] = points })
	return out
}

// seriesEach calls fn with the series of every site in index (as series
// gives them) by ascending position, at most chunk series at a time: fn
// must not keep points past the next chunk unless chunk covers them all.
// 100k series of 60 points are 140 MB at once; a chunk of 8192 is 12 MB.
// The snapshots are looked up in index once; a chunk then reads each
// point's position, not the map.
func seriesEach(c *Capture, index map[uint64]int, chunk int, fn func(i int, points []Point)) {
	n := len(c.Snapshots)
	// Snapshots in time order, once for every series (a capture file
	// lists them in order; a hand-built capture need not).
	order := make([]int, n)
	for j := range order {
		order[j] = j
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(c.Snapshots[a].At, c.Snapshots[b].At) })
	col := make([]int, n) // snapshot j goes to column col[j]
	for k, j := range order {
		col[j] = k
	}
	// Each snapshot's points by position in index (-1: not in it), once
	// per slice: snapshots may share one (a tracer's unchanged ones).
	pos := make([][]int32, n)
	if len(index) > chunk {
		for j, s := range c.Snapshots {
			if j > 0 && len(s.Sites) > 0 && len(c.Snapshots[j-1].Sites) == len(s.Sites) && &c.Snapshots[j-1].Sites[0] == &s.Sites[0] {
				pos[j] = pos[j-1]
				continue
			}
			ps := make([]int32, len(s.Sites))
			for q, p := range s.Sites {
				i, ok := index[p.ID]
				if !ok {
					i = -1
				}
				ps[q] = int32(i)
			}
			pos[j] = ps
		}
	}
	chunk = max(1, min(chunk, len(index)))
	backing := make([]Point, chunk*n)
	out := make([][]Point, chunk)
	for lo := 0; lo < len(index); lo += chunk {
		hi := min(lo+chunk, len(index))
		clear(backing)
		for i := range out[:hi-lo] {
			out[i] = backing[i*n : (i+1)*n : (i+1)*n]
		}
		for j, s := range c.Snapshots {
			k := col[j]
			for i := range out[:hi-lo] {
				out[i][k].At = s.At
			}
			for q, p := range s.Sites {
				var i int
				if pos[j] != nil {
					i = int(pos[j][q])
				} else {
					var ok bool
					if i, ok = index[p.ID]; !ok {
						continue
					}
				}
				if i < lo || i >= hi {
					continue
				}
				q := &out[i-lo][k]
				q.LiveCount += p.LiveCount
				q.LiveBytes += p.LiveBytes
				q.Allocs += p.Allocs
				q.Frees += p.Frees
			}
		}
		for i := lo; i < hi; i++ {
			fn(i, out[i-lo])
		}
	}
}

// trendOf fits a trend to points, which must be in time order, against
// the process's allocation counts ev at each point (nil: time), with the
// time of the site's oldest live block (negative: unknown) and a reusable
// buffer for the pairwise slopes (nil: its own). It returns nil when there
// are fewer than MinTrendPoints points or they all share one time, because
// then there is no trend to speak of.
func trendOf(points []Point, ev []uint64, oldest time.Duration, slopes *[]float64) *Trend {
	t, ok := trendValue(points, ev, oldest, slopes)
	if !ok {
		return nil
	}
	return &t
}

// trendValue is trendOf without the allocation; ok is false where trendOf
// returns nil.
func trendValue(points []Point, ev []uint64, oldest time.Duration, slopes *[]float64) (t Trend, ok bool) {
	n := len(points)
	if n < MinTrendPoints {
		return Trend{}, false
	}
	span := points[n-1].At - points[0].At
	if span <= 0 {
		return Trend{}, false
	}
	t = Trend{Points: n, Span: span}

	if len(ev) != n {
		ev = nil
	}
	x := func(i int) float64 { // the clock: allocations, or time
		if ev != nil {
			return float64(ev[i])
		}
		return float64(points[i].At)
	}
	high, lastHigh, firstRise := points[0].LiveBytes, -1, -1
	for i := 1; i < n; i++ {
		switch a, b := points[i-1].LiveBytes, points[i].LiveBytes; {
		case b > a:
			t.Rises++
		case b < a:
			t.Falls++
		}
		// A median of three ignores a one-snapshot spike, which would
		// otherwise look like the high a plateau then stays under.
		level := points[i].LiveBytes
		if i < n-1 {
			level = median3(points[i-1].LiveBytes, level, points[i+1].LiveBytes)
		}
		if level > high {
			high, lastHigh = level, i
			if firstRise < 0 {
				firstRise = i
			}
		}
	}
	t.FlatFor = span
	t.FlatShare = 1
	if lastHigh >= 0 {
		t.FlatFor = points[n-1].At - points[lastHigh].At
		flat, life := x(n-1)-x(lastHigh), x(n-1)-x(firstRise-1)
		if flat == 0 && ev != nil {
			// Nothing allocated since the last high: only time tells.
			t.FlatInTime = true
			flat, life = float64(points[n-1].At-points[lastHigh].At), float64(points[n-1].At-points[firstRise-1].At)
		}
		t.FlatShare = 0
		if life > 0 {
			t.FlatShare = min(1, flat/life)
		}
		t.Plateau = 2*t.FlatShare >= 1
	}
	if oldest >= 0 {
		for _, p := range points {
			if p.At >= oldest {
				t.allocsAt, t.freesAt, t.sinceKnown = p.Allocs, p.Frees, true
				break
			}
		}
	}

	sample := evenly(points, maxPairPoints)
	if slopes == nil {
		slopes = new([]float64)
	}
	t.Growth = theilSen(sample, slopes, func(p Point) float64 { return float64(p.LiveBytes) })
	t.GrowthObjects = theilSen(sample, slopes, func(p Point) float64 { return float64(p.LiveCount) })
	t.GrowthPerEvent = t.Growth
	if ev != nil {
		t.GrowthPerEvent = perEvent(points, ev, slopes)
	}
	t.Tau = kendallTau(sample)
	t.Weight = growthWeight(t.Tau, t.FlatShare)
	return t, true
}

// perEvent is the Theil–Sen slope of live bytes against ev, in bytes per
// allocation, over at most maxPairPoints points.
func perEvent(points []Point, ev []uint64, slopes *[]float64) float64 {
	idx := make([]int, len(points))
	for i := range idx {
		idx[i] = i
	}
	if len(idx) > maxPairPoints {
		k := make([]int, maxPairPoints)
		for i := range k {
			k[i] = i * (len(points) - 1) / (maxPairPoints - 1)
		}
		idx = k
	}
	ss := (*slopes)[:0]
	for a, i := range idx {
		for _, j := range idx[a+1:] {
			if dx := float64(ev[j]) - float64(ev[i]); dx > 0 {
				ss = append(ss, (float64(points[j].LiveBytes)-float64(points[i].LiveBytes))/dx)
			}
		}
	}
	*slopes = ss
	if len(ss) == 0 {
		return 0
	}
	m := len(ss) / 2
	hi := nth(ss, m)
	if len(ss)%2 == 1 {
		return hi
	}
	return (slices.Max(ss[:m]) + hi) / 2
}

func median3(a, b, c uint64) uint64 {
	return max(min(a, b), min(max(a, b), c))
}

// evenly returns at most k of points, evenly spaced, first and last
// included.
func evenly(points []Point, k int) []Point {
	n := len(points)
	if n <= k {
		return points
	}
	out := make([]Point, k)
	for i := range out {
		out[i] = points[i*(n-1)/(k-1)]
	}
	return out
}

// theilSen returns the median slope, per second, of y between every pair of
// points at different times. slopes is its buffer, reused across calls.
func theilSen(points []Point, slopes *[]float64, y func(Point) float64) float64 {
	flat := true
	for _, p := range points[1:] {
		flat = flat && y(p) == y(points[0])
	}
	if flat {
		return 0 // every slope is 0: skip the pairs
	}
	ss := (*slopes)[:0]
	for i := range points {
		yi := y(points[i])
		for j := i + 1; j < len(points); j++ {
			dt := (points[j].At - points[i].At).Seconds()
			if dt <= 0 {
				continue
			}
			ss = append(ss, (y(points[j])-yi)/dt)
		}
	}
	*slopes = ss
	if len(ss) == 0 {
		return 0
	}
	// The median by selection: the same value a sort would give.
	m := len(ss) / 2
	hi := nth(ss, m)
	if len(ss)%2 == 1 {
		return hi
	}
	return (slices.Max(ss[:m]) + hi) / 2
}

// nth reorders s so that s[k] holds the value a sort would put there,
// everything before it no greater and everything after no smaller, and
// returns s[k] (Hoare's selection, median-of-three pivots).
func nth(s []float64, k int) float64 {
	lo, hi := 0, len(s)-1
	for lo < hi {
		mid := lo + (hi-lo)/2
		if s[mid] < s[lo] {
			s[mid], s[lo] = s[lo], s[mid]
		}
		if s[hi] < s[lo] {
			s[hi], s[lo] = s[lo], s[hi]
		}
		if s[hi] < s[mid] {
			s[hi], s[mid] = s[mid], s[hi]
		}
		pivot := s[mid]
		i, j := lo, hi
		for i <= j {
			for s[i] < pivot {
				i++
			}
			for pivot < s[j] {
				j--
			}
			if i <= j {
				s[i], s[j] = s[j], s[i]
				i++
				j--
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return s[k]
		}
	}
	return s[k]
}

// kendallTau returns Mann–Kendall's S statistic for live bytes divided by
// the number of pairs: τ-a, in [−1, 1].
func kendallTau(points []Point) float64 {
	var s, pairs int
	for i := range points {
		for j := i + 1; j < len(points); j++ {
			pairs++
			switch a, b := points[i].LiveBytes, points[j].LiveBytes; {
			case b > a:
				s++
			case b < a:
				s--
			}
		}
	}
	return float64(s) / float64(pairs)
}

// trendReasons states, one sentence each, what the trend says about a site.
func trendReasons(t *Trend) []string {
	rs := []string{fmt.Sprintf("grew in %d of %d intervals, fell in %d; trend %s, %s objects/s",
		t.Rises, t.Points-1, t.Falls, formatRate(t.Growth), formatCountRate(t.GrowthObjects))}
	if t.GrowthPerEvent != t.Growth && t.GrowthPerEvent != 0 {
		rs[0] += ", " + formatPerEvent(t.GrowthPerEvent)
	}
	switch {
	case t.Plateau:
		// The verdict says how long it was flat (Verdict.FlatShare).
	case t.FlatFor == t.Span:
		rs = append(rs, fmt.Sprintf("never above its first snapshot in %d snapshots over %s", t.Points, FormatDuration(t.Span)))
	}
	return rs
}

// formatPerEvent renders growth per 1000 process allocations.
func formatPerEvent(v float64) string {
	return strings.TrimSuffix(formatRate(1000*v), "/s") + " per 1,000 process allocations"
}

// formatRate renders a rate in bytes per second with a sign: "+1.5 KiB/s".
func formatRate(v float64) string {
	sign := "+"
	if v < 0 {
		sign, v = "-", -v
	}
	switch {
	case v == 0:
		return "0 B/s"
	case v < 1:
		return fmt.Sprintf("%s%.2f B/s", sign, v)
	case v >= math.MaxUint64:
		return sign + "inf B/s"
	}
	return sign + FormatBytes(uint64(math.Round(v))) + "/s"
}

// formatCountRate renders an allocation rate with a sign and two decimals.
func formatCountRate(v float64) string {
	if v == 0 {
		return "0"
	}
	return fmt.Sprintf("%+.2f", v)
}
