/* jnizipuser.c: calls the JNI zlib entry points of a libzip.so that bundles
 * zlib (jnizip.c) the way java.util.zip does, leaking some streams.
 *
 * Ground truth: inflate_leaky leaks 7 inflate streams, deflate_leaky 3
 * deflate streams; streams_closed opens and ends 5 of each. The program
 * never calls the system libz. */
#include <stdint.h>
#include <stdio.h>

typedef int64_t jlong;
typedef int32_t jint;
typedef uint8_t jboolean;

jlong Java_java_util_zip_Inflater_init(void *env, void *cls, jboolean nowrap);
void Java_java_util_zip_Inflater_end(void *env, void *cls, jlong addr);
jlong Java_java_util_zip_Deflater_init(void *env, void *cls, jint level, jint strategy, jboolean nowrap);
void Java_java_util_zip_Deflater_end(void *env, void *cls, jlong addr);

static jlong kept[64];
static int nkept;

__attribute__((noinline)) void inflate_leaky(int n)
{
	for (int i = 0; i < n; i++)
		kept[nkept++] = Java_java_util_zip_Inflater_init(NULL, NULL, 1);
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

int main(void)
{
	inflate_leaky(7);
	deflate_leaky(3);
	streams_closed(5);
	for (int i = 0; i < nkept; i++)
		if (kept[i] == 0) {
			fprintf(stderr, "jnizipuser: init failed\n");
			return 1;
		}
	fprintf(stderr, "jnizipuser: leaked 7 inflate and 3 deflate streams; closed 5 of each\n");
	return 0;
}
