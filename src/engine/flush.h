/*
 * flush.h -- le_flush's side of a shard's progress (flush.c): the wake-up
 * of its callers, the failures it reports, and the sinks' faults logged
 * as failures.
 */
#ifndef LE_FLUSH_H
#define LE_FLUSH_H

#include <stdint.h>

struct le__shard;

/* The error of a failure of sh that no le_flush reported (0 if none):
 * le_close returns it. */
int le__fail_unreported(struct le__shard *sh);
/* After a store of done_pos or durable_pos: wake le_flush callers of
 * sh's engine.  le__flush_wake is the same for an engine, in the shape
 * of le__progress.wake. */
void le__flush_signal(struct le__shard *sh);
void le__flush_wake(void *engine);
/* Log the sinks' faults (a lost record, a failed sync) as failures of
 * [lo, hi) (a failed sync's from durable_pos), and clear them; the
 * writer calls it after each commit, sync and tick. */
void le__fail_sinks(struct le__shard *sh, uint64_t lo, uint64_t hi);

#endif
