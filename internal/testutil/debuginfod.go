package testutil

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Debuginfod starts elfutils' debuginfod server (Debian's package
// debuginfod; make deps installs it) on a free port of 127.0.0.1, serving
// the ELF files under dir, and waits until it serves the debug file of
// every build ID in ids. It returns the server's URL; the server is
// stopped at the end of the test. A missing debuginfod goes through
// SkipOrFail.
func Debuginfod(tb testing.TB, dir string, ids ...string) string {
	tb.Helper()
	bin, err := exec.LookPath("debuginfod")
	if err != nil {
		SkipOrFail(tb, "needs elfutils' debuginfod server (apt-get install debuginfod, or make deps)")
	}
	port := FreePort(tb)
	work := tb.TempDir()
	logPath := filepath.Join(work, "log")
	logFile, err := os.Create(logPath)
	if err != nil {
		tb.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(bin, "-F", "-p", fmt.Sprint(port), "-d", filepath.Join(work, "db.sqlite"),
		"-t", "1", "-g", "0", "-c", "1", dir)
	// No federation (DEBUGINFOD_URLS) and a client cache of its own.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + work, "XDG_CACHE_HOME=" + work}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start debuginfod: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	log := func() string { b, _ := os.ReadFile(logPath); return string(b) }
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(60 * time.Second)
	// /metrics answers once the server listens; then each file, once
	// the scan indexed it.
	paths := []string{"/metrics"}
	for _, id := range ids {
		paths = append(paths, "/buildid/"+id+"/debuginfo")
	}
	for _, p := range paths {
		for {
			// It answers GET only.
			resp, err := client.Get(url + p)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			select {
			case <-exited:
				tb.Fatalf("debuginfod exited before serving %s:\n%s", p, log())
			default:
			}
			if time.Now().After(deadline) {
				tb.Fatalf("debuginfod did not serve %s within 60s (last: %v):\n%s", p, err, log())
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return url
}

// FreePort returns a TCP port of 127.0.0.1 nothing listened on a moment
// ago.
func FreePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("find a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
