//go:build linux && amd64

package probe

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/probe/procfs"
)

// follower traces the processes a launched command starts, and theirs:
// one Tracer each (its own BPF collection, pid filter and tables), made
// while the kernel holds the new process stopped. The command's Tracer
// (root) owns it; every Tracer of the tree reports to it.
type follower struct {
	root *Tracer
	opts Options // the command's, which shape every collection's load

	mu      sync.Mutex // guards what follows
	procs   []*followed
	closed  bool // Stop began: nothing new is followed
	skipped int  // processes started that were not traced
	pending int  // adoptions under way
	// waiting are the processes stopped for an adoption under way.
	waiting map[int]bool
	adopts  sync.WaitGroup
	// spares are BPF collections ready for the next processes: one
	// loaded ahead (a load is ~0.5 s of CPU, which the new process would
	// wait stopped) or one a process that ended traced, emptied (Reset);
	// loading: one is on its way.
	spares  []*Tracer
	loading chan struct{}
	// loaded and reused count the collections the tree's processes are
	// traced with: loaded for them, or emptied after another's end.
	loaded, reused int
}

// maxSpares bounds the collections kept ready: each holds its arrays,
// ~25 MiB of kernel memory at the default sizes, while no process uses
// it.
const maxSpares = 4

// resetKeys bounds the hash entries emptied to reuse a collection: a
// process that ended with more live allocations and stacks than this
// takes about as long to empty as a load, whose CPU is the verifier's.
const resetKeys = 1 << 16

// newFollower prepares following with opts (the command's), loading a
// collection ahead; its root is set once the command's Tracer exists.
func newFollower(opts Options) *follower {
	f := &follower{opts: opts.withDefaults()}
	f.mu.Lock()
	f.refillLocked()
	f.mu.Unlock()
	return f
}

// waitSpare waits for the collection loaded ahead, so that the first
// process the command starts waits no load: loaded while the command's
// own was, it is ready about when that one is.
func (f *follower) waitSpare(timeout time.Duration) {
	f.mu.Lock()
	loading := f.loading
	f.mu.Unlock()
	if loading == nil {
		return
	}
	select {
	case <-loading:
	case <-time.After(timeout):
	}
}

// refillLocked loads a spare collection in the background when none is
// ready or on its way.
func (f *follower) refillLocked() {
	if f.closed || len(f.spares) != 0 || f.loading != nil {
		return
	}
	done := make(chan struct{})
	f.loading = done
	opts := f.opts
	go func() {
		defer close(done)
		s := &Tracer{pid: 0, opts: opts}
		if err := s.load(modeChild); err != nil {
			s = nil // the next process loads its own, and says why if it fails
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.loading = nil
		if s == nil {
			return
		}
		if f.closed || len(f.spares) >= maxSpares {
			s.closeSpare()
			return
		}
		f.spares = append(f.spares, s)
	}()
}

// takeSpare returns a spare collection and, if it was the last, starts
// loading the next; nil if none is ready (the caller loads its own, at
// the same time as the next spare). Options that shape the load are the
// tree's throughout.
func (f *follower) takeSpare(opts Options) *Tracer {
	f.mu.Lock()
	defer f.mu.Unlock()
	var s *Tracer
	if n := len(f.spares); n != 0 {
		s, f.spares = f.spares[n-1], f.spares[:n-1]
	}
	f.refillLocked()
	if s != nil && !sameLoad(s.opts, opts) {
		s.closeSpare()
		s = nil
	}
	return s
}

// sameLoad reports whether collections loaded for a and b are alike.
func sameLoad(a, b Options) bool {
	return a.SampleBytes == b.SampleBytes && a.SampleExact == b.SampleExact && a.ProbesOnly == b.ProbesOnly
}

// recycle keeps the collection of t, a process of the tree whose capture
// just ended (Stop: its links are closed, its records read), as a spare
// once emptied, and reports whether it did; the caller closes it
// otherwise. A collection that traced a process sharing its memory with
// another (CLONE_VM) is not kept: the other may live on, and its
// per-thread state in the collection cannot be emptied (counted by the
// kernel: one whose record was lost counts too).
func (f *follower) recycle(t *Tracer) bool {
	t.mu.Lock()
	shared := len(t.member.vmFollowed) != 0
	t.mu.Unlock()
	if n, err := t.objs.VMForks(); err != nil || n != 0 {
		shared = true // the kernel saw one, followed or not
	}
	f.mu.Lock()
	keep := !f.closed && !shared && len(f.spares) < maxSpares && sameLoad(t.opts, f.opts)
	f.mu.Unlock()
	if !keep {
		return false
	}
	if err := t.objs.Reset(resetKeys); err != nil {
		return false
	}
	s := &Tracer{opts: f.opts, objs: t.objs, exit: exitState{noHook: t.exit.noHook}, member: treeMember{emptied: true}}
	var err error
	if s.misses, err = s.objs.OpenMisses(); err != nil {
		return false
	}
	if f.opts.Maps {
		if s.mapping.events, err = s.objs.OpenMapEvents(); err != nil {
			s.misses.Close()
			return false
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed || len(f.spares) >= maxSpares {
		s.misses.Close()
		if s.mapping.events != nil {
			s.mapping.events.Close()
		}
		return false
	}
	f.spares = append(f.spares, s)
	return true
}

// closeSpare releases a spare collection not used.
func (t *Tracer) closeSpare() {
	if t.misses != nil {
		t.misses.Close()
	}
	if t.mapping.events != nil {
		t.mapping.events.Close()
	}
	t.objs.Close()
}

// followed is one process of the tree besides the command.
type followed struct {
	t            *Tracer
	parent       int
	startedAfter time.Duration // since the root's capture began
	// reused: traced with a collection another process of the tree had
	// used (follower.recycle).
	reused bool
	// ending: its capture is being ended (end); guarded by the
	// follower's mu, as are final and stamped.
	ending bool
	// stamped: final's last point is dated for the tree's snapshots
	// (stampEnded): the first snapshot of the root's that found the
	// process ended shows its final point, the ones before it its point
	// before, whenever between two snapshots it ended.
	stamped bool
	// final is its capture once it ended (or the root stopped); until
	// then nil.
	final *analyze.Capture
	// exitCode is its exit status when it was read (a zombie's
	// /proc/PID/stat), nil when not known.
	exitCode *int
	// notes is what its capture left for the tree to say (merge).
	notes treeNotes
	// endOnce ends its capture once, whoever asks first (a snapshot, the
	// tree's end, Stop); ended is closed then.
	endOnce sync.Once
	ended   chan struct{}
}

// adoptAsync follows pid, which parent started and the kernel stopped
// (spawned: it shared parent's memory and has just exec'd). The record's
// reader must not wait: the tracer is made on a goroutine of its own.
func (f *follower) adoptAsync(parent *Tracer, pid int, spawned bool, atNs uint64) {
	f.root.watchdog.follow(pid) // first: continued should leakscope die from here on
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		continueStopped(pid)
		return
	}
	f.adopts.Add(1)
	f.pending++
	if f.waiting == nil {
		f.waiting = map[int]bool{}
	}
	f.waiting[pid] = true
	f.mu.Unlock()
	go func() {
		defer f.adopts.Done()
		f.adopt(parent, pid, spawned, atNs)
		f.mu.Lock()
		f.pending--
		delete(f.waiting, pid)
		f.mu.Unlock()
	}()
}

func (f *follower) adopt(parent *Tracer, pid int, spawned bool, atNs uint64) {
	startedAfter := time.Since(f.root.started)
	if atNs != 0 {
		startedAfter -= time.Duration(monotonicNow() - atNs)
	}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		continueStopped(pid)
		return
	}
	live := 0
	for _, p := range f.procs {
		if p.final == nil {
			live++
		}
	}
	over := live >= parent.opts.MaxProcesses
	if over {
		f.skipped++
	}
	f.mu.Unlock()
	if over {
		f.root.warnf(fmt.Sprintf("more than %d processes at once: pid %d (started by %d) and later ones beyond the limit are not traced (--max-processes)", parent.opts.MaxProcesses, pid, parent.pid))
		continueStopped(pid)
		return
	}
	opts := parent.opts
	prefix := fmt.Sprintf("pid %d: ", pid)
	rootWarn := f.root.opts.Warnf
	opts.Warnf = func(format string, a ...any) {
		if rootWarn != nil {
			rootWarn("%s", prefix+fmt.Sprintf(format, a...))
		}
	}
	parent.mu.Lock()
	alloc := parent.alloc
	parent.mu.Unlock()
	spare := f.takeSpare(opts)
	reused := spare != nil && spare.member.emptied
	t, err := newTracerFrom(pid, alloc, nil, parent.cache, modeChild, opts, spare)
	if err != nil {
		f.mu.Lock()
		f.skipped++
		f.mu.Unlock()
		if !gone(pid) {
			f.root.warnf(fmt.Sprintf("pid %d (started by %d) is not traced: %v", pid, parent.pid, err))
		}
		continueStopped(pid)
		return
	}
	t.tree = f
	t.member.sharedCache = true
	t.member.idSalt = siteSalt(pid)
	t.command, _ = procfs.Command(pid)
	t.started = f.root.started // one clock for the whole tree
	if spawned {
		t.mu.Lock()
		t.followExecLocked()
		t.execs.cmds = nil // its first program, not an exec of one traced before
		t.mu.Unlock()
	}
	p := &followed{t: t, parent: parent.pid, startedAfter: startedAfter, reused: reused, ended: make(chan struct{})}
	f.mu.Lock()
	if reused {
		f.reused++
	} else {
		f.loaded++
	}
	closed := f.closed
	if !closed {
		f.procs = append(f.procs, p)
	}
	f.mu.Unlock()
	t.mu.Lock()
	if atNs != 0 {
		t.stops.Add(time.Duration(monotonicNow() - atNs))
	}
	t.mu.Unlock()
	continueStopped(pid)
	if closed {
		_, _ = t.Stop()
	}
}

// Interrupt says tracing is ending: the processes of the tree waiting
// stopped for leakscope to follow them run on at once, and none is
// followed from now on. Stop still ends the capture; Interrupt may be
// called from any goroutine, while a snapshot or Stop runs (an interrupt
// must not wait for them: ending the captures of processes that exited
// takes seconds on a loaded machine, and a process waiting for its
// adoption would stay stopped meanwhile).
func (t *Tracer) Interrupt() {
	if t.isRoot() {
		t.tree.close()
	}
}

// continueStopped continues a process the kernel stopped for leakscope.
func continueStopped(pid int) {
	_ = unix.Kill(pid, unix.SIGCONT)
}

// treeMember is what a Tracer of a followed tree keeps of its place in
// it (the follower itself is Tracer.tree).
type treeMember struct {
	// sharedCache: the symbol cache is the tree root's, closed by it.
	sharedCache bool
	// idSalt makes a followed process's site IDs its own.
	idSalt uint64
	// vmFollowed are the CLONE_VM children followed: traced with t
	// (sharing its memory) or from their exec.
	vmFollowed map[int]bool
	// emptied: a spare collection (follower) that traced a process
	// before and was Reset.
	emptied bool
}

// siteSalt makes a followed process's site IDs its own: the same stack in
// two processes is two sites.
func siteSalt(pid int) uint64 {
	x := uint64(pid) * 0x9e3779b97f4a7c15
	x ^= x >> 31
	return x | 1<<63
}

// warnf passes a notice about the tree to the user, once.
func (t *Tracer) warnf(msg string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.warnOnce(msg)
}

// snapshot takes a point of every process still traced, at the root's
// snapshot, and ends the capture of those that exited: their last point
// is their state at exit, kept for the rest of the capture.
func (f *follower) snapshot(p *Progress) {
	// read: processes counted from this snapshot of theirs, not again
	// from their capture should it end meanwhile (endExited).
	read := map[*followed]bool{}
	for _, fp := range f.live() {
		if exited(fp.t.pid) {
			f.end(fp, true)
			continue
		}
		if pp, err := fp.t.Snapshot(); err == nil {
			read[fp] = true
			p.LiveCount += pp.LiveCount
			p.LiveBytes += pp.LiveBytes
			p.Sites += pp.Sites
			p.Stops.Count += pp.Stops.Count
			p.Stops.Total += pp.Stops.Total
			p.Stops.Longest = max(p.Stops.Longest, pp.Stops.Longest)
		}
	}
	f.stampEnded(p.Elapsed)
	for _, fp := range f.ended() {
		if read[fp] {
			continue
		}
		for _, s := range fp.final.Sites {
			p.LiveCount += s.LiveCount
			p.LiveBytes += s.LiveBytes
		}
		p.Sites += len(fp.final.Sites)
	}
}

// stampEnded dates the final point of each ended process not dated yet
// at the root's snapshot at: a process that ended between two snapshots
// (endExited) shows its final point from the first snapshot after its
// end, as the capture written as it happens does (lastSnapshot), not in
// the one before. Its state no longer changes once it exited.
func (f *follower) stampEnded(at time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.procs {
		if p.final == nil || p.stamped {
			continue
		}
		p.stamped = true
		if n := len(p.final.Snapshots); n > 0 && p.final.Snapshots[n-1].At < at {
			p.final.Snapshots[n-1].At = at
		}
	}
}

// all returns the processes of the tree besides the root.
func (f *follower) all() []*followed {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.procs)
}

// live returns the processes still traced.
func (f *follower) live() []*followed {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*followed
	for _, p := range f.procs {
		if p.final == nil {
			out = append(out, p)
		}
	}
	return out
}

// ended returns the processes whose capture has ended.
func (f *follower) ended() []*followed {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*followed
	for _, p := range f.procs {
		if p.final != nil {
			out = append(out, p)
		}
	}
	return out
}

// end stops tracing fp and keeps its capture (once: a second caller waits
// for the first); gone reads its exit status first.
func (f *follower) end(fp *followed, gone bool) {
	fp.endOnce.Do(func() {
		defer close(fp.ended)
		f.mu.Lock()
		fp.ending = true
		f.mu.Unlock()
		if gone {
			fp.exitCode = exitStatus(fp.t.pid)
		}
		f.endNow(fp)
	})
	<-fp.ended
}

func (f *follower) endNow(fp *followed) {
	c, err := fp.t.Stop()
	if err != nil {
		c = &analyze.Capture{Target: fp.t.targetInfo()}
		c.Warnings = append(c.Warnings, fmt.Sprintf("its capture could not be read: %v", err))
	}
	for i := range c.Sites {
		c.Sites[i].Pid = fp.t.pid
	}
	notes := fp.t.treeNotes()
	f.mu.Lock()
	fp.final = c
	fp.notes = notes
	f.mu.Unlock()
}

// treeNotes is what a process of a followed tree leaves for the tree to
// say once for all (follower.merge): the frames its objects left unnamed,
// and the images it exec'd into with what the earlier ones held.
type treeNotes struct {
	unnamed []unnamedFrames
	execs   uint32
	preExec preExec
}

// treeNotes returns t's notes, once its capture ended.
func (t *Tracer) treeNotes() treeNotes {
	t.mu.Lock()
	defer t.mu.Unlock()
	return treeNotes{unnamed: t.unnamed, execs: t.execs.gen, preExec: t.execs.held}
}

// endExited ends the capture of t, a process of the tree continued from
// its stop in exit(), once it has exited: its collection is free for the
// next process then, not at the root's next snapshot (a launch script
// starts its programs one after another, each waiting for the last).
// One that takes longer to exit is ended by a snapshot, as one that
// exits without the stop (a signal) is.
func (f *follower) endExited(t *Tracer) {
	f.mu.Lock()
	var fp *followed
	for _, p := range f.procs {
		if p.t == t {
			fp = p
		}
	}
	f.mu.Unlock()
	if fp == nil {
		return
	}
	for wait := 100 * time.Microsecond; wait < time.Second; wait *= 2 {
		if exited(t.pid) && t.exitKnown() {
			f.end(fp, true)
			return
		}
		time.Sleep(wait)
	}
}

// exitKnown reports whether the kernel saw t's process's last thread
// exit (target_exit, where it is attached): a thread group's leader is a
// zombie while other threads are still in exit(), before target_exit
// counts the inflate windows left and keeps the exit status.
func (t *Tracer) exitKnown() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped || !t.exit.hooked {
		return true
	}
	_, ok := t.objs.ExitStatus()
	return ok
}

// close ends following: nothing new is followed, and a process waiting
// stopped for its adoption (a load takes seconds on a loaded machine) runs
// on at once, untraced.
func (f *follower) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for pid := range f.waiting {
		continueStopped(pid)
	}
	for _, s := range f.spares {
		s.closeSpare()
	}
	f.spares = nil
}

// stop ends every capture of the tree (the root's Stop): nothing new is
// followed, adoptions under way finish first.
func (f *follower) stop() {
	f.close()
	f.adopts.Wait()
	for _, fp := range f.live() {
		f.end(fp, exited(fp.t.pid))
	}
}

// exited reports whether pid has exited: gone, or a zombie.
func exited(pid int) bool { return gone(pid) }

// exitStatus reads a zombie's exit status, nil when it is gone already.
func exitStatus(pid int) *int {
	st, err := procfs.ReadStat(pid)
	if err != nil || st.State != 'Z' {
		return nil
	}
	return exitCodeOf(unix.WaitStatus(st.ExitCode))
}

// exitCodeOf is a wait status as a shell's $? shows it: the exit code,
// or 128 plus the signal that killed the process.
func exitCodeOf(ws unix.WaitStatus) *int {
	code := ws.ExitStatus()
	if ws.Signaled() {
		code = 128 + int(ws.Signal())
	}
	return &code
}

// exitCodeLocked is the exit code target_exit kept, nil if the process
// has not exited (or target_exit is not attached).
func (t *Tracer) exitCodeLocked() *int {
	es, ok := t.objs.ExitStatus()
	if !ok {
		return nil
	}
	return exitCodeOf(unix.WaitStatus(es))
}

// exitedAfterLocked is when the process exited, since the capture began
// (target_exit), 0 if not known.
func (t *Tracer) exitedAfterLocked() time.Duration {
	at, err := t.objs.ExitNs()
	if err != nil || at == 0 {
		return 0
	}
	d := time.Since(t.started) - time.Duration(monotonicNow()-at)
	return max(d, 1)
}

// targetInfo is the process as Capture.Processes lists it.
func (t *Tracer) targetInfo() analyze.Target {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.target()
}

// merge adds the captures of the tree's other processes to c, the root's:
// their sites (with their pid), their points in c's snapshots (each
// root snapshot takes the newest point each process had by then), their
// losses, objects and warnings, and the processes themselves.
func (f *follower) merge(c *analyze.Capture) {
	if n := len(c.Snapshots); n > 0 {
		f.stampEnded(c.Snapshots[n-1].At)
	}
	f.mu.Lock()
	procs := slices.Clone(f.procs)
	skipped := f.skipped
	f.mu.Unlock()
	slices.SortFunc(procs, func(a, b *followed) int { return cmp.Compare(a.startedAfter, b.startedAfter) })
	known := map[string]bool{}
	for _, o := range c.Objects {
		known[o.Path] = true
	}
	for _, p := range procs {
		pc := p.final
		tg := pc.Target
		tg.Parent = p.parent
		tg.StartedAfter = p.startedAfter
		if tg.ExitCode == nil {
			tg.ExitCode = p.exitCode
		}
		c.Processes = append(c.Processes, tg)
		c.Sites = append(c.Sites, pc.Sites...)
		mergeSnapshots(c.Snapshots, pc.Snapshots)
		mergeMemory(c.Memory, pc.Memory)
		c.Lost.AllocationsDropped += pc.Lost.AllocationsDropped
		c.Lost.UnknownFrees += pc.Lost.UnknownFrees
		c.Lost.StackErrors += pc.Lost.StackErrors
		c.Lost.FreesMissed += pc.Lost.FreesMissed
		c.Lost.PendingDropped += pc.Lost.PendingDropped
		if c.ExactBudget != nil && pc.ExactBudget != nil {
			c.ExactBudget.Calls += pc.ExactBudget.Calls
			c.ExactBudget.Past += pc.ExactBudget.Past
		}
		for _, o := range pc.Objects {
			if !known[o.Path] {
				known[o.Path] = true
				c.Objects = append(c.Objects, o)
			}
		}
		for _, w := range pc.Warnings {
			c.Warnings = append(c.Warnings, fmt.Sprintf("pid %d: %s", tg.Pid, w))
		}
	}
	sortSnapshots(c.Snapshots)
	root, rootUnnamed := 0, []unnamedFrames(nil)
	if f.root != nil {
		root, rootUnnamed = f.root.pid, f.root.unnamed
	}
	for _, w := range treeWarnings(root, rootUnnamed, procs) {
		c.Warnings = append(c.Warnings, w)
		if f.root != nil {
			f.root.opts.Warnf("%s", w)
		}
	}
	if skipped > 0 {
		c.Warnings = append(c.Warnings, fmt.Sprintf("%d processes the command started were not traced (see the warnings above): what they allocated is not in this report", skipped))
	}
}

// treeWarnings says once for the whole tree what each process's capture
// left for it (treeNotes): per object, the frames left unnamed in all of
// them (the root's, rootUnnamed, among them), the objects that share a
// cause in one warning (unnamedWarnings); and what the images that
// the command's other processes exec'd away from still held (the root's
// own exec is its capture's warning).
func treeWarnings(root int, rootUnnamed []unnamedFrames, procs []*followed) []string {
	var objects []unnamedObject
	byKey := map[[2]string]int{} // index in objects
	add := func(pid int, us []unnamedFrames) {
		for _, u := range us {
			k := [2]string{u.module, u.buildID}
			i, ok := byKey[k]
			if !ok {
				i = len(objects)
				byKey[k] = i
				objects = append(objects, unnamedObject{u: u})
				objects[i].u.frames = 0
			}
			objects[i].u.frames += u.frames
			objects[i].pids = append(objects[i].pids, pid)
		}
	}
	add(root, rootUnnamed)
	var execd []int
	var held preExec
	var execs uint32
	for _, p := range procs {
		add(p.t.pid, p.notes.unnamed)
		if p.notes.execs > 0 {
			execd = append(execd, p.t.pid)
			execs += p.notes.execs
			held.count += p.notes.preExec.count
			held.bytes += p.notes.preExec.bytes
		}
	}
	slices.SortStableFunc(objects, func(a, b unnamedObject) int { return cmp.Compare(a.u.module, b.u.module) })
	out := unnamedWarnings(objects, root)
	switch {
	case held.count == 0:
		// Nothing went with the execs (a fork that exec'd at once):
		// the header lists them, and no count is short.
	case len(execd) == 1:
		out = append(out, fmt.Sprintf("pid %d exec'd during the capture (%d time(s)): %d allocations (%s) its earlier image(s) still held went with the exec and are not reported as leaks",
			execd[0], execs, held.count, analyze.FormatBytes(held.bytes)))
	case len(execd) > 1:
		out = append(out, fmt.Sprintf("%d other processes of the command (%s) exec'd during the capture, %d times in all: %d allocations (%s) their earlier images still held went with the execs and are not reported as leaks",
			len(execd), pidList(execd), execs, held.count, analyze.FormatBytes(held.bytes)))
	}
	return out
}

// mergeSnapshots puts into each of root's snapshots the newest of
// other's points taken by then (before the next root snapshot): the
// tree's processes are read one after the other at each snapshot. The
// points are in no order then (sortSnapshots).
func mergeSnapshots(root, other []analyze.Snapshot) {
	j := -1
	for i := range root {
		next := time.Duration(1<<63 - 1)
		if i+1 < len(root) {
			next = root[i+1].At
		}
		for j+1 < len(other) && other[j+1].At < next {
			j++
		}
		if j < 0 {
			continue
		}
		root[i].Sites = append(root[i].Sites, other[j].Sites...)
	}
}

// sortSnapshots orders each snapshot's points by site ID, once all the
// tree's processes are merged in (mergeSnapshots).
func sortSnapshots(snaps []analyze.Snapshot) {
	for i := range snaps {
		slices.SortFunc(snaps[i].Sites, func(a, b analyze.SitePoint) int { return cmp.Compare(a.ID, b.ID) })
	}
}

// lastSnapshot adds the tree's other processes to the root's newest
// snapshot and its new sites, for a capture written as it happens. An
// ended process's sites are listed whole each time: the writer defines
// only those it has not.
func (f *follower) lastSnapshot(sites *treeSites, last *analyze.Snapshot) {
	f.mu.Lock()
	procs := slices.Clone(f.procs)
	f.mu.Unlock()
	for _, p := range procs {
		f.mu.Lock()
		ending := p.ending // or ended
		f.mu.Unlock()
		if !ending {
			ns, ls, stopped := p.t.lastSnapshotOf()
			if !stopped {
				sites.add(analyze.Sites(ns), p.t.pid)
				last.Sites = append(last.Sites, ls.Sites...)
				continue
			}
		}
		<-p.ended // its tables are gone or going: its capture is the one to read
		f.mu.Lock()
		final, stamped := p.final, p.stamped
		f.mu.Unlock()
		var ls analyze.Snapshot
		n := len(final.Snapshots)
		if !stamped {
			n-- // ended since the root's snapshot: the point before its end
		}
		if n > 0 {
			ls = final.Snapshots[n-1]
		}
		sites.add(analyze.Sites(final.Sites), p.t.pid)
		last.Sites = append(last.Sites, ls.Sites...)
	}
	slices.SortFunc(last.Sites, func(a, b analyze.SitePoint) int { return cmp.Compare(a.ID, b.ID) })
}

// treeSites lists the new sites of every process of the tree, each with
// its pid (0: the command's).
type treeSites struct {
	lists []analyze.SiteList
	pids  []int
	ends  []int // ends[i]: index past lists[i]'s last site
}

func (ts *treeSites) add(l analyze.SiteList, pid int) {
	n := 0
	if len(ts.ends) > 0 {
		n = ts.ends[len(ts.ends)-1]
	}
	ts.lists = append(ts.lists, l)
	ts.pids = append(ts.pids, pid)
	ts.ends = append(ts.ends, n+l.Len())
}

func (ts *treeSites) Len() int {
	if len(ts.ends) == 0 {
		return 0
	}
	return ts.ends[len(ts.ends)-1]
}

func (ts *treeSites) find(i int) (int, int) {
	k, _ := slices.BinarySearch(ts.ends, i+1)
	start := 0
	if k > 0 {
		start = ts.ends[k-1]
	}
	return k, i - start
}

func (ts *treeSites) ID(i int) uint64 {
	k, j := ts.find(i)
	return ts.lists[k].ID(j)
}

func (ts *treeSites) Site(i int) analyze.Site {
	k, j := ts.find(i)
	s := ts.lists[k].Site(j)
	s.Pid = ts.pids[k]
	return s
}

// TreeDone returns a channel closed once the command has exited (cmdDone)
// and so has every process of its tree that is traced: a server that
// daemonizes (forks, and the parent exits) is traced on in its child.
// Without following, it is cmdDone.
func (t *Tracer) TreeDone(cmdDone <-chan struct{}) <-chan struct{} {
	if !t.isRoot() {
		return cmdDone
	}
	done := make(chan struct{})
	go func() {
		<-cmdDone
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		// Twice in a row, a tick apart: a record read but not handled
		// yet is between the two looks.
		for quiet := 0; quiet < 2; <-tick.C {
			if t.tree.allExited() {
				quiet++
			} else {
				quiet = 0
			}
		}
		close(done)
	}()
	return done
}

// allExited reports whether every process of the tree has exited, with
// every record it sent handled, and none is being adopted; true once Stop
// began.
func (f *follower) allExited() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return true
	}
	if f.pending > 0 {
		return false
	}
	for _, p := range f.procs {
		if p.final == nil && (!exited(p.t.pid) || !p.t.recordsRead()) {
			return false // running, or exited with a record not handled yet (a fork just before its exit)
		}
	}
	return true
}

// shareAsync traces pid, a child of t's process that shares its memory
// (clone with CLONE_VM, not CLONE_VFORK) and that the kernel stopped:
// its calls count in t's tables, as one program's over one heap (a block
// the one allocates and the other frees is freed). It is continued once
// t's probes are attached to it too.
func (t *Tracer) shareAsync(pid int, atNs uint64) {
	t.mu.Lock()
	var dog *watchdog
	if t.tree != nil {
		dog = t.tree.root.watchdog
	}
	t.mu.Unlock()
	dog.follow(pid)
	go func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if !t.probes.Detached() {
			t.followedVMLocked(pid)
			t.probes.Share(pid)
		}
		if atNs != 0 {
			t.stops.Add(time.Duration(monotonicNow() - atNs))
		}
		continueStopped(pid)
	}()
}

// followedVMLocked notes a CLONE_VM child as followed.
func (t *Tracer) followedVMLocked(pid int) {
	if t.member.vmFollowed == nil {
		t.member.vmFollowed = map[int]bool{}
	}
	t.member.vmFollowed[pid] = true
}

// recordsRead reports whether every record the kernel sent t has been read
// and handled (a fork's adoption started).
func (t *Tracer) recordsRead() bool {
	return t.misses.Idle() // closed: Stop is ending it, its capture is final soon
}
