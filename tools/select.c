/*
 * select.c -- which records cat and tail print: time expressions
 * (--since/--until, as systemd.time(7) writes them), levels (-p), field
 * matches (FIELD=VALUE, journalctl's rules) and the -g regular expression.
 *
 * Fields.  A match names a field; record_field() is the one place that
 * says what a record's fields are: the built-in ones (SHARD, SEQ, LEVEL,
 * PRIORITY, MESSAGE, FLAGS), then the record's typed fields by their key
 * (user=bob, status=503).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cli.h"

#define NS 1000000000ll

/* ---- time ---- */

static const struct unit {
	const char *name;
	double ns;
} units[] = {
	{"usec", 1e3}, {"us", 1e3}, {"\xc2\xb5s", 1e3},
	{"msec", 1e6}, {"ms", 1e6},
	{"seconds", 1e9}, {"second", 1e9}, {"secs", 1e9}, {"sec", 1e9},
	{"s", 1e9},
	{"minutes", 60e9}, {"minute", 60e9}, {"mins", 60e9}, {"min", 60e9},
	{"m", 60e9},
	{"hours", 3600e9}, {"hour", 3600e9}, {"hr", 3600e9}, {"h", 3600e9},
	{"days", 86400e9}, {"day", 86400e9}, {"d", 86400e9},
	{"weeks", 604800e9}, {"week", 604800e9}, {"w", 604800e9},
	{"months", 2629800e9}, {"month", 2629800e9}, {"M", 2629800e9},
	{"years", 31557600e9}, {"year", 31557600e9}, {"y", 31557600e9},
};

/* A span: "1h 30min", "10min", "1.5d", "90" (seconds).  @return 0 or -1. */
static int parse_span(const char *s, int64_t *out)
{
	double total = 0;
	int any = 0;

	while (*s) {
		while (isspace((unsigned char)*s))
			s++;
		if (!*s)
			break;
		char *end;
		errno = 0;
		double v = strtod(s, &end);
		if (end == s || errno || v < 0 || *s == '+' || *s == '-')
			return -1;
		s = end;
		while (*s == ' ')
			s++;
		size_t ul = 0;
		while (s[ul] && (isalpha((unsigned char)s[ul]) ||
		                 (unsigned char)s[ul] >= 0x80))
			ul++;
		double mul = 1e9;
		if (ul) {
			size_t i = 0;
			while (i < sizeof units / sizeof units[0] &&
			       (strlen(units[i].name) != ul ||
			        strncmp(units[i].name, s, ul) != 0))
				i++;
			if (i == sizeof units / sizeof units[0])
				return -1;
			mul = units[i].ns;
		}
		total += v * mul;
		s += ul;
		any = 1;
	}
	if (!any || total > 9.2e18)
		return -1;
	*out = (int64_t)total;
	return 0;
}

/* Midnight (local, or UTC) of the day `days` from today. */
static int64_t midnight(int64_t now_ns, int days, int utc)
{
	time_t t = (time_t)(now_ns / NS);
	struct tm tm;
	if (utc)
		gmtime_r(&t, &tm);
	else
		localtime_r(&t, &tm);
	tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
	tm.tm_mday += days;
	tm.tm_isdst = -1;
	return (int64_t)(utc ? timegm(&tm) : mktime(&tm)) * NS;
}

/* Digits: exactly n of them at *p.  @return the value or -1. */
static int digits(const char **p, int n)
{
	int v = 0;
	for (int i = 0; i < n; i++) {
		if (!isdigit((unsigned char)(*p)[i]))
			return -1;
		v = v * 10 + ((*p)[i] - '0');
	}
	*p += n;
	return v;
}

/* ".123456789": nanoseconds (more digits than 9 are cut). */
static int64_t fraction(const char **p)
{
	int64_t ns = 0, scale = 100000000;
	if (**p != '.' && **p != ',')
		return 0;
	(*p)++;
	while (isdigit((unsigned char)**p)) {
		ns += (**p - '0') * scale;
		scale /= 10;
		(*p)++;
	}
	return ns;
}

/* "Z", "UTC", "+HH:MM", "+HHMM", "+HH", or nothing.  @return 1 with *off
 * seconds east of UTC set, 0 when absent, -1 when malformed. */
static int zone(const char **p, long *off)
{
	while (**p == ' ')
		(*p)++;
	if (**p == 'Z' || **p == 'z') {
		(*p)++;
		*off = 0;
		return 1;
	}
	if (!strncmp(*p, "UTC", 3)) {
		*p += 3;
		*off = 0;
		return 1;
	}
	if (**p != '+' && **p != '-')
		return **p ? -1 : 0;
	int sign = **p == '-' ? -1 : 1;
	(*p)++;
	int h = digits(p, 2), m = 0;
	if (h < 0)
		return -1;
	if (**p == ':')
		(*p)++;
	if (isdigit((unsigned char)**p) && (m = digits(p, 2)) < 0)
		return -1;
	*off = sign * (h * 3600L + m * 60L);
	return 1;
}

/* "YYYY-MM-DD[( |T)HH:MM[:SS[.frac]]][zone]" or "HH:MM[:SS[.frac]]"
 * (today).  @return 0 or -1. */
static int parse_absolute(const char *s, int utc, int64_t now, int64_t *out)
{
	struct tm tm;
	const char *p = s;
	int64_t frac = 0;
	long off = 0;
	time_t t0 = (time_t)(now / NS);

	memset(&tm, 0, sizeof tm);
	if (utc)
		gmtime_r(&t0, &tm);
	else
		localtime_r(&t0, &tm);
	tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
	if (isdigit((unsigned char)p[0]) && isdigit((unsigned char)p[1]) &&
	    p[2] == ':') {
		/* a time of today */
	} else {
		int y = digits(&p, 4), mo, d;
		if (y < 0 || *p++ != '-' || (mo = digits(&p, 2)) < 1 || mo > 12 ||
		    *p++ != '-' || (d = digits(&p, 2)) < 1 || d > 31)
			return -1;
		tm.tm_year = y - 1900;
		tm.tm_mon = mo - 1;
		tm.tm_mday = d;
		if (*p == 'T' || *p == 't' || (*p == ' ' && isdigit((unsigned char)p[1])))
			p++;
		else if (*p && *p != ' ' && *p != 'Z' && *p != '+' && *p != '-')
			return -1;
	}
	if (isdigit((unsigned char)*p)) {
		int h = digits(&p, 2), mi;
		if (h < 0 || h > 23 || *p++ != ':' || (mi = digits(&p, 2)) < 0 ||
		    mi > 59)
			return -1;
		tm.tm_hour = h;
		tm.tm_min = mi;
		if (*p == ':') {
			p++;
			int sec = digits(&p, 2);
			if (sec < 0 || sec > 60)
				return -1;
			tm.tm_sec = sec;
			frac = fraction(&p);
		}
	}
	int z = zone(&p, &off);
	if (z < 0 || *p)
		return -1;
	tm.tm_isdst = -1;
	time_t t;
	if (z || utc)
		t = timegm(&tm) - off;
	else
		t = mktime(&tm);
	if (t == (time_t)-1 && !(z || utc))
		return -1;
	*out = (int64_t)t * NS + frac;
	return 0;
}

int parse_time(const char *s, int utc, uint64_t *out_ns)
{
	struct timespec now_ts;
	int64_t now, span, v;
	size_t n = strlen(s);

	clock_gettime(CLOCK_REALTIME, &now_ts);
	now = (int64_t)now_ts.tv_sec * NS + now_ts.tv_nsec;
	if (!strcmp(s, "now"))
		v = now;
	else if (!strcmp(s, "today"))
		v = midnight(now, 0, utc);
	else if (!strcmp(s, "yesterday"))
		v = midnight(now, -1, utc);
	else if (!strcmp(s, "tomorrow"))
		v = midnight(now, 1, utc);
	else if (s[0] == '@') {
		char *end;
		errno = 0;
		double sec = strtod(s + 1, &end);
		if (errno || end == s + 1 || *end || sec < 0)
			return -1;
		v = (int64_t)(sec * 1e9);
	} else if ((s[0] == '-' || s[0] == '+') && parse_span(s + 1, &span) == 0)
		v = s[0] == '-' ? now - span : now + span;
	else if (n > 4 && !strcmp(s + n - 4, " ago")) {
		char buf[128];
		if (n - 4 >= sizeof buf)
			return -1;
		memcpy(buf, s, n - 4);
		buf[n - 4] = '\0';
		if (parse_span(buf, &span) < 0)
			return -1;
		v = now - span;
	} else if (parse_absolute(s, utc, now, &v) < 0)
		return -1;
	*out_ns = v < 0 ? 0 : (uint64_t)v;
	return 0;
}

/* ---- levels ---- */

static const struct {
	const char *name;
	int level;
} level_names[] = {
	{"trace", LE_TRACE},  {"debug", LE_DEBUG},   {"info", LE_INFO},
	{"notice", LE_INFO},  {"warn", LE_WARN},     {"warning", LE_WARN},
	{"err", LE_ERROR},    {"error", LE_ERROR},   {"crit", LE_FATAL},
	{"alert", LE_FATAL},  {"emerg", LE_FATAL},   {"fatal", LE_FATAL},
};

/* journalctl's numbers are syslog priorities: 0 emerg .. 7 debug (7 takes
 * TRACE too: "-p 7" is everything, as there). */
static const int syslog_to_level[8] = {LE_FATAL, LE_FATAL, LE_FATAL,
                                       LE_ERROR, LE_WARN,  LE_INFO,
                                       LE_INFO,  LE_TRACE};

int parse_level(const char *s, int numbers_are_syslog)
{
	for (size_t i = 0; i < sizeof level_names / sizeof level_names[0]; i++)
		if (!strcasecmp(s, level_names[i].name))
			return level_names[i].level;
	if (isdigit((unsigned char)s[0]) && !s[1]) {
		int v = s[0] - '0';
		if (numbers_are_syslog)
			return v <= 7 ? syslog_to_level[v] : -1;
		return v <= LE_FATAL ? v : -1;
	}
	return -1;
}

int parse_priority(const char *s, int *lo, int *hi)
{
	const char *dots = strstr(s, "..");
	if (!dots) {
		int l = parse_level(s, 1);
		if (l < 0)
			return -1;
		*lo = l;
		*hi = LE_FATAL;
		return 0;
	}
	char a[32];
	size_t n = (size_t)(dots - s);
	if (n == 0 || n >= sizeof a)
		return -1;
	memcpy(a, s, n);
	a[n] = '\0';
	int x = parse_level(a, 1), y = parse_level(dots + 2, 1);
	if (x < 0 || y < 0)
		return -1;
	*lo = x < y ? x : y;
	*hi = x < y ? y : x;
	return 0;
}

/* syslog priority of a level, for PRIORITY= and -o export */
int level_priority(int level)
{
	static const int prio[] = {7, 7, 6, 4, 3, 2};
	return level >= 0 && level <= LE_FATAL ? prio[level] : -1;
}

/* ---- fields and matches ---- */

const char *flags_text(uint32_t flags, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s%s%s", flags & LE_REC_MARKER ? "marker" : "",
	         (flags & LE_REC_MARKER) && (flags & LE_REC_TRUNCATED) ? ","
	                                                              : "",
	         flags & LE_REC_TRUNCATED ? "truncated" : "");
	return buf;
}

/*
 * The value of field `name` of record r, as text in buf (cap bytes) or,
 * for MESSAGE, the payload itself.  @return 1 and *val, *len set, 0 when
 * the record has no such field.
 */
static int record_field(const le_record *r, const char *name, char *buf,
                        size_t cap, const void **val, size_t *len)
{
	int n = -1;

	if (!strcmp(name, "MESSAGE")) {
		*val = r->payload;
		*len = r->len;
		return 1;
	}
	if (!strcmp(name, "SHARD"))
		n = snprintf(buf, cap, "%" PRIu32, r->shard);
	else if (!strcmp(name, "SEQ"))
		n = snprintf(buf, cap, "%" PRIu64, r->seq);
	else if (!strcmp(name, "LEVEL") && r->level >= 0)
		n = snprintf(buf, cap, "%s", le_level_name(r->level));
	else if (!strcmp(name, "PRIORITY") && r->level >= 0)
		n = snprintf(buf, cap, "%d", level_priority(r->level));
	else if (!strcmp(name, "FLAGS"))
		n = (int)strlen(flags_text(r->flags, buf, cap));
	else if (r->fields_len) {
		/* The record's typed fields, by their exact key: a string's
		 * bytes as they are, a number or a bool as text prints it. */
		size_t pos = 0, klen = strlen(name);
		le_field f;
		while (le_record_field(r, &pos, &f) == 1) {
			if (f.key_len != klen || memcmp(f.key, name, klen))
				continue;
			field_value(&f, buf, cap, val, len);
			return 1;
		}
	}
	if (n < 0)
		return 0;
	*val = buf;
	*len = (size_t)n;
	return 1;
}

void field_value(const le_field *f, char *buf, size_t cap,
                 const void **val, size_t *len)
{
	int n = 0;
	switch (f->type) {
	case LE_FT_STRING:
	case LE_FT_BYTES:
		*val = f->v.str.ptr;
		*len = f->v.str.len;
		return;
	case LE_FT_INT64:
		n = snprintf(buf, cap, "%" PRId64, f->v.i64);
		break;
	case LE_FT_UINT64:
		n = snprintf(buf, cap, "%" PRIu64, f->v.u64);
		break;
	case LE_FT_DOUBLE:
		/* the shortest of %.15g / %.17g that reads back */
		n = snprintf(buf, cap, "%.15g", f->v.f64);
		if (strtod(buf, NULL) != f->v.f64)
			n = snprintf(buf, cap, "%.17g", f->v.f64);
		break;
	case LE_FT_BOOL:
		n = snprintf(buf, cap, "%s", f->v.b ? "true" : "false");
		break;
	}
	*val = buf;
	*len = n > 0 ? (size_t)n : 0;
}

/* Built-in fields whose values are spelled more than one way. */
static int normalise(const char *field, const char *value, char *out,
                     size_t cap)
{
	if (!strcmp(field, "LEVEL")) {
		int l = parse_level(value, 0);
		if (l < 0)
			return -1;
		snprintf(out, cap, "%s", le_level_name(l));
		return 0;
	}
	snprintf(out, cap, "%s", value);
	return 0;
}

int match_add(struct matches *m, const char *arg)
{
	if (!strcmp(arg, "+")) {
		if (m->n == 0 || m->term[m->n - 1].group != m->groups)
			return usage_error("'+' must stand between matches%s", "");
		m->groups++;
		return 0;
	}
	const char *eq = strchr(arg, '=');
	if (!eq || eq == arg)
		return usage_error("'%s' is not a FIELD=VALUE match", arg);
	/* Built-in fields are upper case (journalctl's); a record's
	 * typed fields have keys of their own (user, code.file). */
	for (const char *p = arg; p < eq; p++)
		if (!(isalnum((unsigned char)*p) || *p == '_' || *p == '.' ||
		      *p == '-'))
			return usage_error("'%s': a field name is letters, digits "
			                   "and _ . -", arg);
	if (m->n == MAX_MATCHES)
		return usage_error("too many matches (at most 64): '%s'", arg);
	struct match *t = &m->term[m->n];
	size_t fl = (size_t)(eq - arg);
	if (fl >= sizeof t->field)
		return usage_error("field name too long: '%s'", arg);
	memcpy(t->field, arg, fl);
	t->field[fl] = '\0';
	if (normalise(t->field, eq + 1, t->value, sizeof t->value) < 0)
		return usage_error("'%s': not a level (trace, debug, info, warn, "
		                   "error, fatal or 0-5)", arg);
	t->group = m->groups;
	m->n++;
	return 0;
}

int match_check_end(const struct matches *m)
{
	if (m->n && m->term[m->n - 1].group != m->groups)
		return usage_error("'+' must stand between matches%s", "");
	return 0;
}

/* One group: for each field named in it, one of its values matches. */
static int group_matches(const struct matches *m, int g, const le_record *r)
{
	char buf[64];
	for (int i = 0; i < m->n; i++) {
		const struct match *t = &m->term[i];
		if (t->group != g)
			continue;
		/* the first term of this field in the group decides for all */
		int first = 1;
		for (int j = 0; j < i; j++)
			if (m->term[j].group == g &&
			    !strcmp(m->term[j].field, t->field))
				first = 0;
		if (!first)
			continue;
		const void *val;
		size_t len;
		int have = record_field(r, t->field, buf, sizeof buf, &val, &len);
		int any = 0;
		for (int j = i; j < m->n && !any && have; j++) {
			const struct match *u = &m->term[j];
			if (u->group == g && !strcmp(u->field, t->field) &&
			    strlen(u->value) == len && !memcmp(u->value, val, len))
				any = 1;
		}
		if (!any)
			return 0;
	}
	return 1;
}

int matches_record(const struct matches *m, const le_record *r)
{
	if (m->n == 0)
		return 1;
	for (int g = 0; g <= m->groups; g++)
		if (group_matches(m, g, r))
			return 1;
	return 0;
}

/* ---- loggers (-t, -u) ---- */

int logger_add(struct loggers *l, const char *name)
{
	if (l->n == MAX_LOGGERS)
		return usage_error("too many loggers (at most 64): '%s'", name);
	l->name[l->n++] = name;
	return 0;
}

/* Is logger `have` (len bytes) `want` or below it ("want.x")? */
static int is_under(const char *want, const void *have, size_t len)
{
	size_t wl = strlen(want);
	return len >= wl && !memcmp(have, want, wl) &&
	       (len == wl || ((const char *)have)[wl] == '.');
}

int loggers_record(const struct loggers *l, const le_record *r)
{
	if (l->n == 0)
		return 1;
	size_t pos = 0;
	le_field f;
	while (le_record_field(r, &pos, &f) == 1) {
		if (f.key_len != 6 || memcmp(f.key, "logger", 6) ||
		    f.type != LE_FT_STRING)
			continue;
		for (int i = 0; i < l->n; i++)
			if (is_under(l->name[i], f.v.str.ptr, f.v.str.len))
				return 1;
		return 0;
	}
	return 0;
}
