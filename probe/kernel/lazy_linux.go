//go:build linux

package kernel

import (
	"fmt"
	"sync"

	"github.com/cilium/ebpf"
)

// The programs that walk stacks (alloc_exit, its uprobe_multi twin and
// alloc_session) are each ~60k instructions to the verifier: ~0.2 s of a
// load apiece, most of a collection's. A collection loads the ones its
// target will use (Config.Malloc: the session program; the return
// program, plain or twin, unless Config.LazyReturns) and the others when
// first asked for (Prepare):
// a JVM, with malloc not traced, never verifies alloc_session, and a
// kernel with uprobe_multi links never the plain alloc_exit.
var walkerPrograms = []string{"alloc_exit", "alloc_exit_multi", "alloc_session"}

// dataSections are the object's global-data maps, which a program loaded
// later (Prepare) shares with the collection.
type dataSections struct {
	Rodata *ebpf.Map `ebpf:".rodata"`
	Bss    *ebpf.Map `ebpf:".bss"`
}

// loadedObjects is what Load assigns: the generated objects and the data
// sections.
type loadedObjects struct {
	leakObjects
	dataSections
}

// lazyPrograms holds the walker programs not loaded yet: their specs, and
// what loading one later needs (the collection's spec and maps).
type lazyPrograms struct {
	mu     sync.Mutex                   // guards specs, loaded and the programs' slots
	specs  map[string]*ebpf.ProgramSpec // not loaded yet
	loaded map[string]bool
	// loading serializes the loads of one program; two programs load at
	// once (the verifier runs in the loading thread).
	loading map[string]*sync.Mutex
	closed  bool // the collection was closed: a program loaded after is closed too
	coll    *ebpf.CollectionSpec
	maps    map[string]*ebpf.Map
	data    dataSections
}

// deferWalkers takes the walker programs out of spec, each replaced by a
// stand-in (a copy of malloc_enter, never attached) that keeps the
// generated objects loadable.
func (l *lazyPrograms) deferWalkers(spec *ebpf.CollectionSpec) {
	l.specs = map[string]*ebpf.ProgramSpec{}
	l.loaded = map[string]bool{}
	l.loading = map[string]*sync.Mutex{}
	for _, name := range walkerPrograms {
		l.loading[name] = &sync.Mutex{}
		l.specs[name] = spec.Programs[name]
		stand := spec.Programs["malloc_enter"].Copy()
		stand.Name = name
		spec.Programs[name] = stand
	}
	l.coll = spec
}

// keepMaps records the maps of a loaded collection by name, for Prepare.
func (l *lazyPrograms) keepMaps(o *loadedObjects) {
	l.data = o.dataSections
	l.maps = map[string]*ebpf.Map{".rodata": o.Rodata, ".bss": o.Bss}
	for _, nm := range namedMaps(&o.leakMaps) {
		l.maps[nm.name] = nm.m
	}
}

// load loads the walker program name against the collection's maps.
func (l *lazyPrograms) load(name string) (*ebpf.Program, error) {
	l.mu.Lock()
	ps := l.specs[name]
	l.mu.Unlock()
	if ps == nil {
		return nil, fmt.Errorf("program %s: %w", name, ebpf.ErrNotSupported)
	}
	one := &ebpf.CollectionSpec{
		Maps:      map[string]*ebpf.MapSpec{},
		Programs:  map[string]*ebpf.ProgramSpec{name: ps},
		Variables: l.coll.Variables,
		Types:     l.coll.Types,
		ByteOrder: l.coll.ByteOrder,
	}
	replace := map[string]*ebpf.Map{}
	for n, ms := range l.coll.Maps {
		m := l.maps[n]
		if m == nil {
			return nil, fmt.Errorf("program %s: map %s of the collection not found", name, n)
		}
		one.Maps[n] = ms
		replace[n] = m
	}
	coll, err := ebpf.NewCollectionWithOptions(one, ebpf.CollectionOptions{MapReplacements: replace, Cache: kernelTypes})
	if err != nil {
		return nil, err
	}
	defer coll.Close() // the maps' clones; the program is detached
	return coll.DetachProgram(name), nil
}

// close closes the data sections (the generated objects close the rest).
func (l *lazyPrograms) close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	for _, m := range []*ebpf.Map{l.data.Rodata, l.data.Bss} {
		if m != nil {
			m.Close()
		}
	}
}

// Prepare loads the stack-walking program p (AllocExit or AllocSession;
// multi: AllocExit's uprobe_multi twin) if the collection has not yet:
// Program and Multi return nil for one not loaded. Other programs are
// always loaded.
func (o *Objects) Prepare(p Program, multi bool) error {
	name := walkerName(p, multi)
	if name == "" {
		return nil
	}
	l := &o.lazy
	one := l.loading[name]
	one.Lock()
	defer one.Unlock()
	if o.prepared(name) {
		return nil
	}
	prog, err := l.load(name)
	if err != nil {
		return fmt.Errorf("load BPF programs: %w", verifierDetail(err)) // err names the program
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		prog.Close()
		return fmt.Errorf("load BPF program %s: the collection is closed", name)
	}
	j := &o.objs
	var slot **ebpf.Program
	switch name {
	case "alloc_exit":
		slot = &j.AllocExit
	case "alloc_exit_multi":
		slot = &j.AllocExitMulti
	default:
		slot = &j.AllocSession
	}
	(*slot).Close() // the stand-in
	*slot = prog
	l.loaded[name] = true
	delete(l.specs, name)
	return nil
}

// walkerName is the name of program p (multi: its uprobe_multi twin) if
// it is a stack-walking program, "" otherwise.
func walkerName(p Program, multi bool) string {
	switch {
	case p == AllocExit && multi:
		return "alloc_exit_multi"
	case p == AllocExit:
		return "alloc_exit"
	case p == AllocSession && !multi:
		return "alloc_session"
	}
	return ""
}

// loadedWalker reports whether program p (multi: its twin) is loaded:
// always, unless it is a stack-walking program not prepared yet.
func (o *Objects) loadedWalker(p Program, multi bool) bool {
	name := walkerName(p, multi)
	return name == "" || o.prepared(name)
}

// prepared reports whether the walker program name is loaded.
func (o *Objects) prepared(name string) bool {
	o.lazy.mu.Lock()
	defer o.lazy.mu.Unlock()
	return o.lazy.loaded[name]
}
