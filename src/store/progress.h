/*
 * progress.h -- how far a shard's records got (committed by every sink,
 * durable), and the failures that touched them: written by the shard's
 * writer and its sync thread (sync.c), read by le_flush and le_stats_get.
 * It is all the store's sync thread knows of the engine: it logs a
 * failure, stores durable_pos, and calls `wake`.
 */
#ifndef LE_PROGRESS_H
#define LE_PROGRESS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "logengine.h"

/* A failure that touched records at ring positions [lo, hi): lost, or
 * written and then a sync failed.  le_flush reports the ones that touch
 * the records it waits for; le_close, those no le_flush reported. */
typedef struct le__fail {
	uint64_t lo, hi;
	uint64_t gen;            /* 1, 2, ... per shard */
	int rc;
	int reported;
} le__fail;
#define LE_FAILS 16

/* [atomic] writer -> le_flush, le_stats_get. */
typedef struct le__progress {
	/* Ring positions: every sink has committed the records before
	 * done_pos, and synced those before durable_pos (<= done_pos; equal
	 * with LE_SYNC_NONE).  Stored seq_cst: see le__writer's release and
	 * le_flush (the store-buffering pair with flush_waiters). */
	_Atomic uint64_t done_pos;
	_Atomic uint64_t durable_pos;
	_Atomic uint64_t flush_req;  /* position a le_flush waits for (max) */
	_Atomic uint64_t consumed;   /* records released from the ring */
	_Atomic uint64_t by_level[LE_FATAL + 1]; /* of those, by level */
	_Atomic uint64_t recovered;  /* records drained from a dead process */
	_Atomic uint64_t abandoned;  /* claimed, never published slots */
	_Atomic uint64_t damaged;    /* a dead process's records dropped or
	                                doubtful at recovery (le__qrecov) */
	/* The last LE_FAILS failures; fail_mu guards fails[] and lost_rc.
	 * fail_gen counts them all and fail_hi is the highest position any
	 * touched (both also read without the lock; stored before the
	 * durable_pos that passes the failure). */
	pthread_mutex_t fail_mu;
	_Atomic uint64_t fail_gen;
	_Atomic uint64_t fail_hi;
	le__fail fails[LE_FAILS];
	int lost_rc;                 /* a failure evicted before any report */
	/* [const] called after each store of durable_pos: wakes le_flush
	 * callers (the engine's flush.c), so the store never sees them. */
	void (*wake)(void *arg);
	void *wake_arg;
} le__progress;

/* Log a failure of the records at positions [lo, hi): before the
 * durable_pos that passes them, so that le_flush, which reads the log
 * after it sees durable_pos, finds it. */
void le__progress_fail(le__progress *p, uint64_t lo, uint64_t hi, int rc);

/* Store durable_pos = pos (seq_cst: flush.c says why) and wake le_flush
 * callers. */
void le__progress_durable(le__progress *p, uint64_t pos);

#endif
