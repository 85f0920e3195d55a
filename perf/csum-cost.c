/*
 * csum-cost.c -- what queue_checksum (logengine.h) adds to a logging
 * call: the producer's CRC32C over the slot's header and payload, put
 * before the slot is published.  docs/BENCHMARKS.md, "Slot checksums",
 * has its figures.
 *
 *   build/csum-cost [CALLS]      (default 2,000,000 per round)
 *
 * Two engines in one process, one with the setting and one without,
 * each on its own directory under $TMPDIR (a mapped queue, as the
 * setting asks), durability none.  Rounds alternate between them, five
 * of each, so both see the same machine; a round times CALLS calls in
 * batches of BATCH, the queue drained (le_flush, not timed) between
 * batches, so no call waits for room.  Time is the calling thread's CPU
 * time.  Prints ns per call, median and min-max of the five rounds, for:
 *
 *   le_write 16 B, 128 B, 1 KiB   raw payloads
 *   le_info deferred              "request %ld from %s" (the arguments:
 *                                 about 30 bytes queued)
 *
 * and the difference of the medians: the setting's cost per call.
 */
#define _GNU_SOURCE
#include <string.h>
#include <time.h>

#include "perf_engine.h"

#define ROUNDS 5
#define BATCH 16384

static double cpu_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

enum kind { W16, W128, W1K, DEFERRED, NKINDS };
static const char *const names[NKINDS] = {
	"le_write 16 B", "le_write 128 B", "le_write 1 KiB",
	"le_info deferred"};
static const size_t lens[NKINDS] = {16, 128, 1024, 0};

static double round_ns(le_engine *e, le_logger *lg, enum kind k, long n)
{
	static char payload[1024];
	double t = 0;
	memset(payload, 'x', sizeof payload);
	for (long done = 0; done < n;) {
		long b = n - done < BATCH ? n - done : BATCH;
		double t0 = cpu_ns();
		for (long i = 0; i < b; i++) {
			if (k == DEFERRED)
				le_info(lg, "request %ld from %s", done + i,
				        "10.0.0.1");
			else if (le_write(e, 0, LE_INFO, payload, lens[k]) != 0)
				return -1;
		}
		t += cpu_ns() - t0;
		done += b;
		le_flush(e, -1);
	}
	return t / (double)n;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 2000000L;
	static char dir_off[512], dir_on[512];
	char *dir[2] = {dir_off, dir_on};
	double t[2][NKINDS][ROUNDS];
	le_engine *e[2];
	le_logger *lg[2];

	if (n < BATCH) {
		fprintf(stderr, "usage: csum-cost [CALLS >= %d]\n", BATCH);
		return 2;
	}
	for (int ck = 0; ck < 2; ck++) {
		le_config c;
		if (perf_config(&c, dir[ck], sizeof dir_off,
		                ck ? "csum-cost-on" : "csum-cost-off") < 0)
			return 1;
		c.levels = "info"; /* LOGENGINE_LEVEL, when set, wins */
		c.queue_capacity = 2 * BATCH;
		c.queue_capacity_bytes = 64u << 20;
		c.queue_checksum = (uint32_t)ck;
		/* what a round writes (up to 2 GB) does not pile up */
		c.segment_bytes = 16u << 20;
		c.retention_bytes = 64u << 20;
		if (perf_open(&e[ck], &c) < 0)
			return 1;
		lg[ck] = le_logger_get(e[ck], "bench.csum");
	}
	for (int r = 0; r < ROUNDS; r++)
		for (int k = 0; k < NKINDS; k++)
			for (int ck = 0; ck < 2; ck++) {
				int which = r & 1 ? 1 - ck : ck;
				t[which][k][r] = round_ns(e[which], lg[which],
				                          (enum kind)k, n);
				if (t[which][k][r] < 0) {
					fprintf(stderr, "le_write failed: %s\n",
					        le_errmsg());
					return 1;
				}
			}
	for (int ck = 0; ck < 2; ck++) {
		le_stats st;
		le_close_stats(e[ck], &st);
		if (st.dropped)
			fprintf(stderr, "csum-cost: %llu records dropped\n",
			        (unsigned long long)st.dropped);
		if (perf_rmrf(dir[ck]) < 0)
			fprintf(stderr, "csum-cost: could not remove %s\n",
			        dir[ck]);
	}
	printf("calls per round: %ld, %d rounds each, thread CPU ns per call: "
	       "median (min-max)\n", n, ROUNDS);
	printf("  %-18s %-20s %-20s %s\n", "call", "queue_checksum 0",
	       "queue_checksum 1", "cost");
	for (int k = 0; k < NKINDS; k++) {
		char a[2][32];
		for (int ck = 0; ck < 2; ck++) {
			qsort(t[ck][k], ROUNDS, sizeof(double), cmp);
			snprintf(a[ck], sizeof a[ck], "%.1f (%.1f-%.1f)",
			         t[ck][k][ROUNDS / 2], t[ck][k][0],
			         t[ck][k][ROUNDS - 1]);
		}
		printf("  %-18s %-20s %-20s %+.1f ns\n", names[k], a[0], a[1],
		       t[1][k][ROUNDS / 2] - t[0][k][ROUNDS / 2]);
	}
	return 0;
}
