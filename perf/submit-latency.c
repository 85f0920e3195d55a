/*
 * submit-latency.c -- the tail of le_write, one call at a time, against the
 * size of the queue (docs/BENCHMARKS.md, "perf/").
 *
 *   build/submit-latency [queue_capacity [queue_capacity_bytes [mapped_queue
 *                        [batch_size]]]]
 *
 * One producer writes 1,000,000 records of 128 B (overflow block,
 * durability none) into DIR=$TMPDIR/le-submit-latency, each call timed
 * alone with lfence; rdtsc ... rdtscp, and prints percentiles in TSC
 * cycles, then the gaps, in calls, between the first calls at or above
 * p99.9 (periodic gaps point at the batch; irregular ones at the
 * machine), how many calls took 490 cycles or more (200 ns with a
 * 2.45 GHz TSC; the thresholds are in cycles) and ten times that (those
 * wait for space: overflow block), and, for the slow calls below the
 * second threshold, where in its 4 KiB page of the ring the call's slot
 * was: 64 counts, one per 64-byte line (every slot is 192 bytes, laps
 * restart at offset 0).  A pile at lines 43-45 is the prefetch of the slot
 * after next reaching into a new page (a TLB walk): it goes away when the
 * ring is in a huge page (`grep -i pmd /proc/PID/smaps`, or compare with
 * /sys/kernel/mm/transparent_hugepage/enabled set to never).
 * x86-64 only (the TSC).  Built by `make perf-tools`.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <x86intrin.h>

#include "perf_engine.h"
#include "queue/queue.h" /* le__ring_size_for: the ring's laps */

#define N 1000000

static int cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	char dir[512] = "";
	le_config c;
	le_engine *e;

	if (perf_config(&c, dir, sizeof dir, "le-submit-latency") < 0)
		return 2;
	if (argc > 1)
		c.queue_capacity = (uint32_t)atoi(argv[1]);
	if (argc > 2)
		c.queue_capacity_bytes = strtoull(argv[2], NULL, 0);
	if (argc > 3)
		c.mapped_queue = atoi(argv[3]);
	if (argc > 4)
		c.batch_size = (uint32_t)atoi(argv[4]);
	if (perf_open(&e, &c) < 0)
		return 1;
	uint32_t *lat = malloc(N * sizeof *lat), *s = malloc(N * sizeof *s);
	char p[128];
	if (!lat || !s)
		return 1;
	memset(p, 'x', sizeof p);
	for (int i = 0; i < N; i++) {
		unsigned aux;
		_mm_lfence();
		uint64_t a = __rdtsc();
		le_write(e, 0, LE_INFO, p, sizeof p);
		uint64_t b = __rdtscp(&aux);
		lat[i] = (uint32_t)(b - a);
	}
	le_flush(e, -1);
	le_close(e);
	memcpy(s, lat, N * sizeof *s);
	qsort(s, N, sizeof *s, cmp);
	static const double q[] = {.5, .9, .99, .995, .998, .999, .9995, .9999};
	for (size_t i = 0; i < sizeof q / sizeof q[0]; i++)
		printf("p%g=%u ", q[i] * 100, s[(size_t)(q[i] * N)]);
	printf("cycles\ngaps between slow calls:");
	uint32_t thr = s[(size_t)(.999 * N)];
	for (int i = 0, prev = -1, n = 0; i < N && n < 40; i++)
		if (lat[i] >= thr) {
			if (prev >= 0) {
				printf(" %d", i - prev);
				n++;
			}
			prev = i;
		}
	printf("\n");
	unsigned slow = 0, waited = 0, line[64] = {0};
	uint64_t size = le__ring_size_for(c.queue_capacity,
	                                  c.queue_capacity_bytes,
	                                  c.max_record_bytes, 0);
	for (uint64_t i = 0, pos = 0; i < N; i++, pos += 192) {
		if (pos + 192 > size)
			pos = 0; /* the rest of the lap is padding */
		slow += lat[i] >= 490;   /* 200 ns with a 2.45 GHz TSC */
		waited += lat[i] >= 4900; /* 2 us with a 2.45 GHz TSC */
		if (lat[i] >= 490 && lat[i] < 4900)
			line[(pos % 4096) / 64]++;
	}
	printf("calls >= 200 ns: %u, >= 2 us: %u\n"
	       "slow calls < 2 us by the line of its page the slot began at:",
	       slow, waited);
	for (int k = 0; k < 64; k++)
		printf(" %u", line[k]);
	printf("\n");
	free(lat);
	free(s);
	return 0;
}
