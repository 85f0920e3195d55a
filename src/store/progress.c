/*
 * progress.c -- the failure log and durable_pos of a shard (progress.h),
 * as the writer and the sync thread publish them.  le_flush reads them
 * (the engine's flush.c, which says why the memory orders hold).
 */
#include "store/progress.h"

void le__progress_fail(le__progress *p, uint64_t lo, uint64_t hi, int rc)
{
	pthread_mutex_lock(&p->fail_mu);
	uint64_t g = atomic_load_explicit(&p->fail_gen, memory_order_relaxed) + 1;
	le__fail *f = &p->fails[g % LE_FAILS];
	if (f->gen && !f->reported && !p->lost_rc)
		p->lost_rc = f->rc;
	*f = (le__fail){.lo = lo, .hi = hi, .gen = g, .rc = rc};
	atomic_store(&p->fail_gen, g);
	if (hi > atomic_load(&p->fail_hi))
		atomic_store(&p->fail_hi, hi);
	pthread_mutex_unlock(&p->fail_mu);
}

void le__progress_durable(le__progress *p, uint64_t pos)
{
	/* seq_cst: after the failures it covers (le__progress_fail's
	 * stores), and against le_flush's flush_waiters. */
	atomic_store(&p->durable_pos, pos);
	p->wake(p->wake_arg);
}
