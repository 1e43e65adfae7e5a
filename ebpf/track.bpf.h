/* Bookkeeping shared by every acquire/release probe: pending calls per thread,
 * the live-allocation table, per-site aggregates and the stack walker.
 * BPF-only; include after the maps are declared in leakscope.bpf.c. */
#ifndef TRACK_BPF_H
#define TRACK_BPF_H

/* Frames more than this far above the stack pointer are not trusted. */
#define MAX_FRAME_SPAN (8ULL << 20)
#define RANGE_MISS_INTERVAL_NS (20ULL * 1000 * 1000)

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

/* State of one binary search of exec_ranges, shared with search_step. */
struct search_ctx {
	__u64 ip;
	__u32 base; /* first index of the current slot */
	__u32 lo, hi; /* search [lo, hi) for the first start > ip */
};

static long search_step(__u64 i, struct search_ctx *c)
{
	if (c->lo >= c->hi)
		return 1;
	__u32 mid = (c->lo + c->hi) / 2;
	__u32 idx = c->base + mid;
	struct exec_range *r = bpf_map_lookup_elem(&exec_ranges, &idx);
	if (!r)
		return 1;
	if (c->ip < r->start)
		c->hi = mid;
	else
		c->lo = mid + 1;
	return 0;
}

/* find_range returns the executable mapping holding ip, or NULL. The steps
 * run under bpf_loop so the verifier checks one step, not every path. */
static __always_inline struct exec_range *find_range(__u64 ip)
{
	__u32 zero = 0;
	struct range_ctl *ctl = bpf_map_lookup_elem(&range_ctls, &zero);
	if (!ctl)
		return NULL;
	struct search_ctx c = { .ip = ip, .base = ctl->slot ? MAX_RANGES : 0, .hi = ctl->count };
	if (c.hi > MAX_RANGES)
		c.hi = MAX_RANGES;
	bpf_loop(RANGE_SEARCH_STEPS, search_step, &c, 0);
	if (c.lo == 0)
		return NULL;
	__u32 idx = c.base + c.lo - 1;
	struct exec_range *r = bpf_map_lookup_elem(&exec_ranges, &idx);
	if (r && ip >= r->start && ip < r->end)
		return r;
	return NULL;
}

/* note_range_miss asks user space, at most every RANGE_MISS_INTERVAL_NS per
 * CPU, to reread the target's mappings. */
static __always_inline void note_range_miss(__u64 ip)
{
	__u32 zero = 0;
	__u64 now = bpf_ktime_get_ns();
	__u64 *last = bpf_map_lookup_elem(&miss_times, &zero);
	if (!last || now - *last < RANGE_MISS_INTERVAL_NS)
		return;
	*last = now;
	struct range_ctl *ctl = bpf_map_lookup_elem(&range_ctls, &zero);
	struct range_miss m = { .ip = ip, .generation = ctl ? ctl->generation : 0, .at_ns = bpf_ktime_get_ns() };
	bpf_ringbuf_output(&range_misses, &m, sizeof(m), 0);
}

/* State of one stack walk, shared with walk_step through bpf_loop. */
struct walk_ctx {
	struct stack *st;
	__u64 ip; /* return address of the current frame */
	__u64 fp; /* frame pointer of the current frame's caller */
	__u64 sp; /* lowest address the next frame may lie at */
	__u64 hash;
	__u64 gen; /* the range table's generation: frame_cache entries of another are stale */
	struct stack_window *win;
	struct thread_state *ts;
	__u64 stack_lo, stack_hi; /* the thread's stack, as far as chunks may be read; hi 0: unknown */
	/* The depth lives in st->depth, a map value: a counter on the stack
	 * would be a known number in every iteration, and the verifier would
	 * check each of the 64 iterations' paths apart. */
};

/* stack_read reads size bytes of the target's stack at addr. Each user
 * memory read costs ~100 ns here whatever its size (a 2 KiB one ~150 ns),
 * and a walk reads two or three words a frame: so a word of the thread's
 * stack comes from the chunk of up to STACK_CHUNK bytes last read, read
 * again from addr (never past the stack mapping's end: a read that faults
 * costs ~1.2 us) when addr lies outside it. Elsewhere (a goroutine's
 * stack) it reads addr alone, as it does when a chunk faults anyway (a
 * page above never touched: a big local array never written). */
static __always_inline long stack_read(struct walk_ctx *w, void *dst, __u32 size, __u64 addr)
{
	struct stack_window *win = w->win;
	if (addr < win->lo || addr - win->lo + size > win->len) {
		if (addr < w->stack_lo || addr + size > w->stack_hi)
			return bpf_probe_read_user(dst, size, (void *)addr);
		/* From addr up: a walk reads each frame's words in
		 * ascending order, and frames lie above their callees. (Not
		 * below addr: a page below the deepest call so far may never
		 * have been touched.) */
		__u64 n = w->stack_hi - addr;
		if (n > STACK_CHUNK)
			n = STACK_CHUNK;
		win->len = 0;
		if (bpf_probe_read_user(win->data, n, (void *)addr)) {
			/* A page above addr was never touched: a big local
			 * array never written, or the main thread's random gap
			 * below its arguments. No chunk on this thread runs
			 * past addr's page again (each fault costs ~1.2 us);
			 * words above are read alone. */
			w->stack_hi = (addr | (page_size - 1)) + 1;
			w->ts->stack_hi = w->stack_hi;
			stat_add(STAT_STACK_CHUNK_FAULTS, 1);
			return bpf_probe_read_user(dst, size, (void *)addr);
		}
		win->lo = addr;
		win->len = n;
	}
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
	w->ip = ra;
	w->sp = sp;
	w->hash = (w->hash ^ ra) * 1099511628211ULL;
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
		cfa = w->sp + fr->cfa_off;
		break;
	case UNWIND_CFA_RBP:
		cfa = w->fp + fr->cfa_off;
		break;
	case UNWIND_UNDEFINED:
		st->flags |= STACK_UNWIND_END;
		return 1;
	default:
		st->flags |= STACK_UNWIND_UNSUPPORTED;
		return 1;
	}
	if (cfa <= w->sp || cfa - w->sp > MAX_FRAME_SPAN) {
		st->flags |= STACK_BAD_FRAME;
		return 1;
	}
	/* The saved %rbp first: it lies below the return address, and a
	 * chunk of the stack is read upwards from the first word needed. */
	__u64 ra, fp = w->fp;
	__u32 how = fr->rule >> 4;
	if ((how == UNWIND_RBP_SAVED && stack_read(w, &fp, sizeof(fp), cfa + fr->rbp_off)) ||
	    stack_read(w, &ra, sizeof(ra), cfa - 8)) {
		st->flags |= STACK_READ_ERROR;
		return 1;
	}
	if (how == UNWIND_RBP_UNDEFINED)
		fp = 0;
	w->fp = fp;
	return push_frame(w, ra, cfa);
}

/* frame_rule finds how to unwind the frame of w->ip: its range's flags
 * and, for an object walked with unwind rows, its row; from frame_cache
 * when this generation of the tables already found it (a walk through a
 * big object costs two binary searches per frame otherwise). Returns false
 * when no range holds w->ip. */
static __always_inline bool frame_rule(struct walk_ctx *w, struct frame_rule *fr, struct frame_rule **cached)
{
	__u32 slot = (__u32)((w->ip * 0x9E3779B97F4A7C15ULL) >> (64 - FRAME_CACHE_BITS));
	struct frame_rule *c = bpf_map_lookup_elem(&frame_cache, &slot);
	*cached = c;
	if (c && c->ip == w->ip && c->generation == w->gen) {
		*fr = *c;
		return true;
	}
	struct exec_range *r = find_range(w->ip);
	if (!r)
		return false;
	fr->ip = w->ip;
	fr->generation = w->gen;
	fr->flags = r->flags;
	fr->has_row = 0;
	fr->blob = 0;
	if (r->flags & RANGE_DWARF)
		find_row(w->ip, r, fr);
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
 * caller's %rbp in the one below. Returns 1 to stop the walk. */
static __always_inline long jvm_unwind(struct walk_ctx *w, __s32 size)
{
	struct stack *st = w->st;
	if (size <= 0 || (__u64)size * 8 > MAX_FRAME_SPAN) {
		st->flags |= STACK_BAD_FRAME;
		return 1;
	}
	__u64 cfa = w->sp + (__u64)size * 8;
	__u64 frame[2]; /* caller's %rbp, return address */
	if (stack_read(w, frame, sizeof(frame), cfa - 16)) {
		st->flags |= STACK_READ_ERROR;
		return 1;
	}
	w->fp = frame[0];
	return push_frame(w, frame[1], cfa);
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
	/* The blob found for this return address before, if the same
	 * nmethod (compile id) is still there: one read instead of the
	 * segment map walk. fc is this ip's frame_cache entry. */
	if (fc && fc->ip == w->ip && fc->generation == w->gen && fc->blob) {
		__u32 zero = 0, id = 0;
		__s32 size = 0;
		struct jvm_heap *h0 = bpf_map_lookup_elem(&jvm_heaps, &zero);
		if (h0 && fc->frame_size > 0 && h0->compile_id_offset &&
		    !bpf_probe_read_user(&id, sizeof(id), (void *)(fc->blob + h0->compile_id_offset)) &&
		    id == fc->compile_id)
			return jvm_unwind(w, fc->frame_size);
		/* A blob without a frame size (the interpreter, a stub: a
		 * frame in nearly every Java stack) is still one if it still
		 * says so: one read instead of the segment map walk. */
		if (h0 && fc->frame_size == 0 &&
		    !bpf_probe_read_user(&size, sizeof(size), (void *)(fc->blob + h0->frame_size_offset)) &&
		    size <= 0)
			return -1;
	}
	struct jvm_heap *h = NULL;
	for (__u32 k = 0; k < MAX_JVM_HEAPS; k++) {
		struct jvm_heap *c = bpf_map_lookup_elem(&jvm_heaps, &k);
		if (c && c->low && w->ip >= c->low && w->ip < c->high) {
			h = c;
			break;
		}
	}
	if (!h)
		return -1;
	struct seg_search c = { .segmap = h->segmap, .idx = (w->ip - h->low) >> (h->log2_segment & 63) };
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
		if (fc && fc->ip == w->ip && fc->generation == w->gen) {
			fc->blob = blob;
			fc->frame_size = 0;
		}
		return -1;
	}
	__u32 id = 0;
	if (fc && fc->ip == w->ip && fc->generation == w->gen && h->compile_id_offset &&
	    !bpf_probe_read_user(&id, sizeof(id), (void *)(blob + h->compile_id_offset))) {
		fc->blob = blob;
		fc->frame_size = size;
		fc->compile_id = id;
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

/* go_stack_switch leaves the system stack for the goroutine's at w->ip, a
 * return address into runtime.asmcgocall, as asmcgocall itself does when
 * the C call returns (asm_amd64.s). Before switching to the thread's
 * system stack (g0) and calling C, asmcgocall stored at what is now the C
 * callee's CFA (w->sp) the goroutine's stack depth, g.stack.hi minus its
 * own frame pointer, then g; called on a system stack already (nosave),
 * it stored its frame pointer itself, then 0. That frame pointer is where
 * asmcgocall pushed its caller's %rbp, with its return address above: a
 * frame-pointer step from there reaches runtime.cgocall and the Go code
 * that called C, whatever the C code did with %rbp. The depth, not a
 * saved stack pointer, because a callback into Go may move the
 * goroutine's stack. Returns 1 to stop the walk. */
static __always_inline long go_stack_switch(struct walk_ctx *w)
{
	struct stack *st = w->st;
	__u64 saved[2] = {}; /* depth (or the frame pointer), g (or 0) */
	if (stack_read(w, saved, sizeof(saved), w->sp)) {
		st->flags |= STACK_READ_ERROR;
		return 1;
	}
	__u64 fp = saved[0];
	if (saved[1]) {
		__u64 hi = 0;
		if (bpf_probe_read_user(&hi, sizeof(hi), (void *)(saved[1] + GO_G_STACK_HI))) {
			st->flags |= STACK_READ_ERROR;
			return 1;
		}
		if (saved[0] >= hi) {
			st->flags |= STACK_BAD_FRAME;
			return 1;
		}
		fp = hi - saved[0];
	}
	if (fp == 0 || (fp & 7)) {
		st->flags |= STACK_BAD_FRAME;
		return 1;
	}
	w->fp = fp;
	w->sp = fp;
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
		note_range_miss(w->ip);
	}
	__u64 fp = w->fp;
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
		if (slots[2] >= fp + 16 && slots[2] - fp <= MAX_FRAME_SPAN)
			sender_sp = slots[2];
		__u32 d = st->depth;
		if (d >= MAX_STACK_DEPTH) {
			st->flags |= STACK_MAX_DEPTH;
			return 1;
		}
		method = STACK_JVM_METHOD | (method & STACK_JVM_METHOD_MASK) | jvm_bci(bcp, slots[0]);
		st->ips[d] = method;
		st->depth = d + 1;
		w->hash = (w->hash ^ method) * 1099511628211ULL;
	}
	if (fp == 0)
		return 1; /* outermost frame */
	if (fp < w->sp || (fp & 7) || fp - w->sp > MAX_FRAME_SPAN) {
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
	w->ip = frame[1];
	w->sp = sender_sp ? sender_sp : fp + 16;
	w->fp = frame[0];
	w->hash = (w->hash ^ frame[1]) * 1099511628211ULL;
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
	struct walk_ctx w = {
		.st = st,
		.ip = ip,
		.fp = fp,
		.sp = sp,
		.hash = (14695981039346656037ULL ^ ip) * 1099511628211ULL,
		.gen = (ctl ? ctl->generation : 0) | ((__u64)exec_gen << 48),
		.win = win,
		.ts = ts,
		.stack_lo = ts->stack_lo,
		.stack_hi = ts->stack_hi,
	};
	bpf_loop(MAX_STACK_DEPTH, walk_step, &w, 0);
	/* ips past depth keep stale frames; readers use depth only. */
	__u64 h = (w.hash ^ st->flags) * 1099511628211ULL;
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

/* zcall_owner returns the stream a malloc at this entry belongs to: a zlib
 * call is in progress deeper than its entry, and the caller of malloc is the
 * zlib object itself. 0 otherwise. */
static __always_inline __u64 zcall_owner(struct pt_regs *ctx, struct zcall *z, __u32 *kind)
{
	__u64 sp = PT_REGS_SP(ctx);
	if (!z->sp || sp >= z->sp)
		return 0;
	__u64 ra = 0;
	if (bpf_probe_read_user(&ra, sizeof(ra), (void *)sp))
		return 0;
	struct exec_range *r = find_range(ra);
	if (!r || !(r->flags & RANGE_ZLIB))
		return 0;
	*kind = z->kind;
	return z->strm;
}

/* zwindow_owner returns the inflate stream a malloc of size bytes, now
 * returning, is the window of: inflate() allocates a stream's window
 * lazily (updatewindow, also reached from inflateSetDictionary), and with
 * the malloc family traced in exact mode inflate() is not probed (a trap
 * per call). A window is 1 << wbits bytes (8 to 15), allocated by zlib
 * itself, and its state is still live in a callee-saved register of the
 * caller (Debian's zlib 1.2.13: %rbp) across the call: a malloc block
 * zlib allocated for a live inflate stream, whose state->strm points back
 * at that stream, whose state->window is still NULL (it is stored after
 * the return) and whose state->wbits matches the size. Applications never
 * hold a state: only zlib's own code does. 0 if none matched: the block
 * is then an ordinary allocation. */
static __always_inline __u64 zwindow_owner(struct pt_regs *ctx, __u64 size)
{
	if (size < 256 || size > 32768 || (size & (size - 1)))
		return 0;
	struct exec_range *r = find_range(PT_REGS_IP(ctx));
	if (!r || !(r->flags & RANGE_ZLIB))
		return 0;
	__u64 regs[6] = { PT_REGS_FP(ctx), ctx->bx, ctx->r12, ctx->r13, ctx->r14, ctx->r15 };
#pragma unroll
	for (int i = 0; i < 6; i++) {
		struct handle_key hk = { .addr = regs[i], .kind = KIND_MALLOC, .pad = image_pad() };
		struct alloc_info *b = bpf_map_lookup_elem(&allocs, &hk);
		if (!b || b->owner_kind != KIND_ZLIB_INFLATE)
			continue;
		__u64 owner = b->owner;
		__u64 state[INFLATE_STATE_WINDOW_OFF / 8 + 1];
		if (!owner || bpf_probe_read_user(state, sizeof(state), (void *)regs[i]))
			continue;
		__u32 wbits = (__u32)state[INFLATE_STATE_WBITS_OFF / 8];
		if (state[0] == owner && state[INFLATE_STATE_WINDOW_OFF / 8] == 0 && wbits <= 15 &&
		    (1ULL << wbits) == size)
			return owner;
	}
	return 0;
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
	bpf_send_signal(19 /* SIGSTOP */);
	struct range_miss m = { .at_ns = bpf_ktime_get_ns() };
	bpf_ringbuf_output(&range_misses, &m, sizeof(m), 0);
}

/* pending_enter records an acquire call for its return probe. A call made
 * while an outer tracked call is running on this thread (realloc inside
 * reallocarray) is not counted twice: it is deeper on the stack than the
 * recorded one. A malloc inside a resource's acquire call (zlib's state
 * inside inflateInit2_) is recorded apart, as memory of that resource.
 * A record at or below the current stack pointer is stale (its return was
 * never seen) and is replaced. */
static __always_inline void pending_enter(struct pt_regs *ctx, __u32 kind, __u32 op,
					  __u64 size, __u64 old_ptr, __u64 out_ptr)
{
	if (probes_only || !is_target())
		return;
	if (wait_exec && !stop_sent)
		stop_until_ranges();
	struct thread_state *ts = thread_state(true);
	if (!ts) {
		stat_add(STAT_PENDING_DROPPED, 1);
		return;
	}
	__u64 sp = PT_REGS_SP(ctx);
	struct pending n = {
		.size_bytes = size,
		.old_ptr = old_ptr,
		.out_ptr = out_ptr,
		.sp = sp,
		.kind = kind,
		.op = op,
	};
	struct pending *p = &ts->outer;
	if (p->sp && sp < p->sp) {
		if (p->kind != KIND_MALLOC && kind == KIND_MALLOC) {
			if (ts->inner.sp && sp < ts->inner.sp) {
				stat_add(STAT_NESTED_CALLS, 1);
				return;
			}
			n.owner = p->out_ptr;
			n.owner_kind = p->kind;
			ts->inner = n;
			return;
		}
		stat_add(STAT_NESTED_CALLS, 1);
		return;
	}
	if (kind == KIND_MALLOC)
		n.owner = zcall_owner(ctx, &ts->zcall, &n.owner_kind);
	ts->outer = n;
}

/* owner_add moves bytes into (or, negative, out of) a live resource and
 * its site. Returns false if the owner is not live. */
static __always_inline bool owner_add(__u64 owner, __u32 owner_kind, __s64 bytes)
{
	struct handle_key hk = { .addr = owner, .kind = owner_kind, .pad = image_pad() };
	struct alloc_info *o = bpf_map_lookup_elem(&allocs, &hk);
	if (!o)
		return false;
	__sync_fetch_and_add(&o->size_bytes, bytes);
	__u32 slot = o->site;
	struct site_slot *s = bpf_map_lookup_elem(&site_slots, &slot);
	if (s)
		__sync_fetch_and_add(&s->stats.live_bytes, bytes);
	return true;
}

/* site_release moves one allocation out of its site's live totals, or out
 * of its owner's bytes. */
static __always_inline void site_release(struct alloc_info *info)
{
	if (info->owner) {
		owner_add(info->owner, info->owner_kind, -(__s64)info->size_bytes);
		return;
	}
	__u32 slot = info->site;
	struct site_slot *s = bpf_map_lookup_elem(&site_slots, &slot);
	if (!s)
		return;
	__sync_fetch_and_add(&s->stats.live_count, -1);
	__sync_fetch_and_add(&s->stats.live_bytes, -info->size_bytes);
	__sync_fetch_and_add(&s->stats.live_ts_sum_ns, -info->ts_ns);
	__sync_fetch_and_add(&s->stats.frees, 1);
}

/* filter_count returns the sampled_filter counter of heap block addr. */
static __always_inline __u32 *filter_count(__u64 addr)
{
	__u32 idx = (__u32)(((addr >> 4) * 0x9E3779B97F4A7C15ULL) >> (64 - SAMPLED_FILTER_BITS));
	return bpf_map_lookup_elem(&sampled_filter, &idx);
}

/* filter_note counts a heap block in (delta 1) or out of (-1)
 * sampled_filter, when sampling. */
static __always_inline void filter_note(__u64 addr, __u32 kind, __s32 delta)
{
	if (!sample_bytes || kind != KIND_MALLOC)
		return;
	__u32 *n = filter_count(addr);
	if (n)
		__sync_fetch_and_add(n, delta);
}

/* take_entry removes a live handle of this image from allocs into *out.
 * Only the deleter gets it, so a racing double release counts once. */
static __always_inline bool take_entry(__u64 addr, __u32 kind, struct alloc_info *out)
{
	struct handle_key hk = { .addr = addr, .kind = kind, .pad = image_pad() };
	struct alloc_info *info = bpf_map_lookup_elem(&allocs, &hk);
	if (!info)
		return false;
	*out = *info;
	if (bpf_map_delete_elem(&allocs, &hk))
		return false;
	filter_note(addr, kind, -1);
	return true;
}

/* track_release forgets a live handle. Returns false if it was not known. */
static __always_inline bool track_release(__u64 addr, __u32 kind)
{
	struct alloc_info copy;
	if (!take_entry(addr, kind, &copy))
		return false;
	site_release(&copy);
	stat_add(STAT_FREES, 1);
	return true;
}

static __always_inline bool orphan_resource(__u64 addr, __u32 kind);
static __always_inline void zwindow_settle(__u64 strm, __u32 kind, struct zwindow *w);

/* retire_live makes room for a handle acquired again while still
 * recorded. A heap block's release was missed (a path we do not probe):
 * its entry is released, so nothing is counted twice. A resource
 * re-initialised without its release (an inflate stream without its End)
 * is lost to the program with its state: it stays live as an orphan, its
 * window, if any, with it. */
static __always_inline void retire_live(__u64 addr, __u32 kind)
{
	if (kind == KIND_MALLOC) {
		if (track_release(addr, kind))
			stat_add(STAT_FREES_MISSED, 1);
		return;
	}
	struct handle_key wk = { .addr = addr, .kind = kind, .pad = image_pad() };
	struct zwindow *w = bpf_map_lookup_elem(&zwindows, &wk);
	if (w) {
		struct zwindow copy = *w;
		/* Its state's address must be known: strm->state is the new
		 * stream's already (read at the init's return). */
		if (copy.state)
			zwindow_settle(addr, kind, &copy);
		else
			stat_add(STAT_WINDOWS_UNREAD, 1);
	}
	orphan_resource(addr, kind);
}

/* insert_alloc adds a new live handle to allocs, retiring the entry a
 * handle still recorded has (retire_live). Inserting first saves the
 * lookups on every other acquisition. False if the table is full. */
static __always_inline bool insert_alloc(__u64 addr, __u32 kind, struct alloc_info *info)
{
	struct handle_key hk = { .addr = addr, .kind = kind, .pad = image_pad() };
	long err = bpf_map_update_elem(&allocs, &hk, info, BPF_NOEXIST);
	if (err == -17 /* EEXIST */) {
		retire_live(addr, kind);
		err = bpf_map_update_elem(&allocs, &hk, info, BPF_NOEXIST);
	}
	if (err) {
		stat_add(STAT_ALLOCS_DROPPED, 1);
		return false;
	}
	filter_note(addr, kind, 1);
	return true;
}

/* orphan_resource keeps a live resource that is being re-initialised
 * without its release: its state is lost to the program, so it stays live
 * for good, under a key nothing will release. */
static __always_inline bool orphan_resource(__u64 addr, __u32 kind)
{
	struct alloc_info copy;
	if (!take_entry(addr, kind, &copy))
		return false;
	struct handle_key hk = { .addr = addr, .kind = kind, .pad = bpf_get_prandom_u32() | 1 };
	if (bpf_map_update_elem(&allocs, &hk, &copy, BPF_NOEXIST))
		stat_add(STAT_ALLOCS_DROPPED, 1);
	return true;
}

/* track_owned records a block a library allocated for a live resource: its
 * bytes count in the resource's row, not as a malloc site. */
static __always_inline bool track_owned(__u64 addr, __u64 size, __u64 owner, __u32 owner_kind,
					__u64 ts)
{
	struct alloc_info info = {
		.size_bytes = size,
		.ts_ns = ts,
		.kind = KIND_MALLOC,
		.site = NO_SITE,
		.owner = owner,
		.owner_kind = owner_kind,
	};
	if (!insert_alloc(addr, KIND_MALLOC, &info))
		return false;
	stat_add(STAT_OWNED_ALLOCS, 1);
	return true;
}

/* zwindow_settle counts the window of live inflate stream strm (w, its
 * zwindows entry) into the stream if zlib allocated it, read from the
 * target's memory: state->window, 1 << state->wbits bytes. The state must
 * point back at strm (inflateStateCheck), or it is not the stream's. */
static __always_inline void zwindow_settle(__u64 strm, __u32 kind, struct zwindow *w)
{
	__u64 state = w->state, back = 0, window = 0;
	__u32 wbits = 0;
	if (!state && bpf_probe_read_user(&state, sizeof(state), (void *)(strm + ZSTREAM_STATE_OFF)))
		state = 0;
	if (!state || bpf_probe_read_user(&back, sizeof(back), (void *)state) || back != strm ||
	    bpf_probe_read_user(&window, sizeof(window), (void *)(state + w->window_off)) ||
	    bpf_probe_read_user(&wbits, sizeof(wbits), (void *)(state + w->wbits_off))) {
		stat_add(STAT_WINDOWS_UNREAD, 1);
		return;
	}
	if (!window)
		return; /* not allocated (yet) */
	__u32 bytes = wbits >= 8 && wbits <= 15 ? 1U << wbits : w->bytes;
	struct handle_key hk = { .addr = strm, .kind = kind, .pad = image_pad() };
	if (bpf_map_delete_elem(&zwindows, &hk) == 0)
		owner_add(strm, kind, bytes);
}

/* zwindow_pending gives the acquire call just recorded at this entry (an
 * inflate stream's init, malloc not traced) a window to look for once the
 * stream exists: bytes, for windowBits the init is given. */
static __always_inline void zwindow_pending(struct pt_regs *ctx, __u32 kind, __u32 bytes)
{
	struct thread_state *ts = thread_state(false);
	if (!ts || ts->outer.sp != PT_REGS_SP(ctx) || ts->outer.kind != kind)
		return;
	ts->outer.window.bytes = bytes;
	ts->outer.window.wbits_off = INFLATE_STATE_WBITS_OFF;
	ts->outer.window.window_off = INFLATE_STATE_WINDOW_OFF;
}

/* zwindow_forget drops the uncounted window of a stream being released. */
static __always_inline void zwindow_forget(__u64 strm, __u32 kind)
{
	struct handle_key hk = { .addr = strm, .kind = kind, .pad = image_pad() };
	bpf_map_delete_elem(&zwindows, &hk);
}

/* site_is reports whether slot s holds the site (stack_id, kind) of the
 * current image. */
static __always_inline bool site_is(struct site_slot *s, __u64 stack_id, __u32 kind)
{
	return s->state == SLOT_USED && s->key.stack_id == stack_id && s->key.kind == kind &&
	       s->key.pad == exec_gen;
}

/* site_for returns the slot of site (stack_id, kind) of the current image
 * in site_slots, and its index in *slot, making the site if it is new;
 * NULL when site_slots is full. A site this CPU found before comes from
 * site_seen without a hash lookup. */
static __always_inline struct site_slot *site_for(__u64 stack_id, __u32 kind, __u32 *slot)
{
	__u32 seen_idx = (__u32)((stack_id ^ ((__u64)kind * 0x9E3779B97F4A7C15ULL)) >> (64 - STACK_SEEN_BITS));
	__u32 *seen = bpf_map_lookup_elem(&site_seen, &seen_idx);
	struct site_slot *s;
	if (seen && *seen) {
		__u32 idx = *seen - 1;
		s = bpf_map_lookup_elem(&site_slots, &idx);
		if (s && site_is(s, stack_id, kind)) {
			*slot = idx;
			return s;
		}
	}
	struct site_key key = { .stack_id = stack_id, .kind = kind, .pad = exec_gen };
	__u32 *found = bpf_map_lookup_elem(&sites, &key);
	__u32 idx;
	if (found) {
		idx = *found;
	} else {
		/* A new site: take the next slot, write its key, then publish
		 * it in sites. Another CPU making the same site at once wins
		 * the insert; this slot is then left unused. The slot is taken
		 * with a compare-and-swap (a fetch-and-add's result needs BPF
		 * v3 atomics), which loses only to another CPU's new site and
		 * is tried again. */
		__u64 n = max_sites;
#pragma unroll
		for (int i = 0; i < 8; i++) {
			__u64 cur = site_count;
			if (cur >= max_sites)
				return NULL;
			if (__sync_val_compare_and_swap(&site_count, cur, cur + 1) == cur) {
				n = cur;
				break;
			}
		}
		if (n >= max_sites)
			return NULL;
		idx = (__u32)n;
		s = bpf_map_lookup_elem(&site_slots, &idx);
		if (!s)
			return NULL;
		s->key = key;
		s->state = SLOT_USED;
		if (bpf_map_update_elem(&sites, &key, &idx, BPF_NOEXIST)) {
			s->state = SLOT_UNUSED;
			found = bpf_map_lookup_elem(&sites, &key);
			if (!found)
				return NULL;
			idx = *found;
		}
	}
	s = bpf_map_lookup_elem(&site_slots, &idx);
	if (!s)
		return NULL;
	if (seen)
		*seen = idx + 1;
	*slot = idx;
	return s;
}

/* track_alloc records a new live handle under its site; false if the
 * tables were full. */
static __always_inline bool track_alloc(__u64 addr, __u64 size, __u32 kind, __u64 stack_id,
					__u64 ts)
{
	__u32 slot;
	struct site_slot *s = site_for(stack_id, kind, &slot);
	if (!s) {
		stat_add(STAT_ALLOCS_DROPPED, 1);
		return false;
	}
	struct alloc_info info = {
		.size_bytes = size,
		.ts_ns = ts,
		.stack_id = stack_id,
		.kind = kind,
		.site = slot,
	};
	if (!insert_alloc(addr, kind, &info))
		return false;
	__sync_fetch_and_add(&s->stats.live_count, 1);
	__sync_fetch_and_add(&s->stats.live_bytes, size);
	__sync_fetch_and_add(&s->stats.live_ts_sum_ns, ts);
	__sync_fetch_and_add(&s->stats.allocs, 1);
	stat_add(STAT_ALLOCS, 1);
	return true;
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
		addr = ret;
		/* realloc(p, 0) frees p and returns NULL (glibc); a failed
		 * realloc(p, n>0) leaves p live. */
		if (p->old_ptr && (ret || p->size_bytes == 0))
			if (!track_release(p->old_ptr, p->kind) && !sample_bytes)
				stat_add(STAT_UNKNOWN_FREES, 1);
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
	if (!ts->inner.sp || sp != ts->inner.sp + 8)
		return false;
	struct pending in = ts->inner;
	ts->inner.sp = 0;
	__u64 addr = result_addr(&in, PT_REGS_RC(ctx));
	if (!addr)
		return true;
	if (!track_owned(addr, in.size_bytes, in.owner, in.owner_kind, bpf_ktime_get_ns()))
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
	/* After the return the stack pointer is one slot above the entry's:
	 * anything else is the return of a nested call. */
	__u64 sp = PT_REGS_SP(ctx);
	if (inner_exit(ctx, ts, sp))
		return;
	if (!ts->outer.sp || sp != ts->outer.sp + 8)
		return;
	struct pending p = ts->outer;
	ts->outer.sp = 0;

	__u64 addr = result_addr(&p, PT_REGS_RC(ctx));
	if (!addr)
		return;
	__u64 now = bpf_ktime_get_ns();
	if (!p.owner && p.kind == KIND_MALLOC && (p.owner = zwindow_owner(ctx, p.size_bytes)))
		p.owner_kind = KIND_ZLIB_INFLATE;
	if (p.owner && track_owned(addr, p.size_bytes, p.owner, p.owner_kind, now)) {
		if (owner_add(p.owner, p.owner_kind, p.size_bytes))
			return;
		/* The stream is unknown (made before attaching): count the
		 * block as an ordinary allocation instead. */
		track_release(addr, KIND_MALLOC);
	}
	__u64 stack_id = walk_stack(ts, PT_REGS_IP(ctx), PT_REGS_FP(ctx), sp);
	if (track_alloc(addr, p.size_bytes, p.kind, stack_id, now) && p.window.bytes) {
		/* An inflate stream traced without malloc: its window is
		 * counted once zlib made it (zwindows). */
		struct handle_key hk = { .addr = addr, .kind = p.kind, .pad = image_pad() };
		p.window.stack_id = stack_id;
		if (bpf_probe_read_user(&p.window.state, sizeof(p.window.state), (void *)(addr + ZSTREAM_STATE_OFF)))
			p.window.state = 0;
		bpf_map_update_elem(&zwindows, &hk, &p.window, BPF_ANY);
	}
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
	struct handle_key hk = { .addr = addr, .kind = kind, .pad = image_pad() };
	struct alloc_info *info = bpf_map_lookup_elem(&allocs, &hk);
	if (!info && sample_bytes && kind == KIND_MALLOC)
		return false;
	struct thread_state *ts = thread_state(false);
	struct pending *p = ts ? &ts->outer : NULL;
	if (p && p->sp && PT_REGS_SP(ctx) < p->sp) {
		if (info && info->owner && info->owner == p->out_ptr) {
			__s64 size = info->size_bytes;
			if (!bpf_map_delete_elem(&allocs, &hk)) {
				p->size_bytes -= size;
				filter_note(addr, kind, -1);
			}
			return false;
		}
		stat_add(STAT_NESTED_CALLS, 1);
		return false;
	}
	if (!info) {
		stat_add(STAT_UNKNOWN_FREES, 1);
		return false;
	}
	/* Only the deleter releases, so a racing double release counts once. */
	struct alloc_info copy = *info;
	if (bpf_map_delete_elem(&allocs, &hk))
		return false;
	filter_note(addr, kind, -1);
	site_release(&copy);
	stat_add(STAT_FREES, 1);
	return true;
}

#endif /* TRACK_BPF_H */
