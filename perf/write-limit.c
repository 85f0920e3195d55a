/*
 * write-limit.c -- the machine's own limit for the raw baseline's work
 * at a record size: records memcpy'd into a 1 MiB buffer and the buffer
 * write()n when full (bench/comp_raw.c), to /dev/null (memcpy and the
 * system call alone), to a file (the page cache) and with O_DIRECT (the
 * disk), with the share of the time spent inside write() and the
 * thread's CPU time per record (docs/BENCHMARKS.md, "perf/").  What
 * bounds the 512 B and 4 KiB points of the payload scan: if the file case
 * is far below /dev/null at the same size, the page cache is the limit,
 * not the logger.  And the writer's floor: at 156 B (the frame of a
 * 128 B record) the CPU per record is what the writer's write() of the
 * same page-cache traffic costs, beside build/writer-cost's writer CPU
 * per record; CPU time, which a loaded machine disturbs less than the
 * wall clock.
 *
 *   build/write-limit [dir [MiB [record_bytes...]]]
 *
 * Defaults: build/write-limit-work, 1024 MiB, records of 128, 512 and
 * 4096 bytes.  dir must be on the disk being measured.  Built by `make
 * perf-tools`.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CAP (1u << 20)

static double clock_s(clockid_t id)
{
	struct timespec t;
	clock_gettime(id, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double now(void)
{
	return clock_s(CLOCK_MONOTONIC);
}

/* `total` bytes of `rec`-byte records through the buffer into path. */
static void run(const char *path, size_t rec, size_t total, int flags,
                const char *what)
{
	char *buf = aligned_alloc(4096, CAP + ((rec + 4095) & ~(size_t)4095));
	char *src = malloc(rec);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | flags, 0644);
	size_t len = 0;
	double in_write = 0;

	if (!buf || !src || fd < 0) {
		perror(path);
		exit(1);
	}
	memset(src, 'a', rec);
	double c0 = clock_s(CLOCK_THREAD_CPUTIME_ID), t0 = now();
	for (size_t i = 0; i < total / rec; i++) {
		memcpy(buf + len, src, rec);
		len += rec;
		if (len < CAP)
			continue;
		double a = now();
		if (write(fd, buf, CAP) != (ssize_t)CAP) {
			perror("write");
			exit(1);
		}
		in_write += now() - a;
		memmove(buf, buf + CAP, len - CAP);
		len -= CAP;
	}
	double t = now() - t0, cpu = clock_s(CLOCK_THREAD_CPUTIME_ID) - c0;
	printf("%-14s %5zu B: %6.2f GB/s  %6.2f M records/s  %3.0f%% in "
	       "write()  CPU %5.1f ns/record\n", what, rec,
	       (double)total / t / 1e9, (double)(total / rec) / t / 1e6,
	       100 * in_write / t, cpu * 1e9 / (double)(total / rec));
	close(fd);
	if (strcmp(path, "/dev/null"))
		unlink(path);
	free(buf);
	free(src);
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "build/write-limit-work";
	size_t total = (size_t)(argc > 2 ? atol(argv[2]) : 1024) << 20;
	size_t sizes[16] = {128, 512, 4096};
	int n = 3;
	char path[600];

	if (argc > 3)
		for (n = 0; n < argc - 3 && n < 16; n++)
			sizes[n] = (size_t)atol(argv[3 + n]);
	mkdir(dir, 0755);
	snprintf(path, sizeof path, "%s/out", dir);
	for (int i = 0; i < n; i++) {
		run("/dev/null", sizes[i], total, 0, "/dev/null");
		run(path, sizes[i], total, 0, "page cache");
		run(path, sizes[i], total, O_DIRECT, "O_DIRECT");
	}
	rmdir(dir);
	return 0;
}
