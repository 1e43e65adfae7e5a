package analyze

import (
	"testing"
	"time"
)

func TestThinSnapshots(t *testing.T) {
	var snaps []Snapshot
	for i := 0; i < 5000; i++ {
		snaps = append(snaps, Snapshot{At: time.Duration(i) * time.Second, Sites: []SitePoint{{ID: 1}}})
		snaps = ThinSnapshots(snaps)
		if len(snaps) > MaxSnapshots {
			t.Fatalf("after %d snapshots: %d kept, want at most %d", i+1, len(snaps), MaxSnapshots)
		}
	}
	if snaps[0].At != 0 || snaps[len(snaps)-1].At != 4999*time.Second {
		t.Errorf("first %v, last %v: want the first and the last snapshot kept", snaps[0].At, snaps[len(snaps)-1].At)
	}
	for i := 1; i < len(snaps); i++ {
		if snaps[i].At <= snaps[i-1].At {
			t.Fatalf("snapshot %d at %v after %v: out of order", i, snaps[i].At, snaps[i-1].At)
		}
	}
	// Recent history keeps full resolution: the last 256 are consecutive.
	tail := snaps[len(snaps)-256:]
	for i := 1; i < len(tail); i++ {
		if tail[i].At-tail[i-1].At != time.Second {
			t.Fatalf("recent snapshots %v and %v are not consecutive", tail[i-1].At, tail[i].At)
		}
	}
	if len(snaps) < MaxSnapshots/2 {
		t.Errorf("%d kept, want at least %d (thinning halves the older half only)", len(snaps), MaxSnapshots/2)
	}

	// The point budget: many sites per snapshot thin earlier.
	big := make([]SitePoint, MaxSnapshotPoints/100)
	snaps = nil
	for i := 0; i < 300; i++ {
		snaps = ThinSnapshots(append(snaps, Snapshot{At: time.Duration(i), Sites: big}))
		if snapshotPoints(snaps) > MaxSnapshotPoints {
			t.Fatalf("after %d snapshots: %d points kept, want at most %d", i+1, snapshotPoints(snaps), MaxSnapshotPoints)
		}
	}
	if snaps[len(snaps)-1].At != 299 {
		t.Errorf("last snapshot %v, want 299", snaps[len(snaps)-1].At)
	}
}

// snapshotPoints counts the points snaps keep.
func snapshotPoints(snaps []Snapshot) int {
	n := 0
	for _, s := range snaps {
		n += len(s.Sites)
	}
	return n
}
