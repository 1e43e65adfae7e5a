//go:build linux && amd64

package probe

import (
	"fmt"
	"hash/fnv"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/probe/kernel"
	"github.com/leakscope/leakscope/probe/stacks"
)

// decodeStack appends the entries of a kernel stack to buf: its return
// addresses and the Method* and bytecode index of its interpreted frames.
func decodeStack(ips []uint64, buf []stacks.Entry) []stacks.Entry {
	for _, ip := range ips {
		if method, bci, ok := kernel.MethodEntry(ip); ok {
			buf = append(buf, stacks.Entry{Addr: method, BCI: bci, Method: true})
			continue
		}
		buf = append(buf, stacks.Entry{Addr: ip})
	}
	return buf
}

// stackFlagBits are the kernel's stack flags and what each says of a walk.
var stackFlagBits = []struct {
	kernel kernel.StackFlags
	flag   stacks.Flags
}{
	{kernel.StackNoFP, stacks.NoFP},
	{kernel.StackUnwindUnsupported, stacks.UnwindUnsupported},
	{kernel.StackUnwindEnd, stacks.UnwindEnd},
	{kernel.StackBadFrame, stacks.BadFrame},
	{kernel.StackReadError, stacks.ReadError},
	{kernel.StackMaxDepth, stacks.MaxDepth},
	{kernel.StackUnverified, stacks.Unverified},
}

// stackFlags translates a kernel stack's flags.
func stackFlags(bits kernel.StackFlags) stacks.Flags {
	var f stacks.Flags
	for _, b := range stackFlagBits {
		if bits&b.kernel != 0 {
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
	switch k {
	case kernel.KindMalloc:
		return analyze.KindMalloc
	case kernel.KindZlibInflate:
		return analyze.KindZlibInflate
	case kernel.KindZlibDeflate:
		return analyze.KindZlibDeflate
	case kernel.KindMmapAnon:
		return analyze.KindMmapAnon
	case kernel.KindMmapFile:
		return analyze.KindMmapFile
	case kernel.KindThread:
		return analyze.KindThread
	}
	return analyze.Kind(fmt.Sprintf("kind%d", k))
}
