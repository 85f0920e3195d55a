/*
 * archive-cost.c -- what archiving segments (archive_keep_segments,
 * archive_after_ms; docs/FORMAT.md "Archived segments") gains and costs:
 * the compression ratio, and the CPU time per MB of segment to compress
 * and to read back, on two kinds of records:
 *
 *   bench    the benchmark's records (bench/bench.c): 128-byte payloads,
 *            a 16-digit hex index then letters, through le_write
 *   gateway  access lines in the format of the pipeline benchmark's
 *            gateway (perf/pipeline/gateway.c), through le_logf, with
 *            varied clients, methods, paths, statuses, sizes and times
 *            (a fixed pseudo-random sequence, so every run writes the same
 *            bytes)
 *
 * Each workload is written to a fresh log (64 MiB segments), then every
 * segment is archived by the library's own sequence (le__zst_archive:
 * compress, fdatasync, rename, directory fsync, unlink) and read back
 * whole (le__seg_open_read, what a reader does on opening an archive).
 * CPU is the calling thread's (CLOCK_THREAD_CPUTIME_ID), so it leaves out
 * the time waiting for the disk; MB are 10^6 bytes of segment.
 *
 *   archive-cost [-n records] [-l level[,level...]] [DIR]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "perf_engine.h"
#include "store/seg_zst.h"
#include "store/segment.h"

static uint64_t cpu_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 11);
}

static void write_bench(le_engine *e, long n)
{
	char buf[128];
	for (int i = 0; i < 128; i++)
		buf[i] = (char)('a' + i % 26);
	for (long i = 0; i < n; i++) {
		char tmp[17];
		snprintf(tmp, sizeof tmp, "%016lx", (unsigned long)i);
		memcpy(buf, tmp, 16);
		le_write(e, 0, LE_INFO, buf, sizeof buf);
	}
}

static void write_gateway(le_engine *e, long n)
{
	static const char *const methods[] = {"GET", "GET", "GET", "GET",
	                                      "POST", "PUT", "DELETE", "GET"};
	static const char *const paths[] = {
		"/api/v1/items/%u", "/api/v1/users/%u/orders", "/static/app.%u.js",
		"/api/v1/search?q=item%u&page=2", "/health", "/api/v1/cart/%u",
		"/img/products/%u.webp", "/api/v2/recommendations?user=%u"};
	static const unsigned statuses[] = {200, 200, 200, 200, 200, 200, 200,
	                                    304, 201, 204, 404, 500};
	uint64_t conn = 1000;
	for (long i = 0; i < n; i++) {
		char ip[32], url[128];
		unsigned c = rnd() % 200;
		snprintf(ip, sizeof ip, "10.%u.%u.%u", 1 + c / 100, c % 50,
		         10 + c % 37);
		unsigned p = rnd() % 8;
		snprintf(url, sizeof url, paths[p], rnd() % 5000);
		unsigned st = statuses[rnd() % 12];
		size_t bytes = st == 304 || st == 204 ? 0 : 200 + rnd() % 30000;
		uint64_t up = 300 + rnd() % 4000 + (rnd() % 50 == 0) * 90000;
		uint64_t rt = up + 40 + rnd() % 400;
		if (rnd() % 8 == 0)
			conn++;
		le_logf(e, LE_INFO,
		        "%s \"%s %.200s %s\" %u %zu rt_us=%" PRIu64
		        " upstream_us=%" PRIu64 " conn=%" PRIu64,
		        ip, methods[rnd() % 8], url, "HTTP/1.1", st, bytes, rt, up,
		        conn);
	}
}

struct result {
	uint64_t in, out, c_cpu, d_cpu, segs;
};

/* Archive every segment of shard 0 at level, then open each archive. */
static int archive_all(const char *dir, int level, struct result *r)
{
	char sd[LE_PATH_MAX], path[LE_PATH_MAX];
	uint64_t *idx;
	size_t n;

	memset(r, 0, sizeof *r);
	snprintf(sd, sizeof sd, "%s/shard-000", dir);
	if (le__seg_list(sd, &idx, &n) < 0)
		return -1;
	for (size_t k = 0; k < n; k++) {
		uint64_t in, out, t0 = cpu_ns();
		int rc = le__zst_archive(sd, idx[k], level, NULL, &in, &out);
		r->c_cpu += cpu_ns() - t0;
		if (rc < 0) {
			fprintf(stderr, "archive %s %" PRIu64 ": %s\n", sd, idx[k],
			        strerror(-rc));
			free(idx);
			return -1;
		}
		r->in += in;
		r->out += out;
		r->segs++;
	}
	for (size_t k = 0; k < n; k++) {
		const char *why = "";
		int archived;
		le__seg_path(path, sizeof path, sd, idx[k]);
		uint64_t t0 = cpu_ns();
		int fd = le__seg_open_read(path, &archived, &why);
		r->d_cpu += cpu_ns() - t0;
		if (fd < 0 || !archived) {
			fprintf(stderr, "read %s: %s\n", path, why);
			free(idx);
			return -1;
		}
		close(fd);
	}
	free(idx);
	return 0;
}

int main(int argc, char **argv)
{
	long n = 2000000;
	char levels[64] = "1,3,9";
	char dir[512] = "";
	int opt;

	while ((opt = getopt(argc, argv, "n:l:")) != -1) {
		if (opt == 'n')
			n = atol(optarg);
		else if (opt == 'l')
			snprintf(levels, sizeof levels, "%s", optarg);
		else {
			fprintf(stderr, "usage: archive-cost [-n records] "
			        "[-l level,...] [DIR]\n");
			return 2;
		}
	}
	if (optind < argc)
		snprintf(dir, sizeof dir, "%s", argv[optind]);
	if (!le__zst_built()) {
		fprintf(stderr, "archive-cost: built without libzstd\n");
		return 2;
	}
	printf("| records | level | MB | archived MB | ratio | compress CPU "
	       "ms/MB | read-back CPU ms/MB |\n|---|--:|--:|--:|--:|--:|--:|\n");
	for (int w = 0; w < 2; w++) {
		for (char *l = levels; *l;) {
			int level = atoi(l);
			le_config c;
			le_engine *e;
			struct result r;
			if (perf_config(&c, dir, sizeof dir, "le-archive-cost") < 0)
				return 1;
			c.shards = 1;
			if (perf_open(&e, &c) < 0)
				return 1;
			rng = 0x9e3779b97f4a7c15ull;
			if (w == 0)
				write_bench(e, n);
			else
				write_gateway(e, n);
			if (le_close(e) != 0 || archive_all(dir, level, &r) < 0)
				return 1;
			double mb = (double)r.in / 1e6;
			printf("| %s, %ld | %d | %.1f | %.1f | %.1f | %.2f | %.2f |\n",
			       w ? "gateway lines" : "bench 128 B", n, level, mb,
			       (double)r.out / 1e6, (double)r.in / (double)r.out,
			       (double)r.c_cpu / 1e6 / mb, (double)r.d_cpu / 1e6 / mb);
			fflush(stdout);
			l += strcspn(l, ",");
			l += *l == ',';
		}
	}
	perf_rmrf(dir);
	return 0;
}
