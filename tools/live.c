/*
 * live.c -- `logengine stats --live [-i SECS] [-n COUNT] DIR...`: a
 * top-like view of running engines, from their live pages (le_live_read),
 * redrawn every interval: per directory and shard, records and bytes per
 * second, drops, the queue, the disk, and p50/p99 of the write and fsync
 * latencies since the engine started.  On a terminal the screen is
 * redrawn; otherwise each interval prints plain key=value lines, one per
 * shard and one per directory (shard=all), for scripts and logs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "livedir.h"
#include "observe.h"

static volatile sig_atomic_t live_stop;

static void on_stop(int sig)
{
	(void)sig;
	live_stop = 1;
}

static const char live_usage[] =
	"usage: logengine stats --live [-i SECS] [-n COUNT] DIR...\n"
	"  -i, --interval SECS  refresh period (default 1)\n"
	"  -n, --count N        stop after N refreshes (default: until ^C)\n";

/* "12.3K" style: 4 significant characters. */
static const char *human(char *b, size_t cap, double v)
{
	static const char unit[] = " KMGTP";
	int u = 0;
	while (v >= 999.5 && u < 5) {
		v /= 1000;
		u++;
	}
	if (u == 0)
		snprintf(b, cap, "%.0f", v);
	else
		snprintf(b, cap, "%.*f%c", v < 9.95 ? 1 : 0, v, unit[u]);
	return b;
}

/* A latency in ns as "850ns", "12us", "3.4ms", "1.2s". */
static const char *dur(char *b, size_t cap, double ns)
{
	if (ns <= 0)
		snprintf(b, cap, "-");
	else if (ns < 1e3)
		snprintf(b, cap, "%.0fns", ns);
	else if (ns < 1e6)
		snprintf(b, cap, "%.*fus", ns < 1e4 ? 1 : 0, ns / 1e3);
	else if (ns < 1e9)
		snprintf(b, cap, "%.*fms", ns < 1e7 ? 1 : 0, ns / 1e6);
	else
		snprintf(b, cap, "%.1fs", ns / 1e9);
	return b;
}

struct row {
	double rec_s, bytes_s, drop_s;
	uint64_t dropped, ring, segs, disk;
	uint64_t backtrace; /* kept records the flight recorder wrote out */
	le_live_hist write, sync;
};

static void hist_add(le_live_hist *a, const le_live_hist *b)
{
	a->count += b->count;
	a->sum_ns += b->sum_ns;
	for (int i = 0; i < LE_LIVE_BUCKETS; i++)
		a->bucket[i] += b->bucket[i];
}

static void shard_row(const struct live_dir *d, unsigned i, struct row *r)
{
	const le_live *l = &d->cur[i];
	memset(r, 0, sizeof *r);
	r->rec_s = LIVE_RATE(d, written, i);
	r->bytes_s = LIVE_RATE(d, bytes_written, i);
	r->drop_s = LIVE_RATE(d, dropped, i);
	r->dropped = l->dropped;
	r->ring = l->ring_bytes;
	r->segs = l->segments;
	r->disk = l->disk_bytes;
	r->backtrace = l->backtrace_written;
	r->write = l->write;
	r->sync = l->sync;
}

static void add_row(struct row *t, const struct row *r)
{
	t->rec_s += r->rec_s;
	t->bytes_s += r->bytes_s;
	t->drop_s += r->drop_s;
	t->dropped += r->dropped;
	t->ring += r->ring;
	t->segs += r->segs;
	t->disk += r->disk;
	t->backtrace += r->backtrace;
	hist_add(&t->write, &r->write);
	hist_add(&t->sync, &r->sync);
}

/* Each shard's row, then the directory's: always with total_always, else
 * when there is more than one shard. */
typedef void (*row_fn)(void *ctx, const char *shard, const char *state,
                       const struct row *r);

static void rows(const struct live_dir *d, int total_always, row_fn fn,
                 void *ctx)
{
	struct row total, r;
	memset(&total, 0, sizeof total);
	for (unsigned i = 0; i < d->n; i++) {
		char name[16];
		snprintf(name, sizeof name, "%u", i);
		shard_row(d, i, &r);
		fn(ctx, name, live_state_name(d->cur[i].state), &r);
		add_row(&total, &r);
	}
	if (total_always || d->n > 1)
		fn(ctx, "all", live_state_name(d->state), &total);
}

static void print_tty_row(void *ctx, const char *name, const char *state,
                          const struct row *r)
{
	int have_rates = *(const int *)ctx;
	char a[16], b[16], c[16], e[16], f[16], g[16], h[16], w1[16], w2[16],
		s1[16], s2[16];
	printf("%-6s %-8s %8s %8s %8s %9s %7s %6s %8s  %7s/%-7s %7s/%-7s%s\n",
	       name, state, have_rates ? human(a, 16, r->rec_s) : "-",
	       have_rates ? human(b, 16, r->bytes_s) : "-",
	       have_rates ? human(c, 16, r->drop_s) : "-",
	       human(e, 16, (double)r->dropped), human(f, 16, (double)r->ring),
	       human(g, 16, (double)r->segs), human(h, 16, (double)r->disk),
	       dur(w1, 16, le_live_quantile(&r->write, 0.5)),
	       dur(w2, 16, le_live_quantile(&r->write, 0.99)),
	       dur(s1, 16, le_live_quantile(&r->sync, 0.5)),
	       dur(s2, 16, le_live_quantile(&r->sync, 0.99)),
	       r->dropped ? "  DROPS" : "");
}

static void show_tty(struct live_dir *dirs, int ndirs, double interval)
{
	char now[32], q1[16], q2[16], q3[16], q4[16];
	time_t t = time(NULL);
	struct tm tm;
	strftime(now, sizeof now, "%Y-%m-%d %H:%M:%S", localtime_r(&t, &tm));
	printf("\033[H\033[2J");
	printf("logengine stats --live   %s   every %.3g s, ^C to quit\n", now,
	       interval);
	for (int k = 0; k < ndirs; k++) {
		struct live_dir *d = &dirs[k];
		printf("\n%s  ", d->path);
		if (d->rc < 0) {
			printf("%s\n", d->rc == -ENOENT
			                       ? "no live page: no engine with live "
			                         "counters has run here"
			                       : le_strerror(d->rc));
			continue;
		}
		const le_live *en = d->engine;
		printf("%s  pid %d  %u shard%s  queue %s rec / %sB of %s / %sB",
		       live_state_name(d->state), en->pid, d->n,
		       d->n == 1 ? "" : "s",
		       human(q1, 16, (double)en->queue_records),
		       human(q2, 16, (double)en->queue_bytes),
		       human(q3, 16, (double)en->queue_capacity),
		       human(q4, 16, (double)en->queue_capacity_bytes));
		/* rate-limited call sites (le_*_every), once any suppressed */
		if (en->suppressed)
			printf("  suppressed %s",
			       human(q1, 16, (double)en->suppressed));
		/* flight recorders (le_set_backtrace), once any wrote out */
		uint64_t bt = 0;
		for (unsigned i = 0; i < d->n; i++)
			bt += d->cur[i].backtrace_written;
		if (bt)
			printf("  backtrace %s", human(q1, 16, (double)bt));
		printf("\n");
		printf("%-6s %-8s %8s %8s %8s %9s %7s %6s %8s  %15s %15s\n",
		       "shard", "state", "rec/s", "B/s", "drop/s", "dropped",
		       "ring B", "segs", "disk B", "write p50/p99",
		       "fsync p50/p99");
		rows(d, 0, print_tty_row, &d->have_prev);
	}
	fflush(stdout);
}

struct plain {
	const char *when, *dir;
};

static void print_plain_row(void *ctx, const char *shard, const char *state,
                            const struct row *r)
{
	const char *when = ((struct plain *)ctx)->when;
	const char *dir = ((struct plain *)ctx)->dir;
	printf("%s dir=%s shard=%s state=%s records_per_s=%.0f "
	       "bytes_per_s=%.0f drops_per_s=%.0f dropped=%" PRIu64
	       " ring_bytes=%" PRIu64 " segments=%" PRIu64
	       " disk_bytes=%" PRIu64 " write_p50_ns=%.0f write_p99_ns=%.0f"
	       " fsync_p50_ns=%.0f fsync_p99_ns=%.0f backtrace=%" PRIu64 "\n",
	       when, dir, shard, state, r->rec_s, r->bytes_s, r->drop_s,
	       r->dropped, r->ring, r->segs, r->disk,
	       le_live_quantile(&r->write, 0.5),
	       le_live_quantile(&r->write, 0.99),
	       le_live_quantile(&r->sync, 0.5),
	       le_live_quantile(&r->sync, 0.99), r->backtrace);
}

static void show_plain(struct live_dir *dirs, int ndirs)
{
	char when[32];
	time_t t = time(NULL);
	struct tm tm;
	strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
	for (int k = 0; k < ndirs; k++) {
		struct live_dir *d = &dirs[k];
		if (d->rc < 0) {
			printf("%s dir=%s shard=all state=none error=\"%s\"\n",
			       when, d->path, le_strerror(d->rc));
			continue;
		}
		struct plain ctx = {when, d->path};
		rows(d, 1, print_plain_row, &ctx);
	}
	fflush(stdout);
}

static void nap(double secs)
{
	struct timespec ts = {(time_t)secs,
	                      (long)((secs - (double)(time_t)secs) * 1e9)};
	while (!live_stop && nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int cmd_stats_live(int argc, char **argv)
{
	static struct live_dir dirs[LIVE_MAX_DIRS];
	double interval = 1;
	long count = -1;
	int ndirs = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--live"))
			continue;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			fputs(live_usage, stdout);
			return 0;
		}
		if ((!strcmp(a, "-i") || !strcmp(a, "--interval")) && i + 1 < argc) {
			interval = atof(argv[++i]);
		} else if ((!strcmp(a, "-n") || !strcmp(a, "--count")) &&
		           i + 1 < argc) {
			count = atol(argv[++i]);
		} else if (a[0] == '-') {
			fprintf(stderr, "logengine: stats --live: unknown option "
			        "'%s'\n%s", a, live_usage);
			return 2;
		} else if (ndirs == LIVE_MAX_DIRS) {
			fprintf(stderr, "logengine: stats --live: at most %d "
			        "directories\n", LIVE_MAX_DIRS);
			return 2;
		} else if (live_dir_init(&dirs[ndirs++], a) < 0) {
			fprintf(stderr, "logengine: out of memory\n");
			return 2;
		}
	}
	if (ndirs == 0 || interval < 0.05 || interval > 3600 || count == 0) {
		fputs(live_usage, stderr);
		return 2;
	}
	signal(SIGINT, on_stop);
	signal(SIGTERM, on_stop);
	int tty = isatty(STDOUT_FILENO);
	for (int k = 0; k < ndirs; k++)
		live_dir_read(&dirs[k]);
	if (tty)
		show_tty(dirs, ndirs, interval);
	for (long shown = 0; !live_stop && (count < 0 || shown < count);) {
		nap(interval);
		if (live_stop)
			break;
		for (int k = 0; k < ndirs; k++)
			live_dir_read(&dirs[k]);
		if (tty)
			show_tty(dirs, ndirs, interval);
		else
			show_plain(dirs, ndirs);
		shown++;
		if (ferror(stdout))
			break; /* a closed pipe: the reader is done */
	}
	for (int k = 0; k < ndirs; k++)
		live_dir_free(&dirs[k]);
	return 0;
}
