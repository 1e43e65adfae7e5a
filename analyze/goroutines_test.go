package analyze

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// zgoroutinesDump is the goroutine dump of examples/go/zgoroutines taken
// from its /debug/pprof/goroutine?debug=2, with wait times set as after
// half an hour: 12 decoders blocked in chan receive (one for 40 minutes,
// the others 31), main sleeping, the pprof server's goroutines.
func zgoroutinesDump(tb testing.TB) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "goroutines", "zgoroutines.txt"))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func TestParseGoroutines(t *testing.T) {
	gs, err := ParseGoroutines(bytes.NewReader(zgoroutinesDump(t)))
	if err != nil {
		t.Fatal(err)
	}
	if len(gs) != 16 {
		t.Fatalf("%d goroutines, want 16", len(gs))
	}
	var decoders int
	for _, g := range gs {
		if g.State == "chan receive" && len(g.Stack) == 1 && g.Stack[0] == "main.(*decoder).run" {
			decoders++
			if g.Wait != 31*time.Minute && g.Wait != 40*time.Minute {
				t.Errorf("goroutine %d waits %s, want 31m or 40m", g.ID, g.Wait)
			}
		}
	}
	if decoders != 12 {
		t.Errorf("%d decoders in chan receive, want 12", decoders)
	}
	if gs[1].ID != 1 || gs[1].State != "sleep" || strings.Join(gs[1].Stack, ",") != "time.Sleep,main.main" {
		t.Errorf("goroutine 1 = %+v", gs[1])
	}
}

func TestParseGoroutinesMalformed(t *testing.T) {
	for _, in := range []string{
		"",
		"hello\n",
		"goroutine x [running]:\nmain.main()\n",
		"goroutine 1 [running:\n",
		"\x00\xff\xfe goroutine",
		"goroutine 1 [running]:\nmain.main(\n\tnot a file\n",
	} {
		gs, err := ParseGoroutines(strings.NewReader(in))
		if err == nil || gs != nil {
			t.Errorf("ParseGoroutines(%q) = %d goroutines, %v; want an error", in, len(gs), err)
		}
	}
}

// leakWith is a ranked leak whose stack has the given functions.
func leakWith(kind Kind, count uint64, fns ...string) Leak {
	s := &Site{Kind: kind}
	for _, fn := range fns {
		s.Stack.Frames = append(s.Stack.Frames, &Frame{Function: fn})
	}
	return Leak{Site: s, Count: count}
}

func TestCorrelateGoroutines(t *testing.T) {
	gs, err := ParseGoroutines(bytes.NewReader(zgoroutinesDump(t)))
	if err != nil {
		t.Fatal(err)
	}
	r := &Result{Leaks: []Leak{
		// A zlib stream opened through cgo by each blocked decoder.
		leakWith(KindZlibInflate, 12, "open_inflater", "_cgo_0123abcd_Cfunc_open_inflater", "runtime.asmcgocall",
			"runtime.cgocall", "main._Cfunc_open_inflater", "main.(*decoder).run", "runtime.goexit"),
		// Allocated from main.main: the main goroutine still runs it.
		leakWith(KindMalloc, 3, "conn_buffer", "main.serve", "main.main", "runtime.main", "runtime.goexit"),
		// Only runtime and C frames: nothing to match.
		leakWith(KindMalloc, 1, "x_cgo_thread_start", "runtime.newm", "runtime.goexit"),
	}}
	CorrelateGoroutines(r, gs)
	want := []GoroutineGroup{{Count: 12, State: "chan receive", Wait: 31 * time.Minute, Function: "main.(*decoder).run"}}
	if got := r.Leaks[0].Goroutines; len(got) != 1 || got[0] != want[0] {
		t.Errorf("decoder leak: %+v, want %+v", got, want)
	}
	if s := r.Leaks[0].Goroutines[0].String(); s != "12 goroutines in chan receive for 31m in main.(*decoder).run" {
		t.Errorf("String() = %q", s)
	}
	want = []GoroutineGroup{{Count: 1, State: "sleep", Function: "time.Sleep"}}
	if got := r.Leaks[1].Goroutines; len(got) != 1 || got[0] != want[0] {
		t.Errorf("main leak: %+v, want %+v", got, want)
	}
	if got := r.Leaks[2].Goroutines; got != nil {
		t.Errorf("runtime-only leak: %+v, want none", got)
	}
	// Correlating again replaces, never appends.
	CorrelateGoroutines(r, gs)
	if n := len(r.Leaks[0].Goroutines); n != 1 {
		t.Errorf("after a second correlation: %d groups", n)
	}
}

// FuzzParseGoroutines: a malformed dump is an error, never a panic, and
// the result is nil exactly when there is an error; correlating whatever
// was parsed never panics either.
func FuzzParseGoroutines(f *testing.F) {
	dump := zgoroutinesDump(f)
	f.Add(dump)
	f.Add(dump[:len(dump)/2])
	f.Add([]byte("goroutine 1 [running]:\nmain.main()\n\t/x.go:1 +0x1\n"))
	f.Add([]byte("goroutine 7 [chan receive, 5 minutes, locked to thread]:\nmain.f(...)\n\t/x.go:3\ncreated by main.main in goroutine 1\n\t/x.go:9 +0x2\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		gs, err := ParseGoroutines(bytes.NewReader(data))
		if (err == nil) != (len(gs) > 0) {
			t.Fatalf("%d goroutines with error %v", len(gs), err)
		}
		r := &Result{Leaks: []Leak{leakWith(KindMalloc, 1, "main.main", "main.f", "runtime.goexit")}}
		CorrelateGoroutines(r, gs)
		for _, g := range r.Leaks[0].Goroutines {
			if g.Count <= 0 {
				t.Fatalf("group %+v", g)
			}
		}
	})
}

func TestGoCaller(t *testing.T) {
	frames := func(fns ...string) Stack {
		var s Stack
		for _, fn := range fns {
			inl := strings.HasSuffix(fn, "!")
			s.Frames = append(s.Frames, &Frame{Function: strings.TrimSuffix(fn, "!"), Inlined: inl})
		}
		return s
	}
	for _, tc := range []struct {
		s    Stack
		want string
	}{
		{frames("conn_buffer", "_cgo_1_Cfunc_conn_buffer", "runtime.asmcgocall", "runtime.cgocall",
			"main._Cfunc_conn_buffer", "main.(*connTable).buffer!", "main.(*connTable).open", "main.main"),
			"main.(*connTable).buffer, inlined in main.(*connTable).open"},
		{frames("open_inflater", "runtime.cgocall", "main._Cfunc_open_inflater", "main.(*decoder).run", "runtime.goexit"),
			"main.(*decoder).run"},
		{frames("leak_request_buffer", "parse_request", "main"), ""},
		{frames("x", "main._Cfunc_x", "runtime.goexit"), ""},
	} {
		if got := GoCaller(tc.s); got != tc.want {
			t.Errorf("GoCaller(%v) = %q, want %q", tc.s.Frames, got, tc.want)
		}
	}
}
