/*
 * execer.c - leakscope example target: a process that replaces its own image
 * with execve(2) while it is traced (same pid, new address space).
 *
 * Image 1 (started without --after-exec), main -> work_before_exec ->:
 *   site function      API            blocks  bytes
 *   leak_before_exec   malloc(1000)       10  10000   live at the exec
 *   churn              malloc/free     --churn pairs, all freed
 * then execs /proc/self/exe --after-exec (plus the common options given).
 * The exec destroys image 1's heap: its 10 blocks are gone with it. They
 * are image 1's leaks, never image 2's.
 *
 * Image 2 (--after-exec), main -> work_after_exec ->:
 *   site function      API            blocks  bytes
 *   leak_after_exec    malloc(3000)        5  15000   leaked
 *   churn              malloc/free     --churn pairs, all freed
 *
 * Each image prints its own summary line on stderr; image 2's comes last.
 * --wait-file and --pause-before apply to image 1 only; --hold to image 2.
 *
 * Build:
 *   gcc -O2 -g -Wall -Wextra -fno-omit-frame-pointer -o execer execer.c
 */
#define _GNU_SOURCE
#include "common.h"

#define PROG "execer"

#define BEFORE_BLOCKS 10
#define BEFORE_SIZE 1000
#define AFTER_BLOCKS 5
#define AFTER_SIZE 3000

/* BUG (intentional): forgotten, then the image is replaced. */
EXAMPLE_NOINLINE void leak_before_exec(unsigned i)
{
	void *p = malloc(BEFORE_SIZE);

	if (!p)
		die(PROG, "malloc");
	COUNT_CALL(API_MALLOC);
	use_memory(p, BEFORE_SIZE, i);
}

/* BUG (intentional): forgotten in the new image. */
EXAMPLE_NOINLINE void leak_after_exec(unsigned i)
{
	void *p = malloc(AFTER_SIZE);

	if (!p)
		die(PROG, "malloc");
	COUNT_CALL(API_MALLOC);
	use_memory(p, AFTER_SIZE, i);
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

/* Image 1's work; noipa keeps blocks a run-time value, so the leak loop is
 * not unrolled into one call site per block. */
EXAMPLE_NOINLINE void work_before_exec(unsigned blocks, long churn_n, uint64_t *rng)
{
	churn(churn_n / 2, rng);
	for (unsigned i = 0; i < blocks; i++)
		leak_before_exec(i);
	churn(churn_n - churn_n / 2, rng);
}

EXAMPLE_NOINLINE void work_after_exec(unsigned blocks, long churn_n, uint64_t *rng)
{
	churn(churn_n / 2, rng);
	for (unsigned i = 0; i < blocks; i++)
		leak_after_exec(i);
	churn(churn_n - churn_n / 2, rng);
}

static const char usage_text[] =
	"Leaks 10 x 1000 B, then execs itself; the new image leaks 5 x 3000 B.\n"
	"  --churn N          malloc/free pairs in each image (default 1000)\n"
	"  --after-exec       run as the second image (set by the exec)\n";

int main(int argc, char **argv)
{
	struct common_opts o = { .interval_ms = 1000 };
	long churn_n = 1000;
	int after = 0;
	uint64_t rng = 0x9e3779b97f4a7c15ULL;
	char churn_arg[32], hold_arg[32];
	struct line l = { .len = 0 };

	for (int i = 1; i < argc; i++) {
		int r = parse_common_opt(&o, argc, argv, &i);
		const char *v = (i + 1 < argc) ? argv[i + 1] : NULL;

		if (r < 0)
			usage_exit(PROG, usage_text, 2);
		if (r > 0)
			continue;
		if (strcmp(argv[i], "--churn") == 0 && !parse_long(v, 0, &churn_n))
			i++;
		else if (strcmp(argv[i], "--after-exec") == 0)
			after = 1;
		else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			usage_exit(PROG, usage_text, 0);
		else
			usage_exit(PROG, usage_text, 2);
	}

	if (!after) {
		wait_before_work(&o);
		work_before_exec(BEFORE_BLOCKS, churn_n, &rng);
		clear_sink();
		merge_thread_calls();
		line_add(&l, "%s: leaked %d blocks, %d bytes in leak_before_exec",
			 PROG, BEFORE_BLOCKS, BEFORE_BLOCKS * BEFORE_SIZE);
		line_add(&l, "; image 1; pid %ld", (long)getpid());
		line_add_calls(&l);
		line_emit(&l);

		snprintf(churn_arg, sizeof(churn_arg), "%ld", churn_n);
		snprintf(hold_arg, sizeof(hold_arg), "%ld", o.hold_ms);
		char *const next[] = { argv[0], "--after-exec", "--churn", churn_arg,
				       "--hold", hold_arg, NULL };
		execv("/proc/self/exe", next);
		die(PROG, "execv");
	}

	work_after_exec(AFTER_BLOCKS, churn_n, &rng);
	clear_sink();
	merge_thread_calls();
	line_add(&l, "%s: leaked %d blocks, %d bytes in leak_after_exec", PROG,
		 AFTER_BLOCKS, AFTER_BLOCKS * AFTER_SIZE);
	line_add(&l, "; total %d blocks, %d bytes; image 2; pid %ld",
		 AFTER_BLOCKS, AFTER_BLOCKS * AFTER_SIZE, (long)getpid());
	line_add_calls(&l);
	line_emit(&l);

	sleep_ms(o.hold_ms);
	return 0;
}
