package target

import "testing"

const pg = 4096

func TestMapTableExact(t *testing.T) {
	a, b := SiteKey{1, 3}, SiteKey{2, 3}
	check := func(m *mapTable, s SiteKey, want MapTotals) {
		t.Helper()
		got := MapTotals{}
		if p := m.totals[s]; p != nil {
			got = *p
		}
		if got != want {
			t.Errorf("site %v: %+v, want %+v", s, got, want)
		}
	}
	m := newMapTable(pg)
	m.mmap(a, 1, 0x10000, 8*pg, "")
	m.unmap(0x10000+2*pg, 2*pg) // a hole in the middle: one mapping, two pieces
	check(m, a, MapTotals{LiveCount: 1, LiveBytes: 6 * pg, Allocs: 1})
	if len(m.pieces) != 2 {
		t.Fatalf("pieces %v", m.pieces)
	}
	m.unmap(0x10000, 1) // a length is rounded to pages
	check(m, a, MapTotals{LiveCount: 1, LiveBytes: 5 * pg, Allocs: 1})
	m.mmap(b, 2, 0x10000+4*pg, 2*pg, "") // MAP_FIXED over part of a's second piece
	check(m, a, MapTotals{LiveCount: 1, LiveBytes: 3 * pg, Allocs: 1})
	check(m, b, MapTotals{LiveCount: 1, LiveBytes: 2 * pg, Allocs: 1})
	m.unmap(0, 1<<30) // everything
	check(m, a, MapTotals{Allocs: 1, Frees: 1})
	check(m, b, MapTotals{Allocs: 1, Frees: 1})
	if len(m.pieces) != 0 {
		t.Fatalf("pieces left %v", m.pieces)
	}

	m = newMapTable(pg)
	m.mmap(a, 1, 0x10000, 4*pg, "")
	m.mremap(0x10000, 4*pg, 0x80000, 16*pg, false, false) // moved and grown: still one mapping
	check(m, a, MapTotals{LiveCount: 1, LiveBytes: 16 * pg, Allocs: 1})
	m.mremap(0x80000, 16*pg, 0x80000, 2*pg, false, false) // shrunk in place
	check(m, a, MapTotals{LiveCount: 1, LiveBytes: 2 * pg, Allocs: 1})
	m.mremap(0x90000, pg, 0xa0000, pg, false, false) // never seen: stays untraced
	check(m, a, MapTotals{LiveCount: 1, LiveBytes: 2 * pg, Allocs: 1})
	m.mremap(0x80000, 2*pg, 0, 0, false, false)
	check(m, a, MapTotals{Allocs: 1, Frees: 1})

	m = newMapTable(pg)
	th := SiteKey{5, 5}
	m.mmap(a, 1, 0x40000, 64*pg, "") // a thread's stack, mapped by the program
	m.threadStart(th, 2, 7, 0x40000, 60*pg)
	m.threadStart(th, 2, 8, 0x100000, 32*pg) // a stack never seen mapped
	m.threadStart(th, 2, 9, 0x200000, 0)     // clone: a stack pointer, no size
	if _, ok := m.totals[a]; ok {
		t.Errorf("the stack's mapping still counts as mmap.anon: %+v", *m.totals[a])
	}
	check(m, th, MapTotals{LiveCount: 3, LiveBytes: 96 * pg, Allocs: 3})
	m.threadExit(8)
	m.threadExit(99) // never seen
	check(m, th, MapTotals{LiveCount: 2, LiveBytes: 64 * pg, Allocs: 3, Frees: 1})
	n := 0
	m.live(func(*MapAlloc) { n++ })
	if n != 2 {
		t.Errorf("live %d, want 2", n)
	}
}
