/*
 * sink_store.c -- the segment store of one shard as a sink (sink.h):
 * records encoded as frames into the active segment's buffer (put),
 * written with one pwrite (commit), what a write error leaves moved to a
 * new segment, and the store's counters.  The segment's life (create,
 * seal, rotate), syncs and checkpoints are store.c's.
 *
 * The output buffer mirrors file bytes [buf_off, buf_off + buf_len) of the
 * active segment; its last buf_new bytes are not yet written.  put encodes
 * frames at its end (their CRCs LE_CRC_WAYS at a time, before any write);
 * commit writes the new bytes with one pwrite.  With direct_io the buffer
 * starts on a 4 KiB boundary and every write is whole blocks (zero padded,
 * which readers see as end of data); the partial last block stays in the
 * buffer and is written again, completed, next time.
 *
 * Write errors: ENOSPC / EDQUOT leave the batch pending in the same file
 * (commit fails; the writer retries with backoff).  EIO, EFBIG and a lost
 * descriptor mean this file will not take them: relocate() keeps the whole
 * frames that got in, cuts the file there and moves the rest to a new
 * segment.  A failed fdatasync is never retried (see le__store_sync).
 */
#define _GNU_SOURCE
#include "store/store.h"

#include "record/defer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/internal.h"
#include "base/os.h"
#include "store/reaper.h"
#include "store/sync.h"

#define ALIGN LE_STORE_ALIGN

static const le__sink_ops store_ops;

/* ---- put ---- */

/* Compute the CRCs of the frames put since the last seal. */
static void seal_frames(le__store *st)
{
	unsigned char *f[LE_CRC_WAYS];

	for (int i = 0; i < st->nunsealed; i++)
		f[i] = st->buf + st->unsealed[i];
	if (st->nunsealed)
		le__frame_seal(f, st->nunsealed);
	st->nunsealed = 0;
}

/* Does this deferred frame carry its descriptor (the first of its site in
 * the segment, or one whose earlier frame lies past what R can name)? */
static int needs_desc(const le__store *st, const le__rec *x)
{
	return x->site >= st->dn || (uint32_t)(st->dmap[x->site] >> 32) != st->dgen;
}

/*
 * Turn the queue's deferred payload, copied into frame f as it was, into
 * the segment's (docs/FORMAT.md, "Deferred records"): the site number
 * becomes R, and the first frame of a site in the segment gets the
 * descriptor after it (its size word grows by the descriptor).  Before
 * the frame's CRC is computed.
 */
static void defer_patch(le__store *st, unsigned char *f, uint32_t fixed,
                        const le__rec *x, int with_desc, uint64_t at)
{
	unsigned char *p = f + fixed + x->dfb;

	if (!with_desc) {
		le__put32(p, (uint32_t)st->dmap[x->site]);
		return;
	}
	memmove(p + 4 + x->dlen, p + 4, x->len - x->dfb - 4);
	memcpy(p + 4, x->desc, x->dlen);
	le__put32(p, LE_DEFER_INLINE);
	le__put32(f, le__get32(f) + x->dlen);
	if (x->site < st->dn && at < LE_DEFER_INLINE)
		st->dmap[x->site] = (uint64_t)st->dgen << 32 | at;
}

/*
 * Encode records as frames at the buffer's end.  Stops short when the
 * segment would pass its limit (then `full`: commit rotates), when the
 * buffer holds max_pending_bytes of new bytes, or when it has no room.
 * This is the writer's inner loop, so what it advances lives in locals
 * (stores through the byte buffer would otherwise force every st-> field
 * back to memory on each record) and is written back once.  `fields` is
 * a constant where it is inlined for the default (store_put): the frame's
 * layout is then known, and the registers its tests took hold the loop.
 */
static inline __attribute__((always_inline)) size_t
put_frames(le__store *st, const le__rec *r, size_t n, const uint32_t fields)
{
	const uint32_t fixed = le__frame_fixed(fields);
	const uint64_t limit = le__store_limit(st), off0 = st->buf_off;
	const size_t cap = st->buf_cap - ALIGN;
	const size_t max_new = st->cfg->max_pending_bytes;
	const uint32_t shard = st->shard;
	unsigned char *buf = st->buf;
	const size_t len0 = st->buf_len, nw = st->buf_new;
	size_t len = len0, i;
	uint64_t last_off = st->pend_last_off;
	uint32_t markers = 0;
	unsigned char *un[LE_CRC_WAYS];
	int nun = st->nunsealed;

	/* New bytes grow with len: "new < max_new" is "len < len_stop"; and
	 * a frame ending within `room` passes both checks below it (the
	 * segment's limit, the buffer's end), which a frame past it takes
	 * one by one. */
	const size_t len_stop = nw < max_new ? len + (max_new - nw) : len;
	const uint64_t room = limit > off0 && limit - off0 < cap ? limit - off0
	                      : limit > off0                    ? cap
	                                                        : 0;

	for (int k = 0; k < nun; k++)
		un[k] = buf + st->unsealed[k];
	for (i = 0; i < n && len < len_stop; i++) {
		const le__rec *x = &r[i];
		uint32_t flen = fixed + x->len;
		int with_desc = 0;
		if (x->flags & LE_REC_DEFERRED) {
			with_desc = needs_desc(st, x);
			flen += with_desc ? x->dlen : 0;
		}
		if (__builtin_expect(len + flen > room, 0)) {
			if (off0 + len + flen > limit && off0 + len > LE_SEG_HDR) {
				st->full = 1;
				break;
			}
			if (len + flen > cap)
				break;
		}
		last_off = off0 + len;
		if (fields == LE_FIELD_ALL)
			le__frame_put_all(buf + len, x->flags, x->level, shard,
			                  x->seq, x->ts, x->payload, x->len);
		else
			le__frame_put(buf + len, fields, x->flags, x->level,
			              shard, x->seq, x->ts, x->payload, x->len);
		if (x->flags & LE_REC_DEFERRED)
			defer_patch(st, buf + len, fixed, x, with_desc, off0 + len);
		if (fields & LE_FIELD_CRC) {
			un[nun++] = buf + len;
			if (nun == LE_CRC_WAYS) {
				le__frame_seal(un, LE_CRC_WAYS);
				nun = 0;
			}
		}
		markers += (x->flags & LE_REC_MARKER) != 0;
		len += flen;
	}
	for (int k = 0; k < nun; k++)
		st->unsealed[k] = (size_t)(un[k] - buf);
	st->nunsealed = nun;
	st->buf_len = len;
	st->buf_new = nw + (len - len0);
	st->pend_last_off = last_off;
	st->pend_recs += (uint32_t)i;
	st->pend_markers += markers;
	if (i) {
		st->next_seq = r[i - 1].seq + 1;
		st->last_ts = r[i - 1].ts;
	}
	return i;
}

static size_t store_put(le__sink *s, const le__rec *r, size_t n)
{
	le__store *st = (le__store *)s;

	if (st->cfg->fields == LE_FIELD_ALL)
		return put_frames(st, r, n, LE_FIELD_ALL);
	return put_frames(st, r, n, st->cfg->fields);
}

/* ---- commit ---- */

static uint32_t frame_total(const unsigned char *f)
{
	return le__get32(f) + 4;
}

/*
 * After a write error that the file itself caused (EIO, EFBIG, no file):
 * keep in the old segment the whole frames that `done` bytes of the write
 * carried (EFBIG writes up to the limit), cut the file there, and move the
 * rest (already sealed frames: they do not depend on their offset, only
 * the header's base sequence does) to the start of a new segment, to be
 * retried there.  A frame too big for any file under the learned size
 * limit is dropped and counted.
 */
static void relocate(le__store *st, size_t done)
{
	size_t n = st->buf_new;
	uint64_t first = st->buf_off + st->buf_len - n;
	unsigned char *region = st->buf + st->buf_len - n;
	size_t hdr = first < LE_SEG_HDR ? (size_t)(LE_SEG_HDR - first) : 0;
	size_t keep = 0;

	if (done >= hdr && hdr <= n) {
		keep = hdr;
		while (keep + 4 <= n && keep + frame_total(region + keep) <= done)
			keep += frame_total(region + keep);
	}
	size_t from = keep > hdr ? keep : hdr; /* headers never move */
	uint64_t moved_frames = 0;
	for (size_t p = from; p + 4 <= n; p += frame_total(region + p))
		moved_frames++;
	unsigned char *tmp = n ? malloc(n) : NULL;
	if (n && !tmp)
		return; /* retry in place */
	if (tmp)
		memcpy(tmp, region, n);
	if (st->fd >= 0) {
		le__ftruncate(st->fd, first + keep); /* no partial frame stays */
		/* The frames kept were written by this write, and the cut
		 * removes frames that go to the new segment: the seal below
		 * must sync both, or a power cut could lose the first or
		 * bring back (twice) the second. */
		st->dirty = 1;
	}
	atomic_fetch_add(&st->bytes_written, keep);
	st->buf_len -= n - keep;
	st->buf_new = 0;
	uint64_t next = st->next_seq;
	st->next_seq -= moved_frames; /* the new header's base sequence */
	int rc = le__store_rotate(st);
	st->next_seq = next;
	if (rc < 0) {
		/* No new segment (fd is now -1): what is not on disk stays
		 * pending; the next write fails with EBADF and comes back. */
		memcpy(st->buf + st->buf_len, tmp + keep, n - keep);
		st->buf_len += n - keep;
		st->buf_new = n - keep;
		free(tmp);
		return;
	}
	uint64_t lim = le__store_limit(st);
	uint64_t room = lim > LE_SEG_HDR ? lim - LE_SEG_HDR : 0;
	for (size_t p = from; p + 4 <= n; p += frame_total(tmp + p)) {
		uint32_t t = frame_total(tmp + p);
		unsigned char *out = st->buf + st->buf_len;
		if (t > room && st->seg_cap) {
			/* Can never fit a file under ulimit -f: lost, and
			 * counted.  A marker with its sequence number and time
			 * takes its place: a gap in the new segment's numbering
			 * (its base sequence counts this frame) reads as damage,
			 * and readers would skip the record after it. */
			static const char msg[] = "1 records dropped";
			le__frame f;
			const char *why;
			atomic_fetch_add(&st->dropped_io, 1);
			st->pend_lost++;
			st->sink.fault = -EFBIG;
			if (le__frame_decode(tmp + p, t, st->cfg->fields,
			                     LE_FRAME_MAX, &f, &why) != LE_FRAME_OK)
				continue; /* cannot be: this store sealed it */
			t = le__frame_put(out, st->cfg->fields, LE_REC_MARKER,
			                  LE_WARN, st->shard, f.seq, f.ts, msg,
			                  sizeof msg - 1);
			if (st->cfg->fields & LE_FIELD_CRC)
				le__frame_seal(&out, 1);
			st->pend_recs++; /* a marker frame more to write */
			st->pend_markers++;
		} else {
			memcpy(out, tmp + p, t);
		}
		if (first + p >= st->pend_last_off)
			st->pend_last_off = le__store_seg_end(st);
		st->buf_len += t;
		st->buf_new += t;
	}
	free(tmp);
}

/* The buffer's new bytes went to the file: count them, keep what
 * O_DIRECT must write again. */
static void written(le__store *st)
{
	uint64_t end = le__store_seg_end(st);
	uint32_t recs = st->pend_recs - st->pend_markers;

	atomic_fetch_add_explicit(&st->bytes_written, st->buf_new,
	                          memory_order_relaxed);
	atomic_fetch_add_explicit(&st->written, recs - st->pend_lost,
	                          memory_order_relaxed);
	atomic_fetch_add_explicit(&st->markers, st->pend_markers,
	                          memory_order_relaxed);
	st->dirty = 1;
	st->unsynced += recs;
	if (st->pend_recs)
		st->w_last_off = st->pend_last_off;
	st->w_next_seq = st->next_seq;
	st->w_last_ts = st->last_ts;
	st->pend_recs = st->pend_markers = st->pend_lost = 0;
	size_t keep = st->cfg->direct_io ? (size_t)(end % ALIGN) : 0;
	if (keep && st->buf_len > keep)
		memmove(st->buf, st->buf + st->buf_len - keep, keep);
	st->buf_off = end - keep;
	st->buf_len = keep;
	st->buf_new = 0;
}

/* Write the buffer's new bytes; then rotate if put found the segment
 * full.  @return 0, or the error (what was put stays pending). */
static int store_commit(le__sink *s)
{
	le__store *st = (le__store *)s;
	size_t done = 0;
	int rc;

	seal_frames(st);
	if (st->syncer && st->fd >= 0 &&
	    atomic_load_explicit(&st->syncer->failed, memory_order_acquire) &&
	    le__sync_is_bad(st->syncer, st->fd)) {
		/* The active file's sync failed: it is not trusted with more
		 * (le__store_sync's reason).  Every frame not yet written goes
		 * to a new segment; the old one holds only earlier batches. */
		int bad = st->fd;
		st->seal_earlier = 1;
		relocate(st, 0);
		st->seal_earlier = 0;
		if (st->fd < 0 || st->fd == bad)
			return LE_EIO; /* no new segment yet: tried again */
	}
	if (st->buf_new) {
		uint64_t end = le__store_seg_end(st);
		le__store_prealloc(st);
		uint64_t t0 = le__mono_ns();
		if (st->cfg->direct_io) {
			size_t w = (st->buf_len + ALIGN - 1) & ~(size_t)(ALIGN - 1);
			memset(st->buf + st->buf_len, 0, w - st->buf_len);
			rc = le__pwrite_all(st->fd, st->buf, w, st->buf_off);
		} else {
			rc = le__pwrite_some(st->fd,
			                     st->buf + st->buf_len - st->buf_new,
			                     st->buf_new, end - st->buf_new, &done);
		}
		if (rc < 0) {
			atomic_fetch_add(&st->write_errors, 1);
			le__store_error(st, rc);
			/* ENOSPC / EDQUOT: wait for space, same file.  EIO, EFBIG
			 * (ulimit -f): this file will not take them; a new one
			 * may.  EFBIG also tells where the limit is. */
			if (rc == -EFBIG && !st->cfg->direct_io)
				st->seg_cap = end - st->buf_new + done;
			if (rc == -EIO || rc == -EFBIG || rc == -EBADF)
				relocate(st, rc == -EFBIG && !st->cfg->direct_io
				                     ? done
				                     : 0);
			return rc;
		}
		le__hist_add(&st->lat_write, le__mono_ns() - t0);
		written(st);
		if (st->syncer)
			le__sync_wrote(st->syncer, le__store_written_end(st));
	}
	if (st->full || (st->rotate_pending && !st->pend_recs))
		return le__store_rotate(st);
	return 0;
}

/* ---- sync, close ---- */

static int store_sync(le__sink *s)
{
	return le__store_sync((le__store *)s);
}

/* The disk would not take them: what was put and not written is lost. */
static void store_drop(le__sink *s, uint64_t unseen)
{
	le__store *st = (le__store *)s;
	uint64_t lost = st->pend_recs - st->pend_markers - st->pend_lost + unseen;

	if (lost) {
		atomic_fetch_add(&st->dropped_io, lost);
		st->sink.fault = LE_EIO;
	}
	st->buf_len -= st->buf_new;
	st->buf_new = 0;
	st->nunsealed = 0;
	st->pend_recs = st->pend_markers = st->pend_lost = 0;
	st->full = 0;
}

/* Everything is written: cut preallocated blocks, sync (whatever the
 * durability: LE_SYNC_NONE promises the files are complete after
 * le_close), checkpoint. */
static void store_close(le__sink *s)
{
	le__store *st = (le__store *)s;

	/* A segment made since the last batch has only its header in the
	 * buffer: write it, so the file reads as an empty segment. */
	if (st->buf_new && !st->pend_recs)
		store_commit(s);
	if (st->fd >= 0 &&
	    (st->cfg->direct_io || st->prealloc_end > le__store_seg_end(st)))
		le__ftruncate(st->fd, le__store_seg_end(st));
	le__store_sync(st);
	le__store_checkpoint(st);
	if (st->ckpt_fd >= 0 && st->cfg->durability == LE_SYNC_NONE)
		le__fdatasync(st->ckpt_fd);
}

static void store_stats(le__sink *s, le_stats *o)
{
	le__store *st = (le__store *)s;

	o->written += atomic_load(&st->written);
	o->bytes_written += atomic_load(&st->bytes_written);
	o->markers += atomic_load(&st->markers);
	o->dropped_io += atomic_load(&st->dropped_io);
	o->segments_created += atomic_load(&st->segments_created);
	o->segments_deleted += atomic_load(&st->segments_deleted);
	o->lost_unshipped += atomic_load(&st->lost_unshipped);
	o->syncs += atomic_load(&st->syncs);
	o->checkpoints += atomic_load(&st->checkpoints);
	o->write_errors += atomic_load(&st->write_errors);
	o->sync_errors += atomic_load(&st->sync_errors);
	o->sync_lost += atomic_load(&st->sync_lost);
	o->recovered_truncated_bytes += atomic_load(&st->recovered_truncated);
}

static void store_free(le__sink *s)
{
	le__store *st = (le__store *)s;

	if (!st)
		return;
	if (st->fd >= 0)
		le__close(st->fd);
	if (st->ckpt_fd >= 0)
		le__close(st->ckpt_fd);
	free(st->buf);
	free(st->sealed.segs);
	free(st->dmap);
	free(st);
}

/* ---- setup ---- */

/* Room for one frame of `rec` payload bytes past max_pending_bytes, and
 * the blocks O_DIRECT keeps and pads. */
static size_t buf_size(const le_config *c, uint32_t rec)
{
	return c->max_pending_bytes + le__frame_fixed(LE_FIELD_ALL) + rec +
	       64 + 3 * ALIGN;
}

void le__store_resize(le__store *st, uint32_t bytes)
{
	unsigned char *b;
	size_t cap = buf_size(st->cfg, bytes > st->cfg->max_record_bytes
	                                       ? bytes
	                                       : st->cfg->max_record_bytes);

	if (cap == st->buf_cap || st->buf_len > cap ||
	    posix_memalign((void **)&b, ALIGN, cap) != 0)
		return;
	memcpy(b, st->buf, st->buf_len);
	free(st->buf);
	st->buf = b;
	st->buf_cap = cap;
}

int le__store_new(le__store **out, const le_config *cfg, uint32_t shard,
                  const char *shard_dir, le__reaper *reaper,
                  _Atomic int *last_error)
{
	char path[LE_PATH_MAX + 16];
	le__store *st = calloc(1, sizeof *st);

	*out = NULL;
	if (!st)
		return LE_ENOMEM;
	st->sink.ops = &store_ops;
	st->cfg = cfg;
	st->shard = shard;
	st->reaper = reaper;
	st->last_error = last_error;
	st->fd = st->ckpt_fd = -1;
	st->next_seq = 1;
	st->last_ckpt_mono = le__mono_ns();
	snprintf(st->dir, sizeof st->dir, "%s", shard_dir);
	st->buf_cap = buf_size(cfg, cfg->max_record_bytes);
	st->dn = cfg->deferred_sites == LE_DEFERRED_OFF ? 0
	                                                : cfg->deferred_sites;
	st->dmap = calloc(st->dn ? st->dn : 1, sizeof *st->dmap);
	if (!st->dmap) {
		store_free(&st->sink);
		return LE_ENOMEM;
	}
	if (posix_memalign((void **)&st->buf, ALIGN, st->buf_cap) != 0) {
		st->buf = NULL;
		store_free(&st->sink);
		return LE_ENOMEM;
	}
	snprintf(path, sizeof path, "%s/CHECKPOINT", shard_dir);
	st->ckpt_fd = le__open_in(path, LE_IN_SHARD, O_RDWR | O_CREAT,
	                          cfg->file_mode);
	if (st->ckpt_fd < 0) {
		int rc = st->ckpt_fd;
		if (rc != LE_EUNSAFE)
			le__seterr("%s: %s", path, le_strerror(rc));
		store_free(&st->sink);
		return rc;
	}
	*out = st;
	return 0;
}

static const le__sink_ops store_ops = {
	.put = store_put,
	.commit = store_commit,
	.sync = store_sync,
	.tick = le__store_tick,
	.drop = store_drop,
	.close = store_close,
	.stats = store_stats,
	.free = store_free,
};
