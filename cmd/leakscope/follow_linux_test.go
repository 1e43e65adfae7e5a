package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leakscope/leakscope/internal/testutil"
	"github.com/leakscope/leakscope/report"
)

// blocks are a leak row's outstanding count and bytes.
type blocks [2]uint64

// leaksByProcess sums a report's outstanding blocks by process and by the
// leaf function of the row's stack (the malloc family's caller).
func leaksByProcess(t *testing.T, r *report.V1) map[int]map[string]blocks {
	t.Helper()
	out := map[int]map[string]blocks{}
	for _, l := range r.Leaks {
		pid := l.Pid
		if len(r.Processes) > 0 && pid == 0 {
			t.Errorf("rank %d has no pid in a capture of %d processes", l.Rank, len(r.Processes)+1)
		}
		if pid == 0 {
			pid = r.Target.Pid
		}
		if out[pid] == nil {
			out[pid] = map[string]blocks{}
		}
		fn := ""
		if len(l.Frames) > 0 {
			fn = l.Frames[0].Function
		}
		b := out[pid][fn]
		out[pid][fn] = blocks{b[0] + l.OutstandingCount, b[1] + l.OutstandingBytes}
	}
	return out
}

// runJSON runs leakscope run with args and returns its JSON report.
func runJSON(t *testing.T, leakscope string, args ...string) (*report.V1, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "r.json")
	cmd := exec.Command(leakscope, append([]string{"run", "--progress", "never", "--top", "100000", "--format", "json", "-o", out}, args...)...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("leakscope run %q: %v\n%s", args, err, stderr.String())
	}
	return readReport(t, out), stderr.String()
}

// run follows every process the command forks: forker's parent and its
// four children (which free their copies of the parent's blocks and leak
// their own) are each counted exactly, each row with its process, every
// process listed with its parent and exit status. --no-follow traces the
// parent alone and says so.
func TestRunFollowsForks(t *testing.T) {
	testutil.RequireBPF(t)
	leakscope, forker := buildAll(t, "forker")
	r, stderr := runJSON(t, leakscope, "--", forker)
	if len(r.Processes) != 4 {
		t.Fatalf("%d processes listed, want forker's 4 children: %+v\n%s", len(r.Processes), r.Processes, stderr)
	}
	got := leaksByProcess(t, r)
	want := map[string]blocks{"leak_before_fork": {10, 10000}, "hold_inherited": {20, 14000}, "leak_after_fork": {10, 20000}}
	if !equalBlocks(got[r.Target.Pid], want) {
		t.Errorf("parent %d holds %v, want %v", r.Target.Pid, got[r.Target.Pid], want)
	}
	for _, p := range r.Processes {
		if p.Parent != r.Target.Pid || p.ExitCode == nil || *p.ExitCode != 0 {
			t.Errorf("process %d: parent %d, exit %v; want parent %d, exit 0", p.Pid, p.Parent, p.ExitCode, r.Target.Pid)
		}
		if p.StartedAfterSeconds <= 0 || p.ExitedAfterSeconds < p.StartedAfterSeconds {
			t.Errorf("process %d: started at %gs, exited at %gs", p.Pid, p.StartedAfterSeconds, p.ExitedAfterSeconds)
		}
		if w := (map[string]blocks{"leak_in_child": {50, 15000}}); !equalBlocks(got[p.Pid], w) {
			t.Errorf("child %d holds %v, want %v", p.Pid, got[p.Pid], w)
		}
	}
	// Each child freed its 20 inherited copies, never seen allocated in
	// it: unknown frees, and nothing else lost.
	if r.Lost != (report.V1Lost{UnknownFrees: 80}) {
		t.Errorf("lost = %+v, want 80 unknown frees (the children's inherited blocks)", r.Lost)
	}

	r, _ = runJSON(t, leakscope, "--no-follow", "--", forker)
	if len(r.Processes) != 0 {
		t.Errorf("--no-follow listed %d processes", len(r.Processes))
	}
	if got := leaksByProcess(t, r); len(got) != 1 || !equalBlocks(got[r.Target.Pid], want) {
		t.Errorf("--no-follow: %v, want the parent's %v alone", got, want)
	}
	if !hasWarning(r, "started 4 other processes (fork) during the capture, which were not traced") {
		t.Errorf("--no-follow: warnings %q do not say the 4 children were not traced", r.Warnings)
	}
}

// The processes a command starts through real programs nobody here wrote
// are followed into the program that leaks, which each of them execs from
// a child that shared their memory (vfork, posix_spawn) or forked: a
// shell, Python's subprocess, make running two recipes at once. Every
// leaky process is counted exactly, apart.
func TestRunFollowsSpawnedPrograms(t *testing.T) {
	testutil.RequireBPF(t)
	leakscope, leaky := buildAll(t, "leaky")
	for _, tool := range []string{"python3", "make"} {
		if _, err := exec.LookPath(tool); err != nil {
			testutil.SkipOrFail(t, tool+" not found")
		}
	}
	dir := t.TempDir()
	makefile := filepath.Join(dir, "Makefile")
	mk := "all: a b\na:\n\t" + leaky + " > /dev/null\nb:\n\t" + leaky + " > /dev/null\n"
	if err := os.WriteFile(makefile, []byte(mk), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		argv  []string
		leaky int // leaky processes
	}{
		{"sh -c 'PROG; true'", []string{"sh", "-c", leaky + "; true"}, 1},
		{"python3 subprocess", []string{"python3", "-c", "import subprocess, sys; subprocess.run([sys.argv[1]], check=True, stdout=subprocess.DEVNULL)", leaky}, 1},
		{"make -j2", []string{"make", "-s", "-j2", "-f", makefile}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, stderr := runJSON(t, leakscope, append([]string{"--"}, c.argv...)...)
			got := leaksByProcess(t, r)
			n := 0
			for _, p := range r.Processes {
				if len(p.Command) == 0 || p.Command[0] != leaky {
					continue
				}
				n++
				want := map[string]blocks{"leak_request_buffer": {100, 4096 * 100}, "leak_small_tag": {25, 48 * 25}}
				if g := got[p.Pid]; g["leak_request_buffer"] != want["leak_request_buffer"] || g["leak_small_tag"] != want["leak_small_tag"] {
					t.Errorf("leaky pid %d: %v, want %v", p.Pid, g, want)
				}
				if p.ExitCode == nil || *p.ExitCode != 0 {
					t.Errorf("leaky pid %d: exit %v, want 0", p.Pid, p.ExitCode)
				}
			}
			if n != c.leaky {
				t.Errorf("%d leaky processes listed, want %d: %+v\n%s", n, c.leaky, r.Processes, stderr)
			}
			if hasWarning(r, "not traced") || hasWarning(r, "could not be followed") {
				t.Errorf("warnings %q", r.Warnings)
			}
		})
	}
}

// A server that daemonizes (forks, and the parent exits at once; setsid
// and fork again) is traced on in its daemon until that exits: run does
// not end with the process it started, and the report says which process
// ended when.
func TestRunFollowsDaemon(t *testing.T) {
	testutil.RequireBPF(t)
	leakscope, daemon := buildAll(t, "daemonize")
	r, stderr := runJSON(t, leakscope, "--", daemon)
	if len(r.Processes) != 2 {
		t.Fatalf("%d processes, want the session leader and the daemon: %+v\n%s", len(r.Processes), r.Processes, stderr)
	}
	leader, d := r.Processes[0], r.Processes[1]
	if leader.Parent != r.Target.Pid || d.Parent != leader.Pid {
		t.Errorf("parents %d and %d, want %d and %d", leader.Parent, d.Parent, r.Target.Pid, leader.Pid)
	}
	got := leaksByProcess(t, r)
	if w := (map[string]blocks{"serve_request": {30, 30 * 512}}); !equalBlocks(got[d.Pid], w) {
		t.Errorf("daemon %d holds %v, want %v (all: %v)", d.Pid, got[d.Pid], w, got)
	}
	if r.Target.ExitCode == nil || *r.Target.ExitCode != 0 || d.ExitCode == nil || *d.ExitCode != 0 {
		t.Errorf("exit codes %v (command) and %v (daemon), want 0 and 0", r.Target.ExitCode, d.ExitCode)
	}
	// The daemon serves 30 requests 10 ms apart and idles 300 ms: it
	// outlives the command, and the capture lasts until it exits.
	if r.Target.ExitedAfterSeconds <= 0 || d.ExitedAfterSeconds < r.Target.ExitedAfterSeconds+0.5 || r.DurationSeconds < d.ExitedAfterSeconds {
		t.Errorf("command exited at %gs, daemon at %gs, capture %gs: want the daemon 0.6s after, within the capture",
			r.Target.ExitedAfterSeconds, d.ExitedAfterSeconds, r.DurationSeconds)
	}
}

// A child that shares its parent's memory and never execs (clone with
// CLONE_VM, not CLONE_VFORK) is traced with it, on its tables: the
// parent's blocks it frees are freed, and its own leaks are counted.
func TestRunTracesCloneVMChildWithItsParent(t *testing.T) {
	testutil.RequireBPF(t)
	leakscope, prog := buildAll(t, "clonevm")
	r, stderr := runJSON(t, leakscope, "--", prog)
	got := leaksByProcess(t, r)
	want := map[string]blocks{"parent_alloc": {5, 5 * 256}, "child_alloc": {3, 3 * 128}}
	if !equalBlocks(got[r.Target.Pid], want) {
		t.Errorf("clonevm holds %v, want %v\n%s", got, want, stderr)
	}
	if len(r.Processes) != 0 || hasWarning(r, "CLONE_VM") {
		t.Errorf("processes %+v, warnings %q: want the child in its parent's rows, nothing missed", r.Processes, r.Warnings)
	}
	if r.Lost != (report.V1Lost{}) {
		t.Errorf("lost = %+v, want none", r.Lost)
	}
}

func equalBlocks(a, b map[string]blocks) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func hasWarning(r *report.V1, s string) bool {
	for _, w := range r.Warnings {
		if strings.Contains(w, s) {
			return true
		}
	}
	return false
}

// attach --follow traces the processes a running target starts after
// attach, as a pre-forking server's workers: forker, attached while it
// waits, forks its four children after, and every process is counted
// exactly. The kernel stops each child until leakscope has attached to
// it; nothing is left stopped when attach ends.
func TestAttachFollowsForks(t *testing.T) {
	testutil.RequireBPF(t)
	leakscope, forker := buildAll(t, "forker")
	gate := filepath.Join(t.TempDir(), "gate")
	target := exec.Command(forker, "--wait-file", gate)
	var targetOut bytes.Buffer
	target.Stdout = &targetOut
	if err := target.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		target.Process.Kill()
		target.Wait()
	})
	out := filepath.Join(t.TempDir(), "r.json")
	ls := exec.Command(leakscope, "attach", "--follow", "--pid", strconv.Itoa(target.Process.Pid), "--duration", "60s",
		"--progress", "always", "--top", "100000", "--format", "json", "-o", out)
	lsErr, err := ls.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := ls.Start(); err != nil {
		t.Fatal(err)
	}
	lw := watchLines(lsErr)
	lw.await(t, regexp.MustCompile(`leakscope: pid (\d+)`), 30*time.Second)
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// forker exits once its children have: attach ends with it.
	done := make(chan error, 1)
	go func() { done <- target.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("forker: %v\n%s", err, targetOut.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("forker did not finish within 60s: a child left stopped?")
	}
	if err := ls.Wait(); err != nil {
		lw.mu.Lock()
		t.Fatalf("leakscope attach: %v\n%s", err, lw.text.String())
	}
	r := readReport(t, out)
	if len(r.Processes) != 4 {
		t.Fatalf("%d processes, want forker's 4 children: %+v", len(r.Processes), r.Processes)
	}
	got := leaksByProcess(t, r)
	want := map[string]blocks{"leak_before_fork": {10, 10000}, "hold_inherited": {20, 14000}, "leak_after_fork": {10, 20000}}
	if !equalBlocks(got[r.Target.Pid], want) {
		t.Errorf("forker %d holds %v, want %v", r.Target.Pid, got[r.Target.Pid], want)
	}
	for _, p := range r.Processes {
		if w := (map[string]blocks{"leak_in_child": {50, 15000}}); !equalBlocks(got[p.Pid], w) {
			t.Errorf("child %d holds %v, want %v", p.Pid, got[p.Pid], w)
		}
		if p.ExitCode == nil || *p.ExitCode != 0 {
			t.Errorf("child %d: exit %v, want 0", p.Pid, p.ExitCode)
		}
	}
}

// Every traced process has its memory breakdown: a shell that runs leaky
// in a child (not exec'd in place) gets its own, and leaky, in processes,
// its own, adding up to its RSS, its malloc part from its own leak.
func TestRunBreaksDownEveryProcess(t *testing.T) {
	testutil.RequireBPF(t)
	leakscope, leaky := buildAll(t, "leaky")
	r, stderr := runJSON(t, leakscope, "--interval", "200ms", "--", "sh", "-c", leaky+" --hold 1500 >/dev/null; true")
	if len(r.Processes) != 1 {
		t.Fatalf("%d processes listed, want leaky: %+v\n%s", len(r.Processes), r.Processes, stderr)
	}
	if r.Memory == nil || r.Memory.Pid != r.Target.Pid {
		t.Errorf("memory %+v, want the shell's (pid %d)", r.Memory, r.Target.Pid)
	}
	m := r.Processes[0].Memory
	if m == nil || m.Pid != r.Processes[0].Pid {
		t.Fatalf("leaky's memory %+v, want its breakdown (pid %d)", m, r.Processes[0].Pid)
	}
	var sum uint64
	var malloc *report.V1MemoryPart
	for i, p := range m.Parts {
		sum += p.Bytes
		if p.Name == "malloc outstanding" {
			malloc = &m.Parts[i]
		}
	}
	if sum != m.RSSBytes {
		t.Errorf("leaky's parts add up to %d, not its RSS %d", sum, m.RSSBytes)
	}
	// 100 x 4096 and 25 x 64 KiB outstanding (examples/c/leaky.c): at least.
	if malloc == nil || malloc.OutstandingBytes < 409600 || malloc.Culprit == "" {
		t.Errorf("leaky's malloc part %+v, want its outstanding blocks and a culprit of its own", malloc)
	}
}

// A launch script's shells all run Debian's bash, which has no symbols and
// no debug file here: the report says once for the tree how many of their
// frames are unnamed and in how many processes, and once what the images
// its other processes exec'd away from held; a process that exited has no
// memory breakdown, without a warning.
func TestRunTreeWarnsOncePerObject(t *testing.T) {
	testutil.RequireBPF(t)
	leakscope, leaky := buildAll(t, "leaky")
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal(err)
	}
	if bash, err = filepath.EvalSymlinks(bash); err != nil {
		t.Fatal(err)
	}
	// Each $(...) forks a shell that execs bash -c, whose echo is built in.
	script := `for i in 1 2 3; do x=$(bash -c "echo $i"); done; exec ` + leaky + ` > /dev/null`
	r, stderr := runJSON(t, leakscope, "--interval", "100ms", "--", "bash", "-c", script)
	if len(r.Processes) != 3 {
		t.Fatalf("%d processes listed, want the 3 command substitutions: %+v\n%s", len(r.Processes), r.Processes, stderr)
	}
	var unnamed, execd []string
	for _, w := range r.Warnings {
		switch {
		case strings.Contains(w, "frame(s) in "+bash+" are unnamed"), strings.Contains(w, " are unnamed: ") && strings.Contains(w, " in "+bash+" ("):
			// bash's own warning, or one for the objects unnamed for
			// its cause (unnamedWarnings).
			unnamed = append(unnamed, w)
		case strings.Contains(w, "exec'd during the capture") && !strings.HasPrefix(w, "the target exec'd"):
			execd = append(execd, w)
		case strings.Contains(w, "no memory breakdown"):
			t.Errorf("warning for a process that exited: %q", w)
		}
	}
	if len(unnamed) != 1 || !strings.Contains(unnamed[0], " are unnamed in 3 processes (pids ") && !strings.Contains(unnamed[0], " in "+bash+" (3 processes: pids ") {
		t.Errorf("warnings of %s's unnamed frames %q, want one for its 3 processes\n%s", bash, unnamed, stderr)
	}
	want := "3 other processes of the command (pids "
	if len(execd) != 1 || !strings.HasPrefix(execd[0], want) || !strings.Contains(execd[0], " exec'd during the capture, 3 times in all: ") {
		t.Errorf("warnings of the processes' execs %q, want one beginning %q", execd, want)
	}
	for _, p := range r.Processes {
		if !strings.Contains(unnamed[0]+execd[0], strconv.Itoa(p.Pid)) {
			t.Errorf("process %d is not named in %q nor in %q", p.Pid, unnamed[0], execd[0])
		}
	}
	if n := strings.Count(stderr, "are unnamed"); n != strings.Count(strings.Join(r.Warnings, "\n"), "are unnamed") {
		t.Errorf("stderr says %d times that frames are unnamed, the report %d times:\n%s", n, strings.Count(strings.Join(r.Warnings, "\n"), "are unnamed"), stderr)
	}
}

// A launch script in the shape of pyenv's shims (shells asking shells
// which program to run, then an exec) in front of a program that leaks a
// burst of zlib streams just before it exits: the program's streams rank
// first in the default report, not the blocks the shells held when they
// exited nor the program's start-up, and their count is exact. Each
// process is measured by its own allocations, and a burst between two
// snapshots is not called growth (docs/how-it-works.md#verdict-what-each-class-means).
func TestRunRanksTheLaunchedProgramsLeakFirst(t *testing.T) {
	testutil.RequireBPF(t)
	leakscope, _ := buildAll(t, "leaky")
	python := "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		testutil.SkipOrFail(t, "Debian's python3 not found: "+err.Error())
	}
	const streams = 100
	dir := t.TempDir()
	launch := filepath.Join(dir, "launch")
	script := `#!/bin/bash
for i in 1 2 3 4 5 6; do
	v=$(bash -c 'x=$(sleep 0.15; echo 3); echo "$x"')
done
exec ` + python + ` -S -c '
import os, sys, zlib
data = zlib.compress(b"x" * 100000)
streams = []
for _ in range(int(sys.argv[1])):
    d = zlib.decompressobj()
    d.decompress(data)
    streams.append(d)
os._exit(0)' ` + strconv.Itoa(streams) + "\n"
	if err := os.WriteFile(launch, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	capture := filepath.Join(dir, "c.capture")
	out := filepath.Join(dir, "r.json")
	cmd := exec.Command(leakscope, "run", "--progress", "never", "--format", "json", "-o", out, "--save", capture, "--", launch)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("leakscope run: %v\n%s", err, stderr.String())
	}
	r := readReport(t, out)
	if len(r.Processes) < 6 {
		t.Fatalf("%d processes listed, want the launcher's shells: %+v\n%s", len(r.Processes), r.Processes, stderr.String())
	}
	if len(r.Leaks) == 0 {
		t.Fatalf("no leaks\n%s", stderr.String())
	}
	top := r.Leaks[0]
	if top.Kind != "zlib.inflate" || (top.Pid != 0 && top.Pid != r.Target.Pid) {
		for _, l := range r.Leaks {
			t.Logf("rank %d pid %d %s %s %d live %d B: %q", l.Rank, l.Pid, l.Kind, l.Verdict.Class, l.OutstandingCount, l.OutstandingBytes, l.Verdict.Evidence)
		}
		t.Fatalf("rank 1 is %s of pid %d, want the program's zlib.inflate streams (pid %d)", top.Kind, top.Pid, r.Target.Pid)
	}
	// Every stream, from the capture re-ranked whole.
	all := filepath.Join(dir, "all.json")
	if b, err := exec.Command(leakscope, "report", "--top", "0", "--kind", "zlib.*", "--format", "json", "-o", all, capture).CombinedOutput(); err != nil {
		t.Fatalf("leakscope report: %v\n%s", err, b)
	}
	var n uint64
	for _, l := range readReport(t, all).Leaks {
		if l.Kind != "zlib.inflate" || (l.Pid != 0 && l.Pid != r.Target.Pid) {
			t.Errorf("rank %d: %s in pid %d, want only the program's inflate streams", l.Rank, l.Kind, l.Pid)
		}
		n += l.OutstandingCount
	}
	if n != streams {
		t.Errorf("%d inflate streams outstanding, want %d", n, streams)
	}
}
