package analyze

// A capture attached for days takes a snapshot every interval; each holds
// a point per site. ThinSnapshots keeps the series within bounds by
// halving the time resolution of its older half whenever it grows past
// them: recent history stays at full resolution, the first snapshot (the
// baseline) always stays, and trends, which sample at most maxPairPoints
// points anyway, keep their shape.

// Snapshot retention limits: the most snapshots, and the most site points
// over all of them (40 bytes each), a capture keeps in memory.
const (
	MaxSnapshots      = 1024
	MaxSnapshotPoints = 1 << 22
)

// ThinSnapshots returns snaps (ordered by time) within MaxSnapshots
// snapshots and MaxSnapshotPoints points: while over, every second
// snapshot of the older half is dropped, the first one kept. The last
// snapshot is always kept. It reuses snaps' array.
func ThinSnapshots(snaps []Snapshot) []Snapshot {
	return Thin(snaps, func(s *Snapshot) int { return len(s.Sites) }, nil)
}

// Thin is ThinSnapshots for snapshots in another form (a tracer's
// compact series): points is the number of points of one snapshot whole,
// and merge, when not nil, is called with each snapshot dropped and the
// one after it, which is kept, before the drop. It drops what
// ThinSnapshots drops.
func Thin[S any](snaps []S, points func(*S) int, merge func(dropped, next *S)) []S {
	total := func() int {
		n := 0
		for i := range snaps {
			n += points(&snaps[i])
		}
		return n
	}
	for len(snaps) > 2 && (len(snaps) > MaxSnapshots || total() > MaxSnapshotPoints) {
		half := len(snaps) / 2
		out := snaps[:1]
		for i := 1; i < len(snaps); i++ {
			if i < half && i%2 == 1 {
				if merge != nil {
					merge(&snaps[i], &snaps[i+1])
				}
				continue // dropped: the older half at half resolution
			}
			out = append(out, snaps[i])
		}
		clear(snaps[len(out):])
		snaps = out
	}
	return snaps
}
