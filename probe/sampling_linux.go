//go:build linux && amd64

package probe

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/probe/kernel"
)

// exactPerJiffy is the kernel's exact budget (sample_exact) for perSecond
// calls a second per CPU: perSecond/HZ calls a jiffy, rounded down, and at
// least 1 (so a perSecond below HZ still traces HZ calls a second). 0 when
// not sampling or off.
func exactPerJiffy(sampleBytes uint64, perSecond uint32) uint32 {
	if sampleBytes == 0 || perSecond == 0 {
		return 0
	}
	return max(1, perSecond/kernelHZ())
}

var (
	hzOnce  sync.Once
	hzValue uint32
)

// kernelHZ is the kernel's tick rate (CONFIG_HZ), the rate of
// bpf_jiffies64: from the kernel's configuration (/proc/config.gz,
// /boot/config-RELEASE), else measured from /proc/timer_list's jiffies
// over 100 ms, else 1000, the highest in use, so the budget is never more
// than asked.
func kernelHZ() uint32 {
	hzOnce.Do(func() {
		hzValue = configHZ()
		if hzValue == 0 {
			hzValue = measureHZ()
		}
		if hzValue == 0 {
			hzValue = 1000
		}
	})
	return hzValue
}

// configHZ reads CONFIG_HZ from the running kernel's configuration; 0 if
// none is found.
func configHZ() uint32 {
	if f, err := os.Open("/proc/config.gz"); err == nil {
		defer f.Close()
		if z, err := gzip.NewReader(f); err == nil {
			if hz := parseConfigHZ(z); hz > 0 {
				return hz
			}
		}
	}
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return 0
	}
	f, err := os.Open("/boot/config-" + unix.ByteSliceToString(u.Release[:]))
	if err != nil {
		return 0
	}
	defer f.Close()
	return parseConfigHZ(f)
}

// parseConfigHZ returns CONFIG_HZ of a kernel configuration; 0 if absent.
func parseConfigHZ(r io.Reader) uint32 {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CONFIG_HZ="); ok {
			if hz, err := strconv.ParseUint(v, 10, 32); err == nil && hz > 0 {
				return uint32(hz)
			}
		}
	}
	return 0
}

// measureHZ counts jiffies over 100 ms in /proc/timer_list (root only) and
// returns the nearest tick rate in use; 0 if it cannot be read.
func measureHZ() uint32 {
	read := func() (uint64, bool) {
		b, err := os.ReadFile("/proc/timer_list")
		if err != nil {
			return 0, false
		}
		return parseTimerListJiffies(b)
	}
	j0, ok := read()
	t0 := time.Now()
	if !ok {
		return 0
	}
	time.Sleep(100 * time.Millisecond)
	j1, ok := read()
	if !ok || j1 <= j0 {
		return 0
	}
	rate := float64(j1-j0) / time.Since(t0).Seconds()
	best := uint32(0)
	for _, hz := range []uint32{100, 250, 300, 1000} {
		if best == 0 || math.Abs(rate-float64(hz)) < math.Abs(rate-float64(best)) {
			best = hz
		}
	}
	return best
}

// parseTimerListJiffies returns the "jiffies:" line of /proc/timer_list.
func parseTimerListJiffies(b []byte) (uint64, bool) {
	for line := range bytes.Lines(b) {
		if v, ok := strings.CutPrefix(string(bytes.TrimSpace(line)), "jiffies: "); ok {
			n, err := strconv.ParseUint(v, 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// bitset is a set of small integers (kernel site slots).
type bitset []uint64

func (b *bitset) set(i uint32) {
	if need := int(i/64) + 1; need > len(*b) {
		*b = append(*b, make([]uint64, need-len(*b))...)
	}
	(*b)[i/64] |= 1 << (i % 64)
}

func (b bitset) has(i uint32) bool { return int(i/64) < len(b) && b[i/64]&(1<<(i%64)) != 0 }

// scaleTotalsLocked turns the totals of a sampled malloc kernel site (one
// not of the exact budget) into estimates as a snapshot reads them: every
// count weighed by analyze.SampleWeight of its live blocks' mean size,
// the weight of the last read that found some live bytes (ref.weight), or
// 1 before any was: live blocks of 0 bytes have no mean size to weigh by.
// The capture's series and the agent's points are these; an exact
// budget's site is read as it is.
func (t *Tracer) scaleTotalsLocked(ref *siteRef, v kernel.Totals) kernel.Totals {
	if v.LiveCount > 0 && v.LiveBytes >= v.LiveCount {
		ref.weight = float32(analyze.SampleWeight(v.LiveBytes/v.LiveCount, t.opts.SampleBytes))
	}
	w := float64(ref.weight)
	if w <= 1 {
		return v
	}
	scale := func(n uint64) uint64 { return uint64(math.Round(float64(n) * w)) }
	return kernel.Totals{LiveCount: scale(v.LiveCount), LiveBytes: scale(v.LiveBytes), Allocs: scale(v.Allocs), Frees: scale(v.Frees)}
}

// exactBudgetLocked is the exact budget's numbers so far; nil without
// one.
func (t *Tracer) exactBudgetLocked() (*analyze.ExactBudget, error) {
	perJiffy := exactPerJiffy(t.opts.SampleBytes, t.opts.SampleExact)
	if perJiffy == 0 {
		return nil, nil
	}
	calls, err := t.objs.Stat(kernel.StatExactBudget)
	if err != nil {
		return nil, err
	}
	past, err := t.objs.BudgetPast()
	if err != nil {
		return nil, err
	}
	return &analyze.ExactBudget{PerSecond: perJiffy * kernelHZ(), Calls: calls, Past: past}, nil
}

// scaleSampled makes a sampled capture's malloc sites' live totals the
// Horvitz–Thompson estimates of their live allocations, each weighed by
// LiveWeights (readLiveLocked): a block of the exact budget by 1. Their
// allocs, frees and series were scaled as the snapshots read them
// (scaleTotalsLocked). Resources are never sampled.
func scaleSampled(c *analyze.Capture, mean uint64) {
	c.SampleBytes = mean
	for i := range c.Sites {
		s := &c.Sites[i]
		if s.Kind != analyze.KindMalloc || len(s.Live) == 0 {
			continue
		}
		var count, bytes float64
		for j := range s.Live {
			w := s.Weight(j)
			count += w
			bytes += w * float64(s.Live[j].Size)
		}
		s.LiveCount, s.LiveBytes = uint64(math.Round(count)), uint64(math.Round(bytes))
	}
}
