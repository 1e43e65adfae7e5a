//go:build ignore

/* leakscope kernel side: uprobes on an allocator's acquire and release calls
 * keep a table of live allocations and per-stack totals in the kernel, so user
 * space reads aggregates at an interval instead of one event per call. */

#include "vmlinux.h"
#include "bpf/bpf_helpers.h"
#include "bpf/bpf_tracing.h"

#include "leakscope.h"
#include "arch.bpf.h"
#include "state.bpf.h"
#include "cookie.bpf.h"

/* Set by "leakscope run": stop the command whenever the dynamic linker
 * changes its loaded objects (dl_debug_state) until user space has read
 * its mappings and probed what was loaded. */
const volatile __u32 stop_on_load = 0;

/* Set by exit_call when it stopped the target in exit(); user space clears
 * it and continues the target once its stacks are resolved. */
__u32 exit_stop = 0;
__u32 exit_settled = 0;
/* Set by target_exec when it stopped a launched command that exec'd again
 * (a launch script, sh -c 'exec ...'): user space probes the new image's
 * allocator and libraries, clears it and continues the command. */
__u32 exec_stop = 0;

/* Processes the target started (fork, or clone without CLONE_THREAD)
 * that are not followed (follow_forks unset, or the record could not be
 * sent): the report says so. */
__u32 forks = 0;

/* The target's wait status as its last thread exited, with
 * EXIT_STATUS_KNOWN set; 0 until then (leakscope.h). */
__u32 exit_status = 0;
/* bpf_ktime_get_ns() then. */
__u64 exit_ns = 0;

/* Processes the target started with CLONE_VM (followed from their exec,
 * if they exec: user space counts those). */
__u32 vm_forks = 0;

/* Children started with CLONE_VM, not yet exec'd (tgid -> 1). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u8);
} vm_children SEC(".maps");

extern int bpf_send_signal_task(struct task_struct *task, int sig, enum pid_type type, __u64 value) __ksym __weak;

#include "track.bpf.h"

/* Force the shared types into BTF for bpf2go -type. */
const struct range_miss *unused_range_miss __attribute__((unused));
const struct jvm_heap *unused_jvm_heap __attribute__((unused));
const struct jvm_layout *unused_jvm_layout __attribute__((unused));
const enum range_flag *unused_range_flag __attribute__((unused));
const enum unwind_cfa *unused_unwind_cfa __attribute__((unused));
const enum unwind_rbp *unused_unwind_rbp __attribute__((unused));
const enum window_word *unused_window_word __attribute__((unused));
const enum alloc_fn *unused_alloc_fn __attribute__((unused));
const enum arg_reg *unused_arg_reg __attribute__((unused));
const struct alloc_cookie *unused_alloc_cookie __attribute__((unused));
const enum alloc_kind *unused_alloc_kind __attribute__((unused));
const enum slot_state *unused_slot_state __attribute__((unused));
const enum stat_index *unused_stat_index __attribute__((unused));
const enum stack_flag *unused_stack_flag __attribute__((unused));
const enum alloc_op *unused_alloc_op __attribute__((unused));
const enum limits *unused_limits __attribute__((unused));
const enum stack_jvm *unused_stack_jvm __attribute__((unused));
const enum zlib_offset *unused_zlib_offset __attribute__((unused));
const enum range_miss_ip *unused_range_miss_ip __attribute__((unused));
const enum exit_status_bit *unused_exit_status_bit __attribute__((unused));
const enum cookie_layout *unused_cookie_layout __attribute__((unused));
const enum zinit *unused_zinit __attribute__((unused));
const struct zlib_cookie *unused_zlib_cookie __attribute__((unused));
const struct pair_cookie *unused_pair_cookie __attribute__((unused));
const struct mmap_event *unused_mmap_event __attribute__((unused));
const enum map_op *unused_map_op __attribute__((unused));
const enum map_how *unused_map_how __attribute__((unused));
const enum site_kind_bit *unused_site_kind_bit __attribute__((unused));
const struct exact_budget *unused_exact_budget __attribute__((unused));
const enum alloc_table *unused_alloc_table __attribute__((unused));

/* TWINS(plain, multi, args_of, name, args...) defines program name in
 * section plain and its twin name_multi in section multi, both running the
 * body that follows (as BPF_KPROBE does for one). user space attaches the
 * twins with one uprobe_multi link per program and object where the kernel
 * has them (6.6+): attaching, and above all detaching, take one step
 * instead of one per function (each ~85 ms here); the plain programs are
 * the fallback. */
#define TWIN(sec, prog, args_of, name, args...)				\
SEC(sec) int prog(struct pt_regs *ctx)					\
{									\
	_Pragma("GCC diagnostic push")					\
	_Pragma("GCC diagnostic ignored \"-Wint-conversion\"")		\
	if (probes_only)						\
		return 0;						\
	return ____##name(args_of(args));				\
	_Pragma("GCC diagnostic pop")					\
}
#define TWINS(plain, multi, args_of, name, args...)				\
static __always_inline int ____##name(struct pt_regs *ctx, ##args);	\
TWIN(plain, name, args_of, name, ##args)				\
TWIN(multi, name##_multi, args_of, name, ##args)			\
static __always_inline int ____##name(struct pt_regs *ctx, ##args)

#define UPROBE_TWINS(name, args...) TWINS("uprobe", "uprobe.multi", ___bpf_kprobe_args, name, ##args)
#define URETPROBE_TWINS(name, args...) TWINS("uretprobe", "uretprobe.multi", ___bpf_kretprobe_args, name, ##args)

/* malloc family: entries record the request, one return program completes
 * every call (the op recorded at entry says how). */

SEC("uprobe")
int BPF_KPROBE(malloc_enter, size_t size)
{
	pending_enter(ctx, KIND_MALLOC, OP_RET_PTR, size, 0, 0);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(calloc_enter, size_t n, size_t size)
{
	pending_enter(ctx, KIND_MALLOC, OP_RET_PTR, (__u64)n * size, 0, 0);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(realloc_enter, void *ptr, size_t size)
{
	pending_enter(ctx, KIND_MALLOC, OP_REALLOC, size, (__u64)ptr, 0);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(reallocarray_enter, void *ptr, size_t n, size_t size)
{
	pending_enter(ctx, KIND_MALLOC, OP_REALLOC, (__u64)n * size, (__u64)ptr, 0);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(posix_memalign_enter, void **memptr, size_t align, size_t size)
{
	pending_enter(ctx, KIND_MALLOC, OP_OUT_PTR, size, 0, (__u64)memptr);
	return 0;
}

/* memalign and aligned_alloc: (alignment, size). */
SEC("uprobe")
int BPF_KPROBE(memalign_enter, size_t align, size_t size)
{
	pending_enter(ctx, KIND_MALLOC, OP_RET_PTR, size, 0, 0);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(valloc_enter, size_t size)
{
	pending_enter(ctx, KIND_MALLOC, OP_RET_PTR, size, 0, 0);
	return 0;
}

/* pvalloc rounds the request up to whole pages; that much is held. */
SEC("uprobe")
int BPF_KPROBE(pvalloc_enter, size_t size)
{
	__u64 rounded = size ? (size + page_size - 1) & ~(page_size - 1) : page_size;
	pending_enter(ctx, KIND_MALLOC, OP_RET_PTR, rounded, 0, 0);
	return 0;
}

URETPROBE_TWINS(alloc_exit)
{
	pending_exit(ctx);
	return 0;
}

/* free: attached at the entry or, where the first instruction would be
 * single-stepped (glibc: test %rdi,%rdi), at the next emulated one; %rdi
 * still holds the pointer there. */
UPROBE_TWINS(free_enter, void *ptr)
{
	release_enter(ctx, (__u64)ptr, KIND_MALLOC);
	return 0;
}

extern bool bpf_session_is_return(void) __ksym __weak;

/* -ln((i + 0.5) / 64) * 1024: 64 steps of an exponential draw, mean ~1024. */
static const __u16 neg_ln_1024[64] = { 4968, 3844, 3320, 2976, 2719, 2513, 2342, 2195, 2067, 1953, 1851, 1758, 1672, 1594, 1520, 1452, 1388, 1328, 1271, 1217, 1166, 1117, 1070, 1026, 983, 942, 903, 865, 828, 793, 759, 726, 694, 663, 633, 603, 575, 547, 520, 494, 469, 444, 419, 395, 372, 349, 327, 305, 284, 263, 243, 223, 203, 184, 165, 146, 128, 110, 92, 75, 58, 41, 24, 8 };

/* sampled reports whether an allocation of size bytes is traced. */
static __always_inline bool sampled(__u64 size)
{
	if (!sample_bytes)
		return true;
	__u32 zero = 0;
	__s64 *left = bpf_map_lookup_elem(&sample_countdown, &zero);
	if (!left)
		return true;
	*left -= (__s64)size;
	if (*left > 0)
		return false;
	__u32 i = bpf_get_prandom_u32() & 63;
	*left = (__s64)(sample_bytes * neg_ln_1024[i] / 1024);
	return true;
}

/* exact_budget_take reports whether this call is one of the first
 * sample_exact of this jiffy on this CPU (state.bpf.h), or counts it in
 * its budget's past when it is not: while that is 0, every call was traced
 * exactly. Two threads on one CPU can interleave here (a uprobe's program
 * runs with migration, not preemption, disabled): the counts are atomic,
 * and the budget may go over by the threads that raced for its last call. */
static __always_inline bool exact_budget_take(void)
{
	if (!sample_exact)
		return false;
	__u32 zero = 0;
	struct exact_budget *b = bpf_map_lookup_elem(&exact_budgets, &zero);
	if (!b)
		return false;
	__u64 now = bpf_jiffies64();
	if (b->jiffy != now) {
		b->jiffy = now;
		b->used = 0;
	}
	if (b->used >= sample_exact) {
		__sync_fetch_and_add(&b->past, 1);
		return false;
	}
	__sync_fetch_and_add(&b->used, 1);
	return true;
}

/* in_resource_call: a malloc made for a resource being built or used (zlib
 * state, a window inside inflate()) is always traced, sampled or not: its
 * bytes belong to the resource. */
static __always_inline bool in_resource_call(struct pt_regs *ctx)
{
	if (!resource_calls && !zcalls_seen)
		return false;
	struct thread_state *ts = thread_state(false);
	if (!ts)
		return false;
	__u64 sp = arch_sp(ctx);
	return (ts->outer.sp && sp < ts->outer.sp && ts->outer.kind != KIND_MALLOC && !ts->outer.computed) ||
	       zcall_active(&ts->zcall, sp);
}

/* alloc_session serves every malloc-family function when sampling: one
 * probe per call, whose return part runs only for traced calls (returning
 * 1 at entry skips it), where a uprobe and a uretprobe would both trap on
 * every call. The cookie (struct alloc_cookie) is the function (enum
 * alloc_fn) and where its arguments are at the probe's site, which may lie
 * past instructions that copied them to other registers. */
SEC("uprobe.session")
int alloc_session(struct pt_regs *ctx)
{
	if (probes_only)
		return sample_bytes ? 1 : 0;
	if (bpf_session_is_return()) {
		pending_exit(ctx);
		return 0;
	}
	if (!is_target())
		return 1;
	struct alloc_cookie ac = alloc_cookie_decode(bpf_get_attach_cookie(ctx));
	__u64 a1 = site_arg(ctx, ac.reg[0]), a2 = site_arg(ctx, ac.reg[1]), a3 = site_arg(ctx, ac.reg[2]);
	__u64 size = 0, old = 0, out = 0;
	__u32 op = OP_RET_PTR;
	switch (ac.fn) {
	case FN_MALLOC:
	case FN_VALLOC:
		size = a1;
		break;
	case FN_CALLOC:
		size = a1 * a2;
		break;
	case FN_REALLOC:
		op = OP_REALLOC;
		old = a1;
		size = a2;
		break;
	case FN_REALLOCARRAY:
		op = OP_REALLOC;
		old = a1;
		size = a2 * a3;
		break;
	case FN_POSIX_MEMALIGN:
		op = OP_OUT_PTR;
		out = a1;
		size = a3;
		break;
	case FN_MEMALIGN:
		size = a2;
		break;
	case FN_PVALLOC:
		size = a1 ? (a1 + page_size - 1) & ~(page_size - 1) : page_size;
		break;
	default:
		return 1;
	}
	/* The exact budget's calls are traced first, without advancing the
	 * byte countdown, their blocks counted in exact sites.
	 * A realloc's new block is sampled as any allocation of its size. One
	 * not sampled still runs its return part when its old block may be
	 * traced, to release it, and tracks nothing new: tracking it would
	 * trace every realloc'd block, each then weighted as a sampled one. */
	bool exact = exact_budget_take();
	if (!exact && !sampled(size) && !in_resource_call(ctx)) {
		if (op != OP_REALLOC || !old)
			return 1;
		__u32 *n = filter_count(old);
		if (n && *n == 0)
			return 1;
		op = OP_REALLOC_RELEASE;
	}
	if (!pending_enter_site(ctx, KIND_MALLOC, op, size, old, out, exact ? SITE_KIND_EXACT : 0))
		return 1;
	/* Counted once recorded: a nested call (realloc inside
	 * reallocarray) took budget but is not traced. */
	if (exact)
		stat_add(STAT_EXACT_BUDGET, 1);
	return 0;
}

/* zlib streams, keyed by their z_stream. Init functions take strm first.
 *
 * With the malloc family traced, a stream's bytes are the mallocs zlib makes
 * inside its init call and inside inflate() (the window). Without it, probe/
 * sets each init probe's cookie and the bytes are computed here from the
 * init arguments, as zlib's deflate.c and inflate.c (1.2.9 to 1.3.1)
 * allocate them: the cookie (struct zlib_cookie, leakscope.h) holds sizeof
 * the object's deflate_state or inflate_state and which init function it
 * is (enum zinit). */

/* zlib_window_bits is the window a stream gets for windowBits w: negative
 * is raw deflate, 16 + w gzip, 32 + w automatic header detection; 0 (inflate
 * only: the zlib header decides) is taken as 15. deflate turns 8 into 9.
 * Out-of-range values make the init fail, which is not counted; they are
 * clamped here only to keep the shifts defined. */
static __always_inline __u32 zlib_window_bits(__s32 w, bool deflate)
{
	if (w < 0)
		w = -w;
	else if (deflate && w > 15)
		w -= 16;
	else if (!deflate && w < 48)
		w &= 15;
	if (w == 0)
		w = 15;
	if (deflate && w == 8)
		w = 9;
	if (w < 8)
		w = 8;
	if (w > 15)
		w = 15;
	return w;
}

UPROBE_TWINS(zlib_inflate_init_enter, void *strm, long a2)
{
	struct zlib_cookie zc = zlib_cookie_decode(bpf_get_attach_cookie(ctx));
	__u64 state = zc.state;
	if (!state) { /* malloc traced: the bytes are zlib's mallocs */
		pending_enter(ctx, KIND_ZLIB_INFLATE, OP_ARG_HANDLE, 0, 0, (__u64)strm);
		return 0;
	}
	__u32 init = zc.init, window = 0;
	if (init == ZINIT_INFLATE)
		window = 1U << 15;
	else if (init == ZINIT_INFLATE2)
		window = 1U << zlib_window_bits((__s32)a2, false);
	pending_enter(ctx, KIND_ZLIB_INFLATE, OP_ARG_HANDLE, state, 0, (__u64)strm);
	pending_computed(ctx, KIND_ZLIB_INFLATE);
	/* The window waits in the pending record for the init's return. */
	if (window)
		zwindow_pending(ctx, KIND_ZLIB_INFLATE, window);
	return 0;
}

UPROBE_TWINS(zlib_deflate_init_enter, void *strm, long level, long method, long wbits, long mem_level)
{
	struct zlib_cookie zc = zlib_cookie_decode(bpf_get_attach_cookie(ctx));
	__u64 size = zc.state;
	if (size) {
		__u32 w = 15, m = 8;
		if (zc.init == ZINIT_DEFLATE2) {
			w = zlib_window_bits((__s32)wbits, true);
			m = (__s32)mem_level < 1 ? 1 : (__s32)mem_level > 9 ? 9 : (__u32)mem_level;
		}
		/* window 2 << w, prev 2 << w, head 2 << (m + 7), pending_buf
		 * 4 << (m + 6) */
		size += (1ULL << (w + 2)) + (1ULL << (m + 9));
	}
	pending_enter(ctx, KIND_ZLIB_DEFLATE, OP_ARG_HANDLE, size, 0, (__u64)strm);
	if (size)
		pending_computed(ctx, KIND_ZLIB_DEFLATE);
	return 0;
}

UPROBE_TWINS(zlib_inflate_end_enter, void *strm)
{
	release_enter(ctx, (__u64)strm, KIND_ZLIB_INFLATE);
	return 0;
}

UPROBE_TWINS(zlib_deflate_end_enter, void *strm)
{
	release_enter(ctx, (__u64)strm, KIND_ZLIB_DEFLATE);
	return 0;
}

/* inflate() allocates the window on first use: with the malloc family
 * traced, remember the stream for the malloc, and the call's return
 * address to tell it is still running (zcall_active). (Without the malloc
 * family, inflate() is not probed: see window_word.)
 *
 * zcall_active tells the call is still running by its return address
 * still in the stack slot the entry found it in: x86-64's call pushed it
 * there. arm64 has no such slot (ARCH_ENTRY_RA_IN_SLOT, arch.bpf.h): the
 * return address is in x30 at the entry, and inflate()'s prologue saves
 * it at an offset only its code or unwind row gives. There no call is
 * recorded, so a malloc inside inflate() is not given to its stream by
 * zcall_owner, nor traced unsampled by in_resource_call; its window is
 * still found by zwindow_owner. arm64 needs the slot (from inflate()'s
 * unwind row: where x30 is saved once its prologue ran) or a return probe
 * on inflate() to end the call. */
UPROBE_TWINS(zlib_inflate_enter, void *strm)
{
	if (!ARCH_ENTRY_RA_IN_SLOT || !is_target())
		return 0;
	struct thread_state *ts = thread_state(true);
	if (!ts)
		return 0;
	__u64 sp = arch_sp(ctx), ra = 0;
	if (arch_entry_ra(ctx, sp, &ra)) {
		ts->zcall.sp = 0;
		return 0;
	}
	if (!zcalls_seen)
		zcalls_seen = 1;
	ts->zcall.strm = (__u64)strm;
	ts->zcall.sp = sp;
	ts->zcall.ret_addr = ra;
	ts->zcall.kind = KIND_ZLIB_INFLATE;
	return 0;
}

/* Declared pairs (--track): one program each for every acquire and every
 * release function, told by the attach cookie what to do (struct
 * pair_cookie in leakscope.h: the kind, the op, where the handle and the
 * bytes are, and whether the handle is an inflate stream whose window is
 * looked for, window_word). */

static __always_inline __u64 arg_n(struct pt_regs *ctx, __u32 n)
{
	/* Load every argument register first: a load chosen by the switch
	 * would dereference a modified ctx pointer, which the verifier
	 * rejects. */
	volatile __u64 a1 = arch_arg1(ctx), a2 = arch_arg2(ctx), a3 = arch_arg3(ctx);
	volatile __u64 a4 = arch_arg4(ctx), a5 = arch_arg5(ctx), a6 = arch_arg6(ctx);
	switch (n) {
	case 1: return a1;
	case 2: return a2;
	case 3: return a3;
	case 4: return a4;
	case 5: return a5;
	case 6: return a6;
	}
	return 0;
}

UPROBE_TWINS(pair_acquire_enter)
{
	struct pair_cookie pc = pair_cookie_decode(bpf_get_attach_cookie(ctx));
	__u32 op = pc.op;
	__u64 v = arg_n(ctx, pc.arg);
	__u64 size = pc.size_arg ? arg_n(ctx, pc.size_arg) : pc.bytes;
	switch (op) {
	case OP_ARG_HANDLE:
	case OP_OUT_PTR:
		pending_enter(ctx, pc.kind, op, size, 0, v);
		break;
	case OP_REALLOC: /* freopen: the old handle goes whatever happens */
		pending_enter(ctx, pc.kind, op, size, v, 0);
		break;
	default:
		pending_enter(ctx, pc.kind, OP_RET_PTR, size, 0, 0);
	}
	if (pc.zwindow)
		zwindow_pending(ctx, pc.kind, 1U << 15);
	return 0;
}

UPROBE_TWINS(pair_release_enter)
{
	struct pair_cookie pc = pair_cookie_decode(bpf_get_attach_cookie(ctx));
	__u64 h = arg_n(ctx, pc.arg);
	release_enter(ctx, h, pc.kind);
	return 0;
}

/* The dynamic linker calls _dl_debug_state (r_brk, the debuggers' hook)
 * before and after it maps or unmaps objects (dlopen, dlclose): user space
 * rereads the mappings then and probes new libraries (a JVM's libjvm.so,
 * libzip.so), before their first call when the command was launched. */
UPROBE_TWINS(dl_debug_state)
{
	if (!is_target_process())
		return 0;
	struct range_miss m = { .at_ns = bpf_ktime_get_ns() };
	if (stop_on_load) {
		stop_sent = 1;
		stop_told(&m);
	} else {
		bpf_ringbuf_output(&range_misses, &m, sizeof(m), 0);
	}
	return 0;
}

/* Under run, a target calling exit() stops until user space has resolved
 * its stacks: the names of Java frames come from the JVM's memory (its
 * code heap and method metadata), which goes with the process, and a
 * reproduction typically leaks just before it exits. exit() runs before
 * any of it is released (a JVM calls it after DestroyJavaVM or from
 * System.exit). */
UPROBE_TWINS(exit_call)
{
	if (!stop_on_load || !is_target_process())
		return 0;
	/* Stopped only if user space hears of it. exit_stop is its own
	 * flag: a record of another stop, read first, does not continue
	 * the target (and user space clears only what it handled). */
	struct range_miss m = { .ip = RANGE_MISS_EXIT, .at_ns = bpf_ktime_get_ns() };
	exit_stop = 1;
	if (!stop_told(&m))
		exit_stop = 0;
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(target_exec, struct task_struct *task, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	if (tgid != target_tgid) {
		/* A child that shared the target's memory runs a program of
		 * its own now: stopped before its first instruction, if user
		 * space will hear of it. */
		if (!follow_forks || !bpf_map_lookup_elem(&vm_children, &tgid))
			return 0;
		bpf_map_delete_elem(&vm_children, &tgid);
		bpf_map_delete_elem(&vm_shared, &tgid); /* a memory of its own now */
		struct range_miss m = { .ip = RANGE_MISS_SPAWN, .generation = tgid, .at_ns = bpf_ktime_get_ns() };
		if (!stop_told(&m))
			__sync_fetch_and_add(&forks, 1);
		return 0;
	}
	if (exec_seen || !wait_exec) {
		/* A new image replaces one that was traced: its heap is gone,
		 * and so are its mappings. */
		__sync_fetch_and_add(&exec_gen, 1);
		__u32 zero = 0;
		struct range_ctl *ctl = bpf_map_lookup_elem(&range_ctls, &zero);
		if (ctl)
			ctl->count = 0;
		__u64 *last = bpf_map_lookup_elem(&miss_times, &zero);
		if (last)
			*last = 0;
		stop_sent = 0; /* run: stop the new image too until its tables are in */
		struct range_miss m = { .ip = RANGE_MISS_EXEC, .at_ns = bpf_ktime_get_ns() };
		/* Stopped before the new image's first instruction, only if
		 * user space hears of it. */
		if (stop_on_load) {
			exec_stop = 1;
			if (!stop_told(&m))
				exec_stop = 0;
		} else {
			bpf_ringbuf_output(&range_misses, &m, sizeof(m), 0);
		}
	}
	exec_seen = 1;
	return 0;
}

/* settle_bucket and settle_window are zwindow_settle for
 * bpf_for_each_map_elem: of every resource of this image with a window
 * word, in alloc_buckets and in allocs. */
static long settle_bucket(struct bpf_map *map, __u32 *k, struct alloc_bucket *b, void *ctx)
{
#pragma unroll
	for (int i = 0; i < ALLOC_WAYS; i++) {
		struct alloc_slot *s = &b->slot[i];
		__u64 addr = s->addr;
		if (addr && !(addr & (SLOT_BUSY | SLOT_FILLING)) && s->gen == image_pad() &&
		    s->info.kind != KIND_MALLOC && (s->info.owner & WINDOW_PENDING))
			zwindow_settle(addr, s->info.kind, &s->info);
	}
	return 0;
}

static long settle_window(struct bpf_map *map, struct handle_key *k, struct alloc_info *info, void *ctx)
{
	if (k->pad == image_pad() && k->kind != KIND_MALLOC && (info->owner & WINDOW_PENDING))
		zwindow_settle(k->addr, k->kind, info);
	return 0;
}

/* target_exit counts, when the target's last thread exits, the windows its
 * live inflate streams had allocated: user space can no longer read them
 * then. Where the tracepoint has group_dead (6.18 here), it comes before
 * exit_mm() (one kernel change moved and extended it), so the target's
 * memory is still readable; user space does not attach it elsewhere.
 * exit_settled is then the image (exec_gen + 1) whose windows it
 * counted. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(target_exit, struct task_struct *task, bool group_dead)
{
	if (!group_dead || !is_target_process())
		return 0;
	exit_status = EXIT_STATUS_KNOWN | (task->signal->group_exit_code & 0xffff);
	exit_ns = bpf_ktime_get_ns();
	if (windows_looked_for) {
		bpf_for_each_map_elem(&alloc_buckets, settle_bucket, NULL, 0);
		bpf_for_each_map_elem(&allocs, settle_window, NULL, 0);
	}
	exit_settled = exec_gen + 1;
	return 0;
}

/* clone_vfork reports whether the process parent is creating (it is in
 * the syscall) was asked for with CLONE_VFORK: vfork(2) where there is
 * one, or clone(2) and clone3(2) with the flag (glibc's posix_spawn, and
 * glibc's vfork on arm64). */
static __always_inline bool clone_vfork(struct task_struct *parent)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(parent);
	if (!regs)
		return false;
	/* Both read once, before any branch: one load of a register per
	 * field (the verifier refuses a load shared by two pointer kinds). */
	long nr = arch_syscall_nr(regs);
	__u64 di = arch_syscall_arg1(regs);
#ifdef SYS_NR_VFORK
	if (nr == SYS_NR_VFORK)
		return true;
#endif
	if (nr == SYS_NR_CLONE) /* clone: flags in the first argument */
		return di & 0x00004000 /* CLONE_VFORK */;
	if (nr == SYS_NR_CLONE3) { /* clone3: struct clone_args, flags first */
		__u64 flags = 0;
		if (bpf_probe_read_user(&flags, sizeof(flags), (void *)di))
			return false;
		return flags & 0x00004000;
	}
	return false;
}

/* stop_new_child stops child before its first instruction (the signal is
 * pending when the new task first returns to user mode) and tells user
 * space, which continues it; as stop_told, only with the record's room
 * taken, and the stop before the record: user space may read the record
 * and send its SIGCONT at once (tracing is ending), and a SIGCONT only
 * discards a stop already sent. False (no stop, no record) when the ring
 * buffer is full. */
static __always_inline bool stop_new_child(struct task_struct *child, struct range_miss *m)
{
	struct range_miss *r = bpf_ringbuf_reserve(&range_misses, sizeof(*r), 0);
	if (!r)
		return false;
	*r = *m;
	if (bpf_send_signal_task(child, 19 /* SIGSTOP */, PIDTYPE_TGID, 0))
		stat_add(STAT_STOPS_UNSENT, 1);
	bpf_ringbuf_submit(r, 0);
	return true;
}

/* target_fork counts the processes the target starts; its threads are
 * traced with it and not counted. */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(target_fork, struct task_struct *parent, struct task_struct *child)
{
	if ((__u32)parent->tgid != target_tgid || child->tgid != child->pid)
		return 0;
	if (wait_exec && !exec_seen)
		return 0; /* run's shim, before the command */
	if (!follow_forks) {
		__sync_fetch_and_add(&forks, 1);
		return 0;
	}
	__u32 tgid = child->tgid;
	if (child->mm == parent->mm) {
		/* vfork, posix_spawn: followed from its exec on (target_exec). */
		__sync_fetch_and_add(&vm_forks, 1);
		__u8 one = 1;
		if (bpf_map_update_elem(&vm_children, &tgid, &one, BPF_ANY)) {
			__sync_fetch_and_add(&forks, 1);
			return 0;
		}
		if (clone_vfork(parent))
			return 0; /* the parent waits for its exec or exit */
		/* It shares the target's tables until it execs: stopped until
		 * user space has attached the target's probes to it too. */
		struct range_miss m = { .ip = RANGE_MISS_VMFORK, .generation = tgid, .at_ns = bpf_ktime_get_ns() };
		if (!bpf_send_signal_task || bpf_map_update_elem(&vm_shared, &tgid, &one, BPF_ANY))
			return 0;
		if (!stop_new_child(child, &m))
			bpf_map_delete_elem(&vm_shared, &tgid);
		return 0;
	}
	struct range_miss m = { .ip = RANGE_MISS_FORK, .generation = tgid, .at_ns = bpf_ktime_get_ns() };
	if (!bpf_send_signal_task || !stop_new_child(child, &m))
		__sync_fetch_and_add(&forks, 1);
	return 0;
}

/* Mappings and threads (mmap.anon, mmap.file, thread): the syscall
 * tracepoints of mmap, munmap and mremap (per syscall, so the rest of the
 * system's calls never run a program) and the fork and exit tracepoints
 * send what each call did to mmap_events, with its stack; user space
 * keeps the mappings and threads and their sites (probe/mapping_linux.go),
 * where a partial unmap or remap splits or shrinks a mapping exactly.
 * A call is read at its exit, from the thread's saved registers (a
 * syscall's arguments are never changed there), so one program per
 * syscall suffices. */

struct vma_file {
	__u64 ino;
	__u32 dev;
};

static long vma_file_cb(struct task_struct *task, struct vm_area_struct *vma, struct vma_file *f)
{
	struct file *file = vma->vm_file;
	if (!file)
		return 0;
	struct inode *inode = file->f_inode;
	if (!inode)
		return 0;
	f->ino = inode->i_ino;
	f->dev = inode->i_sb->s_dev;
	return 0;
}

/* map_event_stack fills e's stack and how for the current thread's call
 * at regs: a call made inside a tracked acquire call (malloc's own mmap,
 * realloc's mremap) is the allocator's, counted in its block already, and
 * is marked MAP_HOW_UNCOUNTED without walking its stack. */
static __always_inline void map_event_stack(struct mmap_event *e, struct pt_regs *regs)
{
	struct thread_state *ts = thread_state(true);
	__u64 sp = arch_sp(regs), ip = arch_ip(regs), fp = arch_fp(regs);
	if (!ts) {
		stat_add(STAT_PENDING_DROPPED, 1);
		return;
	}
	if (ts->outer.sp && sp < ts->outer.sp) {
		e->how |= MAP_HOW_UNCOUNTED;
		return;
	}
	e->stack_id = walk_stack(ts, ip, fp, sp);
}

static __always_inline void map_event_send(struct mmap_event *e)
{
	e->ts_ns = bpf_ktime_get_ns();
	e->gen = exec_gen;
	if (!e->tid)
		e->tid = (__u32)bpf_get_current_pid_tgid();
	if (bpf_ringbuf_output(&mmap_events, e, sizeof(*e), 0))
		stat_add(STAT_MAP_EVENTS_LOST, 1);
}

static __always_inline struct pt_regs *map_call_regs(void)
{
	if (!trace_maps || probes_only || !is_target())
		return NULL;
	return (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
}

SEC("tracepoint/syscalls/sys_exit_mmap")
int mmap_exit(struct trace_event_raw_sys_exit *ctx)
{
	long ret = ctx->ret;
	if (ret < 0 && ret > -4096)
		return 0;
	struct pt_regs *regs = map_call_regs();
	if (!regs)
		return 0;
	__u64 len = arch_syscall_arg2(regs), flags = arch_syscall_arg4(regs);
	struct mmap_event e = { .op = MAP_OP_MAP, .addr = (__u64)ret, .len = len };
	if (flags & 0x10 /* MAP_FIXED */)
		e.how |= MAP_HOW_FIXED;
	map_event_stack(&e, regs);
	if ((e.how & MAP_HOW_UNCOUNTED) && !(e.how & MAP_HOW_FIXED))
		return 0; /* the allocator's, and replaced nothing */
	if (!(flags & 0x20 /* MAP_ANONYMOUS */)) {
		struct vma_file f = {};
		bpf_find_vma(bpf_get_current_task_btf(), (__u64)ret, vma_file_cb, &f, 0);
		e.how |= MAP_HOW_FILE;
		e.ino = f.ino;
		e.dev = f.dev;
	}
	map_event_send(&e);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_munmap")
int munmap_exit(struct trace_event_raw_sys_exit *ctx)
{
	if (ctx->ret != 0)
		return 0;
	struct pt_regs *regs = map_call_regs();
	if (!regs)
		return 0;
	struct mmap_event e = { .op = MAP_OP_UNMAP, .addr = arch_syscall_arg1(regs), .len = arch_syscall_arg2(regs) };
	map_event_send(&e);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_mremap")
int mremap_exit(struct trace_event_raw_sys_exit *ctx)
{
	long ret = ctx->ret;
	if (ret < 0 && ret > -4096)
		return 0;
	struct pt_regs *regs = map_call_regs();
	if (!regs)
		return 0;
	__u64 flags = arch_syscall_arg4(regs);
	struct mmap_event e = {
		.op = MAP_OP_REMAP,
		.addr = (__u64)ret,
		.len = arch_syscall_arg3(regs),
		.old_addr = arch_syscall_arg1(regs),
		.old_len = arch_syscall_arg2(regs),
	};
	if (flags & 2 /* MREMAP_FIXED */)
		e.how |= MAP_HOW_FIXED;
	if (flags & 4 /* MREMAP_DONTUNMAP */)
		e.how |= MAP_HOW_DONTUNMAP;
	struct thread_state *ts = thread_state(false);
	if (ts && ts->outer.sp && arch_sp(regs) < ts->outer.sp)
		e.how |= MAP_HOW_UNCOUNTED;
	map_event_send(&e);
	return 0;
}

/* thread_start sends a thread the target starts (clone with
 * CLONE_THREAD), with the stack of the call and the new thread's stack:
 * clone3's stack and stack_size (glibc's pthread_create), or clone's
 * stack pointer (its size is then the mapping's, found in user space). */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(thread_start, struct task_struct *parent, struct task_struct *child)
{
	if (!trace_maps || probes_only || child->tgid == child->pid || !is_target())
		return 0;
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	if (!regs)
		return 0;
	long nr = arch_syscall_nr(regs);
	__u64 di = arch_syscall_arg1(regs), si = arch_syscall_arg2(regs);
	struct mmap_event e = { .op = MAP_OP_THREAD, .tid = (__u32)child->pid };
	if (nr == SYS_NR_CLONE3) { /* clone3: struct clone_args, stack at 40, stack_size at 48 */
		__u64 args[2] = {};
		if (!bpf_probe_read_user(args, sizeof(args), (void *)(di + 40))) {
			e.addr = args[0];
			e.len = args[1];
		}
	} else if (nr == SYS_NR_CLONE) { /* clone: the child's stack pointer */
		e.addr = si;
	}
	/* glibc's clone3 and clone are leaf assembly with no unwind rule
	 * past the syscall: the walk starts at their caller, whose return
	 * address is where it is at a function's entry (on top of the
	 * stack, in x30 on arm64). */
	struct thread_state *ts = thread_state(true);
	__u64 sp = arch_sp(regs), fp = arch_fp(regs), ra = 0;
	if (ts && !arch_entry_ra(regs, sp, &ra))
		e.stack_id = walk_stack(ts, ra, fp, sp + ARCH_RET_SP_DELTA);
	map_event_send(&e);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(thread_exit, struct task_struct *task)
{
	if (!trace_maps || probes_only || task->tgid == task->pid || (__u32)task->tgid != target_tgid)
		return 0;
	struct mmap_event e = { .op = MAP_OP_THREAD_EXIT, .tid = (__u32)task->pid };
	map_event_send(&e);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
