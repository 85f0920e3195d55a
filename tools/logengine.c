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
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

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
	return out_finish(0);
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
