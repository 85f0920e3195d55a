/*
 * pace.c -- how a shard's writer waits when nothing is ready to take
 * (writer.c's loop calls it after each pass): whether records arrive fast
 * enough to nap rather than sleep, how long, and how it waits for a slot
 * that was claimed and has not come.  The aim in each case: no futex call
 * in a producer's le_write for a writer that is about to look again.
 */
#define _GNU_SOURCE
#include "engine/ratelimit.h"
#include "engine/pace.h"
#include "engine/shard_page.h"
#include "engine/wsync.h"

#include <sched.h>
#include <time.h>

#define MS 1000000ull

/* Anything for the writer to do right now? */
static int has_work(le__shard *sh)
{
	le__slot *s;
	uint32_t bytes;
	uint64_t rd = sh->w.rd;

	return le__ring_peek(&sh->ring, &rd, &s, &bytes) == LE_PEEK_RECORD ||
	       atomic_load(&sh->e->stopping) ||
	       atomic_load(&sh->sig.dropped_pending) ||
	       atomic_load(&sh->prog.flush_req) > le__sync_covered(sh);
}

/* How long a writer that cannot move on yields before it naps. */
#define LE_STUCK_SPIN_NS (1000u * 1000u)

/* Wait for a slot that has not come, stuck since `since`: yield while
 * that is recent (a producer between two instructions), then a
 * millisecond at a time without a CPU (a producer stopped there, or a
 * slot written over), and not as a sleeper (`sleeping` stays 0), so that
 * producers filling the queue behind it make no futex call to wake it. */
void le__pace_stuck(uint64_t since, uint64_t now)
{
	struct timespec ms = {0, 1000000};

	if (now - since < LE_STUCK_SPIN_NS)
		sched_yield();
	else
		nanosleep(&ms, NULL);
}

/* 64 ring bytes a microsecond: ~330,000 records/s of 128 bytes. */
#define BUSY_BYTES_PER_US 64u
/* Or 330 records a millisecond, whatever their size.  A sleeping writer
 * costs the producers one futex call per batch, in the le_write that
 * wakes it: at these rates that is hundreds of calls a second, each as
 * long as tens of thousands of ordinary ones; a napping writer pays its
 * own wake-ups instead, off the producers' threads. */
#define BUSY_RECORDS_PER_MS 330u

/*
 * A busy writer's nap: until the records its batch still lacks have come
 * at the rate the last pass found (at least LE_BUSY_NAP_NS, at most
 * LE_BUSY_NAP_MAX_NS), or less when the producers would fill a quarter of
 * the ring sooner.  Each pass the writer gives back costs a producer one
 * or two cache misses (the budget and tail words come back from the
 * writer's core), so the number of passes decides how many calls are
 * slow: one per batch is as few as a writer that sleeps until woken.
 * What is queued when the nap ends is about a batch, half of the queue's
 * half-full mark (engine.c, urgent_rec), so a steady stream makes no
 * futex call.
 */
#define LE_BUSY_NAP_NS (200u * 1000u)
#define LE_BUSY_NAP_MAX_NS (2u * 1000u * 1000u)

/* The nap for the rate of the pass that just ended: `bytes` of ring in
 * `recs` records consumed in `dt` ns. */
static uint64_t nap_for(const le__shard *sh, uint64_t bytes, uint64_t recs,
                        uint64_t dt)
{
	if (!bytes || !recs)
		return LE_BUSY_NAP_NS;
	/* dt at most a second: no overflow */
	uint64_t s = dt < 1000 * MS ? dt : 1000 * MS;
	uint64_t lack = sh->e->batch > sh->batch.n ? sh->e->batch - sh->batch.n
	                                           : 1;
	unsigned __int128 batch = (unsigned __int128)s * lack / recs;
	uint64_t t = batch < LE_BUSY_NAP_NS       ? LE_BUSY_NAP_NS
	             : batch > LE_BUSY_NAP_MAX_NS ? LE_BUSY_NAP_MAX_NS
	                                          : (uint64_t)batch;
	unsigned __int128 ring = (unsigned __int128)s * (sh->ring.size / 4) /
	                         bytes;
	return ring < t ? (uint64_t)ring : t;
}

void le__pace_pass(le__shard *sh, int full, uint64_t bytes, uint64_t recs,
                   uint64_t now)
{
	le__wstate *w = &sh->w;
	uint64_t dt = now - w->last_collect_mono;

	if (bytes || recs)
		w->active_mono = now;

	/* Busy: this pass found at least BUSY_BYTES_PER_US ring bytes per
	 * microsecond, or BUSY_RECORDS_PER_MS records per millisecond,
	 * since the last one (or filled a batch). */
	w->busy = full || bytes * 1000 >= dt * BUSY_BYTES_PER_US ||
	          recs * 1000000 >= dt * BUSY_RECORDS_PER_MS;
	w->nap_ns = nap_for(sh, bytes, recs, dt);
	w->last_collect_mono = now;
	le__rl_tick(now); /* the _every macros' clock */
	if (sh->id == 0)
		le__rl_sweep(sh->e); /* their silent sites' summaries */
}

/*
 * Idle.  A writer that sleeps flush_ms at a time wakes 20 times a second
 * with nothing to do.  Once a shard has been quiet long enough for every
 * timer a record starts to have fired (the batch's flush_ms, the interval
 * sync, the checkpoint: the longest of them, twice flush_ms more), the
 * writer sleeps up to LE_IDLE_MS, or a second when a setting acts on age
 * (rotation, retention, archiving: "checked every second"), and every
 * record wakes it (the shard's idle word: wake_for in submit.c), so a
 * record still waits at most flush_ms.  Its live page says so: published
 * with that period before the sleep, it reads as stale only after three.
 */
#define LE_IDLE_MS 10000u

static uint64_t idle_after(const le_config *c)
{
	uint64_t ms = c->checkpoint_ms > 1000 ? c->checkpoint_ms : 1000;
	if (c->durability == LE_SYNC_INTERVAL && c->sync_ms > ms)
		ms = c->sync_ms;
	return (ms + 2ull * c->flush_ms) * MS;
}

static uint64_t idle_sleep(const le_config *c)
{
	int by_age = c->segment_max_age_ms || c->retention_age_ms ||
	             c->archive_after_ms || c->archive_keep_segments;
	return (by_age ? 1000ull : LE_IDLE_MS) * MS;
}

static int quiet(le__shard *sh, uint64_t now)
{
	const le__wstate *w = &sh->w;

	/* head == rd: a slot claimed and not yet published (its producer
	 * preempted, or faulting on its payload) is waited for by the
	 * ordinary sleep, flush_ms at a time; sleep_idle would return at
	 * once (head != rd) and the loop would spin until the publish.
	 * relaxed: sleep_idle looks again, seq_cst. */
	return !sh->batch.n && !w->busy && !w->backoff &&
	       atomic_load_explicit(sh->ring.head, memory_order_relaxed) ==
	               w->rd &&
	       atomic_load(&sh->prog.done_pos) <= le__sync_covered(sh) &&
	       now - w->active_mono >= idle_after(&sh->e->cfg);
}

/* Sleep until a record, a flush, a drop or a close wakes us, or `ns`.
 * idle before the look at head, both seq_cst (see wake_for): a producer
 * whose claim this look misses sees idle and wakes us after publishing;
 * `sleeping` then orders its wake-up against our sleep as ever. */
static void sleep_idle(le__shard *sh, uint64_t ns)
{
	atomic_store(&sh->idle, 1);
	if (atomic_load(sh->ring.head) == sh->w.rd) {
		sh->w.page_period = sh->page.period_ns;
		sh->page.period_ns = ns;
		le__shard_page_start(sh);
		atomic_exchange_explicit(&sh->sig.sleeping, LE_ASLEEP,
		                         memory_order_acq_rel);
		/* after idle and the announcement: a window noted since we
		 * chose to sleep is seen here, or its note wakes us
		 * (ratelimit.c, note_due) */
		uint64_t rl = sh->id == 0 ? le__rl_wait(sh->e, le__mono_ns())
		                          : UINT64_MAX;
		if (!has_work(sh))
			le__futex_wait(&sh->sig.sleeping, LE_ASLEEP,
			               rl < ns ? rl : ns);
		atomic_store(&sh->sig.sleeping, 0);
		sh->page.period_ns = sh->w.page_period;
	}
	/* relaxed: a producer that still sees 1 only wakes us once more */
	atomic_store_explicit(&sh->idle, 0, memory_order_relaxed);
}

void le__pace_nap(le__shard *sh, uint64_t now)
{
	le_engine *e = sh->e;
	le__wstate *w = &sh->w;
	uint64_t wait = e->cfg.flush_ms * MS;

	if (sh->batch.n) {
		uint64_t age = now - sh->batch.since;
		wait = age >= wait ? 0 : wait - age;
	}
	if (sh->id == 0) {
		/* the rate limiter's sweep (le__pace_pass) is due then */
		uint64_t rl = le__rl_wait(e, now);
		if (rl < wait)
			wait = rl;
	}
	/* The interval sync is this loop's too (periodic): never sleep past
	 * it while something written waits for it. */
	if (e->cfg.durability == LE_SYNC_INTERVAL &&
	    atomic_load(&sh->prog.done_pos) > le__sync_covered(sh)) {
		uint64_t at = w->last_sync_mono + e->cfg.sync_ms * MS;
		uint64_t left = at > now ? at - now : 0;
		if (left < wait)
			wait = left;
	}
	if (atomic_load(&sh->prog.flush_req) > le__sync_covered(sh)) {
		/* A le_flush waits, and a slot before its position is
		 * claimed but not published (flush_due would have fired
		 * otherwise): its producer is between two instructions, not
		 * worth a sleep.  Unless that lasts (a producer thread stopped
		 * between the two, or a slot whose words were written over):
		 * then look again every millisecond, without a CPU. */
		if (!w->stuck_since || w->stuck_rd != w->rd) {
			w->stuck_rd = w->rd;
			w->stuck_since = now;
		}
		le__pace_stuck(w->stuck_since, now);
		return;
	}
	w->stuck_since = 0;
	if (wait == 0)
		return;
	/* Producers drop (the queue is full) and the batch already carries
	 * its marker: the drops since then go in the next batch's, and there
	 * is nothing to take before this one is due.  Neither look at
	 * dropped_pending again and again (has_work: a spin for up to
	 * flush_ms), nor sleep as a sleeper (each drop would cost its
	 * producer a futex call to wake us): a millisecond at a time,
	 * without saying so, as le__pace_stuck does. */
	if (sh->batch.has_marker &&
	    atomic_load_explicit(&sh->sig.dropped_pending, memory_order_relaxed)) {
		struct timespec t = {0, (long)(wait < MS ? wait : MS)};
		nanosleep(&t, NULL);
		return;
	}
	/* While records arrive fast, the next ones are microseconds away:
	 * nap (nap_for) as LE_NAPPING, which a producer's once-a-batch
	 * wake-up leaves alone (only a queue half full or full, a le_flush or
	 * a close ends it), and look again.  Not a
	 * spin: a writer polling the ring's next slot takes the line the
	 * producer writes next, which then has to come back to its core for
	 * every record.  Nor a sleep the producers end: each wake-up is a
	 * futex call in a producer's le_write, once a batch.  A trickle (an
	 * access log) sleeps until woken or flush_ms: napping there costs
	 * wake-ups for nothing. */
	if (w->busy) {
		uint64_t n = wait < w->nap_ns ? wait : w->nap_ns;
		if (n >= 1000) {
			/* RMW, as a sleeper's: a le_flush or a close either
			 * finds LE_NAPPING and wakes us, or what it stored
			 * before is seen here (a drop, at worst, the nap
			 * later). */
			atomic_exchange_explicit(&sh->sig.sleeping, LE_NAPPING,
			                         memory_order_acq_rel);
			if (atomic_load(&sh->prog.flush_req) <=
			            le__sync_covered(sh) &&
			    !atomic_load(&sh->e->stopping) &&
			    !atomic_load_explicit(&sh->sig.dropped_pending,
			                          memory_order_relaxed))
				le__futex_wait(&sh->sig.sleeping, LE_NAPPING, n);
			atomic_store(&sh->sig.sleeping, 0);
		}
		return;
	}
	if (quiet(sh, now)) {
		sleep_idle(sh, idle_sleep(&e->cfg));
		return;
	}
	/* RMW: pairs with the RMW in le__wake_after (shard.h). */
	atomic_exchange_explicit(&sh->sig.sleeping, LE_ASLEEP,
	                         memory_order_acq_rel);
	if (!has_work(sh))
		le__futex_wait(&sh->sig.sleeping, LE_ASLEEP, wait);
	atomic_store(&sh->sig.sleeping, 0);
}
