/*
 * shard.h -- the engine and its shards, shared by engine.c (open, close,
 * stats), submit.c (the hot path), flush.c (le_flush), writer.c (the shard
 * writer threads, with pace.c, deadq.c and wsync.c),
 * recover.c and lifecycle.c.
 *
 * Ownership.  [const]: set in le_open, never changed after.  [writer]: the
 * shard's writer thread alone (and recovery, before the thread starts).
 * [atomic]: shared; each says who writes it.  Each group of a shard's
 * fields is a struct of its own, so the type says who may touch it.
 */
#ifndef LE_SHARD_H
#define LE_SHARD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "base/clock.h"
#include "base/internal.h"
#include "base/os.h"
#include "queue/queue.h"
#include "store/archive.h"
#include "store/reaper.h"
#include "store/segment.h"
#include "queue/sites.h"
#include "queue/btring.h"
#include "sink/sink.h"
#include "live/statpage.h"
#include "sink/kinds.h"
#include "store/progress.h"
#include "store/sync.h"
#include "engine/rlreg.h"

struct le__store;
struct le__loggers;

/* [atomic] producers -> writer. */
typedef struct le__signal {
	/* futex word: LE_ASLEEP while the writer sleeps or is about to,
	 * LE_NAPPING while a busy writer naps.  Written by the writer and by
	 * whoever wakes it (0). */
	_Atomic uint32_t sleeping;
	/* producers add dropped records; the writer takes them (exchange)
	 * to write a "N records dropped" marker. */
	_Atomic uint64_t dropped_pending;
	_Atomic uint64_t dropped_full; /* producers, cumulative */
} le__signal;

/* [writer] the batch: records taken from the ring, not yet released. */
typedef struct le__batch {
	le__rec *recs;               /* cap entries */
	size_t n, cap;
	size_t taken[LE_SINKS_MAX];  /* per sink: how many of recs it took */
	uint32_t slots;              /* ring slots among recs (not markers) */
	uint64_t slot_bytes;         /* their payload bytes (the budget's) */
	uint32_t by_level[LE_FATAL + 1]; /* those slots by level */
	uint64_t bytes;              /* frame bytes, at most: max_pending */
	uint64_t since;              /* mono ns when its first record came */
	int has_marker;
	char marker[64];             /* the marker's text */
} le__batch;

/* [writer] the recovery of a dead process's queue: what the walk may
 * skip, and what damage it met (reported by le__recover_queue). */
#define LE_QDMG_NAMED 4
typedef struct le__qrecov {
	uint64_t end;                /* the walk's bound: head when sane */
	uint64_t mark_pos;           /* le__ring_mark's position ...     */
	uint64_t written;            /* ... and how many record slots from
	                                it the segments hold already */
	int have_mark;
	int head_sane;               /* else the walk ends where words do */
	uint64_t skipped;            /* slots not written again */
	uint64_t abandoned;          /* claimed, never published */
	int clock_damaged;           /* its clock area failed its check */
	uint64_t dropped, doubtful;  /* records */
	uint64_t pos[LE_QDMG_NAMED]; /* the first damaged slots' positions */
	const char *why[LE_QDMG_NAMED];
	unsigned named;
	/* deferred records written without their text (le__deadq_site):
	 * how many, and the first one's position, site number and why */
	uint64_t sites_lost;
	uint64_t site_pos;
	uint32_t site_id;
	const char *site_why;
} le__qrecov;

/* [writer] the loop's own state. */
typedef struct le__wstate {
	uint64_t rd;                 /* ring position collected up to */
	uint64_t next_seq;           /* the shard's next sequence number */
	uint64_t last_ts;            /* its last record's timestamp */
	int recovering;              /* draining a dead process's queue */
	le__qrecov rq;               /* while recovering */
	le__clock clock;             /* slot stamps -> ns */
	uint64_t clock_put_tsc;      /* clock.base_tsc and .mult as last put */
	uint64_t clock_put_mult;     /* in the QUEUE header */
	uint64_t last_recal_mono;
	uint64_t last_collect_mono;  /* when gather last ran */
	uint64_t last_sync_mono;     /* last sync, or ask to the sync thread */
	uint64_t asked;              /* position asked of the sync thread */
	uint64_t stuck_rd, stuck_since; /* a flush waits and rd does not
	                                 move: since when (0: not stuck) */
	int busy;                    /* records arrive fast: nap, not sleep */
	uint64_t nap_ns;             /* a busy writer's next nap */
	uint64_t backoff;            /* after a failed commit */
	/* a ring that trims (queue.h): */
	int light;                   /* tail went round less than once in
	                                the last second: return pages */
	uint64_t use_mono, use_tail; /* when, and where tail was, last look */
	uint64_t populated;          /* pages faulted in up to here */
	uint64_t active_mono;        /* when a pass last took records */
	uint64_t page_period;        /* the live page's period while awake */
} le__wstate;

typedef struct le__shard {
	le__ring ring;                         /* queue.h */
	/* [atomic] 1 while the writer sleeps long (pace.c, idle): each
	 * record then wakes it, not only a batch.  The writer stores it
	 * when it goes idle and again when it wakes; every producer loads
	 * it, so it sits by the ring's read-mostly words, not on the
	 * signal line the writer writes at each nap. */
	_Atomic uint32_t idle;
	le__sitetab sites;                     /* sites.h: the descriptors
	                                          its deferred slots use */
	_Alignas(64) le__signal sig;
	_Alignas(64) le__progress prog;

	/* [const] */
	_Alignas(64) struct le_engine *e;
	uint32_t id;
	char dir[LE_PATH_MAX];       /* DIR/shard-NNN ("" without a store) */
	le__sink *sinks[LE_SINKS_MAX]; /* owned: freed with the shard */
	unsigned nsinks;
	struct le__store *store;     /* sinks[0], or NULL (store = 0) */
	pthread_t thread;
	int started;
	uint64_t cpu_ns;             /* the writer's CPU time when it ended */

	le__batch batch;             /* [writer] */
	le__wstate w;                /* [writer] */
	/* the sync thread (sync.c): started by the writer, for a store under
	 * LE_SYNC_INTERVAL or _BATCH */
	le__syncer syncer;
	/* [writer] the live counters page (statpage.c); the closing thread
	 * writes its last copy once the writer is joined */
	le__statpage page;
	int page_off;                /* [const] the page could not be made */
	/* The flight recorder's ring (backtrace.c), opened with the first
	 * recorder; valid once e->bt_ready is set. */
	le__btring bt;
	le__btdead bt_dead;          /* [le_open] a dead process's, to queue */
	_Atomic uint64_t bt_written; /* [atomic] its kept records queued */
} le__shard;

struct le_engine {
	/* [atomic] first (logengine.h, le__head): the root logger's
	 * threshold, loaded by every level macro; read-mostly, so on a line
	 * of its own, apart from the budget's CAS traffic. */
	struct le__head head;
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
	_Atomic int last_error;         /* most recent I/O error (le_stats) */

	/* [const] */
	_Alignas(64) le_config cfg;
	char dir[LE_PATH_MAX];
	uint32_t nshards;
	uint32_t shard_mask;            /* nshards - 1 when a power of two */
	uint64_t cap_rec, cap_bytes;
	uint32_t max_rec;
	uint32_t dsites;                /* deferred call sites per shard (0:
	                                   every call formats at once) */
	uint32_t batch;                 /* records per batch (engine.c) */
	uint64_t batch_payload;         /* payload bytes per batch (engine.c) */
	uint64_t wake_rec, wake_bytes;  /* producer wakes a sleeping writer */
	uint64_t urgent_rec, urgent_bytes; /* ... and a napping one */
	int use_tsc;                    /* slots carry TSC ticks (clock.h) */
	int lock_fd;
	le__shard *shards;
	/* the line outputs (sink/kinds.h), by kind; NULL: not asked for */
	le__linesink *lines[LE_LINEKINDS];
	struct le__loggers *loggers;    /* logger.h: named loggers */
	uint64_t config_errors;         /* settings le_open left out */
	char *strs;                     /* owned copies of cfg's strings */
	le__reaper reaper;              /* started when retention_bytes */
	le__archiver archiver;          /* started when archive_* */
	le__rlreg rl;                   /* rlreg.h: the _every sites */

	/* le_flush waiters sleep on flush_cv (CLOCK_MONOTONIC); writers
	 * signal when flush_waiters is nonzero. */
	pthread_mutex_t flush_mu;
	pthread_cond_t flush_cv;
	_Atomic int flush_waiters;

	/* The flight recorder (backtrace.c). */
	_Atomic int bt_ready;           /* [atomic] every shard's ring is
	                                   open: set (release) under log_mu
	                                   before a recorder is published */
	int bt_trigger;                 /* [const] backtrace_trigger */
	_Atomic uint64_t bt_lost;       /* [atomic] kept records the queue
	                                   had no room for when written out */
};

/* le__signal.sleeping: a sleeping writer waits for the producers (or
 * flush_ms); a napping one looks again on its own clock, and only a queue
 * half full, a full one, a flush or a close ends its nap early. */
#define LE_ASLEEP 1u
#define LE_NAPPING 2u

/* Nonzero while the calling thread must not wait for queue room: a
 * writer's own records (ratelimit.c's sweep), room for which only a
 * writer could make.  reserve_slow (submit.c) then returns LE_EFULL at
 * once and counts no drop: the caller keeps what it had to say and tries
 * again. */
extern _Thread_local int le__nowait;

/* What a producer's record asks of the writer (le__wake_queued): nothing,
 * a sleeping writer's wake-up (a batch is queued), or a napping one's too
 * (the queue is half full). */
enum { LE_WAKE_NONE, LE_WAKE_ASLEEP, LE_WAKE_ANY };

/*
 * The records a shard holds, for a producer's wake-up decision: the
 * budget word b counts the whole engine's, so with several shards a
 * writer judged by it would be woken while its own ring holds a fraction
 * of a batch.  There is no per-shard count (it would be one more shared
 * line written by every record), so the engine's records are shared out
 * by ring bytes: the shard's `used` ring bytes over the engine's, each
 * record taken as its payload and a slot header.  Slots are padded to
 * LE_SLOT_ALIGN, so for records of the engine's mean size this counts
 * at least the shard's records: its writer is woken no later than by its
 * own batch.  One it leaves asleep still wakes within flush_ms.
 * @return nonzero when the engine holds thr records or more and the
 * shard about thr or more.  Multiplications, no division; in 64 bits
 * (ring bytes < 2^33, records < 2^24, payload < 2^30: no overflow).
 */
static inline int le__shard_holds(const le_engine *e, uint64_t b,
                                  uint64_t used, uint64_t thr)
{
	uint64_t rec = b & LE_BUDGET_REC_MASK, bytes = b >> LE_BUDGET_REC_BITS;

	if (rec < thr)
		return 0;
	if (e->nshards == 1)
		return 1;
	return used * rec >= thr * (bytes + rec * LE_SLOT_HDR);
}

/* Wake the shard's writer if it sleeps or naps.  A plain load first: a producer
 * dropping records as fast as it can (queue full) calls this for every
 * drop, and must not take the shard's line exclusive each time while the
 * writer is awake. */
static inline void le__wake_writer(le__shard *sh)
{
	if (atomic_load_explicit(&sh->sig.sleeping, memory_order_relaxed) &&
	    atomic_exchange_explicit(&sh->sig.sleeping, 0, memory_order_seq_cst))
		le__futex_wake(&sh->sig.sleeping, 1);
}

/*
 * After publishing something the writer must see (a slot, a flush
 * request): wake the writer if it sleeps.  The read-modify-write on
 * `sleeping` orders our store before the writer's exchange that announces
 * its sleep or nap (one modification order for the word): either we read
 * it non-zero and wake it, or its exchange comes after ours and its look at the ring (or
 * at flush_req) sees our store.  No lost wake-up, and no fence.
 */
static inline void le__wake_after(le__shard *sh)
{
	if (atomic_fetch_add_explicit(&sh->sig.sleeping, 0,
	                              memory_order_acq_rel))
		le__wake_writer(sh);
}

/* le__wake_after for a published record that asks `want` (LE_WAKE_*): a
 * napping writer is left to its nap unless the queue is half full (a
 * wake-up lost to a nap is bounded by the nap). */
static inline void le__wake_queued(le__shard *sh, int want)
{
	uint32_t s = atomic_fetch_add_explicit(&sh->sig.sleeping, 0,
	                                       memory_order_acq_rel);
	if (s == LE_ASLEEP || (s == LE_NAPPING && want == LE_WAKE_ANY))
		le__wake_writer(sh);
}

#endif
