/*
 * daemonize.c - leakscope example target: a server that daemonizes the
 * classic way. The process started forks and exits at once; its child
 * starts a session of its own (setsid) and forks again; the grandchild,
 * the daemon, serves and leaks, then exits.
 *
 * Ground truth with default arguments:
 *
 *   process      site function   API           blocks  bytes  state at exit
 *   grandchild   serve_request   malloc(512)       30  15360  leaked
 *   (the first two processes allocate nothing of their own)
 *
 * The daemon serves 30 requests 10 ms apart, then idles --linger ms
 * (default 300) before it exits 0. It prints its line on stdout before it
 * exits.
 *
 * Build:
 *   gcc -O2 -g -Wall -Wextra -fno-omit-frame-pointer -o daemonize daemonize.c
 */
#define _GNU_SOURCE
#include "common.h"

#define PROG "daemonize"

#define REQUESTS 30
#define REQUEST_SIZE 512

/* BUG (intentional): each request's buffer is never freed. */
EXAMPLE_NOINLINE void serve_request(unsigned i)
{
	void *p = malloc(REQUEST_SIZE);

	if (!p)
		die(PROG, "malloc");
	COUNT_CALL(API_MALLOC);
	use_memory(p, REQUEST_SIZE, i);
}

static const char usage_text[] =
	"Forks, exits, and leaks in a daemon grandchild (setsid, fork).\n"
	"  --linger MS        the daemon idles this long before it exits\n"
	"                     (default 300)\n";

int main(int argc, char **argv)
{
	struct common_opts o = { .interval_ms = 1000 };
	long linger = 300;
	struct line l = { .len = 0 };

	for (int i = 1; i < argc; i++) {
		int r = parse_common_opt(&o, argc, argv, &i);
		const char *v = (i + 1 < argc) ? argv[i + 1] : NULL;

		if (r < 0)
			usage_exit(PROG, usage_text, 2);
		if (r > 0)
			continue;
		if (strcmp(argv[i], "--linger") == 0 && !parse_long(v, 0, &linger))
			i++;
		else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			usage_exit(PROG, usage_text, 0);
		else
			usage_exit(PROG, usage_text, 2);
	}
	wait_before_work(&o);

	pid_t p = fork();
	if (p < 0)
		die(PROG, "fork");
	if (p > 0)
		return 0; /* the parent: the shell's job is done */
	if (setsid() < 0)
		die(PROG, "setsid");
	p = fork();
	if (p < 0)
		die(PROG, "fork");
	if (p > 0)
		_exit(0); /* the session leader: the daemon can never regain a terminal */

	for (unsigned i = 0; i < REQUESTS; i++) {
		serve_request(i);
		usleep(10 * 1000);
	}
	usleep((useconds_t)linger * 1000);
	clear_sink();
	merge_thread_calls();
	line_add(&l, "%s: daemon pid %d leaked %d blocks, %d bytes in serve_request", PROG,
		 (int)getpid(), REQUESTS, REQUESTS * REQUEST_SIZE);
	line_add_calls(&l);
	line_emit(&l);
	return 0;
}
