//go:build linux && amd64

package probe

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/leakscope/leakscope/probe/kernel"
	"github.com/leakscope/leakscope/probe/procfs"
	"github.com/leakscope/leakscope/probe/target"
)

// execHistory is what a Tracer knows of the program images its process
// exec'd into.
type execHistory struct {
	// cmds lists the images a launched command exec'd into after its
	// first (followExecLocked), as their command lines.
	cmds []string
	gen  uint32 // images exec'd into (the kernel's exec_gen)
	// held is what the earlier images still held at their exec.
	held preExec
}

// followExecLocked probes the program image the target has just exec'd
// into, after the first (run's shim exec is planned by Launch): a launch
// script or env exec'ing the real program, sh -c 'exec ...'. Under run the
// kernel stopped the target before the new image's first instruction
// (exec_stop); what the image will load is predicted from its file and
// environment as Launch does (the dynamic linker has mapped nothing yet),
// and probed: its allocator (an LD_PRELOADed jemalloc, musl, a static
// glibc), exit(), the dynamic linker's hook, zlib and declared pairs. A
// Java launcher switches --malloc auto to the JVM's probe set.
func (t *Tracer) followExecLocked() {
	t.checkExecLocked() // the old image's view goes first
	if t.probes.Detached() {
		return
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", t.pid))
	if err != nil {
		return // exited already
	}
	exe = strings.TrimSuffix(exe, " (deleted)")
	argv, _ := procfs.Command(t.pid)
	t.execs.cmds = append(t.execs.cmds, strings.Join(argv, " "))
	if root, err := os.Readlink(fmt.Sprintf("/proc/%d/root", t.pid)); err == nil && root != "/" {
		t.warnOnce(fmt.Sprintf("the command exec'd %s inside another root (%s): its allocator and libraries are not followed", exe, root))
		return
	}
	env, err := procfs.Environ(t.pid)
	if err != nil {
		t.warnOnce(fmt.Sprintf("the command exec'd %s: %v; its allocator is not followed", exe, err))
		return
	}
	path := exe
	if interp, ok := target.ScriptInterpreter(path); ok {
		path = interp // exec'd as a script: the kernel runs its interpreter
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	t.view.ExpectExec(path)
	// The program is the traced process's choice, not leakscope's user's:
	// its dynamic linker is asked about it only as that process's user.
	st, err := procfs.ReadStatus(t.pid)
	if err != nil {
		return
	}
	as := &target.Lister{UID: uint32(st.UID[1]), GID: uint32(st.GID[1]), Started: helpers.started}
	alloc, objects, err := target.AllocatorForExec(path, env, t.cache, as)
	if err != nil && !errors.Is(err, ErrNoAllocator) {
		t.warnOnce(fmt.Sprintf("the command exec'd %s: %v; its allocator is not followed", exe, err))
		return
	}
	if isJVM(objects) && t.opts.mallocWhy == "--malloc auto" {
		t.becomeJVMLocked()
	}
	if t.mallocTraced() {
		switch {
		case err != nil:
			t.warnOnce(fmt.Sprintf("the command exec'd %s, which has no malloc to probe: %v", exe, err))
		case !sameFile(alloc.Path, t.alloc.Path):
			prev := t.alloc
			t.alloc = alloc
			if err := t.attachMalloc(); err != nil {
				t.alloc = prev
				t.warnOnce(fmt.Sprintf("the command exec'd %s: probe its allocator %s: %v; its mallocs are not traced", exe, alloc.Display, err))
				break
			}
			if err := t.attachExitHook(); err != nil {
				t.warnOnce(fmt.Sprintf("the command exec'd %s: probe exit() in %s: %v", exe, alloc.Display, err))
			}
		}
	}
	for _, o := range objects {
		if err := t.attachResources(o, o); err != nil {
			t.warnOnce(fmt.Sprintf("the command exec'd %s: probe %s: %v", exe, o, err))
		}
	}
	if err := t.attachLoaderHook(objects); err != nil {
		t.warnOnce(fmt.Sprintf("the command exec'd %s: probe its dynamic linker: %v", exe, err))
	}
	if lib := jdkLibDir(objects); lib != "" {
		t.probeUnloadedLocked(lib) // as for a JVM run directly
	}
}

// becomeJVMLocked switches a capture whose --malloc was auto to the JVM's
// probe set, the command having exec'd a Java launcher: the malloc family
// is no longer probed, and preset jvm (jvm.direct) is added.
func (t *Tracer) becomeJVMLocked() {
	t.opts = withJVMPresets(t.opts, true)
	for len(t.res.pairs) < len(t.opts.Track) {
		t.res.pairs = append(t.res.pairs, nil)
	}
	if !t.mallocTraced() {
		return
	}
	if t.view.ZlibObjects() > 0 {
		// zlib streams were counted by their mallocs; keep them so.
		t.opts.mallocWhy = "--malloc auto: the command exec'd a JVM after zlib was probed"
		return
	}
	t.opts.Malloc, t.opts.mallocWhy = MallocOff, "--malloc auto: the command exec'd a JVM"
	t.probes.DropMalloc()
	if !t.exit.noHook && !t.exit.hooked {
		t.exit.hooked = true
		links, err := t.objs.AttachHooks(kernel.HookExit)
		t.probes.KeepHooks(links)
		if err != nil {
			t.warnOnce(fmt.Sprintf("the command exec'd a JVM: %v; windows of streams live at exit are not counted", err))
		}
	}
}

// sameFile reports whether a and b name one file.
func sameFile(a, b string) bool {
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}
