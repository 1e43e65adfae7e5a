//go:build linux && amd64

package main

import (
	"encoding/binary"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/leakscope/leakscope/internal/testutil"
)

// procMsg is one netlink message of the proc connector carrying event
// what with data (little-endian u32 words).
func procMsg(what uint32, data ...uint32) []byte {
	le := binary.LittleEndian
	b := make([]byte, nlmsgHdrLen+cnMsgLen+procEventHeaderLen+4*len(data))
	le.PutUint32(b, uint32(len(b)))
	le.PutUint32(b[nlmsgHdrLen:], cnIdxProc)
	le.PutUint32(b[nlmsgHdrLen+4:], cnValProc)
	ev := b[nlmsgHdrLen+cnMsgLen:]
	le.PutUint32(ev, what)
	for i, d := range data {
		le.PutUint32(ev[procEventHeaderLen+4*i:], d)
	}
	return b
}

// The events the agent acts on are read from a datagram of several
// messages: a thread's fork, exec or exit is not a process's, a message
// of another connector is skipped, a truncated one ends the datagram.
func TestParseProcEvents(t *testing.T) {
	var b []byte
	b = append(b, procMsg(procEventNone, 1)...)              // the subscription refused: EPERM
	b = append(b, procMsg(procEventFork, 10, 10, 11, 11)...) // a new process 11
	b = append(b, procMsg(procEventFork, 10, 10, 12, 10)...) // a thread of 10
	b = append(b, procMsg(procEventExec, 11, 11)...)         // 11 execs
	b = append(b, procMsg(procEventComm, 13, 11, 0, 0)...)   // a thread of 11 renamed
	b = append(b, procMsg(0x00000004, 11, 11, 0, 0)...)      // a uid change: not used
	other := procMsg(procEventExec, 99, 99)
	binary.LittleEndian.PutUint32(other[nlmsgHdrLen:], 7) // another connector
	b = append(b, other...)
	b = append(b, procMsg(procEventExit, 11, 11, 0, 9, 10, 10)...) // 11 exits
	b = append(b, procMsg(procEventExec, 14, 14)[:nlmsgHdrLen+8]...)
	var got []procEvent
	parseProcEvents(b, func(ev procEvent) { got = append(got, ev) })
	want := []procEvent{
		{what: procEventNone, err: 1},
		{what: procEventFork, pid: 11},
		{what: procEventExec, pid: 11},
		{what: procEventExit, pid: 11},
	}
	if !slices.Equal(got, want) {
		t.Errorf("events = %+v, want %+v", got, want)
	}
}

// The kernel's proc connector announces a process's exec and exit, with
// its pid, within a second.
func TestProcEventsExec(t *testing.T) {
	done := make(chan struct{})
	defer close(done)
	events := make(chan procEvent, 1<<16)
	if err := procEvents(done, events, func(error) {}); err != nil {
		testutil.SkipOrFail(t, "no proc connector: "+err.Error())
	}
	time.Sleep(50 * time.Millisecond) // the subscription is asynchronous
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	var exec, exit bool
	timeout := time.After(5 * time.Second)
	for !exec || !exit {
		select {
		case ev := <-events:
			if ev.what == procEventNone && ev.err != 0 {
				testutil.SkipOrFail(t, "the kernel refused the proc connector subscription")
			}
			if ev.pid == pid {
				exec = exec || ev.what == procEventExec
				exit = exit || ev.what == procEventExit
			}
		case <-timeout:
			t.Fatalf("pid %d: exec seen %v, exit seen %v within 5s", pid, exec, exit)
		}
	}
}
