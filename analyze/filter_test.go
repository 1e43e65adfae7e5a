package analyze

import (
	"math"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// stack returns frames of /opt/app/server named fns, leaf first.
func stack(fns ...string) Stack {
	s := Stack{}
	for i, fn := range fns {
		s.Frames = append(s.Frames, &Frame{Function: fn, Module: "/opt/app/server", Address: 0x1000 + uint64(i), Offset: uint64(i)})
	}
	return s
}

// filterCapture is the fixture of the filter tests; every live allocation
// is as old as the capture, so without snapshots a score is bytes × the
// free weight.
func filterCapture() *Capture {
	const d = 10 * time.Second
	libfoo := Stack{Frames: []*Frame{{Module: "/usr/lib/libfoo.so.1", Offset: 0x40, Address: 0x7f0040}, {Function: "main"}}}
	logLine := Stack{Frames: []*Frame{{Function: "log_line", Module: "/usr/lib/libfoo.so.1"}, {Function: "main"}}}
	return &Capture{
		Duration: d,
		Sites: []Site{
			{ID: 1, Kind: KindMalloc, Stack: stack("xmalloc", "parse_header", "handle_request", "main"),
				LiveCount: 3, LiveBytes: 300, Allocs: 3, Live: live(3, 100, d)},
			{ID: 2, Kind: KindMalloc, Stack: stack("g_malloc0", "parse_header", "handle_request", "main"),
				LiveCount: 1, LiveBytes: 1000, Allocs: 1, Live: live(1, 1000, d)},
			{ID: 3, Kind: KindMalloc, Stack: stack("parse_header", "handle_request", "main"),
				Allocs: 10, Frees: 10}, // churn: holds nothing
			{ID: 4, Kind: KindMalloc, Stack: logLine,
				LiveCount: 2, LiveBytes: 100, Allocs: 2, Live: live(2, 50, d)},
			{ID: 5, Kind: KindZlibInflate, Stack: stack("parse_header", "handle_request", "main"),
				LiveCount: 1, LiveBytes: 7000, Allocs: 1, Live: live(1, 7000, d)},
			{ID: 6, Kind: KindMalloc, Stack: libfoo,
				LiveCount: 1, LiveBytes: 64, Allocs: 1, Live: live(1, 64, d)},
			{ID: 7, Kind: KindMalloc, Stack: stack("runtime.cgocall", "runtime.systemstack"),
				LiveCount: 1, LiveBytes: 8, Allocs: 1, Live: live(1, 8, d)},
			{ID: 8, Kind: KindZlibInflate, Stack: stack("inflateInit_", "parse_header", "handle_request", "main"),
				LiveCount: 2, LiveBytes: 14000, Allocs: 2, Live: live(2, 7000, d)},
		},
		Warnings: make([]string, 1, 4),
	}
}

func TestRankFilters(t *testing.T) {
	type want struct {
		id           uint64
		count, bytes uint64
		score        float64
		note         string // last reason; "" when not merged
	}
	re := regexp.MustCompile
	tests := []struct {
		name   string
		opts   Options
		totals Totals
		want   []want // in rank order
	}{
		{
			name:   "no filter",
			totals: Totals{OutstandingCount: 11, OutstandingBytes: 22472},
			want: []want{
				{id: 8, count: 2, bytes: 14000, score: 14000},
				{id: 5, count: 1, bytes: 7000, score: 7000},
				{id: 2, count: 1, bytes: 1000, score: 1000},
				{id: 1, count: 3, bytes: 300, score: 300},
				{id: 4, count: 2, bytes: 100, score: 100},
				{id: 6, count: 1, bytes: 64, score: 64},
				{id: 7, count: 1, bytes: 8, score: 8},
			},
		},
		{
			name:   "focus keeps stacks with a matching frame anywhere, unanchored",
			opts:   Options{Focus: re("header")},
			totals: Totals{OutstandingCount: 7, OutstandingBytes: 22300},
			want: []want{
				{id: 8, count: 2, bytes: 14000, score: 14000},
				{id: 5, count: 1, bytes: 7000, score: 7000},
				{id: 2, count: 1, bytes: 1000, score: 1000},
				{id: 1, count: 3, bytes: 300, score: 300},
			},
		},
		{
			name:   "ignore drops stacks with any matching frame",
			opts:   Options{Ignore: re("^(xmalloc|g_malloc0)$")},
			totals: Totals{OutstandingCount: 7, OutstandingBytes: 21172},
			want: []want{
				{id: 8, count: 2, bytes: 14000, score: 14000},
				{id: 5, count: 1, bytes: 7000, score: 7000},
				{id: 4, count: 2, bytes: 100, score: 100},
				{id: 6, count: 1, bytes: 64, score: 64},
				{id: 7, count: 1, bytes: 8, score: 8},
			},
		},
		{
			name:   "focus and ignore together",
			opts:   Options{Focus: re("parse_header"), Ignore: re("inflateInit")},
			totals: Totals{OutstandingCount: 5, OutstandingBytes: 8300},
			want: []want{
				{id: 5, count: 1, bytes: 7000, score: 7000},
				{id: 2, count: 1, bytes: 1000, score: 1000},
				{id: 1, count: 3, bytes: 300, score: 300},
			},
		},
		{
			// log_line lives in libfoo too, but has a function name.
			name:   "a frame without a function matches by its module's base name",
			opts:   Options{Focus: re(`^libfoo\.so\.1$`)},
			totals: Totals{OutstandingCount: 1, OutstandingBytes: 64},
			want:   []want{{id: 6, count: 1, bytes: 64, score: 64}},
		},
		{
			name:   "focus matching nothing",
			opts:   Options{Focus: re("no_such_function")},
			totals: Totals{},
			want:   []want{},
		},
		{
			name:   "kind glob",
			opts:   Options{Kinds: []string{"zlib.*"}},
			totals: Totals{OutstandingCount: 3, OutstandingBytes: 21000},
			want: []want{
				{id: 8, count: 2, bytes: 14000, score: 14000},
				{id: 5, count: 1, bytes: 7000, score: 7000},
			},
		},
		{
			name:   "kinds are alternatives",
			opts:   Options{Kinds: []string{"zlib.deflate", "malloc"}},
			totals: Totals{OutstandingCount: 8, OutstandingBytes: 1472},
			want: []want{
				{id: 2, count: 1, bytes: 1000, score: 1000},
				{id: 1, count: 3, bytes: 300, score: 300},
				{id: 4, count: 2, bytes: 100, score: 100},
				{id: 6, count: 1, bytes: 64, score: 64},
				{id: 7, count: 1, bytes: 8, score: 8},
			},
		},
		{
			// malloc/parse_header merges 1, 2 and the churn site 3 under
			// the largest, 2: 14 allocations, 10 freed, so the free weight
			// is 1 − 0.5 × 10/14. The zlib sites of parse_header stay apart
			// from its malloc sites, and 8's inflateInit_ is looked past.
			// Site 7 is all runtime and stays alone.
			name:   "group by frame",
			opts:   Options{GroupBy: GroupByFrame},
			totals: Totals{OutstandingCount: 11, OutstandingBytes: 22472},
			want: []want{
				{id: 8, count: 3, bytes: 21000, score: 21000, note: "2 stacks grouped by parse_header"},
				{id: 2, count: 4, bytes: 1300, score: 1300 * 9.0 / 14, note: "3 stacks grouped by parse_header"},
				{id: 4, count: 2, bytes: 100, score: 100},
				{id: 6, count: 1, bytes: 64, score: 64},
				{id: 7, count: 1, bytes: 8, score: 8},
			},
		},
		{
			name:   "filters apply before grouping",
			opts:   Options{GroupBy: GroupByFrame, Kinds: []string{"malloc"}, Ignore: re("^g_malloc0$")},
			totals: Totals{OutstandingCount: 7, OutstandingBytes: 472},
			want: []want{
				{id: 1, count: 3, bytes: 300, score: 300 * 8.0 / 13, note: "2 stacks grouped by parse_header"},
				{id: 4, count: 2, bytes: 100, score: 100},
				{id: 6, count: 1, bytes: 64, score: 64},
				{id: 7, count: 1, bytes: 8, score: 8},
			},
		},
		{
			name:   "explicit stack grouping is no grouping",
			opts:   Options{GroupBy: GroupByStack, Kinds: []string{"zlib.inflate"}},
			totals: Totals{OutstandingCount: 3, OutstandingBytes: 21000},
			want: []want{
				{id: 8, count: 2, bytes: 14000, score: 14000},
				{id: 5, count: 1, bytes: 7000, score: 7000},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := filterCapture()
			r := Rank(c, tt.opts)
			if !reflect.DeepEqual(c, filterCapture()) {
				t.Errorf("Rank modified its capture")
			}
			if r.Totals != tt.totals {
				t.Errorf("Totals = %+v, want %+v", r.Totals, tt.totals)
			}
			got := []want{}
			for _, l := range r.Leaks {
				w := want{id: l.Site.ID, count: l.Count, bytes: l.Bytes, score: l.Score}
				if n := l.Reasons[len(l.Reasons)-1]; strings.Contains(n, "stacks grouped by") {
					w.note = n
				}
				got = append(got, w)
			}
			same := len(got) == len(tt.want)
			for i := 0; same && i < len(got); i++ {
				g, w := got[i], tt.want[i]
				same = g.id == w.id && g.count == w.count && g.bytes == w.bytes && g.note == w.note &&
					math.Abs(g.score-w.score) <= 1e-9*w.score
			}
			if !same {
				t.Errorf("leaks:\n got %+v\nwant %+v", got, tt.want)
			}
			for i, l := range r.Leaks {
				if l.Rank != i+1 {
					t.Errorf("leak %d has rank %d", i, l.Rank)
				}
				in := false
				for j := range r.Capture.Sites {
					in = in || &r.Capture.Sites[j] == l.Site
				}
				if !in {
					t.Errorf("leak %d does not point into Result.Capture.Sites", i)
				}
			}
			if (r.Capture == c) != (tt.opts.Filters() == "") {
				t.Errorf("Result.Capture is c: %v, with filters %q", r.Capture == c, tt.opts.Filters())
			}
		})
	}
}

// The merged site holds the stack of its largest member, the sums of the
// totals and every member's live allocations.
func TestGroupByFrameMergedSite(t *testing.T) {
	r := Rank(filterCapture(), Options{GroupBy: GroupByFrame, Kinds: []string{"malloc"}})
	l := r.Leaks[0]
	s := l.Site
	if s.ID != 2 || s.Kind != KindMalloc || s.Stack.Frames[0].Function != "g_malloc0" ||
		s.LiveCount != 4 || s.LiveBytes != 1300 || s.Allocs != 14 || s.Frees != 10 || len(s.Live) != 4 {
		t.Errorf("merged site = %+v", *s)
	}
	if !l.AgeKnown || l.OldestAge != 10*time.Second {
		t.Errorf("merged leak ages: known %v, oldest %s", l.AgeKnown, l.OldestAge)
	}
	wantReasons := []string{
		"holds 1.3 KiB in 4 allocations",
		"frees 71.4%: 10 of 14 allocations released",
		"oldest 10s, 100% of the capture",
		"growth unknown: the capture has no snapshots", "confidence low (0.33): class held, 0.30 plus up to 0.10 for never freeing: too few facts to tell growth",
		"3 stacks grouped by parse_header",
	}
	if !slices.Equal(l.Reasons, wantReasons) {
		t.Errorf("reasons:\n got %q\nwant %q", l.Reasons, wantReasons)
	}
	if len(r.Capture.Sites) != 4 { // 2 (with 1, 3), 4, 6, 7
		t.Errorf("%d sites in the grouped capture, want 4", len(r.Capture.Sites))
	}
}

// A member holding allocations without their ages leaves the merged site
// without ages: it is counted by its totals, as any such site is.
func TestGroupByFrameMixedAges(t *testing.T) {
	c := &Capture{Duration: time.Minute, Sites: []Site{
		{ID: 1, Kind: KindMalloc, Stack: stack("xmalloc", "f"), LiveCount: 1, LiveBytes: 10, Allocs: 1, Live: live(1, 10, time.Minute)},
		{ID: 2, Kind: KindMalloc, Stack: stack("f"), LiveCount: 2, LiveBytes: 20, Allocs: 2},
	}}
	r := Rank(c, Options{GroupBy: GroupByFrame, MinAge: time.Hour})
	if len(r.Leaks) != 1 {
		t.Fatalf("%d leaks, want 1", len(r.Leaks))
	}
	l := r.Leaks[0]
	if l.Site.ID != 2 || l.Count != 3 || l.Bytes != 30 || l.AgeKnown || l.Site.Live != nil {
		t.Errorf("leak = %+v, site %+v", l, *l.Site)
	}
}

// Snapshots of a filtered capture list only the sites kept, under the ID
// of the site they were merged into, summed; the trend reads those sums.
func TestFilterSnapshots(t *testing.T) {
	c := filterCapture()
	c.Snapshots = []Snapshot{
		{At: 1 * time.Second, Sites: []SitePoint{
			{ID: 1, LiveCount: 1, LiveBytes: 100, Allocs: 1},
			{ID: 4, LiveCount: 1, LiveBytes: 50, Allocs: 1},
		}},
		{At: 2 * time.Second, Sites: []SitePoint{
			{ID: 1, LiveCount: 2, LiveBytes: 200, Allocs: 2},
			{ID: 2, LiveCount: 1, LiveBytes: 1000, Allocs: 1},
			{ID: 3, LiveCount: 1, LiveBytes: 500, Allocs: 5, Frees: 4},
			{ID: 4, LiveCount: 2, LiveBytes: 100, Allocs: 2},
		}},
		{At: 3 * time.Second, Sites: []SitePoint{
			{ID: 1, LiveCount: 3, LiveBytes: 300, Allocs: 3},
			{ID: 2, LiveCount: 1, LiveBytes: 1000, Allocs: 1},
			{ID: 3, Allocs: 10, Frees: 10},
			{ID: 4, LiveCount: 2, LiveBytes: 100, Allocs: 2},
			{ID: 6, LiveCount: 1, LiveBytes: 64, Allocs: 1},
		}},
	}
	for _, tc := range []struct {
		name string
		opts Options
		want []Snapshot
	}{
		{
			name: "group by frame",
			opts: Options{GroupBy: GroupByFrame},
			want: []Snapshot{
				{At: 1 * time.Second, Sites: []SitePoint{
					{ID: 2, LiveCount: 1, LiveBytes: 100, Allocs: 1},
					{ID: 4, LiveCount: 1, LiveBytes: 50, Allocs: 1},
				}},
				{At: 2 * time.Second, Sites: []SitePoint{
					{ID: 2, LiveCount: 4, LiveBytes: 1700, Allocs: 8, Frees: 4},
					{ID: 4, LiveCount: 2, LiveBytes: 100, Allocs: 2},
				}},
				{At: 3 * time.Second, Sites: []SitePoint{
					{ID: 2, LiveCount: 4, LiveBytes: 1300, Allocs: 14, Frees: 10},
					{ID: 4, LiveCount: 2, LiveBytes: 100, Allocs: 2},
					{ID: 6, LiveCount: 1, LiveBytes: 64, Allocs: 1},
				}},
			},
		},
		{
			name: "focus",
			opts: Options{Focus: regexp.MustCompile("log_line")},
			want: []Snapshot{
				{At: 1 * time.Second, Sites: []SitePoint{{ID: 4, LiveCount: 1, LiveBytes: 50, Allocs: 1}}},
				{At: 2 * time.Second, Sites: []SitePoint{{ID: 4, LiveCount: 2, LiveBytes: 100, Allocs: 2}}},
				{At: 3 * time.Second, Sites: []SitePoint{{ID: 4, LiveCount: 2, LiveBytes: 100, Allocs: 2}}},
			},
		},
		{
			name: "ignore everything",
			opts: Options{Ignore: regexp.MustCompile("")},
			want: []Snapshot{
				{At: 1 * time.Second, Sites: []SitePoint{}},
				{At: 2 * time.Second, Sites: []SitePoint{}},
				{At: 3 * time.Second, Sites: []SitePoint{}},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Rank(c, tc.opts)
			if !reflect.DeepEqual(r.Capture.Snapshots, tc.want) {
				t.Errorf("snapshots:\n got %+v\nwant %+v", r.Capture.Snapshots, tc.want)
			}
		})
	}

	r := Rank(c, Options{GroupBy: GroupByFrame})
	i := slices.IndexFunc(r.Leaks, func(l Leak) bool { return l.Site.ID == 2 })
	if tr := r.Leaks[i].Trend; tr == nil || tr.Points != 3 || tr.Rises != 1 || tr.Falls != 1 {
		t.Errorf("trend of the merged leak = %+v, want 3 points, 1 rise (100 to 1700 B), 1 fall (to 1300 B)", tr)
	}
	if got := r.Capture.Series(2); got[1].LiveBytes != 1700 {
		t.Errorf("Series(2) = %+v", got)
	}
}

// Appending a warning to a filtered Result.Capture, as the goroutine
// correlation does, leaves the caller's capture alone.
func TestFilterCopiesWarnings(t *testing.T) {
	c := filterCapture()
	c.Warnings[0] = "w"
	r := Rank(c, Options{Kinds: []string{"malloc"}})
	r.Capture.Warnings = append(r.Capture.Warnings, "added")
	if len(c.Warnings) != 1 || c.Warnings[:2][1] != "" {
		t.Errorf("caller's warnings = %q (array %q)", c.Warnings, c.Warnings[:2])
	}
}

func TestParseFilter(t *testing.T) {
	if _, err := ParseFilter("--focus", "("); err == nil || err.Error() != "--focus \"(\": error parsing regexp: missing closing ): `(`" {
		t.Errorf("ParseFilter(--focus, \"(\") error = %v", err)
	}
	if _, err := ParseFilter("--ignore", "a**"); err == nil || err.Error() != "--ignore \"a**\": error parsing regexp: invalid nested repetition operator: `**`" {
		t.Errorf("ParseFilter(--ignore, \"a**\") error = %v", err)
	}
	re, err := ParseFilter("--focus", `leak_\w+`)
	if err != nil || !re.MatchString("do_leak_slowly") {
		t.Errorf("ParseFilter(--focus, leak_\\w+) = %v, %v", re, err)
	}
}

func TestCulpritSkipsAllocatorsAndRuntimes(t *testing.T) {
	skipped := []string{
		"malloc", "calloc", "realloc", "reallocarray", "posix_memalign", "aligned_alloc", "memalign",
		"valloc", "pvalloc", "strdup", "strndup", "__libc_malloc", "__GI___libc_malloc", "_int_malloc",
		"xmalloc", "xcalloc", "xrealloc", "xstrdup",
		"g_malloc", "g_malloc0", "g_malloc_n", "g_malloc0_n", "g_realloc", "g_try_malloc", "g_strdup", "g_slice_alloc0",
		"CRYPTO_malloc", "CRYPTO_zalloc", "CRYPTO_realloc", "CRYPTO_clear_realloc", "CRYPTO_secure_malloc", "CRYPTO_strdup",
		"zcalloc", "inflateInit_", "inflateInit2_", "deflateInit_", "deflateInit2_",
		"operator new(unsigned long)", "operator new[](unsigned long)", "operator new(unsigned long, std::nothrow_t const&)",
		"_Znwm", "_Znam", "std::__new_allocator<char>::allocate(unsigned long, void const*)",
		"os::malloc(unsigned long, MEMFLAGS, NativeCallStack const&)", "os::realloc(void*, unsigned long, MEMFLAGS)",
		"AllocateHeap(unsigned long, MEMFLAGS, AllocFailStrategy::AllocFailEnum)", "Unsafe_AllocateMemory0", "[interpreted]",
		"runtime.cgocall", "runtime.asmcgocall.abi0", "runtime.mallocgc", "_cgo_6cc2654a8ed3_Cfunc_malloc", "x_cgo_thread_start",
		"crosscall2", "main._Cfunc_malloc", "main._Cfunc__CMalloc", "main._cgo_cmalloc",
		"inflate", "Java_java_util_zip_Inflater_init", "java.nio.DirectByteBuffer.<init>", "std::string::_M_create(unsigned long&, unsigned long)",
		"sqlite3Malloc", "JavaCalls::call_helper(JavaValue*, methodHandle const&, JavaCallArguments*, JavaThread*)",
	}
	kept := []string{
		"leak_slowly", "my_malloc", "xmalloc_pool", "mallocate", "g_malloc_pool", "CRYPTO_free_ex_data", "inflater",
		"operator delete(void*)", "os::free(void*)", "runtimeStats", "main.run", "javax_helper",
		"com.example.Cache.put", "KafkaRecovery.recoverSegment",
	}
	for _, fn := range skipped {
		if f, ok := NewCulprits(nil).Find(stack(fn, "caller")); !ok || f.Function != "caller" {
			t.Errorf("Culprit(%s, caller) = %s, want caller", fn, f.Function)
		}
	}
	for _, fn := range kept {
		if f, ok := NewCulprits(nil).Find(stack(fn, "caller")); !ok || f.Function != fn {
			t.Errorf("Culprit(%s, caller) = %s, want %s", fn, f.Function, fn)
		}
	}
	if f, ok := NewCulprits(nil).Find(Stack{Frames: []*Frame{{Function: "malloc"}, {Module: "/lib/x.so", Offset: 0x10}}}); !ok || f.Offset != 0x10 {
		t.Errorf("an unnamed frame was skipped: %+v, %v", f, ok)
	}
	if _, ok := NewCulprits(nil).Find(stack("runtime.cgocall", "runtime.goexit")); ok {
		t.Errorf("a stack of runtime frames has a group frame")
	}
	if _, ok := NewCulprits(nil).Find(Stack{}); ok {
		t.Errorf("an empty stack has a group frame")
	}
}

func TestOptionsFilters(t *testing.T) {
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{MinAge: time.Second, Top: 3}, ""},
		{Options{GroupBy: GroupByStack}, ""},
		{Options{Kinds: []string{"zlib.*", "malloc"}, Focus: regexp.MustCompile(`parse"x`), Ignore: regexp.MustCompile("^log"), GroupBy: GroupByFrame},
			`kind zlib.* or malloc, focus "parse\"x", ignore "^log", grouped by frame`},
	} {
		if got := tc.opts.Filters(); got != tc.want {
			t.Errorf("Filters() = %q, want %q", got, tc.want)
		}
	}
}
