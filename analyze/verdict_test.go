package analyze

import (
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// simulated is a program's allocation events, in order, and where the
// snapshots fall among them: what a capture records, before time.
type simulated struct {
	sites []Site
	// at[e] is the time of event e; snapshots[j] the event index after
	// which snapshot j is taken.
	snapshots []int
	events    []simEvent
}

type simEvent struct {
	site  int // index in sites
	free  int // -1: an allocation; else the allocation (event index) freed
	bytes uint64
}

// simulate runs a program of five sites, one step at a time:
//   - 0 leak: one 16 KiB block every 8th step, never freed;
//   - 1 cache: 64 blocks of 64 KiB in the first 64 steps, kept;
//   - 2 burst: 100 blocks of 4 KiB at step 400, never freed (a leak that
//     happened once, as in examples/c/leaky.c);
//   - 3 ring: a bounded log of 128 entries of 1 KiB, the oldest freed as
//     each new one comes (a Redis slowlog);
//   - 4 survivor: 64 B blocks, 1 in 20 never freed, the rest freed
//     at once (a leak of a site that mostly frees);
//   - 5 churn: 4 blocks allocated and freed every step.
func simulate(steps int) *simulated {
	s := &simulated{sites: make([]Site, 6)}
	for i := range s.sites {
		s.sites[i] = Site{ID: uint64(i + 1), Kind: KindMalloc, Stack: Stack{Frames: []*Frame{{Function: []string{"leak", "cache", "burst", "ring", "survivor", "churn"}[i]}}}}
	}
	alloc := func(site int, b uint64) int {
		s.events = append(s.events, simEvent{site: site, free: -1, bytes: b})
		return len(s.events) - 1
	}
	free := func(e int) {
		s.events = append(s.events, simEvent{site: s.events[e].site, free: e, bytes: s.events[e].bytes})
	}
	var ring []int
	for step := range steps {
		if step%8 == 0 {
			alloc(0, 16<<10)
		}
		if step < 64 {
			alloc(1, 64<<10)
		}
		if step == 400 {
			for range 100 {
				alloc(2, 4<<10)
			}
		}
		ring = append(ring, alloc(3, 1<<10))
		if len(ring) > 128 {
			free(ring[0])
			ring = ring[1:]
		}
		if e := alloc(4, 64); step%20 != 0 {
			free(e)
		}
		for range 4 {
			free(alloc(5, 256))
		}
		if step%50 == 49 {
			s.snapshots = append(s.snapshots, len(s.events))
		}
	}
	return s
}

// capture turns s into a capture, event e happening at time at(e) (which
// must not decrease), snapshots taken right after their event.
func (s *simulated) capture(at func(e int) time.Duration) *Capture {
	n := len(s.events)
	d := at(n)
	c := &Capture{Duration: d, Sites: slices.Clone(s.sites)}
	freed := make([]bool, n)
	points := make([]SitePoint, len(c.Sites))
	for i := range points {
		points[i].ID = c.Sites[i].ID
	}
	next := 0
	for e, ev := range s.events {
		p := &points[ev.site]
		if ev.free < 0 {
			p.Allocs++
			p.LiveCount++
			p.LiveBytes += ev.bytes
		} else {
			p.Frees++
			p.LiveCount--
			p.LiveBytes -= ev.bytes
			freed[ev.free] = true
		}
		if next < len(s.snapshots) && s.snapshots[next] == e+1 {
			c.Snapshots = append(c.Snapshots, Snapshot{At: at(e + 1), Sites: slices.Clone(points)})
			next++
		}
	}
	for i := range c.Sites {
		st := &c.Sites[i]
		st.Allocs, st.Frees, st.LiveCount, st.LiveBytes = points[i].Allocs, points[i].Frees, points[i].LiveCount, points[i].LiveBytes
	}
	for e, ev := range s.events {
		if ev.free < 0 && !freed[e] {
			st := &c.Sites[ev.site]
			st.Live = append(st.Live, Alloc{Size: ev.bytes, Age: d - at(e)})
		}
	}
	return c
}

type classRow struct {
	site  string
	class Class
}

func classes(r *Result) []classRow {
	var out []classRow
	for _, l := range r.Leaks {
		out = append(out, classRow{l.Site.Stack.Frames[0].Function, l.Verdict.Class})
	}
	return out
}

// TestVerdictClasses: each shape of the simulated program gets the class
// its facts call for.
func TestVerdictClasses(t *testing.T) {
	c := simulate(2000).capture(func(e int) time.Duration { return time.Duration(e) * time.Millisecond })
	r := Rank(c, Options{})
	want := map[string]Class{"leak": ClassLeak, "cache": ClassPlateau, "burst": ClassPlateau, "ring": ClassPlateau, "survivor": ClassLeak}
	for _, l := range r.Leaks {
		name := l.Site.Stack.Frames[0].Function
		if l.Verdict.Class != want[name] {
			t.Errorf("%s: class %s, want %s; evidence %q", name, l.Verdict.Class, want[name], l.Verdict.Evidence)
		}
		t.Logf("rank %d %s: %s %.2f score %.0f: %q", l.Rank, name, l.Verdict.Class, l.Confidence, l.Score, l.Reasons)
	}
	if got := r.Leaks[0].Site.Stack.Frames[0].Function; got != "leak" {
		t.Errorf("rank 1 is %s, want leak", got)
	}
	s := r.Leaks[slices.IndexFunc(r.Leaks, func(l Leak) bool { return l.Site.ID == 5 })]
	if !slices.ContainsFunc(s.Reasons, func(r string) bool { return strings.HasPrefix(r, "since its oldest live block the site allocated ") }) {
		t.Errorf("survivor reasons %q do not state its turnover", s.Reasons)
	}
}

// TestVerdictReplayStretched: the same events with every interval
// stretched or shrunk at random (load that comes and goes: from a tenth to
// ten times the speed), then the whole capture taking 5 times as long,
// give the same classes and the same order.
func TestVerdictReplayStretched(t *testing.T) {
	s := simulate(2000)
	base := classes(Rank(s.capture(func(e int) time.Duration { return time.Duration(e) * time.Millisecond }), Options{}))
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 99))
		at := make([]time.Duration, len(s.events)+1)
		for e := 1; e < len(at); e++ {
			at[e] = at[e-1] + time.Duration(float64(time.Millisecond)*(0.1+9.9*rng.Float64()*rng.Float64()))
		}
		stretch := time.Duration(1 + 4*(seed%2))
		got := classes(Rank(s.capture(func(e int) time.Duration { return stretch * at[e] }), Options{}))
		if !slices.Equal(got, base) {
			t.Errorf("seed %d: classes and order\n got %v\nwant %v", seed, got, base)
		}
	}
}

// A capture whose process stops allocating (idle, or descheduled under
// load) after a leak's last block is measured in time for that stretch,
// and says so.
func TestVerdictIdleProcessInTime(t *testing.T) {
	c := &Capture{Duration: 10 * time.Second}
	st := Site{ID: 1, Kind: KindMalloc, Allocs: 4, LiveCount: 4, LiveBytes: 4 << 20}
	for i := range 4 {
		st.Live = append(st.Live, Alloc{Size: 1 << 20, Age: time.Duration(10-i) * time.Second})
	}
	c.Sites = []Site{st}
	for i := range 11 {
		n := uint64(min(i+1, 4))
		c.Snapshots = append(c.Snapshots, Snapshot{At: time.Duration(i) * time.Second, Sites: []SitePoint{{ID: 1, LiveCount: n, LiveBytes: n << 20, Allocs: n}}})
	}
	l := Rank(c, Options{}).Leaks[0]
	if l.Verdict.Class != ClassPlateau || !l.Verdict.FlatInTime {
		t.Errorf("class %s, in time %v, want a plateau measured in time: %q", l.Verdict.Class, l.Verdict.FlatInTime, l.Verdict.Evidence)
	}
}

// Pool frames make a row "pool growth", never a leak with its requester
// as the holder, and the evidence says how to find the holder.
func TestVerdictPool(t *testing.T) {
	c := simulate(2000).capture(func(e int) time.Duration { return time.Duration(e) * time.Millisecond })
	c.Sites[0].Stack.Frames = append([]*Frame{{Function: "io.netty.buffer.PoolArena$DirectArena.newChunk"}}, c.Sites[0].Stack.Frames...)
	r := Rank(c, Options{})
	i := slices.IndexFunc(r.Leaks, func(l Leak) bool { return l.Site.ID == 1 })
	v := r.Leaks[i].Verdict
	if v.Class != ClassPool || v.Label != "pool growth" || v.Pool != "io.netty.buffer.PoolArena$DirectArena.newChunk" || r.Leaks[i].Confidence >= 0.45 {
		t.Errorf("pool row verdict %+v, confidence %.2f; want pool growth, low", v, r.Leaks[i].Confidence)
	}
	for _, want := range []string{"-Dio.netty.leakDetection.level=paranoid", "-Dio.netty.allocator.type=unpooled", "it is not known to hold the pooled buffers"} {
		if !slices.ContainsFunc(v.Evidence, func(s string) bool { return strings.Contains(s, want) }) {
			t.Errorf("pool evidence %q lacks %q", v.Evidence, want)
		}
	}
}

// A pool row's culprit is the code that asked the pool: the first frame
// past the pool's outermost frame that is the program's own, not a frame
// of the pool or of the allocator around it (as measured with
// examples/java/NettyBookie.java); with --pool-frame, past the pool's
// frames. The evidence names it as the requester, never the holder.
func TestVerdictPoolRequester(t *testing.T) {
	jit := "[jit]"
	for _, tt := range []struct {
		name   string
		frames []string
		pools  *regexp.Regexp
		want   string
	}{
		{"Netty", []string{"jdk.internal.misc.Unsafe.allocateMemory0", "java.nio.ByteBuffer.allocateDirect",
			"io.netty.buffer.PoolArena$DirectArena.allocateDirect", "io.netty.buffer.PoolArena$DirectArena.newChunk",
			"io.netty.buffer.PoolArena.allocateNormal", "io.netty.buffer.PoolArena.allocate",
			"io.netty.buffer.PooledByteBufAllocator.newDirectBuffer", "io.netty.buffer.AbstractByteBufAllocator.directBuffer",
			"NettyBookie.readEntry", "NettyBookie.main"}, nil, "NettyBookie.readEntry"},
		{"--pool-frame", []string{"jdk.internal.misc.Unsafe.allocateMemory", "com.example.Slab.grow", "com.example.SlabPool.take",
			"com.example.SlabPool.acquire", "com.example.Server.handle", "com.example.Server.main"},
			regexp.MustCompile(`^com\.example\.SlabPool\.`), "com.example.Server.handle"},
	} {
		c := simulate(2000).capture(func(e int) time.Duration { return time.Duration(e) * time.Millisecond })
		var fs []*Frame
		for _, f := range tt.frames {
			fs = append(fs, &Frame{Function: f, Module: jit})
		}
		c.Sites[0].Stack.Frames = fs
		r := Rank(c, Options{Pools: tt.pools})
		i := slices.IndexFunc(r.Leaks, func(l Leak) bool { return l.Site.ID == 1 })
		l := r.Leaks[i]
		if l.Verdict.Class != ClassPool || l.Verdict.Requester != tt.want || l.Culprit == nil || l.Culprit.Function != tt.want {
			t.Errorf("%s: class %s, requester %q, culprit %+v; want pool, %s", tt.name, l.Verdict.Class, l.Verdict.Requester, l.Culprit, tt.want)
		}
		if want := tt.want + " asked when the pool was full, it is not known to hold the pooled buffers"; !slices.ContainsFunc(l.Verdict.Evidence, func(s string) bool { return strings.Contains(s, want) }) {
			t.Errorf("%s: evidence %q lacks %q", tt.name, l.Verdict.Evidence, want)
		}
	}
}

// Mappings and threads a runtime made itself are class runtime, ranked
// last and never matched by a rule; the program's own (syscall.Mmap, a
// JNI library's mmap, a thread Java code started) keep their class.
// Frames as measured (Go 1.26, OpenJDK 17).
func TestVerdictRuntime(t *testing.T) {
	libc := "/usr/lib/x86_64-linux-gnu/libc.so.6"
	jvm := "/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so"
	nio := "/usr/lib/jvm/java-17-openjdk-amd64/lib/libnio.so"
	for _, tt := range []struct {
		name   string
		kind   Kind
		frames []Frame
		owner  string
	}{
		{"Go heap arena", KindMmapAnon, []Frame{{Function: "runtime.sysMmap", File: "/usr/lib/go/src/runtime/sys_linux_amd64.s"},
			{Function: "runtime.sysReserveOS", File: "mem_linux.go"}, {Function: "runtime.(*mheap).sysAlloc", File: "malloc.go"}, {Function: "main.fill", File: "main.go"}}, "Go"},
		{"Go thread", KindThread, []Frame{{Function: "runtime.clone", File: "sys_linux_amd64.s"}, {Function: "runtime.newosproc", File: "os_linux.go"}}, "Go"},
		{"syscall.Mmap", KindMmapAnon, []Frame{{Function: "internal/runtime/syscall/linux.Syscall6", File: "asm_linux_amd64.s"},
			{Function: "syscall.Syscall6", File: "syscall_linux.go"}, {Function: "syscall.Mmap", File: "syscall_linux.go"}, {Function: "main.keep", File: "main.go"}}, ""},
		{"C function named runtime.x", KindMmapAnon, []Frame{{Function: "runtime.x", Module: "/bin/c", File: "x.c"}}, ""},
		{"JVM heap", KindMmapAnon, []Frame{{Function: "mmap64", Module: libc}, {Function: "os::pd_reserve_memory", Module: jvm},
			{Function: "Universe::initialize_heap", Module: jvm}}, "JVM"},
		{"JVM GC thread", KindThread, []Frame{{Function: "pthread_create", Module: libc}, {Function: "os::create_thread", Module: jvm}}, "JVM"},
		{"Java thread", KindThread, []Frame{{Function: "pthread_create", Module: libc}, {Function: "os::create_thread", Module: jvm},
			{Function: "JVM_StartThread", Module: jvm}, {Function: "java.lang.Thread.start", Module: "[jit]"}, {Function: "Parker.main", Module: "[jit]"}}, ""},
		{"MappedByteBuffer", KindMmapFile, []Frame{{Function: "mmap64", Module: libc}, {Function: "Java_sun_nio_ch_FileChannelImpl_map0", Module: nio},
			{Function: "sun.nio.ch.FileChannelImpl.map", Module: "[jit]"}}, ""},
		{"malloc in libjvm", KindMalloc, []Frame{{Function: "malloc", Module: libc}, {Function: "os::malloc", Module: jvm}}, ""},
	} {
		c := simulate(2000).capture(func(e int) time.Duration { return time.Duration(e) * time.Millisecond })
		c.Sites[0].Kind = tt.kind
		c.Sites[0].Stack.Frames = nil
		for i := range tt.frames {
			c.Sites[0].Stack.Frames = append(c.Sites[0].Stack.Frames, &tt.frames[i])
		}
		r := Rank(c, Options{})
		i := slices.IndexFunc(r.Leaks, func(l Leak) bool { return l.Site.ID == 1 })
		l := r.Leaks[i]
		rule, err := ParseRule("count>0")
		if err != nil {
			t.Fatal(err)
		}
		if tt.owner == "" {
			if l.Verdict.Class == ClassRuntime || !rule.Match(l) {
				t.Errorf("%s: class %s, rule matches %v; want the program's row", tt.name, l.Verdict.Class, rule.Match(l))
			}
			continue
		}
		if l.Verdict.Class != ClassRuntime || rule.Match(l) || i != len(r.Leaks)-1 {
			t.Errorf("%s: class %s at %d of %d, rule matches %v; want runtime, last, unmatched", tt.name, l.Verdict.Class, i, len(r.Leaks), rule.Match(l))
		}
		if want := "made by the " + tt.owner + " "; !slices.ContainsFunc(l.Verdict.Evidence, func(s string) bool { return strings.Contains(s, want) }) {
			t.Errorf("%s: evidence %q lacks %q", tt.name, l.Verdict.Evidence, want)
		}
	}
}

// treeEvent is one allocation (or, with free, its release at free) of
// site in a followed tree's capture.
type treeEvent struct {
	site       int // index in the sites
	at, freeAt time.Duration
	bytes      uint64
}

// treeCapture makes a capture of d with a snapshot every interval from
// the events of sites (whose Pid says their process), processes listed
// as procs.
func treeCapture(d, interval time.Duration, sites []Site, procs []Target, events []treeEvent) *Capture {
	c := &Capture{Duration: d, Sites: sites, Processes: procs}
	point := func(at time.Duration, i int) SitePoint {
		p := SitePoint{ID: sites[i].ID}
		for _, e := range events {
			if e.site != i || e.at > at {
				continue
			}
			p.Allocs++
			if e.freeAt > 0 && e.freeAt <= at {
				p.Frees++
				continue
			}
			p.LiveCount++
			p.LiveBytes += e.bytes
		}
		return p
	}
	for at := interval; at < d; at += interval {
		s := Snapshot{At: at}
		for i := range sites {
			s.Sites = append(s.Sites, point(at, i))
		}
		c.Snapshots = append(c.Snapshots, s)
	}
	for i := range c.Sites {
		p := point(d, i)
		st := &c.Sites[i]
		st.Allocs, st.Frees, st.LiveCount, st.LiveBytes = p.Allocs, p.Frees, p.LiveCount, p.LiveBytes
		for _, e := range events {
			if e.site == i && e.freeAt == 0 {
				st.Live = append(st.Live, Alloc{Size: e.bytes, Age: d - e.at})
			}
		}
	}
	return c
}

// In a followed tree each process is measured by its own allocations
// and its own life: a launch script's shell that allocated once before it
// exited is not growing, a program's burst of streams between two
// snapshots is held (one rise is not a trend), and a process that leaked
// steadily until it exited is a leak, whatever the processes after it
// allocated. Ranked, the steady leak comes first, then the burst (the
// most memory held), then the shell's block.
func TestVerdictTreeMeasuresEachProcess(t *testing.T) {
	ms := time.Millisecond
	site := func(id uint64, pid int, fn string) Site {
		return Site{ID: id, Kind: KindMalloc, Pid: pid, Stack: Stack{Frames: []*Frame{{Function: fn}}}}
	}
	sites := []Site{
		site(1, 12, "hash_create"),  // a shell near the end: one block
		site(2, 12, "shell_churn"),  // the same shell's work, freed
		site(3, 13, "leak_loop"),    // a test program leaking steadily until it exits
		site(4, 13, "test_churn"),   // its work, freed
		site(5, 0, "inflateInit2_"), // the launched program's burst of streams
		site(6, 0, "program_churn"), // its work, freed
	}
	procs := []Target{
		{Pid: 12, Parent: 10, StartedAfter: 620 * ms, ExitedAfter: 680 * ms},
		{Pid: 13, Parent: 10, StartedAfter: 100 * ms, ExitedAfter: 600 * ms},
	}
	var ev []treeEvent
	ev = append(ev, treeEvent{site: 0, at: 630 * ms, bytes: 8192})
	for at := 625 * ms; at < 680*ms; at += 5 * ms {
		ev = append(ev, treeEvent{site: 1, at: at, freeAt: at + ms, bytes: 64})
	}
	for i := range 50 {
		at := 100*ms + time.Duration(i)*10*ms
		ev = append(ev, treeEvent{site: 2, at: at, bytes: 4096}, treeEvent{site: 3, at: at, freeAt: at + ms, bytes: 64})
	}
	for i := range 100 {
		ev = append(ev, treeEvent{site: 4, at: 910*ms + time.Duration(i)*ms/4, bytes: 37 << 10})
	}
	for at := 700 * ms; at < 938*ms; at += 2 * ms {
		ev = append(ev, treeEvent{site: 5, at: at, freeAt: at + ms, bytes: 128})
	}
	c := treeCapture(1000*ms, 100*ms, sites, procs, ev)
	c.Target.ExitedAfter = 940 * ms
	r := Rank(c, Options{})
	var got []string
	for _, l := range r.Leaks {
		got = append(got, l.Site.Stack.Frames[0].Function)
	}
	if want := []string{"leak_loop", "inflateInit2_", "hash_create"}; !slices.Equal(got, want) {
		t.Errorf("ranked %q, want %q", got, want)
	}
	for _, l := range r.Leaks {
		fn := l.Site.Stack.Frames[0].Function
		v := l.Verdict
		switch fn {
		case "leak_loop":
			// pid 13's own allocations: 50 leaked, 50 freed.
			if v.Class != ClassLeak || v.Step || v.Events != 100 || !slices.Contains(v.Evidence, "grew to near its exit: flat for the last 2% of its time (no allocation was counted after the snapshot of its last new high, so measured in time) since it began growing") {
				t.Errorf("%s: class %s, step %v, events %d, evidence %q; want a leak until its exit over its process's 100 allocations", fn, v.Class, v.Step, v.Events, v.Evidence)
			}
		case "inflateInit2_":
			want := "its 100 live blocks were all allocated between the same two snapshots: one rise cannot tell growth from a fill (a longer capture, a shorter --interval or more rounds of the work tell them apart)"
			if v.Class != ClassHeld || !v.Step || !slices.Contains(v.Evidence, want) {
				t.Errorf("%s: class %s, step %v, evidence %q; want held, one step", fn, v.Class, v.Step, v.Evidence)
			}
		case "hash_create":
			// One block that stayed until its process exited: flat
			// after it for all its time, as a fill is.
			if v.Class != ClassPlateau || v.Step || v.Events != 12 || v.FlatShare != 1 {
				t.Errorf("%s: class %s, step %v, events %d, evidence %q; want a plateau over its process's 12 allocations", fn, v.Class, v.Step, v.Events, v.Evidence)
			}
		}
	}
	// The same order whatever the cut: the first candidates by score are
	// ordered as every row is.
	if top := Rank(c, Options{Top: 2}); len(top.Leaks) != 2 || top.Leaks[0].Site.ID != 3 || top.Leaks[1].Site.ID != 5 {
		t.Errorf("top 2: %v", classes(top))
	}
}
