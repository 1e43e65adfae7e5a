package analyze

import (
	"math"
	"reflect"
	"testing"
)

func TestDiff(t *testing.T) {
	fn := func(names ...string) Stack {
		var s Stack
		for i, n := range names {
			s.Frames = append(s.Frames, &Frame{Address: uint64(0x1000 * (i + 1)), Function: n})
		}
		return s
	}
	old := &Capture{Sites: []Site{
		{ID: 1, Kind: KindMalloc, Stack: fn("leak_a", "main"), LiveCount: 10, LiveBytes: 1000},
		{ID: 2, Kind: KindMalloc, Stack: fn("grow", "main"), LiveCount: 5, LiveBytes: 500},
		{ID: 3, Kind: KindMalloc, Stack: fn("same", "main"), LiveCount: 1, LiveBytes: 8},
		{ID: 4, Kind: KindMalloc, Stack: fn("temp", "main"), Allocs: 9, Frees: 9},
		{ID: 5, Kind: KindMalloc, Stack: Stack{Frames: []*Frame{{Address: 0x7f0000001234, Module: "/lib/libx.so", Offset: 0x1234}}}, LiveCount: 2, LiveBytes: 20},
	}}
	newc := &Capture{Sites: []Site{
		// Other addresses, same functions.
		{ID: 11, Kind: KindMalloc, Stack: fn("grow", "main"), LiveCount: 6, LiveBytes: 900},
		{ID: 12, Kind: KindMalloc, Stack: fn("same", "main"), LiveCount: 1, LiveBytes: 8},
		{ID: 13, Kind: KindZlibInflate, Stack: fn("leak_a", "main"), LiveCount: 1, LiveBytes: 7160}, // another kind
		{ID: 14, Kind: KindMalloc, Stack: fn("temp", "main")},
		{ID: 15, Kind: KindMalloc, Stack: Stack{Frames: []*Frame{{Address: 0x7f5500001234, Module: "/lib/libx.so", Offset: 0x1234}}}, LiveCount: 1, LiveBytes: 10},
		{ID: 16, Kind: KindMalloc, Stack: Stack{Frames: []*Frame{{Address: 0x7f5500001234, Module: "/lib/libx.so", Offset: 0x1234}}}, LiveCount: 2, LiveBytes: 20},
	}}
	d := Diff(old, newc)
	wantFixed := []SiteDiff{{Kind: KindMalloc, Stack: []string{"leak_a", "main"}, Old: Held{10, 1000}}}
	wantAdded := []SiteDiff{{Kind: KindZlibInflate, Stack: []string{"leak_a", "main"}, New: Held{1, 7160}}}
	wantChanged := []SiteDiff{
		{Kind: KindMalloc, Stack: []string{"grow", "main"}, Old: Held{5, 500}, New: Held{6, 900}},
		{Kind: KindMalloc, Stack: []string{"libx.so+0x1234"}, Old: Held{2, 20}, New: Held{3, 30}},
	}
	if !reflect.DeepEqual(d.Fixed, wantFixed) {
		t.Errorf("Fixed = %+v, want %+v", d.Fixed, wantFixed)
	}
	if !reflect.DeepEqual(d.Added, wantAdded) {
		t.Errorf("Added = %+v, want %+v", d.Added, wantAdded)
	}
	if !reflect.DeepEqual(d.Changed, wantChanged) {
		t.Errorf("Changed = %+v, want %+v", d.Changed, wantChanged)
	}
	if d.Unchanged != 1 || d.Old != old || d.New != newc {
		t.Errorf("Unchanged = %d, Old, New = %p, %p", d.Unchanged, d.Old, d.New)
	}
	if c := d.Changed[0]; c.BytesDelta() != 400 || c.CountDelta() != 1 {
		t.Errorf("deltas = %d bytes, %d count", c.BytesDelta(), c.CountDelta())
	}
	if f := d.Fixed[0]; f.BytesDelta() != -1000 || f.CountDelta() != -10 {
		t.Errorf("fixed deltas = %d bytes, %d count", f.BytesDelta(), f.CountDelta())
	}

	// The gate tests what new and grown sites gained.
	match := func(spec string) []string {
		r, err := ParseRule(spec)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range MatchDiffRules(d, []Rule{r}) {
			got = append(got, string(m.Site.Kind)+" "+m.Site.Stack[0])
		}
		return got
	}
	for spec, want := range map[string][]string{
		"count>0":                {"zlib.inflate leak_a", "malloc grow", "malloc libx.so+0x1234"},
		"bytes>100":              {"zlib.inflate leak_a", "malloc grow"},
		"bytes>=400":             {"zlib.inflate leak_a", "malloc grow"},
		"bytes>400":              {"zlib.inflate leak_a"},
		"kind=malloc,count>0":    {"malloc grow", "malloc libx.so+0x1234"},
		"kind=malloc,bytes>1KiB": nil,
		"count>1":                nil,
	} {
		if got := match(spec); !reflect.DeepEqual(got, want) {
			t.Errorf("MatchDiffRules(%q) = %q, want %q", spec, got, want)
		}
	}
	for spec, ok := range map[string]bool{"count>0": true, "kind=zlib.*,bytes>1": true, "age>1s": false, "growth>1KiB/s": false} {
		r, _ := ParseRule(spec)
		if err := CheckDiffRules([]Rule{r}); (err == nil) != ok {
			t.Errorf("CheckDiffRules(%q) = %v", spec, err)
		}
	}

	same := Diff(old, old)
	if len(same.Fixed)+len(same.Added)+len(same.Changed) != 0 || same.Unchanged != 4 {
		t.Errorf("Diff of a capture with itself = %+v", same)
	}
}

func TestDiffDeltasSaturate(t *testing.T) {
	huge := SiteDiff{New: Held{Count: 1 << 63, Bytes: ^uint64(0)}}
	if huge.CountDelta() != math.MaxInt64 || huge.BytesDelta() != math.MaxInt64 {
		t.Errorf("growth = %d, %d; want both saturated at MaxInt64", huge.CountDelta(), huge.BytesDelta())
	}
	gone := SiteDiff{Old: Held{Count: ^uint64(0)}}
	if gone.CountDelta() != -math.MaxInt64 {
		t.Errorf("shrink = %d", gone.CountDelta())
	}
}
