package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/leakscope/leakscope/analyze"
)

func promCapture() *analyze.Capture {
	leak := &analyze.Frame{Function: "leak_request_buffer", Module: "/srv/app", File: "app.c", Line: 10}
	mainf := &analyze.Frame{Function: "main", Module: "/srv/app"}
	c := &analyze.Capture{
		Target:   analyze.Target{Pid: 42, Command: []string{"/srv/app"}, Runtime: analyze.RuntimeNative},
		Duration: 10 * time.Minute,
		Sites: []analyze.Site{
			{ID: 1, Kind: "malloc", Stack: analyze.Stack{Frames: []*analyze.Frame{leak, mainf}}, LiveCount: 100, LiveBytes: 409600, Allocs: 100},
			{ID: 2, Kind: "zlib.inflate", Stack: analyze.Stack{Frames: []*analyze.Frame{mainf}}, LiveCount: 1, LiveBytes: 7000, Allocs: 5, Frees: 4},
		},
		Lost: analyze.Lost{UnknownFrees: 3},
	}
	for i := 0; i <= 10; i++ {
		c.Snapshots = append(c.Snapshots, analyze.Snapshot{At: time.Duration(i) * time.Minute, Sites: []analyze.SitePoint{
			{ID: 1, LiveCount: uint64(10 * i), LiveBytes: uint64(40960 * i), Allocs: uint64(10 * i)},
			{ID: 2, LiveCount: 1, LiveBytes: 7000, Allocs: 5, Frees: 4},
		}})
	}
	return c
}

func TestPrometheus(t *testing.T) {
	r := analyze.Rank(promCapture(), analyze.Options{})
	targets := []PromTarget{{Pid: 42, Comm: "app\n\"x\"", Runtime: "native", Cgroup: "/system.slice/app.service", Result: r, Folded: 2}}
	var b bytes.Buffer
	if err := Prometheus(&b, targets, 1, []PromSample{{Name: "leakscope_agent_targets", Help: "Targets.", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	lbl := `pid="42",comm="app\\n\"x\"",runtime="native",cgroup="/system.slice/app.service"`
	for _, want := range []string{
		"# TYPE leakscope_outstanding_bytes gauge\n",
		`leakscope_outstanding_bytes{` + lbl + `,kind="malloc"} 409600` + "\n",
		`leakscope_outstanding_count{` + lbl + `,kind="zlib.inflate"} 1` + "\n",
		// (409600 - 204800) bytes over the last 5 minutes
		`leakscope_growth_bytes_per_second{` + lbl + `,kind="malloc"} 682.6666666666666` + "\n",
		`leakscope_growth_bytes_per_second{` + lbl + `,kind="zlib.inflate"} 0` + "\n",
		`leakscope_lost_total{` + lbl + `,reason="unknown_frees"} 3` + "\n",
		`leakscope_sites_folded_total{` + lbl + `} 2` + "\n",
		`leakscope_leak_outstanding_bytes{` + lbl + `,kind="malloc",culprit="leak_request_buffer"} 409600` + "\n",
		"# TYPE leakscope_agent_targets gauge\nleakscope_agent_targets 1\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	// --top 1: one culprit row per target.
	if n := strings.Count(out, "leakscope_leak_outstanding_bytes{"); n != 1 {
		t.Errorf("%d leak rows, want 1 (top)", n)
	}
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if !strings.HasPrefix(line, "# ") && !strings.HasPrefix(line, "leakscope_") {
			t.Errorf("line %q: a label broke out of its line", line)
		}
	}
}

func TestPromValueBounded(t *testing.T) {
	long := strings.Repeat("é", 200)
	v := promValue(long)
	if len(v) > PromLabelMax || !strings.HasSuffix(v, "…") {
		t.Errorf("promValue kept %d bytes: %q", len(v), v)
	}
	if v := promValue("a\x1b[2Jb"); strings.ContainsRune(v, 0x1b) {
		t.Errorf("control character kept: %q", v)
	}
}
