/*
 * store.c -- the segment store of one shard: its active segment's life
 * (create, reopen, seal, rotate), its syncs and checkpoints, and the
 * periodic tick (checkpoint, retention, rotation by age).  The store as a
 * sink -- frames put into the buffer and written, a failed write's frames
 * moved on -- is sink_store.c, which calls down into this file.
 *
 * Segment life:
 *
 *   create   file made, its name made durable (fsync of the directory,
 *            unless LE_SYNC_NONE: on the sync thread when it runs, before
 *            any record in the file counts durable), header put in the
 *            buffer
 *   append   put / commit, over and over (sink_store.c)
 *   seal     put stopped at segment_bytes (or age, or a failed sync):
 *            preallocated blocks cut, synced, closed, listed for
 *            retention; the sync and the close are the sync thread's
 *            when it runs (sync.h: it alone closes segment files then)
 *   delete   the oldest sealed ones while the shard is over
 *            retention_bytes or older than retention_age_ms, by the
 *            reaper thread (reaper.c)
 *
 * Syncs (LE_SYNC_INTERVAL, _BATCH) run on the shard's sync thread
 * (sync.c), which also writes the checkpoint once what it names is
 * synced; this file only hands it files, checkpoints and the written end.
 * A file whose sync failed there is not written again: the next commit
 * moves what it would have written to a new segment.  A failed fdatasync
 * is never retried (see le__store_sync).
 */
#define _GNU_SOURCE
#include "store/store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/index.h"
#include "base/internal.h"
#include "base/os.h"
#include "store/sync.h"

#define ALIGN LE_STORE_ALIGN
#define MS 1000000ull

/* Reserve the segment's blocks ahead of the writes: appending into
 * reserved blocks spares the file system an allocation per write.  As
 * much as the write rate asks: PREALLOC_MIN first, twice the last when
 * it lasted less than a second, half when it lasted more than ten, at
 * most PREALLOC; so a quiet log holds kilobytes it does not use, not
 * megabytes.  Failure is harmless: the write itself reports ENOSPC. */
#define PREALLOC (8u << 20)
#define PREALLOC_MIN (64u << 10)

/* ---- segment life ---- */

static int open_flags(const le__store *st)
{
	return O_WRONLY | (st->cfg->direct_io ? O_DIRECT : 0);
}

/* What was written and synced is the file's start: nothing yet. */
static void mark_empty(le__store *st)
{
	st->w_last_off = 0;
	st->ckpt_off = 0;
}

int le__store_create(le__store *st, uint64_t index)
{
	char path[LE_PATH_MAX];
	le__seg_hdr h = {
		.version = LE_SEG_VERSION,
		.fields = st->cfg->fields,
		.shard = st->shard,
		.index = index,
		.base_seq = st->next_seq,
		.created_ns = le__now_ns(),
	};
	int rc = le__seg_path(path, sizeof path, st->dir, index);
	if (rc < 0)
		return rc;
	struct stat sb;
	int existed = le__lstat(path, &sb) == 0;
	int fd = le__open_in(path, LE_IN_SHARD, open_flags(st) | O_CREAT | O_TRUNC,
	                     st->cfg->file_mode);
	if (fd < 0) {
		/* A file system without O_DIRECT creates the file, then fails
		 * the open: an empty segment left behind would read as one
		 * cut short (verify fails) until the next open. */
		if (!existed && le__lstat(path, &sb) == 0 && S_ISREG(sb.st_mode) &&
		    sb.st_size == 0)
			le__unlink(path);
		if (fd == -EINVAL && st->cfg->direct_io)
			le__seterr("direct_io: %s does not support O_DIRECT",
			           st->dir);
		return fd;
	}
	/* The directory entry must survive a power cut before any record
	 * that depends on it is reported written (a kill -9 needs nothing:
	 * the entry is in the kernel already).  With LE_SYNC_NONE nothing is
	 * promised across a power cut, and a directory fsync can take
	 * hundreds of milliseconds on a busy disk: not at every rotation. */
	if (st->syncer) /* synced before any record in it counts durable */
		le__sync_newfile(st->syncer, fd);
	else if (st->cfg->durability != LE_SYNC_NONE)
		rc = le__fsync_dir_in(st->dir, LE_IN_DIR);
	if (rc < 0) {
		le__close(fd);
		return rc;
	}
	st->fd = fd;
	st->seg_index = index;
	st->seg_created_mono = le__mono_ns();
	st->prealloc_end = 0;
	st->buf_off = 0;
	le__seg_hdr_encode(st->buf, &h);
	st->buf_len = LE_SEG_HDR;
	st->buf_new = LE_SEG_HDR;
	st->dgen++;
	mark_empty(st);
	atomic_fetch_add(&st->segments_created, 1);
	return 0;
}

int le__store_reopen(le__store *st, uint64_t index, uint64_t valid_end)
{
	char path[LE_PATH_MAX];
	int rc = le__seg_path(path, sizeof path, st->dir, index);
	if (rc < 0)
		return rc;
	int fd = le__open_in(path, LE_IN_SHARD, open_flags(st), 0);
	if (fd < 0)
		return fd;
	st->fd = fd;
	st->seg_index = index;
	st->seg_created_mono = le__mono_ns();
	st->prealloc_end = valid_end;
	st->dgen++; /* what an earlier engine put there is not in dmap */
	if (st->cfg->direct_io) {
		/* The partial last block goes back in the buffer, to be
		 * rewritten whole with the next batch. */
		st->buf_off = valid_end & ~(uint64_t)(ALIGN - 1);
		st->buf_len = (size_t)(valid_end - st->buf_off);
		int rfd = le__open_in(path, LE_IN_SHARD, O_RDONLY, 0);
		if (rfd < 0)
			return rfd;
		ssize_t got = le__pread_full(rfd, st->buf, st->buf_len,
		                             st->buf_off);
		le__close(rfd);
		if (got != (ssize_t)st->buf_len)
			return got < 0 ? (int)got : LE_ECORRUPT;
	} else {
		st->buf_off = valid_end;
		st->buf_len = 0;
	}
	st->buf_new = 0;
	/* What is in the file was there before us: count it synced (the
	 * recovery that found its end also synced a cut tail). */
	st->ckpt_off = valid_end;
	st->w_next_seq = st->next_seq;
	st->w_last_ts = st->last_ts;
	return 0;
}

/* What retention (retention.h) works with: this shard's, as they are
 * now (the archiver is set after the store is made). */
static le__retain_env retain_env(le__store *st)
{
	return (le__retain_env){
		.cfg = st->cfg, .dir = st->dir, .reaper = st->reaper,
		.archiver = st->archiver, .last_error = st->last_error,
		.segments_deleted = &st->segments_deleted,
		.lost_unshipped = &st->lost_unshipped};
}

int le__store_add_sealed(le__store *st, uint64_t index, uint64_t bytes)
{
	le__retain_env e = retain_env(st);

	return le__seglist_add(&st->sealed, &e, index, bytes);
}

/* Retention, with active_bytes in the active segment. */
static void retention(le__store *st, uint64_t active_bytes)
{
	le__retain_env e = retain_env(st);

	le__retention(&st->sealed, &e, active_bytes);
}

/* Seal the active segment (its buffer must be written). */
static int seg_seal(le__store *st)
{
	int rc = 0;

	if (st->fd < 0)
		return 0;
	if (le__store_seg_end(st) == 0) {
		/* Nothing of it, not even its header, reached the file. */
		char path[LE_PATH_MAX];
		if (st->syncer)
			le__sync_seal(st->syncer, st->fd, 0);
		else
			le__close(st->fd);
		st->fd = -1;
		le__seg_path(path, sizeof path, st->dir, st->seg_index);
		le__unlink(path);
		return 0;
	}
	if (st->cfg->direct_io || st->prealloc_end > le__store_seg_end(st))
		/* drop O_DIRECT's zero padding and unused reserved blocks */
		rc = le__ftruncate(st->fd, le__store_seg_end(st));
	if (rc < 0) {
		le__store_error(st, rc);
	} else if (st->syncer) {
		/* Synced and closed there, off this thread: the file is
		 * complete (its frames written, its end cut), and nothing
		 * here writes to it again. */
		le__sync_seal(st->syncer, st->fd, !st->seal_earlier);
		st->fd = -1;
	} else if (st->cfg->durability != LE_SYNC_NONE) {
		rc = le__store_sync(st);
	}
	st->dirty = 0;
	if (st->fd >= 0)
		le__close(st->fd);
	st->fd = -1;
	le__store_add_sealed(st, st->seg_index, le__store_seg_end(st));
	if (rc == 0) /* its time index, built off this thread (index.c) */
		le__index_on_seal(st->dir, st->seg_index);
	return rc;
}

int le__store_rotate(le__store *st)
{
	st->full = 0;
	seg_seal(st);
	/* After the seal: a sync that failed there is the sealed file's
	 * (reported, sync_fault); the next segment is a new file, trusted. */
	st->rotate_pending = 0;
	int rc = le__store_create(st, st->seg_index + 1);
	if (rc < 0) {
		le__store_error(st, rc);
		return rc;
	}
	retention(st, le__store_seg_end(st));
	return 0;
}

void le__store_prealloc(le__store *st)
{
	uint64_t end = le__store_seg_end(st), limit = st->cfg->segment_bytes;

	if (end <= st->prealloc_end || st->prealloc_end >= limit)
		return;
	uint64_t now = le__mono_ns(), step = st->prealloc_step;
	if (!step)
		step = PREALLOC_MIN;
	else if (now - st->prealloc_mono < 1000 * MS)
		step = step * 2 < PREALLOC ? step * 2 : PREALLOC;
	else if (now - st->prealloc_mono > 10000 * MS)
		step = step / 2 > PREALLOC_MIN ? step / 2 : PREALLOC_MIN;
	st->prealloc_step = step;
	st->prealloc_mono = now;
	uint64_t to = end + step < limit ? end + step : limit;
	if (le__prealloc(st->fd, st->prealloc_end, to - st->prealloc_end) == 0)
		st->prealloc_end = to;
	else
		st->prealloc_end = limit; /* unsupported: do not ask again */
}

/* ---- sync and checkpoint ---- */

int le__store_sync(le__store *st)
{
	if (!st->dirty || st->fd < 0)
		return 0;
	uint64_t t0 = le__mono_ns();
	int rc = le__fdatasync(st->fd);
	le__hist_add(&st->lat_sync, le__mono_ns() - t0);
	atomic_fetch_add(&st->syncs, 1);
	if (rc < 0) {
		/* Never retried: after a failed fdatasync the kernel may have
		 * dropped the dirty pages and marked them clean, so a second
		 * "success" would lie.  The records written since the last
		 * good sync are reported (they may or may not be on disk),
		 * le_flush returns the error, and the file is not trusted with
		 * anything more: the next write goes to a new segment. */
		atomic_fetch_add(&st->sync_errors, 1);
		atomic_fetch_add(&st->sync_lost, st->unsynced);
		le__store_error(st, rc);
		st->sink.sync_fault = rc;
		st->unsynced = 0;
		st->dirty = 0;
		st->rotate_pending = 1;
		return rc;
	}
	st->unsynced = 0;
	st->dirty = 0;
	return 0;
}

/* The checkpoint names the end of what is written and the last frame
 * before it.  Recovery checks that frame decodes there and ends at the end
 * before it trusts the checkpoint, so one naming bytes a power cut took
 * (written, not yet synced) only costs a full scan; and its next_seq keeps
 * sequence numbers from being used twice when a segment's header is lost.
 * It is synced unless LE_SYNC_NONE. */
void le__store_checkpoint(le__store *st)
{
	le__ckpt c;
	uint64_t end = le__store_written_end(st);

	if (st->ckpt_fd < 0 || end == st->ckpt_off || end <= LE_SEG_HDR ||
	    st->w_last_off < LE_SEG_HDR)
		return;
	c.gen = st->ckpt_gen + 1;
	c.seg_index = st->seg_index;
	c.offset = end;
	c.next_seq = st->w_next_seq;
	c.last_ts = st->w_last_ts;
	c.last_off = st->w_last_off;
	c.shard = st->shard;
	if (st->syncer) {
		/* written and synced there, once its data is synced */
		le__sync_ckpt(st->syncer, &c);
		st->ckpt_off = end;
		return;
	}
	int rc = le__ckpt_write(st->ckpt_fd, &c);
	if (rc == 0 && st->cfg->durability != LE_SYNC_NONE)
		rc = le__fdatasync(st->ckpt_fd);
	if (rc < 0) {
		le__store_error(st, rc);
		return;
	}
	st->ckpt_gen = c.gen;
	st->ckpt_off = end;
	atomic_fetch_add(&st->checkpoints, 1);
}

void le__store_tick(le__sink *s, uint64_t now)
{
	le__store *st = (le__store *)s;
	const le_config *c = st->cfg;

	if (st->syncer) /* the live page's copy of the sync latencies */
		le__sync_lat(st->syncer, &st->lat_sync);
	if (c->checkpoint_ms && now - st->last_ckpt_mono >= c->checkpoint_ms * MS) {
		st->last_ckpt_mono = now;
		le__store_checkpoint(st);
	}
	if ((c->retention_age_ms || c->archive_after_ms ||
	     c->archive_keep_segments) &&
	    now - st->last_age_mono >= 1000 * MS) {
		st->last_age_mono = now;
		retention(st, le__store_written_end(st));
	}
	if (st->pend_recs || st->buf_new)
		return;
	if (st->rotate_pending ||
	    (c->segment_max_age_ms && le__store_seg_end(st) > LE_SEG_HDR &&
	     now - st->seg_created_mono >= c->segment_max_age_ms * MS))
		le__store_rotate(st);
}

int le__store_sync_start(le__store *st, le__syncer *s, le__progress *prog,
                         uint32_t shard)
{
	le__sync_target t = {
		.dir = st->dir,
		.fd = st->fd,
		.ckpt_fd = st->ckpt_fd,
		.ckpt_gen = st->ckpt_gen,
		.written = &st->written,
		.syncs = &st->syncs,
		.sync_errors = &st->sync_errors,
		.sync_lost = &st->sync_lost,
		.checkpoints = &st->checkpoints,
		.last_error = st->last_error,
	};
	int rc = le__sync_start(s, &t, prog, shard);
	if (rc == 0)
		st->syncer = s;
	return rc;
}

void le__store_sync_stop(le__store *st, le__syncer *s)
{
	if (!s->started)
		return;
	le__sync_stop(s);
	/* A bad active segment is not synced at close (dirty = 0): its
	 * records are logged in doubt. */
	if (s->bad_fd >= 0 && s->bad_fd == st->fd) {
		st->dirty = 0;
		st->rotate_pending = 1;
	}
	st->ckpt_gen = s->ckpt_gen;
	le__sync_lat(s, &st->lat_sync);
	st->syncer = NULL;
}
