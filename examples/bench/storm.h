/*
 * storm.h - what the storms of the performance harness share: their own
 * elapsed time and CPU time, for the summary line.
 */
#ifndef LEAKSCOPE_BENCH_STORM_H
#define LEAKSCOPE_BENCH_STORM_H

#include <sys/resource.h>
#include <time.h>

#include "../c/common.h"

static inline long elapsed_ns(const struct timespec *a, const struct timespec *b)
{
	return (b->tv_sec - a->tv_sec) * 1000000000L + (b->tv_nsec - a->tv_nsec);
}

/* line_add_rusage appends this process's CPU time (all threads, including
 * the kernel's time in probes that fire in them) and peak RSS. */
static inline void line_add_rusage(struct line *l)
{
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru))
		return;
	line_add(l, "; cpu_user_us %ld cpu_sys_us %ld maxrss_kb %ld",
		 (long)ru.ru_utime.tv_sec * 1000000L + (long)ru.ru_utime.tv_usec,
		 (long)ru.ru_stime.tv_sec * 1000000L + (long)ru.ru_stime.tv_usec,
		 (long)ru.ru_maxrss);
}

#endif
