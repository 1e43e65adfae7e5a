/*
 * memparts.c - leakscope example target: memory of known kinds, for the
 * memory breakdown (RSS = its parts).
 *
 * Ground truth with default arguments, once "ready" is on stderr:
 *
 *   what                                   bytes resident   breakdown part
 *   64 blocks of malloc(1 MiB), memset        64 MiB        malloc outstanding
 *     (glibc maps each on its own: an mmapped chunk)
 *   one anonymous mmap of 8 MiB, memset        8 MiB        unexplained (no
 *                                                            mmap probe yet)
 *   a 4 MiB file it writes, maps and reads     4 MiB        mapped files
 *     (its 1 MiB write buffer, in .bss, is data of loaded objects)
 *   4 threads, each touching 256 KiB of its   ~1 MiB+       thread stacks
 *     stack, then blocked in pause()
 *
 * plus the program's and libc's code and data, the allocator's own
 * bookkeeping and the main thread's stack. Nothing is freed: the blocks
 * stay outstanding until the process is killed.
 *
 * Usage: memparts [--malloc-mib N] [--anon-mib M] [--file-mib F] [--file PATH]
 *                 [--threads T] [--wait-file PATH]
 *
 * Build:
 *   gcc -O2 -g -Wall -pthread -o memparts memparts.c
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void *blocked(void *arg) {
	volatile char buf[256 << 10];
	for (size_t i = 0; i < sizeof buf; i += 512)
		buf[i] = 1;
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

int main(int argc, char **argv) {
	long malloc_mib = 64, anon_mib = 8, file_mib = 4, threads = 4;
	const char *file = "memparts.data", *wait_file = NULL;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--malloc-mib")) malloc_mib = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--anon-mib")) anon_mib = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--file-mib")) file_mib = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--file")) file = argv[i + 1];
		else if (!strcmp(argv[i], "--threads")) threads = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--wait-file")) wait_file = argv[i + 1];
		else { fprintf(stderr, "memparts: unknown flag %s\n", argv[i]); return 2; }
	}
	while (wait_file && access(wait_file, F_OK) != 0)
		usleep(10000);

	static void *blocks[1 << 16];
	for (long i = 0; i < malloc_mib && i < (1 << 16); i++) {
		blocks[i] = malloc(1 << 20);
		memset(blocks[i], 1, 1 << 20);
	}
	if (anon_mib > 0) {
		char *p = mmap(NULL, anon_mib << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) { perror("mmap"); return 1; }
		memset(p, 1, anon_mib << 20);
	}
	if (file_mib > 0) {
		int fd = open(file, O_RDWR | O_CREAT | O_TRUNC, 0600);
		static char chunk[1 << 20];
		memset(chunk, 2, sizeof chunk);
		for (long i = 0; fd >= 0 && i < file_mib; i++)
			if (write(fd, chunk, sizeof chunk) != sizeof chunk) { perror(file); return 1; }
		if (fd < 0) { perror(file); return 1; }
		char *p = mmap(NULL, file_mib << 20, PROT_READ, MAP_SHARED, fd, 0);
		if (p == MAP_FAILED) { perror("mmap file"); return 1; }
		volatile long sum = 0;
		for (long i = 0; i < file_mib << 20; i += 4096)
			sum += p[i];
		close(fd);
	}
	for (long i = 0; i < threads; i++) {
		pthread_t t;
		if (pthread_create(&t, NULL, blocked, NULL) != 0) { perror("pthread_create"); return 1; }
	}
	usleep(100000);
	fprintf(stderr, "memparts: ready, pid %d\n", getpid());
	for (;;)
		pause();
}
