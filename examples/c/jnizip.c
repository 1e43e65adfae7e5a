/* jnizip.c: a stand-in for a JDK's libzip.so built with its own zlib
 * (--with-zlib=bundled, as some JDK builds are): the JNI entry points of
 * java.util.zip.Inflater and Deflater, with zlib linked in statically and
 * hidden, so the library exports no zlib function to probe. Built as
 * libzip.so by probe/jnizip_linux_test.go (gcc -shared ... -l:libz.a
 * -Wl,--exclude-libs,ALL, then strip). The bodies follow OpenJDK 17's
 * Inflater.c and Deflater.c; the JNIEnv and class arguments are unused. */
#include <stdint.h>
#include <stdlib.h>
#include <zlib.h>

typedef int64_t jlong;
typedef int32_t jint;
typedef uint8_t jboolean;

jlong Java_java_util_zip_Inflater_init(void *env, void *cls, jboolean nowrap)
{
	z_stream *strm = calloc(1, sizeof(z_stream));
	if (strm == NULL)
		return 0;
	if (inflateInit2(strm, nowrap ? -MAX_WBITS : MAX_WBITS) != Z_OK) {
		free(strm);
		return 0;
	}
	return (jlong)(intptr_t)strm;
}

/* Inflater.inflateBufferBuffer: inflate from and into native memory (a
 * direct ByteBuffer); the result packs the bytes read and written and
 * whether the stream ended, as OpenJDK 17's doInflate does. */
jlong Java_java_util_zip_Inflater_inflateBufferBuffer(void *env, void *this, jlong addr, jlong inputAddress,
							jint inputLen, jlong outputAddress, jint outputLen)
{
	z_stream *strm = (z_stream *)(intptr_t)addr;
	strm->next_in = (Bytef *)(intptr_t)inputAddress;
	strm->avail_in = (uInt)inputLen;
	strm->next_out = (Bytef *)(intptr_t)outputAddress;
	strm->avail_out = (uInt)outputLen;
	int ret = inflate(strm, Z_PARTIAL_FLUSH);
	if (ret != Z_OK && ret != Z_STREAM_END && ret != Z_BUF_ERROR)
		return -1;
	jint read = inputLen - (jint)strm->avail_in, written = outputLen - (jint)strm->avail_out;
	return ((jlong)(ret == Z_STREAM_END) << 62) | ((jlong)written << 31) | (jlong)read;
}

void Java_java_util_zip_Inflater_end(void *env, void *cls, jlong addr)
{
	z_stream *strm = (z_stream *)(intptr_t)addr;
	inflateEnd(strm);
	free(strm);
}

jlong Java_java_util_zip_Deflater_init(void *env, void *cls, jint level, jint strategy, jboolean nowrap)
{
	z_stream *strm = calloc(1, sizeof(z_stream));
	if (strm == NULL)
		return 0;
	if (deflateInit2(strm, level, Z_DEFLATED, nowrap ? -MAX_WBITS : MAX_WBITS, 8, strategy) != Z_OK) {
		free(strm);
		return 0;
	}
	return (jlong)(intptr_t)strm;
}

void Java_java_util_zip_Deflater_end(void *env, void *cls, jlong addr)
{
	z_stream *strm = (z_stream *)(intptr_t)addr;
	deflateEnd(strm);
	free(strm);
}
