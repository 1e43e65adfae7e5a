package analyze

import (
	"testing"
	"time"
)

func TestWindowsBounded(t *testing.T) {
	tiers := []Tier{{0, time.Minute}, {10 * time.Second * 6, time.Hour}, {30 * time.Minute, 24 * time.Hour}}
	w := NewWindows(tiers)
	const step = 10 * time.Second
	var last time.Duration
	for i := 0; i < 14*24*360; i++ { // two weeks at 10s
		last = time.Duration(i) * step
		w.Add(Snapshot{At: last, Sites: []SitePoint{{ID: 1, LiveBytes: uint64(i)}}})
	}
	// 7 in the first minute, 60 in the hour, 48 in the day, give or take
	// the boundaries.
	if n := w.Len(); n > 7+61+49 {
		t.Fatalf("%d snapshots held after two weeks, want at most %d", n, 7+61+49)
	}
	snaps := w.Snapshots()
	for i := 1; i < len(snaps); i++ {
		if snaps[i].At <= snaps[i-1].At {
			t.Fatalf("snapshot %d at %v not after %v", i, snaps[i].At, snaps[i-1].At)
		}
	}
	if snaps[len(snaps)-1].At != last {
		t.Errorf("newest %v, want %v", snaps[len(snaps)-1].At, last)
	}
	if span := last - snaps[0].At; span < 23*time.Hour || span > 25*time.Hour {
		t.Errorf("history spans %v, want about a day", span)
	}
	// The hour tier is one a minute.
	var inHour int
	for _, s := range snaps {
		if last-s.At > time.Minute && last-s.At <= time.Hour {
			inHour++
		}
	}
	if inHour < 55 || inHour > 61 {
		t.Errorf("%d snapshots in the hour tier, want ~59", inHour)
	}
}

func TestWindowsCoarsen(t *testing.T) {
	w := NewWindows(nil)
	for i := 0; i < 10; i++ {
		w.Add(Snapshot{At: time.Duration(i) * time.Second, Sites: make([]SitePoint, 3)})
	}
	if w.Points() != 30 {
		t.Fatalf("points %d", w.Points())
	}
	if !w.Coarsen() || w.Len() != 5 {
		t.Fatalf("after Coarsen %d snapshots, want 5", w.Len())
	}
	if s := w.Snapshots(); s[len(s)-1].At != 9*time.Second {
		t.Errorf("newest dropped: %v", s[len(s)-1].At)
	}
	for w.Coarsen() {
	}
	if w.Len() != 2 {
		t.Errorf("%d left, want 2", w.Len())
	}
}
