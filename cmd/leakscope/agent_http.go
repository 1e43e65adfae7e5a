package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/pprof/profile"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/report"
)

// agentServer serves the agent's state, read-only: nothing a request
// says changes what is traced.
type agentServer struct {
	st          *agentState
	opts        *agentOptions
	allowRemote bool
}

func (s *agentServer) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", s.metrics)
	mux.HandleFunc("/debug/pprof/leaks", s.pprof)
	mux.HandleFunc("/report", s.report)
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, "leakscope agent\n\n/metrics                Prometheus text format\n/debug/pprof/leaks      every target's leaks as a pprof profile (?pid=N: one)\n/report?pid=N           one target's HTML report\n")
	})
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !s.allowRemote && !loopbackRequest(req) {
			http.Error(w, "leakscope agent answers loopback clients only (--listen-allow-remote)", http.StatusForbidden)
			return
		}
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			http.Error(w, "read-only: GET or HEAD", http.StatusMethodNotAllowed)
			return
		}
		mux.ServeHTTP(w, req)
	})
}

// ranked is one target ranked, with its labels, copied out of the state
// under its lock and ranked outside it.
type ranked struct {
	pid                  int
	comm, cgroup, rtName string
	folded               uint64
	exited               time.Time
	r                    *analyze.Result
}

// rankTargets ranks every target, or only pid when not 0 (ok false when
// it is not traced).
func (s *agentServer) rankTargets(pid int) (out []ranked, ok bool) {
	type copied struct {
		ranked
		c *analyze.Capture
	}
	var cs []copied
	s.st.mu.Lock()
	for _, t := range s.st.targets {
		if pid != 0 && t.pid != pid {
			continue
		}
		cs = append(cs, copied{ranked{pid: t.pid, comm: t.comm, cgroup: t.cgroup, rtName: t.runtime(), folded: t.folded, exited: t.exited}, t.capture()})
	}
	s.st.mu.Unlock()
	slices.SortFunc(cs, func(a, b copied) int { return a.pid - b.pid })
	for _, c := range cs {
		c.r = analyze.Rank(c.c, s.opts.rankOptions(0))
		out = append(out, c.ranked)
	}
	return out, pid == 0 || len(out) > 0
}

func (s *agentServer) metrics(w http.ResponseWriter, req *http.Request) {
	rs, _ := s.rankTargets(0)
	targets := make([]report.PromTarget, len(rs))
	for i, r := range rs {
		targets[i] = report.PromTarget{Pid: r.pid, Comm: r.comm, Runtime: r.rtName, Cgroup: r.cgroup, Result: r.r, Folded: r.folded, Exited: r.exited}
	}
	var buf bytes.Buffer
	if err := report.Prometheus(&buf, targets, s.opts.Top, s.healthSamples()); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write(buf.Bytes())
}

func (s *agentServer) healthSamples() []report.PromSample {
	s.st.mu.Lock()
	h := s.st.health
	n := s.st.liveLocked()
	exited := len(s.st.targets) - n
	points := s.st.historyPointsLocked()
	s.st.mu.Unlock()
	out := []report.PromSample{
		{Name: "leakscope_agent_targets", Help: "Processes traced now.", Value: float64(n)},
		{Name: "leakscope_agent_targets_exited", Help: "Targets that exited whose last numbers are still served (--keep-exited).", Value: float64(exited)},
		{Name: "leakscope_agent_attaches_total", Help: "Processes attached to since the agent started.", Counter: true, Value: float64(h.attaches)},
		{Name: "leakscope_agent_attach_failures_total", Help: "Matching processes the agent could not attach to (see its log).", Counter: true, Value: float64(h.attachFailures)},
		{Name: "leakscope_agent_detaches_total", Help: "Targets detached from, at their exit.", Counter: true, Value: float64(h.detaches)},
		{Name: "leakscope_agent_targets_skipped_total", Help: "Matching processes left untraced because --max-targets were traced.", Counter: true, Value: float64(h.skipped)},
		{Name: "leakscope_agent_scans_total", Help: "Reads of /proc for new processes.", Counter: true, Value: float64(h.scans)},
		{Name: "leakscope_agent_process_events_total", Help: "Process events (exec, fork, rename, exit) read from the kernel's proc connector.", Counter: true, Value: float64(h.events)},
		{Name: "leakscope_agent_process_events_lost_total", Help: "Times the kernel dropped process events (a full socket buffer); the /proc scan finds those processes.", Counter: true, Value: float64(h.eventsLost)},
		{Name: "leakscope_agent_snapshot_errors_total", Help: "Snapshots of a target that failed.", Counter: true, Value: float64(h.snapshotErrors)},
		{Name: "leakscope_agent_snapshot_seconds", Help: "Time the last round of snapshots of every target took.", Value: h.lastCycle.Seconds()},
		{Name: "leakscope_agent_history_bytes", Help: "Snapshot history held over all targets (bounded by --max-history).", Value: float64(points * pointBytes)},
		{Name: "leakscope_agent_history_thinned_total", Help: "Times the oldest history of a target was halved to stay within --max-history.", Counter: true, Value: float64(h.historyThinned)},
		{Name: "leakscope_agent_uptime_seconds", Help: "Time since the agent started.", Value: time.Since(s.st.started).Seconds()},
	}
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/total:bytes"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() == metrics.KindUint64 {
		out = append(out, report.PromSample{Name: "leakscope_agent_heap_bytes", Help: "The agent's live Go heap.", Value: float64(sample[0].Value.Uint64())})
	}
	if sample[1].Value.Kind() == metrics.KindUint64 {
		out = append(out, report.PromSample{Name: "leakscope_agent_go_memory_bytes", Help: "Memory the agent's Go runtime holds from the system.", Value: float64(sample[1].Value.Uint64())})
	}
	if rss, ok := selfRSS(); ok {
		out = append(out, report.PromSample{Name: "leakscope_agent_rss_bytes", Help: "The agent's resident set size.", Value: float64(rss)})
	}
	return out
}

// selfRSS reads the agent's resident set from /proc/self/statm.
func selfRSS() (uint64, bool) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, false
	}
	pages, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0, false
	}
	return pages * uint64(os.Getpagesize()), true
}

// queryPid reads ?pid=N: 0 when absent, ok false when malformed.
func queryPid(req *http.Request) (int, bool) {
	v := req.URL.Query().Get("pid")
	if v == "" {
		return 0, true
	}
	n, err := strconv.Atoi(v)
	return n, err == nil && n > 0
}

// pprof writes the leaks of every target (or ?pid=) as one profile,
// each sample labelled with its target's pid and comm besides the labels
// report.Pprof gives (kind, culprit, class).
func (s *agentServer) pprof(w http.ResponseWriter, req *http.Request) {
	pid, ok := queryPid(req)
	if !ok {
		http.Error(w, "pid: want a process id", http.StatusBadRequest)
		return
	}
	rs, ok := s.rankTargets(pid)
	if !ok {
		http.Error(w, fmt.Sprintf("pid %d is not traced", pid), http.StatusNotFound)
		return
	}
	var ps []*profile.Profile
	for _, r := range rs {
		p, err := pprofOf(r.r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		for _, smp := range p.Sample {
			l := make(map[string][]string, len(smp.Label)+2)
			for k, v := range smp.Label {
				l[k] = v
			}
			l["pid"] = []string{strconv.Itoa(r.pid)}
			l["comm"] = []string{r.comm}
			smp.Label = l
		}
		ps = append(ps, p)
	}
	if len(ps) == 0 { // no target: an empty profile of the same types
		p, err := pprofOf(analyze.Rank(&analyze.Capture{}, s.opts.rankOptions(0)))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		ps = append(ps, p)
	}
	merged, err := profile.Merge(ps)
	if err != nil {
		http.Error(w, "merge profiles: "+err.Error(), http.StatusInternalServerError)
		return
	}
	var buf bytes.Buffer
	if err := merged.Write(&buf); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="leaks.pb.gz"`)
	_, _ = w.Write(buf.Bytes())
}

func pprofOf(r *analyze.Result) (*profile.Profile, error) {
	var buf bytes.Buffer
	if err := report.Pprof(&buf, r); err != nil {
		return nil, err
	}
	return profile.Parse(&buf)
}

// report writes one target's HTML report (?pid=N).
func (s *agentServer) report(w http.ResponseWriter, req *http.Request) {
	pid, ok := queryPid(req)
	if !ok || pid == 0 {
		http.Error(w, "pid: want the process id of a target, /report?pid=N", http.StatusBadRequest)
		return
	}
	rs, ok := s.rankTargets(pid)
	if !ok {
		http.Error(w, fmt.Sprintf("pid %d is not traced", pid), http.StatusNotFound)
		return
	}
	var buf bytes.Buffer
	if err := report.HTML(&buf, rs[0].r); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(buf.Bytes())
}
