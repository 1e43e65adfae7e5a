package analyze

import (
	"errors"
	"fmt"
	"time"
)

// Memory is the memory breakdown of the traced processes at one snapshot:
// each process's resident memory (RSS, from /proc/PID/smaps) divided into
// parts by what leakscope knows of each mapping, and of the allocations
// it traced.
type Memory struct {
	At        time.Duration   `json:"at_ns"` // since Capture.StartedAt
	Processes []ProcessMemory `json:"processes"`
}

// ProcessMemory is one process's breakdown: its parts add up to RSS
// exactly, the last one (PartUnexplained) being what nothing explains.
type ProcessMemory struct {
	Pid   int          `json:"pid"`
	RSS   uint64       `json:"rss_bytes"`
	Parts []MemoryPart `json:"parts"`
}

// MemoryPart is one part of a process's RSS, in resident bytes.
type MemoryPart struct {
	Name  string `json:"name"`
	Bytes uint64 `json:"bytes"`
	// Outstanding is, for a part leakscope traced by call site (malloc,
	// zlib streams, direct memory), the bytes its sites hold: more than
	// Bytes when some of them were never touched, and so are not resident.
	Outstanding uint64 `json:"outstanding_bytes,omitempty"`
}

// The parts of a breakdown, in the order a breakdown lists them. The
// traced parts (malloc, zlib, direct) lie within the allocator's
// resident memory, which PartAllocator completes: they are never counted
// twice. PartMappings is the resident part of the anonymous mappings
// traced by call site (mmap.anon, --maps) that no other part claims.
const (
	PartMalloc      = "malloc outstanding"
	PartZlib        = "zlib streams"
	PartDirect      = "direct memory"
	PartAllocator   = "allocator retained and overhead"
	PartMappings    = "traced anonymous mappings"
	PartJavaHeap    = "Java heap"
	PartClassSpace  = "metaspace and class space"
	PartCodeCache   = "code cache"
	PartGoHeap      = "Go heap"
	PartGoRuntime   = "Go runtime off-heap"
	PartStacks      = "thread stacks"
	PartCode        = "code of loaded objects"
	PartData        = "data of loaded objects"
	PartFiles       = "mapped files"
	PartUnexplained = "unexplained"
)

// MemoryParts are the part names in order.
var MemoryParts = []string{
	PartMalloc, PartZlib, PartDirect, PartAllocator, PartMappings,
	PartJavaHeap, PartClassSpace, PartCodeCache,
	PartGoHeap, PartGoRuntime, PartStacks,
	PartCode, PartData, PartFiles, PartUnexplained,
}

// Part returns the bytes of the part named name (0 when not listed).
func (m *ProcessMemory) Part(name string) uint64 {
	for _, p := range m.Parts {
		if p.Name == name {
			return p.Bytes
		}
	}
	return 0
}

// Check reports whether m is a breakdown as leakscope makes them: known
// part names, each at most once and in MemoryParts' order, adding up to
// RSS without overflow.
func (m *ProcessMemory) Check() error {
	if m.Pid <= 0 || m.Pid > maxPid {
		return fmt.Errorf("memory of pid %d, which no process can have", m.Pid)
	}
	var sum uint64
	next := 0
	for _, p := range m.Parts {
		i := next
		for i < len(MemoryParts) && MemoryParts[i] != p.Name {
			i++
		}
		if i == len(MemoryParts) {
			return fmt.Errorf("memory of pid %d: part %q unknown, repeated or out of order", m.Pid, p.Name)
		}
		next = i + 1
		if sum+p.Bytes < sum {
			return fmt.Errorf("memory of pid %d: parts add up to more than 64 bits hold", m.Pid)
		}
		sum += p.Bytes
	}
	if sum != m.RSS {
		return fmt.Errorf("memory of pid %d: parts add up to %d bytes, not its RSS of %d", m.Pid, sum, m.RSS)
	}
	return nil
}

// Of returns the breakdown of pid (0: the target's, pid target) in m, or
// nil.
func (m *Memory) Of(pid int) *ProcessMemory {
	for i := range m.Processes {
		if m.Processes[i].Pid == pid {
			return &m.Processes[i]
		}
	}
	return nil
}

// ThinMemory keeps a capture's breakdowns within MaxSnapshots as
// ThinSnapshots keeps snapshots.
func ThinMemory(ms []Memory) []Memory {
	return Thin(ms, func(*Memory) int { return 0 }, nil)
}

// LastMemory returns the newest breakdown of pid in c (the target's for
// 0), or nil when the capture recorded none.
func (c *Capture) LastMemory(pid int) (*ProcessMemory, time.Duration) {
	if pid == 0 {
		pid = c.Target.Pid
	}
	for i := len(c.Memory) - 1; i >= 0; i-- {
		if pm := c.Memory[i].Of(pid); pm != nil {
			return pm, c.Memory[i].At
		}
	}
	return nil, 0
}

var errMemoryOrder = errors.New("memory record earlier than the one before: not a capture leakscope wrote")

// checkMemory validates one breakdown read from a capture file.
func checkMemory(m *Memory, prev []Memory) error {
	if len(prev) > 0 && m.At < prev[len(prev)-1].At {
		return errMemoryOrder
	}
	seen := map[int]bool{}
	for i := range m.Processes {
		pm := &m.Processes[i]
		if err := pm.Check(); err != nil {
			return err
		}
		if seen[pm.Pid] {
			return fmt.Errorf("memory record lists pid %d twice", pm.Pid)
		}
		seen[pm.Pid] = true
	}
	return nil
}
