//go:build !(linux && amd64)

package main

import (
	"context"
	"fmt"
	"runtime"
)

// Off Linux on amd64 there is nothing to trace with: no eBPF uprobes, and
// the stack walker of the BPF object is x86-64 code. report, diff and
// report --http work on a capture made elsewhere.

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
	return fmt.Errorf("%s needs Linux on amd64 (this is %s/%s): the BPF stack walker is x86-64 code; report, diff and report --http work here on a capture saved with --save", cmd, runtime.GOOS, runtime.GOARCH)
}
