package report

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/testutil"
)

// A Go target's capture (examples/go/zgoroutines, recorded with leakscope
// attach) beside the goroutine dump of testdata/goroutines: the Go version
// in the header, cgo stacks to runtime.goexit, and the 12 blocked
// goroutines under both leaks they hold.
func TestGolangGolden(t *testing.T) {
	r := analyze.Rank(loadCapture(t, "zgoroutines"), analyze.Options{})
	dump, err := os.ReadFile(filepath.Join("..", "testdata", "goroutines", "zgoroutines.txt"))
	if err != nil {
		t.Fatal(err)
	}
	gs, err := analyze.ParseGoroutines(bytes.NewReader(dump))
	if err != nil {
		t.Fatal(err)
	}
	analyze.CorrelateGoroutines(r, gs)

	var text, js bytes.Buffer
	if err := Text(&text, r, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, filepath.Join("testdata", "zgoroutines.txt.golden"), text.Bytes())
	if err := JSON(&js, r); err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, filepath.Join("testdata", "zgoroutines.json.golden"), js.Bytes())

	// The extension round-trips.
	v := new(V1)
	if err := testutil.DecodeJSON(&js, SchemaV1, v); err != nil {
		t.Fatal(err)
	}
	want := V1Goroutines{Count: 12, State: "chan receive", WaitMinutes: 31, Function: "main.(*decoder).run"}
	if v.Target.RuntimeVersion == "" || len(v.Leaks) != 2 {
		t.Fatalf("parsed %+v", v.Target)
	}
	for _, l := range v.Leaks {
		if len(l.Goroutines) != 1 || l.Goroutines[0] != want {
			t.Errorf("%s leak: goroutines %+v, want %+v", l.Kind, l.Goroutines, want)
		}
	}
}

func TestFrameInlined(t *testing.T) {
	f := analyze.Frame{Address: 0x4b9928, Function: "main.(*t).buffer", Module: "/srv/app", Offset: 0x4b9928, File: "main.go", Line: 76, Inlined: true}
	if got, want := frame(f), "main.(*t).buffer (/srv/app+0x4b9928) main.go:76 (inlined)"; got != want {
		t.Errorf("frame = %q, want %q", got, want)
	}
}
