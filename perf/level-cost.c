/*
 * level-cost.c -- what a level macro costs when its record is below the
 * threshold: one load of the logger's level and one compare (logengine.h,
 * "Internal").  docs/BENCHMARKS.md, "kv", has its figures.
 *
 *   build/level-cost [CALLS]      (default 200,000,000 per loop)
 *
 * Times, on one thread, CALLS iterations of each loop and prints ns per
 * iteration, best of five rounds:
 *
 *   empty          the loop alone (its counter and branch): the floor
 *   le_debug(lg)   a named logger whose threshold is INFO
 *   le_debug(e)    the engine's root logger, threshold INFO
 *   le_trace_kv    a named logger, three fields and a format that would
 *                  be built if it passed: none of it is evaluated
 *
 * The cost of a disabled call is its line minus "empty".  The loop
 * variable goes through an empty asm so the compiler can neither drop
 * the loop nor hoist anything out of it that it would not in real code.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "logengine.h"

static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* Keep i alive and opaque: the loop cannot be folded away. */
#define OPAQUE(i) __asm__ volatile("" : "+r"(i))

static double loop_empty(long n)
{
	double t0 = now_ns();
	for (long i = 0; i < n; i++)
		OPAQUE(i);
	return (now_ns() - t0) / (double)n;
}

static double loop_logger(le_logger *lg, long n)
{
	double t0 = now_ns();
	for (long i = 0; i < n; i++) {
		OPAQUE(i);
		le_debug(lg, "request %ld", i);
	}
	return (now_ns() - t0) / (double)n;
}

static double loop_engine(le_engine *e, long n)
{
	double t0 = now_ns();
	for (long i = 0; i < n; i++) {
		OPAQUE(i);
		le_debug(e, "request %ld", i);
	}
	return (now_ns() - t0) / (double)n;
}

static double loop_kv(le_logger *lg, long n)
{
	double t0 = now_ns();
	for (long i = 0; i < n; i++) {
		OPAQUE(i);
		le_trace_kv(lg, LE_FIELDS(LE_I64("a", i), LE_I64("b", 2 * i),
		                          LE_F64("d", (double)i / 2)),
		            "request %ld", i);
	}
	return (now_ns() - t0) / (double)n;
}

static double best(double a, double b)
{
	return a < b ? a : b;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 200000000L;
	char dir[] = "/tmp/level-cost-XXXXXX";
	le_config c;
	le_engine *e;

	if (n <= 0 || !mkdtemp(dir)) {
		fprintf(stderr, "usage: level-cost [CALLS > 0]\n");
		return 2;
	}
	le_config_init(&c);
	c.dir = dir;
	c.durability = LE_SYNC_NONE;
	c.levels = "info"; /* LOGENGINE_LEVEL may say otherwise: it wins */
	int rc = le_open(&e, &c);
	if (rc < 0) {
		fprintf(stderr, "level-cost: le_open: %s: %s\n", le_strerror(rc),
		        le_errmsg());
		return 1;
	}
	le_logger *lg = le_logger_get(e, "bench.level");
	if (le_get_level(e, "bench.level") <= LE_DEBUG) {
		fprintf(stderr, "level-cost: LOGENGINE_LEVEL lets debug records "
		        "through; unset it\n");
		return 1;
	}
	double empty = 1e9, lgr = 1e9, eng = 1e9, kv = 1e9;
	for (int round = 0; round < 5; round++) {
		empty = best(empty, loop_empty(n));
		lgr = best(lgr, loop_logger(lg, n));
		eng = best(eng, loop_engine(e, n));
		kv = best(kv, loop_kv(lg, n));
	}
	le_stats st;
	le_close_stats(e, &st);
	char cmd[64];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "level-cost: could not remove %s\n", dir);
	if (st.accepted) {
		fprintf(stderr, "level-cost: %llu records passed the threshold\n",
		        (unsigned long long)st.accepted);
		return 1;
	}
	printf("calls per loop: %ld, best of 5 rounds, ns per iteration\n", n);
	printf("  empty loop          %6.3f\n", empty);
	printf("  le_debug(logger)    %6.3f   (+%.3f: the disabled call)\n", lgr,
	       lgr - empty);
	printf("  le_debug(engine)    %6.3f   (+%.3f)\n", eng, eng - empty);
	printf("  le_trace_kv(logger) %6.3f   (+%.3f)\n", kv, kv - empty);
	return 0;
}
