package kernel

// The harness tests whose expectations are x86-64's frame layouts, which
// the arm64 object does not share (ebpf/arch.bpf.h): the walker's
// .eh_frame rows (struct unwind_row holds x86-64's rules; arm64 stops at
// dwarf_step) and HotSpot's interpreter slots, and the return address a
// call leaves in the stack slot at the entry's sp (on arm64 it is in x30).

import (
	"os"
	"testing"
)

// The walker over a synthetic stack in this process's memory: frame
// pointers, an .eh_frame row, an object without frame pointers, the end
// of an object's rows, a bad frame pointer, the depth limit, an
// interpreted Java frame and a cgo call's switch back to the goroutine's
// stack, each with its exact frames, flags and stack id.
func TestWalkStackSyntheticStack(t *testing.T) {
	objs := harness(t, 0)
	m := newMem(t, 8)
	s := m.base + 2*uint64(os.Getpagesize()) // the stack pointer at the return probe

	const fp, dwarf, nofp, interp, cgocall = 0x400000, 0x600000, 0x800000, 0xa00000, 0xc00000
	const bias = dwarf - 0x1000 // the DWARF object's code is at ELF vaddr 0x1000
	ranges := []leakExecRange{
		{Start: fp, End: fp + 0x100000, Flags: uint32(leakRangeFlagRANGE_HAS_FP)},
		{Start: dwarf, End: dwarf + 0x100000, Flags: uint32(leakRangeFlagRANGE_DWARF), Bias: bias, RowStart: 0, RowCount: 2},
		{Start: nofp, End: nofp + 0x100000},
		{Start: interp, End: interp + 0x100000, Flags: uint32(leakRangeFlagRANGE_JVM_INTERP | leakRangeFlagRANGE_HAS_FP)},
		{Start: cgocall, End: cgocall + 0x100000, Flags: uint32(leakRangeFlagRANGE_GO_CGOCALL | leakRangeFlagRANGE_GO | leakRangeFlagRANGE_HAS_FP)},
	}
	rows := []leakUnwindRow{
		// CFA = %rsp + 16, the caller's %rbp at CFA-16
		{Pc: 0x1000, CfaOff: 16, RbpOff: -16, Rule: uint8(leakUnwindCfaUNWIND_CFA_RSP) | uint8(leakUnwindRbpUNWIND_RBP_SAVED)<<4},
		{Pc: 0x3000, Rule: uint8(leakUnwindCfaUNWIND_UNDEFINED)},
	}

	// fp frame at s+0x20 → fp frame at s+0x50 → a DWARF frame (CFA
	// s+0x70, its saved %rbp garbage-free at s+0x60) → fp frame at
	// s+0x80 → a return address no range holds, the outermost frame.
	m.put(s+0x20, s+0x50, fp+0x2000)
	m.put(s+0x50, 0x1111 /* not a frame pointer: the row says where %rbp is */, dwarf+0x1800)
	m.put(s+0x60, s+0x80, fp+0x3000)
	m.put(s+0x80, 0, 0x12345)
	// 70 frame-pointer frames from s+0x400 up.
	deep := s + 0x400
	var deepIPs []uint64
	for i := range uint64(70) {
		m.put(deep+i*16, deep+(i+1)*16, fp+0x100+i)
	}
	deepIPs = append(deepIPs, fp+0x10)
	for i := range uint64(63) {
		deepIPs = append(deepIPs, fp+0x100+i)
	}

	// An interpreted frame at s+0xa00: its bytecode pointer and Method*
	// slots below %rbp (the bytecode index from the method's
	// ConstMethod, jvm_layouts), its caller's stack pointer in the
	// sender-sp slot.
	jf := s + 0xa00
	method, constMethod := m.base+0x5000, m.base+0x5100
	const cmOffset, cmSize, bci = 8, 0x30, 5
	m.put(method+cmOffset, constMethod)
	m.put(jf-8*8, constMethod+cmSize+bci) // bcp
	m.put(jf-3*8, method, 0, jf+0x40)     // Method*, last sp, sender sp
	m.put(jf, 0, fp+0x4000)
	if err := objs.JvmLayouts.Put(uint32(0), leakJvmLayout{ConstMethodOffset: cmOffset, ConstMethodSize: cmSize}); err != nil {
		t.Fatal(err)
	}
	methodEntry := stackJVMMethod | method | (bci+1)<<stackJVMBCIShift
	// runtime.asmcgocall stored at the C callee's CFA (the stack pointer
	// here) the goroutine's stack depth and g; g.stack.hi minus the depth
	// is the frame pointer of its caller's frame on the goroutine's stack.
	g, hi := m.base+0x5200, s+0xc00
	m.put(s, 0x100, g)
	m.put(g+8, hi)
	m.put(hi-0x100, 0, fp+0x5000)

	for i, c := range []struct {
		name      string
		ip, fp    uint64
		wantIPs   []uint64
		wantFlags leakStackFlag
	}{
		{"fp, dwarf, fp, unknown", fp + 0x1000, s + 0x20,
			[]uint64{fp + 0x1000, fp + 0x2000, dwarf + 0x1800, fp + 0x3000, 0x12345}, leakStackFlagSTACK_UNVERIFIED},
		{"no frame pointers", nofp + 0x10, s + 0x20, []uint64{nofp + 0x10}, leakStackFlagSTACK_NO_FP},
		{"rows end", bias + 0x3001, s + 0x20, []uint64{bias + 0x3001}, leakStackFlagSTACK_UNWIND_END},
		{"frame pointer below the stack pointer", fp + 0x10, s - 0x100, []uint64{fp + 0x10}, leakStackFlagSTACK_BAD_FRAME},
		{"depth limit", fp + 0x10, deep, deepIPs, leakStackFlagSTACK_MAX_DEPTH},
		{"interpreted Java frame", interp + 0x100, jf, []uint64{interp + 0x100, methodEntry, fp + 0x4000}, 0},
		{"cgo call back to the goroutine's stack", cgocall + 0x100, 0x1111, []uint64{cgocall + 0x100, fp + 0x5000}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			setRanges(t, objs, uint64(i+1), ranges, rows)
			if ret := run(t, objs.TestWalkStack, c.ip, c.fp, s); ret != 0 {
				t.Fatalf("test_walk_stack returned %d", ret)
			}
			var id uint64
			if err := objs.OutU64.Get(&id); err != nil {
				t.Fatal(err)
			}
			if want := stackID(c.wantIPs, uint32(c.wantFlags)); id != want {
				t.Errorf("stack id %#x, want %#x", id, want)
			}
			var st leakStack
			if err := objs.Stacks.Lookup(id, &st); err != nil {
				t.Fatalf("stacks[%#x]: %v", id, err)
			}
			got := st.Ips[:st.Depth]
			if len(got) != len(c.wantIPs) {
				t.Fatalf("frames %#x, want %#x", got, c.wantIPs)
			}
			for j := range got {
				if got[j] != c.wantIPs[j] {
					t.Fatalf("frames %#x, want %#x", got, c.wantIPs)
				}
			}
			if st.Flags != uint32(c.wantFlags) {
				t.Errorf("flags %#x, want %#x", st.Flags, c.wantFlags)
			}
		})
	}
}

// A malloc inside inflate() belongs to its stream while inflate() runs:
// entered deeper on the stack, called from the zlib object, and
// inflate()'s return address still where its entry read it. Once the
// thread left inflate() and made another call at that depth, a malloc
// deeper still (Node.js's worker running another task) is no stream's.
func TestZcallOwner(t *testing.T) {
	objs := harness(t, 0)
	m := newMem(t, 1)
	const zlib, caller = 0x700000, 0x500000
	setRanges(t, objs, 1, []leakExecRange{{Start: zlib, End: zlib + 0x80000, Flags: uint32(leakRangeFlagRANGE_ZLIB)}}, nil)
	const strm, ret = 0x5000, caller + 0x40
	zsp := m.base + 0x800 // inflate()'s entry
	sp := m.base + 0x400  // the malloc's entry, deeper
	inflate := uint64(leakAllocKindKIND_ZLIB_INFLATE)
	for _, c := range []struct {
		name     string
		from     uint64 // the malloc's return address
		slot     uint64 // what the slot of inflate()'s return address holds now
		sp, want uint64
	}{
		{"window inside inflate()", zlib + 0x100, ret, sp, strm},
		{"inflate() returned, another call at its depth", zlib + 0x100, caller + 0x80, sp, 0},
		{"malloc from outside zlib", caller + 0x100, ret, sp, 0},
		{"not deeper than inflate()", zlib + 0x100, ret, zsp + 0x40, 0},
	} {
		m.put(zsp, c.slot)
		m.put(c.sp, c.from)
		run(t, objs.TestZcallOwner, c.sp, zsp, ret, strm)
		var got uint64
		var kind uint32
		if err := objs.OutU64.Get(&got); err != nil {
			t.Fatal(err)
		}
		if err := objs.OutU32.Get(&kind); err != nil {
			t.Fatal(err)
		}
		if got != c.want || (got != 0 && uint64(kind) != inflate) {
			t.Errorf("%s: owner %#x, kind %d; want %#x", c.name, got, kind, c.want)
		}
	}
}
