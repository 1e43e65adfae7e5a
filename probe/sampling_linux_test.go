//go:build linux && amd64

package probe

import (
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/testutil"
)

// Sampled by bytes, the large leak is still found at rank 1, estimated
// close to its 100 blocks of 4096 bytes; nothing else of the churn
// (200000 messages) outranks it, and frees of untraced blocks are no loss.
func TestLaunchSampled(t *testing.T) {
	testutil.RequireBPF(t)
	bin := buildExample(t, "leaky", true)
	c, _ := launchWith(t, Options{SampleBytes: 4096}, bin)
	if c.SampleBytes != 4096 {
		t.Errorf("capture SampleBytes = %d", c.SampleBytes)
	}
	if c.Lost.UnknownFrees != 0 || c.Lost.AllocationsDropped != 0 {
		t.Errorf("lost = %+v", c.Lost)
	}
	res := analyze.Rank(c, analyze.Options{})
	if len(res.Leaks) == 0 {
		t.Fatal("no leaks")
	}
	l := res.Leaks[0]
	// Each 4096-byte block is traced with probability 1-1/e (63%): 100
	// blocks give 63 +- 5 traced (one sigma), each standing for 1.58.
	if fn := l.Site.Stack.Frames[0].Function; fn != "leak_request_buffer" || l.Count < 70 || l.Count > 130 ||
		l.Bytes < 70*4096 || l.Bytes > 130*4096 {
		t.Errorf("rank 1 = %s, %d blocks, %d bytes; want leak_request_buffer, 100 +- 30 blocks of 4096 bytes", fn, l.Count, l.Bytes)
	}
}

// A block grown with realloc is sampled as any allocation of its new size:
// churn's leak_grown_buffer (malloc(100), realloc to 1000, realloc to 5000,
// never freed) is estimated from the traced fraction of its blocks, about
// 1-exp(-5000/32768) = 14% of them, each weighing 1/p = 7.1; a realloc
// traced whatever the sampling would count every block 7.1 times. The truth is
// churn's own count (its summary line). The bound is 5 standard deviations
// of the binomial count of traced blocks; leak_in_worker (posix_memalign,
// no realloc) is held to the same bound.
func TestSampledReallocEstimate(t *testing.T) {
	testutil.RequireBPF(t)
	const mean = 32 << 10
	bin := buildExample(t, "churn", true)
	c, stderr := launchWith(t, Options{SampleBytes: mean}, bin,
		"--threads", "2", "--iterations", "100", "--forever", "--interval", "1", "--duration", "3000")
	m := regexp.MustCompile(`leaked (\d+) blocks, (\d+) bytes in leak_in_worker; leaked (\d+) blocks, (\d+) bytes in leak_grown_buffer`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no summary line from churn: %s", stderr)
	}
	atoi := func(s string) float64 { n, _ := strconv.Atoi(s); return float64(n) }
	for _, k := range []struct {
		fn            string
		blocks, bytes float64
		size          uint64
	}{
		{"leak_grown_buffer", atoi(m[3]), atoi(m[4]), 5000},
		{"leak_in_worker", atoi(m[1]), atoi(m[2]), 320},
	} {
		var traced int
		var count, bytes uint64
		for _, s := range siteOf(c, k.fn) {
			traced += len(s.Live)
			count += s.LiveCount
			bytes += s.LiveBytes
		}
		p := 1 / analyze.SampleWeight(k.size, mean)
		lo, hi := tracedRange(uint64(k.blocks), p)
		t.Logf("%s: %.0f blocks, %.0f bytes; %d traced (expected %.1f, %d to %d), estimated %d blocks, %d bytes",
			k.fn, k.blocks, k.bytes, traced, k.blocks*p, lo, hi, count, bytes)
		if k.blocks < 500 {
			t.Fatalf("%s: churn leaked only %.0f blocks: too few for the bound", k.fn, k.blocks)
		}
		if traced < lo || traced > hi {
			t.Errorf("%s: %d blocks traced of %.0f, expected %.1f (%d to %d)", k.fn, traced, k.blocks, k.blocks*p, lo, hi)
		}
		checkEstimate(t, k.fn, count, bytes, 0, lo, hi, p, k.size)
	}
}

// leakyCounts is leaky's summary line: what leak_request_buffer and
// leak_small_tag leaked.
func leakyCounts(t *testing.T, stderr string) (reqBlocks, reqBytes, tagBlocks, tagBytes uint64) {
	t.Helper()
	m := regexp.MustCompile(`leaked (\d+) blocks, (\d+) bytes in leak_request_buffer; leaked (\d+) blocks, (\d+) bytes in leak_small_tag`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no summary line from leaky: %s", stderr)
	}
	n := func(s string) uint64 { v, _ := strconv.ParseUint(s, 10, 64); return v }
	return n(m[1]), n(m[2]), n(m[3]), n(m[4])
}

// launchFor launches argv, lets it run for d, stops it with SIGTERM and
// returns its capture and standard error.
func launchFor(t *testing.T, opts Options, d time.Duration, argv ...string) (*analyze.Capture, string) {
	t.Helper()
	tr, proc, stderr := startLaunch(t, opts, argv...)
	time.Sleep(d)
	proc.Signal(syscall.SIGTERM)
	select {
	case <-proc.Done():
	case <-time.After(30 * time.Second):
		proc.Signal(syscall.SIGKILL)
		t.Fatalf("%s did not exit within 30s of SIGTERM", argv[0])
	}
	c, err := tr.Stop()
	if err != nil {
		t.Fatalf("stop: %v", err)
	}
	return c, stderr.String()
}

// leakRow is the ranked row of the site whose first frame is fn.
func leakRow(t *testing.T, res *analyze.Result, fn string) *analyze.Leak {
	t.Helper()
	for i := range res.Leaks {
		if f := res.Leaks[i].Site.Stack.Frames; len(f) > 0 && f[0].Function == fn {
			return &res.Leaks[i]
		}
	}
	return nil
}

// A program that allocates rarely, sampled every 512 KiB, is traced
// exactly by the default exact budget: leaky leaking a few 4096-byte
// request buffers and 48-byte tags a round (each traced by the byte
// sampler alone with a chance of 0.8% and 0.01%) is reported with its
// own counts and bytes, its rows not estimates, no call past the budget.
// With the budget off the same leaks are estimates, held to the bound of
// TestSampledReallocEstimate: 5 standard deviations of the binomial
// count of traced blocks.
func TestSampledExactBudgetSmallLeaks(t *testing.T) {
	testutil.RequireBPF(t)
	const mean = 512 << 10
	bin := buildExample(t, "leaky", true)
	args := []string{bin, "--forever", "--interval", "100", "--messages", "2", "--requests", "2", "--tags", "1"}

	c, stderr := launchFor(t, Options{SampleBytes: mean, SampleExact: DefaultSampleExact}, 1500*time.Millisecond, args...)
	reqBlocks, reqBytes, tagBlocks, tagBytes := leakyCounts(t, stderr)
	e := c.ExactBudget
	t.Logf("exact budget %+v; leaky leaked %d + %d blocks", e, reqBlocks, tagBlocks)
	if e == nil || e.Past != 0 || e.Calls < 2*reqBlocks+tagBlocks {
		t.Fatalf("exact budget %+v: want every call within it (past 0), at least %d calls", e, 2*reqBlocks+tagBlocks)
	}
	res := analyze.Rank(c, analyze.Options{})
	for _, k := range []struct {
		fn            string
		blocks, bytes uint64
	}{{"leak_request_buffer", reqBlocks, reqBytes}, {"leak_small_tag", tagBlocks, tagBytes}} {
		l := leakRow(t, res, k.fn)
		if l == nil {
			t.Errorf("%s: no row", k.fn)
			continue
		}
		if l.Count != k.blocks || l.Bytes != k.bytes || l.Estimate || l.CountError != 0 {
			t.Errorf("%s: %d blocks, %d bytes (estimate %v ±%.1f); want exactly %d, %d", k.fn, l.Count, l.Bytes, l.Estimate, l.CountError, k.blocks, k.bytes)
		}
	}

	c, stderr = launchFor(t, Options{SampleBytes: mean}, 1500*time.Millisecond, args...)
	reqBlocks, reqBytes, tagBlocks, tagBytes = leakyCounts(t, stderr)
	if c.ExactBudget != nil {
		t.Errorf("budget off: exact budget %+v", c.ExactBudget)
	}
	res = analyze.Rank(c, analyze.Options{})
	for _, k := range []struct {
		fn            string
		blocks, bytes float64
		size          uint64
	}{{"leak_request_buffer", float64(reqBlocks), float64(reqBytes), 4096}, {"leak_small_tag", float64(tagBlocks), float64(tagBytes), 48}} {
		var count, bytes uint64
		if l := leakRow(t, res, k.fn); l != nil {
			count, bytes = l.Count, l.Bytes
			if !l.Estimate {
				t.Errorf("budget off: %s is not an estimate", k.fn)
			}
		}
		p := 1 / analyze.SampleWeight(k.size, mean)
		lo, hi := tracedRange(uint64(k.blocks), p)
		t.Logf("budget off: %s: %.0f blocks, estimated %d (%d to %d traced)", k.fn, k.blocks, count, lo, hi)
		checkEstimate(t, "budget off: "+k.fn, count, bytes, 0, lo, hi, p, k.size)
	}
}

// An allocation storm sampled every 512 KiB with the default exact
// budget: the known leak (1000 × 64 B from leak_storm_block, made in a
// burst before the storm threads start) is reported, partly traced by the
// budget (weight 1) and the rest left to the byte sampler, whose 64-byte
// blocks weigh 8192 each; its estimate is held to 5 standard deviations
// of the sampled part, and the budget traced at most its calls per
// second on each CPU over the capture, plus one jiffy's worth per CPU
// for the jiffy under way at the start.
func TestSampledExactBudgetStorm(t *testing.T) {
	testutil.RequireBPF(t)
	const mean = 512 << 10
	bin := filepath.Join(t.TempDir(), "alloc_storm")
	src := filepath.Join("..", "examples", "bench", "alloc_storm.c")
	if b, err := exec.Command("gcc", "-O2", "-g", "-fno-omit-frame-pointer", "-pthread", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc alloc_storm: %v\n%s", err, b)
	}
	c, _ := launchWith(t, Options{SampleBytes: mean, SampleExact: DefaultSampleExact}, bin, "--pairs", "300000")
	e := c.ExactBudget
	if e == nil {
		t.Fatal("no exact budget in the capture")
	}
	perJiffy := float64(exactPerJiffy(mean, DefaultSampleExact))
	cpus := float64(runtime.NumCPU())
	bound := float64(e.PerSecond)*c.Duration.Seconds()*cpus + perJiffy*cpus
	t.Logf("exact budget %+v over %s on %.0f CPUs: bound %.0f", e, c.Duration, cpus, bound)
	if float64(e.Calls) > bound || e.Calls == 0 || e.Past == 0 {
		t.Errorf("exact budget traced %d calls (%d past it): want 1 to %.0f, some past it", e.Calls, e.Past, bound)
	}
	res := analyze.Rank(c, analyze.Options{})
	l := leakRow(t, res, "leak_storm_block")
	if l == nil {
		t.Fatal("leak_storm_block not reported")
	}
	var exact int
	for _, s := range siteOf(c, "leak_storm_block") {
		for i := range s.Live {
			if s.Weight(i) == 1 {
				exact++
			}
		}
	}
	p := 1 / analyze.SampleWeight(64, mean)
	lo, hi := tracedRange(uint64(1000-exact), p)
	t.Logf("leak_storm_block: %d blocks (≈ ±%.0f), %d bytes; %d traced by the budget, %d to %d of the rest sampled", l.Count, l.CountError, l.Bytes, exact, lo, hi)
	if !l.Estimate || exact == 0 {
		t.Errorf("leak_storm_block: estimate %v, %d blocks traced by the budget; want an estimate with some exact", l.Estimate, exact)
	}
	checkEstimate(t, "leak_storm_block", l.Count, l.Bytes, exact, lo, hi, p, 64)
}

// The tick rate is read from a kernel configuration's CONFIG_HZ, or
// measured from /proc/timer_list's jiffies (which must agree), and the
// budget per tick rounds down, at least 1.
func TestKernelHZ(t *testing.T) {
	if hz := parseConfigHZ(strings.NewReader("CONFIG_HZ_250=y\n# CONFIG_HZ_1000 is not set\nCONFIG_HZ=250\n")); hz != 250 {
		t.Errorf("parseConfigHZ = %d, want 250", hz)
	}
	if hz := parseConfigHZ(strings.NewReader("CONFIG_NO_HZ=y\n")); hz != 0 {
		t.Errorf("parseConfigHZ without CONFIG_HZ = %d, want 0", hz)
	}
	if j, ok := parseTimerListJiffies([]byte("Timer List Version: v0.10\n  .last_jiffies   : 4295333950\njiffies: 4295333951\n")); !ok || j != 4295333951 {
		t.Errorf("parseTimerListJiffies = %d, %v", j, ok)
	}
	hz := kernelHZ()
	t.Logf("HZ %d", hz)
	if hz < 100 || hz > 1000 {
		t.Errorf("kernelHZ = %d", hz)
	}
	if os.Geteuid() == 0 { // /proc/timer_list is root's
		if m := measureHZ(); m != hz {
			t.Errorf("measured HZ %d, configured %d", m, hz)
		}
	}
	if n := exactPerJiffy(512<<10, 10000); n != 10000/hz {
		t.Errorf("exactPerJiffy(10000/s) = %d at HZ %d", n, hz)
	}
	if n := exactPerJiffy(512<<10, 1); n != 1 {
		t.Errorf("exactPerJiffy(1/s) = %d, want 1", n)
	}
	if n := exactPerJiffy(0, 10000); n != 0 {
		t.Errorf("exactPerJiffy without sampling = %d, want 0", n)
	}
}

// tracedRange is the range a binomial count of n trials with probability
// p falls in but for a chance of 1e-7 on either side, from its exact
// distribution: the sampled part of a leak that small Poisson-like counts
// (a mean of 0.1 traced blocks) cannot be held to standard deviations.
func tracedRange(n uint64, p float64) (lo, hi int) {
	const tail = 1e-7
	lg := func(x float64) float64 { v, _ := math.Lgamma(x); return v }
	pmf := func(k uint64) float64 {
		return math.Exp(lg(float64(n)+1) - lg(float64(k)+1) - lg(float64(n-k)+1) +
			float64(k)*math.Log(p) + float64(n-k)*math.Log1p(-p))
	}
	var below float64
	lo = -1
	for k := uint64(0); k <= n; k++ {
		below += pmf(k)
		if lo < 0 && below > tail {
			lo = int(k)
		}
		if 1-below < tail {
			return lo, int(k)
		}
	}
	return lo, int(n)
}

// checkEstimate holds a sampled row's estimate (count blocks, bytes of
// size-byte blocks) to exact blocks traced with weight 1 plus lo to hi
// sampled blocks of weight 1/p each, give or take one for rounding.
func checkEstimate(t *testing.T, name string, count, bytes uint64, exact, lo, hi int, p float64, size uint64) {
	t.Helper()
	minN, maxN := float64(exact)+float64(lo)/p-1, float64(exact)+float64(hi)/p+1
	if c := float64(count); c < minN || c > maxN {
		t.Errorf("%s: estimated %d blocks, want %.0f to %.0f (%d exact, %d to %d sampled)", name, count, minN, maxN, exact, lo, hi)
	}
	if b := float64(bytes); b < minN*float64(size) || b > maxN*float64(size) {
		t.Errorf("%s: estimated %d bytes, want %.0f to %.0f", name, bytes, minN*float64(size), maxN*float64(size))
	}
}
