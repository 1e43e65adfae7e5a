/* The globals and maps the BPF helpers work on, declared once for every
 * object that includes them: leakscope.bpf.c (the probes) and
 * test.bpf.c (the BPF_PROG_TEST_RUN harnesses). BPF-only; the shared
 * types are in leakscope.h. */
#ifndef STATE_BPF_H
#define STATE_BPF_H

#include "vmlinux.h"
#include "bpf/bpf_helpers.h"

#include "leakscope.h"

/* Tunables, set by probe/ before loading. */
/* The traced process. Not a constant: a collection is loaded ahead for
 * the next process a followed tree starts, and given its pid then. */
__u32 target_tgid = 0;
const volatile __u64 page_size = 4096;
/* Set by "leakscope run": count nothing until the target has exec'd the
 * command, so the launcher's own calls before exec never enter the tables. */
const volatile __u32 wait_exec = 0;

/* Byte-based sampling (--sample-bytes): 0 traces every allocation;
 * otherwise an allocation is traced when the bytes allocated on this CPU
 * since the last traced one pass an exponentially distributed gap of mean
 * sample_bytes (tcmalloc's scheme), so one of size s is traced with
 * probability 1 - exp(-s/sample_bytes), and user space scales by its
 * inverse. Decided at entry: an untraced call skips its return probe,
 * but for a realloc whose old block may be traced, whose return releases
 * it (OP_REALLOC_RELEASE). */
const volatile __u64 sample_bytes = 0;

/* The exact budget under sampling (--sample-exact): on each CPU, the first
 * sample_exact malloc-family calls of every jiffy are traced whatever
 * their size (weight 1), counted in sites of their own (SITE_KIND_EXACT);
 * the byte countdown decides the others and is not advanced by these, so
 * the sampled calls stay a Poisson process over the rest. 0: none. */
const volatile __u32 sample_exact = 0;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct exact_budget);
} exact_budgets SEC(".maps");

/* Each CPU's clock at its last tick (tick_now): the time of the first
 * call it served in the current jiffy. */
struct tick_clock {
	__u64 jiffy;
	__u64 ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tick_clock);
} tick_clocks SEC(".maps");

/* tick_now is the monotonic time to a jiffy (bpf_ktime_get_ns() of this
 * CPU's first call in the current one), enough to date a block for its
 * age: reading the TSC on every allocation cost a tenth of its programs'
 * time. (bpf_ktime_get_coarse_ns() is not allowed in uprobe programs.)
 * Two threads interleaving on one CPU at a tick may leave the time of
 * either: both are of that tick. */
static __always_inline __u64 tick_now(void)
{
	__u32 zero = 0;
	struct tick_clock *c = bpf_map_lookup_elem(&tick_clocks, &zero);
	if (!c)
		return bpf_ktime_get_ns();
	__u64 j = bpf_jiffies64();
	if (c->jiffy != j) {
		c->jiffy = j;
		c->ns = bpf_ktime_get_ns();
	}
	return c->ns;
}

/* Threads whose pending record is a resource's acquire call in progress
 * (a zlib init, a declared pair): a malloc inside one is the resource's,
 * traced sampled or not. While it is 0 an unsampled malloc needs no
 * thread state. A thread that exits inside such a call leaves it one too
 * high, which only costs that lookup. */
__u64 resource_calls = 0;

/* Set once any thread entered a probed inflate() (zcall): from then on an
 * unsampled malloc looks at its thread's zcall too. */
__u32 zcalls_seen = 0;

/* Slots in site_slots (--max-sites). */
const volatile __u32 max_sites = 1 << 16;
/* Copies of each site's totals in site_counts: a power of two, at most
 * SITE_COPIES (user space sets it from the number of CPUs). */
const volatile __u32 site_copies = SITE_COPIES;
/* Slots handed out so far; may pass max_sites by a few when it is full. */
__u64 site_count = 0; /* 64 bits: BPF v1 has 64-bit compare-and-swap only */

/* Set by --probes-only (make bench's "floor" runs): every probe program
 * returns at once, so that a run measures what the probes alone cost the
 * target, on the same functions, sites and links. Nothing is counted. In
 * sampled mode the malloc family's session returns 1 at entry, as it does
 * for an untraced call. */
const volatile __u32 probes_only = 0;

/* Set by "leakscope run" (not --no-follow): every process the target
 * starts is traced too, each by a collection of its own. A child with a
 * memory of its own (fork) is stopped before its first instruction until
 * user space has attached to it; one that shares the target's memory
 * (CLONE_VM: vfork, posix_spawn) is noted and stopped when it execs, its
 * own program's first instruction. */
const volatile __u32 follow_forks = 0;

/* Children started with CLONE_VM but not CLONE_VFORK, not yet exec'd
 * (tgid -> 1): they run on the target's memory, so their calls count in
 * the target's tables (is_target). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u8);
} vm_shared SEC(".maps");

/* Set by target_exec when the target execs. */
__u32 exec_seen = 0;

/* Set when a launched command was stopped at its first tracked call to
 * wait for the range table (user space continues it). */
__u32 stop_sent = 0;

/* Program images the target exec'd into since tracing began: allocation
 * keys and site keys carry it, so the new image never matches the old's. */
__u32 exec_gen = 0;

/* Per-thread state of an acquire call between its entry and return probes. */
struct pending {
	__u64 size_bytes;
	__u64 old_ptr; /* realloc: the block being resized */
	__u64 out_ptr; /* posix_memalign: where the new pointer is stored */
	__u64 sp;      /* stack pointer at entry: pairs entry and return */
	__u32 kind;
	__u32 op;
	__u64 owner;   /* resource the allocation belongs to, or 0 */
	__u32 owner_kind;
	__u32 computed; /* a resource whose bytes were computed at entry: mallocs inside it are not its */
	__u32 site_flags; /* enum site_kind_bit of the site it goes to (SITE_KIND_EXACT) */
	/* zlib inflate, malloc not traced: the bytes of its window by the
	 * init's arguments, looked for once inflate() may have made it
	 * (window_word); 0 for none. */
	__u32 window_bytes;
};

/* A zlib call in progress that may allocate for its stream (inflate()
 * allocates the window lazily). Set at the call's entry, never cleared
 * (a return probe would be a second trap per call): a malloc is attributed
 * only while deeper on the stack, called from the zlib object itself, and
 * while the call has not returned: its return address is still where its
 * entry found it (zcall_active). */
struct zcall {
	__u64 strm;
	__u64 sp;
	__u64 ret_addr; /* *(sp) at the entry */
	__u32 kind;
	__u32 pad;
};


/* Map sizes are defaults; probe/ overrides max_entries from its flags. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1 << 20);
	__type(key, struct handle_key);
	__type(value, struct alloc_info);
} allocs SEC(".maps");

/* The live heap blocks (KIND_MALLOC) and resources whose handle looks
 * like a pointer (bucketable), first: an open-addressed table in an array, a
 * handle in one of the ALLOC_WAYS slots of the bucket its address hashes
 * to, claimed and released by a compare-and-swap on its address: no
 * bucket lock, no element to allocate, lookups inlined by the verifier.
 * A handle whose bucket is full (of resources, or when its oldest heap
 * block could not move), every other handle and every orphan are in
 * allocs, the hash. alloc_buckets_used buckets are in use, a
 * power of two (0: none, everything is in allocs); probe/ sizes both. */
const volatile __u32 alloc_buckets_used = 1 << 14;
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1 << 14);
	__type(key, __u32);
	__type(value, struct alloc_bucket);
} alloc_buckets SEC(".maps");

/* The bucketable handles of allocs (those whose bucket was full), counted
 * per hash of their address: a release or a new handle whose count is 0
 * is not in allocs, without the lookup. BPF-only. */
#define SPILL_FILTER_BITS 16
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1 << SPILL_FILTER_BITS);
	__type(key, __u32);
	__type(value, __u32);
} spill_filter SEC(".maps");

/* Sites: one per (stack, kind, image), its totals in a slot of site_slots,
 * an array (found without a hash lookup: an allocation keeps its slot, so
 * its release goes straight there) that user space reads in batches.
 * sites finds the slot of a key when a stack is seen again; site_count
 * hands out slots, never taken back. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1 << 16);
	__type(key, struct site_key);
	__type(value, __u32); /* slot */
} sites SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1 << 16);
	__type(key, __u32);
	__type(value, struct site_slot);
} site_slots SEC(".maps");

/* The totals of site slot i: site_copies copies at i * site_copies, a
 * CPU updating copy cpu % site_copies (struct site_stats). Mappable, so
 * its values start on a page and each copy is a cache line of its own.
 * Sized by probe/ to max_sites * site_copies. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, (1 << 16) * SITE_COPIES);
	__type(key, __u32);
	__type(value, struct site_stats);
} site_counts SEC(".maps");

#define STACK_SEEN_BITS 12

/* The slot of the site of each stack and kind this CPU saw last (direct-
 * mapped by the stack id and kind, slot + 1; 0: none): a stack seen again
 * finds its site without the sites lookup. The slot's own key says whether
 * it is the site, so a stale entry is never trusted. BPF-only. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1 << STACK_SEEN_BITS);
	__type(key, __u32);
	__type(value, __u32);
} site_seen SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1 << 16);
	__type(key, __u64); /* stack id: hash of the frames and flags */
	__type(value, struct stack);
} stacks SEC(".maps");

/* What a thread is in the middle of. Task storage: found without a hash
 * lookup or lock, and freed by the kernel when the thread exits (a thread
 * can die between an entry and its return probe). A record is active while
 * its sp is not 0. */
struct thread_state {
	struct pending outer; /* the tracked call in progress */
	struct pending inner; /* a malloc inside a resource's acquire call */
	struct zcall zcall;   /* the last inflate() entered */
	/* The mapping holding this thread's stack as last found (bpf_find_vma):
	 * a stack walk reads the stack in chunks up to its end (stack_window),
	 * or up to the page where a chunk once faulted (stack_read). */
	__u64 stack_lo, stack_hi;
	/* Bytes of the stack the last walk read, from the start of its
	 * lowest chunk to the end of its highest word (0: no walk yet): the
	 * size of the next walk's first chunk (walk_stack_held). */
	__u32 stack_need;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct thread_state);
} threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAT_MAX);
	__type(key, __u32); /* enum stat_index */
	__type(value, __u64);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stack);
} stack_scratch SEC(".maps");

/* When sampling, most blocks are not traced, and their frees would each
 * cost a lookup in allocs that finds nothing. A count of the traced heap
 * blocks (allocs entries of KIND_MALLOC) per hash of their address: a
 * free whose count is 0 is of an untraced block, without the lookup.
 * Updated only when sampling. BPF-only. */
#define SAMPLED_FILTER_BITS 17
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1 << SAMPLED_FILTER_BITS);
	__type(key, __u32);
	__type(value, __u32);
} sampled_filter SEC(".maps");

/* Stack ids this CPU found in stacks (direct-mapped by the id's top
 * bits): a walk that repeats one skips the hash lookup. User space never
 * deletes from stacks, so an id seen stays valid. BPF-only. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1 << STACK_SEEN_BITS);
	__type(key, __u32);
	__type(value, __u64);
} stack_seen SEC(".maps");

/* The numbers of one stack walk, which change at every frame. They live
 * in this CPU's stack window, a map value, not on the walking program's
 * stack: the verifier tracks what a program keeps on its stack, bounds
 * and all, so every iteration of walk_step would start from a state of
 * its own (a frame pointer known to be 8-aligned, above the last stack
 * pointer, ...) and none could be pruned; it knows nothing of a map
 * value's contents, and each iteration starts alike. */
struct walk_regs {
	__u64 ip; /* return address of the current frame */
	__u64 fp; /* frame pointer of the current frame's caller */
	__u64 sp; /* lowest address the next frame may lie at */
	__u64 hash;
	__u64 gen; /* the range table's generation: frame_cache entries of another are stale */
	__u64 stack_lo, stack_hi; /* the thread's stack, as far as chunks may be read; hi 0: unknown */
};

/* Where a stack walk keeps the chunk of the target's stack it read last
 * (stack_read). BPF-only. A chunk is at most STACK_CHUNK bytes; a
 * thread's first walk reads STACK_FIRST_CHUNK first, a later walk as
 * much as its last one needed (thread_state.stack_need), and a word past
 * the chunk read reads the next STACK_CHUNK bytes. */
#define STACK_CHUNK 4096
#define STACK_FIRST_CHUNK 512
struct stack_window {
	__u64 lo;   /* target address of data[0] */
	__u64 len;  /* bytes held; 0: none */
	__u64 busy; /* a walk on this CPU holds the per-CPU scratch (walk_stack) */
	__u64 chunk; /* bytes the next chunk read reads, at most */
	__u64 low, reach; /* this walk's lowest chunk start and highest word end read from chunks; low 0: none */
	struct walk_regs regs; /* the walk this CPU runs (walk.bpf.h) */
	__u8 data[STACK_CHUNK];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stack_window);
} stack_windows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * MAX_RANGES);
	__type(key, __u32); /* slot * MAX_RANGES + index, sorted by start */
	__type(value, struct exec_range);
} exec_ranges SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct range_ctl);
} range_ctls SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1 << 20);
	__type(key, __u32); /* exec_range.row_start + i, each object's rows sorted by pc */
	__type(value, struct unwind_row);
} unwind_rows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64); /* last range_miss sent from this CPU, ns */
} miss_times SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __s64); /* bytes left before the next traced allocation */
} sample_countdown SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FRAME_CACHE_SIZE);
	__type(key, __u32);
	__type(value, struct frame_rule);
} frame_cache SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct jvm_layout);
} jvm_layouts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_JVM_HEAPS);
	__type(key, __u32);
	__type(value, struct jvm_heap); /* low == 0: unused */
} jvm_heaps SEC(".maps");

#define RANGE_MISSES_BYTES 4096

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, RANGE_MISSES_BYTES);
} range_misses SEC(".maps");

/* Inflate streams traced without the malloc family (zlib bytes computed
 * from the init arguments) whose window is not counted yet have a window
 * word in their record (enum window_word): zlib allocates the window
 * inside an inflate() call, if the stream needs one. inflate() is not
 * probed (a trap per call): user space reads whether the window exists
 * from the target's memory at every snapshot, and target_exit counts it
 * for good when the target exits (zwindow_settle). windows_looked_for
 * is set once a record has one. */
__u32 windows_looked_for = 0;

/* Mapping and thread events (struct mmap_event) for user space, which
 * keeps the target's mappings and threads exactly (enum map_op). Sized by
 * probe/ (--map-events). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} mmap_events SEC(".maps");

/* Set by probe/ when the mmap.anon, mmap.file and thread kinds are traced
 * (--maps): the syscall tracepoints return at once otherwise. */
const volatile __u32 trace_maps = 0;

/* image_pad tags handle keys with the program image that made them: after
 * an exec nothing of the old image matches (its heap is gone). Even, so it
 * never equals an orphan's odd pad. */
static __always_inline __u32 image_pad(void)
{
	return exec_gen << 1;
}

static __always_inline void stat_add(__u32 idx, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &idx);
	if (v)
		*v += n; /* per-CPU: no atomics needed */
}

#endif /* STATE_BPF_H */
