// goprog prints the logical frames of its own stack as the Go runtime
// sees them (runtime.CallersFrames, which expands inlined calls): the
// ground truth for the .gopclntab reader.
package main

import (
	"fmt"
	"runtime"
)

//go:noinline
func sink() []uintptr {
	pcs := make([]uintptr, 32)
	return pcs[:runtime.Callers(2, pcs)]
}

// leaf and middle are inlined into (*table).outer.
func leaf() []uintptr { return sink() } // line:leaf

func middle() []uintptr { return leaf() } // line:middle

type table struct{ n int }

//go:noinline
func (t *table) outer() []uintptr {
	t.n++
	return middle() // line:outer
}

func main() {
	frames := runtime.CallersFrames((&table{}).outer())
	for {
		fr, more := frames.Next()
		fmt.Printf("%s|%s|%d\n", fr.Function, fr.File, fr.Line)
		if !more {
			break
		}
	}
}
