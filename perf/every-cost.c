/*
 * every-cost.c -- what a rate-limited call (le_warn_every) costs once its
 * burst is spent, beside a call below the threshold and a call that
 * passes (logengine.h, "Rate limits per call site").  docs/BENCHMARKS.md,
 * "Rate limits", has its figures.
 *
 *   build/every-cost [CALLS]      (default 100,000,000 per loop)
 *
 * Five rounds of each loop, on one thread, in the thread's CPU time (the
 * machine is shared: time spent descheduled is not the call's); prints
 * ns per iteration, median and min-max of the five:
 *
 *   empty              the loop alone: the floor
 *   le_debug           below the threshold (INFO)
 *   le_warn_every      suppressed: a burst of 1 per hour, spent
 *   le_info            passes: deferred, CALLS / 100 per round, the
 *                      queue drained (le_flush) between rounds
 *
 * A call's cost is its line minus "empty".  The loop variable goes
 * through an empty asm so the compiler cannot fold the loop away.
 */
#define _GNU_SOURCE
#include <time.h>

#include "perf_engine.h"

#define ROUNDS 5

static double cpu_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

#define OPAQUE(i) __asm__ volatile("" : "+r"(i))

enum loop { EMPTY, DISABLED, SUPPRESSED, PASSING, NLOOPS };
static const char *const names[NLOOPS] = {
	"empty loop", "le_debug (disabled)", "le_warn_every (suppressed)",
	"le_info (passes)"};

static double run(enum loop k, le_logger *lg, long n)
{
	double t0 = cpu_ns();
	for (long i = 0; i < n; i++) {
		OPAQUE(i);
		if (k == DISABLED)
			le_debug(lg, "request %ld", i);
		else if (k == SUPPRESSED)
			le_warn_every(lg, 3600 * 1000, 1, "request %ld", i);
		else if (k == PASSING)
			le_info(lg, "request %ld", i);
	}
	return (cpu_ns() - t0) / (double)n;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000000L;
	char dir[512] = "";
	double t[NLOOPS][ROUNDS];
	le_config c;
	le_engine *e;

	if (n < 100) {
		fprintf(stderr, "usage: every-cost [CALLS >= 100]\n");
		return 2;
	}
	unsetenv("LOGENGINE_RATELIMIT");
	if (perf_config(&c, dir, sizeof dir, "every-cost") < 0)
		return 1;
	c.levels = "info"; /* LOGENGINE_LEVEL, when set, wins */
	c.queue_capacity = 1u << 20;
	c.queue_capacity_bytes = 64u << 20;
	if (perf_open(&e, &c) < 0)
		return 1;
	le_logger *lg = le_logger_get(e, "bench.every");
	for (int r = 0; r < ROUNDS; r++)
		for (int k = 0; k < NLOOPS; k++) {
			t[k][r] = run((enum loop)k, lg, k == PASSING ? n / 100 : n);
			le_flush(e, -1);
		}
	le_stats st;
	le_close_stats(e, &st);
	if (perf_rmrf(dir) < 0)
		fprintf(stderr, "every-cost: could not remove %s\n", dir);
	printf("calls per loop: %ld (le_info: %ld), %d rounds, thread CPU ns "
	       "per iteration: median (min-max)\n", n, n / 100, ROUNDS);
	qsort(t[EMPTY], ROUNDS, sizeof(double), cmp);
	for (int k = 0; k < NLOOPS; k++) {
		qsort(t[k], ROUNDS, sizeof(double), cmp);
		printf("  %-28s %7.3f (%.3f-%.3f)", names[k], t[k][ROUNDS / 2],
		       t[k][0], t[k][ROUNDS - 1]);
		if (k != EMPTY)
			printf("   +%.3f over the empty loop",
			       t[k][ROUNDS / 2] - t[EMPTY][ROUNDS / 2]);
		printf("\n");
	}
	printf("  suppressed, as counted: %llu in %llu summaries\n",
	       (unsigned long long)st.suppressed,
	       (unsigned long long)st.suppressed_summaries);
	return 0;
}
