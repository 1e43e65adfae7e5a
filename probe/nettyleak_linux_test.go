//go:build linux && amd64

package probe

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/testutil"
	"github.com/leakscope/leakscope/probe/stacks"
)

// Ground truth of examples/java/NettyLeak.java with its defaults
// (examples/README.md): one direct arena of 16 MiB chunks (8 KiB pages,
// maxOrder 11); 12288 requests after the wait file, 64 every 50 ms, each
// taking a 64 KiB pooled buffer in handleRequests. Mode leak keeps every
// 4th buffer: 3072 buffers, 192 MiB, exactly 12 new chunks, one every 1024
// requests. Mode pool keeps 960 in flight: 4 chunks, allocated in the
// first 960 requests and reused after.
const (
	nettyChunkBytes  = 8192 << 11
	nettyLeakedBufs  = 3072
	nettyLeakChunks  = 12
	nettyPoolBufs    = 960
	nettyPoolChunks  = 4
	nettyBufferBytes = 65536
	nettyHandler     = "NettyLeak.handleRequests"
)

// Debian's libnetty-java (4.1.48): the two jars the example uses.
var nettyJars = []string{"/usr/share/java/netty-buffer.jar", "/usr/share/java/netty-common.jar"}

// Netty allocates its chunks with Unsafe.allocateMemory directly (no
// Cleaner) only when it may call DirectByteBuffer's private constructor:
// on JDK 9+ that takes these flags. Without them, each chunk is a
// ByteBuffer.allocateDirect, which ends in Unsafe.allocateMemory too.
var nettyNoCleanerFlags = []string{"-Dio.netty.tryReflectionSetAccessible=true", "--add-opens", "java.base/java.nio=ALL-UNNAMED"}

// nettySummary is the example's last line: what it kept, and the chunks
// its arena allocated and destroyed after the wait file.
var nettySummary = regexp.MustCompile(`NettyLeak: (leaked|pooled) (\d+) (?:in-flight )?buffers of (\d+) bytes in handleRequests .*; ` +
	`arena allocated (\d+) chunks of (\d+) bytes after the wait, destroyed (\d+);`)

// nettyTruth is what the example says it did after the wait file.
type nettyTruth struct {
	mode                     string // "leaked" or "pooled"
	buffers, bufferBytes     uint64 // buffers kept (leaked, or in flight)
	chunks, chunkBytes, gone uint64 // chunks the arena allocated, their size, chunks destroyed
	allocationPath, summary  string
}

// nettyClasses compiles the example against Debian's Netty jars; it skips
// (or fails in CI) without BPF, a JDK or libnetty-java, and returns java
// and the class path to run it with.
func nettyClasses(t *testing.T) (java, classpath string) {
	t.Helper()
	testutil.RequireBPF(t)
	java = testutil.RequireJava(t)
	for _, jar := range nettyJars {
		if _, err := os.Stat(jar); err != nil {
			testutil.SkipOrFail(t, "libnetty-java is not installed (apt-get install libnetty-java): "+err.Error())
		}
	}
	jars := strings.Join(nettyJars, ":")
	classes := testutil.JavaClassesWith(t, jars, filepath.Join("..", "examples", "java", "NettyLeak.java"))
	return java, classes + ":" + jars
}

// attachNetty starts the example in mode with flags, attaches once it has
// warmed up, opens its gate and snapshots every 100 ms (as leakscope's
// capture loop does, only faster) until its summary line; then detaches.
func attachNetty(t *testing.T, mode string, flags ...string) (*analyze.Capture, nettyTruth) {
	t.Helper()
	java, classpath := nettyClasses(t)
	gate := filepath.Join(t.TempDir(), "go")
	cmd, stderr := startJava(t, java, "NettyLeak", append(append([]string{}, flags...),
		"-cp", classpath, "NettyLeak", "--mode", mode, "--wait-file", gate, "--hold", "60000")...)
	tr, err := Attach(cmd.Process.Pid, Options{Warnf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, tr, stderr, "arena allocated ")
	c, err := tr.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("JVM gone after detach: %v", err)
	}
	out := stderr.String()
	t.Logf("JVM stderr:\n%s", out)
	m := nettySummary.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no summary line matching %s", nettySummary)
	}
	n := func(i int) uint64 {
		v, err := strconv.ParseUint(m[i], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if want := map[string]string{"leak": "leaked", "pool": "pooled"}[mode]; m[1] != want {
		t.Fatalf("mode %s: the example says %q", mode, m[0])
	}
	truth := nettyTruth{mode: m[1], buffers: n(2), bufferBytes: n(3), chunks: n(4), chunkBytes: n(5), gone: n(6),
		summary: m[0]}
	for _, p := range []string{"noCleaner (Unsafe.allocateMemory)", "ByteBuffer.allocateDirect"} {
		if strings.Contains(out, "; pool "+p+";") {
			truth.allocationPath = p
		}
	}
	return c, truth
}

// nettyRow checks the ground truth the example printed against its
// defaults, then ranks the capture and returns the one jvm.direct row
// holding memory: the chunks, allocated (whichever request needed one) in
// handleRequests, through Netty's PooledByteBufAllocator, every one of them
// exactly: 16 MiB (Unsafe_AllocateMemory0 mallocs the size asked), still
// live, nothing freed.
func nettyRow(t *testing.T, c *analyze.Capture, truth nettyTruth, wantBuffers, wantChunks uint64, wantPath string) analyze.Leak {
	t.Helper()
	checkNoLoss(t, c)
	if c.Target.Runtime != analyze.RuntimeJVM {
		t.Errorf("target runtime %q, want jvm", c.Target.Runtime)
	}
	if truth.buffers != wantBuffers || truth.bufferBytes != nettyBufferBytes || truth.chunks != wantChunks ||
		truth.chunkBytes != nettyChunkBytes || truth.gone != 0 || truth.allocationPath != wantPath {
		t.Fatalf("the example says %q, pool %q; want %d buffers of %d bytes, %d chunks of %d bytes, none destroyed, pool %q",
			truth.summary, truth.allocationPath, wantBuffers, nettyBufferBytes, wantChunks, nettyChunkBytes, wantPath)
	}
	res := analyze.Rank(c, analyze.Options{})
	var direct []analyze.Leak
	for _, l := range res.Leaks {
		if l.Rank > 3 && l.Site.Kind != "jvm.direct" {
			continue
		}
		t.Logf("rank %d: %s, %d live, %d B, %d allocs, %d frees, score %.0f, trend %+v: %v",
			l.Rank, l.Site.Kind, l.Count, l.Bytes, l.Site.Allocs, l.Site.Frees, l.Score, l.Trend, functions(*l.Site))
		if l.Site.Kind == "jvm.direct" {
			direct = append(direct, l)
		}
	}
	if len(direct) != 1 {
		t.Fatalf("%d jvm.direct rows hold memory, want 1 (the chunks)", len(direct))
	}
	l := direct[0]
	fns := functions(*l.Site)
	want := truth.chunks
	if l.Count != want || l.Bytes != want*nettyChunkBytes || l.Site.Allocs != want || l.Site.Frees != 0 {
		t.Errorf("chunk row: %d live, %d bytes, %d allocs, %d frees; want %d chunks, %d bytes, %d allocs, 0 frees",
			l.Count, l.Bytes, l.Site.Allocs, l.Site.Frees, want, want*nettyChunkBytes, want)
	}
	// The chunk is allocated on a cold path (once per 16 MiB), which stays
	// interpreted; Netty's hot entry points are compiled, and some are
	// inlined into the handler: which Netty frames show depends on the
	// JIT. Every frame above the handler is Netty's or the JDK's, named
	// (interpreted ones by their Method*), the arena's newChunk among
	// them; below the handler, main (interpreted) and the thread's start.
	h := slices.Index(fns, nettyHandler)
	if h < 1 || !hasInOrder(fns, "io.netty.buffer.PoolArena$DirectArena.newChunk", nettyHandler, "NettyLeak.main", "start_thread") {
		t.Errorf("chunk row stack %v: want PoolArena$DirectArena.newChunk, %s, NettyLeak.main, down to start_thread", fns, nettyHandler)
	} else {
		for i, f := range l.Site.Stack.Frames[:h] {
			if f.Module != stacks.JITModule || (!strings.HasPrefix(f.Function, "io.netty.") &&
				!strings.HasPrefix(f.Function, "java.nio.") && !strings.HasPrefix(f.Function, "jdk.internal.misc.") &&
				!strings.HasPrefix(f.Function, "sun.misc.")) {
				t.Errorf("chunk row frame #%d above %s: %q in %s, want a named Netty or JDK frame", i, nettyHandler, f.Function, f.Module)
			}
		}
	}
	if l.Site.Stack.Truncated != "" {
		t.Errorf("chunk row stack %v truncated: %s", fns, l.Site.Stack.Truncated)
	}
	// Nothing else of the JVM's direct memory was acquired after the gate.
	var others uint64
	for _, s := range c.Sites {
		if s.Kind == "jvm.direct" && s.ID != l.Site.ID {
			others += s.Allocs
		}
	}
	if others != 0 {
		t.Errorf("other jvm.direct sites acquired %d blocks, want 0", others)
	}
	if l.Trend == nil {
		t.Fatalf("no trend from %d snapshots", len(c.Snapshots))
	}
	return l
}

// TestNettyPooledLeak: a leak of pooled Netty buffers is seen as the pool's
// chunks, 16 MiB at a time: one row, exactly the chunks the arena
// allocated, named by the request handler that asked for the buffers, and
// growing to the end.
func TestNettyPooledLeak(t *testing.T) {
	c, truth := attachNetty(t, "leak", append([]string{"-XX:+PreserveFramePointer"}, nettyNoCleanerFlags...)...)
	l := nettyRow(t, c, truth, nettyLeakedBufs, nettyLeakChunks, "noCleaner (Unsafe.allocateMemory)")
	checkGrowing(t, l, truth.chunks)
	if l.Rank != 1 {
		t.Errorf("the chunk row is rank %d, want 1", l.Rank)
	}
}

// TestNettyPooledLeakAllocateDirect: without the flags Netty's no-Cleaner
// path needs, each chunk is a ByteBuffer.allocateDirect: the same single
// Unsafe.allocateMemory of 16 MiB, and the same row. No JVM flag at all:
// compiled frames are walked by their frame size.
func TestNettyPooledLeakAllocateDirect(t *testing.T) {
	c, truth := attachNetty(t, "leak")
	l := nettyRow(t, c, truth, nettyLeakedBufs, nettyLeakChunks, "ByteBuffer.allocateDirect")
	checkGrowing(t, l, truth.chunks)
	if l.Rank != 1 {
		t.Errorf("the chunk row is rank %d, want 1", l.Rank)
	}
}

// TestNettyPoolPlateau: the control. The same handler keeps a fixed window
// of buffers in flight: the pool fills once, right after the gate, and is
// reused; its chunks are exact, and the trend calls them a plateau.
func TestNettyPoolPlateau(t *testing.T) {
	c, truth := attachNetty(t, "pool", nettyNoCleanerFlags...)
	l := nettyRow(t, c, truth, nettyPoolBufs, nettyPoolChunks, "noCleaner (Unsafe.allocateMemory)")
	tr := l.Trend
	if !tr.Plateau || tr.Growth != 0 || tr.Falls != 0 || uint64(tr.Rises) > truth.chunks || !slices.ContainsFunc(l.Reasons, func(s string) bool { return strings.HasPrefix(s, "flat for the last ") }) {
		t.Errorf("pool trend %+v, reasons %q: want a plateau, no growth, no fall, at most a rise per chunk, \"flat for the last …\"", *tr, l.Reasons)
	}
	if tr.Weight > 0.25 {
		t.Errorf("pool growth weight %.2f, want at most 0.25 (a pool that stopped growing early)", tr.Weight)
	}
}

// checkGrowing: the leak's chunks came one at a time to the end: a rise
// in the interval of every chunk (the first may come before the first
// snapshot), never a fall, no plateau, a positive slope, and live bytes
// that rise between nearly every pair of snapshots in different steps.
func checkGrowing(t *testing.T, l analyze.Leak, chunks uint64) {
	t.Helper()
	tr := l.Trend
	if tr.Plateau || tr.Falls != 0 || uint64(tr.Rises) < chunks-1 || tr.Growth <= 0 || tr.Tau < 0.8 {
		t.Errorf("leak trend %+v: want growing to the end: no plateau, no fall, at least %d rises, positive growth, tau ≥ 0.8",
			*tr, chunks-1)
	}
	if slices.ContainsFunc(l.Reasons, func(s string) bool { return strings.HasPrefix(s, "flat for the last ") }) {
		t.Errorf("leak reasons %q call it flat", l.Reasons)
	}
	t.Logf("leak reasons: %q", l.Reasons)
}
