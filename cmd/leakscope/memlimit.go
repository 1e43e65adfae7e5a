package main

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/spf13/cobra"

	"github.com/leakscope/leakscope/analyze"
)

// defaultMemoryLimit is --memory-limit's default: leakscope's own memory
// (Go heap and runtime) when attached to a production process. With it,
// 1M live allocations on 100k stacks peak at ~90 MiB of RSS, ~13 MiB of
// it the binary's code; without it, ~125 MiB (docs/performance.md).
const defaultMemoryLimit = "72MiB"

// memoryBudget is --memory-limit: a soft limit on leakscope's own memory
// (runtime/debug.SetMemoryLimit). Near the limit the collector runs more
// often and returns freed pages to the system at once; it never fails an
// allocation. A capture whose live data needs more than the limit raises
// it (budgetFor), so the collector does not run without end: the limit
// follows the live heap, checked every 100 ms, and comes back down.
type memoryBudget struct {
	flag  string
	limit int64 // 0: none
	set   bool  // start set a limit: stop restores prev
	prev  int64 // the limit before start
	// done ends the goroutine that follows the live heap (nil: none
	// runs), which closes stopped as it returns.
	done, stopped chan struct{}
}

// register adds --memory-limit to root and every command under it. It
// applies in root's PersistentPreRunE, after the one root had: a command
// under root with a PersistentPreRunE of its own must call root's.
func (b *memoryBudget) register(root *cobra.Command) {
	root.PersistentFlags().StringVar(&b.flag, "memory-limit", defaultMemoryLimit,
		"soft limit on leakscope's own memory (Go heap and runtime; the binary's code is ~13 MiB more of RSS): "+
			"the collector works harder near it, and it rises when the capture's live data needs more. "+
			"0: none, not even GOMEMLIMIT's. GOMEMLIMIT in the environment replaces the default")
	prev := root.PersistentPreRunE
	root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		if prev != nil {
			if err := prev(cmd, args); err != nil {
				return err
			}
		}
		return b.start(cmd)
	}
}

// start applies the limit and starts following the live heap.
func (b *memoryBudget) start(cmd *cobra.Command) error {
	n, err := analyze.ParseSize(b.flag)
	if err != nil || n > math.MaxInt64/2 {
		return fmt.Errorf("--memory-limit %q: want a size such as 72MiB, or 0 for no limit", b.flag)
	}
	f := cmd.Flag("memory-limit")
	given := f != nil && f.Changed
	if !given && os.Getenv("GOMEMLIMIT") != "" {
		return nil // the environment's limit stands
	}
	if n == 0 {
		if given { // no limit, not even GOMEMLIMIT's
			b.prev, b.set = debug.SetMemoryLimit(math.MaxInt64), true
		}
		return nil
	}
	b.limit = int64(n)
	b.prev, b.set = debug.SetMemoryLimit(b.limit), true
	b.done, b.stopped = make(chan struct{}), make(chan struct{})
	go b.follow()
	return nil
}

// stop ends following the live heap and restores the limit before start.
func (b *memoryBudget) stop() {
	if b.done != nil {
		close(b.done)
		<-b.stopped
		b.done = nil
	}
	if b.set {
		debug.SetMemoryLimit(b.prev)
		b.set = false
	}
}

// budgetSamples are the runtime metrics follow reads: the live heap as of
// the last collection, and what the memory limit counts besides the heap
// (goroutine stacks, the runtime's metadata and buffers).
var budgetSamples = []string{
	"/gc/heap/live:bytes",
	"/memory/classes/total:bytes",
	"/memory/classes/heap/released:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/heap/free:bytes",
}

func (b *memoryBudget) follow() {
	defer close(b.stopped)
	samples := make([]metrics.Sample, len(budgetSamples))
	for i, name := range budgetSamples {
		samples[i].Name = name
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	cur := b.limit
	for {
		select {
		case <-b.done:
			return
		case <-tick.C:
		}
		metrics.Read(samples)
		v := func(i int) int64 {
			if samples[i].Value.Kind() != metrics.KindUint64 {
				return 0
			}
			return int64(samples[i].Value.Uint64())
		}
		live := v(0)
		other := v(1) - v(2) - v(3) - v(4) - v(5)
		if want := budgetFor(b.limit, live, other); want != cur {
			debug.SetMemoryLimit(want)
			cur = want
		}
	}
}

// budgetFor is the memory limit for a live heap of live bytes and other
// bytes of the runtime's own: the configured limit, unless the heap
// could not then grow 25% past its live data between collections. At the
// limit Go collects each time the heap reaches it: a limit at the live
// heap would have it collect without end (up to half the CPU). Rounded
// up to MiB, so that small changes do not reset it.
func budgetFor(limit, live, other int64) int64 {
	const mib = 1 << 20
	need := (live + live/4 + other + mib - 1) / mib * mib
	return max(limit, need)
}
