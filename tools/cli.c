/*
 * cli.c -- what the commands share: stdout and its closed-pipe rule,
 * timestamps and escaping, option parsing, opening a reader.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

const char *prog = "logengine";

int out_err; /* errno of the first failed write to stdout, or 0 */

/* ---- output ---- */

/* Has a write to stdout failed?  Checked after each record, while errno
 * still holds the cause. */
int out_failed(void)
{
	if (!out_err && ferror_unlocked(stdout))
		out_err = errno ? errno : EIO;
	return out_err != 0;
}

/*
 * Finish stdout.  A closed pipe is the reader's choice, not an error: the
 * status is then rc unchanged and nothing is printed.
 * @return rc, or EXIT_USAGE for any other write error.
 */
int out_finish(int rc)
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
void fmt_ts(char *buf, size_t cap, uint64_t ns)
{
	time_t s = (time_t)(ns / 1000000000u);
	struct tm tm;
	size_t n = 0;

	if (ns == 0) {
		snprintf(buf, cap, "-");
		return;
	}
	if (gmtime_r(&s, &tm))
		n = strftime(buf, cap, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + n, cap - n, ".%09" PRIu64 "Z", ns % 1000000000u);
}

void fmt_size(char *buf, size_t cap, uint64_t bytes)
{
	static const char units[] = "BKMGTPE";
	double v = (double)bytes;
	int u = 0;

	while (v >= 1024 && u < 6) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, cap, "%" PRIu64 "B", bytes);
	else
		snprintf(buf, cap, "%.1f%c", v, units[u]);
}

/* ---- arguments ---- */

int usage_error(const char *fmt, const char *what)
{
	fprintf(stderr, "%s: ", prog);
	fprintf(stderr, fmt, what);
	fprintf(stderr, " (see '%s help')\n", prog);
	return -1;
}

int parse_mode(const char *s, int *mode)
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

/* If argv[*i] is option shrt/lng ("-o json", "-ojson", "--output json",
 * "--output=json"), set *val and step over it.  @return 1 matched, 0 not,
 * -1 matched but its value is missing. */
int opt_value(char **argv, int argc, int *i, const char *shrt,
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

/* One option at argv[*i].  @return 0 or -1 (usage error printed). */
static int parse_opt(char **argv, int argc, int *i, unsigned allow,
                     struct args *a)
{
	const char *v, *o = argv[*i];
	int m;

	if ((allow & OPT_MODE) &&
	    (m = opt_value(argv, argc, i, NULL, "--mode", &v)) != 0)
		return m < 0 ? -1 : parse_mode(v, &a->mode);
	if ((allow & OPT_INIT) && !strcmp(o, "--init")) {
		a->flags |= OPT_INIT;
		return 0;
	}
	if ((allow & OPT_DISK) && !strcmp(o, "--disk-usage")) {
		a->flags |= OPT_DISK;
		return 0;
	}
	return usage_error("unknown option '%s'", o);
}

int parse_args(int argc, char **argv, unsigned allow, struct args *a,
               const char *help)
{
	int opts_done = 0;

	memset(a, 0, sizeof *a);
	a->mode = LE_RECOVER_TOLERATE_TAIL;
	for (int i = 1; i < argc; i++) {
		if (!opts_done && strcmp(argv[i], "--") == 0) {
			opts_done = 1;
		} else if (!opts_done && (!strcmp(argv[i], "--help") ||
		                          !strcmp(argv[i], "-h"))) {
			fputs(help, stdout);
			return 1;
		} else if (!opts_done && argv[i][0] == '-' && argv[i][1]) {
			if (parse_opt(argv, argc, &i, allow, a) < 0)
				return -1;
		} else if (a->dir) {
			return usage_error("unexpected argument '%s'", argv[i]);
		} else {
			a->dir = argv[i];
		}
	}
	if (!a->dir) {
		fprintf(stderr, "%s %s: missing DIR\n", prog, argv[0]);
		fputs(help, stderr);
		return -1;
	}
	return 0;
}

/* ---- reading ---- */

void problem_to_stderr(void *arg, const char *file, uint64_t off,
                              const char *what)
{
	(void)arg;
	fprintf(stderr, "%s: %s: offset %" PRIu64 ": %s\n", prog, file, off,
	        what);
}

/* @return a reader on dir, or NULL after printing why. */
le_reader *open_reader(const char *dir, int mode, int shard,
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
int read_failed(const char *dir, int rc)
{
	fflush(stdout); /* the records before it come first */
	if (rc == LE_ECORRUPT)
		fprintf(stderr, "%s: %s: reading stopped at the damage; "
		        "'--mode skip' reads past it\n", prog, dir);
	else if (rc == -EMFILE)
		fprintf(stderr, "%s: %s: reading stopped: too many open files "
		        "(a reader keeps one per shard directory: raise the "
		        "hard limit, ulimit -Hn)\n", prog, dir);
	else
		fprintf(stderr, "%s: %s: reading stopped: %s\n", prog, dir,
		        rc == LE_EUNSAFE && *le_errmsg() ? le_errmsg()
		                                         : le_strerror(rc));
	return rc == LE_ECORRUPT ? EXIT_DAMAGE : EXIT_USAGE;
}

/* Shard numbers with a shard-NNN directory in dir, as a bitmap.
 * @return how many, or -errno. */
int list_shards(const char *dir, unsigned char *has)
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

