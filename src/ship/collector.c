/*
 * collector.c -- the public collector interface (logengine.h,
 * "Collector") over the collector's store (collect_store.c): the checks
 * on a whole message, and where its records go against the sequence E
 * its origin expects.  The transport is the caller's.
 *
 *   message --check--> refused: nothing stored, res->refused says why
 *      |
 *   its origin, found or made (refused past max_origins)
 *      |
 *   records below E that a marker claimed lost: to the late directory
 *      |
 *   last < E: done   first > E: a hole (FILL_HOLE: a marker takes it)
 *      |
 *   E .. last appended (a gap message: a marker); E = last + 1
 *
 * Handles: a le_collector is the store and a le_collector_origin its
 * le__cstore_origin, under the public names (never dereferenced as
 * those: both are incomplete types outside this file).
 */
#define _GNU_SOURCE
#include "ship/ship.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/crc32c.h"
#include "base/clock.h"
#include "base/os.h"

static le__cstore *store(le_collector *c)
{
	return (le__cstore *)(void *)c;
}

static le__cstore_origin *org(le_collector_origin *o)
{
	return (le__cstore_origin *)(void *)o;
}

static void res_clear(le_collector_res *res)
{
	memset(res, 0, sizeof *res);
	res->offset = UINT64_MAX;
}

/* Refuse the message (why, at byte off of its body or UINT64_MAX).
 * @return LE_EFULL for the origin limit, else LE_ECORRUPT. */
static int refuse(le_collector_res *res, int why, uint64_t off,
                  const char *text)
{
	res->refused = why;
	res->offset = off;
	snprintf(res->msg, sizeof res->msg, "%s", text);
	return why == LE_COLLECT_ORIGIN_LIMIT ? LE_EFULL : LE_ECORRUPT;
}

int le_collector_open(le_collector **out, const char *dir,
                      const le_collector_opts *opts, le_collector_res *res)
{
	static const le_collector_opts defaults;
	le_collector_res scratch;
	le__cstore *s;

	if (!opts)
		opts = &defaults;
	le__cstore_opts o = {.segment_bytes = opts->segment_bytes
	                                      ? opts->segment_bytes
	                                      : UINT64_C(64) << 20,
	                     .sync = opts->sync,
	                     .max_origins = opts->max_origins};
	res_clear(res = res ? res : &scratch);
	if (out)
		*out = NULL;
	if (!out || !dir)
		return LE_EINVAL;
	int rc = le__mkdir(dir, 0750);
	if (rc < 0 && rc != -EEXIST) {
		snprintf(res->msg, sizeof res->msg, "%s: %s", dir,
		         le_strerror(rc));
		return rc;
	}
	rc = le__cstore_open(&s, dir, &o, res->msg, sizeof res->msg);
	if (rc == 0)
		*out = (le_collector *)(void *)s;
	return rc;
}

void le_collector_close(le_collector *c)
{
	if (c)
		le__cstore_close(store(c));
}

int le_collector_host_valid(const char *host, size_t len)
{
	return host && le__host_valid(host, len);
}

int le_collector_origin_get(le_collector *c, const char *host,
                            uint32_t shard, int create,
                            le_collector_origin **out, le_collector_res *res)
{
	le__cstore_origin *o;
	le_collector_res scratch;

	res_clear(res = res ? res : &scratch);
	if (!c || !host || !out)
		return LE_EINVAL;
	int rc = le__cstore_origin_get(store(c), host, shard, create, &o,
	                               res->msg, sizeof res->msg);
	if (rc == LE_EFULL)
		res->refused = LE_COLLECT_ORIGIN_LIMIT;
	*out = (le_collector_origin *)(void *)o;
	res->origin = *out;
	return rc;
}

uint64_t le_collector_next(const le_collector_origin *o)
{
	const le__cstore_origin *p = (const le__cstore_origin *)(const void *)o;

	if (!p)
		return 0;
	return p->next_seq ? p->next_seq : 1;
}

uint64_t *le_collector_data(le_collector_origin *o)
{
	return o ? &org(o)->data : NULL;
}

int le_collector_sync(le_collector *c)
{
	return c ? le__cstore_sync(store(c)) : LE_EINVAL;
}

/* ---- the checks, before anything of a message is stored ---- */

/* What the rest of the store relies on: a host that names a directory's
 * origin, a shard an engine can have, sequences whose sums cannot wrap. */
static int check_headers(const le_collector_msg *m, le_collector_res *res)
{
	if (!m->host || !le__host_valid(m->host, strlen(m->host)))
		return refuse(res, LE_COLLECT_MALFORMED, UINT64_MAX, "origin "
		              "host not 1 to 253 of A-Z a-z 0-9 . _ -");
	if (m->shard >= LE_MAX_SHARDS)
		return refuse(res, LE_COLLECT_MALFORMED, UINT64_MAX, "origin "
		              "shard above 255 (an engine's shards)");
	if (m->first == 0 || m->last < m->first || m->last > LE_SHIP_SEQ_MAX)
		return refuse(res, LE_COLLECT_MALFORMED, UINT64_MAX, "sequences "
		              "not 1 <= first <= last <= 2^62");
	if (m->fields & ~(uint32_t)LE_FIELD_ALL)
		return refuse(res, LE_COLLECT_MALFORMED, UINT64_MAX, "unknown "
		              "field bits");
	return 0;
}

/* A gap message: no body, a count that is its range, and a time that
 * can be a record's (its marker gets it). */
static int check_gap(const le_collector_msg *m, le_collector_res *res)
{
	if (m->len != 0 || m->gap != m->last - m->first + 1)
		return refuse(res, LE_COLLECT_GAP_CLAIM, UINT64_MAX, "a gap "
		              "message with a body or a count not its range");
	if (m->ts < LE_GAP_TS_MIN)
		return refuse(res, LE_COLLECT_GAP_CLAIM, UINT64_MAX, "a gap "
		              "message without a time (Le-Ts missing, 0, or "
		              "below 10^18 ns since the epoch)");
	if (m->ts > le__now_ns() + LE_GAP_TS_AHEAD_NS)
		return refuse(res, LE_COLLECT_GAP_CLAIM, UINT64_MAX, "a gap "
		              "message dated more than a day ahead of this "
		              "host's clock (Le-Ts)");
	return 0;
}

/* The body against its headers: the body's checksum when its frames
 * have none, then every frame (le__ship_check_body). */
static int check_body(const le_collector_msg *m, le_collector_res *res)
{
	const unsigned char *b = m->body;
	uint64_t off;
	const char *why;

	if (!(m->fields & LE_FIELD_CRC) &&
	    (!m->has_crc ||
	     m->crc != le__crc_mask(le__crc32c_extend(0, b, m->len))))
		return refuse(res, LE_COLLECT_DAMAGED, UINT64_MAX, "body "
		              "checksum (Le-Body-Crc) missing or wrong");
	if (le__ship_check_body(b, m->len, m->fields, m->shard, m->first,
	                        m->last - m->first + 1, &off, &why) < 0)
		return refuse(res, LE_COLLECT_DAMAGED, off, why);
	return 0;
}

static int check(const le_collector_msg *m, le_collector_res *res)
{
	int rc = check_headers(m, res);

	if (rc == 0)
		rc = m->gap ? check_gap(m, res) : check_body(m, res);
	return rc;
}

/* ---- storing a checked message ---- */

/* Time of the first frame of a checked message (0 without timestamps):
 * a marker for the records missing before it is dated so. */
static uint64_t first_ts(const le_collector_msg *m)
{
	le__frame f;
	const char *why;

	if (m->gap)
		return m->ts;
	if (le__frame_decode(m->body, m->len, m->fields, LE_FRAME_MAX, &f,
	                     &why) != LE_FRAME_OK)
		return 0;
	return f.ts;
}

/* The records of m below o's next sequence: those a gap claim said
 * were lost are stored now (res->late), the rest are already stored.
 * A gap message brings none.  @return 0, < 0 (res->msg may say why). */
static int late(le__cstore *s, le__cstore_origin *o,
                const le_collector_msg *m, le_collector_res *res)
{
	uint64_t top = m->last < o->next_seq ? m->last : o->next_seq - 1;
	le__ship_body from = {m->body, m->len, m->pos, m->fields};
	le__late out;

	if (m->gap)
		return 0;
	int rc = le__cstore_late(s, o, m->first, m->body, m->len,
	                         top - m->first + 1, &from, &out);
	if (rc < 0) {
		snprintf(res->msg, sizeof res->msg, "%s", out.err);
		return rc;
	}
	res->late = out.n;
	res->late_lo = out.lo;
	res->late_hi = out.hi;
	return 0;
}

/* Store o's next sequence .. m->last: m's frames from there, or the
 * marker of a gap message. */
static int put(le__cstore *s, le__cstore_origin *o,
               const le_collector_msg *m, le_collector_res *res)
{
	const unsigned char *b = m->body;
	uint64_t skip = o->next_seq - m->first, n = m->last - o->next_seq + 1;

	if (m->gap) {
		int rc = le__cstore_gap(s, o, m->fields, o->next_seq, m->last,
		                        m->ts, LE_GAP_LOST);
		res->lost = rc < 0 ? 0 : n;
		return rc;
	}
	size_t off = le__ship_body_skip(b, m->len, skip);
	le__ship_body from = {b, m->len, m->pos, m->fields};
	int rc = le__cstore_append(s, o, m->fields, b + off, m->len - off, n,
	                           &from);
	if (rc == 0) {
		res->stored = n;
		res->bytes = m->len - off;
	}
	return rc;
}

int le_collector_append(le_collector *c, const le_collector_msg *m,
                        int flags, le_collector_res *res)
{
	le__cstore *s = store(c);
	le_collector_origin *po;
	le_collector_res scratch;

	res_clear(res = res ? res : &scratch);
	if (!c || !m)
		return LE_EINVAL;
	int rc = check(m, res);
	if (rc < 0)
		return rc;
	rc = le_collector_origin_get(c, m->host, m->shard, 1, &po, res);
	if (rc < 0)
		return rc;
	le__cstore_origin *o = org(po);
	if (o->next_seq == 0)
		o->next_seq = 1; /* a forwarder starts every origin at 1 */
	/* A marker never stands for records that do come. */
	if (m->first < o->next_seq && (rc = late(s, o, m, res)) < 0)
		return rc;
	if (m->last < o->next_seq)
		return 0;
	if (m->first > o->next_seq) {
		res->missing = m->first - o->next_seq;
		if (!(flags & LE_COLLECT_FILL_HOLE))
			return 0;
		rc = le__cstore_gap(s, o, m->fields, o->next_seq, m->first - 1,
		                    first_ts(m), LE_GAP_MISSING);
		if (rc < 0)
			return rc;
	}
	return put(s, o, m, res);
}
