/*
 * cpuhop.c - blocks allocated on one CPU and freed on another.
 *
 * The main thread runs ROUNDS rounds, pinned (sched_setaffinity) to CPU A
 * in even rounds and CPU B in odd ones. Round r first frees the blocks of
 * round r-1 whose index k is not a multiple of 4, then allocates BLOCKS
 * blocks from hop_alloc(), block k (k = r * BLOCKS + j) of
 * 16 + (k * 37) % 241 bytes. So every free but the last round's runs on
 * the other CPU than its malloc, and one call site allocates on both.
 *
 * Ground truth, exact: everything it holds at exit was allocated by
 * hop_alloc: the blocks with k % 4 == 0 of rounds 0 .. ROUNDS-2 and every
 * block of the last round. Defaults ROUNDS 10, BLOCKS 1000: 3250 blocks.
 *
 * Usage: cpuhop --cpus A,B [--rounds R] [--blocks N]. Exits 3 when it
 * cannot run on A or B.
 */
#define _GNU_SOURCE
#include <sched.h>
#include "common.h"

#define MAX_BLOCKS 100000

static void *blocks[2][MAX_BLOCKS];

EXAMPLE_NOINLINE void *hop_alloc(size_t n)
{
	void *p = malloc(n);
	if (!p)
		abort();
	use_memory(p, n, (unsigned)n);
	return p;
}

static int pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		return -1;
	return sched_getcpu() == cpu ? 0 : -1;
}

int main(int argc, char **argv)
{
	long rounds = 10, n = 1000, cpus[2] = { -1, -1 };
	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--cpus") == 0) {
			if (sscanf(argv[i + 1], "%ld,%ld", &cpus[0], &cpus[1]) != 2)
				return 2;
		} else if (strcmp(argv[i], "--rounds") == 0) {
			rounds = atol(argv[i + 1]);
		} else if (strcmp(argv[i], "--blocks") == 0) {
			n = atol(argv[i + 1]);
		} else {
			return 2;
		}
	}
	if (cpus[0] < 0 || cpus[1] < 0 || n < 1 || n > MAX_BLOCKS || rounds < 1)
		return 2;
	for (long r = 0; r < rounds; r++) {
		if (pin((int)cpus[r % 2]))
			return 3;
		void **prev = blocks[(r + 1) % 2], **cur = blocks[r % 2];
		if (r > 0)
			for (long j = 0; j < n; j++)
				if (((r - 1) * n + j) % 4 != 0)
					free(prev[j]);
		for (long j = 0; j < n; j++) {
			long k = r * n + j;
			cur[j] = hop_alloc(16 + (size_t)(k * 37) % 241);
		}
	}
	return 0;
}
