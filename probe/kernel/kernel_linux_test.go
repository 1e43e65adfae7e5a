//go:build linux

package kernel

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/leakscope/leakscope/internal/testutil"
	"github.com/leakscope/leakscope/probe/internal/bpftest"
)

// The BPF helpers the probes are built from, each run on its own with
// BPF_PROG_TEST_RUN through a harness program of ebpf/test.bpf.c, on the
// same maps and globals (state.bpf.h) the probes use. Each test seeds the
// maps, runs a program and reads the maps back.

// harness loads the harness object with small tables (maxSites slots of
// site_slots when not 0).
func harness(t *testing.T, maxSites uint32) *bpftest.HarnessObjects {
	t.Helper()
	testutil.RequireBPF(t)
	spec, err := bpftest.LoadHarness()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"allocs", "sites", "stacks"} {
		spec.Maps[name].MaxEntries = 1 << 10
		spec.Maps[name].Flags |= unix.BPF_F_NO_PREALLOC
	}
	spec.Maps["site_slots"].MaxEntries = 1 << 10
	spec.Maps["site_counts"].MaxEntries = 1 << 10 * harnessCopies
	spec.Maps["unwind_rows"].MaxEntries = 1 << 10
	spec.Maps["alloc_buckets"].MaxEntries = harnessBuckets
	if err := spec.Variables["alloc_buckets_used"].Set(uint32(harnessBuckets)); err != nil {
		t.Fatal(err)
	}
	if maxSites != 0 {
		if err := spec.Variables["max_sites"].Set(maxSites); err != nil {
			t.Fatal(err)
		}
	}
	if err := spec.Variables["page_size"].Set(uint64(os.Getpagesize())); err != nil {
		t.Fatal(err)
	}
	var objs bpftest.HarnessObjects
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			t.Fatalf("load harness: %+v", ve)
		}
		if errors.Is(err, ebpf.ErrNotSupported) {
			testutil.SkipOrFail(t, "harness programs not supported: "+err.Error())
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { objs.Close() })
	return &objs
}

// harnessCopies is the harness's site_copies: its default, SITE_COPIES,
// whatever the CPUs.
const harnessCopies = uint32(leakLimitsSITE_COPIES)

// run test-runs prog with args as its context words and returns its
// return value.
func run(t *testing.T, prog *ebpf.Program, args ...uint64) int32 {
	t.Helper()
	ret, err := prog.Run(&ebpf.RunOptions{Context: args})
	if errors.Is(err, ebpf.ErrNotSupported) {
		testutil.SkipOrFail(t, "BPF_PROG_TEST_RUN of raw tracepoints not supported: "+err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	return int32(ret)
}

// statSum is counter idx of the stats map summed over the CPUs.
func statSum(t *testing.T, m *ebpf.Map, idx leakStatIndex) uint64 {
	t.Helper()
	var perCPU []uint64
	if err := m.Lookup(uint32(idx), &perCPU); err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, v := range perCPU {
		n += v
	}
	return n
}

// mem is memory of this process the harness programs read as a
// target's: mapped and populated, so that every read finds its page.
type mem struct {
	b    []byte
	base uint64
}

func newMem(t *testing.T, pages int) *mem {
	t.Helper()
	b, err := unix.Mmap(-1, 0, pages*os.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(b) })
	return &mem{b: b, base: uint64(uintptr(unsafe.Pointer(&b[0])))}
}

// put writes words at address addr of m.
func (m *mem) put(addr uint64, words ...uint64) {
	for i, w := range words {
		binary.LittleEndian.PutUint64(m.b[addr-m.base+uint64(i)*8:], w)
	}
}

func (m *mem) put32(addr uint64, v uint32) {
	binary.LittleEndian.PutUint32(m.b[addr-m.base:], v)
}

// The harness object is built from the same state.bpf.h as the probes:
// every map they share has the same type and layout, and the sizes Go
// relies on are the generated enum limits. Needs no privileges.
func TestHarnessSharesProbeState(t *testing.T) {
	probes, err := loadLeak()
	if err != nil {
		t.Fatal(err)
	}
	h, err := bpftest.LoadHarness()
	if err != nil {
		t.Fatal(err)
	}
	for name, hm := range h.Maps {
		pm := probes.Maps[name]
		if pm == nil || strings.HasPrefix(name, ".") {
			continue // the harness's own (test_threads) or the globals' sections
		}
		if hm.Type != pm.Type || hm.KeySize != pm.KeySize || hm.ValueSize != pm.ValueSize || hm.MaxEntries != pm.MaxEntries || hm.Flags != pm.Flags {
			t.Errorf("map %s: harness %v %d/%d x%d flags %#x, probes %v %d/%d x%d flags %#x", name,
				hm.Type, hm.KeySize, hm.ValueSize, hm.MaxEntries, hm.Flags, pm.Type, pm.KeySize, pm.ValueSize, pm.MaxEntries, pm.Flags)
		}
	}
	for _, name := range []string{"allocs", "sites", "site_slots", "site_counts", "stacks", "exec_ranges", "range_ctls", "unwind_rows", "stats"} {
		if h.Maps[name] == nil {
			t.Errorf("harness lacks map %s", name)
		}
	}
	if n := len(leakStack{}.Ips); n != int(leakLimitsMAX_STACK_DEPTH) {
		t.Errorf("struct stack holds %d frames, MAX_STACK_DEPTH is %d", n, leakLimitsMAX_STACK_DEPTH)
	}
	if n := unsafe.Sizeof(leakSiteStats{}); n != 64 {
		t.Errorf("a copy of a site's totals is %d bytes, not a cache line", n)
	}
	if n := probes.Maps["jvm_heaps"].MaxEntries; n != uint32(leakLimitsMAX_JVM_HEAPS) {
		t.Errorf("jvm_heaps has %d entries, MAX_JVM_HEAPS is %d", n, leakLimitsMAX_JVM_HEAPS)
	}
}

// The kernel decodes every cookie Encode makes as Go decodes it, and
// both give back the fields encoded: the layout is enum cookie_layout's
// alone.
func TestCookiesDecodeAsKernel(t *testing.T) {
	objs := harness(t, 0)
	const zstream, inflateState, deflateState = 112, 7160, 5952
	pairs := []PairCookie{
		{},
		{Kind: KindUser, Op: OpRetPtr},
		{Kind: KindUser + 2, Op: OpOutPtr, Arg: 2},
		{Kind: KindUser + 3, Op: OpArgHandle, Arg: 1, SizeArg: 2},
		{Kind: KindUser + 1, Op: OpRealloc, Arg: 3},
		{Kind: KindUser + 4, Op: OpArgHandle, Arg: 1, Bytes: zstream + inflateState, Zwindow: 1},
		{Kind: KindUser + 5, Op: OpArgHandle, Arg: 1, Bytes: zstream + deflateState + 1<<17 + 1<<17},
		{Kind: 0xffff, Op: 0xf, Arg: 0xf, SizeArg: 0xf, Zwindow: 1, Bytes: 0xffffff},
	}
	for _, p := range pairs {
		c := p.Encode()
		run(t, objs.TestPairCookie, c)
		var kern leakPairCookie
		if err := objs.OutPair.Get(&kern); err != nil {
			t.Fatal(err)
		}
		if kern != p || DecodePairCookie(c) != p {
			t.Errorf("pair cookie %#x of %+v: kernel decodes %+v, Go %+v", c, p, kern, DecodePairCookie(c))
		}
	}
	// Every bit set: the fields' masks agree too.
	c := ^uint64(0)
	run(t, objs.TestPairCookie, c)
	var kern leakPairCookie
	if err := objs.OutPair.Get(&kern); err != nil {
		t.Fatal(err)
	}
	if kern != DecodePairCookie(c) {
		t.Errorf("pair cookie %#x: kernel decodes %+v, Go %+v", c, kern, DecodePairCookie(c))
	}

	for _, z := range []ZlibCookie{
		{State: inflateState + zstream, Init: ZinitInflate},
		{State: inflateState + zstream, Init: ZinitInflate2},
		{State: inflateState + zstream, Init: ZinitBack},
		{State: deflateState + zstream, Init: ZinitDeflate},
		{State: deflateState + zstream, Init: ZinitDeflate2},
		{State: 0xffff, Init: 0xf},
	} {
		c := z.Encode()
		run(t, objs.TestZlibCookie, c)
		var kern leakZlibCookie
		if err := objs.OutZlib.Get(&kern); err != nil {
			t.Fatal(err)
		}
		if kern != z || decodeZlibCookie(c) != z {
			t.Errorf("zlib cookie %#x of %+v: kernel decodes %+v, Go %+v", c, z, kern, decodeZlibCookie(c))
		}
	}

	const maxReg = 1<<leakCookieLayoutACOOKIE_ARG_BITS - 1
	for _, a := range []AllocCookie{
		{Fn: FnMalloc, Reg: [3]uint32{argRegs[0], argRegs[1], argRegs[2]}},
		{Fn: FnCalloc, Reg: [3]uint32{argRegs[6], argRegs[1], argRegs[2]}},
		{Fn: FnRealloc, Reg: [3]uint32{argRegs[1], argRegs[2], argRegs[2]}},
		{Fn: FnReallocarray, Reg: [3]uint32{argRegs[len(argRegs)-1], argRegs[len(argRegs)-2], argRegs[7]}},
		{Fn: FnPvalloc, Reg: [3]uint32{argRegs[8], argRegs[9], argRegs[4]}},
		{Fn: FnMemalign, Reg: [3]uint32{30, 17, 0}}, // arm64's x30, x17, x0
		{Fn: 0xff, Reg: [3]uint32{maxReg, maxReg, maxReg}},
		{Fn: 0, Reg: [3]uint32{maxReg, 0, maxReg}},
	} {
		c := a.Encode()
		run(t, objs.TestAllocCookie, c)
		var kern leakAllocCookie
		if err := objs.OutAlloc.Get(&kern); err != nil {
			t.Fatal(err)
		}
		if kern != a || DecodeAllocCookie(c) != a {
			t.Errorf("alloc cookie %#x of %+v: kernel decodes %+v, Go %+v", c, a, kern, DecodeAllocCookie(c))
		}
	}
	// Every bit set, and each single bit: the masks and shifts agree.
	for _, c := range allBitsAndEach() {
		run(t, objs.TestAllocCookie, c)
		var kern leakAllocCookie
		if err := objs.OutAlloc.Get(&kern); err != nil {
			t.Fatal(err)
		}
		if kern != DecodeAllocCookie(c) {
			t.Errorf("alloc cookie %#x: kernel decodes %+v, Go %+v", c, kern, DecodeAllocCookie(c))
		}
	}
}

// allBitsAndEach is the cookie with every bit set, then each of the 64
// cookies with one bit set.
func allBitsAndEach() []uint64 {
	cs := []uint64{^uint64(0)}
	for i := range 64 {
		cs = append(cs, 1<<i)
	}
	return cs
}

// TestSiteArgRegisters runs site_arg on registers that each hold their
// own offset in struct pt_regs, whose layout is the user_regs_struct that
// unix.PtraceRegs mirrors on both targets: each enum arg_reg reads the
// field it names (siteArgFields, per architecture).
func TestSiteArgRegisters(t *testing.T) {
	objs := harness(t, 0)
	fields := siteArgFields()
	if len(fields) != len(argRegs) {
		t.Fatalf("siteArgFields has %d registers, argRegs %d", len(fields), len(argRegs))
	}
	for _, c := range fields {
		run(t, objs.TestSiteArg, uint64(c.reg))
		var got uint64
		if err := objs.OutU64.Get(&got); err != nil {
			t.Fatal(err)
		}
		if got != uint64(c.field) {
			t.Errorf("site_arg(%d) read pt_regs+%d, want +%d", c.reg, got, c.field)
		}
	}
}

// siteArgField is an enum arg_reg and the offset of the field of
// unix.PtraceRegs (struct pt_regs) it names.
type siteArgField struct {
	reg   uint32
	field uintptr
}

// setRanges writes ranges (sorted by start) and rows into the range and
// unwind tables, as writeRangesLocked and uploadRows do, under table
// generation gen (frame_cache entries of another are stale).
func setRanges(t *testing.T, objs *bpftest.HarnessObjects, gen uint64, ranges []leakExecRange, rows []leakUnwindRow) {
	t.Helper()
	for i, r := range ranges {
		if err := objs.ExecRanges.Put(uint32(i), r); err != nil {
			t.Fatal(err)
		}
	}
	for i, r := range rows {
		if err := objs.UnwindRows.Put(uint32(i), r); err != nil {
			t.Fatal(err)
		}
	}
	if err := objs.RangeCtls.Put(uint32(0), leakRangeCtl{Count: uint32(len(ranges)), Generation: gen}); err != nil {
		t.Fatal(err)
	}
}

// stackID is the id walk_stack_held gives the stack of frames ips with
// flags: a hash of both.
func stackID(ips []uint64, flags uint32) uint64 {
	const prime = 1099511628211
	h := (14695981039346656037 ^ ips[0]) * prime
	for _, ip := range ips[1:] {
		h = (h ^ ip) * prime
	}
	h = (h ^ uint64(flags)) * prime
	if h == 0 {
		h = 1
	}
	return h
}

// The walker reads a thread's stack in chunks sized to what its last walk
// needed (512 bytes on its first), and a frame past the chunk read reads
// the next: frames beyond the first chunk, a word straddling its end and
// a frame beyond the second are all found, and each walk records the
// bytes it read for the next.
func TestWalkStackChunkGrowth(t *testing.T) {
	objs := harness(t, 0)
	m := newMem(t, 8)
	s := m.base + 2*uint64(os.Getpagesize()) // the stack pointer at the return probe
	const fp = 0x400000
	setRanges(t, objs, 1, []leakExecRange{{Start: fp, End: fp + 0x100000, Flags: uint32(leakRangeFlagRANGE_HAS_FP)}}, nil)

	// A long stack: a frame in the first 512 bytes, one whose return
	// address lies past them (the word straddles the chunk's end), one
	// further up and one past the next 4 KiB chunk too.
	m.put(s+0x20, s+0x218, fp+0x21)
	m.put(s+0x218, s+0x700, fp+0x22)
	m.put(s+0x700, s+0x1800, fp+0x23)
	m.put(s+0x1800, 0, fp+0x24)
	long := []uint64{fp + 0x10, fp + 0x21, fp + 0x22, fp + 0x23, fp + 0x24}
	// A short stack elsewhere: 144 bytes from its first frame to the end
	// of its last.
	short := s + 0x3000
	m.put(short, short+0x80, fp+0x31)
	m.put(short+0x80, 0, fp+0x32)
	shortIPs := []uint64{fp + 0x10, fp + 0x31, fp + 0x32}

	for _, c := range []struct {
		name    string
		fp      uint64
		wantIPs []uint64
		need    uint32
	}{
		{"first walk: 512 bytes, then more", s + 0x20, long, 4096 /* 0x17f0, at most a chunk */},
		{"a short stack: one chunk", short, shortIPs, 0x90},
		{"the long stack with a short stack's chunk", s + 0x20, long, 4096},
		{"the short stack with a long stack's chunk", short, shortIPs, 0x90},
	} {
		if ret := run(t, objs.TestWalkStack, fp+0x10, c.fp, s); ret != 0 {
			t.Fatalf("%s: test_walk_stack returned %d", c.name, ret)
		}
		var id uint64
		var need uint32
		if err := objs.OutU64.Get(&id); err != nil {
			t.Fatal(err)
		}
		if err := objs.OutU32.Get(&need); err != nil {
			t.Fatal(err)
		}
		var st leakStack
		if err := objs.Stacks.Lookup(id, &st); err != nil {
			t.Fatalf("%s: stacks[%#x]: %v", c.name, id, err)
		}
		if got := st.Ips[:st.Depth]; !slices.Equal(got, c.wantIPs) || st.Flags != 0 || id != stackID(c.wantIPs, 0) {
			t.Errorf("%s: frames %#x flags %#x, want %#x, 0", c.name, got, st.Flags, c.wantIPs)
		}
		if need != c.need {
			t.Errorf("%s: the walk read %d bytes, want %d", c.name, need, c.need)
		}
	}
	if n := statSum(t, objs.Stats, leakStatIndexSTAT_STACK_CHUNK_FAULTS); n != 0 {
		t.Errorf("%d chunk faults, want 0", n)
	}
}

// runOn test-runs prog on CPU cpu, as run does.
func runOn(t *testing.T, cpu uint32, prog *ebpf.Program, args ...uint64) int32 {
	t.Helper()
	ret, err := prog.Run(&ebpf.RunOptions{Context: args, CPU: cpu, Flags: unix.BPF_F_TEST_RUN_ON_CPU})
	if errors.Is(err, ebpf.ErrNotSupported) {
		testutil.SkipOrFail(t, "BPF_PROG_TEST_RUN on a CPU not supported: "+err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	return int32(ret)
}

// siteCopy reads copy c of the totals of slot i (site_counts).
func siteCopy(t *testing.T, objs *bpftest.HarnessObjects, i, c uint32) leakSiteStats {
	t.Helper()
	var s leakSiteStats
	if err := objs.SiteCounts.Lookup(i*harnessCopies+c, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// siteTotals is the totals of slot i: its copies summed, as ForEachSite
// sums them.
func siteTotals(t *testing.T, objs *bpftest.HarnessObjects, i uint32) leakSiteStats {
	t.Helper()
	var sum leakSiteStats
	for c := range harnessCopies {
		s := siteCopy(t, objs, i, c)
		sum.LiveBytes += s.LiveBytes
		sum.Allocs += s.Allocs
		sum.Frees += s.Frees
	}
	return sum
}

// siteSlot reads slot i of site_slots.
func siteSlot(t *testing.T, objs *bpftest.HarnessObjects, i uint32) leakSiteSlot {
	t.Helper()
	var s leakSiteSlot
	if err := objs.SiteSlots.Lookup(i, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// Sites: one slot per stack, kind and program image, found again from
// site_seen or sites; none once site_slots is full.
func TestSiteForKeys(t *testing.T) {
	objs := harness(t, 3)
	malloc, inflate := uint64(leakAllocKindKIND_MALLOC), uint64(leakAllocKindKIND_ZLIB_INFLATE)
	siteFor := func(stack, kind uint64) (uint32, bool) {
		ok := run(t, objs.TestSiteFor, stack, kind) == 1
		var slot uint32
		if err := objs.OutU32.Get(&slot); err != nil {
			t.Fatal(err)
		}
		return slot, ok
	}
	for _, c := range []struct {
		name        string
		gen         uint32 // exec_gen
		stack, kind uint64
		slot        uint32
		ok          bool
	}{
		{"new site", 0, 100, malloc, 0, true},
		{"same site again", 0, 100, malloc, 0, true},
		{"same stack, another kind", 0, 100, inflate, 1, true},
		{"same stack and kind after an exec", 1, 100, malloc, 2, true},
		{"site_slots full", 1, 200, malloc, 0, false},
		{"a site made before it filled", 1, 100, malloc, 2, true},
	} {
		if err := objs.ExecGen.Set(c.gen); err != nil {
			t.Fatal(err)
		}
		slot, ok := siteFor(c.stack, c.kind)
		if ok != c.ok || (ok && slot != c.slot) {
			t.Errorf("%s: slot %d, found %v; want %d, %v", c.name, slot, ok, c.slot, c.ok)
		}
	}
	for i, want := range []leakSiteKey{{StackId: 100, Kind: 0, Pad: 0}, {StackId: 100, Kind: 1, Pad: 0}, {StackId: 100, Kind: 0, Pad: 1}} {
		s := siteSlot(t, objs, uint32(i))
		if s.Key != want || s.State != uint64(leakSlotStateSLOT_USED) {
			t.Errorf("slot %d: key %+v state %d, want %+v, used", i, s.Key, s.State, want)
		}
		var slot uint32
		if err := objs.Sites.Lookup(want, &slot); err != nil || slot != uint32(i) {
			t.Errorf("sites[%+v] = %d (%v), want %d", want, slot, err, i)
		}
	}
	var k leakSiteKey
	var v uint32
	n := 0
	for it := objs.Sites.Iterate(); it.Next(&k, &v); {
		n++
	}
	if n != 3 {
		t.Errorf("sites has %d keys, want 3", n)
	}
}

// The live table: an allocation and its release move the site's totals;
// a double release is ignored; an address allocated again while recorded
// releases the old entry (a missed free); a resource initialised again
// without its release stays live as an orphan; a block owned by a
// resource has no site, and its release comes out of the resource.
func TestTrackAllocRelease(t *testing.T) {
	objs := harness(t, 0)
	malloc, inflate := uint64(leakAllocKindKIND_MALLOC), uint64(leakAllocKindKIND_ZLIB_INFLATE)
	alloc := func(addr, size, kind, stack, ts uint64) {
		t.Helper()
		if run(t, objs.TestTrackAlloc, addr, size, kind, stack, ts) != 1 {
			t.Fatalf("track_alloc(%#x) failed", addr)
		}
	}
	release := func(addr, kind uint64) bool {
		return run(t, objs.TestTrackRelease, addr, kind) == 1
	}
	entry := func(addr, kind uint64) (leakAllocInfo, bool) {
		return harnessEntry(t, objs, addr, kind)
	}
	stats := func(slot uint32, want leakSiteStats) {
		t.Helper()
		if got := siteTotals(t, objs, slot); got != want {
			t.Errorf("slot %d: %+v, want %+v", slot, got, want)
		}
	}

	alloc(0x1000, 64, malloc, 7, 1000)
	if info, ok := entry(0x1000, malloc); !ok || info != (leakAllocInfo{SizeBytes: 64, TsNs: 1000, StackId: 7, Site: 0}) {
		t.Errorf("allocs[0x1000] = %+v (%v)", info, ok)
	}
	alloc(0x2000, 32, malloc, 7, 3000)
	stats(0, leakSiteStats{LiveBytes: 96, Allocs: 2})

	if !release(0x1000, malloc) {
		t.Error("release of a live block not found")
	}
	if _, ok := entry(0x1000, malloc); ok {
		t.Error("released block still in allocs")
	}
	if release(0x1000, malloc) {
		t.Error("double release counted")
	}
	stats(0, leakSiteStats{LiveBytes: 32, Allocs: 2, Frees: 1})

	alloc(0x2000, 48, malloc, 7, 5000) // its free was missed
	stats(0, leakSiteStats{LiveBytes: 48, Allocs: 3, Frees: 2})
	if n := statSum(t, objs.Stats, leakStatIndexSTAT_FREES_MISSED); n != 1 {
		t.Errorf("frees missed %d, want 1", n)
	}

	alloc(0x3000, 100, inflate, 8, 6000)
	alloc(0x3000, 100, inflate, 8, 7000) // initialised again without inflateEnd
	stats(1, leakSiteStats{LiveBytes: 200, Allocs: 2})
	// The orphan goes to allocs under a key nothing releases; the stream
	// of the second init is in its bucket (its handle is a pointer).
	var k leakHandleKey
	var info leakAllocInfo
	var orphans, current int
	for it := objs.Allocs.Iterate(); it.Next(&k, &info); {
		if k.Addr == 0x3000 && k.Pad&1 == 1 && info.TsNs == 6000 {
			orphans++
		}
	}
	if info, ok := harnessEntry(t, objs, 0x3000, inflate); ok && info.TsNs == 7000 {
		current++
	}
	if orphans != 1 || current != 1 {
		t.Errorf("stream re-initialised: %d orphans (odd pad, first init), %d current entries; want 1 and 1", orphans, current)
	}

	if run(t, objs.TestTrackOwned, 0x4000, 16, 0x3000, inflate, 8000) != 1 {
		t.Fatal("track_owned failed")
	}
	if info, ok := entry(0x4000, malloc); !ok || info != (leakAllocInfo{SizeBytes: 16, TsNs: 8000, Site: ^uint32(0) /* NO_SITE */, Owner: 0x3000, OwnerKind: uint16(inflate)}) {
		t.Errorf("owned block: %+v (%v)", info, ok)
	}
	if !release(0x4000, malloc) {
		t.Error("release of an owned block not found")
	}
	if info, _ := entry(0x3000, inflate); info.SizeBytes != 84 {
		t.Errorf("stream holds %d bytes after its block's release, want 84", info.SizeBytes)
	}
	stats(1, leakSiteStats{LiveBytes: 184, Allocs: 2})

	for idx, want := range map[leakStatIndex]uint64{
		leakStatIndexSTAT_ALLOCS:         5,
		leakStatIndexSTAT_FREES:          3, // 0x1000, 0x2000 (missed), 0x4000
		leakStatIndexSTAT_OWNED_ALLOCS:   1,
		leakStatIndexSTAT_ALLOCS_DROPPED: 0,
	} {
		if n := statSum(t, objs.Stats, idx); n != want {
			t.Errorf("stat %d = %d, want %d", idx, n, want)
		}
	}
}

// harnessBuckets is the harness's alloc_buckets_used (harness sets it).
const harnessBuckets = 1 << 12

// harnessEntry finds live handle (addr, kind) of image 0 where the kernel
// keeps it: a heap block, or a resource whose handle is a pointer
// (bucketable), in its bucket of alloc_buckets (found by Go's allocBucket:
// if it and bucket_of disagree, it is not found), or allocs.
func harnessEntry(t *testing.T, objs *bpftest.HarnessObjects, addr, kind uint64) (leakAllocInfo, bool) {
	t.Helper()
	if addr != 0 && addr&7 == 0 {
		var b leakAllocBucket
		if err := objs.AllocBuckets.Lookup(allocBucket(addr, harnessBuckets), &b); err != nil {
			t.Fatal(err)
		}
		for _, s := range b.Slot {
			if s.Addr == addr && s.Gen == 0 && uint64(s.Info.Kind) == kind {
				return s.Info, true
			}
		}
	}
	var info leakAllocInfo
	err := objs.Allocs.Lookup(leakHandleKey{Addr: addr, Kind: uint32(kind)}, &info)
	return info, err == nil
}

// sameBucket returns n 16-byte-aligned addresses of one bucket of the
// harness's alloc_buckets, ascending.
func sameBucket(n int) []uint64 {
	var same []uint64
	for a := uint64(0x7f0000001000); len(same) < n; a += 16 {
		if allocBucket(a, harnessBuckets) == allocBucket(0x7f0000001000, harnessBuckets) {
			same = append(same, a)
		}
	}
	return same
}

// A heap block takes a slot of its bucket; in a full bucket it takes the
// oldest block's slot, and that block moves to allocs (spill_filter
// counts it there) with its record. Every release finds its block in
// either table, once.
func TestAllocBucketsSpill(t *testing.T) {
	objs := harness(t, 0)
	malloc := uint64(leakAllocKindKIND_MALLOC)
	ways := int(leakAllocTableALLOC_WAYS)
	// ways+2 blocks of one bucket, block i made at time 100+i.
	same := sameBucket(ways + 2)
	for i, a := range same {
		if run(t, objs.TestTrackAlloc, a, uint64(10+i), malloc, 7, uint64(100+i)) != 1 {
			t.Fatalf("track_alloc(%#x) failed", a)
		}
	}
	var b leakAllocBucket
	if err := objs.AllocBuckets.Lookup(allocBucket(same[0], harnessBuckets), &b); err != nil {
		t.Fatal(err)
	}
	// Blocks ways and ways+1 took the slots of blocks 0 and 1, the oldest.
	inSlot := []int{ways, ways + 1}
	for i := 2; i < ways; i++ {
		inSlot = append(inSlot, i)
	}
	for i, s := range b.Slot {
		j := inSlot[i]
		if s.Addr != same[j] || s.Info != (leakAllocInfo{SizeBytes: uint64(10 + j), TsNs: uint64(100 + j), StackId: 7}) {
			t.Errorf("bucket slot %d: block %#x %+v, want block %d (%#x)", i, s.Addr, s.Info, j, same[j])
		}
	}
	for j := range 2 {
		var info leakAllocInfo
		err := objs.Allocs.Lookup(leakHandleKey{Addr: same[j], Kind: uint32(malloc)}, &info)
		if err != nil || info != (leakAllocInfo{SizeBytes: uint64(10 + j), TsNs: uint64(100 + j), StackId: 7}) {
			t.Errorf("block %d moved to allocs: found %v, %+v", j, err == nil, info)
		}
	}
	if n := statSum(t, objs.Stats, leakStatIndexSTAT_ALLOCS_MOVED); n != 2 {
		t.Errorf("%d blocks moved, want 2", n)
	}
	spilled := func() (n uint64) {
		var c uint32
		for it := objs.SpillFilter.Iterate(); it.Next(new(uint32), &c); {
			n += uint64(c)
		}
		return n
	}
	if n := spilled(); n != 2 {
		t.Errorf("spill_filter counts %d blocks in allocs, want 2", n)
	}
	if got := siteTotals(t, objs, 0); got != (leakSiteStats{LiveBytes: uint64(10*(ways+2) + (ways+2)*(ways+1)/2), Allocs: uint64(ways + 2)}) {
		t.Errorf("site totals %+v", got)
	}
	// Released in an order that mixes the tables: each is found once.
	for _, i := range []int{1, ways, 0, ways + 1, 2, 3} {
		if run(t, objs.TestTrackRelease, same[i], malloc) != 1 {
			t.Errorf("release of block %d (%#x) not found", i, same[i])
		}
		if run(t, objs.TestTrackRelease, same[i], malloc) != 0 {
			t.Errorf("block %d released twice", i)
		}
	}
	if got := siteTotals(t, objs, 0); got != (leakSiteStats{Allocs: uint64(ways + 2), Frees: uint64(ways + 2)}) {
		t.Errorf("site totals after the releases %+v", got)
	}
	if n := spilled(); n != 0 {
		t.Errorf("spill_filter counts %d blocks after every release", n)
	}
	if n := statSum(t, objs.Stats, leakStatIndexSTAT_ALLOCS_DROPPED); n != 0 {
		t.Errorf("%d allocations dropped", n)
	}
}

// A resource whose handle is a pointer (a z_stream) takes a slot of its
// bucket as a heap block does, beside a heap block of the same address
// (the z_stream's own memory): each release finds its own. Resources are
// never moved out: a heap block that finds its bucket full of them goes
// to allocs. A handle that is no pointer (a file descriptor) goes to
// allocs.
func TestAllocBucketsHoldResources(t *testing.T) {
	objs := harness(t, 0)
	malloc, inflate := uint64(leakAllocKindKIND_MALLOC), uint64(leakAllocKindKIND_ZLIB_INFLATE)
	user := uint64(leakAllocKindKIND_USER)
	ways := int(leakAllocTableALLOC_WAYS)
	same := sameBucket(ways + 1)
	alloc := func(addr, size, kind, ts uint64) {
		t.Helper()
		if run(t, objs.TestTrackAlloc, addr, size, kind, 7+kind, ts) != 1 {
			t.Fatalf("track_alloc(%#x, kind %d) failed", addr, kind)
		}
	}
	inAllocs := func(addr, kind uint64) bool {
		var info leakAllocInfo
		return objs.Allocs.Lookup(leakHandleKey{Addr: addr, Kind: uint32(kind)}, &info) == nil
	}
	// A stream and its z_stream's memory, one address, one bucket.
	alloc(same[0], 112, malloc, 100)
	alloc(same[0], 7160, inflate, 101)
	for _, kind := range []uint64{malloc, inflate} {
		if _, ok := harnessEntry(t, objs, same[0], kind); !ok || inAllocs(same[0], kind) {
			t.Errorf("kind %d at %#x: in its bucket %v, in allocs %v; want the bucket", kind, same[0], ok, inAllocs(same[0], kind))
		}
	}
	if run(t, objs.TestTrackRelease, same[0], malloc) != 1 {
		t.Fatal("release of the z_stream's memory not found")
	}
	if info, ok := harnessEntry(t, objs, same[0], inflate); !ok || info.SizeBytes != 7160 {
		t.Errorf("the stream after its memory's release: %+v (%v)", info, ok)
	}
	// The bucket full of streams: a heap block goes to allocs, no
	// stream moves.
	for i := 1; i < ways; i++ {
		alloc(same[i], 7160, inflate, uint64(100+i))
	}
	alloc(same[ways], 64, malloc, 200)
	if !inAllocs(same[ways], malloc) {
		t.Error("a heap block of a bucket full of streams is not in allocs")
	}
	for i := range ways {
		if _, ok := harnessEntry(t, objs, same[i], inflate); !ok || inAllocs(same[i], inflate) {
			t.Errorf("stream %d moved out of its bucket", i)
		}
	}
	if n := statSum(t, objs.Stats, leakStatIndexSTAT_ALLOCS_MOVED); n != 0 {
		t.Errorf("%d handles moved, want 0", n)
	}
	// A file descriptor of a declared pair.
	alloc(3, 1, user, 300)
	if !inAllocs(3, user) {
		t.Error("handle 3 is not in allocs")
	}
	// One that is a multiple of 8 looks like a pointer: its bucket.
	alloc(8, 1, user, 301)
	if _, ok := harnessEntry(t, objs, 8, user); !ok || inAllocs(8, user) {
		t.Error("handle 8 is not in its bucket")
	}
	release := []struct{ addr, kind uint64 }{{3, user}, {8, user}, {same[ways], malloc}}
	for i := range ways {
		release = append(release, struct{ addr, kind uint64 }{same[i], inflate})
	}
	for _, h := range release {
		if run(t, objs.TestTrackRelease, h.addr, h.kind) != 1 {
			t.Errorf("release of %#x (kind %d) not found", h.addr, h.kind)
		}
		if run(t, objs.TestTrackRelease, h.addr, h.kind) != 0 {
			t.Errorf("%#x (kind %d) released twice", h.addr, h.kind)
		}
	}
	var c uint32
	for it := objs.SpillFilter.Iterate(); it.Next(new(uint32), &c); {
		if c != 0 {
			t.Errorf("spill_filter counts %d after every release", c)
		}
	}
	// Every site is back to nothing live: streams (stack 8), blocks (7),
	// descriptors (23).
	for slot := range uint32(3) {
		if got := siteTotals(t, objs, slot); got.LiveBytes != 0 || got.Allocs != got.Frees || got.Allocs == 0 {
			t.Errorf("site slot %d after every release: %+v", slot, got)
		}
	}

	// A bucket whose oldest handle is a stream: a new handle takes the
	// oldest heap block's slot, never the stream's.
	more := sameBucket(ways + 1)[:ways+1]
	alloc(more[0], 7160, inflate, 400)
	for i := 1; i < ways; i++ {
		alloc(more[i], 16, malloc, uint64(400+i))
	}
	alloc(more[ways], 7160, inflate, 500)
	if _, ok := harnessEntry(t, objs, more[0], inflate); !ok {
		t.Error("the oldest handle, a stream, left its bucket")
	}
	if !inAllocs(more[1], malloc) {
		t.Error("the oldest heap block was not moved to allocs")
	}
	if _, ok := harnessEntry(t, objs, more[ways], inflate); !ok {
		t.Error("the new stream is not in its bucket")
	}
}

// A slot being filled (SLOT_FILLING) still holds its last holder's record:
// a release of a handle of that kind at the same address (the z_stream's
// memory, a heap block, while its stream's record is being written) finds
// the handle's own slot, not that one.
func TestSlotBeingFilledIsNotFound(t *testing.T) {
	objs := harness(t, 0)
	malloc := uint64(leakAllocKindKIND_MALLOC)
	same := sameBucket(2)
	a, b := same[0], same[1]
	run(t, objs.TestTrackAlloc, b, 50, malloc, 5, 1)
	run(t, objs.TestTrackAlloc, a, 112, malloc, 6, 2)
	if run(t, objs.TestTrackRelease, b, malloc) != 1 {
		t.Fatal("release of b not found")
	}
	idx := allocBucket(a, harnessBuckets)
	var bk leakAllocBucket
	if err := objs.AllocBuckets.Lookup(idx, &bk); err != nil {
		t.Fatal(err)
	}
	if bk.Slot[0].Addr != 0 || bk.Slot[1].Addr != a || bk.Slot[0].Info.Kind != uint16(malloc) {
		t.Fatalf("bucket %+v, want b's freed slot then a", bk.Slot[:2])
	}
	// Another CPU's insert of the stream at a has claimed slot 0 and not
	// written its record yet: b's, a heap block's, is still there.
	bk.Slot[0].Addr = a | uint64(2) // SLOT_FILLING
	if err := objs.AllocBuckets.Put(idx, &bk); err != nil {
		t.Fatal(err)
	}
	if run(t, objs.TestTrackRelease, a, malloc) != 1 {
		t.Fatal("release of heap block a not found")
	}
	if err := objs.AllocBuckets.Lookup(idx, &bk); err != nil {
		t.Fatal(err)
	}
	if bk.Slot[0].Addr != a|2 || bk.Slot[1].Addr != 0 {
		t.Errorf("after the release: slots %#x, %#x; want the one being filled untouched and a's emptied", bk.Slot[0].Addr, bk.Slot[1].Addr)
	}
	if got := siteTotals(t, objs, 0); got != (leakSiteStats{Allocs: 1, Frees: 1}) {
		t.Errorf("b's site %+v, released twice?", got)
	}
	if got := siteTotals(t, objs, 1); got != (leakSiteStats{Allocs: 1, Frees: 1}) {
		t.Errorf("a's site %+v, want it released", got)
	}
}

// A site's totals are kept in copies, one per CPU (modulo site_copies): a
// block allocated on one CPU and released on another leaves the first
// copy up and the second below zero, and their sum is exact; so are a
// resource's bytes moved by its blocks on another CPU (owner_add).
func TestSiteCountsAcrossCPUs(t *testing.T) {
	n, err := ebpf.PossibleCPU()
	if err != nil || n < 2 {
		testutil.SkipOptional(t, "needs two CPUs")
	}
	objs := harness(t, 0)
	malloc, inflate := uint64(leakAllocKindKIND_MALLOC), uint64(leakAllocKindKIND_ZLIB_INFLATE)
	alloc := func(cpu uint32, addr, size, kind, stack, ts uint64) {
		t.Helper()
		if runOn(t, cpu, objs.TestTrackAlloc, addr, size, kind, stack, ts) != 1 {
			t.Fatalf("track_alloc(%#x) on CPU %d failed", addr, cpu)
		}
	}
	release := func(cpu uint32, addr, kind uint64) {
		t.Helper()
		if runOn(t, cpu, objs.TestTrackRelease, addr, kind) != 1 {
			t.Fatalf("track_release(%#x) on CPU %d: not live", addr, cpu)
		}
	}
	// Slot 0: three blocks on CPU 0, two of them freed on CPU 1, one
	// more made and freed on CPU 1.
	alloc(0, 0x1000, 64, malloc, 7, 1000)
	alloc(0, 0x2000, 32, malloc, 7, 2000)
	alloc(0, 0x3000, 16, malloc, 7, 3000)
	release(1, 0x1000, malloc)
	release(1, 0x3000, malloc)
	alloc(1, 0x4000, 8, malloc, 7, 4000)
	release(1, 0x4000, malloc)
	if got, want := siteCopy(t, objs, 0, 0), (leakSiteStats{LiveBytes: 112, Allocs: 3}); got != want {
		t.Errorf("slot 0, copy 0: %+v, want %+v", got, want)
	}
	below := func(n int64) uint64 { return uint64(-n) } // n below zero, as a copy wraps
	if got, want := siteCopy(t, objs, 0, 1), (leakSiteStats{LiveBytes: below(80), Allocs: 1, Frees: 3}); got != want {
		t.Errorf("slot 0, copy 1: %+v, want %+v (below zero: freed here, allocated elsewhere)", got, want)
	}
	if got, want := siteTotals(t, objs, 0), (leakSiteStats{LiveBytes: 32, Allocs: 4, Frees: 3}); got != want {
		t.Errorf("slot 0: %+v, want %+v", got, want)
	}
	// Slot 1: a stream made on CPU 0; a block it owns made and freed on
	// CPU 1 takes its bytes out of the stream's site on CPU 1's copy.
	alloc(0, 0x5000, 100, inflate, 8, 5000)
	if runOn(t, 1, objs.TestTrackOwned, 0x6000, 16, 0x5000, inflate, 6000) != 1 {
		t.Fatal("track_owned failed")
	}
	release(1, 0x6000, malloc)
	if got, want := siteTotals(t, objs, 1), (leakSiteStats{LiveBytes: 84, Allocs: 1}); got != want {
		t.Errorf("stream's slot: %+v, want %+v", got, want)
	}
	if got := siteCopy(t, objs, 1, 1).LiveBytes; got != below(16) {
		t.Errorf("stream's slot, copy 1: live bytes %d, want -16", int64(got))
	}
}

// fakeInflateState writes at addr an inflate_state of zlib 1.2.13 as
// zwindow_owner and zwindow_settle read it: its stream, wbits and window.
func fakeInflateState(m *mem, addr, strm uint64, wbits uint32, window uint64) {
	m.put(addr, strm)
	m.put32(addr+uint64(leakZlibOffsetINFLATE_STATE_WBITS_OFF), wbits)
	m.put(addr+uint64(leakZlibOffsetINFLATE_STATE_WINDOW_OFF), window)
}

// zwindow_owner tells an inflate window's malloc from any other: made by
// zlib itself for a live stream whose state, in a callee-saved register,
// points back at the stream, has no window yet and asks for this size.
func TestZwindowOwner(t *testing.T) {
	objs := harness(t, 0)
	m := newMem(t, 1)
	const zlib = 0x700000
	setRanges(t, objs, 1, []leakExecRange{{Start: zlib, End: zlib + 0x80000, Flags: uint32(leakRangeFlagRANGE_ZLIB)}}, nil)
	const strm = 0x5000
	state := m.base + 0x100
	inflate := uint64(leakAllocKindKIND_ZLIB_INFLATE)
	if run(t, objs.TestTrackOwned, state, 7160, strm, inflate, 1) != 1 {
		t.Fatal("track_owned failed")
	}
	for _, c := range []struct {
		name         string
		ip, size     uint64
		bp, r12      uint64
		wbits        uint32
		window, back uint64
		want         uint64
	}{
		{"state in %rbp", zlib + 0x100, 1 << 15, state, 0, 15, 0, strm, strm},
		{"state in %r12", zlib + 0x100, 1 << 15, 0, state, 15, 0, strm, strm},
		{"9-bit window", zlib + 0x100, 1 << 9, state, 0, 9, 0, strm, strm},
		{"size is not the state's window", zlib + 0x100, 1 << 14, state, 0, 15, 0, strm, 0},
		{"window made already", zlib + 0x100, 1 << 15, state, 0, 15, 0xabc000, strm, 0},
		{"state of another stream", zlib + 0x100, 1 << 15, state, 0, 15, 0, strm + 8, 0},
		{"malloc from outside zlib", 0x400100, 1 << 15, state, 0, 15, 0, strm, 0},
		{"no power of two", zlib + 0x100, 1<<15 + 16, state, 0, 15, 0, strm, 0},
		{"no state in a register", zlib + 0x100, 1 << 15, 0, 0, 15, 0, strm, 0},
	} {
		fakeInflateState(m, state, c.back, c.wbits, c.window)
		run(t, objs.TestZwindowOwner, c.ip, c.size, c.bp, 0, c.r12, 0)
		var got uint64
		if err := objs.OutU64.Get(&got); err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("%s: owner %#x, want %#x", c.name, got, c.want)
		}
	}

	// A zlib whose bytes are computed: the state is no traced block, and
	// the window is the stream's when the stream's window is looked for
	// with this state (or a state not read yet), ZWINDOW_COMPUTED.
	setRanges(t, objs, 2, []leakExecRange{{Start: zlib, End: zlib + 0x80000, Flags: uint32(leakRangeFlagRANGE_ZLIB_COMPUTED)}}, nil)
	const computed = 1
	other, unread, none := uint64(strm+0x100), uint64(strm+0x200), uint64(strm+0x300)
	for _, s := range []struct{ strm, state uint64 }{{strm, state}, {other, state + 0x40}, {unread, 0}} {
		if run(t, objs.TestTrackStream, s.strm, 7160, 9, s.state, 1<<15) != 1 {
			t.Fatal("track_alloc_window failed")
		}
	}
	if run(t, objs.TestTrackAlloc, none, 7160, inflate, 9, 1000) != 1 {
		t.Fatal("track_alloc failed")
	}
	for _, c := range []struct {
		name string
		back uint64
		want uint64
	}{
		{"its window, its state", strm, computed},
		{"a state not read yet", unread, computed},
		{"another state of the stream", other, 0},
		{"a stream whose window is not looked for", none, 0},
		{"no stream", strm + 0x400, 0},
	} {
		fakeInflateState(m, state, c.back, 15, 0)
		run(t, objs.TestZwindowOwner, zlib+0x100, 1<<15, state, 0, 0, 0)
		var got uint64
		if err := objs.OutU64.Get(&got); err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("computed, %s: owner %#x, want %#x", c.name, got, c.want)
		}
	}
}

// zwindow_settle counts a live stream's window into the stream once zlib
// made it, with the size its state says, and clears the stream's window
// word; it leaves a window not made yet to look for again, and counts a
// state it cannot trust as unread. The word is the state the init left
// (a state not read yet is read from the stream), and the window's bytes
// by the init's arguments; the stream is listed with them until it is
// settled (ForEachWindow).
func TestZwindowSettle(t *testing.T) {
	objs := harness(t, 0)
	m := newMem(t, 1)
	inflate := uint64(leakAllocKindKIND_ZLIB_INFLATE)
	strm := m.base + 0x100
	state := m.base + 0x400
	m.put(strm+uint64(leakZlibOffsetZSTREAM_STATE_OFF), state)
	const streamBytes = 7160 + 112 // an inflate state and java.util.zip's z_stream
	if run(t, objs.TestTrackStream, strm, streamBytes, 9, 0, 1<<15) != 1 {
		t.Fatal("track_alloc_window failed")
	}
	listed := func() []Window { return windowsListed(t, objs, strm, inflate) }
	if got, want := listed(), []Window{{State: 0, Stack: 9, Bytes: 1 << 15}}; !slices.Equal(got, want) {
		t.Errorf("windows listed %+v, want %+v", got, want)
	}
	check := func(name string, bytes uint64, pending bool, unread uint64) {
		t.Helper()
		info, ok := harnessEntry(t, objs, strm, inflate)
		if !ok || info.SizeBytes != bytes {
			t.Errorf("%s: stream holds %d bytes (live: %v), want %d", name, info.SizeBytes, ok, bytes)
		}
		if s := siteTotals(t, objs, info.Site); s.LiveBytes != bytes {
			t.Errorf("%s: its site holds %d bytes, want %d", name, s.LiveBytes, bytes)
		}
		if still := len(listed()) == 1; still != pending {
			t.Errorf("%s: window still looked for: %v, want %v", name, still, pending)
		}
		if n := statSum(t, objs.Stats, leakStatIndexSTAT_WINDOWS_UNREAD); n != unread {
			t.Errorf("%s: windows unread %d, want %d", name, n, unread)
		}
	}

	fakeInflateState(m, state, strm+8, 15, 0xabc000)
	run(t, objs.TestZwindowSettle, strm, inflate)
	check("state of another stream", streamBytes, true, 1)

	fakeInflateState(m, state, strm, 15, 0)
	run(t, objs.TestZwindowSettle, strm, inflate)
	check("window not made yet", streamBytes, true, 1)

	fakeInflateState(m, state, strm, 12, 0xabc000) // the state's wbits win over the init's
	run(t, objs.TestZwindowSettle, strm, inflate)
	check("window made", streamBytes+1<<12, false, 1)

	if ret := run(t, objs.TestZwindowSettle, strm, inflate); ret != -1 {
		t.Errorf("settled window looked for again: %d", ret)
	}
}

// windowsListed returns the windows ForEachWindow lists from the
// harness's tables, failing on one of another handle than (strm, kind).
func windowsListed(t *testing.T, objs *bpftest.HarnessObjects, strm, kind uint64) []Window {
	t.Helper()
	var ws []Window
	o := &Objects{objs: leakObjects{
		leakMaps:      leakMaps{AllocBuckets: objs.AllocBuckets, Allocs: objs.Allocs},
		leakVariables: leakVariables{WindowsLookedFor: objs.WindowsLookedFor},
	}}
	if err := o.ForEachWindow(func(h Handle, w Window) {
		if h.Addr != strm || h.Kind != uint32(kind) {
			t.Errorf("window listed of handle %+v", h)
		}
		ws = append(ws, w)
	}); err != nil {
		t.Fatal(err)
	}
	return ws
}

// A stream's window word is no owner: releasing a stream whose window is
// still looked for takes its bytes out of its site, as any resource's.
// The word's state is the one settled from, not the stream's state now
// (a z_stream the program reused); a stream whose handle is no pointer
// (in allocs, not a bucket) is listed and settled the same way.
func TestWindowWordIsNoOwner(t *testing.T) {
	objs := harness(t, 0)
	m := newMem(t, 1)
	inflate := uint64(leakAllocKindKIND_ZLIB_INFLATE)
	if ws := windowsListed(t, objs, 0, inflate); len(ws) != 0 {
		t.Fatalf("windows listed before any stream: %+v", ws)
	}
	const streamBytes = 7160
	for _, strm := range []uint64{m.base + 0x100, m.base + 0x203} { // a bucket's, then allocs'
		t.Run(fmt.Sprintf("strm %#x", strm&7), func(t *testing.T) {
			state, elsewhere := m.base+0x400, m.base+0x800
			m.put(strm+uint64(leakZlibOffsetZSTREAM_STATE_OFF), elsewhere)
			fakeInflateState(m, elsewhere, strm, 15, 0) // no window: would leave it pending
			fakeInflateState(m, state, strm, 15, 0xabc000)
			if run(t, objs.TestTrackStream, strm, streamBytes, 9, state, 1<<15) != 1 {
				t.Fatal("track_alloc_window failed")
			}
			if got, want := windowsListed(t, objs, strm, inflate), []Window{{State: state, Stack: 9, Bytes: 1 << 15}}; !slices.Equal(got, want) {
				t.Errorf("windows listed %+v, want %+v", got, want)
			}
			info, _ := harnessEntry(t, objs, strm, inflate)
			site := info.Site
			run(t, objs.TestZwindowSettle, strm, inflate)
			if info, ok := harnessEntry(t, objs, strm, inflate); !ok || info.SizeBytes != streamBytes+1<<15 {
				t.Errorf("stream holds %d bytes (live: %v), want %d with the window of the word's state", info.SizeBytes, ok, streamBytes+1<<15)
			}
			if ws := windowsListed(t, objs, strm, inflate); len(ws) != 0 {
				t.Errorf("windows listed once settled: %+v", ws)
			}
			if run(t, objs.TestTrackRelease, strm, inflate) != 1 {
				t.Fatal("track_release of the stream failed")
			}
			// Released with its word still set: the site gives back
			// what it holds, and nothing is taken from anywhere else.
			other := strm + 0x1000
			if run(t, objs.TestTrackStream, other, streamBytes, 9, state, 1<<15) != 1 {
				t.Fatal("track_alloc_window failed")
			}
			if run(t, objs.TestTrackRelease, other, inflate) != 1 {
				t.Fatal("track_release of the pending stream failed")
			}
			if s := siteTotals(t, objs, site); s.LiveBytes != 0 || s.Allocs != s.Frees {
				t.Errorf("site after both releases: %+v, want nothing live", s)
			}
		})
	}
}

// A stop is made only with room for its record: with range_misses full,
// stop_told neither stops the process nor sends a record, and counts
// STAT_STOPS_UNSENT (a stop without its record would never be continued:
// the SIGCONT that took it back could not be sent from there). A range
// miss, a hint, leaves half of the ring buffer to stops.
func TestStopNeedsRoomForItsRecord(t *testing.T) {
	objs := harness(t, 0)
	rd, err := ringbuf.NewReader(objs.RangeMisses)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	records := func() int {
		n := 0
		rd.SetDeadline(time.Now().Add(50 * time.Millisecond))
		for {
			if _, err := rd.Read(); err != nil {
				return n
			}
			n++
		}
	}
	// 32 bytes a record (struct range_miss and the ring buffer's
	// header), and the ring buffer keeps one byte of its 4096 free.
	const per, half = 4095 / 32, 4096 / 2 / 32
	if n := run(t, objs.TestFillMisses, 512); n != per {
		t.Fatalf("range_misses took %d records, want %d", n, per)
	}
	// The test process would stop here if stop_told sent its SIGSTOP.
	if run(t, objs.TestStopTold, 0x1234) != 0 {
		t.Error("stop_told with range_misses full reported a stop")
	}
	if n := statSum(t, objs.Stats, leakStatIndexSTAT_STOPS_UNSENT); n != 1 {
		t.Errorf("STAT_STOPS_UNSENT = %d, want 1", n)
	}
	if n := records(); n != per {
		t.Errorf("read %d records, want the %d put in", n, per)
	}

	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	miss := func() int {
		if err := objs.MissTimes.Update(uint32(0), make([]uint64, cpus), ebpf.UpdateAny); err != nil {
			t.Fatal(err)
		}
		run(t, objs.TestNoteRangeMiss, 0x5678)
		return records()
	}
	if n := miss(); n != 1 {
		t.Errorf("range miss with range_misses empty: %d records, want 1", n)
	}
	run(t, objs.TestFillMisses, half+1)
	if n := miss(); n != half+1 {
		t.Errorf("range miss with range_misses over half full: %d records, want only the %d put in", n, half+1)
	}
	run(t, objs.TestFillMisses, half)
	if n := miss(); n != half+1 {
		t.Errorf("range miss with range_misses half full: %d records, want %d", n, half+1)
	}
}

// A compiled Java frame is walked by its code blob's frame size, the blob
// found through the code heap's segment map; the blob found for a return
// address is trusted on this CPU for ~0.1 s (JVM_BLOB_RECHECK), then read
// again: a blob whose compile id changed (freed, its memory another
// nmethod's) is looked up anew.
func TestWalkStackCompiledJavaFrames(t *testing.T) {
	objs := harness(t, 0)
	// The frame cache is per CPU: every walk runs on one.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var was, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &was); err != nil {
		t.Fatal(err)
	}
	one.Set(0)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		t.Fatal(err)
	}
	defer unix.SchedSetaffinity(0, &was)

	m := newMem(t, 8)
	s := m.base + 2*uint64(os.Getpagesize()) // the stack pointer at the return probe
	// A code heap of 64-byte segments: block A is segments 0-7, block B
	// 8-15 (the segment map holds each segment's hops back to its
	// block's first). Blobs follow a 16-byte HeapBlock header; the frame
	// size (words) at +4, the compile id at +12.
	low := m.base + 3*uint64(os.Getpagesize())
	segmap := low + 0x800
	for i := range uint64(16) {
		m.b[segmap-m.base+i] = byte(i % 8)
	}
	const blobOff, sizeOff, idOff = 16, 4, 12
	blob := low + blobOff
	m.put32(blob+sizeOff, 4)
	m.put32(blob+idOff, 101)
	if err := objs.JvmHeaps.Put(uint32(0), leakJvmHeap{Low: low, High: low + 0x400, Segmap: segmap, Log2Segment: 6,
		BlobOffset: blobOff, FrameSizeOffset: sizeOff, CompileIdOffset: idOff}); err != nil {
		t.Fatal(err)
	}
	const fp = 0x400000
	setRanges(t, objs, 1, []leakExecRange{
		{Start: fp, End: fp + 0x100000, Flags: uint32(leakRangeFlagRANGE_HAS_FP)},
		{Start: low, End: low + 0x400, Flags: uint32(leakRangeFlagRANGE_JVM_CODE)},
	}, nil)
	jit := low + 3*64 + 0x10 // a return address in block A
	// Frame size 4: the caller's %rbp and return address at s+16; size 6
	// would find them at s+32.
	m.put(s+16, s+0x80, fp+0x2000)
	m.put(s+32, s+0x80, fp+0x3000)
	m.put(s+0x80, 0, 0)
	walk := func() []uint64 {
		t.Helper()
		if ret := run(t, objs.TestWalkStack, jit, 0x1111, s); ret != 0 {
			t.Fatalf("test_walk_stack returned %d", ret)
		}
		var id uint64
		if err := objs.OutU64.Get(&id); err != nil {
			t.Fatal(err)
		}
		var st leakStack
		if err := objs.Stacks.Lookup(id, &st); err != nil {
			t.Fatalf("stacks[%#x]: %v", id, err)
		}
		if st.Flags != 0 {
			t.Errorf("flags %#x", st.Flags)
		}
		return slices.Clone(st.Ips[:st.Depth])
	}
	first := []uint64{jit, fp + 0x2000}
	if got := walk(); !slices.Equal(got, first) {
		t.Fatalf("frames %#x, want %#x (blob frame size 4)", got, first)
	}
	found := time.Now()
	// Another nmethod in block A's memory: frame size 6, compile id 102.
	m.put32(blob+sizeOff, 6)
	m.put32(blob+idOff, 102)
	got := walk()
	switch {
	case time.Since(found) > 50*time.Millisecond:
		// A machine that stalled the test this long may have let the
		// trust run out: the walk may see either blob.
		t.Logf("%v between the walks: the trusted blob is not checked", time.Since(found))
	case !slices.Equal(got, first):
		t.Errorf("frames %#x right after, want the trusted blob's %#x", got, first)
	}
	time.Sleep(150 * time.Millisecond)
	if got, want := walk(), []uint64{jit, fp + 0x3000}; !slices.Equal(got, want) {
		t.Errorf("frames %#x after the trust ran out, want the new blob's %#x", got, want)
	}
}

// Misses is idle once every record sent was read and its reader came
// back for the next: not while a record waits, nor while the last one
// read is being handled, nor once closed.
func TestMissesIdleAfterEveryRecordIsHandled(t *testing.T) {
	objs := harness(t, 0)
	rd, err := ringbuf.NewReader(objs.RangeMisses)
	if err != nil {
		t.Fatal(err)
	}
	m := &Misses{r: rd}
	defer m.Close()
	if !m.Idle() {
		t.Fatal("a new reader with no record is not idle")
	}
	if n := run(t, objs.TestFillMisses, 1); n != 1 {
		t.Fatalf("range_misses took %d records, want 1", n)
	}
	if m.Idle() {
		t.Error("idle with a record waiting")
	}
	if rec, err := m.Read(); err != nil || rec.IP != 1 {
		t.Fatalf("Read = %+v, %v; want the record of ip 1", rec, err)
	}
	if m.Idle() {
		t.Error("idle while the record read is handled")
	}
	rd.SetDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := m.Read(); err == nil {
		t.Fatal("Read of an empty ring buffer past its deadline returned a record")
	}
	if !m.Idle() {
		t.Error("not idle once the reader came back and nothing waits")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if m.Idle() {
		t.Error("a closed reader is idle")
	}
	if err := m.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
