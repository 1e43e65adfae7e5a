//go:build linux && amd64

package probe

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/leakscope/leakscope/probe/kernel"
)

// Constants of the bpf(2) ABI that cilium/ebpf v0.22 does not expose for
// uprobe sessions.
const (
	bpfLinkCreate        = 28 // BPF_LINK_CREATE
	bpfTraceUprobeSesion = 57 // BPF_TRACE_UPROBE_SESSION
)

// linkCreateUprobeMulti is union bpf_attr's link_create for uprobe_multi
// links (include/uapi/linux/bpf.h).
type linkCreateUprobeMulti struct {
	progFd        uint32
	targetFd      uint32
	attachType    uint32
	flags         uint32
	path          uint64
	offsets       uint64
	refCtrOffsets uint64
	cookies       uint64
	cnt           uint32
	multiFlags    uint32
	pid           uint32
	_             uint32
}

// sessionFamily maps the malloc family to alloc_session's cookies
// (enum alloc_fn); free stays a plain entry probe.
var sessionFamily = []struct {
	symbol string
	fn     uint32 // its cookie
}{
	{"malloc", kernel.FnMalloc},
	{"calloc", kernel.FnCalloc},
	{"realloc", kernel.FnRealloc},
	{"reallocarray", kernel.FnReallocarray},
	{"posix_memalign", kernel.FnPosixMemalign},
	{"aligned_alloc", kernel.FnMemalign},
	{"memalign", kernel.FnMemalign},
	{"valloc", kernel.FnValloc},
	{"pvalloc", kernel.FnPvalloc},
}

// attachSession attaches alloc_session to every malloc-family function of
// the allocator with one uprobe-session link (kernel 6.13+): an untraced
// (sampled-out) call then costs one trap instead of two.
func (t *Tracer) attachSession() error {
	var offsets, cookies []uint64
	seen := map[uint64]bool{}
	for _, f := range sessionFamily {
		vaddr, ok := t.alloc.Obj.Lookup(f.symbol)
		if !ok || seen[vaddr] {
			continue
		}
		seen[vaddr] = true
		off, err := fileOffset(t.alloc.Path, vaddr)
		if err != nil {
			return err
		}
		// Entry and return share the site: it lies before any change of
		// the stack pointer (probeSiteOffset).
		at := probeSiteOffset(t.alloc.Path, vaddr, off, probeSpec{symbol: f.symbol, ret: true})
		offsets = append(offsets, off+at.Off)
		cookies = append(cookies, uint64(f.fn))
		t.probed = append(t.probed, f.symbol+at.String())
	}
	allocPath, display, prog := t.alloc.Path, t.alloc.Display, t.objs.Program(kernel.AllocSession)
	l, err := t.attachFor(func(pid int) (link.Link, error) {
		return attachSessionLink(allocPath, display, prog, offsets, cookies, pid)
	})
	if err != nil {
		return err
	}
	t.links = append(t.links, l)
	return nil
}

// attachSessionLink makes the uprobe-session link of prog on the offsets
// of the object at path, for process pid.
func attachSessionLink(path, display string, prog *ebpf.Program, offsets, cookies []uint64, pid int) (link.Link, error) {
	p, err := unix.BytePtrFromString(path)
	if err != nil {
		return nil, err
	}
	attr := linkCreateUprobeMulti{
		progFd:     uint32(prog.FD()),
		attachType: bpfTraceUprobeSesion,
		path:       uint64(uintptr(unsafe.Pointer(p))),
		offsets:    uint64(uintptr(unsafe.Pointer(&offsets[0]))),
		cookies:    uint64(uintptr(unsafe.Pointer(&cookies[0]))),
		cnt:        uint32(len(offsets)),
		pid:        uint32(pid),
	}
	fd, _, errno := unix.Syscall(unix.SYS_BPF, bpfLinkCreate, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	runtime.KeepAlive(p)
	runtime.KeepAlive(offsets)
	runtime.KeepAlive(cookies)
	if errno != 0 {
		if errno == unix.EINVAL || errno == unix.EOPNOTSUPP || errno == unix.ENOTSUP {
			return nil, fmt.Errorf("attach uprobe session on %s: %w (--sample-bytes needs uprobe sessions, Linux 6.13 or later)", display, errno)
		}
		return nil, attachError(display, "malloc family (session)", errno)
	}
	l, err := link.NewFromFD(int(fd))
	if err != nil {
		unix.Close(int(fd))
		return nil, fmt.Errorf("wrap uprobe session link: %w", err)
	}
	return l, nil
}
