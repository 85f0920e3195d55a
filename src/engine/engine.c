/*
 * engine.c -- le_open, le_stats_get, le_close.
 *
 * le_open checks the configuration (config.c: every refusal names its
 * field), takes the directory's lock, and builds each shard: its ring
 * (the QUEUE file), its sinks (the segment store, a port of each line
 * output), its recovery (recover.c), then starts the writers.  le_close
 * stops them (each drains its ring through its sinks), then frees
 * everything.
 */
#define _GNU_SOURCE
#include "engine/ratelimit.h"
#include "engine/engine.h"
#include "engine/shard.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine/config.h"
#include "store/index.h"
#include "engine/logger.h"
#include "engine/backtrace.h"
#include "engine/dflt.h"
#include "engine/recover.h"
#include "engine/flush.h"
#include "engine/lifecycle.h"
#include "engine/shard_page.h"
#include "store/store.h"
#include "sink/kinds.h"
#include "engine/writer.h"

/* ---- open ---- */

static int open_dir(le_engine *e)
{
	char path[LE_PATH_MAX + 16];
	int rc;

	if (e->cfg.create_dir &&
	    (rc = le__mkdir(e->dir, e->cfg.dir_mode)) < 0 && rc != -EEXIST) {
		le__seterr("dir: cannot create %s: %s", e->dir, strerror(-rc));
		return rc;
	}
	/* The directory may be a symbolic link (the user named it); what is
	 * inside it may not (le__open_in). */
	rc = le__open_in(e->dir, LE_IN_ROOT, O_RDONLY | O_DIRECTORY, 0);
	if (rc < 0) {
		if (rc != LE_EUNSAFE)
			le__seterr("dir: %s: %s", e->dir, le_strerror(rc));
		return rc;
	}
	le__close(rc);
	snprintf(path, sizeof path, "%s/LOCK", e->dir);
	e->lock_fd = le__open_in(path, LE_IN_DIR, O_RDWR | O_CREAT,
	                         e->cfg.file_mode);
	if (e->lock_fd < 0) {
		if (e->lock_fd != LE_EUNSAFE)
			le__seterr("dir: cannot create %s: %s", path,
			           le_strerror(e->lock_fd));
		return e->lock_fd;
	}
	if ((rc = le__flock(e->lock_fd, LOCK_EX | LOCK_NB)) < 0) {
		if (rc != -EWOULDBLOCK) {
			le__seterr("dir: cannot lock %s/LOCK: %s", e->dir,
			           strerror(-rc));
			return rc;
		}
		le__seterr("dir: %s is in use by another engine", e->dir);
		return LE_EBUSY;
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


/* ---- shards ---- */

static int add_sink(le__shard *sh, le__sink *s)
{
	sh->sinks[sh->nsinks++] = s;
	return 0;
}

/* The shard's ring, sinks and recovery; on failure the caller frees what
 * was made (engine_free). */
static int shard_init(le_engine *e, uint32_t i)
{
	le__shard *sh = &e->shards[i];
	int csum = e->cfg.store && e->cfg.mapped_queue && e->cfg.queue_checksum;
	uint64_t size = le__ring_size_for(e->cap_rec, e->cap_bytes, e->max_rec,
	                                  csum);
	char qpath[LE_PATH_MAX + 16], spath[LE_PATH_MAX + 16];
	int rc;

	sh->e = e;
	sh->id = i;
	pthread_mutex_init(&sh->prog.fail_mu, NULL);
	sh->prog.wake = le__flush_wake;
	sh->prog.wake_arg = sh->e;
	le__clock_init(&sh->w.clock);
	if (e->cfg.store) {
		rc = le__shard_dir(sh->dir, sizeof sh->dir, e->dir, i);
		if (rc < 0)
			return rc;
		rc = le__mkdir(sh->dir, e->cfg.dir_mode);
		if (rc < 0 && rc != -EEXIST) {
			le__seterr("dir: cannot create %s: %s", sh->dir,
			           strerror(-rc));
			return rc;
		}
		rc = le__open_in(sh->dir, LE_IN_DIR, O_RDONLY | O_DIRECTORY, 0);
		if (rc < 0) {
			if (rc != LE_EUNSAFE)
				le__seterr("dir: %s: %s", sh->dir,
				           le_strerror(rc));
			return rc;
		}
		le__close(rc);
		snprintf(qpath, sizeof qpath, "%s/QUEUE", sh->dir);
		snprintf(spath, sizeof spath, "%s/SITES", sh->dir);
	}
	rc = le__ring_open(&sh->ring,
	                   e->cfg.store && e->cfg.mapped_queue ? qpath : NULL,
	                   size, i, e->cfg.file_mode, csum);
	if (rc < 0) {
		if (!le_errmsg()[0])
			le__seterr("queue: cannot map %llu bytes for shard %u",
			           (unsigned long long)size, i);
		return rc;
	}
	/* The dead process's descriptors stay while its queue does. */
	rc = le__sitetab_open(&sh->sites,
	                      e->cfg.store && e->cfg.mapped_queue ? spath : NULL,
	                      e->dsites, i, sh->ring.reused, e->cfg.file_mode);
	if (rc < 0)
		return rc;
	if (e->cfg.store) {
		rc = le__store_new(&sh->store, &e->cfg, i, sh->dir, &e->reaper,
		                   &e->last_error);
		if (rc < 0)
			return rc;
		sh->store->archiver = &e->archiver;
		add_sink(sh, &sh->store->sink);
	}
	for (int k = 0; k < LE_LINEKINDS; k++) {
		le__sink *p;
		if (!e->lines[k])
			continue;
		rc = le__linesink_port(&p, e->lines[k], i, e->batch, e->max_rec);
		if (rc < 0)
			return rc;
		add_sink(sh, p);
	}
	rc = le__writer_init(sh);
	if (rc < 0)
		return rc;
	if (sh->store) {
		rc = le__recover_store(sh->store);
		if (rc < 0)
			return rc;
		sh->w.next_seq = sh->store->next_seq;
		sh->w.last_ts = sh->store->last_ts;
	} else {
		sh->w.next_seq = 1;
	}
	rc = le__recover_queue(sh);
	if (rc == 0 && sh->store && e->cfg.mapped_queue)
		rc = le__bt_recover(sh); /* backtrace.c: while SITES is the dead one's */
	if (rc == 0 && sh->store && e->cfg.mapped_queue) {
		/* A file a previous engine left is made anew once drained:
		 * whatever its words and positions say (a process that died
		 * of a wild write may have written over them), this engine
		 * starts from a clean ring. */
		rc = le__ring_renew(&sh->ring, qpath, size, i);
		if (rc == 0)
			rc = le__sitetab_renew(&sh->sites, spath, e->dsites, i);
	}
	/* The ring's positions may have started again at 0: the writer's
	 * follow, and recovery's failures (reported by le_open) are not
	 * this engine's records. */
	le__writer_restart(sh);
	/* Only now: a reused file's header held the dead process's clock,
	 * which recovery needed. */
	if (rc == 0) {
		le__writer_note_clock(sh);
		le__ring_mark(&sh->ring, sh->w.rd, sh->w.next_seq);
	}
	return rc;
}

static void shard_free(le__shard *sh, int forked)
{
	for (unsigned k = 0; k < sh->nsinks; k++)
		sh->sinks[k]->ops->free(sh->sinks[k]);
	sh->nsinks = 0;
	le__writer_free(sh);
	le__ring_close(&sh->ring);
	le__sitetab_close(&sh->sites);
	free(sh->bt_dead.buf); /* le_open failed before queueing it */
	if (sh->e && !forked)
		pthread_mutex_destroy(&sh->prog.fail_mu);
}

static void engine_free(le_engine *e)
{
	le__bt_close(e);
	for (uint32_t i = 0; e->shards && i < e->nshards; i++)
		shard_free(&e->shards[i], e->forked);
	free(e->shards);
	if (e->lock_fd >= 0)
		le__close(e->lock_fd); /* drops the flock */
	if (e->forked) {
		/* A fork child's copies of the parent's threads' locks and
		 * condition variables: never destroyed, only forgotten.
		 * pthread_cond_destroy waits for the waiters it counts, and
		 * the copy counts the parent's (a line output's thread, a
		 * le_flush in another thread).  Nor are the line outputs'
		 * threads, which are not here, joined. */
		for (int k = 0; k < LE_LINEKINDS; k++)
			le__linesink_forget(e->lines[k]);
		le__loggers_free(e);
		free(e->strs);
		free(e);
		return;
	}
	for (int k = 0; k < LE_LINEKINDS; k++)
		le__linesink_close(e->lines[k]);
	le__loggers_free(e);
	free(e->strs);
	le__reaper_free(&e->reaper);
	le__archiver_free(&e->archiver);
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
		atomic_store(&sh->sig.sleeping, 0);
		le__futex_wake(&sh->sig.sleeping, 1);
		pthread_join(sh->thread, NULL);
		sh->started = 0;
	}
	le__reaper_stop(&e->reaper); /* after the writers: their last rotation */
	le__archiver_stop(&e->archiver); /* what waits is left for next time */
	le__index_wait_dir(e->dir); /* the indexes of their last seals */
	le__shard_page_close_all(e); /* after both: the final counts */
}

/* Each shard's live page, made in this thread so that le_errmsg can say
 * which one is off and why (the first; le_open still succeeds). */
static void open_pages(le_engine *e)
{
	char first[512] = "";

	for (uint32_t i = 0; i < e->nshards; i++) {
		le__shard *sh = &e->shards[i];
		sh->page_off = le__shard_page_open(sh) < 0;
		if (sh->page_off && !first[0])
			snprintf(first, sizeof first, "%s", le_errmsg());
	}
	if (first[0])
		le__seterr("%s", first);
}

/* Writers and the reaper block every signal (inherited from this mask).
 * The reaper first: a writer may rotate at once. */
static int start_threads(le_engine *e)
{
	sigset_t all, old;
	int rc = 0;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (e->cfg.store && (e->cfg.retention_bytes || e->cfg.retention_age_ms)) {
		rc = le__reaper_start(&e->reaper, &e->last_error);
		if (rc < 0)
			le__seterr("le_open: cannot start the retention thread");
	}
	if (rc >= 0 && e->cfg.store &&
	    (e->cfg.archive_keep_segments || e->cfg.archive_after_ms)) {
		rc = le__archiver_start(&e->archiver, e->cfg.archive_level,
		                        &e->last_error);
		if (rc < 0)
			le__seterr("le_open: cannot start the archive thread");
	}
	for (uint32_t i = 0; rc >= 0 && i < e->nshards; i++) {
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
	return rc;
}

/* The engine's own copies of the strings of cfg it keeps (cfg may be
 * freed once le_open returns), in one allocation. */
static int copy_strings(le_engine *e)
{
	const char **str[] = {&e->cfg.levels, &e->cfg.stream_path,
	                      &e->cfg.syslog_addr, &e->cfg.syslog_app,
	                      &e->cfg.backtrace};
	size_t n = sizeof str / sizeof str[0], total = 0;

	for (size_t i = 0; i < n; i++)
		total += *str[i] ? strlen(*str[i]) + 1 : 0;
	if (!total)
		return 0;
	char *p = e->strs = malloc(total);
	if (!p)
		return LE_ENOMEM;
	for (size_t i = 0; i < n; i++) {
		if (!*str[i])
			continue;
		size_t k = strlen(*str[i]) + 1;
		memcpy(p, *str[i], k);
		*str[i] = p;
		p += k;
	}
	return 0;
}

/* Out of descriptors at shard i: say what the engine needs against the
 * process's limit, not only which file it could not open.  A running
 * shard keeps two (its segment and its checkpoint; QUEUE, SITES and the
 * live page are mappings), the engine one (LOCK), and opening one takes
 * a few more for a moment. */
static void fd_limit_error(le_engine *e, uint32_t i)
{
	char why[300];
	struct rlimit rl;
	unsigned long long lim = getrlimit(RLIMIT_NOFILE, &rl) == 0
	                                 ? (unsigned long long)rl.rlim_cur : 0;

	snprintf(why, sizeof why, "%s", le_errmsg());
	le__seterr("%s: %u shards need about %u descriptors besides the "
	           "program's own (2 a shard), and ulimit -n allows %llu "
	           "(out of them at shard %u): raise the limit or use fewer "
	           "shards", why, e->nshards, 2 * e->nshards + 5, lim, i);
}

static int open_engine(le_engine **out, const le_config *cfg)
{
	le_engine *e;
	pthread_condattr_t ca;
	int rc;

	le__clearerr();
	if (!out || !cfg) {
		le__seterr("le_open: out and cfg must not be NULL");
		return LE_EINVAL;
	}
	*out = NULL;
	rc = le__config_check(cfg);
	if (rc < 0)
		return rc;
	if (posix_memalign((void **)&e, 64, sizeof *e) != 0)
		return LE_ENOMEM;
	memset(e, 0, sizeof *e);
	e->lock_fd = -1;
	pthread_mutex_init(&e->flush_mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&e->flush_cv, &ca);
	pthread_condattr_destroy(&ca);
	e->cfg = *cfg;
	snprintf(e->dir, sizeof e->dir, "%s", cfg->dir ? cfg->dir : "");
	e->cfg.dir = e->dir;
	le__config_zeros(&e->cfg);
	rc = copy_strings(e);
	if (rc == 0)
		rc = le__loggers_open(e, &e->cfg);
	if (rc < 0)
		goto fail;
	e->nshards = cfg->shards;
	e->shard_mask = (e->nshards & (e->nshards - 1)) ? 0 : e->nshards - 1;
	e->cap_rec = cfg->queue_capacity;
	e->cap_bytes = cfg->queue_capacity_bytes;
	e->max_rec = cfg->max_record_bytes;
	e->dsites = e->cfg.deferred_sites == LE_DEFERRED_OFF
	                    ? 0 : e->cfg.deferred_sites;
	e->batch = le__config_batch(cfg);
	/* Like its records, a batch's payload is at most a quarter of the
	 * queue's: one that waited for max_pending_bytes in a queue not much
	 * larger would hold the whole queue while producers drop. */
	e->batch_payload = cfg->queue_capacity_bytes / 4;
	/* Wake a sleeping writer once a batch's worth is queued, or the
	 * queue is half full, whichever comes first. */
	e->wake_rec = e->batch;
	e->wake_bytes = cfg->max_pending_bytes / 2;
	if (e->wake_bytes > e->cap_bytes / 2)
		e->wake_bytes = e->cap_bytes / 2;
	/* A napping writer (pace.c) once the queue is half full: the nap
	 * was sized for a quarter of it at the rate seen before. */
	e->urgent_rec = e->cap_rec / 2 > e->wake_rec ? e->cap_rec / 2
	                                             : e->wake_rec;
	e->urgent_bytes = e->cap_bytes / 2 > e->wake_bytes ? e->cap_bytes / 2
	                                                   : e->wake_bytes;
	e->use_tsc = le__tsc_usable();
	le__rl_init(&e->rl);
	if (cfg->store) {
		rc = open_dir(e);
		if (rc == 0)
			rc = check_orphans(e);
		if (rc < 0)
			goto fail;
	}
	for (int k = 0; k < LE_LINEKINDS; k++) {
		const le__linekind *kind = le__linekinds[k];
		if (!kind->wanted(&e->cfg))
			continue;
		rc = kind->open(&e->lines[k], &e->cfg);
		if (rc < 0)
			goto fail;
		if (rc > 0) { /* a setting it cannot use: without this output */
			fprintf(stderr, "logengine: %s; no %s output\n",
			        le_errmsg(), kind->name);
			e->config_errors++;
		}
	}
	/* le__shard is 64-byte aligned (its groups on lines of their own):
	 * calloc promises 16. */
	if (posix_memalign((void **)&e->shards, 64,
	                   e->nshards * sizeof *e->shards) != 0) {
		e->shards = NULL;
		rc = LE_ENOMEM;
		goto fail;
	}
	memset(e->shards, 0, e->nshards * sizeof *e->shards);
	for (uint32_t i = 0; i < e->nshards; i++) {
		rc = shard_init(e, i);
		if (rc == -EMFILE)
			fd_limit_error(e, i);
		if (rc < 0)
			goto fail;
	}
	open_pages(e);
	rc = le__bt_open(e); /* backtrace.c: after the shards it maps in */
	if (rc == 0)
		rc = start_threads(e);
	if (rc == 0)
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

/*
 * le_open creates and extends files in the caller's thread (the queue
 * file, a first segment).  Past ulimit -f the kernel would answer with
 * SIGXFSZ, whose default action kills the process; with it blocked (and a
 * signal we caused taken back) the call fails with EFBIG instead.
 */
int le__engine_open(le_engine **out, const le_config *cfg)
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

/* ---- stats, close ---- */

int le__stats_get(le_engine *e, le_stats *o)
{
	if (!e || !o)
		return LE_EINVAL;
	memset(o, 0, sizeof *o);
	uint64_t b = atomic_load(&e->budget);
	o->queue_records = b & LE_BUDGET_REC_MASK;
	o->queue_bytes = b >> LE_BUDGET_REC_BITS;
	for (uint32_t i = 0; i < e->nshards; i++) {
		le__shard *sh = &e->shards[i];
		o->accepted += atomic_load(&sh->prog.consumed);
		for (int k = 0; k <= LE_FATAL; k++)
			o->level_records[k] += atomic_load(&sh->prog.by_level[k]);
		o->dropped_full += atomic_load(&sh->sig.dropped_full);
		o->recovered_records += atomic_load(&sh->prog.recovered);
		o->abandoned_slots += atomic_load(&sh->prog.abandoned);
		o->recovery_damaged += atomic_load(&sh->prog.damaged);
		o->live_pages_off += (uint64_t)sh->page_off;
		if (!sh->started)
			o->writer_cpu_ns += sh->cpu_ns; /* joined: le_close_stats */
		else if (!e->forked)
			o->writer_cpu_ns += le__thread_cpu_ns(sh->thread);
		for (unsigned k = 0; k < sh->nsinks; k++)
			if (sh->sinks[k]->ops->stats)
				sh->sinks[k]->ops->stats(sh->sinks[k], o);
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
	o->segments_archived = atomic_load(&e->archiver.archived);
	o->archived_bytes_in = atomic_load(&e->archiver.bytes_in);
	o->archived_bytes_out = atomic_load(&e->archiver.bytes_out);
	o->config_errors = e->config_errors;
	o->suppressed = atomic_load(&e->rl.suppressed);
	o->suppressed_summaries = atomic_load(&e->rl.summaries);
	for (uint32_t i = 0; i < e->nshards; i++)
		o->backtrace_written += atomic_load(&e->shards[i].bt_written);
	o->backtrace_dropped = le__bt_dropped(e);
	for (int k = 0; k < LE_LINEKINDS; k++)
		if (e->lines[k])
			e->lines[k]->kind->stats(e->lines[k], o, e->forked);
	return 0;
}

int le_reopen(le_engine *e)
{
	e = le__engine_or_default(e); /* dflt.c */
	if (!e)
		return LE_EINVAL;
	for (int k = 0; k < LE_LINEKINDS; k++)
		if (e->lines[k] && e->lines[k]->kind->reopen)
			e->lines[k]->kind->reopen(e->lines[k]);
	return 0;
}

int le_close(le_engine *e)
{
	return le__close_stats(e, NULL);
}

int le__close_stats(le_engine *e, le_stats *final)
{
	if (!e) {
		if (final)
			memset(final, 0, sizeof *final);
		return 0;
	}
	le__default_forget(e); /* dflt.c: NULL handles no longer reach e */
	le__unregister(e);
	if (e->forked) {
		/* A fork child's copy: no threads here, and the files and the
		 * queue are the parent's.  Release our copies only. */
		if (final)
			le__stats_get(e, final);
		for (uint32_t i = 0; i < e->nshards; i++)
			e->shards[i].started = 0;
		e->reaper.w.started = 0;
		e->archiver.w.started = 0;
		engine_free(e);
		return 0;
	}
	le__rl_close(e); /* pending summaries, while records are taken */
	atomic_store(&e->closing, 1);
	/* Wake producers blocked for space: they see `closing` and give up. */
	atomic_fetch_add(&e->space_seq, 1);
	le__futex_wake(&e->space_seq, INT_MAX);
	stop_writers(e);
	for (int k = 0; k < LE_LINEKINDS; k++)
		le__linesink_stop(e->lines[k]); /* last lines, or their count */
	if (final)
		le__stats_get(e, final); /* every thread joined: final */
	int rc = 0;
	for (uint32_t i = 0; i < e->nshards && !rc; i++)
		rc = le__fail_unreported(&e->shards[i]);
	engine_free(e);
	return rc;
}
