/*
 * durable-cost.c -- what durability costs the application: the same
 * workload under LE_SYNC_INTERVAL (the defaults), LE_SYNC_NONE and
 * LE_SYNC_BATCH, runs alternating, each in a child process of its own
 * (docs/BENCHMARKS.md, "Durability").
 *
 *   build/durable-cost [-n records] [-r rounds] [-s payload] [-d dir]
 *                      [-f flush_every] [-b burst_records]
 *
 * Throughput: one producer writes `records` records of `payload` bytes
 * (overflow block), every call timed alone (clock_gettime); then
 * le_flush(-1).  Reported: calls/s to the last call, records/s to the
 * flush's return (everything durable the configuration promises), and the
 * calls' p50, p99, p99.9 and longest.
 * Flush latency: LE_SYNC_BATCH again, with a le_flush every flush_every
 * records (default 1000), each timed: its p50 and p99, and records/s.
 * Burst: the default overflow policy (drop), `burst_records` records as
 * fast as one producer can, then le_flush: the share kept, defaults
 * against LE_SYNC_NONE.
 * Each figure is the median of the rounds with min-max.  The directory
 * (default build/durable-cost) must be on the disk being measured, not a
 * tmpfs.  Public API only.  Built by `make perf-tools`.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "logengine.h"

enum { M_DEFAULT, M_NONE, M_BATCH, M_BATCH_FLUSH, M_BURST_DEFAULT,
       M_BURST_NONE, NMODES };
static const char *mode_name[NMODES] = {
	"defaults (interval 1 s)", "durability none", "durability batch",
	"batch, le_flush every K", "burst: defaults, drop", "burst: none, drop"};

#define MAXR 16
enum { F_CALLS, F_DURABLE, F_P50, F_P99, F_P999, F_MAX, F_FP50, F_FP99,
       F_KEPT, F_SYNCS, NF };
static double res[NMODES][MAXR][NF];

static long records = 1000000, burst = 3000000, flush_every = 1000;
static int rounds = 3;
static uint32_t payload = 128;
static const char *dir = "build/tmp/durable-cost"; /* not the program */

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double pct(uint32_t *v, long n, double q)
{
	long i = (long)(q * (double)(n - 1));
	return v[i];
}

static void rm_dir(void)
{
	char cmd[1800];
	/* gone, its parent there */
	snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s' && rmdir '%s'",
	         dir, dir, dir);
	if (system(cmd) != 0)
		exit(1);
}

/* One run, in the child: its figures into out[NF]. */
static void run(int mode, double *out)
{
	le_config c;
	le_engine *e;
	char buf[65536];
	long n = mode >= M_BURST_DEFAULT ? burst : records;
	int batch = mode == M_BATCH || mode == M_BATCH_FLUSH;

	le_config_init(&c);
	c.dir = dir;
	c.create_dir = 1;
	if (mode == M_NONE || mode == M_BURST_NONE)
		c.durability = LE_SYNC_NONE;
	if (batch)
		c.durability = LE_SYNC_BATCH;
	if (mode < M_BURST_DEFAULT)
		c.overflow = LE_OVERFLOW_BLOCK;
	if (le_open(&e, &c) != 0) {
		fprintf(stderr, "le_open: %s\n", le_errmsg());
		exit(1);
	}
	memset(buf, 'a', sizeof buf);
	uint32_t *lat = malloc((size_t)n * sizeof *lat);
	uint32_t *fl = malloc((size_t)(n / flush_every + 1) * sizeof *fl);
	long nf = 0;
	uint64_t t0 = now_ns();
	for (long i = 0; i < n; i++) {
		snprintf(buf, 17, "%016lx", i);
		buf[16] = 'a';
		uint64_t a = now_ns();
		le_write(e, 0, LE_INFO, buf, payload);
		uint64_t b = now_ns();
		lat[i] = (uint32_t)(b - a < UINT32_MAX ? b - a : UINT32_MAX);
		if (mode == M_BATCH_FLUSH && i % flush_every == flush_every - 1) {
			le_flush(e, -1);
			fl[nf++] = (uint32_t)(now_ns() - b);
		}
	}
	uint64_t t1 = now_ns();
	le_flush(e, -1);
	uint64_t t2 = now_ns();
	le_stats s;
	le_stats_get(e, &s);
	le_close(e);
	qsort(lat, (size_t)n, sizeof *lat, cmp_u32);
	out[F_CALLS] = (double)n / ((double)(t1 - t0) / 1e9);
	out[F_DURABLE] = (double)n / ((double)(t2 - t0) / 1e9);
	out[F_P50] = pct(lat, n, 0.5);
	out[F_P99] = pct(lat, n, 0.99);
	out[F_P999] = pct(lat, n, 0.999);
	out[F_MAX] = lat[n - 1];
	if (nf) {
		qsort(fl, (size_t)nf, sizeof *fl, cmp_u32);
		out[F_FP50] = pct(fl, nf, 0.5);
		out[F_FP99] = pct(fl, nf, 0.99);
	}
	out[F_KEPT] = (double)s.written / (double)n;
	out[F_SYNCS] = (double)s.syncs;
	free(lat);
	free(fl);
}

static void one(int mode, int r)
{
	double *shm = mmap(NULL, NF * sizeof(double), PROT_READ | PROT_WRITE,
	                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	rm_dir();
	pid_t p = fork();
	if (p == 0) {
		run(mode, shm);
		_exit(0);
	}
	int st;
	waitpid(p, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "durable-cost: %s failed\n", mode_name[mode]);
		exit(1);
	}
	memcpy(res[mode][r], shm, sizeof res[mode][r]);
	munmap(shm, NF * sizeof(double));
	rm_dir();
}

/* "median (min-max)" of field f of mode m over the rounds. */
static const char *med(int m, int f, double scale, const char *fmt,
                        char *b, size_t cap)
{
	double v[MAXR];
	for (int r = 0; r < rounds; r++)
		v[r] = res[m][r][f] * scale;
	qsort(v, (size_t)rounds, sizeof *v, cmp_d);
	char a[28], lo[28], hi[28];
	snprintf(a, sizeof a, fmt, v[rounds / 2]);
	snprintf(lo, sizeof lo, fmt, v[0]);
	snprintf(hi, sizeof hi, fmt, v[rounds - 1]);
	snprintf(b, cap, "%s (%s-%s)", a, lo, hi);
	return b;
}

int main(int argc, char **argv)
{
	int o;
	while ((o = getopt(argc, argv, "n:r:s:d:f:b:")) != -1) {
		switch (o) {
		case 'n': records = atol(optarg); break;
		case 'r': rounds = atoi(optarg); break;
		case 's': payload = (uint32_t)atol(optarg); break;
		case 'd': dir = optarg; break;
		case 'f': flush_every = atol(optarg); break;
		case 'b': burst = atol(optarg); break;
		default:
			fprintf(stderr, "usage: durable-cost [-n records] [-r rounds] "
			        "[-s payload] [-d dir] [-f flush_every] "
			        "[-b burst_records]\n");
			return 2;
		}
	}
	if (rounds < 1 || rounds > MAXR || payload < 17 || payload > 65536 ||
	    records < 1 || flush_every < 1 || burst < 1)
		return 2;
	for (int r = 0; r < rounds; r++)
		for (int m = 0; m < NMODES; m++) {
			/* alternate the order too: no mode always follows
			 * the same one */
			int mm = r % 2 ? NMODES - 1 - m : m;
			one(mm, r);
			fprintf(stderr, ".");
		}
	fprintf(stderr, "\n");
	char b[8][96];
	printf("%ld records of %u B, one producer, overflow block, %d rounds "
	       "(median (min-max))\n\n", records, payload, rounds);
	printf("| configuration | calls M/s | to durable M/s | p50 ns | p99 ns | "
	       "p99.9 us | longest call ms | syncs |\n|---|---|---|---|---|---|---|---|\n");
	for (int m = M_DEFAULT; m <= M_BATCH; m++)
		printf("| %s | %s | %s | %s | %s | %s | %s | %s |\n", mode_name[m],
		       med(m, F_CALLS, 1e-6, "%.2f", b[0], 96),
		       med(m, F_DURABLE, 1e-6, "%.2f", b[1], 96),
		       med(m, F_P50, 1, "%.0f", b[2], 96),
		       med(m, F_P99, 1, "%.0f", b[3], 96),
		       med(m, F_P999, 1e-3, "%.1f", b[4], 96),
		       med(m, F_MAX, 1e-6, "%.2f", b[5], 96),
		       med(m, F_SYNCS, 1, "%.0f", b[6], 96));
	printf("\nLE_SYNC_BATCH with a le_flush every %ld records:\n\n"
	       "| records/s M | le_flush p50 ms | le_flush p99 ms | longest call ms |\n"
	       "|---|---|---|---|\n| %s | %s | %s | %s |\n", flush_every,
	       med(M_BATCH_FLUSH, F_DURABLE, 1e-6, "%.3f", b[0], 96),
	       med(M_BATCH_FLUSH, F_FP50, 1e-6, "%.2f", b[1], 96),
	       med(M_BATCH_FLUSH, F_FP99, 1e-6, "%.2f", b[2], 96),
	       med(M_BATCH_FLUSH, F_MAX, 1e-6, "%.2f", b[3], 96));
	printf("\nBurst of %ld records, overflow drop (the default):\n\n"
	       "| configuration | kept %% | calls M/s |\n|---|---|---|\n", burst);
	for (int m = M_BURST_DEFAULT; m <= M_BURST_NONE; m++)
		printf("| %s | %s | %s |\n", mode_name[m],
		       med(m, F_KEPT, 100, "%.1f", b[0], 96),
		       med(m, F_CALLS, 1e-6, "%.2f", b[1], 96));
	return 0;
}
