//go:build linux

package stacks

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/probe/jvm"
	"github.com/leakscope/leakscope/probe/procfs"
	"github.com/leakscope/leakscope/probe/symbolize"
)

// fakeNamer names a few addresses of a pretend code cache, the way a JVM
// without -XX:+PreserveFramePointer does.
type fakeNamer struct {
	names   map[uint64]jvm.Symbol
	methods map[uint64]string // Method* → name
	lines   map[uint64]int    // return address or Method* → source line
	gen     uint64
	calls   []bool // calledNative of each Frame call
}

func (n *fakeNamer) Code() (jvm.Code, bool) { return jvm.Code{}, false }
func (n *fakeNamer) Method(ptr uint64, bci int) jvm.Method {
	return jvm.Method{Name: n.methods[ptr], Line: n.lines[ptr]}
}

func (n *fakeNamer) Frame(addr uint64, calledNative bool) jvm.Frame {
	n.calls = append(n.calls, calledNative)
	s, ok := n.names[addr]
	f := jvm.Frame{Name: s.Name, Kind: s.Kind, Line: n.lines[addr]}
	switch {
	case !ok:
		f.Cut = "unknown code"
	case s.Kind == jvm.KindInterpreter, calledNative && s.Kind == jvm.KindMethod:
		f.Chained = true
	default:
		f.Cut = "callers of compiled " + s.Name + " are unknown"
	}
	return f
}
func (n *fakeNamer) Generation() uint64 { return n.gen }
func (n *fakeNamer) Retry(bool)         {}
func (n *fakeNamer) Exiting()           {}
func (n *fakeNamer) Close() error       { return nil }

// fakeMaps is a target's mappings, none of them file-backed.
type fakeMaps struct{ seen []procfs.Mapping }

func (m *fakeMaps) Lookup(addr uint64) (procfs.Mapping, bool) {
	for _, x := range m.seen {
		if addr >= x.Start && addr < x.End {
			return x, true
		}
	}
	return procfs.Mapping{}, false
}
func (m *fakeMaps) Object(procfs.Mapping) (*symbolize.Object, error) {
	return nil, errors.New("no object")
}
func (m *fakeMaps) NoFramePointers(procfs.Mapping) bool { return false }
func (m *fakeMaps) Unwound(procfs.Mapping) bool         { return false }
func (m *fakeMaps) Seen() int                           { return len(m.seen) }
func (m *fakeMaps) DebugGeneration() uint64             { return 0 }

// jitResolver is a resolver over one anonymous executable mapping, as a
// JVM's code cache, with n naming it.
func jitResolver(n *fakeNamer) (*Resolver, *fakeMaps) {
	maps := &fakeMaps{seen: []procfs.Mapping{{Start: 0x10000, End: 0x20000, Perms: "rwxp", Dev: "00:00"}}}
	r := New(maps)
	r.SetNamer(n)
	return r, maps
}

// methodEntry is a stack's entry for the interpreted frame before it.
type methodEntry struct{ ptr uint64 }

// m is the entry of Method* ptr, its bytecode index unknown.
func m(ptr uint64) methodEntry { return methodEntry{ptr} }

// rawStack is a kernel stack of return addresses and method entries.
func rawStack(entries ...any) *Raw {
	raw := &Raw{}
	for _, e := range entries {
		switch e := e.(type) {
		case int:
			raw.Entries = append(raw.Entries, Entry{Addr: uint64(e)})
		case methodEntry:
			raw.Entries = append(raw.Entries, Entry{Addr: e.ptr, BCI: -1, Method: true})
		}
	}
	return raw
}

func functions(st analyze.Stack) []string {
	var out []string
	for _, f := range st.Frames {
		out = append(out, f.Function)
	}
	return out
}

func TestJITFramesNamedAndCut(t *testing.T) {
	n := &fakeNamer{names: map[uint64]jvm.Symbol{
		0x10100: {Name: "a.B.wrapper", Kind: jvm.KindMethod},
		0x10200: {Name: "a.B.compiled", Kind: jvm.KindMethod},
		0x10300: {Name: jvm.Interpreted, Kind: jvm.KindInterpreter},
	}}
	r, _ := jitResolver(n)

	// wrapper (called from native code: chained) ← interpreted (chained)
	// ← compiled (its caller is unknown: cut) ← never shown.
	rs := r.Resolve(rawStack(0x10100, 0x10300, 0x10200, 0x10300))
	got := functions(rs.Stack())
	if strings.Join(got, ",") != "a.B.wrapper,[interpreted],a.B.compiled" {
		t.Errorf("frames %v", got)
	}
	if rs.Stack().Truncated != "callers of compiled a.B.compiled are unknown" {
		t.Errorf("reason %q", rs.Stack().Truncated)
	}
	if fmt.Sprint(n.calls) != "[true false false]" {
		t.Errorf("calledNative per frame = %v, want true (the probed function is native), false, false", n.calls)
	}
	for _, f := range rs.Stack().Frames {
		if f.Module != JITModule || f.Offset != f.Address-0x10000 {
			t.Errorf("frame %+v: want module %s, offset from the mapping", f, JITModule)
		}
	}
	if rs.pending {
		t.Error("a fully named stack is pending")
	}

	// A compiled frame as the last frame is not cut: nothing follows.
	if rs := r.Resolve(rawStack(0x10100, 0x10200)); rs.Stack().Truncated != "" {
		t.Errorf("last-frame cut: %q", rs.Stack().Truncated)
	}

	// An unnamed frame keeps the stack pending until the names change.
	rs = r.Resolve(rawStack(0x10400))
	if !rs.pending || rs.Stack().Frames[0].Function != "" || rs.Stack().Frames[0].Module != JITModule {
		t.Fatalf("unnamed frame: %+v pending=%v", rs.Stack().Frames[0], rs.pending)
	}
	if r.Stale(rs) {
		t.Error("stale before the names changed")
	}
	n.names[0x10400] = jvm.Symbol{Name: "a.B.late", Kind: jvm.KindMethod}
	n.gen++
	if !r.Stale(rs) {
		t.Fatal("not stale after the names changed")
	}
	if rs := r.Resolve(rawStack(0x10400)); rs.pending || rs.Stack().Frames[0].Function != "a.B.late" {
		t.Errorf("after a new map: %+v pending=%v", rs.Stack().Frames[0], rs.pending)
	}
}

// Interpreted frames share the interpreter's return addresses: the Method*
// the kernel recorded after each names it and keeps their sites apart.
func TestInterpretedFramesNamedByMethod(t *testing.T) {
	n := &fakeNamer{
		names: map[uint64]jvm.Symbol{
			0x10100: {Name: "a.B.wrapper", Kind: jvm.KindMethod},
			0x10300: {Name: jvm.Interpreted, Kind: jvm.KindInterpreter},
		},
		methods: map[uint64]string{0x7000: "a.B.leak", 0x7100: "a.B.main"},
	}
	r, _ := jitResolver(n)
	rs := r.Resolve(rawStack(0x10100, 0x10300, m(0x7000), 0x10300, m(0x7100)))
	if got := strings.Join(functions(rs.Stack()), ","); got != "a.B.wrapper,a.B.leak,a.B.main" {
		t.Errorf("frames %s, want a.B.wrapper,a.B.leak,a.B.main", got)
	}
	if rs.Stack().Truncated != "" {
		t.Errorf("reason %q", rs.Stack().Truncated)
	}
	// The same return addresses with other methods: another site.
	other := r.Resolve(rawStack(0x10100, 0x10300, m(0x7100), 0x10300, m(0x7100)))
	if other.Key() == rs.Key() {
		t.Errorf("stacks of different methods share key %q", rs.Key())
	}
	if got := strings.Join(functions(other.Stack()), ","); got != "a.B.wrapper,a.B.main,a.B.main" {
		t.Errorf("frames %s", got)
	}
	// A method that cannot be read keeps the interpreter's label, and the
	// site of a walk that recorded no method (the kernel did not know the
	// interpreter yet).
	unread := r.Resolve(rawStack(0x10100, 0x10300, m(0x9999)))
	if got := strings.Join(functions(unread.Stack()), ","); got != "a.B.wrapper,"+jvm.Interpreted {
		t.Errorf("frames %s", got)
	}
	if untagged := r.Resolve(rawStack(0x10100, 0x10300)); untagged.Key() != unread.Key() {
		t.Errorf("unnamed method: key %q, want the untagged walk's %q", unread.Key(), untagged.Key())
	}
}

// A frame in no mapping known yet is resolved again once the maps grow.
func TestUnmappedFrameResolvedAgain(t *testing.T) {
	r, maps := jitResolver(&fakeNamer{})
	rs := r.Resolve(rawStack(0x30100, 0x10100))
	if !rs.unmapped || rs.Stack().Frames[0].Module != "" {
		t.Fatalf("unmapped first frame: %+v unmapped=%v", rs.Stack().Frames[0], rs.unmapped)
	}
	if r.Stale(rs) {
		t.Error("stale before the maps changed")
	}
	maps.seen = append(maps.seen, procfs.Mapping{Start: 0x30000, End: 0x40000, Perms: "r-xp", Dev: "00:00"})
	if !r.Stale(rs) {
		t.Fatal("not stale after a mapping appeared")
	}
	if rs := r.Resolve(rawStack(0x30100, 0x10100)); rs.unmapped || rs.Stack().Frames[0].Module != JITModule {
		t.Errorf("after the maps grew: %+v unmapped=%v", rs.Stack().Frames[0], rs.unmapped)
	}
}

// The JIT compiles a method again at new addresses (tier 3, then 4) and a
// cold frame may still be interpreted: one call path in the source is one
// site, whichever code ran it. Native and unnamed frames stay apart by
// address.
func TestRecompiledJavaFramesOneSite(t *testing.T) {
	n := &fakeNamer{
		names: map[uint64]jvm.Symbol{
			0x10100: {Name: "a.B.alloc", Kind: jvm.KindMethod}, // tier 3
			0x18100: {Name: "a.B.alloc", Kind: jvm.KindMethod}, // tier 4
			0x18200: {Name: "a.B.alloc", Kind: jvm.KindMethod}, // tier 4, another line
			0x10300: {Name: jvm.Interpreted, Kind: jvm.KindInterpreter},
			0x10400: {Name: "a.B.main", Kind: jvm.KindMethod},
		},
		methods: map[uint64]string{0x7000: "a.B.alloc", 0x7100: "a.B.main"},
		lines:   map[uint64]int{0x10100: 12, 0x18100: 12, 0x18200: 14, 0x7000: 12, 0x10400: 30, 0x7100: 30},
	}
	r, _ := jitResolver(n)
	tier3 := r.Resolve(rawStack(0x10100, 0x10300, m(0x7100)))
	tier4 := r.Resolve(rawStack(0x18100, 0x10300, m(0x7100)))
	interp := r.Resolve(rawStack(0x10300, m(0x7000), 0x10300, m(0x7100)))
	if tier3.Key() != tier4.Key() || tier3.Key() != interp.Key() {
		t.Errorf("one call path, three keys: %q, %q, %q", tier3.Key(), tier4.Key(), interp.Key())
	}
	if line := r.Resolve(rawStack(0x18200, 0x10300, m(0x7100))); line.Key() == tier4.Key() {
		t.Errorf("another line of a.B.alloc shares key %q", line.Key())
	}
	if caller := r.Resolve(rawStack(0x18100, 0x10400)); caller.Key() != tier4.Key() {
		t.Errorf("main compiled since: key %q, want the interpreted caller's %q", caller.Key(), tier4.Key())
	}
	u1, u2 := r.Resolve(rawStack(0x10500)), r.Resolve(rawStack(0x10600))
	if !u1.pending || u1.Key() == u2.Key() {
		t.Errorf("unnamed frames at different addresses: keys %q and %q, pending %v", u1.Key(), u2.Key(), u1.pending)
	}
}

// A native method runs in the interpreter's native entry until the JVM
// makes its wrapper, and in a new wrapper at another address once the code
// cache dropped the first: its frames have no line, and one call path
// through it is still one site, apart from the path through its overload's
// caller on another line.
func TestNativeWrapperFramesOneSite(t *testing.T) {
	n := &fakeNamer{
		names: map[uint64]jvm.Symbol{
			0x11000: {Name: "java.util.zip.Inflater.init", Kind: jvm.KindMethod}, // wrapper
			0x12000: {Name: "java.util.zip.Inflater.init", Kind: jvm.KindMethod}, // made again
			0x10300: {Name: jvm.Interpreted, Kind: jvm.KindInterpreter},
			0x10340: {Name: jvm.Interpreted, Kind: jvm.KindInterpreter}, // the native entry
		},
		methods: map[uint64]string{0x7000: "java.util.zip.Inflater.init", 0x7100: "a.B.leak", 0x7200: "a.B.other"},
		lines:   map[uint64]int{0x7100: 20, 0x7200: 40},
	}
	r, _ := jitResolver(n)
	interp := r.Resolve(rawStack(0x10340, m(0x7000), 0x10300, m(0x7100)))
	first := r.Resolve(rawStack(0x11000, 0x10300, m(0x7100)))
	again := r.Resolve(rawStack(0x12000, 0x10300, m(0x7100)))
	if interp.Key() != first.Key() || first.Key() != again.Key() {
		t.Errorf("one call path through a native method, three keys: %q, %q, %q", interp.Key(), first.Key(), again.Key())
	}
	if other := r.Resolve(rawStack(0x11000, 0x10300, m(0x7200))); other.Key() == first.Key() {
		t.Errorf("another caller shares key %q", other.Key())
	}
	if bare := r.Resolve(rawStack(0x10340, 0x10300, m(0x7100))); bare.Key() == interp.Key() {
		t.Errorf("an interpreter frame not named by its method shares key %q", bare.Key())
	}
}
