/*
 * poolleak.c - leakscope example target: a cache that fills once and then
 * holds steady, beside a smaller leak that grows until the end.
 *
 * Ranked by bytes alone, the cache comes first; it is not a leak. With
 * snapshots (leakscope --interval), the growth trend must rank the leak
 * first and say the cache is flat.
 *
 * Ground truth with default arguments (one run, about 4.3 s):
 *
 *   rank  site function    API            blocks  bytes    shape
 *   1     leak_slowly      malloc(16384)      80  1310720  1 block every 50 ms
 *                                                          from ~0.3 s to ~4.3 s
 *   2     cache_fill_slot  malloc(65536)      64  4194304  all in the first
 *                                                          ~0.3 s, then flat
 *
 *   total 144 blocks, 5505024 bytes.
 *
 * Timeline:
 *   1. fill_cache: 64 slots, one malloc(65536) every 4 ms (~0.26-0.3 s).
 *      The cache (g_cache) is kept, never grown and never freed: still
 *      reachable at exit.
 *   2. run_ticks: --leaks N ticks (default 80), 50 ms apart (~4 s). Each
 *      tick calls leak_slowly (one 16384-byte block, never freed) and
 *      churn_requests (32 blocks of 16..4096 bytes, all freed in the tick).
 *
 * Call chains (caller -> callee, the last one calls the allocator):
 *   main -> fill_cache -> cache_fill_slot -> malloc
 *   main -> run_ticks -> leak_slowly -> malloc
 *   main -> run_ticks -> churn_requests -> malloc / free (all freed)
 *
 * The leak is 16 KiB a block, not less, because a plateau keeps at least a
 * tenth of its score (docs/json-report.md, rank_score): a 4 MiB cache
 * outranks a steady leak holding less than about 420 KiB, whatever its
 * trend. 80 x 16 KiB = 1.25 MiB, a third of the cache, ranks first with a
 * margin of about 3x at --interval 200ms.
 *
 * With --forever, ticks go on (the leak grows by one block every 50 ms,
 * the cache stays at 64 blocks) until SIGINT/SIGTERM.
 *
 * Build:
 *   gcc -O2 -g -Wall -Wextra -fno-omit-frame-pointer -o poolleak poolleak.c
 */
#define _GNU_SOURCE
#include "common.h"

#define PROG "poolleak"

#define CACHE_SLOTS 64
#define CACHE_BLOCK (64 * 1024)
#define CACHE_FILL_MS 4

#define DEFAULT_LEAKS 80L
#define LEAK_BLOCK (16 * 1024)
#define TICK_MS 50

#define CHURN_PER_TICK 32
#define CHURN_MIN 16
#define CHURN_MAX 4096

static void *g_cache[CACHE_SLOTS];
static unsigned long g_cache_blocks, g_cache_bytes;
static unsigned long g_leak_blocks, g_leak_bytes;

/* ---- the cache: filled once, then kept ------------------------------------ */

/* Allocates one cache slot; the cache keeps it for the rest of the run. */
EXAMPLE_NOINLINE void cache_fill_slot(unsigned slot)
{
	void *p = malloc(CACHE_BLOCK);

	if (!p)
		die(PROG, "malloc");
	COUNT_CALL(API_MALLOC);
	use_memory(p, CACHE_BLOCK, slot);
	g_cache[slot] = p;
	g_cache_blocks++;
	g_cache_bytes += CACHE_BLOCK;
}

EXAMPLE_NOINLINE void fill_cache(void)
{
	for (unsigned slot = 0; slot < CACHE_SLOTS; slot++) {
		cache_fill_slot(slot);
		sleep_ms(CACHE_FILL_MS);
	}
	g_sink_sum += CACHE_SLOTS;
}

/* ---- the leak: one block per tick, never freed ---------------------------- */

/* BUG (intentional): the block is filled and then forgotten. */
EXAMPLE_NOINLINE void leak_slowly(unsigned tick)
{
	void *p = malloc(LEAK_BLOCK);

	if (!p)
		die(PROG, "malloc");
	COUNT_CALL(API_MALLOC);
	use_memory(p, LEAK_BLOCK, tick);
	g_leak_blocks++;
	g_leak_bytes += LEAK_BLOCK;
}

/* ---- churn: everything allocated in a tick is freed in it ----------------- */

EXAMPLE_NOINLINE void churn_requests(uint64_t *rng)
{
	void *blocks[CHURN_PER_TICK];
	size_t sizes[CHURN_PER_TICK];

	for (int i = 0; i < CHURN_PER_TICK; i++) {
		sizes[i] = rng_range(rng, CHURN_MIN, CHURN_MAX);
		blocks[i] = malloc(sizes[i]);
		if (!blocks[i])
			die(PROG, "malloc");
		COUNT_CALL(API_MALLOC);
		use_memory(blocks[i], sizes[i], (unsigned)i);
	}
	for (int i = 0; i < CHURN_PER_TICK; i++) {
		peek_memory(blocks[i], sizes[i]);
		free(blocks[i]);
		COUNT_CALL(API_FREE);
	}
}

EXAMPLE_NOINLINE long run_ticks(long leaks, int forever, uint64_t *rng)
{
	long tick;

	for (tick = 0; forever ? !g_stop : tick < leaks; tick++) {
		leak_slowly((unsigned)tick);
		churn_requests(rng);
		sleep_ms(TICK_MS);
	}
	g_sink_sum += (unsigned long)tick;
	return tick;
}

/* ---- driver ---------------------------------------------------------------- */

static const char usage_text[] =
	"Fills a cache of 64 x 64 KiB (cache_fill_slot) in ~0.3 s and keeps it,\n"
	"then leaks one 16 KiB block (leak_slowly) every 50 ms, with churn.\n"
	"  --leaks N          ticks, one leaked block each (default 80, ~4 s)\n";

int main(int argc, char **argv)
{
	struct common_opts o = { .interval_ms = 1000 };
	long leaks = DEFAULT_LEAKS, ticks;
	uint64_t rng = 0x9e3779b97f4a7c15ULL;
	struct line l = { .len = 0 };

	for (int i = 1; i < argc; i++) {
		int r = parse_common_opt(&o, argc, argv, &i);
		const char *v = (i + 1 < argc) ? argv[i + 1] : NULL;

		if (r < 0)
			usage_exit(PROG, usage_text, 2);
		if (r > 0)
			continue;
		if (strcmp(argv[i], "--leaks") == 0 && !parse_long(v, 0, &leaks))
			i++;
		else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			usage_exit(PROG, usage_text, 0);
		else
			usage_exit(PROG, usage_text, 2);
	}
	if (o.forever)
		install_stop_handlers();

	wait_before_work(&o);

	fill_cache();
	ticks = run_ticks(leaks, o.forever, &rng);
	clear_sink();
	merge_thread_calls();

	line_add(&l, "%s: leaked %lu blocks, %lu bytes in leak_slowly",
		 PROG, g_leak_blocks, g_leak_bytes);
	line_add(&l, "; leaked %lu blocks, %lu bytes in cache_fill_slot",
		 g_cache_blocks, g_cache_bytes);
	line_add(&l, "; total %lu blocks, %lu bytes",
		 g_leak_blocks + g_cache_blocks, g_leak_bytes + g_cache_bytes);
	line_add(&l, "; ticks %ld; pid %ld", ticks, (long)getpid());
	line_add_calls(&l);
	line_emit(&l);

	sleep_ms(o.hold_ms);
	return 0;
}
