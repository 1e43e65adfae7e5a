package report

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/testutil"
)

// goldenCases render the captures in testdata/captures into
// testdata/<name>.{txt,json}.golden.
var goldenCases = []struct {
	name    string
	capture string
	opts    analyze.Options
	text    TextOptions
}{
	{name: "leaky", capture: "leaky", text: TextOptions{Top: 2}},
	{name: "leaky-minage", capture: "leaky", opts: analyze.Options{MinAge: time.Minute, Top: 3}},
	{name: "empty", capture: "empty"},
	// A pool that filled in its first 200s and a slower, steady leak: the
	// trend ranks the leak first although the pool holds more.
	{name: "growing", capture: "growing"},
}

// loadCapture reads testdata/captures/<name>.json.
func loadCapture(tb testing.TB, name string) *analyze.Capture {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "captures", name+".json"))
	if err != nil {
		tb.Fatal(err)
	}
	var c analyze.Capture
	if err := json.Unmarshal(data, &c); err != nil {
		tb.Fatalf("decode capture %s: %v", name, err)
	}
	return &c
}

func TestGolden(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			r := analyze.Rank(loadCapture(t, tc.capture), tc.opts)

			var text bytes.Buffer
			if err := Text(&text, r, tc.text); err != nil {
				t.Fatal(err)
			}
			testutil.Golden(t, filepath.Join("testdata", tc.name+".txt.golden"), text.Bytes())

			var js bytes.Buffer
			if err := JSON(&js, r); err != nil {
				t.Fatal(err)
			}
			testutil.Golden(t, filepath.Join("testdata", tc.name+".json.golden"), js.Bytes())
		})
	}
}
