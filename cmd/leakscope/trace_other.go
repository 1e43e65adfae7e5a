//go:build !(linux && amd64)

package main

import (
	"context"
	"fmt"
	"runtime"
)

// Off Linux on amd64 there is nothing to trace with: no eBPF uprobes off
// Linux; on linux/arm64 a BPF object is built, but the tracer around it
// (probe sites, the stack walker's frame rules) is x86-64's and tracing
// there is not validated. report, diff and report --http work on a
// capture made elsewhere.

const canTrace = false

func runShim() {}

func runRun(ctx context.Context, opts *runOptions, io ioStreams) error {
	return errNoTracer("run")
}

func runAttach(ctx context.Context, opts *attachOptions, io ioStreams) error {
	return errNoTracer("attach")
}

func runAgent(ctx context.Context, opts *agentOptions, io ioStreams) error {
	return errNoTracer("agent")
}

func runDoctor(opts *doctorOptions, io ioStreams) error {
	return errNoTracer("doctor")
}

// errNoTracer is the one line a tracing command prints here (exit 2).
func errNoTracer(cmd string) error {
	return fmt.Errorf("%s needs Linux on amd64 (this is %s/%s): %s; report, diff and report --http work here on a capture saved with --save",
		cmd, runtime.GOOS, runtime.GOARCH, noTracerReason(runtime.GOOS, runtime.GOARCH))
}

// noTracerReason says why goos/goarch cannot trace.
func noTracerReason(goos, goarch string) string {
	switch {
	case goos != "linux":
		return "tracing uses eBPF uprobes, which only Linux has"
	case goarch == "arm64":
		return "the arm64 BPF object is built, but tracing with it is not validated (the probe sites and the stack walker's frame rules are x86-64's)"
	default:
		return "the BPF object is built for amd64 and arm64 only"
	}
}
