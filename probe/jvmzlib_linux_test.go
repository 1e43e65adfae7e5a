//go:build linux && amd64

package probe

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/testutil"
)

// zipBytes is what a JDK's java.util.zip streams hold, counted by the
// allocator in examples/c/jdkzipbytes.c, which calls that JDK's own
// libzip.so: the oracle the JVM tests check stream bytes against.
type zipBytes struct {
	zstream     uint64 // the JNI init's z_stream
	inflateInit uint64 // zlib's allocations in Inflater.init
	inflateRead uint64 // and in the first read (the window)
	deflateInit uint64 // zlib's allocations in Deflater.init
	zlib        string // zlib.Version, "?" where hidden
}

// inflate is a GZIPInputStream's bytes after its first read; withZStream
// says whether its z_stream is counted with it (malloc not traced).
func (z zipBytes) inflate(withZStream bool) uint64 {
	n := z.inflateInit + z.inflateRead
	if withZStream {
		n += z.zstream
	}
	return n
}

// deflate is a GZIPOutputStream's bytes.
func (z zipBytes) deflate(withZStream bool) uint64 {
	n := z.deflateInit
	if withZStream {
		n += z.zstream
	}
	return n
}

// zipOracles caches zipOracle's answers by Java home.
var zipOracles sync.Map

// zipOracle runs examples/c/jdkzipbytes.c on the libzip.so of jdk.
func zipOracle(t *testing.T, jdk testutil.JDK) zipBytes {
	t.Helper()
	home := javaHomeOf(jdk.Java)
	if z, ok := zipOracles.Load(home); ok {
		return z.(zipBytes)
	}
	bin := filepath.Join(t.TempDir(), "jdkzipbytes")
	if b, err := exec.Command("gcc", "-O2", "-o", bin, filepath.Join("..", "examples", "c", "jdkzipbytes.c"), "-ldl").CombinedOutput(); err != nil {
		t.Fatalf("gcc jdkzipbytes.c: %v\n%s", err, b)
	}
	cmd := exec.Command(bin, filepath.Join(home, "lib", "libzip.so"))
	cmd.Env = append(cmd.Environ(), "LD_LIBRARY_PATH="+filepath.Join(home, "lib", "server"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("jdkzipbytes on %s: %v\n%s", home, err, out)
	}
	var z zipBytes
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		k, v, _ := strings.Cut(line, " ")
		n, _ := strconv.ParseUint(v, 10, 64)
		switch k {
		case "zstream":
			z.zstream = n
		case "inflate_init":
			z.inflateInit = n
		case "inflate_read":
			z.inflateRead = n
		case "deflate_init":
			z.deflateInit = n
		case "zlib":
			z.zlib = v
		}
	}
	if z.zstream == 0 || z.inflateInit == 0 || z.inflateRead == 0 || z.deflateInit == 0 {
		t.Fatalf("jdkzipbytes on %s: %s", home, out)
	}
	t.Logf("oracle, %s: z_stream %d B, inflate %d + %d B, deflate %d B (zlib %s)", home, z.zstream, z.inflateInit, z.inflateRead, z.deflateInit, z.zlib)
	zipOracles.Store(home, z)
	return z
}

// javaHomeOf is the Java home of the launcher java (bin/java, links
// resolved).
func javaHomeOf(java string) string {
	if r, err := filepath.EvalSymlinks(java); err == nil {
		java = r
	}
	return filepath.Dir(filepath.Dir(java))
}

// kafkaDeflateLeaked is --leaked-deflate in TestJVMZlibBytes: deflate
// streams leaked by KafkaRecovery.writeSnapshot.
const kafkaDeflateLeaked = 20

// TestJVMZlibBytes: with the default JVM probe set (malloc not traced),
// each leaked stream's bytes are computed from its init arguments and the
// struct sizes of the JDK's zlib (the system libz of Debian's JDK 17,
// zlib 1.3.2 compiled into Temurin 25's libzip.so); they equal the
// allocator's count of the JDK's own libzip, z_stream included, for
// inflate and deflate. With --malloc on the stream rows are zlib's
// mallocs, and each z_stream is a malloc row of its own, whichever way
// zlib was found.
func TestJVMZlibBytes(t *testing.T) {
	testutil.ForEachJDK(t, func(t *testing.T, jdk testutil.JDK) {
		for _, malloc := range []string{MallocAuto, MallocOn} {
			t.Run("malloc-"+malloc, func(t *testing.T) { testJVMZlibBytes(t, jdk, malloc) })
		}
	})
}

func testJVMZlibBytes(t *testing.T, jdk testutil.JDK, malloc string) {
	_, classes := kafkaClasses(t)
	want := zipOracle(t, jdk)
	gate := filepath.Join(t.TempDir(), "go")
	cmd, stderr := startJava(t, jdk.Java, "KafkaRecovery", "-cp", classes, "KafkaRecovery", "--wait-file", gate, "--hold", "60000",
		"--leaked-deflate", strconv.Itoa(kafkaDeflateLeaked))
	tr, err := Attach(cmd.Process.Pid, Options{Malloc: malloc, Warnf: func(f string, a ...any) {
		w := fmt.Sprintf(f, a...)
		t.Log(w)
		if strings.Contains(w, "not known to leakscope") {
			t.Errorf("warning: %s", w)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	c := openGateAndStop(t, tr, gate, stderr, kafkaSummaryStart)
	checkNoLoss(t, c)
	withZStream := malloc != MallocOn
	if c.Probes == nil || c.Probes.Malloc == withZStream {
		t.Fatalf("probes %+v: want malloc traced %v", c.Probes, !withZStream)
	}
	var inflate, deflate *analyze.Site
	var zstreams uint64
	for i, s := range c.Sites {
		fns := functions(s)
		switch {
		case s.Kind == analyze.KindZlibInflate && hasInOrder(fns, "KafkaRecovery.recoverSegment"):
			if inflate != nil {
				t.Errorf("two inflate rows in recoverSegment: %v and %v", functions(*inflate), fns)
			}
			inflate = &c.Sites[i]
		case s.Kind == analyze.KindZlibDeflate && hasInOrder(fns, "KafkaRecovery.writeSnapshot"):
			if deflate != nil {
				t.Errorf("two deflate rows in writeSnapshot: %v and %v", functions(*deflate), fns)
			}
			deflate = &c.Sites[i]
		case s.Kind == analyze.KindMalloc && len(fns) > 0 && strings.HasPrefix(fns[0], "Java_java_util_zip_") &&
			(hasInOrder(fns, "KafkaRecovery.recoverSegment") || hasInOrder(fns, "KafkaRecovery.writeSnapshot")):
			zstreams += s.LiveBytes
		}
	}
	if inflate == nil || deflate == nil {
		t.Fatalf("inflate row %v, deflate row %v: want both", inflate != nil, deflate != nil)
	}
	if inflate.LiveCount != kafkaLeaked || inflate.LiveBytes != kafkaLeaked*want.inflate(withZStream) {
		t.Errorf("inflate: %d streams, %d B; want %d, %d × %d B", inflate.LiveCount, inflate.LiveBytes, kafkaLeaked, kafkaLeaked, want.inflate(withZStream))
	}
	if deflate.LiveCount != kafkaDeflateLeaked || deflate.LiveBytes != kafkaDeflateLeaked*want.deflate(withZStream) {
		t.Errorf("deflate: %d streams, %d B; want %d, %d × %d B", deflate.LiveCount, deflate.LiveBytes, kafkaDeflateLeaked, kafkaDeflateLeaked, want.deflate(withZStream))
	}
	wantZ := uint64(0)
	if !withZStream {
		wantZ = (kafkaLeaked + kafkaDeflateLeaked) * want.zstream
	}
	if zstreams != wantZ {
		t.Errorf("z_stream malloc rows hold %d B, want %d", zstreams, wantZ)
	}
}
