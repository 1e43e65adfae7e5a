/*
 * mmaps.c - leakscope example target: mappings and threads it never
 * releases, beside mapping churn that releases everything (leakscope
 * --maps: the mmap.anon, mmap.file and thread kinds).
 *
 * Ground truth (pages of 4 KiB), once the --done-file exists:
 *
 *   site (function)   kind        live   bytes     how
 *   keep_anon         mmap.anon      5   320 KiB   5 x mmap 64 KiB, never unmapped
 *   keep_file         mmap.file      3    48 KiB   3 x mmap of a 16 KiB file
 *   keep_part         mmap.anon      1    24 KiB   mmap 8 pages, munmap the middle 2
 *   keep_remapped     mmap.anon      1    24 KiB   mmap 2 pages, mremap (moved) to 6
 *   keep_fixed        mmap.anon      1    12 KiB   mmap 4 pages, 1 replaced by...
 *   fixed_over        mmap.anon      1     4 KiB   ...a MAP_FIXED page over the 2nd
 *   start_parked      thread         3   768 KiB   3 threads on 256 KiB stacks it
 *                                                  maps itself, parked in pause()
 *   churn             mmap.anon      0       0     200 mappings: partial munmaps,
 *                                                  then the rest; mremap grow, munmap
 *
 * The parked threads' stack mappings count as their threads', not as
 * mmap.anon. Nothing else maps while traced (glibc's malloc makes no
 * mapping for these small blocks).
 *
 * Usage: mmaps --file PATH --wait-file PATH --done-file PATH
 *
 * Build:
 *   gcc -O2 -g -Wall -pthread -fno-omit-frame-pointer -o mmaps mmaps.c
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAGE 4096

static void die(const char *what) {
	perror(what);
	exit(1);
}

static void *map_anon(size_t len) {
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die("mmap");
	return p;
}

__attribute__((noinline)) static void keep_anon(void) {
	for (int i = 0; i < 5; i++)
		((char *)map_anon(64 << 10))[0] = 1;
}

__attribute__((noinline)) static void keep_file(const char *path) {
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || ftruncate(fd, 16 << 10))
		die("file");
	for (int i = 0; i < 3; i++)
		if (mmap(NULL, 16 << 10, PROT_READ, MAP_SHARED, fd, 0) == MAP_FAILED)
			die("mmap file");
	close(fd);
}

__attribute__((noinline)) static void keep_part(void) {
	char *p = map_anon(8 * PAGE);
	if (munmap(p + 3 * PAGE, 2 * PAGE))
		die("munmap");
}

__attribute__((noinline)) static void keep_remapped(void) {
	char *p = map_anon(2 * PAGE);
	/* a page mapped right after it keeps mremap from growing in place */
	char *block = mmap(p + 2 * PAGE, PAGE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (mremap(p, 2 * PAGE, 6 * PAGE, MREMAP_MAYMOVE) == MAP_FAILED)
		die("mremap");
	if (block != MAP_FAILED)
		munmap(block, PAGE);
}

__attribute__((noinline)) static void fixed_over(char *p) {
	if (mmap(p + PAGE, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
		die("mmap fixed");
}

__attribute__((noinline)) static void keep_fixed(void) {
	fixed_over(map_anon(4 * PAGE));
}

__attribute__((noinline)) static void churn(void) {
	for (int i = 0; i < 100; i++) {
		char *p = map_anon(8 * PAGE);
		munmap(p + 2 * PAGE, 2 * PAGE);
		munmap(p + 6 * PAGE, 2 * PAGE);
		munmap(p, 2 * PAGE);
		munmap(p + 4 * PAGE, 2 * PAGE);
		char *q = map_anon(PAGE);
		q = mremap(q, PAGE, 16 * PAGE, MREMAP_MAYMOVE);
		if (q == MAP_FAILED)
			die("mremap");
		munmap(q, 16 * PAGE);
	}
}

static void *parked(void *arg) {
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

__attribute__((noinline)) static void start_parked(void) {
	for (int i = 0; i < 3; i++) {
		pthread_attr_t a;
		pthread_t t;
		pthread_attr_init(&a);
		if (pthread_attr_setstack(&a, map_anon(256 << 10), 256 << 10) || pthread_create(&t, &a, parked, NULL))
			die("pthread_create");
	}
}

int main(int argc, char **argv) {
	const char *file = NULL, *wait = NULL, *done = NULL;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--file"))
			file = argv[i + 1];
		else if (!strcmp(argv[i], "--wait-file"))
			wait = argv[i + 1];
		else if (!strcmp(argv[i], "--done-file"))
			done = argv[i + 1];
	}
	if (!file || !wait || !done) {
		fprintf(stderr, "usage: mmaps --file PATH --wait-file PATH --done-file PATH\n");
		return 2;
	}
	while (access(wait, F_OK))
		usleep(10000);
	keep_anon();
	keep_file(file);
	keep_part();
	keep_remapped();
	keep_fixed();
	churn();
	start_parked();
	int fd = open(done, O_WRONLY | O_CREAT, 0600);
	if (fd >= 0)
		close(fd);
	for (;;)
		pause();
}
