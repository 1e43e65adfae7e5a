/*
 * resources.c - leakscope example target for the resource pairs: stdio
 * FILEs, directories, bzip2 streams, OpenSSL objects and a user-declared
 * pair (libpool.so: pool_get/pool_open ↔ pool_put). Each kind is acquired
 * and released properly many times, and leaked an exact number of times
 * from one named function. See examples/README.md for the table.
 *
 *   gcc -O2 -g -fno-omit-frame-pointer -shared -fPIC -o libpool.so examples/c/pool.c
 *   gcc -O2 -g -fno-omit-frame-pointer -o resources examples/c/resources.c \
 *       -L. -Wl,-rpath,'$ORIGIN' -lpool -lbz2 -lssl -lcrypto
 */
#include <bzlib.h>
#include <dirent.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noipa))

struct pool_conn;
struct pool_conn *pool_get(void);
int pool_open(struct pool_conn **out);
void pool_put(struct pool_conn *c);

/* Ground truth. */
enum {
	FILES_CLOSED = 10, FILES_LEAKED = 3,
	DIRS_CLOSED = 5, DIRS_LEAKED = 2,
	BZ_COMPRESS_ENDED = 4, BZ_COMPRESS_LEAKED = 1, BZ_DECOMPRESS_ENDED = 2,
	CIPHERS_FREED = 5, CIPHERS_LEAKED = 2,
	SSL_FREED = 3, SSL_LEAKED = 1,
	POOL_PUT = 6, POOL_GET_LEAKED = 4, POOL_OPEN_LEAKED = 1,
};

static void *volatile sink[64];
static int nsink;

static void keep(void *p) { sink[nsink++ % 64] = p; }

NOINLINE static void files_closed(void)
{
	for (int i = 0; i < FILES_CLOSED; i++) {
		FILE *f = fopen("/dev/null", "r");
		if (!f) abort();
		if (i == 0) { /* reopen replaces the stream: still one to close */
			f = freopen("/dev/null", "r", f);
			if (!f) abort();
		}
		fgetc(f);
		fclose(f);
	}
}

NOINLINE static void open_config_leaky(void)
{
	for (int i = 0; i < FILES_LEAKED; i++) {
		FILE *f = fopen("/dev/null", "r");
		if (!f) abort();
		keep(f);
	}
}

NOINLINE static void dirs_closed(void)
{
	for (int i = 0; i < DIRS_CLOSED; i++) {
		DIR *d = opendir("/");
		if (!d) abort();
		readdir(d);
		closedir(d);
	}
}

NOINLINE static void scan_dir_leaky(void)
{
	for (int i = 0; i < DIRS_LEAKED; i++) {
		DIR *d = opendir("/");
		if (!d) abort();
		keep(d);
	}
}

static bz_stream bz_leaked[BZ_COMPRESS_LEAKED];

NOINLINE static void bzip_streams(void)
{
	for (int i = 0; i < BZ_COMPRESS_ENDED; i++) {
		bz_stream s;
		memset(&s, 0, sizeof(s));
		if (BZ2_bzCompressInit(&s, 1, 0, 0) != BZ_OK) abort();
		BZ2_bzCompressEnd(&s);
	}
	for (int i = 0; i < BZ_DECOMPRESS_ENDED; i++) {
		bz_stream s;
		memset(&s, 0, sizeof(s));
		if (BZ2_bzDecompressInit(&s, 0, 0) != BZ_OK) abort();
		BZ2_bzDecompressEnd(&s);
	}
}

NOINLINE static void bz_leaky(void)
{
	for (int i = 0; i < BZ_COMPRESS_LEAKED; i++)
		if (BZ2_bzCompressInit(&bz_leaked[i], 1, 0, 0) != BZ_OK) abort();
}

NOINLINE static void ciphers(void)
{
	for (int i = 0; i < CIPHERS_FREED; i++) {
		EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
		if (!c) abort();
		EVP_CIPHER_CTX_free(c);
	}
}

NOINLINE static void cipher_leaky(void)
{
	for (int i = 0; i < CIPHERS_LEAKED; i++) {
		EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
		if (!c) abort();
		keep(c);
	}
}

NOINLINE static void ssl_objects(SSL_CTX *ctx)
{
	for (int i = 0; i < SSL_FREED; i++) {
		SSL *s = SSL_new(ctx);
		if (!s) abort();
		SSL_free(s);
	}
}

NOINLINE static void ssl_leaky(SSL_CTX *ctx)
{
	for (int i = 0; i < SSL_LEAKED; i++) {
		SSL *s = SSL_new(ctx);
		if (!s) abort();
		keep(s);
	}
}

NOINLINE static void pool_returned(void)
{
	for (int i = 0; i < POOL_PUT; i++) {
		struct pool_conn *c = pool_get();
		if (!c) abort();
		pool_put(c);
	}
}

NOINLINE static void borrow_leaky(void)
{
	for (int i = 0; i < POOL_GET_LEAKED; i++)
		keep(pool_get());
}

NOINLINE static void open_leaky(void)
{
	for (int i = 0; i < POOL_OPEN_LEAKED; i++) {
		struct pool_conn *c;
		if (pool_open(&c) != 0) abort();
		keep(c);
	}
}

static void wait_file(const char *path)
{
	struct stat st;
	while (stat(path, &st) != 0)
		usleep(10000);
}

int main(int argc, char **argv)
{
	long hold_ms = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--wait-file") && i + 1 < argc)
			wait_file(argv[++i]);
		else if (!strcmp(argv[i], "--hold") && i + 1 < argc)
			hold_ms = atol(argv[++i]);
		else {
			fprintf(stderr, "usage: resources [--wait-file PATH] [--hold MS]\n");
			return 2;
		}
	}
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	if (!ctx) abort();

	files_closed();
	open_config_leaky();
	dirs_closed();
	scan_dir_leaky();
	bzip_streams();
	bz_leaky();
	ciphers();
	cipher_leaky();
	ssl_objects(ctx);
	ssl_leaky(ctx);
	pool_returned();
	borrow_leaky();
	open_leaky();

	fprintf(stderr, "resources: leaked %d stdio.file in open_config_leaky, %d dirent.dir in scan_dir_leaky, "
		"%d bzip2.compress in bz_leaky, %d openssl.cipher_ctx in cipher_leaky, %d openssl.ssl in ssl_leaky, "
		"%d pool.conn in borrow_leaky, %d pool.conn in open_leaky\n",
		FILES_LEAKED, DIRS_LEAKED, BZ_COMPRESS_LEAKED, CIPHERS_LEAKED, SSL_LEAKED, POOL_GET_LEAKED, POOL_OPEN_LEAKED);
	usleep(hold_ms * 1000);
	return 0;
}
