/*
 * handoff.c - blocks allocated by one thread and freed by another, while
 * thousands are live at once.
 *
 * P producer threads each allocate N blocks from handoff_alloc(), block k
 * of 16 + (k * 37) % 241 bytes, and pass them through one ring of R slots
 * (a mutex and two condition variables) to C consumer threads, which free
 * them. A producer keeps every block whose k is a multiple of 1000
 * instead (it never passes it on), so these stay live. The ring lets up
 * to R blocks wait at once, so that a tracer's tables see thousands of
 * blocks come and go, freed on other threads (and CPUs) than their malloc.
 *
 * Ground truth, exact: at exit the blocks live from handoff_alloc are the
 * kept ones, P * ceil(N / 1000) of them, of
 * P * sum over kept k of (16 + (k * 37) % 241) bytes; the program prints
 * both. Defaults P 2, C 2, N 200000, R 3000: 400 blocks.
 *
 * Usage: handoff [--producers P] [--consumers C] [--blocks N] [--ring R]
 */
#include <pthread.h>
#include "common.h"

#define MAX_RING 100000

static void *ring[MAX_RING];
static long ring_size = 3000, head, count, producers_left;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t not_full = PTHREAD_COND_INITIALIZER, not_empty = PTHREAD_COND_INITIALIZER;
static long blocks_each = 200000;
static void **kept;
static long kept_each;

EXAMPLE_NOINLINE void *handoff_alloc(size_t n)
{
	void *p = malloc(n);
	if (!p)
		abort();
	memset(p, 0xa5, n);
	return p;
}

static size_t block_size(long k)
{
	return 16 + (size_t)(k * 37) % 241;
}

static void *producer(void *arg)
{
	long id = (long)arg;
	for (long k = 0; k < blocks_each; k++) {
		void *p = handoff_alloc(block_size(k));
		if (k % 1000 == 0) {
			kept[id * kept_each + k / 1000] = p;
			continue;
		}
		pthread_mutex_lock(&lock);
		while (count == ring_size)
			pthread_cond_wait(&not_full, &lock);
		ring[(head + count) % ring_size] = p;
		count++;
		pthread_cond_signal(&not_empty);
		pthread_mutex_unlock(&lock);
	}
	pthread_mutex_lock(&lock);
	producers_left--;
	pthread_cond_broadcast(&not_empty);
	pthread_mutex_unlock(&lock);
	return NULL;
}

static void *consumer(void *arg)
{
	(void)arg;
	for (;;) {
		pthread_mutex_lock(&lock);
		while (count == 0 && producers_left > 0)
			pthread_cond_wait(&not_empty, &lock);
		if (count == 0) {
			pthread_mutex_unlock(&lock);
			return NULL;
		}
		void *p = ring[head];
		head = (head + 1) % ring_size;
		count--;
		pthread_cond_signal(&not_full);
		pthread_mutex_unlock(&lock);
		free(p);
	}
}

int main(int argc, char **argv)
{
	long np = 2, nc = 2;
	for (int i = 1; i + 1 < argc; i += 2) {
		long v = atol(argv[i + 1]);
		if (strcmp(argv[i], "--producers") == 0)
			np = v;
		else if (strcmp(argv[i], "--consumers") == 0)
			nc = v;
		else if (strcmp(argv[i], "--blocks") == 0)
			blocks_each = v;
		else if (strcmp(argv[i], "--ring") == 0)
			ring_size = v;
		else
			return 2;
	}
	if (argc % 2 == 0 || np < 1 || np > 64 || nc < 1 || nc > 64 || blocks_each < 1 || ring_size < 1 ||
	    ring_size > MAX_RING)
		return 2;
	kept_each = (blocks_each + 999) / 1000;
	kept = calloc((size_t)(np * kept_each), sizeof(*kept));
	if (!kept)
		abort();
	producers_left = np;
	pthread_t t[128];
	for (long i = 0; i < np; i++)
		if (pthread_create(&t[i], NULL, producer, (void *)i))
			abort();
	for (long i = 0; i < nc; i++)
		if (pthread_create(&t[np + i], NULL, consumer, NULL))
			abort();
	for (long i = 0; i < np + nc; i++)
		pthread_join(t[i], NULL);
	unsigned long bytes = 0;
	for (long k = 0; k < blocks_each; k += 1000)
		bytes += block_size(k);
	printf("handoff: kept %ld blocks, %lu bytes\n", np * kept_each, (unsigned long)np * bytes);
	return 0;
}
