/*
 * bench.c -- the benchmark driver: logengine side by side with spdlog,
 * glog and a raw write() baseline (bench.h, one file per competitor), over
 * the presets (the comparisons, then scans of payload, producers and each
 * engine knob), with a soak run.
 *
 *   bench [--quick | --scan | --full] [--only P,P..] [--list]
 *         [-n records] [-r repeats] [-s payload] [-t threads]
 *         [--targets logengine,spdlog,glog,raw] [--out DIR] [--work DIR]
 *         [--soak SECS] [--soak-rate MSG/S] [--soak-interval SECS]
 *         [--soak-targets T,T..] [--formatted] [--untimed]
 *         [--shards N] [--route-keys K] [--batch N] [--fields HEX]
 *         [--queue N] [--queue-bytes N] [--max-pending N] [--flush-ms N]
 *         [--sync none|interval|batch] [--checkpoint-ms N] [--direct]
 *         [--drop] [--quiet]
 *
 * The knobs (--formatted, --untimed, --shards .. --drop) change the base of every preset; given
 * without --only they select the "custom" preset alone.  --list names the
 * presets; --quick (the default: compare, formatted, soak), --scan (and
 * every scan), --full (and a 10-minute soak) choose them.
 *
 * How one run is measured (the same for every competitor):
 *   - it runs in a child process of its own (fork), so CPU seconds (user +
 *     sys, getrusage) and peak RSS (ru_maxrss) are those of the whole
 *     process: producers, the competitor's threads, and this driver's
 *     4 bytes of latency record per message;
 *   - `threads` producers log `records` records (a 16-digit hex index,
 *     then letters; never a newline) or the NanoLog/Quill formatted
 *     message; each call is timed alone with the TSC (lfence; rdtsc;
 *     call; rdtscp), which adds the timer's own cost (reported), or not
 *     timed at all (points marked untimed: the raw baseline's limit);
 *   - the clock starts when the producers start and stops when finish()
 *     says every record is in its file; the files are then read back and
 *     counted, and a run whose files lack a record that was not reported
 *     dropped is INVALID (printed, kept out of the medians, exit status 1).
 * Each preset's points run `repeats` times, interleaved (repeat 1 of every
 * point and target, then repeat 2, ...) so that a noisy minute hits them
 * all; medians are reported with min-max.
 *
 * Output: perf/results/bench/<date>/<preset>.json (every run's figures and
 * the medians), soak-<target>.json, BENCH.md (the Markdown tables, also
 * printed at the end), and perf/results/bench/latest -> <date>.
 *
 * This file runs things; presets.c says what to run, report.c what came
 * out (driver.h is what they share).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include "driver.h"

const struct competitor *const comps[NCOMP] = {
	&bench_le, &bench_spdlog, &bench_glog, &bench_raw};
struct opts O;
struct soak_run soaks[NCOMP];
int nsoaks;

/* ---- clocks ---- */

static double mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_now(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

double tsc_per_ns, timer_ns;

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

/* TSC ticks per ns, and what timing an empty call costs (its median). */
static void calibrate(void)
{
	enum { N = 100000 };
	static uint32_t d[N];
	double t0 = mono();
	uint64_t c0 = __rdtsc();

	while (mono() - t0 < 0.05)
		;
	tsc_per_ns = (double)(__rdtsc() - c0) / ((mono() - t0) * 1e9);
	for (int i = 0; i < N; i++) {
		_mm_lfence();
		uint64_t a = __rdtsc();
		uint64_t b = __rdtscp(&(unsigned){0});
		d[i] = (uint32_t)(b - a);
	}
	qsort(d, N, sizeof *d, cmp_u32);
	timer_ns = d[N / 2] / tsc_per_ns;
}

/* ---- helpers shared with the competitors ---- */

static int count_lines(const char *path, long *lines,
                       int (*want)(const char *, size_t))
{
	FILE *f = fopen(path, "r");
	if (!f)
		return -errno;
	if (!want) {
		static char buf[1 << 20];
		size_t n;
		while ((n = fread(buf, 1, sizeof buf, f)) > 0)
			for (char *p = buf; (p = memchr(p, '\n', (size_t)(
			                                 buf + n - p)));
			     p++)
				++*lines;
	} else {
		char *line = NULL;
		size_t cap = 0;
		ssize_t n;
		while ((n = getline(&line, &cap, f)) > 0)
			*lines += want(line, (size_t)n) != 0;
		free(line);
	}
	fclose(f);
	return 0;
}

static int has_suffix(const char *name, const char *suffix)
{
	size_t n = strlen(name), k = suffix ? strlen(suffix) : 0;
	return n >= k && !strcmp(name + n - k, suffix ? suffix : "");
}

int bench_scan_files(const char *dir, const char *suffix, uint64_t *bytes,
                     long *lines, int (*want)(const char *line, size_t len))
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char path[1024];
	struct stat st;
	int rc = 0;

	if (!d)
		return -errno;
	while (rc == 0 && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
		if (lstat(path, &st) < 0)
			continue;
		if (S_ISDIR(st.st_mode))
			rc = bench_scan_files(path, suffix, bytes, lines, want);
		else if (S_ISREG(st.st_mode) &&
		         has_suffix(de->d_name, suffix)) {
			*bytes += (uint64_t)st.st_size;
			if (lines)
				rc = count_lines(path, lines, want);
		}
	}
	closedir(d);
	return rc;
}

static int rm_rf(const char *dir)
{
	char cmd[1200];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static int mkdir_p(const char *dir)
{
	char cmd[1200];
	snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* ---- latency histogram (soak intervals) ----
 * Log-linear: 64 buckets per power of two, so a percentile read from it is
 * within 1/64 (1.6%) of the exact value. */

#define H_BUCKETS (64 * 38)

struct hist {
	uint64_t n, max;
	uint32_t b[H_BUCKETS];
};

static unsigned h_index(uint64_t v)
{
	if (v < 64)
		return (unsigned)v;
	if (v >= (1ull << 41))
		v = (1ull << 41) - 1;
	unsigned e = 63u - (unsigned)__builtin_clzll(v);
	return (e - 5) * 64 + (unsigned)((v >> (e - 6)) & 63);
}

static uint64_t h_value(unsigned i)
{
	if (i < 64)
		return i;
	unsigned e = i / 64 + 5;
	return (uint64_t)(64 + i % 64) << (e - 6);
}

static void h_add(struct hist *h, uint64_t v)
{
	h->b[h_index(v)]++;
	h->n++;
	if (v > h->max)
		h->max = v;
}

static void h_merge(struct hist *to, const struct hist *from)
{
	for (unsigned i = 0; i < H_BUCKETS; i++)
		to->b[i] += from->b[i];
	to->n += from->n;
	if (from->max > to->max)
		to->max = from->max;
}

static double h_pct(const struct hist *h, double q)
{
	uint64_t want = (uint64_t)ceil(q * (double)h->n), sum = 0;
	if (!h->n)
		return 0;
	for (unsigned i = 0; i < H_BUCKETS; i++) {
		sum += h->b[i];
		if (sum >= want && sum)
			return (double)h_value(i) / tsc_per_ns;
	}
	return (double)h->max / tsc_per_ns;
}

/* ---- the workload ---- */

/* A record's payload: its index in 16 hex digits, then letters. */
static void payload_fill(char *buf, uint32_t len)
{
	for (uint32_t i = 0; i < len; i++)
		buf[i] = (char)('a' + i % 26);
}

static void payload_index(char *buf, uint32_t len, uint64_t idx)
{
	static const char hex[] = "0123456789abcdef";
	char tmp[16];
	for (int i = 15; i >= 0; i--, idx >>= 4)
		tmp[i] = hex[idx & 15];
	memcpy(buf, tmp, len < 16 ? len : 16);
}

/* The next record's payload: add one to the hex index in place (one digit
 * touched, amortized), so that the driver's own work between two calls is
 * a few instructions, not a 16-digit conversion. */
static void payload_next(char *buf, uint32_t len)
{
	for (int k = (len < 16 ? (int)len : 16) - 1; k >= 0; k--) {
		if (buf[k] == '9') {
			buf[k] = 'a';
			return;
		}
		if (buf[k] != 'f') {
			buf[k]++;
			return;
		}
		buf[k] = '0';
	}
}

static int ndigits(long v)
{
	int n = 1;
	if (v < 0) {
		n++;
		v = -v;
	}
	while (v >= 10) {
		v /= 10;
		n++;
	}
	return n;
}

/* Length of BENCH_FMT with (i, 2i, i/2.0): the halves print exactly. */
static uint64_t fmt_len(long i)
{
	return sizeof "Logging int: , int: , double: " - 1 + (uint64_t)(
	               ndigits(i) + ndigits(2 * i) + ndigits(i / 2) + 7);
}

/* Length of "{} {} {}" with (i, 2i, i/2.0): i/2.0 prints shortest, "3"
 * or "3.5" (BENCH_KV's figure of text, what spdlog's line carries). */
static uint64_t kv_len(long i)
{
	return (uint64_t)(ndigits(i) + ndigits(2 * i) + ndigits(i / 2) + 2 +
	                  (i % 2 ? 2 : 0));
}

struct producer {
	const struct competitor *c;
	const struct bench_cfg *cfg;
	void *st;
	int tid;
	long first, count; /* global indexes first..first+count-1 */
	uint32_t *lat;     /* TSC ticks per call (run), or NULL (soak) */
	long drops;
	int err;
	/* soak only */
	struct soak *soak;
	long sent;
	char pad[64];
};

static atomic_int go;

/* BENCH_BURST_GAP_NS of spinning (not a sleep: waking costs more than
 * the gap, and would be timed by the next call's cache misses). */
static void burst_gap(void)
{
	uint64_t end = __rdtsc() + (uint64_t)(BENCH_BURST_GAP_NS * tsc_per_ns);
	while (__rdtsc() < end)
		_mm_pause();
}

/* One call of the workload (buf already holds record i's payload). */
static inline int call_once(struct producer *w, const char *buf, long i)
{
	const struct bench_cfg *cfg = w->cfg;

	if (cfg->workload == BENCH_FORMATTED ||
	    (cfg->workload == BENCH_DEFERRED && !w->c->log_deferred))
		return w->c->log_fmt(w->st, w->tid, (int)i, (int)(2 * i),
		                     (double)i / 2.0);
	if (cfg->workload == BENCH_DEFERRED)
		return w->c->log_deferred(w->st, w->tid, (int)i, (int)(2 * i),
		                          (double)i / 2.0);
	if (cfg->workload == BENCH_KV)
		return w->c->log_kv(w->st, w->tid, (int)i, (int)(2 * i),
		                    (double)i / 2.0);
	uint64_t key = cfg->route_keys ? (uint64_t)(i % cfg->route_keys)
	                               : (uint64_t)w->tid;
	return w->c->log(w->st, w->tid, key, buf, cfg->payload);
}

/* Untimed: the same calls without the timer around each (the timer costs
 * about as much as a raw record's copy: most of what the baseline does). */
static void produce_untimed(struct producer *w, char *buf)
{
	int raw = w->cfg->workload == BENCH_RAW;

	for (long j = 0; j < w->count; j++) {
		long i = w->first + j;
		int rc = call_once(w, buf, i);
		if (raw)
			payload_next(buf, w->cfg->payload);
		if (rc == 1)
			w->drops++;
		else if (rc < 0) {
			w->err = rc;
			break;
		}
	}
}

static void *produce(void *arg)
{
	struct producer *w = arg;
	char *buf = malloc(w->cfg->payload + 16);
	int raw = w->cfg->workload == BENCH_RAW;

	payload_fill(buf, w->cfg->payload);
	payload_index(buf, w->cfg->payload, (uint64_t)w->first);
	while (!atomic_load_explicit(&go, memory_order_acquire))
		sched_yield(); /* let the others (and valgrind's) start */
	if (w->cfg->untimed) {
		produce_untimed(w, buf);
		free(buf);
		return NULL;
	}
	for (long j = 0; j < w->count; j++) {
		long i = w->first + j;
		_mm_lfence();
		uint64_t a = __rdtsc();
		int rc = call_once(w, buf, i);
		uint64_t b = __rdtscp(&(unsigned){0});
		w->lat[j] = (uint32_t)(b - a > UINT32_MAX ? UINT32_MAX : b - a);
		if (raw)
			payload_next(buf, w->cfg->payload);
		if (rc == 1)
			w->drops++;
		else if (rc < 0) {
			w->err = rc;
			break;
		}
		if (w->cfg->burst && (j + 1) % w->cfg->burst == 0)
			burst_gap();
	}
	free(buf);
	return NULL;
}

/* ---- one measured run, in a child process ---- */

static int opt_damage; /* test hook: cut the files before counting */

/* Halve every file of 4 KiB or more under dir: records must go missing. */
static void damage_files(const char *dir)
{
	char cmd[1200];
	snprintf(cmd, sizeof cmd,
	         "find '%s' -type f -size +4k | while read -r f; do "
	         "truncate -s $(( $(stat -c %%s \"$f\") / 2 + 7 )) \"$f\"; "
	         "done", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "bench: damage failed\n");
}

static void fail_run(struct run_result *r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->why, sizeof r->why, fmt, ap);
	va_end(ap);
	r->valid = 0;
}

static void percentiles(struct run_result *r, uint32_t *lat, long n)
{
	qsort(lat, (size_t)n, sizeof *lat, cmp_u32);
	r->p50 = lat[n / 2] / tsc_per_ns;
	r->p99 = lat[(long)((double)n * 0.99)] / tsc_per_ns;
	r->p999 = lat[(long)((double)n * 0.999)] / tsc_per_ns;
	r->max = lat[n - 1] / tsc_per_ns;
}

static void measure(const struct competitor *c, const struct bench_cfg *cfg,
                    struct run_result *r)
{
	struct producer w[MAXTHREADS];
	pthread_t th[MAXTHREADS];
	struct bench_finish fin = {0, 0};
	struct bench_count cnt;
	long per = cfg->records / cfg->threads, total = per * cfg->threads;
	void *st = NULL;

	if (rm_rf(cfg->dir) < 0 || mkdir_p(cfg->dir) < 0)
		return fail_run(r, "cannot make %s", cfg->dir);
	uint32_t *lat = malloc(sizeof *lat * (size_t)total);
	if (!lat)
		return fail_run(r, "out of memory");
	/* Fault it in now, not in the timed loop (not with zeros: the
	 * compiler would make malloc + memset a calloc, which touches no
	 * page of a fresh mapping). */
	memset(lat, 0xff, sizeof *lat * (size_t)total);
	/* Thread names, for perf report --sort comm: the competitor's own
	 * threads inherit "logger" from us (logengine renames its own:
	 * le-writer-N, le-reaper, le-stream); producers are "producer"; the
	 * rest of this process is "driver". */
	pthread_setname_np(pthread_self(), "logger");
	if (c->open(cfg, &st) < 0)
		return fail_run(r, "open failed");
	pthread_setname_np(pthread_self(), "driver");
	for (int i = 0; i < cfg->threads; i++) {
		w[i] = (struct producer){.c = c, .cfg = cfg, .st = st, .tid = i,
		                         .first = i * per, .count = per,
		                         .lat = lat + (size_t)i * per};
		pthread_create(&th[i], NULL, produce, &w[i]);
		pthread_setname_np(th[i], "producer");
	}
	struct rusage ru0, ru;
	getrusage(RUSAGE_SELF, &ru0);
	double c0 = cpu_now(), t0 = mono();
	atomic_store_explicit(&go, 1, memory_order_release);
	for (int i = 0; i < cfg->threads; i++)
		pthread_join(th[i], NULL);
	int frc = c->finish(st, &fin);
	double t1 = mono(), c1 = cpu_now();
	getrusage(RUSAGE_SELF, &ru);
	r->minflt = (uint64_t)(ru.ru_minflt - ru0.ru_minflt);
	r->vcsw = (uint64_t)(ru.ru_nvcsw - ru0.ru_nvcsw);
	r->ivcsw = (uint64_t)(ru.ru_nivcsw - ru0.ru_nivcsw);
	if (c->close && c->close(st) < 0 && frc == 0)
		frc = -1;
	if (opt_damage)
		damage_files(cfg->dir);

	r->secs = t1 - t0;
	r->cpu = c1 - c0;
	r->rss_mb = (double)ru.ru_maxrss / 1024.0;
	r->submitted = (uint64_t)total;
	long drops = 0;
	for (int i = 0; i < cfg->threads; i++) {
		drops += w[i].drops;
		if (w[i].err)
			frc = w[i].err;
	}
	r->dropped = (uint64_t)drops > fin.dropped ? (uint64_t)drops
	                                            : fin.dropped;
	r->msgs = (double)total / r->secs;
	uint64_t payload_bytes = 0;
	if (cfg->workload == BENCH_FORMATTED ||
	    cfg->workload == BENCH_DEFERRED)
		for (long i = 0; i < total; i++)
			payload_bytes += fmt_len(i);
	else if (cfg->workload == BENCH_KV)
		for (long i = 0; i < total; i++)
			payload_bytes += kv_len(i);
	else
		payload_bytes = (uint64_t)total * cfg->payload;
	r->mbs = (double)payload_bytes / r->secs / 1e6;
	if (cfg->untimed)
		r->p50 = r->p99 = r->p999 = r->max = NAN;
	else
		percentiles(r, lat, total);
	free(lat);

	memset(&cnt, 0, sizeof cnt);
	int crc = c->count(cfg, &cnt);
	r->found = (uint64_t)(cnt.records < 0 ? 0 : cnt.records);
	r->bytes = cnt.bytes;
	r->valid = 1;
	uint64_t expect = r->submitted - r->dropped;
	if (frc < 0)
		fail_run(r, "the run failed (error %d)", frc);
	else if (crc < 0 || cnt.why[0])
		fail_run(r, "counting failed: %s", cnt.why);
	else if (r->found != expect)
		fail_run(r, "%" PRIu64 " records in the files, %" PRIu64
		         " expected (%" PRIu64 " submitted, %" PRIu64
		         " dropped)", r->found, expect, r->submitted,
		         r->dropped);
	else if (c == &bench_le && fin.written != r->found)
		fail_run(r, "%" PRIu64 " records in the files, logengine says %"
		         PRIu64 " written", r->found, fin.written);
}

/* All n bytes through fd (pipes between the driver and its children),
 * resuming after EINTR and short counts.  @return 0, or -1 at EOF/error. */
static int io_all(int fd, void *p, size_t n, int writing)
{
	char *b = p;
	while (n) {
		ssize_t k = writing ? write(fd, b, n) : read(fd, b, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		b += k;
		n -= (size_t)k;
	}
	return 0;
}

static int write_all(int fd, const void *p, size_t n)
{
	return io_all(fd, (void *)p, n, 1);
}

static int read_all(int fd, void *p, size_t n)
{
	return io_all(fd, p, n, 0);
}

/* Run measure() in a child; its result comes back through a pipe. */
static void run_child(const struct competitor *c, const struct bench_cfg *cfg,
                      struct run_result *r)
{
	int p[2];

	memset(r, 0, sizeof *r);
	fflush(NULL);
	if (pipe(p) < 0)
		return fail_run(r, "pipe: %s", strerror(errno));
	pid_t pid = fork();
	if (pid < 0)
		return fail_run(r, "fork: %s", strerror(errno));
	if (pid == 0) {
		close(p[0]);
		alarm(1800); /* a hung competitor must not hang the suite */
		measure(c, cfg, r);
		write_all(p[1], r, sizeof *r);
		fflush(NULL);
		_exit(0);
	}
	close(p[1]);
	int got = read_all(p[0], r, sizeof *r);
	close(p[0]);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (got < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail_run(r, "the run's process died (%s %d)",
		         WIFSIGNALED(st) ? "signal" : "exit",
		         WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
}

/* ---- soak ---- */

#define SOAK_SLOTS 8

struct soak {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct hist agg[SOAK_SLOTS];
	int agg_n[SOAK_SLOTS], agg_k[SOAK_SLOTS];
	int threads, intervals;
	double t0, iv, rate; /* rate per thread, 0: unpaced */
};

static void soak_publish(struct soak *s, struct hist *h, int k)
{
	int slot = k % SOAK_SLOTS;
	pthread_mutex_lock(&s->mu);
	while (s->agg_k[slot] != k) /* still holds interval k - SOAK_SLOTS */
		pthread_cond_wait(&s->cv, &s->mu);
	h_merge(&s->agg[slot], h);
	s->agg_n[slot]++;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	memset(h, 0, sizeof *h);
}

/* Paced producers sleep until their next chunk is due (never spin: the
 * soak's CPU figure must be the logger's, not the pacing's). */
static void pace(struct soak *s, long sent)
{
	if (s->rate <= 0)
		return;
	double d = s->t0 + (double)sent / s->rate - mono();
	if (d > 0) {
		struct timespec ts;
		ts.tv_sec = (time_t)d;
		ts.tv_nsec = (long)((d - (double)ts.tv_sec) * 1e9);
		nanosleep(&ts, NULL);
	}
}

static void *soak_produce(void *arg)
{
	struct producer *w = arg;
	struct soak *s = w->soak;
	struct hist *h = calloc(1, sizeof *h);
	char *buf = malloc(w->cfg->payload + 16);
	int k = 0;
	/* paced: a millisecond's worth of records at a time */
	long chunk = s->rate > 0 ? 1 + (long)(s->rate / 1000) : 64;
	if (chunk > 1024)
		chunk = 1024;

	payload_fill(buf, w->cfg->payload);
	payload_index(buf, w->cfg->payload, (uint64_t)w->first);
	while (!atomic_load_explicit(&go, memory_order_acquire))
		sched_yield(); /* let the others (and valgrind's) start */
	double edge = s->t0 + s->iv; /* t0 was set before go */
	for (long i = w->first; k < s->intervals;) {
		pace(s, w->sent);
		for (long j = 0; j < chunk; j++, i++) {
			_mm_lfence();
			uint64_t a = __rdtsc();
			int rc = call_once(w, buf, i);
			uint64_t b = __rdtscp(&(unsigned){0});
			h_add(h, b - a);
			if (w->cfg->workload == BENCH_RAW)
				payload_next(buf, w->cfg->payload);
			if (rc == 1)
				w->drops++;
			else if (rc < 0) {
				w->err = rc;
				k = s->intervals;
				break;
			}
		}
		w->sent += chunk;
		double now = mono();
		while (now >= edge && k < s->intervals) {
			soak_publish(s, h, k++);
			edge += s->iv;
		}
	}
	for (; k < s->intervals; k++) /* after an error: unblock the monitor */
		soak_publish(s, h, k);
	free(buf);
	free(h);
	return NULL;
}

static long rss_kb(void)
{
	long pages = 0, res = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &res) != 2)
			res = 0;
		fclose(f);
	}
	return res * (sysconf(_SC_PAGESIZE) / 1024);
}

/* In the child: run for secs, one soak_iv per interval down fd. */
static void soak_child(const struct competitor *c, const struct bench_cfg *cfg,
                       double secs, double rate, double iv, int fd)
{
	struct producer w[MAXTHREADS];
	pthread_t th[MAXTHREADS];
	struct soak *s = calloc(1, sizeof *s);
	struct soak_iv out;
	void *st = NULL;
	uint64_t written = 0, dropped = 0;

	memset(&out, 0, sizeof out);
	out.last = 1;
	pthread_setname_np(pthread_self(), "logger"); /* as in measure() */
	if (rm_rf(cfg->dir) < 0 || mkdir_p(cfg->dir) < 0 ||
	    c->open(cfg, &st) < 0) {
		snprintf(out.why, sizeof out.why, "open failed");
		write_all(fd, &out, sizeof out);
		return;
	}
	pthread_setname_np(pthread_self(), "driver");
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	s->threads = cfg->threads;
	s->iv = iv;
	s->intervals = (int)(secs / iv + 0.5);
	if (s->intervals < 1)
		s->intervals = 1;
	s->rate = rate / cfg->threads;
	for (int k = 0; k < SOAK_SLOTS; k++)
		s->agg_k[k] = k;
	for (int i = 0; i < cfg->threads; i++) {
		w[i] = (struct producer){.c = c, .cfg = cfg, .st = st, .tid = i,
		                         .first = (long)i << 40, .soak = s};
		pthread_create(&th[i], NULL, soak_produce, &w[i]);
		pthread_setname_np(th[i], "producer");
	}
	double c0 = cpu_now(), cprev = c0, peak_mb = 0;
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	long flt_prev = ru.ru_minflt;
	s->t0 = mono();
	atomic_store_explicit(&go, 1, memory_order_release);
	for (int k = 0; k < s->intervals; k++) {
		int slot = k % SOAK_SLOTS;
		pthread_mutex_lock(&s->mu);
		while (s->agg_n[slot] < s->threads)
			pthread_cond_wait(&s->cv, &s->mu);
		struct soak_iv v = {.index = k, .t = (k + 1) * iv, .valid = 1};
		struct hist *h = &s->agg[slot];
		v.records = h->n;
		v.msgs = (double)h->n / iv;
		v.p50 = h_pct(h, 0.5);
		v.p99 = h_pct(h, 0.99);
		v.p999 = h_pct(h, 0.999);
		v.max = (double)h->max / tsc_per_ns;
		memset(h, 0, sizeof *h);
		s->agg_n[slot] = 0;
		s->agg_k[slot] = k + SOAK_SLOTS;
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&s->mu);
		double cn = cpu_now();
		v.cpu = cn - cprev;
		cprev = cn;
		getrusage(RUSAGE_SELF, &ru);
		v.minflt = (uint64_t)(ru.ru_minflt - flt_prev);
		flt_prev = ru.ru_minflt;
		v.rss_mb = (double)rss_kb() / 1024.0;
		if (v.rss_mb > peak_mb)
			peak_mb = v.rss_mb;
		if (c->progress)
			c->progress(st, &v.written, &v.dropped, &v.queued);
		write_all(fd, &v, sizeof v);
	}
	long sent = 0, drops = 0;
	int err = 0;
	for (int i = 0; i < cfg->threads; i++) {
		pthread_join(th[i], NULL);
		sent += w[i].sent;
		drops += w[i].drops;
		if (w[i].err)
			err = w[i].err;
	}
	struct bench_finish fin = {0, 0};
	int frc = c->finish(st, &fin);
	double t1 = mono();
	if (c->progress) {
		written = fin.written;
		dropped = fin.dropped;
	}
	if (c->close)
		c->close(st);
	out.t = t1 - s->t0;
	out.records = (uint64_t)sent;
	out.msgs = (double)sent / out.t;
	out.cpu = cpu_now() - c0;
	getrusage(RUSAGE_SELF, &ru);
	/* ru_maxrss can miss a mapping unmapped by close: take the larger */
	out.rss_mb = (double)ru.ru_maxrss / 1024.0;
	if (peak_mb > out.rss_mb)
		out.rss_mb = peak_mb;
	out.written = written;
	out.dropped = c->progress ? dropped : (uint64_t)drops;
	out.valid = !err && frc == 0;
	if (!out.valid)
		snprintf(out.why, sizeof out.why, "the run failed (%d)",
		         err ? err : frc);
	else if (c->progress && written + dropped != (uint64_t)sent) {
		out.valid = 0;
		snprintf(out.why, sizeof out.why,
		         "%" PRIu64 " written + %" PRIu64 " dropped != %ld "
		         "submitted", written, dropped, sent);
	}
	write_all(fd, &out, sizeof out);
}

/* ---- soak, in the parent ---- */

static void soak_progress(const struct competitor *c, const struct soak_iv *v)
{
	char a[32], b[32], d[32];
	if (O.quiet)
		return;
	fprintf(stderr, "soak %-9s t=%6g s  %s msg/s  p99 %s  p99.9 %s  "
	        "rss %.1f MB", c->name, v->t, fmt_rate(v->msgs, a, 32),
	        fmt_dur(v->p99, b, 32), fmt_dur(v->p999, d, 32), v->rss_mb);
	if (c->progress)
		fprintf(stderr, "  written %" PRIu64 "  dropped %" PRIu64,
		        v->written, v->dropped);
	fputc('\n', stderr);
}

static void run_soak(const struct competitor *c)
{
	struct soak_run *sr = &soaks[nsoaks++];
	struct bench_cfg cfg = preset_base();
	char dir[1100];
	int p[2];

	memset(sr, 0, sizeof *sr);
	sr->c = c;
	cfg.soak = 1;
	snprintf(dir, sizeof dir, "%s/soak-%s", O.work, c->name);
	cfg.dir = dir;
	fflush(NULL);
	if (pipe(p) < 0) {
		perror("pipe");
		return;
	}
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		soak_child(c, &cfg, O.soak, O.soak_rate, O.soak_iv, p[1]);
		fflush(NULL);
		_exit(0);
	}
	close(p[1]);
	struct soak_iv v;
	while (pid > 0 && read_all(p[0], &v, sizeof v) == 0) {
		if (v.last) {
			sr->total = v;
			sr->done = 1;
			break;
		}
		sr->iv = realloc(sr->iv, (size_t)(sr->n + 1) * sizeof v);
		sr->iv[sr->n++] = v;
		soak_progress(c, &v);
	}
	close(p[0]);
	int st = 0;
	while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!sr->done || !WIFEXITED(st) || WEXITSTATUS(st)) {
		sr->total.valid = 0;
		snprintf(sr->total.why, sizeof sr->total.why,
		         "the soak's process died");
	}
	rm_rf(dir);
}

/* ---- main ---- */

static int any_invalid;

static void progress(int done, int total, double t0, const struct point *p,
                     int t, int rep, const struct run_result *r)
{
	char a[32], b[32], c[32];
	if (!r->valid)
		any_invalid = 1;
	if (O.quiet && r->valid)
		return;
	double el = mono() - t0, eta = el / done * (total - done);
	fprintf(stderr, "[%3d/%3d %4.0fs, ~%3.0fs left] %-12s %-34s %-9s "
	        "%d/%d: ", done, total, el, eta, p->preset, p->label,
	        comps[t]->name, rep + 1, O.repeats);
	if (r->valid)
		fprintf(stderr, "%s msg/s  p50 %s  p99.9 %s\n",
		        fmt_rate(r->msgs, a, 32), fmt_dur(r->p50, b, 32),
		        fmt_dur(r->p999, c, 32));
	else
		fprintf(stderr, "INVALID RUN: %s\n", r->why);
}

/* Run point p's target t once, in a fresh work directory. */
static void run_one(struct point *p, int t)
{
	char dir[1100];

	snprintf(dir, sizeof dir, "%s/%s", O.work, comps[t]->name);
	p->cfg.dir = dir;
	run_child(comps[t], &p->cfg, &p->res[t][p->nres[t]]);
	p->cfg.dir = NULL;
	rm_rf(dir);
}

/* Preset by preset; inside one, repeat r of every point and target before
 * repeat r + 1, so that a noisy minute hits them all alike. */
static void run_points(void)
{
	int total = 0, done = 0;
	double t0 = mono();

	for (size_t i = 0; i < npts; i++)
		total += __builtin_popcount(pts[i].targets) * O.repeats;
	for (size_t a = 0, b; a < npts; a = b) {
		for (b = a; b < npts && !strcmp(pts[b].preset, pts[a].preset);)
			b++;
		for (int rep = 0; rep < O.repeats; rep++)
			for (size_t i = a; i < b; i++)
				for (int t = 0; t < NCOMP; t++) {
					struct point *p = &pts[i];
					if (!(p->targets & (1u << t)))
						continue;
					run_one(p, t);
					progress(++done, total, t0, p, t, rep,
					         &p->res[t][p->nres[t]++]);
				}
		report_preset_json(pts[a].preset);
	}
}

static void usage(FILE *f)
{
	fprintf(f, "usage: bench [--quick|--scan|--full] [--only P,P..] "
	        "[--list] [-n records] [-r repeats]\n"
	        "  [-s payload] [-t threads] [--targets T,T..] [--out DIR] "
	        "[--work DIR]\n"
	        "  [--soak SECS] [--soak-rate N] [--soak-interval SECS] "
	        "[--soak-targets T,T..]\n"
	        "  [--formatted] [--untimed] [--shards N] [--route-keys K] "
	        "[--batch N] [--fields HEX]\n"
	        "  [--queue N] [--queue-bytes N] [--max-pending N] "
	        "[--flush-ms N]\n"
	        "  [--sync none|interval|batch] [--checkpoint-ms N] "
	        "[--direct] [--drop] [--quiet]\n"
	        "See the comment at the top of bench/bench.c.\n");
}

enum { OPT_QUICK = 256, OPT_SCAN, OPT_FULL, OPT_ONLY, OPT_LIST,
       OPT_TARGETS, OPT_OUT, OPT_WORK, OPT_SOAK, OPT_SOAK_RATE, OPT_SOAK_IV,
       OPT_SOAK_TARGETS, OPT_FORMATTED, OPT_UNTIMED, OPT_SHARDS, OPT_KEYS, OPT_BATCH,
       OPT_FIELDS, OPT_QUEUE, OPT_QBYTES, OPT_PENDING, OPT_FLUSH, OPT_SYNC,
       OPT_CKPT, OPT_DIRECT, OPT_DROP, OPT_DAMAGE, OPT_QUIET };

static const struct option longopts[] = {
	{"quick", 0, 0, OPT_QUICK}, {"scan", 0, 0, OPT_SCAN},
	{"full", 0, 0, OPT_FULL}, {"only", 1, 0, OPT_ONLY},
	{"list", 0, 0, OPT_LIST}, {"records", 1, 0, 'n'},
	{"repeats", 1, 0, 'r'}, {"payload", 1, 0, 's'},
	{"threads", 1, 0, 't'}, {"targets", 1, 0, OPT_TARGETS},
	{"out", 1, 0, OPT_OUT}, {"work", 1, 0, OPT_WORK},
	{"soak", 1, 0, OPT_SOAK}, {"soak-rate", 1, 0, OPT_SOAK_RATE},
	{"soak-interval", 1, 0, OPT_SOAK_IV},
	{"soak-targets", 1, 0, OPT_SOAK_TARGETS},
	{"formatted", 0, 0, OPT_FORMATTED},
	{"untimed", 0, 0, OPT_UNTIMED}, {"shards", 1, 0, OPT_SHARDS},
	{"route-keys", 1, 0, OPT_KEYS}, {"batch", 1, 0, OPT_BATCH},
	{"fields", 1, 0, OPT_FIELDS}, {"queue", 1, 0, OPT_QUEUE},
	{"queue-bytes", 1, 0, OPT_QBYTES}, {"max-pending", 1, 0, OPT_PENDING},
	{"flush-ms", 1, 0, OPT_FLUSH}, {"sync", 1, 0, OPT_SYNC},
	{"checkpoint-ms", 1, 0, OPT_CKPT}, {"direct", 0, 0, OPT_DIRECT},
	{"drop", 0, 0, OPT_DROP}, {"damage", 0, 0, OPT_DAMAGE},
	{"quiet", 0, 0, OPT_QUIET}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};

/* One of logengine's knobs (or --formatted, --untimed).  @return 0, or -1 if c is
 * not one. */
static int knob(int c, const char *arg)
{
	switch (c) {
	case OPT_FORMATTED: O.formatted = 1; break;
	case OPT_UNTIMED: O.untimed = 1; break;
	case OPT_SHARDS: O.le.shards = (unsigned)atoi(arg); break;
	case OPT_KEYS: O.route_keys = atoi(arg); break;
	case OPT_BATCH: O.le.batch_size = (uint32_t)atol(arg); break;
	case OPT_FIELDS:
		O.le.fields = (uint32_t)strtoul(arg, NULL, 16);
		break;
	case OPT_QUEUE: O.le.queue_capacity = (uint32_t)atol(arg); break;
	case OPT_QBYTES:
		O.le.queue_capacity_bytes = strtoull(arg, NULL, 0);
		break;
	case OPT_PENDING:
		O.le.max_pending_bytes = (uint32_t)strtoul(arg, NULL, 0);
		break;
	case OPT_FLUSH: O.le.flush_ms = (uint32_t)atol(arg); break;
	case OPT_SYNC:
		O.le.durability = !strcmp(arg, "batch") ? LE_SYNC_BATCH
		                : !strcmp(arg, "interval") ? LE_SYNC_INTERVAL
		                                           : LE_SYNC_NONE;
		break;
	case OPT_CKPT: O.le.checkpoint_ms = (uint32_t)atol(arg); break;
	case OPT_DIRECT: O.le.direct_io = 1; break;
	case OPT_DROP: O.le.overflow = LE_OVERFLOW_DROP; break;
	default: return -1;
	}
	return 0;
}

static void parse(int argc, char **argv)
{
	int c, soak_set = 0, iv_set = 0, st_set = 0, rate_set = 0;

	le_config_init(&O.le);
	O.le.durability = LE_SYNC_NONE;
	O.le.overflow = LE_OVERFLOW_BLOCK;
	O.records = 1000000;
	O.repeats = 3;
	O.payload = 128;
	O.threads = 1;
	O.targets = T_ALL;
	O.soak_targets = T_LE;
	O.out = "perf/results/bench";
	O.work = "build/bench-work";
	while ((c = getopt_long(argc, argv, "n:r:s:t:h", longopts, NULL)) !=
	       -1) {
		switch (c) {
		case OPT_QUICK: O.mode = 0; break;
		case OPT_SCAN: O.mode = 1; break;
		case OPT_FULL: O.mode = 2; break;
		case OPT_ONLY: O.only = optarg; break;
		case OPT_LIST: O.list = 1; break;
		case 'n': O.records = atol(optarg); break;
		case 'r': O.repeats = atoi(optarg); break;
		case 's': O.payload = (uint32_t)atol(optarg); break;
		case 't': O.threads = atoi(optarg); break;
		case OPT_TARGETS: O.targets = parse_targets(optarg); break;
		case OPT_OUT: O.out = optarg; break;
		case OPT_WORK: O.work = optarg; break;
		case OPT_SOAK: O.soak = atof(optarg); soak_set = 1; break;
		case OPT_SOAK_RATE:
			O.soak_rate = atof(optarg);
			rate_set = 1;
			break;
		case OPT_SOAK_IV: O.soak_iv = atof(optarg); iv_set = 1; break;
		case OPT_SOAK_TARGETS:
			O.soak_targets = parse_targets(optarg);
			st_set = 1;
			break;
		case OPT_DAMAGE: opt_damage = 1; break;
		case OPT_QUIET: O.quiet = 1; break;
		case 'h': usage(stdout); exit(0);
		default:
			if (knob(c, optarg) < 0) {
				usage(stderr);
				exit(2);
			}
			O.custom = 1;
		}
	}
	if (!soak_set)
		O.soak = O.mode == 2 ? 600 : 60;
	if (!rate_set)
		O.soak_rate = 200000;
	if (!iv_set)
		O.soak_iv = O.soak >= 300 ? 10 : O.soak >= 10 ? 1 : O.soak / 4;
	if (!st_set && O.mode == 2)
		O.soak_targets = T_LE | T_SPD;
	if (O.threads < 1 || O.threads > MAXTHREADS || O.repeats < 1 ||
	    O.repeats > MAXREP || O.payload < 1 || O.payload > 65536 ||
	    O.records < O.threads * 4 || O.soak <= 0 || O.soak_iv <= 0 ||
	    O.records > (1l << 31) / 2) {
		fprintf(stderr, "bench: bad arguments\n");
		usage(stderr);
		exit(2);
	}
}

int main(int argc, char **argv)
{
	parse(argc, argv);
	if (O.list) {
		for (size_t i = 0; i < npresets; i++)
			printf("%-13s %-6s %s\n", presets[i].name,
			       presets[i].in & IN_QUICK ? "quick"
			       : presets[i].in & IN_SCAN ? "scan" : "flags",
			       presets[i].what);
		return 0;
	}
	setvbuf(stderr, NULL, _IOLBF, 0);
	calibrate();
	mkdir_p(O.work);
	report_init();
	for (size_t i = 0; i < npresets; i++)
		if (presets[i].build && preset_selected(&presets[i]))
			presets[i].build(presets[i].name);
	fprintf(stderr, "bench: %zu point(s), %d repeat(s); results in %s\n",
	        npts, O.repeats, report_dir());
	run_points();
	for (size_t i = 0; i < npresets; i++)
		if (!presets[i].build && preset_selected(&presets[i]))
			for (int t = 0; t < NCOMP; t++)
				if (O.soak_targets & (1u << t)) {
					run_soak(comps[t]);
					report_soak_json(&soaks[nsoaks - 1]);
					if (!soaks[nsoaks - 1].total.valid)
						any_invalid = 1;
				}
	report_md(stdout);
	fflush(stdout);
	rmdir(O.work); /* only if empty: it may be the user's */
	fprintf(stderr, "bench: results in %s%s\n", report_dir(),
	        any_invalid ? " -- SOME RUNS WERE INVALID" : "");
	return any_invalid ? 1 : 0;
}
