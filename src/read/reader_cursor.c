/*
 * reader_cursor.c -- le_reader_cursor and le_reader_seek_cursor: the
 * position after a returned record as a string, and back.
 *
 * "v=1,s=SHARD,q=SEQ,t=TS,i=SEGHEX,o=OFF,n=SHARD:SEQ/...": the record's
 * shard, sequence and timestamp; where it was (a hint, checked before it
 * is used); the next sequence of each other shard whose position is known.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "read/reader.h"

static size_t put(char *buf, size_t cap, size_t at, const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 4, 5)))
#endif
	;

static size_t put(char *buf, size_t cap, size_t at, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(at < cap ? buf + at : NULL, at < cap ? cap - at : 0,
	                  fmt, ap);
	va_end(ap);
	return at + (n > 0 ? (size_t)n : 0);
}

/* The sequence c's next record will carry.  @return 1 known, 0 not. */
static int shard_next(const struct cursor *c, uint64_t *seq)
{
	if (c->has)
		*seq = c->head.seq;
	else if (c->open)
		*seq = c->scan.next_seq;
	else if (c->next_known)
		*seq = c->next_seq;
	else
		return 0;
	return 1;
}

/* Bytes of a cursor at most: the fixed fields ("v=1,s=" and five numbers
 * of 20 characters at most, their keys and commas, ",n="), then for each
 * other shard its number (5 digits below LE_SHARD_DIRS_MAX), ':', a
 * sequence of 20 digits at most and '/', and the NUL.  256 shards take
 * 7,149 bytes at most: LE_CURSOR_MAX holds them. */
#define CURSOR_FIXED 128
#define CURSOR_PER_SHARD 27
_Static_assert(CURSOR_FIXED + CURSOR_PER_SHARD * LE_MAX_SHARDS <=
                       LE_CURSOR_MAX,
               "LE_CURSOR_MAX holds the cursor of every engine's log");
_Static_assert(LE_SHARD_DIRS_MAX <= 100000, "shard numbers of 5 digits");

size_t le_reader_cursor_cap(const le_reader *r)
{
	size_t n = r ? CURSOR_FIXED + CURSOR_PER_SHARD * r->ncur : 0;
	return n > LE_CURSOR_MAX ? n : LE_CURSOR_MAX;
}

int le_reader_cursor(const le_reader *r, char *buf, size_t cap)
{
	if (!r || !buf || !r->ret.valid)
		return LE_EINVAL;
	/* The other shards stand where they stood when it was returned:
	 * nothing has been returned since (their heads wait unconsumed). */
	size_t n = put(buf, cap, 0, "v=1,s=%" PRIu32 ",q=%" PRIu64
	               ",t=%" PRIu64 ",i=%" PRIx64 ",o=%" PRIu64, r->ret.shard,
	               r->ret.seq, r->ret.ts, r->ret.seg, r->ret.off);
	const char *sep = ",n=";
	for (size_t i = 0; i < r->ncur; i++) {
		uint64_t seq;
		if (r->cur[i].shard == r->ret.shard ||
		    !shard_next(&r->cur[i], &seq))
			continue;
		n = put(buf, cap, n, "%s%" PRIu32 ":%" PRIu64, sep,
		        r->cur[i].shard, seq);
		sep = "/";
	}
	if (n >= cap)
		return -ENOSPC;
	return (int)n;
}

struct parsed {
	uint32_t shard;
	uint64_t seq, ts, seg, off;
	int have_hint;
	/* The "n" entries of the shards below nsh, the reader's highest
	 * shard + 1 (those of shards it does not read are checked and
	 * dropped). */
	uint32_t nsh;
	uint64_t *next;
	unsigned char *has_next;
};

static int parse_u64(const char **p, int base, uint64_t *v)
{
	char *end;
	errno = 0;
	if (!(base == 16 ? isxdigit((unsigned char)**p)
	                 : isdigit((unsigned char)**p)))
		return -1;
	unsigned long long x = strtoull(*p, &end, base);
	if (errno || end == *p)
		return -1;
	*v = x;
	*p = end;
	return 0;
}

static int cursor_bad(const char *s, const char *why)
{
	le__seterr("cursor '%.200s': %s", s, why);
	return LE_EINVAL;
}

/* The "n" value: SHARD:SEQ joined by '/'. */
static int parse_next(const char *s, const char **p, struct parsed *c)
{
	for (;;) {
		uint64_t sh, seq;
		if (parse_u64(p, 10, &sh) < 0 || **p != ':')
			return cursor_bad(s, "n: expected SHARD:SEQ");
		(*p)++;
		if (parse_u64(p, 10, &seq) < 0 || sh >= LE_SHARD_DIRS_MAX)
			return cursor_bad(s, "n: expected SHARD:SEQ");
		if (sh < c->nsh) {
			c->next[sh] = seq;
			c->has_next[sh] = 1;
		}
		if (**p != '/')
			return 0;
		(*p)++;
	}
}

static int parse_cursor(const char *s, struct parsed *c)
{
	const char *p = s;
	unsigned seen = 0;

	while (*p) {
		char key = p[0];
		uint64_t v = 0;
		if (!key || p[1] != '=')
			return cursor_bad(s, "expected KEY=VALUE");
		p += 2;
		int rc = 0;
		switch (key) {
		case 'n': rc = parse_next(s, &p, c); break;
		case 'i': rc = parse_u64(&p, 16, &v); break;
		case 'v': case 's': case 'q': case 't': case 'o':
			rc = parse_u64(&p, 10, &v);
			break;
		default: /* a key of a later version: skip it */
			p += strcspn(p, ",");
		}
		if (rc < 0)
			return rc == LE_EINVAL ? rc : cursor_bad(s, "bad number");
		switch (key) {
		case 'v':
			if (v != 1)
				return cursor_bad(s, "unknown cursor version");
			seen |= 1;
			break;
		case 's':
			if (v >= LE_SHARD_DIRS_MAX)
				return cursor_bad(s, "shard out of range");
			c->shard = (uint32_t)v;
			seen |= 2;
			break;
		case 'q': c->seq = v; seen |= 4; break;
		case 't': c->ts = v; seen |= 8; break;
		case 'i': c->seg = v; seen |= 16; break;
		case 'o': c->off = v; seen |= 32; break;
		}
		if (*p == ',')
			p++;
		else if (*p)
			return cursor_bad(s, "expected ',' between fields");
	}
	if ((seen & 15) != 15)
		return cursor_bad(s, "needs v, s, q and t");
	c->have_hint = (seen & 48) == 48;
	return 0;
}

/* Shard c resumes right after the cursor's own record. */
static int resume_own(le_reader *r, struct cursor *c, const struct parsed *p,
                      uint64_t *skipped)
{
	*skipped = 0;
	if (p->have_hint)
		for (size_t k = 0; k < c->nseg; k++) {
			if (c->segs[k] != p->seg)
				continue;
			int rc = le__rd_goto_frame(r, c, k, p->off, p->seq);
			if (rc < 0)
				return rc;
			if (c->has && c->head.seq == p->seq &&
			    c->head_off == p->off) {
				le__rd_consume(c);
				return 0;
			}
			break;
		}
	return le__rd_shard_seek_seq(r, c, p->seq + 1, skipped);
}

/* A shard the cursor does not name: its records after the cursor's in
 * the merge order (timestamp, then shard). */
static int keep_after(const struct cursor *c, const void *arg)
{
	const struct parsed *p = arg;
	return c->head.ts > p->ts ||
	       (c->head.ts == p->ts && c->shard > p->shard);
}

/* p made ready to parse a cursor for r: room for the "n" entry of each of
 * r's shards.  @return 0, LE_ENOMEM. */
static int parsed_init(struct parsed *p, const le_reader *r)
{
	memset(p, 0, sizeof *p);
	for (size_t i = 0; i < r->ncur; i++)
		if (r->cur[i].shard >= p->nsh)
			p->nsh = r->cur[i].shard + 1;
	p->next = calloc(p->nsh ? p->nsh : 1, sizeof *p->next);
	p->has_next = calloc(p->nsh ? p->nsh : 1, 1);
	return p->next && p->has_next ? 0 : LE_ENOMEM;
}

int le_reader_seek_cursor(le_reader *r, const char *cursor,
                          uint64_t *skipped)
{
	struct parsed pp, *p = &pp;
	uint64_t total = 0, sk;
	int rc = le__rd_seek_begin(r);

	if (skipped)
		*skipped = 0;
	if (rc < 0)
		return rc;
	if (!cursor)
		return LE_EINVAL;
	le__clearerr();
	rc = parsed_init(p, r);
	if (rc == 0)
		rc = parse_cursor(cursor, p);
	for (size_t i = 0; rc == 0 && i < r->ncur; i++) {
		struct cursor *c = &r->cur[i];
		sk = 0;
		if (c->shard == p->shard) {
			rc = resume_own(r, c, p, &sk);
		} else if (p->has_next[c->shard]) {
			rc = le__rd_shard_seek_seq(r, c, p->next[c->shard],
			                           &sk);
		} else {
			rc = le__rd_shard_seek_time(r, c, p->ts);
			if (rc == 0)
				rc = le__rd_skip_until(r, c, keep_after, p);
		}
		total += sk;
	}
	free(p->next);
	free(p->has_next);
	if (skipped)
		*skipped = total;
	return rc == LE_EINVAL ? rc : le__rd_seek_end(r, rc);
}
