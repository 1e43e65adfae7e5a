/*
 * alloc_storm.c - allocator storm for the performance harness (bench/run.sh).
 *
 * T threads (default 2) each make N (default 1,000,000) malloc/free pairs of
 * pseudo-random sizes in [16, 4096] bytes. Each thread keeps a ring of 32
 * live blocks: iteration i frees the block allocated 32 iterations earlier
 * and puts a new one in its slot, so the allocator does not just hand the
 * same chunk back every time. Every block is filled and published through an
 * opaque sink, so -O2 cannot delete a pair.
 *
 * With --align A (a power of two, at least sizeof(void *)), the storm
 * allocates with posix_memalign(A) instead of malloc: a function whose
 * first instruction the kernel single-steps under a uprobe (glibc 2.36:
 * cmpb $0,...(%rip)), for measuring probe sites (docs/performance.md).
 *
 * Ground truth, exact: the main thread leaks L (default 1000) blocks of S
 * (default 64) bytes, all from leak_storm_block(), before the threads start.
 * Everything the storm threads allocate is freed before exit.
 *
 * Summary line on stderr (no heap allocation: formatted on the stack):
 *   alloc_storm: threads 2 pairs 1000000 per thread; leaked 1000 blocks,
 *   64000 bytes in leak_storm_block; allocator calls 4001000; storm_ns N;
 *   cpu_user_us U cpu_sys_us S maxrss_kb R
 * storm_ns is CLOCK_MONOTONIC from before the leak to after the last join:
 * the workload's own time, without a tool's start-up or tear-down. The
 * rusage fields are the process's own (getrusage), taken at the end.
 *
 * Build: gcc -O2 -g -fno-omit-frame-pointer -pthread -o alloc_storm alloc_storm.c
 * (bench/run.sh adds -no-pie, so bpftrace's raw stacks can be symbolized
 * after the process exited).
 */
#include <pthread.h>
#include "storm.h"

#define RING 32
#define MIN_SIZE 16
#define MAX_SIZE 4096
#define MAX_THREADS 64

struct worker {
	pthread_t thread;
	long pairs;
	long align; /* 0: malloc; else posix_memalign with this alignment */
	uint64_t seed;
};

static volatile unsigned char g_touch;

/* touch fills p (as a program writes what it allocates) and publishes the
 * pointer: the block is used, so the compiler must keep the malloc/free
 * pair. */
static EXAMPLE_NOINLINE void touch(unsigned char *p, size_t n)
{
	memset(p, (int)(n & 0xff), n);
	g_touch = p[n - 1];
	g_sink_ptr = p;
}

static EXAMPLE_NOINLINE void *storm_worker(void *arg)
{
	struct worker *w = arg;
	unsigned char *ring[RING] = { 0 };

	for (long i = 0; i < w->pairs; i++) {
		size_t n = rng_range(&w->seed, MIN_SIZE, MAX_SIZE);
		unsigned char **slot = &ring[i % RING];
		free(*slot);
		if (w->align) {
			void *p;
			*slot = posix_memalign(&p, (size_t)w->align, n) ? NULL : p;
		} else {
			*slot = malloc(n);
		}
		if (!*slot)
			abort();
		touch(*slot, n);
	}
	for (int i = 0; i < RING; i++)
		free(ring[i]);
	return NULL;
}

/* leak_storm_block is the one leaking call site: each call's block is
 * dropped (the only pointer goes to the sink, then is cleared). */
static EXAMPLE_NOINLINE void leak_storm_block(size_t size)
{
	unsigned char *p = malloc(size);
	if (!p)
		abort();
	touch(p, size);
}

static const char usage[] =
	"  --threads T        storm threads (default 2, at most 64)\n"
	"  --pairs N          malloc/free pairs per thread (default 1000000)\n"
	"  --leak-blocks L    blocks leaked from leak_storm_block (default 1000)\n"
	"  --leak-size S      size of each leaked block, bytes (default 64)\n"
	"  --align A          storm with posix_memalign(A) instead of malloc (default 0: malloc)\n";

int main(int argc, char **argv)
{
	struct common_opts co = { .interval_ms = 1000 };
	long threads = 2, pairs = 1000000, leak_blocks = 1000, leak_size = 64, align = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		long *dst = NULL, min = 0;
		int r = parse_common_opt(&co, argc, argv, &i);
		if (r == 1)
			continue;
		if (r < 0)
			usage_exit(argv[0], usage, 2);
		if (strcmp(a, "--threads") == 0)
			dst = &threads, min = 1;
		else if (strcmp(a, "--pairs") == 0)
			dst = &pairs;
		else if (strcmp(a, "--leak-blocks") == 0)
			dst = &leak_blocks;
		else if (strcmp(a, "--leak-size") == 0)
			dst = &leak_size, min = 1;
		else if (strcmp(a, "--align") == 0)
			dst = &align;
		else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)
			usage_exit(argv[0], usage, 0);
		else
			usage_exit(argv[0], usage, 2);
		if (parse_long(v, min, dst))
			usage_exit(argv[0], usage, 2);
		i++;
	}
	if (threads > MAX_THREADS || (align && (align < (long)sizeof(void *) || (align & (align - 1)))))
		usage_exit(argv[0], usage, 2);

	wait_before_work(&co);

	struct worker workers[MAX_THREADS];
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long i = 0; i < leak_blocks; i++)
		leak_storm_block((size_t)leak_size);
	clear_sink();
	for (long t = 0; t < threads; t++) {
		workers[t].pairs = pairs;
		workers[t].align = align;
		workers[t].seed = 0x9e3779b97f4a7c15ULL * (uint64_t)(t + 1);
		if (pthread_create(&workers[t].thread, NULL, storm_worker, &workers[t]))
			abort();
	}
	for (long t = 0; t < threads; t++)
		pthread_join(workers[t].thread, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	clear_sink();

	sleep_ms(co.hold_ms);

	struct line l = { .len = 0 };
	line_add(&l, "alloc_storm: threads %ld pairs %ld per thread; leaked %ld blocks, %ld bytes in leak_storm_block; allocator calls %ld; storm_ns %ld",
		 threads, pairs, leak_blocks, leak_blocks * leak_size,
		 2 * threads * pairs + leak_blocks, elapsed_ns(&t0, &t1));
	line_add_rusage(&l);
	line_emit(&l);
	return 0;
}
