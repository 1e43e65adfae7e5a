//go:build linux && amd64

package probe

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/testutil"
	"github.com/leakscope/leakscope/probe/track"
)

// buildJNIZip builds examples/c/jnizip.c as a libzip.so that bundles zlib
// the way some JDK builds do (static, hidden, stripped: no zlib symbol
// left to probe) and jnizipuser.c against it.
func buildJNIZip(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join("..", "examples", "c")
	lib := filepath.Join(dir, "libzip.so")
	for _, cmd := range [][]string{
		{"gcc", "-O2", "-g", "-fno-omit-frame-pointer", "-shared", "-fPIC", "-o", lib, filepath.Join(src, "jnizip.c"),
			"-Wl,-Bstatic", "-lz", "-Wl,-Bdynamic", "-Wl,--exclude-libs,ALL"},
		{"strip", "--strip-all", lib},
		{"gcc", "-O2", "-g", "-fno-omit-frame-pointer", "-o", filepath.Join(dir, "jnizipuser"), filepath.Join(src, "jnizipuser.c"),
			"-L" + dir, "-l:libzip.so", "-Wl,-rpath," + dir},
	} {
		if b, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(cmd, " "), err, b)
		}
	}
	return filepath.Join(dir, "jnizipuser")
}

// A libzip.so with zlib bundled and hidden: preset jvm counts its streams
// at java.util.zip's JNI entry points instead, with the ground truth of
// examples/c/jnizipuser.c.
// jniZip builds jnizipuser (buildJNIZip) and returns it with the jvm
// preset's pairs, whose zlib.inflate and zlib.deflate stand in for zlib
// in a libzip.so that bundles it.
func jniZip(t *testing.T) (string, []track.Pair) {
	testutil.RequireBPF(t)
	bin := buildJNIZip(t)
	pairs, err := track.PresetPairs("jvm")
	if err != nil {
		t.Fatal(err)
	}
	return bin, pairs
}

func TestJNIZlibFallback(t *testing.T) {
	bin, pairs := jniZip(t)
	for _, malloc := range []string{MallocOn, MallocOff} {
		t.Run("malloc-"+malloc, func(t *testing.T) { testJNIZlibFallback(t, bin, pairs, malloc) })
	}
}

// With the malloc family traced, a stream's bytes are the mallocs inside
// init, and the window zlib mallocs inside inflate() is a malloc row of
// its own. Without it (the default for a JVM) the bytes are computed: the
// JNI z_stream and zlib's state, the window read from the state once zlib
// made it, as for the system zlib.
func testJNIZlibFallback(t *testing.T, bin string, pairs []track.Pair, malloc string) {
	tr, _ := launchWait(t, Options{Track: pairs, Malloc: malloc}, bin)
	c, err := tr.Stop()
	if err != nil {
		t.Fatal(err)
	}
	checkNoLoss(t, c)
	if c.Probes == nil || !slices.Contains(c.Probes.Kinds, "zlib.inflate (JNI fallback in libzip.so)") {
		t.Errorf("probes %+v do not say the JNI fallback stood in for zlib in libzip.so", c.Probes)
	}
	type row struct {
		kind         analyze.Kind
		fn           string
		live, allocs uint64
	}
	got := map[row]bool{}
	for _, s := range c.Sites {
		if s.Kind != analyze.KindZlibInflate && s.Kind != analyze.KindZlibDeflate {
			continue
		}
		fns := functions(s)
		// Frame 0 is the caller of the JNI entry point.
		got[row{s.Kind, fns[0], s.LiveCount, s.Allocs}] = true
		t.Logf("%s in %s: %d live, %d bytes, %d allocs", s.Kind, fns[0], s.LiveCount, s.LiveBytes, s.Allocs)
		// The stream's bytes: the z_stream libzip callocs (112 B) and
		// zlib 1.2.13's state (inflate 7160 B; deflate 268,096 B); the 4
		// windows of inflate_leaky's streams only if computed.
		per := map[analyze.Kind]uint64{analyze.KindZlibInflate: 112 + 7160, analyze.KindZlibDeflate: 112 + 268096}[s.Kind]
		want := s.LiveCount * per
		if malloc == MallocOff && fns[0] == "inflate_leaky" {
			want += 4 * 32768
		}
		if s.LiveBytes != want {
			t.Errorf("%s row in %s: %d bytes for %d streams, want %d", s.Kind, fns[0], s.LiveBytes, s.LiveCount, want)
		}
	}
	// Malloc rows of 32 KiB blocks: the windows. (Their stacks end in
	// the bundled zlib, built without frame pointers.)
	var windows uint64
	for _, s := range c.Sites {
		if s.Kind == analyze.KindMalloc && s.LiveCount > 0 && s.LiveBytes == s.LiveCount*32768 {
			windows += s.LiveCount
		}
	}
	if malloc == MallocOn && windows != 4 {
		t.Errorf("%d windows in malloc rows, want 4", windows)
	}
	if malloc == MallocOff && (c.Probes == nil || !strings.Contains(c.Probes.ZlibBytes, "libzip.so: zlib 1.2.13")) {
		t.Errorf("probes %+v do not name the layout of libzip.so's zlib", c.Probes)
	}
	for _, want := range []row{
		{analyze.KindZlibInflate, "inflate_leaky", 7, 7},
		{analyze.KindZlibDeflate, "deflate_leaky", 3, 3},
		{analyze.KindZlibInflate, "streams_closed", 0, 5},
		{analyze.KindZlibDeflate, "streams_closed", 0, 5},
	} {
		if !got[want] {
			t.Errorf("no row %+v; rows: %v", want, got)
		}
	}
	if len(got) != 4 {
		t.Errorf("%d zlib rows, want 4: %v", len(got), got)
	}
}

// Stopped while the target lives, with malloc not traced, the windows of
// the fallback's streams are read from the target's memory by user space
// (addWindowsLocked), under the fallback's own kind: the kernel counts
// them only as the target exits.
func TestJNIZlibFallbackWindowsWhileAlive(t *testing.T) {
	bin, pairs := jniZip(t)
	stderr := &syncBuffer{}
	tr, proc, err := Launch([]string{bin, "--hold"}, Stdio{Out: os.Stdout, Err: stderr}, Options{Track: pairs, Malloc: MallocOff, Warnf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		proc.Signal(syscall.SIGKILL)
		<-proc.Done()
	}()
	waitFor(t, tr, stderr, "jnizipuser: leaked")
	c, err := tr.Stop()
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-proc.Done():
		t.Fatalf("the target exited before the capture ended; stderr:\n%s", stderr.String())
	default:
	}
	checkNoLoss(t, c)
	found := false
	for _, s := range c.Sites {
		if s.Kind != analyze.KindZlibInflate || functions(s)[0] != "inflate_leaky" {
			continue
		}
		found = true
		// 7 streams of 112 + 7160 B, and the 4 windows of 32 KiB.
		const want = 7*(112+7160) + 4*32768
		var live uint64
		for _, a := range s.Live {
			live += a.Size
		}
		if s.LiveCount != 7 || s.LiveBytes != want || live != want {
			t.Errorf("inflate_leaky: %d streams, %d bytes (live allocations %d B); want 7, %d", s.LiveCount, s.LiveBytes, live, want)
		}
	}
	if !found {
		t.Errorf("no zlib.inflate row in inflate_leaky")
	}
}

// Debian's libzip.so loads the system libz.so.1, whose zlib is probed: the
// fallback must stay off there, or every stream would count twice.
func TestJNIZlibFallbackOffWithSharedZlib(t *testing.T) {
	java, err := filepath.EvalSymlinks(testutil.RequireJava(t))
	if err != nil {
		t.Fatal(err)
	}
	lib := filepath.Join(filepath.Dir(filepath.Dir(java)), "lib", "libzip.so")
	if !needsZlib(lib) {
		t.Errorf("%s: needsZlib = false; it loads libz.so.1", lib)
	}
}
