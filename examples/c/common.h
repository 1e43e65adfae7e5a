/*
 * common.h - shared helpers for the leakscope example targets.
 *
 * Header-only on purpose: every example builds from a single .c file
 * (`gcc ... examples/c/leaky.c -o leaky`), the include resolves relative to
 * the source file.
 *
 * Rules the helpers follow so that the ground truth stays exact:
 *   - nothing here allocates heap memory (no stdio on stdout, no getenv
 *     copies, no qsort, ...): the summary is formatted with snprintf into a
 *     stack buffer and written with write(2);
 *   - use_memory()/sink_pointer() are `noipa`, so GCC must assume the pointer
 *     escapes and the bytes are read; this stops -O2 from deleting
 *     malloc/free pairs or allocations that are written but never read;
 *   - allocation sites are plain direct calls to the libc function inside a
 *     named EXAMPLE_NOINLINE function (never through a wrapper), so the
 *     immediate caller of malloc & co. is the function named in the docs.
 */
#ifndef LEAKSCOPE_EXAMPLES_COMMON_H
#define LEAKSCOPE_EXAMPLES_COMMON_H

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/*
 * noinline keeps the symbol; noipa (GCC >= 8) additionally forbids cloning
 * (foo.constprop.0 / foo.isra.0 / foo.part.0), identical-code folding (two
 * identical leak functions merged under one name) and any IPA reasoning
 * about the body, so the function name in the binary is exactly the C name.
 */
#if defined(__clang__)
#define EXAMPLE_NOINLINE __attribute__((noinline))
#elif defined(__GNUC__) && __GNUC__ >= 8
#define EXAMPLE_NOINLINE __attribute__((noinline, noipa))
#else
#define EXAMPLE_NOINLINE __attribute__((noinline, noclone))
#endif

#define EXAMPLE_UNUSED __attribute__((unused))

/* ------------------------------------------------------------------------ */
/* Per-thread counters of the allocator calls made by the example's own code. */

enum api {
	API_MALLOC,
	API_CALLOC,
	API_REALLOC,
	API_REALLOCARRAY,
	API_POSIX_MEMALIGN,
	API_ALIGNED_ALLOC,
	API_MEMALIGN,
	API_VALLOC,
	API_PVALLOC,
	API_STRDUP,
	API_STRNDUP,
	API_FREE,
	API_COUNT
};

static const char *const api_names[API_COUNT] EXAMPLE_UNUSED = {
	"malloc", "calloc", "realloc", "reallocarray", "posix_memalign",
	"aligned_alloc", "memalign", "valloc", "pvalloc", "strdup", "strndup",
	"free",
};

/*
 * Counts successful allocating calls and free() of non-NULL pointers made
 * directly by example code. Deliberately failing edge-case calls
 * (clean.c) and free(NULL) are not counted. Thread-local, so no locking.
 */
static _Thread_local unsigned long tl_calls[API_COUNT];
static unsigned long g_calls[API_COUNT]; /* merged from threads at exit */

#define COUNT_CALL(api) (tl_calls[(api)]++)

static EXAMPLE_UNUSED void merge_thread_calls(void)
{
	for (int i = 0; i < API_COUNT; i++)
		__atomic_fetch_add(&g_calls[i], tl_calls[i], __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------------------ */
/* Opaque "use" of memory. */

/* Written through a volatile lvalue: the compiler must materialise every
 * pointer and every checksum stored here. */
static void *volatile g_sink_ptr;
static volatile unsigned long g_sink_sum;

/* Fill n bytes (so the pages are really touched), read a few back, publish
 * the pointer. Returns a cheap checksum. */
static EXAMPLE_NOINLINE EXAMPLE_UNUSED unsigned long
use_memory(void *p, size_t n, unsigned seed)
{
	unsigned char *b = p;
	unsigned long sum = 0;

	if (!p)
		return 0;
	memset(b, (int)(seed & 0xff), n);
	if (n) {
		b[0] = (unsigned char)seed;
		b[n - 1] = (unsigned char)(seed >> 8);
		sum = (unsigned long)b[0] + b[n / 2] + b[n - 1];
	}
	g_sink_ptr = p;
	g_sink_sum += sum;
	return sum;
}

/* Read-only variant (used after realloc, where the contents must survive). */
static EXAMPLE_NOINLINE EXAMPLE_UNUSED unsigned long
peek_memory(const void *p, size_t n)
{
	const unsigned char *b = p;
	unsigned long sum = 0;

	if (!p || !n)
		return 0;
	sum = (unsigned long)b[0] + b[n - 1];
	g_sink_ptr = (void *)(uintptr_t)p;
	g_sink_sum += sum;
	return sum;
}

/* Forget the last published pointer, so that leaked blocks end up
 * unreachable ("definitely lost" for valgrind) at exit. */
static EXAMPLE_UNUSED void clear_sink(void)
{
	g_sink_ptr = NULL;
}

/* ------------------------------------------------------------------------ */
/* Deterministic PRNG (xorshift64*), no libc state involved. */

static EXAMPLE_UNUSED uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 2685821657736338717ULL;
}

/* Uniform-ish value in [lo, hi]. */
static EXAMPLE_UNUSED size_t rng_range(uint64_t *s, size_t lo, size_t hi)
{
	return lo + (size_t)(rng_next(s) % (uint64_t)(hi - lo + 1));
}

/* ------------------------------------------------------------------------ */
/* Output without heap allocation. */

static EXAMPLE_UNUSED void write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		buf += n;
		len -= (size_t)n;
	}
}

/* Small appender over a fixed stack buffer. */
struct line {
	char buf[1024];
	size_t len;
};

static EXAMPLE_UNUSED __attribute__((format(printf, 2, 3))) void
line_add(struct line *l, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (l->len >= sizeof(l->buf) - 1)
		return;
	va_start(ap, fmt);
	n = vsnprintf(l->buf + l->len, sizeof(l->buf) - l->len, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	l->len += (size_t)n;
	if (l->len > sizeof(l->buf) - 1)
		l->len = sizeof(l->buf) - 1;
}

static EXAMPLE_UNUSED void line_add_calls(struct line *l)
{
	line_add(l, "; calls");
	for (int i = 0; i < API_COUNT; i++)
		if (g_calls[i])
			line_add(l, " %s=%lu", api_names[i], g_calls[i]);
}

static EXAMPLE_UNUSED void line_emit(struct line *l)
{
	line_add(l, "\n");
	write_all(STDERR_FILENO, l->buf, l->len);
}

static EXAMPLE_UNUSED __attribute__((noreturn)) void die(const char *prog,
							  const char *what)
{
	struct line l = { .len = 0 };
	line_add(&l, "%s: fatal: %s failed", prog, what);
	line_emit(&l);
	_exit(1);
}

/* ------------------------------------------------------------------------ */
/* Timing / synchronisation with the test harness. */

static volatile sig_atomic_t g_stop;

static void on_stop_signal(int sig)
{
	(void)sig;
	g_stop = 1;
}

/* SIGINT/SIGTERM set g_stop (used by --forever to finish the current round,
 * print the summary and exit cleanly). No SA_RESTART: sleeps wake up. */
static EXAMPLE_UNUSED void install_stop_handlers(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

/* Sleep ms milliseconds; returns early if a stop signal set g_stop. */
static EXAMPLE_UNUSED void sleep_ms(long ms)
{
	struct timespec ts;

	if (ms <= 0)
		return;
	ts.tv_sec = ms / 1000;
	ts.tv_nsec = (ms % 1000) * 1000000L;
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		if (g_stop)
			return;
}

/* Poll (every 5 ms) until path exists. */
static EXAMPLE_UNUSED void wait_for_file(const char *path)
{
	while (access(path, F_OK) != 0) {
		if (g_stop)
			return;
		sleep_ms(5);
	}
}

/* ------------------------------------------------------------------------ */
/* Command line. */

struct common_opts {
	long pause_before_ms; /* --pause-before MS: sleep before the work  */
	const char *wait_file; /* --wait-file PATH: block until PATH exists */
	long hold_ms;          /* --hold MS: sleep after the work, pre-exit */
	int forever;           /* --forever: repeat rounds until SIGINT/TERM */
	long interval_ms;      /* --interval MS: sleep between rounds        */
};

static EXAMPLE_UNUSED int parse_long(const char *s, long min, long *out)
{
	char *end;
	long v;

	if (!s || !*s)
		return -1;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < min)
		return -1;
	*out = v;
	return 0;
}

/*
 * Consumes the common options at argv[*i]. Returns 1 if consumed (and
 * advances *i past the value), 0 if the option is not a common one, -1 on
 * a malformed value.
 */
static EXAMPLE_UNUSED int parse_common_opt(struct common_opts *o, int argc,
					   char **argv, int *i)
{
	const char *a = argv[*i];
	const char *v = (*i + 1 < argc) ? argv[*i + 1] : NULL;

	if (strcmp(a, "--forever") == 0) {
		o->forever = 1;
		return 1;
	}
	if (strcmp(a, "--pause-before") == 0) {
		if (parse_long(v, 0, &o->pause_before_ms))
			return -1;
	} else if (strcmp(a, "--hold") == 0) {
		if (parse_long(v, 0, &o->hold_ms))
			return -1;
	} else if (strcmp(a, "--interval") == 0) {
		if (parse_long(v, 0, &o->interval_ms))
			return -1;
	} else if (strcmp(a, "--wait-file") == 0) {
		if (!v || !*v)
			return -1;
		o->wait_file = v;
	} else {
		return 0;
	}
	(*i)++;
	return 1;
}

#define COMMON_USAGE                                                         \
	"  --pause-before MS  sleep MS milliseconds before starting the work\n" \
	"  --wait-file PATH   before starting the work, wait until PATH exists\n" \
	"                     (polled every 5 ms; after --pause-before)\n"      \
	"  --hold MS          after the work (leaks still held) sleep MS ms,\n" \
	"                     then exit\n"                                      \
	"  --forever          repeat the work in rounds until SIGINT/SIGTERM,\n" \
	"                     then print the cumulative summary and exit\n"     \
	"  --interval MS      sleep between --forever rounds (default 1000)\n"

static EXAMPLE_UNUSED __attribute__((noreturn)) void
usage_exit(const char *prog, const char *specific, int code)
{
	struct line l = { .len = 0 };
	line_add(&l, "usage: %s [options]\n%s%s", prog, specific, COMMON_USAGE);
	write_all(STDERR_FILENO, l.buf, l.len);
	_exit(code);
}

/* Before the work: optional pause, then optional wait for a go-file. */
static EXAMPLE_UNUSED void wait_before_work(const struct common_opts *o)
{
	sleep_ms(o->pause_before_ms);
	if (o->wait_file)
		wait_for_file(o->wait_file);
}

#endif /* LEAKSCOPE_EXAMPLES_COMMON_H */
