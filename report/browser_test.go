package report

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/testutil"
)

// TestHTMLInBrowser opens HTML reports in headless Chromium and checks the
// DOM after the page's script ran: the icicle graph drawn from the JSON
// blob, the table wired up, names shown as text and never as markup. It
// also takes a 1280x900 screenshot of each page, in the test's artifact
// directory (go test -artifacts keeps it), and logs its path.
func TestHTMLInBrowser(t *testing.T) {
	if testing.Short() {
		testutil.SkipOrFail(t, "browser test skipped in -short mode")
	}
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		testutil.SkipOrFail(t, "chromium is not installed (apt-get install chromium): it runs the HTML report's script")
	}
	for _, tc := range []struct {
		name    string
		capture *analyze.Capture
		rows    int
		names   []string // flame graph boxes that must be drawn
	}{
		{"leaky", loadCapture(t, "leaky"), 4, []string{"all", "malloc", "cache_put", "foo_buffer_new", "[truncated: /usr/lib/x86_64-linux-gnu/libfoo.so.1 has no frame pointers]"}},
		{"growing", loadCapture(t, "growing"), 2, []string{"all", "main", "pool_grow", "conn_new"}},
		{"evil", evilCapture(), 2, []string{"&lt;script&gt;alert(1)&lt;/script&gt;", `"&gt;&lt;img src=x onerror=alert(1)&gt;`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.ArtifactDir()
			r := analyze.Rank(tc.capture, analyze.Options{})
			page := filepath.Join(dir, tc.name+".html")
			if err := os.WriteFile(page, []byte(renderHTML(t, r)), 0o600); err != nil {
				t.Fatal(err)
			}
			url := "file://" + page

			dom := chromiumRun(t, chromium, "--dump-dom", url)
			if !strings.Contains(dom, `data-ready="true"`) {
				t.Fatalf("the page's script did not finish (no data-ready=\"true\" on body):\n%s", dom)
			}
			m := regexp.MustCompile(`id="flame" class="flame" data-rendered="(\d+)"`).FindStringSubmatch(dom)
			if m == nil {
				t.Fatalf("icicle graph not drawn:\n%s", dom)
			}
			boxes := regexp.MustCompile(`<div class="fn fn-[a-z]+"[^>]*>([^<]*)</div>`).FindAllStringSubmatch(dom, -1)
			if n, _ := strconv.Atoi(m[1]); n == 0 || n != len(boxes) {
				t.Errorf("data-rendered=%s but %d boxes in the DOM", m[1], len(boxes))
			}
			drawn := map[string]bool{}
			for _, b := range boxes {
				drawn[b[1]] = true
			}
			for _, name := range tc.names {
				if !drawn[name] {
					t.Errorf("no icicle box %s among %v", name, boxes)
				}
			}
			if want := `data-rows="` + strconv.Itoa(tc.rows) + `"`; !strings.Contains(dom, want) || strings.Count(dom, `<tbody class="leak"`) != tc.rows {
				t.Errorf("leak table: want %s and %d rows", want, tc.rows)
			}
			if strings.Contains(dom, "<img") {
				t.Error("a name became an <img> element")
			}

			// #leak-2 opens the second leak's details.
			linked := chromiumRun(t, chromium, "--dump-dom", url+"#leak-2")
			if strings.Count(linked, `<tr class="details open">`) != 1 || strings.Count(linked, `class="toggle" aria-expanded="true"`) != 1 ||
				!regexp.MustCompile(`(?s)id="leak-2".*?<tr class="details open">`).MatchString(linked) {
				t.Errorf("#leak-2 did not open exactly leak 2")
			}

			png := filepath.Join(dir, tc.name+".png")
			chromiumRun(t, chromium, "--screenshot="+png, "--window-size=1280,900", url)
			data, err := os.ReadFile(png)
			if err != nil {
				t.Fatalf("no screenshot: %v", err)
			}
			if !bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")) || len(data) < 10000 {
				t.Errorf("screenshot %s is not a plausible PNG (%d bytes)", png, len(data))
			}
			t.Logf("screenshot: %s", png)
		})
	}
}

// chromiumRun runs headless Chromium on one page and returns its standard
// output: the DOM with --dump-dom.
func chromiumRun(t *testing.T, chromium string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args = append([]string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run",
		"--user-data-dir=" + t.TempDir(),
	}, args...)
	cmd := exec.CommandContext(ctx, chromium, args...)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}
