package main

import (
	"bytes"
	"context"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/leakscope/leakscope/internal/testutil"
	"github.com/leakscope/leakscope/report"
)

// The symbol names of markupSource's two leaking functions: markup an
// attacker could give a function in a binary someone then traces.
const (
	markupScript = `<script>alert(1)</script>`
	markupImg    = `'><img src=x onerror=alert(1)>`
)

// markupSource leaks exactly 7 blocks of 123 bytes from a function whose
// symbol is markupScript and 3 of 45 from one named markupImg. The names
// come from asm labels: GNU as takes any characters in a quoted symbol name
// except a double quote (binutils 2.40 rejects \" inside one). The program
// makes no other heap allocation: no stdio, output only through _exit's
// status.
const markupSource = `#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void *volatile sink;

__attribute__((noinline, noipa)) void *leak_script(size_t n) __asm__("\"<script>alert(1)</script>\"");
__attribute__((noinline, noipa)) void *leak_img(size_t n) __asm__("\"'><img src=x onerror=alert(1)>\"");

void *leak_script(size_t n)
{
	char *p = malloc(n);

	if (!p)
		_exit(3);
	memset(p, 0x5a, n);
	sink = p; /* not a tail call: the frame stays on the stack */
	return p;
}

void *leak_img(size_t n)
{
	char *p = malloc(n);

	if (!p)
		_exit(3);
	memset(p, 0xa5, n);
	sink = p;
	return p;
}

int main(void)
{
	for (int i = 0; i < 7; i++)
		sink = leak_script(123);
	for (int i = 0; i < 3; i++)
		sink = leak_img(45);
	sink = NULL;
	return 0;
}
`

// TestRunMarkupSymbolNames traces a real binary whose leaking functions'
// symbols are markup: every report names them exactly (the text report
// verbatim, JSON escaped as JSON), and HTML only ever escaped, so the page
// has no element the names made, also once a browser has run its script.
func TestRunMarkupSymbolNames(t *testing.T) {
	testutil.RequireBPF(t)
	if _, err := exec.LookPath("gcc"); err != nil {
		testutil.SkipOrFail(t, "gcc is not installed: it builds the target")
	}
	leakscope, _ := relBuild(t)
	dir := filepath.Dir(leakscope)
	src, prog := filepath.Join(dir, "markup.c"), filepath.Join(dir, "markup")
	if err := os.WriteFile(src, []byte(markupSource), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("gcc", "-O2", "-g", "-fno-omit-frame-pointer", "-Wall", "-Wextra", "-o", prog, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, b)
	}
	checkSymbols(t, prog, markupScript, markupImg)

	out, rd := filepath.Join(dir, "out.html"), filepath.Join(dir, "reports")
	cmd := exec.Command(leakscope, "run", "--format", "html", "-o", out, "--report-dir", rd, "--", prog)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("leakscope run: %v\n%s", err, stderr.String())
	}

	// JSON: the names exactly, with the exact counts.
	r := readReport(t, filepath.Join(rd, "report.json"))
	want := map[string][2]uint64{markupScript: {7, 7 * 123}, markupImg: {3, 3 * 45}}
	for _, l := range r.Leaks {
		if len(l.Frames) == 0 {
			continue
		}
		if w, ok := want[l.Frames[0].Function]; ok {
			if l.Kind != "malloc" || l.OutstandingCount != w[0] || l.OutstandingBytes != w[1] || l.Allocs != w[0] || l.Frees != 0 {
				t.Errorf("JSON row of %q: %+v, want %d blocks, %d bytes", l.Frames[0].Function, l, w[0], w[1])
			}
			delete(want, l.Frames[0].Function)
		}
	}
	for name := range want {
		t.Errorf("JSON report has no leak whose top frame is %q: %+v", name, r.Leaks)
	}
	if r.Lost != (report.V1Lost{}) {
		t.Errorf("lost = %+v", r.Lost)
	}

	// Text: verbatim, in the table and in the stacks.
	txt := readFile(t, filepath.Join(rd, "report.txt"))
	for _, re := range []string{
		`(?m)^\s*\d+\s+malloc\s+\S+\s+7\s+861 B\s+7\s+0\s+\S+\s+` + regexp.QuoteMeta(markupScript) + `$`,
		`(?m)^\s*\d+\s+malloc\s+\S+\s+3\s+135 B\s+3\s+0\s+\S+\s+` + regexp.QuoteMeta(markupImg) + `$`,
		`(?m)^\s*#0 ` + regexp.QuoteMeta(markupScript) + ` \(` + regexp.QuoteMeta(prog) + `\+0x[0-9a-f]+\) .*markup\.c:\d+$`,
		`(?m)^\s*#0 ` + regexp.QuoteMeta(markupImg) + ` \(`,
	} {
		if !regexp.MustCompile(re).MatchString(txt) {
			t.Errorf("text report does not match %s:\n%s", re, txt)
		}
	}

	// HTML, both the -o page and report-dir's: escaped only.
	ownScripts := strings.Count(readFile(t, filepath.Join("..", "..", "report", "html", "report.tmpl")), "<script")
	for _, page := range []string{out, filepath.Join(rd, "report.html")} {
		checkEscapedHTML(t, page, readFile(t, page), ownScripts)
	}

	// junit.xml embeds the text report: XML-escaped.
	junit := readFile(t, filepath.Join(rd, "junit.xml"))
	if strings.Contains(junit, markupScript) || strings.Contains(junit, "<img") || !strings.Contains(junit, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Errorf("junit.xml does not hold the name XML-escaped:\n%s", junit)
	}

	t.Run("browser", func(t *testing.T) {
		chromium, err := exec.LookPath("chromium")
		if err != nil {
			testutil.SkipOrFail(t, "chromium is not installed (apt-get install chromium): it runs the HTML report's script")
		}
		dom := chromiumDOM(t, chromium, "file://"+out)
		if !strings.Contains(dom, `data-ready="true"`) {
			t.Fatalf("the page's script did not finish (no data-ready=\"true\" on body):\n%s", dom)
		}
		if n := strings.Count(dom, "<script"); n != ownScripts {
			t.Errorf("%d <script elements in the DOM, want the page's own %d", n, ownScripts)
		}
		if strings.Contains(dom, "<img") || strings.Contains(dom, markupScript) {
			t.Errorf("a name became markup in the DOM:\n%s", dom)
		}
		// The icicle graph drew both names as text.
		drawn := map[string]bool{}
		for _, b := range regexp.MustCompile(`<div class="fn fn-[a-z]+"[^>]*>([^<]*)</div>`).FindAllStringSubmatch(dom, -1) {
			drawn[b[1]] = true
		}
		for _, name := range []string{"&lt;script&gt;alert(1)&lt;/script&gt;", "'&gt;&lt;img src=x onerror=alert(1)&gt;"} {
			if !drawn[name] {
				t.Errorf("no icicle box %s among %v", name, drawn)
			}
		}
	})
}

// checkSymbols fails t unless the ELF file at path defines functions with
// exactly these names: the assembler kept the markup.
func checkSymbols(t *testing.T, path string, names ...string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC {
			have[s.Name] = true
		}
	}
	for _, n := range names {
		if !have[n] {
			t.Fatalf("%s defines no function %q: the asm label did not take", path, n)
		}
	}
}

// checkEscapedHTML checks one HTML report of markupSource's run.
func checkEscapedHTML(t *testing.T, path, page string, ownScripts int) {
	t.Helper()
	for _, raw := range []string{markupScript, "<img", markupImg, "onerror=alert(1)>"} {
		if strings.Contains(page, raw) {
			t.Errorf("%s: raw %q in the page", path, raw)
		}
	}
	if n := strings.Count(page, "<script"); n != ownScripts {
		t.Errorf("%s: %d <script elements, want the page's own %d", path, n, ownScripts)
	}
	for _, escaped := range []string{
		"&lt;script&gt;alert(1)&lt;/script&gt;",           // table, stacks, chart
		"&#39;&gt;&lt;img src=x onerror=alert(1)&gt;",     // the same for the other name
		`"\u003cscript\u003ealert(1)\u003c/script\u003e"`, // the icicle graph's JSON blob
		`"'\u003e\u003cimg src=x onerror=alert(1)\u003e"`, // a ' is inert in a data block
	} {
		if !strings.Contains(page, escaped) {
			t.Errorf("%s: no %s in the page", path, escaped)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// chromiumDOM returns the DOM of page after headless Chromium ran its
// script, as report/browser_test.go's chromiumRun does.
func chromiumDOM(t *testing.T, chromium, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium,
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run",
		"--user-data-dir="+t.TempDir(), "--dump-dom", url)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium --dump-dom %s: %v\n%s", url, err, stderr.String())
	}
	return stdout.String()
}
