//go:build linux && amd64

package probe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/probe/jvm"
	"github.com/leakscope/leakscope/probe/kernel"
	"github.com/leakscope/leakscope/probe/procfs"
)

// The memory breakdown (analyze.Memory) of the target at each snapshot:
// its smaps, each mapping's resident bytes attributed by what the mapping
// is (breakdown), and the bytes the traced sites hold placed within the
// allocator's part.

// memoryKnown is what the tracer knows of a process at a snapshot.
type memoryKnown struct {
	runtime analyze.Runtime
	glibc   bool // the allocator is glibc's: its arenas and mmapped chunks are recognized
	// traced holds the bytes the sites of each traced part hold
	// (PartMalloc, PartZlib, PartDirect).
	traced map[string]uint64
	spaces *jvm.Spaces // a JVM's reserved ranges, when known
	// mapped are the live traced anonymous mappings (mmap.anon, --maps),
	// disjoint and sorted by start, with the bytes their sites hold.
	mapped       [][2]uint64
	mappedOutstd uint64
}

// overlap returns how many bytes of [start, end) the sorted, disjoint
// ranges rs cover.
func overlap(rs [][2]uint64, start, end uint64) uint64 {
	i := sort.Search(len(rs), func(i int) bool { return rs[i][1] > start })
	var n uint64
	for ; i < len(rs) && rs[i][0] < end; i++ {
		n += min(rs[i][1], end) - max(rs[i][0], start)
	}
	return n
}

// Go's runtime on linux/amd64 reserves its heap arenas (64 MiB each) from
// hint addresses starting at 0xc000000000, growing up.
const goArenaStart, goArenaEnd = 0x00c000000000, 0x010000000000

// glibc's non-main arenas are heaps of HEAP_MAX_SIZE (64 MiB on 64-bit),
// aligned to it.
const glibcHeapMax = 64 << 20

// maxChunkWalk bounds the mmapped chunks walked in one mapping.
const maxChunkWalk = 1 << 14

// partOfTraced maps a traced kind to its part; kinds that are not memory
// (a declared pair's files, say) have none.
func partOfTraced(k analyze.Kind) string {
	switch k {
	case analyze.KindMalloc:
		return analyze.PartMalloc
	case analyze.KindZlibInflate, analyze.KindZlibDeflate:
		return analyze.PartZlib
	case "jvm.direct":
		return analyze.PartDirect
	}
	return ""
}

// threadStacks says which mappings hold a thread's stack: the ones that
// contain a blocked thread's stack pointer; when some thread's could not
// be read (it was running), also every anonymous rw mapping right above a
// PROT_NONE guard mapping, the shape of a glibc thread stack.
type threadStacks struct {
	sps     []uint64
	unknown int
}

// breakdown divides the resident bytes of regions (a process's smaps) into
// parts; mem reads the process's memory (glibc's arena and chunk headers),
// nil when it cannot be read.
func breakdown(pid int, regions []procfs.Region, ts threadStacks, k memoryKnown, mem io.ReaderAt) analyze.ProcessMemory {
	parts := map[string]uint64{}
	objects := map[string]bool{}
	for _, r := range regions {
		if r.Exec() && strings.HasPrefix(r.Path, "/") {
			objects[r.Path] = true
		}
	}
	var rss, allocator uint64
	for i, r := range regions {
		rss += r.Rss
		if r.Rss == 0 {
			continue
		}
		if n := k.tracedShare(r); n > 0 {
			// The program's own mapping, traced by call site: its
			// share of the region (the kernel merges neighbours) is
			// the part, the rest what it would be without.
			b := uint64(float64(r.Rss) * float64(n) / float64(r.End-r.Start))
			parts[analyze.PartMappings] += b
			name, _ := classifyUntraced(regions, i, ts, k)
			parts[name] += r.Rss - b
			continue
		}
		name, alloc := classify(regions, i, ts, k, objects, mem)
		allocator += alloc
		parts[name] += r.Rss - alloc
	}
	// The traced bytes lie within the allocator's: each as outstanding,
	// scaled down together when they hold more than is resident (blocks
	// never touched), the rest being the allocator's retained memory.
	pm := analyze.ProcessMemory{Pid: pid, RSS: rss}
	var traced uint64
	for _, n := range []string{analyze.PartMalloc, analyze.PartZlib, analyze.PartDirect} {
		traced += k.traced[n]
	}
	left := allocator
	for _, n := range analyze.MemoryParts {
		switch n {
		case analyze.PartMalloc, analyze.PartZlib, analyze.PartDirect:
			out := k.traced[n]
			b := out
			if traced > allocator && traced > 0 {
				b = uint64(float64(out) * float64(allocator) / float64(traced))
			}
			b = min(b, left)
			left -= b
			if out > 0 {
				pm.Parts = append(pm.Parts, analyze.MemoryPart{Name: n, Bytes: b, Outstanding: out})
			}
		case analyze.PartAllocator:
			if left > 0 {
				pm.Parts = append(pm.Parts, analyze.MemoryPart{Name: n, Bytes: left})
			}
		case analyze.PartMappings:
			if b := parts[n]; b > 0 {
				pm.Parts = append(pm.Parts, analyze.MemoryPart{Name: n, Bytes: b, Outstanding: k.mappedOutstd})
			}
		default:
			if b := parts[n]; b > 0 || n == analyze.PartUnexplained {
				pm.Parts = append(pm.Parts, analyze.MemoryPart{Name: n, Bytes: b})
			}
		}
	}
	return pm
}

// tracedShare returns how many bytes of anonymous region r the traced
// mappings cover, 0 for a region another part claims first (a thread's
// stack, the Go heap, a JVM's spaces).
func (k memoryKnown) tracedShare(r procfs.Region) uint64 {
	if len(k.mapped) == 0 || !anonymous(r) || r.Path == "[heap]" || r.Path == "[stack]" {
		return 0
	}
	if k.runtime == analyze.RuntimeGo && r.Start >= goArenaStart && r.Start < goArenaEnd {
		return 0
	}
	if sp := k.spaces; sp != nil {
		for _, rg := range [][2]uint64{sp.Heap, sp.Code, sp.Shared} {
			if rg[1] > rg[0] && r.Start >= rg[0] && r.Start < rg[1] {
				return 0
			}
		}
	}
	return overlap(k.mapped, r.Start, r.End)
}

// classify names the part of regions[i]'s resident bytes but alloc of
// them, which are the allocator's.
func classify(regions []procfs.Region, i int, ts threadStacks, k memoryKnown, objects map[string]bool, mem io.ReaderAt) (name string, alloc uint64) {
	name, alloc = classifyRest(regions, i, ts, k, objects, mem)
	return name, alloc
}

func classifyRest(regions []procfs.Region, i int, ts threadStacks, k memoryKnown, objects map[string]bool, mem io.ReaderAt) (string, uint64) {
	r := regions[i]
	in := func(rg [2]uint64) bool { return rg[1] > rg[0] && r.Start >= rg[0] && r.Start < rg[1] }
	switch r.Path {
	case "[vdso]", "[vvar]", "[vvar_vclock]", "[vsyscall]":
		return analyze.PartCode, 0
	case "[stack]":
		return analyze.PartStacks, 0
	case "[heap]":
		return analyze.PartAllocator, r.Rss
	}
	if sp := k.spaces; sp != nil {
		switch {
		case in(sp.Heap):
			return analyze.PartJavaHeap, 0
		case in(sp.Code):
			return analyze.PartCodeCache, 0
		case in(sp.Shared):
			return analyze.PartClassSpace, 0
		case sp.KlassBase != 0 && anonymous(r) && in([2]uint64{sp.KlassBase, sp.KlassBase + 4<<30}):
			return analyze.PartClassSpace, 0
		}
	}
	if !anonymous(r) {
		switch {
		case objects[r.Path] && r.Exec():
			return analyze.PartCode, 0
		case objects[r.Path]:
			return analyze.PartData, 0
		}
		return analyze.PartFiles, 0
	}
	for _, sp := range ts.sps {
		if sp >= r.Start && sp < r.End {
			return analyze.PartStacks, 0
		}
	}
	// An object's .bss past its file's pages: anonymous, right after
	// the object's last mapping, writable.
	if i > 0 && r.Path == "" && r.Perms[:2] == "rw" {
		if p := regions[i-1]; p.End == r.Start && objects[p.Path] && p.Perms[:2] == "rw" {
			return analyze.PartData, 0
		}
	}
	if k.runtime == analyze.RuntimeGo && r.Start >= goArenaStart && r.Start < goArenaEnd {
		return analyze.PartGoHeap, 0
	}
	if k.glibc && mem != nil && r.Perms[:2] == "rw" {
		if glibcArena(r, mem) {
			return analyze.PartAllocator, r.Rss
		}
		if n := glibcChunks(r, mem); n > 0 {
			// Chunks from the start for n bytes: a mapping the kernel
			// merged with a neighbour holds more than chunks.
			b := uint64(float64(r.Rss) * float64(n) / float64(r.End-r.Start))
			if n == r.End-r.Start {
				b = r.Rss
			}
			name, _ := classifyUntraced(regions, i, ts, k)
			return name, b
		}
	}
	return classifyUntraced(regions, i, ts, k)
}

// classifyUntraced names an anonymous mapping that is none of the
// allocator's.
func classifyUntraced(regions []procfs.Region, i int, ts threadStacks, k memoryKnown) (string, uint64) {
	r := regions[i]
	if ts.unknown > 0 && i > 0 && r.Perms[:2] == "rw" {
		g := regions[i-1]
		if g.End == r.Start && g.Perms[:3] == "---" && anonymous(g) && g.End-g.Start <= 1<<20 {
			return analyze.PartStacks, 0
		}
	}
	if k.runtime == analyze.RuntimeGo {
		return analyze.PartGoRuntime, 0
	}
	return analyze.PartUnexplained, 0
}

// anonymous reports whether r is anonymous memory: no file, or a name the
// process gave it ([anon:name]).
func anonymous(r procfs.Region) bool {
	return r.Inode == 0 && (r.Path == "" || strings.HasPrefix(r.Path, "[anon:"))
}

// glibcArena reports whether r starts a glibc heap (a non-main arena's):
// aligned to HEAP_MAX_SIZE, beginning with a heap_info whose size and
// mprotect_size fit the mapping and whose arena pointer is set.
func glibcArena(r procfs.Region, mem io.ReaderAt) bool {
	if r.Start%glibcHeapMax != 0 || r.End-r.Start > glibcHeapMax {
		return false
	}
	var h [32]byte // ar_ptr, prev, size, mprotect_size
	if _, err := mem.ReadAt(h[:], int64(r.Start)); err != nil {
		return false
	}
	ar := binary.LittleEndian.Uint64(h[0:])
	size := binary.LittleEndian.Uint64(h[16:])
	prot := binary.LittleEndian.Uint64(h[24:])
	return ar != 0 && size > 0 && size <= r.End-r.Start && prot == r.End-r.Start
}

// glibcChunks returns how many bytes from r's start are glibc mmapped
// chunks (large blocks malloc maps on their own): each begins with a
// prev_size of 0 and a size with IS_MMAPPED (2) set, and the next follows
// it; 0 when r does not start with one.
func glibcChunks(r procfs.Region, mem io.ReaderAt) uint64 {
	var h [16]byte
	off := r.Start
	for n := 0; off < r.End && n < maxChunkWalk; n++ {
		if _, err := mem.ReadAt(h[:], int64(off)); err != nil {
			break
		}
		prev := binary.LittleEndian.Uint64(h[0:])
		size := binary.LittleEndian.Uint64(h[8:])
		sz := size &^ 7
		if prev != 0 || size&7 != 2 || sz == 0 || sz%4096 != 0 || sz > r.End-off {
			break
		}
		off += sz
	}
	return off - r.Start
}

// memoryOf takes pid's breakdown now.
func memoryOf(pid int, k memoryKnown) (analyze.ProcessMemory, error) {
	regions, err := procfs.ReadSmaps(pid)
	if err != nil {
		return analyze.ProcessMemory{}, err
	}
	var ts threadStacks
	ts.sps, ts.unknown, _ = procfs.ThreadStackPointers(pid)
	var mem io.ReaderAt
	if k.glibc {
		if f, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid)); err == nil {
			defer f.Close()
			mem = f
		}
	}
	return breakdown(pid, regions, ts, k, mem), nil
}

// memoryLog is a target's memory breakdowns: every one kept (thinned as
// snapshots are), the latest (nil when the last could not be taken), and
// a JVM's reserved ranges once read.
type memoryLog struct {
	all    []analyze.Memory
	last   *analyze.Memory
	spaces *jvm.Spaces
}

// memoryKnownLocked is what the tracer knows for a breakdown at a read
// that gave points.
func (t *Tracer) memoryKnownLocked(points readPoints) memoryKnown {
	k := memoryKnown{runtime: t.target().Runtime, traced: map[string]uint64{},
		glibc: strings.HasPrefix(path.Base(t.alloc.Display), "libc.so") || strings.HasPrefix(path.Base(t.alloc.Display), "libc-")}
	for i := range points.len() {
		if n := partOfTraced(t.sites.slots[points.slot(i)].kind); n != "" {
			k.traced[n] += points.at(i).LiveBytes
		}
	}
	if t.mapping.maps != nil {
		k.mapped, k.mappedOutstd = t.mapping.maps.Ranges(kernel.KindMmapAnon)
	}
	if n, ok := t.jit.namer.(interface{ Spaces() (jvm.Spaces, bool) }); ok && t.jit.namer != nil {
		if t.mem.spaces == nil {
			if sp, ok := n.Spaces(); ok {
				t.mem.spaces = &sp
			}
		}
		k.spaces = t.mem.spaces
	}
	return k
}

// recordMemory takes the target's breakdown after a snapshot at at and
// keeps it for the capture (and LastMemory); a breakdown that cannot be
// taken (the target exited) is left out, with a warning once.
func (t *Tracer) recordMemory(k memoryKnown, at time.Duration) {
	pm, err := memoryOf(t.pid, k)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return // the capture ended meanwhile (follower.endExited), without it
	}
	if err != nil {
		// A process that exited has no breakdown to take: its series
		// ends with the last one taken.
		if !errors.Is(err, procfs.ErrNoProcess) {
			t.warnOnce(fmt.Sprintf("no memory breakdown: %v", err))
		}
		t.mem.last = nil
		return
	}
	m := analyze.Memory{At: at, Processes: []analyze.ProcessMemory{pm}}
	t.mem.all = analyze.ThinMemory(append(t.mem.all, m))
	t.mem.last = &m
}

// LastMemory returns the memory breakdown taken with the latest snapshot,
// for a capture file written as it happens; nil when none was. The
// root of a process tree adds its live processes' breakdowns of the same
// snapshot.
func (t *Tracer) LastMemory() *analyze.Memory {
	t.mu.Lock()
	m := t.mem.last
	t.mu.Unlock()
	if m == nil || !t.isRoot() {
		return m
	}
	tree := *m
	tree.Processes = slices.Clone(m.Processes)
	// Every process's, ended or not: one that ended after this
	// snapshot's breakdown of it (follower.endExited) has it in its
	// final capture, which merge adds too.
	for _, p := range t.tree.all() {
		if pm := p.t.LastMemory(); pm != nil && pm.At >= m.At {
			tree.Processes = append(tree.Processes, pm.Processes...)
		}
	}
	return &tree
}

// mergeMemory adds to each of root's breakdowns other's taken in the same
// snapshot: the newest before root's next one and not before root's own
// (a process that had exited by then has none).
func mergeMemory(root, other []analyze.Memory) {
	j := -1
	for i := range root {
		next := time.Duration(1<<63 - 1)
		if i+1 < len(root) {
			next = root[i+1].At
		}
		for j+1 < len(other) && other[j+1].At < next {
			j++
		}
		if j < 0 || other[j].At < root[i].At {
			continue
		}
		root[i].Processes = append(root[i].Processes, other[j].Processes...)
	}
}
