//go:build linux

package kernel

import "github.com/cilium/ebpf"

// Program names one program of the object, for attaching.
type Program int

// The programs: the malloc family's entries, their shared return and the
// session program; the dynamic linker's and exit()'s hooks; the exec,
// fork and exit tracing programs; zlib's, the declared pairs' and the
// mapping and thread programs.
const (
	MallocEnter Program = iota
	CallocEnter
	ReallocEnter
	ReallocarrayEnter
	PosixMemalignEnter
	MemalignEnter
	VallocEnter
	PvallocEnter
	FreeEnter
	AllocExit
	AllocSession
	DlDebugState
	ExitCall
	TargetExec
	TargetFork
	TargetExit
	ZlibInflateInitEnter
	ZlibDeflateInitEnter
	ZlibInflateEndEnter
	ZlibDeflateEndEnter
	ZlibInflateEnter
	PairAcquireEnter
	PairReleaseEnter
	MmapExit
	MunmapExit
	MremapExit
	ThreadStart
	ThreadExit
)

// programs are each Program's plain program and, for those with one, its
// uprobe_multi twin (TWINS in ebpf/leakscope.bpf.c).
func (o *Objects) programs(p Program) (plain, multi *ebpf.Program) {
	j := &o.objs
	switch p {
	case MallocEnter:
		return j.MallocEnter, nil
	case CallocEnter:
		return j.CallocEnter, nil
	case ReallocEnter:
		return j.ReallocEnter, nil
	case ReallocarrayEnter:
		return j.ReallocarrayEnter, nil
	case PosixMemalignEnter:
		return j.PosixMemalignEnter, nil
	case MemalignEnter:
		return j.MemalignEnter, nil
	case VallocEnter:
		return j.VallocEnter, nil
	case PvallocEnter:
		return j.PvallocEnter, nil
	case FreeEnter:
		return j.FreeEnter, j.FreeEnterMulti
	case AllocExit:
		return j.AllocExit, j.AllocExitMulti
	case AllocSession:
		return j.AllocSession, nil
	case DlDebugState:
		return j.DlDebugState, j.DlDebugStateMulti
	case ExitCall:
		return j.ExitCall, j.ExitCallMulti
	case TargetExec:
		return j.TargetExec, nil
	case TargetFork:
		return j.TargetFork, nil
	case TargetExit:
		return j.TargetExit, nil
	case ZlibInflateInitEnter:
		return j.ZlibInflateInitEnter, j.ZlibInflateInitEnterMulti
	case ZlibDeflateInitEnter:
		return j.ZlibDeflateInitEnter, j.ZlibDeflateInitEnterMulti
	case ZlibInflateEndEnter:
		return j.ZlibInflateEndEnter, j.ZlibInflateEndEnterMulti
	case ZlibDeflateEndEnter:
		return j.ZlibDeflateEndEnter, j.ZlibDeflateEndEnterMulti
	case ZlibInflateEnter:
		return j.ZlibInflateEnter, j.ZlibInflateEnterMulti
	case PairAcquireEnter:
		return j.PairAcquireEnter, j.PairAcquireEnterMulti
	case PairReleaseEnter:
		return j.PairReleaseEnter, j.PairReleaseEnterMulti
	case MmapExit:
		return j.MmapExit, nil
	case MunmapExit:
		return j.MunmapExit, nil
	case MremapExit:
		return j.MremapExit, nil
	case ThreadStart:
		return j.ThreadStart, nil
	case ThreadExit:
		return j.ThreadExit, nil
	}
	return nil, nil
}

// Program returns program p, for a plain (perf) link.
func (o *Objects) Program(p Program) *ebpf.Program {
	if !o.loadedWalker(p, false) {
		return nil // not prepared (Prepare)
	}
	plain, _ := o.programs(p)
	return plain
}

// Multi returns the uprobe_multi twin of program p, nil if it has none.
func (o *Objects) Multi(p Program) *ebpf.Program {
	if !o.loadedWalker(p, true) {
		return nil // not prepared (Prepare)
	}
	_, multi := o.programs(p)
	return multi
}
