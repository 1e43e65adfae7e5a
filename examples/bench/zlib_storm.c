/*
 * zlib_storm.c - zlib stream storm for the performance harness (bench/run.sh).
 *
 * Opens S (default 100,000) inflate streams one after another on one thread,
 * as a JVM does for each GZIPInputStream: inflateInit2_, then inflate() of a
 * small zlib-format buffer (8 KiB of text, compressed once at start-up) in
 * 4 KiB reads with Z_NO_FLUSH to Z_STREAM_END, then inflateEnd. zlib's
 * default allocator is used, so each stream mallocs its state (7160 bytes,
 * inside inflateInit2_) and its 32 KiB window (inside the first inflate()),
 * and inflateEnd frees both: four allocator calls and four zlib calls
 * (init, two inflate, end) per stream.
 *
 * Ground truth, exact: L (default 100) more streams are opened and inflated
 * the same way by leak_inflate_stream(), spread evenly over the storm, and
 * never ended. Each keeps 2 blocks, 39928 bytes (zlib 1.2.13, x86-64; see
 * examples/README.md), and its own z_stream (a static array), so the leaked
 * streams have distinct addresses. The ended streams share one z_stream on
 * the stack. The one compress2() at start-up is a deflate stream that is
 * ended.
 *
 * Summary line on stderr (no heap allocation of its own):
 *   zlib_storm: streams 100000 ended; leaked 100 inflate streams (200 blocks,
 *   3992800 bytes) in leak_inflate_stream; allocator calls 400200 (+ compress2);
 *   storm_ns N; cpu_user_us U cpu_sys_us S maxrss_kb R
 * storm_ns is CLOCK_MONOTONIC around the storm, after the compress2; the
 * rusage fields are the process's own (getrusage), taken at the end.
 *
 * Build: gcc -O2 -g -fno-omit-frame-pointer -o zlib_storm zlib_storm.c -lz
 * (bench/run.sh adds -no-pie, so bpftrace's raw stacks can be symbolized
 * after the process exited).
 */
#include <zlib.h>

#include "storm.h"

#define PLAIN_BYTES 8192
#define OUT_STEP 4096      /* bytes per inflate() call */
#define MAX_LEAKS 100000
#define STATE_BYTES 7160   /* sizeof(struct inflate_state), zlib 1.2.13 x86-64 */
#define WINDOW_BYTES 32768 /* 1 << windowBits */

static unsigned char plain[PLAIN_BYTES];
static unsigned char packed[PLAIN_BYTES + 1024];
static uLong packed_len;
static unsigned char out[PLAIN_BYTES + OUT_STEP];
static z_stream leaked[MAX_LEAKS];

/* inflate_all inflates the packed buffer into out in OUT_STEP-byte reads,
 * as a stream reader does, and checks the stream ended with the right
 * length. A first read that does not finish the stream makes zlib allocate
 * its window. */
static EXAMPLE_NOINLINE void inflate_all(z_stream *s)
{
	int ret = Z_OK;
	s->next_in = packed;
	s->avail_in = (uInt)packed_len;
	s->next_out = out;
	while (ret == Z_OK) {
		s->avail_out = OUT_STEP;
		ret = inflate(s, Z_NO_FLUSH);
	}
	if (ret != Z_STREAM_END || s->total_out != PLAIN_BYTES)
		abort();
	g_sink_sum += out[PLAIN_BYTES / 2];
}

/* read_record is the ended stream: init, inflate, end. */
static EXAMPLE_NOINLINE void read_record(void)
{
	z_stream s;
	memset(&s, 0, sizeof(s));
	if (inflateInit2(&s, 15) != Z_OK)
		abort();
	inflate_all(&s);
	if (inflateEnd(&s) != Z_OK)
		abort();
}

/* leak_inflate_stream is the one leaking site: the stream is inflated like
 * the others and then dropped without inflateEnd. The store after
 * inflate_all keeps that call from becoming a tail jump, which would take
 * this function off the stack of the window zlib allocates inside it. */
static EXAMPLE_NOINLINE void leak_inflate_stream(z_stream *s)
{
	memset(s, 0, sizeof(*s));
	if (inflateInit2(s, 15) != Z_OK)
		abort();
	inflate_all(s);
	g_sink_ptr = s;
}

static const char usage[] =
	"  --streams S        inflate streams opened and ended (default 100000)\n"
	"  --leak-streams L   streams leaked from leak_inflate_stream (default 100,\n"
	"                     at most 100000)\n";

int main(int argc, char **argv)
{
	struct common_opts co = { .interval_ms = 1000 };
	long streams = 100000, leaks = 100;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		long *dst = NULL;
		int r = parse_common_opt(&co, argc, argv, &i);
		if (r == 1)
			continue;
		if (r < 0)
			usage_exit(argv[0], usage, 2);
		if (strcmp(a, "--streams") == 0)
			dst = &streams;
		else if (strcmp(a, "--leak-streams") == 0)
			dst = &leaks;
		else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)
			usage_exit(argv[0], usage, 0);
		else
			usage_exit(argv[0], usage, 2);
		if (parse_long(v, 0, dst))
			usage_exit(argv[0], usage, 2);
		i++;
	}
	if (leaks > MAX_LEAKS)
		usage_exit(argv[0], usage, 2);

	/* Text that compresses like a log record. */
	uint64_t seed = 0x2545f4914f6cdd1dULL;
	static const char words[][8] = { "request", "handler", "buffer", "stream", "flush", "commit", "offset", "record" };
	for (size_t i = 0; i < PLAIN_BYTES;) {
		const char *w = words[rng_next(&seed) % 8];
		for (size_t j = 0; w[j] && i < PLAIN_BYTES; j++)
			plain[i++] = (unsigned char)w[j];
		if (i < PLAIN_BYTES)
			plain[i++] = (rng_next(&seed) % 8) ? ' ' : '\n';
	}
	packed_len = sizeof(packed);
	if (compress2(packed, &packed_len, plain, PLAIN_BYTES, 6) != Z_OK)
		abort();

	wait_before_work(&co);

	struct timespec t0, t1;
	long next_leak = 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long i = 0; i < streams; i++) {
		/* Leak k goes before stream ⌊k·S/L⌋, k = 0..L-1. */
		while (next_leak < leaks && i == next_leak * streams / leaks)
			leak_inflate_stream(&leaked[next_leak++]);
		read_record();
	}
	while (next_leak < leaks)
		leak_inflate_stream(&leaked[next_leak++]);
	clock_gettime(CLOCK_MONOTONIC, &t1);

	sleep_ms(co.hold_ms);

	struct line l = { .len = 0 };
	line_add(&l, "zlib_storm: streams %ld ended; leaked %ld inflate streams (%ld blocks, %ld bytes) in leak_inflate_stream; allocator calls %ld (+ compress2); storm_ns %ld",
		 streams, leaks, 2 * leaks, leaks * (STATE_BYTES + WINDOW_BYTES),
		 4 * streams + 2 * leaks, elapsed_ns(&t0, &t1));
	line_add_rusage(&l);
	line_emit(&l);
	return 0;
}
