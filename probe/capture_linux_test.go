//go:build linux && amd64

package probe

import (
	"errors"
	"fmt"
	"testing"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/probe/jvm"
	"github.com/leakscope/leakscope/probe/kernel"
	"github.com/leakscope/leakscope/probe/procfs"
	"github.com/leakscope/leakscope/probe/stacks"
	"github.com/leakscope/leakscope/probe/symbolize"
)

// listNamer names the return addresses 0x10000, 0x10001, … of a pretend
// code cache with its names, in order, every frame chained to the next.
type listNamer []string

func (n listNamer) Frame(addr uint64, _ bool) jvm.Frame {
	return jvm.Frame{Name: n[addr-0x10000], Chained: true}
}
func (listNamer) Generation() uint64            { return 0 }
func (listNamer) Method(uint64, int) jvm.Method { return jvm.Method{} }

// codeCache is one anonymous executable mapping, a JVM's code cache.
type codeCache struct{}

var cacheMapping = procfs.Mapping{Start: 0x10000, End: 0x20000, Perms: "rwxp", Dev: "00:00"}

func (codeCache) Lookup(addr uint64) (procfs.Mapping, bool) {
	return cacheMapping, addr >= cacheMapping.Start && addr < cacheMapping.End
}
func (codeCache) Object(procfs.Mapping) (*symbolize.Object, error) {
	return nil, errors.New("anonymous")
}
func (codeCache) NoFramePointers(procfs.Mapping) bool { return false }
func (codeCache) Unwound(procfs.Mapping) bool         { return false }
func (codeCache) Seen() int                           { return 1 }
func (codeCache) DebugGeneration() uint64             { return 0 }

// A site keeps the stack that names the most: resolved again once the
// JVM's names are gone, a stack that names less does not replace it.
func TestSiteKeepsBestNamedStack(t *testing.T) {
	st := newSiteTable()
	stack := func(names ...string) *stacks.Resolved {
		r := stacks.New(codeCache{})
		r.SetNamer(listNamer(names))
		raw := &stacks.Raw{}
		for i := range names {
			raw.Entries = append(raw.Entries, stacks.Entry{Addr: uint64(0x10000 + i)})
		}
		return r.Resolve(raw)
	}
	good := stack("a.B.leak", "a.B.main")
	i := st.slotFor(1, analyze.KindZlibInflate, good)
	if j := st.slotFor(1, analyze.KindZlibInflate, stack("", jvm.Interpreted)); j != i || st.slots[i].stack != good {
		t.Errorf("a less named stack replaced the site's: %v", functions(analyze.Site{Stack: st.slots[i].stack.Stack()}))
	}
	again := stack("a.B.leak", "a.B.main")
	if st.slotFor(1, analyze.KindZlibInflate, again); st.slots[i].stack != again {
		t.Error("a stack naming as much did not replace the site's")
	}
}

// A kernel stack's flags say to the resolver how its walk ended.
func TestStackFlags(t *testing.T) {
	if flags := stackFlags(kernel.StackNoFP | kernel.StackUnverified); flags != stacks.NoFP|stacks.Unverified {
		t.Errorf("stackFlags = %b", flags)
	}
	if got := fmt.Sprint(decodeStack([]uint64{0x401000, 0x402000}, nil)); got != "[{4198400 0 false} {4202496 0 false}]" {
		t.Errorf("decodeStack = %s", got)
	}
}
