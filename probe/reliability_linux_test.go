//go:build linux && amd64

package probe

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/testutil"
)

// buildC compiles examples/c/<name>.c with frame pointers and extra flags
// (libraries) into a temporary directory.
func buildC(t *testing.T, name string, extra ...string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), name)
	args := append([]string{"-O2", "-g", "-Wall", "-pthread", "-fno-omit-frame-pointer", "-o", out,
		filepath.Join("..", "examples", "c", name+".c")}, extra...)
	if b, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s", name, err, b)
	}
	return out
}

// launchWait starts argv under the tracer, waits for it to exit 0 and
// returns the tracer still attached, so its maps can be inspected, and the
// command's stderr.
func launchWait(t *testing.T, opts Options, argv ...string) (*Tracer, string) {
	t.Helper()
	tr, proc, stderr := startLaunch(t, opts, argv...)
	select {
	case <-proc.Done():
	case <-time.After(120 * time.Second):
		proc.Signal(syscall.SIGKILL)
		<-proc.Done()
		tr.Stop()
		t.Fatalf("%s did not exit within 120s", argv[0])
	}
	if code := proc.ExitCode(); code != 0 {
		tr.Stop()
		t.Fatalf("%s exited %d: %s", argv[0], code, stderr.String())
	}
	return tr, stderr.String()
}

// liveOf sums the live totals and acquisitions of the sites of kind whose
// first frame is fn.
func liveOf(c *analyze.Capture, kind analyze.Kind, fn string) (count, bytes, allocs, frees uint64, n int) {
	for _, s := range c.Sites {
		if s.Kind != kind || len(s.Stack.Frames) == 0 || s.Stack.Frames[0].Function != fn {
			continue
		}
		count += s.LiveCount
		bytes += s.LiveBytes
		allocs += s.Allocs
		frees += s.Frees
		n++
	}
	return count, bytes, allocs, frees, n
}

// A live-allocation table of 64 entries against leaky with no churn:
// request i mallocs a scratch block, then its leaked 4096-byte buffer, then
// frees the scratch. Requests 0..62 fit (63 buffers live, the 64th slot
// used by each scratch in turn); from request 63 on every buffer is dropped
// (37), the first 48-byte tag takes the free slot and the other 24 are
// dropped: 61 dropped, 63 + 1 tracked. No free is unknown, since every
// scratch block found a slot.
func TestLaunchFullTableCountsDrops(t *testing.T) {
	testutil.RequireBPF(t)
	bin := buildC(t, "leaky")
	var warned []string
	tr, _ := launchWait(t, Options{MaxAllocations: 64}, bin, "--messages", "0", "--hold", "300")
	tr.opts.Warnf = func(f string, a ...any) { warned = append(warned, f) }
	c, err := tr.Stop()
	if err != nil {
		t.Fatal(err)
	}
	want := analyze.Lost{AllocationsDropped: 61}
	if c.Lost != want {
		t.Errorf("lost = %+v, want %+v", c.Lost, want)
	}
	if n, b, a, _, _ := liveOf(c, analyze.KindMalloc, "leak_request_buffer"); n != 63 || b != 63*4096 || a != 63 {
		t.Errorf("leak_request_buffer: %d blocks, %d bytes, %d allocs; want 63, %d, 63", n, b, a, 63*4096)
	}
	if n, b, a, _, _ := liveOf(c, analyze.KindMalloc, "leak_small_tag"); n != 1 || b != 48 || a != 1 {
		t.Errorf("leak_small_tag: %d blocks, %d bytes, %d allocs; want 1, 48, 1", n, b, a)
	}
	res := analyze.Rank(c, analyze.Options{})
	if res.Totals.OutstandingCount != 64 {
		t.Errorf("outstanding %d allocations, want 64 (the table's size)", res.Totals.OutstandingCount)
	}
	wantWarn := "61 allocations were not tracked: the live-allocation table (64 entries) was full; raise --max-allocations"
	if len(c.Warnings) != 1 || c.Warnings[0] != wantWarn {
		t.Errorf("warnings = %q, want [%q]", c.Warnings, wantWarn)
	}
	if len(warned) != 1 {
		t.Errorf("Warnf called %d times, want once", len(warned))
	}
}

// forker's children run the parent's code with inherited probes; only the
// traced process counts. Each child frees its copies of the 20 blocks the
// parent holds: counted, they would release the parent's live ones.
func TestLaunchForkCountsOnlyTheParent(t *testing.T) {
	testutil.RequireBPF(t)
	bin := buildC(t, "forker")
	tr, stderr := launchWait(t, Options{}, bin, "--children", "4", "--churn", "2000")
	c, err := tr.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if c.Lost != (analyze.Lost{}) {
		t.Errorf("lost = %+v, want none", c.Lost)
	}
	for _, tc := range []struct {
		fn                   string
		count, bytes, allocs uint64
	}{
		{"leak_before_fork", 10, 10000, 10},
		{"hold_inherited", 20, 14000, 20},
		{"leak_after_fork", 10, 20000, 10},
		{"leak_in_child", 0, 0, 0},
	} {
		n, b, a, f, _ := liveOf(c, analyze.KindMalloc, tc.fn)
		if n != tc.count || b != tc.bytes || a != tc.allocs || f != 0 {
			t.Errorf("%s: %d blocks, %d bytes, %d allocs, %d frees; want %d, %d, %d, 0",
				tc.fn, n, b, a, f, tc.count, tc.bytes, tc.allocs)
		}
	}
	// The parent's churn only: 2000 pairs, not 5 × 2000.
	if n, _, a, f, _ := liveOf(c, analyze.KindMalloc, "churn"); n != 0 || a != 2000 || f != 2000 {
		t.Errorf("churn: %d live, %d allocs, %d frees; want 0, 2000, 2000", n, a, f)
	}
	res := analyze.Rank(c, analyze.Options{})
	if res.Totals.OutstandingCount != 40 || res.Totals.OutstandingBytes != 44000 {
		t.Errorf("outstanding %d blocks, %d bytes; want 40, 44000\n%s", res.Totals.OutstandingCount, res.Totals.OutstandingBytes, stderr)
	}
}

// 2000 threads in waves of 32; every 10th ends inside inflateInit2_ (its
// return is never seen) and every one calls inflate(), which leaves
// per-thread state until the thread ends. Once the process is gone, no
// per-thread state may remain, and the counts are exact.
func TestLaunchThreadStormLeavesNoPerThreadState(t *testing.T) {
	testutil.RequireBPF(t)
	bin := buildC(t, "threadstorm", "-lz")
	const threads = 2000
	tr, stderr := launchWait(t, Options{}, bin, "--threads", "2000", "--concurrency", "32", "--die-every", "10")
	if !strings.Contains(stderr, "died in inflateInit2_ 200") {
		tr.Stop()
		t.Fatalf("example summary: %s", stderr)
	}
	// Per-thread state lives in task storage, which the kernel frees
	// with each thread (TestSpecLayout, probe/kernel): nothing can outlive the
	// threads.
	c, err := tr.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if c.Lost.AllocationsDropped != 0 || c.Lost.PendingDropped != 0 || c.Lost.StackErrors != 0 || c.Lost.FreesMissed != 0 {
		t.Errorf("lost = %+v", c.Lost)
	}
	if n, b, a, f, sites := liveOf(c, analyze.KindMalloc, "leak_per_thread"); n != threads || b != 64*threads || a != threads || f != 0 || sites != 1 {
		t.Errorf("leak_per_thread: %d blocks, %d bytes, %d allocs, %d frees in %d sites; want %d, %d, %d, 0 in 1",
			n, b, a, f, sites, threads, 64*threads, threads)
	}
	if n, _, a, f, _ := liveOf(c, analyze.KindMalloc, "thread_churn"); n != 0 || a != 16*threads || f != 16*threads {
		t.Errorf("thread_churn: %d live, %d allocs, %d frees; want 0, %d, %d", n, a, f, 16*threads, 16*threads)
	}
	// inflateInit_ from inflate_payload: every stream ended; the threads
	// that died inside inflateInit2_ created none.
	if n, b, a, f, _ := liveOf(c, analyze.KindZlibInflate, "inflate_payload"); n != 0 || b != 0 || a != threads || f != threads {
		t.Errorf("inflate_payload streams: %d live (%d bytes), %d inits, %d ends; want 0 (0), %d, %d", n, b, a, f, threads, threads)
	}
	if n, _, a, _, _ := liveOf(c, analyze.KindZlibInflate, "die_in_inflate_init"); n != 0 || a != 0 {
		t.Errorf("die_in_inflate_init: %d live, %d inits; want none", n, a)
	}
}

// execer leaks 10 blocks, then execs itself; the new image leaks 5. The
// exec destroyed the first image's heap: its blocks are not leaks of the
// program running at the end, and the report must not list them as such.
// What it held is said in a warning. The kernel tags every allocation and
// site with the image that made it (exec_gen).
func TestLaunchExecReportsTheNewImage(t *testing.T) {
	testutil.RequireBPF(t)
	bin := buildC(t, "execer")
	tr, stderr := launchWait(t, Options{}, bin, "--churn", "1000", "--hold", "300")
	c, err := tr.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if n, b, a, _, _ := liveOf(c, analyze.KindMalloc, "leak_after_exec"); n != 5 || b != 15000 || a != 5 {
		t.Errorf("leak_after_exec: %d blocks, %d bytes, %d allocs; want 5, 15000, 5", n, b, a)
	}
	res := analyze.Rank(c, analyze.Options{})
	if res.Totals.OutstandingCount != 5 || res.Totals.OutstandingBytes != 15000 {
		for _, l := range res.Leaks {
			t.Logf("leak: %s %d blocks %d bytes at %v (%s)", l.Site.Kind, l.Count, l.Bytes, functions(*l.Site), l.Site.Stack.Truncated)
		}
		t.Errorf("outstanding %d blocks, %d bytes; want only the new image's 5, 15000\n%s",
			res.Totals.OutstandingCount, res.Totals.OutstandingBytes, stderr)
	}
	found := false
	for _, w := range c.Warnings {
		found = found || strings.Contains(w, "exec") && strings.Contains(w, "10 allocations")
	}
	if !found {
		t.Errorf("warnings %q do not say the exec released the first image's 10 allocations", c.Warnings)
	}
}

// Attaching to a process in the middle of its churn: probes go on one by
// one, over seconds on a busy machine. A block allocated and freed in that
// window must not stay live for good, so only leaky's real leaks and the
// messages in flight (at most 32) or a request's scratch (at most 1) may be
// held at the end.
func TestAttachDuringChurnNoFalseLeaks(t *testing.T) {
	testutil.RequireBPF(t)
	bin := buildC(t, "leaky")
	cmd := startExample(t, bin, "--forever", "--interval", "1", "--requests", "1", "--tags", "1", "--messages", "20000")
	tr, err := Attach(cmd.Process.Pid, Options{Warnf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	c, err := tr.Stop()
	if err != nil {
		t.Fatal(err)
	}
	limits := map[string]uint64{"process_message": 32, "parse_request": 1, "leak_request_buffer": 1 << 62, "leak_small_tag": 1 << 62}
	var churned uint64
	for _, s := range c.Sites {
		fn := ""
		if len(s.Stack.Frames) > 0 {
			fn = s.Stack.Frames[0].Function
		}
		if fn == "process_message" {
			churned += s.Allocs
		}
		if max, ok := limits[fn]; !ok && s.LiveCount > 0 || s.LiveCount > max {
			t.Errorf("%v holds %d blocks (%d allocs, %d frees): freed blocks counted as live", functions(s), s.LiveCount, s.Allocs, s.Frees)
		}
	}
	if churned == 0 {
		t.Fatal("no churn traced: the test proves nothing")
	}
}

// A command the kernel stopped in exit() whose record was not handled
// before the capture ended (exit_stop still set) is continued by Stop,
// never left stopped.
func TestStopContinuesCommandStoppedInExit(t *testing.T) {
	testutil.RequireBPF(t)
	tr, proc, err := Launch([]string{"sleep", "30"}, Stdio{Out: os.Stdout, Err: os.Stderr}, Options{Warnf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		proc.Signal(syscall.SIGKILL)
		<-proc.Done()
	}()
	pid := tr.Pid()
	state := func() byte {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0
		}
		i := bytes.LastIndexByte(b, ')')
		return b[i+2]
	}
	for deadline := time.Now().Add(10 * time.Second); state() != 'S'; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("sleep never ran: state %c", state())
		}
	}
	// As exit_call leaves it: stopped, its flag set, no record read.
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); state() != 'T'; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not stopped: state %c", state())
		}
	}
	if err := tr.objs.MarkExitStop(); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Stop(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); state() == 'T'; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the command is still stopped after Stop")
		}
	}
}
