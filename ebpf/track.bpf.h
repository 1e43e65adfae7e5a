/* Bookkeeping shared by every acquire/release probe: the pending call per
 * thread between an entry and its return probe, and what a return or a
 * release does to the tables. BPF-only. */
#ifndef TRACK_BPF_H
#define TRACK_BPF_H

#include "arch.bpf.h"
#include "state.bpf.h"
#include "ranges.bpf.h"
#include "table.bpf.h"
#include "walk.bpf.h"

/* thread_state returns this thread's state, created on first use. */
static __always_inline struct thread_state *thread_state(bool create)
{
	return bpf_task_storage_get(&threads, bpf_get_current_task_btf(), 0,
				    create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
}

/* is_target_process reports whether the current task is the target's. */
static __always_inline bool is_target_process(void)
{
	if ((__u32)bpf_get_current_task_btf()->tgid != target_tgid)
		return false;
	return !wait_exec || exec_seen;
}

/* is_target reports whether the current task's calls count in the
 * target's tables: the target's, or a child's that shares its memory
 * (vm_shared). */
static __always_inline bool is_target(void)
{
	__u32 tgid = bpf_get_current_task_btf()->tgid;
	if (tgid != target_tgid)
		return follow_forks && bpf_map_lookup_elem(&vm_shared, &tgid);
	return !wait_exec || exec_seen;
}

/* zcall_active reports whether code running at stack pointer sp runs
 * inside the zlib call z: deeper on the stack, and the call has not
 * returned, its return address still in the slot its entry read it from
 * (a later call at that depth writes its own there; only where
 * ARCH_ENTRY_RA_IN_SLOT, the one case zlib_inflate_enter records z). A thread that left
 * inflate() and went deeper elsewhere (Node.js's worker threads run other
 * tasks) is not inside it. */
static __always_inline bool zcall_active(struct zcall *z, __u64 sp)
{
	if (!z->sp || sp >= z->sp)
		return false;
	__u64 ra = 0;
	return !bpf_probe_read_user(&ra, sizeof(ra), (void *)z->sp) && ra == z->ret_addr;
}

/* zcall_owner returns the stream a malloc at this entry belongs to: a zlib
 * call is in progress deeper than its entry (zcall_active), and the caller
 * of malloc is the zlib object itself. 0 otherwise. */
static __always_inline __u64 zcall_owner(struct pt_regs *ctx, struct zcall *z, __u32 *kind)
{
	__u64 sp = arch_sp(ctx);
	if (!zcall_active(z, sp))
		return 0;
	__u64 ra = 0;
	if (arch_entry_ra(ctx, sp, &ra))
		return 0;
	struct exec_range *r = find_range(ra);
	if (!r || !(r->flags & RANGE_ZLIB))
		return 0;
	*kind = z->kind;
	return z->strm;
}

/* ZWINDOW_COMPUTED is what zwindow_owner returns for the window of a
 * stream whose bytes are computed: the block is not traced. */
#define ZWINDOW_COMPUTED 1

/* zwindow_owner returns the inflate stream a malloc of size bytes, now
 * returning into zlib, is the window of: inflate() allocates a stream's
 * window lazily (updatewindow, also reached from inflateSetDictionary),
 * and inflate() is not probed (a trap per call). A window is 1 << wbits
 * bytes (8 to 15), allocated by zlib itself, and its state is still live
 * in a callee-saved register of the caller (arch_callee_saved; Debian's
 * zlib 1.2.13 on x86-64: %rbp)
 * across the call: a state whose state->strm points back at a live
 * stream, whose state->window is still NULL (it is stored after the
 * return) and whose state->wbits matches the size. Applications never
 * hold a state: only zlib's own code does.
 *
 * With the malloc family traced, the state is a block zlib allocated for
 * the stream (an owned block in allocs). In a zlib whose bytes are
 * computed (RANGE_ZLIB_COMPUTED, sampling) the state is not traced: the
 * stream must be one whose window is looked for (its window word), which
 * counts the window from the state; ZWINDOW_COMPUTED says so, and the
 * block is not traced. 0 if none matched: the block is an ordinary allocation (a
 * gzFile's buffers, a copy's state and window). */
static __always_inline bool zwindow_size(__u64 size)
{
	return size >= 256 && size <= 32768 && !(size & (size - 1));
}

/* inflate_block_owner returns the inflate stream live heap block addr
 * belongs to, 0 if none. A function of its own, verified once: zwindow_owner
 * asks for every callee-saved register. */
__attribute__((noinline)) __u64 inflate_block_owner(__u64 addr)
{
	struct alloc_slot *slot;
	struct alloc_info *b = alloc_find(addr, KIND_MALLOC, &slot);
	if (!b || b->owner_kind != KIND_ZLIB_INFLATE)
		return 0;
	return b->owner;
}

/* stream_window_pending reports whether live inflate stream strm has the
 * window word of state (or of a state not read yet). A function of its
 * own, for zwindow_owner, as inflate_block_owner. */
__attribute__((noinline)) int stream_window_pending(__u64 strm, __u64 state)
{
	struct alloc_slot *slot;
	struct alloc_info *s = alloc_find(strm, KIND_ZLIB_INFLATE, &slot);
	if (!s)
		return 0;
	__u64 w = s->owner;
	return (w & WINDOW_PENDING) && (!(w & ~(__u64)WINDOW_FLAGS) || (w & ~(__u64)WINDOW_FLAGS) == state);
}

/* A function of its own: its frame and alloc_exit's share the 512 bytes of
 * BPF stack. Its callers check zwindow_size first, so that only a
 * candidate window's malloc makes the call. */
static __attribute__((noinline)) __u64 zwindow_owner(struct pt_regs *ctx, __u64 size)
{
	if (!zwindow_size(size))
		return 0;
	struct exec_range *r = find_range(arch_ip(ctx));
	if (!r || !(r->flags & (RANGE_ZLIB | RANGE_ZLIB_COMPUTED)))
		return 0;
	bool computed = r->flags & RANGE_ZLIB_COMPUTED;
#pragma unroll
	for (int i = 0; i < ARCH_CALLEE_SAVED; i++) {
		/* Read from ctx at each unrolled step: no copy of the
		 * registers on the stack. */
		__u64 reg = arch_callee_saved(ctx, i);
		__u64 owner = 0;
		if (!computed) {
			if (!(owner = inflate_block_owner(reg)))
				continue;
		} else if (reg < 4096) {
			continue;
		}
		__u64 state[INFLATE_STATE_WINDOW_OFF / 8 + 1];
		if (bpf_probe_read_user(state, sizeof(state), (void *)reg))
			continue;
		__u32 wbits = (__u32)state[INFLATE_STATE_WBITS_OFF / 8];
		if (!state[0] || (owner && state[0] != owner) || state[INFLATE_STATE_WINDOW_OFF / 8] != 0 ||
		    wbits > 15 || (1ULL << wbits) != size)
			continue;
		if (owner)
			return owner;
		if (stream_window_pending(state[0], reg))
			return ZWINDOW_COMPUTED;
	}
	return 0;
}

/* stop_told stops the current process (SIGSTOP to itself, pending until
 * it returns to user mode) and tells user space (record m), which
 * continues it. The record's room is taken first: a stop is sent only
 * with a record sure to follow, since nothing could take it back (a
 * SIGCONT sent from here fails while the SIGSTOP is still being sent:
 * one signal at a time per CPU goes through the kernel's deferred work in
 * a tracepoint). The stop comes before the record: user space may handle
 * the record and send its SIGCONT at once, and a SIGCONT discards only a
 * stop sent before it. False (no stop, no record) when the ring buffer
 * is full. The caller sets the flag user space reads the stop from
 * (stop_sent, exit_stop, exec_stop) first; a stop the kernel would not
 * send still has its record, and user space continues a process that
 * was not stopped, which does nothing. */
static __always_inline bool stop_told(struct range_miss *m)
{
	struct range_miss *r = bpf_ringbuf_reserve(&range_misses, sizeof(*r), 0);
	if (!r) {
		stat_add(STAT_STOPS_UNSENT, 1);
		return false;
	}
	*r = *m;
	if (bpf_send_signal(19 /* SIGSTOP */))
		stat_add(STAT_STOPS_UNSENT, 1);
	bpf_ringbuf_submit(r, 0);
	return true;
}

/* stop_until_ranges stops a launched command at its first tracked call
 * (libc and the executable are mapped by then, the program's own code has
 * not run) until user space has written the range and unwind tables, so
 * every stack is walked with them: without the tables a walk can only
 * follow frame pointers. The call itself completes after the continue. */
static __always_inline void stop_until_ranges(void)
{
	__u32 zero = 0;
	struct range_ctl *ctl = bpf_map_lookup_elem(&range_ctls, &zero);
	if (!ctl || ctl->count)
		return;
	stop_sent = 1;
	struct range_miss m = { .at_ns = bpf_ktime_get_ns() };
	stop_told(&m);
}

/* resource_calls_note counts a pending record into (delta 1) or out of
 * (-1) resource_calls when it is a resource's call in progress (only
 * sampling reads it). */
static __always_inline void resource_calls_note(struct pending *p, __s64 delta)
{
	if (sample_bytes && p->sp && p->kind != KIND_MALLOC)
		__sync_fetch_and_add(&resource_calls, delta);
}

/* pending_enter records an acquire call for its return probe. A call made
 * while an outer tracked call is running on this thread (realloc inside
 * reallocarray) is not counted twice: it is deeper on the stack than the
 * recorded one. A malloc inside a resource's acquire call (zlib's state
 * inside inflateInit2_) is recorded apart, as memory of that resource.
 * A record at or below the current stack pointer is stale (its return was
 * never seen) and is replaced. */
static __always_inline bool pending_enter_site(struct pt_regs *ctx, __u32 kind, __u32 op,
					       __u64 size, __u64 old_ptr, __u64 out_ptr, __u32 site_flags)
{
	if (probes_only || !is_target())
		return false;
	if (wait_exec && !stop_sent)
		stop_until_ranges();
	struct thread_state *ts = thread_state(true);
	if (!ts) {
		stat_add(STAT_PENDING_DROPPED, 1);
		return false;
	}
	__u64 sp = arch_sp(ctx);
	struct pending n = {
		.size_bytes = size,
		.old_ptr = old_ptr,
		.out_ptr = out_ptr,
		.sp = sp,
		.kind = kind,
		.op = op,
		.site_flags = site_flags,
	};
	struct pending *p = &ts->outer;
	if (p->sp && sp < p->sp) {
		if (p->kind != KIND_MALLOC && kind == KIND_MALLOC) {
			/* Its bytes are in the resource's computed ones. */
			if (p->computed)
				return false;
			if (ts->inner.sp && sp < ts->inner.sp) {
				stat_add(STAT_NESTED_CALLS, 1);
				return false;
			}
			n.owner = p->out_ptr;
			n.owner_kind = p->kind;
			ts->inner = n;
			return true;
		}
		stat_add(STAT_NESTED_CALLS, 1);
		return false;
	}
	if (kind == KIND_MALLOC)
		n.owner = zcall_owner(ctx, &ts->zcall, &n.owner_kind);
	resource_calls_note(p, -1);
	resource_calls_note(&n, 1);
	ts->outer = n;
	return true;
}

/* pending_enter is pending_enter_site for a call whose block goes to its
 * kind's plain site. */
static __always_inline bool pending_enter(struct pt_regs *ctx, __u32 kind, __u32 op,
					  __u64 size, __u64 old_ptr, __u64 out_ptr)
{
	return pending_enter_site(ctx, kind, op, size, old_ptr, out_ptr, 0);
}

/* pending_computed marks the acquire call just recorded at this entry as
 * a resource whose bytes were computed from its arguments: the mallocs it
 * makes are not traced as its blocks. */
static __always_inline void pending_computed(struct pt_regs *ctx, __u32 kind)
{
	struct thread_state *ts = thread_state(false);
	if (ts && ts->outer.sp == arch_sp(ctx) && ts->outer.kind == kind)
		ts->outer.computed = 1;
}

/* zwindow_pending gives the acquire call just recorded at this entry (an
 * inflate stream's init, malloc not traced) a window to look for once the
 * stream exists: bytes, for windowBits the init is given. */
static __always_inline void zwindow_pending(struct pt_regs *ctx, __u32 kind, __u32 bytes)
{
	struct thread_state *ts = thread_state(false);
	if (!ts || ts->outer.sp != arch_sp(ctx) || ts->outer.kind != kind)
		return;
	ts->outer.window_bytes = bytes;
}

/* result_addr applies an acquire call's op to its return value: the new
 * handle, or 0 when the call failed. It also releases what realloc freed. */
static __always_inline __u64 result_addr(struct pending *p, __u64 ret)
{
	__u64 addr = 0;
	switch (p->op) {
	case OP_OUT_PTR:
		if ((int)ret != 0 || !p->out_ptr ||
		    bpf_probe_read_user(&addr, sizeof(addr), (void *)p->out_ptr))
			addr = 0;
		break;
	case OP_ARG_HANDLE:
		addr = (int)ret == 0 ? p->out_ptr : 0;
		break;
	case OP_REALLOC:
	case OP_REALLOC_RELEASE:
		addr = ret;
		/* realloc(p, 0) frees p and returns NULL (glibc); a failed
		 * realloc(p, n>0) leaves p live. */
		if (p->old_ptr && (ret || p->size_bytes == 0))
			if (!track_release(p->old_ptr, p->kind) && !sample_bytes)
				stat_add(STAT_UNKNOWN_FREES, 1);
		if (p->op == OP_REALLOC_RELEASE)
			return 0; /* the new block is not sampled */
		break;
	default:
		addr = ret;
	}
	if (!addr && !(p->op == OP_REALLOC && p->size_bytes == 0))
		stat_add(STAT_FAILED_ALLOCS, 1);
	return addr;
}

/* inner_exit completes a malloc made inside a resource's acquire call. */
static __always_inline bool inner_exit(struct pt_regs *ctx, struct thread_state *ts, __u64 sp)
{
	if (!ts->inner.sp || sp != ts->inner.sp + ARCH_RET_SP_DELTA)
		return false;
	struct pending in = ts->inner;
	ts->inner.sp = 0;
	__u64 addr = result_addr(&in, arch_ret(ctx));
	if (!addr)
		return true;
	if (!track_owned(addr, in.size_bytes, in.owner, in.owner_kind, tick_now()))
		return true;
	/* The resource is created when the outer call returns: its bytes
	 * wait in the outer pending record. */
	if (ts->outer.sp)
		ts->outer.size_bytes += in.size_bytes;
	return true;
}

/* pending_exit completes the acquire call recorded by pending_enter. */
static __always_inline void pending_exit(struct pt_regs *ctx)
{
	if (!is_target())
		return;
	struct thread_state *ts = thread_state(false);
	if (!ts)
		return;
	/* After the return the stack pointer is the entry's plus
	 * ARCH_RET_SP_DELTA (x86-64's return pops the return address):
	 * anything else is the return of a nested call. */
	__u64 sp = arch_sp(ctx);
	if (inner_exit(ctx, ts, sp))
		return;
	if (!ts->outer.sp || sp != ts->outer.sp + ARCH_RET_SP_DELTA)
		return;
	struct pending p = ts->outer;
	resource_calls_note(&p, -1);
	ts->outer.sp = 0;

	__u64 addr = result_addr(&p, arch_ret(ctx));
	if (!addr)
		return;
	__u64 now = tick_now();
	if (!p.owner && p.kind == KIND_MALLOC && zwindow_size(p.size_bytes) &&
	    (p.owner = zwindow_owner(ctx, p.size_bytes))) {
		if (p.owner == ZWINDOW_COMPUTED)
			return;
		p.owner_kind = KIND_ZLIB_INFLATE;
	}
	if (p.owner && track_owned(addr, p.size_bytes, p.owner, p.owner_kind, now)) {
		if (owner_add(p.owner, p.owner_kind, p.size_bytes))
			return;
		/* The stream is unknown (made before attaching): count the
		 * block as an ordinary allocation instead. */
		track_release(addr, KIND_MALLOC);
	}
	__u64 stack_id = walk_stack(ts, arch_ip(ctx), arch_fp(ctx), sp);
	/* An inflate stream traced without malloc: its window is counted
	 * once zlib made it (window_word). */
	__u64 window = 0;
	if (p.window_bytes) {
		if (bpf_probe_read_user(&window, sizeof(window), (void *)(addr + ZSTREAM_STATE_OFF)) || (window & WINDOW_FLAGS))
			window = 0;
		window |= WINDOW_PENDING;
	}
	track_alloc_window(addr, p.size_bytes, p.kind | p.site_flags, stack_id, now, window, p.window_bytes);
}

/* returns_pending reports whether the current thread has a return probe
 * pending: it may be inside a traced acquire call, whose return every
 * such call waits for (a plain read of its uprobe state, where the
 * thread's own state costs a helper call). */
static __always_inline bool returns_pending(void)
{
	struct uprobe_task *u = bpf_get_current_task_btf()->utask;
	return !u || u->return_instances;
}

/* release_enter handles a release call (free, inflateEnd, ...). A release
 * inside a tracked acquire call on the same thread belongs to that call: a
 * block the library allocated for the resource being built is forgotten
 * (zlib freeing its state when an init fails); anything else is ignored. */
static __always_inline bool release_enter(struct pt_regs *ctx, __u64 addr, __u32 kind)
{
	if (!is_target() || !addr)
		return false;
	/* Sampling leaves most blocks untraced: their frees are no loss,
	 * and cost a load from sampled_filter, or this one lookup. */
	if (sample_bytes && kind == KIND_MALLOC) {
		__u32 *n = filter_count(addr);
		if (n && *n == 0)
			return false;
	}
	struct alloc_slot *slot;
	struct alloc_info *info = alloc_find(addr, kind, &slot);
	if (!info && sample_bytes && kind == KIND_MALLOC)
		return false;
	struct thread_state *ts = returns_pending() ? thread_state(false) : NULL;
	struct pending *p = ts ? &ts->outer : NULL;
	struct alloc_info copy;
	if (p && p->sp && arch_sp(ctx) < p->sp) {
		if (info && kind == KIND_MALLOC && info->owner && info->owner == p->out_ptr) {
			if (alloc_remove(addr, kind, slot, info, &copy))
				p->size_bytes -= copy.size_bytes;
			return false;
		}
		stat_add(STAT_NESTED_CALLS, 1);
		return false;
	}
	if (!info) {
		stat_add(STAT_UNKNOWN_FREES, 1);
		return false;
	}
	if (!alloc_remove(addr, kind, slot, info, &copy))
		return false;
	site_release(&copy);
	stat_add(STAT_FREES, 1);
	return true;
}

#endif /* TRACK_BPF_H */
