//go:build linux

package kernel

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/leakscope/leakscope/probe/jvm"
	"github.com/leakscope/leakscope/probe/unwind"
)

// Kinds of allocation (enum alloc_kind). A declared pair's kind is
// KindUser plus its index.
const (
	KindMalloc      = uint32(leakAllocKindKIND_MALLOC)
	KindZlibInflate = uint32(leakAllocKindKIND_ZLIB_INFLATE)
	KindZlibDeflate = uint32(leakAllocKindKIND_ZLIB_DEFLATE)
	KindMmapAnon    = uint32(leakAllocKindKIND_MMAP_ANON)
	KindMmapFile    = uint32(leakAllocKindKIND_MMAP_FILE)
	KindThread      = uint32(leakAllocKindKIND_THREAD)
	KindUser        = uint32(leakAllocKindKIND_USER)
)

// SetTarget makes pid the traced process (target_tgid).
func (o *Objects) SetTarget(pid int) error {
	if err := o.objs.TargetTgid.Set(uint32(pid)); err != nil {
		return fmt.Errorf("set target_tgid: %w", err)
	}
	return nil
}

// Stops are the stops the kernel made for leakscope and not yet
// continued.
type Stops struct {
	Sent bool // a stop at a first call or dlopen (stop_sent)
	Exit bool // stopped in exit() (exit_stop)
	Exec bool // stopped after an exec (exec_stop)
}

// Stops reads the stops pending.
func (o *Objects) Stops() (Stops, error) {
	var s Stops
	for _, v := range []struct {
		v  *ebpf.Variable
		to *bool
	}{{o.objs.StopSent, &s.Sent}, {o.objs.ExitStop, &s.Exit}, {o.objs.ExecStop, &s.Exec}} {
		var x uint32
		if err := v.v.Get(&x); err != nil {
			return Stops{}, err
		}
		*v.to = x != 0
	}
	return s, nil
}

// ClearStops forgets the stops pending, as the process is continued.
func (o *Objects) ClearStops() error {
	var errs []error
	for _, v := range []*ebpf.Variable{o.objs.StopSent, o.objs.ExitStop, o.objs.ExecStop} {
		errs = append(errs, v.Set(uint32(0)))
	}
	return errors.Join(errs...)
}

// get reads the uint32 or uint64 global v.
func get[T uint32 | uint64](v *ebpf.Variable) (T, error) {
	var x T
	err := v.Get(&x)
	return x, err
}

// ExecGen counts the program images the process exec'd into (exec_gen).
func (o *Objects) ExecGen() (uint32, error) { return get[uint32](o.objs.ExecGen) }

// Forks counts the processes it started that were not followed (forks).
func (o *Objects) Forks() (uint32, error) { return get[uint32](o.objs.Forks) }

// VMForks counts the processes sharing its memory it started (vm_forks).
func (o *Objects) VMForks() (uint32, error) { return get[uint32](o.objs.VmForks) }

// SiteCount is how many slots of site_slots were handed out.
func (o *Objects) SiteCount() (uint64, error) { return get[uint64](o.objs.SiteCount) }

// ExitSettled is the exec generation + 1 whose inflate windows the kernel
// counted as the process exited (exit_settled), 0 if none.
func (o *Objects) ExitSettled() (uint32, error) { return get[uint32](o.objs.ExitSettled) }

// ExitNs is when the process exited, on the monotonic clock, 0 if not
// known (exit_ns).
func (o *Objects) ExitNs() (uint64, error) { return get[uint64](o.objs.ExitNs) }

// exitStatusKnown is EXIT_STATUS_KNOWN (ebpf/leakscope.h): set in
// exit_status once the target's last thread exited.
const exitStatusKnown = 1 << leakExitStatusBitEXIT_STATUS_KNOWN_BIT

// ExitStatus is the wait status target_exit kept; ok is false when the
// process has not exited (or target_exit is not attached).
func (o *Objects) ExitStatus() (status uint32, ok bool) {
	es, err := get[uint32](o.objs.ExitStatus)
	if err != nil || es&exitStatusKnown == 0 {
		return 0, false
	}
	return es &^ exitStatusKnown, true
}

// Stat indexes the kernel's per-CPU counters (enum stat_index).
type Stat uint32

// The counters read by the tracer.
const (
	StatAllocsDropped    = Stat(leakStatIndexSTAT_ALLOCS_DROPPED)
	StatUnknownFrees     = Stat(leakStatIndexSTAT_UNKNOWN_FREES)
	StatStackErrors      = Stat(leakStatIndexSTAT_STACK_ERRORS)
	StatFreesMissed      = Stat(leakStatIndexSTAT_FREES_MISSED)
	StatPendingDropped   = Stat(leakStatIndexSTAT_PENDING_DROPPED)
	StatWindowsUnread    = Stat(leakStatIndexSTAT_WINDOWS_UNREAD)
	StatStackChunkFaults = Stat(leakStatIndexSTAT_STACK_CHUNK_FAULTS)
	StatWalksPreempted   = Stat(leakStatIndexSTAT_WALKS_PREEMPTED)
	StatMapEventsLost    = Stat(leakStatIndexSTAT_MAP_EVENTS_LOST)
	StatExactBudget      = Stat(leakStatIndexSTAT_EXACT_BUDGET)
	StatStopsUnsent      = Stat(leakStatIndexSTAT_STOPS_UNSENT)
)

// BudgetPast is the calls that came past the exact budget (sample_exact)
// and were left to the byte sampler, summed over every CPU.
func (o *Objects) BudgetPast() (uint64, error) {
	var perCPU []leakExactBudget
	if err := o.objs.ExactBudgets.Lookup(uint32(0), &perCPU); err != nil {
		return 0, fmt.Errorf("read exact_budgets: %w", err)
	}
	var n uint64
	for _, b := range perCPU {
		n += b.Past
	}
	return n, nil
}

// Stat is counter i summed over every CPU.
func (o *Objects) Stat(i Stat) (uint64, error) {
	var perCPU []uint64
	if err := o.objs.Stats.Lookup(uint32(i), &perCPU); err != nil {
		return 0, fmt.Errorf("read stats: %w", err)
	}
	var n uint64
	for _, v := range perCPU {
		n += v
	}
	return n, nil
}

// Handle is the key of a live allocation or inflate stream: its address
// and kind, and the image that made it.
type Handle struct {
	Addr uint64
	Kind uint32
	// Gen is the exec generation of the image that made it, unless
	// Orphan: a resource re-initialised without its release, kept live
	// for good under a key of its own (orphan_resource), of any image.
	Gen    uint32
	Orphan bool
}

func handleOf(k *leakHandleKey) Handle {
	if k.Pad&1 != 0 {
		return Handle{Addr: k.Addr, Kind: k.Kind, Orphan: true}
	}
	return Handle{Addr: k.Addr, Kind: k.Kind, Gen: k.Pad >> 1}
}

// Site is a kernel site: a stack and kind, of one image.
type Site struct {
	Stack uint64 // stack id in stacks
	Kind  uint32 // enum alloc_kind, without SITE_KIND_EXACT
	Gen   uint32 // exec generation of the image
	// Exact: the site of the blocks the exact budget traced under
	// sampling (SITE_KIND_EXACT), each standing for itself.
	Exact bool
}

// siteKindExact is SITE_KIND_EXACT, the bit of site_key.kind that marks
// an exact budget's site.
const siteKindExact = uint32(leakSiteKindBitSITE_KIND_EXACT)

// Totals are a site's counters.
type Totals struct {
	LiveCount, LiveBytes uint64
	Allocs, Frees        uint64
}

// ForEachSite calls fn with every site of site_slots, its index and its
// totals: the slots handed out (site_count, at most max), read in batches
// of 4096 (an array: no hash walk), each slot's totals summed over its
// copies in site_counts. A slot left unused (another CPU made the same
// site first) or not written yet is skipped.
func (o *Objects) ForEachSite(max uint32, fn func(idx uint32, s Site, t Totals)) error {
	count, err := o.SiteCount()
	if err != nil {
		return err
	}
	n := uint32(min(count, uint64(max)))
	const batch = 4096
	copies := int(o.copies)
	if o.siteBuf == nil {
		o.siteBuf, o.siteKeys = make([]leakSiteSlot, batch), make([]uint32, batch)
		o.countBuf, o.countKeys = make([]leakSiteStats, batch*copies), make([]uint32, batch*copies)
	}
	keys := o.siteKeys
	var cursor, countCursor ebpf.MapBatchCursor
	for done := uint32(0); done < n; {
		got, err := o.objs.SiteSlots.BatchLookup(&cursor, keys, o.siteBuf, nil)
		if err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return err
		}
		// The same slots' totals: site_counts holds copies entries a
		// slot, in slot order.
		if got > 0 {
			c, cerr := o.objs.SiteCounts.BatchLookup(&countCursor, o.countKeys[:got*copies], o.countBuf[:got*copies], nil)
			if cerr != nil && !errors.Is(cerr, ebpf.ErrKeyNotExist) {
				return cerr
			}
			if c != got*copies || o.countKeys[0] != keys[0]*uint32(copies) {
				return fmt.Errorf("read site_counts: %d entries from %d, want %d from %d", c, o.countKeys[0], got*copies, keys[0]*uint32(copies))
			}
		}
		for i := 0; i < got && keys[i] < n; i++ {
			if s := &o.siteBuf[i]; s.State == uint64(leakSlotStateSLOT_USED) {
				var t Totals
				for _, c := range o.countBuf[i*copies : (i+1)*copies] {
					t.LiveBytes += c.LiveBytes
					t.Allocs += c.Allocs
					t.Frees += c.Frees
				}
				// The copies are read one after another while CPUs
				// update them: a block allocated on one CPU after its
				// copy was read and freed on another before its copy
				// was can make a read show more releases than
				// allocations. Such a torn read holds nothing, never a
				// wrapped count.
				if t.Frees < t.Allocs {
					t.LiveCount = t.Allocs - t.Frees
				}
				if t.LiveCount == 0 || int64(t.LiveBytes) < 0 {
					t.LiveBytes = 0
				}
				fn(keys[i], Site{s.Key.StackId, s.Key.Kind &^ siteKindExact, s.Key.Pad, s.Key.Kind&siteKindExact != 0}, t)
			}
		}
		done += uint32(got)
		if errors.Is(err, ebpf.ErrKeyNotExist) || got == 0 {
			break
		}
	}
	return nil
}

// Alloc is one live allocation.
type Alloc struct {
	Size uint64
	At   uint64 // monotonic ns when it returned, to a kernel tick (up to one before)
	Site uint32 // its site's slot in site_slots
}

// ForEachAlloc calls fn with every live allocation: the handles of
// alloc_buckets (heap blocks and resources), then allocs.
func (o *Objects) ForEachAlloc(fn func(Handle, Alloc)) error {
	return o.forEachRecord(func(h Handle, v *leakAllocInfo) {
		fn(h, Alloc{Size: v.SizeBytes, At: v.TsNs, Site: v.Site})
	})
}

// forEachRecord calls fn with every live handle and its record: those of
// alloc_buckets, then of allocs.
func (o *Objects) forEachRecord(fn func(Handle, *leakAllocInfo)) error {
	err := forEachValue(o.objs.AllocBuckets, func(b *leakAllocBucket) {
		for i := range b.Slot {
			// A slot being moved (SLOT_BUSY, the low bit) is listed
			// from allocs; one being filled (SLOT_FILLING, bit 1)
			// holds its last holder's record.
			if s := &b.Slot[i]; s.Addr != 0 && s.Addr&3 == 0 {
				fn(Handle{Addr: s.Addr, Kind: uint32(s.Info.Kind), Gen: s.Gen >> 1}, &s.Info)
			}
		}
	})
	if err != nil {
		return err
	}
	return forEach(o.objs.Allocs, func(k *leakHandleKey, v *leakAllocInfo) { fn(handleOf(k), v) })
}

// BlockTraced reports whether heap block addr of image gen is a live
// traced allocation, in alloc_buckets or allocs.
func (o *Objects) BlockTraced(addr uint64, gen uint32) (bool, error) {
	if o.buckets > 0 {
		var b leakAllocBucket
		if err := o.objs.AllocBuckets.Lookup(allocBucket(addr, o.buckets), &b); err != nil {
			return false, fmt.Errorf("read alloc_buckets: %w", err)
		}
		for _, s := range b.Slot {
			if s.Addr == addr && s.Gen == gen<<1 && uint32(s.Info.Kind) == KindMalloc {
				return true, nil
			}
		}
	}
	k := leakHandleKey{Addr: addr, Kind: KindMalloc, Pad: gen << 1}
	var v leakAllocInfo
	err := o.objs.Allocs.Lookup(&k, &v)
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return false, nil
	}
	return err == nil, err
}

// allocBucket is the bucket of alloc_buckets that heap block addr is in,
// of buckets (a power of two): bucket_of (ebpf/table.bpf.h).
func allocBucket(addr uint64, buckets uint32) uint32 {
	return uint32((addr>>4)*0x9E3779B97F4A7C15>>32) & (buckets - 1)
}

// Window is what the kernel knows of a live inflate stream's window not
// counted yet (enum window_word).
type Window struct {
	State uint64 // the stream's inflate state, 0 if unread
	Stack uint64 // the stream's stack id
	Bytes uint32 // the window's bytes by the init's arguments
}

// windowOf returns the window word in the record of resource handle h,
// if it has one.
func windowOf(h Handle, v *leakAllocInfo) (Window, bool) {
	if h.Kind == KindMalloc || v.Owner&uint64(leakWindowWordWINDOW_PENDING) == 0 {
		return Window{}, false // a heap block's owner, or no window
	}
	return Window{State: v.Owner &^ uint64(leakWindowWordWINDOW_FLAGS), Stack: v.StackId, Bytes: uint32(v.OwnerKind)}, true
}

// ForEachWindow calls fn with every live inflate stream whose window the
// kernel has not counted yet: the resources with a window word in
// alloc_buckets, then in allocs.
func (o *Objects) ForEachWindow(fn func(Handle, Window)) error {
	if used, err := get[uint32](o.objs.WindowsLookedFor); err != nil || used == 0 {
		return err // no record had a window word: nothing to scan
	}
	return o.forEachRecord(func(h Handle, v *leakAllocInfo) {
		if w, ok := windowOf(h, v); ok {
			fn(h, w)
		}
	})
}

// Offsets in zlib's structures (enum zlib_offset): of the state in a
// z_stream, and of wbits and window in an inflate state.
const (
	ZstreamStateOff       = uint64(leakZlibOffsetZSTREAM_STATE_OFF)
	InflateStateWbitsOff  = int(leakZlibOffsetINFLATE_STATE_WBITS_OFF)
	InflateStateWindowOff = int(leakZlibOffsetINFLATE_STATE_WINDOW_OFF)
)

// Range flags (enum range_flag): how the kernel walks through a range.
const (
	RangeHasFP        = uint32(leakRangeFlagRANGE_HAS_FP)
	RangeZlib         = uint32(leakRangeFlagRANGE_ZLIB)
	RangeZlibComputed = uint32(leakRangeFlagRANGE_ZLIB_COMPUTED)
	RangeGo           = uint32(leakRangeFlagRANGE_GO)
	RangeDWARF        = uint32(leakRangeFlagRANGE_DWARF)
	RangeJVMInterp    = uint32(leakRangeFlagRANGE_JVM_INTERP)
	RangeJVMCode      = uint32(leakRangeFlagRANGE_JVM_CODE)
	RangeGoCgocall    = uint32(leakRangeFlagRANGE_GO_CGOCALL)
)

// MaxRanges is how many executable mappings one slot of exec_ranges
// holds (MAX_RANGES).
const MaxRanges = int(leakLimitsMAX_RANGES)

// Range is one executable range of the target as the walker sees it.
type Range struct {
	Start, End uint64
	Flags      uint32 // Range* flags
	Object     uint32
	// Bias, RowStart and RowCount locate, for RangeDWARF, the object's
	// rows in unwind_rows and the load bias they apply at.
	Bias               uint64
	RowStart, RowCount uint32
}

// PublishRanges writes ranges (sorted, at most MaxRanges) into the half
// of the range table the walker is not reading, then makes that half the
// one it reads, as the next generation: a walk running meanwhile reads
// the old table or the new one, never a mix. Its caller serializes calls.
func (o *Objects) PublishRanges(ranges []Range) error {
	slot := o.rangeSlot ^ 1
	base := slot * uint32(MaxRanges)
	for i, r := range ranges {
		kr := leakExecRange{Start: r.Start, End: r.End, Flags: r.Flags, Object: r.Object, Bias: r.Bias, RowStart: r.RowStart, RowCount: r.RowCount}
		if err := o.objs.ExecRanges.Put(base+uint32(i), kr); err != nil {
			return err
		}
	}
	ctl := leakRangeCtl{Slot: slot, Count: uint32(len(ranges)), Generation: o.rangeGen + 1}
	if err := o.objs.RangeCtls.Put(uint32(0), ctl); err != nil {
		return err
	}
	o.rangeSlot, o.rangeGen = slot, o.rangeGen+1
	return nil
}

// ErrUnwindFull is AppendUnwindRows's error when unwind_rows has no room
// for an object's rows (Config.MaxUnwindRows).
var ErrUnwindFull = errors.New("unwind table full")

// AppendUnwindRows writes rows, one object's, after those written so far
// in unwind_rows (in one batch where the kernel has them) and returns the
// index of the first. Its caller serializes calls.
func (o *Objects) AppendUnwindRows(rows []unwind.Row) (start uint32, err error) {
	start = o.rowsUsed
	if uint64(start)+uint64(len(rows)) > uint64(o.objs.UnwindRows.MaxEntries()) {
		return 0, ErrUnwindFull
	}
	keys := make([]uint32, len(rows))
	vals := make([]leakUnwindRow, len(rows))
	for i, r := range rows {
		keys[i] = start + uint32(i)
		vals[i] = leakUnwindRow{Pc: r.PC, CfaOff: r.CFAOffset, RbpOff: r.RBPOffset, Rule: r.Rule}
	}
	if _, err := o.objs.UnwindRows.BatchUpdate(keys, vals, nil); err != nil {
		for i := range keys { // kernels without batch updates
			if err := o.objs.UnwindRows.Put(keys[i], vals[i]); err != nil {
				return 0, err
			}
		}
	}
	o.rowsUsed += uint32(len(rows))
	return start, nil
}

// WriteJVMHeaps gives the walker a JVM's code heaps.
func (o *Objects) WriteJVMHeaps(heaps []jvm.CodeHeap) error {
	for i, h := range heaps {
		kh := leakJvmHeap{Low: h.Low, High: h.High, Segmap: h.Segmap, Log2Segment: h.Log2Segment,
			BlobOffset: h.BlobOffset, FrameSizeOffset: h.FrameSizeOffset, CompileIdOffset: h.CompileIDOffset}
		if err := o.objs.JvmHeaps.Put(uint32(i), kh); err != nil {
			return err
		}
	}
	return nil
}

// WriteJVMLayout gives the walker where a JVM's ConstMethod keeps what
// maps a bytecode index to a line.
func (o *Objects) WriteJVMLayout(constMethodOffset, constMethodSize uint32) error {
	l := leakJvmLayout{ConstMethodOffset: constMethodOffset, ConstMethodSize: constMethodSize}
	return o.objs.JvmLayouts.Put(uint32(0), l)
}

// How an acquire call's return probe finds its handle (enum alloc_op).
const (
	OpRetPtr    = uint32(leakAllocOpOP_RET_PTR)
	OpRealloc   = uint32(leakAllocOpOP_REALLOC)
	OpOutPtr    = uint32(leakAllocOpOP_OUT_PTR)
	OpArgHandle = uint32(leakAllocOpOP_ARG_HANDLE)
)

// The malloc-family functions of alloc_session's cookie (enum alloc_fn).
const (
	FnMalloc        = uint32(leakAllocFnFN_MALLOC)
	FnCalloc        = uint32(leakAllocFnFN_CALLOC)
	FnRealloc       = uint32(leakAllocFnFN_REALLOC)
	FnReallocarray  = uint32(leakAllocFnFN_REALLOCARRAY)
	FnPosixMemalign = uint32(leakAllocFnFN_POSIX_MEMALIGN)
	FnMemalign      = uint32(leakAllocFnFN_MEMALIGN)
	FnValloc        = uint32(leakAllocFnFN_VALLOC)
	FnPvalloc       = uint32(leakAllocFnFN_PVALLOC)
)

// Which zlib init a zlib init program's cookie says it probes (enum zinit).
const (
	ZinitInflate  = uint32(leakZinitZINIT_INFLATE)
	ZinitInflate2 = uint32(leakZinitZINIT_INFLATE2)
	ZinitBack     = uint32(leakZinitZINIT_BACK)
	ZinitDeflate  = uint32(leakZinitZINIT_DEFLATE)
	ZinitDeflate2 = uint32(leakZinitZINIT_DEFLATE2)
)

// ExitHookSupported reports whether target_exit can run on this kernel:
// its sched_process_exit comes while the exiting task's memory is still
// readable (Linux 6.13).
func ExitHookSupported() bool { return exitHookSupported() }
