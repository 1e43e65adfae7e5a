/*
 * churn.c - leakscope example target: multi-threaded allocator churn with
 * two exactly-known per-thread leaks.
 *
 * T worker threads (--threads, default 4) are created with pthread_create,
 * wait on a barrier (released after --pause-before / --wait-file), then
 * each runs M iterations (--iterations, default 50000) of random churn over
 * a 64-slot table: malloc, calloc, realloc(NULL, n), realloc grow / shrink
 * (in place or moving, also across the 128 KiB mmap threshold),
 * reallocarray, posix_memalign, aligned_alloc, memalign, valloc, free.
 * Every churn block is freed by the end of the round.
 *
 * Ground truth with default arguments (T = 4, one round):
 *
 *   rank  site function       API                          blocks   bytes
 *   1     leak_in_worker      posix_memalign(&p, 64, 320)  25*T=100  8000*T=32000
 *   2     leak_grown_buffer   realloc(p, 5000)             T=4       5000*T=20000
 *
 *   total 26*T blocks, 13000*T bytes (104 blocks, 52000 bytes for T = 4).
 *
 * leak_in_worker leaks ONE 320-byte block per call and is called exactly
 * LEAKS_PER_THREAD = 25 times per thread per round, spread evenly over the
 * churn. leak_grown_buffer is called once per thread per round (halfway):
 * p = malloc(100); p = realloc(p, 1000); p = realloc(p, 5000); never freed.
 * Only the final 5000-byte block is outstanding; the malloc(100) and
 * realloc(.., 1000) blocks are released by the following reallocs (whether
 * glibc grows in place or moves). Call chains:
 *   start_thread (libc) -> worker_main -> run_round -> leak_in_worker
 *                                                    -> posix_memalign
 *   start_thread (libc) -> worker_main -> run_round -> leak_grown_buffer
 *                                                    -> malloc / realloc
 *
 * With --forever, each thread repeats rounds (sleeping --interval ms in
 * between) until SIGINT/SIGTERM; the leaks scale with the total number of
 * completed thread-rounds R: 25*R / 8000*R and R / 5000*R.
 * --duration MS ends --forever without a signal: no thread starts a round
 * once MS ms have passed since the work began (each finishes the round it
 * is in), so the work ends at a round boundary and a tracer can keep
 * watching until the summary line (bench/soak.sh relies on this).
 *
 * libc-internal allocations (NOT ours): pthread_create allocates the new
 * thread's DTV with calloc inside ld.so (_dl_allocate_tls), and glibc keeps
 * it after pthread_join (the stack is cached for reuse). The threads are
 * created BEFORE --pause-before / --wait-file, so a tracer that attaches
 * during the pause does not see them. A tracer that sees the whole run
 * will find T such blocks from pthread_create (see examples/README.md).
 *
 * Build:
 *   gcc -O2 -g -Wall -Wextra -fno-omit-frame-pointer -pthread -o churn churn.c
 *   gcc -O2 -g -pthread -o churn-nofp churn.c
 */
#define _GNU_SOURCE
#include "common.h"

#include <malloc.h>
#include <pthread.h>

#define PROG "churn"

#define DEFAULT_THREADS 4L
#define MAX_THREADS 256L
#define DEFAULT_ITERATIONS 50000L

#define LEAKS_PER_THREAD 25
#define LEAK_ALIGN 64
#define LEAK_SIZE 320
#define GROWN_SIZE_1 100
#define GROWN_SIZE_2 1000
#define GROWN_SIZE_3 5000

#define SLOTS 64
#define SMALL_MAX 2048
#define LARGE_MIN (64 * 1024)
#define LARGE_MAX (256 * 1024)

struct slot {
	void *p;
	size_t n;
};

struct worker {
	pthread_t tid;
	unsigned idx;
	uint64_t rng;
	long iterations;
	long rounds;
	unsigned long leak_blocks, leak_bytes;
	unsigned long grown_blocks, grown_bytes;
	struct slot slots[SLOTS];
};

static pthread_barrier_t g_start;
static struct common_opts g_opts = { .interval_ms = 1000 };
/* --duration: CLOCK_MONOTONIC ns after which no round starts (0: none).
 * Written before the start barrier, read by the workers after it. */
static int64_t g_deadline_ns;

static int64_t monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int past_deadline(void)
{
	return g_deadline_ns != 0 && monotonic_ns() >= g_deadline_ns;
}

/* ---- the leaks ------------------------------------------------------------ */

/* BUG (intentional): one 64-byte-aligned 320-byte block per call, never
 * freed. */
EXAMPLE_NOINLINE void leak_in_worker(struct worker *w)
{
	void *p = NULL;

	if (posix_memalign(&p, LEAK_ALIGN, LEAK_SIZE) != 0)
		die(PROG, "posix_memalign");
	COUNT_CALL(API_POSIX_MEMALIGN);
	use_memory(p, LEAK_SIZE, w->idx);
	w->leak_blocks++;
	w->leak_bytes += LEAK_SIZE;
}

/* BUG (intentional): a buffer grown twice with realloc and then forgotten;
 * the outstanding block is the one returned by realloc(p, 5000). */
EXAMPLE_NOINLINE void leak_grown_buffer(struct worker *w)
{
	char *p = malloc(GROWN_SIZE_1), *np;

	if (!p)
		die(PROG, "malloc");
	COUNT_CALL(API_MALLOC);
	use_memory(p, GROWN_SIZE_1, w->idx);

	np = realloc(p, GROWN_SIZE_2);
	if (!np)
		die(PROG, "realloc");
	COUNT_CALL(API_REALLOC);
	use_memory(np, GROWN_SIZE_2, w->idx);

	p = realloc(np, GROWN_SIZE_3);
	if (!p)
		die(PROG, "realloc");
	COUNT_CALL(API_REALLOC);
	use_memory(p, GROWN_SIZE_3, w->idx);

	w->grown_blocks++;
	w->grown_bytes += GROWN_SIZE_3;
}

/* ---- churn ---------------------------------------------------------------- */

static size_t pick_size(struct worker *w)
{
	if (rng_next(&w->rng) % 512 == 0)
		return rng_range(&w->rng, LARGE_MIN, LARGE_MAX); /* mmap'd chunk */
	return rng_range(&w->rng, 1, SMALL_MAX);
}

/* Fills an empty slot using one of 8 allocation APIs. */
EXAMPLE_NOINLINE void churn_alloc(struct worker *w, struct slot *s)
{
	size_t n = pick_size(w);
	size_t align = (size_t)8 << rng_range(&w->rng, 0, 9); /* 8 .. 4096 */
	void *p = NULL;

	switch (rng_next(&w->rng) % 8) {
	case 0:
		p = malloc(n);
		COUNT_CALL(API_MALLOC);
		break;
	case 1: {
		size_t nmemb = rng_range(&w->rng, 1, 16);
		n = nmemb * rng_range(&w->rng, 1, SMALL_MAX / 16);
		p = calloc(nmemb, n / nmemb);
		COUNT_CALL(API_CALLOC);
		break;
	}
	case 2:
		p = realloc(NULL, n); /* behaves like malloc(n) */
		COUNT_CALL(API_REALLOC);
		break;
	case 3:
		n = 8 * rng_range(&w->rng, 1, SMALL_MAX / 8);
		p = reallocarray(NULL, n / 8, 8);
		COUNT_CALL(API_REALLOCARRAY);
		break;
	case 4:
		if (posix_memalign(&p, align, n) != 0)
			p = NULL;
		COUNT_CALL(API_POSIX_MEMALIGN);
		break;
	case 5:
		n = align * rng_range(&w->rng, 1, 4); /* multiple of alignment */
		p = aligned_alloc(align, n);
		COUNT_CALL(API_ALIGNED_ALLOC);
		break;
	case 6:
		p = memalign(align, n);
		COUNT_CALL(API_MEMALIGN);
		break;
	default:
		p = valloc(n);
		COUNT_CALL(API_VALLOC);
		break;
	}
	if (!p)
		die(PROG, "churn allocation");
	use_memory(p, n, (unsigned)n);
	s->p = p;
	s->n = n;
}

/* Grows or shrinks a live block with realloc or reallocarray. */
EXAMPLE_NOINLINE void churn_resize(struct worker *w, struct slot *s)
{
	size_t n = pick_size(w);
	void *p;

	if (rng_next(&w->rng) % 4 == 0) {
		n = (n + 15) / 16 * 16;
		p = reallocarray(s->p, n / 16, 16);
		COUNT_CALL(API_REALLOCARRAY);
	} else {
		p = realloc(s->p, n);
		COUNT_CALL(API_REALLOC);
	}
	if (!p)
		die(PROG, "churn resize");
	peek_memory(p, n < s->n ? n : s->n);
	if (n > s->n)
		use_memory((char *)p + s->n, n - s->n, (unsigned)n);
	s->p = p;
	s->n = n;
}

EXAMPLE_NOINLINE void churn_free(struct slot *s)
{
	peek_memory(s->p, s->n);
	free(s->p);
	COUNT_CALL(API_FREE);
	s->p = NULL;
	s->n = 0;
}

/* One round: churn + exactly LEAKS_PER_THREAD leak_in_worker calls + one
 * leak_grown_buffer call; every churn block is freed at the end. */
EXAMPLE_NOINLINE void run_round(struct worker *w)
{
	const long iters = w->iterations;
	long leaks = 0;
	int grown = 0;

	for (long i = 0; i < iters; i++) {
		struct slot *s = &w->slots[rng_next(&w->rng) % SLOTS];
		unsigned action = (unsigned)(rng_next(&w->rng) % 8);

		while (leaks < LEAKS_PER_THREAD &&
		       i >= (leaks + 1) * iters / (LEAKS_PER_THREAD + 1)) {
			leak_in_worker(w);
			leaks++;
		}
		if (!grown && i >= iters / 2) {
			leak_grown_buffer(w);
			grown = 1;
		}

		if (!s->p) {
			churn_alloc(w, s);
		} else if (action < 3) {
			churn_free(s);
		} else if (action < 6) {
			churn_resize(w, s);
		} else {
			churn_free(s);
			churn_alloc(w, s);
		}
	}
	while (leaks < LEAKS_PER_THREAD) {
		leak_in_worker(w);
		leaks++;
	}
	if (!grown)
		leak_grown_buffer(w);
	for (int i = 0; i < SLOTS; i++)
		if (w->slots[i].p)
			churn_free(&w->slots[i]);
	w->rounds++;
}

EXAMPLE_NOINLINE void *worker_main(void *arg)
{
	struct worker *w = arg;

	pthread_barrier_wait(&g_start);
	for (;;) {
		run_round(w);
		if (!g_opts.forever || g_stop || past_deadline())
			break;
		sleep_ms(g_opts.interval_ms);
		if (g_stop || past_deadline())
			break;
	}
	clear_sink();
	merge_thread_calls();
	return NULL;
}

/* ---- driver ------------------------------------------------------------- */

static const char usage_text[] =
	"Multi-threaded churn; per thread and round leaks 25 x 320 B\n"
	"(leak_in_worker) and 1 x 5000 B (leak_grown_buffer).\n"
	"  --threads N        worker threads (default 4, max 256)\n"
	"  --iterations M     churn iterations per thread and round "
	"(default 50000)\n"
	"  --duration MS      with --forever: start no round after MS ms of work\n";

static struct worker g_workers[MAX_THREADS];

int main(int argc, char **argv)
{
	long threads = DEFAULT_THREADS, iterations = DEFAULT_ITERATIONS;
	unsigned long leak_blocks = 0, leak_bytes = 0;
	unsigned long grown_blocks = 0, grown_bytes = 0;
	long thread_rounds = 0, duration_ms = 0;
	struct line l = { .len = 0 };
	int rc;

	for (int i = 1; i < argc; i++) {
		int r = parse_common_opt(&g_opts, argc, argv, &i);
		const char *v = (i + 1 < argc) ? argv[i + 1] : NULL;

		if (r < 0)
			usage_exit(PROG, usage_text, 2);
		if (r > 0)
			continue;
		if (strcmp(argv[i], "--threads") == 0 && !parse_long(v, 1, &threads) &&
		    threads <= MAX_THREADS)
			i++;
		else if (strcmp(argv[i], "--iterations") == 0 &&
			 !parse_long(v, 0, &iterations))
			i++;
		else if (strcmp(argv[i], "--duration") == 0 &&
			 !parse_long(v, 1, &duration_ms))
			i++;
		else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			usage_exit(PROG, usage_text, 0);
		else
			usage_exit(PROG, usage_text, 2);
	}
	if (g_opts.forever)
		install_stop_handlers();

	/* Threads (and glibc's per-thread bookkeeping) exist before the pause,
	 * but do no work until the barrier opens. */
	rc = pthread_barrier_init(&g_start, NULL, (unsigned)threads + 1);
	if (rc != 0)
		die(PROG, "pthread_barrier_init");
	for (long t = 0; t < threads; t++) {
		struct worker *w = &g_workers[t];

		w->idx = (unsigned)t;
		w->rng = 0x9e3779b97f4a7c15ULL ^ ((uint64_t)(t + 1) * 0xbf58476d1ce4e5b9ULL);
		w->iterations = iterations;
		rc = pthread_create(&w->tid, NULL, worker_main, w);
		if (rc != 0)
			die(PROG, "pthread_create");
	}

	wait_before_work(&g_opts);
	if (duration_ms > 0)
		g_deadline_ns = monotonic_ns() + (int64_t)duration_ms * 1000000;
	pthread_barrier_wait(&g_start);

	for (long t = 0; t < threads; t++) {
		struct worker *w = &g_workers[t];

		pthread_join(w->tid, NULL);
		leak_blocks += w->leak_blocks;
		leak_bytes += w->leak_bytes;
		grown_blocks += w->grown_blocks;
		grown_bytes += w->grown_bytes;
		thread_rounds += w->rounds;
	}
	pthread_barrier_destroy(&g_start);
	clear_sink();

	line_add(&l, "%s: leaked %lu blocks, %lu bytes in leak_in_worker",
		 PROG, leak_blocks, leak_bytes);
	line_add(&l, "; leaked %lu blocks, %lu bytes in leak_grown_buffer",
		 grown_blocks, grown_bytes);
	line_add(&l, "; total %lu blocks, %lu bytes", leak_blocks + grown_blocks,
		 leak_bytes + grown_bytes);
	line_add(&l, "; threads %ld; iterations %ld; thread-rounds %ld; pid %ld",
		 threads, iterations, thread_rounds, (long)getpid());
	line_add_calls(&l);
	line_emit(&l);

	sleep_ms(g_opts.hold_ms);
	return 0;
}
