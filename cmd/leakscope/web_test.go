package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer the server and the test can share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestWebUI serves a capture in pprof's web UI on a free loopback port,
// reads its flame graph and top pages, and stops it with the context, as
// Ctrl-C does.
func TestWebUI(t *testing.T) {
	capture := writeTestCapture(t, "leaky")
	var stdout, stderr syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- execute(ctx, []string{"report", "--http", "127.0.0.1:0", capture}, ioStreams{In: strings.NewReader(""), Out: &stdout, Err: &stderr})
	}()

	var base string
	serving := regexp.MustCompile(`serving .* at (http://127\.0\.0\.1:\d+)/ui/ until Ctrl-C`)
	for deadline := time.Now().Add(20 * time.Second); base == ""; time.Sleep(20 * time.Millisecond) {
		if m := serving.FindStringSubmatch(stderr.String()); m != nil {
			base = m[1]
		}
		select {
		case code := <-done:
			t.Fatalf("report --http exited %d before serving: %s", code, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("not serving after 20s: %s", stderr.String())
		}
	}

	client := &http.Client{Timeout: 10 * time.Second}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := client.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(body)
	}
	// The root redirects to /ui/, which redirects to the flame graph.
	for _, path := range []string{"/", "/ui/", "/ui/top"} {
		code, body := get(path)
		if code != http.StatusOK {
			t.Errorf("GET %s: %d", path, code)
		}
		for _, want := range []string{"foo_buffer_new", "cache_put"} {
			if !strings.Contains(body, want) {
				t.Errorf("GET %s lacks the leaking function %s", path, want)
			}
		}
	}
	if code, _ := get("/ui/saveconfig"); code != http.StatusNotFound {
		t.Errorf("GET /ui/saveconfig: %d, want 404 (the UI writes no files)", code)
	}
	if code, _ := get("/ui/disasm?f=foo_buffer_new"); code == http.StatusOK {
		t.Errorf("GET /ui/disasm succeeded; leakscope opens no object files")
	}

	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d after Ctrl-C, want 0: %s", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("report --http still running 10s after Ctrl-C")
	}
	if stdout.String() != "" {
		t.Errorf("stdout = %q, want nothing", stdout.String())
	}
	if _, err := client.Get(base + "/ui/"); err == nil {
		t.Error("server still answers after shutdown")
	}
}

func TestWebRefusesRemote(t *testing.T) {
	capture := writeTestCapture(t, "empty")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--http", "0.0.0.0:0"}, "--http 0.0.0.0:0 is not a loopback address"},
		{[]string{"--http", "192.0.2.1:80"}, "add --http-allow-remote"},
		{[]string{"--http", "[::]:0"}, "not a loopback address"},
		{[]string{"--http", "example.com:80"}, "not a loopback address"},
		{[]string{"--http", "nonsense"}, `--http "nonsense": want HOST:PORT`},
		{[]string{"--http", "127.0.0.1:0", "-o", "x.html"}, "does not combine with -o"},
		{[]string{"--http", "127.0.0.1:0", "--fail-on", "count>0"}, "does not combine"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			io, out, errb := streams()
			code := execute(context.Background(), append(append([]string{"report"}, tc.args...), capture), io)
			if code != 2 || out.Len() != 0 || !strings.Contains(errb.String(), tc.want) || strings.Count(errb.String(), "\n") != 1 {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2 and one line with %q", code, out.String(), errb.String(), tc.want)
			}
		})
	}

	for addr, want := range map[string]string{
		"8080":           "127.0.0.1:8080",
		":8080":          "127.0.0.1:8080",
		"localhost:0":    "localhost:0",
		"[::1]:9":        "[::1]:9",
		"127.0.0.2:7":    "127.0.0.2:7",
		"0.0.0.0:8080":   "",
		"10.1.2.3:8080":  "",
		"[::]:8080":      "",
		"example.com:80": "",
	} {
		got, err := listenAddr("--http", addr, false)
		if (err == nil) != (want != "") || got != want {
			t.Errorf("listenAddr(%q) = %q, %v; want %q", addr, got, err, want)
		}
		if got, err := listenAddr("--http", addr, true); err != nil || got == "" {
			t.Errorf("listenAddr(%q, allowRemote) = %q, %v", addr, got, err)
		}
	}
}

// A request from a remote client, or naming a host other than loopback
// (DNS rebinding), is refused; pprof's settings routes are not served, nor
// the source view to remote clients.
func TestWebMux(t *testing.T) {
	handlers := map[string]http.Handler{
		"/":           http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "flame graph") }),
		"/saveconfig": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "saved") }),
		"/source":     http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "source") }),
	}
	for _, tc := range []struct {
		remote, url string
		allowRemote bool
		want        int
	}{
		{"127.0.0.1:5000", "http://127.0.0.1:8080/ui/", false, http.StatusOK},
		{"[::1]:5000", "http://localhost:8080/ui/", false, http.StatusOK},
		{"192.0.2.7:5000", "http://127.0.0.1:8080/ui/", false, http.StatusForbidden},
		{"127.0.0.1:5000", "http://attacker.example:8080/ui/", false, http.StatusForbidden},
		{"192.0.2.7:5000", "http://leaks.example:8080/ui/", true, http.StatusOK},
		{"127.0.0.1:5000", "http://127.0.0.1:8080/ui/saveconfig", false, http.StatusNotFound},
		{"127.0.0.1:5000", "http://127.0.0.1:8080/ui/source", false, http.StatusOK},
		{"192.0.2.7:5000", "http://leaks.example:8080/ui/source", true, http.StatusNotFound},
		{"127.0.0.1:5000", "http://127.0.0.1:8080/ui/nosuchpage", false, http.StatusNotFound},
		{"127.0.0.1:5000", "http://127.0.0.1:8080/", false, http.StatusTemporaryRedirect},
	} {
		req := httptest.NewRequest("GET", tc.url, nil)
		req.RemoteAddr = tc.remote
		rec := httptest.NewRecorder()
		webMux(handlers, tc.allowRemote).ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("GET %s from %s, allowRemote %v: %d, want %d", tc.url, tc.remote, tc.allowRemote, rec.Code, tc.want)
		}
	}
}
