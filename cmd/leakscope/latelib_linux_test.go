package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/leakscope/leakscope/internal/testutil"
)

// temurin25 is where this machine kind has Temurin 25, whose libzip.so
// carries its own zlib and is loaded on the first use of java.util.zip.
const temurin25 = "/usr/lib/jvm/temurin-25-jdk-amd64/bin/java"

// A library the target loads after attach is traced from its first call:
// 2000 zlib streams opened at once after a dlopen of libz, or after a
// JVM's first use of java.util.zip (JDK 17's libzip.so calls the system
// libz; Temurin 25's has zlib inside), are all counted.
func TestAttachSeesLibrariesLoadedLater(t *testing.T) {
	testutil.RequireBPF(t)
	java := testutil.RequireJava(t)
	leakscope, _ := buildAll(t, "leaky")
	latezlib := filepath.Join(t.TempDir(), "latezlib")
	if b, err := exec.Command("gcc", "-O2", "-g", "-o", latezlib, filepath.Join("testdata", "latezlib.c"), "-ldl").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, b)
	}
	classes := testutil.JavaClasses(t, filepath.Join("testdata", "LateZip.java"))
	const n = 2000
	targets := []struct {
		name string
		argv func(gate string) []string
		skip string
	}{
		{"dlopen libz", func(gate string) []string { return []string{latezlib, gate, strconv.Itoa(n), "1500"} }, ""},
		{"JDK 17 libzip", func(gate string) []string {
			return []string{java, "-cp", classes, "LateZip", gate, strconv.Itoa(n), "1500"}
		}, ""},
		{"Temurin 25 libzip", func(gate string) []string {
			return []string{temurin25, "-cp", classes, "LateZip", gate, strconv.Itoa(n), "1500"}
		}, temurin25},
	}
	for _, tc := range targets {
		t.Run(tc.name, func(t *testing.T) {
			if tc.skip != "" {
				if _, err := os.Stat(tc.skip); err != nil {
					testutil.SkipOptional(t, "no "+tc.skip+" on this machine")
				}
			}
			dir := t.TempDir()
			gate := filepath.Join(dir, "go")
			target, targetOut := startTarget(t, os.Environ(), tc.argv(gate)[0], tc.argv(gate)[1:]...)
			waitOutput(t, targetOut, "waiting", 30*time.Second)
			out := filepath.Join(dir, "r.json")
			ls := startLeakscope(t, os.Environ(), leakscope, "attach", "--pid", strconv.Itoa(target.Process.Pid),
				"--format", "json", "-o", out, "--progress", "always", "--interval", "100ms")
			waitOutput(t, &ls.stderr, "leakscope: pid", 30*time.Second)
			if err := os.WriteFile(gate, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if code := ls.wait(t, 60*time.Second); code != 0 {
				t.Fatalf("attach exit %d\n%s", code, ls.stderr.String())
			}
			r := readReport(t, out)
			var streams uint64
			for _, l := range r.Leaks {
				if l.Kind == "zlib.inflate" {
					streams += l.OutstandingCount
				}
			}
			if streams != n {
				var b bytes.Buffer
				for _, l := range r.Leaks {
					b.WriteString(l.Kind + " " + strconv.FormatUint(l.OutstandingCount, 10) + "\n")
				}
				t.Errorf("%d inflate streams counted, want %d; leaks:\n%s\nstderr:\n%s", streams, n, b.String(), ls.stderr.String())
			}
		})
	}
}
