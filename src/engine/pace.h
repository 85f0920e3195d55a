/*
 * pace.h -- how a shard's writer waits when nothing is ready (pace.c).
 */
#ifndef LE_PACE_H
#define LE_PACE_H

#include "engine/shard.h"

/* After a pass of the loop that took `bytes` of ring in `recs` records
 * (full: it filled a batch) at mono time now: whether the writer is busy,
 * and its next nap; the _every macros' clock, and on shard 0 their sweep
 * (ratelimit.c). */
void le__pace_pass(le__shard *sh, int full, uint64_t bytes, uint64_t recs,
                   uint64_t now);
/* Nothing more is ready: nap (busy), sleep until woken or the batch is
 * due (flush_ms, the interval sync, on shard 0 the rate limiter's
 * sweep), sleep long once the shard is idle
 * (every record then wakes it; sh->idle), or, while a le_flush waits for
 * a slot not yet published, le__pace_stuck. */
void le__pace_nap(le__shard *sh, uint64_t now);
/* Wait for a slot that has not come, stuck since `since`: yield, then
 * nap a millisecond at a time. */
void le__pace_stuck(uint64_t since, uint64_t now);

#endif
