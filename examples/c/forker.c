/*
 * forker.c - leakscope example target: a process that forks while it is
 * traced. Only the traced process's own allocations may be counted; its
 * children run the same code with the same (inherited) probes in their
 * copied address space, and must not be.
 *
 * Ground truth with default arguments, for the PARENT (the traced pid):
 *
 *   site function      API             blocks  bytes   state at exit
 *   leak_before_fork   malloc(1000)        10  10000   leaked
 *   hold_inherited     malloc(700)         20  14000   still held (the
 *                                                      children free their
 *                                                      copies, not these)
 *   leak_after_fork    malloc(2000)        10  20000   leaked
 *   total                                  40  44000
 *
 * Every CHILD (--children, default 4) runs concurrently with the parent:
 *   - frees its copies of the 20 hold_inherited blocks (same addresses as
 *     the parent's live ones);
 *   - leaks 50 blocks of 300 bytes in leak_in_child;
 *   - churns --churn (default 2000) malloc/free pairs in child_churn;
 *   - exits with _exit(0).
 * None of that is the parent's: a tracer that counts it shows leak_in_child
 * or releases hold_inherited.
 *
 * The parent churns --churn malloc/free pairs in parent_churn while the
 * children run, waits for every child and exits 1 if one did not exit 0.
 *
 * Build:
 *   gcc -O2 -g -Wall -Wextra -fno-omit-frame-pointer -o forker forker.c
 */
#define _GNU_SOURCE
#include "common.h"

#include <sys/wait.h>

#define PROG "forker"

#define BEFORE_BLOCKS 10
#define BEFORE_SIZE 1000
#define HELD_BLOCKS 20
#define HELD_SIZE 700
#define AFTER_BLOCKS 10
#define AFTER_SIZE 2000
#define CHILD_BLOCKS 50
#define CHILD_SIZE 300
#define MAX_CHILDREN 64

static void *g_held[HELD_BLOCKS];

/* BUG (intentional): forgotten before the fork. */
EXAMPLE_NOINLINE void leak_before_fork(unsigned i)
{
	void *p = malloc(BEFORE_SIZE);

	if (!p)
		die(PROG, "malloc");
	COUNT_CALL(API_MALLOC);
	use_memory(p, BEFORE_SIZE, i);
}

/* Allocates a block the parent keeps (and never frees) and every child
 * frees in its own copy of the heap. */
EXAMPLE_NOINLINE void hold_inherited(unsigned i)
{
	g_held[i] = malloc(HELD_SIZE);
	if (!g_held[i])
		die(PROG, "malloc");
	COUNT_CALL(API_MALLOC);
	use_memory(g_held[i], HELD_SIZE, i);
}

/* BUG (intentional): forgotten after the children ran. */
EXAMPLE_NOINLINE void leak_after_fork(unsigned i)
{
	void *p = malloc(AFTER_SIZE);

	if (!p)
		die(PROG, "malloc");
	COUNT_CALL(API_MALLOC);
	use_memory(p, AFTER_SIZE, i);
}

/* In a child only: never the traced process's. */
EXAMPLE_NOINLINE void leak_in_child(unsigned i)
{
	void *p = malloc(CHILD_SIZE);

	if (!p)
		die(PROG, "malloc");
	use_memory(p, CHILD_SIZE, i);
}

/* n malloc/free pairs of 16..4096 bytes. */
EXAMPLE_NOINLINE void churn(long n, uint64_t *rng)
{
	for (long i = 0; i < n; i++) {
		size_t len = rng_range(rng, 16, 4096);
		void *p = malloc(len);

		if (!p)
			die(PROG, "malloc");
		COUNT_CALL(API_MALLOC);
		use_memory(p, len, (unsigned)i);
		free(p);
		COUNT_CALL(API_FREE);
	}
}

EXAMPLE_NOINLINE void parent_churn(long n, uint64_t *rng)
{
	churn(n, rng);
	g_sink_sum += (unsigned long)n;
}

EXAMPLE_NOINLINE void child_churn(long n, uint64_t *rng)
{
	churn(n, rng);
	g_sink_sum += (unsigned long)n;
}

static EXAMPLE_NOINLINE __attribute__((noreturn)) void child_main(unsigned idx, long n)
{
	uint64_t rng = 0x2545f4914f6cdd1dULL + idx;

	for (unsigned i = 0; i < HELD_BLOCKS; i++)
		free(g_held[i]); /* the child's copy: the parent's stays live */
	for (unsigned i = 0; i < CHILD_BLOCKS; i++)
		leak_in_child(i);
	child_churn(n, &rng);
	clear_sink();
	_exit(0);
}

static const char usage_text[] =
	"Leaks in the parent before and after forking children that free the\n"
	"parent's inherited blocks and leak blocks of their own.\n"
	"  --children N       children forked (default 4, max 64)\n"
	"  --churn N          malloc/free pairs in the parent and each child\n"
	"                     (default 2000)\n";

int main(int argc, char **argv)
{
	struct common_opts o = { .interval_ms = 1000 };
	long children = 4, churn_n = 2000;
	uint64_t rng = 0x9e3779b97f4a7c15ULL;
	pid_t pids[MAX_CHILDREN];
	int failed = 0;
	struct line l = { .len = 0 };

	for (int i = 1; i < argc; i++) {
		int r = parse_common_opt(&o, argc, argv, &i);
		const char *v = (i + 1 < argc) ? argv[i + 1] : NULL;

		if (r < 0)
			usage_exit(PROG, usage_text, 2);
		if (r > 0)
			continue;
		if (strcmp(argv[i], "--children") == 0 && !parse_long(v, 0, &children) &&
		    children <= MAX_CHILDREN)
			i++;
		else if (strcmp(argv[i], "--churn") == 0 && !parse_long(v, 1, &churn_n))
			i++;
		else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			usage_exit(PROG, usage_text, 0);
		else
			usage_exit(PROG, usage_text, 2);
	}

	wait_before_work(&o);

	for (unsigned i = 0; i < BEFORE_BLOCKS; i++)
		leak_before_fork(i);
	for (unsigned i = 0; i < HELD_BLOCKS; i++)
		hold_inherited(i);
	for (long c = 0; c < children; c++) {
		pids[c] = fork();
		if (pids[c] < 0)
			die(PROG, "fork");
		if (pids[c] == 0)
			child_main((unsigned)c, churn_n);
	}
	parent_churn(churn_n, &rng);
	for (long c = 0; c < children; c++) {
		int st;

		while (waitpid(pids[c], &st, 0) < 0)
			if (errno != EINTR)
				die(PROG, "waitpid");
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			failed++;
	}
	for (unsigned i = 0; i < AFTER_BLOCKS; i++)
		leak_after_fork(i);
	clear_sink();
	merge_thread_calls();

	line_add(&l, "%s: leaked %d blocks, %d bytes in leak_before_fork", PROG,
		 BEFORE_BLOCKS, BEFORE_BLOCKS * BEFORE_SIZE);
	line_add(&l, "; held %d blocks, %d bytes in hold_inherited", HELD_BLOCKS,
		 HELD_BLOCKS * HELD_SIZE);
	line_add(&l, "; leaked %d blocks, %d bytes in leak_after_fork", AFTER_BLOCKS,
		 AFTER_BLOCKS * AFTER_SIZE);
	line_add(&l, "; total %d blocks, %d bytes",
		 BEFORE_BLOCKS + HELD_BLOCKS + AFTER_BLOCKS,
		 BEFORE_BLOCKS * BEFORE_SIZE + HELD_BLOCKS * HELD_SIZE +
			 AFTER_BLOCKS * AFTER_SIZE);
	line_add(&l, "; children %ld (each leaked %d blocks, %d bytes in leak_in_child), failed %d",
		 children, CHILD_BLOCKS, CHILD_BLOCKS * CHILD_SIZE, failed);
	line_add(&l, "; pid %ld", (long)getpid());
	line_add_calls(&l);
	line_emit(&l);

	sleep_ms(o.hold_ms);
	return failed ? 1 : 0;
}
