//go:build linux && amd64

package probe

import (
	"debug/elf"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/probe/jvm"
	"github.com/leakscope/leakscope/probe/procfs"
	"github.com/leakscope/leakscope/probe/stacks"
	"github.com/leakscope/leakscope/probe/zlib"
)

// frameNamer names return addresses in anonymous executable memory, which
// no ELF object describes: a JVM's compiled methods, stubs and interpreter
// (*jvm.Namer). Calls come with the tracer's lock held: a namer never
// waits on the target in them, except Retry(true), a bounded wait at the
// end of a capture.
type frameNamer interface {
	// Frame, Generation and Method name frames for the stack resolver.
	stacks.Namer
	// Retry looks again for addresses not named yet: at most once per
	// refresh interval, or now when final.
	Retry(final bool)
	// Code returns the layout of the runtime's code, once known: the
	// kernel records each interpreted frame's method and walks compiled
	// frames by their size with it.
	Code() (jvm.Code, bool)
	// Exiting says the runtime is stopped in exit(): from now on names
	// come from its memory and files only, never by asking it.
	Exiting()
	Close() error
}

// jitNames is the stack resolver's link to the runtime of the target, once
// one is found.
type jitNames struct {
	checked bool // libjvm.so was seen and checked
	namer   frameNamer
	runtime analyze.Runtime
	version string
}

// findRuntimeLocked checks, when the target's mappings changed, whether it
// runs a HotSpot JVM; the first time libjvm.so is mapped (at attach, or in
// a launched command once the launcher loaded it), frames in JIT code get
// a namer.
func (t *Tracer) findRuntimeLocked() {
	j := &t.jit
	if j.checked {
		return
	}
	mapped := false
	for _, m := range t.view.Current() {
		if path.Base(m.Path) == "libjvm.so" {
			mapped = true
		}
	}
	if !mapped {
		return
	}
	j.checked = true
	vm, ok := jvm.Find(t.pid, t.view.Current())
	if !ok {
		return
	}
	n, err := jvm.NewNamer(t.opts.Context, vm, func(f string, a ...any) { t.warnOnce(fmt.Sprintf(f, a...)) })
	if err != nil {
		t.warnOnce(fmt.Sprintf("JVM %d: compiled Java frames will not be named: %v", t.pid, err))
		return
	}
	j.namer, j.runtime, j.version = n, analyze.RuntimeJVM, vm.Version
	t.sym.SetNamer(n)
}

// findJVMCodeLocked asks the namer for the JVM's code cache layout until
// it is known, and gives the kernel its code heaps; it reports whether the
// range table must change for it.
func (t *Tracer) findJVMCodeLocked() bool {
	n := t.jit.namer
	if n == nil || t.view.JVMCode() != nil {
		return false
	}
	code, ok := n.Code()
	if !ok {
		return false
	}
	if err := t.objs.WriteJVMHeaps(code.Heaps); err != nil {
		t.warnOnce(fmt.Sprintf("JVM %d: compiled Java frames will not be walked: write its code heaps: %v", t.pid, err))
		return false
	}
	if code.ConstMethodSize != 0 {
		if err := t.objs.WriteJVMLayout(code.ConstMethodOffset, code.ConstMethodSize); err != nil {
			t.warnOnce(fmt.Sprintf("JVM %d: interpreted frames will have no line numbers: %v", t.pid, err))
		}
	}
	t.view.SetJVMCode(code)
	return true
}

// retryNamesLocked gives stacks with unnamed JIT frames another chance:
// the namer looks again (final: whatever its rate limit, at the end of a
// capture while the target may still be alive); stacks resolved with older
// names are then stale and resolved again (stacks.Resolver.Stale).
func (t *Tracer) retryNamesLocked(final bool) {
	n := t.jit.namer
	if n == nil {
		return
	}
	for _, ref := range t.sites.refs {
		if ref.rs != nil && ref.rs.Pending() {
			n.Retry(final)
			return
		}
	}
}

// closeRuntimeLocked releases the namer.
func (t *Tracer) closeRuntimeLocked() {
	if n := t.jit.namer; n != nil {
		n.Close()
	}
}

// doctorJVM says, for a HotSpot JVM, whether its Java frames can be named
// and walked. It reads the command line only: the doctor does not attach.
func doctorJVM(pid int, maps []procfs.Mapping) []Check {
	vm, ok := jvm.Find(pid, maps)
	if !ok {
		return nil
	}
	version := vm.Version
	if version == "" {
		version = "of unknown version"
	}
	cs := []Check{}
	st, err := procfs.ReadStatus(pid)
	attachable := err == nil && st.Catches(int(unix.SIGQUIT))
	if disabled, _ := jvm.CommandLineFlag(pid, "DisableAttachMechanism"); disabled {
		attachable = false
	}
	if vm.Vendor != "" {
		version += ", " + vm.Vendor
	}
	cs = append(cs, Check{"JVM", attachable, detail(attachable,
		fmt.Sprintf("HotSpot %s (%s): where its VMStructs cannot name a frame, its perf map can (asked for through the attach protocol, as jcmd PID Compiler.perfmap; the files that puts in its /tmp are removed at detach)", version, vm.LibJVM),
		fmt.Sprintf("HotSpot %s (%s): its attach mechanism is off (-Xrs or -XX:+DisableAttachMechanism, or still starting): no perf map; frames are named from VMStructs only", version, vm.LibJVM))})
	cs = append(cs, doctorJVMZlib(pid, vm, maps))
	on, known := jvm.CommandLineFlag(pid, "PreserveFramePointer")
	flag := detail(on, "-XX:+PreserveFramePointer", detail(known, "-XX:-PreserveFramePointer", "-XX:+PreserveFramePointer not on the command line"))
	// The VMStructs tables are read from memory: no attach.
	var m *jvm.Methods
	var vmErr error
	if mem, err := jvm.OpenMemory(pid); err != nil {
		vmErr = err
	} else {
		m, vmErr = jvm.NewMethods(mem, vm.Object, vm.Bias)
		mem.Close()
	}
	walked := (vmErr == nil && m.Walks()) || on
	var how string
	switch {
	case vmErr == nil && m.Walks():
		code := m.Code()
		how = fmt.Sprintf("%s: VMStructs read: interpreted frames are named by their Method*, compiled frames walked by %s and named from the code heap%s%s (%d code heaps, interpreter at %#x); %s",
			flag, detail(on, "frame pointer (the flag keeps them: no read of a code blob a frame)", "their frame size"),
			detail(len(m.Gaps()) == 0, ", with inlined methods", ""), detail(code.ConstMethodSize != 0, " and source lines", ""), len(code.Heaps), code.Interpreter[0],
			detail(on, "the cheapest walk", "no JVM flag needed"))
	case vmErr == nil && on:
		how = fmt.Sprintf("%s: VMStructs read: interpreted frames are named by their Method*; compiled frames are walked by frame pointer and named from the perf map", flag)
	case vmErr == nil:
		how = fmt.Sprintf("%s: VMStructs read: interpreted frames are named by their Method*; stacks end at the first compiled Java frame, saying so (restart the JVM with -XX:+PreserveFramePointer to walk compiled frames)", flag)
	case on:
		how = fmt.Sprintf("%s: stacks run through compiled Java code; interpreted frames stay [interpreted] (VMStructs of %s: %v)", flag, vm.Build(), vmErr)
	default:
		how = fmt.Sprintf("%s and VMStructs of %s unreadable (%v): interpreted frames stay [interpreted] whatever the flags; stacks end at the first compiled Java frame, saying so (-XX:+PreserveFramePointer would let them go on)", flag, vm.Build(), vmErr)
	}
	if vmErr == nil {
		for _, g := range m.Gaps() {
			how += fmt.Sprintf("; %s: %v", vm.Build(), g)
		}
	}
	cs = append(cs, Check{"Java stacks", walked, "JVM: " + how})
	if vmErr == nil {
		found, absent := m.Fields()
		d := fmt.Sprintf("%s: %d of the %d fields leakscope reads found", vm.Build(), len(found), len(found)+len(absent))
		if len(absent) > 0 {
			d += "; described by none of their names: " + strings.Join(absent, ", ")
			if len(m.Gaps()) == 0 {
				d += " (each picks a layout only: nothing is lost)"
			}
		}
		cs = append(cs, Check{"VMStructs", len(m.Gaps()) == 0, d})
	} else {
		cs = append(cs, Check{"VMStructs", false, fmt.Sprintf("%s: not read: %v", vm.Build(), vmErr)})
	}
	return cs
}

// doctorJVMZlib says which zlib the JVM's java.util.zip uses (the system
// libz its libzip.so loads, or one compiled into libzip.so), its version,
// and whether leakscope knows that version's struct sizes: what stream
// bytes, computed with malloc not traced, rest on.
func doctorJVMZlib(pid int, vm *jvm.VM, maps []procfs.Mapping) Check {
	if vm.Home == "" {
		return Check{"JVM zlib", false, "the JVM's Java home was not found: which zlib java.util.zip uses is unknown"}
	}
	libzip := fmt.Sprintf("/proc/%d/root%s/lib/libzip.so", pid, vm.Home)
	if _, err := os.Stat(libzip); err != nil {
		return Check{"JVM zlib", false, fmt.Sprintf("%s/lib/libzip.so: %v", vm.Home, err)}
	}
	var where, path string
	if needsZlib(libzip) {
		for _, m := range maps {
			if strings.HasPrefix(filepath.Base(m.Path), "libz.so") {
				where, path = "system zlib "+m.Path, procfs.ObjectPath(pid, m)
				break
			}
		}
		if path == "" {
			// Not loaded yet (no java.util.zip use so far): the one the
			// dynamic linker would find.
			for _, p := range []string{"/lib/x86_64-linux-gnu/libz.so.1", "/usr/lib/x86_64-linux-gnu/libz.so.1", "/lib64/libz.so.1", "/usr/lib64/libz.so.1", "/lib/libz.so.1", "/usr/lib/libz.so.1"} {
				if _, err := os.Stat(fmt.Sprintf("/proc/%d/root%s", pid, p)); err == nil {
					where, path = "system zlib "+p+" (not loaded yet)", fmt.Sprintf("/proc/%d/root%s", pid, p)
					break
				}
			}
		}
		if path == "" {
			return Check{"JVM zlib", false, fmt.Sprintf("%s/lib/libzip.so loads a system libz.so, which was not found", vm.Home)}
		}
	} else {
		where, path = "zlib compiled into "+vm.Home+"/lib/libzip.so", libzip
		if !hasSymbol(libzip, "inflateInit2_") {
			where += " without zlib symbols: streams are counted at java.util.zip's JNI entry points (preset jvm's fallback)"
		} else {
			where += ", probed by its .symtab names"
		}
	}
	l := zlib.ReadLayout(path)
	l.ZStream = zlib.JNIZStreamSize
	d := where + ": " + l.String()
	if !l.Known {
		d += "; stream bytes computed with malloc not traced are estimates (--malloc on counts zlib's own mallocs)"
	}
	return Check{"JVM zlib", l.Known, d}
}

// hasSymbol reports whether the ELF object at path defines name in its
// dynamic or static symbol table.
func hasSymbol(path, name string) bool {
	f, done, err := openELF(path)
	if err != nil {
		return false
	}
	defer done()
	for _, syms := range []func() ([]elf.Symbol, error){f.DynamicSymbols, f.Symbols} {
		ss, _ := syms()
		for _, s := range ss {
			if s.Name == name && s.Section != elf.SHN_UNDEF {
				return true
			}
		}
	}
	return false
}
