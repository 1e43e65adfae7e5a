//go:build linux && amd64

package probe

import (
	"cmp"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/probe/kernel"
	"github.com/leakscope/leakscope/probe/stacks"
	"github.com/leakscope/leakscope/probe/target"
)

// readPoints are the merged sites' totals at one read, by ascending ID:
// the slots the read set (their index in siteTable.slots: kind and stack)
// and the table's totals, until the next read. A list of points copied
// out was 4.8 MB live at 100k sites.
type readPoints struct {
	acc   []analyze.SitePoint // by slot
	slots []int32
}

func (r readPoints) len() int                   { return len(r.slots) }
func (r readPoints) at(i int) analyze.SitePoint { return r.acc[r.slots[i]] }
func (r readPoints) slot(i int) int             { return int(r.slots[i]) }

// siteRef is what a kernel site resolved to: its stack, as last resolved
// (nil: not yet, or its stack could not be read: resolve it again), and
// the merged site it belongs to.
type siteRef struct {
	rs   *stacks.Resolved
	slot int32 // merged site's slot + 1; 0 before the site is first met
	// weight, for a sampled malloc site, is what its totals were scaled
	// by at the last read that found it holding blocks
	// (scaleTotalsLocked); 0 before.
	weight float32
}

// mergedSite is one site as reported: kernel sites whose stacks validate
// to the same frames share one.
type mergedSite struct {
	id    uint64
	kind  analyze.Kind
	stack *stacks.Resolved
}

// siteTable remembers every kernel site seen and the merged site it maps
// to, so that a periodic read resolves and hashes only what is new or
// stale: for 100k sites, hashing every stack key at every read was half
// of a snapshot's time, and most of Stop's for 1M live allocations.
type siteTable struct {
	// refs holds each kernel site by its index in site_slots, which the
	// kernel hands out in order and never reuses, and which every live
	// allocation keeps (alloc_info.site): 100k sites are 1.6 MB here,
	// and were 8 MB as maps by stack id.
	refs []siteRef
	// streams holds the merged slot of each kernel site by its key, when
	// malloc is not traced (then every site is a resource's, and few): an
	// inflate stream's window, counted in user space (addWindowsLocked),
	// comes with its stack id and kind (zlib.inflate or the JNI
	// fallback's).
	streams map[target.SiteKey]int32
	slots   []mergedSite
	// exact holds the kernel sites (by index in site_slots) of the exact
	// budget under sampling (kernel.Site.Exact): their blocks weigh 1.
	exact  bitset
	slotOf map[uint64]int // merged site id to slot
	order  []int          // slots by ascending id
	sorted bool           // order covers every slot
	// Per read: each slot's totals and the read that last set them.
	acc  []analyze.SitePoint
	mark []uint32
	read uint32
	// traced is each slot's live blocks in the kernel's tables at the
	// read (acc's LiveCount is an estimate under sampling): how many
	// Stop lists.
	traced []uint64
	// out is readSitesLocked's result, reused by the next read: 100k
	// points of 48 B were 4.8 MB of garbage at every snapshot.
	out []int32
	// given marks the slots LastSnapshot returned.
	given []bool
}

func newSiteTable() *siteTable {
	return &siteTable{slotOf: map[uint64]int{}, sorted: true}
}

// slotFor returns the slot of merged site id, adding it if new; the site's
// stack is the latest one resolved for it that names as many frames as
// any before.
func (st *siteTable) slotFor(id uint64, kind analyze.Kind, rs *stacks.Resolved) int {
	if i, ok := st.slotOf[id]; ok {
		// Never a stack that names less (one resolved again after a
		// JVM exited, its names gone, joins the site it was).
		if rs.Named() >= st.slots[i].stack.Named() {
			st.slots[i].stack = rs
		}
		return i
	}
	i := len(st.slots)
	st.slots = append(st.slots, mergedSite{id: id, kind: kind, stack: rs})
	st.slotOf[id] = i
	st.acc = append(st.acc, analyze.SitePoint{})
	st.mark = append(st.mark, 0)
	st.traced = append(st.traced, 0)
	st.given = append(st.given, false)
	st.sorted = false
	return i
}

// resolveRefLocked returns the merged site ref stands for, of the
// site with this stack and kind, resolving the stack when ref is new or
// may resolve better now (stacks.Resolver.Stale).
func (t *Tracer) resolveRefLocked(ref *siteRef, stack uint64, kindRaw uint32) int {
	st := t.sites
	if ref.rs != nil && !t.sym.Stale(ref.rs) {
		return int(ref.slot - 1)
	}
	rs, ok := t.resolveLocked(stack)
	kind := t.kind(kindRaw)
	id := siteID(kind, rs.Key()) ^ t.member.idSalt
	if _, merged := st.slotOf[id]; ref.rs != nil && !merged {
		// Resolved better (a JIT frame named since): the site keeps its
		// slot and id, so its earlier points stay in its series, and
		// walks that resolve to the new key join it.
		st.slotOf[id] = int(ref.slot - 1)
	}
	slot := st.slotFor(id, kind, rs)
	ref.slot = int32(slot + 1)
	ref.rs = nil // read again next time
	if ok {
		ref.rs = rs
	}
	return slot
}

// refLocked returns the merged site of kernel site k, at index idx of
// site_slots, resolving its stack when it is new or may resolve better
// now (stacks.Resolver.Stale).
func (t *Tracer) refLocked(idx uint32, k target.SiteKey) int {
	st := t.sites
	if need := int(idx) + 1; need > len(st.refs) {
		n := len(st.refs)
		st.refs = slices.Grow(st.refs, need-n)[:need]
		clear(st.refs[n:])
	}
	slot := t.resolveRefLocked(&st.refs[idx], k.Stack, k.Kind)
	if t.windowsComputed() {
		if st.streams == nil {
			st.streams = map[target.SiteKey]int32{}
		}
		st.streams[k] = int32(slot)
	}
	return slot
}

// readSitesLocked reads the kernel's per-site totals, resolving new stacks,
// and merges kernel sites that are the same site after validation. The
// points come by ascending site id, in a buffer the next read reuses.
func (t *Tracer) readSitesLocked() (readPoints, error) {
	st := t.sites
	st.read++
	if st.read == 0 { // wrapped: forget every mark
		clear(st.mark)
		st.read = 1
	}
	t.execs.held = preExec{}
	n := 0
	err := t.objs.ForEachSite(t.opts.MaxSites, func(idx uint32, key kernel.Site, val kernel.Totals) {
		if key.Gen != t.execs.gen {
			// A site of an image the target exec'd away from: its heap
			// is gone, so is what it held. Counted for the warning; it
			// maps to no site now (Stop's live allocations).
			t.execs.held.count += val.LiveCount
			t.execs.held.bytes += val.LiveBytes
			if int(idx) < len(st.refs) {
				st.refs[idx] = siteRef{}
			}
			return
		}
		slot := t.refLocked(idx, target.SiteKey{Stack: key.Stack, Kind: key.Kind})
		p := &st.acc[slot]
		if st.mark[slot] != st.read {
			st.mark[slot] = st.read
			*p = analyze.SitePoint{ID: st.slots[slot].id}
			st.traced[slot] = 0
			n++
		}
		st.traced[slot] += val.LiveCount
		if key.Exact {
			st.exact.set(idx)
		} else if t.opts.SampleBytes > 0 && key.Kind == kernel.KindMalloc {
			val = t.scaleTotalsLocked(&st.refs[idx], val)
		}
		p.LiveCount += val.LiveCount
		p.LiveBytes += val.LiveBytes
		p.Allocs += val.Allocs
		p.Frees += val.Frees
	})
	if err != nil {
		return readPoints{}, fmt.Errorf("read site table: %w", err)
	}
	if t.windowsComputed() {
		if err := t.addWindowsLocked(); err != nil {
			return readPoints{}, err
		}
	}
	n += t.addMapsLocked()
	if !st.sorted {
		st.order = st.order[:0]
		for i := range st.slots {
			st.order = append(st.order, i)
		}
		slices.SortFunc(st.order, func(a, b int) int { return cmp.Compare(st.slots[a].id, st.slots[b].id) })
		st.sorted = true
	}
	out := st.out[:0]
	if cap(out) < n {
		out = make([]int32, 0, n)
	}
	for _, slot := range st.order {
		if st.mark[slot] != st.read {
			continue
		}
		out = append(out, int32(slot))
	}
	st.out = out
	return readPoints{acc: st.acc, slots: out}, nil
}

// resolveLocked returns the resolved stack of a kernel stack id; ok is
// false when the stack could not be read, so it is tried again next time.
func (t *Tracer) resolveLocked(stackID uint64) (rs *stacks.Resolved, ok bool) {
	if stackID == 0 {
		return stacks.Lost(), true
	}
	ips, flags, err := t.objs.Stack(stackID)
	if err != nil {
		return stacks.Lost(), false
	}
	t.rawEntries = decodeStack(ips, t.rawEntries[:0])
	return t.sym.Resolve(&stacks.Raw{Entries: t.rawEntries, Flags: stackFlags(flags)}), true
}

// Stop detaches every probe, reads the final state and returns the capture.
// The probes go first, so the tables read afterwards are consistent. Its
// phases run in this order: endProbes (nothing new is recorded, every
// record sent is handled), finalReadLocked (the last snapshot, with the
// target's last names), captureLocked (the capture, once the tables that
// built it are released).
func (t *Tracer) Stop() (*analyze.Capture, error) {
	// The capture ends now: detaching takes seconds on a loaded machine,
	// and a final point taken after it would add that much flat time to
	// every trend (a growing leak could read as a plateau).
	end := time.Now()
	nowMono := monotonicNow()
	t.mu.Lock()
	stopped := t.stopped
	t.mu.Unlock()
	if stopped {
		return nil, errStopped
	}
	t.endProbes()
	defer t.releaseObjects()
	if t.mapping.events != nil {
		defer t.mapping.events.Close()
	}

	t.mu.Lock()
	defer t.mu.Unlock()
	defer t.closeRuntimeLocked()
	points, err := t.finalReadLocked(end)
	if err != nil {
		return nil, err
	}
	return t.captureLocked(points, end, nowMono)
}

// bigCapture is the number of sites from which Stop collects the heap
// before it builds the capture.
const bigCapture = 4096

// releaseObjects closes t's BPF collection, or gives it to the tree to
// trace another process (follower.recycle): its links are closed and
// its records read by now.
func (t *Tracer) releaseObjects() {
	if t.tree != nil && !t.isRoot() && t.tree.recycle(t) {
		return
	}
	t.objs.Close()
}

// endProbes ends the tracing: the tree's other processes' captures, then
// t's links, then the reading of the kernel's records, each sent before
// its link closed handled first.
func (t *Tracer) endProbes() {
	if t.isRoot() {
		// A command stopped in exit() is continued first: ending the
		// other processes' captures takes seconds on a loaded machine.
		t.continueExit()
		// The other processes first: each is continued and let go
		// before the command's watchdog is.
		t.tree.stop()
	}
	t.detach()
	// The records the kernel sent before the probes went are read, not
	// dropped: a process it stopped at a fork or exec is continued by
	// its record's handling (the tree is closed: nothing is followed). A
	// program still running on another CPU as its link closed sends its
	// record within microseconds; sweep catches one later still.
	time.Sleep(10 * time.Millisecond)
	_ = t.misses.Flush()
	t.wg.Wait()
	t.misses.Close()
}

// continueExit handles a stop in exit() (exit_call) whose record
// watchMisses has not handled yet, as watchMisses would: the stacks are
// resolved while the process is stopped, then it is continued. Its
// record, read later, finds no stop left and counts the stop as ended
// then (exitContinued).
func (t *Tracer) continueExit() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if stops, err := t.objs.Stops(); err != nil || !stops.Exit {
		return
	}
	t.refreshLocked()
	t.exitingLocked()
	if t.resumeLocked(true) {
		t.exit.continued = monotonicNow()
	}
}

// finalReadLocked continues the target wherever the kernel stopped it,
// lets its watchdog go, and reads the sites a last time, with the names
// of the target's newest code and of the debug files fetched by now.
func (t *Tracer) finalReadLocked(end time.Time) (readPoints, error) {
	// A stop whose record was not read before the reader closed (the
	// command called exit() as the capture ended): resolve its stacks
	// while it is stopped, then continue it.
	if stops, err := t.objs.Stops(); err == nil && stops.Exit {
		t.exitingLocked()
	}
	t.resumeLocked(true)
	t.watchdog.sweep()
	t.watchdog.release() // continued, and no probe is left to stop it
	// Debug files still on their way from debuginfod get a bounded wait:
	// the stacks are named for the last time below.
	t.cache.WaitDebug(DebuginfodWait)
	t.refreshLocked()
	t.retryNamesLocked(true) // a JVM still alive names its newest code
	points, err := t.readSitesLocked()
	if err != nil {
		return readPoints{}, err
	}
	t.appendSnapshotLocked(points, end.Sub(t.started))
	t.warnUnnamedLocked(points)
	if forks, err := t.objs.Forks(); err == nil && forks > 0 {
		if t.opts.Follow {
			t.warnOnce(fmt.Sprintf("pid %d started %d other processes that could not be followed (the kernel's record of them was lost): what they allocated is not in this report", t.pid, forks))
		} else {
			t.warnOnce(fmt.Sprintf("pid %d started %d other processes (fork) during the capture, which were not traced: what they allocated is not in this report; trace the program that leaks itself (leakscope run -- PROG, or attach --pid to it)", t.pid, forks))
		}
	}
	if vmForks, err := t.objs.VMForks(); err == nil && int(vmForks) > len(t.member.vmFollowed) {
		t.warnOnce(fmt.Sprintf("pid %d started %d processes sharing its memory (clone with CLONE_VM) that could not be followed: what they allocated is not traced, and blocks of its they freed still count as live", t.pid, int(vmForks)-len(t.member.vmFollowed)))
	}
	return points, nil
}

// captureLocked builds the capture from the last read's points, the
// series, the live allocations and what was lost, releasing the tables
// that resolved and merged them first.
func (t *Tracer) captureLocked(points readPoints, end time.Time, nowMono uint64) (*analyze.Capture, error) {
	c := &analyze.Capture{
		Target:    t.target(),
		StartedAt: t.started,
		Duration:  end.Sub(t.started),
		Objects:   t.view.Objects(t.allocDisplay()),
		Probes:    t.probeSet(),
	}
	// Each kernel site's index in c.Sites, by its index in site_slots,
	// for the live allocations (each names its kernel site's slot): -1
	// for a site the last read did not list (an earlier image's).
	bySlot := make([]int32, len(t.sites.slots))
	for i := range bySlot {
		bySlot[i] = -1
	}
	for i := range points.len() {
		bySlot[points.slot(i)] = int32(i)
	}
	siteOf := make([]int32, len(t.sites.refs))
	for k, ref := range t.sites.refs {
		siteOf[k] = -1
		if ref.slot > 0 {
			siteOf[k] = bySlot[ref.slot-1]
		}
	}
	mapSiteOf := t.mapSitesOf(bySlot)
	bySlot = nil
	traced := make([]uint64, points.len())
	for i := range traced {
		traced[i] = t.sites.traced[points.slot(i)]
	}
	exact := t.sites.exact
	// The capture is built from the points, the slots (kind and stack)
	// and the series; the tables that resolved and merged them go first
	// (site and stack maps, frame and line tables: ~20 MB at 100k
	// stacks), then one collection, while what was just dropped is most
	// of the heap. Built before that, the capture's 100k sites and their
	// frames (~23 MB) were live together with every table: 78 MB, the
	// peak of a run. After it, the heap goal is set by what the capture
	// needs, and the live allocations, ranking and the report fill the
	// pages the tables held. ~15-30 ms at 100k stacks. A small capture
	// (most of a launch script's processes) is not worth a collection
	// of the whole heap: the tree's other captures and caches are in it.
	slots, slotOf, ser := t.sites.slots, t.sites.slotOf, t.series
	t.releaseLocked()
	if len(slots) >= bigCapture {
		runtime.GC()
	}
	if points.len() > 0 {
		c.Sites = make([]analyze.Site, 0, points.len())
	}
	for i := range points.len() {
		p, m := points.at(i), &slots[points.slot(i)]
		c.Sites = append(c.Sites, analyze.Site{
			ID:        p.ID,
			Kind:      m.kind,
			Stack:     m.stack.Stack(),
			LiveCount: p.LiveCount,
			LiveBytes: p.LiveBytes,
			Allocs:    p.Allocs,
			Frees:     p.Frees,
		})
		m.stack = nil // its frame indices go at the next collection
	}
	earlier := earlierSites(ser, slotOf, slots, points)
	points, slots, slotOf = readPoints{}, nil, nil
	c.Snapshots = ser.snapshots() // whole, once the tables are gone
	c.Memory = t.mem.all
	ser = series{}
	if err := t.readLiveLocked(c, siteOf, traced, exact, nowMono); err != nil {
		return nil, err
	}
	t.mapLiveLocked(c, mapSiteOf, nowMono)
	c.Sites = append(c.Sites, earlier...)
	if t.opts.SampleBytes > 0 {
		scaleSampled(c, t.opts.SampleBytes)
		budget, err := t.exactBudgetLocked()
		if err != nil {
			return nil, err
		}
		c.ExactBudget = budget
	}
	preempted, err := t.readLostLocked(&c.Lost)
	if err != nil {
		return nil, err
	}
	t.warnLossesLocked(c.Lost, preempted)
	t.warnMapLossLocked()
	if t.windowsComputed() {
		t.warnWindowsLocked()
	}
	// A followed child's execs are the tree's to say (treeWarnings).
	if t.execs.gen > 0 && t.execs.held.count > 0 && (t.tree == nil || t.isRoot()) {
		t.warnOnce(fmt.Sprintf("the target exec'd during the capture (%d time(s)): %d allocations (%s) its earlier image(s) still held went with the exec and are not reported as leaks",
			t.execs.gen, t.execs.held.count, analyze.FormatBytes(t.execs.held.bytes)))
	}
	t.untracedPairs()
	c.Warnings = append(c.Warnings, t.warnings...)
	if t.tree != nil {
		if !t.isRoot() {
			c.Target.ExitCode = t.exitCodeLocked() // the command's is exec.Cmd's
		}
		c.Target.ExitedAfter = t.exitedAfterLocked()
	}
	if t.isRoot() {
		t.tree.merge(c)
	}
	return c, nil
}

// earlierSites returns the sites the series' snapshots have points of
// that the last read (points) does not list, by ascending ID, with no
// totals: those of a program image the target exec'd away from. The
// capture lists them, so every point of its snapshots names a site of
// it, as in the capture written as it happened (analyze.ReadCapture
// keeps exactly these).
func earlierSites(ser series, slotOf map[uint64]int, slots []mergedSite, points readPoints) []analyze.Site {
	listed := make([]bool, len(slots))
	for i := range points.len() {
		listed[points.slot(i)] = true
	}
	var earlier []int
	for _, sn := range ser.snaps {
		for _, p := range sn.set {
			if slot := slotOf[p.ID]; !listed[slot] {
				listed[slot] = true
				earlier = append(earlier, slot)
			}
		}
	}
	if len(earlier) == 0 {
		return nil
	}
	slices.SortFunc(earlier, func(a, b int) int { return cmp.Compare(slots[a].id, slots[b].id) })
	out := make([]analyze.Site, 0, len(earlier))
	for _, slot := range earlier {
		m := &slots[slot]
		s := analyze.Site{ID: m.id, Kind: m.kind}
		if m.stack != nil {
			s.Stack = m.stack.Stack()
		}
		out = append(out, s)
	}
	return out
}

// appendSnapshotLocked adds the points of a read to the series.
func (t *Tracer) appendSnapshotLocked(points readPoints, at time.Duration) {
	t.series.add(points, at)
}

// releaseLocked drops, once Stop read the sites, what only resolving and
// reading more needed: the site table, the resolver's frame table index
// and caches and the series (the capture holds what it needs). At
// 100k stacks these are ~25 MB, live until the process exits otherwise,
// while the capture is ranked and written. A second Stop fails before
// using them (the maps are closed).
//
// The objects' symbol and line tables go too (libc's from libc6-dbg are
// 5.5 MB; a large C++ program's are hundreds): the cache is closed, and
// so no Snapshot or Stop may follow (stopped).
func (t *Tracer) releaseLocked() {
	t.stopped = true
	t.sym.Release()
	t.sites = newSiteTable()
	t.series = series{}
	t.view.Release()
	t.alloc.Obj = nil // attaching only
	if !t.member.sharedCache {
		t.cache.Close()
	}
}

// readLiveLocked lists every live allocation with its age, in batches,
// and a sampled malloc block's weight: 1 for a block of the exact budget
// (its kernel site is in exact), the inverse of its chance to be traced
// otherwise. traced is how many blocks each of c.Sites has in the
// kernel's tables. siteOf maps a kernel site (its index in site_slots)
// to its index in c.Sites, or -1: the sites of Stop's last read, which every live
// allocation's site is in (the kernel makes the site first); one it lacks
// is skipped, as a site that read did not list was. A block counted in a
// resource's bytes has no site (NO_SITE) and is skipped: the resource's
// size holds it.
func (t *Tracer) readLiveLocked(c *analyze.Capture, siteOf []int32, traced []uint64, exact bitset, nowMono uint64) error {
	// One backing array for every site's allocations, each site's part
	// sized from its live count: no slice grows 1M times.
	var total uint64
	for _, n := range traced {
		total += n
	}
	backing := make([]analyze.Alloc, 0, min(total, uint64(t.opts.MaxAllocations)))
	sampled := t.opts.SampleBytes > 0
	var weights []float64
	if sampled {
		weights = make([]float64, 0, cap(backing))
	}
	for i := range c.Sites {
		n := int(min(traced[i], uint64(cap(backing)-len(backing))))
		c.Sites[i].Live = backing[len(backing) : len(backing) : len(backing)+n]
		if sampled && c.Sites[i].Kind == analyze.KindMalloc {
			c.Sites[i].LiveWeights = weights[len(backing) : len(backing) : len(backing)+n]
		}
		backing = backing[:len(backing)+n]
	}
	add := func(key kernel.Handle, info kernel.Alloc) {
		if !key.Orphan && key.Gen != t.execs.gen {
			return // made by an image the target exec'd away from
		}
		if int(info.Site) >= len(siteOf) || siteOf[info.Site] < 0 {
			return
		}
		i := siteOf[info.Site]
		age := time.Duration(0)
		if nowMono > info.At {
			age = time.Duration(nowMono - info.At)
		}
		s := &c.Sites[i]
		size := info.Size
		if len(t.windows.reads.bytes) > 0 && !key.Orphan && key.Gen == t.execs.gen {
			size += t.windows.reads.bytes[windowKey{key.Addr, key.Kind}]
		}
		s.Live = append(s.Live, analyze.Alloc{Size: size, Age: age})
		if sampled && s.Kind == analyze.KindMalloc {
			w := analyze.SampleWeight(size, t.opts.SampleBytes)
			if exact.has(info.Site) {
				w = 1
			}
			s.LiveWeights = append(s.LiveWeights, w)
		}
	}
	if err := t.objs.ForEachAlloc(add); err != nil {
		return fmt.Errorf("read live allocations: %w", err)
	}
	for i := range c.Sites {
		if len(c.Sites[i].Live) == 0 {
			c.Sites[i].Live, c.Sites[i].LiveWeights = nil, nil
		}
	}
	return nil
}

// Lost reads the kernel's loss counters now, while tracing: what Stop's
// capture will say so far (an agent exposes them as they grow).
func (t *Tracer) Lost() (analyze.Lost, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var l analyze.Lost
	if t.stopped {
		return l, errStopped
	}
	_, err := t.readLostLocked(&l)
	return l, err
}

// readLostLocked reads the kernel's loss counters into l. It also returns
// how many of l.StackErrors are walks that found the scratch held
// (STAT_WALKS_PREEMPTED), for the warning.
func (t *Tracer) readLostLocked(l *analyze.Lost) (preempted uint64, err error) {
	s := map[kernel.Stat]uint64{}
	for _, i := range []kernel.Stat{kernel.StatAllocsDropped, kernel.StatUnknownFrees, kernel.StatStackErrors,
		kernel.StatWalksPreempted, kernel.StatFreesMissed, kernel.StatPendingDropped} {
		if s[i], err = t.objs.Stat(i); err != nil {
			return 0, err
		}
	}
	l.AllocationsDropped = s[kernel.StatAllocsDropped]
	l.UnknownFrees = s[kernel.StatUnknownFrees]
	l.StackErrors = s[kernel.StatStackErrors] + s[kernel.StatWalksPreempted]
	l.FreesMissed = s[kernel.StatFreesMissed]
	l.PendingDropped = s[kernel.StatPendingDropped]
	return s[kernel.StatWalksPreempted], nil
}

// warnLossesLocked names, for each non-zero loss, the table that was full
// and the flag that sizes it: the counts alone do not say what to change.
// The kernel counts a full live-allocation table and a full per-site table
// as one statistic; sites are never deleted, so the site table was the
// cause only if it is full now.
func (t *Tracer) warnLossesLocked(l analyze.Lost, preempted uint64) {
	if l.AllocationsDropped > 0 {
		if n, err := t.objs.SiteCount(); err == nil && n >= uint64(t.opts.MaxSites) {
			t.warnOnce(fmt.Sprintf("%d allocations were not tracked: the per-site table (%d entries) or the live-allocation table (%d) was full; raise --max-sites or --max-allocations",
				l.AllocationsDropped, t.opts.MaxSites, t.opts.MaxAllocations))
		} else {
			t.warnOnce(fmt.Sprintf("%d allocations were not tracked: the live-allocation table (%d entries) was full; raise --max-allocations",
				l.AllocationsDropped, t.opts.MaxAllocations))
		}
	}
	if full := l.StackErrors - preempted; full > 0 {
		t.warnOnce(fmt.Sprintf("%d allocations have no stack: the stack table (%d entries) was full; raise --max-stacks",
			full, t.opts.MaxStacks))
	}
	if preempted > 0 {
		t.warnOnce(fmt.Sprintf("%d allocations have no stack: the kernel preempted a stack walk, and another walk on the same CPU found its scratch in use (a fully preemptible kernel, preempt=full)", preempted))
	}
	if l.PendingDropped > 0 {
		t.warnOnce(fmt.Sprintf("%d calls were not tracked: the kernel could not store their per-thread state", l.PendingDropped))
	}
	if n, err := t.objs.Stat(kernel.StatStopsUnsent); err == nil && n > 0 {
		t.warnOnce(fmt.Sprintf("%d of leakscope's stops of pid %d (at an exec, a library load, a new child) were not made: its record had no room, or the kernel refused the signal; the process ran on before its new objects were probed, and calls made meanwhile may be missing", n, t.pid))
	}
}

// monotonicNow is CLOCK_MONOTONIC in ns, the clock of bpf_ktime_get_ns.
func monotonicNow() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}

// preExec totals what sites of earlier program images held (see execGen).
type preExec struct{ count, bytes uint64 }

// exitState is what a Tracer knows of its process's exit hook.
type exitState struct {
	// hooked: target_exit is attached.
	hooked bool
	// noHook: the kernel's sched_process_exit comes after the target's
	// memory is gone (before Linux 6.13): windows of a target that
	// exits are not counted.
	noHook bool
	// continued is when Stop continued a stop in exit() before its
	// record was handled (continueExit), monotonic ns; 0 if it did not.
	continued uint64
}

// checkExecLocked notices the target exec'ing into a new image: the old
// image's mappings and symbols no longer apply, and a launched command is
// stopped again until the new image's tables are in (stop_until_ranges).
func (t *Tracer) checkExecLocked() {
	gen, err := t.objs.ExecGen()
	if err != nil || gen == t.execs.gen {
		return
	}
	t.execs.gen = gen
	t.view.Exec()
}

// warnUnnamedLocked says, per object, how many frames of the capture's
// sites have no function name because the object has no symbols and its
// debug file was not found or fetched, and why. A process of a followed
// tree keeps it in unnamed instead: a launch script's 40 shells would
// say it 40 times.
func (t *Tracer) warnUnnamedLocked(points readPoints) {
	count := map[string]int{}
	seen := map[*analyze.Frame]bool{}
	for i := range points.len() {
		rs := t.sites.slots[points.slot(i)].stack
		if rs == nil {
			continue
		}
		for f := range rs.Frames() {
			if f.Function != "" || !strings.HasPrefix(f.Module, "/") || seen[f] {
				continue
			}
			seen[f] = true
			count[f.Module]++
		}
	}
	modules := make([]string, 0, len(count))
	for m := range count {
		modules = append(modules, m)
	}
	slices.Sort(modules)
	var us []unnamedFrames
	for _, m := range modules {
		obj, ok := t.view.Loaded(m)
		if !ok {
			continue
		}
		info := obj.Debuginfo()
		if !info.Missing {
			continue
		}
		why := "its debug file was not fetched"
		switch {
		case info.Pending:
			why = fmt.Sprintf("its debug file was still being fetched from debuginfod after %s", DebuginfodWait)
		case info.Err != nil:
			why = info.Err.Error()
		}
		us = append(us, unnamedFrames{module: m, buildID: obj.BuildID, why: why, frames: count[m]})
	}
	if t.tree != nil {
		t.unnamed = us // the tree says it once for all its processes (follower.merge)
		return
	}
	objects := make([]unnamedObject, len(us))
	for i, u := range us {
		objects[i] = unnamedObject{u: u}
	}
	for _, w := range unnamedWarnings(objects, t.pid) {
		t.warnOnce(w)
	}
}

// unnamedObject is an object's unnamed frames in the processes pids of a
// tree (nil: the one traced), summed.
type unnamedObject struct {
	u    unnamedFrames
	pids []int
}

// unnamedListed is how many objects a warning for several names.
const unnamedListed = 5

// unnamedWarnings says which frames of objects are unnamed and why, one
// warning per cause: an object whose cause is its own gets a warning of
// its own (with its build id; a process of a tree alone, not root, is
// named first), and the objects that share one (a distribution's stripped
// programs and libraries, debuginfod not configured) one for all of them,
// naming those with the most frames. objects are in the order warnings
// come in.
func unnamedWarnings(objects []unnamedObject, root int) []string {
	var causes []string
	byCause := map[string][]unnamedObject{}
	for _, o := range objects {
		if byCause[o.u.why] == nil {
			causes = append(causes, o.u.why)
		}
		byCause[o.u.why] = append(byCause[o.u.why], o)
	}
	var out []string
	for _, why := range causes {
		group := byCause[why]
		if len(group) == 1 {
			o := group[0]
			w := o.u.warning(o.pids)
			if len(o.pids) == 1 && o.pids[0] != root {
				w = fmt.Sprintf("pid %d: %s", o.pids[0], w)
			}
			out = append(out, w)
			continue
		}
		slices.SortStableFunc(group, func(a, b unnamedObject) int { return cmp.Compare(b.u.frames, a.u.frames) })
		var b strings.Builder
		fmt.Fprintf(&b, "frames in %d objects are unnamed: none has symbols or a debug file in /usr/lib/debug; %s: ", len(group), why)
		rest := 0
		for i, o := range group {
			if i >= unnamedListed {
				rest += o.u.frames
				continue
			}
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%d in %s", o.u.frames, o.u.module)
			switch {
			case len(o.pids) > 1:
				fmt.Fprintf(&b, " (%d processes: %s)", len(o.pids), pidList(o.pids))
			case len(o.pids) == 1 && o.pids[0] != root:
				fmt.Fprintf(&b, " (pid %d)", o.pids[0])
			}
		}
		if n := len(group) - unnamedListed; n > 0 {
			fmt.Fprintf(&b, ", and %d frame(s) in %d more objects", rest, n)
		}
		out = append(out, b.String())
	}
	return out
}

// unnamedFrames is how many frames of a process's capture an object left
// without a function name, and why.
type unnamedFrames struct {
	module, buildID, why string
	frames               int
}

// warning says that u's frames are unnamed, in the processes pids of a
// tree (none: the one traced).
func (u unnamedFrames) warning(pids []int) string {
	in := ""
	if len(pids) > 1 {
		in = fmt.Sprintf(" in %d processes (%s)", len(pids), pidList(pids))
	}
	return fmt.Sprintf("%d frame(s) in %s are unnamed%s: it has no symbols (build id %s) and no debug file in /usr/lib/debug; %s",
		u.frames, u.module, in, u.buildID, u.why)
}

// pidList names the first pids and counts the rest.
func pidList(pids []int) string {
	const shown = 3
	var b strings.Builder
	b.WriteString("pids ")
	for i, p := range pids[:min(len(pids), shown)] {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(p))
	}
	if n := len(pids) - shown; n > 0 {
		fmt.Fprintf(&b, " and %d more", n)
	}
	return b.String()
}
