/*
 * demo.c -- the main job, end to end: `make demo` runs it.
 *
 * Four threads log a million records each (4 shards, LE_OVERFLOW_BLOCK, so
 * nothing may be lost) into a fresh directory, with a progress line; then
 * the demo prints throughput and le_stats, reads every record back through
 * the reader API and checks that each thread's records are all there, once,
 * in order, with their payloads intact.
 *
 *   usage: demo DIR [records-per-thread] [threads]
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "logengine.h"

#define MAX_THREADS 16

static le_engine *eng;
static long per_thread = 1000000;
static int nthreads = 4;
static atomic_long done_total;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Payload: "thread T record N <filler>" -- the reader recomputes it. */
static int payload(char *buf, size_t cap, int t, long n)
{
	int k = snprintf(buf, cap, "thread %d record %ld ", t, n);
	while ((size_t)k < 100 && (size_t)k + 1 < cap) {
		buf[k] = (char)('a' + (n + k) % 26);
		k++;
	}
	return k;
}

static void *producer(void *arg)
{
	int t = (int)(intptr_t)arg;
	char buf[160];

	for (long n = 0; n < per_thread; n++) {
		int len = payload(buf, sizeof buf, t, n);
		int rc = le_write(eng, (uint64_t)t, LE_INFO, buf, (size_t)len);
		if (rc < 0) {
			fprintf(stderr, "le_write: %s\n", le_strerror(rc));
			exit(1);
		}
		if ((n & 4095) == 4095)
			atomic_fetch_add(&done_total, 4096);
	}
	return NULL;
}

static int write_phase(const char *dir)
{
	le_config cfg;
	pthread_t th[MAX_THREADS];
	le_stats st;

	le_config_init(&cfg);
	cfg.dir = dir;
	cfg.create_dir = 1;
	cfg.shards = 4;
	cfg.overflow = LE_OVERFLOW_BLOCK;
	int rc = le_open(&eng, &cfg);
	if (rc < 0) {
		fprintf(stderr, "le_open: %s: %s\n", le_strerror(rc), le_errmsg());
		return 1;
	}
	long total = per_thread * nthreads;
	printf("logengine %s: %d threads x %ld records into %s (4 shards)\n",
	       le_version(), nthreads, per_thread, dir);
	double t0 = now();
	for (int t = 0; t < nthreads; t++)
		pthread_create(&th[t], NULL, producer, (void *)(intptr_t)t);
	for (;;) {
		long d = atomic_load(&done_total);
		printf("\r  %ld / %ld records (%.0f%%)", d, total,
		       100.0 * (double)d / (double)total);
		fflush(stdout);
		if (d >= total - nthreads * 4096L)
			break;
		usleep(200000);
	}
	for (int t = 0; t < nthreads; t++)
		pthread_join(th[t], NULL);
	double t1 = now();
	rc = le_flush(eng, -1);
	double t2 = now();
	printf("\r  %ld / %ld records (100%%)\n", total, total);
	printf("submitted in %.3f s: %.2f M records/s; all in segment files "
	       "after %.3f s: %.2f M records/s\n",
	       t1 - t0, (double)total / (t1 - t0) / 1e6, t2 - t0,
	       (double)total / (t2 - t0) / 1e6);
	le_stats_get(eng, &st);
	printf("le_stats: accepted=%" PRIu64 " written=%" PRIu64
	       " dropped=%" PRIu64 " bytes_written=%" PRIu64
	       " queue_hwm_records=%" PRIu64 " queue_hwm_bytes=%" PRIu64
	       " blocked=%" PRIu64 " segments=%" PRIu64 " syncs=%" PRIu64 "\n",
	       st.accepted, st.written, st.dropped, st.bytes_written,
	       st.queue_hwm_records, st.queue_hwm_bytes, st.blocked,
	       st.segments_created, st.syncs);
	int crc = le_close(eng);
	if (rc < 0 || crc < 0) {
		fprintf(stderr, "flush/close: %s\n", le_strerror(rc ? rc : crc));
		return 1;
	}
	return st.written == (uint64_t)total ? 0 : 1;
}

static int read_phase(const char *dir)
{
	static long next[MAX_THREADS];
	le_reader *r;
	le_record rec;
	char want[160];
	long n = 0, bad = 0;
	int rc;

	double t0 = now();
	rc = le_reader_open(&r, dir, NULL);
	if (rc < 0) {
		fprintf(stderr, "le_reader_open: %s\n", le_strerror(rc));
		return 1;
	}
	while ((rc = le_reader_next(r, &rec)) == 1) {
		int t;
		long k;
		/* payloads are not NUL-terminated */
		size_t m = rec.len < sizeof want - 1 ? rec.len : sizeof want - 1;
		memcpy(want, rec.payload, m);
		want[m] = '\0';
		if (sscanf(want, "thread %d record %ld ", &t, &k) != 2 ||
		    t < 0 || t >= nthreads || k != next[t]) {
			bad++;
			continue;
		}
		int len = payload(want, sizeof want, t, k);
		if ((size_t)len != rec.len || memcmp(want, rec.payload, rec.len))
			bad++;
		next[t] = k + 1;
		n++;
	}
	le_reader_close(r);
	double t1 = now();
	for (int t = 0; t < nthreads; t++)
		if (next[t] != per_thread)
			bad++;
	printf("read back %ld records in %.3f s (%.2f M/s): %s\n", n, t1 - t0,
	       (double)n / (t1 - t0) / 1e6,
	       (rc == 0 && bad == 0) ? "every record present once, in order, "
	                               "payload intact"
	                             : "MISMATCH");
	return (rc == 0 && bad == 0) ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: demo DIR [records-per-thread] [threads]\n");
		return 2;
	}
	if (argc > 2)
		per_thread = atol(argv[2]);
	if (argc > 3)
		nthreads = atoi(argv[3]);
	if (per_thread < 1 || nthreads < 1 || nthreads > MAX_THREADS) {
		fprintf(stderr, "demo: bad counts\n");
		return 2;
	}
	char cmd[4200];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", argv[1]);
	if (system(cmd) != 0)
		return 1;
	if (write_phase(argv[1]))
		return 1;
	return read_phase(argv[1]);
}
