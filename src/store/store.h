/*
 * store.h -- the segment store of one shard: a sink (sink.h) that encodes
 * records as frames into segment files (sink_store.c), rotates them by
 * size and age, checkpoints and syncs (store.c), and deletes the oldest
 * past retention_bytes (retention.c).
 *
 * Everything here belongs to the shard's writer thread ([writer]) except
 * the counters ([atomic]: the writer adds, le_stats_get reads) and what
 * recovery (recover.c) sets up before the thread starts.
 */
#ifndef LE_STORE_H
#define LE_STORE_H

#include <stdatomic.h>
#include <stdint.h>

#include "base/crc32c.h"
#include "base/hist.h"
#include "store/progress.h"
#include "store/retention.h"
#include "store/segment.h"
#include "sink/sink.h"

struct le__archiver;
struct le__reaper;
struct le__syncer;

typedef struct le__store {
	le__sink sink;               /* first: a le__sink * is a le__store * */

	/* [const] */
	const le_config *cfg;        /* the engine's copy */
	uint32_t shard;
	char dir[LE_PATH_MAX];       /* DIR/shard-NNN */
	struct le__reaper *reaper;   /* retention's unlinks; may not run */
	struct le__archiver *archiver; /* compression of sealed segments
	                                (archive.h); may not run */
	_Atomic int *last_error;     /* the engine's: most recent I/O error */

	/* [writer] the active segment */
	int fd;                      /* -1: none open */
	uint64_t seg_index;
	uint64_t seg_created_mono;   /* for segment_max_age_ms */
	uint64_t prealloc_end;       /* blocks reserved up to here */
	uint64_t prealloc_step;      /* the next reservation's bytes */
	uint64_t prealloc_mono;      /* when the last one was made */
	uint64_t seg_cap;            /* file size limit learned from EFBIG
	                                (ulimit -f); 0: none seen */
	uint64_t next_seq;           /* sequence of the next frame put */
	uint64_t last_ts;            /* timestamp of the last frame put */
	int full;                    /* put stopped at the segment's end:
	                                rotate once the buffer is written */
	int rotate_pending;          /* a sync failed: start a new segment */
	/* [writer] the shard's sync thread while it runs (sync.h): it syncs,
	 * and closes the sealed files handed to it; NULL: this thread syncs */
	struct le__syncer *syncer;
	int seal_earlier;            /* the file to seal holds no record of the
	                                batch being committed */

	/* [writer] the output buffer: file bytes [buf_off, buf_off+buf_len)
	 * of the active segment; its last buf_new bytes are not written. */
	unsigned char *buf;
	size_t buf_cap;
	uint64_t buf_off;
	size_t buf_len;
	size_t buf_new;
	size_t unsealed[LE_CRC_WAYS]; /* buf offsets of frames without CRC */
	int nunsealed;
	uint32_t pend_recs;          /* frames put, not yet written */
	uint32_t pend_markers;       /* of those, drop markers */
	uint32_t pend_lost;          /* of those, dropped by relocate */
	uint64_t pend_last_off;      /* start of the last frame put */

	/* [writer] deferred records (defer.h): where in the active segment
	 * each call site's descriptor is, so that later frames point back at
	 * it.  dmap[site] = dgen << 32 | frame offset; an entry of another
	 * dgen (bumped with each segment) is none. */
	uint64_t *dmap;
	uint32_t dn;                 /* entries */
	uint32_t dgen;

	/* [writer] as of the last write: what the checkpoint names */
	uint64_t w_next_seq, w_last_ts, w_last_off;
	int dirty;                   /* written since the last sync */
	uint64_t unsynced;           /* records written since the last sync */
	uint64_t last_ckpt_mono;
	uint64_t last_age_mono;      /* last look for segments too old */
	int ckpt_fd;
	uint64_t ckpt_gen;
	uint64_t ckpt_off;           /* end named by the last checkpoint */

	/* [writer] latency of its write calls and fdatasyncs, read by the
	 * live counters page (statpage.c) as the writer publishes it */
	le__hist lat_write, lat_sync;

	/* [writer] sealed segments, oldest first, for retention */
	le__seglist sealed;

	/* [atomic] counters: the writer (and the reaper: segments_deleted)
	 * add, le_stats_get reads */
	_Atomic uint64_t written;
	_Atomic uint64_t bytes_written;
	_Atomic uint64_t markers;
	_Atomic uint64_t dropped_io;
	_Atomic uint64_t segments_created;
	_Atomic uint64_t segments_deleted;
	_Atomic uint64_t lost_unshipped; /* retention, past the margin */
	_Atomic uint64_t syncs;
	_Atomic uint64_t checkpoints;
	_Atomic uint64_t write_errors;
	_Atomic uint64_t sync_errors;
	_Atomic uint64_t sync_lost;
	_Atomic uint64_t recovered_truncated;
} le__store;

/* Direct I/O's block: the buffer's alignment, and every write's size. */
#define LE_STORE_ALIGN 4096u

/* Largest a segment may grow: segment_bytes, or less under ulimit -f. */
static inline uint64_t le__store_limit(const le__store *st)
{
	uint64_t lim = st->cfg->segment_bytes;
	return st->seg_cap && st->seg_cap < lim ? st->seg_cap : lim;
}

/* The active segment's end: what is written and what is in the buffer. */
static inline uint64_t le__store_seg_end(const le__store *st)
{
	return st->buf_off + st->buf_len;
}

/* ... and what of it is written. */
static inline uint64_t le__store_written_end(const le__store *st)
{
	return le__store_seg_end(st) - st->buf_new;
}

/* The engine's most recent I/O error (le_stats.last_error). */
static inline void le__store_error(le__store *st, int rc)
{
	atomic_store(st->last_error, rc);
}

/* A store for shard `shard` of the engine whose config is cfg (the
 * caller keeps cfg alive): its buffer, its CHECKPOINT file open.  Nothing
 * else on disk is touched; recover.c finds where to append.
 * @return 0 and *out, or an error (le_errmsg set). */
int le__store_new(le__store **out, const le_config *cfg, uint32_t shard,
                  const char *shard_dir, struct le__reaper *reaper,
                  _Atomic int *last_error);

/* For recovery (recover.c), before the writer starts. */
/* Append (index, bytes) to the sealed list (retention's). */
int le__store_add_sealed(le__store *st, uint64_t index, uint64_t bytes);
/* Start segment `index`, base sequence st->next_seq. */
int le__store_create(le__store *st, uint64_t index);
/* Append to segment `index` from valid_end (its frames end there). */
int le__store_reopen(le__store *st, uint64_t index, uint64_t valid_end);
/* Room for a frame of up to `bytes` payload (a dead process's queue may
 * hold records above this engine's max_record_bytes).  Keeps the buffer
 * on failure.  le__store_resize(st, 0): back to the engine's size. */
void le__store_resize(le__store *st, uint32_t bytes);

/* store.c, for sink_store.c, on the writer's thread: */
/* Seal the active segment and start the next one; then retention. */
int le__store_rotate(le__store *st);
/* Reserve the active segment's blocks ahead of the next write. */
void le__store_prealloc(le__store *st);
/* fdatasync the active segment if written since the last; a failure is
 * never retried: counted, the sink's sync_fault set, the segment
 * rotated.  @return 0 or the error. */
int le__store_sync(le__store *st);
/* The writer's, before its loop: start the store's sync thread
 * (sync.h), shard number `shard`, publishing to prog.  From then on the
 * store hands its files over.  @return 0, or an error: the writer then
 * syncs on its own thread. */
int le__store_sync_start(le__store *st, struct le__syncer *s,
                         le__progress *prog, uint32_t shard);
/* Stop it (everything handed over synced or logged): the store owns its
 * files again.  Nothing when it did not start. */
void le__store_sync_stop(le__store *st, struct le__syncer *s);
/* Write (or hand the sync thread) a checkpoint naming the written end. */
void le__store_checkpoint(le__store *st);
/* The sink's tick: checkpoint, retention by age, archiving, rotation by
 * age or after a failed sync. */
void le__store_tick(le__sink *s, uint64_t now);

#endif
