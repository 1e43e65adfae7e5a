//go:build linux && amd64

package probe

import (
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/probe/kernel"
	"github.com/leakscope/leakscope/probe/procfs"
)

// attachMaps attaches, with Options.Maps, the exits of mmap, munmap and
// mremap (their own tracepoints: no program runs for other syscalls) and
// the thread start and exit programs. (fexit on __x64_sys_mmap would
// need no tracefs, but the kernel refuses to load it here: EPERM.)
func (t *Tracer) attachMaps() error {
	if !t.opts.Maps {
		return nil
	}
	t.maps = newMapTable(uint64(os.Getpagesize()))
	t.mapRefs = map[mapSite]siteRef{}
	if err := ensureTracefs(); err != nil {
		return err
	}
	for _, tp := range []struct {
		name string
		prog *ebpf.Program
	}{
		{"sys_exit_mmap", t.objs.Program(kernel.MmapExit)},
		{"sys_exit_munmap", t.objs.Program(kernel.MunmapExit)},
		{"sys_exit_mremap", t.objs.Program(kernel.MremapExit)},
	} {
		l, err := link.Tracepoint("syscalls", tp.name, tp.prog, nil)
		if err != nil {
			return fmt.Errorf("attach tracepoint syscalls:%s: %w", tp.name, err)
		}
		t.links = append(t.links, l)
	}
	if err := t.attachTracing(t.objs.Program(kernel.ThreadStart)); err != nil {
		return err
	}
	return t.attachTracing(t.objs.Program(kernel.ThreadExit))
}

// drainMapsLocked applies every record waiting in mmap_events to t.maps,
// in the order the calls returned.
func (t *Tracer) drainMapsLocked() {
	if t.mapEvents == nil || t.maps == nil {
		return
	}
	if err := t.mapEvents.Drain(t.applyMapEvent); err != nil {
		t.warnOnce(fmt.Sprintf("read mapping events: %v", err))
	}
}

// applyMapEvent applies one call's record to t.maps. A record of an image
// the target exec'd away from starts the table again: its mappings went
// with the exec.
func (t *Tracer) applyMapEvent(e *kernel.MapEvent) {
	if e.Gen != t.mapGen {
		t.mapGen = e.Gen
		t.maps = newMapTable(t.maps.page)
		t.mapRefs = map[mapSite]siteRef{}
	}
	m := t.maps
	uncounted := e.How&kernel.MapHowUncounted != 0
	fixed := e.How&kernel.MapHowFixed != 0
	switch e.Op {
	case kernel.MapOpMap:
		if uncounted {
			m.unmap(e.Addr, e.Len) // the allocator's MAP_FIXED: only what it replaced
			return
		}
		kind, file := kernel.KindMmapAnon, ""
		if e.How&kernel.MapHowFile != 0 {
			kind, file = kernel.KindMmapFile, t.files.path(t.pid, e.Addr, e.Dev, e.Ino)
		}
		m.mmap(mapSite{e.Stack, kind}, e.At, e.Addr, e.Len, file)
	case kernel.MapOpUnmap:
		m.unmap(e.Addr, e.Len)
	case kernel.MapOpRemap:
		if uncounted {
			// realloc's own mremap: its block, not a traced mapping;
			// a destination it replaced is unmapped.
			if fixed {
				m.unmap(e.Addr, e.Len)
			}
			return
		}
		m.mremap(e.OldAddr, e.OldLen, e.Addr, e.Len, fixed, e.How&kernel.MapHowDontUnmap != 0)
	case kernel.MapOpThread:
		m.threadStart(mapSite{e.Stack, kernel.KindThread}, e.At, e.Tid, e.Addr, e.Len)
	case kernel.MapOpThreadExit:
		m.threadExit(e.Tid)
	}
}

// mapSiteLocked returns the merged site of mapping site k, resolving its
// stack when new or when it may resolve better now (refLocked, for the
// sites the kernel keeps).
func (t *Tracer) mapSiteLocked(k mapSite) int {
	ref := t.mapRefs[k]
	slot := t.resolveRefLocked(&ref, k.stack, k.kind)
	t.mapRefs[k] = ref
	return slot
}

// addMapsLocked adds the mapping and thread sites to this read's points
// (readSitesLocked). Sites in a stable order: a new site's slot is
// handed out here.
func (t *Tracer) addMapsLocked() int {
	t.drainMapsLocked()
	if t.maps == nil {
		return 0
	}
	keys := make([]mapSite, 0, len(t.maps.totals))
	for k := range t.maps.totals {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b mapSite) int {
		if a.kind != b.kind {
			return int(a.kind) - int(b.kind)
		}
		switch {
		case a.stack < b.stack:
			return -1
		case a.stack > b.stack:
			return 1
		}
		return 0
	})
	st, n := t.sites, 0
	for _, k := range keys {
		v := t.maps.totals[k]
		slot := t.mapSiteLocked(k)
		p := &st.acc[slot]
		if st.mark[slot] != st.read {
			st.mark[slot] = st.read
			*p = analyze.SitePoint{ID: st.slots[slot].id}
			n++
		}
		p.LiveCount += v.liveCount
		p.LiveBytes += v.liveBytes
		p.Allocs += v.allocs
		p.Frees += v.frees
	}
	return n
}

// mapLiveLocked adds the live mappings and threads to c.Sites' live
// allocations; site maps a merged slot to its index in c.Sites (-1:
// none).
func (t *Tracer) mapLiveLocked(c *analyze.Capture, site map[mapSite]int32, nowMono uint64) {
	if t.maps == nil {
		return
	}
	files := map[int32]map[string]*analyze.MappedFile{}
	t.maps.live(func(a *mapAlloc) {
		i, ok := site[a.site]
		if !ok || i < 0 {
			return
		}
		age := time.Duration(0)
		if nowMono > a.ts {
			age = time.Duration(nowMono - a.ts)
		}
		c.Sites[i].Live = append(c.Sites[i].Live, analyze.Alloc{Size: a.bytes, Age: age})
		if a.site.kind != kernel.KindMmapFile {
			return
		}
		byPath := files[i]
		if byPath == nil {
			byPath = map[string]*analyze.MappedFile{}
			files[i] = byPath
		}
		f := byPath[a.file]
		if f == nil {
			f = &analyze.MappedFile{Path: a.file}
			byPath[a.file] = f
		}
		f.Count++
		f.Bytes += a.bytes
	})
	for i, byPath := range files {
		c.Sites[i].Files = analyze.SortFiles(byPath)
	}
}

// maxFilePaths bounds the file paths a tracer keeps for mmap.file
// mappings: a target mapping more distinct files gets the rest named by
// inode.
const maxFilePaths = 4096

// fileKey is a mapped file's identity: its device (the kernel's s_dev)
// and inode.
type fileKey struct {
	dev uint32
	ino uint64
}

// filePaths names the files of mmap.file mappings: from the target's
// /proc/PID/maps, read when a mapping of a file not seen before is
// applied (the mapping is usually still there: a leaked one is).
type filePaths struct {
	byKey map[fileKey]string
}

// path returns the path of the file (dev, ino) mapped at addr in pid; a
// file whose mapping is gone from maps is named by its inode.
func (fp *filePaths) path(pid int, addr uint64, dev uint32, ino uint64) string {
	k := fileKey{dev, ino}
	if p, ok := fp.byKey[k]; ok {
		return p
	}
	name := fmt.Sprintf("inode %d on device %d:%d", ino, dev>>20, dev&(1<<20-1))
	if ms, err := procfs.ReadMaps(pid); err == nil {
		for _, m := range ms {
			if m.Inode == ino && m.Path != "" && (addr >= m.Start && addr < m.End || m.Dev == fmt.Sprintf("%02x:%02x", dev>>20, dev&(1<<20-1))) {
				name = m.Path
				if m.Deleted {
					name += " (deleted)"
				}
				break
			}
		}
	}
	if fp.byKey == nil {
		fp.byKey = map[fileKey]string{}
	}
	if len(fp.byKey) < maxFilePaths {
		fp.byKey[k] = name
	}
	return name
}

// mapSitesOf maps each mapping site to its index in c.Sites, from
// bySlot (a merged slot's index there, -1: none).
func (t *Tracer) mapSitesOf(bySlot []int32) map[mapSite]int32 {
	out := map[mapSite]int32{}
	for k, ref := range t.mapRefs {
		if ref.slot > 0 && int(ref.slot-1) < len(bySlot) {
			out[k] = bySlot[ref.slot-1]
		}
	}
	return out
}

// warnMapLossLocked warns when mapping or thread records found
// mmap_events full: those calls are missing from the mapping kinds.
func (t *Tracer) warnMapLossLocked() {
	if t.maps == nil {
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

// ensureTracefs mounts tracefs at /sys/kernel/tracing when neither it
// nor debugfs is mounted (a container, a minimal system): the syscall
// tracepoints are attached by their id, read there.
func ensureTracefs() error {
	if tracefsMounted() {
		return nil
	}
	if err := unix.Mount("nodev", "/sys/kernel/tracing", "tracefs", 0, ""); err != nil {
		return fmt.Errorf("mount tracefs at /sys/kernel/tracing (the syscall tracepoints of --maps): %w", err)
	}
	return nil
}
