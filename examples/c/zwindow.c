/*
 * zwindow.c - zlib streams created before a tracer attaches, then read:
 * zlib allocates each stream's 32 KiB window lazily inside inflate(), deep
 * in libz (no frame pointers). Tests attach during --wait-file and expect
 * the window allocations to unwind through libz back to read_first_record.
 *
 * Ground truth: STREAMS (8) windows of 32768 bytes, allocated inside
 * inflate() called from read_first_record, never freed (no inflateEnd).
 * Each stream also holds its 7160-byte inflate_state (zlib 1.2.13, x86-64),
 * allocated by inflateInit_ in main. --idle N opens N more streams that are
 * never inflated (nor ended): they hold their state and no window.
 * --late-init opens every stream after --wait-file instead of before (a
 * tracer that does not trace malloc sees only streams opened under it).
 * The z_streams stay intact: the program keeps them. --reinit R then
 * initialises the first R streams again without inflateEnd (each old
 * stream, state and window, is lost to the program: leaked) and reads a
 * record from each new one: R more streams, each with a window. --copy C
 * then copies the first C streams with inflateCopy into z_streams
 * copy_stream callocs (112 bytes each), never ended: each copy's state
 * and window (7160 + 32768 bytes) are zlib's mallocs for a stream no
 * init made, allocated while the source's state is live in zlib's code.
 * --gz G then opens G gzFiles on a file it wrote and reads a byte from
 * each, never closing them (open_gz): each holds zlib's gz_state, a copy
 * of the path, an 8 KiB input and a 16 KiB output buffer (plain mallocs of
 * zlib's own, two of them powers of two) and an inflate stream (state and
 * window). --zalloc Z opens Z more streams whose zalloc is the program's
 * own (own_zalloc, a malloc, as CPython's zlib module does) and reads a
 * record from each, never ended: the state is allocated inside the init,
 * the window inside inflate(), both by own_zalloc.
 *
 *   gcc -O2 -g -o zwindow examples/c/zwindow.c -lz
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define STREAMS 8

static z_stream streams[STREAMS];
static unsigned char packed[70000], out[512];
static uLongf packed_len = sizeof(packed);

__attribute__((noinline, noipa)) static void read_first_record(z_stream *s)
{
	s->next_in = packed;
	s->avail_in = (uInt)packed_len;
	s->next_out = out;
	s->avail_out = sizeof(out); /* one record: the stream stays open, so zlib keeps a window */
	if (inflate(s, Z_NO_FLUSH) != Z_OK)
		abort();
}

/* copy_stream copies s into a new z_stream, kept (never ended). */
__attribute__((noinline, noipa)) static void copy_stream(z_stream *s)
{
	z_stream *c = calloc(1, sizeof(*c));
	if (!c || inflateCopy(c, s) != Z_OK)
		abort();
}

static long own_calls;

/* own_zalloc's malloc returns into it (no tail call): the window is a
 * block the program allocated, as with CPython's zlib module. */
__attribute__((noinline, noipa)) static voidpf own_zalloc(voidpf opaque, uInt items, uInt size)
{
	(void)opaque;
	voidpf p = malloc((size_t)items * size);
	__atomic_add_fetch(&own_calls, 1, __ATOMIC_RELAXED);
	return p;
}

__attribute__((noinline, noipa)) static void own_zfree(voidpf opaque, voidpf p)
{
	(void)opaque;
	free(p);
}

/* open_gz opens path for reading and reads one byte: the gzFile is kept. */
__attribute__((noinline, noipa)) static void open_gz(const char *path)
{
	gzFile f = gzopen(path, "rb");
	char c;
	if (!f || gzread(f, &c, 1) != 1)
		abort();
}

int main(int argc, char **argv)
{
	const char *wait_file = NULL;
	long hold_ms = 0, idle = 0, reinit = 0, copies = 0, gzs = 0, own = 0;
	int late = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--wait-file") && i + 1 < argc)
			wait_file = argv[++i];
		else if (!strcmp(argv[i], "--idle") && i + 1 < argc)
			idle = atol(argv[++i]);
		else if (!strcmp(argv[i], "--hold") && i + 1 < argc)
			hold_ms = atol(argv[++i]);
		else if (!strcmp(argv[i], "--late-init"))
			late = 1;
		else if (!strcmp(argv[i], "--reinit") && i + 1 < argc)
			reinit = atol(argv[++i]);
		else if (!strcmp(argv[i], "--copy") && i + 1 < argc)
			copies = atol(argv[++i]);
		else if (!strcmp(argv[i], "--gz") && i + 1 < argc)
			gzs = atol(argv[++i]);
		else if (!strcmp(argv[i], "--zalloc") && i + 1 < argc)
			own = atol(argv[++i]);
	}
	static unsigned char plain[65536];
	for (size_t i = 0; i < sizeof(plain); i++)
		plain[i] = (unsigned char)(i * 7 + i / 13);
	if (compress(packed, &packed_len, plain, sizeof(plain)) != Z_OK)
		abort();
	for (int pass = 0; pass < 2; pass++) {
		if (pass == late) {
			for (int i = 0; i < STREAMS; i++)
				if (inflateInit(&streams[i]) != Z_OK)
					abort();
			for (long i = 0; i < idle; i++) {
				z_stream *s = calloc(1, sizeof(*s)); /* dropped, never inflated */
				if (!s || inflateInit(s) != Z_OK)
					abort();
			}
		}
		if (pass == 0 && wait_file) {
			struct stat st;
			while (stat(wait_file, &st) != 0)
				usleep(10000);
		}
	}
	for (int i = 0; i < STREAMS; i++)
		read_first_record(&streams[i]);
	for (long i = 0; i < reinit && i < STREAMS; i++) {
		if (inflateInit(&streams[i]) != Z_OK)
			abort();
		read_first_record(&streams[i]);
	}
	for (long i = 0; i < copies && i < STREAMS; i++)
		copy_stream(&streams[i]);
	if (gzs > 0) {
		char path[] = "/tmp/zwindow-XXXXXX";
		int fd = mkstemp(path);
		gzFile w = fd < 0 ? NULL : gzdopen(fd, "wb");
		if (!w || gzwrite(w, plain, sizeof(plain)) != (int)sizeof(plain) || gzclose(w) != Z_OK)
			abort();
		for (long i = 0; i < gzs; i++)
			open_gz(path);
		unlink(path);
	}
	for (long i = 0; i < own; i++) {
		z_stream *s = calloc(1, sizeof(*s)); /* kept, never ended */
		if (!s)
			abort();
		s->zalloc = own_zalloc;
		s->zfree = own_zfree;
		if (inflateInit(s) != Z_OK)
			abort();
		read_first_record(s);
	}
	if (own > 0)
		fprintf(stderr, "zwindow: own_zalloc called %ld times\n", own_calls);
	fprintf(stderr, "zwindow: %ld windows of 32768 bytes allocated inside inflate() from read_first_record\n",
		STREAMS + (reinit < STREAMS ? reinit : STREAMS));
	usleep(hold_ms * 1000);
	return 0;
}
