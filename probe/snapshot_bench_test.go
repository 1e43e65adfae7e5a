//go:build linux && amd64

package probe

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leakscope/leakscope/internal/testutil"
)

// BenchmarkSnapshot traces examples/bench/stacks_storm.c, which holds 1M
// live allocations on 100k distinct stacks, and measures what the issue's
// snapshot target is about:
//   - ns/op: one periodic Snapshot (read the 100k per-site totals; every
//     stack already resolved), what leakscope does every --interval;
//   - first-ms: the first Snapshot, which also reads and resolves the
//     100k new stacks (validation and symbolization);
//   - stop-ms: Stop after the target exited: detach every probe, read the
//     sites and the 1M live allocations, and build the capture;
//   - hwm-MiB: the peak RSS of this process (VmHWM) at the end, the
//     tracer's own memory with 1M live allocations on 100k stacks (the
//     test binary and the compiler's output add a few MiB).
//
// It needs root, gcc, and about 10 s to let the target allocate under the
// probes; it skips with the reason otherwise.
func BenchmarkSnapshot(b *testing.B) {
	testutil.RequireBPF(b)
	const stacks, perStack = 100_000, 10
	bin := filepath.Join(b.TempDir(), "stacks_storm")
	src := filepath.Join("..", "examples", "bench", "stacks_storm.c")
	if out, err := exec.Command("gcc", "-O2", "-g", "-fno-omit-frame-pointer", "-o", bin, src).CombinedOutput(); err != nil {
		testutil.SkipOrFail(b, fmt.Sprintf("gcc %s: %v\n%s", src, err, out))
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	defer pr.Close()
	opts := Options{MaxSites: 1 << 17, MaxStacks: 1 << 17, Warnf: b.Logf}
	argv := []string{bin, "--stacks", strconv.Itoa(stacks), "--per-stack", strconv.Itoa(perStack)}
	tr, proc, err := Launch(argv, Stdio{Err: pw}, opts)
	pw.Close()
	if err != nil {
		b.Fatalf("launch: %v", err)
	}
	stopped := false
	defer func() {
		if !stopped {
			proc.Signal(syscall.SIGKILL)
			<-proc.Done()
			tr.Stop()
		}
	}()

	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "ready") {
				ready <- sc.Text()
				return
			}
		}
		close(ready)
	}()
	start := time.Now()
	select {
	case line, ok := <-ready:
		if !ok {
			b.Fatal("stacks_storm exited before it was ready")
		}
		b.Logf("%s (%.1fs under the probes)", line, time.Since(start).Seconds())
	case <-time.After(3 * time.Minute):
		b.Fatal("stacks_storm not ready after 3 minutes")
	}

	t0 := time.Now()
	p, err := tr.Snapshot()
	if err != nil {
		b.Fatal(err)
	}
	first := time.Since(t0)
	if p.LiveCount < stacks*perStack {
		b.Fatalf("first snapshot: %d live allocations, want at least %d", p.LiveCount, stacks*perStack)
	}
	for b.Loop() {
		if _, err := tr.Snapshot(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()

	if err := proc.Signal(syscall.SIGTERM); err != nil {
		b.Fatal(err)
	}
	<-proc.Done()
	t1 := time.Now()
	c, err := tr.Stop()
	stopped = true
	if err != nil {
		b.Fatal(err)
	}
	stop := time.Since(t1)
	var live int
	for _, s := range c.Sites {
		live += len(s.Live)
	}
	b.ReportMetric(float64(first.Milliseconds()), "first-ms")
	b.ReportMetric(float64(stop.Milliseconds()), "stop-ms")
	b.ReportMetric(float64(p.Sites), "sites")
	if hwm, err := vmHWM(); err == nil {
		b.ReportMetric(float64(hwm)/(1<<20), "hwm-MiB")
	}
	b.ReportMetric(float64(live), "live-allocs")
	if lost := c.Lost; lost.AllocationsDropped+lost.StackErrors > 0 {
		b.Logf("lost: %+v", lost)
	}
}

// vmHWM returns this process's peak resident set size in bytes.
func vmHWM() (uint64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmHWM in /proc/self/status")
}
