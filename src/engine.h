/*
 * engine.h -- the engine and shard structures shared by engine.c (open,
 * hot path, flush, stats, close) and writer.c (the shard writer threads).
 *
 * Ownership.  Fields marked [const] are set in le_open and never change.
 * [writer] fields belong to the shard's writer thread alone.  [atomic]
 * fields are shared; each says who writes it.
 */
#ifndef LE_ENGINE_H
#define LE_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "crc32c.h"
#include "format.h"
#include "internal.h"
#include "queue.h"
#include "os.h"
#include "segment.h"

/* sink_stream.c: the stream sink (see its header comment). */
#define LE_STREAM_MARKS 64       /* marker lines the ring may hold */
typedef struct le__stream {
	int fd;                  /* the caller's descriptor */
	int wfd;                 /* ours: a non-blocking reopen, or fd */
	int own_nonblock;
	int format, sync;
	pthread_t thread;
	int started;
	pthread_mutex_t mu;      /* guards ring, head, len, drops_pending and
	                            the line accounting below */
	pthread_cond_t cv;
	unsigned char *ring;
	size_t cap, head, len;
	uint64_t drops_pending;  /* to report with a line */
	/* So that lines thrown away (the reader gone) are counted as
	 * dropped: every line ends in its only '\n', so the ring's newlines
	 * are its lines; the "N records dropped" lines among them (not
	 * records) are known by where they end, in bytes ever put (the ring's
	 * bytes ever taken out are put_bytes - len). */
	uint64_t put_bytes;
	uint64_t mark_end[LE_STREAM_MARKS]; /* put_bytes at a marker's end */
	unsigned mark_head, mark_n;
	int stop;
	uint64_t stop_deadline;
	_Atomic int dead;        /* EPIPE or the like: the reader is gone */
	/* lines: handed over and not thrown away since (buffered or
	 * written); dropped: refused at the door or thrown away; discarded:
	 * of those, the ones thrown away after they were handed over (the
	 * reader gone, or still buffered when le__stream_stop gave up), which
	 * a stream-only engine had counted written (le_stats_get). */
	_Atomic uint64_t lines, dropped, discarded, bytes;
	uint64_t cpu_ns;         /* the thread's CPU time when it ended */
} le__stream;

/* reaper.c: retention's unlinks, off the writer threads (see there).  An
 * entry names its segment by (shard, index): the path is rebuilt when the
 * unlink is made. */
#define LE_REAP_MAX 64
struct le__shard;
typedef struct le__reap {
	struct le__shard *sh;
	uint64_t index, bytes;
} le__reap;
typedef struct le__reaper {
	pthread_t thread;
	int inited, started;
	pthread_mutex_t mu;      /* guards q, head, n, back, nback, stop */
	pthread_cond_t cv;
	le__reap q[LE_REAP_MAX]; /* waiting or in progress, oldest at head */
	unsigned head, n;
	/* Unlinks that failed: each shard's writer takes its own back into
	 * retention's list (n + nback <= LE_REAP_MAX, so the one in progress
	 * always has a place here).  nback is also read without the lock,
	 * to skip it when 0. */
	le__reap back[LE_REAP_MAX];
	_Atomic unsigned nback;
	int stop;
} le__reaper;

/* Room a formatted line may need for a payload of len bytes: JSON escapes
 * at most 6 bytes per byte, plus the fixed fields and the newline. */
static inline size_t le__stream_line_max(size_t len)
{
	return 6 * len + 256;
}

size_t le__stream_format(unsigned char *out, size_t cap, int format,
                         uint64_t ts, int level, uint32_t shard, uint64_t seq,
                         uint32_t flags, const void *payload, uint32_t len);
int le__stream_open(le__stream *s, const le_config *c);
/* Stop the thread: a reader that keeps up gets every line, a stalled one
 * a second; what is left is thrown away and counted.  Idempotent. */
void le__stream_stop(le__stream *s);
void le__stream_close(le__stream *s); /* stop, then free */
/* A fork child's copy: free our memory and descriptor, nothing else (the
 * thread, its mutex and condition variable are the parent's). */
void le__stream_forget(le__stream *s);
uint64_t le__stream_push(le__stream *s, const unsigned char *lines,
                         const uint32_t *lens, size_t n);
int le__stream_write_sync(le__stream *s, const unsigned char *line, size_t n);
int le__stream_drained(le__stream *s, int timeout_ms);

typedef struct le__segmeta {
	uint64_t index;
	uint64_t bytes;
} le__segmeta;

typedef struct le__shard {
	le__ring ring;

	/* [atomic] futex word: 1 while the writer sleeps or is about to.
	 * Written by the writer (1) and by whoever wakes it (0). */
	_Alignas(64) _Atomic uint32_t sleeping;
	/* [atomic] producers add dropped records; the writer takes them
	 * (exchange) to write a marker. */
	_Atomic uint64_t dropped_pending;
	_Atomic uint64_t dropped_full; /* [atomic] producers, cumulative */

	/* [atomic] written by the writer, read by le_flush / le_stats_get. */
	_Alignas(64) _Atomic uint64_t done_pos; /* ring position written
	                                           (and synced per policy) */
	_Atomic uint64_t flush_req;  /* position a le_flush waits for (max) */
	_Atomic uint64_t consumed;   /* records released from the ring */
	_Atomic uint64_t written;
	_Atomic uint64_t bytes_written;
	_Atomic uint64_t markers;
	_Atomic uint64_t dropped_io;
	_Atomic uint64_t segments_created;
	_Atomic uint64_t segments_deleted;
	_Atomic uint64_t syncs;
	_Atomic uint64_t checkpoints;
	_Atomic uint64_t write_errors;
	_Atomic uint64_t sync_errors;
	_Atomic uint64_t recovered_truncated;
	_Atomic int failing;         /* writes are failing now (retrying) */
	_Atomic uint64_t recovered;  /* records drained from a dead process */
	_Atomic uint64_t abandoned;  /* claimed, never published slots */
	_Atomic uint64_t sync_lost;  /* written, then their sync failed */

	/* [const] */
	_Alignas(64) struct le_engine *e;
	uint32_t id;
	char dir[LE_PATH_MAX];       /* DIR/shard-NNN */
	pthread_t thread;
	int started;
	uint64_t cpu_ns;             /* the writer's CPU time when it ended */

	/* [writer] the active segment */
	int fd;                      /* -1: none open */
	uint64_t seg_index;
	uint64_t seg_len;            /* logical bytes in the file */
	uint64_t seg_created_mono;   /* for segment_max_age_ms */
	uint64_t prealloc_end;       /* blocks reserved up to here */
	uint64_t seg_cap;            /* file size limit learned from EFBIG
	                                (ulimit -f); 0: none seen */
	uint32_t pend_lost;          /* pending frames dropped (too big for
	                                any file under seg_cap) */
	uint64_t next_seq;
	uint64_t last_ts;
	uint64_t last_frame_off;     /* start of the last frame written */
	/* [writer] the output buffer: file bytes [buf_off, buf_off+buf_len) */
	unsigned char *buf;
	size_t buf_cap;
	uint64_t buf_off;
	size_t buf_len;
	size_t buf_new;              /* bytes at the end of buf not yet written */
	uint64_t rd;                 /* ring position encoded up to */
	int recovering;              /* draining a dead process's queue */
	size_t unsealed[LE_CRC_WAYS]; /* buf offsets of frames without a CRC */
	int nunsealed;
	uint32_t pend_recs;          /* frames encoded, not yet written */
	uint32_t pend_slots;         /* of those, from ring slots */
	uint32_t pend_markers;       /* of those, drop markers */
	uint64_t pend_bytes;         /* payload bytes of the slots (budget) */
	uint64_t pend_since;         /* mono ns of the oldest pending record */
	uint64_t pend_last_off;      /* start offset of the last pending frame */
	le__clock clock;             /* slot stamps -> ns */
	uint64_t clock_put_tsc;      /* clock.base_tsc and .mult as last put */
	uint64_t clock_put_mult;     /* in the QUEUE header (writer.c) */
	uint64_t last_recal_mono;
	uint64_t last_collect_mono;  /* when collect last ran */
	uint64_t stuck_rd, stuck_since; /* a flush waits and rd does not
	                                 move: since when (0: not stuck) */
	int busy;                    /* records arrive fast: nap, not sleep */
	uint64_t nap_ns;             /* a busy writer's next nap (writer.c) */
	uint64_t w_next_seq;         /* next_seq as of the last write */
	uint64_t w_last_ts;          /* last_ts as of the last write */
	/* [writer] sync and checkpoint state */
	int dirty;                   /* written since the last sync */
	uint64_t unsynced;           /* records written since the last sync */
	int rotate_pending;          /* a sync failed: start a new segment */
	uint64_t last_sync_mono;
	uint64_t last_ckpt_mono;
	int ckpt_fd;
	uint64_t ckpt_gen;
	uint64_t ckpt_off;           /* seg_len at the last checkpoint */
	/* [writer] lines of the current batch for the stream sink */
	unsigned char *stage;
	size_t stage_len, stage_cap;
	uint32_t *stage_lens;
	size_t nstage, stage_max;
	uint64_t stage_dropped;      /* lines that did not fit the stage */
	/* [writer] sealed segments, oldest first, for retention */
	le__segmeta *segs;
	size_t nsegs, segs_cap;
	uint64_t segs_bytes;
} le__shard;

struct le_engine {
	/* [atomic] the global budget: producers take, writers give. */
	_Alignas(64) _Atomic uint64_t budget;
	/* [atomic] high-water marks, CAS-max by producers (rarely written). */
	_Alignas(64) _Atomic uint64_t hwm_rec;
	_Atomic uint64_t hwm_bytes;
	_Atomic uint64_t hwm_len;     /* largest payload accepted */
	/* [atomic] producers, on uncommon paths only */
	_Alignas(64) _Atomic uint64_t truncated;
	_Atomic uint64_t rejected;
	_Atomic uint64_t blocked;
	_Atomic uint32_t space_seq;     /* futex: bumped when budget returns */
	_Atomic uint32_t block_waiters; /* producers waiting on space_seq */
	_Atomic int closing;            /* le_close has begun (or forked) */
	int forked;                     /* this is a fork child's copy */
	_Atomic int stopping;           /* writers: drain and exit */
	_Atomic uint64_t errors_total;  /* I/O failures, all shards */
	_Atomic uint64_t errors_seen;   /* errors_total as of the last flush */
	_Atomic int last_error;

	/* [const] */
	_Alignas(64) le_config cfg;
	char dir[LE_PATH_MAX];
	uint32_t nshards;
	uint32_t shard_mask;            /* nshards - 1 when a power of two */
	uint64_t cap_rec, cap_bytes;
	uint32_t max_rec;
	uint32_t batch;                 /* effective batch_size (engine.c) */
	uint64_t wake_rec, wake_bytes;  /* producer wakes a sleeping writer */
	int use_tsc;                    /* slots carry TSC ticks (os.h) */
	int lock_fd;
	le__shard *shards;
	int has_stream;                 /* async stream sink running */
	le__stream stream;
	le__reaper reaper;              /* started when retention_bytes */

	/* le_flush waiters sleep here; writers signal when flush_waiters. */
	pthread_mutex_t flush_mu;
	pthread_cond_t flush_cv;
	_Atomic int flush_waiters;
};

/* reaper.c */
int le__reaper_start(le_engine *e);
/* 1: the reaper will unlink the segment; 0: unlink it yourself (full). */
int le__reaper_push(le_engine *e, struct le__shard *sh, uint64_t index,
                    uint64_t bytes);
/* Moves up to cap of sh's failed unlinks to out; returns how many. */
size_t le__reaper_take_back(le_engine *e, struct le__shard *sh, le__reap *out,
                            size_t cap);
void le__reaper_stop(le_engine *e); /* every queued unlink done, joined */
void le__reaper_free(le_engine *e);

/* writer.c */
int le__writer_recover(le__shard *sh); /* in le_open, before threads */
/* After the ring was made anew: the writer's positions follow it. */
void le__writer_restart(le__shard *sh);
/* Put the shard's clock in its QUEUE header (le__ring_put_clock). */
void le__writer_note_clock(le__shard *sh);
void *le__writer_main(void *arg);
void le__writer_free(le__shard *sh);

/* lifecycle.c */
int le__register(le_engine *e);
void le__unregister(le_engine *e);
int le__crash_install(void);

/* engine.c */
void le__wake_writer(le__shard *sh);
void le__futex_wait(_Atomic uint32_t *w, uint32_t val, uint64_t ns);
void le__futex_wake(_Atomic uint32_t *w, int n);

#endif
