//go:build linux && amd64

package main

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/probe"
	"github.com/leakscope/leakscope/probe/procfs"
)

// liveTarget is a target with its tracer, owned by the agent's loop.
type liveTarget struct {
	t    *probe.Tracer
	done <-chan struct{}
	st   *agentTarget
	// gone is set once the process exited: the tracer's warnings that
	// it cannot read /proc of it are expected then.
	gone atomic.Bool
}

// agentLoop is the agent's one goroutine that reads /proc, attaches,
// snapshots and detaches; the HTTP handlers only read its state.
type agentLoop struct {
	opts *agentOptions
	log  *slog.Logger
	st   *agentState
	ctx  context.Context
	live map[int]*liveTarget
	// passed are the processes seen that no selector matched, or that
	// could not be attached to, by pid and start time (a pid reused is a
	// new process), with the exe they had: an exec makes them new too.
	passed map[int]passedProc
	// fresh are the processes a process event announced, by pid, until
	// they are attached to or settled: at its exec a program's libraries
	// are not mapped yet, so it is tried again a moment later.
	fresh map[int]*freshProc
	self  int
}

// freshProc is a process announced by an event: its next try is due at
// due, the tries-th.
type freshProc struct {
	due   time.Time
	tries int
}

// freshDelays are the waits before each try at a process announced by an
// event, from the event: the dynamic loader maps a program's libraries
// within a millisecond or two of its exec, more on a loaded machine.
var freshDelays = []time.Duration{2 * time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond, 100 * time.Millisecond, 500 * time.Millisecond}

type passedProc struct {
	start uint64
	exe   string
	// matched: attach failed or --max-targets was reached (logged once);
	// checked again only when the exe changes.
	matched bool
	runtime *string // procRuntime, once it is settled (see consider)
}

func runAgent(ctx context.Context, opts *agentOptions, io ioStreams) error {
	log := opts.logger(io.Err)
	st := newAgentState()
	var srvErr chan error
	if opts.Listen != "" {
		addr, err := listenAddr("--listen", opts.Listen, opts.ListenAllowRemote)
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("--listen: %w", err)
		}
		if tcp, ok := ln.Addr().(*net.TCPAddr); !opts.ListenAllowRemote && (!ok || !tcp.IP.IsLoopback()) {
			ln.Close()
			return fmt.Errorf("--listen %s listens on %s, which is not loopback; add --listen-allow-remote to serve it anyway", opts.Listen, ln.Addr())
		}
		srv := &http.Server{
			Handler:           (&agentServer{st: st, opts: opts, allowRemote: opts.ListenAllowRemote}).handler(),
			ReadHeaderTimeout: 10 * time.Second,
			WriteTimeout:      time.Minute,
		}
		srvErr = make(chan error, 1)
		go func() { srvErr <- srv.Serve(ln) }()
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		}()
		log.Info("listening", "addr", ln.Addr().String(), "endpoints", "/metrics /debug/pprof/leaks /report?pid=")
	}
	l := &agentLoop{opts: opts, log: log, st: st, ctx: ctx, live: map[int]*liveTarget{}, passed: map[int]passedProc{}, fresh: map[int]*freshProc{}, self: os.Getpid()}
	defer l.detachAll()
	log.Info("agent started", "select", strings.Join(opts.Selects, " | "), "interval", opts.Interval.String(), "sample_bytes", opts.sampleBytes)
	scan := time.NewTicker(opts.Scan)
	defer scan.Stop()
	snap := time.NewTicker(opts.Interval)
	defer snap.Stop()
	// The kernel's process events find a process as it execs, forks or
	// renames itself; the /proc scan finds the processes that were there
	// before, and any event missed.
	events := make(chan procEvent, 4096)
	evDone := make(chan struct{})
	defer close(evDone)
	if err := procEvents(evDone, events, func(err error) {
		st.mu.Lock()
		st.health.eventsLost++
		st.mu.Unlock()
	}); err != nil {
		log.Warn("no process events: new processes are found by the /proc scan alone", "err", err.Error(), "scan", opts.Scan.String())
		events = nil
	}
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	l.scan()
	for {
		l.armFresh(retry)
		select {
		case <-ctx.Done():
			log.Info("agent stopping", "targets", len(l.live))
			return nil
		case err := <-srvErr:
			return fmt.Errorf("--listen: %w", err)
		case ev := <-events:
			l.event(ev)
		case <-retry.C:
			l.tryFresh()
		case <-scan.C:
			l.reap()
			l.scan()
		case <-snap.C:
			l.reap()
			l.snapshot()
		}
	}
}

// event handles one process event: a new or changed process is tried
// within milliseconds (freshDelays), an exit detaches.
func (l *agentLoop) event(ev procEvent) {
	l.st.mu.Lock()
	l.st.health.events++
	l.st.mu.Unlock()
	if ev.what == procEventNone {
		if ev.err != 0 {
			l.log.Warn("no process events: the kernel refused the subscription (older kernels need CAP_NET_ADMIN); new processes are found by the /proc scan alone",
				"err", unix.Errno(ev.err).Error(), "scan", l.opts.Scan.String())
		}
		return
	}
	if ev.pid == l.self {
		return
	}
	if ev.what == procEventExit {
		delete(l.fresh, ev.pid)
		if l.live[ev.pid] != nil {
			l.reap()
		}
		return
	}
	if l.live[ev.pid] == nil {
		l.fresh[ev.pid] = &freshProc{due: time.Now().Add(freshDelays[0])}
	}
}

// armFresh sets timer to the next try due in fresh.
func (l *agentLoop) armFresh(timer *time.Timer) {
	var next time.Time
	for _, f := range l.fresh {
		if next.IsZero() || f.due.Before(next) {
			next = f.due
		}
	}
	if next.IsZero() {
		timer.Stop()
		return
	}
	timer.Reset(time.Until(next))
}

// tryFresh tries the announced processes whose time has come. One that
// matches but has no allocator mapped yet is tried again after the next
// delay; the last try is an ordinary one (a failure is counted and logged).
func (l *agentLoop) tryFresh() {
	now := time.Now()
	for pid, f := range l.fresh {
		if f.due.After(now) {
			continue
		}
		if l.live[pid] != nil {
			delete(l.fresh, pid)
			continue
		}
		last := f.tries == len(freshDelays)-1
		if l.consider(pid, !last) && !last {
			f.tries++
			f.due = now.Add(freshDelays[f.tries])
			continue
		}
		delete(l.fresh, pid)
	}
}

// scan reads /proc and attaches to each new process a selector matches.
func (l *agentLoop) scan() {
	l.st.mu.Lock()
	l.st.health.scans++
	l.st.mu.Unlock()
	d, err := os.Open("/proc")
	if err != nil {
		l.log.Error("read /proc", "err", err)
		return
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		l.log.Error("read /proc", "err", err)
		return
	}
	seen := make(map[int]bool, len(names))
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid <= 0 {
			continue
		}
		seen[pid] = true
		if pid == l.self || l.live[pid] != nil || l.fresh[pid] != nil {
			continue
		}
		l.consider(pid, false)
	}
	for pid := range l.passed {
		if !seen[pid] {
			delete(l.passed, pid)
		}
	}
}

// consider matches pid against the selectors and attaches to it. early
// (a process just announced by an event) leaves a match without an
// allocator mapped yet unmarked and uncounted, and reports it: again.
func (l *agentLoop) consider(pid int, early bool) (again bool) {
	stat, err := procfs.ReadStat(pid)
	if err != nil || stat.Flags&0x00200000 != 0 || stat.State == 'Z' { // gone, a kernel thread, a zombie
		return false
	}
	exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	var comm, cgroup, rt *string
	if p, ok := l.passed[pid]; ok && p.start == stat.StartTime && p.exe == exe {
		if p.matched {
			return false
		}
		// Not matched before: comm and cgroup may have changed since
		// (a fork before its exec, a move between cgroups); read again.
		// The runtime is read once it is settled.
		rt = p.runtime
	}
	info := &procInfo{
		Pid:     pid,
		exe:     func() string { return exe },
		comm:    lazy(&comm, func() string { return readProcSmall(pid, "comm", 64) }),
		cgroup:  lazy(&cgroup, func() string { return procCgroup(pid) }),
		runtime: lazy(&rt, func() string { return procRuntime(pid) }),
	}
	if exe == "" || !anyMatch(l.opts.selectors, info) {
		pp := passedProc{start: stat.StartTime, exe: exe}
		// A JVM maps libjvm.so a moment after its exec: "native" is
		// settled only for a process a few seconds old.
		if rt != nil && (*rt != string(analyze.RuntimeNative) || settled(pid)) {
			pp.runtime = rt
		}
		l.passed[pid] = pp
		return false
	}
	if early && info.runtime() == string(analyze.RuntimeNative) && jvmLaunching(pid) {
		// The JDK's launcher loads libjvm.so a moment after its exec:
		// wait for it, so that a JVM gets a JVM's probes.
		return true
	}
	l.passed[pid] = passedProc{start: stat.StartTime, exe: exe, matched: true}
	name := info.comm()
	if len(l.live) >= l.opts.MaxTargets {
		l.st.mu.Lock()
		l.st.health.skipped++
		l.st.mu.Unlock()
		l.log.Warn("not attached: --max-targets reached", "pid", pid, "comm", name, "max_targets", l.opts.MaxTargets)
		return false
	}
	if err := l.attach(pid, name, info.cgroup(), info.runtime(), early); early && errors.Is(err, probe.ErrNoAllocator) {
		delete(l.passed, pid)
		return true
	}
	return false
}

func settled(pid int) bool {
	age, err := procfs.Age(pid)
	return err == nil && age > 5*time.Second
}

func lazy(v **string, read func() string) func() string {
	return func() string {
		if *v == nil {
			s := read()
			*v = &s
		}
		return **v
	}
}

// attach traces pid with the probes its runtime gets by default. early
// leaves probe.ErrNoAllocator uncounted and unlogged: the caller tries
// again.
func (l *agentLoop) attach(pid int, comm, cgroup, rt string, early bool) error {
	lt := &liveTarget{}
	po := l.opts.probeOptions(l.ctx, func(f string, a ...any) {
		if !lt.gone.Load() {
			l.log.Warn(fmt.Sprintf(f, a...), "pid", pid)
		}
	})
	if rt == "jvm" {
		// --malloc auto leaves a JVM's allocator alone: nothing to sample.
		po.SampleBytes = 0
	}
	started := time.Now()
	t, err := probe.Attach(pid, po)
	if err != nil && early && errors.Is(err, probe.ErrNoAllocator) {
		return err
	}
	if err != nil {
		l.st.mu.Lock()
		l.st.health.attachFailures++
		l.st.mu.Unlock()
		if errors.Is(err, probe.ErrTargetExited) {
			l.log.Info("not attached: the process exited while being attached", "pid", pid, "comm", comm,
				"took", time.Since(started).Round(time.Millisecond).String())
		} else {
			l.log.Warn("attach failed", "pid", pid, "comm", comm, "err", err.Error())
		}
		return err
	}
	at := newAgentTarget(pid, comm, cgroup, l.opts.MaxTargetSites, nil)
	at.header = t.Header()
	lt.t, lt.done, lt.st = t, exited(pid), at
	l.live[pid] = lt
	l.st.mu.Lock()
	l.st.targets[pid] = at
	l.st.health.attaches++
	l.st.mu.Unlock()
	l.log.Info("attached", "pid", pid, "comm", comm, "runtime", string(at.header.Target.Runtime), "cgroup", cgroup,
		"probes", at.header.Probes.String(), "took", time.Since(started).Round(time.Millisecond).String())
	return nil
}

// reap detaches from the targets that exited, and forgets the exited
// targets kept past --keep-exited.
func (l *agentLoop) reap() {
	for pid, lt := range l.live {
		select {
		case <-lt.done:
			l.detach(pid, "exited")
		default:
		}
	}
	now := time.Now()
	l.st.mu.Lock()
	for pid, t := range l.st.targets {
		if !t.exited.IsZero() && now.Sub(t.exited) >= l.opts.KeepExited {
			delete(l.st.targets, pid)
		}
	}
	l.st.mu.Unlock()
}

// detach stops tracing pid. A target that exited gets a last snapshot
// first (its tables outlive it), and is kept, with its last numbers, for
// --keep-exited: a process that lived shorter than --interval is served
// too, and a restarted service's last leak is not lost to a scraper.
func (l *agentLoop) detach(pid int, why string) {
	lt := l.live[pid]
	delete(l.live, pid)
	keep := why == "exited" && l.opts.KeepExited > 0
	lt.gone.Store(why == "exited")
	if keep {
		l.snapshotOne(pid, lt)
	}
	l.st.mu.Lock()
	if keep {
		lt.st.exited = time.Now()
		l.st.keepExitedLocked(l.opts.MaxTargets)
	} else {
		delete(l.st.targets, pid)
	}
	l.st.health.detaches++
	l.st.mu.Unlock()
	if _, err := lt.t.Stop(); err != nil {
		l.log.Warn("detach", "pid", pid, "err", err.Error())
	}
	l.log.Info("detached", "pid", pid, "comm", lt.st.comm, "why", why)
}

func (l *agentLoop) detachAll() {
	for pid := range l.live {
		l.detach(pid, "agent stopping")
	}
}

// snapshot reads every target's tables into its windows.
func (l *agentLoop) snapshot() {
	start := time.Now()
	for pid, lt := range l.live {
		l.snapshotOne(pid, lt)
	}
	l.st.mu.Lock()
	l.st.trimHistoryLocked(l.opts.MaxHistory)
	l.st.health.lastCycle = time.Since(start)
	l.st.mu.Unlock()
}

// snapshotOne reads one target's tables into its windows.
func (l *agentLoop) snapshotOne(pid int, lt *liveTarget) {
	if _, err := lt.t.Snapshot(); err != nil {
		l.st.mu.Lock()
		l.st.health.snapshotErrors++
		l.st.mu.Unlock()
		l.log.Warn("snapshot", "pid", pid, "err", err.Error())
		return
	}
	news, snap := lt.t.LastSnapshot()
	lost, err := lt.t.Lost()
	if err != nil {
		l.log.Warn("loss counters", "pid", pid, "err", err.Error())
	}
	header := lt.t.Header()
	l.st.mu.Lock()
	lt.st.header = header
	lt.st.lost = lost
	lt.st.add(news, snap)
	l.st.mu.Unlock()
}

// readProcSmall reads /proc/PID/name, at most limit bytes, without its
// trailing newline.
func readProcSmall(pid int, name string, limit int64) string {
	f, err := os.Open(fmt.Sprintf("/proc/%d/%s", pid, name))
	if err != nil {
		return ""
	}
	defer f.Close()
	b := make([]byte, limit)
	n, _ := f.Read(b)
	return strings.TrimSuffix(string(b[:n]), "\n")
}

// procCgroup is the process's cgroup v2 path (the "0::" line of
// /proc/PID/cgroup), or the first hierarchy's path under cgroup v1.
func procCgroup(pid int) string {
	return parseCgroup(readProcSmall(pid, "cgroup", 4096))
}

func parseCgroup(data string) string {
	first := ""
	for _, line := range strings.Split(data, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			return parts[2]
		}
		if first == "" {
			first = parts[2]
		}
	}
	return first
}

// procRuntime guesses a process's runtime before attaching, for
// runtime=: jvm when it maps libjvm.so, go when its executable has Go's
// build info, native otherwise. The tracer decides for itself once
// attached, and the labels use its answer.
func procRuntime(pid int) string {
	if maps, err := procfs.ReadMaps(pid); err == nil {
		for _, m := range maps {
			if path.Base(m.Path) == "libjvm.so" {
				return string(analyze.RuntimeJVM)
			}
		}
	}
	if isGoExecutable(fmt.Sprintf("/proc/%d/exe", pid)) {
		return string(analyze.RuntimeGo)
	}
	return string(analyze.RuntimeNative)
}

// jvmLaunching reports whether pid has the JDK's launcher (libjli.so)
// mapped: a JVM that has not loaded libjvm.so yet.
func jvmLaunching(pid int) bool {
	maps, err := procfs.ReadMaps(pid)
	if err != nil {
		return false
	}
	for _, m := range maps {
		if path.Base(m.Path) == "libjli.so" {
			return true
		}
	}
	return false
}

func isGoExecutable(exe string) (ok bool) {
	defer func() {
		if recover() != nil { // a hostile ELF file
			ok = false
		}
	}()
	f, err := elf.Open(exe)
	if err != nil {
		return false
	}
	defer f.Close()
	if f.Section(".go.buildinfo") != nil {
		return true
	}
	if s := f.Section(".note.go.buildid"); s != nil {
		return true
	}
	return false
}
