package report

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/testutil"
)

// goldenCases render the captures in testdata/captures into
// testdata/<name>.{txt,json}.golden.
var goldenCases = []goldenCase{
	{name: "leaky", capture: "leaky", text: TextOptions{Top: 2}},
	{name: "leaky-minage", capture: "leaky", opts: analyze.Options{MinAge: time.Minute, Top: 3}},
	{name: "empty", capture: "empty"},
	// A pool that filled in its first 200s and a slower, steady leak: the
	// trend ranks the leak first although the pool holds more.
	{name: "growing", capture: "growing"},
	// Sampled every 512 KiB: foo_buffer_new's 256 KiB blocks traced by
	// chance (each weighing 2.54), scratch_alloc's by the exact budget
	// (weight 1), cache_put without per-allocation weights.
	{name: "sampled", capture: "leaky", text: TextOptions{Top: 4}, prepare: func(c *analyze.Capture) {
		c.SampleBytes = 512 << 10
		c.ExactBudget = &analyze.ExactBudget{PerSecond: 10000, Calls: 1234, Past: 56789}
		for i := range c.Sites {
			s := &c.Sites[i]
			if s.Kind != analyze.KindMalloc || len(s.Live) == 0 {
				continue
			}
			exact := s.Stack.Frames[0].Function == "scratch_alloc"
			s.LiveWeights = make([]float64, len(s.Live))
			s.LiveCount, s.LiveBytes = 0, 0
			for j, a := range s.Live {
				w := analyze.SampleWeight(a.Size, c.SampleBytes)
				if exact {
					w = 1
				}
				s.LiveWeights[j] = w
				s.LiveCount += uint64(math.Round(w))
				s.LiveBytes += uint64(math.Round(w * float64(a.Size)))
			}
		}
	}},
}

type goldenCase struct {
	name    string
	capture string
	opts    analyze.Options
	text    TextOptions
	prepare func(*analyze.Capture) // changes the capture loaded, if set
}

// load is the case's capture, prepared.
func (tc goldenCase) load(tb testing.TB) *analyze.Capture {
	c := loadCapture(tb, tc.capture)
	if tc.prepare != nil {
		tc.prepare(c)
	}
	return c
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
			r := analyze.Rank(tc.load(t), tc.opts)

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
