//go:build linux && amd64

package probe

import (
	"os"
	"testing"

	"github.com/leakscope/leakscope/internal/testutil"
	"github.com/leakscope/leakscope/probe/symbolize"
	"github.com/leakscope/leakscope/probe/uprobe"
)

// Each allocator's library, as Debian 12 packages it, with where
// alloc_session (uprobe.SessionSite) and free_enter probe each function, pinned
// to the instructions there (objdump -d): every site emulated but glibc's
// reallocarray, whose mov %rsi,%rax; mul %rdx destroys its third argument
// before anything emulated.
var allocatorLibraries = []struct {
	name, path, pkg string
	sites           map[string]string
}{
	{"glibc", "/lib/x86_64-linux-gnu/libc.so.6", "libc6", map[string]string{
		"malloc": "+0 push %r12 (emulated)", "calloc": "+0 push %r13 (emulated)", "realloc": "+0 push %r15 (emulated)",
		"reallocarray": "+0 mov %rsi,%rax (single-stepped)", "posix_memalign": "+7 push %r12 (emulated)",
		"aligned_alloc": "+7 je .+0x7 (emulated)", "memalign": "+7 je .+0x7 (emulated)",
		"valloc": "+7 push %rbx (emulated)", "pvalloc": "+7 push %rbx (emulated)", "free": "+3 je .+0xbf (emulated)",
	}},
	{"jemalloc", "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", "libjemalloc2", map[string]string{
		"malloc": "+7 ja .+0x93 (emulated)", "calloc": "+0 push %r15 (emulated)", "realloc": "+0 push %r15 (emulated)",
		"posix_memalign": "+0 push %r15 (emulated)", "aligned_alloc": "+0 push %r15 (emulated)",
		"memalign": "+0 push %r15 (emulated)", "valloc": "+0 push %r15 (emulated)", "free": "+48 jne .+0x8a (emulated)",
	}},
	{"tcmalloc", "/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4", "libgoogle-perftools4", map[string]string{
		"malloc": "+13 jne .+0x8e (emulated)", "calloc": "+12 jne .+0x17e (emulated)", "realloc": "+0 push %r15 (emulated)",
		"posix_memalign": "+11 jne .+0x2b (emulated)", "aligned_alloc": "+10 ja .+0xf8 (emulated)",
		"memalign": "+10 ja .+0xf8 (emulated)", "valloc": "+0 push %rbp (emulated)", "pvalloc": "+0 push %rbx (emulated)",
		"free": "+10 jne .+0x90 (emulated)",
	}},
	// mimalloc's malloc, calloc and realloc copy their arguments before
	// anything emulated: the sites are past the copies.
	{"mimalloc", "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2", "libmimalloc2.0", map[string]string{
		"malloc": "+21 ja .+0x29 (emulated; arg1 in %rsi)", "calloc": "+18 je .+0x8 (emulated; arg1 in %rax)",
		"realloc": "+20 jmpq .-0xb109 (emulated; arg1 in %rsi; arg2 in %rdx)", "reallocarray": "+0 jmpq .-0xa3a5 (emulated)",
		"posix_memalign": "+0 jmpq .-0xa395 (emulated)", "aligned_alloc": "+0 jmpq .-0xa615 (emulated)",
		"memalign": "+0 jmpq .-0xa505 (emulated)", "valloc": "+0 jmpq .-0xa785 (emulated)",
		"pvalloc": "+0 jmpq .-0xa455 (emulated)", "free": "+6 je .+0x5d (emulated)",
	}},
	{"musl", "/lib/x86_64-linux-musl/libc.so", "musl", map[string]string{
		"malloc": "+0 jmpq .+0x196b (emulated)", "calloc": "+0 push %r12 (emulated)", "realloc": "+0 jmpq .-0x505 (emulated)",
		"reallocarray": "+6 je .+0x8 (emulated)", "posix_memalign": "+0 push %rbx (emulated)",
		"aligned_alloc": "+0 push %rbp (emulated)", "memalign": "+0 jmpq .-0x14f45 (emulated)",
		"valloc": "+8 jmpq .-0xb65d (emulated; arg1 in %rsi)", "free": "+0 jmpq .+0xabb (emulated)",
	}},
}

// TestProbeSitesAllocators checks the site of every probed function of
// each allocator's library: exactly the instruction it is pinned to, and
// no function the library has but the table does not name.
func TestProbeSitesAllocators(t *testing.T) {
	cache := symbolize.NewCache()
	defer cache.Close()
	for _, lib := range allocatorLibraries {
		t.Run(lib.name, func(t *testing.T) {
			if _, err := os.Stat(lib.path); err != nil {
				testutil.SkipOrFail(t, lib.path+" not found (apt-get install "+lib.pkg+")")
			}
			obj, err := cache.Object(lib.path)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range mallocFamily {
				vaddr, ok := obj.Lookup(p.Symbol)
				want, pinned := lib.sites[p.Symbol]
				if !ok || !pinned {
					if ok != pinned {
						t.Errorf("%s: has %s %v, pinned %v", lib.path, p.Symbol, ok, pinned)
					}
					continue
				}
				off, err := uprobe.FileOffset(lib.path, vaddr)
				if err != nil {
					t.Fatal(err)
				}
				if s := mallocSite(lib.path, vaddr, off, p); s.String() != want {
					t.Errorf("%s %s: site %v, want %s", lib.path, p.Symbol, s, want)
				}
			}
		})
	}
}
