package main

import (
	"context"
	"github.com/leakscope/leakscope/internal/testutil"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"
)

// version and --version print the same five lines.
func TestVersionCommand(t *testing.T) {
	io, out, errb := streams()
	if code := execute(context.Background(), []string{"version"}, io); code != 0 {
		t.Fatalf("version: exit %d, stderr %q", code, errb.String())
	}
	io2, out2, _ := streams()
	if code := execute(context.Background(), []string{"--version"}, io2); code != 0 {
		t.Fatalf("--version: exit %d", code)
	}
	if out.String() != out2.String() {
		t.Errorf("version printed\n%s--version printed\n%s", out, out2)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	want := []string{"leakscope ", "commit:  ", "built:   ", "go:      " + runtime.Version() + " linux/" + runtime.GOARCH, "bpf:     linux/amd64 (probe/kernel/leak_x86_bpfel.o)"}
	if len(lines) != len(want) {
		t.Fatalf("version printed %q, want %d lines", out, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d = %q, want it to start with %q", i+1, lines[i], w)
		}
	}
	if code := execute(context.Background(), []string{"version", "extra"}, io); code != 2 {
		t.Errorf("version extra: exit %d, want 2", code)
	}
}

// The -ldflags -X values the Makefile sets win over the toolchain's stamp,
// and a -dirty version marks the commit modified.
func TestVersionFromLdflags(t *testing.T) {
	if testing.Short() {
		testutil.SkipOrFail(t, "builds leakscope: skipped in -short mode")
	}
	bin := filepath.Join(t.TempDir(), "leakscope")
	ldflags := "-X main.version=v9.8.7-3-gabcdef0-dirty -X main.commit=abcdef0123 -X main.buildDate=2030-01-02T03:04:05Z"
	build := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{
		"leakscope v9.8.7-3-gabcdef0-dirty\n",
		"commit:  abcdef0123 (modified)\n",
		"built:   2030-01-02T03:04:05Z\n",
		", cgo off\n",
	} {
		if !strings.Contains(string(out), w) {
			t.Errorf("version printed\n%s\nwant %q in it", out, w)
		}
	}
}

// bpfObjects lists exactly the committed objects and probe/kernel/gen.go's
// -target list.
func TestBPFObjectsListed(t *testing.T) {
	files, err := filepath.Glob("../../probe/kernel/*_bpfel.o")
	if err != nil {
		t.Fatal(err)
	}
	var committed, listed []string
	for _, f := range files {
		committed = append(committed, "probe/kernel/"+filepath.Base(f))
	}
	for _, o := range bpfObjects {
		listed = append(listed, o.object)
	}
	sort.Strings(committed)
	sort.Strings(listed)
	if strings.Join(committed, " ") != strings.Join(listed, " ") {
		t.Errorf("probe/kernel/ holds %v; bpfObjects lists %v", committed, listed)
	}
	gen, err := os.ReadFile("../../probe/kernel/gen.go")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`-target (\S+)`).FindSubmatch(gen)
	if m == nil {
		t.Fatal("probe/kernel/gen.go has no -target")
	}
	targets := strings.Split(string(m[1]), ",")
	var arches []string
	for _, o := range bpfObjects {
		arches = append(arches, o.arch)
	}
	sort.Strings(targets)
	sort.Strings(arches)
	if strings.Join(targets, ",") != strings.Join(arches, ",") {
		t.Errorf("probe/kernel/gen.go targets %v; bpfObjects lists %v", targets, arches)
	}
}
