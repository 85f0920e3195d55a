/*
 * backtrace.c -- the flight recorder: a logger's records below its
 * threshold kept in a ring per shard (queue/btring.h) by the hot path
 * (submit.c), and written out here, into the same shard's queue, as
 * recorded history: on a trigger (a record at or above backtrace_trigger
 * on that logger) and on le_dump_backtrace.
 *
 * A kept entry holds its queue slot's payload as the producer would have
 * queued it; written out, it gets the field "le.backtrace" (true) first
 * in its field block, which readers report as LE_REC_BACKTRACE.  Slots
 * are reserved without waiting (a full queue drops the record, counted
 * in backtrace_dropped), so a dump never blocks its caller.
 */
#define _GNU_SOURCE
#include "engine/backtrace.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/shard.h"
#include "engine/logger.h"
#include "engine/dflt.h"
#include "record/format.h"
#include "record/fields.h"
#include "record/defer.h"
#include "queue/sites.h"

#define BT_DEFAULT_RECORDS 1024u
#define BT_TEXT_MAX 4096u /* a dead process's deferred record's text */
#define BT_UNIT(e) ((e)->use_tsc ? 2u : 1u)

/* Open every shard's ring (caller holds log_mu, or le_open runs): the
 * file DIR/shard-NNN/BACKTRACE beside QUEUE, anonymous memory without a
 * mapped queue.  @return 0 or -errno (le_errmsg set). */
static int rings_open(le_engine *e)
{
	char path[LE_PATH_MAX + 16];
	uint32_t cap = e->cfg.backtrace_records ? e->cfg.backtrace_records
	                                        : BT_DEFAULT_RECORDS;

	if (atomic_load_explicit(&e->bt_ready, memory_order_relaxed))
		return 0;
	for (uint32_t i = 0; i < e->nshards; i++) {
		le__shard *sh = &e->shards[i];
		int file = e->cfg.store && e->cfg.mapped_queue;
		if (file)
			snprintf(path, sizeof path, "%s/BACKTRACE", sh->dir);
		int rc = le__btring_open(&sh->bt, file ? path : NULL, cap, i,
		                         BT_UNIT(e), e->cfg.file_mode);
		if (rc < 0) {
			le__seterr("backtrace: cannot map the ring of shard %u: "
			           "%s", i, le_strerror(rc));
			while (i--) /* none, or all: a later call tries again */
				le__btring_close(&e->shards[i].bt, 1);
			return rc;
		}
	}
	/* release: the rings before a producer that sees this uses one */
	atomic_store_explicit(&e->bt_ready, 1, memory_order_release);
	return 0;
}

/* What a walk of one ring writes to: its shard, and the logger whose
 * records it takes (all: every one). */
struct out {
	le_engine *e;
	le__shard *sh;
	int logger;          /* -1: every logger's */
	uint64_t written;
};

/*
 * Queue one kept record into sh without waiting: payload p (len bytes,
 * slot flags `flags`) with the marking field first in its field block.
 * A full queue drops it (counted in bt_lost).  No lock, no allocation:
 * the crash handler calls this too.  @return 1 queued, 0 dropped.
 */
static int queue_kept(le_engine *e, le__shard *sh, int level, uint8_t flags,
                      uint64_t ts, const unsigned char *p, uint32_t len)
{
	unsigned char head[4 + LE_BT_FIELD_LEN];
	uint32_t b = LE_BT_FIELD_LEN, n;
	uint64_t used;

	if ((flags & LE_REC_FIELDS) && len >= 4) {
		b += le__get32(p); /* the block's own fields follow ours */
		p += 4;
		len -= 4;
	}
	flags |= LE_REC_FIELDS;
	le__put32(head, b);
	memcpy(head + 4, LE_BT_FIELD, LE_BT_FIELD_LEN);
	n = (uint32_t)sizeof head + len;
	if (!le__budget_take(&e->budget, n, e->cap_rec, e->cap_bytes))
		goto drop;
	le__slot *s = le__ring_reserve(&sh->ring,
	                               le__ring_slot_bytes(&sh->ring, n), &used);
	if (!s) {
		le__budget_give(&e->budget, 1, n);
		goto drop;
	}
	unsigned char *q = (unsigned char *)(s + 1);
	memcpy(q, head, sizeof head);
	memcpy(q + sizeof head, p, len);
	s->len = n;
	s->seq = 0;
	s->ts = ts;
	/* level byte with its check, flags, reserved: as fill() stores them */
	uint32_t lfr = le__slot_lvbyte((uint32_t)level, flags) |
	               (uint32_t)flags << 8;
	memcpy((unsigned char *)s + offsetof(le__slot, level), &lfr,
	       sizeof lfr);
	le__slot_publish_ck(&sh->ring, s);
	atomic_fetch_add_explicit(&sh->bt_written, 1, memory_order_relaxed);
	return 1;
drop:
	atomic_fetch_add_explicit(&e->bt_lost, 1, memory_order_relaxed);
	return 0;
}

static void put(const le__btcopy *c, void *arg)
{
	struct out *o = arg;
	o->written += (uint64_t)queue_kept(o->e, o->sh, LE_BT_LEVEL(c->meta),
	                                   LE_BT_FLAGS(c->meta), c->ts,
	                                   c->payload, LE_BT_LEN(c->meta));
}

/* Write out the kept records of one ring (at most max, the newest) that
 * o selects, into its shard's queue.  @return how many were taken. */
static uint64_t dump_shard(struct out *o, le__shard *sh, uint32_t max)
{
	le__btcopy copy;
	uint64_t before = o->written;

	o->sh = sh;
	le__btring_take(&sh->bt, max, o->logger, 0, put, o, &copy);
	if (o->written > before)
		le__wake_after(sh);
	return o->written - before;
}

void le__bt_trigger(le_engine *e, const struct le__head *h)
{
	const le_logger *lg = h->kind ? (const le_logger *)(const void *)h
	                              : &e->loggers->tab[0];
	struct out o = {.e = e, .logger = lg->index};
	uint32_t max = __atomic_load_n(&lg->bt_records, __ATOMIC_RELAXED);

	if (!atomic_load_explicit(&e->bt_ready, memory_order_acquire))
		return;
	/* max is per logger: each shard may hold some of its newest, and
	 * which are newest across shards is not known without their times;
	 * each shard gives at most max. */
	for (uint32_t i = 0; i < e->nshards; i++)
		dump_shard(&o, &e->shards[i], max);
}

int le_dump_backtrace(le_engine *e)
{
	e = le__engine_or_default(e); /* dflt.c */
	if (!e)
		return LE_EINVAL;
	struct out o = {.e = e, .logger = -1};
	if (!atomic_load_explicit(&e->bt_ready, memory_order_acquire) ||
	    atomic_load_explicit(&e->closing, memory_order_relaxed))
		return 0;
	for (uint32_t i = 0; i < e->nshards; i++)
		dump_shard(&o, &e->shards[i], 0);
	return o.written > INT32_MAX ? INT32_MAX : (int)o.written;
}

/* ---- the crash handler ---- */

/* The decimal digits of v at out (room for 20).  @return their count. */
static size_t put_dec(char *out, uint64_t v)
{
	char tmp[20];
	size_t n = 0, k = 0;

	do
		tmp[n++] = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	while (n)
		out[k++] = tmp[--n];
	return k;
}

/*
 * Async-signal-safe, so it may run in a thread that faulted anywhere,
 * even inside a producer or a dump: it takes no lock and allocates
 * nothing (le__btring_take and queue_kept are atomics and memcpy into
 * memory mapped since le_open), and its one system call is the futex
 * wake of le__wake_after.  An entry a producer was writing when the
 * signal came is in state 1 and skipped; one another thread is dumping
 * goes to whichever CAS comes first, so none is written twice.  What it
 * queues, the handler's flush then writes; what the flush does not get
 * to is in QUEUE for the next le_open, and the ring's entries are taken
 * (state 3), so that le_open does not write them again.
 */
void le__bt_crash(le_engine *e, int sig)
{
	static const char pre[] = "logengine: signal ";
	static const char post[] = "; the records before this are the "
	                           "flight recorder's";
	char msg[sizeof pre + 20 + sizeof post];
	struct out o = {.e = e, .logger = -1};

	if (!atomic_load_explicit(&e->bt_ready, memory_order_acquire))
		return;
	for (uint32_t i = 0; i < e->nshards; i++) {
		le__shard *sh = &e->shards[i];
		if (!dump_shard(&o, sh, 0))
			continue;
		size_t n = sizeof pre - 1;
		memcpy(msg, pre, n);
		n += put_dec(msg + n, (uint64_t)sig);
		memcpy(msg + n, post, sizeof post - 1);
		n += sizeof post - 1;
		queue_kept(e, sh, LE_WARN, 0, le__stamp(e->use_tsc),
		           (const unsigned char *)msg, (uint32_t)n);
	}
}

/* ---- after the process died: le_open, `logengine recover` ---- */

/* What a walk of a dead process's ring adds to: its shard, and whether
 * its stamps mean nothing here (another clock unit or boot). */
struct dead {
	le__shard *sh;
	int zero_ts;
};

/* The text of deferred payload p (after any field block: site number,
 * arguments) by the dead process's SITES table, kept while its queue is
 * recovered, into out (cap); LE_SITE_LOST_TEXT when its site is not
 * there or the arguments do not match it.  @return its length; cut ones
 * add LE_REC_TRUNCATED to *flags. */
static size_t dead_text(le__shard *sh, const unsigned char *p, size_t len,
                        char *out, size_t cap, uint8_t *flags)
{
	const char *why;
	size_t dlen = 0;
	le__desc d;
	long n = -1;
	const unsigned char *desc = len >= 4 ? le__sitetab_get(
		&sh->sites, le__get32(p), &dlen) : NULL;

	if (desc && le__desc_decode(desc, dlen, &d, &why))
		n = le__defer_text(&d, p + 4, len - 4, out, cap, &why);
	if (n < 0)
		n = snprintf(out, cap, "%s", LE_SITE_LOST_TEXT);
	if ((size_t)n >= cap) {
		n = (long)cap - 1;
		*flags |= LE_REC_TRUNCATED;
	}
	return (size_t)n;
}

/* Room for `need` more bytes in d.  @return 0 or -1. */
static int dead_room(le__btdead *d, size_t need)
{
	if (d->cap - d->len >= need)
		return 0;
	size_t cap = d->cap * 2 > d->len + need ? d->cap * 2 : d->len + need;
	unsigned char *b = realloc(d->buf, cap);
	if (!b)
		return -1;
	d->buf = b;
	d->cap = cap;
	return 0;
}

/* One kept entry of a dead process's ring, made a payload that needs no
 * call site (a deferred one its text), added to the shard's list.  One
 * whose level, flags or field block do not check is counted lost. */
static void dead_add(const le__btcopy *c, void *arg)
{
	struct dead *x = arg;
	le__btdead *d = &x->sh->bt_dead;
	uint32_t len = LE_BT_LEN(c->meta);
	uint8_t level = LE_BT_LEVEL(c->meta), in = LE_BT_FLAGS(c->meta);
	uint8_t flags = in & (LE_REC_TRUNCATED | LE_REC_FIELDS);
	size_t fb = 0, n = len;
	const char *why;

	if (level > LE_FATAL || (in & ~LE_SLOT_KNOWN_FLAGS))
		goto lost;
	if (in & LE_REC_FIELDS) {
		uint32_t b = len >= 4 ? le__get32(c->payload) : UINT32_MAX;
		if (b > len - 4 || le__fields_check(c->payload + 4, b, &why) < 0)
			goto lost;
		fb = 4 + b;
	}
	if (dead_room(d, LE_BT_DEAD_HDR + fb + BT_TEXT_MAX) < 0)
		goto lost;
	unsigned char *h = d->buf + d->len, *q = h + LE_BT_DEAD_HDR;
	memcpy(q, c->payload, fb);
	if (in & LE_REC_DEFERRED)
		n = fb + dead_text(x->sh, c->payload + fb, len - fb,
		                   (char *)q + fb, BT_TEXT_MAX, &flags);
	else
		memcpy(q + fb, c->payload + fb, len - fb);
	le__put64(h, x->zero_ts ? 0 : c->ts);
	le__put32(h + 8, (uint32_t)n);
	h[12] = level;
	h[13] = flags;
	h[14] = h[15] = 0;
	d->len += LE_BT_DEAD_HDR + n;
	d->n++;
	return;
lost:
	d->lost++;
}

int le__bt_recover(le__shard *sh)
{
	char path[LE_PATH_MAX + 16];
	le__btring r;
	le__btcopy copy;
	le_engine *e = sh->e;

	snprintf(path, sizeof path, "%s/BACKTRACE", sh->dir);
	int rc = le__btring_attach(&r, path, sh->id);
	sh->bt_dead.seen = rc != -ENOENT;
	if (rc <= 0)
		return 0; /* nothing a dead process kept (or unreadable) */
	struct dead x = {sh, r.unit != BT_UNIT(e) || r.boot != le__boot_id()};
	le__btring_take(&r, 0, -1, 1, dead_add, &x, &copy);
	le__btring_close(&r, 1);
	return 0;
}

/* Queue a dead process's kept records (le__bt_recover) into its shard,
 * in the order it kept them, then the record that says it died. */
static void dead_queue(le_engine *e, le__shard *sh)
{
	le__btdead *d = &sh->bt_dead;
	char msg[200];
	size_t off = 0;

	if (!d->n)
		return;
	for (uint32_t i = 0; i < d->n; i++) {
		const unsigned char *h = d->buf + off;
		uint32_t len = le__get32(h + 8);
		queue_kept(e, sh, h[12], h[13], le__get64(h), h + LE_BT_DEAD_HDR,
		           len);
		off += LE_BT_DEAD_HDR + len;
	}
	int n = snprintf(msg, sizeof msg, "logengine: the process died "
	                 "before le_close; the %u records before this are "
	                 "its flight recorder's", d->n);
	queue_kept(e, sh, LE_WARN, 0, le__stamp(e->use_tsc),
	           (const unsigned char *)msg, (uint32_t)n);
	free(d->buf);
	d->buf = NULL;
	d->len = d->cap = 0;
}

/* No logger keeps records: no ring files (a dead process's included). */
static void unlink_rings(le_engine *e)
{
	char path[LE_PATH_MAX + 16];

	if (!e->cfg.store || !e->cfg.mapped_queue)
		return;
	for (uint32_t i = 0; i < e->nshards; i++) {
		if (!e->shards[i].bt_dead.seen)
			continue; /* no system call for a file never made */
		snprintf(path, sizeof path, "%s/BACKTRACE", e->shards[i].dir);
		le__unlink(path);
	}
}

int le__bt_open(le_engine *e)
{
	const char *env = getenv("LOGENGINE_BACKTRACE");
	int rc = 0;

	e->bt_trigger = e->cfg.backtrace_trigger ? e->cfg.backtrace_trigger
	                                         : LE_ERROR;
	if (e->cfg.backtrace)
		rc = le__loggers_backtrace(e, "backtrace", e->cfg.backtrace);
	if (rc == 0 && env)
		rc = le__loggers_backtrace(e, "LOGENGINE_BACKTRACE", env);
	for (uint32_t i = 0; rc == 0 && i < e->nshards; i++)
		dead_queue(e, &e->shards[i]);
	if (rc == 0 && le__loggers_keep_any(e))
		rc = rings_open(e);
	else if (rc == 0)
		unlink_rings(e); /* a dead process's, now written out */
	return rc;
}

void le__bt_close(le_engine *e)
{
	for (uint32_t i = 0; e->shards && i < e->nshards; i++)
		le__btring_close(&e->shards[i].bt, !e->forked);
}

uint64_t le__bt_dropped(le_engine *e)
{
	uint64_t n = 0;

	for (uint32_t i = 0; e->shards && i < e->nshards; i++)
		n += le__btring_dropped(&e->shards[i].bt) +
		     e->shards[i].bt_dead.lost;
	return n + atomic_load_explicit(&e->bt_lost, memory_order_relaxed);
}

int le_set_backtrace(le_logger *lg, int level, uint32_t records)
{
	if (!lg) {
		lg = le_logger_get(NULL, "");
		if (!lg)
			return LE_EINVAL;
	}
	int root = lg == &lg->e->loggers->tab[0];
	if (level < (root ? LE_TRACE : -1) || level > LE_OFF) {
		le__seterr("le_set_backtrace: %d is not a level (LE_TRACE.."
		           "LE_OFF%s)", level, root ? "" : ", or -1");
		return LE_EINVAL;
	}
	return le__logger_set_bt(lg, level, records, rings_open);
}
