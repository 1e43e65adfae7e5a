// exitwith leaks N blocks of 100 bytes, then ends as told: "exit CODE",
// "signal SIG" (raised on itself), or "sleep MS" (with "ignore-term"
// first, SIGTERM is ignored). For run's exit-status tests.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void *volatile keep[1000];

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 0;
	for (int i = 0; i < n && i < 1000; i++)
		keep[i] = malloc(100);
	printf("exitwith: leaked %d\n", n);
	fflush(stdout);
	for (int i = 2; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : "0";
		if (strcmp(argv[i], "ignore-term") == 0) {
			signal(SIGTERM, SIG_IGN);
			continue;
		}
		i++;
		if (strcmp(argv[i - 1], "exit") == 0) {
			exit(atoi(v));
		} else if (strcmp(argv[i - 1], "signal") == 0) {
			signal(atoi(v), SIG_DFL);
			raise(atoi(v));
		} else if (strcmp(argv[i - 1], "sleep") == 0) {
			long ms = atol(v);
			struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
			while (nanosleep(&ts, &ts) != 0)
				;
		}
	}
	return 0;
}
