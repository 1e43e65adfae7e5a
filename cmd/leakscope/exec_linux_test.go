package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/leakscope/leakscope/internal/testutil"
	"github.com/leakscope/leakscope/report"
)

// A command that execs the program that leaks (a launch script that
// preloads jemalloc, env, sh -c 'exec ...') is followed into it: the new
// image's allocator is probed before its first instruction, whatever it
// is (jemalloc by LD_PRELOAD, a static glibc, musl), and the leaks are
// exact, as when the program runs directly; the --fail-on gate fails.
func TestRunFollowsExec(t *testing.T) {
	testutil.RequireBPF(t)
	leakscope, leaky := buildAll(t, "leaky")
	dir := t.TempDir()
	src := filepath.Join("..", "..", "examples", "c", "leaky.c")
	static := filepath.Join(dir, "leaky-static")
	if b, err := exec.Command("gcc", "-O2", "-g", "-pthread", "-fno-omit-frame-pointer", "-static", "-o", static, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc -static: %v\n%s", err, b)
	}
	musl := filepath.Join(dir, "leaky-musl")
	if _, err := exec.LookPath("musl-gcc"); err != nil {
		testutil.SkipOrFail(t, "musl-gcc not found (apt-get install musl-tools)")
	}
	if b, err := exec.Command("musl-gcc", "-O2", "-g", "-pthread", "-fno-omit-frame-pointer", "-static", "-o", musl, src).CombinedOutput(); err != nil {
		t.Fatalf("musl-gcc: %v\n%s", err, b)
	}
	const jemalloc = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
	if _, err := os.Stat(jemalloc); err != nil {
		testutil.SkipOrFail(t, jemalloc+" not found (apt-get install libjemalloc2)")
	}
	script := filepath.Join(dir, "start.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n# as a service's launch script does\nexport LD_PRELOAD="+jemalloc+"\nexec "+leaky+" \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		argv      []string
		allocator string // named on stderr's closing line
	}{
		{"launch script preloading jemalloc", []string{script}, jemalloc},
		{"env into static glibc", []string{"env", static}, static},
		{"sh -c exec into musl", []string{"sh", "-c", "exec " + musl}, musl},
		{"sh -c exec into dynamic glibc", []string{"sh", "-c", "exec " + leaky}, "libc.so.6"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "r.json")
			cmd := exec.Command(leakscope, append([]string{"run", "--progress", "never", "--format", "json", "-o", out,
				"--fail-on", "kind=malloc,count>99", "--"}, c.argv...)...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			_ = cmd.Run()
			if code := cmd.ProcessState.ExitCode(); code != 1 {
				t.Errorf("exit %d, want 1 (the gate matched); stderr:\n%s", code, stderr.String())
			}
			if !strings.Contains(stderr.String(), "malloc family in "+c.allocator) && !strings.Contains(stderr.String(), c.allocator+"; target exited") {
				t.Errorf("stderr does not name allocator %s:\n%s", c.allocator, stderr.String())
			}
			r := readReport(t, out)
			checkLeakyReport(t, r, 100, 25)
			if len(r.Target.Execs) != 1 || !strings.Contains(r.Target.Execs[0], "leaky") {
				t.Errorf("target.execs = %q, want the leaky program's command line", r.Target.Execs)
			}
		})
	}
}

// A JVM started by a shell that execs java is traced with the JVM's probe
// set (malloc not probed, direct memory as jvm.direct), its zlib streams
// exact and its frames named, as when java is run directly.
func TestRunFollowsExecIntoJVM(t *testing.T) {
	testutil.RequireBPF(t)
	testutil.RequireJava(t)
	leakscope, _ := buildAll(t, "leaky")
	classes := testutil.JavaClasses(t, filepath.Join("..", "..", "examples", "java", "KafkaRecovery.java"))
	out := filepath.Join(t.TempDir(), "r.json")
	cmd := exec.Command(leakscope, "run", "--progress", "never", "--format", "json", "-o", out, "--",
		"sh", "-c", "exec java -cp "+classes+" KafkaRecovery")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	r := readReport(t, out)
	if r.Probes == nil || r.Probes.Malloc || !slices.Contains(r.Probes.Kinds, "jvm.direct") || r.Target.Runtime != "jvm" {
		t.Fatalf("probes %+v, runtime %q: want the JVM set", r.Probes, r.Target.Runtime)
	}
	var inflate *report.V1Leak
	for i := range r.Leaks {
		if r.Leaks[i].Kind == "zlib.inflate" {
			inflate = &r.Leaks[i]
			break
		}
	}
	if inflate == nil || inflate.OutstandingCount != 50 {
		t.Fatalf("zlib.inflate leak %+v, want the 50 streams KafkaRecovery leaks", inflate)
	}
	var names []string
	for _, f := range inflate.Frames {
		names = append(names, f.Function)
	}
	if !slices.Contains(names, "KafkaRecovery.recoverSegment") || !slices.Contains(names, "java.util.zip.GZIPInputStream.<init>") {
		t.Errorf("frames %q, want the Java methods named", names)
	}
}
