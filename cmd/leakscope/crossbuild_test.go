package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/leakscope/leakscope/internal/testutil"
)

// crossTargets are the platforms leakscope builds for besides linux/amd64:
// there report, diff and report --http work on a capture made elsewhere,
// and run, attach and doctor say they need Linux on amd64
// (trace_other.go). make cross builds the same list.
var crossTargets = []struct{ goos, goarch string }{
	{"darwin", "amd64"},
	{"windows", "amd64"},
	{"linux", "arm64"},
}

// TestCrossBuild builds the command for every cross target, so code that
// only Linux on amd64 has (the tracer, /proc, O_PATH) stays behind its
// build constraints.
func TestCrossBuild(t *testing.T) {
	if testing.Short() {
		testutil.SkipOrFail(t, "cross builds: skipped in -short mode")
	}
	for _, tg := range crossTargets {
		t.Run(tg.goos+"-"+tg.goarch, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "leakscope")
			build := exec.Command("go", "build", "-o", out, ".")
			build.Env = append(os.Environ(), "GOOS="+tg.goos, "GOARCH="+tg.goarch, "CGO_ENABLED=0")
			if msg, err := build.CombinedOutput(); err != nil {
				t.Fatalf("GOOS=%s GOARCH=%s go build: %v\n%s", tg.goos, tg.goarch, err, msg)
			}
			if st, err := os.Stat(out); err != nil || st.Size() == 0 {
				t.Fatalf("no binary: %v", err)
			}
		})
	}
}
