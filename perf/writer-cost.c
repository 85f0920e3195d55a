/*
 * writer-cost.c -- what the writer thread costs per record, and how much of
 * the run it was busy (docs/BENCHMARKS.md, "perf/"): on a shared machine
 * wall-clock throughput alone is too noisy to compare two builds.
 *
 *   build/writer-cost [records [dir [deferred]]]
 *
 * One producer writes `records` (default 1,000,000) records of 128 B as
 * fast as it can through le_write (engine defaults, overflow block,
 * durability none; calls not timed), then le_flush.  Prints msg/s (from
 * the first call to the end of le_flush), the writer's CPU time per record
 * (le_stats.writer_cpu_ns, its thread's CPU clock), the writer's CPU time
 * over the wall time ("busy": below ~95% the writer waited for the
 * producer, which was blocked), and how many calls waited for space.
 * With "deferred", the records are le_info(e, "Logging int: %d, int: %d,
 * double: %f", i, 2i, i/2.0) (the bench's deferred point): arguments
 * only, a small frame.  Then the floor of the same bytes: the segment
 * bytes per record the run wrote (le_stats.bytes_written), memcpy'd into
 * a 1 MiB buffer written with write() when full, to a file in the same
 * directory, as one thread's CPU time per record ("floor"): what any
 * writer of those bytes pays.
 * Run it a number of times, alternating builds, and compare medians.
 * Built by `make perf-tools`.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>

#include "perf_engine.h"

static double mono(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double thread_cpu(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* n records of `per` bytes from a 64 KiB source, memcpy'd into a 1 MiB
 * buffer that write() empties when the next would not fit, to dir/floor.
 * @return this thread's CPU ns per record, or -1. */
static double floor_ns(const char *dir, long n, size_t per)
{
	static char src[1 << 16], buf[1 << 20];
	char path[600];
	size_t len = 0, at = 0;
	int ok = 1;

	snprintf(path, sizeof path, "%s/floor", dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || per == 0 || per > sizeof src / 2)
		return -1;
	memset(src, 'x', sizeof src);
	double c0 = thread_cpu();
	for (long i = 0; i < n; i++) {
		if (len + per > sizeof buf) {
			ok &= write(fd, buf, len) == (ssize_t)len;
			len = 0;
		}
		memcpy(buf + len, src + at, per);
		len += per;
		at = at + per > sizeof src - per ? 0 : at + per;
	}
	ok &= write(fd, buf, len) == (ssize_t)len;
	double c = thread_cpu() - c0;
	close(fd);
	unlink(path);
	return ok ? c * 1e9 / (double)n : -1;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	char dir[512] = "", p[128];
	le_config c;
	le_engine *e;
	le_stats s;

	int deferred = argc > 3 && !strcmp(argv[3], "deferred");

	if (argc > 2)
		snprintf(dir, sizeof dir, "%s", argv[2]);
	if (n <= 0 || perf_config(&c, dir, sizeof dir, "le-writer-cost") < 0)
		return 2;
	if (perf_open(&e, &c) < 0)
		return 1;
	memset(p, 'x', sizeof p);
	double t0 = mono();
	for (long i = 0; i < n; i++) {
		if (deferred)
			le_info(e, "Logging int: %d, int: %d, double: %f", (int)i,
			        (int)(2 * i), (double)i / 2.0);
		else
			le_write(e, 0, LE_INFO, p, sizeof p);
	}
	le_flush(e, -1);
	double t = mono() - t0;
	le_stats_get(e, &s);
	double per = (double)s.bytes_written / (double)n;
	printf("%.2f M msg/s  writer %.1f ns/record  busy %.0f%%  "
	       "blocked %llu  written %llu  %.1f B/record  floor %.1f "
	       "ns/record\n",
	       (double)n / t / 1e6, (double)s.writer_cpu_ns / (double)n,
	       (double)s.writer_cpu_ns / 1e9 / t * 100,
	       (unsigned long long)s.blocked, (unsigned long long)s.written,
	       per, floor_ns(dir, n, (size_t)(per + 0.5)));
	le_close(e);
	return perf_rmrf(dir) != 0;
}
