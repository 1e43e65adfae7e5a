//go:build linux && amd64

package probe

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/leakscope/leakscope/analyze"
)

// TestSeriesWhole: a series gives back the snapshots whole, as they were
// kept whole before (a copy per read, nil for none, thinned by
// analyze.ThinSnapshots), through sites that appear, change, vanish and
// return, and through thinning (over MaxSnapshots reads).
func TestSeriesWhole(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var ser series
	var want []analyze.Snapshot
	cur := map[uint64]analyze.SitePoint{}
	for r := range analyze.MaxSnapshots + 300 {
		switch {
		case r%97 == 5:
			clear(cur) // a read that lists nothing
		case r%7 == 0:
			// nothing changes
		default:
			for range rng.IntN(6) {
				id := uint64(rng.IntN(40)) + 1
				if rng.IntN(4) == 0 {
					delete(cur, id)
					continue
				}
				cur[id] = analyze.SitePoint{ID: id, LiveCount: uint64(rng.IntN(3)), LiveBytes: uint64(rng.IntN(100)), Allocs: uint64(r)}
			}
		}
		var points readPoints
		for id := uint64(1); id <= 40; id++ {
			if p, ok := cur[id]; ok {
				points.slots = append(points.slots, int32(len(points.acc)))
				points.acc = append(points.acc, p)
			}
		}
		at := time.Duration(r) * time.Second
		ser.add(points, at)
		w := analyze.Snapshot{At: at}
		if points.len() > 0 {
			w.Sites = append([]analyze.SitePoint(nil), points.acc...)
		}
		want = analyze.ThinSnapshots(append(want, w))
		if got := ser.lastSnapshot(); !reflect.DeepEqual(got, w) {
			t.Fatalf("read %d: last snapshot %+v, want %+v", r, got, w)
		}
		if r%50 == 0 || r > analyze.MaxSnapshots-5 {
			if got := ser.snapshots(); !reflect.DeepEqual(got, want) {
				t.Fatalf("read %d: %d snapshots differ from %d kept whole", r, len(got), len(want))
			}
		}
	}
	if len(want) >= analyze.MaxSnapshots+300 {
		t.Fatalf("no thinning happened (%d snapshots)", len(want))
	}
}
