//go:build linux && amd64

package probe

import (
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

// jitResolver is a resolver over one anonymous executable mapping, as a
// JVM's code cache, with n naming it.
func jitResolver(n *fakeNamer) *stackResolver {
	v := newMappingView(0, symbolize.NewCache())
	v.current = []procfs.Mapping{{Start: 0x10000, End: 0x20000, Perms: "rwxp", Dev: "00:00"}}
	v.history = append(v.history, v.current...)
	r := newStackResolver(v)
	r.jit.namer = n
	return r
}

func rawStack(ips ...uint64) *leakStack {
	var s leakStack
	copy(s.Ips[:], ips)
	s.Depth = uint32(len(ips))
	return &s
}

func TestJITFramesNamedAndCut(t *testing.T) {
	n := &fakeNamer{names: map[uint64]jvm.Symbol{
		0x10100: {Name: "a.B.wrapper", Kind: jvm.KindMethod},
		0x10200: {Name: "a.B.compiled", Kind: jvm.KindMethod},
		0x10300: {Name: jvm.Interpreted, Kind: jvm.KindInterpreter},
	}}
	r := jitResolver(n)

	// wrapper (called from native code: chained) ← interpreted (chained)
	// ← compiled (its caller is unknown: cut) ← never shown.
	rs := r.resolve(1, rawStack(0x10100, 0x10300, 0x10200, 0x10300))
	got := functions(analyze.Site{Stack: rs.stack()})
	if strings.Join(got, ",") != "a.B.wrapper,[interpreted],a.B.compiled" {
		t.Errorf("frames %v", got)
	}
	if rs.stack().Truncated != "callers of compiled a.B.compiled are unknown" {
		t.Errorf("reason %q", rs.stack().Truncated)
	}
	if fmt.Sprint(n.calls) != "[true false false]" {
		t.Errorf("calledNative per frame = %v, want true (the probed function is native), false, false", n.calls)
	}
	for _, f := range rs.stack().Frames {
		if f.Module != jitModule || f.Offset != f.Address-0x10000 {
			t.Errorf("frame %+v: want module %s, offset from the mapping", f, jitModule)
		}
	}
	if rs.pending {
		t.Error("a fully named stack is pending")
	}

	// A compiled frame as the last frame is not cut: nothing follows.
	if rs := r.resolve(2, rawStack(0x10100, 0x10200)); rs.stack().Truncated != "" {
		t.Errorf("last-frame cut: %q", rs.stack().Truncated)
	}

	// An unnamed frame keeps the stack pending until the names change.
	rs = r.resolve(3, rawStack(0x10400))
	if !rs.pending || rs.stack().Frames[0].Function != "" || rs.stack().Frames[0].Module != jitModule {
		t.Fatalf("unnamed frame: %+v pending=%v", rs.stack().Frames[0], rs.pending)
	}
	if r.stale(rs) {
		t.Error("stale before the names changed")
	}
	n.names[0x10400] = jvm.Symbol{Name: "a.B.late", Kind: jvm.KindMethod}
	n.gen++
	if !r.stale(rs) {
		t.Fatal("not stale after the names changed")
	}
	if rs := r.resolve(3, rawStack(0x10400)); rs.pending || rs.stack().Frames[0].Function != "a.B.late" {
		t.Errorf("after a new map: %+v pending=%v", rs.stack().Frames[0], rs.pending)
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
	r := jitResolver(n)
	m := func(ptr uint64) uint64 { return ptr | stackJVMMethod }
	rs := r.resolve(1, rawStack(0x10100, 0x10300, m(0x7000), 0x10300, m(0x7100)))
	if got := strings.Join(functions(analyze.Site{Stack: rs.stack()}), ","); got != "a.B.wrapper,a.B.leak,a.B.main" {
		t.Errorf("frames %s, want a.B.wrapper,a.B.leak,a.B.main", got)
	}
	if rs.stack().Truncated != "" {
		t.Errorf("reason %q", rs.stack().Truncated)
	}
	// The same return addresses with other methods: another site.
	other := r.resolve(2, rawStack(0x10100, 0x10300, m(0x7100), 0x10300, m(0x7100)))
	if other.key() == rs.key() {
		t.Errorf("stacks of different methods share key %q", rs.key())
	}
	if got := strings.Join(functions(analyze.Site{Stack: other.stack()}), ","); got != "a.B.wrapper,a.B.main,a.B.main" {
		t.Errorf("frames %s", got)
	}
	// A method that cannot be read keeps the interpreter's label, and the
	// site of a walk that recorded no method (the kernel did not know the
	// interpreter yet).
	unread := r.resolve(3, rawStack(0x10100, 0x10300, m(0x9999)))
	if got := strings.Join(functions(analyze.Site{Stack: unread.stack()}), ","); got != "a.B.wrapper,"+jvm.Interpreted {
		t.Errorf("frames %s", got)
	}
	if untagged := r.resolve(4, rawStack(0x10100, 0x10300)); untagged.key() != unread.key() {
		t.Errorf("unnamed method: key %q, want the untagged walk's %q", unread.key(), untagged.key())
	}
}

func TestSplitRange(t *testing.T) {
	rs := []leakExecRange{{Start: 0x1000, End: 0x2000, Flags: 1}, {Start: 0x3000, End: 0x9000, Flags: 0}}
	got := splitRange(rs, 0x4000, 0x5000, 16)
	want := []leakExecRange{{Start: 0x1000, End: 0x2000, Flags: 1}, {Start: 0x3000, End: 0x4000}, {Start: 0x4000, End: 0x5000, Flags: 16}, {Start: 0x5000, End: 0x9000}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("split inside:\n got %v\nwant %v", got, want)
	}
	if got := splitRange(rs, 0x3000, 0x9000, 16); fmt.Sprint(got) != fmt.Sprint([]leakExecRange{rs[0], {Start: 0x3000, End: 0x9000, Flags: 16}}) {
		t.Errorf("whole range: %v", got)
	}
	if got := splitRange(rs, 0x1800, 0x3800, 16); fmt.Sprint(got) != fmt.Sprint(rs) {
		t.Errorf("straddling two ranges must change nothing: %v", got)
	}
}

// A frame in no mapping known yet is resolved again once the maps grow.
func TestUnmappedFrameResolvedAgain(t *testing.T) {
	r := jitResolver(&fakeNamer{})
	rs := r.resolve(1, rawStack(0x30100, 0x10100))
	if !rs.unmapped || rs.stack().Frames[0].Module != "" {
		t.Fatalf("unmapped first frame: %+v unmapped=%v", rs.stack().Frames[0], rs.unmapped)
	}
	if r.stale(rs) {
		t.Error("stale before the maps changed")
	}
	m := procfs.Mapping{Start: 0x30000, End: 0x40000, Perms: "r-xp", Dev: "00:00"}
	r.view.current = append(r.view.current, m)
	r.view.history = append(r.view.history, m)
	if !r.stale(rs) {
		t.Fatal("not stale after a mapping appeared")
	}
	if rs := r.resolve(1, rawStack(0x30100, 0x10100)); rs.unmapped || rs.stack().Frames[0].Module != jitModule {
		t.Errorf("after the maps grew: %+v unmapped=%v", rs.stack().Frames[0], rs.unmapped)
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
	r := jitResolver(n)
	m := func(ptr uint64) uint64 { return ptr | stackJVMMethod }
	tier3 := r.resolve(1, rawStack(0x10100, 0x10300, m(0x7100)))
	tier4 := r.resolve(2, rawStack(0x18100, 0x10300, m(0x7100)))
	interp := r.resolve(3, rawStack(0x10300, m(0x7000), 0x10300, m(0x7100)))
	if tier3.key() != tier4.key() || tier3.key() != interp.key() {
		t.Errorf("one call path, three keys: %q, %q, %q", tier3.key(), tier4.key(), interp.key())
	}
	if line := r.resolve(4, rawStack(0x18200, 0x10300, m(0x7100))); line.key() == tier4.key() {
		t.Errorf("another line of a.B.alloc shares key %q", line.key())
	}
	if caller := r.resolve(5, rawStack(0x18100, 0x10400)); caller.key() != tier4.key() {
		t.Errorf("main compiled since: key %q, want the interpreted caller's %q", caller.key(), tier4.key())
	}
	u1, u2 := r.resolve(6, rawStack(0x10500)), r.resolve(7, rawStack(0x10600))
	if !u1.pending || u1.key() == u2.key() {
		t.Errorf("unnamed frames at different addresses: keys %q and %q, pending %v", u1.key(), u2.key(), u1.pending)
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
	r := jitResolver(n)
	m := func(ptr uint64) uint64 { return ptr | stackJVMMethod }
	interp := r.resolve(1, rawStack(0x10340, m(0x7000), 0x10300, m(0x7100)))
	first := r.resolve(2, rawStack(0x11000, 0x10300, m(0x7100)))
	again := r.resolve(3, rawStack(0x12000, 0x10300, m(0x7100)))
	if interp.key() != first.key() || first.key() != again.key() {
		t.Errorf("one call path through a native method, three keys: %q, %q, %q", interp.key(), first.key(), again.key())
	}
	if other := r.resolve(4, rawStack(0x11000, 0x10300, m(0x7200))); other.key() == first.key() {
		t.Errorf("another caller shares key %q", other.key())
	}
	if bare := r.resolve(5, rawStack(0x10340, 0x10300, m(0x7100))); bare.key() == interp.key() {
		t.Errorf("an interpreter frame not named by its method shares key %q", bare.key())
	}
}

// A site keeps the stack that names the most: resolved again once the
// JVM's names are gone, a stack that names less does not replace it.
func TestSiteKeepsBestNamedStack(t *testing.T) {
	st := newSiteTable()
	tab := &frameTable{index: map[analyze.Frame]uint32{}}
	stack := func(names ...string) *resolvedStack {
		rs := &resolvedStack{tab: tab}
		for i, n := range names {
			rs.frames = append(rs.frames, tab.share(analyze.Frame{Address: uint64(0x10000 + i), Function: n, Module: jitModule}))
		}
		return rs
	}
	good := stack("a.B.leak", "a.B.main")
	i := st.slotFor(1, analyze.KindZlibInflate, good)
	if j := st.slotFor(1, analyze.KindZlibInflate, stack("", jvm.Interpreted)); j != i || st.slots[i].stack != good {
		t.Errorf("a less named stack replaced the site's: %v", functions(analyze.Site{Stack: st.slots[i].stack.stack()}))
	}
	again := stack("a.B.leak", "a.B.main")
	if st.slotFor(1, analyze.KindZlibInflate, again); st.slots[i].stack != again {
		t.Error("a stack naming as much did not replace the site's")
	}
}
