//go:build linux

package kernel

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cilium/ebpf/ringbuf"
)

// Why a range miss record was sent, when it is not a frame in an unknown
// range (enum range_miss_ip): the process exited, exec'd, forked, spawned
// (vfork or clone of a process with its own memory) or made a child
// sharing its memory.
const (
	MissExit   = uint64(leakRangeMissIpRANGE_MISS_EXIT)
	MissExec   = uint64(leakRangeMissIpRANGE_MISS_EXEC)
	MissFork   = uint64(leakRangeMissIpRANGE_MISS_FORK)
	MissSpawn  = uint64(leakRangeMissIpRANGE_MISS_SPAWN)
	MissVMFork = uint64(leakRangeMissIpRANGE_MISS_VMFORK)
)

// Miss is one record of range_misses.
type Miss struct {
	// IP is the frame in no known range, or one of the Miss* reasons.
	IP uint64
	// Generation is the range table's generation the walk used, or for
	// a fork, spawn or VM fork the child's pid.
	Generation uint64
	At         uint64 // monotonic ns when sent: how long a stop lasted
}

// Misses reads range_misses. One goroutine reads; any may ask Idle.
type Misses struct {
	r *ringbuf.Reader
	// handling is 1 from a record's Read until the reader's next Read:
	// the record is being handled.
	handling atomic.Int32
	mu       sync.RWMutex // guards closed against Idle
	closed   bool
}

// OpenMisses opens the reader of range_misses.
func (o *Objects) OpenMisses() (*Misses, error) {
	r, err := ringbuf.NewReader(o.objs.RangeMisses)
	if err != nil {
		return nil, fmt.Errorf("open range-miss ring buffer: %w", err)
	}
	return &Misses{r: r}, nil
}

// Read waits for the next record; an error means the reader was closed,
// or flushed and empty. The record read before is handled from then on.
func (m *Misses) Read() (Miss, error) {
	m.handling.Store(0)
	rec, err := m.r.Read()
	if err != nil {
		return Miss{}, err
	}
	m.handling.Store(1)
	var x Miss
	if len(rec.RawSample) >= int(unsafe.Sizeof(leakRangeMiss{})) {
		x.IP = binary.LittleEndian.Uint64(rec.RawSample[0:])
		x.Generation = binary.LittleEndian.Uint64(rec.RawSample[8:])
		x.At = binary.LittleEndian.Uint64(rec.RawSample[16:])
	}
	return x, nil
}

// Flush makes Read return what is buffered, then an error.
func (m *Misses) Flush() error { return m.r.Flush() }

// Idle reports whether every record sent so far was read and handled:
// none is waiting, and the reader is back in Read (or has not begun).
// A closed reader is never idle: its records may not all be handled.
func (m *Misses) Idle() bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return !m.closed && m.r.AvailableBytes() == 0 && m.handling.Load() == 0
}

// Close closes the reader; a second Close does nothing.
func (m *Misses) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	return m.r.Close()
}

// Operations and details of a mapping record (enum map_op, enum map_how).
const (
	MapOpMap        = uint32(leakMapOpMAP_OP_MAP)
	MapOpUnmap      = uint32(leakMapOpMAP_OP_UNMAP)
	MapOpRemap      = uint32(leakMapOpMAP_OP_REMAP)
	MapOpThread     = uint32(leakMapOpMAP_OP_THREAD)
	MapOpThreadExit = uint32(leakMapOpMAP_OP_THREAD_EXIT)

	MapHowUncounted = uint32(leakMapHowMAP_HOW_UNCOUNTED)
	MapHowFile      = uint32(leakMapHowMAP_HOW_FILE)
	MapHowFixed     = uint32(leakMapHowMAP_HOW_FIXED)
	MapHowDontUnmap = uint32(leakMapHowMAP_HOW_DONTUNMAP)
)

// MapEvent is one record of mmap_events: a mapping call that returned, a
// thread started or exited.
type MapEvent struct {
	Addr, Len       uint64
	OldAddr, OldLen uint64 // mremap's source
	Stack           uint64 // stack id
	At              uint64 // monotonic ns
	Op, How         uint32 // MapOp*, MapHow* bits
	Tid             uint32
	Gen             uint32 // exec generation of the image
	// Ino and Dev are the mapped file's, for MapHowFile.
	Ino uint64
	Dev uint32
}

// MapEvents reads mmap_events.
type MapEvents struct{ r *ringbuf.Reader }

// OpenMapEvents opens the reader of mmap_events (Config.Maps).
func (o *Objects) OpenMapEvents() (*MapEvents, error) {
	r, err := ringbuf.NewReader(o.objs.MmapEvents)
	if err != nil {
		return nil, fmt.Errorf("open mapping ring buffer: %w", err)
	}
	return &MapEvents{r}, nil
}

// Drain calls fn with every record waiting, in the order the calls
// returned, without waiting for more.
func (m *MapEvents) Drain(fn func(*MapEvent)) error {
	m.r.SetDeadline(time.Now())
	var rec ringbuf.Record
	for {
		if err := m.r.ReadInto(&rec); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, ringbuf.ErrClosed) {
				return nil
			}
			return err
		}
		if len(rec.RawSample) < int(unsafe.Sizeof(leakMmapEvent{})) {
			continue
		}
		e := (*leakMmapEvent)(unsafe.Pointer(&rec.RawSample[0]))
		fn(&MapEvent{Addr: e.Addr, Len: e.Len, OldAddr: e.OldAddr, OldLen: e.OldLen, Stack: e.StackId,
			At: e.TsNs, Op: e.Op, How: e.How, Tid: e.Tid, Gen: e.Gen, Ino: e.Ino, Dev: e.Dev})
	}
}

// Close closes the reader.
func (m *MapEvents) Close() error { return m.r.Close() }
