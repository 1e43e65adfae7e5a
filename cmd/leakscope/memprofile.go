package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"

	"github.com/leakscope/leakscope/probe/procfs"
)

// With LEAKSCOPE_MEMPROFILE set, the heap profile records an allocation
// every 4 KiB on average, not 512 KiB: the tables it is for are made of
// many small objects.
func init() {
	if os.Getenv("LEAKSCOPE_MEMPROFILE") != "" {
		runtime.MemProfileRate = 4096
	}
}

// memProfile writes a heap profile at a named stage of a run or report,
// for measuring leakscope's own memory: with LEAKSCOPE_MEMPROFILE=PREFIX
// in the environment it collects garbage, writes PREFIX.STAGE.pb.gz and
// prints the live heap and the peak RSS since the stage before to stderr.
// Without it, it does nothing. The collections it forces change what it
// measures: do not time a run with it.
func memProfile(stage string) {
	prefix := os.Getenv("LEAKSCOPE_MEMPROFILE")
	if prefix == "" {
		return
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	mib := func(b uint64) float64 { return float64(b) / (1 << 20) }
	fmt.Fprintf(os.Stderr, "leakscope: memprofile %s: heap %.1f MiB live, %.1f in spans, %.1f idle (%.1f released), runtime %.1f; %d collections; %s\n",
		stage, mib(ms.HeapAlloc), mib(ms.HeapInuse), mib(ms.HeapIdle), mib(ms.HeapReleased), mib(ms.Sys-ms.HeapSys), ms.NumGC, peakRSS())
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

// peakRSS reads the process's peak RSS (VmHWM) since the previous stage,
// then resets it (clear_refs 5), so each stage names its own phase's peak.
func peakRSS() string {
	st, err := procfs.ReadStatus(os.Getpid())
	if err != nil {
		return "peak RSS unknown: " + err.Error()
	}
	peak := fmt.Sprintf("peak RSS since the previous stage %d kB", st.VmHWM)
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		peak += " (not reset: " + err.Error() + ")"
	}
	return peak
}
