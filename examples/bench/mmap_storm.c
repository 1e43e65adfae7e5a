/*
 * mmap_storm.c - mapping storm for the performance harness (bench/maps.sh):
 * what leakscope's mapping tracepoints (--maps) cost a program that maps
 * and unmaps without pause.
 *
 * T threads (default 2) each make N (default 100,000) anonymous mappings
 * of 1 to 16 pages, touch their first page and unmap them; every 8th is
 * grown with mremap before its munmap, every 16th unmapped in two halves.
 *
 * Ground truth, exact: the main thread leaks L (default 100) mappings of
 * 4 pages from leak_storm_map() before the threads start; everything the
 * storm threads map is unmapped before exit. mmap.anon: 100 live, 1638400
 * bytes (4 KiB pages).
 *
 * Summary line on stderr (formatted on the stack):
 *   mmap_storm: threads 2 maps 100000 per thread; leaked 100 mappings,
 *   1638400 bytes in leak_storm_map; calls N; storm_ns N;
 *   cpu_user_us U cpu_sys_us S maxrss_kb R
 * calls counts the mmap, munmap and mremap calls made.
 *
 * Build: gcc -O2 -g -fno-omit-frame-pointer -pthread -o mmap_storm mmap_storm.c
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sys/mman.h>
#include "storm.h"

#define PAGE 4096
#define MAX_THREADS 64

struct worker {
	pthread_t thread;
	long maps;
	long calls;
	uint64_t seed;
};

static EXAMPLE_NOINLINE void *storm_worker(void *arg)
{
	struct worker *w = arg;
	for (long i = 0; i < w->maps; i++) {
		size_t n = (size_t)rng_range(&w->seed, 1, 16) * PAGE;
		char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			abort();
		p[0] = 1;
		w->calls++;
		if (i % 8 == 0) {
			char *q = mremap(p, n, n + PAGE, MREMAP_MAYMOVE);
			if (q == MAP_FAILED)
				abort();
			p = q;
			n += PAGE;
			w->calls++;
		}
		if (i % 16 == 1 && n >= 2 * PAGE) {
			size_t half = (n / PAGE / 2) * PAGE;
			if (munmap(p, half) || munmap(p + half, n - half))
				abort();
			w->calls += 2;
			continue;
		}
		if (munmap(p, n))
			abort();
		w->calls++;
	}
	return NULL;
}

/* leak_storm_map is the one leaking call site. */
static EXAMPLE_NOINLINE void leak_storm_map(void)
{
	char *p = mmap(NULL, 4 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		abort();
	p[0] = 1;
	g_sink_ptr = p;
}

static const char usage[] =
	"  --threads T        storm threads (default 2, at most 64)\n"
	"  --maps N           mappings per thread (default 100000)\n"
	"  --leak-maps L      mappings leaked from leak_storm_map (default 100)\n";

int main(int argc, char **argv)
{
	struct common_opts co = { .interval_ms = 1000 };
	long threads = 2, maps = 100000, leak_maps = 100;

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
		else if (strcmp(a, "--maps") == 0)
			dst = &maps;
		else if (strcmp(a, "--leak-maps") == 0)
			dst = &leak_maps;
		else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)
			usage_exit(argv[0], usage, 0);
		else
			usage_exit(argv[0], usage, 2);
		if (parse_long(v, min, dst))
			usage_exit(argv[0], usage, 2);
		i++;
	}
	if (threads > MAX_THREADS)
		usage_exit(argv[0], usage, 2);

	wait_before_work(&co);

	struct worker workers[MAX_THREADS];
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long i = 0; i < leak_maps; i++)
		leak_storm_map();
	clear_sink();
	long calls = leak_maps;
	for (long t = 0; t < threads; t++) {
		workers[t].maps = maps;
		workers[t].calls = 0;
		workers[t].seed = 0x9e3779b97f4a7c15ULL * (uint64_t)(t + 1);
		if (pthread_create(&workers[t].thread, NULL, storm_worker, &workers[t]))
			abort();
	}
	for (long t = 0; t < threads; t++) {
		pthread_join(workers[t].thread, NULL);
		calls += workers[t].calls;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);

	sleep_ms(co.hold_ms);

	struct line l = { .len = 0 };
	line_add(&l, "mmap_storm: threads %ld maps %ld per thread; leaked %ld mappings, %ld bytes in leak_storm_map; calls %ld; storm_ns %ld",
		 threads, maps, leak_maps, leak_maps * 4 * PAGE, calls, elapsed_ns(&t0, &t1));
	line_add_rusage(&l);
	line_emit(&l);
	return 0;
}
