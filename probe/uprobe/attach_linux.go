//go:build linux && amd64

package uprobe

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/leakscope/leakscope/probe/kernel"
)

// Spec is one probed function: its entry program and, for an acquire
// call, the shared return program.
type Spec struct {
	Symbol string
	Prog   kernel.Program // its entry program
	Ret    bool           // acquire call: also attach the return program
	Cookie uint64         // bpf_get_attach_cookie() of the entry program
}

// Maker makes one uprobe link for process pid.
type Maker func(pid int) (link.Link, error)

// Object is an ELF object opened for probing.
type Object struct {
	Path    string                             // where it is read and probed
	Display string                             // how errors name it
	Lookup  func(symbol string) (uint64, bool) // a function's virtual address
	ex      *link.Executable
}

// Open opens the object at path for probing, its functions found by
// lookup; errors name it display.
func Open(path, display string, lookup func(string) (uint64, bool)) (*Object, error) {
	ex, err := link.OpenExecutable(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", display, err)
	}
	return &Object{Path: path, Display: display, Lookup: lookup, ex: ex}, nil
}

// Links are what one attachment made. Those made before an error come
// with it: the caller closes them with the rest.
type Links struct {
	// Acquires are the acquire functions' probes (entry and return);
	// Releases the probes of functions without a return probe (releases,
	// hooks), which a detach closes last.
	Acquires, Releases []link.Link
}

// Attacher attaches programs of one loaded collection.
type Attacher struct {
	objs *kernel.Objects
	bind func(Maker) (link.Link, error)
	// noMulti: no uprobe_multi links, one perf link per probe; set too
	// once the kernel refused one.
	noMulti   bool
	noSession bool // no uprobe sessions
}

// New attaches the programs of objs, as the kernel it was loaded in
// allows (kernel.Features). bind makes every link with a Maker: for the
// traced process, and for any other the caller binds its probes to.
func New(objs *kernel.Objects, bind func(Maker) (link.Link, error)) *Attacher {
	f := objs.Features()
	return &Attacher{objs: objs, bind: bind, noMulti: f.NoMulti, noSession: f.NoSession}
}

// familySite is one function of a family and where its probe goes.
type familySite struct {
	spec Spec
	off  uint64 // file offset of the probe
	at   Site
}

// Family attaches the probes of one family to the functions of it that o
// defines, releases first (releasesFirst), and returns how many functions
// it probed. Symbols that are aliases of one address (glibc's
// aligned_alloc is memalign) get one probe, or every call would be seen
// twice. An error names o and the function.
func (a *Attacher) Family(o *Object, family []Spec) (Links, int, error) {
	var ls Links
	seen := map[uint64]bool{}
	var sites []familySite
	for _, p := range releasesFirst(family) {
		vaddr, ok := o.Lookup(p.Symbol)
		if !ok {
			continue
		}
		if seen[vaddr] {
			continue
		}
		seen[vaddr] = true
		off, err := FileOffset(o.Path, vaddr)
		if err != nil {
			return ls, 0, err
		}
		at := SiteFor(o.Path, vaddr, off, p)
		sites = append(sites, familySite{p, off + at.Off, at})
	}
	if len(sites) == 0 {
		return ls, 0, nil
	}
	twins := true
	for _, s := range sites {
		twins = twins && a.objs.Multi(s.spec.Prog) != nil
	}
	if !a.noMulti && twins {
		err := a.multi(o, sites, &ls)
		if err == nil || !errors.Is(err, ebpf.ErrNotSupported) {
			return ls, len(sites), err
		}
		a.noMulti = true
	}
	for _, s := range sites {
		if s.spec.Ret {
			if err := a.objs.Prepare(kernel.AllocExit, false); err != nil {
				return ls, 0, fmt.Errorf("attach %s:%s: %w", o.Display, s.spec.Symbol, err)
			}
			break
		}
	}
	for i, s := range sites {
		p := s.spec
		// The return probe first: a return without a recorded entry is
		// ignored, an entry without its return probe leaves a stale record.
		// It shares the entry's site (one trap), where *(%rsp) is still
		// the return address.
		if p.Ret {
			ret := func(pid int) (link.Link, error) {
				return o.ex.Uretprobe(p.Symbol, a.objs.Program(kernel.AllocExit), &link.UprobeOptions{PID: pid, Address: s.off})
			}
			l, err := a.bind(ret)
			if err != nil {
				return ls, i, attachError(o.Display, p.Symbol, err)
			}
			ls.Acquires = append(ls.Acquires, l)
		}
		enter := a.objs.Program(p.Prog)
		entry := func(pid int) (link.Link, error) {
			return o.ex.Uprobe(p.Symbol, enter, &link.UprobeOptions{PID: pid, Address: s.off, Cookie: p.Cookie})
		}
		l, err := a.bind(entry)
		if err != nil {
			return ls, i, attachError(o.Display, p.Symbol, err)
		}
		if p.Ret {
			ls.Acquires = append(ls.Acquires, l)
		} else {
			ls.Releases = append(ls.Releases, l)
		}
	}
	return ls, len(sites), nil
}

// multi attaches a family with one uprobe_multi link per program: the
// release programs first, then the return program, then the acquire
// entries (releasesFirst's and Family's reasons). Each link holds every
// function of its program, so detaching takes one step, not one per
// function. ebpf.ErrNotSupported means the kernel has no such links.
func (a *Attacher) multi(o *Object, sites []familySite, ls *Links) error {
	type group struct {
		prog         *ebpf.Program
		offs, cookie []uint64
		symbols      []string
	}
	var releases, acquires []*group
	add := func(gs *[]*group, prog *ebpf.Program, s familySite) {
		for _, g := range *gs {
			if g.prog == prog {
				g.offs, g.cookie, g.symbols = append(g.offs, s.off), append(g.cookie, s.spec.Cookie), append(g.symbols, s.spec.Symbol)
				return
			}
		}
		*gs = append(*gs, &group{prog, []uint64{s.off}, []uint64{s.spec.Cookie}, []string{s.spec.Symbol}})
	}
	var rets []uint64
	for _, s := range sites {
		twin := a.objs.Multi(s.spec.Prog)
		if s.spec.Ret {
			add(&acquires, twin, s)
			rets = append(rets, s.off)
		} else {
			add(&releases, twin, s)
		}
	}
	attach := func(g *group, ret bool) (link.Link, error) {
		return a.bind(func(pid int) (link.Link, error) {
			opts := &link.UprobeMultiOptions{Addresses: g.offs, PID: uint32(pid)}
			if ret {
				return o.ex.UretprobeMulti(nil, g.prog, opts)
			}
			opts.Cookies = g.cookie
			return o.ex.UprobeMulti(nil, g.prog, opts)
		})
	}
	multiError := func(g *group, err error) error {
		if errors.Is(err, ebpf.ErrNotSupported) {
			return err
		}
		if errors.Is(err, os.ErrNotExist) {
			err = ErrTargetExited
		}
		return attachError(o.Display, strings.Join(g.symbols, ","), err)
	}
	for _, g := range releases {
		l, err := attach(g, false)
		if err != nil {
			return multiError(g, err)
		}
		ls.Releases = append(ls.Releases, l)
	}
	if len(rets) > 0 {
		if err := a.objs.Prepare(kernel.AllocExit, true); err != nil {
			return attachError(o.Display, "(returns)", err)
		}
		g := &group{prog: a.objs.Multi(kernel.AllocExit), offs: rets, symbols: []string{"(returns)"}}
		l, err := attach(g, true)
		if err != nil {
			return multiError(g, err)
		}
		ls.Acquires = append(ls.Acquires, l)
	}
	for _, g := range acquires {
		l, err := attach(g, false)
		if err != nil {
			return multiError(g, err)
		}
		ls.Acquires = append(ls.Acquires, l)
	}
	return nil
}

// releasesFirst orders a family's release functions before its acquire
// functions. Attaching takes a while (seconds on a busy machine): a block
// allocated while its free was not probed yet, and freed in that window,
// would stay live for good, a false leak. A release seen before its
// acquire probe only counts as an unknown free.
func releasesFirst(family []Spec) []Spec {
	out := make([]Spec, 0, len(family))
	for _, p := range family {
		if !p.Ret {
			out = append(out, p)
		}
	}
	for _, p := range family {
		if p.Ret {
			out = append(out, p)
		}
	}
	return out
}

// attachError names the object at path and the symbol err came from, as
// ErrPrivilege or ErrTargetExited where it is one of them.
func attachError(path, symbol string, err error) error {
	if IsPerm(err) {
		err = ErrPrivilege
	}
	if errors.Is(err, unix.ESRCH) {
		err = ErrTargetExited
	}
	return fmt.Errorf("attach %s:%s: %w", path, symbol, err)
}

// IsPerm reports whether err is the kernel refusing a BPF operation for
// want of privilege (EPERM, EACCES).
func IsPerm(err error) bool {
	return errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES)
}
