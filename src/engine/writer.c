/*
 * writer.c -- one thread per shard: take published slots from the shard's
 * ring, hand them to the shard's sinks (sink.h), then give the ring space
 * and the budget back.  The loop knows nothing of what the sinks do.
 *
 * One loop turn:
 *
 *   gather    collect ready slots from rd into the batch (sequence
 *             number, timestamp in ns), CHUNK at a time, and put each
 *             chunk in every sink; until batch_size records or
 *             max_pending_bytes, or a sink takes fewer (it must commit
 *             first: a segment is full)
 *   commit?   when the batch is full, a sink is short, a le_flush waits,
 *             the oldest record is flush_ms old, or we stop: commit every
 *             sink, sync them (LE_SYNC_BATCH, or a flush waits), release
 *   periodic  the interval sync, the sinks' ticks (checkpoint, rotation
 *             by age), the clock's recalibration
 *   sleep     nothing to do: nap while busy, else futex-sleep on
 *             `sleeping` for at most flush_ms (producers wake us when the
 *             queue fills), or, idle for a while, for seconds (then any
 *             record wakes us): pace.c
 *
 * Syncs are asked of the shard's sync thread, or made here when it does
 * not run (sync.c, the writer's side).  While a dead process's queue is
 * written out at le_open (recovering), each slot is checked first
 * (deadq.c).
 *
 * Ring space is released only after every sink committed the records in
 * it, so a record leaves the queue only once it is in the files.
 */
#define _GNU_SOURCE
#include "engine/writer.h"

#include "engine/deadq.h"
#include "engine/pace.h"
#include "engine/shard_page.h"
#include "engine/flush.h"
#include "engine/wsync.h"
#include "store/store.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MS 1000000ull

/* Records collected between two puts: their slot headers are still in L1
 * when the sinks read them. */
#define CHUNK 128

/*
 * A deferred slot's descriptor, from the shard's SITES table: its
 * producer put it there before the slot (after a kill -9, the dead
 * process's table, kept for recovery).  A slot whose site is not there
 * (a damaged file) becomes a plain record that says so: sinks never see
 * a deferred record without its descriptor.  A producer puts the site
 * before its first slot, so while recovering a site not there is damage
 * (to SITES, or to the slot's site number): counted for le_open to report.
 */
static void find_site(le__shard *sh, le__rec *x, uint64_t pos)
{
	static const char lost[] = LE_SITE_LOST_TEXT;
	const char *why = "slot too short for a site number";
	uint32_t fb = 0;
	size_t dlen;

	x->site = 0;
	if (x->flags & LE_REC_FIELDS) {
		if (x->len < 4 || le__get32(x->payload) > x->len - 4)
			goto lost;
		fb = 4 + le__get32(x->payload);
	}
	if (x->len < 4 || fb > x->len - 4)
		goto lost;
	x->site = le__get32(x->payload + fb);
	x->dfb = fb;
	if (x->site < sh->sites.n && sh->sites.seen[x->site]) {
		/* checked before: the common case, no call */
		x->desc = sh->sites.seen[x->site];
		x->dlen = le__get16(x->desc);
		return;
	}
	x->desc = le__sitetab_get(&sh->sites, x->site, &dlen);
	if (!x->desc) {
		why = sh->sites.why;
		goto lost;
	}
	x->dlen = (uint32_t)dlen;
	return;
lost:
	if (sh->w.recovering)
		le__deadq_site(&sh->w.rq, pos, x->site, why);
	x->payload = (const unsigned char *)lost;
	x->len = sizeof lost - 1;
	x->flags &= ~(uint8_t)(LE_REC_DEFERRED | LE_REC_FIELDS);
	x->desc = NULL;
}

/* ---- collect ---- */

enum { G_MORE, G_FULL, G_SHORT };

static int batch_full(const le__shard *sh)
{
	const le__batch *b = &sh->batch;
	return b->n >= sh->e->batch || b->n >= b->cap ||
	       b->bytes >= sh->e->cfg.max_pending_bytes ||
	       b->slot_bytes >= sh->e->batch_payload;
}

static void add_rec(le__shard *sh, const void *payload, uint32_t len,
                    int level, uint32_t flags, uint64_t ts)
{
	le__batch *b = &sh->batch;

	if (b->n == 0)
		b->since = le__mono_ns();
	b->recs[b->n++] = (le__rec){.payload = payload, .len = len,
	                            .level = (uint8_t)level,
	                            .flags = (uint8_t)flags,
	                            .seq = sh->w.next_seq++, .ts = ts};
	b->bytes += LE_FRAME_FIXED_MAX + len;
}

/* A "N records dropped" marker, once per batch, for the records producers
 * dropped since the last one. */
static void add_marker(le__shard *sh)
{
	le__batch *b = &sh->batch;

	if (b->has_marker || batch_full(sh) ||
	    !atomic_load_explicit(&sh->sig.dropped_pending, memory_order_relaxed))
		return;
	uint64_t n = atomic_exchange_explicit(&sh->sig.dropped_pending, 0,
	                                      memory_order_relaxed);
	int len = snprintf(b->marker, sizeof b->marker,
	                   "%" PRIu64 " records dropped", n);
	uint64_t ts = le__now_ns();
	if (ts < sh->w.last_ts)
		ts = sh->w.last_ts;
	sh->w.last_ts = ts;
	b->has_marker = 1;
	add_rec(sh, b->marker, (uint32_t)len, LE_WARN, LE_REC_MARKER, ts);
}

/*
 * Collect ready slots into the batch, at most `max`.  @return G_MORE when
 * the ring has nothing more ready (or, at recovery, nothing that makes
 * sense), G_FULL when the batch is full.  The loop's state lives in locals
 * and is written back once.  `recovering` is a constant where it is
 * inlined (collect): the live loop carries none of recovery's checks.
 */
static inline __attribute__((always_inline)) int
collect_as(le__shard *sh, size_t max, const int recovering)
{
	le__ring *r = &sh->ring;
	le__batch *b = &sh->batch;
	const le__ring_geo g = le__ring_geometry(r);
	const uint64_t mask = g.lap - 1;
	const uint64_t max_bytes = sh->e->cfg.max_pending_bytes;
	const uint64_t max_payload = sh->e->batch_payload;
	uint64_t rd = sh->w.rd, seq = sh->w.next_seq, last_ts = sh->w.last_ts;
	size_t n = b->n, n0 = n;
	/* What the batch may still take, counted down: records, bytes of
	 * frames, payload bytes.  The loop goes on while each is at least
	 * 1, which one test of the sign of (each - 1) ORed together says:
	 * the three limits in one branch, and no limit kept in a register. */
	int64_t left_n = (int64_t)max,
	        left_b = (int64_t)max_bytes - (int64_t)b->bytes,
	        left_s = (int64_t)max_payload - (int64_t)b->slot_bytes;
	le__rec *const recs = b->recs;
	int why = G_FULL;
	uint64_t now_real;

	/* A dead process's clock converts its stamps, and nothing else: it
	 * is never checked against ours or rebased here (now is not its
	 * base, and its ratio may be a little off), or the same queue
	 * recovered at two moments would get two sets of times. */
	if (recovering)
		now_real = le__now_ns();
	else
		le__clock_check(&sh->w.clock, &now_real);
	/* Rebased (here or by the periodic recalibration): a process that
	 * recovers this queue after a kill -9 converts its stamps with the
	 * clock the QUEUE header holds. */
	if (!recovering && (sh->w.clock.base_tsc != sh->w.clock_put_tsc ||
	                    sh->w.clock.mult != sh->w.clock_put_mult))
		le__writer_note_clock(sh);
	const le__clock clk = sh->w.clock, lin = le__clock_lin(&clk);
	/* the level's bits of a slot's level byte: a version 2 queue keeps
	 * its check in the rest (queue.h), which le__deadq_slot checks */
	const uint8_t lvmask = r->version >= 2 ? LE_SLOT_LEVEL_MASK : 0xffu;

	while (((left_n - 1) | (left_b - 1) | (left_s - 1)) >= 0) {
		le__slot *sl = NULL; /* set unless LE_PEEK_EMPTY */
		uint32_t sbytes = 0;
		int k = le__ring_peek_geo(&g, &rd, &sl, &sbytes);
		if (recovering) {
			/* damaged slots, and those written already */
			int v = le__deadq_slot(sh, &rd, k, sl, sbytes, seq);
			if (v > 0)
				continue;
			if (v < 0) {
				why = G_MORE;
				break;
			}
		} else if (k != LE_PEEK_RECORD) {
			why = G_MORE;
			break;
		}
		uint32_t plen = sl->len;
		uint8_t level = sl->level & lvmask;
		if (plen > sbytes - LE_SLOT_HDR || level > LE_FATAL ||
		    (sl->flags & ~LE_SLOT_KNOWN_FLAGS)) {
			/* A length its slot cannot hold, a level or flags no
			 * producer writes: the walk stops here (a live queue
			 * never holds one; a damaged file is le__deadq_slot's). */
			why = G_MORE;
			break;
		}
		/* The producer wrote these lines on another core: ask for the
		 * next ones early (the hardware prefetcher stops at pages). */
		const unsigned char *ahead = g.data + ((rd + 1024) & mask);
		__builtin_prefetch(ahead);
		__builtin_prefetch(ahead + 64); /* never faults, even past
		                                   the ring's end */
		/* Recorded so that recovery after a kill -9 between the sinks'
		 * commit and the release can tell this slot is already in. */
		sl->seq = seq;
		/* Monotonic in a shard, and not from a jumped counter
		 * (clock.h).  A stamp past the reading may only mean this
		 * pass has been running (preempted, a long batch): read the
		 * clock again before calling it a jump, or records taken
		 * since would be dated to the pass's start. */
		uint64_t ts = le__clock_ns_lin(&lin, sl->ts);
		if (ts > now_real + LE_CLOCK_SLIP_NS)
			now_real = le__now_ns();
		if (recovering)
			le__deadq_time(&sh->w.rq, rd, ts, now_real, last_ts);
		ts = le__ts_within(ts, last_ts, now_real);
		last_ts = ts;
		le__statpage_sample(&sh->page, sl, &clk, ts);
		if (n == 0) {
			/* The batch is as old as its first record: a sleeping
			 * writer may find it most of flush_ms after it came,
			 * and must not give it flush_ms more. */
			uint64_t age = now_real > ts ? now_real - ts : 0;
			uint64_t mono = le__mono_ns(), lim = sh->e->cfg.flush_ms * MS;
			if (age > lim)
				age = lim;
			b->since = mono > age ? mono - age : 0;
		}
		/* Field by field: a deferred record's fields are find_site's,
		 * and no sink reads them in a record without the flag. */
		le__rec *x = &recs[n++];
		x->payload = (const unsigned char *)(sl + 1);
		x->len = plen;
		x->level = level;
		x->flags = sl->flags;
		x->seq = seq++;
		x->ts = ts;
		if (x->flags & LE_REC_DEFERRED)
			find_site(sh, x, rd);
		left_n--;
		left_b -= LE_FRAME_FIXED_MAX + plen;
		b->by_level[level]++; /* level <= LE_FATAL: checked above */
		left_s -= plen;
		rd += sbytes;
	}
	b->n = n;
	b->bytes = max_bytes - (uint64_t)left_b;
	b->slots += (uint32_t)(n - n0); /* every record here is a slot */
	b->slot_bytes = max_payload - (uint64_t)left_s;
	sh->w.rd = rd;
	sh->w.next_seq = seq;
	sh->w.last_ts = last_ts;
	return why;
}

static int collect(le__shard *sh, size_t max)
{
	return sh->w.recovering ? collect_as(sh, max, 1) : collect_as(sh, max, 0);
}

/* Put what each sink has not taken yet.  @return 1 when every sink has
 * taken the whole batch. */
static int feed(le__shard *sh)
{
	le__batch *b = &sh->batch;
	int all = 1;

	for (unsigned i = 0; i < sh->nsinks; i++) {
		if (b->taken[i] < b->n) {
			le__sink *s = sh->sinks[i];
			b->taken[i] += s->ops->put(s, b->recs + b->taken[i],
			                           b->n - b->taken[i]);
			all &= b->taken[i] == b->n;
		}
	}
	return all;
}

static int gather(le__shard *sh)
{
	le__batch *b = &sh->batch;

	if (!feed(sh))
		return G_SHORT;
	add_marker(sh);
	for (;;) {
		size_t room = sh->e->batch > b->n ? sh->e->batch - b->n : 0;
		if (room > b->cap - b->n)
			room = b->cap - b->n;
		int why = collect(sh, room < CHUNK ? room : CHUNK);
		if (!feed(sh))
			return G_SHORT;
		if (why == G_MORE)
			return G_MORE;
		if (batch_full(sh))
			return G_FULL;
	}
}

/* ---- memory that follows use (a ring that trims: queue.h) ---- */

/* Return the pages of what is released now?  While the ring is lightly
 * used and far from full: the producers reach those pages again only a
 * lap later, and the writer faults them in before (ring_memory). */
static int trim_now(le__shard *sh)
{
	const le__ring *r = &sh->ring;

	return r->trims && sh->w.light &&
	       atomic_load_explicit(r->head, memory_order_relaxed) - sh->w.rd <
	               r->size / 2;
}

/* Ring bytes between virtual positions a <= b: the gap at the end of
 * each lap crossed is not ring. */
static uint64_t ring_moved(const le__ring *r, uint64_t a, uint64_t b)
{
	uint64_t laps = (b >> r->lap_shift) - (a >> r->lap_shift);
	return b - a - laps * (r->lap - r->size);
}

/* Once a loop turn: decide whether the ring is lightly used (its tail
 * went round less than once in the last second; busy at once when it goes
 * at that rate or more over 100 ms), and fault in pages before the
 * producers get there: `ahead` bytes past head while it is light (no
 * producer meets a returned page in the steady state), the whole ring
 * when it is not. */
static void ring_memory(le__shard *sh, uint64_t now)
{
	le__ring *r = &sh->ring;
	le__wstate *w = &sh->w;

	if (!r->trims)
		return;
	uint64_t tail = atomic_load_explicit(r->tail, memory_order_relaxed);
	uint64_t moved = ring_moved(r, w->use_tail, tail);
	uint64_t dt = now - w->use_mono;
	if (dt >= 1000 * MS) {
		w->light = moved < r->size;
		w->use_mono = now;
		w->use_tail = tail;
	} else if ((unsigned __int128)moved * (1000 * MS) >=
	           (unsigned __int128)r->size * (dt > 100 * MS ? dt : 100 * MS)) {
		w->light = 0;
	}
	uint64_t head = atomic_load_explicit(r->head, memory_order_relaxed);
	uint64_t want = head + (w->light ? r->ahead : r->lap);
	if (want > w->populated) {
		le__ring_populate(r, w->populated > head ? w->populated : head,
		                  want);
		w->populated = want;
	}
}

/* A file ring's blocks (queue.h, backed): doubled once head is past half
 * of them, here rather than in a producer's call, so that producers
 * seldom meet the edge; after a failure (a full disk) tried again each
 * loop turn. */
static void ring_blocks(le__shard *sh)
{
	le__ring *r = &sh->ring;
	uint64_t b = atomic_load_explicit(&r->backed, memory_order_relaxed);

	if (b < r->size &&
	    (atomic_load_explicit(r->head, memory_order_relaxed) > b / 2 ||
	     atomic_load_explicit(&r->grow_failed, memory_order_relaxed)))
		le__ring_grow(r, b + 1, 1);
}

/* ---- commit, sync, release ---- */

/* The batch's slots by level into the shard's counters, with consumed:
 * the writer counts them here, once a batch, so that the producer's
 * le_write pays nothing for them.  Relaxed: le_stats_get and the live
 * page read each counter alone, as a snapshot one batch out of step. */
static void add_levels(le__shard *sh)
{
	const le__batch *b = &sh->batch;

	for (int k = 0; k <= LE_FATAL; k++)
		if (b->by_level[k])
			atomic_fetch_add_explicit(&sh->prog.by_level[k],
			                          b->by_level[k],
			                          memory_order_relaxed);
}

static void release(le__shard *sh)
{
	le_engine *e = sh->e;
	le__batch *b = &sh->batch;
	uint64_t tail = atomic_load_explicit(sh->ring.tail,
	                                     memory_order_relaxed);

	if (sh->w.rd != tail) {
		int trim = trim_now(sh);
		le__ring_mark(&sh->ring, sh->w.rd, sh->w.next_seq);
		le__ring_release(&sh->ring, tail, sh->w.rd, trim);
		/* those pages come round again from tail + lap on: faulted
		 * in anew before then */
		if (trim && sh->w.populated > tail + sh->ring.lap)
			sh->w.populated = tail + sh->ring.lap;
	}
	if (sh->w.recovering) {
		/* A dead process's records: never in our budget. */
		atomic_fetch_add(&sh->prog.recovered, b->slots);
	} else if (b->slots) {
		/* Count them consumed before they leave the queue's count, so
		 * a le_stats_get in between never sees them in neither. */
		atomic_fetch_add_explicit(&sh->prog.consumed, b->slots,
		                          memory_order_release);
		add_levels(sh);
		le__budget_give(&e->budget, b->slots, b->slot_bytes);
		if (atomic_load(&e->block_waiters)) {
			atomic_fetch_add(&e->space_seq, 1);
			le__futex_wake(&e->space_seq, INT_MAX);
		}
	}
	b->n = 0;
	memset(b->taken, 0, sizeof b->taken);
	b->slots = 0;
	memset(b->by_level, 0, sizeof b->by_level);
	b->slot_bytes = b->bytes = 0;
	b->has_marker = 0;
	atomic_store(&sh->prog.done_pos, sh->w.rd);
	if (e->cfg.durability == LE_SYNC_NONE)
		atomic_store(&sh->prog.durable_pos, sh->w.rd);
	le__flush_signal(sh);
}

/* A le_flush waits for records before flush_req, and all of them are
 * collected: they must be committed and synced now. */
static int flush_due(le__shard *sh)
{
	uint64_t want = atomic_load(&sh->prog.flush_req);
	return want > le__sync_covered(sh) && sh->w.rd >= want;
}

/* Commit the batch in every sink (putting again what a short sink could
 * not take before its commit), then release it.  @return 0, or a commit's
 * error: nothing is released, and the batch is tried again later. */
static int commit_batch(le__shard *sh)
{
	le__batch *b = &sh->batch;
	uint64_t lo = atomic_load(&sh->prog.done_pos);

	le__sync_note(sh);
	for (int stalled = 0;;) {
		/* Every sink commits, even after another failed: a full
		 * disk holds back the store, not the stream's lines. */
		int rc = 0;
		for (unsigned i = 0; i < sh->nsinks; i++) {
			le__sink *s = sh->sinks[i];
			int r = s->ops->commit(s);
			if (r < 0 && !rc)
				rc = r;
		}
		if (rc < 0) {
			le__fail_sinks(sh, lo, sh->w.rd);
			return rc;
		}
		le__fail_sinks(sh, lo, sh->w.rd);
		size_t before = 0, after = 0;
		for (unsigned i = 0; i < sh->nsinks; i++)
			before += b->taken[i];
		if (before == (size_t)sh->nsinks * b->n)
			break; /* every sink took and committed every record */
		feed(sh);
		for (unsigned i = 0; i < sh->nsinks; i++)
			after += b->taken[i];
		/* A sink that takes nothing after a good commit cannot make
		 * progress now (its next segment could not be made): wait. */
		if (after == before && ++stalled > 1)
			return LE_EIO;
	}
	int sync = sh->e->cfg.durability == LE_SYNC_BATCH ||
	           (sh->e->cfg.durability != LE_SYNC_NONE && flush_due(sh));
	le__statpage_committed(&sh->page);
	release(sh);
	if (sync)
		le__sync_now(sh);
	return 0;
}

int le__writer_pass(le__shard *sh)
{
	uint64_t rd0 = sh->w.rd;
	int why;

	do {
		why = gather(sh);
		if (sh->batch.n) {
			int rc = commit_batch(sh);
			if (rc < 0)
				return rc;
		}
	} while (why == G_SHORT);
	if (sh->w.rd != rd0) {
		release(sh); /* skipped slots move the ring too */
		return 1;
	}
	return 0;
}

/* ---- the loop ---- */

/* Does the batch go out now? */
static int due(le__shard *sh, int why, uint64_t now)
{
	if (why != G_MORE || atomic_load(&sh->e->stopping) || flush_due(sh))
		return 1;
	return sh->batch.n &&
	       now - sh->batch.since >= sh->e->cfg.flush_ms * MS;
}

static void periodic(le__shard *sh, uint64_t now)
{
	const le_config *c = &sh->e->cfg;

	le__shard_page_tick(sh, now);
	ring_memory(sh, now);
	ring_blocks(sh);
	if (now - sh->w.last_recal_mono >= 1000 * MS) {
		sh->w.last_recal_mono = now;
		le__clock_recal(&sh->w.clock);
	}
	if (c->durability == LE_SYNC_INTERVAL &&
	    now - sh->w.last_sync_mono >= c->sync_ms * MS &&
	    atomic_load(&sh->prog.done_pos) > le__sync_covered(sh))
		le__sync_now(sh);
	le__sync_note(sh);
	for (unsigned i = 0; i < sh->nsinks; i++)
		if (sh->sinks[i]->ops->tick)
			sh->sinks[i]->ops->tick(sh->sinks[i], now);
	/* A tick's rotation seals a segment and syncs it: a failure there is
	 * logged now, before durable_pos can pass the records it held (and
	 * not with the range of whatever batch comes next). */
	uint64_t done = atomic_load(&sh->prog.done_pos);
	le__fail_sinks(sh, done, done);
}

/* Close: everything queued is committed (retrying a failing disk for a
 * while), then the sinks close (the store syncs and checkpoints). */
static void drain(le__shard *sh)
{
	uint64_t start = le__mono_ns(), give_up = start + 2000 * MS;

	for (;;) {
		uint64_t rd0 = sh->w.rd;
		gather(sh);
		if (sh->w.rd != rd0) {
			/* Moving: stuck only from here.  A slow disk (a queue
			 * that takes seconds to write) is not a dead one. */
			start = le__mono_ns();
			give_up = start + 2000 * MS;
		}
		if (sh->batch.n) {
			if (commit_batch(sh) < 0) {
				if (le__mono_ns() > give_up)
					break;
				usleep(10000);
			}
			continue;
		}
		if (sh->w.rd == atomic_load(sh->ring.head))
			break;
		uint64_t now = le__mono_ns();
		if (now > give_up)
			break; /* a producer never published: misuse */
		le__pace_stuck(start, now);
	}
	uint64_t lo = atomic_load(&sh->prog.done_pos);
	if (sh->batch.n || sh->w.rd != atomic_load(sh->ring.head)) {
		/* The sinks would not take them: count them lost, each sink
		 * for what it took and for what it never saw. */
		le__batch *b = &sh->batch;
		uint64_t walked = 0;
		uint32_t bytes;
		le__slot *s;
		while (le__ring_peek(&sh->ring, &sh->w.rd, &s, &bytes) ==
		       LE_PEEK_RECORD) {
			walked++;
			b->slot_bytes += s->len;
			sh->w.rd += bytes;
		}
		b->slots += (uint32_t)walked;
		for (unsigned i = 0; i < sh->nsinks; i++) {
			uint64_t unseen = walked;
			for (size_t k = b->taken[i]; k < b->n; k++)
				unseen += !(b->recs[k].flags & LE_REC_MARKER);
			sh->sinks[i]->ops->drop(sh->sinks[i], unseen);
		}
		le__fail_sinks(sh, lo, sh->w.rd);
		release(sh);
	}
	/* Every sync asked, and every sealed file, done; the store's files
	 * are its own again. */
	if (sh->store)
		le__store_sync_stop(sh->store, &sh->syncer);
	lo = atomic_load(&sh->prog.durable_pos);
	for (unsigned i = 0; i < sh->nsinks; i++)
		sh->sinks[i]->ops->close(sh->sinks[i]);
	le__fail_sinks(sh, lo, sh->w.rd);
	atomic_store(&sh->prog.durable_pos, sh->w.rd);
	le__flush_signal(sh);
}

void le__writer_restart(le__shard *sh)
{
	le__progress *p = &sh->prog;

	/* Positions may start again at 0 (a renewed ring): failures logged
	 * in the old ones (recovery's, reported by le_open) are forgotten. */
	memset(p->fails, 0, sizeof p->fails);
	p->lost_rc = 0;
	atomic_store(&p->fail_hi, 0);
	sh->w.rd = atomic_load(sh->ring.tail);
	atomic_store(&sh->prog.done_pos, sh->w.rd);
	atomic_store(&sh->prog.durable_pos, sh->w.rd);
	atomic_store(&sh->prog.flush_req, sh->w.rd);
}

void le__writer_note_clock(le__shard *sh)
{
	le__ring_put_clock(&sh->ring, &sh->w.clock);
	sh->w.clock_put_tsc = sh->w.clock.base_tsc;
	sh->w.clock_put_mult = sh->w.clock.mult;
}

int le__writer_init(le__shard *sh)
{
	le__batch *b = &sh->batch;

	/* batch_size records and one marker, never more than the queue */
	b->cap = (size_t)sh->e->batch + 1;
	/* zeroed: collect leaves a plain record's deferred fields as they
	 * were (rec.h), never indeterminate */
	b->recs = calloc(b->cap, sizeof *b->recs);
	return b->recs ? 0 : LE_ENOMEM;
}

void le__writer_free(le__shard *sh)
{
	free(sh->batch.recs);
	sh->batch.recs = NULL;
}

void *le__writer_main(void *arg)
{
	le__shard *sh = arg;
	le_engine *e = sh->e;
	le__wstate *w = &sh->w;

	w->last_sync_mono = w->last_recal_mono = w->last_collect_mono =
		w->use_mono = w->active_mono = le__mono_ns();
	/* light until the producers show otherwise (ring_memory) */
	w->use_tail = atomic_load(sh->ring.tail);
	w->light = 1;
	le__shard_page_start(sh);
	/* Syncs on a thread of their own; without it (it could not start),
	 * on this one, as with no store. */
	if (sh->store && e->cfg.durability != LE_SYNC_NONE)
		le__store_sync_start(sh->store, &sh->syncer, &sh->prog, sh->id);
	while (!atomic_load(&e->stopping)) {
		uint64_t rd0 = w->rd;
		size_t n0 = sh->batch.n; /* gather adds, never commits */
		int why = gather(sh);
		uint64_t now = le__mono_ns();
		le__pace_pass(sh, why != G_MORE, w->rd - rd0, sh->batch.n - n0,
		              now);
		if (due(sh, why, now)) {
			if (sh->batch.n && commit_batch(sh) < 0) {
				w->backoff = w->backoff ? w->backoff * 2 : 10 * MS;
				if (w->backoff > 250 * MS)
					w->backoff = 250 * MS;
				usleep((useconds_t)(w->backoff / 1000));
				continue;
			}
			w->backoff = 0;
		}
		if (!sh->batch.n) {
			if (w->rd != atomic_load_explicit(sh->ring.tail,
			                                  memory_order_relaxed))
				release(sh); /* only padding was consumed */
			if (flush_due(sh))
				le__sync_now(sh);
		}
		periodic(sh, now);
		if (why == G_MORE)
			le__pace_nap(sh, now);
	}
	drain(sh);
	sh->cpu_ns = le__self_cpu_ns();
	return NULL;
}
