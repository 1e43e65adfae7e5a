//go:build linux && amd64

package probe

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/leakscope/leakscope/internal/safefile"
	"github.com/leakscope/leakscope/probe/kernel"
	"github.com/leakscope/leakscope/probe/procfs"
	"github.com/leakscope/leakscope/probe/symbolize"
	"github.com/leakscope/leakscope/probe/target"
	"github.com/leakscope/leakscope/probe/unwind"
	"github.com/leakscope/leakscope/probe/uprobe"
	"github.com/leakscope/leakscope/probe/zlib"
)

// Check is one finding of Doctor.
type Check struct {
	Name   string
	OK     bool
	Detail string // what was found, and what to do when !OK
}

// Capability numbers from linux/capability.h.
const (
	capSysAdmin  = 21
	capSysPtrace = 19
	capPerfmon   = 38
	capBPF       = 39
)

// Doctor checks the host and, when pid > 0, the target: what will work and
// what will not, in plain words. dbg is the debuginfod configuration a
// capture would use (nil: none).
func Doctor(pid int, dbg *symbolize.Debuginfod) []Check {
	var cs []Check
	_, err := os.Stat("/sys/kernel/btf/vmlinux")
	cs = append(cs, Check{"kernel BTF", err == nil, detail(err == nil,
		"/sys/kernel/btf/vmlinux present",
		"no /sys/kernel/btf/vmlinux: the kernel needs CONFIG_DEBUG_INFO_BTF=y")})

	caps, err := effectiveCaps()
	missing := []string{}
	for _, c := range []struct {
		bit  uint
		name string
	}{{capBPF, "CAP_BPF"}, {capPerfmon, "CAP_PERFMON"}, {capSysPtrace, "CAP_SYS_PTRACE"}} {
		if err != nil || caps&(1<<c.bit) == 0 {
			if c.bit != capSysPtrace && caps&(1<<capSysAdmin) != 0 {
				continue // CAP_SYS_ADMIN implies both on older kernels
			}
			missing = append(missing, c.name)
		}
	}
	cs = append(cs, Check{"privileges", len(missing) == 0, detail(len(missing) == 0,
		"CAP_BPF, CAP_PERFMON and CAP_SYS_PTRACE are effective",
		"missing "+strings.Join(missing, ", ")+": run as root or grant them (setcap or a container's cap_add)")})

	_, err = os.Stat("/sys/bus/event_source/devices/uprobe/type")
	cs = append(cs, Check{"uprobes", err == nil, detail(err == nil,
		"perf uprobe PMU available",
		"no /sys/bus/event_source/devices/uprobe: the kernel needs CONFIG_UPROBE_EVENTS=y")})

	if f, err := tryLoad(); err != nil {
		cs = append(cs, Check{"BPF programs", false, err.Error()})
	} else {
		cs = append(cs, Check{"BPF programs", true, loadedDetail(f)})
	}
	// Not a failure either way: what --malloc off (a JVM's default) can
	// count of zlib's inflate windows.
	cs = append(cs, Check{"zlib windows", true, detail(kernel.ExitHookSupported(),
		"with malloc not traced, an inflate stream's window is read from its state while the target lives and counted by the kernel as it exits (sched_process_exit has group_dead)",
		"with malloc not traced, an inflate stream's window is read from its state while the target lives; this kernel's sched_process_exit has no group_dead (it runs after the memory is gone), so for a target that exits first the last read stands (--malloc on counts windows from zlib's mallocs)")})
	cs = append(cs, doctorKinds())
	cs = append(cs, doctorDebuginfod(dbg))
	if pid > 0 {
		cs = append(cs, doctorTarget(pid)...)
	}
	return cs
}

// doctorDebuginfod says where the debug files of stripped objects would
// come from, and checks that their cache can be created.
func doctorDebuginfod(dbg *symbolize.Debuginfod) Check {
	if dbg == nil {
		return Check{"debuginfod", false, "not configured: code in stripped objects without a debug file in /usr/lib/debug stays unnamed (set DEBUGINFOD_URLS or pass --debuginfod URLS)"}
	}
	d, err := safefile.MkdirAll(dbg.CacheDir, safefile.Options{})
	if err != nil {
		return Check{"debuginfod", false, fmt.Sprintf("%s: cache: %v", strings.Join(dbg.URLs, " "), err)}
	}
	d.Close()
	return Check{"debuginfod", true, fmt.Sprintf("debug files of stripped objects on a stack are fetched from %s into %s", strings.Join(dbg.URLs, " "), dbg.CacheDir)}
}

func detail(ok bool, yes, no string) string {
	if ok {
		return yes
	}
	return no
}

func tryLoad() (kernel.Features, error) {
	f, err := kernel.TryLoad()
	if err != nil && uprobe.IsPerm(err) {
		return f, fmt.Errorf("load BPF programs: %w", ErrPrivilege)
	}
	return f, err
}

// loadedDetail says the programs loaded, and how the tracer makes do
// without what this kernel lacks (f).
func loadedDetail(f kernel.Features) string {
	d := "loaded and verified by this kernel"
	if f.NoSession {
		d += "; no uprobe sessions (Linux 6.13): the malloc family is probed with a uprobe and a uretprobe, and --sample-bytes is unavailable"
	}
	if f.NoMulti {
		d += "; no uprobe_multi links (Linux 6.6): one perf link per probe"
	}
	return d
}

func doctorTarget(pid int) []Check {
	maps, err := procfs.ReadMaps(pid)
	if err != nil {
		return []Check{{"target", false, err.Error()}}
	}
	cmd, _ := procfs.Command(pid)
	cs := []Check{{"target", true, fmt.Sprintf("pid %d: %s", pid, strings.Join(cmd, " "))}}
	cache := symbolize.NewCache()
	alloc, err := target.FindAllocator(pid, maps, cache)
	switch {
	case errors.Is(err, ErrNoAllocator):
		// Not a failure: what needs no allocator is still traced.
		cs = append(cs, Check{"no allocator", false, err.Error() + ": the malloc family is not traced; zlib and declared pairs are where their libraries are mapped, and --maps traces its mappings and threads"})
	case err != nil:
		cs = append(cs, Check{"allocator", false, err.Error()})
	default:
		cs = append(cs, Check{"allocator", true, "malloc family traced in " + alloc.Display})
		cs = append(cs, siteCheck(alloc.Path, alloc.Display, alloc.Obj.Lookup, mallocFamily, mallocSite))
	}
	var mapped []string
	for _, m := range maps {
		mapped = append(mapped, m.Path)
	}
	cs = append(cs, doctorMalloc(isJVM(mapped)))
	view := target.New(pid, cache)
	if _, err := view.Refresh(); err != nil {
		return append(cs, Check{"objects", false, err.Error()})
	}
	objs := view.Objects(alloc.Display)
	sort.Slice(objs, func(i, j int) bool { return objs[i].Path < objs[j].Path })
	for _, o := range objs {
		if o.Path == alloc.Display {
			continue
		}
		path := procfs.ObjectPath(pid, procfs.Mapping{Path: o.Path})
		if obj, err := cache.Object(path); err == nil {
			if _, ok := obj.Lookup("inflateInit2_"); ok {
				cs = append(cs, siteCheck(path, o.Path, obj.Lookup, zlib.Family, uprobe.SiteFor))
			}
		}
	}
	for _, o := range objs {
		var what string
		ok := true
		if obj, err := view.Object(procfs.Mapping{Path: o.Path}); err == nil && obj.Go() {
			// Go code and the C code cgo linked in are walked apart
			// (target.Image.Ranges, KeepsFramePointers).
			cshare, cfuncs := obj.CFramePointerShare()
			how := "walked with frame pointers"
			if !view.KeepsFramePointers(procfs.Mapping{Path: o.Path}) {
				rows, _, err := unwind.BuildFile(procfs.ObjectPath(pid, procfs.Mapping{Path: o.Path}))
				if err == nil && len(rows) > 0 {
					how = fmt.Sprintf("walked with its unwind table (%d rows from .eh_frame)", len(rows))
				} else {
					ok = false
					how = "without a usable unwind table: a stack that reaches it ends at its function"
				}
			}
			cs = append(cs, Check{"frame pointers", ok,
				fmt.Sprintf("%s: Go, %.0f%% of functions: its Go code walked with frame pointers, onto the goroutine's stack at runtime.asmcgocall; its C code (%d functions, %.0f%% with frame pointers) %s",
					o.Path, 100*o.FPShare, cfuncs, 100*cshare, how)})
			continue
		}
		switch o.FramePointer {
		case target.FPYes:
			what = "walked with frame pointers"
		case target.FPNo, target.FPMixed:
			// What --unwind auto does with it.
			rows, _, err := unwind.BuildFile(procfs.ObjectPath(pid, procfs.Mapping{Path: o.Path}))
			if err == nil && len(rows) > 0 {
				what = fmt.Sprintf("walked with its unwind table (%d rows from .eh_frame)", len(rows))
			} else {
				ok = false
				what = "no usable unwind table either: a stack that reaches it ends at its function (its callers are unknown)"
			}
		default:
			what = "unreadable: frames in it are validated only by address"
		}
		cs = append(cs, Check{"frame pointers", ok,
			fmt.Sprintf("%s: %s, %.0f%% of functions: %s", o.Path, o.FramePointer, 100*o.FPShare, what)})
	}
	var bare []string
	for _, o := range objs {
		if obj, ok := view.Loaded(o.Path); ok && obj.Debuginfo().Missing {
			bare = append(bare, o.Path)
		}
	}
	if len(bare) > 0 {
		cs = append(cs, Check{"debug info", false, fmt.Sprintf("%s: no .symtab or no DWARF, and no debug file in /usr/lib/debug: "+
			"their frames have no name or no file:line unless debuginfod supplies the file (see the debuginfod check)", strings.Join(bare, ", "))})
	}
	return append(cs, doctorJVM(pid, view.Current())...)
}

// doctorKinds says which kinds are traced by default and which need a
// flag, and whether --maps can attach its syscall tracepoints here.
func doctorKinds() Check {
	maps := "with --maps also mmap.anon, mmap.file and thread, from the syscalls:sys_exit_mmap, sys_exit_munmap and sys_exit_mremap tracepoints"
	ok := true
	switch {
	case kernel.TracepointExists("syscalls", "sys_exit_mmap"):
		maps += " (present)"
	case !kernel.TracefsMounted():
		maps += " (tracefs is not mounted: --maps mounts it at /sys/kernel/tracing)"
	default:
		ok = false
		maps += ", which this kernel lacks (it needs CONFIG_FTRACE_SYSCALLS=y): --maps fails"
	}
	return Check{"kinds", ok, "traced by default: the malloc family (not in a JVM: --malloc auto), zlib.inflate, zlib.deflate, jvm.direct in a JVM, and pairs declared with --track; " +
		maps + "; every report header says which were not traced"}
}

// doctorMalloc says what --malloc auto will trace in the target.
func doctorMalloc(jvm bool) Check {
	if jvm {
		return Check{"malloc", true, "JVM target: --malloc auto puts no probe on the allocator; zlib streams (bytes computed from their init arguments), " +
			"jvm.direct and declared pairs are traced, and leaks of plain malloc are not looked for (--malloc on traces them, at a cost to the JVM)"}
	}
	return Check{"malloc", true, "--malloc auto traces the malloc family (--malloc off: zlib streams and declared pairs only, without allocator probes)"}
}

// effectiveCaps reads CapEff of this process.
func effectiveCaps() (uint64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CapEff:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	return 0, fmt.Errorf("no CapEff in /proc/self/status")
}

// mallocSite is where a malloc-family function is probed on a kernel with
// uprobe sessions (alloc_session: its arguments may have moved to other
// registers); free is a plain probe.
func mallocSite(path string, vaddr, off uint64, p uprobe.Spec) uprobe.Site {
	if p.Ret {
		return uprobe.SessionSite(path, vaddr, off, p.Symbol)
	}
	return uprobe.SiteFor(path, vaddr, off, p)
}

// siteCheck names where each function of a family would be probed in an
// object (by site), and whether the kernel emulates the instruction there
// (~0.7 µs a hit) or single-steps it (~7 µs).
func siteCheck(path, display string, lookup func(string) (uint64, bool), family []uprobe.Spec,
	site func(path string, vaddr, off uint64, p uprobe.Spec) uprobe.Site) Check {
	var sites []string
	stepped := 0
	seen := map[uint64]string{}
	for _, p := range family {
		vaddr, ok := lookup(p.Symbol)
		if !ok {
			continue
		}
		if other, dup := seen[vaddr]; dup { // one probe for aliases (uprobe.Attacher.Family)
			sites = append(sites, p.Symbol+"="+other)
			continue
		}
		seen[vaddr] = p.Symbol
		off, err := uprobe.FileOffset(path, vaddr)
		if err != nil {
			continue
		}
		s := site(path, vaddr, off, p)
		if !s.Emulated {
			stepped++
		}
		sites = append(sites, p.Symbol+s.String())
	}
	d := fmt.Sprintf("%s: %s", display, strings.Join(sites, ", "))
	if stepped > 0 {
		d += fmt.Sprintf("; %d single-stepped (~7 µs a call instead of ~0.7 µs): no emulated instruction before an argument the probe reads is lost or the stack pointer changes", stepped)
	}
	return Check{"probe sites", true, d}
}
