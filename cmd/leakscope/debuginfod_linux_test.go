package main

import (
	"bytes"
	"debug/elf"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leakscope/leakscope/internal/testutil"
	"github.com/leakscope/leakscope/report"
)

// TestRunStrippedWithDebuginfod runs a stripped build of examples/c/leaky
// with elfutils' debuginfod serving its unstripped build: the leak's frames
// are named with function and file:line. Without a server, or with one
// that does not have the file, they are the object and an offset, and a
// warning says why.
func TestRunStrippedWithDebuginfod(t *testing.T) {
	testutil.RequireBPF(t)
	leakscope, full := buildAll(t, "leaky")
	serve := t.TempDir()
	if b, err := exec.Command("cp", full, filepath.Join(serve, "leaky")).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, b)
	}
	prog := filepath.Join(t.TempDir(), "leaky")
	if b, err := exec.Command("strip", "-o", prog, full).CombinedOutput(); err != nil {
		t.Fatalf("strip: %v\n%s", err, b)
	}
	id := elfBuildID(t, prog)
	url := testutil.Debuginfod(t, serve, id)

	run := func(t *testing.T, env []string, args ...string) (*report.V1, string) {
		t.Helper()
		out := filepath.Join(t.TempDir(), "out.json")
		cmd := exec.Command(leakscope, append(append([]string{"run", "--format", "json", "-o", out}, args...), "--", prog)...)
		cmd.Env = append(os.Environ(), env...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("leakscope run: %v\n%s", err, stderr.String())
		}
		r := readReport(t, out)
		if len(r.Leaks) == 0 || r.Leaks[0].OutstandingBytes != 409600 {
			t.Fatalf("leaks: %+v\n%s", r.Leaks, stderr.String())
		}
		return r, stderr.String()
	}
	unnamed := func(t *testing.T, r *report.V1, stderr, why string) {
		t.Helper()
		f := r.Leaks[0].Frames[0]
		if f.Function != "" || f.Module != prog || f.Line != 0 {
			t.Errorf("frame #0 = %+v, want unnamed in %s", f, prog)
		}
		found := false
		for _, w := range r.Warnings {
			found = found || strings.Contains(w, prog) && strings.Contains(w, why)
		}
		if !found || !strings.Contains(stderr, why) {
			t.Errorf("no warning about %s saying %q: %q\n%s", prog, why, r.Warnings, stderr)
		}
	}

	t.Run("served", func(t *testing.T) {
		cache := t.TempDir()
		r, stderr := run(t, []string{"DEBUGINFOD_URLS=" + url, "XDG_CACHE_HOME=" + cache})
		want := []string{"leak_request_buffer", "parse_request", "handle_requests", "main"}
		frames := r.Leaks[0].Frames
		if len(frames) < len(want) {
			t.Fatalf("frames %+v", frames)
		}
		for i, fn := range want {
			f := frames[i]
			if f.Function != fn || !strings.HasSuffix(f.File, "leaky.c") || f.Line <= 0 || f.Module != prog {
				t.Errorf("frame #%d = %+v, want %s in leaky.c of %s", i, f, fn, prog)
			}
		}
		for _, w := range r.Warnings {
			if strings.Contains(w, "unnamed") {
				t.Errorf("warning %q\n%s", w, stderr)
			}
		}
		if _, err := os.Stat(filepath.Join(cache, "leakscope", "debuginfod", id, "debuginfo")); err != nil {
			t.Errorf("cache: %v", err)
		}
	})
	t.Run("flag overrides the environment", func(t *testing.T) {
		cache := t.TempDir()
		r, stderr := run(t, []string{"DEBUGINFOD_URLS=" + url, "XDG_CACHE_HOME=" + cache}, "--debuginfod", "")
		unnamed(t, r, stderr, "debuginfod is not configured")
	})
	t.Run("not configured", func(t *testing.T) {
		r, stderr := run(t, []string{"DEBUGINFOD_URLS=", "XDG_CACHE_HOME=" + t.TempDir()})
		unnamed(t, r, stderr, "debuginfod is not configured")
	})
	t.Run("server without the file", func(t *testing.T) {
		other := testutil.Debuginfod(t, t.TempDir())
		r, stderr := run(t, []string{"XDG_CACHE_HOME=" + t.TempDir()}, "--debuginfod", other)
		unnamed(t, r, stderr, "404")
	})
}

// elfBuildID reads the GNU build ID of the ELF file at path.
func elfBuildID(t *testing.T, path string) string {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := f.Section(".note.gnu.build-id")
	if s == nil {
		t.Fatalf("%s: no .note.gnu.build-id", path)
	}
	data, err := s.Data()
	if err != nil || len(data) < 16 {
		t.Fatalf("%s: build id note: %v", path, err)
	}
	return hex.EncodeToString(data[16:]) // after namesz, descsz, type and "GNU\0"
}
