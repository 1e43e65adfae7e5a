// latezlib waits until the file GATE exists, then loads libz with dlopen
// and at once opens N inflate streams it never ends: the calls a tracer
// attached before the load must see from the first, then holds MS ms.
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: latezlib GATE N MS\n");
		return 2;
	}
	int n = atoi(argv[2]);
	fprintf(stderr, "latezlib: waiting\n");
	while (access(argv[1], F_OK) != 0)
		usleep(2000);
	void *h = dlopen("libz.so.1", RTLD_NOW);
	if (!h) {
		fprintf(stderr, "latezlib: %s\n", dlerror());
		return 1;
	}
	int (*init)(z_streamp, const char *, int) = (int (*)(z_streamp, const char *, int))dlsym(h, "inflateInit_");
	const char *(*version)(void) = (const char *(*)(void))dlsym(h, "zlibVersion");
	for (int i = 0; i < n; i++) {
		z_stream *s = calloc(1, sizeof *s);
		if (init(s, version(), (int)sizeof *s) != Z_OK)
			return 1;
	}
	fprintf(stderr, "latezlib: leaked %d\n", n);
	usleep(atoi(argv[3]) * 1000);
	return 0;
}
