//go:build linux && amd64

package probe

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/testutil"
)

// MappedIndex's ground truth (examples/java/MappedIndex.java): 30
// MappedByteBuffers of 256 KiB kept by openSegment, each of its own
// file, and 8 threads parked forever started by startWorkers.
const (
	mappedSegments = 30
	mappedSize     = 262144
	mappedWorkers  = 8
)

// TestJVMMappingsAndThreads: attached with --maps to a JVM keeping
// MappedByteBuffers and parked threads, the file mappings are one
// mmap.file row named by the Java method that mapped them, listing each
// file; the threads one thread row named by the method that started
// them; counts and bytes exact. The memory breakdown adds up to the
// JVM's RSS within 2%, explains all but 10% and names the Java heap.
func TestJVMMappingsAndThreads(t *testing.T) {
	testutil.ForEachJDK(t, func(t *testing.T, jdk testutil.JDK) {
		_, classes := javaExample(t, "MappedIndex")
		dir := t.TempDir()
		gate := filepath.Join(dir, "go")
		cmd, stderr := startJava(t, jdk.Java, "MappedIndex", "-cp", classes, "MappedIndex",
			"--dir", filepath.Join(dir, "index"), "--wait-file", gate, "--hold", "60000")
		tr, err := Attach(cmd.Process.Pid, Options{Warnf: t.Logf, Maps: true})
		if err != nil {
			t.Fatal(err)
		}
		c, rss := openGateAndStopRSS(t, tr, gate, stderr, "MappedIndex: leaked", cmd.Process.Pid)
		checkNoLoss(t, c)
		res := analyze.Rank(c, analyze.Options{})
		var files []analyze.MappedFile
		var fileRows, threadRows []analyze.Leak
		for _, l := range res.Leaks {
			fns := functions(*l.Site)
			switch {
			case l.Site.Kind == analyze.KindMmapFile && contains(fns, "MappedIndex.openSegment"):
				fileRows = append(fileRows, l)
				files = append(files, l.Site.Files...)
			case l.Site.Kind == analyze.KindThread && contains(fns, "MappedIndex.startWorkers"):
				threadRows = append(threadRows, l)
			}
		}
		if len(fileRows) != 1 || fileRows[0].Count != mappedSegments || fileRows[0].Bytes != mappedSegments*mappedSize {
			for _, l := range fileRows {
				t.Logf("mmap.file row: %d, %d B: %v", l.Count, l.Bytes, functions(*l.Site))
			}
			t.Fatalf("%d mmap.file rows through MappedIndex.openSegment; want one of %d mappings, %d bytes", len(fileRows), mappedSegments, mappedSegments*mappedSize)
		}
		l := fileRows[0]
		if l.Culprit == nil || l.Culprit.Function != "MappedIndex.openSegment" || l.Verdict.Class == analyze.ClassRuntime {
			t.Errorf("mmap.file row: culprit %+v, class %s; want MappedIndex.openSegment, the program's", l.Culprit, l.Verdict.Class)
		}
		if len(files) != mappedSegments {
			t.Errorf("%d files listed, want %d", len(files), mappedSegments)
		}
		for i, f := range files {
			if f.Count != 1 || f.Bytes != mappedSize || filepath.Dir(f.Path) != filepath.Join(dir, "index") || !strings.HasSuffix(f.Path, ".index") {
				t.Errorf("file %d: %+v; want one mapping of %d bytes of an index file in %s", i, f, mappedSize, filepath.Join(dir, "index"))
			}
		}
		if len(threadRows) != 1 || threadRows[0].Count != mappedWorkers {
			t.Fatalf("%d thread rows through MappedIndex.startWorkers; want one of %d threads", len(threadRows), mappedWorkers)
		}
		th := threadRows[0]
		// Each thread's stack is the JVM's default (ThreadStackSize, 1 MiB
		// on linux/amd64): the stack mapping glibc made for it, or, for a
		// stack glibc took from its cache (warmUp's thread exited, and
		// left its stack there), mapped before the attach, the size clone3
		// was given: the mapping less glibc's thread descriptor and TLS
		// (1,044,352 bytes measured on OpenJDK 17).
		for _, a := range th.Site.Live {
			if a.Size < 1<<20-16<<10 || a.Size > 1<<20 {
				t.Errorf("thread stacks %v: want %d stacks of 1 MiB, or 16 KiB less for a cached one", th.Site.Live, mappedWorkers)
				break
			}
		}
		if th.Culprit == nil || th.Culprit.Function != "MappedIndex.startWorkers" || th.Verdict.Class == analyze.ClassRuntime {
			t.Errorf("thread row: culprit %+v, class %s; want MappedIndex.startWorkers, the program's", th.Culprit, th.Verdict.Class)
		}
		pm := checkBreakdown(t, c, rss, 0.10)
		if pm.Part(analyze.PartJavaHeap) == 0 {
			t.Error("the breakdown names no Java heap")
		}
		if got := pm.Part(analyze.PartFiles); got < mappedSegments*mappedSize {
			t.Errorf("mapped files %d, want at least the %d bytes of the index", got, mappedSegments*mappedSize)
		}
	})
}

// TestJVMMemoryBreakdown: for the Kafka-style zlib leak and the
// direct-memory leak, attached, the memory breakdown adds up to the
// JVM's RSS within 2%, explains all but 10% and names the Java heap and
// the traced part holding the leak.
func TestJVMMemoryBreakdown(t *testing.T) {
	testutil.ForEachJDK(t, func(t *testing.T, jdk testutil.JDK) {
		for _, tc := range []struct {
			class, summary, part string
		}{
			{"KafkaRecovery", kafkaSummaryStart, analyze.PartZlib},
			{"DirectLeak", directSummaryStart, analyze.PartDirect},
		} {
			t.Run(tc.class, func(t *testing.T) {
				_, classes := javaExample(t, tc.class)
				gate := filepath.Join(t.TempDir(), "go")
				cmd, stderr := startGated(t, jdk.Java, classes, tc.class, gate)
				tr, err := Attach(cmd.Process.Pid, Options{Warnf: t.Logf, Maps: true})
				if err != nil {
					t.Fatal(err)
				}
				c, rss := openGateAndStopRSS(t, tr, gate, stderr, tc.summary, cmd.Process.Pid)
				pm := checkBreakdown(t, c, rss, 0.10)
				if pm.Part(analyze.PartJavaHeap) == 0 {
					t.Error("the breakdown names no Java heap")
				}
				if pm.Part(tc.part) == 0 {
					t.Errorf("the breakdown has no %s", tc.part)
				}
			})
		}
	})
}

// openGateAndStopRSS is openGateAndStop that also returns the target's
// VmRSS right after the last snapshot, for checkBreakdown.
func openGateAndStopRSS(t *testing.T, tr *Tracer, gate string, stderr *syncBuffer, want string, pid int) (*analyze.Capture, uint64) {
	t.Helper()
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, tr, stderr, want)
	if _, err := tr.Snapshot(); err != nil {
		t.Fatal(err)
	}
	rss := vmRSS(t, pid)
	c, err := tr.Stop()
	if err != nil {
		t.Fatal(err)
	}
	return c, rss
}
