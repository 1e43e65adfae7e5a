package report

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leakscope/leakscope/analyze"
)

// The page's template, style sheet and script are written for leakscope and
// embedded, so a report is one file that loads nothing from the network.
var (
	//go:embed html/report.tmpl
	htmlPageTemplate string
	//go:embed html/report.css
	htmlCSS string
	//go:embed html/report.js
	htmlJS string

	htmlTemplate = template.Must(template.New("report").Parse(htmlPageTemplate))

	// htmlCSP lets the page run only its own style sheet and script, by
	// hash, and fetch nothing: a name that slipped past escaping could
	// still not run code or load anything.
	htmlCSP = "default-src 'none'; base-uri 'none'; form-action 'none'; " +
		"style-src '" + cspHash(htmlCSS) + "'; script-src '" + cspHash(htmlJS) + "'"
)

// Chart and flame graph limits.
const (
	// chartSeries is how many of the top leaks the chart draws.
	chartSeries = 8
	// flameMinShare drops flame graph nodes holding less than this share of
	// all live bytes (0.01%): under a tenth of a pixel on a 1000-pixel
	// graph, but a capture of 65536 deep stacks would otherwise embed
	// millions of them.
	flameMinShare = 1e-4
)

// chartColors are the chart's series colors, by rank (Tableau 10).
var chartColors = []string{"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7"}

// HTML writes r as one self-contained HTML page: a header with the target
// and totals, the lost counters and warnings in boxes at the top when there
// are any, a chart of the live bytes of the top leaks at every snapshot, an
// icicle graph of the live bytes of every site, and a table of r.Leaks,
// sortable by any column, each row expanding to its reasons and full stack.
//
// The icicle graph is a flame graph drawn top down: the root, all live
// bytes, is the top row; under it one box per kind, then the outermost
// frames (main), and each column ends at the bottom with the frame that
// called the allocator. Boxes are as wide as the live bytes beneath them,
// siblings ordered by bytes (most first), then name. It covers every site
// of the capture, whatever r.Options.Top and MinAge, like Pprof; a
// truncated stack starts with a "[truncated: reason]" box.
//
// Every name from the capture goes through html/template's escaping; the
// script draws the icicle graph from a JSON blob escaped the same way and
// sets text, never markup. A Content-Security-Policy admits only the
// page's own script and style sheet and no network access. The output
// depends only on r, never on the clock.
func HTML(w io.Writer, r *analyze.Result) error {
	var b bytes.Buffer
	if err := htmlTemplate.Execute(&b, htmlPageOf(r)); err != nil {
		return fmt.Errorf("render html report: %w", err)
	}
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("write html report: %w", err)
	}
	return nil
}

// htmlPage is what report.tmpl renders.
type htmlPage struct {
	Title       string
	Target      string
	Started     string
	Duration    string
	MinAge      string   // "" without a min-age filter
	Scope       string   // what the capture cannot have seen (Target.Scope)
	Stops       string   // run's stops of the command (Target.Stops)
	Processes   []string // the other processes traced (Capture.Processes)
	Outstanding string
	Sites       int
	Lost        []htmlCounter // nil when nothing was lost
	Warnings    []string
	Leaks       []htmlLeak
	Chart       *htmlChart  // nil without snapshots or leaks
	Memory      *htmlMemory // nil without a memory breakdown
	Flame       htmlFlame   // embedded as JSON for the script

	CSS template.CSS // htmlCSS, a constant
	JS  template.JS  // htmlJS, a constant
	CSP string
}

type htmlCounter struct {
	Name    string
	N       uint64
	Meaning string
}

// htmlLeak is one table row. The Sort fields are the sort keys of the
// columns whose text does not sort: -1 is an unknown age, "" no trend.
type htmlLeak struct {
	Rank                        int
	Kind                        string
	Count, Bytes, Allocs, Frees uint64
	CountText, BytesText        string // liveText
	Oldest                      string
	OldestSort                  int64
	Growth                      string
	GrowthSort                  string
	TopFrame                    string
	Score                       string
	Color                       string // chart color; "" when not charted
	Reasons                     []string
	Frames                      []string
	Truncated                   string
}

func htmlPageOf(r *analyze.Result) *htmlPage {
	c := r.Capture
	p := &htmlPage{
		Started:  c.StartedAt.Format(time.RFC3339),
		Duration: analyze.FormatDuration(c.Duration),
		Outstanding: fmt.Sprintf("%s in %d allocations",
			analyze.FormatBytes(r.Totals.OutstandingBytes), r.Totals.OutstandingCount),
		Sites:    len(c.Sites),
		Warnings: c.Warnings,
		Flame:    flameOf(c),
		CSS:      template.CSS(htmlCSS),
		JS:       template.JS(htmlJS),
		CSP:      htmlCSP,
	}
	p.Target = fmt.Sprintf("pid %d", c.Target.Pid)
	if len(c.Target.Command) > 0 {
		p.Target += ", " + command(c.Target.Command)
	}
	p.Title = "leakscope: " + p.Target
	p.Target += " (" + string(c.Target.Runtime)
	if st := c.Target.Status(); st != "" {
		p.Target += ", " + st
	}
	p.Target += ")"
	for _, e := range c.Target.Execs {
		p.Target += "; exec'd " + e
	}
	for _, pr := range c.Processes {
		p.Processes = append(p.Processes, processLine(pr))
	}
	p.Scope = c.Target.Scope()
	if st := c.Target.Stops; st != nil {
		p.Stops = st.String()
	}
	if r.Options.MinAge > 0 {
		p.MinAge = analyze.FormatDuration(r.Options.MinAge)
	}
	if pr := c.Probes; pr != nil && !pr.Malloc {
		p.Warnings = append([]string{"probes: " + pr.String()}, p.Warnings...)
	}
	if l := c.Lost; l != (analyze.Lost{}) {
		p.Lost = []htmlCounter{
			{"allocations dropped", l.AllocationsDropped, "live table or site table full"},
			{"unknown frees", l.UnknownFrees, "releases of handles never seen acquired"},
			{"stack errors", l.StackErrors, "stacks that could not be stored or read"},
			{"frees missed", l.FreesMissed, "addresses reused while still recorded live"},
			{"pending dropped", l.PendingDropped, "per-thread call table full"},
		}
	}
	for i, l := range r.Leaks {
		s := l.Site
		hl := htmlLeak{
			Rank:       l.Rank,
			Kind:       string(s.Kind),
			Count:      l.Count,
			Bytes:      l.Bytes,
			Allocs:     s.Allocs,
			Frees:      s.Frees,
			BytesText:  analyze.FormatBytes(l.Bytes),
			Oldest:     "-",
			OldestSort: -1,
			Growth:     "-",
			TopFrame:   "-",
			Score:      strconv.FormatFloat(l.Score, 'f', 0, 64),
			Reasons:    leakReasons(l, c),
			Truncated:  s.Stack.Truncated,
		}
		hl.CountText, hl.BytesText = liveText(l)
		if l.AgeKnown {
			hl.Oldest, hl.OldestSort = analyze.FormatDuration(l.OldestAge), int64(l.OldestAge)
		}
		if l.Trend != nil {
			hl.Growth = formatGrowth(l.Trend.Growth)
			hl.GrowthSort = strconv.FormatFloat(l.Trend.Growth, 'g', -1, 64)
		}
		if l.Culprit != nil {
			hl.TopFrame = shortFrame(*l.Culprit)
		}
		for _, f := range s.Stack.Frames {
			hl.Frames = append(hl.Frames, frame(*f))
		}
		if len(c.Snapshots) > 0 && i < chartSeries {
			hl.Color = chartColors[i]
		}
		p.Leaks = append(p.Leaks, hl)
	}
	p.Chart = chartOf(r)
	p.Memory = memoryOf(r)
	return p
}

// formatGrowth renders a trend's slope in bytes per second with a sign:
// "+2.6 KiB/s", "-512 B/s", "0 B/s".
func formatGrowth(v float64) string {
	sign := "+"
	if v < 0 {
		sign, v = "-", -v
	}
	switch {
	case v == 0 || math.IsNaN(v):
		return "0 B/s"
	case v < 1:
		return fmt.Sprintf("%s%.2f B/s", sign, v)
	case v >= math.MaxUint64:
		return sign + "inf B/s"
	}
	return sign + analyze.FormatBytes(uint64(math.Round(v))) + "/s"
}

// cspHash is the CSP source expression allowing exactly the inline element
// whose text is s.
func cspHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
}

// htmlChart is an inline SVG line chart of live bytes over time. All
// coordinates are SVG user units, rendered with one decimal.
type htmlChart struct {
	Width, Height          int
	Left, Top, Right, Foot string // the plot area's edges
	XTicks, YTicks         []htmlTick
	Series                 []htmlSeries
}

type htmlTick struct {
	Pos, Label string
}

type htmlSeries struct {
	Rank   int
	Label  string
	Color  string
	Points string // SVG polyline points
	Dots   []htmlDot
}

type htmlDot struct {
	X, Y, Title string
}

// Chart geometry, in SVG user units.
const (
	chartWidth, chartHeight = 960, 300
	chartLeft, chartRight   = 80, 925
	chartTop, chartFoot     = 12, 270
)

// chartOf draws the live bytes of the first chartSeries leaks at every
// snapshot of the capture, from Capture.Series. It is nil when there are
// no leaks or no snapshots.
func chartOf(r *analyze.Result) *htmlChart {
	c := r.Capture
	if len(c.Snapshots) == 0 || len(r.Leaks) == 0 {
		return nil
	}
	leaks := r.Leaks[:min(len(r.Leaks), chartSeries)]
	series := make([][]analyze.Point, len(leaks))
	var span time.Duration
	var top uint64
	for i, l := range leaks {
		series[i] = c.Series(l.Site.ID)
		for _, p := range series[i] {
			span = max(span, p.At)
			top = max(top, p.LiveBytes)
		}
	}
	span = max(span, c.Duration, time.Second)
	yStep := byteStep(top)
	yMax := yStep * max(1, (top+yStep-1)/yStep)
	xStep := durationStep(span)

	x := func(d time.Duration) float64 {
		return chartLeft + float64(d)/float64(span)*(chartRight-chartLeft)
	}
	y := func(n uint64) float64 {
		return chartFoot - float64(n)/float64(yMax)*(chartFoot-chartTop)
	}
	ch := &htmlChart{
		Width: chartWidth, Height: chartHeight,
		Left: coord(chartLeft), Top: coord(chartTop), Right: coord(chartRight), Foot: coord(chartFoot),
	}
	for v := uint64(0); v <= yMax; v += yStep {
		ch.YTicks = append(ch.YTicks, htmlTick{coord(y(v)), tickBytes(v)})
	}
	for d := time.Duration(0); d <= span; d += xStep {
		ch.XTicks = append(ch.XTicks, htmlTick{coord(x(d)), analyze.FormatDuration(d)})
	}
	for i, l := range leaks {
		label := "-"
		if f := l.Site.Stack.Frames; len(f) > 0 {
			label = shortFrame(*f[0])
		}
		s := htmlSeries{Rank: l.Rank, Label: label, Color: chartColors[i]}
		pts := make([]string, len(series[i]))
		for j, p := range series[i] {
			px, py := coord(x(p.At)), coord(y(p.LiveBytes))
			pts[j] = px + "," + py
			s.Dots = append(s.Dots, htmlDot{px, py, fmt.Sprintf("#%d %s at %s: %s in %d allocations",
				l.Rank, label, analyze.FormatDuration(p.At), analyze.FormatBytes(p.LiveBytes), p.LiveCount)})
		}
		s.Points = strings.Join(pts, " ")
		ch.Series = append(ch.Series, s)
	}
	return ch
}

func coord(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// byteStep returns a round step for at most about four ticks up to top: 1,
// 2, 5, 10, 20, 50, 100, 200 or 500 B, KiB, MiB, GiB or TiB.
func byteStep(top uint64) uint64 {
	want := max(1, float64(top)/4)
	unit := 1.0
	for want/unit > 500 && unit < 1<<40 {
		unit *= 1024
	}
	for _, f := range []float64{1, 2, 5, 10, 20, 50, 100, 200, 500} {
		if f >= want/unit {
			return uint64(f * unit)
		}
	}
	return uint64(1024 * unit)
}

// tickBytes renders an axis label: FormatBytes without a trailing ".0".
func tickBytes(n uint64) string {
	return strings.Replace(analyze.FormatBytes(n), ".0 ", " ", 1)
}

// durationStep returns a round step giving at most six ticks over span.
func durationStep(span time.Duration) time.Duration {
	for _, s := range []time.Duration{
		100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
		time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
		time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
		time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour,
	} {
		if span/s <= 6 {
			return s
		}
	}
	return 24 * time.Hour * max(1, span/(6*24*time.Hour)+1)
}

// htmlFlame is the icicle graph, embedded as JSON for the script.
type htmlFlame struct {
	Total  uint64      `json:"total"`  // live bytes of every site: the root's width
	Hidden int         `json:"hidden"` // nodes left out as too narrow (flameMinShare)
	Nodes  []flameNode `json:"nodes"`  // depth first, root first, children by bytes
}

// flameNode is one box. X is the live bytes of the boxes left of it on its
// row within the root, so the box spans [X, X+Bytes) of [0, Total).
type flameNode struct {
	Name  string `json:"n"`
	Title string `json:"t"` // the name with the module and file, for the tooltip
	Type  string `json:"k"` // "root", "kind", "frame" or "truncated"
	Depth int    `json:"d"`
	X     uint64 `json:"x"`
	Bytes uint64 `json:"v"`
	Count uint64 `json:"c"` // live allocations
}

type flameTree struct {
	name, title, typ string
	bytes, count     uint64
	// children in the order made; index finds one by key once there are
	// many (most boxes have one child: a map each was most of the page's
	// allocations).
	children []*flameTree
	index    map[flameKey]*flameTree
}

type flameKey struct{ typ, name string }

// flameIndexAt is how many children a box has before it indexes them.
const flameIndexAt = 8

// child returns t's child of type typ named name, and whether it was just
// made; the caller then sets its title.
func (t *flameTree) child(name, typ string) (*flameTree, bool) {
	key := flameKey{typ, name}
	if t.index != nil {
		if ch, ok := t.index[key]; ok {
			return ch, false
		}
	} else {
		for _, ch := range t.children {
			if ch.name == name && ch.typ == typ {
				return ch, false
			}
		}
	}
	ch := &flameTree{name: name, title: name, typ: typ}
	t.children = append(t.children, ch)
	if t.index != nil {
		t.index[key] = ch
	} else if len(t.children) > flameIndexAt {
		t.index = make(map[flameKey]*flameTree, 2*len(t.children))
		for _, c := range t.children {
			t.index[flameKey{c.typ, c.name}] = c
		}
	}
	return ch, true
}

// add counts a site's live allocations in t.
func (t *flameTree) add(s *analyze.Site) {
	t.bytes += s.LiveBytes
	t.count += s.LiveCount
}

// flameOf merges every site's stack, outermost frame first under its
// kind, into a tree weighted by live bytes. Frames merge by their short
// name (shortFrame), as flame graphs merge by function. A box's title is
// made once, with the box (100k sites: making it for every frame of every
// site took most of the page's time).
func flameOf(c *analyze.Capture) htmlFlame {
	root := &flameTree{name: "all", title: "all live bytes", typ: "root"}
	for i := range c.Sites {
		s := &c.Sites[i]
		if s.LiveBytes == 0 {
			continue
		}
		root.add(s)
		n, made := root.child(string(s.Kind), "kind")
		if made {
			n.title = "kind " + string(s.Kind)
		}
		n.add(s)
		if s.Stack.Truncated != "" {
			n, _ = n.child("[truncated: "+s.Stack.Truncated+"]", "truncated")
			n.add(s)
		}
		for i := len(s.Stack.Frames) - 1; i >= 0; i-- {
			f := s.Stack.Frames[i]
			name := shortFrame(*f)
			if n, made = n.child(name, "frame"); made {
				if f.Module != "" {
					n.title += " in " + f.Module
				}
				if f.File != "" {
					n.title += " (" + f.File + ")"
				}
			}
			n.add(s)
		}
	}
	fl := htmlFlame{Total: root.bytes, Nodes: []flameNode{}}
	if root.bytes == 0 {
		return fl
	}
	var walk func(t *flameTree, depth int, x uint64)
	walk = func(t *flameTree, depth int, x uint64) {
		fl.Nodes = append(fl.Nodes, flameNode{
			Name: t.name, Title: t.title, Type: t.typ,
			Depth: depth, X: x, Bytes: t.bytes, Count: t.count,
		})
		kids := t.children
		slices.SortFunc(kids, func(a, b *flameTree) int {
			return cmp.Or(cmp.Compare(b.bytes, a.bytes), cmp.Compare(a.name, b.name), cmp.Compare(a.typ, b.typ))
		})
		for _, ch := range kids {
			if float64(ch.bytes) < flameMinShare*float64(root.bytes) {
				fl.Hidden += ch.size()
			} else {
				walk(ch, depth+1, x)
			}
			x += ch.bytes
		}
	}
	walk(root, 0, 0)
	return fl
}

// size counts t and its descendants.
func (t *flameTree) size() int {
	n := 1
	for _, ch := range t.children {
		n += ch.size()
	}
	return n
}

// leakReasons are l's reasons, first the process it is in when the
// capture traced more than one, and the files a mmap.file row maps.
func leakReasons(l analyze.Leak, c *analyze.Capture) []string {
	files := fileLines(l.Site.Files)
	if len(c.Processes) == 0 && len(files) == 0 {
		return l.Reasons
	}
	var out []string
	if len(c.Processes) > 0 {
		out = append(out, "in process "+processOf(c, l.Site))
	}
	return append(append(out, files...), l.Reasons...)
}
