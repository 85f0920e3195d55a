/*
 * logengine.c -- the command-line tool.
 *
 * It uses only the public header, as mdb_stat uses only lmdb.h: anything
 * this tool does, an application can do with the same calls.  The one
 * thing it knows beyond the API is the directory layout that FORMAT.md
 * makes public (DIR/shard-NNN/IIIIIIIIIIIIIIII.seg), which "stats" lists to
 * count segments and their bytes.
 *
 *   logengine cat [-o text|json] [--mode M] DIR   records, oldest first
 *   logengine verify DIR                          every problem, exit 0/1
 *   logengine stats [--mode M] DIR                per-shard summary
 *   logengine recover DIR                         drain a dead process's queue
 *   logengine capture [--dir D] [-p] -- CMD ...   log a program's output
 *
 * Exit status: 0 success; 1 the log is damaged (cat, stats: damage stopped
 * the read; verify: any problem at all); 2 usage error or the log could
 * not be read (missing directory, I/O error, unknown format version).
 *
 * Output goes through one large stdio buffer.  SIGPIPE is ignored so that a
 * closed pipe ("logengine cat DIR | head") shows up as EPIPE on a write,
 * which ends the command quietly with status 0: the reader chose to stop.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "logengine.h"

#define EXIT_DAMAGE 1
#define EXIT_USAGE 2 /* also: could not read the log at all */

#define OUTBUF_BYTES (1u << 20)
#define MAX_SHARDS 256 /* shard-000 .. shard-255 */

static const char *prog = "logengine";

static const char usage_text[] =
	"usage: logengine COMMAND [OPTIONS] DIR\n"
	"\n"
	"commands:\n"
	"  cat [-o text|json] [--mode MODE] DIR\n"
	"        print every record, oldest first, merged across shards by\n"
	"        timestamp.  text: TIMESTAMP LEVEL [SHARD:SEQ] PAYLOAD, with\n"
	"        {marker} / {truncated} tags; control bytes and bytes that\n"
	"        are not valid UTF-8 are shown as \\xNN and a backslash as \\\\.\n"
	"        json: one object per line with seq, ts, level (null when the\n"
	"        log has no levels), shard, msg, and \"marker\":true /\n"
	"        \"truncated\":true when flagged.  msg escapes \" \\ and control\n"
	"        characters; each byte that is not valid UTF-8 is written as\n"
	"        \\u00XX of its value (mapped to U+00XX), so the output is\n"
	"        always valid UTF-8 JSON.\n"
	"  verify DIR\n"
	"        read everything, skipping damage, and print each problem as\n"
	"        FILE: offset N: WHAT, then a summary.  Exit 0 when there was\n"
	"        no problem, 1 when there was any (damage, torn tail, gap).\n"
	"  stats [--mode MODE] DIR\n"
	"        per shard: segments, records, bytes, first/last sequence and\n"
	"        timestamp; then totals.\n"
	"  capture [--dir DIR] [--passthrough] [--format raw|text|json] -- CMD\n"
	"        run CMD with its stdout and stderr on pipes read continuously;\n"
	"        each line becomes a record (stdout INFO, stderr ERROR), also\n"
	"        copied to our stdout with --passthrough, where a stalled\n"
	"        reader costs dropped lines, never a blocked CMD.  Exit status\n"
	"        is CMD's.  `logengine capture --help` says more.\n"
	"  recover DIR\n"
	"        open the log as an engine would, and close it: torn tails\n"
	"        are cut, and records a crashed process left in its queue\n"
	"        (DIR/shard-NNN/QUEUE) are written to the segments, in\n"
	"        order, exactly once.  Prints what it did.\n"
	"  help, --help      this text\n"
	"  --version         print the version\n"
	"\n"
	"MODE (what damage does): tolerate (default: a torn tail ends a\n"
	"shard, other damage is an error), absolute (any damage is an error),\n"
	"point (a shard stops quietly at its first damage), skip (skip\n"
	"damaged bytes and go on).\n"
	"\n"
	"exit status: 0 ok; 1 damage; 2 usage error or unreadable log.\n";

/* ---- output ---- */

static int out_err; /* errno of the first failed write to stdout, or 0 */

/* Has a write to stdout failed?  Checked after each record, while errno
 * still holds the cause. */
static int out_failed(void)
{
	if (!out_err && ferror(stdout))
		out_err = errno ? errno : EIO;
	return out_err != 0;
}

/*
 * Finish stdout.  A closed pipe is the reader's choice, not an error: the
 * status is then rc unchanged and nothing is printed.
 * @return rc, or EXIT_USAGE for any other write error.
 */
static int out_finish(int rc)
{
	if (fflush(stdout) != 0 && !out_err)
		out_err = errno ? errno : EIO;
	out_failed();
	if (!out_err || out_err == EPIPE)
		return rc;
	fprintf(stderr, "%s: write error: %s\n", prog, strerror(out_err));
	return EXIT_USAGE;
}

/* RFC 3339 UTC with nanoseconds: 2026-11-30T21:30:27.123456789Z. */
static void fmt_ts(char *buf, size_t cap, uint64_t ns)
{
	time_t s = (time_t)(ns / 1000000000u);
	struct tm tm;
	size_t n = 0;

	if (gmtime_r(&s, &tm))
		n = strftime(buf, cap, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + n, cap - n, ".%09" PRIu64 "Z", ns % 1000000000u);
}

/* Length of the valid UTF-8 sequence at p (1..4), or 0 if p[0] does not
 * start one: overlong forms, surrogates and code points past U+10FFFF are
 * invalid (RFC 3629). */
static size_t utf8_len(const unsigned char *p, size_t left)
{
	unsigned c = p[0], lo = 0x80, hi = 0xbf;
	size_t n;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	else
		return 0;
	if (c == 0xe0)
		lo = 0xa0; /* overlong */
	else if (c == 0xed)
		hi = 0x9f; /* surrogates */
	else if (c == 0xf0)
		lo = 0x90; /* overlong */
	else if (c == 0xf4)
		hi = 0x8f; /* past U+10FFFF */
	if (left < n || p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return n;
}

/* Bytes at p that go out as they are: a printable ASCII character other
 * than the escape character (and '"' in JSON), or a valid multi-byte UTF-8
 * character.  @return their count, 0 if p[0] needs escaping. */
static size_t plain_len(const unsigned char *p, size_t left, int json)
{
	unsigned c = p[0];
	size_t n = utf8_len(p, left);

	if (n != 1)
		return n;
	if (c < 0x20 || c == 0x7f || c == '\\' || (json && c == '"'))
		return 0;
	return 1;
}

/* Write payload bytes, escaped as the usage text says for json or text. */
static void put_escaped(FILE *f, const unsigned char *p, size_t len, int json)
{
	size_t i = 0, n;

	while (i < len) {
		size_t j = i;
		while (j < len && (n = plain_len(p + j, len - j, json)) > 0)
			j += n;
		fwrite(p + i, 1, j - i, f);
		if (j == len)
			break;
		if (p[j] == '\\' || p[j] == '"')
			fprintf(f, "\\%c", p[j]);
		else
			fprintf(f, json ? "\\u%04x" : "\\x%02x", p[j]);
		i = j + 1;
	}
}

static void print_text(FILE *f, const le_record *r)
{
	char ts[64];

	fmt_ts(ts, sizeof ts, r->ts_ns);
	fprintf(f, "%s %-5s [%" PRIu32 ":%" PRIu64 "] ", ts,
	        r->level < 0 ? "-" : le_level_name(r->level), r->shard, r->seq);
	if (r->flags & LE_REC_MARKER)
		fputs("{marker} ", f);
	if (r->flags & LE_REC_TRUNCATED)
		fputs("{truncated} ", f);
	put_escaped(f, r->payload, r->len, 0);
	putc('\n', f);
}

static void print_json(FILE *f, const le_record *r)
{
	char ts[64];

	fmt_ts(ts, sizeof ts, r->ts_ns);
	fprintf(f, "{\"seq\":%" PRIu64 ",\"ts\":\"%s\",\"level\":", r->seq, ts);
	if (r->level < 0)
		fputs("null", f);
	else
		fprintf(f, "\"%s\"", le_level_name(r->level));
	fprintf(f, ",\"shard\":%" PRIu32 ",\"msg\":\"", r->shard);
	put_escaped(f, r->payload, r->len, 1);
	putc('"', f);
	if (r->flags & LE_REC_TRUNCATED)
		fputs(",\"truncated\":true", f);
	if (r->flags & LE_REC_MARKER)
		fputs(",\"marker\":true", f);
	fputs("}\n", f);
}

/* ---- arguments ---- */

enum { FMT_TEXT, FMT_JSON };

struct args {
	int fmt;         /* FMT_* (cat) */
	int mode;        /* enum le_recovery */
	const char *dir;
};

/* Which options a command takes. */
#define OPT_FORMAT 0x1
#define OPT_MODE 0x2

static int usage_error(const char *fmt, const char *what)
{
	fprintf(stderr, "%s: ", prog);
	fprintf(stderr, fmt, what);
	fprintf(stderr, "\n(see '%s help')\n", prog);
	return -1;
}

static int parse_mode(const char *s, int *mode)
{
	static const struct {
		const char *name;
		int mode;
	} modes[] = {
		{"tolerate", LE_RECOVER_TOLERATE_TAIL},
		{"absolute", LE_RECOVER_ABSOLUTE},
		{"point", LE_RECOVER_POINT_IN_TIME},
		{"skip", LE_RECOVER_SKIP},
	};
	for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
		if (strcmp(s, modes[i].name) == 0) {
			*mode = modes[i].mode;
			return 0;
		}
	}
	return usage_error("unknown mode '%s'", s);
}

static int parse_format(const char *s, int *fmt)
{
	if (strcmp(s, "text") == 0)
		*fmt = FMT_TEXT;
	else if (strcmp(s, "json") == 0)
		*fmt = FMT_JSON;
	else
		return usage_error("unknown output format '%s'", s);
	return 0;
}

/* If argv[*i] is option shrt/lng ("-o json", "-ojson", "--output json",
 * "--output=json"), set *val and step over it.  @return 1 matched, 0 not,
 * -1 matched but its value is missing. */
static int opt_value(char **argv, int argc, int *i, const char *shrt,
                     const char *lng, const char **val)
{
	const char *a = argv[*i];
	size_t ls = shrt ? strlen(shrt) : 0, ll = strlen(lng);

	if (strcmp(a, lng) == 0 || (shrt && strcmp(a, shrt) == 0)) {
		if (*i + 1 >= argc)
			return usage_error("option %s needs a value", a);
		*val = argv[++*i];
		return 1;
	}
	if (strncmp(a, lng, ll) == 0 && a[ll] == '=') {
		*val = a + ll + 1;
		return 1;
	}
	if (shrt && strncmp(a, shrt, ls) == 0 && a[ls]) {
		*val = a + ls;
		return 1;
	}
	return 0;
}

/* One option at argv[*i]. @return 0 or -1 (usage error printed). */
static int parse_opt(char **argv, int argc, int *i, unsigned allow,
                     struct args *a)
{
	const char *v;
	int m;

	if ((allow & OPT_FORMAT) &&
	    (m = opt_value(argv, argc, i, "-o", "--output", &v)) != 0)
		return m < 0 ? -1 : parse_format(v, &a->fmt);
	if ((allow & OPT_MODE) &&
	    (m = opt_value(argv, argc, i, NULL, "--mode", &v)) != 0)
		return m < 0 ? -1 : parse_mode(v, &a->mode);
	return usage_error("unknown option '%s'", argv[*i]);
}

/* argv[0] is the command name.  @return 0 or -1 (usage error printed). */
static int parse_args(int argc, char **argv, unsigned allow, struct args *a)
{
	int opts_done = 0;

	memset(a, 0, sizeof *a);
	a->mode = LE_RECOVER_TOLERATE_TAIL;
	for (int i = 1; i < argc; i++) {
		if (!opts_done && strcmp(argv[i], "--") == 0) {
			opts_done = 1;
		} else if (!opts_done && argv[i][0] == '-' && argv[i][1]) {
			if (parse_opt(argv, argc, &i, allow, a) < 0)
				return -1;
		} else if (a->dir) {
			return usage_error("unexpected argument '%s'", argv[i]);
		} else {
			a->dir = argv[i];
		}
	}
	if (!a->dir)
		return usage_error("%s: missing DIR", argv[0]);
	return 0;
}

/* ---- reading ---- */

static void problem_to_stderr(void *arg, const char *file, uint64_t off,
                              const char *what)
{
	(void)arg;
	fprintf(stderr, "%s: %s: offset %" PRIu64 ": %s\n", prog, file, off,
	        what);
}

/* @return a reader on dir, or NULL after printing why. */
static le_reader *open_reader(const char *dir, int mode, int shard,
                              le_problem_fn fn, void *arg)
{
	le_reader_opts o;
	le_reader *r;

	le_reader_opts_init(&o);
	o.mode = mode;
	o.shard = shard;
	o.on_problem = fn;
	o.arg = arg;
	int rc = le_reader_open(&r, dir, &o);
	if (rc < 0) {
		fprintf(stderr, "%s: %s\n", prog,
		        *le_errmsg() ? le_errmsg() : le_strerror(rc));
		return NULL;
	}
	return r;
}

/* The exit status for a negative le_reader_next result. */
static int read_failed(const char *dir, int rc)
{
	fprintf(stderr, "%s: %s: reading stopped: %s\n", prog, dir,
	        le_strerror(rc));
	return rc == LE_ECORRUPT ? EXIT_DAMAGE : EXIT_USAGE;
}

/* ---- commands ---- */

static int cmd_cat(int argc, char **argv)
{
	struct args a;
	le_record rec;
	int rc = 0, status = 0;

	if (parse_args(argc, argv, OPT_FORMAT | OPT_MODE, &a) < 0)
		return EXIT_USAGE;
	le_reader *r = open_reader(a.dir, a.mode, -1, problem_to_stderr, NULL);
	if (!r)
		return EXIT_USAGE;
	while (!out_failed() && (rc = le_reader_next(r, &rec)) > 0) {
		if (a.fmt == FMT_JSON)
			print_json(stdout, &rec);
		else
			print_text(stdout, &rec);
	}
	if (!out_failed() && rc < 0)
		status = read_failed(a.dir, rc);
	le_reader_close(r);
	return out_finish(status);
}

static void problem_to_stdout(void *arg, const char *file, uint64_t off,
                              const char *what)
{
	(void)arg;
	printf("%s: offset %" PRIu64 ": %s\n", file, off, what);
}

static int cmd_verify(int argc, char **argv)
{
	struct args a;
	le_record rec;
	le_reader_stats st;
	int rc = 0;

	if (parse_args(argc, argv, 0, &a) < 0)
		return EXIT_USAGE;
	le_reader *r = open_reader(a.dir, LE_RECOVER_SKIP, -1,
	                           problem_to_stdout, NULL);
	if (!r)
		return EXIT_USAGE;
	while (!out_failed() && (rc = le_reader_next(r, &rec)) > 0)
		;
	le_reader_stats_get(r, &st);
	le_reader_close(r);
	if (rc < 0) {
		read_failed(a.dir, rc);
		return out_finish(EXIT_USAGE);
	}
	printf("%s: %" PRIu64 " records, %" PRIu64 " segments, %" PRIu64
	       " bytes, %" PRIu64 " problems, %" PRIu64 " bytes skipped\n",
	       a.dir, st.records, st.segments, st.bytes, st.problems,
	       st.skipped_bytes);
	return out_finish(st.problems ? EXIT_DAMAGE : 0);
}

/* What stats shows for one shard, or for all of them. */
struct shard_sum {
	uint64_t segments, records, bytes;
	uint64_t first_seq, last_seq, first_ts, last_ts;
};

/* Is name "IIIIIIIIIIIIIIII.seg" (16 lower-case hex digits)? */
static int is_seg_name(const char *name)
{
	if (strlen(name) != 20 || strcmp(name + 16, ".seg") != 0)
		return 0;
	return strspn(name, "0123456789abcdef") == 16;
}

/* Count the segment files of shard_dir and add up their sizes. */
static int count_segments(const char *shard_dir, struct shard_sum *s)
{
	DIR *d = opendir(shard_dir);
	struct dirent *de;
	struct stat st;

	if (!d)
		return -errno;
	while ((de = readdir(d)) != NULL) {
		if (!is_seg_name(de->d_name) ||
		    fstatat(dirfd(d), de->d_name, &st, 0) < 0)
			continue;
		s->segments++;
		s->bytes += (uint64_t)st.st_size;
	}
	closedir(d);
	return 0;
}

/* Shard numbers with a shard-NNN directory in dir, as a bitmap.
 * @return how many, or -errno. */
static int list_shards(const char *dir, unsigned char *has)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	if (!d)
		return -errno;
	while ((de = readdir(d)) != NULL) {
		const char *s = de->d_name;
		if (strncmp(s, "shard-", 6) != 0 || strlen(s) != 9 ||
		    strspn(s + 6, "0123456789") != 3 || atoi(s + 6) >= MAX_SHARDS)
			continue;
		has[atoi(s + 6)] = 1;
		n++;
	}
	closedir(d);
	return n;
}

/* Read one shard's records into s.  @return 0 or a negative reader code
 * (the records read until then are in s). */
static int sum_records(le_reader *r, struct shard_sum *s)
{
	le_record rec;
	int rc;

	while ((rc = le_reader_next(r, &rec)) > 0) {
		if (s->records++ == 0) {
			s->first_seq = rec.seq;
			s->first_ts = rec.ts_ns;
		}
		s->last_seq = rec.seq;
		s->last_ts = rec.ts_ns;
	}
	return rc;
}

static void print_sum(const char *name, const struct shard_sum *s, int seqs)
{
	char a[64] = "-", b[64] = "-", fs[32] = "-", ls[32] = "-";

	if (s->records) {
		fmt_ts(a, sizeof a, s->first_ts);
		fmt_ts(b, sizeof b, s->last_ts);
		if (seqs) {
			snprintf(fs, sizeof fs, "%" PRIu64, s->first_seq);
			snprintf(ls, sizeof ls, "%" PRIu64, s->last_seq);
		}
	}
	printf("%-5s %8" PRIu64 " %10" PRIu64 " %14" PRIu64 " %10s %10s "
	       "%-30s %s\n", name, s->segments, s->records, s->bytes, fs,
	       ls, a, b);
}

/* Fold one shard into the totals. */
static void add_sum(struct shard_sum *t, const struct shard_sum *s)
{
	if (s->records) {
		if (!t->records || s->first_ts < t->first_ts)
			t->first_ts = s->first_ts;
		if (!t->records || s->last_ts > t->last_ts)
			t->last_ts = s->last_ts;
	}
	t->segments += s->segments;
	t->records += s->records;
	t->bytes += s->bytes;
}

/* One shard's row.  @return the exit status it earns. */
static int stats_shard(const struct args *a, int shard, struct shard_sum *t)
{
	struct shard_sum s = {0};
	char sdir[4096], name[16];
	int status = 0;

	snprintf(sdir, sizeof sdir, "%s/shard-%03d", a->dir, shard);
	snprintf(name, sizeof name, "%d", shard);
	count_segments(sdir, &s);
	le_reader *r = open_reader(a->dir, a->mode, shard, problem_to_stderr,
	                           NULL);
	if (!r)
		return EXIT_USAGE;
	int rc = sum_records(r, &s);
	le_reader_close(r);
	if (rc < 0)
		status = read_failed(sdir, rc);
	print_sum(name, &s, 1);
	add_sum(t, &s);
	return status;
}

static int cmd_stats(int argc, char **argv)
{
	struct args a;
	struct shard_sum total = {0};
	unsigned char has[MAX_SHARDS] = {0};
	int status = 0;

	if (parse_args(argc, argv, OPT_MODE, &a) < 0)
		return EXIT_USAGE;
	int n = list_shards(a.dir, has);
	if (n < 0) {
		fprintf(stderr, "%s: %s: %s\n", prog, a.dir, strerror(-n));
		return EXIT_USAGE;
	}
	printf("%-5s %8s %10s %14s %10s %10s %-30s %s\n", "shard",
	       "segments", "records", "bytes", "first_seq", "last_seq",
	       "first_ts", "last_ts");
	for (int i = 0; i < MAX_SHARDS && !out_failed(); i++) {
		if (!has[i])
			continue;
		int st = stats_shard(&a, i, &total);
		if (st > status)
			status = st;
	}
	print_sum("total", &total, 0);
	return out_finish(status);
}

/* recover: le_open does the recovery (and drains dead queues), le_close
 * writes everything out.  Every shard directory present is opened. */
static int cmd_recover(int argc, char **argv)
{
	struct args a;
	unsigned char has[MAX_SHARDS] = {0};
	le_config cfg;
	le_engine *e;
	le_stats st;

	if (parse_args(argc, argv, 0, &a) < 0)
		return EXIT_USAGE;
	int n = list_shards(a.dir, has);
	if (n < 0) {
		fprintf(stderr, "%s: %s: %s\n", prog, a.dir, strerror(-n));
		return EXIT_USAGE;
	}
	le_config_init(&cfg);
	cfg.dir = a.dir;
	cfg.shards = 1;
	for (int i = 0; i < MAX_SHARDS; i++)
		if (has[i])
			cfg.shards = (unsigned)i + 1;
	int rc = le_open(&e, &cfg);
	if (rc < 0) {
		fprintf(stderr, "%s: %s: %s (%s)\n", prog, a.dir,
		        le_strerror(rc), le_errmsg());
		return EXIT_USAGE;
	}
	/* Opened, but a damaged queue file lost what followed the damage. */
	int damaged = le_errmsg()[0] != '\0';
	if (damaged)
		fprintf(stderr, "%s: %s: %s\n", prog, a.dir, le_errmsg());
	le_stats_get(e, &st);
	rc = le_close(e);
	printf("%s: %u shard(s); %llu record(s) written from queues left by "
	       "a dead process, %llu abandoned slot(s) skipped, %llu byte(s) "
	       "of torn tail cut\n", a.dir, cfg.shards,
	       (unsigned long long)st.recovered_records,
	       (unsigned long long)st.abandoned_slots,
	       (unsigned long long)st.recovered_truncated_bytes);
	if (rc < 0) {
		fprintf(stderr, "%s: %s: %s\n", prog, a.dir, le_strerror(rc));
		return 1;
	}
	return out_finish(damaged);
}

/* ---- capture ---- */

/*
 * capture: run CMD with its stdout and stderr on two pipes, and turn each
 * line into a record.  One thread polls the two pipes and a self-pipe fed
 * by the signal handler, so it reads CMD's output as fast as CMD writes it
 * whatever happens to our own stdout:
 *
 *   CMD stdout --pipe--+                      +--> segment store (DIR),
 *   CMD stderr --pipe--+--> poll, split      |    LE_OVERFLOW_BLOCK
 *   signals --self-pipe+    lines, le_write --+--> stream sink on fd 1
 *                                                  (--passthrough): async,
 *                                                  drops when stdout stalls
 *
 * The store's queue blocks when full (nothing is lost while the disk keeps
 * up); only this reader waits then, and CMD only once its pipe is full too.
 * A stalled stdout never reaches this thread: the stream sink drops and
 * counts lines instead of waiting.  Memory is fixed at start: one buffer
 * per pipe (max_record_bytes + 1 + one read) and the engine's queue.
 */

static const char capture_usage[] =
	"usage: logengine capture [--dir DIR] [--passthrough]\n"
	"                         [--format raw|text|json] [--verbose] -- CMD "
	"[ARGS...]\n"
	"\n"
	"Run CMD, reading its stdout and stderr continuously so that CMD never\n"
	"blocks on its own output, and store each line as a record in DIR\n"
	"(default: $LE_CAPTURE_DIR, else ./capture-logs; created if missing).\n"
	"The level is the tag: stdout lines are INFO (route key 0), stderr\n"
	"lines ERROR (route key 1).  A last line without a newline is still a\n"
	"record.  A line longer than max_record_bytes (64 KiB) is split into\n"
	"pieces of that size so that nothing is lost: every piece but the last\n"
	"carries the {truncated} flag, meaning \"continued in the next record\n"
	"of the same level\".\n"
	"\n"
	"  --dir DIR       the log directory\n"
	"  --passthrough   also copy the lines to stdout, asynchronously: when\n"
	"                  stdout is slow or stalled, lines are dropped and\n"
	"                  counted there (\"N records dropped\"), never waited\n"
	"                  for.  The store is not affected.  Both streams go\n"
	"                  to stdout; use text or json to see the level.\n"
	"  --format F      passthrough line format: raw (the line, default),\n"
	"                  text (timestamp, level, line) or json\n"
	"  --verbose       print a one-line summary on stderr at the end\n"
	"\n"
	"The store never drops: when the disk falls behind, capture waits for\n"
	"it (and CMD waits once its pipe is full).  SIGINT, SIGTERM, SIGHUP,\n"
	"SIGQUIT, SIGUSR1 and SIGUSR2 sent to capture are passed on to CMD\n"
	"(not those a terminal sends to the whole process group: CMD has its\n"
	"own); capture keeps reading until CMD exits, then until its pipes are\n"
	"closed or idle for 200 ms.\n"
	"\n"
	"exit status: CMD's; 128+N when CMD was killed by signal N; 2 usage\n"
	"error; 125 the log could not be opened (CMD not run); 126 CMD could\n"
	"not be run; 127 CMD not found.\n";

#define CAPTURE_EXIT_FAILED 125
#define CAPTURE_READ_BYTES (64u << 10) /* largest single read() */
#define CAPTURE_PIPE_BYTES (1u << 20)  /* asked of the kernel per pipe */
#define CAPTURE_IDLE_MS 200 /* after CMD exits: pipes idle this long = done */

/* Signals passed on to CMD. */
static const int capture_fwd[] = {SIGINT, SIGTERM, SIGHUP,
                                  SIGQUIT, SIGUSR1, SIGUSR2};
#define CAPTURE_NFWD (sizeof capture_fwd / sizeof capture_fwd[0])

struct capture_src {    /* one of CMD's output pipes; owned by the loop */
	int fd;             /* read end; -1 after EOF */
	int level;          /* LE_INFO (stdout) or LE_ERROR (stderr) */
	uint64_t key;       /* route key: 0 stdout, 1 stderr */
	unsigned char *buf; /* the unfinished line, then room for one read */
	size_t len, cap;    /* bytes held; capacity */
	uint64_t lines;     /* records written (pieces of long lines too) */
	uint64_t split;     /* of those, pieces flagged "continued" */
	uint64_t bytes;     /* bytes read */
};

struct capture {
	const char *dir;
	int passthrough, format, verbose;
	char **cmd;            /* argv of CMD, NULL-terminated */
	le_engine *e;
	uint32_t max_rec;      /* le_config.max_record_bytes */
	struct capture_src src[2];
	pid_t child;
	int reaped, wstatus;   /* waitpid result once CMD is gone */
	uint64_t lost;         /* le_write refusals (should stay 0) */
};

static int capture_sig_fd = -1; /* write end of the self-pipe */

/* Async-signal-safe: note the signal in the self-pipe.  A signal from the
 * kernel (a terminal's ^C, ^\, hangup) went to the whole foreground
 * process group, CMD included, so it is not passed on a second time. */
static void capture_on_signal(int sig, siginfo_t *si, void *uc)
{
	int saved = errno;
	unsigned char b = (unsigned char)sig;

	(void)uc;
	if (sig == SIGCHLD || !si || si->si_code != SI_KERNEL)
		if (write(capture_sig_fd, &b, 1) < 0) {
			/* full: SIGCHLD is re-checked on every wake-up */
		}
	errno = saved;
}

/* @return 0, or -1 after a usage message. */
static int capture_parse(int argc, char **argv, struct capture *c)
{
	const char *v;
	int m, i;

	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--")) {
			i++;
			break;
		} else if (!strcmp(a, "--passthrough") || !strcmp(a, "-p")) {
			c->passthrough = 1;
		} else if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) {
			c->verbose = 1;
		} else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			fputs(capture_usage, stdout);
			return 1;
		} else if ((m = opt_value(argv, argc, &i, "-d", "--dir", &v))) {
			if (m < 0)
				return -1;
			c->dir = v;
		} else if ((m = opt_value(argv, argc, &i, "-f", "--format",
		                          &v))) {
			if (m < 0)
				return -1;
			if (!strcmp(v, "raw"))
				c->format = LE_STREAM_RAW;
			else if (!strcmp(v, "text"))
				c->format = LE_STREAM_TEXT;
			else if (!strcmp(v, "json"))
				c->format = LE_STREAM_JSON;
			else
				return usage_error("unknown format '%s'", v);
		} else {
			return usage_error("capture: unknown option '%s'", a);
		}
	}
	if (i >= argc)
		return usage_error("%s: missing CMD (capture [OPTIONS] -- CMD)",
		                   argv[0]);
	c->cmd = argv + i;
	return 0;
}

/* mkdir -p.  @return 0 or -errno. */
static int capture_mkdirs(const char *dir)
{
	char p[4096];
	size_t n = strlen(dir);

	if (n == 0 || n >= sizeof p)
		return -ENAMETOOLONG;
	memcpy(p, dir, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (p[i] != '/' && p[i] != '\0')
			continue;
		char keep = p[i];
		p[i] = '\0';
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return -errno;
		p[i] = keep;
	}
	return 0;
}

/* Open the store (and the stream sink on stdout for --passthrough).
 * @return 0 or -1 after a message. */
static int capture_open(struct capture *c)
{
	le_config cfg;

	le_config_init(&cfg);
	cfg.dir = c->dir;
	cfg.create_dir = 1;
	cfg.shards = 1; /* one sequence: the order in which lines were read */
	cfg.overflow = LE_OVERFLOW_BLOCK;     /* the store loses nothing */
	cfg.oversize = LE_OVERSIZE_TRUNCATE;  /* how pieces are flagged */
	if (c->passthrough) {
		cfg.stream_fd = 1; /* async: drops, never blocks */
		cfg.stream_format = c->format;
	}
	int rc = capture_mkdirs(c->dir);
	if (rc == 0)
		rc = le_open(&c->e, &cfg);
	if (rc < 0) {
		fprintf(stderr, "%s capture: %s: %s%s%s\n", prog, c->dir,
		        le_strerror(rc), *le_errmsg() ? ": " : "", le_errmsg());
		return -1;
	}
	c->max_rec = cfg.max_record_bytes;
	return 0;
}

/* One record.  A piece of a longer line is handed over one byte too long
 * so that the engine cuts it to max_record_bytes and flags it
 * LE_REC_TRUNCATED: the public API's only flag, used as "continued". */
static void capture_emit(struct capture *c, struct capture_src *s,
                         const unsigned char *p, size_t len, int continued)
{
	int rc = le_write(c->e, s->key, s->level, p, continued ? len + 1 : len);
	if (rc < 0)
		c->lost++;
	s->lines++;
	s->split += (uint64_t)continued;
}

/* Records for every complete line in s->buf, and pieces of a line longer
 * than max_rec; keep the rest.  At EOF the rest is a record too. */
static void capture_lines(struct capture *c, struct capture_src *s, int eof)
{
	unsigned char *p = s->buf, *end = s->buf + s->len, *nl;

	while ((nl = memchr(p, '\n', (size_t)(end - p))) != NULL) {
		while ((size_t)(nl - p) > c->max_rec) {
			capture_emit(c, s, p, c->max_rec, 1);
			p += c->max_rec;
		}
		capture_emit(c, s, p, (size_t)(nl - p), 0);
		p = nl + 1;
	}
	while ((size_t)(end - p) > c->max_rec) {
		capture_emit(c, s, p, c->max_rec, 1); /* needs p[max_rec] */
		p += c->max_rec;
	}
	if (eof && p < end) {
		capture_emit(c, s, p, (size_t)(end - p), 0);
		p = end;
	}
	s->len = (size_t)(end - p);
	memmove(s->buf, p, s->len);
}

/* Read what the pipe has.  EOF or an error closes it. */
static void capture_read(struct capture *c, struct capture_src *s)
{
	size_t room = s->cap - s->len;
	if (room > CAPTURE_READ_BYTES)
		room = CAPTURE_READ_BYTES;
	ssize_t n = read(s->fd, s->buf + s->len, room);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		close(s->fd);
		s->fd = -1;
		capture_lines(c, s, 1);
		return;
	}
	s->len += (size_t)n;
	s->bytes += (uint64_t)n;
	capture_lines(c, s, 0);
}

static void capture_reap(struct capture *c)
{
	int st;
	if (!c->reaped && waitpid(c->child, &st, WNOHANG) == c->child) {
		c->reaped = 1;
		c->wstatus = st;
	}
}

/* Empty the self-pipe: pass signals on, reap CMD. */
static void capture_signals(struct capture *c, int rfd)
{
	unsigned char b[64];
	ssize_t n;

	while ((n = read(rfd, b, sizeof b)) > 0)
		for (ssize_t i = 0; i < n; i++)
			if (b[i] != SIGCHLD && !c->reaped)
				kill(c->child, b[i]);
	capture_reap(c);
}

/* poll until CMD has exited and its pipes are closed (or idle). */
static void capture_loop(struct capture *c, int sig_rfd)
{
	for (;;) {
		struct pollfd pfd[3];
		struct capture_src *who[3];
		nfds_t n = 0;

		capture_reap(c);
		for (int i = 0; i < 2; i++)
			if (c->src[i].fd >= 0) {
				who[n] = &c->src[i];
				pfd[n++] = (struct pollfd){c->src[i].fd, POLLIN, 0};
			}
		if (n == 0 && c->reaped)
			break;
		who[n] = NULL;
		pfd[n++] = (struct pollfd){sig_rfd, POLLIN, 0};
		int r = poll(pfd, n, c->reaped ? CAPTURE_IDLE_MS : -1);
		if (r == 0)
			break; /* CMD is gone and whoever holds its pipes is quiet */
		if (r < 0)
			continue; /* EINTR: a signal, now in the self-pipe */
		for (nfds_t i = 0; i < n; i++) {
			if (!pfd[i].revents)
				continue;
			if (who[i])
				capture_read(c, who[i]);
			else
				capture_signals(c, sig_rfd);
		}
	}
	for (int i = 0; i < 2; i++)
		if (c->src[i].fd >= 0) {
			close(c->src[i].fd);
			c->src[i].fd = -1;
			capture_lines(c, &c->src[i], 1);
		}
}

/* The signal handlers; old mask in *old, forwarded signals blocked until
 * the child exists.  @return the read end of the self-pipe, or -errno. */
static int capture_signals_on(sigset_t *block, sigset_t *old)
{
	int sp[2];
	struct sigaction sa;

	if (pipe2(sp, O_CLOEXEC | O_NONBLOCK) < 0)
		return -errno;
	capture_sig_fd = sp[1];
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = capture_on_signal;
	sa.sa_flags = SA_SIGINFO | SA_NOCLDSTOP; /* no SA_RESTART: poll wakes */
	sigemptyset(&sa.sa_mask);
	sigemptyset(block);
	sigaddset(block, SIGCHLD);
	for (size_t i = 0; i < CAPTURE_NFWD; i++)
		sigaddset(block, capture_fwd[i]);
	sigprocmask(SIG_BLOCK, block, old);
	sigaction(SIGCHLD, &sa, NULL);
	for (size_t i = 0; i < CAPTURE_NFWD; i++)
		sigaction(capture_fwd[i], &sa, NULL);
	return sp[0];
}

/* Start CMD with stdout and stderr on fresh pipes.  CMD gets the default
 * action for every signal we handle or ignore (SIGPIPE included) and the
 * signal mask we started with.  @return 0, or an exit status (126, 127)
 * after a message. */
static int capture_spawn(struct capture *c, const sigset_t *mask)
{
	int p[2][2];
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t def;

	for (int i = 0; i < 2; i++)
		if (pipe2(p[i], O_CLOEXEC) < 0) {
			fprintf(stderr, "%s capture: pipe: %s\n", prog,
			        strerror(errno));
			return CAPTURE_EXIT_FAILED;
		}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[0][1], 1);
	posix_spawn_file_actions_adddup2(&fa, p[1][1], 2);
	posix_spawnattr_init(&at);
	sigemptyset(&def);
	sigaddset(&def, SIGPIPE);
	sigaddset(&def, SIGCHLD);
	for (size_t i = 0; i < CAPTURE_NFWD; i++)
		sigaddset(&def, capture_fwd[i]);
	posix_spawnattr_setsigdefault(&at, &def);
	posix_spawnattr_setsigmask(&at, mask);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGDEF |
	                                      POSIX_SPAWN_SETSIGMASK);
	int rc = posix_spawnp(&c->child, c->cmd[0], &fa, &at, c->cmd, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	close(p[0][1]);
	close(p[1][1]);
	for (int i = 0; i < 2; i++) {
		c->src[i].fd = p[i][0];
		/* A deeper pipe absorbs bursts; best effort, may be capped. */
		fcntl(p[i][0], F_SETPIPE_SZ, (int)CAPTURE_PIPE_BYTES);
	}
	if (rc != 0) {
		fprintf(stderr, "%s capture: %s: %s\n", prog, c->cmd[0],
		        strerror(rc));
		return rc == ENOENT ? 127 : 126;
	}
	return 0;
}

/* CMD's wait status as our exit status: its code, or 128 + signal. */
static int capture_status(const struct capture *c)
{
	if (WIFEXITED(c->wstatus))
		return WEXITSTATUS(c->wstatus);
	if (WIFSIGNALED(c->wstatus))
		return 128 + WTERMSIG(c->wstatus);
	return CAPTURE_EXIT_FAILED;
}

/* Close the engine; the summary (--verbose) and any loss always. */
static void capture_close(struct capture *c, int status, double secs)
{
	le_stats st;

	/* The flush bounds the wait for a slow disk (le_close still writes
	 * everything, and the counts below are taken after it has): the
	 * passthrough lines a stalled stdout never took (it gets a second)
	 * are among the passthrough's dropped, stream_dropped. */
	int rc = le_flush(c->e, 30000);
	if (rc == LE_ETIMEDOUT)
		rc = 0;
	int crc = le_close_stats(c->e, &st);
	c->e = NULL;
	if (rc >= 0)
		rc = crc;
	uint64_t recs = c->src[0].lines + c->src[1].lines;
	if (c->verbose)
		fprintf(stderr,
		        "%s capture: %s: exit %d after %.3f s; stdout %" PRIu64
		        " lines, stderr %" PRIu64 " lines, %" PRIu64
		        " bytes, %" PRIu64 " split; store %s: %" PRIu64
		        " records, %" PRIu64 " dropped, queue hwm %" PRIu64
		        " records / %" PRIu64 " bytes; passthrough: %" PRIu64
		        " lines, %" PRIu64 " dropped\n",
		        prog, c->cmd[0], status, secs,
		        c->src[0].lines, c->src[1].lines,
		        c->src[0].bytes + c->src[1].bytes,
		        c->src[0].split + c->src[1].split, c->dir, recs - c->lost,
		        st.dropped + c->lost, st.queue_hwm_records,
		        st.queue_hwm_bytes, st.stream_lines, st.stream_dropped);
	if (rc < 0 || st.dropped || c->lost)
		fprintf(stderr, "%s capture: %s: records may be missing: %s "
		        "(%" PRIu64 " dropped, %" PRIu64 " refused)\n", prog,
		        c->dir, rc < 0 ? le_strerror(rc) : "dropped",
		        st.dropped, c->lost);
}

/* fds 0-2 open, so that our pipes never land on them. */
static void capture_std_fds(void)
{
	for (int fd = 0; fd < 3; fd++)
		if (fcntl(fd, F_GETFD) < 0 && errno == EBADF)
			open("/dev/null", O_RDWR);
}

static int cmd_capture(int argc, char **argv)
{
	struct capture c;
	sigset_t block, old;
	struct timespec t0, t1;
	int status, sig_rfd;

	memset(&c, 0, sizeof c);
	c.src[0] = (struct capture_src){.fd = -1, .level = LE_INFO, .key = 0};
	c.src[1] = (struct capture_src){.fd = -1, .level = LE_ERROR, .key = 1};
	c.dir = getenv("LE_CAPTURE_DIR");
	if (!c.dir || !*c.dir)
		c.dir = "capture-logs";
	int pr = capture_parse(argc, argv, &c);
	if (pr != 0)
		return pr > 0 ? out_finish(0) : EXIT_USAGE;
	capture_std_fds();
	if (capture_open(&c) < 0)
		return CAPTURE_EXIT_FAILED;
	for (int i = 0; i < 2; i++) {
		c.src[i].cap = (size_t)c.max_rec + 1 + CAPTURE_READ_BYTES;
		c.src[i].buf = malloc(c.src[i].cap);
		if (!c.src[i].buf) {
			fprintf(stderr, "%s capture: out of memory\n", prog);
			le_close(c.e);
			return CAPTURE_EXIT_FAILED;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	sig_rfd = capture_signals_on(&block, &old);
	if (sig_rfd < 0) {
		status = CAPTURE_EXIT_FAILED;
	} else if ((status = capture_spawn(&c, &old)) == 0) {
		sigprocmask(SIG_SETMASK, &old, NULL);
		capture_loop(&c, sig_rfd);
		status = capture_status(&c);
	} else {
		sigprocmask(SIG_SETMASK, &old, NULL);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	capture_close(&c, status, (double)(t1.tv_sec - t0.tv_sec) +
	                                  (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	free(c.src[0].buf);
	free(c.src[1].buf);
	return status;
}

/*
 * The commands.  Planned, and added here when they exist: tail (-f across
 * rotation, --since/--until), capture (-- CMD: log a child's
 * stdout/stderr), forward (ship segments to a collector), bench.
 */
static const struct command {
	const char *name;
	int (*run)(int argc, char **argv);
} commands[] = {
	{"cat", cmd_cat},
	{"verify", cmd_verify},
	{"stats", cmd_stats},
	{"recover", cmd_recover},
	{"capture", cmd_capture},
};

int main(int argc, char **argv)
{
	static char outbuf[OUTBUF_BYTES];

	/* A closed pipe must be a write error (EPIPE), not a kill. */
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, outbuf, _IOFBF, sizeof outbuf);
	if (argc < 2) {
		fputs(usage_text, stderr);
		return EXIT_USAGE;
	}
	const char *cmd = argv[1];
	if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") ||
	    !strcmp(cmd, "-h")) {
		fputs(usage_text, stdout);
		return out_finish(0);
	}
	if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
		printf("logengine %s\n", le_version());
		return out_finish(0);
	}
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		if (strcmp(cmd, commands[i].name) == 0)
			return commands[i].run(argc - 1, argv + 1);
	usage_error("unknown command '%s'", cmd);
	return EXIT_USAGE;
}
