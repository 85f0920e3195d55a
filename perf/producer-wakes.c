/*
 * producer-wakes.c -- why many producers on two shards have a longer tail
 * than on one (docs/BENCHMARKS.md, "Many producers"): each configuration
 * logs the same records, and the program prints the calls that waited for
 * room (le_stats.blocked) beside the process's context switches.  A
 * producer waiting for room switches as often on one shard as on two;
 * writers that sleep and are woken by a producer's le_write switch more
 * with two, each at half the rate.
 *
 *   build/producer-wakes [RECORDS [ROUNDS]]   (default 3,000,000, 3)
 *
 * Configurations producers x shards: 1x1 2x1 8x1 2x2 8x2; producer i
 * routes to shard i mod shards; 128-B records, durability none, overflow
 * block (perf_engine.h).  ROUNDS rounds of all five in turn, one line
 * each: msg/s (until le_flush returns), blocked calls, voluntary and
 * involuntary context switches of the whole process.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "perf_engine.h"

#define MAXP 8

static le_engine *eng;
static long per_producer;

/* One producer: per_producer records of 128 B, route key arg. */
static void *produce(void *arg)
{
	char buf[128];
	uint64_t key = (uint64_t)(uintptr_t)arg;

	memset(buf, 'x', sizeof buf);
	for (long i = 0; i < per_producer; i++)
		if (le_write(eng, key, LE_INFO, buf, sizeof buf) < 0)
			return arg;
	return NULL;
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Run one configuration and print its line.  @return 0 or -1. */
static int run(int producers, unsigned shards, long records)
{
	char dir[512] = "";
	le_config c;
	pthread_t th[MAXP];
	struct rusage r0, r1;
	le_stats st;

	if (perf_config(&c, dir, sizeof dir, "producer-wakes") < 0)
		return -1;
	c.shards = shards;
	if (perf_open(&eng, &c) < 0)
		return -1;
	per_producer = records / producers;
	getrusage(RUSAGE_SELF, &r0);
	double t0 = now_s();
	for (int i = 0; i < producers; i++)
		pthread_create(&th[i], NULL, produce, (void *)(uintptr_t)i);
	for (int i = 0; i < producers; i++)
		pthread_join(th[i], NULL);
	le_flush(eng, 60000);
	double secs = now_s() - t0;
	getrusage(RUSAGE_SELF, &r1);
	le_stats_get(eng, &st);
	printf("producers=%d shards=%u  %6.2f M msg/s  blocked %8" PRIu64
	       "  voluntary %7ld  involuntary %7ld\n", producers, shards,
	       (double)(per_producer * producers) / secs / 1e6, st.blocked,
	       r1.ru_nvcsw - r0.ru_nvcsw, r1.ru_nivcsw - r0.ru_nivcsw);
	fflush(stdout);
	le_close(eng);
	return perf_rmrf(dir);
}

int main(int argc, char **argv)
{
	static const struct {
		int producers;
		unsigned shards;
	} cfg[] = {{1, 1}, {2, 1}, {8, 1}, {2, 2}, {8, 2}};
	long records = argc > 1 ? atol(argv[1]) : 3000000;
	int rounds = argc > 2 ? atoi(argv[2]) : 3;

	if (records < MAXP || rounds < 1) {
		fputs("usage: producer-wakes [RECORDS [ROUNDS]]\n", stderr);
		return 2;
	}
	for (int r = 0; r < rounds; r++)
		for (size_t i = 0; i < sizeof cfg / sizeof cfg[0]; i++)
			if (run(cfg[i].producers, cfg[i].shards, records) < 0)
				return 1;
	return 0;
}
