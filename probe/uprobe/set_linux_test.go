//go:build linux && amd64

package uprobe

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cilium/ebpf/link"
)

// fakeLink is a link that records its close; the embedded interface is
// nil (only Close is called).
type fakeLink struct {
	link.Link
	name string
	log  *closeLog
}

func (l *fakeLink) Close() error {
	l.log.add(l.name)
	return nil
}

// closeLog records closes in order; closes within one CloseLinks call
// run concurrently, so a test compares groups, not positions in one.
type closeLog struct {
	mu     sync.Mutex
	closed []string
}

func (c *closeLog) add(name string) {
	c.mu.Lock()
	c.closed = append(c.closed, name)
	c.mu.Unlock()
}

func (c *closeLog) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.closed)
}

// maker makes links named fn@pid and records each made; fail makes it
// refuse pid.
type maker struct {
	log  *closeLog
	made *[]string
	fail map[int]bool
}

func (m maker) of(fn string) Maker {
	return func(pid int) (link.Link, error) {
		if m.fail[pid] {
			return nil, fmt.Errorf("pid %d: refused", pid)
		}
		name := fmt.Sprintf("%s@%d", fn, pid)
		*m.made = append(*m.made, name)
		return &fakeLink{name: name, log: m.log}, nil
	}
}

func newTestSet(t *testing.T, fail map[int]bool, gone map[int]bool) (*Set, maker, *closeLog, *[]string) {
	t.Helper()
	log := &closeLog{}
	var warnings []string
	s := NewSet(100, func(w string) { warnings = append(warnings, w) }, func(pid int) bool { return gone[pid] })
	return s, maker{log: log, made: new([]string), fail: fail}, log, &warnings
}

// bind attaches fn for the Set's process as an Attacher would.
func bind(t *testing.T, s *Set, m maker, fn string) link.Link {
	t.Helper()
	l, err := s.Bind(m.of(fn))
	if err != nil {
		t.Fatalf("bind %s: %v", fn, err)
	}
	return l
}

func TestSetSharesReleasesFirstAndDetachesThemLast(t *testing.T) {
	s, m, log, warnings := newTestSet(t, nil, nil)
	free := bind(t, s, m, "free")
	malloc := bind(t, s, m, "malloc")
	end := bind(t, s, m, "inflateEnd")
	init := bind(t, s, m, "inflateInit2_")
	s.KeepMalloc(Links{Acquires: []link.Link{malloc}, Releases: []link.Link{free}})
	s.Keep(Links{Acquires: []link.Link{init}, Releases: []link.Link{end}})
	s.KeepHooks([]link.Link{&fakeLink{name: "tracepoint", log: log}})

	*m.made = nil
	s.Share(200)
	// Releases before acquires: a block allocated while only its
	// allocation was probed in the child, and freed, would be a false leak.
	if want := []string{"inflateEnd@200", "free@200", "inflateInit2_@200", "malloc@200"}; !slices.Equal(*m.made, want) {
		t.Errorf("Share made %v, want %v (releases first, the tracepoint bound to no process)", *m.made, want)
	}
	s.Share(200)
	if len(*m.made) != 4 {
		t.Errorf("a second Share of pid 200 made %v", (*m.made)[4:])
	}
	// A link bound later is made for the sharing process too.
	*m.made = nil
	later := bind(t, s, m, "deflateEnd")
	s.Keep(Links{Releases: []link.Link{later}})
	if want := []string{"deflateEnd@100", "deflateEnd@200"}; !slices.Equal(*m.made, want) {
		t.Errorf("Bind made %v, want %v", *m.made, want)
	}

	closeAll := s.Detach()
	if !s.Detached() {
		t.Fatal("Detached is false after Detach")
	}
	if got := log.list(); len(got) != 0 {
		t.Fatalf("Detach closed %v before its close function ran", got)
	}
	closeAll()
	got := log.list()
	acquires := []string{"inflateInit2_@100", "malloc@100", "tracepoint", "inflateInit2_@200", "malloc@200", "inflateEnd@200", "free@200", "deflateEnd@200"}
	releases := []string{"inflateEnd@100", "free@100", "deflateEnd@100"}
	if len(got) != len(acquires)+len(releases) {
		t.Fatalf("closed %v, want %d links", got, len(acquires)+len(releases))
	}
	slices.Sort(acquires)
	slices.Sort(releases)
	first, last := slices.Clone(got[:len(acquires)]), slices.Clone(got[len(acquires):])
	slices.Sort(first)
	slices.Sort(last)
	// The process's release probes close after everything else, the
	// sharing process's with the acquires (its calls count as the
	// process's, and its own releases go with them).
	if !slices.Equal(first, acquires) || !slices.Equal(last, releases) {
		t.Errorf("closed %v, want %v then %v", got, acquires, releases)
	}
	*m.made = nil
	s.Share(300)
	if len(*m.made) != 0 {
		t.Errorf("Share after Detach made %v", *m.made)
	}
	// An attachment that raced the detach is closed, not kept.
	log.closed = nil
	late := bind(t, s, m, "deflateInit2_")
	s.Keep(Links{Acquires: []link.Link{late}})
	s.KeepHooks([]link.Link{&fakeLink{name: "late tracepoint", log: log}})
	if got := log.list(); !slices.Equal(got, []string{"deflateInit2_@100", "late tracepoint"}) {
		t.Errorf("links kept after Detach: closed %v, want both at once", got)
	}
	if len(*warnings) != 0 {
		t.Errorf("warnings: %q", *warnings)
	}
}

func TestSetUnshareAndDropMalloc(t *testing.T) {
	s, m, log, _ := newTestSet(t, nil, nil)
	free := bind(t, s, m, "free")
	malloc := bind(t, s, m, "malloc")
	end := bind(t, s, m, "inflateEnd")
	s.KeepMalloc(Links{Acquires: []link.Link{malloc}, Releases: []link.Link{free}})
	s.Keep(Links{Releases: []link.Link{end}})
	s.Share(200)

	s.Unshare(200) // it exec'd: its memory is its own
	got := log.list()
	slices.Sort(got)
	if want := []string{"free@200", "inflateEnd@200", "malloc@200"}; !slices.Equal(got, want) {
		t.Errorf("Unshare closed %v, want %v", got, want)
	}
	log.closed = nil
	s.DropMalloc() // the command exec'd a JVM
	got = log.list()
	slices.Sort(got)
	if want := []string{"free@100", "malloc@100"}; !slices.Equal(got, want) {
		t.Errorf("DropMalloc closed %v, want %v", got, want)
	}
	*m.made = nil
	s.Share(300)
	if want := []string{"inflateEnd@300"}; !slices.Equal(*m.made, want) {
		t.Errorf("Share after DropMalloc made %v, want %v", *m.made, want)
	}
	log.closed = nil
	s.Detach()()
	got = log.list()
	slices.Sort(got)
	if want := []string{"inflateEnd@100", "inflateEnd@300"}; !slices.Equal(got, want) {
		t.Errorf("Detach closed %v, want %v", got, want)
	}
}

func TestSetWarnsOfALinkAProcessCouldNotGet(t *testing.T) {
	s, m, _, warnings := newTestSet(t, map[int]bool{200: true, 300: true}, map[int]bool{300: true})
	end := bind(t, s, m, "inflateEnd")
	s.Keep(Links{Releases: []link.Link{end}})
	s.Share(200) // refused, alive: said
	s.Share(300) // refused, exited: nothing lost
	if len(*warnings) != 1 || !strings.HasPrefix((*warnings)[0], "pid 200, sharing pid 100's memory: a probe could not be attached: pid 200: refused") {
		t.Errorf("warnings %q, want one for pid 200", *warnings)
	}
	// A link its own process refuses is the caller's error, not a warning.
	if _, err := s.Bind(maker{log: &closeLog{}, made: new([]string), fail: map[int]bool{100: true}}.of("x")); err == nil {
		t.Errorf("Bind for a refusing process: err %v", err)
	}
	if len(*warnings) != 1 {
		t.Errorf("warnings %q after a refused Bind", *warnings)
	}
}
