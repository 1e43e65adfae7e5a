package report

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/testutil"
)

func TestDiffGolden(t *testing.T) {
	old := loadCapture(t, "leaky")
	fixed := loadCapture(t, "leaky")
	// The next run: foo_buffer_new is fixed, cache_put grew, a new site
	// appears, and every address moved.
	var sites []analyze.Site
	for _, s := range fixed.Sites {
		// Stacks share frames: move copies.
		frames := make([]*analyze.Frame, len(s.Stack.Frames))
		for i, f := range s.Stack.Frames {
			moved := *f
			moved.Address += 0x1000
			frames[i] = &moved
		}
		s.Stack.Frames = frames
		switch s.ID {
		case 1:
			continue
		case 3:
			s.LiveCount, s.LiveBytes = 120, 5000000
		}
		sites = append(sites, s)
	}
	sites = append(sites, analyze.Site{ID: 99, Kind: analyze.KindMalloc, LiveCount: 2, LiveBytes: 64,
		Stack: analyze.Stack{Frames: []*analyze.Frame{{Function: "new_feature"}, {Function: "main"}}}})
	fixed.Sites = sites

	var b bytes.Buffer
	if err := Diff(&b, analyze.Diff(old, fixed)); err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, filepath.Join("testdata", "diff.txt.golden"), b.Bytes())

	b.Reset()
	if err := Diff(&b, analyze.Diff(old, old)); err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, filepath.Join("testdata", "diff-same.txt.golden"), b.Bytes())

	if err := Diff(failWriter{}, analyze.Diff(old, old)); err == nil {
		t.Error("Diff to a failing writer returned no error")
	}
}
