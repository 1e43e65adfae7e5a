/*
 * stacks_storm.c - many live allocations on many distinct call stacks, held
 * until SIGTERM: the fixture of leakscope's snapshot benchmark
 * (probe/snapshot_bench_test.go), sized like the target of a
 * snapshot of 1M allocations on 100k stacks.
 *
 * For each path p in [0, N) (default N = 100,000), descend() recurses 17
 * levels deep, choosing at level i one of two call sites by bit i of p, and
 * at the bottom mallocs K (default 10) blocks of 32 bytes. The return
 * addresses differ, so every path is its own stack (with frame pointers):
 * N stacks holding N*K live blocks. None is freed.
 *
 * Prints "stacks_storm: ready: N stacks, N*K blocks" on stderr once every
 * block is allocated, then sleeps until SIGTERM or SIGINT, and exits 0.
 *
 * Build: gcc -O2 -g -fno-omit-frame-pointer -o stacks_storm stacks_storm.c
 */
#include "../c/common.h"

#define DEPTH 17 /* 2^17 = 131072 >= the default 100,000 paths */

static EXAMPLE_NOINLINE void hold_blocks(long per)
{
	for (long i = 0; i < per; i++) {
		void *p = malloc(32);
		if (!p)
			abort();
		g_sink_ptr = p;
	}
}

/* descend's two calls differ in what follows them, so the compiler keeps
 * two call sites, and a path's bits become distinct return addresses. */
static EXAMPLE_NOINLINE void descend(int depth, unsigned long path, long per)
{
	if (depth == 0) {
		hold_blocks(per);
		return;
	}
	if (path & 1) {
		descend(depth - 1, path >> 1, per);
		g_sink_sum += 1;
	} else {
		descend(depth - 1, path >> 1, per);
		g_sink_sum += 3;
	}
}

static const char usage[] =
	"  --stacks N         distinct stacks (default 100000, at most 131072)\n"
	"  --per-stack K      blocks of 32 bytes held per stack (default 10)\n";

int main(int argc, char **argv)
{
	struct common_opts co = { .interval_ms = 1000 };
	long stacks = 100000, per = 10;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		long *dst = NULL;
		int r = parse_common_opt(&co, argc, argv, &i);
		if (r == 1)
			continue;
		if (r < 0)
			usage_exit(argv[0], usage, 2);
		if (strcmp(a, "--stacks") == 0)
			dst = &stacks;
		else if (strcmp(a, "--per-stack") == 0)
			dst = &per;
		else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)
			usage_exit(argv[0], usage, 0);
		else
			usage_exit(argv[0], usage, 2);
		if (parse_long(v, 0, dst))
			usage_exit(argv[0], usage, 2);
		i++;
	}
	if (stacks > (1L << DEPTH))
		usage_exit(argv[0], usage, 2);

	install_stop_handlers();
	wait_before_work(&co);
	for (long p = 0; p < stacks; p++)
		descend(DEPTH, (unsigned long)p, per);
	clear_sink();

	struct line l = { .len = 0 };
	line_add(&l, "stacks_storm: ready: %ld stacks, %ld blocks", stacks, stacks * per);
	line_emit(&l);
	while (!g_stop)
		sleep_ms(1000);
	return 0;
}
