package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leakscope/leakscope/internal/testutil"
	"github.com/leakscope/leakscope/report"
)

// buildGoSQLite builds leakscope (without cgo, as the Makefile does) and
// testdata/gosqlite, a Go program on github.com/mattn/go-sqlite3 (from
// the module proxy, as its go.sum pins it), with cgo and the driver's
// default flags: SQLite's amalgamation has no frame pointers.
func buildGoSQLite(t *testing.T) (leakscope, prog string) {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		testutil.SkipOrFail(t, "go-sqlite3 needs gcc: "+err.Error())
	}
	dir := t.TempDir()
	leakscope = filepath.Join(dir, "leakscope")
	build := exec.Command("go", "build", "-o", leakscope, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build leakscope: %v\n%s", err, b)
	}
	prog = filepath.Join(dir, "gosqlite")
	build = exec.Command("go", "build", "-o", prog, ".")
	build.Dir = filepath.Join("testdata", "gosqlite")
	build.Env = append(os.Environ(), "CGO_ENABLED=1")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build testdata/gosqlite: %v\n%s", err, b)
	}
	return leakscope, prog
}

// gosqliteSummary is the program's summary line: statements leaked, the
// SQLite allocations they hold (SQLite's own count), statements closed
// and the allocations those left.
var gosqliteSummary = regexp.MustCompile(`gosqlite: leaked (\d+) statements holding (\d+) allocations; closed (\d+) statements leaving (\d+)`)

// checkGoSQLite checks a report of testdata/gosqlite against its summary
// line: every allocation the leaked statements hold is in a leak through
// main.cacheQueries, which is rank 1's culprit; those leaks free nothing
// (the closing path has stacks of its own) and run whole to
// runtime.goexit; main.runQueries, which closes its statements, is in no
// leak.
func checkGoSQLite(t *testing.T, r *report.V1, summary string) {
	t.Helper()
	m := gosqliteSummary.FindStringSubmatch(summary)
	if m == nil {
		t.Fatalf("no summary line in %q", summary)
	}
	t.Log(m[0])
	held, _ := strconv.ParseUint(m[2], 10, 64)
	if m[1] != "200" || m[3] != "300" || m[4] != "0" || held < 200 {
		t.Fatalf("summary %q: want 200 statements leaked holding at least 200 allocations, 300 closed leaving 0", m[0])
	}
	if len(r.Leaks) == 0 {
		t.Fatal("no leaks")
	}
	if c := r.Leaks[0].Culprit; c == nil || c.Function != "main.cacheQueries" {
		t.Errorf("rank 1 culprit %+v, want main.cacheQueries", c)
	}
	var count, rows uint64
	for _, l := range r.Leaks {
		var fns []string
		for _, f := range l.Frames {
			fns = append(fns, f.Function)
		}
		stack := strings.Join(fns, ",")
		if strings.Contains(stack, "main.runQueries") {
			t.Errorf("rank %d runs through main.runQueries, which closes its statements: %d live, %d allocs, %d frees: %s",
				l.Rank, l.OutstandingCount, l.Allocs, l.Frees, stack)
		}
		if !strings.Contains(stack, "main.cacheQueries") {
			continue
		}
		rows++
		count += l.OutstandingCount
		if l.Frees != 0 || l.Allocs != l.OutstandingCount || l.Truncated != "" ||
			!strings.Contains(stack, "runtime.asmcgocall,runtime.cgocall,github.com/mattn/go-sqlite3._Cfunc__sqlite3_prepare_v2_internal") ||
			!strings.HasSuffix(stack, "main.cacheQueries,main.main,runtime.main,runtime.goexit") {
			t.Errorf("rank %d: %d live, %d allocs, %d frees, truncated %q: %s; want nothing freed and a whole stack through the cgo call",
				l.Rank, l.OutstandingCount, l.Allocs, l.Frees, l.Truncated, stack)
		}
	}
	t.Logf("%d leaks through main.cacheQueries hold %d allocations", rows, count)
	if count != held {
		t.Errorf("leaks through main.cacheQueries hold %d allocations, SQLite counts %d", count, held)
	}
}

func TestRunGoSQLite(t *testing.T) {
	testutil.RequireBPF(t)
	leakscope, prog := buildGoSQLite(t)
	out := filepath.Join(t.TempDir(), "report.json")
	cmd := exec.Command(leakscope, "run", "--format", "json", "--top", "0", "-o", out, "--", prog)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("leakscope run: %v\n%s", err, stderr.String())
	}
	checkGoSQLite(t, readReport(t, out), stderr.String())
}

func TestAttachGoSQLite(t *testing.T) {
	testutil.RequireBPF(t)
	leakscope, prog := buildGoSQLite(t)
	gate := filepath.Join(t.TempDir(), "gate")
	target := exec.Command(prog, "-wait-file", gate, "-hold", "60s")
	stderr, err := target.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := target.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		target.Process.Kill()
		target.Wait()
	})
	tw := watchLines(stderr)
	out := filepath.Join(t.TempDir(), "report.json")
	ls := exec.Command(leakscope, "attach", "--pid", strconv.Itoa(target.Process.Pid), "--duration", "60s",
		"--progress", "always", "--format", "json", "--top", "0", "-o", out)
	lsErr, err := ls.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := ls.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ls.Process.Kill() })
	lw := watchLines(lsErr)
	// The progress line appears once the probes are attached.
	lw.await(t, regexp.MustCompile(`leakscope: pid (\d+)`), 30*time.Second)
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	summary := tw.await(t, regexp.MustCompile(`(gosqlite: leaked .*)`), 30*time.Second)
	if err := ls.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := ls.Wait(); err != nil {
		lw.mu.Lock()
		t.Fatalf("leakscope attach: %v\n%s", err, lw.text.String())
	}
	checkGoSQLite(t, readReport(t, out), summary)
}
