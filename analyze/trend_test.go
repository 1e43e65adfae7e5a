package analyze

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// points builds a series with one snapshot every step, starting at step.
func points(step time.Duration, bytes ...uint64) []Point {
	ps := make([]Point, len(bytes))
	for i, b := range bytes {
		ps[i] = Point{At: time.Duration(i+1) * step, LiveBytes: b, LiveCount: b / 8}
	}
	return ps
}

func TestTrend(t *testing.T) {
	const s = time.Second
	tests := []struct {
		name         string
		points       []Point
		nilTrend     bool
		growth       float64
		rises, falls int
		tau          float64
		flatFor      time.Duration
		plateau      bool
		weight       float64
	}{
		{name: "two points", points: points(s, 1, 2), nilTrend: true},
		{name: "one time", points: []Point{{At: s}, {At: s}, {At: s}}, nilTrend: true},
		{
			name:   "straight line",
			points: points(s, 0, 80, 160, 240, 320),
			growth: 80, rises: 4, tau: 1, flatFor: 0, weight: 1,
		},
		{
			// One wild point moves neither the slope nor the sign of τ.
			name:   "line with an outlier",
			points: points(s, 0, 80, 1<<30, 240, 320, 400, 480),
			growth: 80, rises: 5, falls: 1, tau: 13.0 / 21, flatFor: 0,
			weight: 0.1 + 0.9*13.0/21,
		},
		{
			name:   "filled once then flat",
			points: points(s, 100, 200, 200, 200, 200, 200, 200),
			growth: 0, rises: 1, tau: 6.0 / 21, flatFor: 5 * s, plateau: true,
			weight: 0.1 + 0.9*(6.0/21)*(1.0/6),
		},
		{
			name:   "constant",
			points: points(s, 64, 64, 64, 64),
			growth: 0, flatFor: 3 * s, weight: 0.1,
		},
		{
			name:   "shrinking",
			points: points(s, 64, 32, 16, 8),
			// The median of the six pairwise slopes
			// (-32, -24, -56/3, -16, -12, -8).
			growth: (-56.0/3 - 16) / 2, falls: 3, tau: -1, flatFor: 3 * s, weight: 0.1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := trendOf(tt.points, nil, -1, nil)
			if tt.nilTrend {
				if tr != nil {
					t.Fatalf("trendOf = %+v, want nil", tr)
				}
				return
			}
			if tr == nil {
				t.Fatal("trendOf = nil")
			}
			if tr.Points != len(tt.points) || tr.Span != tt.points[len(tt.points)-1].At-tt.points[0].At {
				t.Errorf("Points, Span = %d, %v", tr.Points, tr.Span)
			}
			if !near(tr.Growth, tt.growth) || tr.Rises != tt.rises || tr.Falls != tt.falls ||
				!near(tr.Tau, tt.tau) || tr.FlatFor != tt.flatFor || tr.Plateau != tt.plateau || !near(tr.Weight, tt.weight) {
				t.Errorf("trendOf = %+v\nwant growth %v rises %d falls %d tau %v flatFor %v plateau %v weight %v",
					*tr, tt.growth, tt.rises, tt.falls, tt.tau, tt.flatFor, tt.plateau, tt.weight)
			}
			if tt.name == "straight line" && !near(tr.GrowthObjects, 10) {
				t.Errorf("GrowthObjects = %v, want 10", tr.GrowthObjects)
			}
		})
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*max(1, math.Abs(b)) }

func TestTrendLongSeries(t *testing.T) {
	// 10000 snapshots: sampled for the pairwise statistics, counted in full
	// for rises and falls.
	ps := make([]Point, 10000)
	for i := range ps {
		ps[i] = Point{At: time.Duration(i) * time.Second, LiveBytes: uint64(i) * 10}
	}
	tr := trendOf(ps, nil, -1, nil)
	if tr.Rises != 9999 || !near(tr.Growth, 10) || !near(tr.Tau, 1) || !near(tr.Weight, 1) {
		t.Errorf("trendOf = %+v", *tr)
	}
}

func TestSeries(t *testing.T) {
	c := &Capture{Snapshots: []Snapshot{
		{At: 2 * time.Second, Sites: []SitePoint{{ID: 1, LiveCount: 2, LiveBytes: 20}}},
		{At: 1 * time.Second, Sites: []SitePoint{{ID: 2, LiveCount: 9, LiveBytes: 90}}},
		{At: 3 * time.Second, Sites: []SitePoint{{ID: 1, LiveCount: 1, LiveBytes: 10}, {ID: 1, LiveCount: 1, LiveBytes: 5}}},
	}}
	got := c.Series(1)
	want := []Point{{At: time.Second}, {At: 2 * time.Second, LiveCount: 2, LiveBytes: 20}, {At: 3 * time.Second, LiveCount: 2, LiveBytes: 15}}
	if !slices.Equal(got, want) {
		t.Errorf("Series(1) = %+v, want %+v", got, want)
	}
	if got := (&Capture{}).Series(1); len(got) != 0 {
		t.Errorf("Series of no snapshots = %+v", got)
	}
}

// poolAndLeak builds a 10-minute capture with 50 snapshots of two sites:
// site 1, a pool that fills to poolBytes in its first 5 snapshots and stays
// full, and site 2, a leak growing steadily (with noise) to leakBytes.
func poolAndLeak(poolBytes, leakBytes uint64) *Capture {
	const n = 50
	const step = 12 * time.Second
	rng := rand.New(rand.NewPCG(1, 2))
	c := &Capture{Duration: n * step}
	var leak uint64
	for i := range n {
		pool := poolBytes
		if i < 5 {
			pool = poolBytes * uint64(i+1) / 5
		}
		leak = leakBytes * uint64(i+1) / n
		noisy := leak
		if i < n-1 {
			// Up to ±3 intervals of growth, freed again within an interval.
			noisy = uint64(int64(leak) + rng.Int64N(int64(6*leakBytes/n)) - int64(3*leakBytes/n))
		}
		c.Snapshots = append(c.Snapshots, Snapshot{At: time.Duration(i+1) * step, Sites: []SitePoint{
			{ID: 1, LiveCount: pool / 4096, LiveBytes: pool},
			{ID: 2, LiveCount: noisy / 64, LiveBytes: noisy},
		}})
	}
	c.Sites = []Site{
		{ID: 1, Kind: KindMalloc, Allocs: poolBytes / 4096, LiveCount: poolBytes / 4096, LiveBytes: poolBytes,
			Live: live(int(poolBytes/4096), 4096, c.Duration-step)},
		{ID: 2, Kind: KindMalloc, Allocs: leak / 64, LiveCount: leak / 64, LiveBytes: leak,
			Live: spread(int(leak/64), 64, c.Duration-step)},
	}
	return c
}

// spread is n allocations of size made evenly over the last span.
func spread(n int, size uint64, span time.Duration) []Alloc {
	out := make([]Alloc, n)
	for i := range out {
		out[i] = Alloc{Size: size, Age: span * time.Duration(n-i) / time.Duration(n)}
	}
	return out
}

func TestRankPoolBelowSteadyLeak(t *testing.T) {
	// The pool holds four times the leak's bytes.
	c := poolAndLeak(40<<20, 10<<20)
	r := Rank(c, Options{})
	if len(r.Leaks) != 2 {
		t.Fatalf("got %d leaks, want 2", len(r.Leaks))
	}
	leak, pool := r.Leaks[0], r.Leaks[1]
	if leak.Site.ID != 2 || pool.Site.ID != 1 {
		t.Fatalf("ranked site %d (score %.0f) above site %d (score %.0f); want the steady leak (2) above the pool (1)",
			leak.Site.ID, leak.Score, pool.Site.ID, pool.Score)
	}
	if pool.Bytes <= leak.Bytes || pool.BaseScore <= leak.BaseScore {
		t.Errorf("pool holds %d bytes, base score %.0f; want more than the leak's %d, %.0f", pool.Bytes, pool.BaseScore, leak.Bytes, leak.BaseScore)
	}
	if !pool.Trend.Plateau || pool.Trend.Growth != 0 || pool.Trend.Weight > 0.15 {
		t.Errorf("pool trend = %+v, want a plateau with no growth and weight near 0.1", *pool.Trend)
	}
	// 10 MiB over 10 minutes.
	if want := float64(10<<20) / 600; math.Abs(leak.Trend.Growth-want) > want/10 {
		t.Errorf("leak growth = %.0f B/s, want about %.0f", leak.Trend.Growth, want)
	}
	if leak.Trend.Plateau || leak.Trend.Tau < 0.8 || leak.Trend.Weight < 0.7 {
		t.Errorf("leak trend = %+v, want a strong rising trend", *leak.Trend)
	}
	if !slices.ContainsFunc(pool.Reasons, func(s string) bool { return strings.HasPrefix(s, "flat for the last ") }) {
		t.Errorf("pool reasons %q lack the plateau", pool.Reasons)
	}
	if !slices.ContainsFunc(leak.Reasons, func(s string) bool { return strings.HasPrefix(s, "grew in ") }) {
		t.Errorf("leak reasons %q lack the growth", leak.Reasons)
	}
	if leak.Verdict.Class != ClassLeak || pool.Verdict.Class != ClassPlateau {
		t.Errorf("classes: leak %s, pool %s; want leak, plateau", leak.Verdict.Class, pool.Verdict.Class)
	}
}

func TestRankWithoutTrend(t *testing.T) {
	// Two snapshots are too few for a trend: sites that never freed are
	// classed by their live blocks' ages (both bursts, with these ages).
	c := poolAndLeak(40<<20, 10<<20)
	c.Snapshots = c.Snapshots[:2]
	c.Sites[1].Live = live(len(c.Sites[1].Live), 64, c.Duration-12*time.Second)
	r := Rank(c, Options{})
	for _, l := range r.Leaks {
		if l.Trend != nil || l.Verdict.Class != ClassPlateau {
			t.Errorf("site %d: Trend %+v, class %s; want no trend, plateau", l.Site.ID, l.Trend, l.Verdict.Class)
		}
		for _, s := range l.Reasons {
			if strings.HasPrefix(s, "grew in ") {
				t.Errorf("site %d has trend reason %q", l.Site.ID, s)
			}
		}
	}
	if r.Leaks[0].Site.ID != 1 {
		t.Errorf("without a trend the bigger pool should rank first")
	}
}

func TestTrendReasons(t *testing.T) {
	tests := []struct {
		tr   Trend
		want []string
	}{
		{
			Trend{Points: 51, Span: 10 * time.Minute, Rises: 47, Falls: 2, Growth: 1536, GrowthObjects: 1.5},
			[]string{"grew in 47 of 50 intervals, fell in 2; trend +1.5 KiB/s, +1.50 objects/s"},
		},
		{
			Trend{Points: 5, Span: 8 * time.Minute, Rises: 1, FlatFor: 4 * time.Minute, Plateau: true},
			[]string{"grew in 1 of 4 intervals, fell in 0; trend 0 B/s, 0 objects/s"},
		},
		{
			Trend{Points: 4, Span: time.Minute, Falls: 3, FlatFor: time.Minute, Growth: -0.5, GrowthObjects: -0.25},
			[]string{"grew in 0 of 3 intervals, fell in 3; trend -0.50 B/s, -0.25 objects/s", "never above its first snapshot in 4 snapshots over 1m0s"},
		},
	}
	for _, tt := range tests {
		if got := trendReasons(&tt.tr); !slices.Equal(got, tt.want) {
			t.Errorf("trendReasons(%+v):\n got %q\nwant %q", tt.tr, got, tt.want)
		}
	}
}

// TestNthMatchesSort: selection puts at k what sorting would, with
// duplicates, and theilSen's median is a sort's.
func TestNthMatchesSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for n := 1; n < 300; n += 7 {
		s := make([]float64, n)
		for i := range s {
			s[i] = float64(rng.IntN(n/3 + 1)) // many duplicates
		}
		sorted := slices.Sorted(slices.Values(s))
		for _, k := range []int{0, n / 2, n - 1, rng.IntN(n)} {
			c := slices.Clone(s)
			if got := nth(c, k); got != sorted[k] {
				t.Fatalf("n %d: nth(%d) = %v, want %v", n, k, got, sorted[k])
			}
			for i := range k {
				if c[i] > c[k] {
					t.Fatalf("n %d k %d: s[%d] = %v > s[k] = %v", n, k, i, c[i], c[k])
				}
			}
		}
	}
	for trial := range 50 {
		ps := make([]Point, 3+trial%20)
		for i := range ps {
			ps[i] = Point{At: time.Duration(i+1) * time.Second, LiveBytes: rng.Uint64N(1000)}
		}
		var buf []float64
		got := theilSen(ps, &buf, func(p Point) float64 { return float64(p.LiveBytes) })
		var slopes []float64
		for i := range ps {
			for j := i + 1; j < len(ps); j++ {
				slopes = append(slopes, (float64(ps[j].LiveBytes)-float64(ps[i].LiveBytes))/(ps[j].At-ps[i].At).Seconds())
			}
		}
		slices.Sort(slopes)
		m := len(slopes) / 2
		want := slopes[m]
		if len(slopes)%2 == 0 {
			want = (slopes[m-1] + slopes[m]) / 2
		}
		if got != want {
			t.Fatalf("trial %d: theilSen = %v, want %v", trial, got, want)
		}
	}
}
