//go:build linux && amd64

package probe

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/testutil"
)

// Debian's redis-server (its jemalloc, a real server nobody here wrote),
// attached while it runs: 1000 SETs of 20,000-byte values and DELs of
// every second key, sent over its socket. The server keeps each value in
// an sds string of one malloc, 20,006 bytes (its 5-byte sdshdr16 and the
// terminating NUL): leakscope must show exactly the 500 values DBSIZE
// counts as live, made by 1000 allocations of which 500 were freed, and
// the server serves on after the detach.
func TestRedisServerAttached(t *testing.T) {
	testutil.RequireBPF(t)
	server, err := exec.LookPath("redis-server")
	if err != nil {
		testutil.SkipOrFail(t, "redis-server not found (apt-get install redis-server)")
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "redis.sock")
	cmd := exec.Command(server, "--port", "0", "--unixsocket", sock, "--unixsocketperm", "700",
		"--save", "", "--appendonly", "no", "--dir", dir, "--daemonize", "no")
	log, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	var conn net.Conn
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if conn, err = net.Dial("unix", sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(log.Name())
			t.Fatalf("redis-server did not listen on %s: %v\n%s", sock, err, b)
		}
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	do := func(args ...string) string {
		t.Helper()
		var b strings.Builder
		fmt.Fprintf(&b, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
		}
		if _, err := conn.Write([]byte(b.String())); err != nil {
			t.Fatal(err)
		}
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimRight(line, "\r\n")
	}
	if got := do("PING"); got != "+PONG" {
		t.Fatalf("PING: %q", got)
	}

	tr, err := Attach(cmd.Process.Pid, Options{Warnf: func(string, ...any) {}})
	if err != nil {
		t.Fatal(err)
	}
	value := strings.Repeat("v", 20000)
	const keys = 1000
	for i := range keys {
		if got := do("SET", fmt.Sprintf("key:%d", i), value); got != "+OK" {
			t.Fatalf("SET: %q", got)
		}
	}
	for i := 0; i < keys; i += 2 {
		if got := do("DEL", fmt.Sprintf("key:%d", i)); got != ":1" {
			t.Fatalf("DEL: %q", got)
		}
	}
	if got := do("DBSIZE"); got != fmt.Sprintf(":%d", keys/2) {
		t.Fatalf("DBSIZE: %q, want %d keys", got, keys/2)
	}
	c, err := tr.Stop()
	if err != nil {
		t.Fatal(err)
	}
	checkNoLoss(t, c)
	if c.Lost.FreesMissed != 0 {
		t.Errorf("%d frees missed", c.Lost.FreesMissed)
	}
	const size = 20000 + 5 + 1
	var live, allocs, frees uint64
	for _, s := range c.Sites {
		if s.Kind != analyze.KindMalloc {
			continue
		}
		n := uint64(0)
		for _, a := range s.Live {
			if a.Size == size {
				n++
			}
		}
		if n > 0 {
			live += n
			allocs += s.Allocs
			frees += s.Frees
		}
	}
	if live != keys/2 || allocs != keys || frees != keys/2 {
		t.Errorf("values: %d blocks of %d bytes live, their sites made %d and freed %d; want %d live of %d made, %d freed",
			live, size, allocs, frees, keys/2, keys, keys/2)
	}
	// Detached, the server serves on.
	if got := do("DBSIZE"); got != fmt.Sprintf(":%d", keys/2) {
		t.Errorf("DBSIZE after the detach: %q", got)
	}
}
