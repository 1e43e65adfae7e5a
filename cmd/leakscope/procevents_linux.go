//go:build linux && amd64

package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// procEvent is one process event of the kernel's proc connector: a process
// forked (a new thread group), exec'd, renamed itself or exited.
type procEvent struct {
	what uint32 // procEventFork, procEventExec, procEventComm, procEventExit; procEventNone: the kernel's answer to the subscription
	pid  int    // the process (thread group id); the child of a fork
	err  uint32 // procEventNone: the errno refusing the subscription (EPERM without CAP_NET_ADMIN), 0 when accepted
}

// The proc connector's numbers (linux/connector.h, linux/cn_proc.h).
const (
	cnIdxProc          = 1
	cnValProc          = 1
	procCnMcastListen  = 1
	procEventNone      = 0x00000000
	procEventFork      = 0x00000001
	procEventExec      = 0x00000002
	procEventComm      = 0x00000200
	procEventExit      = 0x80000000
	nlmsgHdrLen        = 16 // struct nlmsghdr
	cnMsgLen           = 20 // struct cn_msg: id {idx, val}, seq, ack, len, flags
	procEventHeaderLen = 16 // struct proc_event: what, cpu, timestamp_ns
	procEventsRcvBuf   = 4 << 20
)

// procEvents subscribes to the kernel's process events (the proc
// connector: NETLINK_CONNECTOR, CN_IDX_PROC; root in the initial user and
// pid namespaces) and sends the forks of new processes, execs, renames and
// exits of thread groups to events until done is closed, dropping what
// the loop has no room for (its /proc scan finds those). lost is called
// when the kernel dropped events (a full socket buffer). The kernel
// answers the subscription with a procEventNone event, whose err is not 0
// when it refused it (CAP_NET_ADMIN is needed).
func procEvents(done <-chan struct{}, events chan<- procEvent, lost func(error)) error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_CONNECTOR)
	if err != nil {
		return fmt.Errorf("open the proc connector: %w", err)
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, procEventsRcvBuf)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: cnIdxProc}); err != nil {
		unix.Close(fd)
		return fmt.Errorf("bind the proc connector: %w", err)
	}
	msg := make([]byte, nlmsgHdrLen+cnMsgLen+4)
	le := binary.LittleEndian
	le.PutUint32(msg[0:], uint32(len(msg)))
	le.PutUint16(msg[4:], unix.NLMSG_DONE)
	le.PutUint32(msg[12:], uint32(os.Getpid()))
	le.PutUint32(msg[16:], cnIdxProc)
	le.PutUint32(msg[20:], cnValProc)
	le.PutUint16(msg[32:], 4)
	le.PutUint32(msg[36:], procCnMcastListen)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return fmt.Errorf("subscribe to the proc connector: %w", err)
	}
	f := os.NewFile(uintptr(fd), "proc-connector")
	go func() {
		<-done
		f.Close() // wakes the reader
	}()
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := f.Read(buf)
			if err != nil {
				if errors.Is(err, unix.ENOBUFS) {
					lost(err)
					continue
				}
				return // closed
			}
			parseProcEvents(buf[:n], func(ev procEvent) {
				select {
				case events <- ev:
				default:
				}
			})
		}
	}()
	return nil
}

// parseProcEvents calls fn for each event of interest in one datagram of
// netlink messages from the proc connector.
func parseProcEvents(b []byte, fn func(procEvent)) {
	le := binary.LittleEndian
	for len(b) >= nlmsgHdrLen {
		n := int(le.Uint32(b))
		if n < nlmsgHdrLen || n > len(b) {
			return
		}
		m := b[nlmsgHdrLen:n]
		b = b[(n+3)&^3:]
		if len(m) < cnMsgLen+procEventHeaderLen || le.Uint32(m) != cnIdxProc || le.Uint32(m[4:]) != cnValProc {
			if len(b) < nlmsgHdrLen {
				return
			}
			continue
		}
		ev := m[cnMsgLen:]
		what, data := le.Uint32(ev), ev[procEventHeaderLen:]
		u32 := func(i int) int {
			if len(data) < 4*i+4 {
				return -1
			}
			return int(le.Uint32(data[4*i:]))
		}
		switch what {
		case procEventNone: // the subscription's ack: err
			fn(procEvent{what: what, err: uint32(max(u32(0), 0))})
		case procEventFork: // parent_pid, parent_tgid, child_pid, child_tgid
			if child := u32(2); child > 0 && child == u32(3) {
				fn(procEvent{what: what, pid: child})
			}
		case procEventExec, procEventComm, procEventExit: // process_pid, process_tgid, ...
			if pid := u32(0); pid > 0 && pid == u32(1) {
				fn(procEvent{what: what, pid: pid})
			}
		}
		if len(b) < nlmsgHdrLen {
			return
		}
	}
}
