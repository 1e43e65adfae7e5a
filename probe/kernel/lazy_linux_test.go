//go:build linux

package kernel

import (
	"slices"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/leakscope/leakscope/internal/testutil"
)

// A collection loads the stack-walking programs its target uses and the
// others when asked for: loaded later, a walker is the real program (not
// its stand-in) and uses the collection's own maps, so what it records is
// what the tracer reads.
func TestWalkersLoadWhenNeeded(t *testing.T) {
	testutil.RequireBPF(t)
	o, err := Load(Config{MaxAllocations: 1024, MaxSites: 1024, MaxStacks: 1024, MaxUnwindRows: 1024})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			o.Close()
		}
	}()
	if o.Features().NoMulti {
		testutil.SkipOrFail(t, "this kernel has no uprobe_multi links: every walker is loaded plain")
	}
	if o.Multi(AllocExit) == nil {
		t.Fatal("alloc_exit_multi, the return program of zlib's inits and the pairs, is not loaded")
	}
	if o.Program(AllocSession) != nil || o.Program(AllocExit) != nil {
		t.Fatal("alloc_session or the plain alloc_exit loaded without malloc traced")
	}
	if err := o.Prepare(AllocSession, false); err != nil {
		t.Fatal(err)
	}
	if err := o.Prepare(AllocSession, false); err != nil { // once is enough
		t.Fatal(err)
	}
	session := o.Program(AllocSession)
	if session == nil {
		t.Fatal("alloc_session still not loaded after Prepare")
	}
	insns := func(p *ebpf.Program) int {
		t.Helper()
		info, err := p.Info()
		if err != nil {
			t.Fatal(err)
		}
		ins, err := info.Instructions()
		if err != nil {
			t.Fatal(err)
		}
		return len(ins)
	}
	if n, stand := insns(session), insns(o.Program(MallocEnter)); n < 10*stand {
		t.Errorf("alloc_session after Prepare has %d instructions, the stand-in %d: still the stand-in", n, stand)
	}
	info, err := session.Info()
	if err != nil {
		t.Fatal(err)
	}
	ids, ok := info.MapIDs()
	if !ok {
		t.Fatal("no map IDs in alloc_session's info")
	}
	for name, m := range map[string]*ebpf.Map{"allocs": o.objs.Allocs, "sites": o.objs.Sites, ".bss": o.lazy.data.Bss, ".rodata": o.lazy.data.Rodata} {
		mi, err := m.Info()
		if err != nil {
			t.Fatal(err)
		}
		id, _ := mi.ID()
		if !slices.Contains(ids, id) {
			t.Errorf("alloc_session does not use the collection's %s (map %d; it uses %v)", name, id, ids)
		}
	}
	o.Close()
	closed = true
	if err := o.Prepare(AllocExit, false); err == nil {
		t.Error("Prepare loaded a program for a closed collection")
	}
}

// A followed process's collection (LazyReturns) loads the return program
// of zlib's inits and the pairs when first asked for, the session program
// with the rest.
func TestLazyReturnsLoadWhenAttached(t *testing.T) {
	testutil.RequireBPF(t)
	o, err := Load(Config{Malloc: true, LazyReturns: true, MaxAllocations: 1024, MaxSites: 1024, MaxStacks: 1024, MaxUnwindRows: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	f := o.Features()
	if f.NoMulti || f.NoSession {
		testutil.SkipOrFail(t, "this kernel has no uprobe_multi links or sessions: the walkers are loaded plain")
	}
	if o.Program(AllocSession) == nil {
		t.Fatal("alloc_session not loaded with malloc traced")
	}
	if o.Multi(AllocExit) != nil {
		t.Fatal("alloc_exit_multi loaded at Load with LazyReturns")
	}
	if err := o.Prepare(AllocExit, true); err != nil {
		t.Fatal(err)
	}
	if o.Multi(AllocExit) == nil {
		t.Fatal("alloc_exit_multi not loaded after Prepare")
	}
}
