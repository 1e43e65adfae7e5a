/*
 * clean.c - leakscope example target: the clean control.
 *
 * Exercises every allocator entry point leakscope probes -- malloc, calloc,
 * realloc (from NULL, grow, shrink, moving, across the mmap threshold),
 * reallocarray, posix_memalign, aligned_alloc, memalign, valloc, pvalloc,
 * strdup/strndup (malloc inside libc) and free -- and frees everything
 * before the summary line is printed.
 *
 * Ground truth: ZERO outstanding allocations (0 blocks, 0 bytes), in every
 * round, at every --hold point. Any leak reported for this process is a
 * false positive of the tool.
 *
 * Edge cases (disable with --no-edge-cases), all leaving nothing behind:
 *   - malloc(0) returns a unique non-NULL pointer in glibc; it is freed;
 *   - free(NULL);
 *   - malloc(2^62) and calloc(2^62, 4) fail and return NULL;
 *   - posix_memalign(&p, 24, 64) fails with EINVAL (24 is not a power of
 *     two) and must not be recorded (*memptr is not written);
 *   - reallocarray(p, 2^62, 16) overflows, returns NULL with ENOMEM and
 *     leaves p allocated (p is freed afterwards);
 *   - realloc(p, same size).
 * pvalloc is skipped with --no-pvalloc (valgrind aborts on pvalloc).
 * realloc(p, 0) is deliberately NOT used (glibc frees p and returns NULL,
 * other libcs return a new block; C23 makes it undefined).
 *
 * Build:
 *   gcc -O2 -g -Wall -Wextra -fno-omit-frame-pointer -pthread -o clean clean.c
 *   gcc -O2 -g -o clean-nofp clean.c
 */
#define _GNU_SOURCE
#include "common.h"

#include <malloc.h>

#define PROG "clean"

#define DEFAULT_MESSAGES 100000L
#define DEFAULT_BATCHES 2000L

#define MSG_MIN 16
#define MSG_MAX 4096
#define IN_FLIGHT 32

static void *g_ring[IN_FLIGHT];
static size_t g_ring_len[IN_FLIGHT];

/* ---- malloc / free churn (same shape as leaky.c) ------------------------ */

EXAMPLE_NOINLINE void *process_message(size_t len, unsigned seq)
{
	char *msg = malloc(len);

	if (!msg)
		die(PROG, "malloc");
	COUNT_CALL(API_MALLOC);
	use_memory(msg, len, seq);
	return msg;
}

EXAMPLE_NOINLINE void release_message(unsigned slot)
{
	peek_memory(g_ring[slot], g_ring_len[slot]);
	free(g_ring[slot]);
	COUNT_CALL(API_FREE);
	g_ring[slot] = NULL;
	g_ring_len[slot] = 0;
}

EXAMPLE_NOINLINE void churn_messages(long count, uint64_t *rng)
{
	for (long i = 0; i < count; i++) {
		unsigned slot = (unsigned)(i % IN_FLIGHT);
		size_t len = rng_range(rng, MSG_MIN, MSG_MAX);

		if (g_ring[slot])
			release_message(slot);
		g_ring[slot] = process_message(len, (unsigned)i);
		g_ring_len[slot] = len;
	}
	for (unsigned slot = 0; slot < IN_FLIGHT; slot++)
		if (g_ring[slot])
			release_message(slot);
}

/* ---- realloc: NULL -> 16 B, doubling to 256 KiB (crosses the 128 KiB mmap
 * threshold), shrinking back to 64 B, then free ---------------------------- */

EXAMPLE_NOINLINE void grow_buffer(unsigned seq)
{
	char *buf = NULL;
	size_t cap;

	for (cap = 16; cap <= 256 * 1024; cap *= 2) {
		char *nb = realloc(buf, cap);
		if (!nb)
			die(PROG, "realloc");
		COUNT_CALL(API_REALLOC);
		buf = nb;
		buf[cap - 1] = (char)seq; /* touch the new tail */
		peek_memory(buf, cap);
	}
	for (cap = 64 * 1024; cap >= 64; cap /= 4) {
		char *nb = realloc(buf, cap);
		if (!nb)
			die(PROG, "realloc");
		COUNT_CALL(API_REALLOC);
		buf = nb;
		peek_memory(buf, cap);
	}
	free(buf);
	COUNT_CALL(API_FREE);
}

/* ---- calloc ------------------------------------------------------------- */

EXAMPLE_NOINLINE void zeroed_tables(uint64_t *rng)
{
	void *t[8];

	for (int i = 0; i < 8; i++) {
		size_t n = rng_range(rng, 1, 64), sz = rng_range(rng, 1, 64);
		t[i] = calloc(n, sz);
		if (!t[i])
			die(PROG, "calloc");
		COUNT_CALL(API_CALLOC);
		peek_memory(t[i], n * sz);
	}
	for (int i = 0; i < 8; i++) {
		free(t[i]);
		COUNT_CALL(API_FREE);
	}
}

/* ---- aligned allocators ------------------------------------------------- */

static int g_use_pvalloc = 1;

EXAMPLE_NOINLINE void aligned_blocks(uint64_t *rng)
{
	void *p[6];
	size_t align = (size_t)16 << rng_range(rng, 0, 8); /* 16 .. 4096 */
	size_t n = rng_range(rng, 1, 2048);

	if (posix_memalign(&p[0], align, n) != 0)
		die(PROG, "posix_memalign");
	COUNT_CALL(API_POSIX_MEMALIGN);
	use_memory(p[0], n, 1);

	/* C11 aligned_alloc: size is a multiple of the alignment. */
	p[1] = aligned_alloc(64, 64 * rng_range(rng, 1, 32));
	if (!p[1])
		die(PROG, "aligned_alloc");
	COUNT_CALL(API_ALIGNED_ALLOC);
	use_memory(p[1], 64, 2);

	p[2] = memalign(256, n);
	if (!p[2])
		die(PROG, "memalign");
	COUNT_CALL(API_MEMALIGN);
	use_memory(p[2], n, 3);

	p[3] = valloc(n);
	if (!p[3])
		die(PROG, "valloc");
	COUNT_CALL(API_VALLOC);
	use_memory(p[3], n, 4);

	if (g_use_pvalloc) {
		p[4] = pvalloc(n); /* rounds the size up to a whole page */
		if (!p[4])
			die(PROG, "pvalloc");
		COUNT_CALL(API_PVALLOC);
		use_memory(p[4], n, 5);
	} else {
		p[4] = NULL; /* free(NULL) below: a no-op, not counted */
	}

	/* realloc of an aligned block is legal (alignment is not kept). */
	p[5] = realloc(p[0], n + 512);
	if (!p[5])
		die(PROG, "realloc");
	COUNT_CALL(API_REALLOC);
	peek_memory(p[5], n);

	for (int i = 1; i < 6; i++) {
		if (p[i])
			COUNT_CALL(API_FREE);
		free(p[i]);
	}
}

/* ---- reallocarray ------------------------------------------------------- */

struct record {
	uint64_t key;
	uint32_t flags;
	char name[20];
};

EXAMPLE_NOINLINE void resize_arrays(uint64_t *rng)
{
	struct record *a = NULL;
	size_t n = 0;

	for (int step = 0; step < 6; step++) {
		size_t want = rng_range(rng, 1, 512);
		struct record *na = reallocarray(a, want, sizeof(*a));
		if (!na)
			die(PROG, "reallocarray");
		COUNT_CALL(API_REALLOCARRAY);
		a = na;
		n = want;
		use_memory(a, n * sizeof(*a), (unsigned)step);
	}
	free(a);
	COUNT_CALL(API_FREE);
}

/* ---- strdup / strndup ---------------------------------------------------- */

static const char *const words[] = {
	"alpha", "bravo", "charlie-delta-echo", "foxtrot", "golf hotel india",
	"juliett kilo lima mike november oscar papa quebec romeo sierra",
};

EXAMPLE_NOINLINE void duplicate_strings(uint64_t *rng)
{
	const char *w = words[rng_range(rng, 0, sizeof(words) / sizeof(words[0]) - 1)];
	char *a = strdup(w);
	char *b;

	if (!a)
		die(PROG, "strdup");
	COUNT_CALL(API_STRDUP);
	b = strndup(w, 4);
	if (!b)
		die(PROG, "strndup");
	COUNT_CALL(API_STRNDUP);
	peek_memory(a, strlen(a) + 1);
	peek_memory(b, strlen(b) + 1);
	free(a);
	COUNT_CALL(API_FREE);
	free(b);
	COUNT_CALL(API_FREE);
}

/* ---- edge cases ------------------------------------------------------------ */

/* Runtime values, so that GCC cannot warn about (or fold) the huge sizes. */
static volatile size_t g_huge = (size_t)1 << 62;
static volatile size_t g_bad_align = 24;
static void *volatile g_null_ptr; /* NULL, but GCC cannot drop free(NULL) */

EXAMPLE_NOINLINE void edge_cases(void)
{
	void *p, *q;
	int rc;

	p = malloc(0); /* glibc: unique minimum-size chunk */
	if (!p)
		die(PROG, "malloc(0)");
	COUNT_CALL(API_MALLOC);
	g_sink_ptr = p;
	free(p);
	COUNT_CALL(API_FREE);

	free(g_null_ptr); /* free(NULL): a no-op, not counted */

	p = malloc(g_huge); /* fails */
	if (p)
		die(PROG, "expected malloc(2^62) failure");
	p = calloc(g_huge, 4); /* overflows, fails */
	if (p)
		die(PROG, "expected calloc overflow failure");

	p = (void *)(uintptr_t)0xdeadbeef; /* must stay untouched */
	rc = posix_memalign(&p, g_bad_align, 64);
	if (rc != EINVAL || p != (void *)(uintptr_t)0xdeadbeef)
		die(PROG, "expected posix_memalign EINVAL");

	p = malloc(128);
	if (!p)
		die(PROG, "malloc");
	COUNT_CALL(API_MALLOC);
	use_memory(p, 128, 7);
	q = reallocarray(p, g_huge, 16); /* overflows: NULL, p untouched */
	if (q)
		die(PROG, "expected reallocarray overflow failure");
	q = realloc(p, 128); /* same size */
	if (!q)
		die(PROG, "realloc");
	COUNT_CALL(API_REALLOC);
	peek_memory(q, 128);
	free(q);
	COUNT_CALL(API_FREE);
}

/* ---- driver --------------------------------------------------------------- */

static const char usage_text[] =
	"Clean control: exercises every allocator entry point, frees it all.\n"
	"  --messages N       malloc/free churn messages per round "
	"(default 100000)\n"
	"  --batches N        batches of calloc/realloc/aligned/reallocarray/\n"
	"                     strdup work per round (default 2000)\n"
	"  --no-edge-cases    skip malloc(0)/free(NULL)/failing-call checks\n"
	"  --no-pvalloc       skip pvalloc (valgrind aborts on pvalloc)\n";

int main(int argc, char **argv)
{
	struct common_opts o = { .interval_ms = 1000 };
	long messages = DEFAULT_MESSAGES, batches = DEFAULT_BATCHES, rounds = 0;
	int edges = 1;
	uint64_t rng = 0x243f6a8885a308d3ULL;
	struct line l = { .len = 0 };

	for (int i = 1; i < argc; i++) {
		int r = parse_common_opt(&o, argc, argv, &i);
		const char *v = (i + 1 < argc) ? argv[i + 1] : NULL;

		if (r < 0)
			usage_exit(PROG, usage_text, 2);
		if (r > 0)
			continue;
		if (strcmp(argv[i], "--messages") == 0 && !parse_long(v, 0, &messages))
			i++;
		else if (strcmp(argv[i], "--batches") == 0 && !parse_long(v, 0, &batches))
			i++;
		else if (strcmp(argv[i], "--no-edge-cases") == 0)
			edges = 0;
		else if (strcmp(argv[i], "--no-pvalloc") == 0)
			g_use_pvalloc = 0;
		else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			usage_exit(PROG, usage_text, 0);
		else
			usage_exit(PROG, usage_text, 2);
	}
	if (o.forever)
		install_stop_handlers();

	wait_before_work(&o);

	for (;;) {
		churn_messages(messages / 2, &rng);
		for (long b = 0; b < batches; b++) {
			if (b % 10 == 0)
				grow_buffer((unsigned)b);
			zeroed_tables(&rng);
			aligned_blocks(&rng);
			resize_arrays(&rng);
			duplicate_strings(&rng);
		}
		if (edges)
			edge_cases();
		churn_messages(messages - messages / 2, &rng);
		rounds++;
		if (!o.forever || g_stop)
			break;
		sleep_ms(o.interval_ms);
		if (g_stop)
			break;
	}
	clear_sink();
	merge_thread_calls();

	line_add(&l, "%s: leaked 0 blocks, 0 bytes; total 0 blocks, 0 bytes", PROG);
	line_add(&l, "; rounds %ld; pid %ld", rounds, (long)getpid());
	line_add_calls(&l);
	line_emit(&l);

	sleep_ms(o.hold_ms);
	return 0;
}
