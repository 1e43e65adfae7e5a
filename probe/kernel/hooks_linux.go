//go:build linux

package kernel

import "github.com/cilium/ebpf"

// The methods below put the kernel's state where the programs would, for
// the tracer's tests of what follows from it.

// HoldStackWindows marks every CPU's stack scratch busy, as a walk
// preempted on it would leave it: walks then fail and count
// STAT_WALKS_PREEMPTED.
func (o *Objects) HoldStackWindows() error {
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		return err
	}
	held := make([]leakStackWindow, cpus)
	for i := range held {
		held[i].Busy = 1
	}
	return o.objs.StackWindows.Update(uint32(0), held, ebpf.UpdateAny)
}

// MarkExitStop sets exit_stop, as exit_call does when it stops the
// process in exit().
func (o *Objects) MarkExitStop() error { return o.objs.ExitStop.Set(uint32(1)) }
