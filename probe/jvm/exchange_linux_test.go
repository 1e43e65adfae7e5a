package jvm

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leakscope/leakscope/internal/testutil"
)

// TestExchangeBounds runs the attach protocol's exchange against listeners
// that misbehave as a target can make them: an endless reply, no reply, a
// listener that never accepts (as the JVM's user, whose connect then finds
// the backlog full). Each ends within its bounds, saying why.
func TestExchangeBounds(t *testing.T) {
	serve := func(t *testing.T, handle func(net.Conn)) string {
		path := filepath.Join(t.TempDir(), "sock")
		l, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go handle(c)
			}
		}()
		return path
	}
	req := request("printflag", []string{"PreserveFramePointer"})
	uid, gid := os.Geteuid(), os.Getegid()

	t.Run("flood", func(t *testing.T) {
		path := serve(t, func(c net.Conn) {
			defer c.Close()
			b := make([]byte, 64<<10)
			for {
				if _, err := c.Write(b); err != nil {
					return
				}
			}
		})
		start := time.Now()
		_, err := exchange(context.Background(), path, uid, gid, req)
		if err == nil || err.Error() != "reply exceeded 1 MiB" {
			t.Errorf("endless reply: %v, want \"reply exceeded 1 MiB\"", err)
		}
		if d := time.Since(start); d > ReplyTimeout {
			t.Errorf("endless reply took %v", d)
		}
	})
	t.Run("silent", func(t *testing.T) {
		path := serve(t, func(c net.Conn) { time.Sleep(time.Minute); c.Close() })
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := exchange(ctx, path, uid, gid, req)
		if d := time.Since(start); d > time.Second {
			t.Errorf("silent listener took %v", d)
		}
		if err == nil || !strings.HasPrefix(err.Error(), "no reply within ") {
			t.Errorf("silent listener: %v, want \"no reply within ...\"", err)
		}
		// Without a deadline of the caller's, ReplyTimeout bounds it.
		start = time.Now()
		_, err = exchange(context.Background(), path, uid, gid, req)
		if d := time.Since(start); d < ReplyTimeout || d > ReplyTimeout+time.Second {
			t.Errorf("silent listener took %v, want ReplyTimeout (%v)", d, ReplyTimeout)
		}
		if err == nil || err.Error() != "no reply within 2s" {
			t.Errorf("silent listener: %v, want \"no reply within 2s\"", err)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		path := serve(t, func(c net.Conn) { time.Sleep(time.Minute); c.Close() })
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		start := time.Now()
		if _, err := exchange(ctx, path, uid, gid, req); err == nil {
			t.Error("cancelled exchange succeeded")
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("cancelled exchange took %v", d)
		}
	})
	t.Run("backlog", func(t *testing.T) {
		if os.Geteuid() != 0 {
			testutil.SkipOrFail(t, "connecting as another user needs root")
		}
		path := filepath.Join(t.TempDir(), "sock")
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
			t.Fatal(err)
		}
		if err := unix.Listen(fd, 0); err != nil {
			t.Fatal(err)
		}
		os.Chmod(path, 0o777)
		os.Chmod(filepath.Dir(path), 0o755)
		start := time.Now()
		var last error
		for i := 0; i < 4 && last == nil; i++ { // fill the backlog
			var c net.Conn
			if c, last = dialAs(path, 65534, 65534, time.Now().Add(200*time.Millisecond)); last == nil {
				defer c.Close()
			}
		}
		if last == nil || !strings.Contains(last.Error(), "backlog full") {
			t.Errorf("connect to a full backlog: %v, want \"backlog full\"", last)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("connects took %v", d)
		}
	})
}
