/* jnizipuser.c: calls the JNI zlib entry points of a libzip.so that bundles
 * zlib (jnizip.c) the way java.util.zip does, leaking some streams.
 *
 * Ground truth: inflate_leaky leaks 7 inflate streams, deflate_leaky 3
 * deflate streams; streams_closed opens and ends 5 of each. The first 4 of
 * the leaked inflate streams read part of a record (inflateBufferBuffer),
 * so zlib gave each its 32 KiB window; the other 3 have none. The program
 * never calls the system libz.
 *
 * With --hold it then waits, its streams still live, until a signal ends
 * it (SIGTERM or SIGINT: exit 0). */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef int64_t jlong;
typedef int32_t jint;
typedef uint8_t jboolean;

jlong Java_java_util_zip_Inflater_init(void *env, void *cls, jboolean nowrap);
jlong Java_java_util_zip_Inflater_inflateBufferBuffer(void *env, void *this, jlong addr, jlong inputAddress,
							jint inputLen, jlong outputAddress, jint outputLen);
void Java_java_util_zip_Inflater_end(void *env, void *cls, jlong addr);
jlong Java_java_util_zip_Deflater_init(void *env, void *cls, jint level, jint strategy, jboolean nowrap);
void Java_java_util_zip_Deflater_end(void *env, void *cls, jlong addr);

static jlong kept[64];
static int nkept;

/* A raw deflate record (nowrap): one stored block of RECORD bytes. */
#define RECORD 1000
static unsigned char record[5 + RECORD] = {1, RECORD & 0xff, RECORD >> 8, ~RECORD & 0xff, (~RECORD >> 8) & 0xff};
static unsigned char out[100];

__attribute__((noinline)) void inflate_leaky(int n, int read)
{
	for (int i = 0; i < n; i++) {
		jlong s = Java_java_util_zip_Inflater_init(NULL, NULL, 1);
		kept[nkept++] = s;
		/* The first 100 bytes of the record: the stream stays open. */
		if (s && i < read &&
		    Java_java_util_zip_Inflater_inflateBufferBuffer(NULL, NULL, s, (jlong)(intptr_t)record, sizeof(record),
								(jlong)(intptr_t)out, sizeof(out)) < 0) {
			fprintf(stderr, "jnizipuser: inflate failed\n");
			kept[nkept - 1] = 0;
		}
	}
}

__attribute__((noinline)) void deflate_leaky(int n)
{
	for (int i = 0; i < n; i++)
		kept[nkept++] = Java_java_util_zip_Deflater_init(NULL, NULL, 6, 0, 1);
}

__attribute__((noinline)) void streams_closed(int n)
{
	for (int i = 0; i < n; i++) {
		Java_java_util_zip_Inflater_end(NULL, NULL, Java_java_util_zip_Inflater_init(NULL, NULL, 0));
		Java_java_util_zip_Deflater_end(NULL, NULL, Java_java_util_zip_Deflater_init(NULL, NULL, 1, 0, 0));
	}
}

static void done(int sig)
{
	(void)sig;
	_exit(0);
}

int main(int argc, char **argv)
{
	int hold = argc > 1 && strcmp(argv[1], "--hold") == 0;
	if (argc > 1 && !hold) {
		fprintf(stderr, "usage: jnizipuser [--hold]\n");
		return 2;
	}
	signal(SIGTERM, done);
	signal(SIGINT, done);
	inflate_leaky(7, 4);
	deflate_leaky(3);
	streams_closed(5);
	for (int i = 0; i < nkept; i++)
		if (kept[i] == 0) {
			fprintf(stderr, "jnizipuser: init failed\n");
			return 1;
		}
	fprintf(stderr, "jnizipuser: leaked 7 inflate (4 with a window) and 3 deflate streams; closed 5 of each\n");
	while (hold)
		pause();
	return 0;
}
