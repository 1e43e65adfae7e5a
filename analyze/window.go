package analyze

import "time"

// A long-running agent keeps each target's snapshots in Windows: tiers of
// decreasing resolution, each covering a longer span than the one before.
// Snapshot points are cumulative totals (live now, allocations and frees
// so far), so a snapshot dropped between two kept ones loses resolution,
// never counts: the memory a target's history takes is bounded by the
// tiers, not by how long it is traced.

// Tier is one resolution of Windows: snapshots at least Step apart
// (0: every one) for the last Span.
type Tier struct {
	Step, Span time.Duration
}

// DefaultTiers keep the last 15 minutes at full resolution, the last
// 6 hours at one a minute and the last 14 days at one every 30 minutes:
// at most 90+360+672 snapshots at a 10s interval.
var DefaultTiers = []Tier{
	{Step: 0, Span: 15 * time.Minute},
	{Step: time.Minute, Span: 6 * time.Hour},
	{Step: 30 * time.Minute, Span: 14 * 24 * time.Hour},
}

// Windows holds snapshots in tiers (the newest in the first).
type Windows struct {
	tiers []Tier
	snaps [][]Snapshot // per tier, oldest first
}

// NewWindows returns empty windows with these tiers (DefaultTiers when
// none).
func NewWindows(tiers []Tier) *Windows {
	if len(tiers) == 0 {
		tiers = DefaultTiers
	}
	return &Windows{tiers: tiers, snaps: make([][]Snapshot, len(tiers))}
}

// Add appends s, newer than every snapshot added before, and moves what
// fell out of a tier's span into the next tier when it is at least that
// tier's step after the next tier's newest snapshot, dropping it otherwise.
func (w *Windows) Add(s Snapshot) {
	w.snaps[0] = append(w.snaps[0], s)
	now := s.At
	for i := range w.tiers {
		t := w.tiers[i]
		n := 0
		for n < len(w.snaps[i])-1 && now-w.snaps[i][n].At > t.Span {
			n++
		}
		if n == 0 {
			continue
		}
		old := w.snaps[i][:n]
		if i+1 < len(w.tiers) {
			for _, o := range old {
				next := w.snaps[i+1]
				if len(next) == 0 || o.At-next[len(next)-1].At >= w.tiers[i+1].Step {
					w.snaps[i+1] = append(next, o)
				}
			}
		}
		clear(old)
		w.snaps[i] = append(w.snaps[i][:0], w.snaps[i][n:]...)
	}
}

// Snapshots returns every snapshot held, oldest first, in a new slice
// whose snapshots share their points with w.
func (w *Windows) Snapshots() []Snapshot {
	var out []Snapshot
	for i := len(w.snaps) - 1; i >= 0; i-- {
		out = append(out, w.snaps[i]...)
	}
	return out
}

// Len is the number of snapshots held.
func (w *Windows) Len() int {
	n := 0
	for _, t := range w.snaps {
		n += len(t)
	}
	return n
}

// Points is the number of site points held over all snapshots (40 bytes
// each).
func (w *Windows) Points() int {
	n := 0
	for _, t := range w.snaps {
		for _, s := range t {
			n += len(s.Sites)
		}
	}
	return n
}

// Coarsen halves the resolution of the oldest non-empty tier with more
// than two snapshots (every second one dropped, its newest kept) and
// reports whether it dropped any: how an agent over its memory limit
// gives up history before it gives up targets.
func (w *Windows) Coarsen() bool {
	for i := len(w.snaps) - 1; i >= 0; i-- {
		t := w.snaps[i]
		if len(t) <= 2 {
			continue
		}
		out := t[:0]
		for j := range t {
			if j%2 == 1 || j == len(t)-1 {
				out = append(out, t[j])
			}
		}
		clear(t[len(out):])
		w.snaps[i] = out
		return true
	}
	return false
}
