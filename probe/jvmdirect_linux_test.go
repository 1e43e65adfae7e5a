//go:build linux && amd64

package probe

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/testutil"
	"github.com/leakscope/leakscope/probe/stacks"
)

// Ground truth of examples/java/DirectLeak.java with its defaults
// (examples/README.md): after the wait file, leakBuffers keeps 40 blocks of
// 64 KiB from Unsafe.allocateMemory; releaseBuffers allocates 25, grows each
// to 128 KiB with reallocateMemory and frees it.
const (
	directLeaked       = 40
	directReleased     = 25
	directBlockBytes   = 65536
	directSummaryStart = "DirectLeak: leaked "
)

// directClasses compiles the example; it skips (or fails in CI) without a JDK.
func directClasses(t *testing.T) (java, classes string) {
	t.Helper()
	return javaExample(t, "DirectLeak")
}

// checkDirectLeak checks the jvm.direct rows: one row of exactly the
// leaked blocks and their bytes (Unsafe_AllocateMemory0 mallocs exactly
// the size asked: NMT is off, so os::malloc adds no header), allocated in
// leakBuffers (compiled during the warm-up; its caller main runs once and
// is interpreted); every other row released. attached: traced
// from the gate only, so the counts are exact (launched, the warm-up may be
// seen too, depending on when libjvm.so is probed; all of it is freed).
func checkDirectLeak(t *testing.T, c *analyze.Capture, attached bool) {
	t.Helper()
	checkNoLoss(t, c)
	var leak []analyze.Site
	var others, othersLive uint64
	for _, s := range c.Sites {
		if s.Kind != "jvm.direct" {
			continue
		}
		fns := functions(s)
		t.Logf("jvm.direct: live %d (%d B), %d acquires, %d releases: %v", s.LiveCount, s.LiveBytes, s.Allocs, s.Frees, fns)
		if s.LiveCount > 0 && hasInOrder(fns, "DirectLeak.leakBuffers") {
			leak = append(leak, s)
			continue
		}
		others += s.Allocs
		othersLive += s.LiveCount
	}
	if len(leak) != 1 {
		t.Fatalf("%d jvm.direct rows with live blocks name DirectLeak.leakBuffers, want 1", len(leak))
	}
	s := leak[0]
	fns := functions(s)
	if s.LiveCount != directLeaked || s.LiveBytes != directLeaked*directBlockBytes {
		t.Errorf("leak row: %d live, %d bytes; want %d, %d", s.LiveCount, s.LiveBytes, directLeaked, directLeaked*directBlockBytes)
	}
	if attached && (s.Allocs != directLeaked || s.Frees != 0) {
		t.Errorf("leak row: %d acquires, %d releases; want %d, 0", s.Allocs, s.Frees, directLeaked)
	}
	// Frame 0 is the caller of the probed Unsafe_AllocateMemory0: the
	// native method's wrapper, named from the perf map.
	// main, interpreted, is named by the Method* in its frame.
	if !hasInOrder(fns, "jdk.internal.misc.Unsafe.allocateMemory0", "DirectLeak.leakBuffers", "DirectLeak.main", "start_thread") ||
		fns[0] != "jdk.internal.misc.Unsafe.allocateMemory0" || s.Stack.Frames[0].Module != stacks.JITModule {
		t.Errorf("leak row stack %v: want the [jit] wrapper jdk.internal.misc.Unsafe.allocateMemory0 first, then DirectLeak.leakBuffers, its interpreted caller DirectLeak.main, down to start_thread", fns)
	}
	if s.Stack.Truncated != "" {
		t.Errorf("leak row stack %v truncated: %s", fns, s.Stack.Truncated)
	}
	// Launched, the JDK's own start-up is traced too: one 2048-byte block
	// it keeps (measured on 17.0.15), in rows naming no DirectLeak frame.
	if attached && othersLive != 0 {
		t.Errorf("other jvm.direct rows hold %d blocks, want 0", othersLive)
	}
	// releaseBuffers: 25 allocateMemory (each released by its
	// reallocateMemory, reopen3) and 25 reallocateMemory (released by
	// freeMemory).
	if attached && others != 2*directReleased {
		t.Errorf("other jvm.direct acquires = %d, want %d (releaseBuffers' allocate and reallocate)", others, 2*directReleased)
	}
}

// TestJVMDirectAttach: attached to a JVM, the jvm preset is on by itself;
// without the malloc family (the default for a JVM) the bytes are the size
// argument of Unsafe_AllocateMemory0, with it the malloc inside: the same.
// Without JVM flags the stack is walked through compiled frames by their
// frame size (VMStructs) just the same.
func TestJVMDirectAttach(t *testing.T) {
	testutil.ForEachJDK(t, func(t *testing.T, jdk testutil.JDK) { testJVMDirectAttach(t, jdk.Java) })
}

func testJVMDirectAttach(t *testing.T, java string) {
	_, classes := directClasses(t)
	for _, tc := range []struct {
		mode  string
		flags []string
	}{
		{MallocAuto, []string{"-XX:+PreserveFramePointer"}},
		{MallocOn, []string{"-XX:+PreserveFramePointer"}},
		{MallocAuto, nil},
	} {
		t.Run(fmt.Sprintf("malloc=%s,flags=%v", tc.mode, tc.flags), func(t *testing.T) {
			c := attachGatedWith(t, Options{Malloc: tc.mode}, java, classes, "DirectLeak", directSummaryStart, tc.flags...)
			if c.Probes == nil || c.Probes.Malloc != (tc.mode == MallocOn) {
				t.Errorf("--malloc %s: probes %+v", tc.mode, c.Probes)
			}
			checkDirectLeak(t, c, true)
		})
	}
}

// TestJVMDirectLaunch: launched through the java launcher (libjli.so), the
// jvm preset is on too, and is attached when libjvm.so is loaded.
func TestJVMDirectLaunch(t *testing.T) {
	testutil.ForEachJDK(t, func(t *testing.T, jdk testutil.JDK) {
		_, classes := directClasses(t)
		checkDirectLeak(t, launchGated(t, jdk.Java, classes, "DirectLeak", directSummaryStart, "-XX:+PreserveFramePointer"), false)
	})
}

// TestJVMFirstSnapshotNamesEveryFrame: attached to a JVM that allocates
// direct memory without pause, every stack of the first snapshots (taken
// 50 ms apart from the attach on) names each of its frames or says which
// it could not, and why; none is cut at a compiled frame for want of
// -XX:+PreserveFramePointer: the code heaps, unwind rows and range table
// are in the kernel before the probes fire.
func TestJVMFirstSnapshotNamesEveryFrame(t *testing.T) {
	testutil.ForEachJDK(t, func(t *testing.T, jdk testutil.JDK) {
		_, classes := javaExample(t, "DirectChurn")
		cmd, _ := startJava(t, jdk.Java, "DirectChurn", "-cp", classes, "DirectChurn", "--ms", "60000")
		tr, err := Attach(cmd.Process.Pid, Options{Warnf: t.Logf})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 6; i++ {
			time.Sleep(50 * time.Millisecond)
			if _, err := tr.Snapshot(); err != nil {
				t.Fatal(err)
			}
		}
		c, err := tr.Stop()
		if err != nil {
			t.Fatal(err)
		}
		var allocs uint64
		for _, s := range c.Sites {
			if s.Kind != "jvm.direct" {
				continue
			}
			allocs += s.Allocs
			fns := functions(s)
			if s.Stack.Truncated != "" {
				t.Logf("%d allocations: %s", s.Allocs, s.Stack.Truncated)
			}
			if strings.Contains(s.Stack.Truncated, "PreserveFramePointer") || strings.Contains(s.Stack.Truncated, "frame-pointer chain broke") {
				t.Errorf("%d allocations: stack %v cut: %s", s.Allocs, fns, s.Stack.Truncated)
			}
			for i, f := range s.Stack.Frames {
				if (f.Function == "" || f.Function == "[interpreted]") && !strings.Contains(s.Stack.Truncated, fmt.Sprintf("#%d at %#x", i, f.Address)) {
					t.Errorf("%d allocations: frame #%d at %#x of %v unnamed, and the stack does not say so (%q)", s.Allocs, i, f.Address, fns, s.Stack.Truncated)
				}
			}
			if !hasInOrder(fns, "java.nio.DirectByteBuffer.<init>", "DirectChurn.churn") && !strings.Contains(s.Stack.Truncated, "unnamed") && !strings.Contains(s.Stack.Truncated, "the name may be wrong") {
				t.Errorf("%d allocations: stack %v lacks DirectByteBuffer.<init> ← DirectChurn.churn (%q)", s.Allocs, fns, s.Stack.Truncated)
			}
		}
		if allocs == 0 {
			t.Error("no direct-memory allocation seen")
		}
	})
}
