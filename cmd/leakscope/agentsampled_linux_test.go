//go:build linux && amd64

package main

import (
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/testutil"
	"github.com/leakscope/leakscope/probe"
)

// The agent's estimates are the capture's: under --sample-bytes 512KiB
// one round of leaky (then holding its leaks) is read by a snapshot into
// an agent target, as the agent does, and then stopped. With the default
// exact budget, which traces every call of that round, both say exactly
// what leaked, and neither calls it an estimate; with the budget off both
// estimate the same (each leaking site has one block size, so weighing
// the site by its mean size, as the agent's points are, is weighing each
// block), and both call it an estimate. The probe scales once: the agent
// takes its points as they come.
func TestAgentSampledAgreesWithCapture(t *testing.T) {
	testutil.RequireBPF(t)
	bin := filepath.Join(t.TempDir(), "leaky")
	src := filepath.Join("..", "..", "examples", "c", "leaky.c")
	if b, err := exec.Command("gcc", "-O2", "-g", "-fno-omit-frame-pointer", "-pthread", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc leaky: %v\n%s", err, b)
	}
	for _, tc := range []struct {
		name  string
		exact uint32
		args  []string
	}{
		{"budget", probe.DefaultSampleExact, []string{"--messages", "2", "--requests", "3", "--tags", "2", "--hold", "3000"}},
		// 2000 request buffers of 4096 bytes: ~16 traced (0.78% each).
		{"no budget", 0, []string{"--messages", "2000", "--requests", "2000", "--hold", "3000"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr syncBuffer
			opts := probe.Options{SampleBytes: 512 << 10, SampleExact: tc.exact, Warnf: t.Logf}
			tr, proc, err := probe.Launch(append([]string{bin}, tc.args...), probe.Stdio{Out: os.Stdout, Err: &stderr}, opts)
			if err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(20 * time.Second)
			for !strings.Contains(stderr.String(), "leaked") && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond) // the summary line: its leaks are made, it holds them
			}
			if _, err := tr.Snapshot(); err != nil {
				t.Fatal(err)
			}
			a := newAgentTarget(tr.Pid(), "leaky", "", 1000, nil)
			a.header = tr.Header()
			a.add(tr.LastSnapshot())
			<-proc.Done()
			c, err := tr.Stop()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("leaky: %s", stderr.String())
			agent := analyze.Rank(a.capture(), analyze.Options{})
			capture := analyze.Rank(c, analyze.Options{})
			for _, fn := range []string{"leak_request_buffer", "leak_small_tag"} {
				al, cl := rowOf(agent, fn), rowOf(capture, fn)
				if cl == nil {
					if tc.exact > 0 || fn == "leak_request_buffer" {
						t.Errorf("%s: no row in the capture", fn)
					}
					if al != nil {
						t.Errorf("%s: a row in the agent only (%d blocks)", fn, al.Count)
					}
					continue
				}
				if al == nil {
					t.Errorf("%s: no row in the agent", fn)
					continue
				}
				t.Logf("%s: agent %d blocks, %d bytes (estimate %v); capture %d, %d (estimate %v ±%.0f)",
					fn, al.Count, al.Bytes, al.Estimate, cl.Count, cl.Bytes, cl.Estimate, cl.CountError)
				if d := math.Abs(float64(al.Count) - float64(cl.Count)); d > 1 {
					t.Errorf("%s: agent %d blocks, capture %d", fn, al.Count, cl.Count)
				}
				if d := math.Abs(float64(al.Bytes) - float64(cl.Bytes)); d > 1 {
					t.Errorf("%s: agent %d bytes, capture %d", fn, al.Bytes, cl.Bytes)
				}
				if want := tc.exact == 0; al.Estimate != want || cl.Estimate != want {
					t.Errorf("%s: estimate: agent %v, capture %v; want %v", fn, al.Estimate, cl.Estimate, want)
				}
			}
			if tc.exact > 0 {
				if l := rowOf(capture, "leak_request_buffer"); l == nil || l.Count != 3 || l.Bytes != 3*4096 {
					t.Errorf("budget: leak_request_buffer %+v, want exactly 3 blocks of 4096 bytes", l)
				}
				if l := rowOf(capture, "leak_small_tag"); l == nil || l.Count != 2 || l.Bytes != 2*48 {
					t.Errorf("budget: leak_small_tag %+v, want exactly 2 blocks of 48 bytes", l)
				}
			}
		})
	}
}

// rowOf is the ranked row of the site whose first frame is fn; nil if none.
func rowOf(r *analyze.Result, fn string) *analyze.Leak {
	for i := range r.Leaks {
		if f := r.Leaks[i].Site.Stack.Frames; len(f) > 0 && f[0].Function == fn {
			return &r.Leaks[i]
		}
	}
	return nil
}
