package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/leakscope/leakscope/analyze"
)

func TestParseSelector(t *testing.T) {
	for _, bad := range []string{"", "comm", "comm=", "name=x", "runtime=python", "pid=x", "pid=-1", "comm=a,,exe=b"} {
		if _, err := parseSelector(bad); err == nil {
			t.Errorf("parseSelector(%q): no error", bad)
		}
	}
	proc := func(pid int, comm, exe, cgroup, rt string) *procInfo {
		return &procInfo{Pid: pid, comm: func() string { return comm }, exe: func() string { return exe },
			cgroup: func() string { return cgroup }, runtime: func() string { return rt }}
	}
	java := proc(10, "java", "/usr/lib/jvm/java-17-openjdk-amd64/bin/java", "/kubepods.slice/kubepods-pod1234.slice/cri-containerd-ab.scope", "jvm")
	leaky := proc(11, "leaky", "/srv/bin/leaky", "/system.slice/leaky.service", "native")
	for _, tc := range []struct {
		expr        string
		java, leaky bool
	}{
		{"comm=java", true, false},
		{"comm=lea*", false, true},
		{"exe=java", true, false}, // no slash: the base name
		{"exe=/srv/*", false, true},
		{"exe=/usr/lib/jvm/*/bin/java", true, false},
		{"runtime=jvm", true, false},
		{"runtime=native", false, true},
		{"cgroup=*pod1234*", true, false},
		{"cgroup=/system.slice/leaky.service", false, true},
		{"pid=11", false, true},
		{"comm=java,runtime=native", false, false}, // every term must match
		{"comm=leak?", false, true},
	} {
		sel, err := parseSelector(tc.expr)
		if err != nil {
			t.Fatalf("parseSelector(%q): %v", tc.expr, err)
		}
		if got := sel.match(java); got != tc.java {
			t.Errorf("%q matches java: %v, want %v", tc.expr, got, tc.java)
		}
		if got := sel.match(leaky); got != tc.leaky {
			t.Errorf("%q matches leaky: %v, want %v", tc.expr, got, tc.leaky)
		}
	}
	// A regexp character in a glob is itself.
	sel, _ := parseSelector("comm=a.b")
	if sel.match(proc(1, "axb", "/x", "/", "native")) {
		t.Error("comm=a.b matched axb")
	}
}

// parseAgent parses agent's command line, and returns its options.
func parseAgent(args ...string) (*agentOptions, error) {
	var got *agentOptions
	root := newRootCmd(ioStreams{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &bytes.Buffer{}})
	for _, c := range root.Commands() {
		if c.Name() == "agent" {
			root.RemoveCommand(c)
		}
	}
	root.AddCommand(newAgentCmd(ioStreams{}, func(_ context.Context, o *agentOptions) error { got = o; return nil }))
	root.SetArgs(append([]string{"agent"}, args...))
	return got, root.Execute()
}

func TestAgentFlags(t *testing.T) {
	got, err := parseAgent("--select", "comm=leaky", "--select", "runtime=jvm")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.selectors) != 2 || got.Interval != agentInterval || got.sampleBytes != 512<<10 || got.MaxAllocations != agentMaxAllocations || got.Listen != "127.0.0.1:9464" || !got.Maps {
		t.Errorf("defaults: %+v", got)
	}
	for _, args := range [][]string{
		{}, // no --select
		{"--select", "comm=x", "--listen", "0.0.0.0:9464"},
		{"--select", "comm=x", "--log-format", "xml"},
		{"--select", "bogus=1"},
		{"--select", "comm=x", "--max-history", "0"},
	} {
		if _, err := parseAgent(args...); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
	got, err = parseAgent("--select", "comm=x", "--listen", "0.0.0.0:9464", "--listen-allow-remote", "--sample-bytes", "off")
	if err != nil || got.sampleBytes != 0 {
		t.Errorf("--listen-allow-remote, --sample-bytes off: %v", err)
	}
	if got, err = parseAgent("--select", "comm=x", "--maps=false"); err != nil || got.Maps {
		t.Errorf("--maps=false: %v, maps %v", err, got != nil && got.Maps)
	}
	got, err = parseAgent("--select", "comm=x", "--culprit-skip", "^vendor_", "--pool-frame", "my_pool")
	if err != nil || got.rankOptions(0).CulpritSkip == nil || got.rankOptions(0).Pools == nil {
		t.Errorf("--culprit-skip, --pool-frame do not reach the ranking: %v", err)
	}
}

// sites is an analyze.SiteList of sites.
type testSites []analyze.Site

func (s testSites) Len() int                { return len(s) }
func (s testSites) ID(i int) uint64         { return s[i].ID }
func (s testSites) Site(i int) analyze.Site { return s[i] }

func agentTestTarget(pid int) *agentTarget {
	leak := &analyze.Frame{Function: "leak_request_buffer", Module: "/srv/leaky"}
	a := newAgentTarget(pid, "leaky\x1b[31m", "/system.slice/leaky.service", 2, nil)
	a.header = &analyze.Capture{Target: analyze.Target{Pid: pid, Command: []string{"/srv/leaky"}, Runtime: analyze.RuntimeNative}}
	var sites testSites
	for id := uint64(1); id <= 4; id++ {
		sites = append(sites, analyze.Site{ID: id, Kind: analyze.KindMalloc, Stack: analyze.Stack{Frames: []*analyze.Frame{leak}}})
	}
	for i := 0; i < 10; i++ {
		var ps []analyze.SitePoint
		for id := uint64(1); id <= 4; id++ {
			ps = append(ps, analyze.SitePoint{ID: id, LiveCount: uint64(i) * id, LiveBytes: uint64(i) * id * 4096, Allocs: uint64(i) * id})
		}
		var news analyze.SiteList = testSites(nil)
		if i == 0 {
			news = sites
		}
		a.add(news, analyze.Snapshot{At: time.Duration(i) * time.Second, Sites: ps})
	}
	return a
}

func TestAgentTargetFolds(t *testing.T) {
	a := agentTestTarget(7)
	if a.folded != 2 || len(a.sites) != 3 {
		t.Fatalf("folded %d, %d sites; want 2 folded into 1 other", a.folded, len(a.sites))
	}
	c := a.capture()
	var other *analyze.Site
	for i := range c.Sites {
		if c.Sites[i].ID >= otherSiteID {
			other = &c.Sites[i]
		}
	}
	if other == nil || other.LiveCount != 9*(3+4) || other.Stack.Frames[0].Function != "other" {
		t.Fatalf("other site %+v", other)
	}
	if len(c.Snapshots) != 10 || c.Duration != 9*time.Second {
		t.Errorf("%d snapshots, duration %v", len(c.Snapshots), c.Duration)
	}
}

func agentTestServer(allowRemote bool) *agentServer {
	st := newAgentState()
	st.targets[7] = agentTestTarget(7)
	st.targets[8] = agentTestTarget(8)
	opts := &agentOptions{}
	opts.Top, opts.GroupBy = 5, "stack"
	return &agentServer{st: st, opts: opts, allowRemote: allowRemote}
}

func get(t *testing.T, h http.Handler, method, target, remote string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	req.RemoteAddr = remote
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

func TestAgentServer(t *testing.T) {
	h := agentTestServer(false).handler()
	const local = "127.0.0.1:5555"
	w := get(t, h, "GET", "http://127.0.0.1:9464/metrics", local)
	body := w.Body.String()
	if w.Code != 200 || !strings.Contains(body, `leakscope_leak_outstanding_bytes{pid="8",comm="leaky\\x1b[31m",runtime="native",cgroup="/system.slice/leaky.service",kind="malloc",culprit="leak_request_buffer"}`) ||
		!strings.Contains(body, `culprit="other"`) || !strings.Contains(body, "leakscope_agent_targets 2\n") {
		t.Errorf("/metrics: %d\n%s", w.Code, body)
	}
	if strings.ContainsRune(body, 0x1b) {
		t.Error("/metrics holds an escape character a target named itself with")
	}

	w = get(t, h, "GET", "http://127.0.0.1:9464/debug/pprof/leaks", local)
	p, err := profile.Parse(w.Body)
	if err != nil {
		t.Fatalf("/debug/pprof/leaks: %d %v", w.Code, err)
	}
	pids := map[string]bool{}
	for _, s := range p.Sample {
		pids[s.Label["pid"][0]] = true
		if s.Label["comm"][0] != "leaky\x1b[31m" {
			t.Errorf("comm label %q", s.Label["comm"])
		}
	}
	if !pids["7"] || !pids["8"] || len(pids) != 2 {
		t.Errorf("pids in the profile: %v", pids)
	}
	w = get(t, h, "GET", "http://127.0.0.1:9464/debug/pprof/leaks?pid=8", local)
	p, err = profile.Parse(w.Body)
	if err != nil || len(p.Sample) == 0 || p.Sample[0].Label["pid"][0] != "8" {
		t.Errorf("?pid=8: %v", err)
	}
	for target, code := range map[string]int{
		"/debug/pprof/leaks?pid=9": 404, "/debug/pprof/leaks?pid=x": 400,
		"/report?pid=7": 200, "/report": 400, "/report?pid=9": 404, "/": 200, "/nothing": 404,
	} {
		if w := get(t, h, "GET", "http://127.0.0.1:9464"+target, local); w.Code != code {
			t.Errorf("GET %s: %d, want %d", target, w.Code, code)
		}
	}
	if w := get(t, h, "GET", "http://127.0.0.1:9464/report?pid=7", local); !strings.Contains(w.Body.String(), "leak_request_buffer") {
		t.Error("/report?pid=7 does not name the culprit")
	}
	// Read-only, and loopback only without --listen-allow-remote (a
	// rebinding Host is not loopback either).
	if w := get(t, h, "POST", "http://127.0.0.1:9464/metrics", local); w.Code != 405 {
		t.Errorf("POST: %d", w.Code)
	}
	if w := get(t, h, "GET", "http://127.0.0.1:9464/metrics", "10.0.0.2:5555"); w.Code != 403 {
		t.Errorf("remote client: %d", w.Code)
	}
	if w := get(t, h, "GET", "http://evil.example:9464/metrics", local); w.Code != 403 {
		t.Errorf("rebinding host: %d", w.Code)
	}
	hr := agentTestServer(true).handler()
	if w := get(t, hr, "GET", "http://10.0.0.1:9464/metrics", "10.0.0.2:5555"); w.Code != 200 {
		t.Errorf("remote client with --listen-allow-remote: %d", w.Code)
	}
}

func TestAgentHistoryLimit(t *testing.T) {
	st := newAgentState()
	st.targets[7] = agentTestTarget(7)
	st.targets[8] = agentTestTarget(8)
	before := st.historyPointsLocked()
	st.trimHistoryLocked(int64(before) * pointBytes / 2)
	if after := st.historyPointsLocked(); after*pointBytes > before*pointBytes/2 || st.health.historyThinned == 0 {
		t.Errorf("history %d points after the limit, %d before", after, before)
	}
}
