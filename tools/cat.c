/*
 * cat.c -- logengine cat and logengine tail: the records of a log, with
 * journalctl's options (-n, -r, -f, --since/--until, -p, -g, FIELD=VALUE,
 * -o, cursors).  tail is cat -f -n 10.
 *
 * How a selection is read:
 *
 *   start     after a cursor (--after-cursor, or --cursor-file when it
 *             holds one), else at --since (le_reader_seek_time: segment
 *             headers and time indexes, not a scan), else the start
 *   -n N      no filter but --since: le_reader_seek_tail(N), records
 *             before --since dropped (they are a prefix);  with filters:
 *             a first reader counts the matches M from the start, the
 *             second skips M - N of them
 *   -n +N     the first N matches, then stop
 *   -r        two passes: the first counts matches and keeps a cursor
 *             every CHUNK_RECS records (or CHUNK_BYTES of payload); the
 *             second reads the chunks from the last, each into memory,
 *             and prints it backwards.  Memory: one chunk and the
 *             cursors, whatever the size of the log.
 *   -f        le_reader_follow: after what is there, wait (inotify) and
 *             print what comes, until SIGINT/SIGTERM/SIGHUP or a record
 *             past --until; the cursor file is written every second and
 *             at the end.
 *
 * On a terminal, as journalctl: lines coloured by level, and a pager
 * (term.c), never when following.  Lines gather in one large buffer
 * (output.c), written out when it is full, at the end, before a warning,
 * and after each burst when following; a closed pipe (| head, or q in
 * the pager) ends the command quietly with the status it had.
 *
 * tail on a directory no engine has written yet (missing or empty) waits
 * for it, checking every WAIT_DIR_MS, then follows.
 *
 * Exit status: 0; 1 a damaged segment or a sequence gap was met (warned
 * on stderr: reading stops at damage unless --mode skip); 2 usage, not a
 * log directory, a cursor that is not one, I/O errors.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <locale.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "progress.h"

#define CHUNK_RECS 65536
#define CHUNK_BYTES (16u << 20)
#define CURSOR_SAVE_MS 1000
#define DEFAULT_REORDER_MS 50
#define WAIT_DIR_MS 100

static const char cat_help[] =
	"usage: logengine cat [OPTIONS] DIR [FIELD=VALUE...]\n"
	"       logengine tail [OPTIONS] DIR [FIELD=VALUE...]   (cat -f -n 10)\n"
	"\n"
	"Print the records of the log in DIR, oldest first, merged across\n"
	"shards by timestamp; on a terminal, coloured by level and through\n"
	"a pager.  tail on a DIR no engine has written yet waits for it.\n"
	"\n"
	"  -n, --lines[=N]       the last N records (10 without N; 'all');\n"
	"                        +N: the first N\n"
	"  -r, --reverse         newest first\n"
	"  -f, --follow          then print new records as they are written,\n"
	"                        across rotations and engine restarts\n"
	"      --no-follow       (tail) do not follow\n"
	"  -S, --since=TIME      records at or after TIME\n"
	"  -U, --until=TIME      records at or before TIME\n"
	"                        TIME: YYYY-MM-DD HH:MM:SS, RFC 3339\n"
	"                        ('2026-11-30T21:30:27.5+01:00'), '21:30',\n"
	"                        'today', 'yesterday', 'now', '-1h', '-10min',\n"
	"                        '2 days ago', '@EPOCH'; local time unless\n"
	"                        --utc or a zone is given\n"
	"  -p, --priority=LEVEL  records of LEVEL or more severe; FROM..TO a\n"
	"                        range.  trace debug info warn error fatal,\n"
	"                        syslog's names (err, warning, crit...) or\n"
	"                        syslog's numbers 0 (emerg) .. 7 (debug)\n"
	"  -g, --grep=REGEX      records whose message matches (POSIX ERE)\n"
	"  -i, --ignore-case     -g without regard to case\n"
	"      --shard=N         only shard N\n"
	"      --backtrace=WHAT  recorded history (the flight recorder's\n"
	"                        records, shown {backtrace}): show (default),\n"
	"                        hide, or only\n"
	"  FIELD=VALUE           records whose FIELD is VALUE: SHARD, SEQ,\n"
	"                        LEVEL (name or 0-5), PRIORITY (syslog 0-7),\n"
	"                        MESSAGE (the whole payload), FLAGS (marker,\n"
	"                        truncated), logger (logger=db: that logger\n"
	"                        alone), or any field of the records by its\n"
	"                        key (user=bob).  One field given twice:\n"
	"                        either; different fields: both; '+' between\n"
	"                        groups: any group\n"
	"  -t, --identifier=NAME\n"
	"                        records of logger NAME and of the loggers\n"
	"                        below it (NAME.x); repeat for more\n"
	"  -u, --unit=NAME       the same as -t\n"
	"  -o, --output=FORMAT   short (default), short-precise, short-iso,\n"
	"                        short-iso-precise, short-unix, text, json,\n"
	"                        json-pretty, cat (message only), raw (the\n"
	"                        payload's bytes as they are), verbose (every\n"
	"                        field, one a line), export (journald's\n"
	"                        export format: systemd-journal-remote)\n"
	"      --output-fields=F,...  json, verbose, export: only these\n"
	"                        fields (as the format names them)\n"
	"      --no-color        no colours (also: NO_COLOR set; never when\n"
	"                        stdout is not a terminal)\n"
	"      --utc             times in UTC (JSON and text always are)\n"
	"      --show-cursor     print the cursor after the last record ('--\n"
	"                        cursor: C'), or in each JSON record\n"
	"      --after-cursor=C  records after the one cursor C names\n"
	"      --cursor-file=F   start after the cursor in F if there is one;\n"
	"                        write the last record's cursor to F (every\n"
	"                        second when following, and at the end)\n"
	"      --mode=MODE       damage: tolerate (default; follow: skip),\n"
	"                        absolute, point, skip\n"
	"      --reorder-window=MS  following: how long the oldest record\n"
	"                        waits for an older one from a quiet shard\n"
	"                        (default 50)\n"
	"  -D, --directory=DIR   the log directory (then every argument is a\n"
	"                        match)\n"
	"  -q, --quiet           no notes (torn tails, records skipped)\n"
	"  -e, --pager-end       the end: -n 1000 unless -n says\n"
	"      --no-pager        no pager ($LOGENGINE_PAGER, $PAGER or less,\n"
	"                        on a terminal, never when following)\n"
	"  -a, --all, -l, --full, --no-full, -x, --catalog, --no-hostname\n"
	"                        accepted: records are always shown in full\n"
	"  -h, --help            this text\n"
	"\n"
	"exit status: 0; 1 damage or a sequence gap was met (warned on\n"
	"stderr); 2 usage error, not a log directory, unreadable.\n";

struct jopts {
	const char *dir;
	int follow, reverse, quiet, show_cursor, utc, icase;
	int has_n, head;         /* -n given; +N (the first N) */
	uint64_t n;              /* UINT64_MAX: all */
	int has_since, has_until;
	uint64_t since, until;
	int has_p, plo, phi;
	const char *grep;
	regex_t re;
	struct matches m;
	struct loggers lg;       /* -t, -u */
	int no_pager, no_color;
	char **only;             /* --output-fields, split; owned */
	size_t n_only;
	int shard;
	int fmt;
	int mode, mode_given;
	const char *after_cursor, *cursor_file;
	uint32_t reorder_ms;
	int backtrace;           /* --backtrace: BT_SHOW, BT_HIDE, BT_ONLY */
};

/* --backtrace: recorded history (LE_REC_BACKTRACE) shown with the rest,
 * left out, or shown alone. */
enum { BT_SHOW = 0, BT_HIDE, BT_ONLY };

struct ctx {
	struct jopts *j;
	struct out o;
	le_reader *r;         /* the reader problems come from */
	int status;           /* exit status so far */
	uint64_t printed;
	char *cursor;         /* of the last record printed, owned; */
	size_t cursor_cap;    /* its room (le_reader_cursor_cap) */
	int have_cursor;
	char *file_cursor;    /* from --cursor-file, owned; NULL: none */
	int saved;            /* cursor file up to date */
	int silent;           /* a pass that reads again what another reports */
	int halt;             /* a sequence gap where the mode says stop */
	int live;             /* an engine has the log open: it may be
	                         mid-write at the end of a shard */
	uint64_t saved_mono;
};

static volatile sig_atomic_t stop_signal;

static void on_stop(int sig)
{
	stop_signal = sig;
}

/* ---- problems ---- */

static void on_problem(void *arg, const char *file, uint64_t off,
                       const char *what)
{
	struct ctx *cx = arg;
	int kind = le_reader_problem(cx->r);

	/* The reader goes on past a gap in its default mode; cat stops
	 * there, as at damage, unless --mode says otherwise. */
	if (kind == LE_PROBLEM_GAP && !cx->j->mode_given && !cx->j->follow)
		cx->halt = 1;
	if (cx->silent)
		return;
	/* A live engine's last frame may be half written as we read it: the
	 * end of what is there, not a crash's leftover. */
	if (cx->live && (kind == LE_PROBLEM_TORN_TAIL ||
	                 kind == LE_PROBLEM_ZERO_TAIL))
		return;
	/* point: a consistent prefix was asked for, and is what comes */
	if ((kind == LE_PROBLEM_DAMAGE || kind == LE_PROBLEM_GAP) &&
	    !(cx->j->mode_given && cx->j->mode == LE_RECOVER_POINT_IN_TIME))
		cx->status = EXIT_DAMAGE;
	else if (cx->j->quiet)
		return; /* a torn tail, zeros, records deleted: notes */
	/* stdout first: a warning lands after the records before it */
	out_flush(&cx->o);
	fflush(stdout);
	fprintf(stderr, "%s: %s: offset %" PRIu64 ": %s\n", prog, file, off,
	        what);
}

/* ---- options ---- */

static int bad_value(const char *opt, const char *v, const char *want)
{
	fprintf(stderr, "%s: %s '%s': %s (see '%s cat --help')\n", prog, opt,
	        v, want, prog);
	return -1;
}

/* -n's value: N, +N, all.  @return 0 or -1. */
static int parse_lines(struct jopts *j, const char *v)
{
	char *end;
	j->has_n = 1;
	j->head = 0;
	if (!v) {
		j->n = 10;
		return 0;
	}
	if (!strcmp(v, "all")) {
		j->n = UINT64_MAX;
		return 0;
	}
	const char *given = v;
	if (*v == '+') {
		j->head = 1;
		v++;
	}
	errno = 0;
	unsigned long long n = strtoull(v, &end, 10);
	if (!*v || *end || errno || *v == '-') {
		fprintf(stderr, "%s: -n: '%s' is not a number (N, +N or 'all'; "
		        "see '%s cat --help')\n", prog, given, prog);
		return -1;
	}
	j->n = n;
	return 0;
}

static int is_number(const char *s)
{
	if (*s == '+')
		s++;
	return *s && strspn(s, "0123456789") == strlen(s);
}

/* A word after -n that cannot be DIR nor a match: nothing by its name,
 * no '=', not '+' nor an option. */
static int not_a_path(const char *s)
{
	struct stat st;
	return *s != '-' && strcmp(s, "+") && !strchr(s, '=') &&
	       stat(s, &st) < 0;
}

/* --output-fields=F,...: the names, split at commas (repeatable). */
static int output_fields(struct jopts *j, const char *arg)
{
	char *copy = strdup(arg), *save = NULL;
	if (!copy)
		return usage_error("out of memory%s", "");
	for (char *f = strtok_r(copy, ",", &save); f;
	     f = strtok_r(NULL, ",", &save)) {
		char **nv = realloc(j->only, (j->n_only + 1) * sizeof *nv);
		if (!nv || !(nv[j->n_only] = strdup(f))) {
			free(copy); /* the process ends on this error */
			return usage_error("out of memory%s", "");
		}
		j->only = nv;
		j->n_only++;
	}
	free(copy);
	if (!j->only)
		return bad_value("--output-fields", arg, "no field named");
	return 0;
}

enum {
	O_NO_FOLLOW = 1000, O_UTC, O_NO_PAGER, O_SHARD, O_SHOW_CURSOR,
	O_AFTER_CURSOR, O_CURSOR_FILE, O_MODE, O_REORDER, O_CASE, O_NOOP,
	O_NO_COLOR, O_OUTPUT_FIELDS, O_BACKTRACE
};

static const struct option long_opts[] = {
	{"lines", optional_argument, NULL, 'n'},
	{"reverse", no_argument, NULL, 'r'},
	{"follow", no_argument, NULL, 'f'},
	{"no-follow", no_argument, NULL, O_NO_FOLLOW},
	{"since", required_argument, NULL, 'S'},
	{"until", required_argument, NULL, 'U'},
	{"priority", required_argument, NULL, 'p'},
	{"grep", required_argument, NULL, 'g'},
	{"ignore-case", no_argument, NULL, 'i'},
	{"case-sensitive", optional_argument, NULL, O_CASE},
	{"output", required_argument, NULL, 'o'},
	{"utc", no_argument, NULL, O_UTC},
	{"no-pager", no_argument, NULL, O_NO_PAGER},
	{"quiet", no_argument, NULL, 'q'},
	{"shard", required_argument, NULL, O_SHARD},
	{"show-cursor", no_argument, NULL, O_SHOW_CURSOR},
	{"after-cursor", required_argument, NULL, O_AFTER_CURSOR},
	{"cursor-file", required_argument, NULL, O_CURSOR_FILE},
	{"mode", required_argument, NULL, O_MODE},
	{"reorder-window", required_argument, NULL, O_REORDER},
	{"backtrace", required_argument, NULL, O_BACKTRACE},
	{"directory", required_argument, NULL, 'D'},
	{"pager-end", no_argument, NULL, 'e'},
	{"identifier", required_argument, NULL, 't'},
	{"unit", required_argument, NULL, 'u'},
	{"output-fields", required_argument, NULL, O_OUTPUT_FIELDS},
	{"no-color", no_argument, NULL, O_NO_COLOR},
	/* journalctl habits with nothing to do here: records are always
	 * shown in full (escaped), there is no catalog and no host name */
	{"all", no_argument, NULL, 'a'},
	{"full", no_argument, NULL, 'l'},
	{"no-full", no_argument, NULL, O_NOOP},
	{"catalog", no_argument, NULL, 'x'},
	{"no-hostname", no_argument, NULL, O_NOOP},
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};

/* One option.  @return 0, 1 (--help printed), -1 (usage error). */
static int one_opt(struct jopts *j, int c, char *arg, int argc, char **argv)
{
	char *end;
	switch (c) {
	case 'n':
		/* journalctl's -n takes its number as the next word too; a
		 * word that is neither a number, a path nor a match was meant
		 * as the number */
		if (!arg && optind < argc && (is_number(argv[optind]) ||
		                              !strcmp(argv[optind], "all") ||
		                              not_a_path(argv[optind])))
			arg = argv[optind++];
		return parse_lines(j, arg);
	case 'r': j->reverse = 1; return 0;
	case 'f': j->follow = 1; return 0;
	case O_NO_FOLLOW: j->follow = 0; return 0;
	case 'S':
		j->has_since = 1;
		return parse_time(arg, j->utc, &j->since) < 0
		               ? bad_value("--since", arg, "not a time") : 0;
	case 'U':
		j->has_until = 1;
		return parse_time(arg, j->utc, &j->until) < 0
		               ? bad_value("--until", arg, "not a time") : 0;
	case 'p':
		j->has_p = 1;
		return parse_priority(arg, &j->plo, &j->phi) < 0
		               ? bad_value("-p", arg, "not a level or FROM..TO")
		               : 0;
	case 'g': j->grep = arg; return 0;
	case 'i': j->icase = 1; return 0;
	case O_CASE:
		j->icase = arg && (!strcmp(arg, "no") || !strcmp(arg, "false") ||
		                   !strcmp(arg, "0"));
		return 0;
	case 'o':
		j->fmt = out_parse(arg);
		if (j->fmt < 0) {
			fprintf(stderr, "%s: unknown output format '%s' (one of: %s)"
			        "\n", prog, arg, out_names());
			return -1;
		}
		return 0;
	case O_UTC: j->utc = 1; return 0;
	case O_NO_PAGER: j->no_pager = 1; return 0;
	case O_NO_COLOR: j->no_color = 1; return 0;
	case 't':
	case 'u':
		return logger_add(&j->lg, arg);
	case O_OUTPUT_FIELDS: return output_fields(j, arg);
	case O_NOOP:
	case 'a':
	case 'l':
	case 'x':
		return 0;
	case 'e': /* journalctl: the end, -n 1000 unless -n says */
		if (!j->has_n || j->n == 10) {
			j->has_n = 1;
			j->head = 0;
			j->n = 1000;
		}
		return 0;
	case 'q': j->quiet = 1; return 0;
	case O_SHARD: {
		long v = strtol(arg, &end, 10);
		if (!*arg || *end || v < 0 || v >= MAX_SHARD_DIRS)
			return bad_value("--shard", arg, "expected 0..99999");
		j->shard = (int)v;
		return 0;
	}
	case O_SHOW_CURSOR: j->show_cursor = 1; return 0;
	case O_AFTER_CURSOR: j->after_cursor = arg; return 0;
	case O_CURSOR_FILE: j->cursor_file = arg; return 0;
	case O_MODE:
		j->mode_given = 1;
		return parse_mode(arg, &j->mode);
	case O_REORDER: {
		long v = strtol(arg, &end, 10);
		if (!*arg || *end || v < 0 || v > 60000)
			return bad_value("--reorder-window", arg,
			                 "expected 0..60000 (ms)");
		j->reorder_ms = (uint32_t)v;
		return 0;
	}
	case O_BACKTRACE:
		if (!strcmp(arg, "show") || !strcmp(arg, "hide") ||
		    !strcmp(arg, "only")) {
			j->backtrace = arg[0] == 's' ? BT_SHOW
			               : arg[0] == 'h' ? BT_HIDE : BT_ONLY;
			return 0;
		}
		return bad_value("--backtrace", arg,
		                 "expected show, hide or only");
	case 'D': j->dir = arg; return 0;
	case 'h': fputs(cat_help, stdout); return 1;
	default: /* getopt printed what was wrong */
		fprintf(stderr, "(see '%s cat --help')\n", prog);
		return -1;
	}
}

/* The words after the options: DIR (unless -D), then matches. */
static int positional(struct jopts *j, int argc, char **argv)
{
	for (int i = optind; i < argc; i++) {
		const char *a = argv[i];
		struct stat st;
		if (!j->dir && strcmp(a, "+") &&
		    (!strchr(a, '=') || stat(a, &st) == 0)) {
			j->dir = a;
			continue;
		}
		if (match_add(&j->m, a) < 0)
			return -1;
	}
	if (match_check_end(&j->m) < 0)
		return -1;
	if (!j->dir) {
		fprintf(stderr, "%s %s: missing DIR\n", prog, argv[0]);
		fputs(cat_help, stderr);
		return -1;
	}
	return 0;
}

/* @return 0, 1 (--help), -1 (usage error printed). */
static int parse_journal_args(struct jopts *j, int argc, char **argv)
{
	int c, rc;

	opterr = 1;
	optind = 1;
	/* The times of --since/--until depend on --utc, given anywhere. */
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
		if (!strcmp(argv[i], "--utc"))
			j->utc = 1;
	while ((c = getopt_long(argc, argv, "n::rfS:U:p:g:io:qD:healxt:u:",
	                        long_opts, NULL)) != -1)
		if ((rc = one_opt(j, c, optarg, argc, argv)) != 0)
			return rc;
	if (positional(j, argc, argv) < 0)
		return -1;
	if (j->reverse && j->follow)
		return usage_error("--reverse and --follow cannot be combined%s",
		                   "");
	if (j->has_since && j->has_until && j->since > j->until)
		return usage_error("--since is after --until%s", "");
	if (j->grep) {
		int err = regcomp(&j->re, j->grep, REG_EXTENDED | REG_NOSUB |
		                                          (j->icase ? REG_ICASE : 0));
		if (err) {
			char msg[256];
			regerror(err, &j->re, msg, sizeof msg);
			fprintf(stderr, "%s: -g '%s': %s\n", prog, j->grep, msg);
			return -1;
		}
	}
	return 0;
}

/* ---- selection ---- */

static int selected(const struct jopts *j, const le_record *r)
{
	if (j->has_since && r->ts_ns < j->since)
		return 0;
	if (j->has_p && (r->level < j->plo || r->level > j->phi))
		return 0;
	if (j->backtrace &&
	    !(r->flags & LE_REC_BACKTRACE) != (j->backtrace == BT_HIDE))
		return 0;
	if (j->m.n && !matches_record(&j->m, r))
		return 0;
	if (j->lg.n && !loggers_record(&j->lg, r))
		return 0;
	if (j->grep) {
		regmatch_t pm = {0, (regoff_t)r->len};
		/* REG_STARTEND: the payload is not NUL-terminated and may hold
		 * NUL bytes. */
		if (regexec(&j->re, r->payload ? (const char *)r->payload : "",
		            1, &pm, REG_STARTEND) != 0)
			return 0;
	}
	return 1;
}

/* Past --until: the merge is in time order, so nothing later matches. */
static int past_until(const struct jopts *j, const le_record *r)
{
	return j->has_until && r->ts_ns > j->until;
}

static int has_filters(const struct jopts *j)
{
	return j->has_p || j->grep || j->m.n || j->lg.n || j->has_until ||
	       j->backtrace;
}

/* ---- cursors ---- */

/* Read --cursor-file.  @return 1 a cursor in cx->file_cursor, 0 none
 * (missing or empty), -1 unreadable (message printed). */
static int read_cursor_file(struct ctx *cx)
{
	FILE *f = fopen(cx->j->cursor_file, "re");
	if (!f) {
		if (errno == ENOENT)
			return 0;
		fprintf(stderr, "%s: %s: %s\n", prog, cx->j->cursor_file,
		        strerror(errno));
		return -1;
	}
	size_t cap = 0;
	ssize_t n = getline(&cx->file_cursor, &cap, f);
	int e = n < 0 && ferror(f) ? errno : 0;
	fclose(f);
	if (e) {
		fprintf(stderr, "%s: %s: %s\n", prog, cx->j->cursor_file,
		        strerror(e));
		return -1;
	}
	if (n <= 0 || !cx->file_cursor[strspn(cx->file_cursor, "\r\n")]) {
		free(cx->file_cursor);
		cx->file_cursor = NULL;
		return 0;
	}
	cx->file_cursor[strcspn(cx->file_cursor, "\r\n")] = '\0';
	return 1;
}

/* The cursor of the record r returned last in *buf (*cap bytes, grown to
 * le_reader_cursor_cap(r): a collector's store may have more shard
 * directories than LE_CURSOR_MAX holds).  @return le_reader_cursor's. */
static int cursor_of(le_reader *r, char **buf, size_t *cap)
{
	size_t need = le_reader_cursor_cap(r);
	if (need > *cap) {
		char *nb = realloc(*buf, need);
		if (!nb)
			return LE_ENOMEM;
		*buf = nb;
		*cap = need;
	}
	return le_reader_cursor(r, *buf, *cap);
}

/* Write the cursor of the last record printed to --cursor-file, whole:
 * a temporary file renamed over it. */
static void save_cursor(struct ctx *cx)
{
	char tmp[PATH_MAX];
	if (!cx->j->cursor_file || !cx->have_cursor || cx->saved)
		return;
	snprintf(tmp, sizeof tmp, "%s.tmp", cx->j->cursor_file);
	FILE *f = fopen(tmp, "we");
	int ok = f && fprintf(f, "%s\n", cx->cursor) > 0;
	if (f && fclose(f) != 0)
		ok = 0;
	if (ok && rename(tmp, cx->j->cursor_file) < 0)
		ok = 0;
	if (!ok) {
		fprintf(stderr, "%s: %s: cannot write the cursor: %s\n", prog,
		        cx->j->cursor_file, strerror(errno));
		unlink(tmp);
	}
	cx->saved = 1;
}

/* ---- reading ---- */

static le_reader *new_reader(struct ctx *cx, int follow)
{
	le_reader_opts o;
	le_reader *r;
	struct jopts *j = cx->j;

	le_reader_opts_init(&o);
	o.mode = j->mode_given ? j->mode
	                       : follow ? LE_RECOVER_SKIP
	                                : LE_RECOVER_TOLERATE_TAIL;
	o.shard = j->shard;
	o.on_problem = on_problem;
	o.arg = cx;
	int rc = le_reader_open(&r, j->dir, &o);
	if (rc < 0) {
		fprintf(stderr, "%s: %s\n", prog,
		        *le_errmsg() ? le_errmsg() : le_strerror(rc));
		return NULL;
	}
	cx->r = r;
	if (follow && le_reader_follow(r, j->reorder_ms) < 0) {
		le_reader_close(r);
		return NULL;
	}
	return r;
}

/* Position r where the selection starts: after the cursor, or at
 * --since.  @return 0, or an exit status after a message. */
static int position(struct ctx *cx, le_reader *r, int say_skipped)
{
	struct jopts *j = cx->j;
	const char *cur = cx->file_cursor ? cx->file_cursor : j->after_cursor;
	int rc = 0;

	if (cur) {
		uint64_t skipped = 0;
		rc = le_reader_seek_cursor(r, cur, &skipped);
		if (rc == LE_EINVAL) {
			fprintf(stderr, "%s: %s%s%s\n", prog,
			        cx->file_cursor ? j->cursor_file : "",
			        cx->file_cursor ? ": " : "", le_errmsg());
			return EXIT_USAGE;
		}
		if (rc == 0 && skipped && say_skipped)
			fprintf(stderr, "%s: the cursor's records were deleted "
			        "(retention or vacuum): resuming at the oldest "
			        "record left; %" PRIu64 " record%s skipped\n", prog,
			        skipped, skipped == 1 ? " was" : "s were");
	} else if (j->has_since) {
		rc = le_reader_seek_time(r, j->since);
	}
	return rc < 0 ? read_failed(j->dir, rc) : 0;
}

/* Stopped at a gap: say so, once, and what reads on. */
static int halted(struct ctx *cx)
{
	if (cx->halt == 1) {
		out_flush(&cx->o);
		fflush(stdout);
		fprintf(stderr, "%s: %s: reading stopped at the sequence gap; "
		        "'--mode skip' reads on\n", prog, cx->j->dir);
		cx->halt = 2;
	}
	return cx->halt != 0;
}

/* Print one record (it is selected). */
static void emit(struct ctx *cx, const le_record *rec)
{
	const char *cur = NULL;
	if (cx->j->show_cursor || cx->j->cursor_file) {
		cx->have_cursor = cursor_of(cx->r, &cx->cursor,
		                            &cx->cursor_cap) > 0;
		cx->saved = 0;
		if (cx->j->show_cursor && cx->have_cursor &&
		    (cx->o.fmt == OUT_JSON || cx->o.fmt == OUT_JSON_PRETTY ||
		     cx->o.fmt == OUT_EXPORT || cx->o.fmt == OUT_VERBOSE))
			cur = cx->cursor;
	}
	out_record(&cx->o, rec, cur);
	cx->printed++;
}

/* Count the selected records from the start of the selection (a reader
 * of its own, not following).  @return 0 or an exit status. */
static int count_selected(struct ctx *cx, uint64_t *m)
{
	le_record rec;
	int rc;
	le_reader *r = new_reader(cx, 0);

	*m = 0;
	if (!r)
		return EXIT_USAGE;
	cx->silent = 1; /* the printing pass reports the problems */
	int st = position(cx, r, 0);
	while (!st && (rc = le_reader_next(r, &rec)) > 0 &&
	       !past_until(cx->j, &rec) && !cx->halt)
		*m += selected(cx->j, &rec);
	cx->silent = 0;
	cx->halt = 0;
	if (!st && rc < 0 && rc != LE_ECORRUPT)
		st = read_failed(cx->j->dir, rc);
	le_reader_close(r);
	return st;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Forward: print the selection (then follow).  A cursor to resume from
 * overrides -n N: what follows it is what was not seen yet. */
static int run_forward(struct ctx *cx)
{
	struct jopts *j = cx->j;
	int from_cursor = cx->file_cursor || j->after_cursor;
	int last_n = j->has_n && !j->head && j->n != UINT64_MAX && !from_cursor;
	int tail_fast = last_n && !has_filters(j);
	uint64_t skip = 0, limit = j->has_n && j->head ? j->n : UINT64_MAX;
	le_record rec;
	int rc = 0, st;

	if (last_n && !tail_fast) {
		uint64_t m;
		if ((st = count_selected(cx, &m)) != 0)
			return st;
		skip = m > j->n ? m - j->n : 0;
	}
	int follow = j->follow && limit == UINT64_MAX;
	le_reader *r = new_reader(cx, follow);
	if (!r)
		return EXIT_USAGE;
	if (tail_fast)
		st = (rc = le_reader_seek_tail(r, j->n)) < 0
		             ? read_failed(j->dir, rc) : 0;
	else
		st = position(cx, r, !j->quiet);
	/* A long read shows its progress on a terminal's stderr (never
	 * when the records go to that same terminal or its pager, nor while
	 * following). */
	struct progress pg;
	if (follow || pager_active())
		progress_start_fd(&pg, -1, "cat", 0);
	else
		progress_start(&pg, "cat", j->dir, 1);
	for (int done = st != 0; !done;) {
		while (!out_failed() && cx->printed < limit &&
		       (rc = le_reader_next(r, &rec)) > 0) {
			progress_reader(&pg, r);
			if (past_until(j, &rec) || halted(cx)) {
				done = 1;
				break;
			}
			if (!selected(j, &rec))
				continue;
			if (skip) {
				skip--;
				continue;
			}
			emit(cx, &rec);
		}
		out_flush(&cx->o);
		if (rc < 0) {
			st = read_failed(j->dir, rc);
			break;
		}
		if (fflush(stdout) != 0 || out_failed() || cx->printed >= limit ||
		    !follow || stop_signal)
			break;
		uint64_t now = mono_ms();
		if (now - cx->saved_mono >= CURSOR_SAVE_MS) {
			save_cursor(cx);
			cx->saved_mono = now;
		}
		rc = le_reader_wait(r, CURSOR_SAVE_MS);
		if (rc < 0 && rc != -EINTR) {
			st = read_failed(j->dir, rc);
			break;
		}
		rc = 0;
	}
	progress_done(&pg);
	le_reader_close(r);
	return st;
}

/* ---- reverse ---- */

struct saved {
	le_record rec;
	size_t off; /* payload in the chunk's arena */
};

struct chunk_reader {
	struct saved *v;
	size_t n, cap;
	char *arena;
	size_t used, arena_cap;
};

static void keep(struct chunk_reader *c, const le_record *rec)
{
	if (c->n == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 1024;
		c->v = realloc(c->v, c->cap * sizeof *c->v);
	}
	if (c->used + rec->len > c->arena_cap) {
		size_t nc = c->arena_cap ? c->arena_cap : 1 << 20;
		while (nc < c->used + rec->len)
			nc *= 2;
		c->arena = realloc(c->arena, nc);
		c->arena_cap = nc;
	}
	if (!c->v || !c->arena) {
		fprintf(stderr, "%s: out of memory\n", prog);
		exit(EXIT_USAGE);
	}
	memcpy(c->arena + c->used, rec->payload, rec->len);
	c->v[c->n].rec = *rec;
	c->v[c->n].rec.file = NULL;
	c->v[c->n].off = c->used;
	c->used += rec->len;
	c->n++;
}

/* First pass: how many selected records, and a cursor where each chunk
 * of them ends.  @return 0 or an exit status. */
static int reverse_plan(struct ctx *cx, char ***bounds, uint64_t **counts,
                        size_t *nchunks, uint64_t *total)
{
	struct jopts *j = cx->j;
	le_record rec;
	uint64_t in_chunk = 0, bytes = 0, cap = 0;
	char *cur = NULL;
	size_t cur_cap = 0;
	int rc;
	le_reader *r = new_reader(cx, 0);

	*nchunks = 0;
	*total = 0;
	if (!r)
		return EXIT_USAGE;
	int st = position(cx, r, !j->quiet);
	while (!st && (rc = le_reader_next(r, &rec)) > 0 &&
	       !past_until(j, &rec) && !halted(cx)) {
		if (!selected(j, &rec))
			continue;
		(*total)++;
		in_chunk++;
		bytes += rec.len;
		if (j->has_n && j->head && *total == j->n)
			break;
		if (in_chunk < CHUNK_RECS && bytes < CHUNK_BYTES)
			continue;
		if (*nchunks == cap) {
			cap = cap ? cap * 2 : 16;
			*bounds = realloc(*bounds, cap * sizeof **bounds);
			*counts = realloc(*counts, cap * sizeof **counts);
		}
		(*bounds)[*nchunks] = cursor_of(r, &cur, &cur_cap) > 0 ?
		                      strdup(cur) : NULL;
		(*counts)[(*nchunks)++] = in_chunk;
		in_chunk = bytes = 0;
	}
	if (!st && rc < 0)
		st = read_failed(j->dir, rc);
	if (!st && in_chunk) {
		if (*nchunks == cap) {
			*bounds = realloc(*bounds, (cap + 1) * sizeof **bounds);
			*counts = realloc(*counts, (cap + 1) * sizeof **counts);
		}
		(*bounds)[*nchunks] = NULL;
		(*counts)[(*nchunks)++] = in_chunk;
	}
	free(cur);
	le_reader_close(r);
	return st;
}

/* Read chunk k (after bounds[k - 1]) into c. */
static int reverse_load(struct ctx *cx, char **bounds, uint64_t count,
                        size_t k, struct chunk_reader *c)
{
	le_record rec;
	int rc = 0, st = 0;
	le_reader *r = new_reader(cx, 0);

	c->n = c->used = 0;
	if (!r)
		return EXIT_USAGE;
	cx->silent = 1; /* reverse_plan reported the problems */
	if (k == 0) {
		st = position(cx, r, 0);
	} else if ((rc = le_reader_seek_cursor(r, bounds[k - 1], NULL)) < 0) {
		st = read_failed(cx->j->dir, rc);
	}
	while (!st && c->n < count && (rc = le_reader_next(r, &rec)) > 0)
		if (selected(cx->j, &rec))
			keep(c, &rec);
	cx->silent = 0;
	if (!st && rc < 0)
		st = read_failed(cx->j->dir, rc);
	le_reader_close(r);
	return st;
}

static int run_reverse(struct ctx *cx)
{
	struct jopts *j = cx->j;
	char **bounds = NULL;
	uint64_t *counts = NULL, total;
	size_t nchunks;
	struct chunk_reader c = {0};
	int st = reverse_plan(cx, &bounds, &counts, &nchunks, &total);
	uint64_t want = j->has_n && !j->head && j->n < total ? j->n : total;

	for (size_t k = nchunks; !st && k-- > 0 && cx->printed < want &&
	                         !out_failed();) {
		out_flush(&cx->o);
		st = reverse_load(cx, bounds, counts[k], k, &c);
		for (size_t i = c.n; !st && i-- > 0 && cx->printed < want;) {
			c.v[i].rec.payload = c.arena + c.v[i].off;
			out_record(&cx->o, &c.v[i].rec, NULL);
			cx->printed++;
		}
	}
	for (size_t k = 0; k < nchunks; k++)
		free(bounds[k]);
	free(bounds);
	free(counts);
	free(c.v);
	free(c.arena);
	return st;
}

/* ---- the commands ---- */

static void stop_on_signals(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_stop;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL); /* no SA_RESTART: the wait returns */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
}

/* tail on a log not yet written: wait until an engine has made it (or a
 * signal).  @return 0 to go on, 1 stopped by a signal. */
static int wait_for_log(const struct jopts *j)
{
	struct timespec ts = {0, WAIT_DIR_MS * 1000000L};
	if (!log_dir_pending(j->dir))
		return 0;
	if (!j->quiet)
		fprintf(stderr, "%s: %s: no log yet: waiting for it to be "
		        "written\n", prog, j->dir);
	while (!stop_signal && log_dir_pending(j->dir))
		nanosleep(&ts, NULL);
	return stop_signal != 0;
}

/* Colours and the pager, as journalctl has them on a terminal. */
static void terminal(struct jopts *j, struct ctx *cx)
{
	cx->o.color = term_color(j->no_color);
	cx->o.only = j->only;
	cx->o.n_only = j->n_only;
	if (!j->follow)
		pager_start(j->no_pager);
}

static int journal(int argc, char **argv, int tail)
{
	struct jopts j;
	struct ctx cx;
	int st = 0;

	memset(&j, 0, sizeof j);
	j.shard = -1;
	j.fmt = OUT_SHORT;
	j.reorder_ms = DEFAULT_REORDER_MS;
	if (tail) {
		j.follow = 1;
		j.has_n = 1;
		j.n = 10;
	}
	int pr = parse_journal_args(&j, argc, argv);
	if (pr != 0)
		return pr > 0 ? out_finish(0) : EXIT_USAGE;
	memset(&cx, 0, sizeof cx);
	cx.j = &j;
	cx.o.fmt = j.fmt;
	cx.o.utc = j.utc;
	if (j.grep)
		setlocale(LC_CTYPE, ""); /* -i and classes beyond ASCII */
	if (j.follow)
		stop_on_signals();
	if (j.follow && wait_for_log(&j))
		goto out;
	if ((st = check_log_dir(j.dir)) != 0)
		goto out;
	terminal(&j, &cx);
	long pid;
	cx.live = engine_live(j.dir, &pid);
	warn_dead_queues(j.dir);
	if (j.cursor_file && read_cursor_file(&cx) < 0) {
		st = EXIT_USAGE;
		goto out;
	}
	st = j.reverse ? run_reverse(&cx) : run_forward(&cx);
	out_flush(&cx.o);
	if (cx.have_cursor && j.show_cursor && !out_failed() &&
	    cx.o.fmt != OUT_JSON && cx.o.fmt != OUT_JSON_PRETTY &&
	    cx.o.fmt != OUT_EXPORT && cx.o.fmt != OUT_VERBOSE)
		printf("-- cursor: %s\n", cx.cursor);
	save_cursor(&cx);
out:
	free(cx.cursor);
	free(cx.file_cursor);
	out_free(&cx.o);
	if (j.grep)
		regfree(&j.re);
	for (size_t i = 0; i < j.n_only; i++)
		free(j.only[i]);
	free(j.only);
	if (st == 0)
		st = cx.status;
	st = out_finish(st);
	pager_end();
	return st;
}

int cmd_cat(int argc, char **argv)
{
	return journal(argc, argv, 0);
}

int cmd_tail(int argc, char **argv)
{
	return journal(argc, argv, 1);
}
