package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/leakscope/leakscope/internal/testutil"
)

// escapeSource leaks argv[1] blocks of 77 bytes from one function. Its
// assembler name is a placeholder of evilName's length that
// patchSymbolName then overwrites: GNU as 2.40 ends a symbol at a line
// feed and keeps a backslash escape such as \033 as four characters, so
// no asm label can hold evilName. The program makes no other heap
// allocation (atoi, no stdio).
const escapeSource = `#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void *volatile sink;

__attribute__((noinline, noipa)) void *leak(size_t n) __asm__("PLACEHOLDER");

void *leak(size_t n)
{
	char *p = malloc(n);

	if (!p)
		_exit(3);
	memset(p, 0x5a, n);
	sink = p; /* not a tail call: the frame stays on the stack */
	return p;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1;

	for (int i = 0; i < n; i++)
		sink = leak(77);
	sink = NULL;
	return 0;
}
`

// evilPlaceholder is the assembler name escapeSource is built with.
var evilPlaceholder = "evil" + strings.Repeat("_", len(evilName)-len("evil"))

// buildEvilTarget compiles escapeSource into dir and renames its leaking
// function to evilName in the ELF file.
func buildEvilTarget(t *testing.T, dir string) string {
	t.Helper()
	src, prog := filepath.Join(dir, "evil.c"), filepath.Join(dir, "evil")
	if err := os.WriteFile(src, []byte(strings.Replace(escapeSource, "PLACEHOLDER", evilPlaceholder, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("gcc", "-O2", "-g", "-fno-omit-frame-pointer", "-Wall", "-Wextra", "-o", prog, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, b)
	}
	// The string tables hold the name; an overwrite of the same length
	// leaves every offset in the file valid.
	elfData, err := os.ReadFile(prog)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(elfData, []byte(evilPlaceholder)); n == 0 {
		t.Fatalf("%s does not hold the name %s", prog, evilPlaceholder)
	}
	elfData = bytes.ReplaceAll(elfData, []byte(evilPlaceholder), []byte(evilName))
	if err := os.WriteFile(prog, elfData, 0o755); err != nil {
		t.Fatal(err)
	}
	checkSymbols(t, prog, evilName)
	return prog
}

// TestRunEscapedSymbolNames traces a real binary whose leaking function's
// symbol holds an OSC title, a clear screen and a CR LF followed by a
// forged line. The text report, the --fail-on lines and leakscope diff
// print it escaped, and never the forged line at column 0; the JSON report
// keeps it exactly.
func TestRunEscapedSymbolNames(t *testing.T) {
	testutil.RequireBPF(t)
	if _, err := exec.LookPath("gcc"); err != nil {
		testutil.SkipOrFail(t, "gcc is not installed: it builds the target")
	}
	leakscope, _ := relBuild(t)
	dir := filepath.Dir(leakscope)
	prog := buildEvilTarget(t, dir)

	run := func(args ...string) (stdout, stderr string, code int) {
		t.Helper()
		cmd := exec.Command(leakscope, args...)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			code = ee.ExitCode()
		default:
			t.Fatalf("leakscope %s: %v", strings.Join(args, " "), err)
		}
		return o.String(), e.String(), code
	}

	old, cur := filepath.Join(dir, "old.capture"), filepath.Join(dir, "new.capture")
	if _, stderr, code := run("run", "--save", old, "--", prog, "3"); code != 0 {
		t.Fatalf("leakscope run 3: exit %d\n%s", code, stderr)
	}
	stdout, stderr, code := run("run", "--save", cur, "--fail-on", "count>0", "--", prog, "5")
	if code != 1 {
		t.Fatalf("leakscope run --fail-on count>0: exit %d, want 1\n%s", code, stderr)
	}
	checkTerminalSafe(t, "text report", stdout)
	checkTerminalSafe(t, "stderr", stderr)
	for _, re := range []string{
		`(?m)^\s*1\s+malloc\s+\S+\s+5\s+385 B\s+5\s+0\s+\S+\s+` + regexp.QuoteMeta(evilEscaped) + `$`,
		`(?m)^  #0 ` + regexp.QuoteMeta(evilEscaped) + ` \(` + regexp.QuoteMeta(prog) + `\+0x[0-9a-f]+\) .*evil\.c:\d+$`,
	} {
		if !regexp.MustCompile(re).MatchString(stdout) {
			t.Errorf("text report does not match %s:\n%s", re, stdout)
		}
	}
	want := `leakscope: --fail-on "count>0" matched rank 1: malloc, 5 live, 385 B, in ` + evilEscaped + "\n"
	if !strings.Contains(stderr, want) || strings.Count(stderr, "--fail-on") != 1 {
		t.Errorf("stderr lacks the one --fail-on line %q:\n%s", want, stderr)
	}

	stdout, stderr, code = run("diff", old, cur)
	if code != 0 {
		t.Fatalf("leakscope diff: exit %d\n%s", code, stderr)
	}
	checkTerminalSafe(t, "diff", stdout)
	checkTerminalSafe(t, "diff stderr", stderr)
	for _, want := range []string{
		"changed (1):\n  malloc       +154 B, +2 allocations: 231 B in 3 allocations -> 385 B in 5 allocations\n",
		"\n               " + evilEscaped + " < main < ",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("diff lacks %q:\n%s", want, stdout)
		}
	}

	// JSON, from the saved capture: the name exactly.
	stdout, stderr, code = run("report", "--format", "json", "-o", filepath.Join(dir, "new.json"), cur)
	if code != 0 {
		t.Fatalf("leakscope report --format json: exit %d\n%s", code, stderr)
	}
	r := readReport(t, filepath.Join(dir, "new.json"))
	found := false
	for _, l := range r.Leaks {
		if len(l.Frames) > 0 && l.Frames[0].Function == evilName {
			found = true
			if l.OutstandingCount != 5 || l.OutstandingBytes != 385 {
				t.Errorf("JSON row of the evil name: %+v, want 5 blocks, 385 bytes", l)
			}
		}
	}
	if !found {
		t.Errorf("JSON report has no leak whose top frame is %q: %+v", evilName, r.Leaks)
	}
}
