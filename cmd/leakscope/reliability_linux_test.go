package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leakscope/leakscope/internal/testutil"
	"github.com/leakscope/leakscope/report"
)

// relBuild compiles leakscope and the named examples into a directory any
// user may read and run (an unprivileged leakscope must be able to exec
// itself as the shim). nolibc is linked without libc; threadstorm with -lz.
func relBuild(t *testing.T, examples ...string) (leakscope string, progs map[string]string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "leakscope-rel-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	leakscope = filepath.Join(dir, "leakscope")
	build := exec.Command("go", "build", "-o", leakscope, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	progs = map[string]string{}
	for _, name := range examples {
		out := filepath.Join(dir, name)
		src := filepath.Join("..", "..", "examples", "c", name+".c")
		args := []string{"-O2", "-g", "-pthread", "-fno-omit-frame-pointer", "-o", out, src}
		switch name {
		case "nolibc":
			args = []string{"-static", "-nostdlib", "-O2", "-o", out, src}
		case "threadstorm":
			args = append(args, "-lz")
		}
		if b, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
			t.Fatalf("gcc %s: %v\n%s", name, err, b)
		}
		progs[name] = out
	}
	return leakscope, progs
}

// relBuffer collects a process's output while the test reads it.
type relBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (r *relBuffer) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.b.Write(p)
}

func (r *relBuffer) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.b.String()
}

// waitOutput waits until buf contains s.
func waitOutput(t *testing.T, buf *relBuffer, s string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(buf.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q within %s; output so far:\n%s", s, within, buf.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startTarget starts an example untraced, its stderr collected.
func startTarget(t *testing.T, env []string, bin string, args ...string) (*exec.Cmd, *relBuffer) {
	t.Helper()
	var stderr relBuffer
	cmd := exec.Command(bin, args...)
	cmd.Stderr = &stderr
	cmd.Env = env
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/maps", cmd.Process.Pid))
		if bytes.Contains(b, []byte("libc.so")) || bytes.Contains(b, []byte(filepath.Base(bin))) && !bytes.Contains(b, []byte("ld-linux")) {
			return cmd, &stderr
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never started", bin)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// lsProc is a leakscope process started by startLeakscope.
type lsProc struct {
	cmd            *exec.Cmd
	stdout, stderr relBuffer
	exited         chan struct{}
	err            error // once exited is closed
}

// startLeakscope starts the built binary with its output collected.
func startLeakscope(t *testing.T, env []string, leakscope string, args ...string) *lsProc {
	t.Helper()
	p := &lsProc{exited: make(chan struct{})}
	p.cmd = exec.Command(leakscope, args...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.Env = env
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.exited
	})
	return p
}

// wait waits for the process and returns its exit code (128+signal when
// a signal ended it).
func (p *lsProc) wait(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(within):
		t.Fatalf("leakscope did not exit within %s; stderr:\n%s", within, p.stderr.String())
	}
	if p.err == nil {
		return 0
	}
	ee, ok := p.err.(*exec.ExitError)
	if !ok {
		t.Fatalf("wait: %v", p.err)
	}
	if ws := ee.Sys().(syscall.WaitStatus); ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ee.ExitCode()
}

// publicDir is a new directory anyone may write, in a path anyone may
// traverse (t.TempDir's parent is private).
func publicDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "leakscope-out-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// bpfProgIDs lists the BPF programs a process holds through its file
// descriptors (program and link fds: /proc/PID/fdinfo "prog_id:").
func bpfProgIDs(t *testing.T, pid int) map[int]bool {
	t.Helper()
	ids := map[int]bool{}
	dir := fmt.Sprintf("/proc/%d/fdinfo", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "prog_id:"); ok {
				if id, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
					ids[id] = true
				}
			}
		}
	}
	return ids
}

// bpftool runs bpftool with JSON output and decodes the list it prints.
func bpftool(t *testing.T, args ...string) []map[string]any {
	t.Helper()
	out, err := exec.Command("bpftool", append([]string{"-j"}, args...)...).Output()
	if err != nil {
		t.Fatalf("bpftool %s: %v", strings.Join(args, " "), err)
	}
	var list []map[string]any
	if len(bytes.TrimSpace(out)) == 0 {
		return nil
	}
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("bpftool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return list
}

func jsonInt(v any) int {
	f, _ := v.(float64)
	return int(f)
}

// checkBPFGone waits until none of ids is loaded, attached to a perf event
// (uprobes) or held by a link, and no perf event belongs to pid.
func checkBPFGone(t *testing.T, pid int, ids map[int]bool) {
	t.Helper()
	var left []string
	for deadline := time.Now().Add(60 * time.Second); ; {
		left = left[:0]
		for _, p := range bpftool(t, "prog", "show") {
			if ids[jsonInt(p["id"])] {
				left = append(left, fmt.Sprintf("prog %v (%v)", p["id"], p["name"]))
			}
		}
		for _, p := range bpftool(t, "perf", "list") {
			if ids[jsonInt(p["prog_id"])] || jsonInt(p["pid"]) == pid {
				left = append(left, fmt.Sprintf("perf event %v %v+%v", p["fd_type"], p["filename"], p["offset"]))
			}
		}
		for _, l := range bpftool(t, "link", "show") {
			if ids[jsonInt(l["prog_id"])] {
				left = append(left, fmt.Sprintf("link %v (%v)", l["id"], l["type"]))
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("left behind after leakscope ended: %s", strings.Join(left, "; "))
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// requireBpftool fails (CI) or skips without bpftool.
func requireBpftool(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("bpftool"); err != nil {
		testutil.SkipOrFail(t, "bpftool not installed (apt-get install bpftool)")
	}
}

// mallocBytes returns the first bytes of malloc in the target's memory and
// in libc's file. A uprobe replaces the first (int3, or a call when the
// kernel optimizes it); without one they are equal.
func mallocBytes(t *testing.T, pid int) (inMemory, inFile []byte) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	var libc string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 6 && strings.Contains(filepath.Base(f[5]), "libc.so") {
			libc = f[5]
			break
		}
	}
	if libc == "" {
		t.Fatalf("pid %d maps no libc", pid)
	}
	ef, err := elf.Open(libc)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	syms, _ := ef.DynamicSymbols()
	var vaddr uint64
	for _, s := range syms {
		if s.Name == "malloc" {
			vaddr = s.Value
		}
	}
	var off uint64
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 && vaddr >= p.Vaddr && vaddr < p.Vaddr+p.Filesz {
			off = vaddr - p.Vaddr + p.Off
		}
	}
	if vaddr == 0 || off == 0 {
		t.Fatalf("no malloc in %s", libc)
	}
	// The mapping that holds that file offset.
	var addr uint64
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 6 || f[5] != libc {
			continue
		}
		r := strings.SplitN(f[0], "-", 2)
		start, _ := strconv.ParseUint(r[0], 16, 64)
		end, _ := strconv.ParseUint(r[1], 16, 64)
		moff, _ := strconv.ParseUint(f[2], 16, 64)
		if off >= moff && off < moff+(end-start) {
			addr = start + off - moff
		}
	}
	inFile = make([]byte, 2)
	lf, err := os.Open(libc)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	if _, err := lf.ReadAt(inFile, int64(off)); err != nil {
		t.Fatal(err)
	}
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	inMemory = make([]byte, 2)
	if _, err := mem.ReadAt(inMemory, int64(addr)); err != nil {
		t.Fatalf("read malloc at 0x%x in pid %d: %v", addr, pid, err)
	}
	return inMemory, inFile
}

// waitMallocRestored waits until malloc in pid's memory equals the file.
func waitMallocRestored(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; {
		mem, file := mallocBytes(t, pid)
		if bytes.Equal(mem, file) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("malloc in pid %d still starts % x (file: % x): a uprobe is left in the target", pid, mem, file)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// tracefsUprobes returns the kernel's tracefs uprobe_events, mounting a
// private tracefs when none is mounted; ok is false when it cannot.
func tracefsUprobes(t *testing.T) (events string, ok bool) {
	t.Helper()
	for _, p := range []string{"/sys/kernel/tracing/uprobe_events", "/sys/kernel/debug/tracing/uprobe_events"} {
		if b, err := os.ReadFile(p); err == nil {
			return string(b), true
		}
	}
	dir := t.TempDir()
	if err := syscall.Mount("nodev", dir, "tracefs", 0, ""); err != nil {
		t.Logf("tracefs cannot be mounted (%v): uprobe_events not checked", err)
		return "", false
	}
	defer syscall.Unmount(dir, 0)
	b, err := os.ReadFile(filepath.Join(dir, "uprobe_events"))
	if err != nil {
		t.Logf("read uprobe_events: %v", err)
		return "", false
	}
	return string(b), true
}

var leakySummary = regexp.MustCompile(`leaky: leaked (\d+) blocks, (\d+) bytes in leak_request_buffer; leaked (\d+) blocks, (\d+) bytes in leak_small_tag; total (\d+) blocks, (\d+) bytes; rounds (\d+); pid \d+; calls malloc=(\d+) calloc=(\d+) free=(\d+)`)

// checkLeakySummary checks leaky's summary line against its ground truth
// for R rounds of requests, tags and messages (examples/README.md).
func checkLeakySummary(t *testing.T, out string, requests, tags, messages uint64) {
	t.Helper()
	m := leakySummary.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no summary line in %q", out)
	}
	v := make([]uint64, len(m))
	for i := 1; i < len(m); i++ {
		v[i], _ = strconv.ParseUint(m[i], 10, 64)
	}
	r := v[7]
	want := []uint64{0, requests * r, 4096 * requests * r, tags * r, 48 * tags * r,
		(requests + tags) * r, (4096*requests + 48*tags) * r, r,
		(messages + 2*requests) * r, tags * r, (messages + requests) * r}
	if r == 0 || fmt.Sprint(v) != fmt.Sprint(want) {
		t.Errorf("summary %q: got %v, want %v", m[0], v[1:], want[1:])
	}
}

// kill -9 of leakscope mid-capture: the target keeps running and its work
// stays correct, and the kernel holds nothing of leakscope's afterwards: no
// program, no perf-event uprobe, no link, no tracefs uprobe, and malloc in
// the target is its original code again.
func TestKill9LeavesTargetUnharmed(t *testing.T) {
	testutil.RequireBPF(t)
	requireBpftool(t)
	leakscope, progs := relBuild(t, "leaky")
	eventsBefore, tracefs := tracefsUprobes(t)
	target, targetErr := startTarget(t, os.Environ(), progs["leaky"],
		"--forever", "--interval", "20", "--requests", "5", "--tags", "2", "--messages", "2000")
	pid := target.Process.Pid
	ls := startLeakscope(t, os.Environ(), leakscope, "attach", "--pid", strconv.Itoa(pid),
		"--progress", "always", "--interval", "100ms", "--save", filepath.Join(t.TempDir(), "cap"))
	waitOutput(t, &ls.stderr, "leakscope: pid", 30*time.Second)

	ids := bpfProgIDs(t, ls.cmd.Process.Pid)
	var uprobes int
	for _, p := range bpftool(t, "perf", "list") {
		if typ := fmt.Sprint(p["fd_type"]); jsonInt(p["pid"]) == ls.cmd.Process.Pid && (typ == "uprobe" || typ == "uretprobe") {
			uprobes++
		}
	}
	// Where the kernel has uprobe_multi links (6.6+) every probe is one:
	// the malloc family's session and free's link ("bpftool perf" lists
	// only perf-event uprobes, the fallback).
	for _, l := range bpftool(t, "link", "show") {
		if typ := fmt.Sprint(l["type"]); ids[jsonInt(l["prog_id"])] && (typ == "uprobe_multi" || typ == "12") {
			uprobes++
		}
	}
	if len(ids) == 0 || uprobes < 1 {
		t.Fatalf("while attached: %d programs, %d uprobes held by leakscope; the checks below would prove nothing", len(ids), uprobes)
	}
	if mem, file := mallocBytes(t, pid); bytes.Equal(mem, file) {
		t.Fatalf("while attached, malloc in the target is unchanged (% x): cannot tell a probe from none", mem)
	}

	time.Sleep(300 * time.Millisecond) // mid-capture: rounds are running
	ls.cmd.Process.Signal(syscall.SIGKILL)
	// The kernel unregisters each uprobe as the dead process's files
	// close: seconds on a busy machine.
	if code := ls.wait(t, 120*time.Second); code != 128+int(syscall.SIGKILL) {
		t.Fatalf("leakscope exit %d, want killed", code)
	}
	checkBPFGone(t, ls.cmd.Process.Pid, ids)
	waitMallocRestored(t, pid)
	if tracefs {
		if after, _ := tracefsUprobes(t); after != eventsBefore {
			t.Errorf("uprobe_events changed:\nbefore:\n%s\nafter:\n%s", eventsBefore, after)
		}
	}

	// The target ran on, untraced, and still does its work right.
	time.Sleep(200 * time.Millisecond)
	if err := target.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("target gone after leakscope was killed: %v", err)
	}
	target.Process.Signal(syscall.SIGINT)
	if err := target.Wait(); err != nil {
		t.Fatalf("target after SIGINT: %v\n%s", err, targetErr.String())
	}
	checkLeakySummary(t, targetErr.String(), 5, 2, 2000)
}

// SIGINT and SIGTERM stop a capture cleanly, attached or launched: exit 0,
// the final report written whole with the exact ground truth, the probes
// gone, and an attached target left running with malloc restored.
func TestSignalsWriteFinalReport(t *testing.T) {
	testutil.RequireBPF(t)
	requireBpftool(t)
	leakscope, progs := relBuild(t, "leaky")
	for _, mode := range []string{"attach", "run"} {
		for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
			t.Run(mode+"/"+sig.String(), func(t *testing.T) {
				out := filepath.Join(t.TempDir(), "report.json")
				var ls *lsProc
				var target *exec.Cmd
				if mode == "attach" {
					gate := filepath.Join(t.TempDir(), "go")
					var targetErr *relBuffer
					target, targetErr = startTarget(t, os.Environ(), progs["leaky"], "--wait-file", gate, "--hold", "60000")
					ls = startLeakscope(t, os.Environ(), leakscope, "attach", "--pid", strconv.Itoa(target.Process.Pid),
						"--format", "json", "-o", out, "--progress", "always", "--interval", "100ms")
					waitOutput(t, &ls.stderr, "leakscope: pid", 30*time.Second)
					if err := os.WriteFile(gate, nil, 0o600); err != nil {
						t.Fatal(err)
					}
					waitOutput(t, targetErr, "leaky: leaked", 30*time.Second)
				} else {
					ls = startLeakscope(t, os.Environ(), leakscope, "run", "--format", "json", "-o", out,
						"--", progs["leaky"], "--hold", "60000")
					waitOutput(t, &ls.stderr, "leaky: leaked", 30*time.Second)
				}
				time.Sleep(200 * time.Millisecond)
				ids := bpfProgIDs(t, ls.cmd.Process.Pid)
				ls.cmd.Process.Signal(sig)
				if code := ls.wait(t, 30*time.Second); code != 0 {
					t.Fatalf("leakscope exit %d after %s, want 0\n%s", code, sig, ls.stderr.String())
				}
				if !strings.Contains(ls.stderr.String(), "; interrupted") {
					t.Errorf("stderr does not say the capture was interrupted:\n%s", ls.stderr.String())
				}
				checkBPFGone(t, ls.cmd.Process.Pid, ids)
				r := readReport(t, out)
				checkLeakyReport(t, r, 100, 25)
				if mode == "attach" {
					if err := target.Process.Signal(syscall.Signal(0)); err != nil {
						t.Errorf("target gone after leakscope stopped: %v", err)
					}
					waitMallocRestored(t, target.Process.Pid)
				}
			})
		}
	}
}

// readReport parses a JSON report file and checks it is private.
func readReport(t *testing.T, path string) *report.V1 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("%s: mode %v, want 0600", path, st.Mode().Perm())
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := parseReport(f)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// checkLeakyReport checks leaky's two leaks (default sizes) in a report.
func checkLeakyReport(t *testing.T, r *report.V1, requests, tags uint64) {
	t.Helper()
	got := map[string][2]uint64{}
	for _, l := range r.Leaks {
		if len(l.Frames) > 0 {
			v := got[l.Frames[0].Function]
			got[l.Frames[0].Function] = [2]uint64{v[0] + l.OutstandingCount, v[1] + l.OutstandingBytes}
		}
	}
	want := map[string][2]uint64{
		"leak_request_buffer": {requests, 4096 * requests},
		"leak_small_tag":      {tags, 48 * tags},
	}
	for fn, w := range want {
		if got[fn] != w {
			t.Errorf("%s: %d blocks, %d bytes; want %d, %d", fn, got[fn][0], got[fn][1], w[0], w[1])
		}
	}
	if r.Lost != (report.V1Lost{}) {
		t.Errorf("lost = %+v, want none", r.Lost)
	}
}

// A full live-allocation table (ground truth in probe's
// TestLaunchFullTableCountsDrops): 61 dropped, counted in both formats, and
// run says on stderr which table was full and which flag raises it.
func TestRunWarnsWhenATableIsFull(t *testing.T) {
	testutil.RequireBPF(t)
	leakscope, progs := relBuild(t, "leaky")
	const warning = "leakscope: warning: 61 allocations were not tracked: the live-allocation table (64 entries) was full; raise --max-allocations\n"

	dir := t.TempDir()
	cmd := exec.Command(leakscope, "run", "--max-allocations", "64", "--format", "json", "-o", filepath.Join(dir, "r.json"),
		"--", progs["leaky"], "--messages", "0", "--hold", "300")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	if n := strings.Count(stderr.String(), "leakscope: warning:"); n != 1 || !strings.Contains(stderr.String(), warning) {
		t.Errorf("stderr has %d warnings, want exactly:\n%s\ngot:\n%s", n, warning, stderr.String())
	}
	r := readReport(t, filepath.Join(dir, "r.json"))
	if r.Lost != (report.V1Lost{AllocationsDropped: 61}) {
		t.Errorf("json lost = %+v, want allocations_dropped 61 and nothing else", r.Lost)
	}
	if r.Totals.OutstandingCount != 64 || r.Totals.OutstandingBytes != 63*4096+48 {
		t.Errorf("json totals = %+v, want 64 allocations, %d bytes", r.Totals, 63*4096+48)
	}
	if len(r.Warnings) != 1 || "leakscope: warning: "+r.Warnings[0]+"\n" != warning {
		t.Errorf("json warnings = %q", r.Warnings)
	}

	cmd = exec.Command(leakscope, "run", "--max-allocations", "64", "--", progs["leaky"], "--messages", "0", "--hold", "300")
	var stdout bytes.Buffer
	stderr.Reset()
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	lost := "lost:        the capture missed events, so these numbers may be wrong: allocations dropped 61, unknown frees 0, stack errors 0, frees missed 0, pending dropped 0\n"
	if !strings.Contains(stdout.String(), lost) {
		t.Errorf("text report lacks\n%s\ngot:\n%s", lost, stdout.String())
	}
	if !strings.Contains(stdout.String(), "warning:     61 allocations were not tracked") {
		t.Errorf("text report does not carry the warning:\n%s", stdout.String())
	}
	if !strings.Contains(stderr.String(), warning) {
		t.Errorf("stderr lacks the warning:\n%s", stderr.String())
	}
}

// Bad input and refused targets, on the real binary: one line on stderr
// naming the problem, exit 2, nothing on stdout, no panic, and no report or
// capture file left behind.
func TestRefusedTargetsAndBadInput(t *testing.T) {
	leakscope, progs := relBuild(t, "nolibc")
	exited := exec.Command("/bin/true")
	if err := exited.Run(); err != nil {
		t.Fatal(err)
	}
	staticLibc, _ := startTarget(t, os.Environ(), progs["nolibc"])
	asNobody := []string{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all"}
	withoutBPF := []string{"capsh", "--drop=cap_bpf,cap_perfmon,cap_sys_admin", "--"}

	for _, tc := range []struct {
		name string
		root bool     // needs root: drops privileges or reads another user's process
		wrap []string // runs leakscope under this command
		args []string // output flags are appended
		want string
	}{
		{"exited pid", false, nil, []string{"attach", "--pid", strconv.Itoa(exited.Process.Pid)}, fmt.Sprintf("process %d not found", exited.Process.Pid)},
		{"kernel thread", false, nil, []string{"attach", "--pid", "2"}, "process 2 is a kernel thread"},
		{"static without malloc, run", false, nil, []string{"run", "--", progs["nolibc"], "x"}, "is static and defines no malloc: no allocator found"},
		{"static without malloc, attach", true, nil, []string{"attach", "--pid", strconv.Itoa(staticLibc.Process.Pid)}, "exports malloc: no allocator found"},
		{"Go static binary", false, nil, []string{"run", "--", leakscope, "--help"}, "is static and defines no malloc: no allocator found"},
		{"unknown format", false, nil, []string{"run", "--format", "xml", "--", "/bin/true"}, `unknown --format "xml": use text, json`},
		{"fail-on without value", false, nil, []string{"run", "--fail-on", "count>", "--", "/bin/true"}, "--fail-on"},
		{"fail-on unknown field", false, nil, []string{"run", "--fail-on", "frobs>3", "--", "/bin/true"}, "--fail-on"},
		{"fail-on unknown unit", false, nil, []string{"run", "--fail-on", "bytes>1XB", "--", "/bin/true"}, `unknown size unit "XB"`},
		{"fail-on empty", false, nil, []string{"run", "--fail-on", "", "--", "/bin/true"}, "--fail-on"},
		{"fail-on bad duration", false, nil, []string{"run", "--fail-on", "age>1parsec", "--", "/bin/true"}, "--fail-on"},
		{"unprivileged run", true, asNobody, []string{"run", "--", "/bin/true"}, "CAP_BPF"},
		{"unprivileged attach to root's process", true, asNobody, []string{"attach", "--pid", strconv.Itoa(os.Getpid())}, "CAP_SYS_PTRACE"},
		{"root without CAP_BPF", true, withoutBPF, []string{"run", "--", "/bin/true"}, "CAP_BPF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root && os.Geteuid() != 0 {
				testutil.SkipOrFail(t, "needs root to drop privileges")
			}
			if len(tc.wrap) > 0 {
				if _, err := exec.LookPath(tc.wrap[0]); err != nil {
					testutil.SkipOrFail(t, tc.wrap[0]+" not installed")
				}
			}
			// An output directory anyone may write: what leakscope
			// leaves there is checked, not whether it could write.
			dir := publicDir(t)
			args := tc.args
			if args[0] == "run" || args[0] == "attach" {
				// flags go before "--"
				i := len(args)
				for j, a := range args {
					if a == "--" {
						i = j
						break
					}
				}
				args = append(append(append([]string{}, args[:i]...), "-o", filepath.Join(dir, "report"), "--save", filepath.Join(dir, "capture")), args[i:]...)
			}
			argv := append(append([]string{}, tc.wrap...), append([]string{leakscope}, args...)...)
			if len(tc.wrap) > 0 && tc.wrap[0] == "capsh" {
				argv = append(append([]string{}, tc.wrap...), "-c", shellQuote(append([]string{leakscope}, args...)))
			}
			cmd := exec.Command(argv[0], argv[1:]...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			msg := stderr.String()
			if code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout = %q, want nothing", stdout.String())
			}
			if !strings.HasPrefix(msg, "leakscope: ") || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, tc.want) {
				t.Errorf("stderr = %q, want one line containing %q", msg, tc.want)
			}
			if strings.Contains(msg, "panic") || strings.Contains(msg, "goroutine ") {
				t.Errorf("stderr shows a panic: %s", msg)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				var names []string
				for _, e := range ents {
					names = append(names, e.Name())
				}
				t.Errorf("left behind in the output directory: %v", names)
			}
		})
	}
}

// shellQuote joins argv for sh -c.
func shellQuote(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// Reports and captures are private (0600, also when --save overwrites an
// existing file) and hold nothing of the target's environment, in every
// format, launched or attached.
func TestOutputsPrivateWithoutEnvironment(t *testing.T) {
	testutil.RequireBPF(t)
	leakscope, progs := relBuild(t, "leaky")
	secret := fmt.Sprintf("s3cr3t-%d-%d", os.Getpid(), time.Now().UnixNano())
	env := append(os.Environ(), "LEAKSCOPE_TEST_SECRET="+secret, "PASSWORD="+secret)

	for _, mode := range []string{"run", "attach"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "report.json")
			capture := filepath.Join(dir, "leaks.capture")
			// An older capture, readable by everyone, is overwritten.
			if err := os.WriteFile(capture, []byte("old\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			os.Chmod(capture, 0o644)
			var stderr bytes.Buffer
			if mode == "run" {
				cmd := exec.Command(leakscope, "run", "--format", "json", "-o", out, "--save", capture, "--", progs["leaky"])
				cmd.Env, cmd.Stderr = env, &stderr
				if err := cmd.Run(); err != nil {
					t.Fatalf("run: %v\n%s", err, stderr.String())
				}
			} else {
				gate := filepath.Join(dir, "go")
				target, targetErr := startTarget(t, env, progs["leaky"], "--wait-file", gate, "--hold", "60000")
				ls := startLeakscope(t, os.Environ(), leakscope, "attach", "--pid", strconv.Itoa(target.Process.Pid),
					"--format", "json", "-o", out, "--save", capture, "--progress", "always", "--interval", "100ms")
				waitOutput(t, &ls.stderr, "leakscope: pid", 30*time.Second)
				os.WriteFile(gate, nil, 0o600)
				waitOutput(t, targetErr, "leaky: leaked", 30*time.Second)
				time.Sleep(300 * time.Millisecond)
				ls.cmd.Process.Signal(syscall.SIGINT)
				if code := ls.wait(t, 30*time.Second); code != 0 {
					t.Fatalf("attach exit %d\n%s", code, ls.stderr.String())
				}
			}
			checkLeakyReport(t, readReport(t, out), 100, 25)
			files := map[string]string{"report.json": out, "leaks.capture": capture}
			for _, f := range []string{"text", "json", "pprof"} {
				p := filepath.Join(dir, "rerendered."+f)
				cmd := exec.Command(leakscope, "report", "--format", f, "-o", p, capture)
				if b, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("report --format %s: %v\n%s", f, err, b)
				}
				files["rerendered."+f] = p
			}
			for name, p := range files {
				st, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				if st.Mode().Perm() != 0o600 {
					t.Errorf("%s: mode %v, want 0600", name, st.Mode().Perm())
				}
				data, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				if strings.HasSuffix(name, ".pprof") {
					zr, err := gzip.NewReader(bytes.NewReader(data))
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					if data, err = io.ReadAll(zr); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
				}
				if bytes.Contains(data, []byte(secret)) || bytes.Contains(data, []byte("LEAKSCOPE_TEST_SECRET")) {
					t.Errorf("%s contains the target's environment", name)
				}
			}
		})
	}
}

// -o naming a device, a pipe or a symbolic link writes through it: the
// atomic rename must never replace /dev/null (or a FIFO) with a regular
// file, nor a link with a copy.
func TestOutputThroughDevicePipeAndLink(t *testing.T) {
	capture := writeTestCapture(t, "leaky")
	dir := t.TempDir()
	render := func(out string) {
		t.Helper()
		io, stdout, errb := streams()
		if code := execute(context.Background(), []string{"report", "--format", "json", "-o", out, capture}, io); code != 0 {
			t.Fatalf("report -o %s: exit %d: %s", out, code, errb.String())
		}
		if stdout.Len() != 0 {
			t.Errorf("stdout = %q", stdout.String())
		}
	}

	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	got := make(chan []byte, 1)
	go func() {
		b, _ := os.ReadFile(fifo)
		got <- b
	}()
	render(fifo)
	if b := <-got; !bytes.Contains(b, []byte(`"schema": "leakscope.report/v1"`)) {
		t.Errorf("read %d bytes from the pipe, want the report", len(b))
	}
	if st, err := os.Lstat(fifo); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the pipe was replaced: %v %v", st.Mode(), err)
	}

	real := filepath.Join(dir, "real.json")
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	render(link)
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v %v", st.Mode(), err)
	}
	if st, err := os.Stat(real); err != nil || st.Mode().Perm() != 0o600 || st.Size() == 0 {
		t.Errorf("link target: %v, %v", st, err)
	}

	if os.Geteuid() == 0 {
		null := filepath.Join(dir, "null")
		if err := syscall.Mknod(null, syscall.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
			t.Logf("mknod: %v: device case not checked", err)
			return
		}
		if f, err := os.OpenFile(null, os.O_WRONLY, 0); err != nil {
			t.Logf("devices unusable here (%v): device case not checked", err)
			return
		} else {
			f.Close()
		}
		before, _ := os.Lstat(null)
		render(null)
		if st, err := os.Lstat(null); err != nil || st.Mode()&os.ModeCharDevice == 0 || st.Mode() != before.Mode() {
			t.Errorf("the device was replaced or changed: %v %v", st.Mode(), err)
		}
	}
}
