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

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/shard.h"
#include "engine/logger.h"
#include "engine/dflt.h"
#include "record/format.h"
#include "record/fields.h"

#define BT_DEFAULT_RECORDS 1024u

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
		                         e->cfg.file_mode);
		if (rc < 0) {
			le__seterr("backtrace: cannot map the ring of shard %u: "
			           "%s", i, le_strerror(rc));
			return rc;
		}
	}
	/* release: the rings before a producer that sees this uses one */
	atomic_store_explicit(&e->bt_ready, 1, memory_order_release);
	return 0;
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
	if (rc == 0 && le__loggers_keep_any(e))
		rc = rings_open(e);
	return rc;
}

void le__bt_close(le_engine *e)
{
	for (uint32_t i = 0; e->shards && i < e->nshards; i++)
		le__btring_close(&e->shards[i].bt);
}

uint64_t le__bt_dropped(le_engine *e)
{
	uint64_t n = 0;

	for (uint32_t i = 0; e->shards && i < e->nshards; i++)
		n += atomic_load_explicit(&e->shards[i].bt.dropped,
		                          memory_order_relaxed);
	return n;
}

/* What a walk of one ring writes to: its shard, and the logger whose
 * records it takes (all: every one). */
struct out {
	le_engine *e;
	le__shard *sh;
	uint16_t logger;
	int all;
	uint64_t written;
};

static int wanted(const le__btent *en, void *arg)
{
	const struct out *o = arg;
	return o->all || en->logger == o->logger;
}

/* Queue one kept record into o->sh without waiting: its payload with the
 * marking field first in its field block.  A full queue drops it. */
static void put(const le__btent *en, void *arg)
{
	struct out *o = arg;
	unsigned char head[4 + LE_BT_FIELD_LEN];
	const unsigned char *rest = en->payload;
	uint32_t rlen = en->len, b = LE_BT_FIELD_LEN, used64;
	uint64_t used;
	uint8_t flags = (uint8_t)(en->flags | LE_REC_FIELDS);

	if ((en->flags & LE_REC_FIELDS) && rlen >= 4) {
		b += le__get32(rest); /* the block's own fields follow ours */
		rest += 4;
		rlen -= 4;
	}
	le__put32(head, b);
	memcpy(head + 4, LE_BT_FIELD, LE_BT_FIELD_LEN);
	used64 = (uint32_t)sizeof head + rlen;
	if (!le__budget_take(&o->e->budget, used64, o->e->cap_rec,
	                     o->e->cap_bytes))
		goto drop;
	le__slot *s = le__ring_reserve(&o->sh->ring, le__slot_bytes(used64),
	                               &used);
	if (!s) {
		le__budget_give(&o->e->budget, 1, used64);
		goto drop;
	}
	unsigned char *p = (unsigned char *)(s + 1);
	memcpy(p, head, sizeof head);
	memcpy(p + sizeof head, rest, rlen);
	s->len = used64;
	s->seq = 0;
	s->ts = en->ts;
	/* level byte with its check, flags, reserved: as fill() stores them */
	uint32_t lfr = le__slot_lvbyte(en->level, flags) | (uint32_t)flags << 8;
	memcpy((unsigned char *)s + offsetof(le__slot, level), &lfr,
	       sizeof lfr);
	le__slot_publish(s);
	o->written++;
	return;
drop:
	atomic_fetch_add_explicit(&o->sh->bt.dropped, 1, memory_order_relaxed);
}

/* Write out the kept records of one ring (at most max, the newest) that
 * o selects, into its shard's queue.  @return how many were taken. */
static uint64_t dump_shard(struct out *o, le__shard *sh, uint32_t max)
{
	le__btent copy;
	uint64_t before = o->written;

	o->sh = sh;
	le__btring_take(&sh->bt, max, wanted, put, o, &copy);
	if (o->written > before)
		le__wake_after(sh);
	atomic_fetch_add_explicit(&o->e->bt_written, o->written - before,
	                          memory_order_relaxed);
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
	struct out o = {.e = e, .all = 1};
	if (!atomic_load_explicit(&e->bt_ready, memory_order_acquire) ||
	    atomic_load_explicit(&e->closing, memory_order_relaxed))
		return 0;
	for (uint32_t i = 0; i < e->nshards; i++)
		dump_shard(&o, &e->shards[i], 0);
	return o.written > INT32_MAX ? INT32_MAX : (int)o.written;
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
