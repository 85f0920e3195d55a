/*
 * burst-floor.c -- the floor under build/bench's timed points: the same
 * timer and burst pattern (20 calls, then 20 us of spinning; each call
 * between lfence+rdtsc and rdtscp) around a call that does nothing, and
 * around le_info's deferred record, and around the same call as le_debug
 * on the root logger of a second engine whose threshold is INFO, with a
 * flight recorder at DEBUG (backtrace = "debug": kept in the shard's
 * ring, not queued), alternating rounds in one process.
 * What the empty call shows at p99.9 is this machine's (interrupts, the
 * hypervisor taking the vCPU), and no logging call can do better.
 * "2 rmw" is the floor under both logging calls: the two locked
 * read-modify-writes each makes (queued: the budget word and the ring's
 * head; kept: the ring's claim counter and the entry's state), on two
 * lines of their own, and nothing else.
 *
 *   build/burst-floor [CALLS [ROUNDS]]    (default 1,000,000 calls, 5 rounds)
 *
 * Prints, per round and target, p50 / p99 / p99.9 / max in ns (timer
 * included, as bench reports them).
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <x86intrin.h>

#include "logengine.h"

#define BURST 20
#define GAP_NS 20000
/* A call slower than this waited for memory (a line from the other
 * core, or from DRAM): its share is what moves p99 and p99.9. */
#define SLOW_NS 150

static double tsc_per_ns;

static void calibrate(void)
{
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	uint64_t t0 = __rdtsc();
	do
		clock_gettime(CLOCK_MONOTONIC, &b);
	while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) <
	       100000000L);
	tsc_per_ns = (double)(__rdtsc() - t0) /
	             (double)((b.tv_sec - a.tv_sec) * 1000000000L +
	                      (b.tv_nsec - a.tv_nsec));
}

static __attribute__((noinline)) int empty(le_engine *e, long i)
{
	__asm__ volatile("" : : "r"(e), "r"(i) : "memory");
	return 0;
}

static __attribute__((noinline)) int deferred(le_engine *e, long i)
{
	le_info(e, "Logging int: %d, int: %d, double: %f", (int)i,
	        (int)(2 * i), (double)i / 2.0);
	return 0;
}

/* Two words on lines of their own, as the budget and a ring's head. */
static struct {
	_Alignas(64) _Atomic uint64_t a;
	_Alignas(64) _Atomic uint64_t b;
} rmw_words;

static __attribute__((noinline)) int two_rmw(le_engine *e, long i)
{
	(void)e;
	atomic_fetch_add_explicit(&rmw_words.a, (uint64_t)i,
	                          memory_order_relaxed);
	atomic_fetch_add_explicit(&rmw_words.b, 1, memory_order_relaxed);
	return 0;
}

static le_engine *recorded_e; /* threshold INFO, recorder at DEBUG */

static __attribute__((noinline)) int recorded(le_engine *e, long i)
{
	(void)e;
	le_debug(recorded_e, "Logging int: %d, int: %d, double: %f", (int)i,
	         (int)(2 * i), (double)i / 2.0);
	return 0;
}

static int cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

static void run(const char *name, int (*f)(le_engine *, long), le_engine *e,
                uint32_t *lat, long n)
{
	for (long j = 0; j < n; j++) {
		_mm_lfence();
		uint64_t a = __rdtsc();
		f(e, j);
		uint64_t b = __rdtscp(&(unsigned){0});
		lat[j] = (uint32_t)(b - a > UINT32_MAX ? UINT32_MAX : b - a);
		if ((j + 1) % BURST == 0) {
			uint64_t end = __rdtsc() + (uint64_t)(GAP_NS * tsc_per_ns);
			while (__rdtsc() < end)
				_mm_pause();
		}
	}
	qsort(lat, (size_t)n, sizeof *lat, cmp);
	long over = 0;
	while (over < n && lat[n - 1 - over] > SLOW_NS * tsc_per_ns)
		over++;
	printf("  %-9s p50 %5.0f  p99 %5.0f  p99.9 %6.0f  max %9.0f ns, "
	       "%5.2f%% over %d ns\n", name,
	       lat[n / 2] / tsc_per_ns, lat[n * 99 / 100] / tsc_per_ns,
	       lat[n * 999 / 1000] / tsc_per_ns, lat[n - 1] / tsc_per_ns,
	       100.0 * (double)over / (double)n, SLOW_NS);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	int rounds = argc > 2 ? atoi(argv[2]) : 5;
	le_config c;
	le_engine *e;
	char dir[] = "/tmp/burst-floor-XXXXXX", sub[64];
	uint32_t *lat = malloc((size_t)n * sizeof *lat);

	if (n < 1000 || !lat || !mkdtemp(dir))
		return 2;
	calibrate();
	le_config_init(&c);
	c.dir = dir;
	c.durability = LE_SYNC_NONE;
	c.overflow = LE_OVERFLOW_BLOCK;
	c.shards = 1;
	if (le_open(&e, &c) != 0) {
		fprintf(stderr, "burst-floor: %s\n", le_errmsg());
		return 1;
	}
	snprintf(sub, sizeof sub, "%s/recorded", dir);
	c.dir = sub;
	c.create_dir = 1;
	c.backtrace = "debug";
	if (le_open(&recorded_e, &c) != 0) {
		fprintf(stderr, "burst-floor: %s\n", le_errmsg());
		return 1;
	}
	for (int r = 1; r <= rounds; r++) {
		printf("round %d\n", r);
		run("empty", empty, e, lat, n);
		run("2 rmw", two_rmw, e, lat, n);
		run("le_info", deferred, e, lat, n);
		run("recorded", recorded, e, lat, n);
	}
	le_close(recorded_e);
	le_close(e);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		return 1;
	free(lat);
	return 0;
}
