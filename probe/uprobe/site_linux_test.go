//go:build linux && amd64

package uprobe

import (
	"encoding/hex"
	"os"
	"slices"
	"strings"
	"testing"

	"golang.org/x/arch/x86/x86asm"

	"github.com/leakscope/leakscope/probe/kernel"
	"github.com/leakscope/leakscope/probe/symbolize"
)

func code(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var (
	needFree   = siteNeeds{reads: regRSP | args(1)}
	needMalloc = siteNeeds{reads: regRSP | args(1, 2, 3), ret: true}
	// alloc_session on malloc and realloc: told where the arguments are.
	followMalloc  = siteNeeds{reads: regRSP | args(1), ret: true, follow: true}
	followRealloc = siteNeeds{reads: regRSP | args(1, 2), ret: true, follow: true}
)

func TestSelectSite(t *testing.T) {
	for _, c := range []struct {
		name     string
		code     string
		size     int // 0: len(code); -1: unknown
		needs    siteNeeds
		off      uint64
		emulated bool
		args     []x86asm.Reg // where arguments 1-3 are at the site; nil: not checked
	}{
		// glibc free, zlib inflateEnd: test %rdi,%rdi; je; push %rbx
		{"test then je", "4885ff 747b 53 c3", 0, needFree, 3, true, nil},
		{"test then je rel32", "4885ff 0f84ff000000 55 c3", 0, needFree, 3, true, nil},
		{"emulated entry stays", "4154 55 53 c3", 0, needMalloc, 0, true, nil},
		// valloc: cmpb $0,x(%rip); push %rbx: the push is the site even
		// with a return probe (the probe runs before it).
		{"push after compare, return probe", "803d3102000000 53 4889fb c3", 0, needMalloc, 7, true, nil},
		// mov %rsi,%rdi clobbers the argument free_enter reads.
		{"argument clobbered", "4889f7 7402 c3c3", 0, needFree, 0, false, nil},
		{"other register written", "4889f0 7402 c3c3", 0, needFree, 3, true, nil},
		{"partial write of the argument", "4088f7 7402 c3c3", 0, needFree, 0, false, nil},
		// reallocarray: mov %rsi,%rax; mul %rdx writes rdx:rax.
		{"one-operand mul", "4889f0 48f7e2 4889c6 7005 c3", 0, needMalloc, 0, false, nil},
		{"two-operand imul", "480fafc6 7402 c3c3", 0, needMalloc, 4, true, nil},
		// deflateInit_: sub $8,%rsp moves the stack pointer.
		{"stack pointer moved", "4883ec08 51 c3", 0, needMalloc, 0, false, nil},
		{"stack pointer moved, entry-only", "4883ec08 51 c3", 0, needFree, 0, false, nil},
		{"lea into rsp", "488d6424f8 53 c3", 0, needFree, 0, false, nil},
		{"memory written", "48897c24f8 53 c3", 0, needFree, 0, false, nil},
		// inflateInit_: argument shuffling, then a tail jump: the jump is
		// the site, never anything past it.
		{"jump is the site", "89d1 4889f2 be0f000000 e981710000 90", 0, needFree, 10, true, nil},
		{"never past a jump", "e900000000 53", 0, needFree, 0, true, nil},
		{"indirect jump ends the walk", "31c0 ffe0 53", 0, needFree, 0, false, nil},
		{"ret ends the walk", "31c0 c3 53", 0, needFree, 0, false, nil},
		{"call is the site", "31c0 e800000000 c3", 0, needFree, 2, true, nil},
		{"endbr64 skipped", "f30f1efa 55 4889e5 c3", 0, needMalloc, 4, true, nil},
		{"endbr64, test, je", "f30f1efa 4885ff 7402 c3c3", 0, needFree, 7, true, nil},
		{"endbr64 alone", "f30f1efa 4883ec08 c3", 0, needFree, 0, false, nil},
		{"kernel nop5 at entry", "0f1f440000 53 c3", 0, needFree, 0, true, nil},
		{"other nops walked past", "660f1f840000000000 53 c3", 0, needFree, 9, true, nil},
		{"xchg r8d,eax is no nop", "4190 53 c3", 0, siteNeeds{reads: regRSP | args(5)}, 0, false, nil},
		{"xchg r8d,eax writes only r8 and rax", "4190 53 c3", 0, needFree, 2, true, nil},
		{"push imm is single-stepped", "4885ff 6a01 c3", 0, needFree, 0, false, nil},
		{"push with REX.W is single-stepped", "4885ff 4853 c3", 0, needFree, 0, false, nil},
		// A jump inside the function lands on the je: a probe there would
		// run again.
		{"site is a jump target", "4885ff 7403 90 ebfb c3", 0, needFree, 0, false, nil},
		{"jump target before the site", "4885c0 4885c9 7403 90 ebf8 c3", 0, needFree, 0, false, nil},
		{"jump target after the site", "4885ff 7401 90 c3", 0, needFree, 3, true, nil},
		{"site outside the function", "4885ff 7402 c3c3", 3, needFree, 0, false, nil},
		{"size unknown", "4885ff 7402 c3c3", -1, needFree, 0, false, nil},
		{"undecodable body", "4885ff 7402 c3 0f0b 0f", 0, needFree, 0, false, nil},
		{"trailing padding", "4885ff 7402 c3c3 cccccc", 0, needFree, 3, true, nil},
		{"lock prefix", "f0480fc138 7402 c3", 0, needFree, 0, false, nil},
		{"pair argument 4", "4889f7 4885c9 7402 c3c3", 0, siteNeeds{reads: regRSP | args(4)}, 6, true, nil},
		{"pair argument 4 clobbered", "89d1 7402 c3c3", 0, siteNeeds{reads: regRSP | args(4)}, 0, false, nil},
		{"empty", "", 0, needFree, 0, false, nil},
		// mimalloc 2.0.9 malloc: mov 0x..(%rip),%rax; mov %rdi,%rsi;
		// mov %fs:(%rax),%rdi; cmp $0x400,%rsi; ja: the size is in %rsi.
		{"argument copied, then overwritten", "488b0549b40000 4889fe 64488b38 4881fe00040000 7702 c3c3", 0, followMalloc, 21, true,
			[]x86asm.Reg{x86asm.RSI, 0, x86asm.RDX}},
		{"argument overwritten, not followed", "488b0549b40000 4889fe 64488b38 4881fe00040000 7702 c3c3", 0, needMalloc, 0, false, nil},
		// mimalloc realloc: mov %rsi,%rdx; mov %rdi,%rsi; ...; mov %rax,%rdi; jmp.
		{"arguments shuffled to a tail jump", "488b0549a90000 4889f2 4889fe 64488b00 4889c7 e9f74effff 90", 0, followRealloc, 20, true,
			[]x86asm.Reg{x86asm.RSI, x86asm.RDX, 0}},
		{"argument still in its own register", "4889fb 7402 c3c3", 0, followMalloc, 3, true,
			[]x86asm.Reg{x86asm.RDI, x86asm.RSI, x86asm.RDX}},
		{"every copy overwritten", "4889fe 31ff 31f6 7402 c3c3", 0, followMalloc, 0, false, nil},
		{"copy of a copy", "4889fe 4889f3 31ff 31f6 7402 c3c3", 0, followMalloc, 10, true,
			[]x86asm.Reg{x86asm.RBX, 0, x86asm.RDX}},
		{"32-bit copy is no copy", "89fe 31ff 7402 c3c3", 0, followMalloc, 0, false, nil},
		{"xchg swaps", "4887fe 7402 c3c3", 0, followRealloc, 3, true,
			[]x86asm.Reg{x86asm.RSI, x86asm.RDI, x86asm.RDX}},
		{"xchg, then the copy overwritten", "4887fe 31f6 7402 c3c3", 0, followMalloc, 0, false, nil},
		{"an argument not read may go", "31f6 31d2 7402 c3c3", 0, followMalloc, 4, true,
			[]x86asm.Reg{x86asm.RDI, 0, 0}},
		{"stack pointer still fixed", "4889fb 4883ec08 53 c3", 0, followMalloc, 0, false, nil},
		{"argument 4 is not followed", "4889ca 31c9 7402 c3c3", 0, siteNeeds{reads: regRSP | args(4), follow: true}, 0, false, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := code(t, c.code)
			size := uint64(len(b))
			switch {
			case c.size < 0:
				size = 0
			case c.size > 0:
				size = uint64(c.size)
			}
			s := selectSite(b, size, c.needs)
			if s.Off != c.off || s.Emulated != c.emulated {
				t.Errorf("site %v, want +%d emulated=%v", s, c.off, c.emulated)
			}
			if c.args != nil && !slices.Equal(s.Args[:], c.args) {
				t.Errorf("site %v: arguments in %v, want %v", s, s.Args, c.args)
			}
		})
	}
}

func TestEmulated(t *testing.T) {
	for _, c := range []struct {
		code string
		want bool
	}{
		{"55", true}, {"57", true}, {"4154", true}, {"4157", true},
		{"4855", false}, {"6a01", false}, {"ff37", false},
		{"74fe", true}, {"0f8400000000", true}, {"eb00", true}, {"e900000000", true},
		{"e800000000", true}, {"f2e900000000", true}, {"66e90000", false},
		{"3ee900000000", false}, {"ffe0", false}, {"c3", false},
		{"90", true}, {"6690", true}, {"0f1f00", true}, {"0f1f4000", true}, {"0f1f440000", true},
		{"660f1f440000", true}, {"0f1f8000000000", true}, {"0f1f840000000000", true},
		{"660f1f840000000000", false}, {"4190", false}, {"f390", false},
		{"f30f1efa", false}, {"4885ff", false},
	} {
		if got := emulated(code(t, c.code)); got != c.want {
			t.Errorf("emulated(%s) = %v, want %v", c.code, got, c.want)
		}
	}
}

func TestSpecNeeds(t *testing.T) {
	for _, c := range []struct {
		p    Spec
		want siteNeeds
	}{
		{Spec{Symbol: "free"}, siteNeeds{reads: regRSP | args(1)}},
		{Spec{Symbol: "malloc", Ret: true}, siteNeeds{reads: regRSP | args(1), ret: true}},
		{Spec{Symbol: "posix_memalign", Ret: true}, siteNeeds{reads: regRSP | args(1, 3), ret: true}},
		{Spec{Symbol: "memalign", Ret: true}, siteNeeds{reads: regRSP | args(2), ret: true}},
		{Spec{Symbol: "inflateEnd"}, siteNeeds{reads: regRSP | args(1)}},
		{Spec{Symbol: "fclose", Cookie: kernel.PairCookie{Kind: kernel.KindUser, Arg: 1}.Encode()}, siteNeeds{reads: regRSP | args(1)}},
		{Spec{Symbol: "fopen", Ret: true, Cookie: kernel.PairCookie{Kind: kernel.KindUser, Op: kernel.OpRetPtr}.Encode()}, siteNeeds{reads: regRSP, ret: true}},
		{Spec{Symbol: "sqlite3_open", Ret: true, Cookie: kernel.PairCookie{Kind: kernel.KindUser + 2, Op: kernel.OpOutPtr, Arg: 2}.Encode()}, siteNeeds{reads: regRSP | args(2), ret: true}},
		// A pair on a function the built-in table names reads its cookie's argument too.
		{Spec{Symbol: "free", Cookie: kernel.PairCookie{Kind: kernel.KindUser + 1, Arg: 6}.Encode()}, siteNeeds{reads: regRSP | args(1, 6)}},
		// A pair's size argument (bits 24-27).
		{Spec{Symbol: "mmap", Ret: true, Cookie: kernel.PairCookie{Kind: kernel.KindUser + 3, Op: kernel.OpRetPtr, SizeArg: 2}.Encode()}, siteNeeds{reads: regRSP | args(2), ret: true}},
		// zlib's init programs read the arguments the bytes are computed from.
		{Spec{Symbol: "inflateInit2_", Prog: kernel.ZlibInflateInitEnter, Ret: true, Cookie: kernel.ZlibCookie{State: 7160, Init: kernel.ZinitInflate2}.Encode()}, siteNeeds{reads: regRSP | args(1, 2), ret: true}},
		{Spec{Symbol: "deflateInit2_", Prog: kernel.ZlibDeflateInitEnter, Ret: true, Cookie: kernel.ZlibCookie{State: 5952, Init: kernel.ZinitDeflate2}.Encode()}, siteNeeds{reads: regRSP | args(1, 2, 3, 4, 5), ret: true}},
		{Spec{Symbol: "unknown"}, siteNeeds{reads: regRSP | args(1, 2, 3, 4, 5, 6)}},
	} {
		if got := specNeeds(c.p); got != c.want {
			t.Errorf("specNeeds(%+v) = %+v, want %+v", c.p, got, c.want)
		}
	}
}

// TestProbeSitesSystemLibraries checks the sites in this machine's libc,
// libz and libbz2: free and the release functions past their
// "test %rdi,%rdi", and for every site that each instruction before it
// decodes to one the walk may pass.
func TestProbeSitesSystemLibraries(t *testing.T) {
	cache := symbolize.NewCache()
	defer cache.Close()
	for _, lib := range []struct {
		path string
		want map[string]int // -1: any emulated site
	}{
		{"/lib/x86_64-linux-gnu/libc.so.6", map[string]int{
			"free": 3, "malloc": -1, "calloc": -1, "realloc": -1, "posix_memalign": -1,
			"aligned_alloc": -1, "memalign": -1, "valloc": -1, "pvalloc": -1,
		}},
		{"/lib/x86_64-linux-gnu/libz.so.1", map[string]int{
			"inflateEnd": 3, "deflateEnd": 3, "inflateBackEnd": 3,
			"inflateInit2_": -1, "deflateInit2_": -1, "inflate": -1,
		}},
		{"/lib/x86_64-linux-gnu/libbz2.so.1.0", map[string]int{
			"BZ2_bzCompressEnd": 3, "BZ2_bzDecompressEnd": 3, "BZ2_bzCompressInit": -1,
		}},
	} {
		if _, err := os.Stat(lib.path); err != nil {
			t.Logf("%s: %v", lib.path, err)
			continue
		}
		obj, err := cache.Object(lib.path)
		if err != nil {
			t.Fatal(err)
		}
		for fn, want := range lib.want {
			vaddr, ok := obj.Lookup(fn)
			if !ok {
				t.Errorf("%s: no %s", lib.path, fn)
				continue
			}
			off, err := FileOffset(lib.path, vaddr)
			if err != nil {
				t.Fatal(err)
			}
			release := fn == "free" || fn == "inflate" || strings.HasSuffix(fn, "End")
			p := Spec{Symbol: fn, Ret: !release}
			if strings.HasPrefix(fn, "BZ2_") { // a declared pair: the stream is argument 1
				p.Cookie = kernel.PairCookie{Kind: kernel.KindUser, Op: kernel.OpArgHandle, Arg: 1}.Encode()
			}
			s := findSite(lib.path, vaddr, off, specNeeds(p))
			t.Logf("%s %s: %v", lib.path, fn, s)
			if !s.Emulated || want >= 0 && s.Off != uint64(want) {
				t.Errorf("%s %s: site %v, want +%d emulated", lib.path, fn, s, want)
			}
			checkWalk(t, lib.path, off, s, specNeeds(p))
		}
	}
}

// checkWalk decodes the instructions before a site again and checks none
// writes what the probe reads or transfers control.
func checkWalk(t *testing.T, path string, off uint64, s Site, n siteNeeds) {
	t.Helper()
	b, err := readCode(path, off, int(s.Off)+16)
	if err != nil {
		t.Fatal(err)
	}
	for pc := 0; pc < int(s.Off); {
		if endbr(b[pc:]) > 0 {
			pc += 4
			continue
		}
		inst, err := x86asm.Decode(b[pc:], 64)
		if err != nil {
			t.Fatalf("%s+%d: %v", path, pc, err)
		}
		w, ok := writes(inst)
		if !ok || w&(n.reads|regRSP) != 0 || emulated(b[pc:pc+inst.Len]) {
			t.Errorf("%s+%d: walked past %v", path, pc, inst)
		}
		pc += inst.Len
	}
}

// FuzzSelectSite: on any bytes the walk never panics, never leaves the
// function and only ends on an emulated instruction or the entry, where
// every argument it follows (bit 16 of reads) is in some register.
func FuzzSelectSite(f *testing.F) {
	f.Add(code(f, "4885ff747b53c3"), uint16(7), uint32(regRSP|args(1)), false)
	f.Add(code(f, "f30f1efa554889e5c3"), uint16(9), uint32(regRSP), true)
	f.Add(code(f, "89d14889f2be0f000000e98171000090"), uint16(16), uint32(args(1)), false)
	f.Add(code(f, "488b0549a900004889f24889fe64488b004889c7e9f74effff90"), uint16(26), uint32(regRSP|args(1, 2))|1<<16, true)
	f.Add([]byte{}, uint16(0), uint32(0), false)
	f.Fuzz(func(t *testing.T, b []byte, size uint16, reads uint32, ret bool) {
		needs := siteNeeds{reads: regSet(reads & 0xffff), ret: ret, follow: reads&(1<<16) != 0}
		s := selectSite(b, uint64(size), needs)
		for n := 1; n <= followArgs; n++ {
			if needs.reads&argRegs[n] != 0 && s.Args[n-1] == 0 {
				t.Fatalf("site %v: argument %d read, in no register", s, n)
			}
		}
		if s.Off == 0 {
			return
		}
		limit := min(uint64(size), uint64(len(b)))
		if s.Off >= limit || !s.Emulated {
			t.Fatalf("site %v in %d bytes (size %d)", s, len(b), size)
		}
		inst, err := decode(b[s.Off:limit])
		if err != nil || s.Off+uint64(inst.Len) > limit || !emulated(b[s.Off:s.Off+uint64(inst.Len)]) {
			t.Fatalf("site %v: instruction %v (%v) past the function's %d bytes", s, inst, err, limit)
		}
	})
}

// TestAllocCookie: a site's argument registers become the cookie's, an
// argument no register holds its own; every general register but %rsp
// has a code of its own.
func TestAllocCookie(t *testing.T) {
	s := Site{Args: [followArgs]x86asm.Reg{x86asm.RSI, x86asm.RDX, 0}}
	want := kernel.AllocCookie{Fn: kernel.FnRealloc, Reg: [3]uint32{kernel.ArgRegSI, kernel.ArgRegDX, kernel.ArgRegDX}}
	if got := kernel.DecodeAllocCookie(allocCookie(kernel.FnRealloc, s)); got != want {
		t.Errorf("cookie of %v decodes to %+v, want %+v", s, got, want)
	}
	codes := map[uint32]x86asm.Reg{}
	for _, f := range regFamilies {
		r := f[len(f)-1]
		c, ok := argRegCodes[r]
		if r == x86asm.RSP {
			if ok {
				t.Errorf("%%rsp has code %d", c)
			}
			continue
		}
		if other, dup := codes[c]; !ok || dup {
			t.Errorf("%v: code %d (%v), also %v", r, c, ok, other)
		}
		codes[c] = r
	}
}
