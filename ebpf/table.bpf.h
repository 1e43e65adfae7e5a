/* The live-allocation table (allocs) and the per-site totals (sites,
 * site_slots, site_counts): inserting and releasing handles, resources' owned blocks
 * and inflate windows (window_word). BPF-only. */
#ifndef TABLE_BPF_H
#define TABLE_BPF_H

#include "state.bpf.h"

/* site_stats_of returns this CPU's copy of the totals of site slot
 * (site_counts); NULL for no site. */
static __always_inline struct site_stats *site_stats_of(__u32 slot)
{
	if (slot >= max_sites)
		return NULL;
	__u32 idx = slot * site_copies + (bpf_get_smp_processor_id() & (site_copies - 1));
	return bpf_map_lookup_elem(&site_counts, &idx);
}

/* addr_hash spreads a block's address (16-byte aligned, mostly) over 64 bits. */
static __always_inline __u64 addr_hash(__u64 addr)
{
	return (addr >> 4) * 0x9E3779B97F4A7C15ULL;
}

/* filter_count returns the sampled_filter counter of heap block addr. */
static __always_inline __u32 *filter_count(__u64 addr)
{
	__u32 idx = (__u32)(addr_hash(addr) >> (64 - SAMPLED_FILTER_BITS));
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


/* bucketable reports whether live handle (addr, kind) is kept in
 * alloc_buckets: one that looks like a pointer (not 0, 8-aligned: the low
 * bits are SLOT_BUSY's and SLOT_FILLING's), as every heap block is, and
 * such resources as zlib's z_streams and the blocks of declared pairs
 * (and a file descriptor that is a multiple of 8). Any other handle stays
 * in allocs, as orphans do. */
static __always_inline bool bucketable(__u64 addr, __u32 kind)
{
	return addr && !(addr & 7);
}

/* bucket_of returns the bucket of alloc_buckets handle addr belongs
 * in; NULL when the table is not in use. */
static __always_inline struct alloc_bucket *bucket_of(__u64 addr)
{
	if (!alloc_buckets_used)
		return NULL;
	__u32 idx = (__u32)(addr_hash(addr) >> 32) & (alloc_buckets_used - 1);
	return bpf_map_lookup_elem(&alloc_buckets, &idx);
}

/* A slot's addr with SLOT_BUSY set holds a heap block being moved to
 * allocs (alloc_evict): its record is valid and holds still, and its
 * release may take it. One with SLOT_FILLING set is being filled with a
 * new handle (slot_fill): its record is still its last holder's, so no
 * lookup matches it (a handle of another kind at the same address, the
 * z_stream's memory beside its stream, must not find it), and no evictor
 * expecting its block back in the slot mistakes the new one for it.
 * Bucketable handles are 8-byte aligned, so neither bit is an
 * address's. */
#define SLOT_BUSY 1ULL
#define SLOT_FILLING 2ULL

/* slot_find returns the slot of live handle (addr, kind) of the current
 * image in bucket b, busy or not (never one being filled); NULL if it is
 * not there. */
static __always_inline struct alloc_slot *slot_find(struct alloc_bucket *b, __u64 addr, __u32 kind)
{
	__u32 gen = image_pad();
#pragma unroll
	for (int i = 0; i < ALLOC_WAYS; i++) {
		if ((b->slot[i].addr & ~SLOT_BUSY) == addr && b->slot[i].gen == gen && b->slot[i].info.kind == kind)
			return &b->slot[i];
	}
	return NULL;
}

/* spill_count returns the spill_filter counter of handle addr. */
static __always_inline __u32 *spill_count(__u64 addr)
{
	__u32 idx = (__u32)(addr_hash(addr) >> (64 - SPILL_FILTER_BITS));
	return bpf_map_lookup_elem(&spill_filter, &idx);
}

/* spill_note counts a bucketable handle into (delta 1) or out of (-1)
 * allocs. */
static __always_inline void spill_note(__u64 addr, __u32 kind, __s32 delta)
{
	if (!bucketable(addr, kind))
		return;
	__u32 *n = spill_count(addr);
	if (n)
		__sync_fetch_and_add(n, delta);
}

/* alloc_find returns the record of live handle (addr, kind) of the current
 * image, and in *slot its slot in alloc_buckets (NULL: it is in allocs);
 * NULL if it is not live. A bucketable handle is looked up in allocs only
 * when spill_filter says it may be there. */
static __always_inline struct alloc_info *alloc_find(__u64 addr, __u32 kind, struct alloc_slot **slot)
{
	*slot = NULL;
	if (bucketable(addr, kind)) {
		struct alloc_bucket *b = bucket_of(addr);
		if (b) {
			struct alloc_slot *s = slot_find(b, addr, kind);
			if (s) {
				*slot = s;
				return &s->info;
			}
			__u32 *n = spill_count(addr);
			if (n && *n == 0)
				return NULL;
		}
	}
	struct handle_key hk = { .addr = addr, .kind = kind, .pad = image_pad() };
	return bpf_map_lookup_elem(&allocs, &hk);
}

/* alloc_remove removes live handle (addr, kind), found by alloc_find as
 * info in slot, copying its record into *out. Only the remover gets it, so
 * a racing double release counts once. A slot's record does not change
 * while its addr is the handle's, busy or not; a block whose slot another
 * CPU took meanwhile was moved to allocs first (alloc_evict). */
static __always_inline bool alloc_remove(__u64 addr, __u32 kind, struct alloc_slot *slot,
					 struct alloc_info *info, struct alloc_info *out)
{
	struct handle_key hk = { .addr = addr, .kind = kind, .pad = image_pad() };
	if (slot) {
		*out = *info;
#pragma unroll
		for (int i = 0; i < 2; i++) {
			__u64 cur = slot->addr;
			if ((cur & ~SLOT_BUSY) != addr)
				break;
			if (__sync_val_compare_and_swap(&slot->addr, cur, 0) == cur) {
				filter_note(addr, kind, -1);
				return true;
			}
		}
		info = bpf_map_lookup_elem(&allocs, &hk);
		if (!info)
			return false;
	}
	*out = *info;
	if (bpf_map_delete_elem(&allocs, &hk))
		return false;
	spill_note(addr, kind, -1);
	filter_note(addr, kind, -1);
	return true;
}

/* owner_add moves bytes into (or, negative, out of) a live resource and
 * its site. Returns false if the owner is not live. A resource released
 * on another CPU between the lookup and the add takes the bytes with it
 * nowhere, or, its slot already another handle's, puts them in that
 * handle's record: a window counted at the very moment its stream ends. */
static __always_inline bool owner_add(__u64 owner, __u32 owner_kind, __s64 bytes)
{
	struct alloc_slot *slot;
	struct alloc_info *o = alloc_find(owner, owner_kind, &slot);
	if (!o)
		return false;
	__sync_fetch_and_add(&o->size_bytes, bytes);
	struct site_stats *s = site_stats_of(o->site);
	if (s)
		__sync_fetch_and_add(&s->live_bytes, bytes);
	return true;
}

/* site_release moves one allocation out of its site's live totals, or out
 * of its owner's bytes. */
static __always_inline void site_release(struct alloc_info *info)
{
	if (info->kind == KIND_MALLOC && info->owner) {
		owner_add(info->owner, info->owner_kind, -(__s64)info->size_bytes);
		return;
	}
	struct site_stats *s = site_stats_of(info->site);
	if (!s)
		return;
	__sync_fetch_and_add(&s->live_bytes, -info->size_bytes);
	__sync_fetch_and_add(&s->frees, 1);
}

/* take_entry removes a live handle of this image from allocs into *out.
 * Only the deleter gets it, so a racing double release counts once. */
static __always_inline bool take_entry(__u64 addr, __u32 kind, struct alloc_info *out)
{
	struct alloc_slot *slot;
	struct alloc_info *info = alloc_find(addr, kind, &slot);
	if (!info)
		return false;
	return alloc_remove(addr, kind, slot, info, out);
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
static __always_inline void zwindow_settle(__u64 strm, __u32 kind, struct alloc_info *info);

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
	struct alloc_slot *slot;
	struct alloc_info *info = alloc_find(addr, kind, &slot);
	__u64 w = info ? info->owner : 0;
	if (w & WINDOW_PENDING) {
		/* Its state's address must be known: strm->state is the new
		 * stream's already. A window not counted now never is: the
		 * orphan keeps no word. */
		if (w & ~(__u64)WINDOW_FLAGS)
			zwindow_settle(addr, kind, info);
		else
			stat_add(STAT_WINDOWS_UNREAD, 1);
		__sync_val_compare_and_swap(&info->owner, w, 0);
	}
	orphan_resource(addr, kind);
}

/* slot_fill writes a new block's record into slot s, claimed busy, and
 * makes it visible. */
static __always_inline void slot_fill(struct alloc_slot *s, __u64 addr, struct alloc_info *info)
{
	s->info = *info;
	s->gen = image_pad();
	__sync_val_compare_and_swap(&s->addr, addr | SLOT_FILLING, addr);
	filter_note(addr, info->kind, 1);
}

/* alloc_evict makes room in full bucket b for handle addr: its oldest
 * heap block moves to allocs, and addr takes the slot (filling: slot_fill
 * writes it). The block is claimed busy while it moves, so that its
 * record holds still; a release meanwhile takes the slot (alloc_remove),
 * and its copy in allocs goes again. A resource is never moved: owned
 * blocks add their bytes to its record where they found it (owner_add).
 * NULL if nothing moved. */
static __always_inline struct alloc_slot *alloc_evict(struct alloc_bucket *b, __u64 addr)
{
	__u32 v = ALLOC_WAYS;
	__u64 oldest = ~0ULL;
#pragma unroll
	for (int i = 0; i < ALLOC_WAYS; i++) {
		if (b->slot[i].info.kind == KIND_MALLOC && b->slot[i].info.ts_ns < oldest) {
			oldest = b->slot[i].info.ts_ns;
			v = i;
		}
	}
	if (v >= ALLOC_WAYS)
		return NULL;
	struct alloc_slot *s = &b->slot[v & (ALLOC_WAYS - 1)];
	__u64 x = s->addr;
	if (!x || (x & (SLOT_BUSY | SLOT_FILLING)) || s->info.kind != KIND_MALLOC ||
	    __sync_val_compare_and_swap(&s->addr, x, x | SLOT_BUSY) != x)
		return NULL;
	struct handle_key xk = { .addr = x, .kind = KIND_MALLOC, .pad = s->gen };
	struct alloc_info moved = s->info;
	/* Claimed: the record holds still. It is a heap block's unless the
	 * block was released and a resource of the same address took the
	 * slot between the look and the claim. */
	if (moved.kind != KIND_MALLOC || bpf_map_update_elem(&allocs, &xk, &moved, BPF_NOEXIST)) {
		__sync_val_compare_and_swap(&s->addr, x | SLOT_BUSY, x);
		return NULL;
	}
	spill_note(x, KIND_MALLOC, 1);
	/* Released meanwhile, the slot is empty or another's (filling, even
	 * with the same address): the swap fails. */
	if (__sync_val_compare_and_swap(&s->addr, x | SLOT_BUSY, addr | SLOT_FILLING) == (x | SLOT_BUSY)) {
		stat_add(STAT_ALLOCS_MOVED, 1);
		return s;
	}
	/* Released meanwhile: the copy goes too. */
	if (!bpf_map_delete_elem(&allocs, &xk))
		spill_note(x, KIND_MALLOC, -1);
	return NULL;
}

/* insert_alloc adds a new live handle, retiring the record a handle
 * still live has (retire_live). A bucketable handle takes a free slot of
 * its bucket in alloc_buckets, or the slot of the bucket's oldest heap
 * block, which moves to allocs (alloc_evict), so that the slots hold the
 * recent blocks, most of which are soon freed; in a bucket of resources
 * only, it goes to allocs. Anything else goes to allocs, inserted first:
 * that saves the lookups on every other acquisition.
 * A function of its own, verified once for each program rather than at
 * each of its callers. Returns 0 if the tables are full. */
__attribute__((noinline)) int insert_alloc(__u64 addr, __u32 kind, struct alloc_info *info)
{
	if (!info)
		return 0;
	/* The record allocs is given is a copy on this function's stack: the
	 * verifier types a global function's pointer argument as memory
	 * (PTR_TO_MEM), which Linux 6.1's bpf_map_update_elem refuses as a
	 * value ("R3 type=mem expected=fp, pkt, pkt_meta, map_key,
	 * map_value"); 6.18's takes it. */
	struct alloc_info rec = *info;
	struct handle_key hk = { .addr = addr, .kind = kind, .pad = image_pad() };
	long err;
	struct alloc_bucket *b = bucketable(addr, kind) ? bucket_of(addr) : NULL;
	if (b) {
		struct alloc_slot *old;
		if (alloc_find(addr, kind, &old))
			retire_live(addr, kind);
#pragma unroll
		for (int i = 0; i < ALLOC_WAYS; i++) {
			struct alloc_slot *s = &b->slot[i];
			if (s->addr || __sync_val_compare_and_swap(&s->addr, 0, addr | SLOT_FILLING) != 0)
				continue;
			slot_fill(s, addr, info);
			return 1;
		}
		struct alloc_slot *s = alloc_evict(b, addr);
		if (s) {
			slot_fill(s, addr, info);
			return 1;
		}
		err = bpf_map_update_elem(&allocs, &hk, &rec, BPF_NOEXIST);
	} else {
		err = bpf_map_update_elem(&allocs, &hk, &rec, BPF_NOEXIST);
		if (err == -17 /* EEXIST */) {
			retire_live(addr, kind);
			err = bpf_map_update_elem(&allocs, &hk, &rec, BPF_NOEXIST);
		}
	}
	if (err) {
		stat_add(STAT_ALLOCS_DROPPED, 1);
		return 0;
	}
	spill_note(addr, kind, 1);
	filter_note(addr, kind, 1);
	return 1;
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

/* zwindow_settle counts the window of live inflate stream strm (info, its
 * record, with a window word) into the stream if zlib allocated it, read
 * from the target's memory: state->window, 1 << state->wbits bytes. The
 * state must point back at strm (inflateStateCheck), or it is not the
 * stream's. A window that is a traced block already (sampling traced the
 * malloc of the application's own zalloc) is counted as that block, not
 * twice. Whoever clears the word counts the window: once. */
static __always_inline void zwindow_settle(__u64 strm, __u32 kind, struct alloc_info *info)
{
	__u64 w = info->owner;
	if (!(w & WINDOW_PENDING))
		return;
	__u64 state = w & ~(__u64)WINDOW_FLAGS, back = 0, window = 0;
	__u32 wbits = 0;
	if (!state && bpf_probe_read_user(&state, sizeof(state), (void *)(strm + ZSTREAM_STATE_OFF)))
		state = 0;
	if (!state || bpf_probe_read_user(&back, sizeof(back), (void *)state) || back != strm ||
	    bpf_probe_read_user(&window, sizeof(window), (void *)(state + INFLATE_STATE_WINDOW_OFF)) ||
	    bpf_probe_read_user(&wbits, sizeof(wbits), (void *)(state + INFLATE_STATE_WBITS_OFF))) {
		stat_add(STAT_WINDOWS_UNREAD, 1);
		return;
	}
	if (!window)
		return; /* not allocated (yet) */
	__u32 bytes = wbits >= 8 && wbits <= 15 ? 1U << wbits : info->owner_kind;
	struct alloc_slot *slot;
	bool traced = alloc_find(window, KIND_MALLOC, &slot) != NULL;
	if (__sync_val_compare_and_swap(&info->owner, w, 0) == w && !traced)
		owner_add(strm, kind, bytes);
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

/* track_alloc_window records a new live handle under its site; false if
 * the tables were full. site_kind is the handle's kind, with
 * SITE_KIND_EXACT set for a block the exact budget traced: its site is of
 * that kind, the handle of the plain one. A resource's window word and
 * bytes (window_word) go in its record, or 0. */
static __always_inline bool track_alloc_window(__u64 addr, __u64 size, __u32 site_kind, __u64 stack_id,
					       __u64 ts, __u64 window, __u16 window_bytes)
{
	__u32 kind = site_kind & ~SITE_KIND_EXACT;
	__u32 slot;
	struct site_slot *s = site_for(stack_id, site_kind, &slot);
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
		.owner = window,
		.owner_kind = window_bytes,
	};
	if (!insert_alloc(addr, kind, &info))
		return false;
	if (window && !windows_looked_for)
		windows_looked_for = 1;
	struct site_stats *c = site_stats_of(slot);
	if (c) {
		__sync_fetch_and_add(&c->live_bytes, size);
		__sync_fetch_and_add(&c->allocs, 1);
	}
	stat_add(STAT_ALLOCS, 1);
	return true;
}

/* track_alloc is track_alloc_window for a handle with no window word. */
static __always_inline bool track_alloc(__u64 addr, __u64 size, __u32 site_kind, __u64 stack_id,
					__u64 ts)
{
	return track_alloc_window(addr, size, site_kind, stack_id, ts, 0, 0);
}

#endif /* TABLE_BPF_H */
