//go:build linux && amd64

package probe

import (
	"math"
	"regexp"
	"strconv"
	"testing"

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
		sd := math.Sqrt(k.blocks * p * (1 - p)) // of the traced count
		t.Logf("%s: %.0f blocks, %.0f bytes; %d traced (expected %.1f +- %.1f), estimated %d blocks, %d bytes",
			k.fn, k.blocks, k.bytes, traced, k.blocks*p, sd, count, bytes)
		if k.blocks < 500 {
			t.Fatalf("%s: churn leaked only %.0f blocks: too few for the bound", k.fn, k.blocks)
		}
		if d := math.Abs(float64(traced) - k.blocks*p); d > 5*sd {
			t.Errorf("%s: %d blocks traced of %.0f, expected %.1f +- %.1f (5 sd)", k.fn, traced, k.blocks, k.blocks*p, 5*sd)
		}
		if d := math.Abs(float64(count) - k.blocks); d > 5*sd/p {
			t.Errorf("%s: estimated %d blocks, want %.0f +- %.0f (5 sd)", k.fn, count, k.blocks, 5*sd/p)
		}
		if d := math.Abs(float64(bytes) - k.bytes); d > 5*sd/p*float64(k.size) {
			t.Errorf("%s: estimated %d bytes, want %.0f +- %.0f (5 sd)", k.fn, bytes, k.bytes, 5*sd/p*float64(k.size))
		}
	}
}
