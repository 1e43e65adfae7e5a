//go:build linux && amd64

package probe

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/testutil"
)

// siteThrough sums the live count and bytes of the sites of kind whose
// stack runs through function fn.
func siteThrough(c *analyze.Capture, kind analyze.Kind, fn string) (count, bytes uint64, live int) {
	for _, s := range c.Sites {
		if s.Kind != kind {
			continue
		}
		for _, f := range s.Stack.Frames {
			if f.Function == fn {
				count += s.LiveCount
				bytes += s.LiveBytes
				live += len(s.Live)
				break
			}
		}
	}
	return
}

// mmaps' ground truth (examples/c/mmaps.c), exactly: partial munmaps,
// mremap and MAP_FIXED, file mappings, threads parked on stacks it maps.
func TestMapKindsC(t *testing.T) {
	testutil.RequireBPF(t)
	const KiB = 1 << 10
	bin := buildExample(t, "mmaps", true)
	dir := t.TempDir()
	gate, done := filepath.Join(dir, "go"), filepath.Join(dir, "done")
	cmd := startExample(t, bin, "--file", filepath.Join(dir, "data"), "--wait-file", gate, "--done-file", done)
	tr, err := Attach(cmd.Process.Pid, Options{Warnf: t.Logf, Maps: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(done); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("mmaps never finished")
		}
	}
	if _, err := tr.Snapshot(); err != nil {
		t.Fatal(err)
	}
	c, err := tr.Stop()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range c.Warnings {
		t.Log("warning:", w)
	}
	for _, tc := range []struct {
		kind  analyze.Kind
		fn    string
		count uint64
		bytes uint64
	}{
		{analyze.KindMmapAnon, "keep_anon", 5, 320 * KiB},
		{analyze.KindMmapFile, "keep_file", 3, 48 * KiB},
		{analyze.KindMmapAnon, "keep_part", 1, 24 * KiB},
		{analyze.KindMmapAnon, "keep_remapped", 1, 24 * KiB},
		{analyze.KindMmapAnon, "keep_fixed", 1, 12 * KiB},
		{analyze.KindMmapAnon, "fixed_over", 1, 4 * KiB},
		{analyze.KindThread, "start_parked", 3, 768 * KiB},
		{analyze.KindMmapAnon, "start_parked", 0, 0},
		{analyze.KindMmapAnon, "churn", 0, 0},
	} {
		n, b, live := siteThrough(c, tc.kind, tc.fn)
		if n != tc.count || b != tc.bytes || uint64(live) != tc.count {
			t.Errorf("%s via %s: %d live (%d listed), %d bytes; want %d, %d bytes", tc.kind, tc.fn, n, live, b, tc.count, tc.bytes)
		}
	}
	// The file mappings name their file: one file, three mappings.
	var files []analyze.MappedFile
	for _, s := range c.Sites {
		if s.Kind == analyze.KindMmapFile && s.LiveCount > 0 {
			files = append(files, s.Files...)
		}
	}
	if want := []analyze.MappedFile{{Path: filepath.Join(dir, "data"), Count: 3, Bytes: 48 * KiB}}; !reflect.DeepEqual(files, want) {
		t.Errorf("mmap.file files = %+v, want %+v", files, want)
	}
	if t.Failed() {
		for _, s := range c.Sites {
			if s.Kind == analyze.KindMalloc {
				continue
			}
			names := []string{}
			for _, f := range s.Stack.Frames {
				names = append(names, f.Function)
			}
			t.Logf("%s live %d bytes %d allocs %d frees %d %v", s.Kind, s.LiveCount, s.LiveBytes, s.Allocs, s.Frees, names)
		}
	}
}

// gomaps' ground truth (examples/go/gomaps): a Go program's own
// syscall.Mmap calls, exactly, named by the Go function that made them;
// the runtime's own mappings (its heap arenas) are class runtime.
func TestMapKindsGo(t *testing.T) {
	testutil.RequireBPF(t)
	const KiB = 1 << 10
	bin := buildGoExample(t, "gomaps", nil)
	data := filepath.Join(t.TempDir(), "index")
	c := traceGo(t, bin, false, Options{Maps: true}, "-file", data)
	checkNoLoss(t, c)
	for _, tc := range []struct {
		kind         analyze.Kind
		fn           string
		count, bytes uint64
	}{
		{analyze.KindMmapAnon, "main.keepAnon", 4, 256 * KiB},
		{analyze.KindMmapFile, "main.keepFile", 2, 32 * KiB},
		{analyze.KindMmapAnon, "main.churn", 0, 0},
	} {
		n, b, live := siteThrough(c, tc.kind, tc.fn)
		if n != tc.count || b != tc.bytes || uint64(live) != tc.count {
			t.Errorf("%s via %s: %d live (%d listed), %d bytes; want %d, %d bytes", tc.kind, tc.fn, n, live, b, tc.count, tc.bytes)
		}
	}
	var churned uint64
	for _, s := range c.Sites {
		if s.Kind == analyze.KindMmapAnon && contains(functions(s), "main.churn") {
			churned += s.Allocs
			if s.Frees != s.Allocs {
				t.Errorf("main.churn site: %d mapped, %d unmapped; want all unmapped", s.Allocs, s.Frees)
			}
		}
	}
	if churned != 100 {
		t.Errorf("main.churn: %d mappings, want 100", churned)
	}
	res := analyze.Rank(c, analyze.Options{})
	runtimeRows := 0
	for _, l := range res.Leaks {
		fns := functions(*l.Site)
		ours := contains(fns, "main.keepAnon") || contains(fns, "main.keepFile")
		switch {
		case ours && (l.Verdict.Class == analyze.ClassRuntime || l.Culprit == nil || !strings.HasPrefix(l.Culprit.Function, "main.keep")):
			t.Errorf("%s row of %v: class %s, culprit %+v; want the program's, culprit main.keep*", l.Site.Kind, fns, l.Verdict.Class, l.Culprit)
		case ours && l.Site.Kind == analyze.KindMmapFile:
			if want := []analyze.MappedFile{{Path: data, Count: 2, Bytes: 32 * KiB}}; !reflect.DeepEqual(l.Site.Files, want) {
				t.Errorf("main.keepFile files %+v, want %+v", l.Site.Files, want)
			}
		case l.Site.Kind != analyze.KindMalloc && len(fns) > 0 && strings.HasPrefix(fns[0], "runtime."):
			if l.Verdict.Class != analyze.ClassRuntime {
				t.Errorf("%s row of %v: class %s, want runtime", l.Site.Kind, fns, l.Verdict.Class)
			}
			runtimeRows++
		}
	}
	if runtimeRows == 0 {
		t.Error("no runtime row: the Go heap's 96 MiB mapped nothing while traced")
	}
	if t.Failed() {
		for _, s := range c.Sites {
			t.Logf("%s live %d bytes %d allocs %d frees %d %v", s.Kind, s.LiveCount, s.LiveBytes, s.Allocs, s.Frees, functions(s))
		}
	}
}

// doctor on a pure Go program: no allocator is a note (what needs none
// is still traced), not a failure, and says --maps traces it.
func TestDoctorPureGo(t *testing.T) {
	testutil.RequireBPF(t)
	bin := buildGoExample(t, "gomaps", nil)
	cmd := exec.Command(bin, "-file", filepath.Join(t.TempDir(), "f"), "-wait-file", filepath.Join(t.TempDir(), "never"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	time.Sleep(200 * time.Millisecond)
	var found bool
	for _, c := range Doctor(cmd.Process.Pid, nil) {
		if c.Name == "allocator" {
			t.Errorf("allocator check on a program without one: %+v", c)
		}
		if c.Name == "no allocator" {
			found = !c.OK && strings.Contains(c.Detail, "--maps traces its mappings and threads")
		}
	}
	if !found {
		t.Error(`no "no allocator" note naming --maps`)
	}
}
