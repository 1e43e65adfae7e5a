//go:build linux && amd64

package probe

import (
	"strings"
	"syscall"
	"testing"
	"time"

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
	select {
	case <-proc.Done():
	case <-time.After(120 * time.Second):
		proc.Signal(syscall.SIGKILL)
		t.Fatal("the script did not end within 120s")
	}
	c, err := tr.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if code := proc.ExitCode(); code != 0 {
		t.Fatalf("sh exited %d: %s", code, stderr)
	}
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
