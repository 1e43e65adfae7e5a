package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"slices"
	"testing"

	"github.com/leakscope/leakscope/internal/testutil"
	"github.com/leakscope/leakscope/report"
)

// TestVerdictRepeatable: examples/c/poolleak run 10 times, every second
// run with a busy loop on every core: the same rows in the same order with
// the same classes each time (make verdict-repeat runs it again).
func TestVerdictRepeatable(t *testing.T) {
	testutil.RequireBPF(t)
	leakscope, prog := buildAll(t, "poolleak")
	var first []string
	for run := range 10 {
		loaded := run%2 == 1
		var stop context.CancelFunc
		if loaded {
			var ctx context.Context
			ctx, stop = context.WithCancel(context.Background())
			for range runtime.NumCPU() {
				go func() {
					for ctx.Err() == nil {
						for i := 0; i < 1<<16; i++ {
						}
					}
				}()
			}
		}
		cmd := exec.Command(leakscope, "run", "--interval", "200ms", "--format", "json", "--top", "2", "--", prog)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if stop != nil {
			stop()
		}
		if err != nil {
			t.Fatalf("run %d: %v\n%s", run, err, stderr.String())
		}
		var r report.V1
		if err := testutil.DecodeJSON(&stdout, report.SchemaV1, &r); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, l := range r.Leaks {
			class := "-"
			if l.Verdict != nil {
				class = l.Verdict.Class
			}
			got = append(got, fmt.Sprintf("%s:%s", topFunction(l), class))
		}
		t.Logf("run %d (load %v, %.1fs): %v", run, loaded, r.DurationSeconds, got)
		if first == nil {
			first = got
			if want := []string{"leak_slowly:leak", "cache_fill_slot:plateau"}; !slices.Equal(got, want) {
				t.Errorf("run 0: %v, want %v", got, want)
			}
			continue
		}
		if !slices.Equal(got, first) {
			t.Errorf("run %d (load %v): %v, want %v as in run 0", run, loaded, got, first)
		}
	}
}
