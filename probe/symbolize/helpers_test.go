package symbolize

import (
	"bufio"
	"fmt"
	"github.com/leakscope/leakscope/internal/testutil"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// requireTool skips tb, saying why, when a build tool the test needs is
// missing (gcc, g++, objcopy, strip, objdump come with Debian's gcc and
// binutils packages).
func requireTool(tb testing.TB, name string) {
	tb.Helper()
	if _, err := exec.LookPath(name); err != nil {
		testutil.SkipOrFail(tb, fmt.Sprintf("needs %s to build or inspect test objects: %v", name, err))
	}
}

// compile builds testdata/src with compiler and flags into a fresh
// directory and returns the output path. The source is copied next to the
// output so DWARF names a path the test knows.
func compile(tb testing.TB, compiler, src string, flags ...string) string {
	tb.Helper()
	requireTool(tb, compiler)
	dir := tb.TempDir()
	data, err := os.ReadFile(filepath.Join("testdata", src))
	if err != nil {
		tb.Fatal(err)
	}
	srcPath := filepath.Join(dir, src)
	if err := os.WriteFile(srcPath, data, 0o644); err != nil {
		tb.Fatal(err)
	}
	out := filepath.Join(dir, strings.TrimSuffix(src, filepath.Ext(src)))
	args := append(append([]string{}, flags...), "-o", out, srcPath)
	run(tb, compiler, args...)
	return out
}

// run runs a command and fails tb with its output if it fails.
func run(tb testing.TB, name string, args ...string) string {
	tb.Helper()
	requireTool(tb, name)
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		tb.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// markers returns the 1-based line of each "line:NAME" comment in the
// testdata source src.
func markers(tb testing.TB, src string) map[string]int {
	tb.Helper()
	f, err := os.Open(filepath.Join("testdata", src))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	lines := map[string]int{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if _, rest, ok := strings.Cut(sc.Text(), "line:"); ok {
			name, _, _ := strings.Cut(rest, " ")
			lines[name] = n
		}
	}
	return lines
}

// mustObject opens path in a fresh cache closed at the end of the test.
func mustObject(tb testing.TB, path string) *Object {
	tb.Helper()
	c := NewCache()
	tb.Cleanup(func() { c.Close() })
	o, err := c.Object(path)
	if err != nil {
		tb.Fatal(err)
	}
	return o
}

// mustLookup returns the vaddr of function name in o.
func mustLookup(tb testing.TB, o *Object, name string) uint64 {
	tb.Helper()
	v, ok := o.Lookup(name)
	if !ok {
		tb.Fatalf("%s: Lookup(%q) found nothing", o.Path, name)
	}
	return v
}
