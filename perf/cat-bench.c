/*
 * cat-bench.c -- `logengine cat` of deferred records against its floor
 * (docs/BENCHMARKS.md, "cat of deferred records").
 *
 *   build/cat-bench [--records N] [--runs R] [--cli PATH] [--base PATH]
 *                   [--dir DIR] [--keep]
 *
 * Writes N (2,000,000) deferred records, le_info(e, BENCH's format "Logging
 * int: %d, int: %d, double: %f", i, 2i, i/2.0), engine defaults but
 * durability none and overflow block, then in each of R (5) rounds,
 * every reading below one after the other over the same page-cached
 * files:
 *
 *   files     the segment files read() into one 1 MiB buffer: the bytes
 *             alone, `cat *.seg > /dev/null`
 *   scan      the floor: every frame of every segment decoded and checked
 *             as the reader does (le__scan_next: size, CRC, sequence),
 *             the text of none made, nothing written
 *   reader    le_reader_next over the log: the merge and each deferred
 *             record's text, nothing written
 *   json      `PATH cat -o json DIR > /dev/null` (PATH: --cli,
 *             build/logengine), a process of its own
 *   short     `PATH cat -o short DIR > /dev/null`
 *   base-*    json and short of the --base PATH, in the same round, when
 *             given (a build before a change: same-run pairs)
 *
 * Each reading is a process of its own (the in-process ones a child
 * forked for it).  Prints, for each, records/s by wall time and by CPU
 * time (user + system), median (min-max) over the rounds, and json / scan: the share
 * of the floor's rate cat keeps.  The goal line is json's median wall
 * rate against 8 M records/s.  Built by `make perf-tools`.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "perf_engine.h"
#include "store/segment.h"

#define MAX_RUNS 25
#define GOAL_RPS 8e6

enum { K_FILES, K_SCAN, K_READER, K_JSON, K_SHORT, K_BJSON, K_BSHORT, NK };
static const char *const kname[NK] = {"files", "scan", "reader", "json",
                                      "short", "base-json", "base-short"};

static double wall[NK][MAX_RUNS], cpu[NK][MAX_RUNS];
static long records = 2000000;
static char dir[512];

static double mono(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The log: `records` deferred records in dir.  @return 0 or -1. */
static int generate(void)
{
	le_config c;
	le_engine *e;

	if (perf_config(&c, dir, sizeof dir, "le-cat-bench") < 0 ||
	    perf_open(&e, &c) < 0)
		return -1;
	for (long i = 0; i < records; i++)
		le_info(e, "Logging int: %d, int: %d, double: %f", (int)i,
		        (int)(2 * i), (double)i / 2.0);
	return le_close(e) == 0 ? 0 : -1;
}

/* Call fn(path, arg) for each segment of shard 0.  @return frames (or
 * bytes) fn counted, -1 on an error. */
static long each_segment(long (*fn)(const char *, void *), void *arg)
{
	char sdir[600], path[700];
	uint64_t *segs;
	size_t nseg;
	long total = 0;

	snprintf(sdir, sizeof sdir, "%s/shard-000", dir);
	if (le__seg_list(sdir, &segs, &nseg) < 0)
		return -1;
	for (size_t i = 0; i < nseg && total >= 0; i++) {
		le__seg_path(path, sizeof path, sdir, segs[i]);
		long k = fn(path, arg);
		total = k < 0 ? -1 : total + k;
	}
	free(segs);
	return total;
}

static long read_file(const char *path, void *arg)
{
	char *buf = arg;
	long total = 0;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	while ((n = read(fd, buf, 1 << 20)) > 0)
		total += n;
	close(fd);
	return n < 0 ? -1 : total;
}

static long scan_file(const char *path, void *arg)
{
	le__scan s;
	le__frame f;
	const char *why;
	long n = 0;
	uint64_t *sum = arg;

	if (le__scan_open(&s, path, 0, &why) < 0)
		return -1;
	while (le__scan_next(&s, &f, &why) == LE_FRAME_OK) {
		*sum += f.len; /* so that the decode is not dropped */
		n++;
	}
	le__scan_close(&s);
	return n;
}

/* One in-process reading.  @return records (or bytes) seen, -1. */
static long in_process(int k)
{
	static char buf[1 << 20];
	uint64_t sum = 0;
	long n = 0;

	if (k == K_FILES)
		return each_segment(read_file, buf);
	if (k == K_SCAN)
		return each_segment(scan_file, &sum);
	le_reader *r;
	le_record rec;
	if (le_reader_open(&r, dir, NULL) < 0)
		return -1;
	while (le_reader_next(r, &rec) > 0) {
		sum += rec.len;
		n++;
	}
	le_reader_close(r);
	return sum ? n : -1;
}

/* Wait for child pid started at t0: wall and CPU seconds.  @return 0 or
 * -1 when it failed. */
static int reap(pid_t pid, double t0, double *w, double *c)
{
	int st;
	struct rusage ru;
	if (pid < 0 || wait4(pid, &st, 0, &ru) != pid)
		return -1;
	*w = mono() - t0;
	*c = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	     (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* `cli cat -o fmt dir > /dev/null`: wall and CPU seconds.  @return 0 or
 * -1 when it failed. */
static int run_cat(const char *cli, const char *fmt, double *w, double *c)
{
	double t0 = mono();
	pid_t pid = fork();
	if (pid == 0) {
		int fd = open("/dev/null", O_WRONLY);
		dup2(fd, 1);
		execl(cli, cli, "cat", "-o", fmt, "--no-pager", dir, (char *)NULL);
		_exit(127);
	}
	return reap(pid, t0, w, c);
}

/* An in-process reading in a child of its own, as cat is: a fresh heap,
 * its own CPU time.  @return as reap. */
static int in_child(int k, double *w, double *c)
{
	double t0 = mono();
	pid_t pid = fork();
	if (pid == 0)
		_exit(in_process(k) < 0 ? 1 : 0);
	return reap(pid, t0, w, c);
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Median, min and max of v[0..n) into m[3]. */
static void stats(const double *v, int n, double *m)
{
	double s[MAX_RUNS];
	memcpy(s, v, (size_t)n * sizeof *s);
	qsort(s, (size_t)n, sizeof *s, cmp_d);
	m[0] = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
	m[1] = s[0];
	m[2] = s[n - 1];
}

/* Rates (records / seconds) of kind k: median (min-max) into m[3]. */
static void rates(double (*secs)[MAX_RUNS], int k, int runs, double *m)
{
	double r[MAX_RUNS];
	for (int i = 0; i < runs; i++)
		r[i] = (double)records / secs[k][i];
	stats(r, runs, m);
}

static void report(int runs, int have_base)
{
	double w[3], c[3], q[MAX_RUNS], qm[3];

	printf("%-11s %28s %28s\n", "reading", "records/s (wall)",
	       "records/CPU-s");
	for (int k = 0; k < NK; k++) {
		if (k >= K_BJSON && !have_base)
			continue;
		rates(wall, k, runs, w);
		rates(cpu, k, runs, c);
		printf("%-11s %8.2f M (%5.2f-%5.2f M) %8.2f M (%5.2f-%5.2f M)\n",
		       kname[k], w[0] / 1e6, w[1] / 1e6, w[2] / 1e6, c[0] / 1e6,
		       c[1] / 1e6, c[2] / 1e6);
	}
	for (int i = 0; i < runs; i++)
		q[i] = cpu[K_SCAN][i] / cpu[K_JSON][i];
	stats(q, runs, qm);
	printf("json / scan (CPU, paired): %.3f (%.3f-%.3f)\n", qm[0], qm[1],
	       qm[2]);
	if (have_base) {
		for (int i = 0; i < runs; i++)
			q[i] = cpu[K_BJSON][i] / cpu[K_JSON][i];
		stats(q, runs, qm);
		printf("json / base-json (CPU, paired): %.2fx (%.2f-%.2f)\n",
		       qm[0], qm[1], qm[2]);
	}
	rates(wall, K_JSON, runs, w);
	printf("goal: cat -o json >= 8 M records/s: %.2f M, %s\n", w[0] / 1e6,
	       w[0] >= GOAL_RPS ? "met" : "NOT met");
}

int main(int argc, char **argv)
{
	const char *cli = "build/logengine", *base = NULL;
	int runs = 5, keep = 0;

	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(argv[i], "--records") && v)
			records = atol(argv[++i]);
		else if (!strcmp(argv[i], "--runs") && v)
			runs = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--cli") && v)
			cli = argv[++i];
		else if (!strcmp(argv[i], "--base") && v)
			base = argv[++i];
		else if (!strcmp(argv[i], "--dir") && v)
			snprintf(dir, sizeof dir, "%s", argv[++i]);
		else if (!strcmp(argv[i], "--keep"))
			keep = 1;
		else {
			fprintf(stderr, "usage: %s [--records N] [--runs R] "
			        "[--cli PATH] [--base PATH] [--dir DIR] "
			        "[--keep]\n", argv[0]);
			return 2;
		}
	}
	if (records <= 0 || runs < 1 || runs > MAX_RUNS || generate() < 0)
		return 2;
	for (int i = 0; i < runs; i++) {
		for (int k = 0; k < NK; k++) {
			int rc = 0;
			if (k >= K_BJSON && !base)
				continue;
			if (k <= K_READER) {
				rc = in_child(k, &wall[k][i], &cpu[k][i]);
			} else {
				const char *p = k >= K_BJSON ? base : cli;
				const char *f = k == K_JSON || k == K_BJSON
				                        ? "json" : "short";
				rc = run_cat(p, f, &wall[k][i], &cpu[k][i]);
			}
			if (rc < 0) {
				fprintf(stderr, "%s: %s failed\n", argv[0],
				        kname[k]);
				return 1;
			}
		}
	}
	printf("%ld deferred records, %d rounds, %s\n", records, runs, dir);
	report(runs, base != NULL);
	return keep ? 0 : perf_rmrf(dir) != 0;
}
