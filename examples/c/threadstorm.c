/*
 * threadstorm.c - leakscope example target: thousands of short-lived
 * threads, some of which die in the middle of a traced call.
 *
 * --threads N threads (default 2000) are created in waves of
 * --concurrency C (default 32) and joined wave by wave. Thread i:
 *   - churns 16 malloc/free pairs of 16..512 bytes (thread_churn);
 *   - leaks exactly one malloc(64) block (leak_per_thread);
 *   - inflates a small zlib stream to its end and ends it
 *     (inflate_payload: inflateInit_, inflate, inflateEnd), so a tracer
 *     has per-thread state for an inflate() call in flight;
 *   - if --die-every K (default 10) divides i: calls inflateInit2_ with a
 *     zalloc that calls pthread_exit (die_in_inflate_init), so the thread
 *     ends INSIDE inflateInit2_: its return is never seen. Nothing is
 *     allocated and no stream is created.
 *
 * Ground truth with default arguments:
 *
 *   site function     kind           blocks/streams  bytes    state at exit
 *   leak_per_thread   malloc(64)     N = 2000        128000   leaked
 *   inflate_payload   zlib.inflate   N = 2000 inits  0        all ended
 *   thread_churn      malloc         16 N pairs      0        all freed
 *   main (payload)    zlib.deflate   1 stream        0        ended
 *
 * Threads that died inside inflateInit2_: ceil(N / K) = 200 (i = 0, 10, ...).
 * Per-thread state a tracer keeps between a call's entry and its return
 * must be gone once every thread has ended.
 *
 * libc-internal allocations (NOT ours): pthread_create allocates each new
 * thread's DTV with calloc inside ld.so and glibc keeps it while the
 * thread's stack is cached; the first pthread_exit dlopens libgcc_s
 * (link map, scope arrays). Their number depends on glibc's stack cache.
 *
 * Build (needs zlib1g-dev):
 *   gcc -O2 -g -Wall -Wextra -fno-omit-frame-pointer -pthread -o threadstorm threadstorm.c -lz
 */
#define _GNU_SOURCE
#include "common.h"

#include <pthread.h>
#include <zlib.h>

#define PROG "threadstorm"

#define LEAK_SIZE 64
#define CHURN_PAIRS 16
#define MAX_CONCURRENCY 256
#define PAYLOAD_LEN 2048
#define STACK_SIZE (256 * 1024)

static unsigned char g_payload[PAYLOAD_LEN];
static unsigned char g_compressed[PAYLOAD_LEN + 64];
static uLongf g_compressed_len;
static long g_die_every = 10;
static unsigned long g_leaked, g_inflated, g_died;

/* BUG (intentional): one 64-byte block per thread, never freed. */
EXAMPLE_NOINLINE void leak_per_thread(unsigned idx)
{
	void *p = malloc(LEAK_SIZE);

	if (!p)
		die(PROG, "malloc");
	COUNT_CALL(API_MALLOC);
	use_memory(p, LEAK_SIZE, idx);
	__atomic_fetch_add(&g_leaked, 1, __ATOMIC_RELAXED);
}

EXAMPLE_NOINLINE void thread_churn(unsigned idx)
{
	uint64_t rng = 0x9e3779b97f4a7c15ULL + idx;

	for (int i = 0; i < CHURN_PAIRS; i++) {
		size_t n = rng_range(&rng, 16, 512);
		void *p = malloc(n);

		if (!p)
			die(PROG, "malloc");
		COUNT_CALL(API_MALLOC);
		use_memory(p, n, idx);
		free(p);
		COUNT_CALL(API_FREE);
	}
}

/* Inflates the payload to its end and ends the stream. */
EXAMPLE_NOINLINE void inflate_payload(void)
{
	unsigned char out[PAYLOAD_LEN];
	z_stream zs;

	memset(&zs, 0, sizeof(zs));
	if (inflateInit(&zs) != Z_OK)
		die(PROG, "inflateInit");
	zs.next_in = g_compressed;
	zs.avail_in = (uInt)g_compressed_len;
	zs.next_out = out;
	zs.avail_out = sizeof(out);
	if (inflate(&zs, Z_FINISH) != Z_STREAM_END || zs.total_out != PAYLOAD_LEN ||
	    memcmp(out, g_payload, PAYLOAD_LEN) != 0)
		die(PROG, "inflate");
	inflateEnd(&zs);
	__atomic_fetch_add(&g_inflated, 1, __ATOMIC_RELAXED);
}

/* zalloc that ends the calling thread inside inflateInit2_. */
static voidpf exiting_zalloc(voidpf opaque, uInt items, uInt size)
{
	(void)opaque;
	(void)items;
	(void)size;
	__atomic_fetch_add(&g_died, 1, __ATOMIC_RELAXED);
	merge_thread_calls();
	pthread_exit(NULL);
}

static void never_zfree(voidpf opaque, voidpf p)
{
	(void)opaque;
	(void)p;
}

/* Never returns: the thread ends inside inflateInit2_. */
EXAMPLE_NOINLINE void die_in_inflate_init(void)
{
	static _Thread_local z_stream zs;

	memset(&zs, 0, sizeof(zs));
	zs.zalloc = exiting_zalloc;
	zs.zfree = never_zfree;
	inflateInit2(&zs, 15);
	die(PROG, "inflateInit2 returned");
}

static void *worker_main(void *arg)
{
	unsigned idx = (unsigned)(uintptr_t)arg;

	thread_churn(idx);
	leak_per_thread(idx);
	inflate_payload();
	if (g_die_every > 0 && idx % (unsigned)g_die_every == 0)
		die_in_inflate_init();
	merge_thread_calls();
	return NULL;
}

EXAMPLE_NOINLINE void make_payload(void)
{
	for (int i = 0; i < PAYLOAD_LEN; i++)
		g_payload[i] = (unsigned char)("leakscope threadstorm "[i % 22]);
	g_compressed_len = sizeof(g_compressed);
	if (compress(g_compressed, &g_compressed_len, g_payload, PAYLOAD_LEN) != Z_OK)
		die(PROG, "compress");
}

static const char usage_text[] =
	"Creates threads by the thousand; each leaks one 64-byte block, and\n"
	"every K-th ends inside inflateInit2_.\n"
	"  --threads N        threads in all (default 2000)\n"
	"  --concurrency C    threads alive at once (default 32, max 256)\n"
	"  --die-every K      thread i ends inside inflateInit2_ when K divides i\n"
	"                     (default 10; 0 = never)\n";

int main(int argc, char **argv)
{
	struct common_opts o = { .interval_ms = 1000 };
	long threads = 2000, conc = 32;
	pthread_t tids[MAX_CONCURRENCY];
	pthread_attr_t attr;
	struct line l = { .len = 0 };

	for (int i = 1; i < argc; i++) {
		int r = parse_common_opt(&o, argc, argv, &i);
		const char *v = (i + 1 < argc) ? argv[i + 1] : NULL;

		if (r < 0)
			usage_exit(PROG, usage_text, 2);
		if (r > 0)
			continue;
		if (strcmp(argv[i], "--threads") == 0 && !parse_long(v, 0, &threads))
			i++;
		else if (strcmp(argv[i], "--concurrency") == 0 && !parse_long(v, 1, &conc) &&
			 conc <= MAX_CONCURRENCY)
			i++;
		else if (strcmp(argv[i], "--die-every") == 0 && !parse_long(v, 0, &g_die_every))
			i++;
		else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			usage_exit(PROG, usage_text, 0);
		else
			usage_exit(PROG, usage_text, 2);
	}

	make_payload();
	wait_before_work(&o);

	if (pthread_attr_init(&attr) || pthread_attr_setstacksize(&attr, STACK_SIZE))
		die(PROG, "pthread_attr");
	for (long base = 0; base < threads; base += conc) {
		long n = threads - base < conc ? threads - base : conc;

		for (long k = 0; k < n; k++)
			if (pthread_create(&tids[k], &attr, worker_main,
					   (void *)(uintptr_t)(base + k)))
				die(PROG, "pthread_create");
		for (long k = 0; k < n; k++)
			if (pthread_join(tids[k], NULL))
				die(PROG, "pthread_join");
	}
	pthread_attr_destroy(&attr);
	clear_sink();
	merge_thread_calls();

	line_add(&l, "%s: leaked %lu blocks, %lu bytes in leak_per_thread", PROG,
		 g_leaked, g_leaked * LEAK_SIZE);
	line_add(&l, "; total %lu blocks, %lu bytes", g_leaked, g_leaked * LEAK_SIZE);
	line_add(&l, "; threads %ld; ended %lu inflate streams; died in inflateInit2_ %lu",
		 threads, g_inflated, g_died);
	line_add(&l, "; pid %ld", (long)getpid());
	line_add_calls(&l);
	line_emit(&l);

	sleep_ms(o.hold_ms);
	return 0;
}
