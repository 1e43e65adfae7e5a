// Command gomaps is a leakscope example target: a Go program that maps
// memory itself with syscall.Mmap and keeps some of it, next to mapping
// churn that unmaps everything, while its heap grows (the Go runtime's
// own mappings, which leakscope labels runtime).
//
// Ground truth with default flags (leakscope --maps; see
// examples/README.md):
//
//	site            kind        live   bytes     how
//	main.keepAnon   mmap.anon      4   256 KiB   4 x syscall.Mmap 64 KiB, never unmapped
//	main.keepFile   mmap.file      2    32 KiB   2 x syscall.Mmap of a 16 KiB file (-file)
//	main.churn      mmap.anon      0       0     100 x syscall.Mmap 32 KiB, each unmapped
//
// It needs no cgo:
//
//	go build -o gomaps ./examples/go/gomaps
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"time"
)

// kept holds what the program keeps: the leaked mappings and the heap.
var kept [][]byte

// keepAnon maps n anonymous regions of size bytes and keeps them.
//
//go:noinline
func keepAnon(n, size int) {
	for range n {
		b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
		if err != nil {
			die("mmap", err)
		}
		b[0] = 1
		kept = append(kept, b)
	}
}

// keepFile maps the file at path, size bytes, n times and keeps the
// mappings; the file is closed.
//
//go:noinline
func keepFile(path string, n, size int) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		die("open", err)
	}
	defer f.Close()
	if err := f.Truncate(int64(size)); err != nil {
		die("truncate", err)
	}
	for range n {
		b, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
		if err != nil {
			die("mmap file", err)
		}
		kept = append(kept, b)
	}
}

// churn maps and unmaps n regions of size bytes.
//
//go:noinline
func churn(n, size int) {
	for range n {
		b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
		if err != nil {
			die("mmap", err)
		}
		b[0] = 1
		if err := syscall.Munmap(b); err != nil {
			die("munmap", err)
		}
	}
}

// grow allocates n MiB of Go heap and keeps it: the runtime maps arenas.
//
//go:noinline
func grow(n int) {
	for range n {
		b := make([]byte, 1<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		kept = append(kept, b)
	}
}

func die(what string, err error) {
	fmt.Fprintf(os.Stderr, "gomaps: %s: %v\n", what, err)
	os.Exit(1)
}

func main() {
	file := flag.String("file", "", "the file to map (required)")
	heap := flag.Int("heap", 96, "MiB of Go heap to allocate and keep")
	waitFile := flag.String("wait-file", "", "before the work, wait until this file exists")
	hold := flag.Duration("hold", 0, "after the summary line, keep running this long with the mappings held")
	flag.Parse()
	if *file == "" {
		die("flags", fmt.Errorf("-file is required"))
	}
	if *waitFile != "" {
		for {
			if _, err := os.Stat(*waitFile); err == nil {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	keepAnon(4, 64<<10)
	keepFile(*file, 2, 16<<10)
	churn(100, 32<<10)
	grow(*heap)
	fmt.Fprintf(os.Stderr, "gomaps: leaked 4 anonymous mappings (256 KiB) in main.keepAnon, 2 of %s (32 KiB) in main.keepFile; unmapped 100 in main.churn; %d MiB of heap kept; %s; pid %d\n",
		*file, *heap, runtime.Version(), os.Getpid())
	time.Sleep(*hold)
}
