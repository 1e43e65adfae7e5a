package analyze

import (
	"reflect"
	"slices"
	"testing"
	"time"
)

// live returns n live allocations of size bytes, all of the given age.
func live(n int, size uint64, age time.Duration) []Alloc {
	return slices.Repeat([]Alloc{{Size: size, Age: age}}, n)
}

func TestRank(t *testing.T) {
	const d = 10 * time.Minute
	type want struct {
		id           uint64
		count, bytes uint64
		oldest       time.Duration
		score        float64
	}
	tests := []struct {
		name   string
		dur    time.Duration
		sites  []Site
		opts   Options
		totals Totals
		want   []want // in rank order
	}{
		{
			name: "bytes decide between equally old never-freeing sites",
			dur:  d,
			sites: []Site{
				{ID: 1, Allocs: 4, Live: live(4, 256, d)},
				{ID: 2, Allocs: 4, Live: live(4, 1024, d)},
			},
			totals: Totals{OutstandingCount: 8, OutstandingBytes: 5120},
			want: []want{
				{id: 2, count: 4, bytes: 4096, oldest: d, score: 4096},
				{id: 1, count: 4, bytes: 1024, oldest: d, score: 1024},
			},
		},
		{
			// 12700 of 12800 is 99.2% freed: freeWeight = 1 - 0.5*127/128 =
			// 129/256, so 1 MiB + 4 KiB scores 530448, below the 1048576 of
			// a site holding 1 MiB that never frees.
			name: "a site freeing 99% ranks below a never-freeing one holding slightly less",
			dur:  d,
			sites: []Site{
				{ID: 1, Allocs: 12800, Frees: 12700, Live: live(100, 10526, d)},
				{ID: 2, Allocs: 256, Live: live(256, 4096, d)},
			},
			totals: Totals{OutstandingCount: 356, OutstandingBytes: 1052600 + 1048576},
			want: []want{
				{id: 2, count: 256, bytes: 1048576, oldest: d, score: 1048576},
				{id: 1, count: 100, bytes: 1052600, oldest: d, score: 1052600 * 129.0 / 256},
			},
		},
		{
			// Half the capture old: ageWeight = 0.75.
			name: "young sites weigh less",
			dur:  d,
			sites: []Site{
				{ID: 1, Allocs: 1, Live: live(1, 1000, d/2)},
				{ID: 2, Allocs: 1, Live: live(1, 800, d)},
				{ID: 3, Allocs: 1, Live: live(1, 1100, 0)},
			},
			totals: Totals{OutstandingCount: 3, OutstandingBytes: 2900},
			want: []want{
				{id: 2, count: 1, bytes: 800, oldest: d, score: 800},
				{id: 1, count: 1, bytes: 1000, oldest: d / 2, score: 750},
				{id: 3, count: 1, bytes: 1100, oldest: 0, score: 550},
			},
		},
		{
			name: "equal scores break ties by bytes, count, then ID",
			dur:  d,
			sites: []Site{
				{ID: 9, Allocs: 2, Live: live(2, 512, d)},              // 1024, 2 allocs
				{ID: 4, Allocs: 4, Live: live(4, 256, d)},              // 1024, 4 allocs
				{ID: 7, Allocs: 2, Frees: 2, Live: live(2, 1024, d)},   // 2048 halved
				{ID: 3, Allocs: 2, Live: live(2, 512, d)},              // same as 9
				{ID: 5, Allocs: 8, Frees: 8, Live: live(4, 1024, d/4)}, // 4096 × 0.625 × 0.5 = 1280
			},
			totals: Totals{OutstandingCount: 14, OutstandingBytes: 1024*3 + 2048 + 4096},
			want: []want{
				{id: 5, count: 4, bytes: 4096, oldest: d / 4, score: 1280},
				{id: 7, count: 2, bytes: 2048, oldest: d, score: 1024},
				{id: 4, count: 4, bytes: 1024, oldest: d, score: 1024},
				{id: 3, count: 2, bytes: 1024, oldest: d, score: 1024},
				{id: 9, count: 2, bytes: 1024, oldest: d, score: 1024},
			},
		},
		{
			name: "min age drops young allocations and sites left empty",
			dur:  d,
			opts: Options{MinAge: time.Minute},
			sites: []Site{
				{ID: 1, Allocs: 3, Live: []Alloc{{Size: 100, Age: 30 * time.Second}, {Size: 200, Age: 5 * time.Minute}, {Size: 400, Age: time.Minute}}},
				{ID: 2, Allocs: 1, Live: live(1, 1<<20, 59*time.Second)},
			},
			totals: Totals{OutstandingCount: 2, OutstandingBytes: 600},
			want: []want{
				{id: 1, count: 2, bytes: 600, oldest: 5 * time.Minute, score: 450},
			},
		},
		{
			name: "without per-allocation ages, site totals count in full",
			dur:  d,
			opts: Options{MinAge: time.Hour},
			sites: []Site{
				{ID: 1, Allocs: 10, Frees: 5, LiveCount: 5, LiveBytes: 5000},
				{ID: 2, LiveCount: 0, LiveBytes: 0},
			},
			totals: Totals{OutstandingCount: 5, OutstandingBytes: 5000},
			want: []want{
				{id: 1, count: 5, bytes: 5000, score: 3750},
			},
		},
		{
			name: "no duration and no allocations leave weights at 1",
			sites: []Site{
				{ID: 1, Live: live(2, 64, time.Second)},
			},
			totals: Totals{OutstandingCount: 2, OutstandingBytes: 128},
			want: []want{
				{id: 1, count: 2, bytes: 128, oldest: time.Second, score: 128},
			},
		},
		{
			name: "top keeps the best ranks but totals cover every site",
			dur:  d,
			opts: Options{Top: 1},
			sites: []Site{
				{ID: 1, Allocs: 1, Live: live(1, 10, d)},
				{ID: 2, Allocs: 1, Live: live(1, 20, d)},
			},
			totals: Totals{OutstandingCount: 2, OutstandingBytes: 30},
			want: []want{
				{id: 2, count: 1, bytes: 20, oldest: d, score: 20},
			},
		},
		{
			name:  "no sites",
			dur:   d,
			sites: nil,
			want:  []want{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Capture{Duration: tt.dur, Sites: tt.sites}
			r := Rank(c, tt.opts)
			if r.Capture != c || !reflect.DeepEqual(r.Options, tt.opts) {
				t.Errorf("Result.Capture, Options = %p, %+v; want %p, %+v", r.Capture, r.Options, c, tt.opts)
			}
			if r.Totals != tt.totals {
				t.Errorf("Totals = %+v, want %+v", r.Totals, tt.totals)
			}
			if r.Leaks == nil {
				t.Error("Leaks is nil, want empty slice")
			}
			if len(r.Leaks) != len(tt.want) {
				t.Fatalf("got %d leaks, want %d: %+v", len(r.Leaks), len(tt.want), r.Leaks)
			}
			for i, w := range tt.want {
				l := r.Leaks[i]
				got := want{l.Site.ID, l.Count, l.Bytes, l.OldestAge, l.Score}
				if got != w {
					t.Errorf("rank %d: got %+v, want %+v", i+1, got, w)
				}
				if l.Rank != i+1 {
					t.Errorf("Leaks[%d].Rank = %d, want %d", i, l.Rank, i+1)
				}
				if l.Site != &c.Sites[slices.IndexFunc(c.Sites, func(s Site) bool { return s.ID == w.id })] {
					t.Errorf("Leaks[%d].Site does not point into the capture", i)
				}
			}
		})
	}
}

func TestRankReasons(t *testing.T) {
	const d = 10 * time.Minute
	tests := []struct {
		name string
		site Site
		opts Options
		want []string
	}{
		{
			name: "never freed, truncated",
			site: Site{
				Allocs: 512, Live: live(512, 8192, 9*time.Minute+12*time.Second),
				Stack: Stack{Truncated: "libfoo.so has no frame pointers"},
			},
			want: []string{
				"holds 4.0 MiB in 512 allocations",
				"never freed: 0 of 512 allocations released",
				"oldest 9m12s, 92% of the capture",
				"stack truncated: libfoo.so has no frame pointers",
				"growth unknown: the capture has no snapshots", "confidence low (0.40): class held, 0.30 plus up to 0.10 for never freeing: too few facts to tell growth",
			},
		},
		{
			name: "mostly freed, min age",
			site: Site{
				Allocs: 12800, Frees: 12700,
				Live: append(live(99, 1024, 2*time.Minute), live(1, 1024, time.Second)...),
			},
			opts: Options{MinAge: time.Minute},
			want: []string{
				"holds 99.0 KiB in 99 allocations at least 1m0s old; 1 younger not counted",
				"frees 99.2%: 12700 of 12800 allocations released",
				"oldest 2m0s, 20% of the capture",
				"growth unknown: the capture has no snapshots", "confidence low (0.30): class held, 0.30 plus up to 0.10 for never freeing: too few facts to tell growth",
			},
		},
		{
			name: "no ages, no allocations",
			site: Site{LiveCount: 3, LiveBytes: 3},
			opts: Options{MinAge: time.Minute},
			want: []string{
				"holds 3 B in 3 allocations",
				"free rate unknown: no allocations seen during the capture",
				"age unknown: the capture has no per-allocation ages, so the min-age filter was not applied",
				"growth unknown: the capture has no snapshots", "confidence low (0.40): class held, 0.30 plus up to 0.10 for never freeing: too few facts to tell growth",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Rank(&Capture{Duration: d, Sites: []Site{tt.site}}, tt.opts)
			if len(r.Leaks) != 1 {
				t.Fatalf("got %d leaks, want 1", len(r.Leaks))
			}
			if got := r.Leaks[0].Reasons; !slices.Equal(got, tt.want) {
				t.Errorf("Reasons:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

// A pool filled once and then flat stays at low confidence however long it
// holds; a steady leak that never frees is high.
func TestConfidencePoolVersusLeak(t *testing.T) {
	c := &Capture{Duration: 10 * time.Second}
	pool := Site{ID: 1, Kind: KindMalloc, LiveCount: 4, LiveBytes: 4 << 20, Allocs: 4}
	leak := Site{ID: 2, Kind: KindMalloc, LiveCount: 10, LiveBytes: 10 << 10, Allocs: 10}
	for i := 0; i < 4; i++ {
		pool.Live = append(pool.Live, Alloc{Size: 1 << 20, Age: 10 * time.Second})
	}
	for i := 0; i < 10; i++ {
		leak.Live = append(leak.Live, Alloc{Size: 1 << 10, Age: time.Duration(10-i) * time.Second})
	}
	c.Sites = []Site{pool, leak}
	for i := 0; i <= 10; i++ {
		p := SitePoint{ID: 1, LiveCount: 4, LiveBytes: 4 << 20}
		if i == 0 {
			p.LiveCount, p.LiveBytes = 1, 1<<20
		}
		l := SitePoint{ID: 2, LiveCount: uint64(i), LiveBytes: uint64(i) << 10}
		c.Snapshots = append(c.Snapshots, Snapshot{At: time.Duration(i) * time.Second, Sites: []SitePoint{p, l}})
	}
	res := Rank(c, Options{})
	got := map[uint64]float64{}
	for _, l := range res.Leaks {
		got[l.Site.ID] = l.Confidence
	}
	if got[1] > 0.4 || got[2] < 0.7 {
		t.Errorf("confidence pool %.2f (want <= 0.4), leak %.2f (want >= 0.7)", got[1], got[2])
	}
}

// TestRankTopFitsOnlyWhatCanRank: with a top, Rank fits trends only for the
// leaks that can still make it; the leaks it keeps are exactly the first
// ones of ranking everything, trends, scores and reasons included.
func TestRankTopFitsOnlyWhatCanRank(t *testing.T) {
	for _, variant := range []string{"", "ties", "large held rows"} {
		c := synthCapture(3000, 15000, 12)
		ties := variant == "ties"
		if variant == "large held rows" {
			// A quarter of the sites hold one large block each: held
			// or a plateau, below every small leak row by class, above
			// them by score. Classes order them within each chunk of
			// scores, so the first rows are the same for every top.
			for i := 0; i < len(c.Sites); i += 4 {
				s := &c.Sites[i]
				s.Live = s.Live[:1]
				s.Live[0].Size = 1 << 20
				s.LiveCount, s.LiveBytes, s.Allocs, s.Frees = 1, 1<<20, 1, 0
			}
			classes := map[Class]int{}
			for _, l := range Rank(c, Options{}).Leaks {
				classes[l.Verdict.Class]++
			}
			if classes[ClassHeld]+classes[ClassPlateau] < 700 || classes[ClassLeak] < 1000 {
				t.Fatalf("classes %v: want large held or plateau rows among many leak rows", classes)
			}
		}
		if ties {
			// Every site the same, as stacks_storm's: scores tie
			// and the order falls to the site IDs.
			for i := range c.Sites {
				s := &c.Sites[i]
				for k := range s.Live {
					s.Live[k] = Alloc{Size: 32, Age: time.Minute}
				}
				s.LiveBytes, s.Allocs, s.Frees = 32*s.LiveCount, s.LiveCount, 0
			}
			for _, sn := range c.Snapshots {
				for k := range sn.Sites {
					sn.Sites[k].LiveBytes, sn.Sites[k].LiveCount = 32*5, 5
				}
			}
		}
		checkTopMatchesAll(t, c)
	}
}

func checkTopMatchesAll(t *testing.T, c *Capture) {
	t.Helper()
	all := Rank(c, Options{})
	for _, top := range []int{1, 10, 256, 257, 300, 2999, 3000} {
		got := Rank(c, Options{Top: top})
		if len(got.Leaks) != top {
			t.Fatalf("top %d: %d leaks", top, len(got.Leaks))
		}
		if got.Totals != all.Totals {
			t.Errorf("top %d: totals %+v, want %+v", top, got.Totals, all.Totals)
		}
		if !reflect.DeepEqual(got.Leaks, all.Leaks[:top]) {
			for i := range got.Leaks {
				if !reflect.DeepEqual(got.Leaks[i], all.Leaks[i]) {
					t.Fatalf("top %d: leak %d = %+v\nwant %+v", top, i, got.Leaks[i], all.Leaks[i])
				}
			}
		}
	}
}
