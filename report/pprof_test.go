package report

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/testutil"
)

// pprofCases render testdata/captures/<name>.json into
// testdata/<name>.pprof.golden, as profile.String().
var pprofCases = []string{"leaky", "growing", "empty"}

func TestPprofGolden(t *testing.T) {
	// profile.String prints the start time in the local zone.
	defer func(l *time.Location) { time.Local = l }(time.Local)
	time.Local = time.UTC
	for _, name := range pprofCases {
		t.Run(name, func(t *testing.T) {
			c := loadCapture(t, name)
			// Top and MinAge do not filter the profile.
			r := analyze.Rank(c, analyze.Options{Top: 1, MinAge: time.Hour})
			var buf bytes.Buffer
			if err := Pprof(&buf, r); err != nil {
				t.Fatal(err)
			}
			p, err := profile.Parse(&buf)
			if err != nil {
				t.Fatalf("parse written profile: %v", err)
			}
			if err := p.CheckValid(); err != nil {
				t.Fatalf("written profile: %v", err)
			}
			if len(p.Sample) != len(c.Sites) {
				t.Errorf("%d samples, want one per site (%d)", len(p.Sample), len(c.Sites))
			}
			want := pprofProfile(r)
			if got, want := p.String(), want.String(); got != want {
				t.Errorf("round trip changed the profile:\n got %s\nwant %s", got, want)
			}
			testutil.Golden(t, filepath.Join("testdata", name+".pprof.golden"), []byte(p.String()))
		})
	}
}

func TestPprofGoTool(t *testing.T) {
	if testing.Short() {
		testutil.SkipOrFail(t, "runs go tool pprof; skipped in -short mode")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		testutil.SkipOrFail(t, "go tool pprof test skipped: go is not on PATH")
	}
	path := filepath.Join(t.TempDir(), "leaky.pb.gz")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := Pprof(f, analyze.Rank(loadCapture(t, "leaky"), analyze.Options{})); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(goBin, "tool", "pprof", "-top", "-inuse_space", path).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof: %v\n%s", err, out)
	}
	for _, want := range []string{"foo_buffer_new", "cache_put", "Type: inuse_space"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("go tool pprof -top output lacks %q:\n%s", want, out)
		}
	}
	out, err = exec.Command(goBin, "tool", "pprof", "-comments", path).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof -comments: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "leakscope: lost allocations_dropped 12\n") {
		t.Errorf("go tool pprof -comments output lacks the dropped allocations:\n%s", out)
	}
}

// The profile's comments carry every loss counter, the sampling gap and
// the warnings, a hostile warning escaped as the text report escapes it.
func TestPprofComments(t *testing.T) {
	c := &analyze.Capture{
		Duration: time.Minute,
		Lost: analyze.Lost{
			AllocationsDropped: 1, UnknownFrees: 2, StackErrors: 3, FreesMissed: 4, PendingDropped: 5,
		},
		SampleBytes: 524288,
		Warnings:    []string{"allocation table full for 2s: 1 allocations dropped", hostile("jvm reply")},
	}
	var buf bytes.Buffer
	if err := Pprof(&buf, analyze.Rank(c, analyze.Options{})); err != nil {
		t.Fatal(err)
	}
	p, err := profile.Parse(&buf)
	if err != nil {
		t.Fatalf("parse written profile: %v", err)
	}
	want := []string{
		pprofAllocSpaceComment,
		"leakscope: lost allocations_dropped 1",
		"leakscope: lost unknown_frees 2",
		"leakscope: lost stack_errors 3",
		"leakscope: lost frees_missed 4",
		"leakscope: lost pending_dropped 5",
		"leakscope: sample_bytes 524288: allocations were sampled, so malloc counts and bytes are estimates",
		"leakscope: warning: allocation table full for 2s: 1 allocations dropped",
		"leakscope: warning: jvm reply" + hostileEscaped,
	}
	if !slices.Equal(p.Comments, want) {
		t.Errorf("comments:\n%s\nwant:\n%s", strings.Join(p.Comments, "\n"), strings.Join(want, "\n"))
	}
}

// In pprof's default view (leak_space) the growing leak ranks above the
// cache that holds more; alloc_space counts what was allocated over the
// capture, inuse_space what is outstanding.
func TestPprofDefaultRanksLeaksNotCaches(t *testing.T) {
	var buf bytes.Buffer
	if err := Pprof(&buf, analyze.Rank(loadCapture(t, "growing"), analyze.Options{})); err != nil {
		t.Fatal(err)
	}
	p, err := profile.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if p.DefaultSampleType != "leak_space" {
		t.Errorf("default sample type %q, want leak_space", p.DefaultSampleType)
	}
	idx := map[string]int{}
	for i, st := range p.SampleType {
		idx[st.Type] = i
	}
	val := map[string][]int64{}
	for _, s := range p.Sample {
		val[s.Location[0].Line[0].Function.Name] = s.Value
	}
	leak, cache := val["conn_new"], val["pool_grow"]
	if leak == nil || cache == nil {
		t.Fatalf("samples %v", val)
	}
	if cache[idx["inuse_space"]] <= leak[idx["inuse_space"]] {
		t.Fatalf("inuse_space: cache %d, leak %d; want the cache bigger (the case this is about)", cache[idx["inuse_space"]], leak[idx["inuse_space"]])
	}
	if cache[idx["leak_space"]] != 0 || leak[idx["leak_space"]] != leak[idx["inuse_space"]] {
		t.Errorf("leak_space: cache %d (want 0), leak %d (want its inuse %d)", cache[idx["leak_space"]], leak[idx["leak_space"]], leak[idx["inuse_space"]])
	}
	if leak[idx["alloc_space"]] <= leak[idx["inuse_space"]] || leak[idx["alloc_objects"]] != 32 {
		t.Errorf("session_new alloc %d objects, %d B, inuse %d B; want 32 allocations, more than in use", leak[idx["alloc_objects"]], leak[idx["alloc_space"]], leak[idx["inuse_space"]])
	}
}
