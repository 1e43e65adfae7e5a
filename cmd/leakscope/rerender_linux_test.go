package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

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
