package report

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/leakscope/leakscope/analyze"
)

// benchResult ranks a synthetic capture of sites sites with 10 live
// allocations each, keeping top leaks (0: all). Stacks are 8 frames: a leaf
// of the site's own, a caller shared by 100 sites and six outer frames from
// a pool of 50, so the pprof writer interns as it would for a real capture.
func benchResult(sites, top int) *analyze.Result {
	rng := rand.New(rand.NewPCG(3, 4))
	const d = time.Minute
	c := &analyze.Capture{
		Target:    analyze.Target{Pid: 4242, Command: []string{"synthetic"}, Runtime: analyze.RuntimeNative},
		StartedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Duration:  d,
		Sites:     make([]analyze.Site, sites),
	}
	modules := []string{"/usr/bin/server", "/usr/lib/libfoo.so", "/lib/x86_64-linux-gnu/libz.so.1", "/lib/x86_64-linux-gnu/libc.so.6"}
	for _, m := range modules {
		c.Objects = append(c.Objects, analyze.Object{Path: m, BuildID: fmt.Sprintf("%040x", len(m)), FramePointer: "yes", FPShare: 1})
	}
	outer := make([]analyze.Frame, 50)
	for i := range outer {
		outer[i] = analyze.Frame{Address: 0x500000 + uint64(i)*0x40, Function: fmt.Sprintf("outer_%d", i), Module: modules[i%len(modules)], Offset: 0x1000 + uint64(i)*0x40, File: "src/outer.c", Line: 10 + i}
	}
	const per = 10
	for i := range c.Sites {
		frames := []*analyze.Frame{
			{Address: 0x400000 + uint64(i)*0x10, Function: fmt.Sprintf("site_%d", i), Module: modules[0], Offset: uint64(i) * 0x10, File: "src/site.c", Line: i % 5000},
			{Address: 0x300000 + uint64(i%1000)*0x10, Function: fmt.Sprintf("caller_%d", i%1000), Module: modules[0], Offset: uint64(i%1000) * 0x10, File: "src/caller.c", Line: i % 1000},
		}
		for j := 0; j < 6; j++ {
			frames = append(frames, &outer[rng.IntN(len(outer))]) // shared, as a reader shares them
		}
		live := make([]analyze.Alloc, per)
		var bytes uint64
		for k := range live {
			live[k] = analyze.Alloc{Size: 16 + rng.Uint64N(4081), Age: time.Duration(rng.Int64N(int64(d)))}
			bytes += live[k].Size
		}
		frees := rng.Uint64N(1000)
		c.Sites[i] = analyze.Site{
			ID:        uint64(i + 1),
			Kind:      analyze.KindMalloc,
			Stack:     analyze.Stack{Frames: frames},
			LiveCount: per,
			LiveBytes: bytes,
			Allocs:    per + frees,
			Frees:     frees,
			Live:      live,
		}
	}
	return analyze.Rank(c, analyze.Options{Top: top})
}

// BenchmarkRender renders a 100k-site result (1M live allocations) in each
// format: with the CLI's default --top 10, and with every leak (--top 0).
// pprof, and html's icicle graph, always hold every site, whatever --top.
func BenchmarkRender(b *testing.B) {
	const sites = 100_000
	for _, top := range []int{10, 0} {
		r := benchResult(sites, top)
		name := fmt.Sprintf("sites=100k/top=%d", top)
		b.Run("text/"+name, func(b *testing.B) {
			benchWrite(b, func(w io.Writer) error { return Text(w, r, TextOptions{Top: 10}) })
		})
		b.Run("json/"+name, func(b *testing.B) {
			benchWrite(b, func(w io.Writer) error { return JSON(w, r) })
		})
		b.Run("html/"+name, func(b *testing.B) {
			benchWrite(b, func(w io.Writer) error { return HTML(w, r) })
		})
		if top == 0 {
			b.Run("pprof/sites=100k", func(b *testing.B) {
				benchWrite(b, func(w io.Writer) error { return Pprof(w, r) })
			})
		}
	}
}

// benchWrite runs render into a reused buffer and reports the output size.
func benchWrite(b *testing.B, render func(io.Writer) error) {
	b.ReportAllocs()
	var buf bytes.Buffer
	for b.Loop() {
		buf.Reset()
		if err := render(&buf); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(buf.Len()), "out-bytes")
}
