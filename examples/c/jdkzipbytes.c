/* jdkzipbytes.c: the bytes a JDK's java.util.zip streams hold, counted by
 * the allocator: an oracle for leakscope's computed stream bytes that
 * shares nothing with them.
 *
 * Usage: jdkzipbytes JAVA_HOME/lib/libzip.so
 *
 * It loads the JDK's own libzip.so (and, through it, the zlib that JDK
 * uses: the system libz.so.1, or the copy compiled into libzip.so) and
 * calls java.util.zip's JNI entry points as Inflater and Deflater do:
 * Inflater.init(nowrap = true), as GZIPInputStream does, then one
 * inflateBufferBuffer of a raw deflate record (zlib allocates the window
 * on the first read that produces output), and Deflater.init(level -1,
 * strategy 0, nowrap = true), as GZIPOutputStream does. The program
 * defines malloc, calloc and realloc itself (the executable's symbols come
 * first for every library it loads) and counts the blocks each call
 * allocates. It prints, one a line:
 *
 *   zstream BYTES         the JNI init's calloc of the z_stream (the handle)
 *   inflate_init BYTES    what zlib allocated in Inflater.init, z_stream excluded
 *   inflate_read BYTES    what zlib allocated in the first read (the window)
 *   deflate_init BYTES    what zlib allocated in Deflater.init, z_stream excluded
 *   zlib VERSION          zlibVersion() where libzip.so can tell (else "?")
 *
 * None of the JNI bodies called here touch the JNIEnv on success, so a
 * null one is passed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int64_t jlong;
typedef int32_t jint;
typedef uint8_t jboolean;

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);

static int counting;
static size_t counted;
static struct {
	void *p;
	size_t n;
} blocks[16];
static int nblocks;

static void note(void *p, size_t n)
{
	if (counting && p) {
		counted += n;
		if (nblocks < 16)
			blocks[nblocks].p = p, blocks[nblocks].n = n, nblocks++;
	}
}

static void start(void) { counting = 1, counted = 0, nblocks = 0; }

/* sizeof the block at p among those counted since start(), 0 if none. */
static size_t block(jlong p)
{
	for (int i = 0; i < nblocks; i++)
		if ((jlong)(uintptr_t)blocks[i].p == p)
			return blocks[i].n;
	return 0;
}

void *malloc(size_t n)
{
	void *p = __libc_malloc(n);
	note(p, n);
	return p;
}

void *calloc(size_t k, size_t n)
{
	void *p = __libc_calloc(k, n);
	note(p, k * n);
	return p;
}

void *realloc(void *old, size_t n)
{
	void *p = __libc_realloc(old, n);
	note(p, n); /* zlib never reallocs its stream memory */
	return p;
}

/* A raw deflate record (windowBits -15) of "leakscope oracle " x 64. */
static const unsigned char record[] = {
	203, 73, 77, 204, 46, 78, 206, 47, 72, 85, 200, 47, 74, 76, 206, 73,
	85,  200, 25, 21, 24, 21, 24, 21, 24, 21, 32, 78,  0,   0,
};

static void *need(void *lib, const char *name)
{
	void *f = dlsym(lib, name);
	if (!f) {
		fprintf(stderr, "jdkzipbytes: %s: %s\n", name, dlerror());
		exit(2);
	}
	return f;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: jdkzipbytes JAVA_HOME/lib/libzip.so\n");
		return 2;
	}
	void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "jdkzipbytes: %s\n", dlerror());
		return 2;
	}
	jlong (*inflater_init)(void *, void *, jboolean) = need(lib, "Java_java_util_zip_Inflater_init");
	jlong (*inflate_bb)(void *, void *, jlong, jlong, jint, jlong, jint) =
		need(lib, "Java_java_util_zip_Inflater_inflateBufferBuffer");
	jlong (*deflater_init)(void *, void *, jint, jint, jboolean) = need(lib, "Java_java_util_zip_Deflater_init");

	/* Inflater.init: the z_stream is the block whose address it returns. */
	start();
	jlong strm = inflater_init(NULL, NULL, 1);
	counting = 0;
	size_t zs = block(strm);
	if (!strm || !zs) {
		fprintf(stderr, "jdkzipbytes: Inflater.init failed or allocated no z_stream\n");
		return 1;
	}
	printf("zstream %zu\n", zs);
	printf("inflate_init %zu\n", counted - zs);

	unsigned char out[4096];
	start();
	jlong r = inflate_bb(NULL, NULL, strm, (jlong)(uintptr_t)record, sizeof record, (jlong)(uintptr_t)out,
			     sizeof out);
	counting = 0;
	if (((r >> 31) & 0x7fffffff) == 0) {
		fprintf(stderr, "jdkzipbytes: the first read produced no output (%#llx)\n", (unsigned long long)r);
		return 1;
	}
	printf("inflate_read %zu\n", counted);

	start();
	jlong d = deflater_init(NULL, NULL, -1, 0, 1);
	counting = 0;
	if (!d || block(d) != zs) {
		fprintf(stderr, "jdkzipbytes: Deflater.init failed\n");
		return 1;
	}
	printf("deflate_init %zu\n", counted - block(d));

	const char *(*version)(void) = dlsym(lib, "zlibVersion");
	if (!version)
		version = dlsym(RTLD_DEFAULT, "zlibVersion");
	printf("zlib %s\n", version ? version() : "?");
	return 0;
}
