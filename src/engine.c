/*
 * engine.c -- le_open, the hot path (le_write, le_logf), le_flush,
 * le_stats_get and le_close.
 *
 * The hot path, in order:
 *   1. check arguments (no shared memory touched);
 *   2. take (1 record, len bytes) from the global budget: one CAS;
 *   3. reserve a slot in the shard's ring: one CAS;
 *   4. fill it (clock_gettime through the vDSO, memcpy) and publish it
 *      with a release store;
 *   5. only when the queue is filling up (uncommon): wake the shard's
 *      writer if it sleeps (a futex system call).
 * No lock, no malloc, no system call in the common case.  When the budget
 * or the ring is full: DROP counts the record and returns LE_EFULL; BLOCK
 * waits on a futex until a writer gives budget back.
 */
#define _GNU_SOURCE
#include "engine.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "fmt.h"
#include "os.h"

void le_config_init(le_config *c)
{
	memset(c, 0, sizeof *c);
	c->shards = 1;
	c->queue_capacity = 8192;
	c->queue_capacity_bytes = 1u << 20;
	c->max_record_bytes = 64u << 10;
	c->overflow = LE_OVERFLOW_DROP;
	c->oversize = LE_OVERSIZE_TRUNCATE;
	c->fields = LE_FIELD_ALL;
	c->segment_bytes = 64u << 20;
	c->batch_size = 2048;
	c->flush_ms = 50;
	c->max_pending_bytes = 1u << 20;
	c->durability = LE_SYNC_INTERVAL;
	c->sync_ms = 1000;
	c->checkpoint_ms = 1000;
	c->mapped_queue = 1;
	c->store = 1;
	c->stream_buffer_bytes = 1u << 20;
}

/* ---- futex ---- */

void le__futex_wait(_Atomic uint32_t *w, uint32_t val, uint64_t ns)
{
	struct timespec ts = {(time_t)(ns / 1000000000u),
	                      (long)(ns % 1000000000u)};
	syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT_PRIVATE, val, &ts, NULL,
	        0);
}

void le__futex_wake(_Atomic uint32_t *w, int n)
{
	syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

void le__wake_writer(le__shard *sh)
{
	/* A plain load first: a producer dropping records as fast as it can
	 * (queue full) calls this for every drop, and must not take the
	 * shard's line exclusive each time while the writer is awake. */
	if (atomic_load_explicit(&sh->sleeping, memory_order_relaxed) &&
	    atomic_exchange_explicit(&sh->sleeping, 0, memory_order_seq_cst))
		le__futex_wake(&sh->sleeping, 1);
}

/* ---- configuration ---- */

/* How long a blocked producer yields before it sleeps (see reserve). */
#define LE_BLOCK_SPIN_NS 1000000u

#define BAD(...)                                                              \
	do {                                                                  \
		le__seterr(__VA_ARGS__);                                      \
		return LE_EINVAL;                                             \
	} while (0)

static int check_config(const le_config *c)
{
	if (c->store != 0 && c->store != 1)
		BAD("store: %d is neither 0 nor 1", c->store);
	if (!c->store && c->stream_fd <= 0)
		BAD("store: 0 needs a stream_fd (records must go somewhere)");
	if (c->stream_fd < 0)
		BAD("stream_fd: %d is not a descriptor (0 means none)",
		    c->stream_fd);
	if (c->stream_format < LE_STREAM_RAW || c->stream_format > LE_STREAM_JSON)
		BAD("stream_format: %d is not LE_STREAM_RAW, _TEXT or _JSON",
		    c->stream_format);
	if (c->stream_sync != 0 && c->stream_sync != 1)
		BAD("stream_sync: %d is neither 0 nor 1", c->stream_sync);
	if (c->stream_fd > 0 && !c->stream_sync &&
	    (c->stream_buffer_bytes < 4096 || c->stream_buffer_bytes > (1u << 30)))
		BAD("stream_buffer_bytes: %u is not between 4096 and 2^30",
		    c->stream_buffer_bytes);
	if (c->stream_fd > 0 && fcntl(c->stream_fd, F_GETFL) < 0)
		BAD("stream_fd: %d is not an open descriptor", c->stream_fd);
	if (!c->store)
		goto no_dir;
	if (!c->dir || !c->dir[0])
		BAD("dir: must name a directory");
	if (strlen(c->dir) > LE_PATH_MAX - 64)
		BAD("dir: path longer than %d bytes", LE_PATH_MAX - 64);
	if (c->shards < 1 || c->shards > LE_MAX_SHARDS)
		BAD("shards: %u is not between 1 and %d", c->shards,
		    LE_MAX_SHARDS);
	if (c->queue_capacity < 1 || c->queue_capacity > LE_QUEUE_CAP_MAX)
		BAD("queue_capacity: %u is not between 1 and %u",
		    c->queue_capacity, LE_QUEUE_CAP_MAX);
	if (c->max_record_bytes < 1 ||
	    c->max_record_bytes > LE_MAX_RECORD_LIMIT)
		BAD("max_record_bytes: %u is not between 1 and %u",
		    c->max_record_bytes, LE_MAX_RECORD_LIMIT);
	if (c->queue_capacity_bytes < c->max_record_bytes ||
	    c->queue_capacity_bytes > LE_QUEUE_BYTES_MAX)
		BAD("queue_capacity_bytes: %llu is not between max_record_bytes"
		    " (%u) and %llu",
		    (unsigned long long)c->queue_capacity_bytes,
		    c->max_record_bytes, (unsigned long long)LE_QUEUE_BYTES_MAX);
	if (c->overflow != LE_OVERFLOW_DROP && c->overflow != LE_OVERFLOW_BLOCK)
		BAD("overflow: %d is neither LE_OVERFLOW_DROP nor "
		    "LE_OVERFLOW_BLOCK", c->overflow);
	if (c->oversize != LE_OVERSIZE_TRUNCATE &&
	    c->oversize != LE_OVERSIZE_REJECT)
		BAD("oversize: %d is neither LE_OVERSIZE_TRUNCATE nor "
		    "LE_OVERSIZE_REJECT", c->oversize);
	if (c->fields & ~LE_FIELD_ALL)
		BAD("fields: unknown bits 0x%x", c->fields & ~LE_FIELD_ALL);
	if (c->segment_bytes < 4096)
		BAD("segment_bytes: %llu is below 4096",
		    (unsigned long long)c->segment_bytes);
	if (c->batch_size < 1)
		BAD("batch_size: must be at least 1");
	if (c->flush_ms < 1 || c->flush_ms > 60000)
		BAD("flush_ms: %u is not between 1 and 60000", c->flush_ms);
	if (c->max_pending_bytes < 4096 || c->max_pending_bytes > (1u << 30))
		BAD("max_pending_bytes: %u is not between 4096 and 2^30",
		    c->max_pending_bytes);
	if (c->durability < LE_SYNC_NONE || c->durability > LE_SYNC_BATCH)
		BAD("durability: %d is not LE_SYNC_NONE, _INTERVAL or _BATCH",
		    c->durability);
	if (c->durability == LE_SYNC_INTERVAL && c->sync_ms < 1)
		BAD("sync_ms: must be at least 1 with LE_SYNC_INTERVAL");
no_dir:
	if (c->direct_io != 0 && c->direct_io != 1)
		BAD("direct_io: %d is neither 0 nor 1", c->direct_io);
	if (c->crash_flush_ms > 60000)
		BAD("crash_flush_ms: %u is above 60000", c->crash_flush_ms);
	if (c->mapped_queue != 0 && c->mapped_queue != 1)
		BAD("mapped_queue: %d is neither 0 nor 1", c->mapped_queue);
	if (c->create_dir != 0 && c->create_dir != 1)
		BAD("create_dir: %d is neither 0 nor 1", c->create_dir);
	return 0;
}

/* ---- open ---- */

static int open_dir(le_engine *e)
{
	struct stat st;
	char path[LE_PATH_MAX + 16];
	int rc;

	if (e->cfg.create_dir && mkdir(e->dir, 0777) < 0 && errno != EEXIST) {
		rc = -errno;
		le__seterr("dir: cannot create %s: %s", e->dir, strerror(errno));
		return rc;
	}
	rc = stat(e->dir, &st) < 0 ? -errno
	         : !S_ISDIR(st.st_mode) ? -ENOTDIR : 0;
	if (rc < 0) {
		le__seterr("dir: %s: %s", e->dir, strerror(-rc));
		return rc;
	}
	snprintf(path, sizeof path, "%s/LOCK", e->dir);
	e->lock_fd = le__open(path, O_RDWR | O_CREAT, 0644);
	if (e->lock_fd < 0) {
		le__seterr("dir: cannot create %s: %s", path,
		           strerror(-e->lock_fd));
		return e->lock_fd;
	}
	if (flock(e->lock_fd, LOCK_EX | LOCK_NB) < 0) {
		le__seterr("dir: %s is in use by another engine", e->dir);
		return errno == EWOULDBLOCK ? LE_EBUSY : -errno;
	}
	return 0;
}

/* Records a dead process queued in a shard this engine would not open
 * must not be left behind: refuse, and say how to get them out. */
static int check_orphans(le_engine *e)
{
	uint32_t *ids;
	size_t n;
	char path[LE_PATH_MAX + 32];
	int rc = le__shard_list(e->dir, &ids, &n);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < n; i++) {
		if (ids[i] < e->nshards)
			continue;
		snprintf(path, sizeof path, "%s/shard-%03u/QUEUE", e->dir, ids[i]);
		if (le__ring_file_busy(path, ids[i])) {
			le__seterr("shards: shard-%03u holds records a crashed "
			           "process queued; open with shards >= %u, or "
			           "run `logengine recover %s`", ids[i], ids[i] + 1,
			           e->dir);
			free(ids);
			return LE_EINVAL;
		}
	}
	free(ids);
	return 0;
}

static int shard_init(le_engine *e, uint32_t i)
{
	le__shard *sh = &e->shards[i];
	uint64_t size = le__ring_size_for(e->cap_rec, e->cap_bytes, e->max_rec);
	int rc;

	sh->e = e;
	sh->id = i;
	sh->fd = -1;
	sh->ckpt_fd = -1;
	le__clock_init(&sh->clock);
	if (!e->cfg.store) {
		/* stream_sync without a store: every record is written in the
		 * caller's thread and none is queued; the ring stays a page. */
		if (e->cfg.stream_sync)
			size = le__ring_size_for(1, 0, 0);
		rc = le__ring_open(&sh->ring, NULL, size, i);
		if (rc == 0)
			le__writer_note_clock(sh);
		return rc < 0 ? rc : le__writer_recover(sh);
	}
	rc = le__shard_dir(sh->dir, sizeof sh->dir, e->dir, i);
	if (rc < 0)
		return rc;
	if (mkdir(sh->dir, 0777) < 0 && errno != EEXIST) {
		rc = -errno;
		le__seterr("dir: cannot create %s: %s", sh->dir,
		           strerror(errno));
		return rc;
	}
	char qpath[LE_PATH_MAX + 16];
	snprintf(qpath, sizeof qpath, "%s/QUEUE", sh->dir);
	rc = le__ring_open(&sh->ring, e->cfg.mapped_queue ? qpath : NULL, size,
	                   i);
	if (rc < 0) {
		if (!le_errmsg()[0])
			le__seterr("queue: cannot map %llu bytes for shard %u",
			           (unsigned long long)size, i);
		return rc;
	}
	rc = le__writer_recover(sh);
	if (rc == 0 && e->cfg.mapped_queue) {
		/* A file a previous engine left is made anew once drained:
		 * whatever its words and positions say (a process that died
		 * of a wild write may have written over them), this engine
		 * starts from a clean ring. */
		rc = le__ring_renew(&sh->ring, qpath, size, i);
		/* Its positions may have started again at 0, and the
		 * writer's must follow, or it would wait at the old ring's
		 * head while records go in at 0. */
		le__writer_restart(sh);
	}
	/* Only now: a reused file's header held the dead process's clock,
	 * which recovery needed. */
	if (rc == 0)
		le__writer_note_clock(sh);
	return rc;
}

static void engine_free(le_engine *e)
{
	if (e->shards) {
		for (uint32_t i = 0; i < e->nshards; i++) {
			le__writer_free(&e->shards[i]);
			le__ring_close(&e->shards[i].ring);
		}
		free(e->shards);
	}
	if (e->lock_fd >= 0)
		le__close(e->lock_fd); /* drops the flock */
	if (e->forked) {
		/* A fork child's copies of the parent's threads' locks and
		 * condition variables: never destroyed, only forgotten.
		 * pthread_cond_destroy waits for the waiters it counts, and
		 * the copy counts the parent's (the stream thread's, a
		 * le_flush in another thread): a child's le_close hung there,
		 * found by a second reader.  Nor is the stream thread, which
		 * is not here, joined. */
		if (e->has_stream)
			le__stream_forget(&e->stream);
		free(e);
		return;
	}
	if (e->has_stream)
		le__stream_close(&e->stream);
	le__reaper_free(e);
	pthread_mutex_destroy(&e->flush_mu);
	pthread_cond_destroy(&e->flush_cv);
	free(e);
}

static void stop_writers(le_engine *e)
{
	atomic_store(&e->stopping, 1);
	for (uint32_t i = 0; e->shards && i < e->nshards; i++) {
		le__shard *sh = &e->shards[i];
		if (!sh->started)
			continue;
		atomic_store(&sh->sleeping, 0);
		le__futex_wake(&sh->sleeping, 1);
		pthread_join(sh->thread, NULL);
		sh->started = 0;
	}
	le__reaper_stop(e); /* after the writers: their last rotation */
}

static int open_engine(le_engine **out, const le_config *cfg);

/*
 * le_open creates and extends files in the caller's thread (the queue
 * file, a first segment).  Past ulimit -f the kernel would answer with
 * SIGXFSZ, whose default action kills the process; with it blocked (and a
 * signal we caused taken back) the call fails with EFBIG instead.
 */
int le_open(le_engine **out, const le_config *cfg)
{
	sigset_t xfsz, old, pend;
	sigemptyset(&xfsz);
	sigaddset(&xfsz, SIGXFSZ);
	pthread_sigmask(SIG_BLOCK, &xfsz, &old);
	sigpending(&pend);
	int was_pending = sigismember(&pend, SIGXFSZ);
	int rc = open_engine(out, cfg);
	sigpending(&pend);
	if (!was_pending && sigismember(&pend, SIGXFSZ)) {
		struct timespec zero = {0, 0};
		sigtimedwait(&xfsz, NULL, &zero);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

static int open_engine(le_engine **out, const le_config *cfg)
{
	le_engine *e;
	int rc;

	le__clearerr();
	if (!out || !cfg) {
		le__seterr("le_open: out and cfg must not be NULL");
		return LE_EINVAL;
	}
	*out = NULL;
	rc = check_config(cfg);
	if (rc < 0)
		return rc;
	if (posix_memalign((void **)&e, 64, sizeof *e) != 0)
		return LE_ENOMEM;
	memset(e, 0, sizeof *e);
	e->lock_fd = -1;
	pthread_mutex_init(&e->flush_mu, NULL);
	pthread_cond_init(&e->flush_cv, NULL);
	e->cfg = *cfg;
	snprintf(e->dir, sizeof e->dir, "%s", cfg->dir ? cfg->dir : "");
	e->cfg.dir = e->dir;
	e->nshards = cfg->shards;
	e->shard_mask = (e->nshards & (e->nshards - 1)) ? 0 : e->nshards - 1;
	e->cap_rec = cfg->queue_capacity;
	e->cap_bytes = cfg->queue_capacity_bytes;
	e->max_rec = cfg->max_record_bytes;
	/* Wake a sleeping writer once a batch's worth is queued, or the queue
	 * is half full, whichever comes first. */
	/* A batch holds at most a quarter of the queue, so producers keep
	 * room while it is written (at the whole queue, each write stalls
	 * every producer: measured in docs/BENCHMARKS.md). */
	e->batch = cfg->batch_size;
	if (e->batch > e->cap_rec / 4)
		e->batch = e->cap_rec / 4 ? (uint32_t)(e->cap_rec / 4) : 1;
	e->wake_rec = e->batch;
	e->wake_bytes = cfg->max_pending_bytes / 2;
	if (e->wake_bytes > e->cap_bytes / 2)
		e->wake_bytes = e->cap_bytes / 2;

	e->use_tsc = le__tsc_usable();
	if (cfg->store) {
		rc = open_dir(e);
		if (rc < 0)
			goto fail;
		rc = check_orphans(e);
		if (rc < 0)
			goto fail;
	}
	if (cfg->stream_fd > 0) {
		rc = le__stream_open(&e->stream, cfg);
		e->has_stream = 1;
		if (rc < 0)
			goto fail;
	}
	rc = posix_memalign((void **)&e->shards, 64,
	                    e->nshards * sizeof *e->shards);
	if (rc != 0) {
		e->shards = NULL;
		rc = LE_ENOMEM;
		goto fail;
	}
	memset(e->shards, 0, e->nshards * sizeof *e->shards);
	for (uint32_t i = 0; i < e->nshards; i++) {
		e->shards[i].fd = -1;
		e->shards[i].ckpt_fd = -1;
	}
	for (uint32_t i = 0; i < e->nshards; i++) {
		rc = shard_init(e, i);
		if (rc < 0)
			goto fail;
	}
	/* Writers and the reaper block every signal (inherited from this
	 * mask).  The reaper first: a writer may rotate at once. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (cfg->store && cfg->retention_bytes) {
		rc = le__reaper_start(e);
		if (rc < 0)
			le__seterr("le_open: cannot start the retention thread");
	}
	/* stream_sync without a store queues nothing: no writer needed. */
	int writers = cfg->store || !cfg->stream_sync;
	for (uint32_t i = 0; rc >= 0 && writers && i < e->nshards; i++) {
		le__shard *sh = &e->shards[i];
		rc = -pthread_create(&sh->thread, NULL, le__writer_main, sh);
		if (rc < 0) {
			le__seterr("le_open: cannot start writer %u", i);
			break;
		}
		char name[32]; /* "le-writer-255" at most: shards <= 256 */
		snprintf(name, sizeof name, "le-writer-%u", i);
		le__name_thread(sh->thread, name);
		sh->started = 1;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc < 0)
		goto fail;
	rc = le__register(e);
	if (rc < 0)
		goto fail;
	if (cfg->crash_flush_ms)
		le__crash_install();
	*out = e;
	return 0;
fail:
	stop_writers(e);
	engine_free(e);
	return rc;
}

/* ---- hot path ---- */

static void note_hwm(le_engine *e, uint64_t b)
{
	uint64_t rec = b & LE_BUDGET_REC_MASK, bytes = b >> LE_BUDGET_REC_BITS;
	uint64_t h = atomic_load_explicit(&e->hwm_rec, memory_order_relaxed);

	while (rec > h && !atomic_compare_exchange_weak_explicit(
		                  &e->hwm_rec, &h, rec, memory_order_relaxed,
		                  memory_order_relaxed))
		;
	h = atomic_load_explicit(&e->hwm_bytes, memory_order_relaxed);
	while (bytes > h && !atomic_compare_exchange_weak_explicit(
		                    &e->hwm_bytes, &h, bytes,
		                    memory_order_relaxed, memory_order_relaxed))
		;
}

/* Budget for len payload bytes and `need` ring bytes for one slot, or
 * NULL (record dropped, or the engine is closing). */
static le__slot *reserve(le_engine *e, le__shard *sh, uint32_t len,
                         uint32_t need, int *rc, int *wake)
{
	uint64_t b, used, spin_from = 0;
	le__slot *s;
	unsigned yields = 0;

	for (;;) {
		b = le__budget_take(&e->budget, len, e->cap_rec, e->cap_bytes);
		if (b) {
			s = le__ring_reserve(&sh->ring, need, &used);
			if (s)
				break;
			/* The ring is sized so this cannot happen while the
			 * budget allows; give the budget back if it does. */
			le__budget_give(&e->budget, 1, len);
		}
		if (e->cfg.overflow == LE_OVERFLOW_DROP ||
		    atomic_load_explicit(&e->closing, memory_order_relaxed)) {
			atomic_fetch_add_explicit(&sh->dropped_pending, 1,
			                          memory_order_relaxed);
			atomic_fetch_add_explicit(&sh->dropped_full, 1,
			                          memory_order_relaxed);
			le__wake_writer(sh);
			*rc = LE_EFULL;
			return NULL;
		}
		/* BLOCK: wait until a writer gives budget back.  A busy writer
		 * frees a batch (up to a quarter of the queue) every few
		 * hundred microseconds, so yield for up to LE_BLOCK_SPIN_NS
		 * before a futex sleep: on a VM, waking a sleeping thread
		 * whose CPU went idle took long enough that the writer ran
		 * out of records a quarter of the time (1M x 128 B: writer
		 * busy 73-82% with 64 yields, 90-96% yielding ~1 ms). */
		if (!spin_from) {
			atomic_fetch_add_explicit(&e->blocked, 1,
			                          memory_order_relaxed);
			le__wake_writer(sh);
			spin_from = le__mono_ns();
		}
		/* the clock only every 16 yields: the yield is the wait */
		if ((++yields & 15) ||
		    le__mono_ns() - spin_from < LE_BLOCK_SPIN_NS) {
			sched_yield();
			continue;
		}
		uint32_t seq = atomic_load(&e->space_seq);
		atomic_fetch_add(&e->block_waiters, 1);
		le__wake_writer(sh);
		b = le__budget_take(&e->budget, len, e->cap_rec, e->cap_bytes);
		if (b) {
			atomic_fetch_sub(&e->block_waiters, 1);
			s = le__ring_reserve(&sh->ring, need, &used);
			if (s)
				break;
			le__budget_give(&e->budget, 1, len);
			continue;
		}
		le__futex_wait(&e->space_seq, seq, 10 * 1000000u);
		atomic_fetch_sub(&e->block_waiters, 1);
	}
	if ((b & LE_BUDGET_REC_MASK) >
	            atomic_load_explicit(&e->hwm_rec, memory_order_relaxed) ||
	    (b >> LE_BUDGET_REC_BITS) >
	            atomic_load_explicit(&e->hwm_bytes, memory_order_relaxed))
		note_hwm(e, b);
	/* Uncommon: the queue is filling; the caller makes sure the writer
	 * is awake once the slot is published.  Below the threshold a
	 * sleeping writer wakes by itself within flush_ms. */
	*wake = (b & LE_BUDGET_REC_MASK) >= e->wake_rec || used >= e->wake_bytes;
	return s;
}

/*
 * After publishing, when the queue is filling: wake the writer if it
 * sleeps.  The read-modify-write on `sleeping` orders our publication
 * before the writer's exchange that announces its sleep (one modification
 * order for the word): either we read 1 and wake it, or its exchange
 * comes after ours and its look at the ring sees our slot.  No lost
 * wake-up, and no fence on the common path.
 */
static void publish_and_wake(le__shard *sh, le__slot *s, int wake)
{
	le__slot_publish(s);
	if (wake && atomic_fetch_add_explicit(&sh->sleeping, 0,
	                                      memory_order_acq_rel))
		le__wake_writer(sh);
}

static le__shard *route(le_engine *e, uint64_t key)
{
	if (e->nshards == 1)
		return &e->shards[0];
	if (e->shard_mask)
		return &e->shards[key & e->shard_mask];
	return &e->shards[key % e->nshards];
}

/* Cut len to max_record_bytes or refuse it; *flags gets LE_REC_TRUNCATED.
 * Notes the largest payload (a shared line read by every call, written
 * only when a record is larger than all before it). */
static int clip(le_engine *e, size_t *len, uint8_t *flags)
{
	if (*len <= e->max_rec) {
		uint64_t h = atomic_load_explicit(&e->hwm_len,
		                                  memory_order_relaxed);
		while (*len > h && !atomic_compare_exchange_weak_explicit(
			                   &e->hwm_len, &h, *len,
			                   memory_order_relaxed, memory_order_relaxed))
			;
		return 0;
	}
	if (e->cfg.oversize == LE_OVERSIZE_REJECT) {
		atomic_fetch_add_explicit(&e->rejected, 1, memory_order_relaxed);
		return LE_ETOOBIG;
	}
	atomic_fetch_add_explicit(&e->truncated, 1, memory_order_relaxed);
	*len = e->max_rec;
	*flags = LE_REC_TRUNCATED;
	atomic_store_explicit(&e->hwm_len, e->max_rec, memory_order_relaxed);
	return 0;
}

static void fill(le_engine *e, le__slot *s, int level, uint8_t flags,
                 uint32_t len)
{
	s->len = len;
	s->seq = 0; /* the writer's; stale from the last lap until then */
	s->ts = le__stamp(e->use_tsc);
	s->level = (uint8_t)level;
	s->flags = flags;
}

/* stream_sync: the line goes out in the caller's thread, blocking. */
static int write_sync(le_engine *e, int level, uint8_t flags,
                      const void *payload, size_t len)
{
	unsigned char small[4096], *b = small;
	size_t cap = le__stream_line_max(len);
	if (cap > sizeof small && !(b = malloc(cap)))
		return LE_ENOMEM;
	size_t n = le__stream_format(b, cap > sizeof small ? cap : sizeof small,
	                             e->cfg.stream_format, le__now_ns(), level,
	                             0, 0, flags, payload, (uint32_t)len);
	int rc = le__stream_write_sync(&e->stream, b, n);
	if (b != small)
		free(b);
	return rc;
}

int le_write(le_engine *e, uint64_t route_key, int level, const void *payload,
             size_t len)
{
	uint8_t flags = 0;
	int rc, wake;

	if (!e || level < LE_TRACE || level > LE_FATAL || (!payload && len))
		return LE_EINVAL;
	if (atomic_load_explicit(&e->closing, memory_order_relaxed))
		return LE_ECLOSED;
	rc = clip(e, &len, &flags);
	if (rc < 0)
		return rc;
	if (e->cfg.stream_sync && e->cfg.stream_fd > 0) {
		rc = write_sync(e, level, flags, payload, len);
		if (rc < 0 || !e->cfg.store)
			return rc;
	}
	le__shard *sh = route(e, route_key);
	le__slot *s = reserve(e, sh, (uint32_t)len,
	                      le__slot_bytes((uint32_t)len), &rc, &wake);
	if (!s)
		return rc;
	fill(e, s, level, flags, (uint32_t)len);
	if (len)
		memcpy(s + 1, payload, len);
	publish_and_wake(sh, s, wake);
	return 0;
}

/* Route key of the calling thread for le_logf: a number fixed per thread,
 * so one thread's formatted records stay in order in one shard. */
static _Atomic uint64_t next_thread_key;
static _Thread_local uint64_t thread_key;

static uint64_t my_key(void)
{
	if (!thread_key)
		thread_key = atomic_fetch_add(&next_thread_key, 1) + 1;
	return thread_key - 1;
}

int le_vlogf(le_engine *e, int level, const char *fmt, va_list ap)
{
	char small[512];
	va_list ap2;
	uint8_t flags = 0;
	int rc, wake;

	if (!e || !fmt || level < LE_TRACE || level > LE_FATAL)
		return LE_EINVAL;
	if (atomic_load_explicit(&e->closing, memory_order_relaxed))
		return LE_ECLOSED;
	va_copy(ap2, ap);
	int n = le__vsnprintf(small, sizeof small, fmt, ap); /* src/fmt.c */
	if (n < 0) {
		va_end(ap2);
		return LE_EINVAL;
	}
	size_t len = (size_t)n;
	rc = clip(e, &len, &flags);
	if (rc < 0) {
		va_end(ap2);
		return rc;
	}
	if (e->cfg.stream_sync && e->cfg.stream_fd > 0) {
		char *t = small;
		if ((size_t)n >= sizeof small) {
			va_list ap3;
			va_copy(ap3, ap2);
			t = malloc(len + 1);
			if (t)
				le__vsnprintf(t, len + 1, fmt, ap3);
			va_end(ap3);
		}
		rc = t ? write_sync(e, level, flags, t, len) : LE_ENOMEM;
		if (t != small)
			free(t);
		if (rc < 0 || !e->cfg.store) {
			va_end(ap2);
			return rc;
		}
	}
	le__shard *sh = route(e, my_key());
	/* One ring byte more than the payload: vsnprintf's terminating NUL
	 * must land inside this slot, never in the next one. */
	uint32_t need = le__slot_bytes((uint32_t)len + 1);
	le__slot *s = reserve(e, sh, (uint32_t)len, need, &rc, &wake);
	if (!s) {
		va_end(ap2);
		return rc;
	}
	if ((size_t)n < sizeof small)
		memcpy(s + 1, small, len);
	else
		le__vsnprintf((char *)(s + 1), len + 1, fmt, ap2);
	va_end(ap2);
	fill(e, s, level, flags, (uint32_t)len);
	publish_and_wake(sh, s, wake);
	return 0;
}

int le_logf(le_engine *e, int level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = le_vlogf(e, level, fmt, ap);
	va_end(ap);
	return rc;
}

/* ---- flush, stats, close ---- */

static int flush_done(le_engine *e, const uint64_t *target)
{
	for (uint32_t i = 0; i < e->nshards; i++)
		if (atomic_load(&e->shards[i].done_pos) < target[i])
			return 0;
	return 1;
}

int le_flush(le_engine *e, int timeout_ms)
{
	uint64_t target[LE_MAX_SHARDS];
	struct timespec dl;
	int rc = 0;

	if (!e)
		return LE_EINVAL;
	for (uint32_t i = 0; i < e->nshards; i++) {
		le__shard *sh = &e->shards[i];
		target[i] = atomic_load(sh->ring.head);
		uint64_t cur = atomic_load(&sh->flush_req);
		while (cur < target[i] &&
		       !atomic_compare_exchange_weak(&sh->flush_req, &cur,
		                                     target[i]))
			;
		le__wake_writer(sh);
		/* A busy writer naps without saying so (writer.c, nap): end
		 * the nap, which would otherwise add up to LE_BUSY_NAP_NS
		 * (200 us) to this call.  A system call, but le_flush waits
		 * anyway; the nap's futex word is `sleeping` at 0. */
		le__futex_wake(&sh->sleeping, 1);
	}
	clock_gettime(CLOCK_REALTIME, &dl);
	if (timeout_ms >= 0) {
		dl.tv_sec += timeout_ms / 1000;
		dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
		if (dl.tv_nsec >= 1000000000) {
			dl.tv_sec++;
			dl.tv_nsec -= 1000000000;
		}
	}
	pthread_mutex_lock(&e->flush_mu);
	atomic_fetch_add(&e->flush_waiters, 1);
	while (!flush_done(e, target)) {
		int w = timeout_ms >= 0
		                ? pthread_cond_timedwait(&e->flush_cv,
		                                         &e->flush_mu, &dl)
		                : pthread_cond_wait(&e->flush_cv, &e->flush_mu);
		if (w == ETIMEDOUT && !flush_done(e, target)) {
			rc = LE_ETIMEDOUT;
			break;
		}
	}
	atomic_fetch_sub(&e->flush_waiters, 1);
	pthread_mutex_unlock(&e->flush_mu);
	if (rc == 0 && e->has_stream && !e->cfg.store &&
	    !le__stream_drained(&e->stream, timeout_ms))
		rc = LE_ETIMEDOUT;
	/* Report an I/O failure that happened since the previous flush. */
	uint64_t errs = atomic_load(&e->errors_total);
	uint64_t seen = atomic_exchange(&e->errors_seen, errs);
	if (rc == 0 && errs != seen) {
		int le = atomic_load(&e->last_error);
		rc = le ? le : LE_EIO;
	}
	return rc;
}

/* CPU time of one of the engine's threads, now; 0 in a fork child, where
 * the thread does not exist. */
static uint64_t thread_cpu_ns(const le_engine *e, pthread_t t)
{
	clockid_t cid;
	struct timespec ts;

	if (e->forked || pthread_getcpuclockid(t, &cid) != 0 ||
	    clock_gettime(cid, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int le_stats_get(le_engine *e, le_stats *o)
{
	if (!e || !o)
		return LE_EINVAL;
	memset(o, 0, sizeof *o);
	uint64_t b = atomic_load(&e->budget);
	o->queue_records = b & LE_BUDGET_REC_MASK;
	o->queue_bytes = b >> LE_BUDGET_REC_BITS;
	for (uint32_t i = 0; i < e->nshards; i++) {
		le__shard *sh = &e->shards[i];
		o->accepted += atomic_load(&sh->consumed);
		o->dropped_full += atomic_load(&sh->dropped_full);
		o->dropped_io += atomic_load(&sh->dropped_io);
		o->written += atomic_load(&sh->written);
		o->bytes_written += atomic_load(&sh->bytes_written);
		o->markers += atomic_load(&sh->markers);
		o->segments_created += atomic_load(&sh->segments_created);
		o->segments_deleted += atomic_load(&sh->segments_deleted);
		o->syncs += atomic_load(&sh->syncs);
		o->checkpoints += atomic_load(&sh->checkpoints);
		o->write_errors += atomic_load(&sh->write_errors);
		o->sync_errors += atomic_load(&sh->sync_errors);
		o->recovered_truncated_bytes +=
		        atomic_load(&sh->recovered_truncated);
		if (sh->started)
			o->writer_cpu_ns += thread_cpu_ns(e, sh->thread);
		else
			o->writer_cpu_ns += sh->cpu_ns; /* joined: le_close_stats */
		o->recovered_records += atomic_load(&sh->recovered);
		o->abandoned_slots += atomic_load(&sh->abandoned);
		o->sync_lost += atomic_load(&sh->sync_lost);
	}
	o->accepted += o->queue_records + o->dropped_full;
	o->dropped = o->dropped_full + o->dropped_io;
	o->truncated = atomic_load(&e->truncated);
	o->rejected = atomic_load(&e->rejected);
	o->blocked = atomic_load(&e->blocked);
	o->queue_hwm_records = atomic_load(&e->hwm_rec);
	o->queue_hwm_bytes = atomic_load(&e->hwm_bytes);
	o->record_hwm_bytes = atomic_load(&e->hwm_len);
	o->last_error = atomic_load(&e->last_error);
	if (e->cfg.stream_fd > 0) {
		o->stream_lines = atomic_load(&e->stream.lines);
		o->stream_dropped = atomic_load(&e->stream.dropped);
		o->stream_bytes = atomic_load(&e->stream.bytes);
		if (e->stream.started)
			o->stream_cpu_ns = thread_cpu_ns(e, e->stream.thread);
		else
			o->stream_cpu_ns = e->stream.cpu_ns; /* joined */
		/* Stream only: the lines are the records written, so a line
		 * the sink threw away after its writer counted it written
		 * (its reader gone, or still buffered at close) is one
		 * dropped instead.  A snapshot taken while a batch is being
		 * handed over may see the discard first: never below 0. */
		uint64_t d = atomic_load(&e->stream.discarded);
		if (!e->cfg.store) {
			d = d < o->written ? d : o->written;
			o->written -= d;
			o->dropped_io += d;
			o->dropped += d;
		}
	}
	return 0;
}

int le_close(le_engine *e)
{
	return le_close_stats(e, NULL);
}

int le_close_stats(le_engine *e, le_stats *final)
{
	if (!e) {
		if (final)
			memset(final, 0, sizeof *final);
		return 0;
	}
	if (e->forked) {
		/* A fork child's copy: no threads here, and the files and the
		 * queue are the parent's.  Release our copies only. */
		if (final)
			le_stats_get(e, final);
		le__unregister(e);
		for (uint32_t i = 0; i < e->nshards; i++)
			e->shards[i].started = 0;
		e->reaper.started = 0;
		engine_free(e);
		return 0;
	}
	le__unregister(e);
	atomic_store(&e->closing, 1);
	/* Wake producers blocked for space: they see `closing` and give up. */
	atomic_fetch_add(&e->space_seq, 1);
	le__futex_wake(&e->space_seq, INT_MAX);
	stop_writers(e);
	if (e->has_stream)
		le__stream_stop(&e->stream); /* its last lines, or their count */
	if (final)
		le_stats_get(e, final); /* every thread joined: final */
	uint64_t errs = atomic_load(&e->errors_total);
	int rc = errs != atomic_load(&e->errors_seen)
	                 ? (atomic_load(&e->last_error) ? atomic_load(&e->last_error)
	                                                : LE_EIO)
	                 : 0;
	engine_free(e);
	return rc;
}
