/* The stack walker: frame pointers, .eh_frame rows (unwind_rows), HotSpot
 * frames and cgo stack switches, from a return probe's registers to a
 * stack id in stacks. BPF-only. */
#ifndef WALK_BPF_H
#define WALK_BPF_H

#include "arch.bpf.h"
#include "state.bpf.h"
#include "ranges.bpf.h"

/* Frames more than this far above the stack pointer are not trusted. */
#define MAX_FRAME_SPAN (8ULL << 20)

/* State of one stack walk, shared with walk_step through bpf_loop:
 * pointers to map values only (see struct walk_regs, state.bpf.h). */
struct walk_ctx {
	struct stack *st;
	struct walk_regs *r;
	struct stack_window *win;
	struct thread_state *ts;
	/* The depth lives in st->depth, a map value, for the same reason. */
};

/* stack_read reads size bytes of the target's stack at addr. Each user
 * memory read costs ~100 ns here whatever its size (a 4 KiB one ~60 ns
 * more), and a walk reads two or three words a frame: so a word of the
 * thread's stack comes from the chunk last read, read again from addr
 * (never past the stack mapping's end: a read that faults costs ~1.2 us)
 * when addr lies outside it. A walk's first chunk is as long as this
 * thread's last walk needed (win->chunk), the next ones STACK_CHUNK.
 * Elsewhere (a goroutine's stack) it reads addr alone, as it does when a
 * chunk faults anyway (a page above never touched: a big local array
 * never written). */
static __always_inline long stack_read(struct walk_ctx *w, void *dst, __u32 size, __u64 addr)
{
	struct stack_window *win = w->win;
	if (addr < win->lo || addr - win->lo + size > win->len) {
		if (addr < w->r->stack_lo || addr + size > w->r->stack_hi)
			return bpf_probe_read_user(dst, size, (void *)addr);
		/* From addr up: a walk reads each frame's words in
		 * ascending order, and frames lie above their callees. (Not
		 * below addr: a page below the deepest call so far may never
		 * have been touched.) */
		__u64 n = w->r->stack_hi - addr;
		if (n > win->chunk)
			n = win->chunk;
		if (n > STACK_CHUNK)
			n = STACK_CHUNK;
		win->chunk = STACK_CHUNK;
		win->len = 0;
		if (bpf_probe_read_user(win->data, n, (void *)addr)) {
			/* A page above addr was never touched: a big local
			 * array never written, or the main thread's random gap
			 * below its arguments. No chunk on this thread runs
			 * past addr's page again (each fault costs ~1.2 us);
			 * words above are read alone. */
			w->r->stack_hi = (addr | (page_size - 1)) + 1;
			w->ts->stack_hi = w->r->stack_hi;
			stat_add(STAT_STACK_CHUNK_FAULTS, 1);
			return bpf_probe_read_user(dst, size, (void *)addr);
		}
		win->lo = addr;
		win->len = n;
		if (!win->low || addr < win->low)
			win->low = addr;
	}
	if (addr + size > win->reach)
		win->reach = addr + size;
	__u64 off = (addr - win->lo) & (STACK_CHUNK - 1);
	if (off > STACK_CHUNK - size)
		return -1;
	__builtin_memcpy(dst, win->data + off, size);
	return 0;
}

/* vma_bounds_cb stores the bounds of the mapping bpf_find_vma found. */
struct vma_bounds {
	__u64 lo, hi;
};

static long vma_bounds_cb(struct task_struct *task, struct vm_area_struct *vma, struct vma_bounds *b)
{
	b->lo = vma->vm_start;
	b->hi = vma->vm_end;
	return 0;
}

/* State of one binary search of an object's unwind rows. */
struct row_search {
	__u32 pc;
	__u32 lo, hi; /* absolute indexes into unwind_rows: first row with pc > .pc in [lo, hi) */
};

static long row_step(__u64 i, struct row_search *c)
{
	if (c->lo >= c->hi)
		return 1;
	__u32 mid = c->lo + (c->hi - c->lo) / 2;
	struct unwind_row *row = bpf_map_lookup_elem(&unwind_rows, &mid);
	if (!row)
		return 1;
	if (c->pc < row->pc)
		c->hi = mid;
	else
		c->lo = mid + 1;
	return 0;
}

/* push_frame appends return address ra, whose frame's stack pointer at
 * the call is sp; returns 1 to stop the walk. */
static __always_inline long push_frame(struct walk_ctx *w, __u64 ra, __u64 sp)
{
	struct stack *st = w->st;
	if (ra == 0)
		return 1;
	__u32 d = st->depth;
	if (d >= MAX_STACK_DEPTH) {
		st->flags |= STACK_MAX_DEPTH;
		return 1;
	}
	st->ips[d] = ra;
	st->depth = d + 1;
	w->r->ip = ra;
	w->r->sp = sp;
	w->r->hash = (w->r->hash ^ ra) * 1099511628211ULL;
	return 0;
}

/* find_row looks up the unwind row of return address ip in object range r
 * into fr. Every frame here is a return address, so the row looked up is
 * the call's (pc - 1): a call that ends a function returns past its last
 * row. */
static __always_inline void find_row(__u64 ip, struct exec_range *r, struct frame_rule *fr)
{
	struct row_search c = {
		.pc = (__u32)(ip - r->bias - 1),
		.lo = r->row_start,
		.hi = r->row_start + r->row_count,
	};
	__u32 first = c.lo;
	fr->has_row = 0;
	bpf_loop(ROW_SEARCH_STEPS, row_step, &c, 0);
	if (c.lo == first)
		return;
	__u32 idx = c.lo - 1;
	struct unwind_row *row = bpf_map_lookup_elem(&unwind_rows, &idx);
	if (!row)
		return;
	fr->has_row = 1;
	fr->rule = row->rule;
	fr->cfa_off = row->cfa_off;
	fr->rbp_off = row->rbp_off;
}

/* dwarf_step unwinds one frame of an object without frame pointers with
 * its .eh_frame row (found by find_row); returns 1 to stop the walk. */
static __always_inline long dwarf_step(struct walk_ctx *w, struct frame_rule *fr)
{
	struct stack *st = w->st;
	if (!fr->has_row) {
		st->flags |= STACK_UNWIND_END;
		return 1;
	}
	__u64 cfa;
	switch (fr->rule & 0xf) {
	case UNWIND_CFA_RSP:
		cfa = w->r->sp + fr->cfa_off;
		break;
	case UNWIND_CFA_RBP:
		cfa = w->r->fp + fr->cfa_off;
		break;
	case UNWIND_UNDEFINED:
		st->flags |= STACK_UNWIND_END;
		return 1;
	default:
		st->flags |= STACK_UNWIND_UNSUPPORTED;
		return 1;
	}
	if (cfa <= w->r->sp || cfa - w->r->sp > MAX_FRAME_SPAN) {
		st->flags |= STACK_BAD_FRAME;
		return 1;
	}
#ifndef ARCH_CFA_RA_OFF
	/* arm64: the row does not say where the return address is (x30's
	 * rule: saved at CFA + offset, still in x30, signed), see
	 * arch.bpf.h. */
	st->flags |= STACK_UNWIND_UNSUPPORTED;
	return 1;
#else
	/* The saved %rbp first: it lies below the return address, and a
	 * chunk of the stack is read upwards from the first word needed. */
	__u64 ra, fp = w->r->fp;
	__u32 how = fr->rule >> 4;
	if ((how == UNWIND_RBP_SAVED && stack_read(w, &fp, sizeof(fp), cfa + fr->rbp_off)) ||
	    stack_read(w, &ra, sizeof(ra), cfa + ARCH_CFA_RA_OFF)) {
		st->flags |= STACK_READ_ERROR;
		return 1;
	}
	if (how == UNWIND_RBP_UNDEFINED)
		fp = 0;
	w->r->fp = fp;
	return push_frame(w, ra, cfa);
#endif
}

/* frame_rule finds how to unwind the frame of w->r->ip: its range's flags
 * and, for an object walked with unwind rows, its row; from frame_cache
 * when this generation of the tables already found it (a walk through a
 * big object costs two binary searches per frame otherwise). Returns false
 * when no range holds w->r->ip. */
static __always_inline bool frame_rule(struct walk_ctx *w, struct frame_rule *fr, struct frame_rule **cached)
{
	__u32 slot = (__u32)((w->r->ip * 0x9E3779B97F4A7C15ULL) >> (64 - FRAME_CACHE_BITS));
	struct frame_rule *c = bpf_map_lookup_elem(&frame_cache, &slot);
	*cached = c;
	if (c && c->ip == w->r->ip && c->generation == w->r->gen) {
		*fr = *c;
		return true;
	}
	struct exec_range *r = find_range(w->r->ip);
	if (!r)
		return false;
	fr->ip = w->r->ip;
	fr->generation = w->r->gen;
	fr->flags = r->flags;
	fr->has_row = 0;
	fr->blob = 0;
	if (r->flags & RANGE_DWARF)
		find_row(w->r->ip, r, fr);
	if (c)
		*c = *fr;
	return true;
}

/* State of one walk back through a code heap's segment map. */
struct seg_search {
	__u64 segmap;
	__u64 idx;  /* segment index, moved back to its block's first */
	__u32 done; /* 1: found the block's first segment; 2: not code */
};

static long segmap_step(__u64 i, struct seg_search *c)
{
	__u8 hop;
	if (bpf_probe_read_user(&hop, sizeof(hop), (void *)(c->segmap + c->idx)) || hop == 0xff || hop > c->idx) {
		c->done = 2;
		return 1;
	}
	if (hop == 0) {
		c->done = 1;
		return 1;
	}
	c->idx -= hop;
	return 0;
}

/* jvm_unwind steps over a compiled frame of size words: it spans them
 * above the stack pointer at its call, the return address in the last, the
 * caller's %rbp in the one below (on aarch64 too: HotSpot's
 * sender_for_compiled_frame reads the pc at sender_sp - 1 and the link at
 * sender_sp - 2 there; its stack pointer must be exact, which on arm64
 * a frame-pointer step does not give, see ARCH_FP_CALLER_SP). Returns 1 to
 * stop the walk. */
static __always_inline long jvm_unwind(struct walk_ctx *w, __s32 size)
{
	struct stack *st = w->st;
	if (size <= 0 || (__u64)size * 8 > MAX_FRAME_SPAN) {
		st->flags |= STACK_BAD_FRAME;
		return 1;
	}
	__u64 cfa = w->r->sp + (__u64)size * 8;
	__u64 frame[2]; /* caller's %rbp, return address */
	if (stack_read(w, frame, sizeof(frame), cfa - 16)) {
		st->flags |= STACK_READ_ERROR;
		return 1;
	}
	w->r->fp = frame[0];
	return push_frame(w, frame[1], cfa);
}

/* A code blob found for a return address is trusted without reading it
 * again for JVM_BLOB_RECHECK units of blob_clock() (~2^20 ns: ~0.1 s):
 * a read of the target's memory costs ~100 ns here, and a stack from a
 * JIT-compiled program crosses a dozen compiled frames, each its own blob.
 * Trusting it that long is safe because HotSpot frees an nmethod only
 * when no thread's stack holds a frame of it: a cached return address
 * still on a stack is in the same blob, unless the blob was freed and
 * its memory given to another with a call returning at the very same
 * address, all within that time. */
#define JVM_BLOB_RECHECK 100

static __always_inline __u32 blob_clock(void)
{
	return (__u32)(tick_now() >> 20);
}

/* jvm_heap_holding is entry k of jvm_heaps if its code heap holds ip. */
static __always_inline struct jvm_heap *jvm_heap_holding(__u32 k, __u64 ip)
{
	struct jvm_heap *c = bpf_map_lookup_elem(&jvm_heaps, &k);
	return c && c->low && ip >= c->low && ip < c->high ? c : NULL;
}

/* jvm_step unwinds one compiled Java frame (or any code blob with a frame
 * size) in a HotSpot code heap: the frame spans frame_size words above the
 * stack pointer at its call, the return address in the last, the caller's
 * %rbp in the one below (HotSpot's sender_for_compiled_frame). No frame
 * pointer is needed. Returns -1 when the blob has no frame size (stubs
 * and the interpreter keep %rbp: the caller walks it by frame pointer). */
static __always_inline long jvm_step(struct walk_ctx *w, struct frame_rule *fc)
{
	struct stack *st = w->st;
	/* The blob found for this return address before: trusted for a
	 * while (JVM_BLOB_RECHECK), then checked with one read (the same
	 * nmethod, by its compile id, or still a blob without a frame size)
	 * instead of the segment map walk. fc is this ip's frame_cache
	 * entry. */
	if (fc && fc->ip == w->r->ip && fc->generation == w->r->gen && fc->blob) {
		__u32 now = blob_clock();
		if (now - fc->checked < JVM_BLOB_RECHECK) {
			if (fc->frame_size > 0)
				return jvm_unwind(w, fc->frame_size);
			return -1;
		}
		__u32 zero = 0, id = 0;
		__s32 size = 0;
		struct jvm_heap *h0 = bpf_map_lookup_elem(&jvm_heaps, &zero);
		if (h0 && fc->frame_size > 0 && h0->compile_id_offset &&
		    !bpf_probe_read_user(&id, sizeof(id), (void *)(fc->blob + h0->compile_id_offset)) &&
		    id == fc->compile_id) {
			fc->checked = now;
			return jvm_unwind(w, fc->frame_size);
		}
		/* A blob without a frame size (the interpreter, a stub: a
		 * frame in nearly every Java stack) is still one if it still
		 * says so. */
		if (h0 && fc->frame_size == 0 &&
		    !bpf_probe_read_user(&size, sizeof(size), (void *)(fc->blob + h0->frame_size_offset)) &&
		    size <= 0) {
			fc->checked = now;
			return -1;
		}
	}
	/* Each heap looked up with a constant key, not in a loop: there the
	 * counter lives in the stack slot whose address the lookup takes,
	 * stored as 32 bits of a 64-bit sum, which Linux 6.1's verifier does
	 * not track; it then finds the loop's state repeating and refuses
	 * every program that walks ("infinite loop detected"). */
	_Static_assert(MAX_JVM_HEAPS == 4, "jvm_step looks up MAX_JVM_HEAPS heaps");
	__u64 ip = w->r->ip;
	struct jvm_heap *h = jvm_heap_holding(0, ip);
	if (!h)
		h = jvm_heap_holding(1, ip);
	if (!h)
		h = jvm_heap_holding(2, ip);
	if (!h)
		h = jvm_heap_holding(3, ip);
	if (!h)
		return -1;
	struct seg_search c = { .segmap = h->segmap, .idx = (w->r->ip - h->low) >> (h->log2_segment & 63) };
	bpf_loop(JVM_SEGMAP_STEPS, segmap_step, &c, 0);
	if (c.done != 1) {
		st->flags |= STACK_BAD_FRAME;
		return 1;
	}
	__u64 blob = h->low + (c.idx << (h->log2_segment & 63)) + h->blob_offset;
	__s32 size = 0;
	if (bpf_probe_read_user(&size, sizeof(size), (void *)(blob + h->frame_size_offset))) {
		st->flags |= STACK_READ_ERROR;
		return 1;
	}
	if (size <= 0) {
		if (fc && fc->ip == w->r->ip && fc->generation == w->r->gen) {
			fc->blob = blob;
			fc->frame_size = 0;
			fc->checked = blob_clock();
		}
		return -1;
	}
	__u32 id = 0;
	if (fc && fc->ip == w->r->ip && fc->generation == w->r->gen && h->compile_id_offset &&
	    !bpf_probe_read_user(&id, sizeof(id), (void *)(blob + h->compile_id_offset))) {
		fc->blob = blob;
		fc->frame_size = size;
		fc->compile_id = id;
		fc->checked = blob_clock();
	}
	return jvm_unwind(w, size);
}

/* jvm_bci returns the bytecode index + 1 of an interpreted frame running
 * method at bytecode pointer bcp, shifted into place for its stack entry;
 * 0 if unknown. */
static __always_inline __u64 jvm_bci(__u64 bcp, __u64 method)
{
	__u32 zero = 0;
	struct jvm_layout *l = bpf_map_lookup_elem(&jvm_layouts, &zero);
	if (!l || !l->const_method_size || !method || !bcp)
		return 0;
	__u64 cm = 0;
	if (bpf_probe_read_user(&cm, sizeof(cm), (void *)(method + l->const_method_offset)))
		return 0;
	__u64 code = cm + l->const_method_size;
	if (bcp < code || bcp - code >= 0xffff)
		return 0;
	return (bcp - code + 1) << STACK_JVM_BCI_SHIFT;
}

/* go_stack_switch leaves the system stack for the goroutine's at w->r->ip, a
 * return address into runtime.asmcgocall, as asmcgocall itself does when
 * the C call returns (asm_amd64.s, asm_arm64.s). Before switching to the
 * thread's system stack (g0) and calling C, asmcgocall stored at what is
 * now the C callee's CFA (w->r->sp) the goroutine's stack depth, g.stack.hi
 * minus an address in its own frame, and g; called on a system stack
 * already (nosave), that address itself and 0 (which word is which:
 * ARCH_GO_CGO_*, arch.bpf.h). ARCH_GO_CGO_FP_BELOW below that address is
 * asmcgocall's frame record, its caller's frame pointer with its return
 * address above: a frame-pointer step from there reaches runtime.cgocall
 * and the Go code that called C, whatever the C code did with its frame
 * pointer. The depth, not a saved stack pointer, because a callback into
 * Go may move the goroutine's stack. Returns 1 to stop the walk. */
static __always_inline long go_stack_switch(struct walk_ctx *w)
{
	struct stack *st = w->st;
	__u64 saved[2] = {}; /* the depth (or the address) and g (or 0), by ARCH_GO_CGO_* */
	if (stack_read(w, saved, sizeof(saved), w->r->sp)) {
		st->flags |= STACK_READ_ERROR;
		return 1;
	}
	__u64 fp = saved[ARCH_GO_CGO_DEPTH_WORD];
	if (saved[ARCH_GO_CGO_G_WORD]) {
		__u64 hi = 0;
		if (bpf_probe_read_user(&hi, sizeof(hi), (void *)(saved[ARCH_GO_CGO_G_WORD] + GO_G_STACK_HI))) {
			st->flags |= STACK_READ_ERROR;
			return 1;
		}
		if (saved[ARCH_GO_CGO_DEPTH_WORD] >= hi) {
			st->flags |= STACK_BAD_FRAME;
			return 1;
		}
		fp = hi - saved[ARCH_GO_CGO_DEPTH_WORD];
	}
	fp -= ARCH_GO_CGO_FP_BELOW;
	if (fp == 0 || (fp & 7)) {
		st->flags |= STACK_BAD_FRAME;
		return 1;
	}
	w->r->fp = fp;
	w->r->sp = fp;
	return 0;
}

/* walk_step appends one frame; returns 1 to stop the walk. */
static long walk_step(__u64 i, struct walk_ctx *w)
{
	struct stack *st = w->st;
	struct frame_rule fr = {};
	struct frame_rule *cached = NULL;
	bool known = frame_rule(w, &fr, &cached);
	if (known && (fr.flags & RANGE_GO_CGOCALL) && go_stack_switch(w))
		return 1;
	if (known && (fr.flags & RANGE_DWARF))
		return dwarf_step(w, &fr);
	if (known && (fr.flags & RANGE_JVM_CODE)) {
		long ret = jvm_step(w, cached);
		if (ret >= 0)
			return ret;
	}
	if (known) {
		if (!(fr.flags & RANGE_HAS_FP)) {
			st->flags |= STACK_NO_FP;
			return 1;
		}
	} else {
		/* Unknown object: keep walking with the sanity checks below;
		 * user space validates the frames later. */
		st->flags |= STACK_UNVERIFIED;
		note_range_miss(w->r->ip);
	}
	__u64 fp = w->r->fp;
	__u64 sender_sp = 0;
	if (known && (fr.flags & RANGE_JVM_INTERP)) {
		/* An interpreted Java frame: every method runs the same
		 * interpreter code, so its Method* tells them apart. */
		__u64 slots[3] = {}; /* Method*, last sp, sender sp */
		__u64 bcp = 0;
		/* The bytecode pointer first: it lies below the slots. */
		if (fp > MAX_FRAME_SPAN && !stack_read(w, &bcp, sizeof(bcp), fp + JVM_INTERP_BCP_OFFSET))
			stack_read(w, slots, sizeof(slots), fp + JVM_INTERP_METHOD_OFFSET);
		__u64 method = slots[0];
		/* The caller's stack pointer: a compiled caller's frame is
		 * measured from it (fp + 16 is below it when the interpreter
		 * extended the caller's frame for the arguments). */
		if (slots[2] >= fp + ARCH_FP_CALLER_SP && slots[2] - fp <= MAX_FRAME_SPAN)
			sender_sp = slots[2];
		__u32 d = st->depth;
		if (d >= MAX_STACK_DEPTH) {
			st->flags |= STACK_MAX_DEPTH;
			return 1;
		}
		method = STACK_JVM_METHOD | (method & STACK_JVM_METHOD_MASK) | jvm_bci(bcp, slots[0]);
		st->ips[d] = method;
		st->depth = d + 1;
		w->r->hash = (w->r->hash ^ method) * 1099511628211ULL;
	}
	if (fp == 0)
		return 1; /* outermost frame */
	if (fp < w->r->sp || (fp & 7) || fp - w->r->sp > MAX_FRAME_SPAN) {
		/* A cgo call runs C on the thread's stack, and the frame pointer
		 * it keeps leads back to the goroutine's stack, elsewhere in
		 * memory: from Go code, or code not classified yet (a command
		 * just exec'd), follow that once; user space validates every
		 * frame. (The mark lives in the map value, not in w, so the
		 * verifier need not tell walks apart by it.) */
		if ((fp & 7) || (known && !(fr.flags & RANGE_GO)) || (st->flags & STACK_SWITCHED)) {
			st->flags |= STACK_BAD_FRAME;
			return 1;
		}
		st->flags |= STACK_SWITCHED;
	}
	__u64 frame[2];
	if (stack_read(w, frame, sizeof(frame), fp)) {
		st->flags |= STACK_READ_ERROR;
		return 1;
	}
	if (frame[1] == 0)
		return 1;
	__u32 d = st->depth;
	if (d >= MAX_STACK_DEPTH) {
		st->flags |= STACK_MAX_DEPTH;
		return 1;
	}
	st->ips[d] = frame[1];
	st->depth = d + 1;
	w->r->ip = frame[1];
	/* x86-64: the caller's exact stack pointer; arm64: a lower bound
	 * of it (ARCH_FP_CALLER_SP, arch.bpf.h). */
	w->r->sp = sender_sp ? sender_sp : fp + ARCH_FP_CALLER_SP;
	w->r->fp = frame[0];
	w->r->hash = (w->r->hash ^ frame[1]) * 1099511628211ULL;
	return 0;
}

/* walk_stack_held follows the frame-pointer chain from a return probe, with
 * this CPU's scratch held (walk_stack): ip is
 * the return address into the caller and fp/sp are the caller's registers.
 * A walk continues through an object only if that object keeps frame
 * pointers; elsewhere %rbp holds arbitrary data (measured: heap bytes), so the
 * walk stops there and says why. Returns the stack id, 0 if lost. */
static __always_inline __u64 walk_stack_held(struct thread_state *ts, struct stack *st,
					     struct stack_window *win, __u64 ip, __u64 fp, __u64 sp)
{
	__u32 zero = 0;
	win->len = 0;
	/* What the last walk needed and a little more: the same call path
	 * reads the same words. */
	win->chunk = ts->stack_need ? (ts->stack_need + 127) & ~63ULL : STACK_FIRST_CHUNK;
	win->low = win->reach = 0;
	if (sp < ts->stack_lo || sp >= ts->stack_hi) {
		/* First walk on this thread, or its stack grew: find the
		 * mapping (once: a thread's stack does not move). */
		struct vma_bounds b = {};
		if (bpf_find_vma(bpf_get_current_task_btf(), sp, vma_bounds_cb, &b, 0) || sp < b.lo || sp >= b.hi)
			b.lo = b.hi = 0;
		ts->stack_lo = b.lo;
		ts->stack_hi = b.hi;
	}
	st->flags = 0;
	st->depth = 1;
	st->ips[0] = ip;
	struct range_ctl *ctl = bpf_map_lookup_elem(&range_ctls, &zero);
	struct walk_regs *r = &win->regs;
	r->ip = ip;
	r->fp = fp;
	r->sp = sp;
	r->hash = (14695981039346656037ULL ^ ip) * 1099511628211ULL;
	r->gen = (ctl ? ctl->generation : 0) | ((__u64)exec_gen << 48);
	r->stack_lo = ts->stack_lo;
	r->stack_hi = ts->stack_hi;
	struct walk_ctx w = { .st = st, .r = r, .win = win, .ts = ts };
	bpf_loop(MAX_STACK_DEPTH, walk_step, &w, 0);
	if (win->low && win->reach > win->low)
		ts->stack_need = win->reach - win->low > STACK_CHUNK ? STACK_CHUNK : (__u32)(win->reach - win->low);
	/* ips past depth keep stale frames; readers use depth only. */
	__u64 h = (r->hash ^ st->flags) * 1099511628211ULL;
	if (h == 0)
		h = 1;
	/* Most walks repeat a stack already stored: this CPU may have seen
	 * it, and a lookup takes no lock. */
	__u32 slot = (__u32)(h >> (64 - STACK_SEEN_BITS));
	__u64 *seen = bpf_map_lookup_elem(&stack_seen, &slot);
	if (seen && *seen == h)
		return h;
	if (!bpf_map_lookup_elem(&stacks, &h)) {
		long err = bpf_map_update_elem(&stacks, &h, st, BPF_NOEXIST);
		if (err && err != -17 /* EEXIST */) {
			stat_add(STAT_STACK_ERRORS, 1);
			return 0;
		}
	}
	if (seen)
		*seen = h;
	return h;
}

/* walk_stack walks with this CPU's scratch (stack_scratch, stack_windows,
 * frame_cache, stack_seen). A program runs with migration disabled, but a
 * fully preemptible kernel can preempt it, and another thread's walk on
 * the same CPU would then write into the scratch under it: the first walk
 * holds it, and a walk that finds it held loses its stack (counted; the
 * allocation is tracked under an unknown stack). */
static __always_inline __u64 walk_stack(struct thread_state *ts, __u64 ip, __u64 fp, __u64 sp)
{
	__u32 zero = 0;
	struct stack *st = bpf_map_lookup_elem(&stack_scratch, &zero);
	struct stack_window *win = bpf_map_lookup_elem(&stack_windows, &zero);
	if (!st || !win)
		return 0;
	if (__sync_val_compare_and_swap(&win->busy, 0, 1) != 0) {
		stat_add(STAT_WALKS_PREEMPTED, 1);
		return 0;
	}
	__u64 id = walk_stack_held(ts, st, win, ip, fp, sp);
	win->busy = 0;
	return id;
}

#endif /* WALK_BPF_H */
