//go:build linux && amd64

package probe

import "github.com/leakscope/leakscope/analyze"

// target describes the traced process as known now.
func (t *Tracer) target() analyze.Target {
	rt, version, goModule := t.view.Runtime()
	tg := analyze.Target{Pid: t.pid, Command: t.command, Runtime: rt, RuntimeVersion: version, GoModule: goModule,
		AttachedAfter: t.attachedAfter, Execs: t.execs.cmds}
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
