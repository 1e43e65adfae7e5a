// dlstorm loads and unloads libz N times (each a dlopen/dlclose the
// dynamic linker announces through _dl_debug_state, where leakscope run
// stops the process until its tables are updated), sleeps MS
// milliseconds, then prints "dlstorm: done N" and exits through exit():
// the stops a killed leakscope must never leave behind.
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 100;
	int ms = argc > 2 ? atoi(argv[2]) : 0;
	for (int i = 0; i < n; i++) {
		void *h = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
		if (!h) {
			fprintf(stderr, "dlstorm: dlopen: %s\n", dlerror());
			return 1;
		}
		free(malloc(64));
		dlclose(h);
	}
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
	printf("dlstorm: done %d\n", n);
	exit(0);
}
