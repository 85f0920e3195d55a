/*
 * bench.c -- logengine's own benchmark: N records of S bytes from T
 * producer threads into segment files; the clock stops when le_flush says
 * every record is in its file, and the file is then counted.
 *
 * Reported per run: msg/s and MB/s (to durable-path completion), per-call
 * submit latency p50 / p99 / p99.9 / max (each le_write timed alone with
 * the TSC), CPU seconds (user + sys) of the process, peak RSS, records
 * dropped, bytes written.  Runs repeat (-r, 3 by default); the summary line
 * gives the median with min-max.
 *
 *   bench [-n records] [-s payload] [-t threads] [-r repeats] [-k shards]
 *         [-b batch] [-f fields-hex] [-d none|interval|batch] [-D]
 *         [-q queue-records] [-Q queue-bytes] [-R (raw baseline too)]
 *         [-o dir] [-j out.json]
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include "logengine.h"

static long n_rec = 1000000;
static size_t psize = 128;
static int nthreads = 1, repeats = 3;
static le_config cfg;

static double mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_u32(const void *a, const void *b);
static double tsc_per_ns, timer_ns;

static void calibrate(void)
{
	double t0 = mono();
	uint64_t c0 = __rdtsc();
	while (mono() - t0 < 0.05)
		;
	tsc_per_ns = (double)(__rdtsc() - c0) / ((mono() - t0) * 1e9);
	/* What the timing itself costs: the same fences around nothing. */
	static uint32_t d[100000];
	for (int i = 0; i < 100000; i++) {
		_mm_lfence();
		uint64_t a = __rdtsc();
		uint64_t b = __rdtscp(&(unsigned){0});
		d[i] = (uint32_t)(b - a);
	}
	qsort(d, 100000, sizeof *d, cmp_u32);
	timer_ns = d[50000] / tsc_per_ns;
}

struct worker {
	le_engine *e;
	long count;
	uint32_t *lat; /* cycles per call */
	long drops;
	int id;
};

static void *produce(void *arg)
{
	struct worker *w = arg;
	char buf[65536];
	memset(buf, 'x', psize);
	for (long i = 0; i < w->count; i++) {
		memcpy(buf, &i, sizeof i);
		_mm_lfence();
		uint64_t a = __rdtsc();
		int rc = le_write(w->e, (uint64_t)w->id, LE_INFO, buf, psize);
		uint64_t b = __rdtscp(&(unsigned){0});
		w->lat[i] = (uint32_t)(b - a > UINT32_MAX ? UINT32_MAX : b - a);
		if (rc == LE_EFULL)
			w->drops++;
		else if (rc < 0) {
			fprintf(stderr, "le_write: %s\n", le_strerror(rc));
			exit(1);
		}
	}
	return NULL;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

struct result {
	double msgs, mbs, p50, p99, p999, max, cpu, rss_mb, writer_ns;
	uint64_t dropped, bytes, written;
};

static double cpu_now(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static int run_once(const char *dir, struct result *r)
{
	char cmd[600];
	le_engine *e;
	struct worker w[64];
	pthread_t th[64];
	long per = n_rec / nthreads;
	le_stats st;

	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		return -1;
	cfg.dir = dir;
	cfg.create_dir = 1;
	int rc = le_open(&e, &cfg);
	if (rc < 0) {
		fprintf(stderr, "le_open: %s: %s\n", le_strerror(rc), le_errmsg());
		return rc;
	}
	uint32_t *lat = malloc(sizeof *lat * (size_t)per * nthreads);
	memset(lat, 0, sizeof *lat * (size_t)per * nthreads); /* fault in */
	double c0 = cpu_now(), t0 = mono();
	for (int i = 0; i < nthreads; i++) {
		w[i] = (struct worker){e, per, lat + (size_t)i * per, 0, i};
		pthread_create(&th[i], NULL, produce, &w[i]);
	}
	for (int i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	rc = le_flush(e, -1);
	double t1 = mono(), c1 = cpu_now();
	le_stats_get(e, &st);
	le_close(e);
	/* Count what is in the files: a run that lost records is invalid. */
	le_reader *rd;
	le_record rec;
	uint64_t found = 0;
	if (le_reader_open(&rd, dir, NULL) == 0) {
		while (le_reader_next(rd, &rec) == 1)
			found += !(rec.flags & LE_REC_MARKER);
		le_reader_close(rd);
	}
	long total = per * nthreads;
	if (rc < 0 || found != st.written ||
	    st.written + st.dropped != (uint64_t)total) {
		fprintf(stderr, "INVALID RUN: %" PRIu64 " records in files, %" PRIu64
		        " written, %" PRIu64 " dropped, %ld submitted\n",
		        found, st.written, st.dropped, total);
		free(lat);
		return -1;
	}
	qsort(lat, (size_t)total, sizeof *lat, cmp_u32);
	r->msgs = (double)total / (t1 - t0);
	r->mbs = (double)total * (double)psize / (t1 - t0) / 1e6;
	r->p50 = lat[total / 2] / tsc_per_ns;
	r->p99 = lat[(long)(total * 0.99)] / tsc_per_ns;
	r->p999 = lat[(long)(total * 0.999)] / tsc_per_ns;
	r->max = lat[total - 1] / tsc_per_ns;
	r->cpu = c1 - c0;
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	r->rss_mb = (double)ru.ru_maxrss / 1024.0;
	r->dropped = st.dropped;
	r->writer_ns = (double)st.writer_cpu_ns / (double)total;
	r->bytes = st.bytes_written;
	r->written = st.written;
	free(lat);
	return 0;
}

/* The machine's own limit: one thread copies each payload into a 1 MiB
 * buffer and write()s it to a file when full; timed to the last write. */
static double raw_baseline(const char *dir)
{
	char path[600], cmd[700];
	snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
	if (system(cmd) != 0)
		return 0;
	snprintf(path, sizeof path, "%s/raw.out", dir);
	FILE *f = fopen(path, "w");
	if (!f)
		return 0;
	int fd = fileno(f);
	size_t cap = 1u << 20, n = 0;
	char *b = malloc(cap + 65536), rec[65536];
	memset(rec, 'x', psize);
	double t0 = mono();
	for (long i = 0; i < n_rec; i++) {
		memcpy(rec, &i, sizeof i);
		memcpy(b + n, rec, psize);
		n += psize;
		if (n + psize > cap) {
			if (write(fd, b, n) != (ssize_t)n)
				return 0;
			n = 0;
		}
	}
	if (n && write(fd, b, n) != (ssize_t)n)
		return 0;
	double t1 = mono();
	fclose(f);
	free(b);
	return (double)n_rec / (t1 - t0);
}

#define FIELD(name) \
	static double get_##name(const struct result *r) { return r->name; }
FIELD(msgs)
FIELD(mbs)
FIELD(p50)
FIELD(p99)
FIELD(p999)
FIELD(max)
FIELD(cpu)

static void stat3(const struct result *rs, int n,
                  double (*get)(const struct result *), double out[3])
{
	double v[64];
	for (int i = 0; i < n; i++)
		v[i] = get(&rs[i]);
	qsort(v, (size_t)n, sizeof *v, cmp_d);
	out[0] = v[n / 2];
	out[1] = v[0];
	out[2] = v[n - 1];
}

int main(int argc, char **argv)
{
	const char *json = NULL, *dir = "build/bench-logs";
	int c;

	le_config_init(&cfg);
	cfg.durability = LE_SYNC_NONE;
	cfg.overflow = LE_OVERFLOW_BLOCK;
	int with_raw = 0;
	while ((c = getopt(argc, argv, "n:s:t:r:k:b:f:d:DRj:o:Q:q:")) != -1) {
		switch (c) {
		case 'n': n_rec = atol(optarg); break;
		case 's': psize = (size_t)atol(optarg); break;
		case 't': nthreads = atoi(optarg); break;
		case 'r': repeats = atoi(optarg); break;
		case 'k': cfg.shards = (unsigned)atoi(optarg); break;
		case 'b': cfg.batch_size = (uint32_t)atoi(optarg); break;
		case 'f': cfg.fields = (uint32_t)strtoul(optarg, NULL, 16); break;
		case 'd':
			cfg.durability = !strcmp(optarg, "batch") ? LE_SYNC_BATCH
			               : !strcmp(optarg, "interval") ? LE_SYNC_INTERVAL
			                                             : LE_SYNC_NONE;
			break;
		case 'D': cfg.direct_io = 1; break;
		case 'R': with_raw = 1; break;
		case 'Q': cfg.queue_capacity_bytes = strtoull(optarg, NULL, 0); break;
		case 'q': cfg.queue_capacity = (uint32_t)atol(optarg); break;
		case 'j': json = optarg; break;
		case 'o': dir = optarg; break;
		default:
			fprintf(stderr, "usage: see the comment in bench/bench.c\n");
			return 2;
		}
	}
	if (nthreads < 1 || nthreads > 64 || repeats < 1 || repeats > 64 ||
	    psize > 65536 || n_rec < nthreads) {
		fprintf(stderr, "bench: bad arguments\n");
		return 2;
	}
	calibrate();
	struct result rs[64];
	printf("(submit latencies include the timer itself: %.0f ns at p50)\n",
	       timer_ns);
	printf("logengine bench: %ld records x %zu B, %d producer(s), %u "
	       "shard(s), fields 0x%x, batch %u, %s%s\n",
	       n_rec, psize, nthreads, cfg.shards, cfg.fields, cfg.batch_size,
	       cfg.durability == LE_SYNC_NONE ? "sync none"
	       : cfg.durability == LE_SYNC_BATCH ? "sync batch"
	                                         : "sync interval",
	       cfg.direct_io ? ", O_DIRECT" : "");
	double raw[64];
	for (int i = 0; i < repeats; i++) {
		if (with_raw) {
			raw[i] = raw_baseline(dir);
			printf("  raw write() baseline %d: %.2f M msg/s\n", i + 1,
			       raw[i] / 1e6);
		}
		if (run_once(dir, &rs[i]) < 0)
			return 1;
		printf("  run %d: %.2f M msg/s  %.0f MB/s  submit p50 %.0f ns  "
		       "p99 %.0f ns  p99.9 %.0f ns  max %.0f us  cpu %.2f s "
		       "(writers %.0f ns/record)  rss %.0f MB  dropped %" PRIu64
		       "\n",
		       i + 1, rs[i].msgs / 1e6, rs[i].mbs, rs[i].p50, rs[i].p99,
		       rs[i].p999, rs[i].max / 1e3, rs[i].cpu,
		       rs[i].writer_ns, rs[i].rss_mb, rs[i].dropped);
	}
	double m[3], p50[3], p99[3], p999[3], mx[3], cpu[3], mb[3];
	stat3(rs, repeats, get_msgs, m);
	stat3(rs, repeats, get_mbs, mb);
	stat3(rs, repeats, get_p50, p50);
	stat3(rs, repeats, get_p99, p99);
	stat3(rs, repeats, get_p999, p999);
	stat3(rs, repeats, get_max, mx);
	stat3(rs, repeats, get_cpu, cpu);
	printf("median of %d: %.2f M msg/s (%.2f-%.2f), submit p50 %.0f ns "
	       "(%.0f-%.0f), p99 %.0f ns, p99.9 %.0f ns, max %.0f us\n",
	       repeats, m[0] / 1e6, m[1] / 1e6, m[2] / 1e6, p50[0], p50[1],
	       p50[2], p99[0], p999[0], mx[0] / 1e3);
	if (with_raw) {
		qsort(raw, (size_t)repeats, sizeof *raw, cmp_d);
		printf("raw write() baseline median %.2f M msg/s (%.2f-%.2f): "
		       "logengine at %.0f%% of it\n", raw[repeats / 2] / 1e6,
		       raw[0] / 1e6, raw[repeats - 1] / 1e6,
		       100.0 * m[0] / raw[repeats / 2]);
	}
	if (json) {
		FILE *f = fopen(json, "w");
		if (!f) {
			perror(json);
			return 1;
		}
		fprintf(f, "{\"target\":\"logengine\",\"records\":%ld,\"payload\":%zu,"
		        "\"threads\":%d,\"shards\":%u,\"fields\":%u,\"batch\":%u,"
		        "\"repeats\":%d,\"msgs_per_s\":{\"median\":%.0f,\"min\":%.0f,"
		        "\"max\":%.0f},\"mb_per_s\":%.1f,\"submit_ns\":{\"p50\":%.1f,"
		        "\"p99\":%.1f,\"p999\":%.1f,\"max\":%.1f,\"timer\":%.1f},"
		        "\"cpu_s\":%.3f,"
		        "\"rss_mb\":%.1f,\"dropped\":%" PRIu64 ",\"bytes\":%" PRIu64 "}\n",
		        n_rec, psize, nthreads, cfg.shards, cfg.fields,
		        cfg.batch_size, repeats, m[0], m[1], m[2], mb[0], p50[0],
		        p99[0], p999[0], mx[0], timer_ns, cpu[0], rs[0].rss_mb,
		        rs[0].dropped,
		        rs[0].bytes);
		fclose(f);
	}
	return 0;
}
