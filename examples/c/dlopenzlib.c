/* dlopenzlib.c: loads zlib with dlopen at run time (it is not linked in)
 * and uses it at once, the way a JVM loads libzip.so or a plugin host loads
 * a codec: the library is not mapped when tracing starts.
 *
 * Ground truth: open_leaky leaks --leaked inflate streams (default 5),
 * open_closed opens and ends --closed (default 3). The first stream is
 * created right after dlopen returns.
 *
 * Build (needs zlib1g-dev for the header only):
 *   gcc -O2 -g -Wall -Wextra -fno-omit-frame-pointer -o dlopenzlib dlopenzlib.c -ldl
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

typedef int (*init_fn)(z_streamp, const char *, int);
typedef int (*end_fn)(z_streamp);

static init_fn init;
static end_fn end;
static z_stream kept[64];

__attribute__((noinline)) static void open_leaky(int n)
{
	for (int i = 0; i < n; i++)
		if (init(&kept[i], ZLIB_VERSION, (int)sizeof(z_stream)) != Z_OK)
			exit(1);
}

__attribute__((noinline)) static void open_closed(int n)
{
	for (int i = 0; i < n; i++) {
		z_stream s = {0};
		if (init(&s, ZLIB_VERSION, (int)sizeof(z_stream)) != Z_OK)
			exit(1);
		end(&s);
	}
}

int main(int argc, char **argv)
{
	int leaked = 5, closed = 3;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--leaked"))
			leaked = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--closed"))
			closed = atoi(argv[i + 1]);
	}
	if (leaked < 0 || leaked > 64) {
		fprintf(stderr, "dlopenzlib: --leaked must be 0..64\n");
		return 2;
	}
	void *z = dlopen("libz.so.1", RTLD_NOW);
	if (!z) {
		fprintf(stderr, "dlopenzlib: %s\n", dlerror());
		return 1;
	}
	init = (init_fn)dlsym(z, "inflateInit_");
	end = (end_fn)dlsym(z, "inflateEnd");
	if (!init || !end) {
		fprintf(stderr, "dlopenzlib: %s\n", dlerror());
		return 1;
	}
	open_leaky(leaked);
	open_closed(closed);
	fprintf(stderr, "dlopenzlib: leaked %d inflate streams in open_leaky; closed %d in open_closed\n", leaked, closed);
	return 0;
}
