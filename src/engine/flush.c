/*
 * flush.c -- le_flush, and the failures it reports.
 *
 * A flush's records are, in each shard, those at ring positions
 * [durable_pos when it was called, head when it was called): the ones it
 * waits for.  It asks the writers to write and sync up to head, waits until
 * durable_pos gets there, then reports a failure (le__fail,
 * store/progress.h) that touched that range: records lost, or written and
 * then a sync failed.
 * Write errors that were retried and got through are not failures of
 * those records (le_stats counts them).
 *
 * Lost wake-ups.  The writer stores durable_pos, then loads flush_waiters;
 * a flusher increments flush_waiters, then loads durable_pos.  With every
 * one of the four seq_cst, at least one of them sees the other's store: the
 * writer signals, or the flusher finds its position reached.  The flusher
 * checks under flush_mu and the writer signals under it, so a signal
 * cannot fall between the check and the wait.
 */
#define _GNU_SOURCE
#include "engine/flush.h"

#include "engine/shard.h"
#include "engine/dflt.h"
#include "sink/kinds.h"

#include <errno.h>
#include <time.h>

/* Log the faults the shard's sinks hold (sink.h), and clear them:
 * records a sink says it lost, in [lo, hi), or holds in doubt after a
 * failed sync: those from durable_pos on (everything committed since the
 * last sync the writer saw succeed; a segment's seal may have synced some
 * of them since, so this may name more records than are in doubt, never
 * fewer). */
void le__fail_sinks(le__shard *sh, uint64_t lo, uint64_t hi)
{
	uint64_t synced = atomic_load(&sh->prog.durable_pos);

	for (unsigned i = 0; i < sh->nsinks; i++) {
		le__sink *s = sh->sinks[i];
		if (s->fault) {
			le__progress_fail(&sh->prog, lo, hi, s->fault);
			s->fault = 0;
		}
		if (s->sync_fault) {
			le__progress_fail(&sh->prog, synced < lo ? synced : lo, hi,
			             s->sync_fault);
			s->sync_fault = 0;
		}
	}
}

void le__flush_signal(le__shard *sh)
{
	le__flush_wake(sh->e);
}

void le__flush_wake(void *engine)
{
	le_engine *e = engine;

	/* seq_cst: the store of the position before this load, against
	 * le_flush's increment before its load of the position. */
	if (atomic_load(&e->flush_waiters)) {
		pthread_mutex_lock(&e->flush_mu);
		pthread_cond_broadcast(&e->flush_cv);
		pthread_mutex_unlock(&e->flush_mu);
	}
}

/* The first failure of sh touching positions [lo, hi), marked reported;
 * or an error when failures were evicted from the log since gen `from`
 * (some may have been ours).  Called once durable_pos has passed the
 * records (or the wait timed out): a failure of theirs was logged before
 * that store of durable_pos, so it is seen here.  @return 0 or its error. */
static int fail_take(le__shard *sh, uint64_t from, uint64_t lo, uint64_t hi)
{
	le__progress *p = &sh->prog;
	int rc = 0;

	if (atomic_load(&p->fail_hi) <= lo)
		return 0; /* the common case: no lock */
	pthread_mutex_lock(&p->fail_mu);
	uint64_t gen = atomic_load(&p->fail_gen);
	/* The log keeps gens gen - LE_FAILS + 1 .. gen: one from `from` on
	 * may be gone, and may have been ours.  Say so, conservatively. */
	if (gen - from >= LE_FAILS) {
		rc = p->lost_rc ? p->lost_rc : LE_EIO;
		p->lost_rc = 0;
	}
	for (int i = 0; i < LE_FAILS; i++) {
		le__fail *f = &p->fails[i];
		if (f->gen && f->lo < hi && f->hi > lo) {
			if (!rc)
				rc = f->rc;
			f->reported = 1;
		}
	}
	pthread_mutex_unlock(&p->fail_mu);
	return rc;
}

int le__fail_unreported(le__shard *sh)
{
	le__progress *p = &sh->prog;
	int rc;

	pthread_mutex_lock(&p->fail_mu);
	rc = p->lost_rc;
	for (int i = 0; i < LE_FAILS && !rc; i++)
		if (p->fails[i].gen && !p->fails[i].reported)
			rc = p->fails[i].rc;
	pthread_mutex_unlock(&p->fail_mu);
	return rc;
}

static int flush_done(le_engine *e, const uint64_t *target)
{
	for (uint32_t i = 0; i < e->nshards; i++)
		if (atomic_load(&e->shards[i].prog.durable_pos) < target[i])
			return 0;
	return 1;
}

/* What is left of the caller's time at deadline dl (timeout_ms < 0: no
 * limit, -1).  The lines of the flush's records were handed to the line
 * outputs (stream, syslog) before durable_pos passed them: they are
 * waited for in that time. */
static int ms_left(const struct timespec *dl, int timeout_ms)
{
	struct timespec now;
	if (timeout_ms < 0)
		return -1;
	clock_gettime(CLOCK_MONOTONIC, &now);
	long long ms = (long long)(dl->tv_sec - now.tv_sec) * 1000 +
	               (dl->tv_nsec - now.tv_nsec) / 1000000;
	return ms > 0 ? (int)ms : 0;
}

int le_flush(le_engine *e, int timeout_ms)
{
	uint64_t target[LE_MAX_SHARDS], from[LE_MAX_SHARDS];
	uint64_t gen[LE_MAX_SHARDS];
	struct timespec dl;
	int rc = 0;

	e = le__engine_or_default(e); /* dflt.c */
	if (!e)
		return LE_EINVAL;
	if (e->forked)
		return LE_ECLOSED; /* a fork child's copy has no writers */
	for (uint32_t i = 0; i < e->nshards; i++) {
		le__shard *sh = &e->shards[i];
		/* The failure log's generation before the position: a
		 * failure logged after this read is seen by gen, one logged
		 * before it touched positions below durable_pos. */
		gen[i] = atomic_load(&sh->prog.fail_gen);
		from[i] = atomic_load(&sh->prog.durable_pos);
		target[i] = atomic_load(sh->ring.head);
		uint64_t cur = atomic_load(&sh->prog.flush_req);
		while (cur < target[i] &&
		       !atomic_compare_exchange_weak(&sh->prog.flush_req, &cur,
		                                     target[i]))
			;
		le__wake_after(sh); /* asleep or napping (pace.c) */
	}
	clock_gettime(CLOCK_MONOTONIC, &dl);
	if (timeout_ms >= 0) {
		dl.tv_sec += timeout_ms / 1000;
		dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
		if (dl.tv_nsec >= 1000000000) {
			dl.tv_sec++;
			dl.tv_nsec -= 1000000000;
		}
	}
	pthread_mutex_lock(&e->flush_mu);
	atomic_fetch_add(&e->flush_waiters, 1);
	while (!flush_done(e, target)) {
		int w = timeout_ms >= 0
		                ? pthread_cond_timedwait(&e->flush_cv,
		                                         &e->flush_mu, &dl)
		                : pthread_cond_wait(&e->flush_cv, &e->flush_mu);
		if (w == ETIMEDOUT && !flush_done(e, target)) {
			rc = LE_ETIMEDOUT;
			break;
		}
	}
	atomic_fetch_sub(&e->flush_waiters, 1);
	pthread_mutex_unlock(&e->flush_mu);
	for (int k = 0; k < LE_LINEKINDS && rc == 0 && !e->cfg.store; k++) {
		le__linesink *ls = e->lines[k];
		if (ls && !ls->kind->drained(ls, ms_left(&dl, timeout_ms)))
			rc = LE_ETIMEDOUT;
	}
	for (uint32_t i = 0; i < e->nshards; i++) {
		int f = fail_take(&e->shards[i], gen[i], from[i], target[i]);
		if (f && (rc == 0 || rc == LE_ETIMEDOUT))
			rc = f;
	}
	return rc;
}
