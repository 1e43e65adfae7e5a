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
	"time"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/probe"
	"github.com/leakscope/leakscope/probe/procfs"
)

// liveTarget is a target with its tracer, owned by the agent's loop.
type liveTarget struct {
	t    *probe.Tracer
	done <-chan struct{}
	st   *agentTarget
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
	self   int
}

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
	l := &agentLoop{opts: opts, log: log, st: st, ctx: ctx, live: map[int]*liveTarget{}, passed: map[int]passedProc{}, self: os.Getpid()}
	defer l.detachAll()
	log.Info("agent started", "select", strings.Join(opts.Selects, " | "), "interval", opts.Interval.String(), "sample_bytes", opts.sampleBytes)
	scan := time.NewTicker(opts.Scan)
	defer scan.Stop()
	snap := time.NewTicker(opts.Interval)
	defer snap.Stop()
	l.scan()
	for {
		select {
		case <-ctx.Done():
			log.Info("agent stopping", "targets", len(l.live))
			return nil
		case err := <-srvErr:
			return fmt.Errorf("--listen: %w", err)
		case <-scan.C:
			l.reap()
			l.scan()
		case <-snap.C:
			l.reap()
			l.snapshot()
		}
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
		if pid == l.self || l.live[pid] != nil {
			continue
		}
		l.consider(pid)
	}
	for pid := range l.passed {
		if !seen[pid] {
			delete(l.passed, pid)
		}
	}
}

// consider matches pid against the selectors and attaches to it.
func (l *agentLoop) consider(pid int) {
	stat, err := procfs.ReadStat(pid)
	if err != nil || stat.Flags&0x00200000 != 0 || stat.State == 'Z' { // gone, a kernel thread, a zombie
		return
	}
	exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	var comm, cgroup, rt *string
	if p, ok := l.passed[pid]; ok && p.start == stat.StartTime && p.exe == exe {
		if p.matched {
			return
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
		return
	}
	l.passed[pid] = passedProc{start: stat.StartTime, exe: exe, matched: true}
	name := info.comm()
	if len(l.live) >= l.opts.MaxTargets {
		l.st.mu.Lock()
		l.st.health.skipped++
		l.st.mu.Unlock()
		l.log.Warn("not attached: --max-targets reached", "pid", pid, "comm", name, "max_targets", l.opts.MaxTargets)
		return
	}
	l.attach(pid, name, info.cgroup(), info.runtime())
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

// attach traces pid with the probes its runtime gets by default.
func (l *agentLoop) attach(pid int, comm, cgroup, rt string) {
	po := l.opts.probeOptions(l.ctx, func(f string, a ...any) {
		l.log.Warn(fmt.Sprintf(f, a...), "pid", pid)
	})
	if rt == "jvm" {
		// --malloc auto leaves a JVM's allocator alone: nothing to sample.
		po.SampleBytes = 0
	}
	started := time.Now()
	t, err := probe.Attach(pid, po)
	if err != nil {
		l.st.mu.Lock()
		l.st.health.attachFailures++
		l.st.mu.Unlock()
		if !errors.Is(err, probe.ErrTargetExited) {
			l.log.Warn("attach failed", "pid", pid, "comm", comm, "err", err.Error())
		}
		return
	}
	at := newAgentTarget(pid, comm, cgroup, l.opts.MaxTargetSites, nil)
	at.header = t.Header()
	l.live[pid] = &liveTarget{t: t, done: exited(pid), st: at}
	l.st.mu.Lock()
	l.st.targets[pid] = at
	l.st.health.attaches++
	l.st.mu.Unlock()
	l.log.Info("attached", "pid", pid, "comm", comm, "runtime", string(at.header.Target.Runtime), "cgroup", cgroup,
		"probes", at.header.Probes.String(), "took", time.Since(started).Round(time.Millisecond).String())
}

// reap detaches from the targets that exited.
func (l *agentLoop) reap() {
	for pid, lt := range l.live {
		select {
		case <-lt.done:
			l.detach(pid, "exited")
		default:
		}
	}
}

func (l *agentLoop) detach(pid int, why string) {
	lt := l.live[pid]
	delete(l.live, pid)
	l.st.mu.Lock()
	delete(l.st.targets, pid)
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
		if _, err := lt.t.Snapshot(); err != nil {
			l.st.mu.Lock()
			l.st.health.snapshotErrors++
			l.st.mu.Unlock()
			l.log.Warn("snapshot", "pid", pid, "err", err.Error())
			continue
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
	l.st.mu.Lock()
	l.st.trimHistoryLocked(l.opts.MaxHistory)
	l.st.health.lastCycle = time.Since(start)
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
