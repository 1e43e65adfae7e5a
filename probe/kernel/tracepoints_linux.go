//go:build linux

package kernel

import (
	"fmt"
	"os"

	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// Hook is one of the object's process-event programs, attached to the
// kernel's tracepoints rather than to the target's code: they see every
// process and find the target's by their tables.
type Hook int

const (
	// HookExec is target_exec: the target exec'd (sched_process_exec).
	HookExec Hook = iota
	// HookFork is target_fork: the target forked or cloned
	// (sched_process_fork).
	HookFork
	// HookExit is target_exit: the target exits (sched_process_exit),
	// its exit status and live inflate windows counted.
	HookExit
	// HookMaps is the mapping kinds' programs: the exits of mmap,
	// munmap and mremap (their syscall tracepoints: no program runs for
	// other syscalls) and the thread start and exit programs. It mounts
	// tracefs when neither it nor debugfs is (a container, a minimal
	// system): syscall tracepoints are attached by their id, read there.
	HookMaps
)

// AttachHooks attaches the hooks' programs. It returns the links made,
// also when a later one failed (the caller closes them), and an error
// naming the program or tracepoint. (fexit on __x64_sys_mmap would need
// no tracefs, but the kernel refuses to load it here: EPERM.)
func (o *Objects) AttachHooks(hooks ...Hook) ([]link.Link, error) {
	var links []link.Link
	tracing := func(p Program) error {
		prog := o.Program(p)
		l, err := link.AttachTracing(link.TracingOptions{Program: prog})
		if err != nil {
			return fmt.Errorf("attach %s: %w", prog, err)
		}
		links = append(links, l)
		return nil
	}
	for _, h := range hooks {
		var err error
		switch h {
		case HookExec:
			err = tracing(TargetExec)
		case HookFork:
			err = tracing(TargetFork)
		case HookExit:
			err = tracing(TargetExit)
		case HookMaps:
			err = o.attachMaps(&links, tracing)
		default:
			err = fmt.Errorf("no hook %d", h)
		}
		if err != nil {
			return links, err
		}
	}
	return links, nil
}

func (o *Objects) attachMaps(links *[]link.Link, tracing func(Program) error) error {
	if err := ensureTracefs(); err != nil {
		return err
	}
	for _, tp := range []struct {
		name string
		prog Program
	}{
		{"sys_exit_mmap", MmapExit},
		{"sys_exit_munmap", MunmapExit},
		{"sys_exit_mremap", MremapExit},
	} {
		l, err := link.Tracepoint("syscalls", tp.name, o.Program(tp.prog), nil)
		if err != nil {
			return fmt.Errorf("attach tracepoint syscalls:%s: %w", tp.name, err)
		}
		*links = append(*links, l)
	}
	if err := tracing(ThreadStart); err != nil {
		return err
	}
	return tracing(ThreadExit)
}

// tracefsRoots are where tracefs is found mounted.
var tracefsRoots = []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}

// TracefsMounted reports whether tracefs's events are readable.
func TracefsMounted() bool {
	for _, p := range tracefsRoots {
		if _, err := os.Stat(p + "/events"); err == nil {
			return true
		}
	}
	return false
}

// TracepointExists reports whether tracefs lists the tracepoint
// group:name.
func TracepointExists(group, name string) bool {
	for _, p := range tracefsRoots {
		if _, err := os.Stat(p + "/events/" + group + "/" + name + "/id"); err == nil {
			return true
		}
	}
	return false
}

// ensureTracefs mounts tracefs at /sys/kernel/tracing when neither it
// nor debugfs is mounted.
func ensureTracefs() error {
	if TracefsMounted() {
		return nil
	}
	if err := unix.Mount("nodev", "/sys/kernel/tracing", "tracefs", 0, ""); err != nil {
		return fmt.Errorf("mount tracefs at /sys/kernel/tracing (the syscall tracepoints of --maps): %w", err)
	}
	return nil
}
