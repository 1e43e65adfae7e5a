//go:build linux

package kernel

import (
	"errors"
	"slices"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/features"

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
	noMulti := o.Features().NoMulti
	if noMulti {
		// Before 6.6 every return probe is a plain uretprobe.
		if o.Program(AllocExit) == nil || o.Multi(AllocExit) != nil {
			t.Fatal("without uprobe_multi links, the plain alloc_exit, the return program of zlib's inits and the pairs, is not loaded, or its twin is")
		}
	} else {
		if o.Multi(AllocExit) == nil {
			t.Fatal("alloc_exit_multi, the return program of zlib's inits and the pairs, is not loaded")
		}
		if o.Program(AllocSession) != nil || o.Program(AllocExit) != nil {
			t.Fatal("alloc_session or the plain alloc_exit loaded without malloc traced")
		}
	}
	// The session program where the kernel has uprobe sessions (6.13),
	// else the plain return program, which replaces it there.
	walker, name := AllocSession, "alloc_session"
	if !sessionsSupported() {
		walker, name = AllocExit, "alloc_exit"
	}
	if err := o.Prepare(walker, false); err != nil {
		t.Fatal(err)
	}
	if err := o.Prepare(walker, false); err != nil { // once is enough
		t.Fatal(err)
	}
	prog := o.Program(walker)
	if prog == nil {
		t.Fatalf("%s still not loaded after Prepare", name)
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
	if n, stand := insns(prog), insns(o.Program(MallocEnter)); n < 10*stand {
		t.Errorf("%s after Prepare has %d instructions, the stand-in %d: still the stand-in", name, n, stand)
	}
	info, err := prog.Info()
	if err != nil {
		t.Fatal(err)
	}
	ids, ok := info.MapIDs()
	if !ok {
		t.Fatalf("no map IDs in %s's info", name)
	}
	for mname, m := range map[string]*ebpf.Map{"allocs": o.objs.Allocs, "sites": o.objs.Sites, ".bss": o.lazy.data.Bss, ".rodata": o.lazy.data.Rodata} {
		mi, err := m.Info()
		if err != nil {
			t.Fatal(err)
		}
		id, _ := mi.ID()
		if !slices.Contains(ids, id) {
			t.Errorf("%s does not use the collection's %s (map %d; it uses %v)", name, mname, id, ids)
		}
	}
	o.Close()
	closed = true
	// The other walker, not prepared yet. Without uprobe sessions that
	// is alloc_session, which fails to load whether closed or not;
	// without uprobe_multi links alloc_exit was loaded at Load.
	if walker == AllocSession && !noMulti {
		if err := o.Prepare(AllocExit, false); err == nil {
			t.Error("Prepare loaded a program for a closed collection")
		}
	}
}

// A followed process's collection (LazyReturns) loads the return program
// of zlib's inits and the pairs when first asked for, the session program
// (without uprobe sessions, the plain return program) with the rest.
// Without uprobe_multi links (before 6.6) the plain return program serves
// them all, and the twin never loads.
func TestLazyReturnsLoadWhenAttached(t *testing.T) {
	testutil.RequireBPF(t)
	o, err := Load(Config{Malloc: true, LazyReturns: true, MaxAllocations: 1024, MaxSites: 1024, MaxStacks: 1024, MaxUnwindRows: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	f := o.Features()
	if f.NoMulti != (features.HaveBPFLinkUprobeMulti() != nil) {
		t.Fatalf("Features().NoMulti is %v on a kernel whose uprobe_multi probe says %v", f.NoMulti, features.HaveBPFLinkUprobeMulti())
	}
	switch {
	case f.NoSession != !sessionsSupported():
		t.Fatalf("Features().NoSession is %v on a kernel whose BTF has bpf_session_is_return: %v", f.NoSession, sessionsSupported())
	case f.NoSession && o.Program(AllocExit) == nil:
		// Before 6.13 the malloc family has plain probes: their
		// return program is loaded in the session program's place.
		t.Fatal("the plain alloc_exit not loaded with malloc traced on a kernel without uprobe sessions")
	case !f.NoSession && o.Program(AllocSession) == nil:
		t.Fatal("alloc_session not loaded with malloc traced")
	}
	if o.Multi(AllocExit) != nil {
		t.Fatal("alloc_exit_multi loaded at Load with LazyReturns")
	}
	if f.NoMulti {
		// Before 6.6: the plain return program serves every acquire,
		// and the twin is never loaded.
		if o.Program(AllocExit) == nil {
			t.Fatal("the plain alloc_exit not loaded on a kernel without uprobe_multi links")
		}
		if err := o.Prepare(AllocExit, true); !errors.Is(err, ebpf.ErrNotSupported) {
			t.Fatalf("Prepare(AllocExit, multi) without uprobe_multi links: %v, want ErrNotSupported", err)
		}
		return
	}
	if err := o.Prepare(AllocExit, true); err != nil {
		t.Fatal(err)
	}
	if o.Multi(AllocExit) == nil {
		t.Fatal("alloc_exit_multi not loaded after Prepare")
	}
}
