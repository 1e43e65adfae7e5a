/* Structs and constants shared between the BPF programs and probe/ (Go).
 * Mirrored in Go by bpf2go -type; regenerate after edits (make generate). */
#ifndef LEAKSCOPE_H
#define LEAKSCOPE_H

/* Every constant user space shares with the programs is an enumerator
 * here, so that bpf2go -type emits it into Go: no value is copied by
 * hand. (A #define is for the BPF side alone.) */

/* Sizes of the tables both sides index. Mirrored in Go by bpf2go -type. */
enum limits {
	MAX_STACK_DEPTH = 64,
	MAX_RANGES = 2048, /* executable mappings per slot of exec_ranges */
	MAX_JVM_HEAPS = 4, /* entries of jvm_heaps */
	SITE_COPIES = 4,   /* most copies of a site's totals in site_counts */
};

#define RANGE_SEARCH_STEPS 12  /* > log2(MAX_RANGES) */
#define ROW_SEARCH_STEPS 24    /* > log2(rows of one object); libjvm.so has ~230k */

/* Which malloc-family function a session probe is on (its attach cookie).
 * Mirrored in Go by bpf2go -type; regenerate after edits. */
enum alloc_fn {
	FN_MALLOC = 1,
	FN_CALLOC = 2,
	FN_REALLOC = 3,
	FN_REALLOCARRAY = 4,
	FN_POSIX_MEMALIGN = 5,
	FN_MEMALIGN = 6, /* and aligned_alloc: (alignment, size) */
	FN_VALLOC = 7,
	FN_PVALLOC = 8,
};

/* Which register of struct pt_regs holds an argument at a session
 * probe's site (ACOOKIE_ARG*): the probe may sit past instructions that
 * copied the argument out of its own register (probe/uprobe/site_linux.go).
 * Every general register but the stack pointer. Read by site_arg
 * (arch.bpf.h). Mirrored in Go by bpf2go -type; regenerate after edits. */
#if defined(__TARGET_ARCH_x86)
enum arg_reg {
	ARG_REG_DI = 0,
	ARG_REG_SI = 1,
	ARG_REG_DX = 2,
	ARG_REG_CX = 3,
	ARG_REG_R8 = 4,
	ARG_REG_R9 = 5,
	ARG_REG_AX = 6,
	ARG_REG_BX = 7,
	ARG_REG_BP = 8,
	ARG_REG_R10 = 9,
	ARG_REG_R11 = 10,
	ARG_REG_R12 = 11,
	ARG_REG_R13 = 12,
	ARG_REG_R14 = 13,
	ARG_REG_R15 = 14,
};
#elif defined(__TARGET_ARCH_arm64)
/* arm64: x0-x30, by number. */
enum arg_reg {
	ARG_REG_X0 = 0,
	ARG_REG_X1 = 1,
	ARG_REG_X2 = 2,
	ARG_REG_X3 = 3,
	ARG_REG_X4 = 4,
	ARG_REG_X5 = 5,
	ARG_REG_X6 = 6,
	ARG_REG_X7 = 7,
	ARG_REG_X8 = 8,
	ARG_REG_X9 = 9,
	ARG_REG_X10 = 10,
	ARG_REG_X11 = 11,
	ARG_REG_X12 = 12,
	ARG_REG_X13 = 13,
	ARG_REG_X14 = 14,
	ARG_REG_X15 = 15,
	ARG_REG_X16 = 16,
	ARG_REG_X17 = 17,
	ARG_REG_X18 = 18,
	ARG_REG_X19 = 19,
	ARG_REG_X20 = 20,
	ARG_REG_X21 = 21,
	ARG_REG_X22 = 22,
	ARG_REG_X23 = 23,
	ARG_REG_X24 = 24,
	ARG_REG_X25 = 25,
	ARG_REG_X26 = 26,
	ARG_REG_X27 = 27,
	ARG_REG_X28 = 28,
	ARG_REG_X29 = 29,
	ARG_REG_X30 = 30,
};
#else
#error "leakscope: no enum arg_reg for this target architecture"
#endif

/* What an allocation is. Mirrored in Go by bpf2go -type; regenerate after edits. */
enum alloc_kind {
	KIND_MALLOC = 0,
	KIND_ZLIB_INFLATE = 1,
	KIND_ZLIB_DEFLATE = 2,
	KIND_MMAP_ANON = 3, /* anonymous mappings (mmap_events: counted in user space) */
	KIND_MMAP_FILE = 4, /* mappings of a file */
	KIND_THREAD = 5,    /* threads started and not yet exited, by their stack size */
	KIND_USER = 16, /* first kind of a user-declared pair */
};

/* How the return probe of an acquire call finds the new handle.
 * Mirrored in Go by bpf2go -type; regenerate after edits. */
enum alloc_op {
	OP_RET_PTR = 0,   /* malloc, calloc, memalign, ...: handle is the return value */
	OP_REALLOC = 1,   /* realloc, reallocarray: old handle released on success */
	OP_OUT_PTR = 2,   /* posix_memalign: int return, handle stored through an argument */
	OP_ARG_HANDLE = 3,/* zlib *Init*: int return (0 = Z_OK), handle is an argument */
	OP_REALLOC_RELEASE = 4, /* realloc not sampled: only its old handle is released */
};

/* Indexes into the stats map: every loss is counted, none is silent. */
enum stat_index {
	STAT_ALLOCS_DROPPED = 0,  /* allocs or sites table full: allocation not tracked */
	STAT_UNKNOWN_FREES = 1,   /* release of a handle not in the table */
	STAT_STACK_ERRORS = 2,    /* stack could not be stored or read */
	STAT_FREES_MISSED = 3,    /* an address came back while still recorded */
	STAT_PENDING_DROPPED = 4, /* per-thread state could not be allocated */
	STAT_FAILED_ALLOCS = 5,   /* allocator returned failure: not counted */
	STAT_NESTED_CALLS = 6,    /* allocator calls made inside another tracked call */
	STAT_ALLOCS = 7,          /* allocations tracked */
	STAT_FREES = 8,           /* releases matched to a tracked allocation */
	STAT_OWNED_ALLOCS = 9,    /* blocks a library allocated for a tracked resource */
	STAT_WINDOWS_UNREAD = 10, /* inflate windows the exit could not read (window_word) */
	STAT_STACK_CHUNK_FAULTS = 11, /* stack chunks a walk could not read (a page never touched) */
	STAT_WALKS_PREEMPTED = 12, /* stacks lost: this CPU's walk scratch was held by a preempted walk */
	STAT_MAP_EVENTS_LOST = 13, /* mmap_events full: a mapping or thread event not sent */
	STAT_EXACT_BUDGET = 14,   /* sampling: malloc-family calls the exact budget traced (sample_exact) */
	STAT_ALLOCS_MOVED = 15,   /* heap blocks moved from alloc_buckets to allocs (alloc_evict) */
	STAT_STOPS_UNSENT = 16,   /* stops not made (stop_told: ring buffer full, or the kernel refused the signal): the process ran on */
	STAT_MAX = 17,
};

/* Why a stack walk stopped early (bits of struct stack.flags). */
enum stack_flag {
	STACK_NO_FP = 1,      /* last frame's object has no frame pointers */
	STACK_BAD_FRAME = 2,  /* frame pointer failed a sanity check */
	STACK_UNVERIFIED = 4, /* a frame lay outside the known executable ranges */
	STACK_MAX_DEPTH = 8,  /* MAX_STACK_DEPTH reached */
	STACK_READ_ERROR = 16,/* reading the target's stack faulted */
	STACK_SWITCHED = 32,  /* the walk moved from the thread's stack to a goroutine's (cgo) */
	STACK_UNWIND_END = 64,/* the unwind table has no rule here (outermost frame or a gap) */
	STACK_UNWIND_UNSUPPORTED = 128, /* the unwind table cannot express this frame's rule */
};

/* Flags of struct exec_range. */
enum range_flag {
	RANGE_HAS_FP = 1, /* the object keeps frame pointers: follow them through it (%rbp, x29) */
	RANGE_ZLIB = 2,   /* the object holds a traced zlib: its mallocs can belong to a stream */
	RANGE_GO = 4,     /* Go code: its frame-pointer chain may switch stacks (cgo) */
	RANGE_DWARF = 8,  /* unwind through it with its rows in unwind_rows (.eh_frame) */
	RANGE_JVM_INTERP = 16, /* HotSpot's template interpreter: each frame's Method* is at fp-3 words */
	RANGE_JVM_CODE = 32,   /* HotSpot's code cache: compiled frames are unwound by their code blob's frame size */
	RANGE_GO_CGOCALL = 64, /* Go's runtime.asmcgocall: it called C on the system stack, its own frame is on the goroutine's */
	RANGE_ZLIB_COMPUTED = 128, /* its zlib streams' bytes are computed from their init arguments, not from its mallocs */
};

/* Offset of stack.hi in the Go runtime's struct g (its first field is the
 * goroutine's stack, struct { lo, hi uintptr }; asm_amd64.s and
 * asm_arm64.s read it as g_stack+stack_hi). */
#define GO_G_STACK_HI 8

#define JVM_SEGMAP_STEPS 64

/* One code heap of a HotSpot JVM (CodeHeap), written by user space from
 * the JVM's VMStructs. The code blob holding a pc is found with the heap's
 * segment map, as HotSpot's CodeHeap::find_start does: one byte per
 * segment, 0 at a block's first segment, else a hop back towards it, 0xff
 * for unused segments. The blob follows its block's header.
 * Mirrored in Go by bpf2go -type; regenerate after edits. */
struct jvm_heap {
	__u64 low;             /* first segment's address (VirtualSpace _low) */
	__u64 high;            /* end of the reserved heap */
	__u64 segmap;          /* address of the segment map */
	__u32 log2_segment;    /* log2 of the segment size */
	__u32 blob_offset;     /* sizeof(HeapBlock): the CodeBlob follows */
	__u32 frame_size_offset; /* CodeBlob::_frame_size (int, in words) */
	__u32 compile_id_offset; /* nmethod::_compile_id (int); 0: unknown */
};

/* A stack entry with bit STACK_JVM_METHOD_BIT set is not a return
 * address: it holds the Method* of the interpreted Java frame whose return
 * address precedes it in its low 47 bits (user addresses never have bit
 * 63 set, and metadata lies below 2^47), and the frame's bytecode index +
 * 1 in the STACK_JVM_BCI_BITS from bit 47 (0: unknown).
 * Mirrored in Go by bpf2go -type; regenerate after edits. */
enum stack_jvm {
	STACK_JVM_METHOD_BIT = 63,
	STACK_JVM_BCI_SHIFT = 47, /* also the width of the Method* */
	STACK_JVM_BCI_BITS = 16,
};
#define STACK_JVM_METHOD (1ULL << STACK_JVM_METHOD_BIT)
#define STACK_JVM_METHOD_MASK ((1ULL << STACK_JVM_BCI_SHIFT) - 1)
/* The Method* and bytecode pointer slots of an interpreted frame:
 * JVM_INTERP_METHOD_OFFSET and JVM_INTERP_BCP_OFFSET, per architecture in
 * arch.bpf.h. */

/* Where a Method's bytecodes are, from the JVM's VMStructs: the bytecode
 * index of a bytecode pointer bcp is bcp - (*(Method* + const_method_offset)
 * + const_method_size). Written by user space; all zero: unknown.
 * Mirrored in Go by bpf2go -type; regenerate after edits. */
struct jvm_layout {
	__u32 const_method_offset; /* Method::_constMethod */
	__u32 const_method_size;   /* sizeof(ConstMethod): the bytecodes follow */
};

/* How to unwind the frame of one return address, as the walk last found
 * it (exec_ranges, unwind_rows): a per-CPU, direct-mapped cache of
 * FRAME_CACHE_SIZE entries, valid while the range table's generation (and
 * the program image) is the one it was found in. BPF-only. */
#define FRAME_CACHE_BITS 12
#define FRAME_CACHE_SIZE (1 << FRAME_CACHE_BITS)
struct frame_rule {
	__u64 ip;
	__u64 generation; /* range_ctl.generation | exec_gen << 48 */
	__u32 flags;      /* the range's enum range_flag */
	__u8 has_row;     /* RANGE_DWARF: 1 when a row covers ip */
	__u8 rule;        /* the row's, as in struct unwind_row */
	__s8 rbp_off;
	__u8 pad;
	__s16 cfa_off;
	__u16 pad2;
	__u32 checked;    /* RANGE_JVM_CODE: blob_clock() when blob was last read */
	/* RANGE_JVM_CODE: the code blob found for ip, its frame size in
	 * words and the compile id read there (blob 0: none yet). A freed
	 * nmethod's memory reused by another has another compile id. Frame
	 * size 0: a blob without one (the interpreter, a stub), walked by
	 * its frame pointer. */
	__u64 blob;
	__s32 frame_size;
	__u32 compile_id;
};

/* One row of an object's unwind table, built from .eh_frame by
 * probe/unwind (see Row there): from pc (an ELF vaddr) to the next row's,
 * CFA = (rule & 0xf ? rbp : rsp) + cfa_off, the return address is at
 * CFA-8, the caller's rbp at CFA+rbp_off when rule >> 4 == 1, and the
 * caller's rsp is the CFA.
 * Mirrored in Go by bpf2go -type; regenerate after edits. */
struct unwind_row {
	__u32 pc;
	__s16 cfa_off;
	__s8 rbp_off;
	__u8 rule; /* low nibble enum unwind_cfa, high nibble enum unwind_rbp */
};

enum unwind_cfa {
	UNWIND_CFA_RSP = 0,
	UNWIND_CFA_RBP = 1,
	UNWIND_UNDEFINED = 2,
	UNWIND_UNSUPPORTED = 3,
	UNWIND_PLT = 4,
};

enum unwind_rbp {
	UNWIND_RBP_SAME = 0,
	UNWIND_RBP_SAVED = 1,
	UNWIND_RBP_UNDEFINED = 2,
};

/* Key of allocs: a handle and its kind, since one address can be both a
 * heap block and a resource (a malloc'd z_stream passed to inflateInit2_).
 * Mirrored in Go by bpf2go -type; regenerate after edits. */
struct handle_key {
	__u64 addr;
	__u32 kind; /* enum alloc_kind */
	__u32 pad;
};

/* One live allocation, keyed by struct handle_key in allocs.
 * owner and owner_kind mean one thing in a heap block's record
 * (KIND_MALLOC) and another in a resource's, which is never owned: there
 * they hold the inflate window not counted yet (enum window_word).
 * Mirrored in Go by bpf2go -type; regenerate after edits. */
struct alloc_info {
	__u64 size_bytes;
	__u64 ts_ns;    /* tick_now() when the allocation returned: monotonic, to a jiffy */
	__u64 stack_id; /* key into stacks; 0 when the stack was lost */
	__u16 kind;     /* enum alloc_kind */
	/* A heap block: its owner's kind, when owner != 0. A resource whose
	 * window is looked for: the window's bytes by the init's arguments. */
	__u16 owner_kind;
	__u32 site;     /* its site's slot in site_slots; NO_SITE for a block of a resource */
	/* A heap block: the resource it belongs to (a z_stream), or 0. A
	 * resource: its window word, or 0 (enum window_word). */
	__u64 owner;
};

/* A live handle in alloc_buckets, the table of the current image's heap
 * blocks and pointer-handled resources that allocs backs
 * (ebpf/state.bpf.h, bucketable in table.bpf.h): found by addr and
 * info.kind. addr 0: the slot is free. One slot is a cache line.
 * Mirrored in Go by bpf2go -type; regenerate after edits. */
struct alloc_slot {
	__u64 addr; /* the handle; claimed and released by compare-and-swap */
	__u32 gen;  /* image_pad() of the image that made it */
	__u32 pad;
	struct alloc_info info;
	__u64 pad2;
};

/* Mirrored in Go by bpf2go -type; regenerate after edits. */
enum alloc_table {
	/* Slots of a bucket of alloc_buckets: a block is in one of the
	 * slots of the bucket its address hashes to. */
	ALLOC_WAYS = 4,
};

struct alloc_bucket {
	struct alloc_slot slot[ALLOC_WAYS];
};

/* The window word of an inflate stream traced without the malloc family
 * whose window is not counted yet (alloc_info.owner of its record): zlib
 * allocates it inside inflate() when the stream first needs it. Whether
 * it did is read from the stream's state: state->window, 1 <<
 * state->wbits bytes. The word is strm->state as the init left it (0 if
 * unread: then read from strm) with WINDOW_PENDING set, and 0 once the
 * window is counted: the state's address is taken when the init returns,
 * since a program may wipe or reuse a z_stream it dropped, but the leaked
 * state stays. A state not 8-aligned (no zalloc's) is kept as unread.
 * The record's owner_kind holds the window's bytes by the init's
 * windowBits, for a state whose wbits cannot be trusted.
 * Mirrored in Go by bpf2go -type; regenerate after edits. */
enum window_word {
	WINDOW_PENDING = 1,
	WINDOW_FLAGS = 7, /* the bits that are not the state */
};

/* Where a z_stream holds its state (struct z_stream_s: next_in, avail_in,
 * total_in, next_out, avail_out, total_out, msg, state), and where the
 * state holds its window, in zlib 1.2.9 to 1.3.1 on x86-64 and arm64
 * (both LP64 with natural alignment: one layout) (struct
 * inflate_state: strm, mode, last, wrap, havedict, flags, dmax, check,
 * total, head, then wbits, wsize, whave, wnext, window). Checked on zlib
 * 1.2.13 by the exact window bytes of TestZlibWindowReadFromStateAttached.
 * Mirrored in Go by bpf2go -type; regenerate after edits. */
enum zlib_offset {
	ZSTREAM_STATE_OFF = 56,
	INFLATE_STATE_WBITS_OFF = 56,
	INFLATE_STATE_WINDOW_OFF = 72,
};

/* Key of the per-site aggregates: one allocating stack and kind.
 * Mirrored in Go by bpf2go -type; regenerate after edits. */
struct site_key {
	__u64 stack_id;
	__u32 kind;
	__u32 pad;
};

/* Bits of site_key.kind above the kind (enum alloc_kind). Under sampling
 * the malloc blocks the exact budget traced (sample_exact: weight 1) are
 * counted in a site of their own, the stack's kind with SITE_KIND_EXACT
 * set; alloc_info.kind and the handle's kind stay the plain kind. User
 * space strips the bit when naming the kind and merges both sites.
 * Mirrored in Go by bpf2go -type; regenerate after edits. */
enum site_kind_bit {
	SITE_KIND_EXACT = 0x40000000,
};

/* One CPU's exact budget under sampling (exact_budgets): the jiffy it
 * counts, the calls it traced in that jiffy, and every call since
 * tracing began that came past it and was left to the byte sampler
 * (while 0 on every CPU, every call was traced exactly).
 * Mirrored in Go by bpf2go -type; regenerate after edits. */
struct exact_budget {
	__u64 jiffy;
	__u64 used;
	__u64 past;
};

/* A site's totals, in SITE_COPIES copies (site_counts): a CPU updates
 * copy cpu % site_copies of its site, atomically, so two threads
 * allocating from one site on two CPUs do not bounce one cache line. A
 * block freed on another CPU than the one that allocated it comes out of
 * that CPU's copy, whose live bytes may wrap below zero: only the sum of
 * the copies, which user space takes at each snapshot, is the site's.
 * The live count is allocs - frees. One copy is a cache line.
 * Mirrored in Go by bpf2go -type; regenerate after edits. */
struct site_stats {
	__u64 live_bytes;
	__u64 allocs; /* allocations ever made from this site */
	__u64 frees;  /* of those, released: allocs - frees are live */
	__u64 pad[5];
};

/* alloc_info.site of a block that counts in a resource's bytes, not in a
 * site (no slot has this index). */
#define NO_SITE 0xffffffffU

/* States of a site slot. */
enum slot_state {
	SLOT_FREE = 0,    /* not handed out yet */
	SLOT_USED = 1,    /* holds the site of key */
	SLOT_UNUSED = 2,  /* handed out, but another CPU made the same site first */
};

/* One site in site_slots: its key, written once when the site is made;
 * its totals are in site_counts.
 * Mirrored in Go by bpf2go -type; regenerate after edits. */
struct site_slot {
	struct site_key key;
	__u64 state; /* enum slot_state; set after the key */
};

/* A user stack, leaf (the allocator's caller) first.
 * Mirrored in Go by bpf2go -type; regenerate after edits. */
struct stack {
	__u64 ips[MAX_STACK_DEPTH];
	__u32 depth;
	__u32 flags; /* enum stack_flag */
};

/* One executable mapping of the target, written by user space.
 * Mirrored in Go by bpf2go -type; regenerate after edits. */
struct exec_range {
	__u64 start;
	__u64 end;
	__u32 flags; /* enum range_flag */
	__u32 object;
	__u64 bias;      /* runtime address - ELF vaddr, for unwind rows */
	__u32 row_start; /* the object's rows in unwind_rows (RANGE_DWARF) */
	__u32 row_count;
};

/* Which half of exec_ranges is current; user space fills the other half,
 * then flips slot, so a program never sees a half-written table. */
struct range_ctl {
	__u32 slot;
	__u32 count;
	__u64 generation;
};

/* Sent when a frame falls outside the known ranges: user space rereads
 * /proc/PID/maps (a library was just loaded). ip RANGE_MISS_EXIT (no code
 * address) says instead that the target is exiting, stopped: user space
 * names its stacks while it can still read the target's memory. ip
 * RANGE_MISS_EXEC says the target exec'd a new image (again, after run's
 * shim): user space probes its allocator and libraries, and under run
 * continues it (exec_stop).
 * Mirrored in Go by bpf2go -type; regenerate after edits. */
struct range_miss {
	__u64 ip;
	__u64 generation;
	__u64 at_ns; /* bpf_ktime_get_ns() when sent: how long a stop lasted */
};

/* Values of range_miss.ip that are no code address.
 * Mirrored in Go by bpf2go -type; regenerate after edits. */
enum range_miss_ip {
	RANGE_MISS_EXIT = 1,
	RANGE_MISS_EXEC = 2,
	/* A process the target started: generation holds its pid. FORK: a
	 * copy of the target, stopped before its first instruction; SPAWN:
	 * a child that shared the target's memory, stopped as its exec'd
	 * program starts. */
	RANGE_MISS_FORK = 3,
	RANGE_MISS_SPAWN = 4,
	/* A child sharing the target's memory (CLONE_VM, not CLONE_VFORK),
	 * stopped before its first instruction: its calls count in the
	 * target's tables once the target's probes are attached to it too. */
	RANGE_MISS_VMFORK = 5,
};

/* exit_status (leakscope.bpf.c) holds the target's wait status as its
 * last thread exited, with bit EXIT_STATUS_KNOWN_BIT set; 0 until then.
 * Mirrored in Go by bpf2go -type; regenerate after edits. */
enum exit_status_bit {
	EXIT_STATUS_KNOWN_BIT = 31,
};
#define EXIT_STATUS_KNOWN (1u << EXIT_STATUS_KNOWN_BIT)

/* Attach cookies of the zlib init programs when the bytes are computed
 * from the init arguments (malloc not traced): bits 0-15 are sizeof the
 * object's deflate_state or inflate_state (plus a counted z_stream), bits
 * 16-19 which init function it is (enum zinit). Decoded by
 * zlib_cookie_decode (cookie.bpf.h), encoded by probe/kernel/cookie_linux.go.
 *
 * A declared pair's programs (--track): bits 0-15 the kind, 16-19 the op
 * (enum alloc_op), 20-23 the 1-based argument that holds the handle (0:
 * the return value), 24-27 the 1-based argument that holds the bytes
 * acquired (0: the mallocs inside the call; set only when the malloc
 * family is not traced). With malloc not traced, a JNI fallback for zlib
 * (preset jvm) has its bytes in bits 32-55, and bit 28 says the handle is
 * an inflate z_stream whose window is looked for (window_word), 32 KiB
 * (java.util.zip always asks for 15 bits). Decoded by pair_cookie_decode.
 *
 * alloc_session's cookie: bits 0-7 the function (enum alloc_fn), 8-12,
 * 13-17 and 18-22 the register (enum arg_reg) holding its arguments 1, 2
 * and 3 at the probe's site: 5 bits, room for arm64's x0-x30. Decoded by
 * alloc_cookie_decode.
 * Mirrored in Go by bpf2go -type; regenerate after edits. */
enum cookie_layout {
	ZCOOKIE_STATE_SHIFT = 0,
	ZCOOKIE_STATE_BITS = 16,
	ZCOOKIE_INIT_SHIFT = 16,
	ZCOOKIE_INIT_BITS = 4,
	COOKIE_KIND_SHIFT = 0,
	COOKIE_KIND_BITS = 16,
	COOKIE_OP_SHIFT = 16,
	COOKIE_OP_BITS = 4,
	COOKIE_ARG_SHIFT = 20,
	COOKIE_ARG_BITS = 4,
	COOKIE_SIZE_ARG_SHIFT = 24,
	COOKIE_SIZE_ARG_BITS = 4,
	COOKIE_ZWINDOW_SHIFT = 28,
	COOKIE_ZWINDOW_BITS = 1,
	COOKIE_BYTES_SHIFT = 32,
	COOKIE_BYTES_BITS = 24,
	ACOOKIE_FN_SHIFT = 0,
	ACOOKIE_FN_BITS = 8,
	ACOOKIE_ARG1_SHIFT = 8,
	ACOOKIE_ARG2_SHIFT = 13,
	ACOOKIE_ARG3_SHIFT = 18,
	ACOOKIE_ARG_BITS = 5,
};

/* Which init function a zlib init program is on (ZCOOKIE_INIT).
 * Mirrored in Go by bpf2go -type; regenerate after edits. */
enum zinit {
	ZINIT_INFLATE = 1,  /* inflateInit_(strm, version, size): windowBits 15 */
	ZINIT_INFLATE2 = 2, /* inflateInit2_(strm, windowBits, version, size) */
	ZINIT_BACK = 3,     /* inflateBackInit_(strm, windowBits, window, ...): caller's window */
	ZINIT_DEFLATE = 4,  /* deflateInit_(strm, level, ...): windowBits 15, memLevel 8 */
	ZINIT_DEFLATE2 = 5, /* deflateInit2_(strm, level, method, windowBits, memLevel, ...) */
};

/* A zlib init program's cookie, decoded.
 * Mirrored in Go by bpf2go -type; regenerate after edits. */
struct zlib_cookie {
	__u32 state; /* bytes of the stream's state (0: malloc traced) */
	__u32 init;  /* enum zinit */
};

/* alloc_session's cookie, decoded.
 * Mirrored in Go by bpf2go -type; regenerate after edits. */
struct alloc_cookie {
	__u32 fn;     /* enum alloc_fn */
	__u32 reg[3]; /* enum arg_reg of arguments 1-3 */
};

/* A pair program's cookie, decoded.
 * Mirrored in Go by bpf2go -type; regenerate after edits. */
struct pair_cookie {
	__u32 kind;     /* enum alloc_kind */
	__u32 op;       /* enum alloc_op */
	__u32 arg;      /* 1-based argument of the handle; 0: the return value */
	__u32 size_arg; /* 1-based argument of the bytes; 0: none */
	__u32 zwindow;  /* 1: the handle is an inflate stream with a window to look for */
	__u32 bytes;    /* bytes acquired, when no argument holds them */
};

/* What a record of mmap_events says happened. Mappings and threads are
 * counted in user space (probe/mapping_linux.go), which splits and
 * shrinks mappings exactly on partial unmaps and remaps: the kernel only
 * sends, in the order the calls returned, what each call did.
 * Mirrored in Go by bpf2go -type; regenerate after edits. */
enum map_op {
	MAP_OP_MAP = 1,         /* mmap returned addr: [addr, addr+len) is mapped */
	MAP_OP_UNMAP = 2,       /* munmap(addr, len) succeeded */
	MAP_OP_REMAP = 3,       /* mremap(old_addr, old_len, len, flags, ...) returned addr */
	MAP_OP_THREAD = 4,      /* thread tid started: its stack at addr, len bytes (0: unknown) */
	MAP_OP_THREAD_EXIT = 5, /* thread tid exited */
};

/* Bits of mmap_event.how. */
enum map_how {
	MAP_HOW_UNCOUNTED = 1, /* made inside a tracked acquire call (malloc's own mmap): only what it replaced counts */
	MAP_HOW_FILE = 2,      /* a mapping of a file (ino, dev) */
	MAP_HOW_FIXED = 4,     /* MAP_FIXED, MREMAP_FIXED: what was at addr is replaced */
	MAP_HOW_DONTUNMAP = 8, /* MREMAP_DONTUNMAP: the old range stays mapped */
};

/* One record of mmap_events.
 * Mirrored in Go by bpf2go -type; regenerate after edits. */
struct mmap_event {
	__u64 addr;
	__u64 len;
	__u64 old_addr; /* MAP_OP_REMAP */
	__u64 old_len;
	__u64 stack_id; /* the calling stack (MAP, REMAP, THREAD); 0: lost */
	__u64 ts_ns;
	__u64 ino;      /* MAP_HOW_FILE */
	__u32 dev;
	__u32 op;       /* enum map_op */
	__u32 how;      /* enum map_how */
	__u32 tid;      /* MAP_OP_THREAD*: the thread; else the caller */
	__u32 gen;      /* exec_gen: the image the call was made in */
	__u32 pad;
};

#endif /* LEAKSCOPE_H */
