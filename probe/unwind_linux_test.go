//go:build linux && amd64

package probe

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/testutil"
)

// hasFrame reports whether fn is one of the stack's frames.
func hasFrame(s analyze.Site, fn string) bool {
	for _, f := range s.Stack.Frames {
		if f.Function == fn {
			return true
		}
	}
	return false
}

// A leak inside a shared library built without frame pointers names the
// application's function that called into the library.
func TestUnwindThroughLibraryWithoutFramePointers(t *testing.T) {
	testutil.RequireBPF(t)
	dir := t.TempDir()
	src := filepath.Join("..", "examples", "c")
	for _, args := range [][]string{
		{"-O2", "-g", "-shared", "-fPIC", "-o", filepath.Join(dir, "libpool.so"), filepath.Join(src, "pool.c")},
		{"-O2", "-g", "-o", filepath.Join(dir, "resources"), filepath.Join(src, "resources.c"),
			"-L" + dir, "-Wl,-rpath," + dir, "-lpool", "-lbz2", "-lssl", "-lcrypto"},
	} {
		if b, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
			t.Fatalf("gcc: %v\n%s", err, b)
		}
	}
	c, _ := launch(t, filepath.Join(dir, "resources"))
	var live, sites uint64
	for _, s := range c.Sites {
		f := s.Stack.Frames
		if len(f) < 2 || f[0].Function != "pool_get" || !hasFrame(s, "borrow_leaky") {
			continue
		}
		sites++
		live += s.LiveCount
		if f[1].Function != "borrow_leaky" || s.Stack.Truncated != "" {
			t.Errorf("stack %v (truncated %q), want pool_get then borrow_leaky, complete", functions(s), s.Stack.Truncated)
		}
	}
	if live != 4 || sites != 1 {
		t.Errorf("pool_get from borrow_leaky: %d blocks in %d sites, want 4 in 1", live, sites)
	}
}

// zlib allocates a stream's window inside inflate(), deep in libz (no frame
// pointers). For streams made before attaching, those blocks are plain
// mallocs: their stacks unwind through libz to the caller of inflate().
func TestUnwindZlibWindowToInflateCaller(t *testing.T) {
	testutil.RequireBPF(t)
	bin := filepath.Join(t.TempDir(), "zwindow")
	if b, err := exec.Command("gcc", "-O2", "-g", "-o", bin, filepath.Join("..", "examples", "c", "zwindow.c"), "-lz").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, b)
	}
	gate := filepath.Join(t.TempDir(), "go")
	cmd := startExample(t, bin, "--wait-file", gate, "--hold", "30000")
	tr, err := Attach(cmd.Process.Pid, Options{Warnf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		p, err := tr.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if p.LiveBytes >= 8*32768 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	c, err := tr.Stop()
	if err != nil {
		t.Fatal(err)
	}
	var live, bytes uint64
	for _, s := range c.Sites {
		if s.Kind != analyze.KindMalloc || !hasFrame(s, "read_first_record") {
			continue
		}
		live += s.LiveCount
		bytes += s.LiveBytes
		if !strings.Contains(s.Stack.Frames[0].Module, "libz.so") || !hasFrame(s, "inflate") || !hasFrame(s, "main") {
			t.Errorf("window stack %v, want libz frames, inflate, read_first_record, main", functions(s))
		}
	}
	if live != 8 || bytes != 8*32768 {
		for _, s := range c.Sites {
			t.Logf("site %s %d live %d bytes %v %q", s.Kind, s.LiveCount, s.LiveBytes, functions(s), s.Stack.Truncated)
		}
		t.Errorf("windows from read_first_record: %d blocks, %d bytes; want 8, %d", live, bytes, 8*32768)
	}
}
