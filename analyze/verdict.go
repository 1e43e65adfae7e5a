package analyze

import (
	"fmt"
	"math"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Class is what the facts of a capture say a leak row is. It is decided
// by the order of the program's allocation events, not by how long they
// took: a capture replayed with every interval stretched or shrunk gets
// the same classes (TestVerdictReplayStretched).
type Class string

// Classes, in the order of how strongly they point at a leak.
const (
	// ClassLeak: live memory grew with the process's allocations to the
	// end of the capture, and the site either never freed or freed more
	// blocks since its oldest live one than it still holds (blocks left
	// behind while the site kept allocating and freeing).
	ClassLeak Class = "leak"
	// ClassGrowing: live memory grew to the end, but the site frees and
	// its survivors are not older than its own turnover: a backlog, a
	// growing cache, or a slow leak of a site that mostly frees.
	ClassGrowing Class = "growing"
	// ClassPool: the stack runs through a pool allocator (Options.Pools):
	// the row is the pool taking memory, charged to the code that asked
	// when the pool was full, not to the code holding the pooled buffers.
	ClassPool Class = "pool"
	// ClassHeld: memory is held, but the capture has no fact to tell
	// growth from a fill (fewer than MinTrendPoints snapshots and a site
	// that frees, or no per-allocation ages), or saw it rise in one step
	// only (Verdict.Step).
	ClassHeld Class = "held"
	// ClassPlateau: live memory stopped growing for at least half of the
	// process's allocations since the site began growing (or never grew):
	// filled once, then held: a cache or pool, or a leak that happened once.
	ClassPlateau Class = "plateau"
	// ClassRuntime: a mapping or thread row made by a language runtime's
	// own memory manager (runtimeOwner): the Go runtime's heap arenas and
	// off-heap structures and its threads, the JVM's heap, metaspace and
	// code cache reservations and its own threads. Not the program's
	// leak: the memory breakdown names what they hold. CI rules never
	// match it.
	ClassRuntime Class = "runtime"
)

// DefaultPools matches the frames of the pool allocators leakscope knows:
// Netty's PoolArena and PoolChunk (PooledByteBufAllocator's chunks).
var DefaultPools = regexp.MustCompile(`^io\.netty\.buffer\.(PoolArena|PoolChunk)\b`)

// Verdict is a leak row's class and the facts that decided it and its
// confidence, each stated in Evidence.
type Verdict struct {
	Class Class
	// Label is the class as a report shows it: "leak", "growing",
	// "pool growth", "pool (filled)", "held", "plateau".
	Label string
	// Evidence holds one sentence per fact that decided Class and
	// Confidence, in the order they were weighed.
	Evidence []string
	// Events is the process's allocations counted during the capture
	// (every traced site's acquisitions), the clock the facts below use.
	Events uint64
	// EventsSinceOldest is how many of Events came after the site's
	// oldest live block (a lower bound, to the snapshot); 0 when unknown.
	EventsSinceOldest uint64
	// SiteAllocsSinceOldest and SiteFreesSinceOldest are the site's own
	// allocations and frees since its oldest live block (lower bounds, to
	// the snapshot); SinceKnown says whether they are known.
	SiteAllocsSinceOldest, SiteFreesSinceOldest uint64
	SinceKnown                                  bool
	// FlatShare, in [0, 1], is the share of the site's growing life (in
	// process allocations since it began growing) spent without a new
	// high: 0 for growth to the end, 1 for a fill long before the end.
	// Growth is true when the facts say live memory grew to the end.
	FlatShare float64
	Growth    bool
	// FlatInTime is true when FlatShare had to be measured in time: no
	// process allocation was traced after the site's last new high.
	FlatInTime bool
	// Step is true when the site would read as growing but the capture
	// saw it rise in one step only: no snapshot fell between its first
	// and last live block (one block, or one burst), or, for a site that
	// frees, its live bytes rose in one interval. One rise cannot tell
	// growth from a fill, so the row is ClassHeld.
	Step bool
	// Pool is the pool allocator frame of a ClassPool row; Requester the
	// code that asked the pool for memory (the row's culprit).
	Pool, Requester string
}

// tier orders classes in a ranking: leak, growing, pool growth, then the
// rest (held, plateau, a filled pool) by the memory they hold.
func (v Verdict) tier() int {
	switch v.Class {
	case ClassLeak:
		return 0
	case ClassGrowing:
		return 1
	case ClassPool:
		if v.Label == "pool growth" {
			return 2
		}
	case ClassRuntime:
		return tierNoGrowth + 1
	}
	// held, plateau, a filled pool: no fact says growth; the memory they
	// hold orders them, so that one small block the capture knows too
	// little about never outranks a large burst that stopped.
	return tierNoGrowth
}

// tierNoGrowth is the tier of the rows no fact says grow.
const tierNoGrowth = 3

// clock is the process's allocation count at each snapshot: the time base
// of the verdict. A capture's per-site counters are cumulative, so the sum
// over a process's sites is its allocations traced so far.
type clock struct {
	at  []time.Duration // snapshots in time order
	ev  []uint64        // allocations by then, non-decreasing
	end uint64          // at the end of the capture
	d   time.Duration   // the capture's: a block's time is d − its age
	// until is when the process stopped allocating: its exit, when it
	// exited during the capture, else d.
	until time.Duration
	// inTime is true when the snapshots carry no allocation counters:
	// ev and end are then nanoseconds.
	inTime bool
}

// clocks are the clocks of a capture's processes: one for a capture of
// one process; one each for a followed tree, where a launch script's
// shells, a test runner and the program under test each have a life and
// an allocation count of their own, and measuring a shell's blocks
// against the allocations of the processes started after it exited would
// call every block it held at its exit a plateau, and the last process's
// a leak.
type clocks struct {
	all   *clock
	byPid map[int]*clock // nil for one process
}

// of is the clock of s's process.
func (cs clocks) of(s *Site) *clock {
	if k, ok := cs.byPid[s.Pid]; ok {
		return k
	}
	return cs.all
}

// newClocks makes c's clocks: every traced process's own when c follows
// several (Capture.Processes) and its snapshots carry counters.
func newClocks(c *Capture) clocks {
	order := make([]int, len(c.Snapshots))
	for j := range order {
		order[j] = j
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmpDuration(c.Snapshots[a].At, c.Snapshots[b].At) })
	cs := clocks{all: newClock(c, order)}
	if len(c.Processes) == 0 || cs.all.inTime {
		return cs
	}
	// Each process's clock from one pass over the snapshots: its sites'
	// allocations summed at each.
	slot := make(map[int]int) // pid → index in ks
	var ks []*clock
	clockOf := make(map[uint64]int, len(c.Sites)) // site ID → index in ks
	for i := range c.Sites {
		s := &c.Sites[i]
		j, ok := slot[s.Pid]
		if !ok {
			j = len(ks)
			slot[s.Pid] = j
			k := &clock{d: c.Duration, until: c.Duration, at: cs.all.at, ev: make([]uint64, len(order))}
			if p := c.Process(s.Pid); p != nil && p.ExitedAfter > 0 && p.ExitedAfter < k.d {
				k.until = p.ExitedAfter
			}
			ks = append(ks, k)
		}
		clockOf[s.ID] = j
		ks[j].end += s.Allocs
	}
	sums := make([]uint64, len(ks))
	for col, j := range order {
		clear(sums)
		for _, p := range c.Snapshots[j].Sites {
			if i, ok := clockOf[p.ID]; ok {
				sums[i] += p.Allocs
			}
		}
		for i, k := range ks {
			k.ev[col] = sums[i]
			if col > 0 {
				k.ev[col] = max(k.ev[col], k.ev[col-1])
			}
		}
	}
	cs.byPid = make(map[int]*clock, len(ks))
	for pid, i := range slot {
		k := ks[i]
		if n := len(k.ev); n > 0 {
			k.end = max(k.end, k.ev[n-1])
		}
		cs.byPid[pid] = k
	}
	return cs
}

// newClock is the clock of every process of c together, its snapshots
// taken in order.
func newClock(c *Capture, order []int) *clock {
	k := &clock{d: c.Duration, until: c.Duration}
	var last uint64
	for _, j := range order {
		s := &c.Snapshots[j]
		var n uint64
		for _, p := range s.Sites {
			n += p.Allocs
		}
		last = max(last, n)
		k.at = append(k.at, s.At)
		k.ev = append(k.ev, last)
	}
	for i := range c.Sites {
		k.end += c.Sites[i].Allocs
	}
	k.end = max(k.end, last)
	if last == 0 && len(k.at) > 0 {
		// Snapshots without allocation counters (a hand-made capture):
		// time is the only clock.
		k.inTime = true
		for j, at := range k.at {
			k.ev[j] = uint64(max(0, at))
		}
		k.end = uint64(max(k.d, k.at[len(k.at)-1], 0))
	}
	return k
}

func cmpDuration(a, b time.Duration) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// before is the allocation count at the last snapshot at or before t
// (0 when none): the allocations since t are at most end − before(t).
func (k *clock) before(t time.Duration) uint64 {
	i := k.snapshotsBy(t)
	if i == 0 {
		return 0
	}
	return k.ev[i-1]
}

// after is the allocation count at the first snapshot at or after t (end
// when none): the allocations since t are at least end − after(t).
func (k *clock) after(t time.Duration) uint64 {
	i, _ := slices.BinarySearchFunc(k.at, t, func(a, t time.Duration) int {
		if a < t {
			return -1
		}
		return 1
	})
	if i == len(k.at) {
		return k.end
	}
	return k.ev[i]
}

// ageShare is the share of the process's allocations made since l's
// oldest live block, in [0, 1]; ok is false when l has no ages or the
// process allocated nothing traced.
func (k *clock) ageShare(l Leak) (share float64, ok bool) {
	if !l.AgeKnown || k.end == 0 || len(k.at) == 0 {
		return 0, false
	}
	return float64(k.end-k.before(k.d-l.OldestAge)) / float64(k.end), true
}

// profile is the growth of a site that never freed, read from its live
// blocks' ages: every block it made is still live, so their allocation
// times are its growth. ok is false for a site that frees, allocated
// nothing during the capture, or has no ages.
type profile struct {
	flat   float64 // FlatShare
	inTime bool    // measured in time (no allocation after the last block)
	// step: no snapshot fell between the site's first and last live
	// block (one block, or a burst), so the capture saw it rise in one
	// step, which cannot tell growth from a fill.
	step bool
	ok   bool
}

func (k *clock) profile(s *Site) profile {
	if s.Frees != 0 || s.Allocs == 0 || len(s.Live) == 0 || len(k.at) == 0 {
		return profile{} // no event clock without snapshots
	}
	oldest, youngest := s.Live[0].Age, s.Live[0].Age
	for _, a := range s.Live[1:] {
		oldest, youngest = max(oldest, a.Age), min(youngest, a.Age)
	}
	tOld, tYoung := k.d-oldest, k.d-youngest
	p := profile{ok: true, step: k.snapshotsBy(tOld) == k.snapshotsBy(tYoung)}
	life := k.end - k.before(tOld)
	flat := k.end - k.after(tYoung)
	if flat > 0 && life > 0 {
		p.flat = min(1, float64(flat)/float64(life))
		return p
	}
	// No allocation traced after the site's last block (within the
	// snapshot it fell in): only time can say how long it stayed flat,
	// to the process's exit.
	p.inTime = true
	if d := k.until - tOld; d > 0 {
		p.flat = min(1, max(0, float64(k.until-tYoung)/float64(d)))
	}
	return p
}

// snapshotsBy is how many snapshots were taken at or before t.
func (k *clock) snapshotsBy(t time.Duration) int {
	i, _ := slices.BinarySearchFunc(k.at, t, func(a, t time.Duration) int {
		if a <= t {
			return -1
		}
		return 1
	})
	return i
}

// growthWeight is the weight a site's growth gives its rank score: about
// 1 for growth to the end, 0.1 for a fill long before it.
func growthWeight(tau, flat float64) float64 {
	return 0.1 + 0.9*max(0, tau)*(1-flat)
}

// verdict decides l's class and confidence from the capture's facts.
//
// A row whose stack runs through a pool (pools) is ClassPool; its culprit
// becomes the requester: the first frame past the pool's outermost frame
// that culprits does not skip, the code that asked the pool, when there is
// one.
func verdict(l *Leak, c *Capture, k *clock, pools *regexp.Regexp, culprits *Culprits) Verdict {
	s := l.Site
	v := Verdict{}
	if !k.inTime {
		v.Events = k.end
	}
	if l.AgeKnown && !k.inTime {
		v.EventsSinceOldest = k.end - k.after(k.d-l.OldestAge)
	}
	t := l.Trend
	if t != nil && t.sinceKnown {
		v.SinceKnown = true
		v.SiteAllocsSinceOldest = s.Allocs - min(s.Allocs, t.allocsAt)
		v.SiteFreesSinceOldest = s.Frees - min(s.Frees, t.freesAt)
	}
	freed := 0.0
	if s.Allocs > 0 {
		freed = min(1, float64(s.Frees)/float64(s.Allocs))
	}
	known := true
	if p := k.profile(s); p.ok {
		v.FlatShare, v.FlatInTime, v.Growth = p.flat, p.inTime, p.flat < 0.5
		v.Step = p.step && v.Growth
	} else if t != nil {
		v.FlatShare, v.FlatInTime = t.FlatShare, t.FlatInTime
		v.Growth = t.FlatShare < 0.5 && t.Tau > 0
		v.Step = v.Growth && t.Rises < 2
	} else {
		known = false
	}
	if v.Step {
		// One rise is not a trend: a fill looks the same.
		v.Growth, known = false, false
	}
	survivors := s.Frees == 0 || (v.SinceKnown && v.SiteFreesSinceOldest >= l.Count)
	var conf float64
	switch {
	case !known:
		v.Class, conf = ClassHeld, 0.3+0.1*(1-freed)
	case v.Growth && survivors:
		v.Class, conf = ClassLeak, 0.7+0.15*(1-v.FlatShare)+0.15*(1-freed)
	case v.Growth:
		v.Class, conf = ClassGrowing, 0.45+0.2*(1-v.FlatShare)
	default:
		v.Class, conf = ClassPlateau, 0.2+0.1*(1-freed)
	}
	v.Label = string(v.Class)
	v.Evidence = append(v.Evidence, v.facts(l, k, known)...)
	outer := -1 // the pool's outermost frame (callers come after it)
	if pools != nil {
		for i, f := range s.Stack.Frames {
			if pools.MatchString(f.Function) {
				if v.Pool == "" {
					v.Pool = f.Function
				}
				outer = i
			}
		}
	}
	if v.Pool != "" {
		if culprits != nil {
			if f, ok := culprits.FindPast(s, outer); ok {
				l.Culprit = &f
			}
		}
		growing := v.Class == ClassLeak || v.Class == ClassGrowing
		v.Class, v.Label, conf = ClassPool, "pool (filled)", 0.2
		if growing {
			v.Label, conf = "pool growth", 0.3
		}
		if l.Culprit != nil {
			v.Requester = l.Culprit.Function
		}
		v.Evidence = append(v.Evidence, poolEvidence(v.Pool, v.Requester, growing)...)
	}
	if owner, why := runtimeOwner(s); owner != "" {
		v.Class, v.Label, conf = ClassRuntime, "runtime", 0.05
		v.Evidence = append(v.Evidence, why)
	}
	if c.SampleBytes > 0 {
		conf *= 0.9
	}
	l.Confidence = math.Round(max(0, min(1, conf))*100) / 100
	v.Evidence = append(v.Evidence, fmt.Sprintf("confidence %s (%.2f): class %s%s", confidenceLabel(l.Confidence), l.Confidence, v.Label, confidenceWhy(v.Class)))
	return v
}

// confidenceWhy says, after the class, what its confidence range means.
func confidenceWhy(c Class) string {
	switch c {
	case ClassLeak:
		return ", 0.70 plus up to 0.15 for growth to the end and 0.15 for never freeing"
	case ClassGrowing:
		return ", 0.45 plus up to 0.20 for growth to the end"
	case ClassPool:
		return ": this row shows who asked the pool for memory, not who holds it"
	case ClassHeld:
		return ", 0.30 plus up to 0.10 for never freeing: too few facts to tell growth"
	case ClassRuntime:
		return ": the runtime's own memory, not the program's leak"
	}
	return ", 0.20 plus up to 0.10 for never freeing: filled, then held"
}

// facts states, one sentence each, the event facts the class rests on.
func (v *Verdict) facts(l *Leak, k *clock, known bool) []string {
	s := l.Site
	var fs []string
	if v.Events > 0 && l.AgeKnown && len(k.at) > 0 && !k.inTime {
		fs = append(fs, fmt.Sprintf("its oldest live block is older than %s of the process's %s allocations in the capture (%.0f%%)",
			FormatCount(v.EventsSinceOldest), FormatCount(v.Events), 100*float64(v.EventsSinceOldest)/float64(v.Events)))
	}
	if v.SinceKnown && s.Frees > 0 {
		fs = append(fs, fmt.Sprintf("since its oldest live block the site allocated %s times and freed %s, and still holds %s",
			FormatCount(v.SiteAllocsSinceOldest), FormatCount(v.SiteFreesSinceOldest), FormatCount(l.Count)))
	}
	if v.Step {
		return append(fs, stepFact(l, k))
	}
	if !known {
		if len(k.at) == 0 {
			return append(fs, "growth unknown: the capture has no snapshots")
		}
		return append(fs, "growth unknown: fewer than 3 snapshots, and a site that frees cannot be read from its live blocks' ages")
	}
	unit := "of the process's allocations"
	if v.FlatInTime || k.inTime {
		unit = "of its time (no allocation was counted after the snapshot of its last new high, so measured in time)"
	}
	switch {
	case v.Growth && v.FlatShare == 0 && k.until < k.d:
		fs = append(fs, "grew with the process's allocations until it exited")
	case v.Growth && v.FlatShare == 0:
		fs = append(fs, "grew with the process's allocations to the end of the capture")
	case v.Growth && k.until < k.d:
		fs = append(fs, fmt.Sprintf("grew to near its exit: flat for the last %.0f%% %s since it began growing", 100*v.FlatShare, unit))
	case v.Growth:
		fs = append(fs, fmt.Sprintf("grew to near the end: flat for the last %.0f%% %s since it began growing", 100*v.FlatShare, unit))
	case v.FlatShare >= 1 && l.Trend != nil && l.Trend.FlatFor == l.Trend.Span:
		fs = append(fs, "never grew during the capture")
	default:
		fs = append(fs, fmt.Sprintf("flat for the last %.0f%% %s since it began growing: filled, then held (a pool or cache, or a leak that happened once: a longer capture or more rounds of the work tell them apart)", 100*v.FlatShare, unit))
	}
	return fs
}

// stepFact says why a row that rose once is not called growing.
func stepFact(l *Leak, k *clock) string {
	const why = "one rise cannot tell growth from a fill (a longer capture, a shorter --interval or more rounds of the work tell them apart)"
	s := l.Site
	if s.Frees != 0 {
		return "its live memory rose in one interval between snapshots only: " + why
	}
	if n := len(s.Live); n > 1 {
		return fmt.Sprintf("its %s live blocks were all allocated between the same two snapshots: %s", FormatCount(uint64(n)), why)
	}
	return "a single live allocation: " + why
}

// poolEvidence says what a pool row means and what finds the holder.
func poolEvidence(pool, requester string, growing bool) []string {
	who := "the code on this stack"
	if requester != "" {
		who = requester
	}
	what := "the pool grew"
	if !growing {
		what = "the pool filled"
	}
	fs := []string{
		fmt.Sprintf("%s: %s is on the stack, so this memory is a pool's; %s asked when the pool was full, it is not known to hold the pooled buffers", what, pool, who),
		"leakscope cannot see buffers inside a pool, only the pool taking memory; who holds them:",
	}
	if DefaultPools.MatchString(pool) {
		fs = append(fs,
			"- Netty's leak detector, -Dio.netty.leakDetection.level=paranoid, names where each buffer that was never released was allocated (reported once it is garbage-collected)",
			"- an unpooled run, -Dio.netty.allocator.type=unpooled, makes each buffer an allocation of its own, so leakscope ranks the holder, when Netty frees buffers without a Cleaner (-Dio.netty.tryReflectionSetAccessible=true --add-opens java.base/java.nio=ALL-UNNAMED, where the JDK lets it): with a Cleaner the GC frees a dropped buffer's memory, and only the leak detector sees it")
	} else {
		fs = append(fs, "- the pool's own leak detection, or a run with the pool disabled, so that each buffer is an allocation of its own")
	}
	return fs
}

// FormatCount renders n with thousands separators: "1,234,567".
func FormatCount(n uint64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// javaModule is the module of the frames leakscope names as Java methods
// (compiled and interpreted).
const javaModule = "[jit]"

// runtimeOwner says whether a mapping or thread row was made by a
// language runtime's own memory manager, and why: the Go runtime when the
// call that mapped (or cloned) is the runtime's own (its first named
// frame is in package runtime: runtime.sysMmap, runtime.clone; Go code
// calling syscall.Mmap is the program's), the JVM when the first frame
// past the C library is libjvm.so's and, for a thread, no Java frame
// started it (Thread.start is the program's). It returns "" for every
// other row.
func runtimeOwner(s *Site) (owner, why string) {
	if s.Kind != KindMmapAnon && s.Kind != KindMmapFile && s.Kind != KindThread {
		return "", ""
	}
	for _, f := range s.Stack.Frames {
		if f.Function == "" {
			continue
		}
		if strings.HasPrefix(f.Function, "runtime.") && (strings.HasSuffix(f.File, ".go") || strings.HasSuffix(f.File, ".s")) {
			return "Go", fmt.Sprintf("made by the Go runtime itself (%s): its heap arenas, off-heap structures or threads, which the memory breakdown counts as Go heap and Go runtime off-heap; not the program's leak", f.Function)
		}
		break
	}
	for _, f := range s.Stack.Frames {
		base := path.Base(f.Module)
		if cRuntimeModule.MatchString(base) {
			continue
		}
		if !strings.HasPrefix(base, "libjvm.so") {
			return "", ""
		}
		if s.Kind == KindThread {
			for _, g := range s.Stack.Frames {
				if g.Module == javaModule && strings.Contains(g.Function, ".") {
					return "", "" // a Java thread the program started
				}
			}
		}
		name := f.Function
		if name == "" {
			name = "libjvm.so"
		}
		return "JVM", fmt.Sprintf("made by the JVM itself (%s): its Java heap, metaspace, code cache, GC structures or own threads, which the memory breakdown names; not the program's leak", name)
	}
	return "", ""
}

// cRuntimeModule matches the C library objects a mapping or a thread is
// made through (mmap, pthread_create).
var cRuntimeModule = regexp.MustCompile(`^(libc|libpthread|ld-linux.*|ld-musl.*)[.-]`)
