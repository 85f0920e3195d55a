/*
 * deadq.h -- the checks the writer makes on each slot of a dead process's
 * queue while it writes that queue out at le_open (deadq.c).
 */
#ifndef LE_DEADQ_H
#define LE_DEADQ_H

#include "engine/shard.h"

/* Recovery's verdict on the slot at *rd, which le__ring_peek returned as
 * k (sl, sbytes): 0 write it, 1 step over it (*rd moved), -1 stop the
 * walk.  seq: the shard's next sequence number.  Damage and skipped slots
 * are counted in sh->w.rq. */
int le__deadq_slot(le__shard *sh, uint64_t *rd, int k, le__slot *sl,
                   uint32_t sbytes, uint64_t seq);
/* Count a damaged record at ring position pos: dropped, or written and
 * doubtful; the first LE_QDMG_NAMED are named with why. */
void le__deadq_note(le__qrecov *q, uint64_t pos, const char *why,
                    int dropped);
/* A record at pos stamped ts (ns), with the clock at now and the shard's
 * last stamp at last: counted doubtful when no clock of the dead process
 * can have made ts. */
void le__deadq_time(le__qrecov *q, uint64_t pos, uint64_t ts, uint64_t now,
                    uint64_t last);
/* A deferred record at pos whose call site `site` the SITES table could
 * not give (why): written as the lost-site text, counted, the first named. */
void le__deadq_site(le__qrecov *q, uint64_t pos, uint32_t site,
                    const char *why);

#endif
