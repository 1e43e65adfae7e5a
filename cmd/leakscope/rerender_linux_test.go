package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/testutil"
)

// leakscope report of a saved capture is the live report, byte for byte,
// in every format: the probe set, the sampling note, the target's ending,
// the stops and the last snapshot's trend all come from the capture.
func TestReportOfSavedCaptureEqualsLiveReport(t *testing.T) {
	testutil.RequireBPF(t)
	testutil.RequireJava(t)
	leakscope, leaky := buildAll(t, "leaky")
	classes := testutil.JavaClasses(t, filepath.Join("..", "..", "examples", "java", "KafkaRecovery.java"))
	for _, c := range []struct {
		name string
		args []string
	}{
		{"exact", []string{"--", leaky}},
		{"sampled", []string{"--sample-bytes", "64KiB", "--", leaky}},
		{"JVM", []string{"--", "java", "-cp", classes, "KafkaRecovery"}},
		{"ended at --duration", []string{"--duration", "1s", "--", leaky, "--hold", "30000"}},
		// Snapshots with memory breakdowns, which the capture records.
		{"memory", []string{"--interval", "200ms", "--duration", "1500ms", "--", leaky, "--hold", "30000"}},
		{"processes", []string{"--", "sh", "-c", leaky + " > /dev/null & " + leaky + " > /dev/null; wait"}},
		// Processes that end between snapshots, one after another, each
		// traced with the collection of the one before.
		{"process chain", []string{"--interval", "100ms", "--", "sh", "-c", strings.Repeat(leaky+" --hold 250 > /dev/null; ", 4) + "true"}},
		// A command that allocates, is snapshotted, then execs: the
		// snapshots have points of the sites of the image exec'd away
		// from, which both captures list with no totals.
		{"exec", []string{"--interval", "100ms", "--", "sh", "-c", "x=$(echo a b c); for i in 1 2 3; do y=\"$x $i\"; done; sleep 0.4; exec " + leaky + " > /dev/null"}},
	} {
		for _, format := range []string{"text", "json", "html", "pprof"} {
			t.Run(c.name+"/"+format, func(t *testing.T) {
				dir := t.TempDir()
				live, saved, again := filepath.Join(dir, "live"), filepath.Join(dir, "capture"), filepath.Join(dir, "again")
				args := append([]string{"run", "--progress", "never", "--format", format, "-o", live, "--save", saved}, c.args...)
				if b, err := exec.Command(leakscope, args...).CombinedOutput(); err != nil {
					t.Fatalf("run: %v\n%s", err, b)
				}
				if b, err := exec.Command(leakscope, "report", "--format", format, "-o", again, saved).CombinedOutput(); err != nil {
					t.Fatalf("report: %v\n%s", err, b)
				}
				a, err := os.ReadFile(live)
				if err != nil {
					t.Fatal(err)
				}
				b, err := os.ReadFile(again)
				if err != nil {
					t.Fatal(err)
				}
				if c.name == "memory" && format == "json" && !bytes.Contains(a, []byte(`"rss_bytes"`)) {
					t.Errorf("no memory breakdown in the report:\n%s", a)
				}
				if c.name == "exec" && format == "text" {
					checkEarlierImage(t, saved)
				}
				if !bytes.Equal(a, b) {
					if format == "text" || format == "json" {
						t.Errorf("the re-rendered report differs from the live one:\n--- live\n%s\n--- report\n%s", a, b)
					} else {
						t.Errorf("the re-rendered %s report differs from the live one (%d and %d bytes)", format, len(a), len(b))
					}
				}
			})
		}
	}
}

// checkEarlierImage fails unless the capture has sites of sh, the image
// its target exec'd away from, with no totals, each named by a point of a
// snapshot: the case the exec run is there to show.
func checkEarlierImage(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := analyze.ReadCapture(f)
	if err != nil {
		t.Fatal(err)
	}
	sh, err := filepath.EvalSymlinks("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	named := map[uint64]bool{}
	for _, s := range c.Snapshots {
		for _, p := range s.Sites {
			named[p.ID] = true
		}
	}
	n := 0
	for _, s := range c.Sites {
		if s.Allocs != 0 || s.LiveCount != 0 || !slices.ContainsFunc(s.Stack.Frames, func(f *analyze.Frame) bool { return f.Module == sh }) {
			continue
		}
		if !named[s.ID] {
			t.Errorf("site %d of %s has no totals and no point", s.ID, sh)
		}
		n++
	}
	if n == 0 {
		t.Errorf("the capture has no site of %s, the image exec'd away from, with no totals: the case was not made", sh)
	}
}
