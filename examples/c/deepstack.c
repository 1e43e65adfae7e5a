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
 * Ground truth, exact:
 *
 *   site function      thread         blocks  bytes
 *   leak_deep_main     main                5    480   (malloc(96))
 *   leak_deep_thread   second thread       3    480   (malloc(160))
 *
 * Call chains (callee first, as leakscope prints them):
 *   leak_deep_main <- descend x24 <- main <- __libc_start_call_main
 *   leak_deep_thread <- descend x24 <- thread_main <- start_thread
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

	descend(DEPTH, leak_deep_main);
	if (pthread_create(&t, NULL, thread_main, NULL) != 0)
		die(PROG, "pthread_create failed");
	pthread_join(t, NULL);
	clear_sink();
	write_all(2, PROG ": leaked 5 blocks (480 bytes) in leak_deep_main, 3 blocks (480 bytes) in leak_deep_thread\n",
		  sizeof(PROG ": leaked 5 blocks (480 bytes) in leak_deep_main, 3 blocks (480 bytes) in leak_deep_thread\n") - 1);
	return 0;
}
