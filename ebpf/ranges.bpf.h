/* The range table (exec_ranges): which executable mapping holds an
 * address, and asking user space to reread the mappings when none does.
 * BPF-only. */
#ifndef RANGES_BPF_H
#define RANGES_BPF_H

#include "state.bpf.h"

#define RANGE_MISS_INTERVAL_NS (20ULL * 1000 * 1000)

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
	/* A miss is a hint that a later one repeats: it never takes the
	 * room a stop's record needs (stop_told) while user space is busy. */
	if (bpf_ringbuf_query(&range_misses, BPF_RB_AVAIL_DATA) > RANGE_MISSES_BYTES / 2)
		return;
	*last = now;
	struct range_ctl *ctl = bpf_map_lookup_elem(&range_ctls, &zero);
	struct range_miss m = { .ip = ip, .generation = ctl ? ctl->generation : 0, .at_ns = bpf_ktime_get_ns() };
	bpf_ringbuf_output(&range_misses, &m, sizeof(m), 0);
}

#endif /* RANGES_BPF_H */
