package main

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/leakscope/leakscope/analyze"
)

// agentTarget is what the agent keeps of one traced process: the sites it
// was told of (at most budget, the rest folded into one "other" site per
// kind) and their snapshots in windows of decreasing resolution. It holds
// no tracer, so the HTTP side and its tests need none.
type agentTarget struct {
	pid    int
	comm   string // as the process named itself: sanitized where shown
	cgroup string
	// header is the tracer's capture header (target, start, objects,
	// probes, sampling), refreshed at every snapshot.
	header  *analyze.Capture
	index   map[uint64]int32 // tracer site ID → sites
	sites   []analyze.Site   // definitions only; totals come from last
	other   map[analyze.Kind]int32
	folded  uint64 // sites counted into an "other" site
	budget  int
	windows *analyze.Windows
	last    analyze.Snapshot
	lost    analyze.Lost
	// exited is when the process exited and was detached from; zero
	// while it is traced. An exited target keeps its last numbers for
	// --keep-exited.
	exited time.Time
}

// otherSiteID is the first ID of the "other" sites, above any the tracer
// gives (it numbers sites from 1).
const otherSiteID = 1 << 62

// otherFrame is the one frame of an "other" site: its culprit.
var otherFrame = &analyze.Frame{Function: "other"}

func newAgentTarget(pid int, comm, cgroup string, budget int, tiers []analyze.Tier) *agentTarget {
	return &agentTarget{
		pid: pid, comm: comm, cgroup: cgroup, budget: budget,
		index:   map[uint64]int32{},
		other:   map[analyze.Kind]int32{},
		windows: analyze.NewWindows(tiers),
	}
}

// add takes a snapshot: the sites no earlier call was given, and every
// site's totals. A site past the budget is counted into its kind's
// "other" site. Under sampling (header.SampleBytes) the tracer's points
// of malloc sites are estimates already (probe scales each sampled kernel
// site as it reads it; the exact budget's are exact), taken as they are.
func (a *agentTarget) add(news analyze.SiteList, snap analyze.Snapshot) {
	for i := range news.Len() {
		id := news.ID(i)
		if _, ok := a.index[id]; ok {
			continue
		}
		if len(a.sites)-len(a.other) < a.budget {
			s := news.Site(i)
			a.index[id] = int32(len(a.sites))
			a.sites = append(a.sites, analyze.Site{ID: id, Kind: s.Kind, Stack: s.Stack})
			continue
		}
		kind := news.Site(i).Kind
		j, ok := a.other[kind]
		if !ok {
			j = int32(len(a.sites))
			a.other[kind] = j
			a.sites = append(a.sites, analyze.Site{ID: otherSiteID + uint64(len(a.other)), Kind: kind,
				Stack: analyze.Stack{Frames: []*analyze.Frame{otherFrame}}})
		}
		a.index[id] = j
		a.folded++
	}
	byIdx := make(map[int32]int, len(snap.Sites))
	points := make([]analyze.SitePoint, 0, len(snap.Sites))
	for _, p := range snap.Sites {
		j, ok := a.index[p.ID]
		if !ok {
			continue // defined in a snapshot the agent missed: never happens
		}
		s := &a.sites[j]
		p.ID = s.ID
		if k, ok := byIdx[j]; ok {
			q := &points[k]
			q.LiveCount += p.LiveCount
			q.LiveBytes += p.LiveBytes
			q.Allocs += p.Allocs
			q.Frees += p.Frees
			continue
		}
		byIdx[j] = len(points)
		points = append(points, p)
	}
	slices.SortFunc(points, func(x, y analyze.SitePoint) int { return cmp.Compare(x.ID, y.ID) })
	a.last = analyze.Snapshot{At: snap.At, Sites: points}
	a.windows.Add(a.last)
}

// capture is the target's capture as the windows hold it, for ranking:
// every site with its newest totals, every snapshot held.
func (a *agentTarget) capture() *analyze.Capture {
	c := &analyze.Capture{}
	if a.header != nil {
		h := a.header
		c.Target, c.StartedAt, c.Objects, c.Probes, c.SampleBytes, c.ExactBudget = h.Target, h.StartedAt, h.Objects, h.Probes, h.SampleBytes, h.ExactBudget
		c.Warnings = h.Warnings
	}
	c.Target.Pid = a.pid
	c.Duration = a.last.At
	c.Lost = a.lost
	c.Sites = slices.Clone(a.sites)
	pos := make(map[uint64]int, len(c.Sites))
	for i := range c.Sites {
		pos[c.Sites[i].ID] = i
	}
	for _, p := range a.last.Sites {
		s := &c.Sites[pos[p.ID]]
		s.LiveCount, s.LiveBytes, s.Allocs, s.Frees = p.LiveCount, p.LiveBytes, p.Allocs, p.Frees
	}
	c.Snapshots = a.windows.Snapshots()
	return c
}

// runtime names the target's runtime for labels.
func (a *agentTarget) runtime() string {
	if a.header != nil && a.header.Target.Runtime != "" {
		return string(a.header.Target.Runtime)
	}
	return string(analyze.RuntimeNative)
}

// agentState is what the agent's loop writes and its HTTP handlers read.
type agentState struct {
	mu      sync.Mutex
	targets map[int]*agentTarget
	health  agentHealth
	started time.Time
}

// agentHealth are the agent's own counters (/metrics).
type agentHealth struct {
	scans, attaches, attachFailures, detaches, skipped uint64
	snapshotErrors, historyThinned                     uint64
	events, eventsLost                                 uint64        // process events handled; overflows of their socket
	lastCycle                                          time.Duration // the last snapshot round, all targets
}

func newAgentState() *agentState {
	return &agentState{targets: map[int]*agentTarget{}, started: time.Now()}
}

// keepExitedLocked forgets the oldest exited targets beyond max, so a
// burst of short-lived processes cannot grow the state.
func (st *agentState) keepExitedLocked(max int) {
	var exited []*agentTarget
	for _, t := range st.targets {
		if !t.exited.IsZero() {
			exited = append(exited, t)
		}
	}
	if len(exited) <= max {
		return
	}
	slices.SortFunc(exited, func(a, b *agentTarget) int { return a.exited.Compare(b.exited) })
	for _, t := range exited[:len(exited)-max] {
		delete(st.targets, t.pid)
	}
}

// liveLocked is the number of targets traced now (not exited).
func (st *agentState) liveLocked() int {
	n := 0
	for _, t := range st.targets {
		if t.exited.IsZero() {
			n++
		}
	}
	return n
}

// historyPoints is the site points held over all targets.
func (st *agentState) historyPointsLocked() int {
	n := 0
	for _, t := range st.targets {
		n += t.windows.Points()
	}
	return n
}

// pointBytes is what one site point of history costs (analyze.SitePoint).
const pointBytes = 40

// trimHistoryLocked thins the history of the target that holds the most
// until all of it fits in limit bytes.
func (st *agentState) trimHistoryLocked(limit int64) {
	for int64(st.historyPointsLocked())*pointBytes > limit {
		var big *agentTarget
		for _, t := range st.targets {
			if big == nil || t.windows.Points() > big.windows.Points() {
				big = t
			}
		}
		if big == nil || !big.windows.Coarsen() {
			return
		}
		st.health.historyThinned++
	}
}
