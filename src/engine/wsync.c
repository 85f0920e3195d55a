/*
 * wsync.c -- the writer's side of syncing (wsync.h), on the writer's
 * thread.
 */
#include "engine/wsync.h"

#include "engine/flush.h"
#include "engine/shard.h"

/* Positions synced, or asked of the sync thread: what the writer need
 * not ask again. */
uint64_t le__sync_covered(le__shard *sh)
{
	uint64_t d = atomic_load(&sh->prog.durable_pos);
	return sh->w.asked > d ? sh->w.asked : d;
}

/* Make what is committed durable: on the sync thread when it runs (the
 * writer goes on at once), else here. */
void le__sync_now(le__shard *sh)
{
	if (!sh->syncer.started) {
		le__sync_sinks(sh);
		return;
	}
	uint64_t done = atomic_load(&sh->prog.done_pos);
	sh->w.last_sync_mono = le__mono_ns();
	if (done > sh->w.asked) {
		sh->w.asked = done;
		le__sync_ask(&sh->syncer, done);
	}
}

/* Before the sinks may seal a file: the positions the sync thread logs a
 * failed sync of that file up to (sync.h). */
void le__sync_note(le__shard *sh)
{
	sh->syncer.w_rd = sh->w.rd;
	sh->syncer.w_done = atomic_load(&sh->prog.done_pos);
}

int le__sync_sinks(le__shard *sh)
{
	uint64_t lo = atomic_load(&sh->prog.durable_pos);
	uint64_t done = atomic_load(&sh->prog.done_pos);
	int rc = 0;

	for (unsigned i = 0; i < sh->nsinks; i++) {
		le__sink *s = sh->sinks[i];
		int r = s->ops->sync ? s->ops->sync(s) : 0;
		if (r < 0 && !rc)
			rc = r;
	}
	sh->w.last_sync_mono = le__mono_ns();
	/* A failed sync leaves its records in doubt, reported as such; they
	 * count as done all the same (a sync is never retried). */
	le__fail_sinks(sh, lo, done);
	le__progress_durable(&sh->prog, done);
	return rc;
}
