/*
 * sync.h -- a shard's sync thread (sync.c): fdatasync of what the writer
 * has already written, so that the writer keeps writing while the disk
 * catches up.  Runs for a store under LE_SYNC_INTERVAL or LE_SYNC_BATCH.
 *
 * The writer asks (le__sync_ask) for ring positions it has committed; the
 * thread syncs every file that holds them, then stores durable_pos and
 * wakes le_flush.  Asks that come while a sync runs are served together by
 * the next one (group commit).
 *
 * Descriptors.  While the thread runs, it alone closes segment files: the
 * store hands a sealed segment's descriptor over (le__sync_seal) instead
 * of closing it.  A descriptor number the thread holds therefore always
 * names the file it was given: it cannot be closed under a fdatasync and
 * reused for another file.
 */
#ifndef LE_SYNC_H
#define LE_SYNC_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "base/hist.h"
#include "store/progress.h"
#include "store/segment.h"

/* What the sync thread touches of its store, given at its start: the
 * store's counters (atomics it adds to) and files.  [const] while it
 * runs. */
typedef struct le__sync_target {
	const char *dir;           /* DIR/shard-NNN: fsync'd for a new file */
	int fd;                    /* the active segment then, or -1 */
	int ckpt_fd;               /* the checkpoint file */
	uint64_t ckpt_gen;         /* the last checkpoint generation written */
	_Atomic uint64_t *written; /* records written (the store's count) */
	_Atomic uint64_t *syncs, *sync_errors, *sync_lost, *checkpoints;
	_Atomic int *last_error;   /* the engine's most recent I/O error */
} le__sync_target;

/* Sealed segments handed over and not yet synced and closed. */
#define LE_SYNC_SEALED 16

typedef struct le__sealed {
	int fd;
	int bad_rc;              /* its sync failed before, with this error:
	                            close it, no sync (0: sync it) */
	uint64_t hi;             /* every record in it is below this position */
} le__sealed;

/* Write-back is started (le__writeback) each time the active segment has
 * this many bytes more written: the interval's or the seal's fdatasync
 * then finds little left to write. */
#define LE_SYNC_WB_CHUNK (4u << 20)

typedef struct le__syncer {
	/* [const] once started */
	le__progress *prog;      /* the shard's: failures, durable_pos */
	le__sync_target st;
	pthread_t thread;
	int started;             /* the thread runs (written by the writer) */

	pthread_mutex_t mu;      /* guards everything down to `lat` */
	pthread_cond_t work_cv;  /* the thread waits for an ask (monotonic) */
	pthread_cond_t room_cv;  /* the writer waits for room in sealed[] */
	uint64_t want;           /* ring position asked durable (max) */
	uint64_t have;           /* ring position the thread made durable */
	int fd;                  /* the active segment, or -1 */
	int dir_dirty;           /* a segment was created: fsync its dir */
	le__sealed sealed[LE_SYNC_SEALED];
	unsigned nsealed;
	uint64_t wb_to;          /* active segment: written end to write back */
	uint64_t wb_from;        /* active segment: written back (started) to */
	int ckpt_due;            /* write ckpt (after its data is synced) */
	le__ckpt ckpt;
	uint64_t ckpt_gen;       /* the last checkpoint generation written */
	int bad_fd;              /* the active segment whose sync failed
	                            (-1): never synced again, its records
	                            all in doubt until it is handed over */
	int bad_rc;              /* that failure's error */
	uint64_t good_written;   /* store's `written` at the last good sync */
	int stop;
	le__hist lat;            /* fdatasync latency (the store copies it) */

	/* [atomic] the thread sets it with bad_fd; the writer reads it before
	 * each write, and clears it (with bad_fd) when it hands the file over */
	_Atomic int failed;

	/* [writer] set before each commit, read by le__sync_seal on the same
	 * thread: the position collected so far and the one committed. */
	uint64_t w_rd, w_done;
	uint64_t w_wb;           /* [writer] end last asked written back */

} le__syncer;

/* Start the sync thread of shard number `shard`, for the store that st
 * describes, publishing to prog: from then on the store hands files
 * over (store.h, le__store_sync_start, calls it).  @return 0, or an
 * error: the writer then syncs on its own thread, as with no sync
 * thread. */
int le__sync_start(le__syncer *s, const le__sync_target *st,
                   le__progress *prog, uint32_t shard);
/* Everything asked and handed over is synced (or failed and logged),
 * durable_pos stored, the thread joined.  ckpt_gen, bad_fd and the
 * latencies are then the store's to take back. */
void le__sync_stop(le__syncer *s);

/* The writer: make records before ring position pos durable.  Never
 * waits for a sync. */
void le__sync_ask(le__syncer *s, uint64_t pos);

/* The store, on the writer's thread: */
/* A new segment file: it becomes the active one, and its directory entry
 * is made durable before any record in it is counted durable. */
void le__sync_newfile(le__syncer *s, int fd);
/* The active segment is sealed: sync it (unless its sync failed before)
 * and close it.  this_batch: it holds records of the batch being
 * committed (else only of batches committed before).  Returns once that
 * sync is done (and a failure logged): the write-back started as the file
 * grew (le__sync_wrote) leaves it little to wait for. */
void le__sync_seal(le__syncer *s, int fd, int this_batch);
/* The active segment's bytes are written up to `end`: start writing them
 * back now and then (LE_SYNC_WB_CHUNK). */
void le__sync_wrote(le__syncer *s, uint64_t end);
/* Write this checkpoint (its gen is the thread's) once what it names is
 * synced. */
void le__sync_ckpt(le__syncer *s, const le__ckpt *c);
/* Is fd the active segment whose sync failed? */
int le__sync_is_bad(le__syncer *s, int fd);
/* Copy the fdatasync latencies into h. */
void le__sync_lat(le__syncer *s, le__hist *h);

#endif
