package analyze

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// Sizes of the synthetic capture the targets are stated for: 100k
// stacks holding 1M live allocations (10 each).
const (
	synthSites = 100_000
	synthLive  = 1_000_000
)

// synthCapture returns a capture of sites sites holding live allocations
// between them, with snapshots evenly spaced snapshots (0 for none), built
// from a fixed seed so every run ranks the same data. Stacks are 8 frames:
// a leaf function of the site's own, a caller shared by 100 sites, and six
// outer frames from a pool of 50, in 5 modules, as real captures share
// their outer frames.
func synthCapture(sites, live, snapshots int) *Capture {
	rng := rand.New(rand.NewPCG(1, 2))
	const d = time.Minute
	c := &Capture{
		Target:    Target{Pid: 4242, Command: []string{"synthetic"}, Runtime: RuntimeNative},
		StartedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Duration:  d,
		Sites:     make([]Site, sites),
	}
	modules := []string{"/usr/bin/server", "/usr/lib/libfoo.so", "/usr/lib/libbar.so", "/lib/x86_64-linux-gnu/libz.so.1", "/lib/x86_64-linux-gnu/libc.so.6"}
	outer := make([]Frame, 50)
	for i := range outer {
		outer[i] = Frame{Address: 0x500000 + uint64(i)*0x40, Function: fmt.Sprintf("outer_%d", i), Module: modules[i%len(modules)], Offset: 0x1000 + uint64(i)*0x40, File: "src/outer.c", Line: 10 + i}
	}
	per := live / sites
	allocs := make([]Alloc, per*sites) // one backing array, as a reader would build
	for i := range c.Sites {
		frames := make([]*Frame, 0, 8)
		frames = append(frames,
			&Frame{Address: 0x400000 + uint64(i)*0x10, Function: fmt.Sprintf("site_%d", i), Module: modules[0], Offset: uint64(i) * 0x10, File: "src/site.c", Line: i % 5000},
			&Frame{Address: 0x300000 + uint64(i%1000)*0x10, Function: fmt.Sprintf("caller_%d", i%1000), Module: modules[0], Offset: uint64(i%1000) * 0x10, File: "src/caller.c", Line: i % 1000},
		)
		for j := 0; j < 6; j++ {
			frames = append(frames, &outer[rng.IntN(len(outer))]) // shared, as a reader shares them
		}
		kind := KindMalloc
		if i%10 == 0 {
			kind = KindZlibInflate
		}
		lv := allocs[i*per : (i+1)*per : (i+1)*per]
		var bytes uint64
		for k := range lv {
			lv[k] = Alloc{Size: 16 + rng.Uint64N(4081), Age: time.Duration(rng.Int64N(int64(d)))}
			bytes += lv[k].Size
		}
		frees := rng.Uint64N(1000)
		c.Sites[i] = Site{
			ID:        uint64(i + 1),
			Kind:      kind,
			Stack:     Stack{Frames: frames},
			LiveCount: uint64(per),
			LiveBytes: bytes,
			Allocs:    uint64(per) + frees,
			Frees:     frees,
			Live:      lv,
		}
	}
	for j := 0; j < snapshots; j++ {
		s := Snapshot{At: d * time.Duration(j+1) / time.Duration(snapshots), Sites: make([]SitePoint, len(c.Sites))}
		for i, site := range c.Sites {
			// Half the sites grow to their final value, half plateau.
			f := uint64(j + 1)
			if i%2 == 1 {
				f = min(f*2, uint64(snapshots))
			}
			s.Sites[i] = SitePoint{
				ID:        site.ID,
				LiveCount: site.LiveCount * f / uint64(snapshots),
				LiveBytes: site.LiveBytes * f / uint64(snapshots),
				Allocs:    site.Allocs * f / uint64(snapshots),
				Frees:     site.Frees * f / uint64(snapshots),
			}
		}
		c.Snapshots = append(c.Snapshots, s)
	}
	return c
}

// BenchmarkRank ranks 100k sites holding 1M live allocations, keeping the
// CLI's default top 10: without snapshots (no trend), and with 10 and 60
// snapshots (a one-minute capture at the default 1s interval). With a top,
// only the sites that can still rank are fitted a trend; keeping every leak
// (top=0, as --fail-on rules rank) fits every site and writes every
// site's reasons.
func BenchmarkRank(b *testing.B) {
	for _, snaps := range []int{0, 10, 60} {
		c := synthCapture(synthSites, synthLive, snaps)
		tops := []int{10}
		if snaps != 10 {
			tops = append(tops, 0)
		}
		for _, top := range tops {
			b.Run(fmt.Sprintf("sites=100k/live=1M/snapshots=%d/top=%d", snaps, top), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					r := Rank(c, Options{Top: top})
					if len(r.Leaks) == 0 {
						b.Fatal("no leaks ranked")
					}
				}
			})
		}
	}
}

// BenchmarkCaptureFile writes and reads a capture file of 100k sites and
// 1M live allocations with 10 snapshots: the cost of --save at the end of a
// capture and of `leakscope report CAPTURE` before ranking.
func BenchmarkCaptureFile(b *testing.B) {
	c := synthCapture(synthSites, synthLive, 10)
	var file bytes.Buffer
	if err := writeCapture(&file, c); err != nil {
		b.Fatal(err)
	}
	b.Logf("capture file: %.1f MiB", float64(file.Len())/(1<<20))
	b.Run("write/sites=100k/live=1M/snapshots=10", func(b *testing.B) {
		b.ReportAllocs()
		var buf bytes.Buffer
		for b.Loop() {
			buf.Reset()
			if err := writeCapture(&buf, c); err != nil {
				b.Fatal(err)
			}
		}
		b.SetBytes(int64(buf.Len()))
	})
	b.Run("read/sites=100k/live=1M/snapshots=10", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(file.Len()))
		for b.Loop() {
			got, err := ReadCapture(bytes.NewReader(file.Bytes()))
			if err != nil {
				b.Fatal(err)
			}
			if len(got.Sites) != synthSites {
				b.Fatalf("read %d sites, want %d", len(got.Sites), synthSites)
			}
		}
	})
}
