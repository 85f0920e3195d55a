/*
 * shard_page.c -- the counters a shard's live page publishes, gathered
 * from the shard, its store and the engine.  The page (live/statpage.c)
 * owns the layout and the protocol; this file owns what the words mean
 * in the engine's terms.  The [writer] fields read here are read by the
 * writer's own thread, or at close once it was joined.
 */
#include "engine/shard_page.h"

#include <stdio.h>
#include <string.h>

#include "engine/shard.h"

#define LOAD(x) atomic_load_explicit(&(x), memory_order_relaxed)

/* The engine's counter words of a publication of sh (the rest zero). */
static void fill(le__shard *sh, uint64_t *w, uint64_t cpu_ns)
{
	le_engine *e = sh->e;

	memset(w, 0, LE_SP_WORDS * sizeof *w);
	w[LE_SP_NSHARDS] = e->nshards;
	w[LE_SP_CONSUMED] = LOAD(sh->prog.consumed);
	for (int k = 0; k <= LE_FATAL; k++)
		w[LE_SP_LEVEL + k] = LOAD(sh->prog.by_level[k]);
	w[LE_SP_DROPPED_FULL] = LOAD(sh->sig.dropped_full);
	w[LE_SP_RECOVERED] = LOAD(sh->prog.recovered);
	w[LE_SP_ABANDONED] = LOAD(sh->prog.abandoned);
	w[LE_SP_WRITER_CPU_NS] = cpu_ns;
	w[LE_SP_FAILING] = sh->w.backoff != 0; /* the last commit failed */
	/* tail first: head only grows, and never falls behind tail */
	uint64_t tail = atomic_load_explicit(sh->ring.tail, memory_order_relaxed);
	w[LE_SP_RING_BYTES] = atomic_load_explicit(sh->ring.head,
	                                           memory_order_relaxed) - tail;
	w[LE_SP_RING_SIZE] = sh->ring.size;
	le__statpage_fill_store(sh->store, w);
	uint64_t b = LOAD(e->budget);
	w[LE_SP_QUEUE_RECORDS] = b & LE_BUDGET_REC_MASK;
	w[LE_SP_QUEUE_BYTES] = b >> LE_BUDGET_REC_BITS;
	w[LE_SP_QUEUE_CAP] = e->cap_rec;
	w[LE_SP_QUEUE_CAP_BYTES] = e->cap_bytes;
	w[LE_SP_HWM_RECORDS] = LOAD(e->hwm_rec);
	w[LE_SP_HWM_BYTES] = LOAD(e->hwm_bytes);
	w[LE_SP_HWM_RECORD_BYTES] = LOAD(e->hwm_len);
	w[LE_SP_TRUNCATED] = LOAD(e->truncated);
	w[LE_SP_REJECTED] = LOAD(e->rejected);
	w[LE_SP_BLOCKED] = LOAD(e->blocked);
	w[LE_SP_SUPPRESSED] = LOAD(e->rl.suppressed);
	w[LE_SP_LAST_ERROR] = (uint64_t)(int64_t)LOAD(e->last_error);
	w[LE_SP_BT_WRITTEN] = LOAD(sh->bt_written);
}

static void publish(le__shard *sh, uint64_t now_mono)
{
	uint64_t w[LE_SP_WORDS];

	fill(sh, w, le__self_cpu_ns());
	le__statpage_publish(&sh->page, w, now_mono);
}

int le__shard_page_open(le__shard *sh)
{
	char why[400];

	memset(&sh->page, 0, sizeof sh->page);
	if (!sh->store) /* no directory: a stream-only engine */
		return 0;
	int rc = le__statpage_open(&sh->page, sh->dir, sh->id,
	                           sh->e->cfg.file_mode, sh->e->cfg.flush_ms);
	if (rc < 0) {
		snprintf(why, sizeof why, "%s", le_errmsg());
		le__seterr("%s; the live page of shard %u is off", why, sh->id);
	}
	return rc;
}

void le__shard_page_start(le__shard *sh)
{
	if (sh->page.map)
		publish(sh, le__mono_ns());
}

void le__shard_page_tick(le__shard *sh, uint64_t now_mono)
{
	if (le__statpage_due(&sh->page, now_mono))
		publish(sh, now_mono);
}

void le__shard_page_close_all(le_engine *e)
{
	uint64_t w[LE_SP_WORDS];

	for (uint32_t i = 0; e->shards && i < e->nshards; i++) {
		le__shard *sh = &e->shards[i];
		if (!sh->page.map)
			continue;
		fill(sh, w, sh->cpu_ns);
		le__statpage_close(&sh->page, w);
	}
}
