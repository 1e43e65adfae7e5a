/*
 * zstreams.c - leakscope example target: zlib streams that are never ended
 * (the "Kafka incident" model).
 *
 * A producer compresses record batches with deflate streams and a consumer
 * decompresses records with inflate streams. Every stream is ended
 * (deflateEnd/inflateEnd) except on two buggy paths:
 *
 *   1. compress_batch returns early on a simulated "batch too large" error
 *      (every 10th batch) without deflateEnd. The stream was opened by
 *      open_batch_stream, which calls deflateInit2 (deflateInit2_).
 *   2. leak_inflater_after_read opens an inflate stream, reads part of a
 *      record with inflate() and drops the stream without inflateEnd.
 *      zlib allocates the 32 KiB window lazily inside inflate(), so these
 *      streams hold both the inflate state and the window.
 *
 * The work streams use zlib's default allocator (zalloc = zfree = Z_NULL):
 * zlib's zcalloc/zcfree call malloc/free from inside libz, and our own code
 * makes no heap allocation at all.
 *
 * Ground truth with default arguments (one round), zlib 1.2.13 on x86-64
 * (Debian 12), requested sizes:
 *
 *   rank  site function             kind          streams  blocks    bytes
 *   1     open_batch_stream         zlib.deflate       30     150  8042880
 *   2     leak_inflater_after_read  zlib.inflate        5      10   199640
 *         total                                         35     160  8242520
 *
 *   per deflate stream: 5 blocks, 268096 bytes (deflate_state 5952 +
 *                       window 65536 + prev 65536 + head 65536 +
 *                       pending_buf 65536), all inside deflateInit2_
 *   per inflate stream: 2 blocks, 39928 bytes (inflate_state 7160 inside
 *                       inflateInit2_ + window 32768 inside inflate())
 *
 * The program does not hard-code these numbers: before the pause it
 * measures one deflate and one inflate stream with a counting allocator
 * over a static arena (no heap), and the summary is computed from that.
 * --count-bytes additionally counts every work stream's live bytes with
 * counting zalloc/zfree functions (heap-backed, measurement mode only).
 *
 * Call chains (caller -> callee; zcalloc reaches malloc with a tail jump,
 * so it is not on the stack at the malloc):
 *   main -> compress_batches -> compress_batch -> open_batch_stream
 *        -> deflateInit2_ -> malloc                      (5 per stream)
 *   main -> consume_records -> leak_inflater_after_read
 *        -> inflateInit2_ -> malloc                      (inflate_state)
 *        -> inflate -> updatewindow -> malloc            (window)
 *
 * Everything else is ended before the summary: 270 deflate streams
 * (compress_batch -> open_batch_stream ... deflateEnd) and 200 inflate
 * streams (consume_records -> decode_record -> inflateInit2_ ... inflate
 * ... inflateEnd), each of which also allocated its window.
 *
 * Build (shared and static zlib):
 *   gcc -O2 -g -Wall -Wextra -fno-omit-frame-pointer -o zstreams zstreams.c -lz
 *   gcc -O2 -g -Wall -Wextra -fno-omit-frame-pointer -o zstreams-static \
 *       zstreams.c -Wl,-Bstatic -lz -Wl,-Bdynamic
 */
#define _GNU_SOURCE
#include "common.h"

#include <sys/mman.h>
#include <zlib.h>

#define PROG "zstreams"

#define DEFAULT_RECORDS 200L
#define DEFAULT_BATCHES 300L
#define DEFAULT_FAIL_EVERY 10L
#define DEFAULT_LEAK_INFLATERS 5L

#define LEVEL Z_DEFAULT_COMPRESSION
#define WBITS 15          /* zlib format, 32 KiB window */
#define GZIP_WBITS (15 + 16) /* gzip format, 32 KiB window */
#define MEM_LEVEL 8
#define STRATEGY Z_DEFAULT_STRATEGY

#define PAYLOAD_MAX 16384
#define RECORD_CAP (PAYLOAD_MAX + PAYLOAD_MAX / 8 + 256)
#define RECORD_SLOTS 16
#define OUT_CHUNK 4096
#define LEAK_READ_CHUNK 1024

/* ------------------------------------------------------------------------ */
/* Allocation accounting (calibration and --count-bytes only). */

struct zacct {
	long live_blocks, live_bytes;
	long allocs, frees;
	long peak_bytes;
};

/* Blocks carry a 16-byte header holding their requested size. */
#define ZHDR 16

static void acct_add(struct zacct *a, long bytes)
{
	a->allocs++;
	a->live_blocks++;
	a->live_bytes += bytes;
	if (a->live_bytes > a->peak_bytes)
		a->peak_bytes = a->live_bytes;
}

static void acct_sub(struct zacct *a, long bytes)
{
	a->frees++;
	a->live_blocks--;
	a->live_bytes -= bytes;
}

/* Calibration allocator: bump pointer over a static arena, so measuring
 * the stream sizes makes no heap allocation. */
static unsigned char g_arena[1 << 20] __attribute__((aligned(64)));
static size_t g_arena_used;

static voidpf arena_zalloc(voidpf opaque, uInt items, uInt size)
{
	size_t n = (size_t)items * size;
	size_t need = ZHDR + ((n + 15) & ~(size_t)15);
	unsigned char *p;

	if (need > sizeof(g_arena) - g_arena_used)
		return Z_NULL;
	p = g_arena + g_arena_used;
	g_arena_used += need;
	memcpy(p, &n, sizeof(n));
	acct_add(opaque, (long)n);
	return p + ZHDR;
}

static void arena_zfree(voidpf opaque, voidpf ptr)
{
	size_t n;

	memcpy(&n, (unsigned char *)ptr - ZHDR, sizeof(n));
	acct_sub(opaque, (long)n);
}

/* --count-bytes allocator: malloc/free with per-stream accounting. */
static voidpf count_zalloc(voidpf opaque, uInt items, uInt size)
{
	size_t n = (size_t)items * size;
	unsigned char *p = malloc(ZHDR + n);

	if (!p)
		return Z_NULL;
	memcpy(p, &n, sizeof(n));
	acct_add(opaque, (long)n);
	return p + ZHDR;
}

static void count_zfree(voidpf opaque, voidpf ptr)
{
	unsigned char *p = (unsigned char *)ptr - ZHDR;
	size_t n;

	memcpy(&n, p, sizeof(n));
	acct_sub(opaque, (long)n);
	free(p);
}

static int g_count_bytes; /* --count-bytes */

/* ------------------------------------------------------------------------ */
/*
 * Stream objects. Each z_stream lives in a slot of an mmap'ed pool (not the
 * heap, so no allocator probe sees it). An ended stream's slot is reused;
 * a leaked stream's slot is wiped (the owning object is gone, as when the
 * JVM collects a Deflater that was never end()ed) and never reused, so
 * every leaked stream keeps a distinct z_stream address and its zlib state
 * becomes unreachable ("definitely lost" for valgrind).
 */
struct zslot {
	z_stream zs;
	struct zacct acct;
	struct zslot *next_free;
};

#define POOL_CHUNK (1UL << 20)

static unsigned char *g_pool_cur, *g_pool_end;
static struct zslot *g_pool_free;

static struct zslot *slot_get(void)
{
	struct zslot *s = g_pool_free;

	if (s) {
		g_pool_free = s->next_free;
	} else {
		if (!g_pool_cur ||
		    (size_t)(g_pool_end - g_pool_cur) < sizeof(*s)) {
			void *m = mmap(NULL, POOL_CHUNK, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (m == MAP_FAILED)
				die(PROG, "mmap");
			g_pool_cur = m;
			g_pool_end = g_pool_cur + POOL_CHUNK;
		}
		s = (struct zslot *)(void *)g_pool_cur;
		g_pool_cur += (sizeof(*s) + 63) & ~(size_t)63;
	}
	memset(s, 0, sizeof(*s));
	if (g_count_bytes) {
		s->zs.zalloc = count_zalloc;
		s->zs.zfree = count_zfree;
		s->zs.opaque = &s->acct;
	} else {
		s->zs.zalloc = Z_NULL; /* zlib's zcalloc -> malloc in libz */
		s->zs.zfree = Z_NULL;  /* zlib's zcfree -> free in libz */
		s->zs.opaque = Z_NULL;
	}
	return s;
}

/* The stream was ended: the slot may be reused. */
static void slot_put(struct zslot *s)
{
	s->next_free = g_pool_free;
	g_pool_free = s;
}

/* The stream was NOT ended: forget it for good. */
static void slot_drop(struct zslot *s)
{
	explicit_bzero(s, sizeof(*s));
}

/* ------------------------------------------------------------------------ */
/* Measurements. */

struct stream_size {
	long blocks, bytes;
};

/* From the calibration before the pause. */
static struct stream_size g_cal_deflate_init, g_cal_deflate;
static struct stream_size g_cal_inflate_init, g_cal_inflate;

/* --count-bytes: per leaked stream (min/max over all leaked streams), and
 * what was still live in ended streams after their *End call. */
static struct stream_size g_cnt_defl_min, g_cnt_defl_max;
static struct stream_size g_cnt_infl_min, g_cnt_infl_max;
static long g_cnt_ended_residual_blocks, g_cnt_ended_residual_bytes;
static long g_cnt_ended_infl_peak_min = -1, g_cnt_ended_infl_peak_max;
static long g_cnt_allocs, g_cnt_frees;

static void minmax(struct stream_size *mn, struct stream_size *mx,
		   const struct zacct *a)
{
	if (mn->blocks == 0 || a->live_bytes < mn->bytes) {
		mn->blocks = a->live_blocks;
		mn->bytes = a->live_bytes;
	}
	if (a->live_bytes > mx->bytes) {
		mx->blocks = a->live_blocks;
		mx->bytes = a->live_bytes;
	}
}

/* Called when a stream is dropped without End. */
static void count_leaked(const struct zslot *s, int deflate_kind)
{
	if (!g_count_bytes)
		return;
	g_cnt_allocs += s->acct.allocs;
	g_cnt_frees += s->acct.frees;
	if (deflate_kind)
		minmax(&g_cnt_defl_min, &g_cnt_defl_max, &s->acct);
	else
		minmax(&g_cnt_infl_min, &g_cnt_infl_max, &s->acct);
}

/* Called after deflateEnd/inflateEnd. */
static void count_ended(const struct zslot *s, int inflate_kind)
{
	if (!g_count_bytes)
		return;
	g_cnt_allocs += s->acct.allocs;
	g_cnt_frees += s->acct.frees;
	g_cnt_ended_residual_blocks += s->acct.live_blocks;
	g_cnt_ended_residual_bytes += s->acct.live_bytes;
	if (inflate_kind) {
		if (g_cnt_ended_infl_peak_min < 0 ||
		    s->acct.peak_bytes < g_cnt_ended_infl_peak_min)
			g_cnt_ended_infl_peak_min = s->acct.peak_bytes;
		if (s->acct.peak_bytes > g_cnt_ended_infl_peak_max)
			g_cnt_ended_infl_peak_max = s->acct.peak_bytes;
	}
}

/* ------------------------------------------------------------------------ */
/* Payloads and compressed records (static storage, no heap). */

static const char *const g_words[] = {
	"kafka",  "record", "batch",     "topic",  "partition", "offset",
	"leader", "broker", "producer",  "consumer", "replica", "commit",
	"gzip",   "header", "timestamp", "key",    "value",     "acks",
	"retry",  "segment", "index",    "epoch",  "fetch",     "append",
};

static unsigned char g_payload[PAYLOAD_MAX];

/* Deterministic, compressible text of PAYLOAD_MAX/2..PAYLOAD_MAX bytes. */
static size_t make_payload(unsigned char *buf, uint64_t seed)
{
	uint64_t s = (seed + 1) * 0x9e3779b97f4a7c15ULL;
	size_t len = rng_range(&s, PAYLOAD_MAX / 2, PAYLOAD_MAX);
	size_t i = 0;

	while (i < len) {
		const char *w = g_words[rng_next(&s) % (sizeof(g_words) /
							sizeof(g_words[0]))];
		while (*w && i < len)
			buf[i++] = (unsigned char)*w++;
		if (i < len)
			buf[i++] = (rng_next(&s) & 7) ? ' ' :
				   (unsigned char)('0' + rng_next(&s) % 10);
	}
	return len;
}

struct record {
	unsigned char data[RECORD_CAP];
	size_t clen;  /* compressed length */
	size_t plen;  /* payload length */
	uLong crc;    /* crc32 of the payload */
	int gzip;
};

static struct record g_records[RECORD_SLOTS];
static unsigned g_nrecords;    /* filled slots */
static unsigned long g_ok_batches;

static unsigned char g_batch_out[RECORD_CAP];
static unsigned char g_inflate_out[OUT_CHUNK];

/* ------------------------------------------------------------------------ */
/* Counters for the summary. */

static unsigned long g_defl_leaked, g_defl_ended;
static unsigned long g_infl_leaked, g_infl_ended;

/* ------------------------------------------------------------------------ */
/* Producer: compress batches (leak #1). */

/* Opens the batch's deflate stream: the deflateInit2_ call site. */
EXAMPLE_NOINLINE int open_batch_stream(struct zslot *s, int gzip)
{
	int ret = deflateInit2(&s->zs, LEVEL, Z_DEFLATED,
			       gzip ? GZIP_WBITS : WBITS, MEM_LEVEL, STRATEGY);

	if (ret != Z_OK)
		die(PROG, "deflateInit2");
	g_sink_ptr = &s->zs;
	return ret;
}

/*
 * Compresses one batch. Batch numbers start at 1; if fail_every > 0,
 * every fail_every-th batch hits the simulated error after its first
 * deflate() call and returns early WITHOUT deflateEnd (the bug).
 * Returns 0 on success, -1 on the simulated error.
 */
EXAMPLE_NOINLINE int compress_batch(unsigned long batch, long fail_every)
{
	struct zslot *s = slot_get();
	int gzip = (batch % 3 == 0);
	size_t plen = make_payload(g_payload, batch);
	struct record *r;
	int ret;

	open_batch_stream(s, gzip);
	s->zs.next_in = g_payload;
	s->zs.avail_in = (uInt)(plen / 2);
	s->zs.next_out = g_batch_out;
	s->zs.avail_out = sizeof(g_batch_out);
	if (deflate(&s->zs, Z_NO_FLUSH) != Z_OK)
		die(PROG, "deflate");

	if (fail_every > 0 && batch % (unsigned long)fail_every == 0) {
		/* BUG (intentional): "batch too large" -> early return, the
		 * stream is never ended. */
		count_leaked(s, 1);
		slot_drop(s);
		g_defl_leaked++;
		return -1;
	}

	s->zs.avail_in += (uInt)(plen - plen / 2);
	ret = deflate(&s->zs, Z_FINISH);
	if (ret != Z_STREAM_END)
		die(PROG, "deflate(Z_FINISH)");

	r = &g_records[g_ok_batches % RECORD_SLOTS];
	r->clen = s->zs.total_out;
	memcpy(r->data, g_batch_out, r->clen);
	r->plen = plen;
	r->crc = crc32(crc32(0L, Z_NULL, 0), g_payload, (uInt)plen);
	r->gzip = gzip;
	if (g_nrecords < RECORD_SLOTS)
		g_nrecords++;
	g_ok_batches++;

	if (deflateEnd(&s->zs) != Z_OK)
		die(PROG, "deflateEnd");
	count_ended(s, 0);
	slot_put(s);
	g_defl_ended++;
	return 0;
}

EXAMPLE_NOINLINE void compress_batches(long count, long fail_every,
				       unsigned long *batch_no)
{
	long failed = 0;

	for (long i = 0; i < count; i++)
		if (compress_batch(++*batch_no, fail_every) < 0)
			failed++;
	g_sink_sum += (unsigned long)failed;
}

/* ------------------------------------------------------------------------ */
/* Consumer: decompress records (leak #2). */

/* Decompresses one record completely and ends the stream. */
EXAMPLE_NOINLINE void decode_record(const struct record *r)
{
	struct zslot *s = slot_get();
	uLong crc = crc32(0L, Z_NULL, 0);
	int ret;

	s->zs.next_in = (Bytef *)(uintptr_t)r->data;
	s->zs.avail_in = (uInt)r->clen;
	ret = inflateInit2(&s->zs, r->gzip ? GZIP_WBITS : WBITS);
	if (ret != Z_OK)
		die(PROG, "inflateInit2");
	do {
		s->zs.next_out = g_inflate_out;
		s->zs.avail_out = sizeof(g_inflate_out);
		ret = inflate(&s->zs, Z_NO_FLUSH);
		if (ret != Z_OK && ret != Z_STREAM_END)
			die(PROG, "inflate");
		crc = crc32(crc, g_inflate_out,
			    (uInt)(sizeof(g_inflate_out) - s->zs.avail_out));
	} while (ret != Z_STREAM_END);
	if (s->zs.total_out != r->plen || crc != r->crc)
		die(PROG, "record check");
	peek_memory(g_inflate_out, sizeof(g_inflate_out));
	if (inflateEnd(&s->zs) != Z_OK)
		die(PROG, "inflateEnd");
	count_ended(s, 1);
	slot_put(s);
	g_infl_ended++;
}

/* BUG (intentional): opens an inflater, reads the first LEAK_READ_CHUNK
 * bytes of the record (zlib allocates the window inside this inflate()
 * call) and drops the stream without inflateEnd. */
EXAMPLE_NOINLINE void leak_inflater_after_read(const struct record *r)
{
	struct zslot *s = slot_get();
	int ret;

	s->zs.next_in = (Bytef *)(uintptr_t)r->data;
	s->zs.avail_in = (uInt)r->clen;
	ret = inflateInit2(&s->zs, r->gzip ? GZIP_WBITS : WBITS);
	if (ret != Z_OK)
		die(PROG, "inflateInit2");
	s->zs.next_out = g_inflate_out;
	s->zs.avail_out = LEAK_READ_CHUNK;
	ret = inflate(&s->zs, Z_NO_FLUSH);
	if (ret != Z_OK || s->zs.avail_out != 0)
		die(PROG, "inflate (partial read)");
	peek_memory(g_inflate_out, LEAK_READ_CHUNK);
	count_leaked(s, 0);
	slot_drop(s);
	g_infl_leaked++;
}

/* Decodes `count` records; the `leaks` leaking reads are spread evenly
 * over them (before record floor(k*count/(leaks+1)), k = 1..leaks). */
EXAMPLE_NOINLINE void consume_records(long count, long leaks)
{
	long k = 1;

	for (long i = 0; i < count; i++) {
		const struct record *r = &g_records[(unsigned long)i % g_nrecords];

		while (k <= leaks && i >= k * count / (leaks + 1)) {
			leak_inflater_after_read(r);
			k++;
		}
		decode_record(r);
	}
	for (; k <= leaks; k++)
		leak_inflater_after_read(&g_records[(unsigned long)k % g_nrecords]);
	g_sink_sum += (unsigned long)count;
}

/* ------------------------------------------------------------------------ */
/* Calibration: the bytes and blocks one stream holds, measured with the
 * arena allocator (no heap), before the pause. */

EXAMPLE_NOINLINE void calibrate(void)
{
	struct zacct da = { 0 }, ia = { 0 };
	z_stream zs;
	size_t plen = make_payload(g_payload, 0);
	int ret;

	memset(&zs, 0, sizeof(zs));
	zs.zalloc = arena_zalloc;
	zs.zfree = arena_zfree;
	zs.opaque = &da;
	if (deflateInit2(&zs, LEVEL, Z_DEFLATED, WBITS, MEM_LEVEL, STRATEGY) != Z_OK)
		die(PROG, "calibration deflateInit2");
	g_cal_deflate_init.blocks = da.live_blocks;
	g_cal_deflate_init.bytes = da.live_bytes;
	/* Same steps as compress_batch before its error check. */
	zs.next_in = g_payload;
	zs.avail_in = (uInt)(plen / 2);
	zs.next_out = g_records[0].data;
	zs.avail_out = RECORD_CAP;
	if (deflate(&zs, Z_NO_FLUSH) != Z_OK)
		die(PROG, "calibration deflate");
	g_cal_deflate.blocks = da.live_blocks;
	g_cal_deflate.bytes = da.live_bytes;
	zs.avail_in += (uInt)(plen - plen / 2);
	if (deflate(&zs, Z_FINISH) != Z_STREAM_END)
		die(PROG, "calibration deflate(Z_FINISH)");
	g_records[0].clen = zs.total_out;
	if (deflateEnd(&zs) != Z_OK || da.live_blocks != 0)
		die(PROG, "calibration deflateEnd");

	memset(&zs, 0, sizeof(zs));
	zs.zalloc = arena_zalloc;
	zs.zfree = arena_zfree;
	zs.opaque = &ia;
	zs.next_in = g_records[0].data;
	zs.avail_in = (uInt)g_records[0].clen;
	if (inflateInit2(&zs, WBITS) != Z_OK)
		die(PROG, "calibration inflateInit2");
	g_cal_inflate_init.blocks = ia.live_blocks;
	g_cal_inflate_init.bytes = ia.live_bytes;
	zs.next_out = g_inflate_out;
	zs.avail_out = LEAK_READ_CHUNK;
	ret = inflate(&zs, Z_NO_FLUSH);
	if (ret != Z_OK)
		die(PROG, "calibration inflate");
	g_cal_inflate.blocks = ia.live_blocks;
	g_cal_inflate.bytes = ia.live_bytes;
	if (inflateEnd(&zs) != Z_OK || ia.live_blocks != 0)
		die(PROG, "calibration inflateEnd");

	memset(&g_records[0], 0, sizeof(g_records[0]));
	memset(g_arena, 0, g_arena_used);
	g_arena_used = 0;
}

/* ------------------------------------------------------------------------ */
/* Driver. */

static const char usage_text[] =
	"Leaks deflate streams (open_batch_stream) and inflate streams\n"
	"(leak_inflater_after_read).\n"
	"  --batches N        deflate streams per round (default 300)\n"
	"  --fail-every K     every K-th batch leaks (default 10, 0 = never)\n"
	"  --records N        inflate streams ended per round (default 200)\n"
	"  --leak-inflaters N inflate streams leaked per round (default 5)\n"
	"  --count-bytes      count live bytes per stream (custom zalloc)\n";

int main(int argc, char **argv)
{
	struct common_opts o = { .interval_ms = 1000 };
	long records = DEFAULT_RECORDS, batches = DEFAULT_BATCHES;
	long fail_every = DEFAULT_FAIL_EVERY, leak_inflaters = DEFAULT_LEAK_INFLATERS;
	long rounds = 0;
	unsigned long batch_no = 0;
	unsigned long dl_blocks, dl_bytes, il_blocks, il_bytes;
	struct line l = { .len = 0 };

	for (int i = 1; i < argc; i++) {
		int r = parse_common_opt(&o, argc, argv, &i);
		const char *v = (i + 1 < argc) ? argv[i + 1] : NULL;

		if (r < 0)
			usage_exit(PROG, usage_text, 2);
		if (r > 0)
			continue;
		if (strcmp(argv[i], "--records") == 0 && !parse_long(v, 0, &records))
			i++;
		else if (strcmp(argv[i], "--batches") == 0 && !parse_long(v, 0, &batches))
			i++;
		else if (strcmp(argv[i], "--fail-every") == 0 && !parse_long(v, 0, &fail_every))
			i++;
		else if (strcmp(argv[i], "--leak-inflaters") == 0 &&
			 !parse_long(v, 0, &leak_inflaters))
			i++;
		else if (strcmp(argv[i], "--count-bytes") == 0)
			g_count_bytes = 1;
		else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			usage_exit(PROG, usage_text, 0);
		else
			usage_exit(PROG, usage_text, 2);
	}
	/* The inflate streams need at least one compressed record. */
	if ((records > 0 || leak_inflaters > 0) &&
	    (batches == 0 || fail_every == 1))
		usage_exit(PROG, usage_text, 2);
	if (o.forever)
		install_stop_handlers();

	calibrate();
	wait_before_work(&o);

	for (;;) {
		compress_batches(batches, fail_every, &batch_no);
		consume_records(records, leak_inflaters);
		rounds++;
		if (!o.forever || g_stop)
			break;
		sleep_ms(o.interval_ms);
		if (g_stop)
			break;
	}
	g_sink_ptr = NULL;

	dl_blocks = g_defl_leaked * (unsigned long)g_cal_deflate.blocks;
	dl_bytes = g_defl_leaked * (unsigned long)g_cal_deflate.bytes;
	il_blocks = g_infl_leaked * (unsigned long)g_cal_inflate.blocks;
	il_bytes = g_infl_leaked * (unsigned long)g_cal_inflate.bytes;
	line_add(&l, "%s: leaked %lu deflate streams (%lu blocks, %lu bytes) in open_batch_stream",
		 PROG, g_defl_leaked, dl_blocks, dl_bytes);
	line_add(&l, "; leaked %lu inflate streams (%lu blocks, %lu bytes) in leak_inflater_after_read",
		 g_infl_leaked, il_blocks, il_bytes);
	line_add(&l, "; total %lu streams (%lu blocks, %lu bytes)",
		 g_defl_leaked + g_infl_leaked, dl_blocks + il_blocks,
		 dl_bytes + il_bytes);
	line_add(&l, "; ended %lu inflate and %lu deflate streams",
		 g_infl_ended, g_defl_ended);
	line_add(&l, "; per stream deflate %ld blocks, %ld bytes; inflate %ld blocks, %ld bytes (%ld before inflate())",
		 g_cal_deflate.blocks, g_cal_deflate.bytes,
		 g_cal_inflate.blocks, g_cal_inflate.bytes,
		 g_cal_inflate_init.bytes);
	line_add(&l, "; rounds %ld; pid %ld; zlib %s", rounds, (long)getpid(),
		 zlibVersion());
	if (g_count_bytes) {
		int ok = g_cnt_ended_residual_blocks == 0 &&
			 g_cnt_ended_residual_bytes == 0 &&
			 (g_defl_leaked == 0 ||
			  (g_cnt_defl_min.bytes == g_cal_deflate.bytes &&
			   g_cnt_defl_max.bytes == g_cal_deflate.bytes &&
			   g_cnt_defl_min.blocks == g_cal_deflate.blocks &&
			   g_cnt_defl_max.blocks == g_cal_deflate.blocks)) &&
			 (g_infl_leaked == 0 ||
			  (g_cnt_infl_min.bytes == g_cal_inflate.bytes &&
			   g_cnt_infl_max.bytes == g_cal_inflate.bytes &&
			   g_cnt_infl_min.blocks == g_cal_inflate.blocks &&
			   g_cnt_infl_max.blocks == g_cal_inflate.blocks));

		line_add(&l, "; count-bytes: leaked deflate stream %ld..%ld blocks, %ld..%ld bytes",
			 g_cnt_defl_min.blocks, g_cnt_defl_max.blocks,
			 g_cnt_defl_min.bytes, g_cnt_defl_max.bytes);
		line_add(&l, ", leaked inflate stream %ld..%ld blocks, %ld..%ld bytes",
			 g_cnt_infl_min.blocks, g_cnt_infl_max.blocks,
			 g_cnt_infl_min.bytes, g_cnt_infl_max.bytes);
		line_add(&l, ", ended inflate stream peak %ld..%ld bytes",
			 g_cnt_ended_infl_peak_min < 0 ? 0 : g_cnt_ended_infl_peak_min,
			 g_cnt_ended_infl_peak_max);
		line_add(&l, ", left in ended streams %ld blocks, %ld bytes",
			 g_cnt_ended_residual_blocks, g_cnt_ended_residual_bytes);
		line_add(&l, ", zalloc=%ld zfree=%ld; %s", g_cnt_allocs,
			 g_cnt_frees, ok ? "matches calibration" : "MISMATCH");
		if (!ok) {
			line_emit(&l);
			return 1;
		}
	}
	line_emit(&l);

	sleep_ms(o.hold_ms);
	return 0;
}
