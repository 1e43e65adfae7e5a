package report

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/termtext"
)

// PromTarget is one traced process as Prometheus sees it (leakscope
// agent's /metrics): its labels and its ranked capture.
type PromTarget struct {
	Pid     int
	Comm    string
	Runtime string
	Cgroup  string
	// Result is the target's capture ranked with every row (Top 0), so
	// the outstanding totals cover every site.
	Result *analyze.Result
	// Folded counts the sites merged into one "other" site per kind
	// because the target had more than its budget of distinct sites.
	Folded uint64
	// Exited is when the process exited, zero while it is traced: an
	// exited target's last numbers are still served for a while.
	Exited time.Time
}

// PromSample is one sample of the agent's own health.
type PromSample struct {
	Name, Help string
	Counter    bool // a counter (…_total); a gauge otherwise
	Value      float64
}

// PromGrowthWindow is the time the growth rate is measured over: the
// change between the newest snapshot and the newest one at least this
// much older (the oldest, when none is).
const PromGrowthWindow = 5 * time.Minute

// PromLabelMax bounds a label value (a culprit, a command name, a cgroup)
// in bytes; a longer one is cut at a rune boundary and ends in "…".
const PromLabelMax = 128

// Prometheus writes the text exposition format (version 0.0.4) of the
// targets and the agent's health samples. Per target: its info, the
// outstanding bytes and count and their growth rate per kind, the loss
// counters, the folded-site counter and, for at most top rows of its
// ranking, merged by kind and culprit, the outstanding bytes and count
// with a culprit label. Every label value is sanitized (no control
// character) and at most PromLabelMax bytes, so a target cannot forge a
// line or a label, and the series are at most
// targets × (kinds × 3 + 6 + 2 × top) plus the health samples.
func Prometheus(w io.Writer, targets []PromTarget, top int, health []PromSample) error {
	bw := bufio.NewWriter(w)
	p := &promWriter{w: bw}
	targets = slices.Clone(targets)
	slices.SortFunc(targets, func(a, b PromTarget) int { return a.Pid - b.Pid })

	p.family("leakscope_target_info", "gauge", "A traced process: 1 per target, with its labels.")
	for i := range targets {
		p.sample("leakscope_target_info", targetLabels(&targets[i]), 1)
	}
	p.family("leakscope_target_exited_timestamp_seconds", "gauge", "When a target exited (Unix time); its other series hold its last numbers until it is forgotten (--keep-exited).")
	for i := range targets {
		if !targets[i].Exited.IsZero() {
			p.sample("leakscope_target_exited_timestamp_seconds", targetLabels(&targets[i]), float64(targets[i].Exited.UnixMilli())/1000)
		}
	}
	type kindTotals struct {
		kind          analyze.Kind
		bytes, count  uint64
		growth        float64
		growthUnknown bool
	}
	perTarget := make([][]kindTotals, len(targets))
	for i := range targets {
		c := targets[i].Result.Capture
		idx := map[analyze.Kind]int{}
		var kt []kindTotals
		kindOf := make(map[uint64]analyze.Kind, len(c.Sites))
		for _, s := range c.Sites {
			kindOf[s.ID] = s.Kind
			j, ok := idx[s.Kind]
			if !ok {
				j = len(kt)
				idx[s.Kind] = j
				kt = append(kt, kindTotals{kind: s.Kind, growthUnknown: true})
			}
			kt[j].bytes += s.LiveBytes
			kt[j].count += s.LiveCount
		}
		if g, ok := growth(c.Snapshots, kindOf); ok {
			for j := range kt {
				kt[j].growth, kt[j].growthUnknown = g[kt[j].kind], false
			}
		}
		slices.SortFunc(kt, func(a, b kindTotals) int { return strings.Compare(string(a.kind), string(b.kind)) })
		perTarget[i] = kt
	}
	p.family("leakscope_outstanding_bytes", "gauge", "Bytes allocated and not yet released, per kind (estimates under --sample-bytes).")
	for i := range targets {
		for _, k := range perTarget[i] {
			p.sample("leakscope_outstanding_bytes", withLabel(targetLabels(&targets[i]), "kind", string(k.kind)), float64(k.bytes))
		}
	}
	p.family("leakscope_outstanding_count", "gauge", "Allocations (or resources) not yet released, per kind.")
	for i := range targets {
		for _, k := range perTarget[i] {
			p.sample("leakscope_outstanding_count", withLabel(targetLabels(&targets[i]), "kind", string(k.kind)), float64(k.count))
		}
	}
	p.family("leakscope_growth_bytes_per_second", "gauge", "Change of the outstanding bytes per second over the last "+PromGrowthWindow.String()+" (or since the target was attached), per kind; absent before a second snapshot.")
	for i := range targets {
		for _, k := range perTarget[i] {
			if !k.growthUnknown {
				p.sample("leakscope_growth_bytes_per_second", withLabel(targetLabels(&targets[i]), "kind", string(k.kind)), k.growth)
			}
		}
	}
	p.family("leakscope_lost_total", "counter", "What the kernel side could not account for, by reason (a full table, an unknown free, a failed stack walk): never silent.")
	for i := range targets {
		l := targets[i].Result.Capture.Lost
		for _, r := range []struct {
			reason string
			n      uint64
		}{
			{"allocations_dropped", l.AllocationsDropped}, {"unknown_frees", l.UnknownFrees},
			{"stack_errors", l.StackErrors}, {"frees_missed", l.FreesMissed}, {"pending_dropped", l.PendingDropped},
		} {
			p.sample("leakscope_lost_total", withLabel(targetLabels(&targets[i]), "reason", r.reason), float64(r.n))
		}
	}
	p.family("leakscope_sites_folded_total", "counter", "Distinct sites beyond the per-target budget (--max-target-sites), counted into one culprit=\"other\" site per kind.")
	for i := range targets {
		p.sample("leakscope_sites_folded_total", targetLabels(&targets[i]), float64(targets[i].Folded))
	}
	type row struct {
		kind, culprit string
		bytes, count  uint64
	}
	rows := make([][]row, len(targets))
	for i := range targets {
		var rs []row
		for _, l := range targets[i].Result.Leaks {
			culprit := "unknown"
			if l.Culprit != nil {
				culprit = shortFrame(*l.Culprit)
			}
			culprit = promValue(culprit)
			j := slices.IndexFunc(rs, func(r row) bool { return r.kind == string(l.Site.Kind) && r.culprit == culprit })
			if j < 0 {
				if len(rs) == top {
					continue
				}
				rs = append(rs, row{kind: string(l.Site.Kind), culprit: culprit})
				j = len(rs) - 1
			}
			rs[j].bytes += l.Bytes
			rs[j].count += l.Count
		}
		rows[i] = rs
	}
	p.family("leakscope_leak_outstanding_bytes", "gauge", "Outstanding bytes of a target's top-ranked sites (at most --top per target), merged by kind and culprit, the first frame of the program's own code.")
	for i := range targets {
		for _, r := range rows[i] {
			p.sample("leakscope_leak_outstanding_bytes", withLabel(withLabel(targetLabels(&targets[i]), "kind", r.kind), "culprit", r.culprit), float64(r.bytes))
		}
	}
	p.family("leakscope_leak_outstanding_count", "gauge", "Outstanding allocations of a target's top-ranked sites, as leakscope_leak_outstanding_bytes.")
	for i := range targets {
		for _, r := range rows[i] {
			p.sample("leakscope_leak_outstanding_count", withLabel(withLabel(targetLabels(&targets[i]), "kind", r.kind), "culprit", r.culprit), float64(r.count))
		}
	}
	for _, h := range health {
		typ := "gauge"
		if h.Counter {
			typ = "counter"
		}
		p.family(h.Name, typ, h.Help)
		p.sample(h.Name, nil, h.Value)
	}
	if p.err != nil {
		return p.err
	}
	return bw.Flush()
}

// growth is the change of live bytes per second per kind between the
// newest snapshot and the newest one PromGrowthWindow before it.
func growth(snaps []analyze.Snapshot, kindOf map[uint64]analyze.Kind) (map[analyze.Kind]float64, bool) {
	if len(snaps) < 2 {
		return nil, false
	}
	last := snaps[len(snaps)-1]
	from := snaps[0]
	for _, s := range snaps[:len(snaps)-1] {
		if last.At-s.At >= PromGrowthWindow {
			from = s
		}
	}
	dt := (last.At - from.At).Seconds()
	if dt <= 0 {
		return nil, false
	}
	g := map[analyze.Kind]float64{}
	for _, p := range last.Sites {
		g[kindOf[p.ID]] += float64(p.LiveBytes)
	}
	for _, p := range from.Sites {
		g[kindOf[p.ID]] -= float64(p.LiveBytes)
	}
	for k := range g {
		g[k] /= dt
	}
	return g, true
}

type promLabel struct{ name, value string }

func targetLabels(t *PromTarget) []promLabel {
	return []promLabel{
		{"pid", strconv.Itoa(t.Pid)},
		{"comm", promValue(t.Comm)},
		{"runtime", promValue(t.Runtime)},
		{"cgroup", promValue(t.Cgroup)},
	}
}

func withLabel(ls []promLabel, name, value string) []promLabel {
	return append(ls[:len(ls):len(ls)], promLabel{name, value})
}

// promValue makes s a label value: control characters escaped as the
// terminal formats show them, at most PromLabelMax bytes.
func promValue(s string) string {
	s = termtext.Sanitize(s)
	if len(s) <= PromLabelMax {
		return s
	}
	cut := PromLabelMax - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

type promWriter struct {
	w   *bufio.Writer
	err error
}

func (p *promWriter) family(name, typ, help string) {
	p.printf("# HELP %s %s\n# TYPE %s %s\n", name, strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(help), name, typ)
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func (p *promWriter) sample(name string, labels []promLabel, v float64) {
	var b strings.Builder
	b.WriteString(name)
	if len(labels) > 0 {
		b.WriteByte('{')
		for i, l := range labels {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(l.name)
			b.WriteString(`="`)
			labelEscaper.WriteString(&b, l.value)
			b.WriteByte('"')
		}
		b.WriteByte('}')
	}
	b.WriteByte(' ')
	switch {
	case math.IsNaN(v):
		b.WriteString("NaN")
	case math.IsInf(v, 1):
		b.WriteString("+Inf")
	case math.IsInf(v, -1):
		b.WriteString("-Inf")
	default:
		b.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
	}
	b.WriteByte('\n')
	p.printf("%s", b.String())
}

func (p *promWriter) printf(f string, a ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, f, a...)
	}
}
