/*
 * wsync.h -- the writer's side of syncing (wsync.c): what it has asked of
 * the store's sync thread (store/sync.h), and the syncs it makes on its
 * own thread when that one does not run (no store, LE_SYNC_NONE, a thread
 * that could not start, recovery at le_open).
 */
#ifndef LE_WSYNC_H
#define LE_WSYNC_H

#include <stdint.h>

struct le__shard;

/* Positions synced, or asked of the sync thread: what the writer need not
 * ask again. */
uint64_t le__sync_covered(struct le__shard *sh);
/* Make what is committed (done_pos) durable: ask the sync thread when it
 * runs (the writer goes on at once), else le__sync_sinks here. */
void le__sync_now(struct le__shard *sh);
/* Before the sinks may seal a file (each commit, each tick): note the
 * positions the sync thread logs a failed sync of that file up to. */
void le__sync_note(struct le__shard *sh);
/* Sync every sink of the shard on this thread, log their faults, store
 * durable_pos = done_pos (a failed sync's records count as done all the
 * same: never retried).  Recovery calls it too, before the writer
 * starts.  @return 0 or the first error. */
int le__sync_sinks(struct le__shard *sh);

#endif
