/*
 * open-cycle.c -- what an engine's whole life costs when its files cost
 * nothing: le_open of a directory, one record, le_flush, le_close, a read
 * of the directory and its files removed, on memfs (tests/memfs.c, the
 * file system the fuzz targets run on) and on a real directory.  The
 * difference is what the files cost; what is left on memfs is the floor
 * of an engine-opening fuzz input without the sanitizers.
 * docs/BENCHMARKS.md, "Fuzzing depth", has its figures.
 *
 *   build/open-cycle [CYCLES]      (default 1,000 per round)
 *
 * The configuration is fuzz_queue's (a small queue and store buffer, no
 * sync).  Rounds alternate, five of each; a round's figure is the
 * process's CPU time (every thread's) and the wall time per cycle.
 * Prints each as median and min-max of the five rounds.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "logengine.h"
#include "base/os.h"
#include "memfs.h"

#define ROUNDS 5

static double clock_ns(clockid_t id)
{
	struct timespec t;
	clock_gettime(id, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static char names[64][64];
static int nnames;

static int keep_name(void *arg, const char *name, unsigned type)
{
	(void)arg, (void)type;
	if (nnames < 64)
		snprintf(names[nnames++], sizeof names[0], "%s", name);
	return 0;
}

/* Remove the files of dir/shard-000 (through the table: memfs or not). */
static void empty(const char *dir)
{
	char sd[300], p[400 + 64];
	snprintf(sd, sizeof sd, "%s/shard-000", dir);
	int fd = le__open(sd, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		return;
	nnames = 0;
	le__dir_each(fd, keep_name, NULL);
	le__close(fd);
	for (int i = 0; i < nnames; i++) {
		snprintf(p, sizeof p, "%.299s/%.63s", sd, names[i]);
		le__unlink(p);
	}
}

static void cycle(const char *dir)
{
	le_config c;
	le_engine *e;
	le_config_init(&c);
	c.dir = dir;
	c.queue_capacity = 16;
	c.queue_capacity_bytes = 1024;
	c.max_record_bytes = 1024;
	c.max_pending_bytes = 4096;
	c.durability = LE_SYNC_NONE;
	c.checkpoint_ms = 0;
	if (le_open(&e, &c) != 0) {
		fprintf(stderr, "open-cycle: le_open(%s): %s\n", dir,
		        le_errmsg());
		exit(1);
	}
	if (le_write(e, 0, LE_INFO, "after the queue", 15) != 0 ||
	    le_flush(e, 10000) != 0 || le_close(e) != 0) {
		fprintf(stderr, "open-cycle: %s\n", le_errmsg());
		exit(1);
	}
	le_reader_opts o;
	le_reader *r;
	le_record rec;
	le_reader_opts_init(&o);
	if (le_reader_open(&r, dir, &o) != 0) {
		fprintf(stderr, "open-cycle: reader: %s\n", le_errmsg());
		exit(1);
	}
	while (le_reader_next(r, &rec) == 1)
		;
	le_reader_close(r);
	empty(dir);
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void report(const char *what, double *v)
{
	qsort(v, ROUNDS, sizeof *v, cmp);
	printf("  %-22s %7.1f us (%.1f-%.1f)\n", what, v[ROUNDS / 2] / 1e3,
	       v[0] / 1e3, v[ROUNDS - 1] / 1e3);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000;
	const char *tmp = getenv("TMPDIR");
	char real[256];
	double cpu[2][ROUNDS], wall[2][ROUNDS];

	if (n <= 0)
		n = 1000;
	snprintf(real, sizeof real, "%s/open-cycle-XXXXXX",
	         tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(real) || memfs_install() != 0 ||
	    le__mkdir(MEMFS_ROOT "/log", 0750) != 0) {
		perror("open-cycle: set-up");
		return 1;
	}
	const char *dirs[2] = {MEMFS_ROOT "/log", real};
	cycle(dirs[0]); /* warm: the first le_open's one-time work */
	cycle(dirs[1]);
	for (int r = 0; r < ROUNDS; r++)
		for (int k = 0; k < 2; k++) {
			double c0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
			double w0 = clock_ns(CLOCK_MONOTONIC);
			for (long i = 0; i < n; i++)
				cycle(dirs[k]);
			cpu[k][r] = (clock_ns(CLOCK_PROCESS_CPUTIME_ID) - c0) / n;
			wall[k][r] = (clock_ns(CLOCK_MONOTONIC) - w0) / n;
		}
	printf("open-cycle: %ld cycles a round, %d rounds each; per cycle, "
	       "on memfs and in %s:\n", n, ROUNDS, real);
	report("memfs, CPU", cpu[0]);
	report("real files, CPU", cpu[1]);
	report("memfs, wall", wall[0]);
	report("real files, wall", wall[1]);
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", real);
	if (system(cmd) != 0)
		fprintf(stderr, "open-cycle: could not remove %s\n", real);
	return memfs_uninstall() == 0 ? 0 : 1;
}
