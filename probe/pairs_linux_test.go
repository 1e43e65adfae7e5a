//go:build linux && amd64

package probe

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/testutil"
	"github.com/leakscope/leakscope/probe/track"
)

// buildResources compiles examples/c/resources.c with its libpool.so.
func buildResources(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join("..", "examples", "c")
	for _, args := range [][]string{
		{"-O2", "-g", "-fno-omit-frame-pointer", "-shared", "-fPIC", "-o", filepath.Join(dir, "libpool.so"), filepath.Join(src, "pool.c")},
		{"-O2", "-g", "-fno-omit-frame-pointer", "-o", filepath.Join(dir, "resources"), filepath.Join(src, "resources.c"),
			"-L" + dir, "-Wl,-rpath," + dir, "-lpool", "-lbz2", "-lssl", "-lcrypto"},
	} {
		if b, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
			t.Fatalf("gcc: %v\n%s", err, b)
		}
	}
	return filepath.Join(dir, "resources")
}

// held sums, per kind, the live handles of sites whose first frame is fn.
func held(c *analyze.Capture, kind analyze.Kind, fn string) (count, allocs uint64) {
	for _, s := range c.Sites {
		if s.Kind == kind && len(s.Stack.Frames) > 0 && s.Stack.Frames[0].Function == fn {
			count += s.LiveCount
			allocs += s.Allocs
		}
	}
	return count, allocs
}

// Every preset and a user-declared pair (two acquire forms) on a real
// program, against the ground truth in examples/README.md.
func TestPairsAndPresets(t *testing.T) {
	testutil.RequireBPF(t)
	bin := buildResources(t)
	var pairs []track.Pair
	for _, spec := range []string{
		"preset:stdio,preset:dirent,preset:bzip2,preset:openssl",
		"pool.conn=libpool.so:pool_get/ret+pool_open/out1:pool_put/arg1",
	} {
		ps, err := track.Parse(spec)
		if err != nil {
			t.Fatal(err)
		}
		pairs = append(pairs, ps...)
	}
	tr, proc, err := Launch([]string{bin}, Stdio{}, Options{Track: pairs, Warnf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	<-proc.Done()
	c, err := tr.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if code := proc.ExitCode(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	checkNoLoss(t, c)
	for _, tc := range []struct {
		kind         analyze.Kind
		fn           string
		live, allocs uint64
	}{
		{"stdio.file", "open_config_leaky", 3, 3},
		// 10 fopen, and one freopen that releases its stream and
		// acquires the reopened one.
		{"stdio.file", "files_closed", 0, 11},
		{"dirent.dir", "scan_dir_leaky", 2, 2},
		{"dirent.dir", "dirs_closed", 0, 5},
		{"bzip2.compress", "bz_leaky", 1, 1},
		{"bzip2.compress", "bzip_streams", 0, 4},
		{"bzip2.decompress", "bzip_streams", 0, 2},
		{"openssl.cipher_ctx", "cipher_leaky", 2, 2},
		{"openssl.cipher_ctx", "ciphers", 0, 5},
		{"openssl.ssl", "ssl_leaky", 1, 1},
		{"openssl.ssl", "ssl_objects", 0, 3},
		{"pool.conn", "borrow_leaky", 4, 4},
		{"pool.conn", "open_leaky", 1, 1},
		{"pool.conn", "pool_returned", 0, 6},
	} {
		live, allocs := held(c, tc.kind, tc.fn)
		if live != tc.live || allocs != tc.allocs {
			t.Errorf("%s in %s: %d live of %d acquired, want %d of %d", tc.kind, tc.fn, live, allocs, tc.live, tc.allocs)
		}
	}
	// Bytes allocated inside the acquire call belong to the resource: a
	// pool connection is one 204-byte block, a FILE one 472-byte block.
	for _, s := range c.Sites {
		if s.Kind == "pool.conn" && s.LiveCount > 0 && s.LiveBytes != 204*s.LiveCount {
			t.Errorf("pool.conn site %v: %d bytes for %d handles, want 204 each", functions(s), s.LiveBytes, s.LiveCount)
		}
		if s.Kind == "stdio.file" && s.LiveCount > 0 && s.LiveBytes != 472*s.LiveCount {
			t.Errorf("stdio.file site %v: %d bytes for %d handles, want 472 each", functions(s), s.LiveBytes, s.LiveCount)
		}
	}
}

// A declared pair whose library the target never loads is named in the
// capture's warnings.
func TestPairLibraryNotLoaded(t *testing.T) {
	testutil.RequireBPF(t)
	bin := buildExample(t, "leaky", true)
	ps, err := track.Parse("pool.conn=libnotthere.so:pool_get:pool_put")
	if err != nil {
		t.Fatal(err)
	}
	tr, proc, err := Launch([]string{bin}, Stdio{}, Options{Track: ps})
	if err != nil {
		t.Fatal(err)
	}
	<-proc.Done()
	c, err := tr.Stop()
	if err != nil {
		t.Fatal(err)
	}
	want := "--track pool.conn: libnotthere.so is not loaded in the target (or lacks pool_get); nothing of that kind was traced"
	for _, w := range c.Warnings {
		if w == want {
			return
		}
	}
	t.Errorf("warnings %q, want %q", c.Warnings, want)
}
