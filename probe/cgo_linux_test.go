//go:build linux && amd64

package probe

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/testutil"
	"github.com/leakscope/leakscope/probe/symbolize"
	"github.com/leakscope/leakscope/probe/target"
)

// manyCFuncs is how many C functions cgoManySource links into the Go
// binary: enough that they outnumber its Go functions (~1,300 for this
// program), as SQLite's do in a program on go-sqlite3.
const manyCFuncs = 4000

// cgoManySource is a Go program with manyCFuncs C functions in a .c file
// of its package besides hold_buffer, the one that allocates. keepBuffers
// leaks -leak buffers through it, dropBuffers frees -drop more; both make
// the same cgo call, so only their Go frames tell them apart. (In the
// preamble, which cgo compiles several times, the functions take minutes
// to build; in a .c file, seconds. Functions with loops took gcc -O2
// ten times longer.)
func cgoManySource() (goSrc, cSrc string) {
	var b strings.Builder
	b.WriteString("#include <stdlib.h>\n#include <string.h>\n\n")
	for i := 0; i < manyCFuncs; i++ {
		fmt.Fprintf(&b, "int mix_%d(int a, int b) { return (a * %d) ^ (b + %d) ^ (a >> %d) ^ (b * %d); }\n", i, i+3, i*7, i%13+1, i%11+5)
	}
	b.WriteString(`
// noinline and noipa keep it a frame of its own that calls malloc
// directly; the memset keeps malloc from becoming a tail call.
__attribute__((noinline, noipa)) void *hold_buffer(size_t n)
{
	void *p = malloc(n);
	if (p != NULL)
		memset(p, 0x5a, n);
	return p;
}
`)
	return `package main

/*
#include <stdlib.h>
void *hold_buffer(size_t n);
*/
import "C"

import (
	"flag"
	"fmt"
	"os"
	"time"
	"unsafe"
)

var kept []unsafe.Pointer

//go:noinline
func keepBuffers(n int) {
	for i := 0; i < n; i++ {
		kept = append(kept, C.hold_buffer(2048))
	}
}

//go:noinline
func dropBuffers(n int) {
	for i := 0; i < n; i++ {
		C.free(C.hold_buffer(2048))
	}
}

func main() {
	leak := flag.Int("leak", 30, "buffers keepBuffers leaks")
	drop := flag.Int("drop", 70, "buffers dropBuffers frees")
	waitFile := flag.String("wait-file", "", "wait until this file exists before starting")
	hold := flag.Duration("hold", 0, "stay alive this long after the summary")
	flag.Parse()
	for *waitFile != "" {
		if _, err := os.Stat(*waitFile); err == nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	keepBuffers(*leak)
	dropBuffers(*drop)
	fmt.Fprintf(os.Stderr, "cgomany: leaked %d buffers of 2048 bytes in main.keepBuffers; freed %d\n", len(kept), *drop)
	time.Sleep(*hold)
}
`, b.String()
}

// buildCgoProgram writes files, a main package, into a module of its own
// named name and builds it with cgo and its default flags.
func buildCgoProgram(t *testing.T, name string, files map[string]string) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		testutil.SkipOrFail(t, "cgo programs need gcc: "+err.Error())
	}
	dir := t.TempDir()
	files["go.mod"] = "module " + name + "\n\ngo 1.24\n"
	for file, data := range files {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, name)
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=1")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", name, err, b)
	}
	return bin
}

// cgoCallbackSource is a Go program whose viaCallback calls C (run_cb),
// which calls back into Go (goCallback, through crosscall2), which leaks
// -leak buffers through C (alloc_in_cb). cgo's default flags: no frame
// pointers in the C code.
const cgoCallbackSource = `package main

/*
#include <stdlib.h>
#include <string.h>

extern void goCallback(int n);

__attribute__((noinline, noipa)) static void *alloc_in_cb(size_t n)
{
	void *p = malloc(n);
	if (p != NULL)
		memset(p, 0x5a, n);
	return p;
}

// The barrier after the call keeps it from becoming a tail call.
__attribute__((noinline, noipa)) static void run_cb(int n)
{
	goCallback(n);
	__asm__ volatile("" ::: "memory");
}
*/
import "C"

import (
	"flag"
	"fmt"
	"os"
	"time"
	"unsafe"
)

var kept []unsafe.Pointer

//export goCallback
func goCallback(n C.int) {
	for i := 0; i < int(n); i++ {
		kept = append(kept, C.alloc_in_cb(1024))
	}
}

//go:noinline
func viaCallback(n int) { C.run_cb(C.int(n)) }

func main() {
	leak := flag.Int("leak", 20, "buffers the callback leaks")
	waitFile := flag.String("wait-file", "", "wait until this file exists before starting")
	hold := flag.Duration("hold", 0, "stay alive this long after the summary")
	flag.Parse()
	for *waitFile != "" {
		if _, err := os.Stat(*waitFile); err == nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	viaCallback(*leak)
	fmt.Fprintf(os.Stderr, "cgocallback: leaked %d buffers of 1024 bytes in main.goCallback\n", len(kept))
	time.Sleep(*hold)
}
`

// A callback from C into Go: the walk crosses both cgo calls, the inner
// one at runtime.asmcgocall and the callback at crosscall2 (walked with
// the row unwind.EntryRow made for it), to the Go code that called C
// first.
func TestGoCgoCallback(t *testing.T) {
	testutil.RequireBPF(t)
	bin := buildCgoProgram(t, "cgocallback", map[string]string{"main.go": cgoCallbackSource})
	c := attachGo(t, bin)
	checkNoLoss(t, c)
	res := analyze.Rank(c, analyze.Options{})
	if len(res.Leaks) == 0 {
		t.Fatal("no leaks")
	}
	l := res.Leaks[0]
	fns := functions(*l.Site)
	stack := strings.Join(fns, ",")
	if l.Count != 20 || l.Bytes != 20*1024 || l.Site.Allocs != 20 || l.Site.Stack.Truncated != "" || fns[0] != "alloc_in_cb" ||
		!strings.Contains(stack, ",runtime.asmcgocall,runtime.cgocall,main._Cfunc_alloc_in_cb,main.goCallback,") ||
		!strings.Contains(stack, ",runtime.cgocallback,crosscall2,goCallback,run_cb,") ||
		!strings.HasSuffix(stack, ",runtime.asmcgocall,runtime.cgocall,main._Cfunc_run_cb,main.viaCallback,main.main,runtime.main,runtime.goexit") {
		t.Errorf("rank 1: %d blocks, %d bytes, %d allocs, truncated %q: %s; want 20 of 1024 bytes through the callback to main.viaCallback and runtime.goexit",
			l.Count, l.Bytes, l.Site.Allocs, l.Site.Stack.Truncated, stack)
	}
}

// A Go binary with thousands of C functions built with cgo's default
// flags (no frame pointers): its Go code is walked by frame pointers and
// its C code with its unwind rows, each by its own share of functions
// with frame pointers; one share of both would make the whole binary
// "mixed" and leave the Go code to rows it has none of. The stack runs
// from the C helper through runtime.asmcgocall to the Go function that
// leaked, and the path that frees is in no leak.
func TestGoManyCFunctions(t *testing.T) {
	testutil.RequireBPF(t)
	goSrc, cSrc := cgoManySource()
	bin := buildCgoProgram(t, "cgomany", map[string]string{"main.go": goSrc, "hash.c": cSrc})
	obj, err := symbolize.NewCache().Object(bin)
	if err != nil {
		t.Fatal(err)
	}
	share, funcs := obj.FramePointerShare()
	cshare, cfuncs := obj.CFramePointerShare()
	t.Logf("frame pointers: %.1f%% of %d functions; C code %.1f%% of %d", 100*share, funcs, 100*cshare, cfuncs)
	if cfuncs < manyCFuncs || symbolize.FramePointerClass(cshare, cfuncs) != target.FPNo {
		t.Errorf("C code: %d functions, class %s; want at least %d, no", cfuncs, symbolize.FramePointerClass(cshare, cfuncs), manyCFuncs)
	}

	c := attachGo(t, bin)
	checkNoLoss(t, c)
	res := analyze.Rank(c, analyze.Options{})
	if len(res.Leaks) == 0 {
		t.Fatal("no leaks")
	}
	l := res.Leaks[0]
	fns := functions(*l.Site)
	want := []string{"hold_buffer", "", "runtime.asmcgocall", "runtime.cgocall", "main._Cfunc_hold_buffer", "main.keepBuffers", "main.main", "runtime.main", "runtime.goexit"}
	if len(fns) != len(want) || !strings.HasSuffix(fns[1], "_Cfunc_hold_buffer") || l.Site.Stack.Truncated != "" {
		t.Fatalf("rank 1 stack %v (truncated %q), want %v", fns, l.Site.Stack.Truncated, want)
	}
	for i, w := range want {
		if w != "" && fns[i] != w {
			t.Errorf("frame %d is %s, want %s: %v", i, fns[i], w, fns)
		}
	}
	if l.Count != 30 || l.Bytes != 30*2048 || l.Site.Allocs != 30 || l.Site.Frees != 0 {
		t.Errorf("rank 1: %d blocks, %d bytes, %d allocs, %d frees; want 30, 61440, 30, 0", l.Count, l.Bytes, l.Site.Allocs, l.Site.Frees)
	}
	if want := "called through cgo by main.keepBuffers"; !contains(l.Reasons, want) {
		t.Errorf("rank 1 reasons %q, want %q", l.Reasons, want)
	}
	for _, other := range res.Leaks {
		if contains(functions(*other.Site), "main.dropBuffers") {
			t.Errorf("the freeing path is a leak: %v (%d blocks)", functions(*other.Site), other.Count)
		}
	}
}
