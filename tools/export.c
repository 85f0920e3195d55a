/*
 * export.c -- a record as journal fields: what `-o export` (journald's
 * export format, systemd.io/JOURNAL_EXPORT_FORMATS) and `-o verbose`
 * write, so that systemd-journal-remote stores a log and journalctl
 * reads it back with every record's time, priority, message and fields.
 *
 *   PRIORITY=6                   syslog's number of the level (trace and
 *                                debug 7, info 6, warn 4, error 3, fatal 2)
 *   SYSLOG_IDENTIFIER=db.pool    the logger (the record's "logger" field):
 *                                what journalctl -t selects
 *   MESSAGE=...                  the payload
 *   LOGENGINE_LEVEL=trace        ours, since trace and debug share 7
 *   LOGENGINE_SHARD=0, LOGENGINE_SEQ=17, LOGENGINE_FLAGS=marker,truncated
 *   _HOSTNAME=, LOGENGINE_ORIGIN_SHARD=, LOGENGINE_ORIGIN_SEQ=
 *                                a collector's store: where it was written
 *   USER=bob  STATUS=503 ...     the typed fields, journal-named
 *
 * A journal field name is 1 to 64 of A-Z 0-9 _, not starting with a
 * digit, and one starting with _ is journald's own (trusted): a key is
 * upper-cased, every other byte becomes _, and "F_" goes in front of a
 * name that starts with a digit or _, or that is one of the names above
 * (a key "message" does not overwrite the message); then it is cut to 64.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

#define JOURNAL_NAME_MAX 64

/* Names export writes itself: a record field mapped onto one gets F_. */
static int reserved(const char *name)
{
	return !strcmp(name, "PRIORITY") || !strcmp(name, "MESSAGE") ||
	       !strcmp(name, "SYSLOG_IDENTIFIER") ||
	       !strncmp(name, "LOGENGINE_", 10);
}

void journal_name(const char *key, size_t len, char *name, size_t cap)
{
	char up[JOURNAL_NAME_MAX + 1];
	size_t n = 0;

	for (; n < len && n < JOURNAL_NAME_MAX; n++) {
		char c = key[n];
		if (c >= 'a' && c <= 'z')
			c = (char)(c - 'a' + 'A');
		up[n] = (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ? c
		                                                           : '_';
	}
	up[n] = '\0';
	int prefix = n == 0 || up[0] == '_' || (up[0] >= '0' && up[0] <= '9') ||
	             reserved(up);
	snprintf(name, cap, "%s%.*s", prefix ? "F_" : "",
	         (int)(prefix ? JOURNAL_NAME_MAX - 2 : JOURNAL_NAME_MAX), up);
}

/* A number as a field. */
static void number(field_fn fn, void *arg, const char *name, uint64_t v)
{
	char buf[24];
	int n = snprintf(buf, sizeof buf, "%" PRIu64, v);
	fn(arg, name, buf, (size_t)n);
}

/* The record's own fields first, the logger among them, then the typed
 * fields but the logger. */
static void builtin_fields(const le_record *r, field_fn fn, void *arg)
{
	size_t pos = 0;
	le_field f;

	if (r->level >= 0)
		number(fn, arg, "PRIORITY", (uint64_t)level_priority(r->level));
	while (le_record_field(r, &pos, &f) == 1)
		if (f.key_len == 6 && !memcmp(f.key, "logger", 6) &&
		    f.type == LE_FT_STRING) {
			fn(arg, "SYSLOG_IDENTIFIER", f.v.str.ptr, f.v.str.len);
			break;
		}
	fn(arg, "MESSAGE", r->payload ? r->payload : "", r->len);
	if (r->level >= 0)
		fn(arg, "LOGENGINE_LEVEL", le_level_name(r->level),
		   strlen(le_level_name(r->level)));
	number(fn, arg, "LOGENGINE_SHARD", r->shard);
	number(fn, arg, "LOGENGINE_SEQ", r->seq);
	if (r->flags & (LE_REC_MARKER | LE_REC_TRUNCATED)) {
		char buf[32];
		flags_text(r->flags, buf, sizeof buf);
		fn(arg, "LOGENGINE_FLAGS", buf, strlen(buf));
	}
	if (r->host) {
		fn(arg, "_HOSTNAME", r->host, strlen(r->host));
		number(fn, arg, "LOGENGINE_ORIGIN_SHARD", r->origin_shard);
		number(fn, arg, "LOGENGINE_ORIGIN_SEQ", r->origin_seq);
	}
}

void export_fields(const le_record *r, field_fn fn, void *arg)
{
	size_t pos = 0;
	le_field f;
	char name[JOURNAL_NAME_MAX + 1], buf[64];

	builtin_fields(r, fn, arg);
	while (le_record_field(r, &pos, &f) == 1) {
		const void *val;
		size_t len;
		if (f.key_len == 6 && !memcmp(f.key, "logger", 6) &&
		    f.type == LE_FT_STRING)
			continue; /* SYSLOG_IDENTIFIER */
		journal_name(f.key, f.key_len, name, sizeof name);
		field_value(&f, buf, sizeof buf, &val, &len);
		fn(arg, name, val, len);
	}
}
