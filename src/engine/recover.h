/*
 * recover.h -- a shard's recovery at le_open (recover.c).
 */
#ifndef LE_RECOVER_H
#define LE_RECOVER_H

#include "engine/shard.h"

struct le__store;

/* Find where the store appends: list its segments (the sealed ones for
 * retention), find the last one's valid end, cut a torn tail, continue the
 * sequence numbers (st->next_seq, st->last_ts).  @return 0 or an error
 * (le_errmsg set). */
int le__recover_store(struct le__store *st);

/* Write out what a dead process left queued in the shard's ring, before
 * any new record; sets sh->w.rd.  Damage stops the walk and is named in
 * le_errmsg.  @return 0 or a write's error. */
int le__recover_queue(le__shard *sh);

#endif
