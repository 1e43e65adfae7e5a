package probe

import "testing"

const pg = 4096

func TestMapTableExact(t *testing.T) {
	a, b := mapSite{1, 3}, mapSite{2, 3}
	check := func(m *mapTable, s mapSite, want mapTotals) {
		t.Helper()
		got := mapTotals{}
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
	check(m, a, mapTotals{liveCount: 1, liveBytes: 6 * pg, allocs: 1})
	if len(m.pieces) != 2 {
		t.Fatalf("pieces %v", m.pieces)
	}
	m.unmap(0x10000, 1) // a length is rounded to pages
	check(m, a, mapTotals{liveCount: 1, liveBytes: 5 * pg, allocs: 1})
	m.mmap(b, 2, 0x10000+4*pg, 2*pg, "") // MAP_FIXED over part of a's second piece
	check(m, a, mapTotals{liveCount: 1, liveBytes: 3 * pg, allocs: 1})
	check(m, b, mapTotals{liveCount: 1, liveBytes: 2 * pg, allocs: 1})
	m.unmap(0, 1<<30) // everything
	check(m, a, mapTotals{allocs: 1, frees: 1})
	check(m, b, mapTotals{allocs: 1, frees: 1})
	if len(m.pieces) != 0 {
		t.Fatalf("pieces left %v", m.pieces)
	}

	m = newMapTable(pg)
	m.mmap(a, 1, 0x10000, 4*pg, "")
	m.mremap(0x10000, 4*pg, 0x80000, 16*pg, false, false) // moved and grown: still one mapping
	check(m, a, mapTotals{liveCount: 1, liveBytes: 16 * pg, allocs: 1})
	m.mremap(0x80000, 16*pg, 0x80000, 2*pg, false, false) // shrunk in place
	check(m, a, mapTotals{liveCount: 1, liveBytes: 2 * pg, allocs: 1})
	m.mremap(0x90000, pg, 0xa0000, pg, false, false) // never seen: stays untraced
	check(m, a, mapTotals{liveCount: 1, liveBytes: 2 * pg, allocs: 1})
	m.mremap(0x80000, 2*pg, 0, 0, false, false)
	check(m, a, mapTotals{allocs: 1, frees: 1})

	m = newMapTable(pg)
	th := mapSite{5, 5}
	m.mmap(a, 1, 0x40000, 64*pg, "") // a thread's stack, mapped by the program
	m.threadStart(th, 2, 7, 0x40000, 60*pg)
	m.threadStart(th, 2, 8, 0x100000, 32*pg) // a stack never seen mapped
	m.threadStart(th, 2, 9, 0x200000, 0)     // clone: a stack pointer, no size
	if _, ok := m.totals[a]; ok {
		t.Errorf("the stack's mapping still counts as mmap.anon: %+v", *m.totals[a])
	}
	check(m, th, mapTotals{liveCount: 3, liveBytes: 96 * pg, allocs: 3})
	m.threadExit(8)
	m.threadExit(99) // never seen
	check(m, th, mapTotals{liveCount: 2, liveBytes: 64 * pg, allocs: 3, frees: 1})
	n := 0
	m.live(func(*mapAlloc) { n++ })
	if n != 2 {
		t.Errorf("live %d, want 2", n)
	}
}
