//go:build linux && amd64

package uprobe

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/arch/x86/x86asm"
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

// SessionFunc is a function alloc_session probes and its function in the
// cookie (enum alloc_fn).
type SessionFunc struct {
	Symbol string
	Fn     uint32
}

// Session attaches alloc_session to the functions fns of o that it
// defines, with one uprobe-session link (kernel 6.13+): an untraced
// (sampled-out) call then costs one trap instead of two. Aliases of one
// address get one probe. The link is among Links.Acquires; on a kernel
// without uprobe sessions Session attaches nothing and fails.
func (a *Attacher) Session(o *Object, fns []SessionFunc) (Links, error) {
	var ls Links
	if a.noSession {
		return ls, errors.New("no uprobe sessions in this kernel")
	}
	var offsets, cookies []uint64
	seen := map[uint64]bool{}
	for _, f := range fns {
		vaddr, ok := o.Lookup(f.Symbol)
		if !ok || seen[vaddr] {
			continue
		}
		seen[vaddr] = true
		off, err := FileOffset(o.Path, vaddr)
		if err != nil {
			return ls, err
		}
		// Entry and return share the site: it lies before any change of
		// the stack pointer (SessionSite).
		at := SessionSite(o.Path, vaddr, off, f.Symbol)
		offsets = append(offsets, off+at.Off)
		cookies = append(cookies, allocCookie(f.Fn, at))
	}
	if err := a.objs.Prepare(kernel.AllocSession, false); err != nil {
		return ls, fmt.Errorf("attach %s: %w", o.Display, err)
	}
	path, display, prog := o.Path, o.Display, a.objs.Program(kernel.AllocSession)
	l, err := a.bind(func(pid int) (link.Link, error) {
		return attachSessionLink(path, display, prog, offsets, cookies, pid)
	})
	if err != nil {
		return ls, err
	}
	ls.Acquires = append(ls.Acquires, l)
	return ls, nil
}

// SessionSite is where alloc_session probes the malloc-family function
// symbol at vaddr, file offset off, of the object at path. Its cookie says
// where the arguments are (allocCookie), so the site may lie past copies
// of them into other registers.
func SessionSite(path string, vaddr, off uint64, symbol string) Site {
	n := specNeeds(Spec{Symbol: symbol, Ret: true})
	n.follow = true
	return findSite(path, vaddr, off, n)
}

// argRegCodes are the cookie's names (enum arg_reg) of the registers an
// argument can be in.
var argRegCodes = map[x86asm.Reg]uint32{
	x86asm.RDI: kernel.ArgRegDI, x86asm.RSI: kernel.ArgRegSI, x86asm.RDX: kernel.ArgRegDX,
	x86asm.RCX: kernel.ArgRegCX, x86asm.R8: kernel.ArgRegR8, x86asm.R9: kernel.ArgRegR9,
	x86asm.RAX: kernel.ArgRegAX, x86asm.RBX: kernel.ArgRegBX, x86asm.RBP: kernel.ArgRegBP,
	x86asm.R10: kernel.ArgRegR10, x86asm.R11: kernel.ArgRegR11, x86asm.R12: kernel.ArgRegR12,
	x86asm.R13: kernel.ArgRegR13, x86asm.R14: kernel.ArgRegR14, x86asm.R15: kernel.ArgRegR15,
}

// allocCookie is alloc_session's cookie for function fn probed at site
// s: an argument no register holds there (which fn does not read) is
// named by its own register.
func allocCookie(fn uint32, s Site) uint64 {
	c := kernel.AllocCookie{Fn: fn}
	for i, r := range s.Args {
		if r == 0 {
			r = argReg64(i + 1)
		}
		c.Reg[i] = argRegCodes[r]
	}
	return c.Encode()
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
