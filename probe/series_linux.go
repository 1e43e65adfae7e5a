//go:build linux && amd64

package probe

import (
	"cmp"
	"slices"
	"time"

	"github.com/leakscope/leakscope/analyze"
)

// series is the tracer's snapshots, kept compactly until Stop: the first
// whole, each later one as the points that changed since the one before.
// 100k sites are 3.8 MB a snapshot whole; while a target allocates on new
// stacks, a snapshot whole repeats every site the one before listed, and
// the series held 17-21 MB of the ~70 MB live while tracing 1M
// allocations on 100k stacks, which set the heap goal Stop allocates
// against. Stop makes them whole (snapshots), once the tables that
// resolved them are gone.
type series struct {
	snaps []seriesSnap
	// last is the newest snapshot whole, by ascending ID (nil when it
	// lists no site), for the next change list and LastSnapshot.
	last []analyze.SitePoint
}

// seriesSnap is one snapshot of a series.
type seriesSnap struct {
	at time.Duration
	n  int // points of the snapshot whole
	// set holds the points new or changed since the snapshot before (the
	// first snapshot: all of them), gone the IDs that one listed and this
	// one does not; both by ascending ID.
	set  []analyze.SitePoint
	gone []uint64
}

func (s *series) len() int { return len(s.snaps) }

// lastSnapshot is the newest snapshot whole; its points are shared.
func (s *series) lastSnapshot() analyze.Snapshot {
	return analyze.Snapshot{At: s.snaps[len(s.snaps)-1].at, Sites: s.last}
}

// add appends the points of a read (by ascending ID, each once) and thins
// the series as analyze.ThinSnapshots thins snapshots whole.
func (s *series) add(points readPoints, at time.Duration) {
	n := points.len()
	whole := func() []analyze.SitePoint {
		if n == 0 {
			return nil
		}
		w := make([]analyze.SitePoint, n)
		for i := range w {
			w[i] = points.at(i)
		}
		return w
	}
	sn := seriesSnap{at: at, n: n}
	if len(s.snaps) == 0 {
		sn.set = whole()
		s.last = sn.set
	} else {
		prev := s.last
		i, j := 0, 0
		for i < len(prev) || j < n {
			switch {
			case j == n || (i < len(prev) && prev[i].ID < points.at(j).ID):
				sn.gone = append(sn.gone, prev[i].ID)
				i++
			case i == len(prev) || points.at(j).ID < prev[i].ID:
				sn.set = append(sn.set, points.at(j))
				j++
			default:
				if p := points.at(j); prev[i] != p {
					sn.set = append(sn.set, p)
				}
				i++
				j++
			}
		}
		sn.set, sn.gone = trim(sn.set), trim(sn.gone)
		if len(sn.set) > 0 || len(sn.gone) > 0 {
			s.last = whole()
		}
	}
	s.snaps = analyze.Thin(append(s.snaps, sn), func(sn *seriesSnap) int { return sn.n }, compose)
}

// trim returns s without spare capacity.
func trim[T any](s []T) []T {
	if cap(s) == len(s) {
		return s
	}
	return append([]T(nil), s...)
}

// compose makes next's changes those since the snapshot before dropped,
// which is dropped (analyze.Thin).
func compose(dropped, next *seriesSnap) {
	set := make([]analyze.SitePoint, 0, len(dropped.set)+len(next.set))
	gone := make([]uint64, 0, len(dropped.gone)+len(next.gone))
	goneNext := func(id uint64) bool {
		_, ok := searchID(next.gone, id)
		return ok
	}
	setNext := func(id uint64) bool {
		k, _ := slices.BinarySearchFunc(next.set, id, func(p analyze.SitePoint, id uint64) int { return cmp.Compare(p.ID, id) })
		return k < len(next.set) && next.set[k].ID == id
	}
	// Points: next's, and dropped's that next neither changed nor lost.
	i := 0
	for _, p := range dropped.set {
		for i < len(next.set) && next.set[i].ID < p.ID {
			set = append(set, next.set[i])
			i++
		}
		if i < len(next.set) && next.set[i].ID == p.ID {
			continue // next's point wins
		}
		if !goneNext(p.ID) {
			set = append(set, p)
		}
	}
	set = append(set, next.set[i:]...)
	// Gone: dropped's that next did not list again, and next's.
	k := 0
	for _, id := range dropped.gone {
		for k < len(next.gone) && next.gone[k] < id {
			gone = append(gone, next.gone[k])
			k++
		}
		if k < len(next.gone) && next.gone[k] == id {
			continue
		}
		if !setNext(id) {
			gone = append(gone, id)
		}
	}
	gone = append(gone, next.gone[k:]...)
	next.set, next.gone = trim(set), trim(gone)
	if len(next.set) == 0 {
		next.set = nil
	}
	if len(next.gone) == 0 {
		next.gone = nil
	}
}

// searchID finds id in ids, ascending.
func searchID(ids []uint64, id uint64) (int, bool) {
	return slices.BinarySearch(ids, id)
}

// snapshots returns the series whole, as the tracer listed them before
// it kept them compactly: each snapshot's points by ascending ID, nil for
// none, and a snapshot that changed nothing sharing the slice of the one
// before.
func (s *series) snapshots() []analyze.Snapshot {
	if len(s.snaps) == 0 {
		return nil
	}
	out := make([]analyze.Snapshot, len(s.snaps))
	var cur []analyze.SitePoint
	for k, sn := range s.snaps {
		switch {
		case k == 0:
			cur = sn.set
		case len(sn.set) > 0 || len(sn.gone) > 0:
			cur = apply(cur, sn.set, sn.gone)
		}
		out[k] = analyze.Snapshot{At: sn.at, Sites: cur}
	}
	return out
}

// apply returns a new slice: cur with the points of set put in (by ID) and
// the IDs of gone taken out, by ascending ID; nil when empty.
func apply(cur, set []analyze.SitePoint, gone []uint64) []analyze.SitePoint {
	merge := func(emit func(analyze.SitePoint)) {
		i, j := 0, 0
		for i < len(cur) || j < len(set) {
			var p analyze.SitePoint
			switch {
			case j == len(set) || (i < len(cur) && cur[i].ID < set[j].ID):
				p = cur[i]
				i++
			case i == len(cur) || set[j].ID < cur[i].ID:
				p = set[j]
				j++
			default:
				p = set[j]
				i++
				j++
			}
			if _, ok := searchID(gone, p.ID); !ok {
				emit(p)
			}
		}
	}
	n := 0
	merge(func(analyze.SitePoint) { n++ })
	if n == 0 {
		return nil
	}
	out := make([]analyze.SitePoint, 0, n)
	merge(func(p analyze.SitePoint) { out = append(out, p) })
	return out
}
