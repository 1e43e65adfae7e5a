package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/testutil"
)

func renderHTML(t *testing.T, r *analyze.Result) string {
	t.Helper()
	var b bytes.Buffer
	if err := HTML(&b, r); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestHTMLGolden renders the golden cases into testdata/<name>.html.golden.
func TestHTMLGolden(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			r := analyze.Rank(tc.load(t), tc.opts)
			got := renderHTML(t, r)
			if again := renderHTML(t, analyze.Rank(tc.load(t), tc.opts)); again != got {
				t.Error("two renderings of the same capture differ")
			}
			testutil.Golden(t, filepath.Join("testdata", tc.name+".html.golden"), []byte(got))
		})
	}
}

// TestHTMLContent checks the page shows what the issue asks for, against
// the numbers the text report prints for the same capture.
func TestHTMLContent(t *testing.T) {
	page := renderHTML(t, analyze.Rank(loadCapture(t, "leaky"), analyze.Options{}))
	for _, want := range []string{
		`<title>leakscope: pid 4242, ./leaky --rate 10 --name &#34;two words&#34;</title>`,
		`<dd id="outstanding">8.2 MiB in 123 allocations</dd>`,
		`<section class="alert lost" id="lost" role="alert">`,
		`<tr class="nonzero"><td>allocations dropped</td><td class="num">12</td>`,
		`<tr class="nonzero"><td>unknown frees</td><td class="num">3</td>`,
		`<tr><td>stack errors</td><td class="num">0</td>`,
		`<h2>Warnings (2)</h2>`,
		`<li>allocation table full for 2s: 12 allocations dropped</li>`,
		// Rank 1 row and its details.
		`<td class="num" data-sort="4194304">4.0 MiB</td>`,
		`<td class="num" data-sort="552000000000">9m12s</td>`,
		`<td class="frame" data-sort="foo_buffer_new"><code>foo_buffer_new</code></td>`,
		`<li>never freed: 0 of 16 allocations released</li>`,
		`<li><span class="idx">#1</span> <code>foo_conn_open (/usr/lib/x86_64-linux-gnu/libfoo.so.1&#43;0x3b44)</code></li>`,
		`<p class="truncated">… stack truncated: /usr/lib/x86_64-linux-gnu/libfoo.so.1 has no frame pointers</p>`,
		// Rank 2 has no ages: unknown sorts lowest.
		`<td class="num" data-sort="-1">-</td>`,
		// No snapshots, no chart.
		`No chart: the capture has no snapshots`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	if n := strings.Count(page, `<tbody class="leak"`); n != 4 {
		t.Errorf("%d leak rows, want 4", n)
	}
	if strings.Contains(page, "http://") || strings.Contains(page, "https://") || strings.Contains(page, "src=") {
		t.Error("page refers to something outside itself")
	}

	quiet := renderHTML(t, analyze.Rank(loadCapture(t, "growing"), analyze.Options{}))
	for _, absent := range []string{`id="lost"`, `id="warnings"`} {
		if strings.Contains(quiet, absent) {
			t.Errorf("page of a capture with nothing lost and no warnings has %s", absent)
		}
	}
}

func TestHTMLChart(t *testing.T) {
	r := analyze.Rank(loadCapture(t, "growing"), analyze.Options{})
	page := renderHTML(t, r)
	ch := chartOf(r)
	if ch == nil || len(ch.Series) != 2 {
		t.Fatalf("chart = %+v, want 2 series", ch)
	}
	// Rank 1 is conn_new; its series comes from Capture.Series.
	s := ch.Series[0]
	if s.Rank != 1 || s.Label != "conn_new" || len(s.Dots) != 6 {
		t.Fatalf("series 1 = %+v", s)
	}
	if want := "#1 conn_new at 10m0s: 1.5 MiB in 24 allocations"; s.Dots[5].Title != want {
		t.Errorf("last point %q, want %q", s.Dots[5].Title, want)
	}
	// 4 MiB is the top: ticks every MiB, time every 2 minutes.
	var ys, xs []string
	for _, tk := range ch.YTicks {
		ys = append(ys, tk.Label)
	}
	for _, tk := range ch.XTicks {
		xs = append(xs, tk.Label)
	}
	if got := strings.Join(ys, ","); got != "0 B,1 MiB,2 MiB,3 MiB,4 MiB" {
		t.Errorf("y ticks %s", got)
	}
	if got := strings.Join(xs, ","); got != "0s,2m0s,4m0s,6m0s,8m0s,10m0s" {
		t.Errorf("x ticks %s", got)
	}
	// The 4 MiB plateau of pool_grow sits on the top grid line.
	if p := ch.Series[1].Dots[1]; p.Y != ch.Top {
		t.Errorf("pool_grow at 4 MiB drawn at y=%s, want the top %s", p.Y, ch.Top)
	}
	for _, want := range []string{`<polyline fill="none" stroke="#4e79a7" points="`, `<title>#1 conn_new at 10m0s: 1.5 MiB in 24 allocations</title>`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}

	// Only the top chartSeries leaks are drawn.
	c := &analyze.Capture{Duration: 3 * time.Second}
	for id := uint64(1); id <= 12; id++ {
		c.Sites = append(c.Sites, analyze.Site{ID: id, Kind: analyze.KindMalloc, LiveCount: 1, LiveBytes: id * 100})
	}
	for at := time.Duration(1); at <= 3; at++ {
		snap := analyze.Snapshot{At: at * time.Second}
		for id := uint64(1); id <= 12; id++ {
			snap.Sites = append(snap.Sites, analyze.SitePoint{ID: id, LiveCount: 1, LiveBytes: id * 100})
		}
		c.Snapshots = append(c.Snapshots, snap)
	}
	ch = chartOf(analyze.Rank(c, analyze.Options{}))
	if len(ch.Series) != chartSeries || ch.Series[0].Rank != 1 || ch.Series[0].Label != "-" || ch.Series[0].Dots[0].Title != "#1 - at 1s: 1.2 KiB in 1 allocations" {
		t.Errorf("chart of 12 leaks: %d series, first %+v", len(ch.Series), ch.Series[0])
	}
}

func TestFlame(t *testing.T) {
	fl := flameOf(loadCapture(t, "leaky"))
	type row struct {
		name  string
		depth int
		x, v  uint64
	}
	var got []row
	for _, n := range fl.Nodes {
		got = append(got, row{n.Name, n.Depth, n.X, n.Bytes})
	}
	// Every site, all 123 allocations: depth first, most bytes first.
	want := []row{
		{"all", 0, 0, 8619880},
		{"malloc", 1, 0, 8598400},
		{"main", 2, 0, 4400000},
		{"cache_put", 3, 0, 4400000},
		{"[truncated: /usr/lib/x86_64-linux-gnu/libfoo.so.1 has no frame pointers]", 2, 4400000, 4194304},
		{"foo_conn_open", 3, 4400000, 4194304},
		{"foo_buffer_new", 4, 4400000, 4194304},
		{"scratch_alloc", 2, 8594304, 4096},
		{"zlib.inflate", 1, 8598400, 21480},
		{"main", 2, 8598400, 21480},
	}
	if len(got) < len(want) {
		t.Fatalf("nodes %+v", got)
	}
	for i, w := range want {
		if got[i] != w {
			t.Errorf("node %d = %+v, want %+v", i, got[i], w)
		}
	}
	if fl.Total != 8619880 || fl.Nodes[0].Count != 123 || fl.Hidden != 0 {
		t.Errorf("total %d, root count %d, hidden %d", fl.Total, fl.Nodes[0].Count, fl.Hidden)
	}
	// Children lie within their parent and do not overlap.
	for i, n := range fl.Nodes {
		var end uint64
		for _, ch := range fl.Nodes[i+1:] {
			if ch.Depth <= n.Depth {
				break
			}
			if ch.Depth == n.Depth+1 {
				if ch.X < max(n.X, end) || ch.X+ch.Bytes > n.X+n.Bytes {
					t.Errorf("%s [%d,+%d) outside its parent %s [%d,+%d) or overlapping", ch.Name, ch.X, ch.Bytes, n.Name, n.X, n.Bytes)
				}
				end = ch.X + ch.Bytes
			}
		}
	}

	// A site under 0.01% of all live bytes is left out, and counted.
	c := &analyze.Capture{Sites: []analyze.Site{
		{ID: 1, Kind: analyze.KindMalloc, LiveCount: 1, LiveBytes: 1 << 20, Stack: analyze.Stack{Frames: []*analyze.Frame{{Function: "big"}}}},
		{ID: 2, Kind: analyze.KindMalloc, LiveCount: 1, LiveBytes: 8, Stack: analyze.Stack{Frames: []*analyze.Frame{{Function: "tiny"}, {Function: "caller"}}}},
		{ID: 3, Kind: analyze.KindMalloc, LiveCount: 0, LiveBytes: 0, Stack: analyze.Stack{Frames: []*analyze.Frame{{Function: "freed"}}}},
	}}
	fl = flameOf(c)
	if len(fl.Nodes) != 3 || fl.Nodes[2].Name != "big" || fl.Hidden != 2 || fl.Total != 1<<20+8 {
		t.Errorf("flame %+v", fl)
	}
	if fl := flameOf(&analyze.Capture{}); fl.Total != 0 || fl.Nodes == nil || len(fl.Nodes) != 0 {
		t.Errorf("empty flame %+v", fl)
	}
}

func TestHTMLFlameJSON(t *testing.T) {
	page := renderHTML(t, analyze.Rank(loadCapture(t, "growing"), analyze.Options{}))
	m := regexp.MustCompile(`<script type="application/json" id="flame-data">(.*?)</script>`).FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no flame-data blob")
	}
	var fl htmlFlame
	if err := json.Unmarshal([]byte(m[1]), &fl); err != nil {
		t.Fatalf("flame-data is not JSON: %v", err)
	}
	if fl.Total != 4194304+1572864 || len(fl.Nodes) != 5 || fl.Nodes[4].Name != "conn_new" ||
		fl.Nodes[4].Title != "conn_new in /opt/server/bin/server (src/conn.c)" {
		t.Errorf("flame-data %+v", fl)
	}
}

// evilCapture names everything with markup an attacker could put in a
// symbol, a path or a command line.
func evilCapture() *analyze.Capture {
	const script, img = `<script>alert(1)</script>`, `"><img src=x onerror=alert(1)>`
	frames := []*analyze.Frame{
		{Address: 0x1000, Function: script, Module: "/lib/" + img + ".so", Offset: 0x10, File: img + ".c", Line: 3},
		{Address: 0x2000, Function: img, Module: "/lib/" + script + ".so", Offset: 0x20},
	}
	return &analyze.Capture{
		Target:   analyze.Target{Pid: 1, Command: []string{script, img}, Runtime: analyze.RuntimeNative},
		Duration: 2 * time.Second,
		Sites: []analyze.Site{
			{ID: 1, Kind: analyze.Kind(script), Stack: analyze.Stack{Frames: frames, Truncated: img}, LiveCount: 1, LiveBytes: 100, Allocs: 1},
			{ID: 2, Kind: analyze.Kind(img), Stack: analyze.Stack{Frames: frames[1:]}, LiveCount: 2, LiveBytes: 50, Allocs: 2},
		},
		Snapshots: []analyze.Snapshot{
			{At: time.Second, Sites: []analyze.SitePoint{{ID: 1, LiveCount: 1, LiveBytes: 100}, {ID: 2, LiveCount: 1, LiveBytes: 20}}},
			{At: 2 * time.Second, Sites: []analyze.SitePoint{{ID: 1, LiveCount: 1, LiveBytes: 100}, {ID: 2, LiveCount: 2, LiveBytes: 50}}},
		},
		Lost:     analyze.Lost{StackErrors: 1},
		Warnings: []string{script, img},
	}
}

func TestHTMLEscapesNames(t *testing.T) {
	page := renderHTML(t, analyze.Rank(evilCapture(), analyze.Options{}))
	for _, raw := range []string{`<script>alert(1)</script>`, `"><img`, `<img`, `onerror=alert(1)>`} {
		if strings.Contains(page, raw) {
			t.Errorf("page contains %s unescaped", raw)
		}
	}
	// Our two script elements, and no other.
	if n := strings.Count(page, "<script"); n != 2 {
		t.Errorf("%d <script elements, want 2 (data and code)", n)
	}
	for _, escaped := range []string{
		`<td data-sort="&lt;script&gt;alert(1)&lt;/script&gt;">&lt;script&gt;alert(1)&lt;/script&gt;</td>`,
		`<code>&lt;script&gt;alert(1)&lt;/script&gt; (/lib/&#34;&gt;&lt;img src=x onerror=alert(1)&gt;.so&#43;0x10) &#34;&gt;&lt;img src=x onerror=alert(1)&gt;.c:3</code>`,
		`<code>&#34;&gt;&lt;img src=x onerror=alert(1)&gt;</code>`,
		`<li>&#34;&gt;&lt;img src=x onerror=alert(1)&gt;</li>`,
		`<title>#2 &#34;&gt;&lt;img src=x onerror=alert(1)&gt;</title>`,
		// In the JSON blob, JS escaping: no '<' and no bare quote.
		`"n":"\u003cscript\u003ealert(1)\u003c/script\u003e"`,
		`"n":"\"\u003e\u003cimg src=x onerror=alert(1)\u003e"`,
	} {
		if !strings.Contains(page, escaped) {
			t.Errorf("page lacks the escaped form %s", escaped)
		}
	}
}

func TestHTMLEmpty(t *testing.T) {
	page := renderHTML(t, analyze.Rank(&analyze.Capture{}, analyze.Options{MinAge: time.Minute}))
	for _, want := range []string{
		`<p class="none">No outstanding allocations at least 1m0s old.</p>`,
		`{"total":0,"hidden":0,"nodes":[]}`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	if strings.Contains(page, `id="leaks"`) {
		t.Error("empty page has a leak table")
	}
}

func TestHTMLWriteError(t *testing.T) {
	r := analyze.Rank(loadCapture(t, "leaky"), analyze.Options{})
	if err := HTML(failWriter{}, r); !errors.Is(err, errWrite) {
		t.Errorf("HTML error = %v, want %v wrapped", err, errWrite)
	}
}

func TestSteps(t *testing.T) {
	for _, tt := range []struct {
		top, step uint64
	}{
		{0, 1}, {3, 1}, {10, 5}, {1000, 500}, {4 << 20, 1 << 20}, {3 << 20, 1 << 20}, {10 << 20, 5 << 20}, {1536, 500},
	} {
		if got := byteStep(tt.top); got != tt.step {
			t.Errorf("byteStep(%d) = %d, want %d", tt.top, got, tt.step)
		}
	}
	for _, tt := range []struct {
		span, step time.Duration
	}{
		{time.Second, 200 * time.Millisecond}, {10 * time.Minute, 2 * time.Minute}, {time.Hour, 10 * time.Minute}, {30 * 24 * time.Hour, 6 * 24 * time.Hour},
	} {
		if got := durationStep(tt.span); got != tt.step {
			t.Errorf("durationStep(%s) = %s, want %s", tt.span, got, tt.step)
		}
	}
	for v, want := range map[float64]string{0: "0 B/s", 2662.4: "+2.6 KiB/s", -512: "-512 B/s", 0.25: "+0.25 B/s"} {
		if got := formatGrowth(v); got != want {
			t.Errorf("formatGrowth(%v) = %q, want %q", v, got, want)
		}
	}
}

// The memory chart stacks every part of each breakdown in
// analyze.MemoryParts' order: each band's bottom is the top of the one
// below, and the top band ends at the process's RSS, at every snapshot.
func TestHTMLMemoryChart(t *testing.T) {
	r := analyze.Rank(loadCapture(t, "growing"), analyze.Options{})
	hm := memoryOf(r)
	if hm == nil || len(hm.Bands) == 0 {
		t.Fatal("no memory chart for a capture with breakdowns")
	}
	c := r.Capture
	var rss []uint64
	for _, m := range c.Memory {
		if pm := m.Of(c.Target.Pid); pm != nil {
			rss = append(rss, pm.RSS)
		}
	}
	n := len(rss)
	top := slices.Max(rss)
	step := byteStep(top)
	yMax := step * max(1, (top+step-1)/step)
	ys := func(b htmlBand) (upper, lower []string) {
		pts := strings.Fields(b.Points)
		if len(pts) != 2*n {
			t.Fatalf("band %s: %d points, want %d", b.Name, len(pts), 2*n)
		}
		for i := range n {
			upper = append(upper, strings.Split(pts[i], ",")[1])
			lower = append(lower, strings.Split(pts[2*n-1-i], ",")[1])
		}
		return upper, lower
	}
	prev := slices.Repeat([]string{coord(chartFoot)}, n)
	names := []string{}
	for _, b := range hm.Bands {
		upper, lower := ys(b)
		if !slices.Equal(lower, prev) {
			t.Errorf("band %s starts at %v, want the top of the band below, %v", b.Name, lower, prev)
		}
		prev = upper
		names = append(names, b.Name)
	}
	var want []string
	for i := range rss {
		want = append(want, coord(chartFoot-float64(rss[i])/float64(yMax)*(chartFoot-chartTop)))
	}
	if !slices.Equal(prev, want) {
		t.Errorf("the top band ends at %v, want RSS at %v", prev, want)
	}
	pm, _ := c.LastMemory(0)
	var parts []string
	for _, p := range pm.Parts {
		parts = append(parts, p.Name)
	}
	if !slices.Equal(names, parts) {
		t.Errorf("bands %q, want the parts %q", names, parts)
	}
	if last := hm.Bands[len(hm.Bands)-1]; last.Name != analyze.PartUnexplained || last.Color != unexplainedColor {
		t.Errorf("last band %s in %s, want unexplained in grey", last.Name, last.Color)
	}
}
