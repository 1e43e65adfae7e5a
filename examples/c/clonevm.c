/*
 * clonevm.c - leakscope example target: a child process that shares its
 * parent's memory (clone with CLONE_VM, without CLONE_THREAD or
 * CLONE_VFORK) and never execs: one heap, two processes. A tracer must
 * count both processes' calls against that one heap.
 *
 * Ground truth with default arguments:
 *
 *   process  site function   API          blocks  bytes  state at exit
 *   parent   parent_alloc    malloc(256)      10   2560  5 freed by the
 *                                                         child, 5 leaked
 *   child    child_alloc     malloc(128)       3    384  leaked
 *
 * So the parent truly holds 5 blocks (1280 bytes) of parent_alloc at exit;
 * a tracer blind to the child shows 10, and no child_alloc.
 *
 * Build:
 *   gcc -O2 -g -Wall -Wextra -fno-omit-frame-pointer -o clonevm clonevm.c
 */
#define _GNU_SOURCE
#include "common.h"

#include <sched.h>
#include <signal.h>
#include <sys/wait.h>

#define PROG "clonevm"

#define PARENT_BLOCKS 10
#define PARENT_SIZE 256
#define CHILD_BLOCKS 3
#define CHILD_SIZE 128
#define STACK_SIZE (256 * 1024)

static void *g_blocks[PARENT_BLOCKS];

EXAMPLE_NOINLINE void parent_alloc(unsigned i)
{
	g_blocks[i] = malloc(PARENT_SIZE);
	if (!g_blocks[i])
		die(PROG, "malloc");
	use_memory(g_blocks[i], PARENT_SIZE, i);
}

/* BUG (intentional): the child's blocks are never freed. */
EXAMPLE_NOINLINE void child_alloc(unsigned i)
{
	void *p = malloc(CHILD_SIZE);

	if (!p)
		die(PROG, "malloc");
	use_memory(p, CHILD_SIZE, i);
}

static int child_main(void *arg)
{
	(void)arg;
	for (unsigned i = 0; i < PARENT_BLOCKS / 2; i++) {
		free(g_blocks[i]);
		g_blocks[i] = NULL;
	}
	for (unsigned i = 0; i < CHILD_BLOCKS; i++)
		child_alloc(i);
	return 0;
}

int main(void)
{
	struct line l = { .len = 0 };
	char *stack = malloc(STACK_SIZE);

	if (!stack)
		die(PROG, "malloc");
	for (unsigned i = 0; i < PARENT_BLOCKS; i++)
		parent_alloc(i);
	pid_t p = clone(child_main, stack + STACK_SIZE, CLONE_VM | SIGCHLD, NULL);
	if (p < 0)
		die(PROG, "clone");
	int st;
	while (waitpid(p, &st, 0) < 0)
		if (errno != EINTR)
			die(PROG, "waitpid");
	free(stack);
	clear_sink();
	line_add(&l, "%s: parent holds %d blocks, %d bytes of parent_alloc; child leaked %d blocks, %d bytes in child_alloc",
		 PROG, PARENT_BLOCKS / 2, PARENT_BLOCKS / 2 * PARENT_SIZE, CHILD_BLOCKS, CHILD_BLOCKS * CHILD_SIZE);
	line_emit(&l);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
