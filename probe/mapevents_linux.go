//go:build linux && amd64

package probe

import (
	"fmt"
	"time"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/probe/kernel"
	"github.com/leakscope/leakscope/probe/target"
)

// mapTables are the target's mappings and threads (Options.Maps), read
// from the kernel's mmap_events at every snapshot, and the site of each;
// maps is nil when mappings are not traced.
type mapTables struct {
	maps   *target.Mappings
	events *kernel.MapEvents
	refs   map[target.SiteKey]siteRef
}

// drainMapsLocked applies every record waiting in mmap_events to t.mapping.maps,
// in the order the calls returned.
func (t *Tracer) drainMapsLocked() {
	if t.mapping.events == nil || t.mapping.maps == nil {
		return
	}
	if err := t.mapping.events.Drain(t.applyMapEvent); err != nil {
		t.warnOnce(fmt.Sprintf("read mapping events: %v", err))
	}
}

// applyMapEvent applies one call's record to t.mapping.maps; the first record of
// a new image forgets the sites of the last one's mappings.
func (t *Tracer) applyMapEvent(e *kernel.MapEvent) {
	if t.mapping.maps.Apply(e) {
		t.mapping.refs = map[target.SiteKey]siteRef{}
	}
}

// mapSiteLocked returns the merged site of mapping site k, resolving its
// stack when new or when it may resolve better now (refLocked, for the
// sites the kernel keeps).
func (t *Tracer) mapSiteLocked(k target.SiteKey) int {
	ref := t.mapping.refs[k]
	slot := t.resolveRefLocked(&ref, k.Stack, k.Kind)
	t.mapping.refs[k] = ref
	return slot
}

// addMapsLocked adds the mapping and thread sites to this read's points
// (readSitesLocked). Sites in a stable order: a new site's slot is
// handed out here.
func (t *Tracer) addMapsLocked() int {
	t.drainMapsLocked()
	if t.mapping.maps == nil {
		return 0
	}
	st, n := t.sites, 0
	for _, k := range t.mapping.maps.Sites() {
		v := t.mapping.maps.Totals(k)
		slot := t.mapSiteLocked(k)
		p := &st.acc[slot]
		if st.mark[slot] != st.read {
			st.mark[slot] = st.read
			*p = analyze.SitePoint{ID: st.slots[slot].id}
			n++
		}
		p.LiveCount += v.LiveCount
		p.LiveBytes += v.LiveBytes
		p.Allocs += v.Allocs
		p.Frees += v.Frees
	}
	return n
}

// mapLiveLocked adds the live mappings and threads to c.Sites' live
// allocations; site maps a merged slot to its index in c.Sites (-1:
// none).
func (t *Tracer) mapLiveLocked(c *analyze.Capture, site map[target.SiteKey]int32, nowMono uint64) {
	if t.mapping.maps == nil {
		return
	}
	files := map[int32]map[string]*analyze.MappedFile{}
	t.mapping.maps.Live(func(a *target.MapAlloc) {
		i, ok := site[a.Site]
		if !ok || i < 0 {
			return
		}
		age := time.Duration(0)
		if nowMono > a.TS {
			age = time.Duration(nowMono - a.TS)
		}
		c.Sites[i].Live = append(c.Sites[i].Live, analyze.Alloc{Size: a.Bytes, Age: age})
		if a.Site.Kind != kernel.KindMmapFile {
			return
		}
		byPath := files[i]
		if byPath == nil {
			byPath = map[string]*analyze.MappedFile{}
			files[i] = byPath
		}
		f := byPath[a.File]
		if f == nil {
			f = &analyze.MappedFile{Path: a.File}
			byPath[a.File] = f
		}
		f.Count++
		f.Bytes += a.Bytes
	})
	for i, byPath := range files {
		c.Sites[i].Files = analyze.SortFiles(byPath)
	}
}

// mapSitesOf maps each mapping site to its index in c.Sites, from
// bySlot (a merged slot's index there, -1: none).
func (t *Tracer) mapSitesOf(bySlot []int32) map[target.SiteKey]int32 {
	out := map[target.SiteKey]int32{}
	for k, ref := range t.mapping.refs {
		if ref.slot > 0 && int(ref.slot-1) < len(bySlot) {
			out[k] = bySlot[ref.slot-1]
		}
	}
	return out
}

// warnMapLossLocked warns when mapping or thread records found
// mmap_events full: those calls are missing from the mapping kinds.
func (t *Tracer) warnMapLossLocked() {
	if t.mapping.maps == nil {
		return
	}
	n, err := t.objs.Stat(kernel.StatMapEventsLost)
	if err != nil {
		return
	}
	if n > 0 {
		t.warnOnce(fmt.Sprintf("%d mapping or thread events were lost (the kernel's mmap_events buffer was full between two snapshots): mmap.anon, mmap.file and thread miss those calls", n))
	}
}
