/*
 * archive.h -- the engine's archiver: one thread that compresses the
 * sealed segments the writers pick (retention.c: beyond
 * archive_keep_segments, or older than archive_after_ms) into NAME.seg.zst
 * by the crash-safe sequence of seg_zst.h.
 *
 * Writers hand it segments through a bounded list and take back, at their
 * next look, what became of each (its archive's size, or that it failed),
 * so that retention counts a shard's bytes as they are on disk.  Nothing
 * here is on a writer's hot loop: a push is one mutex and a copy, and a
 * full list leaves the segment for a later look.
 *
 * le_close stops it: segments still waiting are left as they are (the next
 * engine picks them again), and the one being compressed is abandoned at
 * its next 1 MiB step (its temporary file removed, the segment untouched).
 */
#ifndef LE_ARCHIVE_H
#define LE_ARCHIVE_H

#include <stdatomic.h>
#include <stdint.h>

#include "base/worker.h"

#define LE_ARC_MAX 64

typedef struct le__arc_job {
	const void *owner;  /* first (worker.h): a shard's sealed list
	                       (retention.h), who takes the outcome back */
	const char *dir;    /* its shard directory (lives as long as it) */
	uint64_t index;     /* the segment */
	int rc;             /* outcome: 0, or what le__zst_archive returned */
	uint64_t zbytes;    /* the archive's size when rc == 0 */
} le__arc_job;

typedef struct le__archiver {
	/* the thread; stop is read by the compression between steps */
	le__worker w;
	int level;               /* [const] zstd level */
	le__arc_job q[LE_ARC_MAX]; /* w's: waiting or in progress */
	/* w's outcomes, until their writer takes them: every one is handed
	 * back */
	le__arc_job done[LE_ARC_MAX];
	_Atomic uint64_t archived, bytes_in, bytes_out;
	_Atomic int *last_error; /* the engine's */
} le__archiver;

int le__archiver_start(le__archiver *a, int level, _Atomic int *last_error);
/* 1: queued; 0: not (full, stopping, or not running). */
int le__archiver_push(le__archiver *a, const void *owner, const char *dir,
                      uint64_t index);
/* Move up to cap of owner's outcomes to out; @return how many. */
unsigned le__archiver_take(le__archiver *a, const void *owner,
                           le__arc_job *out, unsigned cap);
/* Abandon what waits, stop the one in progress, join. */
void le__archiver_stop(le__archiver *a);
void le__archiver_free(le__archiver *a);

#endif
