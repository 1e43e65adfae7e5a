package symbolize

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leakscope/leakscope/internal/testutil"
)

// strippedProg builds testdata/prog.c with -g and a build ID, and returns
// the unstripped build, a stripped copy and leaf_alloc's vaddr.
func strippedProg(t *testing.T) (full, stripped string, leaf uint64) {
	t.Helper()
	full = compile(t, "gcc", "prog.c", "-g", "-O0", "-fno-omit-frame-pointer", "-Wl,--build-id")
	stripped = filepath.Join(t.TempDir(), "prog")
	run(t, "strip", "-o", stripped, full)
	leaf = mustLookup(t, mustObject(t, full), "leaf_alloc")
	return full, stripped, leaf
}

// openWith opens path in a new cache that fetches from d.
func openWith(t *testing.T, d *Debuginfod, path string) *Object {
	t.Helper()
	c := NewCache()
	t.Cleanup(func() { c.Close() })
	c.UseDebuginfod(d)
	o, err := c.Object(path)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestDebuginfodServer names a stripped program's code from elfutils'
// debuginfod serving its unstripped build, then from the cache alone.
func TestDebuginfodServer(t *testing.T) {
	full, stripped, leaf := strippedProg(t)
	serve := t.TempDir()
	run(t, "cp", full, filepath.Join(serve, "prog"))
	id := mustObject(t, full).BuildID
	url := testutil.Debuginfod(t, serve, id)

	cache := filepath.Join(t.TempDir(), "cache")
	o := openWith(t, &Debuginfod{URLs: []string{url}, CacheDir: cache}, stripped)
	if o.BuildID != id {
		t.Fatalf("stripped build id %s, want %s", o.BuildID, id)
	}
	// The first call asks for the file and does not wait for it.
	if fn, _, _ := o.Symbolize(leaf + 1); fn != "" {
		t.Fatalf("Symbolize before the fetch = %q, want nothing (a stripped program)", fn)
	}
	if !o.cache.WaitDebug(30 * time.Second) {
		t.Fatal("fetch did not end within 30s")
	}
	info := o.Debuginfo()
	if !o.Fetched() || info.Err != nil || info.Pending || info.Missing {
		t.Fatalf("after the fetch: Fetched %v, %+v", o.Fetched(), info)
	}
	src, line := full+".c", markers(t, "prog.c")["leaf_alloc"]
	if fn, file, l := o.Symbolize(leaf + 1); fn != "leaf_alloc" || file != src || l != line {
		t.Errorf("Symbolize(leaf_alloc+1) = %q, %s:%d; want leaf_alloc, %s:%d", fn, file, l, src, line)
	}
	want := filepath.Join(cache, id, "debuginfo")
	if info.Path != want {
		t.Errorf("Path = %q, want %q", info.Path, want)
	}
	st, err := os.Stat(want)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("cached file: %v, %v; want mode 0600", st, err)
	}

	// A server that is gone: the cache answers.
	o2 := openWith(t, &Debuginfod{URLs: []string{"http://127.0.0.1:1"}, CacheDir: cache}, stripped)
	o2.Symbolize(leaf + 1)
	o2.cache.WaitDebug(10 * time.Second)
	if fn, _, _ := o2.Symbolize(leaf + 1); fn != "leaf_alloc" {
		t.Errorf("from the cache: Symbolize = %q, want leaf_alloc (%+v)", fn, o2.Debuginfo())
	}
}

// TestDebuginfodHostile serves what a hostile or broken server could: each
// is refused, nothing is cached, and the code stays unnamed.
func TestDebuginfodHostile(t *testing.T) {
	_, stripped, leaf := strippedProg(t)
	other := compile(t, "gcc", "tiny.c", "-g", "-Os", "-nostdlib", "-static", "-Wl,--build-id")
	otherData, err := os.ReadFile(other)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		handler  http.HandlerFunc
		maxBytes int64
		want     string
	}{
		{"not found", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }, 0, "404 Not Found"},
		{"not elf", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("<html>hello</html>")) }, 0, "not an ELF file"},
		{"other build id", func(w http.ResponseWriter, r *http.Request) { w.Write(otherData) }, 0, "want " + mustObject(t, stripped).BuildID},
		{"too large", func(w http.ResponseWriter, r *http.Request) { w.Write(otherData) }, 100, "over the limit of 100"},
		{"too large, no length", func(w http.ResponseWriter, r *http.Request) {
			w.(http.Flusher).Flush() // chunked: no Content-Length
			w.Write(otherData)
		}, 100, "over the limit of 100 bytes"},
		{"redirect", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://192.0.2.1/x", http.StatusFound)
		}, 0, "redirects are not followed"},
		{"slow", func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		}, 0, "no answer within"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			cache := filepath.Join(t.TempDir(), "cache")
			d := &Debuginfod{URLs: []string{srv.URL}, CacheDir: cache, MaxBytes: tc.maxBytes, Timeout: 300 * time.Millisecond}
			o := openWith(t, d, stripped)
			o.Symbolize(leaf + 1)
			if !o.cache.WaitDebug(10 * time.Second) {
				t.Fatal("fetch did not end within 10s")
			}
			info := o.Debuginfo()
			if info.Err == nil || !strings.Contains(info.Err.Error(), tc.want) {
				t.Errorf("Err = %v, want one saying %q", info.Err, tc.want)
			}
			if fn, _, _ := o.Symbolize(leaf + 1); fn != "" || o.Fetched() || !info.Missing {
				t.Errorf("Symbolize = %q, Fetched %v, Missing %v: want unnamed", fn, o.Fetched(), info.Missing)
			}
			if _, err := os.Stat(cache); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("cache directory: %v, want none created", err)
			}
		})
	}
}

// TestDebuginfodNotConfigured: without a server the object says so.
func TestDebuginfodNotConfigured(t *testing.T) {
	_, stripped, leaf := strippedProg(t)
	o := mustObject(t, stripped)
	o.Symbolize(leaf + 1)
	if info := o.Debuginfo(); !errors.Is(info.Err, ErrNoDebuginfod) || !info.Missing || !info.Asked {
		t.Errorf("Debuginfo = %+v, want Missing, Asked and ErrNoDebuginfod", info)
	}
}

func TestParseDebuginfodURLs(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  bool
	}{
		{"", nil, false},
		{"  https://debuginfod.debian.net  http://127.0.0.1:8002/ ", []string{"https://debuginfod.debian.net", "http://127.0.0.1:8002"}, false},
		{"file:///usr/lib/debug", nil, true},
		{"debuginfod.debian.net", nil, true},
		{"http://host/?q=1", nil, true},
	} {
		got, err := ParseDebuginfodURLs(tc.in)
		if (err != nil) != tc.err || strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("ParseDebuginfodURLs(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestValidBuildID(t *testing.T) {
	for id, want := range map[string]bool{
		"": false, "a": false, "ab": true, "0123456789abcdef": true, "AB": false,
		"../x": false, strings.Repeat("ab", 64): true, strings.Repeat("ab", 65): false,
	} {
		if got := validBuildID(id); got != want {
			t.Errorf("validBuildID(%q) = %v, want %v", id, got, want)
		}
	}
}
