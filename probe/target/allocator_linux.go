//go:build linux && amd64

package target

import (
	"bufio"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/leakscope/leakscope/probe/procfs"
	"github.com/leakscope/leakscope/probe/symbolize"
)

// Allocator is the object whose malloc the process calls.
type Allocator struct {
	Path    string // where leakscope opens it (under /proc/PID/root)
	Display string // the path as the target sees it
	Obj     *symbolize.Object
}

// FindAllocator picks the allocator among the objects mapped by a running
// process, in the order the dynamic linker resolves malloc: the executable
// itself (static or self-contained allocators), then an interposing library
// (jemalloc, tcmalloc, mimalloc, usually LD_PRELOADed), then libc.
func FindAllocator(pid int, maps []procfs.Mapping, cache *symbolize.Cache) (Allocator, error) {
	var exe, interposer, libc *Allocator
	seen := map[string]bool{}
	exePath, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	exePath = strings.TrimSuffix(exePath, " (deleted)")
	for _, m := range maps {
		if !m.Exec() || !strings.HasPrefix(m.Path, "/") || seen[m.Path] {
			continue
		}
		seen[m.Path] = true
		path := procfs.ObjectPath(pid, m)
		obj, err := cache.Object(path)
		if err != nil {
			continue
		}
		a := &Allocator{Path: path, Display: m.Path, Obj: obj}
		switch {
		case m.Path == exePath:
			if obj.Exports("malloc") || definesStatic(obj, "malloc") {
				exe = a
			}
		case isLibc(m.Path):
			if obj.Exports("malloc") {
				libc = a
			}
		case obj.Exports("malloc") && obj.Exports("free"):
			if interposer == nil {
				interposer = a
			}
		}
	}
	for _, a := range []*Allocator{exe, interposer, libc} {
		if a != nil {
			return *a, nil
		}
	}
	return Allocator{}, fmt.Errorf("process %d: no mapped object exports malloc: %w", pid, ErrNoAllocator)
}

// definesStatic reports whether a statically linked executable defines name.
func definesStatic(obj *symbolize.Object, name string) bool {
	_, ok := obj.Lookup(name)
	return ok
}

func isLibc(path string) bool {
	base := filepath.Base(path)
	return strings.HasPrefix(base, "libc.so") || strings.HasPrefix(base, "libc-")
}

// AllocatorForExec predicts the allocator of a program before it runs, so
// probes are in place at its first instruction. It asks the program's own
// dynamic linker (ld.so --list, what ldd does, without running the program)
// with the program's environment, so LD_PRELOAD and LD_LIBRARY_PATH count.
// It also returns every object the program will load at start, the
// executable first.
func AllocatorForExec(path string, env []string, cache *symbolize.Cache, as *Lister) (Allocator, []string, error) {
	a, libs, err := predictAllocator(path, env, cache, as)
	return a, append([]string{path}, libs...), err
}

// mappedPath is path as the kernel will name its mapping once the program
// runs: symbolic links resolved (ld.so lists /lib/x86_64-linux-gnu/libc.so.6,
// which Debian's merged /usr maps as /usr/lib/x86_64-linux-gnu/libc.so.6),
// so that the allocator is recognised among the mapped objects. A path
// that does not resolve is kept as it is.
func mappedPath(path string) string {
	if p, err := filepath.EvalSymlinks(path); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			return abs
		}
	}
	return path
}

func predictAllocator(path string, env []string, cache *symbolize.Cache, as *Lister) (Allocator, []string, error) {
	obj, err := cache.Object(path)
	if err != nil {
		return Allocator{}, nil, fmt.Errorf("read %s: %w", path, err)
	}
	interp, err := interpreter(path)
	if err != nil {
		return Allocator{}, nil, err
	}
	if interp == "" { // static executable
		if definesStatic(obj, "malloc") {
			return Allocator{Path: path, Display: mappedPath(path), Obj: obj}, nil, nil
		}
		return Allocator{}, nil, fmt.Errorf("%s is static and defines no malloc: %w", path, ErrNoAllocator)
	}
	libs, err := as.listLibraries(interp, path, env)
	if err != nil {
		return Allocator{}, nil, err
	}
	if obj.Exports("malloc") {
		return Allocator{Path: path, Display: mappedPath(path), Obj: obj}, libs, nil
	}
	var libc *Allocator
	for _, lib := range libs {
		o, err := cache.Object(lib)
		if err != nil || !o.Exports("malloc") {
			continue
		}
		a := &Allocator{Path: lib, Display: mappedPath(lib), Obj: o}
		if isLibc(lib) {
			if libc == nil {
				libc = a
			}
			continue
		}
		if o.Exports("free") {
			return *a, libs, nil
		}
	}
	if libc != nil {
		return *libc, libs, nil
	}
	return Allocator{}, nil, fmt.Errorf("%s: none of its libraries exports malloc: %w", path, ErrNoAllocator)
}

// Static reports whether the executable at path is static: it has no
// PT_INTERP, so no library will be mapped into it.
func Static(path string) (bool, error) {
	interp, err := interpreter(path)
	return interp == "", err
}

// interpreter returns the PT_INTERP of an executable, "" for a static one.
func interpreter(path string) (string, error) {
	f, err := procfs.OpenELF(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			return "", fmt.Errorf("read interpreter of %s: %w", path, err)
		}
		return string(bytes.TrimRight(b, "\x00")), nil
	}
	return "", nil
}

// listLibraries runs "INTERP --list PATH" and returns the resolved paths in
// load order (preloaded libraries first).
func (as *Lister) listLibraries(interp, path string, env []string) ([]string, error) {
	cmd := exec.Command(interp, "--list", path)
	cmd.Env = env
	var out []byte
	if as == nil {
		var err error
		if out, err = cmd.Output(); err != nil {
			return nil, fmt.Errorf("list libraries of %s with %s: %w", path, interp, err)
		}
	} else {
		var err error
		if out, err = as.run(cmd, interp, path); err != nil {
			return nil, err
		}
	}
	var libs []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		libs = append(libs, parseListLine(sc.Text())...)
	}
	return libs, nil
}

// Lister runs the dynamic linker's --list for a program leakscope did not
// choose (one a traced process exec'd): as the process's own user, only
// with an interpreter root owns and nobody else may change, with only the
// environment variables that decide what is loaded (LD_PRELOAD,
// LD_LIBRARY_PATH: never LD_AUDIT, whose modules run code), bounded in
// time and output. A nil lister runs it as leakscope's own command
// (run's command, which the user chose).
type Lister struct {
	UID, GID uint32 // the process's user and group
	// Started, if set, is called with the pid of each --list it starts;
	// the function it returns, once that exited (the tracer keeps its
	// own helper processes apart from the target's).
	Started func(pid int) (exited func())
}

// listerTimeout and listerMaxOutput bound one --list.
const (
	listerTimeout   = 3 * time.Second
	listerMaxOutput = 1 << 20
)

func (as *Lister) run(cmd *exec.Cmd, interp, path string) ([]byte, error) {
	if err := rootOwned(interp); err != nil {
		return nil, fmt.Errorf("list libraries of %s: its interpreter %w; not run", path, err)
	}
	var env []string
	for _, kv := range cmd.Env {
		if strings.HasPrefix(kv, "LD_PRELOAD=") || strings.HasPrefix(kv, "LD_LIBRARY_PATH=") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: as.UID, Gid: as.GID, NoSetGroups: true}}
	out := &cappedBuffer{max: listerMaxOutput}
	cmd.Stdout = out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("list libraries of %s with %s: %w", path, interp, err)
	}
	if as.Started != nil {
		defer as.Started(cmd.Process.Pid)()
	}
	timer := time.AfterFunc(listerTimeout, func() { _ = cmd.Process.Kill() })
	err := cmd.Wait()
	timer.Stop()
	switch {
	case out.over:
		return nil, fmt.Errorf("list libraries of %s with %s: more than %d bytes of output", path, interp, listerMaxOutput)
	case err != nil:
		return nil, fmt.Errorf("list libraries of %s with %s: %w (at most %s)", path, interp, err, listerTimeout)
	}
	return out.b, nil
}

// rootOwned fails unless path and every directory above it are owned by
// root and writable by no one else: a file nobody else can replace.
func rootOwned(path string) error {
	for p := path; ; p = filepath.Dir(p) {
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		sys := st.Sys().(*syscall.Stat_t)
		if sys.Uid != 0 || st.Mode().Perm()&0o022 != 0 && st.Mode()&os.ModeSticky == 0 {
			return fmt.Errorf("%s is not root's alone (uid %d, mode %v)", p, sys.Uid, st.Mode())
		}
		if p == "/" || p == "." {
			return nil
		}
	}
}

// cappedBuffer keeps the first max bytes written and notes the rest.
type cappedBuffer struct {
	b    []byte
	max  int
	over bool
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	if len(c.b)+len(p) > c.max {
		c.over = true
		return 0, errors.New("output too long")
	}
	c.b = append(c.b, p...)
	return len(p), nil
}

// parseListLine extracts the resolved path from one line of ld.so --list:
// "\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or
// "\t/lib64/ld-linux-x86-64.so.2 (0x...)".
func parseListLine(line string) []string {
	line = strings.TrimSpace(line)
	if i := strings.Index(line, "=>"); i >= 0 {
		line = strings.TrimSpace(line[i+2:])
	}
	if i := strings.LastIndex(line, " ("); i >= 0 {
		line = line[:i]
	}
	if strings.HasPrefix(line, "/") {
		return []string{line}
	}
	return nil
}

// ScriptInterpreter follows a "#!" line to the program the kernel will run.
func ScriptInterpreter(path string) (string, bool) {
	f, err := procfs.OpenFile(nil, path, procfs.ObjectLimits)
	if err != nil {
		return "", false
	}
	defer f.Close()
	line, _ := bufio.NewReader(io.LimitReader(f, 4096)).ReadString('\n')
	if !strings.HasPrefix(line, "#!") {
		return "", false
	}
	fields := strings.Fields(line[2:])
	if len(fields) == 0 {
		return "", false
	}
	return fields[0], true
}
