//go:build linux && amd64

package probe

import (
	"os"
	"strconv"

	"github.com/leakscope/leakscope/analyze"
)

// Go targets need nothing special to trace: cgo and libraries call libc's
// malloc and zlib like any C code. What differs is how their stacks are
// read: Go code keeps frame pointers, so a walk continues through it
// (symbolize.Object.FramePointerShare recognizes Go's prologues); a cgo
// call runs C on the thread's stack while its frame pointers lead back to
// the goroutine's, so the kernel may follow that switch in objects
// flagged RANGE_GO; and Go code is named from the binary's .gopclntab,
// inlined calls included, even when it is stripped.

// detectRuntime records the runtime of the target's executable: Go, with
// the toolchain version, when the executable carries Go build information.
// It runs whenever the mappings change: before run's exec shim execs the
// command, the executable is leakscope itself.
func (v *mappingView) detectRuntime() {
	exe, err := os.Readlink("/proc/" + strconv.Itoa(v.pid) + "/exe")
	if err != nil {
		return
	}
	if self, err := os.Executable(); err == nil && exe == self {
		return // run's exec shim, not yet the command
	}
	v.runtime, v.runtimeVersion, v.goModule = analyze.RuntimeNative, "", ""
	if o, ok := v.objs[exe]; ok && o.GoVersion != "" {
		v.runtime, v.runtimeVersion, v.goModule = analyze.RuntimeGo, o.GoVersion, o.GoModule
	}
}

// expectExec records the runtime of the executable a launched command is
// about to exec, for a command that exits before its mappings are read.
func (v *mappingView) expectExec(path string) {
	v.runtime, v.runtimeVersion, v.goModule = analyze.RuntimeNative, "", ""
	if o, err := v.cache.Object(path); err == nil && o.GoVersion != "" {
		v.runtime, v.runtimeVersion, v.goModule = analyze.RuntimeGo, o.GoVersion, o.GoModule
	}
}

// goCode reports whether the object at path is a Go binary whose Go code
// the kernel walk may follow onto another stack.
func (v *mappingView) goCode(path string) bool {
	o, ok := v.objs[path]
	return ok && o.Go()
}

// target describes the traced process as known now.
func (t *Tracer) target() analyze.Target {
	tg := analyze.Target{Pid: t.pid, Command: t.command, Runtime: t.view.runtime, RuntimeVersion: t.view.runtimeVersion, GoModule: t.view.goModule,
		AttachedAfter: t.attachedAfter, Execs: t.execs}
	if t.stops.Count > 0 {
		st := t.stops
		tg.Stops = &st
	}
	if tg.Runtime == "" {
		tg.Runtime = analyze.RuntimeNative
	}
	if j := t.jit; j.runtime != "" {
		tg.Runtime, tg.RuntimeVersion = j.runtime, j.version // jvm_linux.go
	}
	return tg
}
