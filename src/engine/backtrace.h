/*
 * backtrace.h -- the flight recorder (le_set_backtrace): the rings'
 * lifetime, and writing kept records out.  Keeping them is the hot
 * path's (submit.c); each shard's ring is queue/btring.h.
 */
#ifndef LE_BACKTRACE_H
#define LE_BACKTRACE_H

#include <stdint.h>

#include "logengine.h"

/* At le_open, once the shards are up: apply le_config.backtrace and
 * LOGENGINE_BACKTRACE, and open the rings when a logger keeps records.
 * @return 0 or an error (le_errmsg set). */
int le__bt_open(le_engine *e);
/* In the shard's recovery at le_open, after its dead queue and before
 * its SITES table is made anew: take what a dead process kept in its
 * BACKTRACE ring (a deferred record made text by that table), for
 * le__bt_open to queue.  @return 0. */
struct le__shard;
int le__bt_recover(struct le__shard *sh);
/* Close each shard's ring (its file marked closed cleanly, unless this
 * is a fork child's copy of the engine). */
void le__bt_close(le_engine *e);
/* A record at or above backtrace_trigger on the logger of h, which has
 * a recorder: write that logger's kept records out first. */
void le__bt_trigger(le_engine *e, const struct le__head *h);
/* From the crash handler (lifecycle.c), before it flushes the queues:
 * write every kept record out, then a record naming the signal.
 * Async-signal-safe (backtrace.c says why). */
void le__bt_crash(le_engine *e, int sig);
/* Sum of the rings' drops (le_stats.backtrace_dropped). */
uint64_t le__bt_dropped(le_engine *e);

#endif
