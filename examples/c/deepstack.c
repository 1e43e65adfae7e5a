/*
 * deepstack.c - leakscope example target: leaks made at the bottom of a
 * deep stack of big frames, on the main thread and on a second thread.
 *
 * descend(n) recurses DEPTH (24) times; each of its frames holds a
 * 1500-byte local buffer it uses after the recursive call returns, so the
 * allocator's caller lies ~36 KiB below main's frame. A kernel stack walk
 * reads the stack in chunks of up to 4 KiB (ebpf/track.bpf.h stack_read):
 * this stack needs many chunks, and on the second thread the last ones end
 * at the top of the thread's stack mapping.
 *
 * A third thread, started first so its stack is freshly mapped, leaks from
 * below leave_gap(), whose frame holds a 16 KiB array of which only the
 * first byte is written: the pages above it were never touched, so a chunk
 * read across them faults. The walk still names every frame (words above
 * are read one at a time), and a chunk on that thread faults once, not
 * once per walk.
 *
 * Ground truth, exact:
 *
 *   site function      thread         blocks  bytes
 *   leak_deep_main     main                5    480   (malloc(96))
 *   leak_deep_thread   second thread       3    480   (malloc(160))
 *   leak_gap_block     third thread       20   1280   (malloc(64))
 *
 * Call chains (callee first, as leakscope prints them):
 *   leak_deep_main <- descend x24 <- main <- __libc_start_call_main
 *   leak_deep_thread <- descend x24 <- thread_main <- start_thread
 *   leak_gap_block <- leave_gap <- gap_main <- start_thread
 *
 * The program makes no other heap allocation of its own (pthread_create
 * makes libc's own, not attributed to these functions).
 *
 * Build:
 *   gcc -O2 -g -Wall -Wextra -fno-omit-frame-pointer -pthread -o deepstack deepstack.c
 *   gcc -O2 -g -pthread -o deepstack-nofp deepstack.c
 */
#define _GNU_SOURCE
#include <pthread.h>

#include "common.h"

#define PROG "deepstack"
#define DEPTH 24
#define FRAME_BYTES 1500

static EXAMPLE_NOINLINE void leak_deep_main(void)
{
	for (int i = 0; i < 5; i++)
		use_memory(malloc(96), 96, (unsigned)i);
}

static EXAMPLE_NOINLINE void leak_deep_thread(void)
{
	for (int i = 0; i < 3; i++)
		use_memory(malloc(160), 160, (unsigned)i);
}

static EXAMPLE_NOINLINE void leak_gap_block(void)
{
	use_memory(malloc(64), 64, 7);
}

/* leave_gap leaks 20 blocks below a frame whose 16 KiB array is touched at
 * its first byte only. */
static EXAMPLE_NOINLINE void leave_gap(void)
{
	unsigned char big[16384];

	big[0] = 1;
	g_sink_ptr = big;
	for (int i = 0; i < 20; i++)
		leak_gap_block();
	g_sink_sum += big[0];
}

static void *gap_main(void *arg)
{
	(void)arg;
	leave_gap();
	return NULL;
}

/* descend recurses n more times, then leaks with leak. The buffer is used
 * after the call, so the frame stays and the call is not a tail call. */
static EXAMPLE_NOINLINE unsigned long descend(int n, void (*leak)(void))
{
	unsigned char buf[FRAME_BYTES];
	unsigned long sum;

	use_memory(buf, sizeof(buf), (unsigned)n);
	if (n > 1)
		sum = descend(n - 1, leak);
	else {
		leak();
		sum = 0;
	}
	return sum + peek_memory(buf, sizeof(buf));
}

static void *thread_main(void *arg)
{
	(void)arg;
	descend(DEPTH, leak_deep_thread);
	return NULL;
}

int main(void)
{
	pthread_t t;

	/* First, while no thread stack is cached for reuse: its stack is
	 * freshly mapped, the pages above leave_gap's first byte untouched. */
	if (pthread_create(&t, NULL, gap_main, NULL) != 0)
		die(PROG, "pthread_create failed");
	pthread_join(t, NULL);
	descend(DEPTH, leak_deep_main);
	if (pthread_create(&t, NULL, thread_main, NULL) != 0)
		die(PROG, "pthread_create failed");
	pthread_join(t, NULL);
	clear_sink();
#define SUMMARY PROG ": leaked 5 blocks (480 bytes) in leak_deep_main, 3 blocks (480 bytes) in leak_deep_thread, 20 blocks (1280 bytes) in leak_gap_block\n"
	write_all(2, SUMMARY, sizeof(SUMMARY) - 1);
	return 0;
}
