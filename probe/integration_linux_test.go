//go:build linux && amd64

package probe

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/testutil"
	"github.com/leakscope/leakscope/probe/kernel"
	"github.com/leakscope/leakscope/probe/stacks"
)

func TestMain(m *testing.M) {
	RunShim() // Launch re-executes this test binary as the exec shim
	os.Exit(m.Run())
}

// buildExample compiles examples/c/<name>.c into a temporary directory.
func buildExample(t *testing.T, name string, framePointers bool) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), name)
	args := []string{"-O2", "-g", "-Wall", "-pthread", "-o", out, filepath.Join("..", "examples", "c", name+".c")}
	if framePointers {
		args = append(args, "-fno-omit-frame-pointer")
	}
	if b, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s", name, err, b)
	}
	return out
}

// launch runs argv under the tracer until it exits and returns the capture.
func launch(t *testing.T, argv ...string) (*analyze.Capture, string) {
	t.Helper()
	return launchWith(t, Options{}, argv...)
}

// startLaunch launches argv under a tracer with opts, its warnings in the
// test log; stderr collects the command's standard error.
func startLaunch(t *testing.T, opts Options, argv ...string) (*Tracer, *Process, *bytes.Buffer) {
	t.Helper()
	return startLaunchTo(t, os.Stdout, opts, argv...)
}

// startLaunchTo is startLaunch with the command's standard output to out.
func startLaunchTo(t *testing.T, out io.Writer, opts Options, argv ...string) (*Tracer, *Process, *bytes.Buffer) {
	t.Helper()
	var stderr bytes.Buffer
	opts.Warnf = t.Logf
	tr, proc, err := Launch(argv, Stdio{Out: out, Err: &stderr}, opts)
	if err != nil {
		t.Fatalf("launch %s: %v", argv[0], err)
	}
	return tr, proc, &stderr
}

// launchWith is launch with tracer options.
func launchWith(t *testing.T, opts Options, argv ...string) (*analyze.Capture, string) {
	t.Helper()
	return launchTo(t, os.Stdout, opts, argv...)
}

// launchTo is launchWith with the command's standard output to out.
func launchTo(t *testing.T, out io.Writer, opts Options, argv ...string) (*analyze.Capture, string) {
	t.Helper()
	tr, proc, stderr := startLaunchTo(t, out, opts, argv...)
	return stopLaunched(t, tr, proc, stderr, argv[0]), stderr.String()
}

// stopLaunched waits for the command name that proc runs under tr to
// exit, stops tr and returns its capture; the command must exit 0.
func stopLaunched(t *testing.T, tr *Tracer, proc *Process, stderr *bytes.Buffer, name string) *analyze.Capture {
	t.Helper()
	select {
	case <-proc.Done():
	case <-time.After(60 * time.Second):
		proc.Signal(syscall.SIGKILL)
		t.Fatalf("%s did not exit within 60s", name)
	}
	c, err := tr.Stop()
	if err != nil {
		t.Fatalf("stop: %v", err)
	}
	if code := proc.ExitCode(); code != 0 {
		t.Fatalf("%s exited %d: %s", name, code, stderr.String())
	}
	return c
}

// sitesIn returns the sites whose first frame is function fn of module.
func siteOf(c *analyze.Capture, fn string) []analyze.Site {
	var out []analyze.Site
	for _, s := range c.Sites {
		if len(s.Stack.Frames) > 0 && s.Stack.Frames[0].Function == fn {
			out = append(out, s)
		}
	}
	return out
}

func functions(s analyze.Site) []string {
	var fs []string
	for _, f := range s.Stack.Frames {
		fs = append(fs, f.Function)
	}
	return fs
}

func checkNoLoss(t *testing.T, c *analyze.Capture) {
	t.Helper()
	if c.Lost.AllocationsDropped != 0 || c.Lost.StackErrors != 0 || c.Lost.PendingDropped != 0 {
		t.Errorf("lost: %+v", c.Lost)
	}
	// With nothing lost and nothing sampled, each site lists exactly its
	// live allocations: one filed under another site (a block counted in
	// a resource's bytes, an earlier image's) would show here.
	if c.SampleBytes != 0 {
		return
	}
	for _, s := range c.Sites {
		if uint64(len(s.Live)) != s.LiveCount {
			t.Errorf("site %d (%s, %s): %d live allocations listed, live count %d", s.ID, s.Kind, stacks.FrameName(*firstFrame(s)), len(s.Live), s.LiveCount)
		}
	}
}

// firstFrame is s's first frame, or an empty one.
func firstFrame(s analyze.Site) *analyze.Frame {
	if len(s.Stack.Frames) == 0 {
		return &analyze.Frame{}
	}
	return s.Stack.Frames[0]
}

func TestLaunchLeakyExact(t *testing.T) {
	testutil.RequireBPF(t)
	bin := buildExample(t, "leaky", true)
	c, stderr := launch(t, bin)
	checkNoLoss(t, c)

	res := analyze.Rank(c, analyze.Options{})
	if len(res.Leaks) < 2 {
		t.Fatalf("want at least 2 leaks, got %d\n%s", len(res.Leaks), stderr)
	}
	first, second := res.Leaks[0], res.Leaks[1]
	if fn := first.Site.Stack.Frames[0].Function; fn != "leak_request_buffer" || first.Count != 100 || first.Bytes != 409600 {
		t.Errorf("rank 1 = %s %d blocks %d bytes, want leak_request_buffer 100 blocks 409600 bytes", fn, first.Count, first.Bytes)
	}
	if fn := second.Site.Stack.Frames[0].Function; fn != "leak_small_tag" || second.Count != 25 || second.Bytes != 1200 {
		t.Errorf("rank 2 = %s %d blocks %d bytes, want leak_small_tag 25 blocks 1200 bytes", fn, second.Count, second.Bytes)
	}
	// With frame pointers the whole chain to main is there, and complete.
	want := []string{"leak_request_buffer", "parse_request", "handle_requests", "main", "__libc_start_call_main"}
	got := functions(*first.Site)
	if strings.Join(got, ",") != strings.Join(want, ",") || first.Site.Stack.Truncated != "" {
		t.Errorf("rank 1 stack = %v (truncated %q), want %v", got, first.Site.Stack.Truncated, want)
	}
	if f := first.Site.Stack.Frames[0]; !strings.HasSuffix(f.File, "leaky.c") || f.Line == 0 || f.Module != bin {
		t.Errorf("rank 1 frame 0 = %+v, want leaky.c:line in %s", f, bin)
	}
	// The allocator the dynamic linker named before the start is marked
	// among the objects the kernel mapped: one, libc.
	var allocators []string
	for _, o := range c.Objects {
		if o.Allocator {
			allocators = append(allocators, o.Path)
		}
	}
	if len(allocators) != 1 || !strings.Contains(allocators[0], "libc.so") {
		t.Errorf("objects marked allocator = %q, want libc's mapping", allocators)
	}
	// Nothing else from the example's own functions is outstanding.
	for _, l := range res.Leaks[2:] {
		if l.Site.Stack.Frames[0].Module == bin {
			t.Errorf("unexpected leak from the example: %v (%d blocks)", functions(*l.Site), l.Count)
		}
	}
	// The churn was seen: 200000 message buffers allocated and freed.
	var churn uint64
	for _, s := range c.Sites {
		if len(s.Stack.Frames) > 0 && s.Stack.Frames[0].Module == bin {
			churn += s.Allocs
		}
	}
	if churn < 200000+125 {
		t.Errorf("example allocations seen = %d, want >= 200125", churn)
	}
}

func TestLaunchLeakyWithoutFramePointers(t *testing.T) {
	testutil.RequireBPF(t)
	bin := buildExample(t, "leaky", false)

	// Frame pointers only: one leak site is still one row. The direct
	// caller is always known (the return address), and the walk stops at
	// code without frame pointers, saying so.
	c, _ := launchWith(t, Options{Unwind: UnwindFP}, bin)
	checkNoLoss(t, c)
	res := analyze.Rank(c, analyze.Options{})
	if len(res.Leaks) == 0 {
		t.Fatal("no leaks")
	}
	first := res.Leaks[0]
	if fn := first.Site.Stack.Frames[0].Function; fn != "leak_request_buffer" || first.Count != 100 || first.Bytes != 409600 {
		t.Errorf("fp: rank 1 = %s %d blocks %d bytes, want leak_request_buffer 100 blocks 409600 bytes", fn, first.Count, first.Bytes)
	}
	if n := len(siteOf(c, "leak_request_buffer")); n != 1 {
		t.Errorf("fp: leak_request_buffer appears as %d sites, want 1", n)
	}
	if tr := first.Site.Stack.Truncated; !strings.Contains(tr, filepath.Base(bin)) || !strings.Contains(tr, "no frame pointers") {
		t.Errorf("fp: truncation reason = %q, want it to name %s and missing frame pointers", tr, filepath.Base(bin))
	}

	// By default the kernel unwinds such code with its .eh_frame rows:
	// the whole chain to main, as valgrind shows it, with exact counts.
	c, _ = launchWith(t, Options{}, bin)
	checkNoLoss(t, c)
	res = analyze.Rank(c, analyze.Options{})
	first = res.Leaks[0]
	want := "leak_request_buffer,parse_request,handle_requests,main,__libc_start_call_main"
	if got := strings.Join(functions(*first.Site), ","); !strings.HasPrefix(got, want) || first.Site.Stack.Truncated != "" ||
		first.Count != 100 || first.Bytes != 409600 {
		t.Errorf("dwarf: rank 1 = %s (truncated %q), %d blocks %d bytes; want %s..., complete, 100 blocks 409600 bytes",
			got, first.Site.Stack.Truncated, first.Count, first.Bytes, want)
	}
	if n := len(siteOf(c, "leak_request_buffer")); n != 1 {
		t.Errorf("dwarf: leak_request_buffer appears as %d sites, want 1", n)
	}
}

// TestDeepStackAcrossChunks: the kernel walk reads the stack in chunks of
// up to 4 KiB; a stack of 24 frames of 1.5 KiB each needs many, and on a
// second thread the last chunks end at the top of its stack mapping. A third
// thread leaks below a frame whose 16 KiB array was never written above its
// first byte, so a chunk read across it faults: the walk still names every
// frame, and that thread's chunks stop at the faulting page from then on
// (one fault there, not one per walk). Every frame is there, with and
// without frame pointers, counts exact.
func TestDeepStackAcrossChunks(t *testing.T) {
	testutil.RequireBPF(t)
	descend := strings.TrimSuffix(strings.Repeat("descend,", 24), ",")
	for _, fp := range []bool{true, false} {
		bin := buildExample(t, "deepstack", fp)
		tr, stderr := launchWait(t, Options{}, bin)
		faults, err := tr.objs.Stat(kernel.StatStackChunkFaults)
		if err != nil {
			tr.Stop()
			t.Fatal(err)
		}
		c, err := tr.Stop()
		if err != nil {
			t.Fatalf("stop: %v", err)
		}
		checkNoLoss(t, c)
		// The gap thread's first walk faults; the main thread's last
		// frames may too (the random gap below its arguments). Without
		// the cap each of the gap thread's 20 walks faulted.
		if faults < 1 || faults > 3 {
			t.Errorf("fp=%v: %d stack chunks faulted, want 1 to 3 (one per thread at most)", fp, faults)
		}
		for _, want := range []struct {
			fn           string
			count, bytes uint64
			chain        string
		}{
			{"leak_deep_main", 5, 480, "leak_deep_main," + descend + ",main,__libc_start_call_main"},
			{"leak_deep_thread", 3, 480, "leak_deep_thread," + descend + ",thread_main,start_thread"},
			{"leak_gap_block", 20, 1280, "leak_gap_block,leave_gap,gap_main,start_thread"},
		} {
			sites := siteOf(c, want.fn)
			if len(sites) != 1 {
				t.Errorf("fp=%v: %s appears as %d sites, want 1\n%s", fp, want.fn, len(sites), stderr)
				continue
			}
			s := sites[0]
			if s.LiveCount != want.count || s.LiveBytes != want.bytes {
				t.Errorf("fp=%v: %s holds %d blocks %d bytes, want %d blocks %d bytes", fp, want.fn, s.LiveCount, s.LiveBytes, want.count, want.bytes)
			}
			if got := strings.Join(functions(s), ","); got != want.chain || s.Stack.Truncated != "" {
				t.Errorf("fp=%v: %s stack = %s (truncated %q), want %s", fp, want.fn, got, s.Stack.Truncated, want.chain)
			}
		}
	}
}

func TestLaunchCleanControl(t *testing.T) {
	testutil.RequireBPF(t)
	bin := buildExample(t, "clean", true)
	c, _ := launch(t, bin)
	checkClean(t, c, bin)
}

// checkClean checks a capture of the clean example bin: nothing lost,
// allocations seen, none of them outstanding.
func checkClean(t *testing.T, c *analyze.Capture, bin string) {
	t.Helper()
	checkNoLoss(t, c)
	var allocs uint64
	for _, s := range c.Sites {
		if len(s.Stack.Frames) == 0 || s.Stack.Frames[0].Module != bin {
			continue
		}
		allocs += s.Allocs
		if s.LiveCount != 0 || s.LiveBytes != 0 {
			t.Errorf("clean example holds %d blocks (%d bytes) from %v", s.LiveCount, s.LiveBytes, functions(s))
		}
	}
	if allocs == 0 {
		t.Fatal("saw no allocations from the clean example at all")
	}
}

// sumSites adds up the sites whose first frame is fn.
func sumSites(c *analyze.Capture, fn string) (count, bytes uint64, stacks [][]string) {
	for _, s := range siteOf(c, fn) {
		count += s.LiveCount
		bytes += s.LiveBytes
		stacks = append(stacks, functions(s))
	}
	return count, bytes, stacks
}

func TestLaunchChurnThreadsExact(t *testing.T) {
	testutil.RequireBPF(t)
	bin := buildExample(t, "churn", true)
	const threads = 4
	c, _ := launch(t, bin, "--threads", "4", "--iterations", "20000")
	checkNoLoss(t, c)
	if n, b, st := sumSites(c, "leak_in_worker"); n != 25*threads || b != 8000*threads {
		t.Errorf("leak_in_worker: %d blocks %d bytes (stacks %v), want %d blocks %d bytes", n, b, st, 25*threads, 8000*threads)
	}
	if n, b, st := sumSites(c, "leak_grown_buffer"); n != threads || b != 5000*threads {
		t.Errorf("leak_grown_buffer: %d blocks %d bytes (stacks %v), want %d blocks %d bytes", n, b, st, threads, 5000*threads)
	}
	// One site per leak, with the whole chain from the thread's start.
	sites := siteOf(c, "leak_in_worker")
	if len(sites) != 1 {
		t.Fatalf("leak_in_worker is %d sites, want 1", len(sites))
	}
	want := "leak_in_worker,run_round,worker_main,start_thread"
	if got := strings.Join(functions(sites[0]), ","); !strings.HasPrefix(got, want) || sites[0].Stack.Truncated != "" {
		t.Errorf("stack %s (truncated %q), want %s", got, sites[0].Stack.Truncated, want)
	}
	// Every other site of the example's own code freed everything.
	for _, s := range c.Sites {
		f := s.Stack.Frames
		if len(f) == 0 || f[0].Module != bin || f[0].Function == "leak_in_worker" || f[0].Function == "leak_grown_buffer" {
			continue
		}
		if s.LiveCount != 0 {
			t.Errorf("churn site %v holds %d blocks", functions(s), s.LiveCount)
		}
	}
	// Live allocations listed with ages agree with the site totals.
	for _, s := range c.Sites {
		var n, b uint64
		for _, a := range s.Live {
			n++
			b += a.Size
		}
		if n != s.LiveCount || b != s.LiveBytes {
			t.Errorf("site %v: live list %d/%d, totals %d/%d", functions(s), n, b, s.LiveCount, s.LiveBytes)
		}
	}
}

// startExample runs bin untraced and returns it once it is running.
func startExample(t *testing.T, bin string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	// Wait until the dynamic linker has mapped libc.
	for i := 0; i < 100; i++ {
		b, _ := os.ReadFile("/proc/" + itoa(cmd.Process.Pid) + "/maps")
		if bytes.Contains(b, []byte("libc.so")) {
			return cmd
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("example never mapped libc")
	return nil
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestAttachRunningProcess(t *testing.T) {
	testutil.RequireBPF(t)
	bin := buildExample(t, "leaky", true)
	// The example waits for a file before working and holds its leaks
	// for 30s: the test creates the file once the probes are attached.
	gate := filepath.Join(t.TempDir(), "go")
	cmd := startExample(t, bin, "--wait-file", gate, "--hold", "30000")
	tr, err := Attach(cmd.Process.Pid, Options{Warnf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tr.Allocator(), "libc.so") {
		t.Errorf("allocator = %s, want libc", tr.Allocator())
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		p, err := tr.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if p.LiveBytes >= 409600+1200 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	c, err := tr.Stop()
	if err != nil {
		t.Fatal(err)
	}
	// The process keeps running, unharmed, after the detach.
	if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("target gone after detach: %v", err)
	}
	if n, b, _ := sumSites(c, "leak_request_buffer"); n != 100 || b != 409600 {
		t.Errorf("leak_request_buffer: %d blocks %d bytes, want 100 and 409600", n, b)
	}
	if n, b, _ := sumSites(c, "leak_small_tag"); n != 25 || b != 1200 {
		t.Errorf("leak_small_tag: %d blocks %d bytes, want 25 and 1200", n, b)
	}
	if len(c.Snapshots) < 2 {
		t.Errorf("%d snapshots, want a series", len(c.Snapshots))
	}
}

func TestAttachTargetExitsMidCapture(t *testing.T) {
	testutil.RequireBPF(t)
	bin := buildExample(t, "leaky", true)
	gate := filepath.Join(t.TempDir(), "go")
	cmd := startExample(t, bin, "--wait-file", gate, "--hold", "200")
	tr, err := Attach(cmd.Process.Pid, Options{Warnf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	for done := false; !done; {
		select {
		case err := <-waited:
			if err != nil {
				t.Fatalf("target: %v", err)
			}
			done = true
		case <-time.After(100 * time.Millisecond):
			tr.Snapshot()
		}
	}
	// The target is gone: its maps cannot be read any more, yet the
	// capture is complete and symbolized from what was seen while alive.
	if _, err := tr.Snapshot(); err != nil {
		t.Logf("snapshot after exit: %v", err)
	}
	c, err := tr.Stop()
	if err != nil {
		t.Fatalf("stop after exit: %v", err)
	}
	if n, b, _ := sumSites(c, "leak_request_buffer"); n != 100 || b != 409600 {
		t.Errorf("leak_request_buffer: %d blocks %d bytes, want 100 and 409600", n, b)
	}
}

func TestDoctorNamesAllocatorAndFramePointers(t *testing.T) {
	testutil.RequireBPF(t)
	bin := buildExample(t, "leaky", false)
	cmd := startExample(t, bin, "--pause-before", "20000")
	checks := Doctor(cmd.Process.Pid, nil)
	byName := map[string][]Check{}
	for _, c := range checks {
		byName[c.Name] = append(byName[c.Name], c)
	}
	for _, host := range []string{"kernel BTF", "privileges", "uprobes", "BPF programs", "target", "allocator"} {
		if len(byName[host]) != 1 || !byName[host][0].OK {
			t.Errorf("%s: %+v", host, byName[host])
		}
	}
	if w := byName["zlib windows"]; len(w) != 1 || !strings.Contains(w[0].Detail, "read from its state") ||
		strings.Contains(w[0].Detail, "counted by the kernel as it exits") != kernel.ExitHookSupported() {
		t.Errorf("zlib windows: %+v, want how windows are counted on this kernel", w)
	}
	if k := byName["kinds"]; len(k) != 1 || !k[0].OK || !strings.Contains(k[0].Detail, "with --maps also mmap.anon, mmap.file and thread") {
		t.Errorf("kinds: %+v, want what is traced by default and what needs --maps", k)
	}
	if d := byName["allocator"][0].Detail; !strings.Contains(d, "libc.so.6") {
		t.Errorf("allocator = %q, want libc", d)
	}
	// glibc's free: the probe goes to the je after test %rdi,%rdi.
	if ps := byName["probe sites"]; len(ps) == 0 || !strings.Contains(ps[0].Detail, "libc.so.6: ") ||
		!strings.Contains(ps[0].Detail, "free+3 je") || !strings.Contains(ps[0].Detail, "(emulated)") {
		t.Errorf("probe sites = %+v, want libc's with free+3", ps)
	}
	// Neither the example (-O2) nor libc keeps frame pointers; both are
	// walked with their unwind tables.
	var sawExe, sawLibc bool
	for _, c := range byName["frame pointers"] {
		unwound := c.OK && strings.Contains(c.Detail, "walked with its unwind table")
		if strings.HasPrefix(c.Detail, bin+": no,") && unwound {
			sawExe = true
		}
		if strings.Contains(c.Detail, "libc.so.6: no,") && unwound {
			sawLibc = true
		}
	}
	if !sawExe || !sawLibc {
		t.Errorf("frame-pointer notes do not say the example and libc have none and are unwound with tables: %+v", byName["frame pointers"])
	}
}

// buildZstreams compiles examples/c/zstreams.c against the system libz or
// with zlib linked statically into the executable.
func buildZstreams(t *testing.T, static bool) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "zstreams")
	args := []string{"-O2", "-g", "-fno-omit-frame-pointer", "-o", out, filepath.Join("..", "examples", "c", "zstreams.c")}
	if static {
		args = append(args, "-Wl,-Bstatic", "-lz", "-Wl,-Bdynamic")
	} else {
		args = append(args, "-lz")
	}
	if b, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc zstreams: %v\n%s", err, b)
	}
	return out
}

// Ground truth from examples/README.md (zlib 1.2.13): a deflate stream
// (deflateInit2, level 6, windowBits 15, memLevel 8) holds 5 blocks,
// 268096 bytes; an inflate stream that has inflated data holds its 7160-byte
// state and its 32768-byte window allocated inside inflate().
func checkZstreams(t *testing.T, c *analyze.Capture) {
	t.Helper()
	checkNoLoss(t, c)
	res := analyze.Rank(c, analyze.Options{})
	if len(res.Leaks) < 2 {
		t.Fatalf("%d leaks, want 2", len(res.Leaks))
	}
	d, i := res.Leaks[0], res.Leaks[1]
	if d.Site.Kind == analyze.KindZlibInflate {
		d, i = i, d // the order is the verdict's (classes first); the counts are this test's
	}
	if d.Site.Kind != analyze.KindZlibDeflate || d.Site.Stack.Frames[0].Function != "open_batch_stream" ||
		d.Count != 30 || d.Bytes != 30*268096 || d.Site.Allocs != 300 || d.Site.Frees != 270 {
		t.Errorf("rank 1 = %s in %s: %d streams, %d bytes, %d/%d init/end; want zlib.deflate in open_batch_stream: 30 streams, %d bytes, 300/270",
			d.Site.Kind, d.Site.Stack.Frames[0].Function, d.Count, d.Bytes, d.Site.Allocs, d.Site.Frees, 30*268096)
	}
	if i.Site.Kind != analyze.KindZlibInflate || i.Site.Stack.Frames[0].Function != "leak_inflater_after_read" ||
		i.Count != 5 || i.Bytes != 5*(7160+32768) {
		t.Errorf("rank 2 = %s in %s: %d streams, %d bytes; want zlib.inflate in leak_inflater_after_read: 5 streams, %d bytes",
			i.Site.Kind, i.Site.Stack.Frames[0].Function, i.Count, i.Bytes, 5*(7160+32768))
	}
	// The 200 inflate streams decode_record ended hold nothing (nor does
	// the example's calibration stream), and zlib's own blocks never show
	// up as malloc rows: they belong to their streams.
	var ended uint64
	for _, s := range c.Sites {
		if s.Kind == analyze.KindZlibInflate && s.Stack.Frames[0].Function != "leak_inflater_after_read" {
			if s.Stack.Frames[0].Function == "decode_record" {
				ended += s.Allocs
			}
			if s.LiveCount != 0 || s.LiveBytes != 0 {
				t.Errorf("ended inflate site %v holds %d streams, %d bytes", functions(s), s.LiveCount, s.LiveBytes)
			}
		}
		if s.Kind == analyze.KindMalloc && s.LiveCount > 0 {
			t.Errorf("malloc row outside a stream: %v holds %d blocks", functions(s), s.LiveCount)
		}
	}
	if ended != 200 {
		t.Errorf("ended inflate streams seen = %d, want 200", ended)
	}
}

func TestZlibStreamsExact(t *testing.T) {
	testutil.RequireBPF(t)
	c, _ := launch(t, buildZstreams(t, false))
	checkZstreams(t, c)
}

func TestZlibLinkedStatically(t *testing.T) {
	testutil.RequireBPF(t)
	bin := buildZstreams(t, true)
	if b, _ := exec.Command("ldd", bin).Output(); bytes.Contains(b, []byte("libz")) {
		t.Fatalf("%s still links libz.so:\n%s", bin, b)
	}
	c, _ := launch(t, bin)
	checkZstreams(t, c)
}

// Without the malloc family (--malloc off), a stream's bytes are computed
// in the kernel from its init arguments: the same exact counts and bytes as
// zlib's mallocs give, shared or static zlib, and nothing else is traced.
func TestZlibStreamsMallocOff(t *testing.T) {
	testutil.RequireBPF(t)
	for _, static := range []bool{false, true} {
		c, _ := launchWith(t, Options{Malloc: MallocOff}, buildZstreams(t, static))
		checkZstreams(t, c)
		if c.Probes == nil || c.Probes.Malloc || !strings.Contains(c.Probes.ZlibBytes, "zlib 1.2.13: inflate_state 7160 B, deflate_state 5952 B") {
			t.Errorf("static %v: probes = %+v, want malloc off and zlib 1.2.13's layout named", static, c.Probes)
		}
		for _, s := range c.Sites {
			if s.Kind == analyze.KindMalloc {
				t.Errorf("static %v: malloc row with malloc off: %v", static, functions(s))
			}
		}
	}
}

// Sampling malloc (--sample-bytes) leaves zlib streams exact: a zlib
// library's are computed from their init arguments, with no probe on
// inflate() and none of its mallocs traced; a zlib linked into the program
// counts its mallocs, traced whether sampled or not.
func TestZlibStreamsSampled(t *testing.T) {
	testutil.RequireBPF(t)
	for _, static := range []bool{false, true} {
		c, _ := launchWith(t, Options{SampleBytes: 4096}, buildZstreams(t, static))
		checkZstreams(t, c)
		computed := strings.Contains(c.Probes.ZlibBytes, "inflate_state 7160 B, deflate_state 5952 B")
		if computed == static {
			t.Errorf("static %v: zlib bytes %q; want computed for libz.so only", static, c.Probes.ZlibBytes)
		}
	}
}

// Under sampling a libz's streams are computed, and only their windows'
// mallocs are left out (counted from the state): zlib's other mallocs
// outside an init, and a window the application's own zalloc makes, are
// ordinary blocks. zwindow --gz 3 --zalloc 2, exact and sampled (an exact
// budget wide enough for every call: weight 1), launched, and sampled
// attached to it and detached while it lives (the windows then read by
// user space, not by the kernel at the exit), must agree with valgrind's
// count of the same run (3 gzFiles of 64,764 bytes: gz_state 240, the
// path 20, buffers 8,192 + 16,384, state 7,160, window 32,768; 2 streams
// of 112 + 7,160 + 32,768):
//   - open_gz's malloc rows 3 × 24,836 bytes, its streams 3 × 39,928;
//   - own_zalloc's windows, malloc rows inside inflate(), 2 × 32,768, and
//     those streams 7,160 each: a window is counted once.
func TestZlibSampledLibraryMallocs(t *testing.T) {
	testutil.RequireBPF(t)
	bin := filepath.Join(t.TempDir(), "zwindow")
	if b, err := exec.Command("gcc", "-O2", "-g", "-o", bin, filepath.Join("..", "examples", "c", "zwindow.c"), "-lz").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, b)
	}
	sampled := Options{SampleBytes: 4096, SampleExact: 1 << 24}
	for _, tc := range []struct {
		name     string
		o        Options
		attached bool
	}{{"exact", Options{}, false}, {"sampled", sampled, false}, {"sampled attached", sampled, true}} {
		var c *analyze.Capture
		if tc.attached {
			c = captureZwindowLive(t, bin, tc.o, "--gz", "3", "--zalloc", "2")
		} else {
			c, _ = launchWith(t, tc.o, bin, "--gz", "3", "--zalloc", "2")
		}
		checkNoLoss(t, c)
		type totals struct{ gzMalloc, gzStreams, ownWindows, streams uint64 }
		var got totals
		for _, s := range c.Sites {
			fs := functions(s)
			switch {
			case s.Kind == analyze.KindMalloc && slices.Contains(fs, "open_gz"):
				got.gzMalloc += s.LiveBytes
			case s.Kind == analyze.KindZlibInflate && slices.Contains(fs, "open_gz"):
				got.gzStreams += s.LiveBytes
			case s.Kind == analyze.KindMalloc && slices.Contains(fs, "own_zalloc") && slices.Contains(fs, "read_first_record"):
				got.ownWindows += s.LiveBytes
			case s.Kind == analyze.KindZlibInflate:
				got.streams += s.LiveBytes
			}
		}
		want := totals{gzMalloc: 3 * (240 + 20 + 8192 + 16384), gzStreams: 3 * (7160 + 32768), ownWindows: 2 * 32768, streams: 8*(7160+32768) + 2*7160}
		if got != want {
			t.Errorf("%s (zlib %q): open_gz malloc %d, open_gz streams %d, own_zalloc windows %d, other streams %d; want %d, %d, %d, %d",
				tc.name, c.Probes.ZlibBytes, got.gzMalloc, got.gzStreams, got.ownWindows, got.streams, want.gzMalloc, want.gzStreams, want.ownWindows, want.streams)
		}
		if computed := strings.Contains(c.Probes.ZlibBytes, "inflate_state"); computed != (tc.o.SampleBytes != 0) {
			t.Errorf("%s: zlib bytes %q: want computed only when sampling", tc.name, c.Probes.ZlibBytes)
		}
	}
}

// captureZwindowLive attaches to zwindow (built at bin) run with args, lets
// it make its streams, and detaches while it still lives.
func captureZwindowLive(t *testing.T, bin string, o Options, args ...string) *analyze.Capture {
	t.Helper()
	dir := t.TempDir()
	gate, errPath := filepath.Join(dir, "go"), filepath.Join(dir, "stderr")
	errFile, err := os.Create(errPath)
	if err != nil {
		t.Fatal(err)
	}
	defer errFile.Close()
	cmd := exec.Command(bin, append([]string{"--late-init", "--wait-file", gate, "--hold", "30000"}, args...)...)
	cmd.Stderr = errFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	for i := 0; ; i++ {
		b, _ := os.ReadFile("/proc/" + itoa(cmd.Process.Pid) + "/maps")
		if bytes.Contains(b, []byte("libz.so")) {
			break
		}
		if i == 500 {
			t.Fatal("zwindow never mapped libz")
		}
		time.Sleep(10 * time.Millisecond)
	}
	o.Warnf = t.Logf
	tr, err := Attach(cmd.Process.Pid, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if b, _ := os.ReadFile(errPath); bytes.Contains(b, []byte("windows of 32768 bytes")) {
			break
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(errPath)
			t.Fatalf("zwindow did not finish its streams in 20 s: %s", b)
		}
	}
	c, err := tr.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("zwindow gone before the detach: %v", err)
	}
	return c
}

// zwindow opens 8 streams with inflateInit_ (windowBits 15) and inflates
// each once, plus 2 it never inflates: 8 windows and 10 states, whether
// the bytes come from zlib's mallocs or are computed. A stream that never
// inflated holds no window.
func TestZlibWindowCountedAtFirstInflate(t *testing.T) {
	testutil.RequireBPF(t)
	bin := filepath.Join(t.TempDir(), "zwindow")
	if b, err := exec.Command("gcc", "-O2", "-g", "-o", bin, filepath.Join("..", "examples", "c", "zwindow.c"), "-lz").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, b)
	}
	for _, mode := range []string{MallocOn, MallocOff} {
		c, _ := launchWith(t, Options{Malloc: mode}, bin, "--idle", "2")
		checkNoLoss(t, c)
		var n, b uint64
		for _, s := range c.Sites {
			if s.Kind == analyze.KindZlibInflate {
				n += s.LiveCount
				b += s.LiveBytes
			}
		}
		if want := uint64(8*(7160+32768) + 2*7160); n != 10 || b != want {
			t.Errorf("--malloc %s: %d inflate streams, %d bytes; want 10, %d", mode, n, b, want)
		}
	}
}

// A stream copied with inflateCopy (not probed: no init made the copy) has
// its state and window allocated by zlib while the source's state is live
// in zlib's code. Neither is the source stream's window: the source's
// window is allocated already, and a state is only 7160 bytes. With malloc
// traced, they are malloc rows of copy_stream, and the source streams keep
// exactly their own bytes.
func TestZlibCopyIsNotTheSourceWindow(t *testing.T) {
	testutil.RequireBPF(t)
	bin := filepath.Join(t.TempDir(), "zwindow")
	if b, err := exec.Command("gcc", "-O2", "-g", "-o", bin, filepath.Join("..", "examples", "c", "zwindow.c"), "-lz").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, b)
	}
	c, _ := launchWith(t, Options{Malloc: MallocOn}, bin, "--copy", "3")
	checkNoLoss(t, c)
	if n, b, _ := inflateTotals(c); n != 8 || b != 8*(7160+32768) {
		t.Errorf("%d inflate streams, %d bytes; want 8, %d", n, b, 8*(7160+32768))
	}
	var copied uint64
	for _, s := range c.Sites {
		if s.Kind == analyze.KindMalloc && slices.Contains(functions(s), "copy_stream") {
			copied += s.LiveBytes
		}
	}
	if want := uint64(3 * (112 + 7160 + 32768)); copied != want {
		t.Errorf("malloc rows of copy_stream hold %d bytes, want %d", copied, want)
	}
}

// With malloc not traced, inflate() is not probed: a window is read from
// the stream's state, by user space at every snapshot while the target
// lives (attached, then detached from a live target), and by the kernel as
// the target exits (attached, the target exits before the capture ends).
func TestZlibWindowReadFromStateAttached(t *testing.T) {
	testutil.RequireBPF(t)
	bin := filepath.Join(t.TempDir(), "zwindow")
	if b, err := exec.Command("gcc", "-O2", "-g", "-o", bin, filepath.Join("..", "examples", "c", "zwindow.c"), "-lz").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, b)
	}
	const want = 8*(7160+32768) + 2*7160
	for _, exits := range []bool{false, true} {
		if exits && !kernel.ExitHookSupported() {
			t.Log("skipping a target that exits first: this kernel's sched_process_exit has no group_dead (it runs after the memory is gone)")
			continue
		}
		gate := filepath.Join(t.TempDir(), "go")
		hold := "30000"
		if exits {
			hold = "0"
		}
		cmd := startExample(t, bin, "--late-init", "--idle", "2", "--wait-file", gate, "--hold", hold)
		tr, err := Attach(cmd.Process.Pid, Options{Malloc: MallocOff, Warnf: t.Logf})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(gate, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if exits {
			cmd.Wait()
		} else {
			var p Progress
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
				if p, err = tr.Snapshot(); err != nil {
					t.Fatal(err)
				}
				if p.LiveCount == 10 && p.LiveBytes == want {
					break
				}
			}
			if p.LiveCount != 10 || p.LiveBytes != want {
				t.Errorf("snapshot of the live target: %d streams, %d bytes; want 10, %d (windows read from memory)", p.LiveCount, p.LiveBytes, want)
			}
		}
		c, err := tr.Stop()
		if err != nil {
			t.Fatal(err)
		}
		if !exits {
			if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
				t.Errorf("target gone after detach: %v", err)
			}
		}
		n, b, live := inflateTotals(c)
		if n != 10 || b != want || live != want {
			t.Errorf("target exits %v: %d streams, %d bytes (live allocations %d B); want 10, %d", exits, n, b, live, want)
		}
		if len(c.Warnings) > 0 {
			t.Errorf("target exits %v: warnings %q", exits, c.Warnings)
		}
	}
}

// inflateTotals sums the live inflate streams of c: their count, their
// bytes by the sites' totals, and their bytes by the live allocations.
func inflateTotals(c *analyze.Capture) (n, bytes, live uint64) {
	for _, s := range c.Sites {
		if s.Kind != analyze.KindZlibInflate {
			continue
		}
		n += s.LiveCount
		bytes += s.LiveBytes
		for _, a := range s.Live {
			live += a.Size
		}
	}
	return n, bytes, live
}

// A stream initialised again without inflateEnd is lost to the program,
// state and window: it stays live, with its window, beside the new stream
// (whose window comes with its own read). Both ways of counting agree: 10
// streams, 10 windows.
func TestZlibReinitKeepsOldStreamAndWindow(t *testing.T) {
	testutil.RequireBPF(t)
	bin := filepath.Join(t.TempDir(), "zwindow")
	if b, err := exec.Command("gcc", "-O2", "-g", "-o", bin, filepath.Join("..", "examples", "c", "zwindow.c"), "-lz").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, b)
	}
	const want = 10 * (7160 + 32768)
	for _, mode := range []string{MallocOn, MallocOff} {
		c, _ := launchWith(t, Options{Malloc: mode}, bin, "--reinit", "2")
		checkNoLoss(t, c)
		n, b, live := inflateTotals(c)
		if n != 10 || b != want || live != want {
			t.Errorf("--malloc %s: %d inflate streams, %d bytes (live allocations %d B); want 10, %d", mode, n, b, live, want)
		}
	}
}

// TestPlainProbes runs the leaky and zstreams ground truths with one perf
// link per probe and no uprobe session, the path taken on kernels without
// uprobe_multi links (before 6.6) or sessions (before 6.13).
func TestPlainProbes(t *testing.T) {
	testutil.RequireBPF(t)
	forcePlainProbes = true
	defer func() { forcePlainProbes = false }()
	c, _ := launch(t, buildExample(t, "leaky", true))
	checkNoLoss(t, c)
	res := analyze.Rank(c, analyze.Options{})
	if len(res.Leaks) < 2 || res.Leaks[0].Count != 100 || res.Leaks[0].Bytes != 409600 || res.Leaks[1].Count != 25 || res.Leaks[1].Bytes != 1200 ||
		res.Leaks[0].Site.Stack.Frames[0].Function != "leak_request_buffer" || res.Leaks[1].Site.Stack.Frames[0].Function != "leak_small_tag" {
		t.Errorf("leaky with plain probes: %d leaks, want rank 1 leak_request_buffer 100/409600, rank 2 leak_small_tag 25/1200", len(res.Leaks))
	}
	c, _ = launch(t, buildZstreams(t, false))
	checkZstreams(t, c)
}

// A walk that finds this CPU's walk scratch held (by a walk the kernel
// preempted, on a fully preemptible kernel) keeps its allocation, under an
// unknown stack, and says so. Held here from user space on every CPU, as
// a preempted walk would hold it: every allocation is still counted
// exactly, none has a stack, each is a stack error, and the warning names
// the cause.
func TestWalkScratchHeldLosesOnlyStacks(t *testing.T) {
	testutil.RequireBPF(t)
	bin := buildExample(t, "leaky", true)
	gate := filepath.Join(t.TempDir(), "go")
	cmd := startExample(t, bin, "--wait-file", gate)
	var mu sync.Mutex
	var warnings []string
	warnf := func(f string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		warnings = append(warnings, fmt.Sprintf(f, a...))
	}
	tr, err := Attach(cmd.Process.Pid, Options{Warnf: warnf})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.objs.HoldStackWindows(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("target: %v", err)
	}
	c, err := tr.Stop()
	if err != nil {
		t.Fatal(err)
	}
	var n, b uint64
	for _, s := range c.Sites {
		if len(s.Stack.Frames) > 0 && s.LiveCount > 0 {
			t.Errorf("a site with a stack: %v", s.Stack.Frames)
		}
		n += s.LiveCount
		b += s.LiveBytes
	}
	if n != 125 || b != 409600+1200 {
		t.Errorf("%d blocks, %d bytes live; want 125, %d", n, b, 409600+1200)
	}
	// Every allocation that returned was walked: leaky's own mallocs
	// (200,000 messages, 100 requests' scratch and buffers, 25 tags),
	// libc's, each once.
	if c.Lost.StackErrors < 200000+200+25 {
		t.Errorf("stack errors %d, want every allocation (>= %d)", c.Lost.StackErrors, 200000+200+25)
	}
	mu.Lock()
	defer mu.Unlock()
	found := false
	for _, w := range warnings {
		found = found || strings.Contains(w, "preempted a stack walk")
	}
	if !found {
		t.Errorf("no warning names the preempted walk: %q", warnings)
	}
}

// --probes-only attaches the same probes (the malloc family, exact and
// sampled) with programs that return at once: the target runs, and
// nothing is counted or lost.
func TestProbesOnlyCountsNothing(t *testing.T) {
	testutil.RequireBPF(t)
	bin := buildExample(t, "leaky", true)
	for _, sample := range []uint64{0, 512 << 10} {
		c, _ := launchWith(t, Options{ProbesOnly: true, SampleBytes: sample}, bin)
		if len(c.Sites) != 0 {
			t.Errorf("sample %d: %d sites, want none", sample, len(c.Sites))
		}
		if c.Lost != (analyze.Lost{}) {
			t.Errorf("sample %d: lost %+v, want nothing", sample, c.Lost)
		}
		if c.Probes == nil || !c.Probes.Malloc {
			t.Errorf("sample %d: probes %v, want the malloc family", sample, c.Probes)
		}
	}
}
