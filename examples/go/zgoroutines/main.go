// Command zgoroutines is a leakscope example target: goroutines that each
// open a zlib inflate stream through cgo and then block forever on a
// channel nobody sends on, so their streams are never ended. It serves
// net/http/pprof, so their goroutine dump can be set beside the leak
// (leakscope --goroutines).
//
// Ground truth with default flags (see examples/README.md), all opened by
// open_inflater, called from main.(*decoder).run:
//
//	kind          count  bytes
//	zlib.inflate     12  12 × 7160 = 85920   (inflate_state, from inflateInit2_)
//	malloc           12  12 × 112  = 1344    (the z_stream itself, calloc)
//
// plus 4 streams opened and ended at once by main (nothing outstanding).
// It prints two lines on stderr: where it serves pprof, at once, and a
// summary once the work is done:
//
//	zgoroutines: pprof on 127.0.0.1:PORT
//	zgoroutines: 12 goroutines blocked with 12 inflate streams; 4 ended; go1.26.8; pid PID
//
// Build with CGO_ENABLED=1 and zlib's headers (zlib1g-dev):
//
//	CGO_ENABLED=1 go build -o zgoroutines ./examples/go/zgoroutines
package main

/*
#cgo CFLAGS: -O2 -g -fno-omit-frame-pointer
#cgo LDFLAGS: -lz
#include <stdlib.h>
#include <zlib.h>

// open_inflater allocates a z_stream and starts inflating into it (zlib
// or gzip). It returns NULL if either fails.
__attribute__((noinline, noipa)) static z_stream *open_inflater(void)
{
	z_stream *s = calloc(1, sizeof *s);
	if (s == NULL)
		return NULL;
	if (inflateInit2(s, 15 + 32) != Z_OK) {
		free(s);
		return NULL;
	}
	return s;
}

__attribute__((noinline, noipa)) static void close_inflater(z_stream *s)
{
	inflateEnd(s);
	free(s);
}
*/
import "C"

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"runtime"
	"sync"
	"time"
)

// decoder owns one zlib stream and decodes what arrives on in.
type decoder struct {
	stream *C.z_stream
	in     chan []byte
}

// run opens the decoder's stream and consumes input until in is closed.
// Nobody ever sends on or closes in for the leaking decoders, so they
// block here forever with their stream open.
//
//go:noinline
func (d *decoder) run(opened *sync.WaitGroup) {
	d.stream = C.open_inflater()
	opened.Done()
	for range d.in {
	}
	C.close_inflater(d.stream)
}

// ended opens a stream and ends it at once: the control.
//
//go:noinline
func ended() {
	C.close_inflater(C.open_inflater())
}

func main() {
	n := flag.Int("goroutines", 12, "decoders that block forever with their stream open")
	closed := flag.Int("ended", 4, "streams opened and ended")
	addr := flag.String("addr", "127.0.0.1:0", "where to serve /debug/pprof/ (port 0: any free port, printed)")
	waitFile := flag.String("wait-file", "", "before the work, wait until this file exists")
	hold := flag.Duration("hold", 0, "after the summary line, exit after this long (0: run until killed)")
	flag.Parse()

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "zgoroutines: %v\n", err)
		os.Exit(2)
	}
	fmt.Fprintf(os.Stderr, "zgoroutines: pprof on %s\n", ln.Addr())
	go http.Serve(ln, nil)

	if *waitFile != "" {
		for {
			if _, err := os.Stat(*waitFile); err == nil {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	var opened sync.WaitGroup
	decoders := make([]*decoder, *n)
	for i := range decoders {
		decoders[i] = &decoder{in: make(chan []byte)}
		opened.Add(1)
		go decoders[i].run(&opened)
	}
	opened.Wait()
	for range *closed {
		ended()
	}
	fmt.Fprintf(os.Stderr, "zgoroutines: %d goroutines blocked with %d inflate streams; %d ended; %s; pid %d\n",
		*n, *n, *closed, runtime.Version(), os.Getpid())
	if *hold > 0 {
		time.Sleep(*hold)
		return
	}
	select {}
}
