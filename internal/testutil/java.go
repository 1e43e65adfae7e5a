package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// RequireJava skips tb unless java and javac are installed, and returns
// the path of java. With LEAKSCOPE_REQUIRE_BPF=1 (CI) it fails instead of
// skipping: CI installs a JDK.
func RequireJava(tb testing.TB) string {
	tb.Helper()
	if testing.Short() {
		skipOrFail(tb, "JVM test skipped in -short mode")
	}
	java, err := exec.LookPath("java")
	if err != nil {
		skipOrFail(tb, "java is not installed (apt-get install openjdk-17-jdk-headless)")
	}
	if _, err := exec.LookPath("javac"); err != nil {
		skipOrFail(tb, "javac is not installed (apt-get install openjdk-17-jdk-headless)")
	}
	return java
}

// JavaClasses compiles the Java sources into a fresh directory and returns
// it, for java -cp. The directory is world-readable, so a JVM started as
// another user can load the classes, and is removed after the test.
func JavaClasses(tb testing.TB, sources ...string) string {
	tb.Helper()
	return JavaClassesWith(tb, "", sources...)
}

// JavaClassesWith is JavaClasses with the libraries the sources use on
// javac's class path (jars joined by ':'; "" for none).
func JavaClassesWith(tb testing.TB, classpath string, sources ...string) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "leakscope-java-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	args := []string{"-d", dir}
	if classpath != "" {
		args = append(args, "-cp", classpath)
	}
	args = append(args, sources...)
	if b, err := exec.Command("javac", args...).CombinedOutput(); err != nil {
		tb.Fatalf("javac %v: %v\n%s", sources, err, b)
	}
	// javac honours the umask; make every class readable.
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if d.IsDir() {
			mode = 0o755
		}
		return os.Chmod(p, mode)
	})
	if err != nil {
		tb.Fatal(err)
	}
	return dir
}

// JDK is a Java runtime the JVM tests run on.
type JDK struct {
	Name    string // for subtest names: "jdk17", "temurin25"
	Java    string // its java launcher
	Feature string // its feature release from its release file: "17", "25"
}

// OtherJDKs are the JDKs the JVM tests run on besides java on PATH, where
// installed: Temurin 25 is on most, not all, machines of this kind.
var OtherJDKs = []string{"/usr/lib/jvm/temurin-25-jdk-amd64"}

// ForEachJDK runs f as a subtest for each JDK on this machine: java on
// PATH (RequireJava), and each of OtherJDKs, a subtest skipped with its
// path when that JDK is not installed. Classes compiled by JavaClasses
// (javac on PATH, the oldest) run on all of them.
func ForEachJDK(t *testing.T, f func(t *testing.T, jdk JDK)) {
	t.Helper()
	java := RequireJava(t)
	path := JDK{Java: java, Feature: feature(javaHome(java))}
	path.Name = "jdk" + path.Feature
	t.Run(path.Name, func(t *testing.T) { f(t, path) })
	for _, home := range OtherJDKs {
		jdk := JDK{Java: filepath.Join(home, "bin", "java"), Feature: feature(home)}
		jdk.Name = strings.TrimSuffix(strings.TrimSuffix(filepath.Base(home), "-amd64"), "-jdk")
		jdk.Name = strings.ReplaceAll(jdk.Name, "-", "")
		if realHome(home) == realHome(javaHome(java)) {
			continue // java on PATH is this one
		}
		t.Run(jdk.Name, func(t *testing.T) {
			if _, err := os.Stat(jdk.Java); err != nil {
				SkipOptional(t, home+" is not installed")
			}
			f(t, jdk)
		})
	}
}

// javaHome is the Java home of the launcher java: the directory above
// its bin/, symbolic links resolved.
func javaHome(java string) string {
	return filepath.Dir(filepath.Dir(realHome(java)))
}

func realHome(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// feature reads the feature release (JAVA_VERSION="25.0.3" → "25") from
// the release file of the Java home; "" if unknown.
func feature(home string) string {
	b, err := os.ReadFile(filepath.Join(home, "release"))
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "JAVA_VERSION="); ok {
			v = strings.Trim(v, "\"")
			v, _, _ = strings.Cut(v, ".")
			return v
		}
	}
	return ""
}
