/*
 * reaper.h -- retention's unlinks on a thread of their own (reaper.c).
 */
#ifndef LE_REAPER_H
#define LE_REAPER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base/worker.h"

/* An entry names its segment by (shard directory, index): the path is
 * rebuilt when the unlink is made.  `owner` (first, worker.h: a shard's
 * sealed list, retention.h) gets back the entries whose unlink failed;
 * `deleted` counts those done. */
#define LE_REAP_MAX 64
typedef struct le__reap {
	const void *owner;
	const char *dir;
	_Atomic uint64_t *deleted;
	uint64_t index, bytes;
} le__reap;

typedef struct le__reaper {
	le__worker w;            /* the thread; on stop it finishes q */
	le__reap q[LE_REAP_MAX]; /* w's: waiting or in progress */
	/* w's done: unlinks that failed, each shard's writer takes its own
	 * back into retention's list */
	le__reap back[LE_REAP_MAX];
	_Atomic int *last_error; /* the engine's */
} le__reaper;

int le__reaper_start(le__reaper *r, _Atomic int *last_error);
/* 1: the reaper will unlink the segment; 0: unlink it yourself (full, or
 * not running). */
int le__reaper_push(le__reaper *r, const le__reap *x);
/* Moves up to cap of owner's failed unlinks to out; returns how many. */
size_t le__reaper_take_back(le__reaper *r, const void *owner, le__reap *out,
                            size_t cap);
void le__reaper_stop(le__reaper *r); /* every queued unlink done, joined */
void le__reaper_free(le__reaper *r);

#endif
