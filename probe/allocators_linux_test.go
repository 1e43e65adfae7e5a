//go:build linux && amd64

package probe

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/testutil"
)

// TestAllocatorsProbedAtEmulatedSites traces the leaky and clean examples
// under each allocator of allocatorLibraries (preloaded; musl's by a
// musl-gcc build), probed where TestProbeSitesAllocators pins the sites:
// leaky's leaks are exact (blocks and bytes) under each, and nothing of
// clean's, which calls every probed function, is left outstanding.
func TestAllocatorsProbedAtEmulatedSites(t *testing.T) {
	testutil.RequireBPF(t)
	leaky, clean := buildExample(t, "leaky", true), buildExample(t, "clean", true)
	for _, lib := range allocatorLibraries {
		t.Run(lib.name, func(t *testing.T) {
			if _, err := os.Stat(lib.path); err != nil {
				testutil.SkipOrFail(t, lib.path+" not found (apt-get install "+lib.pkg+")")
			}
			leaky, clean := leaky, clean
			switch lib.name {
			case "glibc":
			case "musl":
				leaky = buildMusl(t, "leaky")
			default:
				t.Setenv("LD_PRELOAD", lib.path)
			}
			c, stderr := launch(t, leaky)
			checkNoLoss(t, c)
			// The allocator is mapped: its malloc, which the
			// program's calls reach first, was probed if the counts
			// are exact.
			if !mapped(c, lib.path) {
				t.Errorf("%s not among the target's objects", lib.path)
			}
			for _, w := range []struct {
				fn           string
				count, bytes uint64
			}{
				{"leak_request_buffer", 100, 409600},
				{"leak_small_tag", 25, 1200},
			} {
				if n, b, stacks := sumSites(c, w.fn); n != w.count || b != w.bytes {
					t.Errorf("%s: %d blocks, %d bytes (%v), want %d, %d\n%s", w.fn, n, b, stacks, w.count, w.bytes, stderr)
				}
			}
			if lib.name == "musl" {
				return // clean calls pvalloc, which musl does not have
			}
			argv := []string{clean}
			if _, ok := lib.sites["pvalloc"]; !ok {
				// glibc's pvalloc would hand the allocator's free a
				// block of glibc's.
				argv = append(argv, "--no-pvalloc")
			}
			c, _ = launch(t, argv...)
			checkClean(t, c, clean)
		})
	}
}

// buildMusl compiles examples/c/<name>.c with musl-gcc, dynamically linked
// against musl's libc.so.
func buildMusl(t *testing.T, name string) string {
	t.Helper()
	if _, err := exec.LookPath("musl-gcc"); err != nil {
		testutil.SkipOrFail(t, "musl-gcc not found (apt-get install musl-tools)")
	}
	out := filepath.Join(t.TempDir(), name+"-musl")
	src := filepath.Join("..", "examples", "c", name+".c")
	if b, err := exec.Command("musl-gcc", "-O2", "-g", "-pthread", "-fno-omit-frame-pointer", "-o", out, src).CombinedOutput(); err != nil {
		t.Fatalf("musl-gcc %s: %v\n%s", name, err, b)
	}
	return out
}

// mapped reports whether the object at path is among the capture's
// objects, links resolved.
func mapped(c *analyze.Capture, path string) bool {
	real := func(p string) string {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return r
		}
		return p
	}
	for _, o := range c.Objects {
		if real(o.Path) == real(path) {
			return true
		}
	}
	return false
}
