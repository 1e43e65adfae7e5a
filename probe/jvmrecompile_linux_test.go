//go:build linux && amd64

package probe

import (
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/testutil"
)

// TestJVMRecompiledPathOneRow: examples/java/Recompile.java opens every
// stream on one call path while its code changes: interpreted, compiled
// by C1 and C2, thrown away by WhiteBox.deoptimizeMethod and compiled
// again; Inflater.init first through the interpreter's native entry, then
// through its native wrapper, and on JDKs that let WhiteBox deoptimize a
// wrapper, through the interpreter again and a new wrapper. Every stream
// of the path is one row: each one opened, exactly the leaked ones live,
// with their bytes (zipOracle).
func TestJVMRecompiledPathOneRow(t *testing.T) {
	testutil.ForEachJDK(t, testJVMRecompiledPathOneRow)
}

var recompileSummary = regexp.MustCompile(`Recompile: opened (\d+) streams in open, leaked (\d+);(.*) pid`)

func testJVMRecompiledPathOneRow(t *testing.T, jdk testutil.JDK) {
	testutil.RequireBPF(t)
	wb := testutil.JavaClasses(t, filepath.Join("..", "examples", "java", "whitebox", "WhiteBox.java"))
	classes := testutil.JavaClassesWith(t, wb, filepath.Join("..", "examples", "java", "Recompile.java"))
	oracle := zipOracle(t, jdk)
	gate := filepath.Join(t.TempDir(), "go")
	cmd, stderr := startGated(t, jdk.Java, classes, "Recompile", gate,
		"-Xbootclasspath/a:"+wb, "-XX:+UnlockDiagnosticVMOptions", "-XX:+WhiteBoxAPI")
	tr, err := Attach(cmd.Process.Pid, Options{Warnf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	c := openGateAndStop(t, tr, gate, stderr, "Recompile: opened")
	if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("JVM gone after detach: %v", err)
	}
	m := recompileSummary.FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("no summary line in:\n%s", stderr.String())
	}
	opened, _ := strconv.ParseUint(m[1], 10, 64)
	leaked, _ := strconv.ParseUint(m[2], 10, 64)
	phases := m[3]
	t.Logf("%d streams opened, %d leaked;%s", opened, leaked, phases)
	// The path ran each way: otherwise this test shows nothing.
	for _, want := range []string{
		`cold: use interpreted then level 0, Inflater.init native entry then native entry;`,
		`hot: use interpreted then level [1-4], Inflater.init native entry then wrapper;`,
		`deoptimized: use interpreted then level 0,`,
		`hot again: use interpreted then level [1-4],`,
	} {
		if !regexp.MustCompile(want).MatchString(phases) {
			t.Errorf("the JVM did not run the path as planned: no %q in %q", want, phases)
		}
	}
	if strings.Contains(phases, "deoptimized: use interpreted then level 0, Inflater.init native entry then native entry; hot again: use interpreted then level 4, Inflater.init native entry then wrapper") {
		t.Log("Inflater.init's wrapper was deoptimized and made again")
	} else {
		t.Logf("JDK %s: WhiteBox did not deoptimize Inflater.init's wrapper: it was not made again", jdk.Name)
	}
	perStream := oracle.zstream + oracle.inflateInit
	var rows []analyze.Site
	var live uint64
	for _, s := range c.Sites {
		if s.Kind != analyze.KindZlibInflate {
			continue
		}
		live += s.LiveCount
		if slices.Contains(functions(s), "Recompile.open") {
			rows = append(rows, s)
		}
	}
	for _, s := range rows {
		t.Logf("row: %d opened, %d live, %d B: %v (%s)", s.Allocs, s.LiveCount, s.LiveBytes, functions(s), s.Stack.Truncated)
	}
	if len(rows) != 1 {
		t.Fatalf("%d rows through Recompile.open, want 1", len(rows))
	}
	if r := rows[0]; r.Allocs != opened || r.LiveCount != leaked || r.LiveBytes != leaked*perStream {
		t.Errorf("row: %d opened, %d live, %d B; want %d, %d, %d (%d B a stream)", r.Allocs, r.LiveCount, r.LiveBytes, opened, leaked, leaked*perStream, perStream)
	}
	if live != leaked {
		t.Errorf("%d inflate streams live in all, want the %d leaked", live, leaked)
	}
	if fns := functions(rows[0]); !hasInOrder(fns, "java.util.zip.Inflater.init", "java.util.zip.Inflater.<init>",
		"Recompile.open", "Recompile.use", "Recompile.round", "Recompile.main") || rows[0].Stack.Truncated != "" {
		t.Errorf("stack %v (%q), want Inflater.init ← Inflater.<init> ← Recompile.open, use, round, main, not truncated", fns, rows[0].Stack.Truncated)
	}
}
