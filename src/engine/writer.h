/*
 * writer.h -- a shard's writer thread (writer.c): collect records from the
 * ring, hand them to the shard's sinks, release the ring.
 */
#ifndef LE_WRITER_H
#define LE_WRITER_H

#include "engine/shard.h"

/* The thread (le_open starts one per shard). */
void *le__writer_main(void *arg);

/* The batch's memory, for a shard whose sinks are in place.  @return 0 or
 * LE_ENOMEM. */
int le__writer_init(le__shard *sh);
void le__writer_free(le__shard *sh);

/*
 * For recovery (recover.c), before the thread starts: one batch from the
 * ring at sh->w.rd through every sink, committed and released.  @return 1
 * when records (or skipped slots) moved, 0 when nothing more can be taken
 * (the ring is empty from there, or holds words that make no sense), or a
 * commit's error.
 */
int le__writer_pass(le__shard *sh);

/* After the ring was made anew: the writer's positions follow it. */
void le__writer_restart(le__shard *sh);
/* Put the shard's clock in its QUEUE header (le__ring_put_clock). */
void le__writer_note_clock(le__shard *sh);

#endif
