/*
 * leaky.c - leakscope example target: heavy malloc/free churn plus two
 * exactly-known leaks.
 *
 * Ground truth with default arguments (one round):
 *
 *   rank  site function         API              blocks  bytes
 *   1     leak_request_buffer   malloc(4096)        100  409600
 *   2     leak_small_tag        calloc(3, 16)        25    1200
 *
 * Call chains (caller -> callee, the last one calls the allocator):
 *   main -> handle_requests -> parse_request -> leak_request_buffer -> malloc
 *   main -> label_requests -> leak_small_tag -> calloc
 *
 * Everything else is freed before the summary line is printed:
 *   - 200000 messages of 16..4096 bytes, malloc'ed by process_message and
 *     freed by release_message (up to 32 messages are in flight at any time);
 *   - one 256-byte scratch buffer per request, malloc'ed and freed by
 *     parse_request.
 * The program itself makes no other heap allocation: no stdio on stdout,
 * the summary goes to stderr through snprintf + write(2).
 *
 * With N rounds (--forever) the leaks scale linearly: 100*N blocks /
 * 409600*N bytes and 25*N blocks / 1200*N bytes.
 *
 * Build:
 *   gcc -O2 -g -Wall -Wextra -fno-omit-frame-pointer -pthread -o leaky leaky.c
 *   gcc -O2 -g -o leaky-nofp leaky.c
 */
#define _GNU_SOURCE
#include "common.h"

#define PROG "leaky"

#define DEFAULT_MESSAGES 200000L
#define DEFAULT_REQUESTS 100L
#define DEFAULT_TAGS 25L

#define MSG_MIN 16
#define MSG_MAX 4096
#define IN_FLIGHT 32

#define REQUEST_SCRATCH_SIZE 256
#define REQUEST_BUF_SIZE 4096
#define TAG_NMEMB 3
#define TAG_SIZE 16 /* 3 * 16 = 48 bytes per tag */

static unsigned long g_req_blocks, g_req_bytes;
static unsigned long g_tag_blocks, g_tag_bytes;

/* In-flight messages: reachable while the churn runs, drained at the end. */
static void *g_ring[IN_FLIGHT];
static size_t g_ring_len[IN_FLIGHT];

/* ---- churn -------------------------------------------------------------- */

/* Allocates one message of `len` bytes and fills it. Freed later by
 * release_message. */
EXAMPLE_NOINLINE void *process_message(size_t len, unsigned seq)
{
	char *msg = malloc(len);

	if (!msg)
		die(PROG, "malloc");
	COUNT_CALL(API_MALLOC);
	use_memory(msg, len, seq);
	return msg;
}

EXAMPLE_NOINLINE void release_message(unsigned slot)
{
	peek_memory(g_ring[slot], g_ring_len[slot]);
	free(g_ring[slot]);
	COUNT_CALL(API_FREE);
	g_ring[slot] = NULL;
	g_ring_len[slot] = 0;
}

EXAMPLE_NOINLINE void churn_messages(long count, uint64_t *rng)
{
	for (long i = 0; i < count; i++) {
		unsigned slot = (unsigned)(i % IN_FLIGHT);
		size_t len = rng_range(rng, MSG_MIN, MSG_MAX);

		if (g_ring[slot])
			release_message(slot);
		g_ring[slot] = process_message(len, (unsigned)i);
		g_ring_len[slot] = len;
	}
	for (unsigned slot = 0; slot < IN_FLIGHT; slot++)
		if (g_ring[slot])
			release_message(slot);
}

/* ---- leak #1: main -> handle_requests -> parse_request -> leak_request_buffer */

/* BUG (intentional): the 4096-byte buffer is filled and then forgotten. */
EXAMPLE_NOINLINE void leak_request_buffer(unsigned req_id)
{
	char *buf = malloc(REQUEST_BUF_SIZE);

	if (!buf)
		die(PROG, "malloc");
	COUNT_CALL(API_MALLOC);
	use_memory(buf, REQUEST_BUF_SIZE, req_id);
	g_req_blocks++;
	g_req_bytes += REQUEST_BUF_SIZE;
}

/* Uses (and correctly frees) a scratch buffer, then leaks via
 * leak_request_buffer. The free after the call also keeps the call from
 * being compiled as a tail call, so parse_request stays on the stack. */
EXAMPLE_NOINLINE unsigned long parse_request(unsigned req_id)
{
	char *scratch = malloc(REQUEST_SCRATCH_SIZE);
	unsigned long sum;

	if (!scratch)
		die(PROG, "malloc");
	COUNT_CALL(API_MALLOC);
	sum = use_memory(scratch, REQUEST_SCRATCH_SIZE, req_id);
	leak_request_buffer(req_id);
	sum += peek_memory(scratch, REQUEST_SCRATCH_SIZE);
	free(scratch);
	COUNT_CALL(API_FREE);
	return sum;
}

EXAMPLE_NOINLINE void handle_requests(long count)
{
	unsigned long sum = 0;

	for (long i = 0; i < count; i++)
		sum += parse_request((unsigned)i);
	g_sink_sum += sum;
}

/* ---- leak #2: main -> label_requests -> leak_small_tag ------------------ */

/* BUG (intentional): a 48-byte zeroed tag is allocated and never freed. */
EXAMPLE_NOINLINE void leak_small_tag(unsigned request)
{
	unsigned char *tag = calloc(TAG_NMEMB, TAG_SIZE);

	if (!tag)
		die(PROG, "calloc");
	COUNT_CALL(API_CALLOC);
	use_memory(tag, TAG_NMEMB * TAG_SIZE, request);
	g_tag_blocks++;
	g_tag_bytes += TAG_NMEMB * TAG_SIZE;
}

EXAMPLE_NOINLINE void label_requests(long count)
{
	for (long i = 0; i < count; i++)
		leak_small_tag((unsigned)i);
	g_sink_sum += (unsigned long)count;
}

/* ---- driver ------------------------------------------------------------- */

static const char usage_text[] =
	"Churns malloc/free and leaks 100 x 4096 B (leak_request_buffer)\n"
	"and 25 x 48 B (leak_small_tag) per round.\n"
	"  --messages N       churn messages per round (default 200000)\n"
	"  --requests N       leaked 4096-byte request buffers per round "
	"(default 100)\n"
	"  --tags N           leaked 48-byte tags per round (default 25)\n";

int main(int argc, char **argv)
{
	struct common_opts o = { .interval_ms = 1000 };
	long messages = DEFAULT_MESSAGES, requests = DEFAULT_REQUESTS;
	long tags = DEFAULT_TAGS, rounds = 0;
	uint64_t rng = 0x9e3779b97f4a7c15ULL;
	struct line l = { .len = 0 };

	for (int i = 1; i < argc; i++) {
		int r = parse_common_opt(&o, argc, argv, &i);
		const char *v = (i + 1 < argc) ? argv[i + 1] : NULL;

		if (r < 0)
			usage_exit(PROG, usage_text, 2);
		if (r > 0)
			continue;
		if (strcmp(argv[i], "--messages") == 0 && !parse_long(v, 0, &messages))
			i++;
		else if (strcmp(argv[i], "--requests") == 0 && !parse_long(v, 0, &requests))
			i++;
		else if (strcmp(argv[i], "--tags") == 0 && !parse_long(v, 0, &tags))
			i++;
		else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			usage_exit(PROG, usage_text, 0);
		else
			usage_exit(PROG, usage_text, 2);
	}
	if (o.forever)
		install_stop_handlers();

	wait_before_work(&o);

	for (;;) {
		/* Leaks happen in the middle of the churn, not in isolation. */
		churn_messages(messages / 2, &rng);
		handle_requests(requests);
		label_requests(tags);
		churn_messages(messages - messages / 2, &rng);
		rounds++;
		if (!o.forever || g_stop)
			break;
		sleep_ms(o.interval_ms);
		if (g_stop)
			break;
	}
	clear_sink();
	merge_thread_calls();

	line_add(&l, "%s: leaked %lu blocks, %lu bytes in leak_request_buffer",
		 PROG, g_req_blocks, g_req_bytes);
	line_add(&l, "; leaked %lu blocks, %lu bytes in leak_small_tag",
		 g_tag_blocks, g_tag_bytes);
	line_add(&l, "; total %lu blocks, %lu bytes",
		 g_req_blocks + g_tag_blocks, g_req_bytes + g_tag_bytes);
	line_add(&l, "; rounds %ld; pid %ld", rounds, (long)getpid());
	line_add_calls(&l);
	line_emit(&l);

	sleep_ms(o.hold_ms);
	return 0;
}
