//go:build linux && amd64

package probe

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/testutil"
)

// A launch script runs its programs one after another: each process that
// ends gives its BPF collection, emptied, to a later one instead of the
// later one loading its own (a load is ~0.5 s of CPU). A process traced
// with a reused collection is counted exactly as one traced with a fresh
// one: nothing of the earlier process is left in the tables. Six leaky
// runs from Debian's sh, each leaking 100 blocks of 4096 B and 25 of 48 B
// (examples/c/leaky.c).
func TestFollowReusesCollections(t *testing.T) {
	testutil.RequireBPF(t)
	leaky := buildExample(t, "leaky", true)
	const runs = 6
	script := strings.Repeat(leaky+" > /dev/null; ", runs) + "true"
	tr, proc, stderr := startLaunch(t, Options{Follow: true}, "sh", "-c", script)
	c := stopLaunched(t, tr, proc, stderr, "sh")
	checkNoLoss(t, c)

	tr.tree.mu.Lock()
	loaded, reused := tr.tree.loaded, tr.tree.reused
	var reusedPids []int
	for _, p := range tr.tree.procs {
		if p.reused {
			reusedPids = append(reusedPids, p.t.pid)
		}
	}
	tr.tree.mu.Unlock()
	t.Logf("collections: %d loaded, %d reused (pids %v)", loaded, reused, reusedPids)
	if reused == 0 || len(reusedPids) != reused {
		t.Fatalf("%d collections reused (%d processes traced with one), want at least one of %d runs", reused, len(reusedPids), runs)
	}

	type blocks struct{ count, bytes uint64 }
	want := map[string]blocks{"leak_request_buffer": {100, 409600}, "leak_small_tag": {25, 1200}}
	got := map[int]map[string]blocks{}
	for _, s := range c.Sites {
		if s.LiveCount == 0 || len(s.Stack.Frames) == 0 {
			continue
		}
		for name := range want {
			if s.Stack.Frames[0].Function == name {
				if got[s.Pid] == nil {
					got[s.Pid] = map[string]blocks{}
				}
				b := got[s.Pid][name]
				got[s.Pid][name] = blocks{b.count + s.LiveCount, b.bytes + s.LiveBytes}
			}
		}
	}
	n := 0
	for _, p := range c.Processes {
		if len(p.Command) == 0 || p.Command[0] != leaky {
			continue
		}
		n++
		for name, w := range want {
			if g := got[p.Pid][name]; g != w {
				t.Errorf("leaky pid %d: %s holds %+v, want %+v", p.Pid, name, g, w)
			}
		}
	}
	if n != runs {
		t.Errorf("%d leaky processes listed, want %d: %+v", n, runs, c.Processes)
	}
	for _, pid := range reusedPids {
		if len(got[pid]) != len(want) {
			t.Errorf("pid %d, traced with a reused collection, holds %v", pid, got[pid])
		}
	}
}

// A process that ends between two of the root's snapshots shows, in the
// capture built at the end (merge) as in the one written as it happens
// (lastSnapshot at each snapshot), its point from before its end until
// the first snapshot after it, and its final point from then on: never
// its final point in a snapshot taken before it ended. Two processes:
// one ends before the root's snapshot at 2 s finds it ended, one after.
func TestEndedProcessPointsFollowTheRootsSnapshots(t *testing.T) {
	sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	point := func(at float64, id, live uint64) analyze.Snapshot {
		return analyze.Snapshot{At: sec(at), Sites: []analyze.SitePoint{{ID: id, LiveCount: live}}}
	}
	ended := func(pid int, snaps ...analyze.Snapshot) *followed {
		fp := &followed{t: &Tracer{pid: pid}, ended: make(chan struct{})}
		fp.final = &analyze.Capture{Target: analyze.Target{Pid: pid}, Snapshots: snaps}
		fp.ending = true
		close(fp.ended)
		return fp
	}
	f := &follower{}
	// pid 2: read at the root's 1 s snapshot (1.01 s), ended at 1.5 s.
	early := ended(2, point(1.01, 20, 1), point(1.5, 20, 5))
	f.procs = []*followed{early}
	f.stampEnded(sec(2)) // the root's 2 s snapshot
	// pid 3: read at the 2 s snapshot (2.01 s), ended at 2.5 s, after
	// that snapshot's stamping and before its capture was written.
	late := ended(3, point(2.01, 30, 1), point(2.5, 30, 7))
	f.procs = append(f.procs, late)
	var streamed analyze.Snapshot
	f.lastSnapshot(&treeSites{}, &streamed)

	c := &analyze.Capture{Snapshots: []analyze.Snapshot{{At: sec(1)}, {At: sec(2)}, {At: sec(3)}}}
	f.merge(c)
	want := [][]analyze.SitePoint{
		{{ID: 20, LiveCount: 1}},
		{{ID: 20, LiveCount: 5}, {ID: 30, LiveCount: 1}},
		{{ID: 20, LiveCount: 5}, {ID: 30, LiveCount: 7}},
	}
	for i, w := range want {
		if !slices.Equal(c.Snapshots[i].Sites, w) {
			t.Errorf("merged snapshot at %v: %+v, want %+v", c.Snapshots[i].At, c.Snapshots[i].Sites, w)
		}
	}
	if !slices.Equal(streamed.Sites, want[1]) {
		t.Errorf("written at the 2 s snapshot: %+v, want %+v", streamed.Sites, want[1])
	}
	if at := late.final.Snapshots[1].At; at != sec(3) {
		t.Errorf("pid 3's final point dated %v, want the root's last snapshot, 3s", at)
	}
}
