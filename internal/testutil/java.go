package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
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
