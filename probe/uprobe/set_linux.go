//go:build linux && amd64

package uprobe

import (
	"fmt"
	"sync"

	"github.com/cilium/ebpf/link"
)

// Set holds the links attached for one traced process, grouped as a
// detach must close them, and the Maker of each uprobe link, which makes
// it again for another process sharing that process's memory (Share).
//
// A Set is not safe for concurrent use: its owner serializes the calls.
type Set struct {
	pid int
	// warn says a problem to the user; gone reports whether a process has
	// exited (a link that could not be made for it is no loss then).
	warn func(string)
	gone func(pid int) bool

	// acquires and releases are every group's links but the malloc
	// family's, which are apart (DropMalloc closes them).
	acquires, releases             []link.Link
	mallocAcquires, mallocReleases []link.Link
	// makers makes each uprobe link again; links without one (a
	// tracepoint's) are bound to no process.
	makers map[link.Link]Maker
	// shared are the links made for each process sharing pid's memory.
	shared   map[int][]link.Link
	detached bool
}

// NewSet returns an empty Set for process pid. warn says a link that
// could not be made for a process sharing pid's memory, unless gone says
// that process exited.
func NewSet(pid int, warn func(string), gone func(pid int) bool) *Set {
	return &Set{pid: pid, warn: warn, gone: gone, makers: map[link.Link]Maker{}, shared: map[int][]link.Link{}}
}

// Keep takes the links of an attachment. Once the Set is detached it
// closes them instead: an attachment that raced the detach leaves no
// probe behind.
func (s *Set) Keep(ls Links) {
	if s.closeLate(ls.Acquires, ls.Releases) {
		return
	}
	s.acquires = append(s.acquires, ls.Acquires...)
	s.releases = append(s.releases, ls.Releases...)
}

// KeepMalloc takes the links of the malloc family's attachment (as Keep).
func (s *Set) KeepMalloc(ls Links) {
	if s.closeLate(ls.Acquires, ls.Releases) {
		return
	}
	s.mallocAcquires = append(s.mallocAcquires, ls.Acquires...)
	s.mallocReleases = append(s.mallocReleases, ls.Releases...)
}

// KeepHooks takes links bound to no process (tracepoints, kernel.Objects.
// AttachHooks); they close with the acquires (as Keep).
func (s *Set) KeepHooks(ls []link.Link) {
	if s.closeLate(ls, nil) {
		return
	}
	s.acquires = append(s.acquires, ls...)
}

// closeLate closes links kept after Detach, the release probes last, and
// reports whether it did.
func (s *Set) closeLate(acquires, releases []link.Link) bool {
	if !s.detached {
		return false
	}
	CloseLinks(acquires)
	CloseLinks(releases)
	return true
}

// Bind makes mk's link for the Set's process and keeps mk, so that the
// link is made again for each process sharing its memory, those sharing
// it now included. It is the bind of an Attacher (New).
func (s *Set) Bind(mk Maker) (link.Link, error) {
	l, err := mk(s.pid)
	if err != nil {
		return nil, err
	}
	s.makers[l] = mk
	for pid := range s.shared {
		if sl, err := mk(pid); err == nil {
			s.shared[pid] = append(s.shared[pid], sl)
		} else {
			s.warnShared(pid, err)
		}
	}
	return l, nil
}

// Share makes every uprobe link of the Set for pid too, which shares the
// Set's process's memory: its calls then count as that process's. The
// release probes come first (as Attacher.Family attaches them). Nothing
// is made once the Set is detached, nor twice for one process.
func (s *Set) Share(pid int) {
	if _, ok := s.shared[pid]; ok || s.detached {
		return
	}
	var made []link.Link
	for _, group := range [][]link.Link{s.releases, s.mallocReleases, s.acquires, s.mallocAcquires} {
		for _, l := range group {
			mk, ok := s.makers[l]
			if !ok {
				continue // bound to no process
			}
			sl, err := mk(pid)
			if err != nil {
				s.warnShared(pid, err)
				continue
			}
			made = append(made, sl)
		}
	}
	s.shared[pid] = made
}

func (s *Set) warnShared(pid int, err error) {
	if !s.gone(pid) {
		s.warn(fmt.Sprintf("pid %d, sharing pid %d's memory: a probe could not be attached: %v; some of its calls are not counted", pid, s.pid, err))
	}
}

// Unshare closes the links made for pid (Share): its memory is its own
// now (it exec'd).
func (s *Set) Unshare(pid int) {
	if ls, ok := s.shared[pid]; ok {
		delete(s.shared, pid)
		CloseLinks(ls)
	}
}

// DropMalloc closes the malloc family's links (KeepMalloc). Their copies
// for processes sharing the memory stay until Unshare or Detach.
func (s *Set) DropMalloc() {
	for _, l := range s.mallocReleases {
		delete(s.makers, l)
	}
	for _, l := range s.mallocAcquires {
		delete(s.makers, l)
	}
	CloseLinks(s.mallocAcquires)
	CloseLinks(s.mallocReleases)
	s.mallocAcquires, s.mallocReleases = nil, nil
}

// Detached reports whether Detach took the links: nothing is to be
// attached after.
func (s *Set) Detached() bool { return s.detached }

// Detach takes every link and returns what closes them, to be called
// without the owner's lock: each close waits for the kernel. The release
// probes close last: the target runs on while the links close, and a
// block allocated and freed while only its allocation was probed would
// stay live for good, a false leak. The Set stays detached.
func (s *Set) Detach() (closeAll func()) {
	s.detached = true
	acquires := append(s.acquires, s.mallocAcquires...)
	releases := append(s.releases, s.mallocReleases...)
	for _, ls := range s.shared {
		acquires = append(acquires, ls...) // theirs go with the process's
	}
	s.acquires, s.releases, s.mallocAcquires, s.mallocReleases = nil, nil, nil, nil
	s.shared, s.makers = map[int][]link.Link{}, map[link.Link]Maker{}
	return func() {
		CloseLinks(acquires)
		CloseLinks(releases)
	}
}

// CloseLinks closes links at once, not one after another: each close
// waits for an RCU grace period.
func CloseLinks(links []link.Link) {
	var wg sync.WaitGroup
	for _, l := range links {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.Close()
		}()
	}
	wg.Wait()
}
