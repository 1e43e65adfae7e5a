package probe

import (
	"fmt"
	"sort"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/leakscope/leakscope/analyze"
)

// sitePoint is one merged site's totals at one read.
type sitePoint struct {
	analyze.SitePoint
	kind  analyze.Kind
	stack resolvedStack
}

// readSitesLocked reads the kernel's per-site totals, resolving new stacks,
// and merges kernel sites that are the same site after validation.
func (t *Tracer) readSitesLocked() ([]sitePoint, error) {
	merged := map[uint64]*sitePoint{}
	var order []uint64
	t.preExec = preExec{}
	err := forEach(t.objs.Sites, func(key *leakSiteKey, val *leakSiteStats) {
		if key.Pad != t.execGen {
			// A site of an image the target exec'd away from: its heap
			// is gone, so is what it held. Counted for the warning.
			t.preExec.count += val.LiveCount
			t.preExec.bytes += val.LiveBytes
			return
		}
		rs := t.resolveLocked(key.StackId)
		kind := t.kind(key.Kind)
		id := siteID(kind, rs.key)
		p, ok := merged[id]
		if !ok {
			p = &sitePoint{SitePoint: analyze.SitePoint{ID: id}, kind: kind, stack: rs}
			merged[id] = p
			order = append(order, id)
		}
		p.LiveCount += val.LiveCount
		p.LiveBytes += val.LiveBytes
		p.Allocs += val.Allocs
		p.Frees += val.Frees
	})
	if err != nil {
		return nil, fmt.Errorf("read site table: %w", err)
	}
	sort.Slice(order, func(i, j int) bool { return order[i] < order[j] })
	out := make([]sitePoint, 0, len(order))
	for _, id := range order {
		out = append(out, *merged[id])
	}
	return out, nil
}

func (t *Tracer) resolveLocked(stackID uint64) resolvedStack {
	if stackID == 0 {
		return lostStack
	}
	if rs, ok := t.sym.byID[stackID]; ok && !t.sym.stale(rs) {
		return rs
	}
	var raw leakStack
	if err := t.objs.Stacks.Lookup(stackID, &raw); err != nil {
		return t.sym.resolve(0, nil)
	}
	return t.sym.resolve(stackID, &raw)
}

// Stop detaches every probe, reads the final state and returns the capture.
// The probes go first, so the tables read afterwards are consistent.
func (t *Tracer) Stop() (*analyze.Capture, error) {
	// The capture ends now: detaching takes seconds on a loaded machine,
	// and a final point taken after it would add that much flat time to
	// every trend (a growing leak could read as a plateau).
	end := time.Now()
	nowMono := monotonicNow()
	t.detach()
	t.misses.Close()
	t.wg.Wait()
	defer t.objs.Close()

	t.mu.Lock()
	defer t.mu.Unlock()
	defer t.closeRuntimeLocked()
	t.refreshLocked()
	t.retryNamesLocked(true) // a JVM still alive names its newest code
	points, err := t.readSitesLocked()
	if err != nil {
		return nil, err
	}
	t.snapshots = append(t.snapshots, snapshotOf(points, end.Sub(t.started)))

	c := &analyze.Capture{
		Target:    t.target(),
		StartedAt: t.started,
		Duration:  end.Sub(t.started),
		Snapshots: t.snapshots,
		Objects:   t.view.objects(t.allocDisplay()),
		Probes:    t.probeSet(),
	}
	byStack := map[uint64]int{}
	for i, p := range points {
		c.Sites = append(c.Sites, analyze.Site{
			ID:        p.ID,
			Kind:      p.kind,
			Stack:     p.stack.stack,
			LiveCount: p.LiveCount,
			LiveBytes: p.LiveBytes,
			Allocs:    p.Allocs,
			Frees:     p.Frees,
		})
		byStack[p.ID] = i
	}
	if err := t.readLiveLocked(c, byStack, nowMono); err != nil {
		return nil, err
	}
	if t.opts.SampleBytes > 0 {
		scaleSampled(c, t.opts.SampleBytes)
	}
	if err := t.readLostLocked(&c.Lost); err != nil {
		return nil, err
	}
	t.warnLossesLocked(c.Lost)
	if t.execGen > 0 {
		t.warnOnce(fmt.Sprintf("the target exec'd during the capture (%d time(s)): %d allocations (%s) its earlier image(s) still held went with the exec and are not reported as leaks",
			t.execGen, t.preExec.count, analyze.FormatBytes(t.preExec.bytes)))
	}
	t.untracedPairs()
	c.Warnings = append(c.Warnings, t.warnings...)
	return c, nil
}

func snapshotOf(points []sitePoint, at time.Duration) analyze.Snapshot {
	s := analyze.Snapshot{At: at}
	for _, p := range points {
		s.Sites = append(s.Sites, p.SitePoint)
	}
	return s
}

// readLiveLocked lists every live allocation with its age, in batches.
func (t *Tracer) readLiveLocked(c *analyze.Capture, index map[uint64]int, nowMono uint64) error {
	add := func(key *leakHandleKey, info *leakAllocInfo) {
		if key.Pad&1 == 0 && key.Pad>>1 != t.execGen {
			return // made by an image the target exec'd away from
		}
		rs := t.resolveLocked(info.StackId)
		id := siteID(t.kind(info.Kind), rs.key)
		i, ok := index[id]
		if !ok {
			return
		}
		age := time.Duration(0)
		if nowMono > info.TsNs {
			age = time.Duration(nowMono - info.TsNs)
		}
		c.Sites[i].Live = append(c.Sites[i].Live, analyze.Alloc{Size: info.SizeBytes, Age: age})
	}
	if err := forEach(t.objs.Allocs, add); err != nil {
		return fmt.Errorf("read live allocations: %w", err)
	}
	return nil
}

// statMax is the number of counters in the stats map (enum stat_index).
const statMax = int(leakStatIndexSTAT_MAX)

func (t *Tracer) readLostLocked(l *analyze.Lost) error {
	var s [statMax]uint64
	for i := range s {
		var perCPU []uint64
		if err := t.objs.Stats.Lookup(uint32(i), &perCPU); err != nil {
			return fmt.Errorf("read stats: %w", err)
		}
		for _, v := range perCPU {
			s[i] += v
		}
	}
	l.AllocationsDropped = s[leakStatIndexSTAT_ALLOCS_DROPPED]
	l.UnknownFrees = s[leakStatIndexSTAT_UNKNOWN_FREES]
	l.StackErrors = s[leakStatIndexSTAT_STACK_ERRORS]
	l.FreesMissed = s[leakStatIndexSTAT_FREES_MISSED]
	l.PendingDropped = s[leakStatIndexSTAT_PENDING_DROPPED]
	return nil
}

// warnLossesLocked names, for each non-zero loss, the table that was full
// and the flag that sizes it: the counts alone do not say what to change.
// The kernel counts a full live-allocation table and a full per-site table
// as one statistic; sites are never deleted, so the site table was the
// cause only if it is full now.
func (t *Tracer) warnLossesLocked(l analyze.Lost) {
	if l.AllocationsDropped > 0 {
		if n, err := countEntries(t.objs.Sites); err == nil && n >= int(t.opts.MaxSites) {
			t.warnOnce(fmt.Sprintf("%d allocations were not tracked: the per-site table (%d entries) or the live-allocation table (%d) was full; raise --max-sites or --max-allocations",
				l.AllocationsDropped, t.opts.MaxSites, t.opts.MaxAllocations))
		} else {
			t.warnOnce(fmt.Sprintf("%d allocations were not tracked: the live-allocation table (%d entries) was full; raise --max-allocations",
				l.AllocationsDropped, t.opts.MaxAllocations))
		}
	}
	if l.StackErrors > 0 {
		t.warnOnce(fmt.Sprintf("%d allocations have no stack: the stack table (%d entries) was full; raise --max-stacks",
			l.StackErrors, t.opts.MaxStacks))
	}
	if l.PendingDropped > 0 {
		t.warnOnce(fmt.Sprintf("%d calls were not tracked: the kernel could not store their per-thread state", l.PendingDropped))
	}
}

// countEntries counts the keys of a hash map.
func countEntries(m *ebpf.Map) (int, error) {
	key := make([]byte, m.KeySize())
	val := make([]byte, m.ValueSize())
	n := 0
	it := m.Iterate()
	for it.Next(key, val) {
		n++
	}
	return n, it.Err()
}

// monotonicNow is CLOCK_MONOTONIC in ns, the clock of bpf_ktime_get_ns.
func monotonicNow() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}

// preExec totals what sites of earlier program images held (see execGen).
type preExec struct{ count, bytes uint64 }

// checkExecLocked notices the target exec'ing into a new image: the old
// image's mappings and symbols no longer apply, and a launched command is
// stopped again until the new image's tables are in (stop_until_ranges).
func (t *Tracer) checkExecLocked() {
	var gen uint32
	if err := t.objs.ExecGen.Get(&gen); err != nil || gen == t.execGen {
		return
	}
	t.execGen = gen
	t.view.newImage()
}
