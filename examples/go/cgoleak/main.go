// Command cgoleak is a leakscope example target: a Go program whose
// (*connTable).open allocates C buffers through cgo, and which frees
// all of them but the connections it abandons.
//
// Ground truth with default flags (see examples/README.md):
//
//	site                          API            blocks  bytes
//	main.(*connTable).open        malloc(3072)       40  122880
//
// open allocates each buffer through conn_buffer, a C function that
// calls malloc itself. Of 200 connections, every fifth (id % 5 == 4) is
// abandoned without conn_release; the other 160 buffers are freed.
//
// The C code is compiled with -fno-omit-frame-pointer (the #cgo CFLAGS
// line below): without it, a frame-pointer walk cannot cross the C frames
// back into Go. Build with CGO_ENABLED=1:
//
//	CGO_ENABLED=1 go build -o cgoleak ./examples/go/cgoleak
package main

/*
#cgo CFLAGS: -O2 -g -fno-omit-frame-pointer
#include <stdlib.h>
#include <string.h>

// conn_buffer allocates and fills one connection's buffer. noinline and
// noipa keep it a frame of its own that calls malloc directly; the memset
// after the call keeps malloc from becoming a tail call.
__attribute__((noinline, noipa)) static void *conn_buffer(size_t n)
{
	void *p = malloc(n);
	if (p != NULL)
		memset(p, 0x5a, n);
	return p;
}

__attribute__((noinline, noipa)) static void conn_release(void *p)
{
	free(p);
}
*/
import "C"

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"time"
	"unsafe"
)

type conn struct {
	id  int
	buf unsafe.Pointer
}

// connTable owns connections and their C buffers.
type connTable struct {
	size int
	live map[int]*conn
}

// open starts a connection with a C buffer of t.size bytes.
//
//go:noinline
func (t *connTable) open(id int) *conn {
	s := &conn{id: id, buf: t.buffer()}
	t.live[id] = s
	return s
}

// buffer is small enough for the compiler to inline into open, so stacks
// through it show an inlined frame.
func (t *connTable) buffer() unsafe.Pointer {
	return C.conn_buffer(C.size_t(t.size))
}

// close ends a connection and frees its buffer.
//
//go:noinline
func (t *connTable) close(s *conn) {
	C.conn_release(s.buf)
	delete(t.live, s.id)
}

// abandon forgets a connection without freeing its buffer: the leak.
//
//go:noinline
func (t *connTable) abandon(s *conn) {
	s.buf = nil
	delete(t.live, s.id)
}

// serve opens n connections and ends them; every leakEvery-th is abandoned.
// It returns the blocks and bytes leaked.
//
//go:noinline
func serve(t *connTable, n, leakEvery int) (blocks, bytes int) {
	for id := 0; id < n; id++ {
		s := t.open(id)
		if leakEvery > 0 && id%leakEvery == leakEvery-1 {
			t.abandon(s)
			blocks++
			bytes += t.size
			continue
		}
		t.close(s)
	}
	return blocks, bytes
}

func main() {
	conns := flag.Int("conns", 200, "connections to open")
	leakEvery := flag.Int("leak-every", 5, "abandon every Nth connection (0: none)")
	size := flag.Int("size", 3072, "bytes of each connection's C buffer")
	waitFile := flag.String("wait-file", "", "before the work, wait until this file exists")
	hold := flag.Duration("hold", 0, "after the summary line, keep running this long with the leaks held")
	flag.Parse()

	if *waitFile != "" {
		for {
			if _, err := os.Stat(*waitFile); err == nil {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	t := &connTable{size: *size, live: map[int]*conn{}}
	blocks, bytes := serve(t, *conns, *leakEvery)
	fmt.Fprintf(os.Stderr, "cgoleak: leaked %d blocks, %d bytes in main.(*connTable).open; freed %d blocks; %s; pid %d\n",
		blocks, bytes, *conns-blocks, runtime.Version(), os.Getpid())
	time.Sleep(*hold)
}
