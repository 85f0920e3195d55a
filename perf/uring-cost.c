/*
 * uring-cost.c -- io_uring against pwrite for the writer's pattern: a
 * file appended in batches of B bytes (the writer's batch), synced every
 * S bytes (LE_SYNC_INTERVAL's cadence at the measured rate, or a batch's
 * group commit), each way:
 *
 *   pwrite    pwrite per batch, fdatasync on the same thread
 *   thread    pwrite per batch, fdatasync handed to a second thread (the
 *             engine's sync thread, src/store/sync.c)
 *   uring K   io_uring writes with up to K batches in flight, the sync an
 *             IORING_OP_FSYNC (DATASYNC) linked after the batch it covers
 *
 * and reports wall time, the process's CPU, and the longest time
 * the writing thread waited for a batch's buffer to be free (what a
 * producer behind it would wait).  Each way writes the same bytes to a
 * fresh file; rounds alternate the ways.  It answers whether io_uring as
 * the engine's write path would win on this machine (docs/BENCHMARKS.md,
 * "io_uring").
 *
 *   build/uring-cost [-d dir] [-m MiB] [-b batch_KiB] [-s sync_MiB] [-r rounds]
 *
 * Defaults: build/tmp/uring-cost, 512 MiB, 256 KiB batches, a sync every
 * 64 MiB, 3 rounds.  Without liburing (no <liburing.h>) only the first
 * two ways run.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#ifdef LE_HAVE_URING
#include <liburing.h>
#endif

static const char *dir = "build/tmp/uring-cost";
static size_t total = 512u << 20, batch = 256u << 10, sync_every = 64u << 20;

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* The process's CPU: its threads, and io_uring's workers (iou-wrk-*,
 * threads of the process), which do a write the ring could not do at
 * once. */
static double thread_cpu(void)
{
	struct rusage u;
	getrusage(RUSAGE_SELF, &u);
	return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec / 1e6 +
	       (double)u.ru_stime.tv_sec + (double)u.ru_stime.tv_usec / 1e6;
}

struct result {
	double wall, cpu, longest;
};

static int open_fresh(void)
{
	char path[512];
	snprintf(path, sizeof path, "%s/file", dir);
	unlink(path);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0) {
		perror(path);
		exit(1);
	}
	return fd;
}

/* A batch's bytes, as the writer fills them (a copy, so the cost of
 * filling is in every way alike). */
static void fill(char *buf, size_t i)
{
	memset(buf, 'a' + (int)(i % 26), batch);
}

static struct result run_pwrite(void)
{
	char *buf = aligned_alloc(4096, batch);
	int fd = open_fresh();
	struct result r = {0};
	double t0 = now(), c0 = thread_cpu();
	for (size_t i = 0, off = 0; off < total; i++, off += batch) {
		fill(buf, i);
		double a = now();
		if (pwrite(fd, buf, batch, (off_t)off) != (ssize_t)batch)
			exit(1);
		if ((off + batch) % sync_every == 0 && fdatasync(fd) < 0)
			exit(1);
		double w = now() - a;
		r.longest = w > r.longest ? w : r.longest;
	}
	fdatasync(fd);
	r.wall = now() - t0;
	r.cpu = thread_cpu() - c0;
	close(fd);
	free(buf);
	return r;
}

/* The sync thread of the engine, in miniature. */
static _Atomic int sync_want, sync_stop;
static int sync_fd;
static void *syncer(void *arg)
{
	(void)arg;
	for (;;) {
		int w = atomic_exchange(&sync_want, 0);
		if (w)
			fdatasync(sync_fd);
		else if (atomic_load(&sync_stop))
			return NULL;
		else
			usleep(100);
	}
}

static struct result run_thread(void)
{
	char *buf = aligned_alloc(4096, batch);
	pthread_t t;
	struct result r = {0};
	sync_fd = open_fresh();
	atomic_store(&sync_stop, 0);
	pthread_create(&t, NULL, syncer, NULL);
	double t0 = now(), c0 = thread_cpu();
	for (size_t i = 0, off = 0; off < total; i++, off += batch) {
		fill(buf, i);
		double a = now();
		if (pwrite(sync_fd, buf, batch, (off_t)off) != (ssize_t)batch)
			exit(1);
		if ((off + batch) % sync_every == 0)
			atomic_store(&sync_want, 1);
		double w = now() - a;
		r.longest = w > r.longest ? w : r.longest;
	}
	atomic_store(&sync_stop, 1);
	pthread_join(t, NULL);
	fdatasync(sync_fd);
	r.wall = now() - t0;
	r.cpu = thread_cpu() - c0;
	close(sync_fd);
	free(buf);
	return r;
}

#ifdef LE_HAVE_URING
/* K buffers, each in flight until its write completes; a sync is
 * linked after the write that ends a sync span. */
static struct result run_uring(unsigned k)
{
	struct io_uring ring;
	char **buf = calloc(k, sizeof *buf);
	int *busy = calloc(k, sizeof *busy);
	struct result r = {0};
	int fd = open_fresh();
	unsigned inflight = 0;

	if (io_uring_queue_init(2 * k + 2, &ring, 0) < 0) {
		fprintf(stderr, "io_uring unavailable\n");
		exit(1);
	}
	for (unsigned i = 0; i < k; i++)
		buf[i] = aligned_alloc(4096, batch);
	double t0 = now(), c0 = thread_cpu();
	for (size_t i = 0, off = 0; off < total; i++, off += batch) {
		unsigned b = (unsigned)(i % k);
		double a = now();
		/* reap until buffer b is free */
		while (busy[b]) {
			struct io_uring_cqe *cqe;
			if (io_uring_wait_cqe(&ring, &cqe) < 0)
				exit(1);
			if (cqe->res < 0) {
				fprintf(stderr, "io_uring: %s\n",
				        strerror(-cqe->res));
				exit(1);
			}
			uint64_t d = io_uring_cqe_get_data64(cqe);
			if (d < k)
				busy[d] = 0;
			inflight--;
			io_uring_cqe_seen(&ring, cqe);
		}
		double w = now() - a;
		r.longest = w > r.longest ? w : r.longest;
		fill(buf[b], i);
		struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
		io_uring_prep_write(sqe, fd, buf[b], (unsigned)batch, off);
		io_uring_sqe_set_data64(sqe, b);
		busy[b] = 1;
		inflight++;
		if ((off + batch) % sync_every == 0) {
			sqe->flags |= IOSQE_IO_LINK;
			sqe = io_uring_get_sqe(&ring);
			io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC);
			io_uring_sqe_set_data64(sqe, UINT64_MAX);
			inflight++;
		}
		io_uring_submit(&ring);
	}
	while (inflight) {
		struct io_uring_cqe *cqe;
		if (io_uring_wait_cqe(&ring, &cqe) < 0)
			exit(1);
		inflight--;
		io_uring_cqe_seen(&ring, cqe);
	}
	fdatasync(fd);
	r.wall = now() - t0;
	r.cpu = thread_cpu() - c0;
	io_uring_queue_exit(&ring);
	close(fd);
	for (unsigned i = 0; i < k; i++)
		free(buf[i]);
	free(buf);
	free(busy);
	return r;
}
#endif

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void row(const char *name, double (*v)[3], int rounds)
{
	double w[64], c[64], l[64];
	for (int i = 0; i < rounds; i++) {
		w[i] = (double)total / (1 << 20) / v[i][0];
		c[i] = v[i][1] * 1e3 / ((double)total / (1 << 20));
		l[i] = v[i][2] * 1e3;
	}
	qsort(w, (size_t)rounds, sizeof w[0], cmp);
	qsort(c, (size_t)rounds, sizeof c[0], cmp);
	qsort(l, (size_t)rounds, sizeof l[0], cmp);
	printf("| %s | %.0f (%.0f-%.0f) | %.3f (%.3f-%.3f) | %.2f (%.2f-%.2f) |\n",
	       name, w[rounds / 2], w[0], w[rounds - 1], c[rounds / 2], c[0],
	       c[rounds - 1], l[rounds / 2], l[0], l[rounds - 1]);
}

int main(int argc, char **argv)
{
	int rounds = 3, o;
	char cmd[1200];

	while ((o = getopt(argc, argv, "d:m:b:s:r:")) != -1) {
		switch (o) {
		case 'd': dir = optarg; break;
		case 'm': total = (size_t)atol(optarg) << 20; break;
		case 'b': batch = (size_t)atol(optarg) << 10; break;
		case 's': sync_every = (size_t)atol(optarg) << 20; break;
		case 'r': rounds = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: uring-cost [-d dir] [-m MiB] "
			        "[-b batch_KiB] [-s sync_MiB] [-r rounds]\n");
			return 2;
		}
	}
	if (rounds < 1 || rounds > 64 || !batch || total < batch ||
	    sync_every % batch)
		return 2;
	snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
	if (system(cmd) != 0)
		return 1;
	enum { NW = 5 };
	static const char *names[NW] = {"pwrite, sync inline",
	                                "pwrite, sync thread", "io_uring, 1",
	                                "io_uring, 4", "io_uring, 16"};
	static const unsigned depth[NW] = {0, 0, 1, 4, 16};
	double v[NW][64][3];
	int nw = 2;
#ifdef LE_HAVE_URING
	nw = NW;
#endif
	for (int r = 0; r < rounds; r++)
		for (int w = 0; w < nw; w++) {
			struct result x;
			if (w == 0)
				x = run_pwrite();
#ifdef LE_HAVE_URING
			else if (depth[w])
				x = run_uring(depth[w]);
#endif
			else
				x = run_thread();
			v[w][r][0] = x.wall;
			v[w][r][1] = x.cpu;
			v[w][r][2] = x.longest;
			fputc('.', stderr);
		}
	fputc('\n', stderr);
	printf("%zu MiB in %zu KiB batches, a data sync every %zu MiB, %d rounds "
	       "(median (min-max))\n\n", total >> 20, batch >> 10,
	       sync_every >> 20, rounds);
	printf("| way | MiB/s | CPU ms/MiB (process) | longest wait ms |\n");
	printf("|---|--:|--:|--:|\n");
	for (int w = 0; w < nw; w++)
		row(names[w], v[w], rounds);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : 1;
}
