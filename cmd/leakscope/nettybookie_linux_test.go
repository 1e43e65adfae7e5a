package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/leakscope/leakscope/internal/testutil"
	"github.com/leakscope/leakscope/report"
)

// Ground truth of examples/java/NettyBookie.java with its defaults: 40960
// requests, each a 64 KiB buffer taken and released in readEntry and a
// 4 KiB buffer in addEntry, one in 2 of them dropped without release().
const (
	bookieLeaked      = 20480
	bookieLeakedBytes = bookieLeaked * 4096
	bookieRead        = "NettyBookie.readEntry"
	bookieAdd         = "NettyBookie.addEntry"
)

// bookieSummary is the example's last line.
var bookieSummary = regexp.MustCompile(`NettyBookie: (pooled|unpooled) allocator; leaked (\d+) buffers, (\d+) bytes in addEntry .*; ` +
	`arena allocated (\d+) chunks in readEntry, (\d+) in addEntry, destroyed (\d+); \d+ chunks live; memory (noCleaner|ByteBuffer)`)

// bookieTruth is what the example says it did.
type bookieTruth struct {
	allocator           string
	leaked, leakedBytes uint64
	byRead, byAdd, gone uint64 // chunks the arenas allocated in readEntry, in addEntry, chunks destroyed
	noCleaner           bool   // Netty frees buffers itself, without a Cleaner
	summary             string
}

func parseBookie(t *testing.T, stderr string) bookieTruth {
	t.Helper()
	m := bookieSummary.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no summary line matching %s:\n%s", bookieSummary, stderr)
	}
	n := func(i int) uint64 {
		v, err := strconv.ParseUint(m[i], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	return bookieTruth{allocator: m[1], leaked: n(2), leakedBytes: n(3), byRead: n(4), byAdd: n(5), gone: n(6), noCleaner: m[7] == "noCleaner", summary: m[0]}
}

// hasFrame reports whether l's stack runs through function fn.
func hasFrame(l report.V1Leak, fn string) bool {
	return slices.ContainsFunc(l.Frames, func(f report.V1Frame) bool { return f.Function == fn })
}

// TestNettyInnocentPath is the BookKeeper incident (issue #20): on Netty's
// pooled allocator an innocent path (readEntry, 64 KiB buffers, too big
// for the thread cache, all released) finds the arena full and makes it
// allocate every new chunk, while the leaking path (addEntry, 4 KiB
// buffers, one in two dropped unreleased) fills them. On every JDK found:
//
//   - leakscope run: every row through readEntry is the pool's growth,
//     its culprit the requester, "asked the pool: NettyBookie.readEntry",
//     never a leak or held row, with evidence saying what leakscope cannot
//     see and what can (Netty's leak detector, an unpooled run); its chunks
//     are exactly those the example saw readEntry make the arena allocate;
//   - the oracle, Netty's own leak detector (-Dio.netty.leakDetection.level=paranoid,
//     no leakscope): every LEAK record was created in addEntry, none in
//     readEntry;
//   - what leakscope can tell from outside, the evidence's second hint:
//     unpooled (-Dio.netty.allocator.type=unpooled, no Cleaner), rank 1 is
//     a leak whose culprit is addEntry, exactly the dropped buffers, and
//     readEntry holds nothing.
func TestNettyInnocentPath(t *testing.T) {
	testutil.RequireBPF(t)
	testutil.RequireJava(t)
	jars := []string{"/usr/share/java/netty-buffer.jar", "/usr/share/java/netty-common.jar"}
	for _, jar := range jars {
		if _, err := os.Stat(jar); err != nil {
			testutil.SkipOrFail(t, "libnetty-java is not installed (apt-get install libnetty-java): "+err.Error())
		}
	}
	leakscope, _ := buildAll(t, "leaky")
	cp := strings.Join(jars, ":")
	cp = testutil.JavaClassesWith(t, cp, filepath.Join("..", "..", "examples", "java", "NettyBookie.java")) + ":" + cp
	testutil.ForEachJDK(t, func(t *testing.T, jdk testutil.JDK) {
		t.Run("pooled", func(t *testing.T) { bookiePooled(t, leakscope, jdk.Java, cp) })
		t.Run("detector", func(t *testing.T) { bookieDetector(t, jdk.Java, cp) })
		t.Run("unpooled", func(t *testing.T) { bookieUnpooled(t, leakscope, jdk.Java, cp) })
	})
}

// runBookie runs the example under leakscope run (snapshots every 200 ms),
// saving the capture, and returns the JSON report, the text report of the
// same capture and the example's ground truth.
func runBookie(t *testing.T, leakscope string, java ...string) (*report.V1, string, bookieTruth) {
	t.Helper()
	dir := t.TempDir()
	out, saved := filepath.Join(dir, "r.json"), filepath.Join(dir, "capture")
	cmd := exec.Command(leakscope, append([]string{"run", "--progress", "never", "--interval", "200ms", "--format", "json", "-o", out, "--save", saved, "--"}, java...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	truth := parseBookie(t, stderr.String())
	t.Logf("%s", truth.summary)
	text, err := exec.Command(leakscope, "report", "--format", "text", "--top", "5", saved).CombinedOutput()
	if err != nil {
		t.Fatalf("report: %v\n%s", err, text)
	}
	t.Logf("text report:\n%s", text)
	return readReport(t, out), string(text), truth
}

func bookiePooled(t *testing.T, leakscope, java, cp string) {
	r, text, truth := runBookie(t, leakscope, java, "-cp", cp, "NettyBookie")
	if truth.allocator != "pooled" || truth.leaked != bookieLeaked || truth.leakedBytes != bookieLeakedBytes || truth.byRead == 0 || truth.gone != 0 {
		t.Fatalf("the example says %q; want the pooled allocator, %d buffers leaked, %d bytes, chunks allocated in readEntry, none destroyed",
			truth.summary, bookieLeaked, bookieLeakedBytes)
	}
	var readChunks, addChunks uint64
	for _, l := range r.Leaks {
		read, add := hasFrame(l, bookieRead), hasFrame(l, bookieAdd)
		if !read && !add {
			continue
		}
		v := l.Verdict
		if v == nil {
			t.Fatalf("rank %d: no verdict", l.Rank)
		}
		t.Logf("rank %d: %s %s, %d live, %d B, culprit %+v, requester %q", l.Rank, l.Kind, v.Label, l.OutstandingCount, l.OutstandingBytes, l.Culprit, v.Requester)
		if l.Kind != "jvm.direct" || v.Class != "pool" || (v.Label != "pool growth" && v.Label != "pool (filled)") || l.Confidence > 0.3 {
			t.Errorf("rank %d (through %s): %s, class %s, label %q, confidence %.2f; want jvm.direct, pool growth or pool (filled), at most 0.3",
				l.Rank, map[bool]string{true: bookieRead, false: bookieAdd}[read], l.Kind, v.Class, v.Label, l.Confidence)
		}
		want := bookieAdd
		if read {
			want = bookieRead
			readChunks += l.OutstandingCount
		} else {
			addChunks += l.OutstandingCount
		}
		if l.Culprit == nil || l.Culprit.Function != want || v.Requester != want {
			t.Errorf("rank %d: culprit %+v, requester %q; want %s, who asked the pool", l.Rank, l.Culprit, v.Requester, want)
		}
		for _, s := range []string{
			want + " asked when the pool was full, it is not known to hold the pooled buffers",
			"leakscope cannot see buffers inside a pool, only the pool taking memory",
			"-Dio.netty.leakDetection.level=paranoid",
			"-Dio.netty.allocator.type=unpooled",
			"this row shows who asked the pool for memory, not who holds it",
		} {
			if !slices.ContainsFunc(v.Evidence, func(e string) bool { return strings.Contains(e, s) }) {
				t.Errorf("rank %d: evidence %q lacks %q", l.Rank, v.Evidence, s)
			}
		}
	}
	// Every chunk is one allocation, so the pool rows hold exactly the
	// chunks each path made the arena allocate.
	if readChunks != truth.byRead || addChunks != truth.byAdd {
		t.Errorf("pool rows hold %d chunks through %s, %d through %s; the example saw %d and %d", readChunks, bookieRead, addChunks, bookieAdd, truth.byRead, truth.byAdd)
	}
	if !strings.Contains(text, "asked the pool: "+bookieRead) {
		t.Errorf("text report lacks \"asked the pool: %s\"", bookieRead)
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, bookieRead) && !strings.HasPrefix(strings.TrimSpace(line), "#") &&
			!strings.Contains(line, "asked the pool: "+bookieRead) && !strings.Contains(line, "asked when the pool was full") {
			t.Errorf("text report names %s otherwise than as the pool's requester: %q", bookieRead, line)
		}
	}
}

// leakRecord is one "LEAK:" report of Netty's detector: from its first
// line to the next record or the end of its stack traces.
var leakRecord = regexp.MustCompile(`(?s)LEAK: ByteBuf\.release\(\) was not called.*?Created at:\n((?:\t[^\n]*\n)+)`)

func bookieDetector(t *testing.T, java, cp string) {
	cmd := exec.Command(java, "-Dio.netty.leakDetection.level=paranoid", "-cp", cp, "NettyBookie")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	out := stderr.String()
	truth := parseBookie(t, out)
	t.Logf("%s", truth.summary)
	recs := leakRecord.FindAllStringSubmatch(out, -1)
	if len(recs) == 0 {
		t.Fatalf("Netty's detector reported no leak:\n%s", out)
	}
	t.Logf("%d LEAK records; the first created at:\n%s", len(recs), recs[0][1])
	for i, m := range recs {
		if !strings.Contains(m[1], "\t"+bookieAdd+"(NettyBookie.java:") || strings.Contains(m[0], bookieRead+"(") {
			t.Errorf("LEAK record %d: want created in %s, never through %s:\n%s", i, bookieAdd, bookieRead, m[0])
		}
	}
}

// bookieUnpooled: with the no-Cleaner path (JDK 17), the leak's rows are
// exactly the dropped buffers, the one holding nearly all of them ranked
// first, named addEntry; it frees half of what it allocates, so the class
// may be growing rather than leak, never a pool. Where Netty 4.1.48 has
// only the Cleaner path (Temurin 25), the GC frees the dropped buffers'
// memory: at most the buffers dropped since the last GC are live.
func bookieUnpooled(t *testing.T, leakscope, java, cp string) {
	r, _, truth := runBookie(t, leakscope, java, "-Dio.netty.allocator.type=unpooled", "-Dio.netty.tryReflectionSetAccessible=true",
		"--add-opens", "java.base/java.nio=ALL-UNNAMED", "-cp", cp, "NettyBookie")
	if truth.allocator != "unpooled" || truth.leaked != bookieLeaked || truth.leakedBytes != bookieLeakedBytes {
		t.Fatalf("the example says %q; want the unpooled allocator, %d buffers leaked, %d bytes", truth.summary, bookieLeaked, bookieLeakedBytes)
	}
	var live, liveBytes uint64
	for _, l := range r.Leaks {
		if hasFrame(l, bookieRead) {
			t.Errorf("rank %d holds %d through %s, which releases every buffer", l.Rank, l.OutstandingCount, bookieRead)
		}
		if hasFrame(l, bookieAdd) {
			t.Logf("rank %d: %s %s, confidence %.2f, %d live, %d B, %d allocs, %d frees, culprit %+v", l.Rank, l.Kind, l.Verdict.Label, l.Confidence,
				l.OutstandingCount, l.OutstandingBytes, l.Allocs, l.Frees, l.Culprit)
			live += l.OutstandingCount
			liveBytes += l.OutstandingBytes
			if l.Verdict.Class == "pool" || l.Culprit == nil || l.Culprit.Function != bookieAdd {
				t.Errorf("rank %d: class %s, culprit %+v; want %s, not a pool", l.Rank, l.Verdict.Class, l.Culprit, bookieAdd)
			}
		}
	}
	if !truth.noCleaner {
		// 8 batches of 512 requests between GCs, one in 2 dropped.
		if live > 2048 {
			t.Errorf("Cleaner path: %d buffers live through %s, want at most the 2048 dropped between two GCs", live, bookieAdd)
		}
		return
	}
	top := r.Leaks[0]
	if live != bookieLeaked || liveBytes != bookieLeakedBytes || !hasFrame(top, bookieAdd) ||
		(top.Verdict.Class != "leak" && top.Verdict.Class != "growing") || top.OutstandingCount < bookieLeaked*9/10 {
		t.Errorf("rows through %s hold %d buffers, %d B; rank 1 %s, %d live; want %d, %d B, rank 1 a leak or growing row through it",
			bookieAdd, live, liveBytes, top.Verdict.Label, top.OutstandingCount, bookieLeaked, bookieLeakedBytes)
	}
}
