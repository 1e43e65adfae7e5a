package symbolize

import (
	"debug/elf"
	"errors"
	"fmt"
	"github.com/leakscope/leakscope/internal/testutil"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
)

// benchObjects are the objects symbolized: libjvm.so (24 MiB, ~100k
// functions, the largest object a JVM target maps) when a JDK is installed,
// and libc always.
func benchObjects(b *testing.B) []string {
	var paths []string
	jvms, _ := filepath.Glob("/usr/lib/jvm/*/lib/server/libjvm.so")
	seen := map[string]bool{}
	for _, p := range jvms {
		real, err := filepath.EvalSymlinks(p)
		if err == nil && !seen[real] {
			seen[real] = true
			paths = append(paths, real)
			break // one JDK is enough
		}
	}
	if len(paths) == 0 {
		b.Log("no /usr/lib/jvm/*/lib/server/libjvm.so: benchmarking libc only")
	}
	libc, err := filepath.EvalSymlinks("/lib/x86_64-linux-gnu/libc.so.6")
	if err != nil {
		testutil.SkipOrFail(b, fmt.Sprintf("no libc at /lib/x86_64-linux-gnu/libc.so.6: %v", err))
	}
	return append(paths, libc)
}

// benchAddresses returns n ELF virtual addresses inside sized function
// symbols of path, chosen with a fixed seed: what return addresses into the
// object look like.
func benchAddresses(b *testing.B, path string, n int) []uint64 {
	f, err := elf.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		b.Fatal(err)
	}
	dyn, err := f.DynamicSymbols()
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		b.Fatal(err)
	}
	var funcs []elf.Symbol
	for _, s := range slices.Concat(syms, dyn) {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Size > 0 && s.Section != elf.SHN_UNDEF {
			funcs = append(funcs, s)
		}
	}
	if len(funcs) == 0 {
		testutil.SkipOrFail(b, fmt.Sprintf("%s has no sized function symbols", path))
	}
	rng := rand.New(rand.NewPCG(5, 6))
	addrs := make([]uint64, n)
	for i := range addrs {
		s := funcs[rng.IntN(len(funcs))]
		addrs[i] = s.Value + 1 + rng.Uint64N(s.Size)
	}
	return addrs
}

// BenchmarkSymbolize measures, per object:
//   - load: parsing the ELF and building the symbol tables (Cache.Object),
//     the first-load cost every newly mapped object pays;
//   - framepointers: the frame-pointer census leakscope runs on every
//     executable mapping at attach (FramePointerShare), on a fresh load;
//   - 100k/warm: symbolizing 100k addresses with the object loaded;
//   - 100k/cold: a fresh cache, load and 100k addresses, all included.
func BenchmarkSymbolize(b *testing.B) {
	const n = 100_000
	for _, path := range benchObjects(b) {
		name := filepath.Base(path)
		addrs := benchAddresses(b, path, n)

		b.Run(name+"/load", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c := NewCache()
				if _, err := c.Object(path); err != nil {
					b.Fatal(err)
				}
				c.Close()
			}
		})
		b.Run(name+"/framepointers", func(b *testing.B) {
			b.ReportAllocs()
			var funcs int
			for b.Loop() {
				c := NewCache()
				o, err := c.Object(path)
				if err != nil {
					b.Fatal(err)
				}
				_, funcs = o.FramePointerShare()
				c.Close()
			}
			b.ReportMetric(float64(funcs), "funcs")
		})
		b.Run(name+"/100k/warm", func(b *testing.B) {
			c := NewCache()
			defer c.Close()
			o, err := c.Object(path)
			if err != nil {
				b.Fatal(err)
			}
			o.Symbolize(addrs[0]) // builds the line index, if any, outside the loop
			b.ReportAllocs()
			named := 0
			for b.Loop() {
				named = symbolizeAll(o, addrs)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/addr")
			b.ReportMetric(100*float64(named)/n, "%named")
		})
		b.Run(name+"/100k/cold", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c := NewCache()
				o, err := c.Object(path)
				if err != nil {
					b.Fatal(err)
				}
				symbolizeAll(o, addrs)
				c.Close()
			}
		})
	}
}

// symbolizeAll symbolizes every address, as the return address of a call
// (minus one, as the tracer does), and returns how many got a function name.
func symbolizeAll(o *Object, addrs []uint64) int {
	named := 0
	for _, a := range addrs {
		if fn, _, _ := o.Symbolize(a - 1); fn != "" {
			named++
		}
	}
	return named
}
