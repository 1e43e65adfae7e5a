package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
)

// memProfile writes a heap profile at a named stage of a run or report,
// for measuring leakscope's own memory: with LEAKSCOPE_MEMPROFILE=PREFIX
// in the environment it collects garbage, writes PREFIX.STAGE.pb.gz and
// prints the live heap to stderr. Without it, it does nothing. The
// collection it forces changes what it measures: do not time a run with it.
func memProfile(stage string) {
	prefix := os.Getenv("LEAKSCOPE_MEMPROFILE")
	if prefix == "" {
		return
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	mib := func(b uint64) float64 { return float64(b) / (1 << 20) }
	fmt.Fprintf(os.Stderr, "leakscope: memprofile %s: heap %.1f MiB live, %.1f in spans, %.1f idle (%.1f released), runtime %.1f; %d collections\n",
		stage, mib(ms.HeapAlloc), mib(ms.HeapInuse), mib(ms.HeapIdle), mib(ms.HeapReleased), mib(ms.Sys-ms.HeapSys), ms.NumGC)
	f, err := os.Create(prefix + "." + stage + ".pb.gz")
	if err != nil {
		fmt.Fprintf(os.Stderr, "leakscope: memprofile: %v\n", err)
		return
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		fmt.Fprintf(os.Stderr, "leakscope: memprofile: %v\n", err)
	}
}
