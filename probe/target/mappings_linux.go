//go:build linux && amd64

package target

import (
	"fmt"
	"slices"

	"github.com/leakscope/leakscope/probe/kernel"
	"github.com/leakscope/leakscope/probe/procfs"
)

// Mappings are the mappings and threads a traced process made while
// traced (the mapping kinds: mmap.anon, mmap.file, thread), kept from the
// kernel's mmap_events records in the order the calls returned, exact
// under partial unmaps, MAP_FIXED and mremap. A record of an image the
// process exec'd away from starts them again: its mappings went with the
// exec.
type Mappings struct {
	pid   int
	gen   uint32
	table *mapTable
	files filePaths
}

// NewMappings returns the empty mappings of process pid, whose pages are
// page bytes.
func NewMappings(pid int, page uint64) *Mappings {
	return &Mappings{pid: pid, table: newMapTable(page)}
}

// Apply applies one call's record. It reports whether the record was the
// first of a new image (the mappings were started again): the sites the
// caller keeps for the earlier image's mappings are gone.
func (m *Mappings) Apply(e *kernel.MapEvent) (newImage bool) {
	if e.Gen != m.gen {
		m.gen = e.Gen
		m.table = newMapTable(m.table.page)
		newImage = true
	}
	t := m.table
	uncounted := e.How&kernel.MapHowUncounted != 0
	fixed := e.How&kernel.MapHowFixed != 0
	switch e.Op {
	case kernel.MapOpMap:
		if uncounted {
			t.unmap(e.Addr, e.Len) // the allocator's MAP_FIXED: only what it replaced
			return newImage
		}
		kind, file := kernel.KindMmapAnon, ""
		if e.How&kernel.MapHowFile != 0 {
			kind, file = kernel.KindMmapFile, m.files.path(m.pid, e.Addr, e.Dev, e.Ino)
		}
		t.mmap(SiteKey{e.Stack, kind}, e.At, e.Addr, e.Len, file)
	case kernel.MapOpUnmap:
		t.unmap(e.Addr, e.Len)
	case kernel.MapOpRemap:
		if uncounted {
			// realloc's own mremap: its block, not a traced mapping;
			// a destination it replaced is unmapped.
			if fixed {
				t.unmap(e.Addr, e.Len)
			}
			return newImage
		}
		t.mremap(e.OldAddr, e.OldLen, e.Addr, e.Len, fixed, e.How&kernel.MapHowDontUnmap != 0)
	case kernel.MapOpThread:
		t.threadStart(SiteKey{e.Stack, kernel.KindThread}, e.At, e.Tid, e.Addr, e.Len)
	case kernel.MapOpThreadExit:
		t.threadExit(e.Tid)
	}
	return newImage
}

// Sites returns every site a mapping or thread of this image counted in,
// by kind, then stack: a stable order.
func (m *Mappings) Sites() []SiteKey {
	keys := make([]SiteKey, 0, len(m.table.totals))
	for k := range m.table.totals {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b SiteKey) int {
		if a.Kind != b.Kind {
			return int(a.Kind) - int(b.Kind)
		}
		switch {
		case a.Stack < b.Stack:
			return -1
		case a.Stack > b.Stack:
			return 1
		}
		return 0
	})
	return keys
}

// Totals returns site's totals, zero for a site never seen.
func (m *Mappings) Totals(site SiteKey) MapTotals {
	if t := m.table.totals[site]; t != nil {
		return *t
	}
	return MapTotals{}
}

// Live calls fn with every mapping and thread still live, once each.
func (m *Mappings) Live(fn func(*MapAlloc)) { m.table.live(fn) }

// Ranges returns the address ranges of the live mappings of kind, sorted
// and disjoint (merged where they touch), and their bytes.
func (m *Mappings) Ranges(kind uint32) (rs [][2]uint64, bytes uint64) {
	return m.table.ranges(kind)
}

// maxFilePaths bounds the file paths kept for mmap.file mappings: a
// target mapping more distinct files gets the rest named by inode.
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
// file whose mapping is gone from maps is named by its inode. Inode 0 is
// a file the kernel could not identify (bpf_find_vma gives up while
// another thread holds the process's mmap lock): it is named by the file
// mapping at addr, never cached (every such file has that key), and never
// taken for an anonymous region ([heap] and the like have inode 0 too).
func (fp *filePaths) path(pid int, addr uint64, dev uint32, ino uint64) string {
	if ino == 0 {
		if m, ok := fileMapping(pid, func(m procfs.Mapping) bool { return addr >= m.Start && addr < m.End }); ok {
			return mappedName(m)
		}
		return "a file the kernel could not name, unmapped since"
	}
	k := fileKey{dev, ino}
	if p, ok := fp.byKey[k]; ok {
		return p
	}
	name := fmt.Sprintf("inode %d on device %d:%d", ino, dev>>20, dev&(1<<20-1))
	devName := fmt.Sprintf("%02x:%02x", dev>>20, dev&(1<<20-1))
	if m, ok := fileMapping(pid, func(m procfs.Mapping) bool {
		return m.Inode == ino && (addr >= m.Start && addr < m.End || m.Dev == devName)
	}); ok {
		name = mappedName(m)
	}
	if fp.byKey == nil {
		fp.byKey = map[fileKey]string{}
	}
	if len(fp.byKey) < maxFilePaths {
		fp.byKey[k] = name
	}
	return name
}

// mappedName is the file m maps, as its maps line names it.
func mappedName(m procfs.Mapping) string {
	if m.Deleted {
		return m.Path + " (deleted)"
	}
	return m.Path
}

// fileMapping returns the first mapping of a file in pid's maps that
// match accepts.
func fileMapping(pid int, match func(procfs.Mapping) bool) (procfs.Mapping, bool) {
	ms, err := procfs.ReadMaps(pid)
	if err != nil {
		return procfs.Mapping{}, false
	}
	for _, m := range ms {
		if m.Inode != 0 && m.Path != "" && match(m) {
			return m, true
		}
	}
	return procfs.Mapping{}, false
}
