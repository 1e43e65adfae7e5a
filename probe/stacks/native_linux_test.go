//go:build linux

package stacks

import (
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/leakscope/leakscope/probe/procfs"
	"github.com/leakscope/leakscope/probe/symbolize"
)

// selfMaps is this test process's executable mappings, its objects
// opened through a symbol cache.
type selfMaps struct {
	maps  []procfs.Mapping
	cache *symbolize.Cache
}

func (m *selfMaps) Lookup(addr uint64) (procfs.Mapping, bool) {
	for _, x := range m.maps {
		if addr >= x.Start && addr < x.End {
			return x, true
		}
	}
	return procfs.Mapping{}, false
}
func (m *selfMaps) Object(x procfs.Mapping) (*symbolize.Object, error) {
	return m.cache.Object(procfs.ObjectPath(os.Getpid(), x))
}
func (m *selfMaps) NoFramePointers(procfs.Mapping) bool { return false }
func (m *selfMaps) Unwound(procfs.Mapping) bool         { return false }
func (m *selfMaps) Seen() int                           { return len(m.maps) }
func (m *selfMaps) DebugGeneration() uint64             { return m.cache.DebugGeneration() }

//go:noinline
func callers() []uintptr {
	pcs := make([]uintptr, 64)
	return pcs[:runtime.Callers(1, pcs)]
}

// The return addresses of this goroutine resolve to its functions in the
// test binary, named from its .gopclntab, down to runtime.goexit, where a
// walk is complete; an address in no mapping after the first frame stops
// the stack there, saying so.
func TestNativeFramesResolve(t *testing.T) {
	all, err := procfs.ReadMaps(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	m := &selfMaps{cache: symbolize.NewCache()}
	for _, x := range all {
		if x.Exec() && x.FileBacked() {
			m.maps = append(m.maps, x)
		}
	}
	raw := &Raw{}
	for _, pc := range callers() {
		raw.Entries = append(raw.Entries, Entry{Addr: uint64(pc)})
	}
	st := New(m).Resolve(raw).Stack()
	var names []string
	for _, f := range st.Frames {
		names = append(names, f.Function)
	}
	got := strings.Join(names, ",")
	if !strings.Contains(got, "stacks.callers,") || !strings.Contains(got, "stacks.TestNativeFramesResolve,") ||
		!strings.HasSuffix(got, "runtime.goexit") {
		t.Errorf("frames %s: want stacks.callers, stacks.TestNativeFramesResolve, …, runtime.goexit", got)
	}
	if st.Truncated != "" {
		t.Errorf("a walk down to runtime.goexit is complete; reason %q", st.Truncated)
	}
	exe, _ := os.Executable()
	if st.Frames[0].Module != exe {
		t.Errorf("module %q, want the test binary %q", st.Frames[0].Module, exe)
	}

	raw.Entries = append(raw.Entries[:2:2], Entry{Addr: 0x10}, raw.Entries[2])
	cut := New(m).Resolve(raw).Stack()
	if len(cut.Frames) != 2 || !strings.Contains(cut.Truncated, "walk stopped at 0x10: not in any executable mapping") {
		t.Errorf("an unmapped third frame: %d frames, reason %q", len(cut.Frames), cut.Truncated)
	}
}
