package target

import (
	"slices"
	"sort"
)

// SiteKey is a kernel site: the stack id of the call that made an
// allocation, a mapping or a thread, and its kind (enum alloc_kind).
type SiteKey struct {
	Stack uint64
	Kind  uint32
}

// MapAlloc is one mmap call (or one thread) still holding bytes: the
// mapping it made may have been cut into several pieces since, or moved
// (mremap), and it is one live allocation until its last byte is
// unmapped.
type MapAlloc struct {
	Site  SiteKey
	TS    uint64 // bpf_ktime_get_ns() of the call
	Bytes uint64
	File  string // the mapped file's path (mmap.file), "" otherwise
}

// mapPiece is a range of the target's address space mapped by a.
type mapPiece struct {
	start, end uint64
	a          *MapAlloc
}

// MapTotals are a site's totals, as the kernel keeps them for the other
// kinds (struct site_stats).
type MapTotals struct {
	LiveCount, LiveBytes, Allocs, Frees uint64
}

// mapTable keeps the target's mappings and threads made while traced,
// from the kernel's mmap_events, in the order the calls returned. It is
// exact under partial unmaps and remaps: the pieces are disjoint ranges
// sorted by start, and an unmap cuts every piece it overlaps, leaving the
// parts outside it to their allocation. Mappings it never saw (made
// before the capture, or by the allocator inside a traced call) are not
// in it, and unmapping them changes nothing.
type mapTable struct {
	page    uint64
	pieces  []mapPiece
	threads map[uint32]*MapAlloc
	totals  map[SiteKey]*MapTotals
}

func newMapTable(page uint64) *mapTable {
	return &mapTable{page: page, threads: map[uint32]*MapAlloc{}, totals: map[SiteKey]*MapTotals{}}
}

func (m *mapTable) round(n uint64) uint64 { return (n + m.page - 1) &^ (m.page - 1) }

func (m *mapTable) total(s SiteKey) *MapTotals {
	t := m.totals[s]
	if t == nil {
		t = &MapTotals{}
		m.totals[s] = t
	}
	return t
}

// release takes n bytes from a; its last byte makes it a release.
func (m *mapTable) release(a *MapAlloc, n uint64) {
	t := m.total(a.Site)
	a.Bytes -= n
	t.LiveBytes -= n
	if a.Bytes == 0 {
		t.LiveCount--
		t.Frees++
	}
}

// cut removes [start, end) from the pieces and returns what it removed,
// without counting it anywhere.
func (m *mapTable) cut(start, end uint64) []mapPiece {
	if start >= end {
		return nil
	}
	// The first piece ending after start: pieces are disjoint and
	// sorted, so their ends are sorted too.
	i := sort.Search(len(m.pieces), func(i int) bool { return m.pieces[i].end > start })
	j := i
	var removed, keep []mapPiece
	for ; j < len(m.pieces) && m.pieces[j].start < end; j++ {
		p := m.pieces[j]
		lo, hi := max(p.start, start), min(p.end, end)
		removed = append(removed, mapPiece{lo, hi, p.a})
		if p.start < lo {
			keep = append(keep, mapPiece{p.start, lo, p.a})
		}
		if hi < p.end {
			keep = append(keep, mapPiece{hi, p.end, p.a})
		}
	}
	if i == j {
		return nil
	}
	m.pieces = slices.Replace(m.pieces, i, j, keep...)
	return removed
}

// unmap is munmap(start, length): every byte of it that a traced mapping
// held is released.
func (m *mapTable) unmap(start, length uint64) {
	for _, p := range m.cut(start, start+m.round(length)) {
		m.release(p.a, p.end-p.start)
	}
}

// insert adds piece [start, end) of a; the range is free.
func (m *mapTable) insert(start, end uint64, a *MapAlloc) {
	i := sort.Search(len(m.pieces), func(i int) bool { return m.pieces[i].start >= start })
	m.pieces = slices.Insert(m.pieces, i, mapPiece{start, end, a})
}

// mmap records a new mapping of length bytes at start, made from site at
// ts, of file (a path, "" for anonymous memory). Whatever was mapped
// there is gone (MAP_FIXED): unmapped first.
func (m *mapTable) mmap(site SiteKey, ts, start, length uint64, file string) {
	length = m.round(length)
	m.unmap(start, length)
	if length == 0 {
		return
	}
	a := &MapAlloc{Site: site, TS: ts, Bytes: length, File: file}
	m.insert(start, start+length, a)
	t := m.total(site)
	t.Allocs++
	t.LiveCount++
	t.LiveBytes += length
}

// mremap moves and resizes [old, old+oldLen) to [start, start+length).
// The mapping stays the allocation it was (that of its lowest byte, when
// the range held pieces of several: mremap takes one of the kernel's
// mappings, which may have merged two of ours); bytes of the others are
// released. An old range the table never saw leaves the new one
// untraced, as the old was. fixed: the destination replaced what was
// there; keepOld: MREMAP_DONTUNMAP, the old range stays mapped.
func (m *mapTable) mremap(old, oldLen, start, length uint64, fixed, keepOld bool) {
	oldLen, length = m.round(oldLen), m.round(length)
	var a *MapAlloc
	if keepOld {
		i := sort.Search(len(m.pieces), func(i int) bool { return m.pieces[i].end > old })
		if i < len(m.pieces) && m.pieces[i].start < old+oldLen {
			a = m.pieces[i].a
		}
	} else {
		for _, p := range m.cut(old, old+oldLen) {
			if a == nil {
				a = p.a
			}
			if p.a == a {
				// Moved, not released: a keeps its count.
				a.Bytes -= p.end - p.start
				m.total(a.Site).LiveBytes -= p.end - p.start
				continue
			}
			m.release(p.a, p.end-p.start)
		}
	}
	if fixed || start != old {
		m.unmap(start, length)
	} else if length > oldLen {
		m.unmap(start+oldLen, length-oldLen) // grown in place: that range was free
	}
	if a == nil || length == 0 {
		if a != nil && a.Bytes == 0 {
			m.release(a, 0)
		}
		return
	}
	if keepOld {
		// A new mapping of a's site, the old one stays.
		m.mmap(a.Site, a.TS, start, length, a.File)
		return
	}
	m.insert(start, start+length, a)
	a.Bytes += length
	m.total(a.Site).LiveBytes += length
}

// dropAt forgets, as if never made, the allocation whose mapping holds
// addr (a thread's stack, counted as the thread's): it returns that
// mapping's bytes, 0 if none.
func (m *mapTable) dropAt(addr uint64) uint64 {
	i := sort.Search(len(m.pieces), func(i int) bool { return m.pieces[i].end > addr })
	if i == len(m.pieces) || m.pieces[i].start > addr {
		return 0
	}
	a := m.pieces[i].a
	bytes := a.Bytes
	m.pieces = slices.DeleteFunc(m.pieces, func(p mapPiece) bool { return p.a == a })
	t := m.total(a.Site)
	t.Allocs--
	t.LiveCount--
	t.LiveBytes -= bytes
	if *t == (MapTotals{}) {
		delete(m.totals, a.Site)
	}
	return bytes
}

// threadStart records thread tid started from site at ts, its stack at
// addr: clone3's lowest address and size (length > 0), or clone's stack
// pointer. The mapping holding the stack counts as the thread's, not as
// an anonymous mapping: its bytes are the thread's size, or length when
// the table never saw it mapped (a stack glibc reuses from its cache).
func (m *mapTable) threadStart(site SiteKey, ts uint64, tid uint32, addr, length uint64) {
	m.threadExit(tid) // a tid reused after an exit the table missed
	at := addr
	if length == 0 && addr > 0 {
		at = addr - 1 // a stack pointer: its mapping ends there
	}
	if n := m.dropAt(at); n > 0 {
		length = n
	}
	a := &MapAlloc{Site: site, TS: ts, Bytes: length}
	m.threads[tid] = a
	t := m.total(site)
	t.Allocs++
	t.LiveCount++
	t.LiveBytes += length
}

// threadExit records thread tid's exit; one the table never saw start is
// ignored.
func (m *mapTable) threadExit(tid uint32) {
	a, ok := m.threads[tid]
	if !ok {
		return
	}
	delete(m.threads, tid)
	t := m.total(a.Site)
	t.LiveCount--
	t.LiveBytes -= a.Bytes
	t.Frees++
}

// live calls fn with every allocation still live, once each.
func (m *mapTable) live(fn func(*MapAlloc)) {
	seen := map[*MapAlloc]bool{}
	for _, p := range m.pieces {
		if !seen[p.a] {
			seen[p.a] = true
			fn(p.a)
		}
	}
	for _, a := range m.threads {
		fn(a)
	}
}

// ranges returns the ranges of the live mappings of kind, sorted and
// disjoint (merged where they touch), and their bytes.
func (m *mapTable) ranges(kind uint32) (rs [][2]uint64, bytes uint64) {
	for _, p := range m.pieces {
		if p.a.Site.Kind != kind {
			continue
		}
		bytes += p.end - p.start
		if n := len(rs); n > 0 && rs[n-1][1] == p.start {
			rs[n-1][1] = p.end
			continue
		}
		rs = append(rs, [2]uint64{p.start, p.end})
	}
	return rs, bytes
}
