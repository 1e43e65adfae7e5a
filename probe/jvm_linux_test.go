//go:build linux && amd64

package probe

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/testutil"
	"github.com/leakscope/leakscope/probe/stacks"
)

// Ground truth of examples/java/KafkaRecovery.java with its defaults
// (examples/README.md): 50 inflate streams leaked by recoverSegment, each
// holding what the JDK's zlib allocated (its inflate state and the 32 KiB
// window its first read allocated: zipOracle) and, counted with it when
// malloc is not traced, its 112-byte z_stream; 100 streams opened and
// closed by serveFetch after the wait file, 2000 before it.
const (
	kafkaLeaked       = 50
	kafkaClosed       = 100
	kafkaWarmup       = 2000
	kafkaSummaryStart = "KafkaRecovery: leaked "
)

// syncBuffer collects a child's stderr while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// kafkaClasses compiles the example; it skips (or fails in CI) without a JDK.
func kafkaClasses(t *testing.T) (java, classes string) {
	t.Helper()
	return javaExample(t, "KafkaRecovery")
}

// javaExample compiles examples/java/<class>.java; it skips (or fails in
// CI) without BPF or a JDK.
func javaExample(t *testing.T, class string) (java, classes string) {
	t.Helper()
	testutil.RequireBPF(t)
	java = testutil.RequireJava(t)
	return java, testutil.JavaClasses(t, filepath.Join("..", "examples", "java", class+".java"))
}

// waitFor polls until stderr holds want, taking snapshots meanwhile as
// leakscope's capture loop does.
// openGateAndStop lets a gated target go on (it creates gate), waits for
// its line want on stderr while snapshotting, and stops the tracer.
func openGateAndStop(t *testing.T, tr *Tracer, gate string, stderr *syncBuffer, want string) *analyze.Capture {
	t.Helper()
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, tr, stderr, want)
	c, err := tr.Stop()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func waitFor(t *testing.T, tr *Tracer, stderr *syncBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(stderr.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q from the JVM within 60s; stderr:\n%s", want, stderr.String())
		}
		if tr != nil {
			if _, err := tr.Snapshot(); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// removeJVMFiles removes what a killed JVM leaves in /tmp: the perf map
// leakscope asked for and the attach listener's socket.
func removeJVMFiles(pid int) {
	os.Remove("/tmp/perf-" + itoa(pid) + ".map")
	os.Remove("/tmp/.java_pid" + itoa(pid))
}

// startGated starts a gated Java example, untraced, and returns once it has
// warmed up ("<class>: warmed up") and waits for its gate file.
func startGated(t *testing.T, java, classes, class, gate string, flags ...string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	return startJava(t, java, class, append(append([]string{}, flags...), "-cp", classes, class, "--wait-file", gate, "--hold", "60000")...)
}

// startJava runs java with args, untraced, and returns once the example
// class has warmed up ("<class>: warmed up"); the JVM is killed, and its
// files removed, at the end of the test.
func startJava(t *testing.T, java, class string, args ...string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	return startJavaIn(t, "", java, class, args...)
}

// startJavaIn is startJava with the JVM's working directory dir ("": the
// test's).
func startJavaIn(t *testing.T, dir, java, class string, args ...string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	cmd := exec.Command(java, args...)
	cmd.Dir = dir
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		removeJVMFiles(pid)
	})
	waitFor(t, nil, stderr, class+": warmed up")
	return cmd, stderr
}

// attachKafka traces the example on jdk from its gate to its summary line.
func attachKafka(t *testing.T, jdk testutil.JDK, flags ...string) *analyze.Capture {
	t.Helper()
	_, classes := kafkaClasses(t)
	return attachGated(t, jdk.Java, classes, "KafkaRecovery", kafkaSummaryStart, flags...)
}

// attachGated attaches to a gated Java example once it has warmed up and
// traces it from its gate to its summary line; the JVM must survive the
// detach.
func attachGated(t *testing.T, java, classes, class, summary string, flags ...string) *analyze.Capture {
	t.Helper()
	return attachGatedWith(t, Options{}, java, classes, class, summary, flags...)
}

// attachGatedWith is attachGated with tracer options.
func attachGatedWith(t *testing.T, opts Options, java, classes, class, summary string, flags ...string) *analyze.Capture {
	t.Helper()
	gate := filepath.Join(t.TempDir(), "go")
	cmd, stderr := startGated(t, java, classes, class, gate, flags...)
	opts.Warnf = t.Logf
	tr, err := Attach(cmd.Process.Pid, opts)
	if err != nil {
		t.Fatal(err)
	}
	c := openGateAndStop(t, tr, gate, stderr, summary)
	if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("JVM gone after detach: %v", err)
	}
	return c
}

// zlibLeak checks that the leak is there: zlib.inflate, exactly the leaked
// streams and their bytes (the allocator's count of the JDK's own libzip,
// zipOracle), in a capture of a JVM of jdk; at rank 1 if
// rank1.
func zlibLeak(t *testing.T, c *analyze.Capture, jdk testutil.JDK, rank1 bool) *analyze.Site {
	t.Helper()
	checkNoLoss(t, c)
	if c.Target.Runtime != analyze.RuntimeJVM || !strings.HasPrefix(c.Target.RuntimeVersion, jdk.Feature+".") {
		t.Errorf("target runtime %q %q, want jvm %s.x", c.Target.Runtime, c.Target.RuntimeVersion, jdk.Feature)
	}
	res := analyze.Rank(c, analyze.Options{})
	if len(res.Leaks) == 0 {
		t.Fatal("no leaks")
	}
	per := zipOracle(t, jdk).inflate(c.Probes != nil && !c.Probes.Malloc)
	first := res.Leaks[0]
	if !rank1 {
		// Without a trend, long-lived JVM start-up allocations of the
		// same size may rank first: find the biggest inflate row.
		for _, l := range res.Leaks {
			if l.Site.Kind == analyze.KindZlibInflate {
				first = l
				break
			}
		}
	}
	if first.Site.Kind != analyze.KindZlibInflate || first.Count != kafkaLeaked || first.Bytes != kafkaLeaked*per {
		t.Fatalf("rank 1 = %s, %d streams, %d bytes at %v (%s); want zlib.inflate, %d streams, %d bytes",
			first.Site.Kind, first.Count, first.Bytes, functions(*first.Site), first.Site.Stack.Truncated, kafkaLeaked, kafkaLeaked*per)
	}
	if f := first.Site.Stack.Frames[0]; f.Function != "Java_java_util_zip_Inflater_init" || !strings.HasSuffix(f.Module, "/libzip.so") {
		t.Errorf("rank 1 frame 0 = %s in %s, want Java_java_util_zip_Inflater_init in libzip.so", f.Function, f.Module)
	}
	for _, f := range first.Site.Stack.Frames {
		if f.Module == "[anon]" {
			t.Errorf("frame %#x in a JVM shown as [anon], not [jit]", f.Address)
		}
	}
	return first.Site
}

// hasInOrder reports whether fns holds want as a subsequence.
func hasInOrder(fns []string, want ...string) bool {
	for _, f := range fns {
		if len(want) > 0 && f == want[0] {
			want = want[1:]
		}
	}
	return len(want) == 0
}

// checkNamedJavaStack checks the stack of a JVM with frame pointers: the
// Java code that opened the stream, named, down to the thread's start.
func checkNamedJavaStack(t *testing.T, s *analyze.Site, lines bool) {
	t.Helper()
	fns := functions(*s)
	if !hasInOrder(fns, "java.util.zip.Inflater.init", "java.util.zip.Inflater.<init>", "java.util.zip.GZIPInputStream.<init>", "KafkaRecovery.recoverSegment") {
		t.Errorf("stack %v does not name Inflater.init, Inflater.<init>, GZIPInputStream.<init> and KafkaRecovery.recoverSegment", fns)
	}
	if s.Stack.Truncated != "" {
		t.Errorf("stack %v truncated: %s", fns, s.Stack.Truncated)
	}
	for _, f := range s.Stack.Frames {
		if f.Module == stacks.JITModule && f.Function == "" {
			t.Errorf("unnamed JIT frame %#x in %v", f.Address, fns)
		}
	}
	// Java frames carry their source line: the call in recoverSegment
	// (compiled, from its scope's bci) and in recoverLog (interpreted,
	// from the bcp in its frame), as the example's source has them. They
	// are read from the live JVM: not once it has exited.
	if !lines {
		return
	}
	for fn, call := range map[string]string{
		"KafkaRecovery.recoverSegment": "            in = new GZIPInputStream(new ByteArrayInputStream(batch));",
		"KafkaRecovery.recoverLog":     "n += recoverSegment(batch, true)",
	} {
		want := sourceLine(t, filepath.Join("..", "examples", "java", "KafkaRecovery.java"), call)
		seen := false
		for _, f := range s.Stack.Frames {
			if f.Function == fn {
				seen = true
				if f.File != "KafkaRecovery.java" || f.Line != want {
					t.Errorf("%s at %s:%d, want KafkaRecovery.java:%d", fn, f.File, f.Line, want)
				}
			}
		}
		if !seen {
			t.Errorf("stack %v has no %s", fns, fn)
		}
	}
	// The JDK's own frames carry lines too.
	for _, f := range s.Stack.Frames {
		if f.Function == "java.util.zip.Inflater.<init>" && (f.File != "Inflater.java" || f.Line == 0) {
			t.Errorf("java.util.zip.Inflater.<init> at %s:%d, want a line of Inflater.java", f.File, f.Line)
		}
	}
}

// checkKafkaFetches checks that serveFetch's streams, all closed, are in
// no leak row, and that want of them were seen (0: any number, traced
// from exec, the warm-up's included).
func checkKafkaFetches(t *testing.T, c *analyze.Capture, want uint64) {
	t.Helper()
	var fetched uint64
	for _, s := range c.Sites {
		if s.Kind == analyze.KindZlibInflate && hasInOrder(functions(s), "KafkaRecovery.serveFetch") {
			fetched += s.Allocs
			if s.LiveCount != 0 {
				t.Errorf("serveFetch site holds %d streams: %v", s.LiveCount, functions(s))
			}
		}
	}
	for _, l := range analyze.Rank(c, analyze.Options{}).Leaks {
		if hasInOrder(functions(*l.Site), "KafkaRecovery.serveFetch") {
			t.Errorf("leak row %v holds serveFetch's closed streams", functions(*l.Site))
		}
	}
	if want != 0 && fetched != want {
		t.Errorf("serveFetch streams seen = %d, want %d", fetched, want)
	} else if want == 0 && (fetched < kafkaClosed || fetched > kafkaClosed+kafkaWarmup) {
		t.Errorf("serveFetch streams seen = %d, want %d to %d", fetched, kafkaClosed, kafkaClosed+kafkaWarmup)
	}
}

// sourceLine returns the number of the only line of path holding text.
func sourceLine(t *testing.T, path, text string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for i, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, text) {
			if found != 0 {
				t.Fatalf("%s: %q on lines %d and %d", path, text, found, i+1)
			}
			found = i + 1
		}
	}
	if found == 0 {
		t.Fatalf("%s: no line holds %q", path, text)
	}
	return found
}

func TestJVMAttachPreserveFramePointer(t *testing.T) {
	testutil.ForEachJDK(t, testJVMAttachPreserveFramePointer)
}

func testJVMAttachPreserveFramePointer(t *testing.T, jdk testutil.JDK) {
	c := attachKafka(t, jdk, "-XX:+PreserveFramePointer")
	site := zlibLeak(t, c, jdk, true)
	checkNamedJavaStack(t, site, true)
	if site.Allocs != kafkaLeaked || site.Frees != 0 {
		t.Errorf("leak site: %d inits, %d ends; want %d, 0", site.Allocs, site.Frees, kafkaLeaked)
	}
	// serveFetch's streams were all closed; attached after the warm-up,
	// leakscope saw exactly the 100 after the gate.
	checkKafkaFetches(t, c, kafkaClosed)
	// A JVM is traced without the malloc family by default, and the
	// capture says so; the stream bytes above were computed.
	if p := c.Probes; p == nil || p.Malloc || p.MallocReason != "--malloc auto: JVM target" {
		t.Errorf("probes = %+v, want malloc off for a JVM target", p)
	}
	for _, s := range c.Sites {
		if s.Kind == analyze.KindMalloc {
			t.Errorf("malloc row in a JVM traced without malloc: %v", functions(s))
		}
	}
}

// TestJVMAttachMallocOn: with --malloc on, the stream row is the same
// (bytes from zlib's mallocs), and libzip's own calloc of each z_stream is
// a malloc row with the same Java stack.
func TestJVMAttachMallocOn(t *testing.T) {
	testutil.ForEachJDK(t, testJVMAttachMallocOn)
}

func testJVMAttachMallocOn(t *testing.T, jdk testutil.JDK) {
	_, classes := kafkaClasses(t)
	c := attachGatedWith(t, Options{Malloc: MallocOn}, jdk.Java, classes, "KafkaRecovery", kafkaSummaryStart, "-XX:+PreserveFramePointer")
	zlibLeak(t, c, jdk, true)
	var zs []string
	for _, s := range c.Sites {
		fns := functions(s)
		if s.Kind == analyze.KindMalloc && len(fns) > 0 && fns[0] == "Java_java_util_zip_Inflater_init" &&
			hasInOrder(fns, "KafkaRecovery.recoverSegment") {
			zs = append(zs, fmt.Sprintf("%d blocks, %d bytes", s.LiveCount, s.LiveBytes))
		}
	}
	if len(zs) != 1 || zs[0] != fmt.Sprintf("%d blocks, %d bytes", kafkaLeaked, kafkaLeaked*112) {
		t.Errorf("z_stream rows in recoverSegment: %v, want one of %d blocks, %d bytes", zs, kafkaLeaked, kafkaLeaked*112)
	}
}

// TestJVMAttachNoFlags: without -XX:+PreserveFramePointer compiled Java
// code keeps no frame pointers. The kernel walks compiled frames by their
// code blob's frame size and names interpreted frames by the Method* in
// their frame, both from the JVM's VMStructs: the stack is as complete as
// with the flag, and the counts as exact.
func TestJVMAttachNoFlags(t *testing.T) {
	testutil.ForEachJDK(t, testJVMAttachNoFlags)
}

func testJVMAttachNoFlags(t *testing.T, jdk testutil.JDK) {
	c := attachKafka(t, jdk)
	site := zlibLeak(t, c, jdk, true)
	checkNamedJavaStack(t, site, true)
	if fns := functions(*site); len(fns) < 2 || fns[1] != "java.util.zip.Inflater.init" {
		t.Errorf("stack %v: want the native method's wrapper, java.util.zip.Inflater.init, above libzip", fns)
	}
	if site.Allocs != kafkaLeaked || site.Frees != 0 {
		t.Errorf("leak site: %d inits, %d ends; want %d, 0", site.Allocs, site.Frees, kafkaLeaked)
	}
	var inits, fetched uint64
	for _, s := range c.Sites {
		if s.Kind == analyze.KindZlibInflate {
			inits += s.Allocs
			if hasInOrder(functions(s), "KafkaRecovery.serveFetch") {
				fetched += s.Allocs
			}
		}
	}
	if inits != kafkaLeaked+kafkaClosed || fetched != kafkaClosed {
		t.Errorf("inflate streams seen = %d (%d named serveFetch), want %d (%d)", inits, fetched, kafkaLeaked+kafkaClosed, kafkaClosed)
	}
	checkKafkaFetches(t, c, kafkaClosed)
	for _, w := range c.Warnings {
		if strings.Contains(w, "VMStructs") {
			t.Errorf("warning about a JVM leakscope reads fully: %s", w)
		}
	}
}

// TestJVMLaunch traces the JVM from its first instruction: libjvm.so is
// loaded by the launcher after exec, and the Java code leaking is compiled
// long after that; Stop names it while the JVM still runs. The JVM's own
// start-up leaves megabytes that are never freed (the G1 heap's tables:
// 2 MiB in one row); the leak outranks them because it keeps growing, so
// the test snapshots through start-up and the leak, as leakscope run does.
func TestJVMLaunch(t *testing.T) {
	testutil.ForEachJDK(t, func(t *testing.T, jdk testutil.JDK) {
		for _, tc := range []struct {
			name  string
			flags []string
		}{
			{"PreserveFramePointer", []string{"-XX:+PreserveFramePointer"}},
			{"NoFlags", nil},
		} {
			t.Run(tc.name, func(t *testing.T) { testJVMLaunch(t, jdk, tc.flags...) })
		}
	})
}

func testJVMLaunch(t *testing.T, jdk testutil.JDK, flags ...string) {
	_, classes := kafkaClasses(t)
	c := launchGated(t, jdk.Java, classes, "KafkaRecovery", kafkaSummaryStart, flags...)
	site := zlibLeak(t, c, jdk, true)
	checkNamedJavaStack(t, site, true)
	if site.Allocs != kafkaLeaked || site.Frees != 0 {
		t.Errorf("leak site: %d inits, %d ends; want %d, 0", site.Allocs, site.Frees, kafkaLeaked)
	}
	// Traced from exec: the warm-up's streams too, all closed.
	checkKafkaFetches(t, c, 0)
}

// launchGated runs a gated Java example with the JVM flags given under
// Launch, snapshotting through start-up, its warm-up and, after the gate,
// until its summary line, as leakscope run does; then stops.
func launchGated(t *testing.T, java, classes, class, summary string, flags ...string) *analyze.Capture {
	t.Helper()
	stderr := &syncBuffer{}
	gate := filepath.Join(t.TempDir(), "go")
	argv := append(append([]string{java}, flags...), "-cp", classes, class, "--wait-file", gate, "--hold", "60000")
	tr, proc, err := Launch(argv, Stdio{Out: os.Stdout, Err: stderr}, Options{Warnf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		proc.Signal(syscall.SIGKILL)
		<-proc.Done()
		removeJVMFiles(tr.Pid())
	})
	waitFor(t, tr, stderr, class+": warmed up")
	c := openGateAndStop(t, tr, gate, stderr, summary)
	return c
}

// TestJVMLaunchExitsRightAfterLeaking: a reproduction that leaks and exits
// at once, no snapshot taken meanwhile, no JVM flag: the JVM stops in
// exit() until leakscope has named its frames from its memory (exit_call),
// interpreted and compiled, with lines. With -XX:+DumpPerfMapAtExit as well
// (the perf map it writes at exit was the only way before).
func TestJVMLaunchExitsRightAfterLeaking(t *testing.T) {
	testutil.ForEachJDK(t, func(t *testing.T, jdk testutil.JDK) {
		for _, tc := range []struct {
			name  string
			flags []string
		}{
			{"NoFlags", nil},
			{"DumpPerfMapAtExit", []string{"-XX:+PreserveFramePointer", "-XX:+UnlockDiagnosticVMOptions", "-XX:+DumpPerfMapAtExit"}},
		} {
			t.Run(tc.name, func(t *testing.T) { testJVMLaunchExits(t, jdk, tc.flags...) })
		}
	})
}

func testJVMLaunchExits(t *testing.T, jdk testutil.JDK, flags ...string) {
	_, classes := kafkaClasses(t)
	java := jdk.Java
	stderr := &syncBuffer{}
	gate := filepath.Join(t.TempDir(), "go")
	argv := append(append([]string{java}, flags...), "-cp", classes, "KafkaRecovery", "--wait-file", gate)
	tr, proc, err := Launch(argv, Stdio{Out: os.Stdout, Err: stderr}, Options{Warnf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeJVMFiles(tr.Pid()) })
	// The gate only keeps the JIT's compilations of the warm-up out of
	// the leak, whatever the machine's load; no snapshot is taken.
	waitFor(t, nil, stderr, "KafkaRecovery: warmed up")
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case <-proc.Done():
	case <-time.After(60 * time.Second):
		proc.Signal(syscall.SIGKILL)
		t.Fatal("JVM did not exit within 60s")
	}
	if code := proc.ExitCode(); code != 0 {
		t.Fatalf("JVM exited %d: %s", code, stderr.String())
	}
	c, err := tr.Stop()
	if err != nil {
		t.Fatal(err)
	}
	checkNamedJavaStack(t, zlibLeak(t, c, jdk, false), true)
}

// TestDoctorJVM: the doctor names the JVM and says how its stacks will be
// walked, from its command line and VMStructs (it does not attach).
func TestDoctorJVM(t *testing.T) {
	testutil.ForEachJDK(t, testDoctorJVM)
}

func testDoctorJVM(t *testing.T, jdk testutil.JDK) {
	_, classes := kafkaClasses(t)
	java := jdk.Java
	for _, pfp := range []bool{false, true} {
		var flags []string
		want := "JVM: -XX:+PreserveFramePointer not on the command line: VMStructs read: interpreted frames are named by their Method*, compiled frames walked by their frame size"
		if pfp {
			flags = append(flags, "-XX:+PreserveFramePointer")
			want = "JVM: -XX:+PreserveFramePointer: VMStructs read: interpreted frames are named by their Method*, compiled frames walked by frame pointer"
		}
		cmd, _ := startGated(t, java, classes, "KafkaRecovery", filepath.Join(t.TempDir(), "never"), flags...)
		var jvmOK, fp bool
		for _, c := range Doctor(cmd.Process.Pid, nil) {
			if c.Name == "JVM" && c.OK && strings.Contains(c.Detail, "HotSpot "+jdk.Feature+".") {
				jvmOK = true
			}
			if c.Name == "Java stacks" && c.OK && strings.HasPrefix(c.Detail, want) {
				fp = true
			} else if c.Name == "Java stacks" {
				t.Logf("doctor: %s", c.Detail)
			}
		}
		if !jvmOK || !fp {
			t.Errorf("PreserveFramePointer=%v: doctor does not name the JVM (%v) or its frame pointers (%v)", pfp, jvmOK, fp)
		}
		// Which zlib java.util.zip uses, its version and sizes, and the
		// VMStructs fields found.
		home := javaHomeOf(java)
		wantZlib := "zlib compiled into " + home + "/lib/libzip.so"
		if needsZlib(filepath.Join(home, "lib", "libzip.so")) {
			wantZlib = "system zlib "
		}
		checks := map[string]Check{}
		for _, c := range Doctor(cmd.Process.Pid, nil) {
			checks[c.Name] = c
		}
		if c := checks["JVM zlib"]; !c.OK || !strings.HasPrefix(c.Detail, wantZlib) || !strings.Contains(c.Detail, "deflate_state") || !strings.Contains(c.Detail, "z_stream 112 B") {
			t.Errorf("JVM zlib check %+v, want OK, %q, the state sizes and the z_stream", c, wantZlib)
		}
		if c := checks["VMStructs"]; !c.OK || !strings.Contains(c.Detail, " fields leakscope reads found") {
			t.Errorf("VMStructs check %+v", c)
		}
		if vendor := releaseValue(t, home, "IMPLEMENTOR"); vendor != "" && !strings.Contains(checks["JVM"].Detail, ", "+vendor+" (") {
			t.Errorf("JVM check %q does not name the vendor %q", checks["JVM"].Detail, vendor)
		}
		if _, err := os.Stat("/tmp/.java_pid" + itoa(cmd.Process.Pid)); err == nil {
			t.Error("the doctor attached to the JVM")
		}
	}
}

// TestJVMAttachLeavesNoFiles: attach and detach with the default probe set
// put nothing in the JVM's /tmp (read through /proc/PID/root/tmp) or its
// working directory: frames are named from VMStructs, and the attach
// protocol (trigger file, listener socket, perf map) is not used.
func TestJVMAttachLeavesNoFiles(t *testing.T) {
	testutil.ForEachJDK(t, func(t *testing.T, jdk testutil.JDK) {
		_, classes := kafkaClasses(t)
		gate := filepath.Join(t.TempDir(), "go")
		dir := t.TempDir()
		cmd, stderr := startJavaIn(t, dir, jdk.Java, "KafkaRecovery", "-cp", classes, "KafkaRecovery", "--wait-file", gate, "--hold", "60000")
		pid := cmd.Process.Pid
		tmp, cwd := "/proc/"+itoa(pid)+"/root/tmp", "/proc/"+itoa(pid)+"/cwd"
		beforeTmp, beforeCwd := pidNames(t, tmp, pid), pidNames(t, cwd, -1)
		tr, err := Attach(pid, Options{Warnf: t.Logf})
		if err != nil {
			t.Fatal(err)
		}
		c := openGateAndStop(t, tr, gate, stderr, kafkaSummaryStart)
		checkNamedJavaStack(t, zlibLeak(t, c, jdk, true), true)
		if after := pidNames(t, tmp, pid); !slices.Equal(after, beforeTmp) {
			t.Errorf("JVM's /tmp after detach: %v; before: %v", after, beforeTmp)
		}
		if after := pidNames(t, cwd, -1); !slices.Equal(after, beforeCwd) {
			t.Errorf("JVM's working directory after detach: %v; before: %v", after, beforeCwd)
		}
	})
}

// pidNames lists the names in dir that hold pid (all of them for -1): a
// shared /tmp has other processes' files.
func pidNames(t *testing.T, dir string, pid int) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		if pid < 0 || strings.Contains(e.Name(), itoa(pid)) {
			out = append(out, e.Name())
		}
	}
	return out
}

// jvmConfigurations are the JVM configurations the Kafka reproduction is
// traced under besides the default, on every JDK found: the interpreter
// only, C1 only, other collectors, uncompressed oops, and virtual threads
// (JDK 21 and later).
var jvmConfigurations = []struct {
	name    string
	flags   []string
	args    []string // KafkaRecovery's
	feature int      // the oldest JDK feature release it needs
}{
	{"Xint", []string{"-Xint"}, nil, 0},
	{"TieredStopAtLevel1", []string{"-XX:TieredStopAtLevel=1"}, nil, 0},
	{"ZGC", []string{"-XX:+UseZGC"}, nil, 0},
	{"ParallelGC", []string{"-XX:+UseParallelGC"}, nil, 0},
	{"NoCompressedOops", []string{"-XX:-UseCompressedOops"}, nil, 0},
	{"VirtualThreads", nil, []string{"--virtual", "1"}, 21},
}

// TestJVMConfigurations: in each of jvmConfigurations, attached after the
// warm-up with no other flag, rank 1 is the leak with its exact count and
// bytes, named down to recoverSegment with lines, and serveFetch's closed
// streams are in no leak row.
func TestJVMConfigurations(t *testing.T) {
	testutil.ForEachJDK(t, func(t *testing.T, jdk testutil.JDK) {
		for _, tc := range jvmConfigurations {
			if f, err := strconv.Atoi(jdk.Feature); tc.feature > 0 && (err != nil || f < tc.feature) {
				t.Logf("%s: not a configuration of JDK %s (JDK %d and later)", tc.name, jdk.Feature, tc.feature)
				continue
			}
			t.Run(tc.name, func(t *testing.T) {
				_, classes := kafkaClasses(t)
				gate := filepath.Join(t.TempDir(), "go")
				args := append(append(append([]string{}, tc.flags...), "-cp", classes, "KafkaRecovery", "--wait-file", gate, "--hold", "60000"), tc.args...)
				cmd, stderr := startJava(t, jdk.Java, "KafkaRecovery", args...)
				tr, err := Attach(cmd.Process.Pid, Options{Warnf: t.Logf})
				if err != nil {
					t.Fatal(err)
				}
				c := openGateAndStop(t, tr, gate, stderr, kafkaSummaryStart)
				site := zlibLeak(t, c, jdk, true)
				checkNamedJavaStack(t, site, true)
				if fns := functions(*site); !hasInOrder(fns, "java.util.zip.Inflater.<init>", "java.util.zip.GZIPInputStream.<init>", "KafkaRecovery.recoverSegment") {
					t.Errorf("stack %v", fns)
				}
				if site.Allocs != kafkaLeaked || site.Frees != 0 {
					t.Errorf("leak site: %d inits, %d ends; want %d, 0", site.Allocs, site.Frees, kafkaLeaked)
				}
				checkKafkaFetches(t, c, kafkaClosed)
			})
		}
	})
}

// releaseValue reads KEY from the release file of Java home home.
func releaseValue(t *testing.T, home, key string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(home, "release"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+"="); ok {
			return strings.Trim(v, "\"")
		}
	}
	return ""
}
