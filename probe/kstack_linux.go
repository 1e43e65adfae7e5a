//go:build linux && amd64

package probe

import (
	"fmt"
	"hash/fnv"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/probe/stacks"
)

// A kernel stack entry with stackJVMMethod set holds the Method* of the
// interpreted frame before it and its bytecode index + 1
// (STACK_JVM_METHOD in ebpf/leakscope.h, enum stack_jvm).
const (
	stackJVMMethod     = 1 << leakStackJvmSTACK_JVM_METHOD_BIT
	stackJVMMethodMask = 1<<leakStackJvmSTACK_JVM_BCI_SHIFT - 1
	stackJVMBCIShift   = leakStackJvmSTACK_JVM_BCI_SHIFT
	stackJVMBCIMask    = 1<<leakStackJvmSTACK_JVM_BCI_BITS - 1
)

// decodeStack appends the entries of kernel stack raw to buf: its return
// addresses and the Method* and bytecode index of its interpreted frames.
func decodeStack(raw *leakStack, buf []stacks.Entry) []stacks.Entry {
	n := min(int(raw.Depth), len(raw.Ips))
	for _, ip := range raw.Ips[:n] {
		if ip&stackJVMMethod != 0 {
			bci := int(ip>>stackJVMBCIShift&stackJVMBCIMask) - 1
			buf = append(buf, stacks.Entry{Addr: ip & stackJVMMethodMask, BCI: bci, Method: true})
			continue
		}
		buf = append(buf, stacks.Entry{Addr: ip})
	}
	return buf
}

// stackFlagBits are the kernel's stack flags (enum stack_flag) and what
// each says of a walk.
var stackFlagBits = []struct {
	kernel leakStackFlag
	flag   stacks.Flags
}{
	{leakStackFlagSTACK_NO_FP, stacks.NoFP},
	{leakStackFlagSTACK_UNWIND_UNSUPPORTED, stacks.UnwindUnsupported},
	{leakStackFlagSTACK_UNWIND_END, stacks.UnwindEnd},
	{leakStackFlagSTACK_BAD_FRAME, stacks.BadFrame},
	{leakStackFlagSTACK_READ_ERROR, stacks.ReadError},
	{leakStackFlagSTACK_MAX_DEPTH, stacks.MaxDepth},
	{leakStackFlagSTACK_UNVERIFIED, stacks.Unverified},
}

// stackFlags translates a kernel stack's flags.
func stackFlags(bits uint32) stacks.Flags {
	var f stacks.Flags
	for _, b := range stackFlagBits {
		if leakStackFlag(bits)&b.kernel != 0 {
			f |= b.flag
		}
	}
	return f
}

// siteID is a capture-unique, deterministic id for a (kind, stack) site.
func siteID(kind analyze.Kind, key string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(kind))
	h.Write([]byte{0})
	h.Write([]byte(key))
	return h.Sum64()
}

// kindName maps enum alloc_kind to the analyze kind.
func kindName(k uint32) analyze.Kind {
	switch leakAllocKind(k) {
	case leakAllocKindKIND_MALLOC:
		return analyze.KindMalloc
	case leakAllocKindKIND_ZLIB_INFLATE:
		return analyze.KindZlibInflate
	case leakAllocKindKIND_ZLIB_DEFLATE:
		return analyze.KindZlibDeflate
	case leakAllocKindKIND_MMAP_ANON:
		return analyze.KindMmapAnon
	case leakAllocKindKIND_MMAP_FILE:
		return analyze.KindMmapFile
	case leakAllocKindKIND_THREAD:
		return analyze.KindThread
	}
	return analyze.Kind(fmt.Sprintf("kind%d", k))
}
