/*
 * writer-cost.c -- what the writer thread costs per record, and how much of
 * the run it was busy (docs/BENCHMARKS.md, "perf/"): on a shared machine
 * wall-clock throughput alone is too noisy to compare two builds.
 *
 *   build/writer-cost [records [dir]]
 *
 * One producer writes `records` (default 1,000,000) records of 128 B as
 * fast as it can through le_write (engine defaults, overflow block,
 * durability none; calls not timed), then le_flush.  Prints msg/s (from
 * the first call to the end of le_flush), the writer's CPU time per record
 * (le_stats.writer_cpu_ns, its thread's CPU clock), the writer's CPU time
 * over the wall time ("busy": below ~95% the writer waited for the
 * producer, which was blocked), and how many calls waited for space.
 * Run it a number of times, alternating builds, and compare medians.
 * Built by `make perf-tools`.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "perf_engine.h"

static double mono(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	char dir[512] = "", p[128];
	le_config c;
	le_engine *e;
	le_stats s;

	if (argc > 2)
		snprintf(dir, sizeof dir, "%s", argv[2]);
	if (n <= 0 || perf_config(&c, dir, sizeof dir, "le-writer-cost") < 0)
		return 2;
	if (perf_open(&e, &c) < 0)
		return 1;
	memset(p, 'x', sizeof p);
	double t0 = mono();
	for (long i = 0; i < n; i++)
		le_write(e, 0, LE_INFO, p, sizeof p);
	le_flush(e, -1);
	double t = mono() - t0;
	le_stats_get(e, &s);
	printf("%.2f M msg/s  writer %.1f ns/record  busy %.0f%%  "
	       "blocked %llu  written %llu\n",
	       (double)n / t / 1e6, (double)s.writer_cpu_ns / (double)n,
	       (double)s.writer_cpu_ns / 1e9 / t * 100,
	       (unsigned long long)s.blocked, (unsigned long long)s.written);
	le_close(e);
	return perf_rmrf(dir) != 0;
}
