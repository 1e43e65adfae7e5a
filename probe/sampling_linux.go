//go:build linux && amd64

package probe

import (
	"math"

	"github.com/leakscope/leakscope/analyze"
)

// scaleSampled turns a sampled capture's malloc sites into estimates: each
// live allocation gets its weight, and the site's totals (and its series)
// are scaled by the same factor. Resources are never sampled.
func scaleSampled(c *analyze.Capture, mean uint64) {
	c.SampleBytes = mean
	factor := map[uint64]float64{}
	for i := range c.Sites {
		s := &c.Sites[i]
		if s.Kind != analyze.KindMalloc || len(s.Live) == 0 {
			continue
		}
		var count, bytes float64
		s.LiveWeights = make([]float64, len(s.Live))
		for j := range s.Live {
			w := analyze.SampleWeight(s.Live[j].Size, mean)
			s.LiveWeights[j] = w
			count += w
			bytes += w * float64(s.Live[j].Size)
		}
		f := count / float64(len(s.Live))
		factor[s.ID] = f
		s.LiveCount, s.LiveBytes = uint64(math.Round(count)), uint64(math.Round(bytes))
		s.Allocs = uint64(math.Round(float64(s.Allocs) * f))
		s.Frees = uint64(math.Round(float64(s.Frees) * f))
	}
	// Consecutive snapshots may share one slice (appendSnapshotLocked):
	// each is scaled once.
	scaled := map[*analyze.SitePoint]bool{}
	for i := range c.Snapshots {
		if ps := c.Snapshots[i].Sites; len(ps) > 0 {
			if scaled[&ps[0]] {
				continue
			}
			scaled[&ps[0]] = true
		}
		for j := range c.Snapshots[i].Sites {
			p := &c.Snapshots[i].Sites[j]
			if f, ok := factor[p.ID]; ok {
				p.LiveCount = uint64(math.Round(float64(p.LiveCount) * f))
				p.LiveBytes = uint64(math.Round(float64(p.LiveBytes) * f))
				p.Allocs = uint64(math.Round(float64(p.Allocs) * f))
				p.Frees = uint64(math.Round(float64(p.Frees) * f))
			}
		}
	}
}
