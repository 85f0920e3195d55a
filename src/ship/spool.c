/*
 * spool.c -- a shard's stored frames after a forwarder's cursor, in
 * batches (le_spool_* in logengine.h): the segment scanner driven frame
 * by frame, deferred frames relinked so each batch is self-contained,
 * and the cursor file (store/fwd_cursor.h) committed when the caller's
 * destination holds what was read.
 *
 *   shard-NNN/INDEX.seg --scanner: each frame's CRC checked--> batch:
 *     frames of one segment, as stored, <= max_bytes (from the scanner's
 *     window, or read again when it moved on) --relinked--> caller
 *   caller: le_spool_ack (in memory), le_spool_commit (FORWARD, synced)
 *
 * Reading state: the scanner (open, seg) and read_seq, the next record to
 * return; min_seg, below which segments are done with.  The cursor `cur`
 * is what was acknowledged; le_spool_rewind goes back to it.
 *
 * Memory: one scanner window (<= 1 MiB, segment.c), the batch read again
 * and its relinked copy (each max_bytes and a descriptor), the
 * descriptors of the segment's deferred frames: nothing that grows with
 * the backlog.
 */
#define _GNU_SOURCE
#include "logengine.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "base/crc32c.h"
#include "base/internal.h"
#include "base/os.h"
#include "record/defer.h"
#include "ship/ship.h"
#include "store/fwd_cursor.h"
#include "store/seg_zst.h"
#include "store/segment.h"

struct le_spool {
	uint32_t id;              /* [const] shard number */
	unsigned flags;           /* [const] LE_SPOOL_* */
	char dir[LE_PATH_MAX];    /* [const] DIR/shard-NNN */
	int cfd;                  /* FORWARD, flock()ed while open */
	uint64_t key;             /* [const] message-id key (le__fwd_key) */
	le__fwd_cursor cur;       /* acknowledged */
	int dirty;                /* cur differs from what FORWARD holds */
	le__scan sc;              /* the open segment (when open) */
	int open;
	uint64_t seg;             /* index of the open segment */
	uint64_t min_seg;         /* segments below this are done with */
	uint64_t read_seq;        /* next record to return */
	le__dcache dc;            /* descriptors of deferred frames, by
	                             offset in the open segment */
	uint64_t tgt_seg, tgt_off; /* LE_SPOOL_ONCE: the end at open */
	unsigned char *again;     /* a batch read again (batch_bytes) */
	size_t again_cap;
	unsigned char *relinked;  /* a batch with deferred frames relinked */
	size_t relinked_cap;
	le__relink rl;            /* their descriptors in the batch */
};

/* ---- segments ---- */

static int spool_exists(const char *dir, uint64_t index)
{
	char path[LE_PATH_MAX];
	uint64_t size, mtime;

	le__seg_path(path, sizeof path, dir, index);
	return le__seg_stat(path, &size, &mtime) >= 0; /* or its archive */
}

static int seg_open(le_spool *sp, uint64_t index)
{
	char path[LE_PATH_MAX];
	const char *why;

	le__seg_path(path, sizeof path, sp->dir, index);
	int rc = le__scan_open(&sp->sc, path, sp->id, &why);
	if (rc < 0)
		return rc;
	sp->open = 1;
	sp->seg = index;
	return 0;
}

static void seg_close(le_spool *sp)
{
	if (sp->open)
		le__scan_close(&sp->sc);
	sp->open = 0;
}

/* See what the writer appended since: the file's size again, and the
 * window forgotten (it may hold a frame caught half written). */
static void seg_refresh(le_spool *sp)
{
	struct stat st;

	if (le__fstat(sp->sc.fd, &st) == 0)
		sp->sc.file_len = (uint64_t)st.st_size;
	sp->sc.win_len = 0;
}

/* Start at the cursor's hint, the frame it names, if one is there with
 * the right sequence (checked by reading it); else at the segment's
 * first frame. */
static void seg_hint(le_spool *sp, uint64_t want)
{
	le__frame f;
	const char *why;

	if (sp->cur.seg_index != sp->seg || sp->cur.offset <= LE_SEG_HDR ||
	    want != sp->cur.next_seq || sp->sc.hdr.base_seq >= want ||
	    sp->cur.offset >= sp->sc.file_len)
		return;
	sp->sc.off = sp->cur.offset;
	sp->sc.next_seq = want;
	if (le__scan_next(&sp->sc, &f, &why) != LE_FRAME_OK ||
	    ((sp->sc.hdr.fields & LE_FIELD_SEQUENCE) && f.seq != want)) {
		sp->sc.off = LE_SEG_HDR;
		sp->sc.next_seq = sp->sc.hdr.base_seq;
	} else {
		sp->sc.off = sp->cur.offset;
		sp->sc.next_seq = want;
	}
}

/* Open the segment to read `want` from: the last one from min_seg on
 * whose base is <= want, else the first one from min_seg on (the
 * records before it are gone: the read finds the gap).  want 0: the
 * oldest record.  @return 1 open, 0 no segment yet, < 0 error. */
static int seg_position(le_spool *sp, uint64_t want)
{
	uint64_t *segs, base;
	size_t n, k = 0, pick;
	int rc = le__seg_list(sp->dir, &segs, &n);

	if (rc < 0)
		return rc;
	while (k < n && segs[k] < sp->min_seg)
		k++;
	/* A header not written yet (or damaged) cannot start the read. */
	while (k < n && le__seg_base(sp->dir, segs[k], &base) < 0)
		k++;
	if (k == n) {
		free(segs);
		return 0;
	}
	pick = k;
	while (want && base <= want && ++k < n) {
		uint64_t b;
		if (le__seg_base(sp->dir, segs[k], &b) < 0 || b > want)
			break;
		pick = k;
		base = b;
	}
	rc = seg_open(sp, segs[pick]);
	free(segs);
	if (rc < 0)
		return rc;
	seg_hint(sp, want);
	return 1;
}

/* ---- reading frames ---- */

enum { RD_FRAME, RD_NONE, RD_SEGEND, RD_GAP, RD_DAMAGE, RD_ROTATED };

struct rd {
	le__frame f;
	uint64_t off; /* its offset */
};

/* Leave a sealed segment whose end was reached. */
static void seg_next(le_spool *sp)
{
	sp->min_seg = sp->seg + 1;
	seg_close(sp);
}

/* Damage in a sealed segment: skip to the next valid frame (the records
 * in between show up as a gap) or past the segment.  @return RD_DAMAGE
 * with ev filled, or < 0. */
static int seg_damage(le_spool *sp, const char *why, le_spool_batch *ev)
{
	uint64_t off = sp->sc.off;
	int found = le__scan_resync(&sp->sc);

	if (found < 0)
		return found;
	ev->event = LE_SPOOL_DAMAGE;
	ev->segment = sp->seg;
	ev->offset = off;
	ev->resume = found ? sp->sc.off : 0;
	ev->why = why;
	if (!found)
		seg_next(sp);
	return RD_DAMAGE;
}

/* LE_SPOOL_ONCE stops at what was there at open. */
static int past_target(const le_spool *sp)
{
	return (sp->flags & LE_SPOOL_ONCE) &&
	       (sp->seg > sp->tgt_seg ||
	        (sp->seg == sp->tgt_seg && sp->sc.off >= sp->tgt_off));
}

/* A sealed segment's read stopped (rc) and the file was looked at again:
 * its end, or damage.  @return RD_ROTATED, RD_DAMAGE, or < 0. */
static int sealed_stop(le_spool *sp, int rc, const char *why,
                       le_spool_batch *ev)
{
	if (rc == LE_FRAME_END || sp->sc.off >= sp->sc.file_len ||
	    (rc == LE_FRAME_SHORT && sp->sc.file_len - sp->sc.off < 4)) {
		ev->event = LE_SPOOL_ROTATED;
		ev->segment = sp->seg;
		seg_next(sp);
		return RD_ROTATED;
	}
	return seg_damage(sp, why, ev);
}

/*
 * The next frame at or after `want`.  stay: do not go on to the next
 * segment (a batch is open).  RD_GAP: the next frame there is has a
 * higher sequence (records gone), nothing consumed.  RD_DAMAGE and
 * RD_ROTATED (never with stay) fill ev.
 */
static int next_frame(le_spool *sp, uint64_t want, int stay, struct rd *r,
                      le_spool_batch *ev)
{
	int refreshed = 0;
	const char *why;

	for (;;) {
		if (!sp->open) {
			if (stay)
				return RD_SEGEND;
			int rc = seg_position(sp, want);
			if (rc <= 0)
				return rc < 0 ? rc : RD_NONE;
		}
		if (past_target(sp))
			return RD_NONE;
		uint64_t off = sp->sc.off, nseq = sp->sc.next_seq;
		int rc = le__scan_next(&sp->sc, &r->f, &why);
		if (rc == LE_FRAME_OK) {
			if (want && r->f.seq < want)
				continue; /* before the cursor */
			if (want && r->f.seq > want) {
				sp->sc.off = off;
				sp->sc.next_seq = nseq;
				sp->sc.frames--;
				return RD_GAP;
			}
			r->off = off;
			return RD_FRAME;
		}
		if (rc < 0)
			return rc;
		/* The active segment: no more yet (a frame not wholly
		 * written reads as short or bad); look at the file again
		 * once.  Sealed: everything it will hold is there (the
		 * writer seals before it creates the next), once the file
		 * is looked at after the seal was seen. */
		if (!spool_exists(sp->dir, sp->seg + 1)) {
			if (refreshed++)
				return RD_NONE;
			seg_refresh(sp);
			continue;
		}
		if (refreshed < 2) {
			refreshed = 2;
			seg_refresh(sp);
			continue;
		}
		if (stay)
			return RD_SEGEND;
		return sealed_stop(sp, rc, why, ev);
	}
}

/* Put the scanner back before the frame r just read. */
static void unread(le_spool *sp, const struct rd *r)
{
	sp->sc.off = r->off;
	sp->sc.next_seq--;
	sp->sc.frames--;
}

/* Put the scanner back to offset off, k frames before where it is. */
static void put_back(le_spool *sp, uint64_t off, uint64_t k)
{
	sp->sc.off = off;
	sp->sc.next_seq -= k;
	sp->sc.frames -= k;
}

/* ---- batches ---- */

static int grow(unsigned char **buf, size_t *cap, size_t want)
{
	if (*cap >= want)
		return 0;
	unsigned char *nb = realloc(*buf, want);
	if (!nb)
		return LE_ENOMEM;
	*buf = nb;
	*cap = want;
	return 0;
}

/* The batch's bytes: the frames [off, off + len) of the open segment,
 * checked as they were read.  Still in the scanner's window (most often,
 * the window being four batches or more), they go from there; else they
 * are read again (a valid frame's bytes never change: the file only
 * grows, and a deleted one stays readable through our descriptor).
 * @return them, or NULL (*rc). */
static const unsigned char *batch_bytes(le_spool *sp, uint64_t off,
                                        uint64_t len, int *rc)
{
	if (off >= sp->sc.win_off &&
	    off + len <= sp->sc.win_off + sp->sc.win_len)
		return sp->sc.buf + (off - sp->sc.win_off);
	if ((*rc = grow(&sp->again, &sp->again_cap, (size_t)len)) < 0)
		return NULL;
	ssize_t got = le__pread_full(sp->sc.fd, sp->again, (size_t)len, off);
	if (got == (ssize_t)len)
		return sp->again;
	*rc = got < 0 ? (int)got : -EIO; /* shorter than it was */
	return NULL;
}

/* The descriptor of the deferred frame at offset ref of the segment. */
static const unsigned char *origin_desc(void *arg, uint32_t ref,
                                        size_t *dlen, const char **why)
{
	le_spool *sp = arg;
	return le__dcache_desc(&sp->dc, sp->sc.fd, sp->seg, sp->sc.hdr.version,
	                       sp->sc.hdr.fields, ref, dlen, why);
}

static const unsigned char *no_desc(void *arg, uint32_t ref, size_t *dlen,
                                   const char **why)
{
	(void)arg;
	(void)ref;
	(void)dlen;
	*why = "no room for it";
	return NULL;
}

/* Frame fr (fl bytes) relinked to out for a batch at pos, or copied as it
 * is.  @return its new size. */
static size_t relink_one(le_spool *sp, const unsigned char *fr, size_t fl,
                         uint64_t at, le__rl_find *find, unsigned char *out)
{
	size_t got = le__relink_frame(&sp->rl, fr, fl, sp->sc.hdr.fields, at,
	                              find, find == origin_desc ? sp : NULL,
	                              out);
	if (!got) {
		got = fl;
		memcpy(out, fr, got);
	}
	return got;
}

/*
 * The n frames body[0..*len) at pos, as a batch carries them: deferred
 * frames that name their descriptor by an offset made to name a frame of
 * the batch (R = pos + its offset in the batch), the first of each call
 * site carrying it (docs/INTERFACES.md, "Deferred records in
 * messages").  A body without deferred frames goes as it is.  Frames
 * that no longer fit max are put back for the next batch (*n, *len say
 * what is left).  NULL: no memory.
 */
static const unsigned char *relink(le_spool *sp, const unsigned char *body,
                                   uint64_t pos, uint64_t max,
                                   uint64_t *len, uint64_t *n)
{
	uint32_t fields = sp->sc.hdr.fields;
	uint64_t in = 0, out = 0, k = 0;

	while (in < *len && !le__frame_deferred(body + in, fields))
		in += (uint64_t)le__get32(body + in) + 4;
	if (in == *len)
		return body;
	if (grow(&sp->relinked, &sp->relinked_cap,
	         (size_t)max + LE_DESC_MAX) < 0)
		return NULL;
	le__relink_reset(&sp->rl);
	for (in = 0; k < *n; k++) {
		uint64_t fl = (uint64_t)le__get32(body + in) + 4;
		/* A frame only grows: one that does not fit as it is will
		 * not fit relinked, and the buffer has room for the batch
		 * and one descriptor, not for a whole frame past it. */
		if (k > 0 && out + fl > max)
			break;
		size_t got = relink_one(sp, body + in, (size_t)fl, pos + out,
		                        origin_desc, sp->relinked + out);
		if (out + got > max && k > 0)
			break; /* grew past the batch: the rest goes next */
		if (out + got > max) {
			/* A lone frame that outgrew the batch with its
			 * descriptor goes without: its R made 0, which no
			 * frame has (read as undecodable, never as another
			 * call site's text).  The table noted its
			 * descriptor as carried at the batch's start, where
			 * it now is not; the table holds nothing else yet
			 * (k == 0), so it starts again empty and the next
			 * frame of the call site carries the descriptor. */
			le__relink_reset(&sp->rl);
			got = relink_one(sp, body, (size_t)fl, pos, no_desc,
			                 sp->relinked);
		}
		out += got;
		in += fl;
	}
	if (k < *n) {
		put_back(sp, pos + in, *n - k);
		*n = k;
	}
	*len = out;
	return sp->relinked;
}

/* Keep the first max frames of body[0..*len) (n of them); put the rest
 * back. */
static void cap_records(le_spool *sp, const unsigned char *body,
                        uint64_t pos, uint64_t max, uint64_t *len,
                        uint64_t *n)
{
	uint64_t in = 0;

	if (!max || *n <= max)
		return;
	for (uint64_t k = 0; k < max; k++)
		in += (uint64_t)le__get32(body + in) + 4;
	put_back(sp, pos + in, *n - max);
	*n = max;
	*len = in;
}

/* The open batch: first record, count, where it starts, its bytes. */
struct run {
	uint64_t want, first, n, start, len;
};

/* Take the frames that follow on, a run at a time (CRCs checked side by
 * side).  @return frames taken (0: the next one needs next_frame), <0. */
static int64_t take_run(le_spool *sp, uint64_t max, struct run *b)
{
	if (!sp->open || sp->sc.next_seq != b->want || past_target(sp) ||
	    (b->n && sp->sc.off != b->start + b->len))
		return 0;
	uint64_t lim = max - b->len, off0 = sp->sc.off, got;
	if ((sp->flags & LE_SPOOL_ONCE) && sp->seg == sp->tgt_seg &&
	    sp->tgt_off - off0 < lim)
		lim = sp->tgt_off - off0;
	int64_t k = le__scan_many(&sp->sc, lim, &got);
	if (k > 0) {
		if (b->n == 0) {
			b->first = b->want;
			b->start = off0;
		}
		b->n += (uint64_t)k;
		b->len += got;
		b->want = sp->sc.next_seq;
	}
	return k;
}

/* An event other than a batch of frames, at frame r. */
static int single(le_spool *sp, int event, uint64_t last,
                  const struct rd *r, le_spool_batch *ev)
{
	ev->event = event;
	ev->first = sp->read_seq;
	ev->count = last - sp->read_seq + 1;
	ev->segment = sp->seg;
	ev->offset = r->off;
	ev->ts_ns = r->f.ts ? r->f.ts : sp->sc.hdr.created_ns;
	ev->size = (uint64_t)r->f.size + 4;
	sp->read_seq = last + 1;
	return event;
}

/* Read up to max bytes of frames into b, or an event that stands in the
 * way of the first.  @return RD_FRAME (b->n > 0), another RD_*, <0. */
static int gather(le_spool *sp, uint64_t max, uint64_t max_records,
                  struct run *b, struct rd *r, le_spool_batch *ev)
{
	while (b->len < max && (!max_records || b->n < max_records)) {
		int64_t k = take_run(sp, max, b);
		if (k < 0)
			return (int)k;
		if (k > 0)
			continue;
		int rc = next_frame(sp, b->want, b->n > 0, r, ev);
		if (rc < 0 || rc == RD_DAMAGE || rc == RD_ROTATED)
			return rc;
		if (rc == RD_NONE || rc == RD_SEGEND)
			break;
		if (rc == RD_GAP) {
			if (b->n)
				break;
			return RD_GAP;
		}
		uint64_t flen = (uint64_t)r->f.size + 4;
		if (b->len + flen > max) {
			if (b->n == 0)
				return RD_FRAME; /* too big: alone, consumed */
			unread(sp, r);
			break;
		}
		if (b->n++ == 0) {
			b->first = r->f.seq;
			b->start = r->off;
		}
		b->len += flen;
		b->want = r->f.seq + 1;
	}
	return b->n ? RD_FRAME : RD_NONE;
}

/* The gathered frames as ev's batch. */
static int frames_event(le_spool *sp, uint64_t max, uint64_t max_records,
                        struct run *b, le_spool_batch *ev)
{
	int rc = 0;
	const unsigned char *body = batch_bytes(sp, b->start, b->len, &rc);

	if (!body)
		return rc;
	cap_records(sp, body, b->start, max_records, &b->len, &b->n);
	body = relink(sp, body, b->start, max, &b->len, &b->n);
	if (!body)
		return LE_ENOMEM;
	ev->event = LE_SPOOL_FRAMES;
	ev->fields = sp->sc.hdr.fields;
	ev->first = b->first;
	ev->count = b->n;
	ev->frames = body;
	ev->len = (size_t)b->len;
	if (!(ev->fields & LE_FIELD_CRC))
		ev->crc = le__crc_mask(le__crc32c_extend(0, body, ev->len));
	ev->pos = b->start;
	ev->segment = sp->seg;
	sp->read_seq = b->first + b->n;
	return LE_SPOOL_FRAMES;
}

static void end_position(const le_spool *sp, le_spool_batch *ev)
{
	ev->end_segment = sp->open ? sp->seg : 0;
	ev->end_offset = sp->open ? sp->sc.off : 0;
}

int le_spool_next_sized(le_spool *sp, size_t max_bytes,
                        uint64_t max_records, le_spool_batch *out,
                        size_t size)
{
	le_spool_batch ev = {0};
	struct run b = {0};
	struct rd r;
	int rc;

	if (!sp || !out || max_bytes < LE_FRAME_FIXED_MAX)
		return LE_EINVAL;
	b.want = sp->read_seq;
	rc = gather(sp, max_bytes, max_records, &b, &r, &ev);
	if (rc == RD_FRAME && b.n)
		rc = frames_event(sp, max_bytes, max_records, &b, &ev);
	else if (rc == RD_FRAME)
		rc = single(sp, LE_SPOOL_TOO_BIG, r.f.seq, &r, &ev);
	else if (rc == RD_GAP)
		rc = single(sp, LE_SPOOL_GAP, r.f.seq - 1, &r, &ev);
	else if (rc == RD_NONE)
		rc = ev.event = (sp->flags & LE_SPOOL_ONCE) ? LE_SPOOL_END
		                                          : LE_SPOOL_IDLE;
	else if (rc == RD_DAMAGE || rc == RD_ROTATED)
		rc = ev.event;
	if (rc < 0)
		return rc;
	if (!ev.fields && sp->open)
		ev.fields = sp->sc.hdr.fields;
	end_position(sp, &ev);
	memcpy(out, &ev, size < sizeof ev ? size : sizeof ev);
	return rc;
}

/* ---- the cursor ---- */

int le_spool_ack(le_spool *sp, uint64_t next_seq, uint64_t segment,
                 uint64_t offset, uint64_t lost)
{
	if (!sp)
		return LE_EINVAL;
	if (next_seq > sp->cur.next_seq) {
		sp->cur.next_seq = next_seq;
		sp->cur.seg_index = segment;
		sp->cur.offset = offset;
		sp->dirty = 1;
	}
	if (lost) {
		sp->cur.lost += lost;
		sp->dirty = 1;
	}
	return 0;
}

int le_spool_commit(le_spool *sp)
{
	if (!sp)
		return LE_EINVAL;
	if (!sp->dirty)
		return 0;
	sp->cur.gen++;
	sp->cur.shard = sp->id;
	sp->cur.written_ns = le__now_ns();
	int rc = le__fwd_write(sp->cfd, &sp->cur);
	if (rc < 0)
		return rc;
	sp->dirty = 0;
	return 0;
}

int le_spool_rewind(le_spool *sp)
{
	if (!sp)
		return LE_EINVAL;
	seg_close(sp);
	sp->min_seg = 0;
	/* Every origin's shipping starts at sequence 1: records retention
	 * deleted before any forwarder came are a gap like any other, so a
	 * collector knows where an origin begins. */
	sp->read_seq = sp->cur.next_seq ? sp->cur.next_seq : 1;
	return 0;
}

static void cursor_out(const le__fwd_cursor *c, le_spool_cursor *out)
{
	memset(out, 0, sizeof *out);
	out->next_seq = c->next_seq;
	out->segment = c->seg_index;
	out->offset = c->offset;
	out->lost = c->lost;
	out->written_ns = c->written_ns;
}

int le_spool_cursor_get(const le_spool *sp, le_spool_cursor *out)
{
	if (!sp || !out)
		return LE_EINVAL;
	cursor_out(&sp->cur, out);
	out->key = sp->key;
	return 0;
}

int le_spool_cursor_read(const char *dir, unsigned shard,
                         le_spool_cursor *out)
{
	char sd[LE_PATH_MAX];
	le__fwd_cursor c;
	int rc;

	if (!dir || !out)
		return LE_EINVAL;
	rc = le__shard_dir(sd, sizeof sd, dir, shard);
	if (rc < 0 || (rc = le__fwd_read(sd, &c)) < 0)
		return rc;
	cursor_out(&c, out);
	return 0;
}

/* ---- open, close ---- */

/* Where LE_SPOOL_ONCE stops: the end of the newest segment now. */
static void set_target(le_spool *sp)
{
	uint64_t *segs;
	size_t n;
	char path[LE_PATH_MAX];
	struct stat st;

	if (le__seg_list(sp->dir, &segs, &n) < 0)
		return;
	if (n > 0) {
		sp->tgt_seg = segs[n - 1];
		le__seg_path(path, sizeof path, sp->dir, sp->tgt_seg);
		if (le__stat(path, &st) == 0)
			sp->tgt_off = (uint64_t)st.st_size;
	}
	free(segs);
}

/* Open (creating) and lock the FORWARD file; its key; the cursor. */
static int cursor_open(le_spool *sp)
{
	char path[LE_PATH_MAX];
	int rc;

	if (snprintf(path, sizeof path, "%s/" LE_FWD_NAME, sp->dir) >=
	    (int)sizeof path)
		return -ENAMETOOLONG;
	sp->cfd = le__open_in(path, LE_IN_SHARD, O_RDWR | O_CREAT, 0640);
	if (sp->cfd < 0)
		return sp->cfd;
	if ((rc = le__flock(sp->cfd, LOCK_EX | LOCK_NB)) < 0) {
		if (rc != -EWOULDBLOCK) {
			le__seterr("%s: cannot lock it: %s", path,
			           strerror(-rc));
			return rc;
		}
		le__seterr("%s: another forwarder has this shard", path);
		return LE_EBUSY;
	}
	rc = le__fwd_key(sp->cfd, &sp->key);
	if (rc < 0)
		return rc;
	if (le__fwd_read(sp->dir, &sp->cur) < 0) {
		/* New (or its first write torn): a cursor at 0 says a
		 * forwarder is here and has shipped nothing yet, so
		 * retention keeps what it has not shipped from now on. */
		memset(&sp->cur, 0, sizeof sp->cur);
		sp->dirty = 1;
	}
	return 0;
}

int le_spool_open(le_spool **out, const char *dir, unsigned shard,
                  unsigned flags)
{
	le_spool *sp;
	int rc;

	le__clearerr();
	if (!out)
		return LE_EINVAL;
	*out = NULL;
	if (!dir || shard >= LE_SHARD_DIRS_MAX)
		return LE_EINVAL;
	if (!(sp = calloc(1, sizeof *sp)))
		return LE_ENOMEM;
	sp->id = shard;
	sp->flags = flags;
	sp->cfd = -1;
	rc = le__shard_dir(sp->dir, sizeof sp->dir, dir, shard);
	if (rc == 0)
		rc = cursor_open(sp);
	if (rc < 0) {
		le_spool_close(sp);
		return rc;
	}
	if (flags & LE_SPOOL_ONCE)
		set_target(sp);
	le_spool_rewind(sp);
	*out = sp;
	return 0;
}

void le_spool_close(le_spool *sp)
{
	if (!sp)
		return;
	seg_close(sp);
	le__dcache_free(&sp->dc);
	if (sp->cfd >= 0)
		le__close(sp->cfd);
	free(sp->again);
	free(sp->relinked);
	le__relink_free(&sp->rl);
	free(sp);
}

/* ---- the directory ---- */


size_t le_spool_host_token(char *out, size_t cap, const char *host)
{
	if (!out || !cap || !host || !le__host_valid(host, strlen(host)))
		return 0;
	return le__host_token(out, cap, host);
}

int le_spool_shards(const char *dir, unsigned *out, size_t cap)
{
	uint32_t *ids;
	size_t n;
	int rc;

	if (!dir || (!out && cap))
		return LE_EINVAL;
	if ((rc = le__shard_list(dir, &ids, &n)) < 0)
		return rc;
	for (size_t i = 0; i < n && i < cap; i++)
		out[i] = ids[i];
	free(ids);
	return (int)n;
}

int le_spool_segments(const char *dir, unsigned shard, uint64_t **out,
                      size_t *n)
{
	char sd[LE_PATH_MAX];
	int rc;

	if (!dir || !out || !n)
		return LE_EINVAL;
	rc = le__shard_dir(sd, sizeof sd, dir, shard);
	return rc < 0 ? rc : le__seg_list(sd, out, n);
}

int le_spool_segment_info(const char *dir, unsigned shard, uint64_t index,
                          int what, le_spool_seg *out)
{
	char sd[LE_PATH_MAX], path[LE_PATH_MAX];
	int rc;

	if (!dir || !out)
		return LE_EINVAL;
	rc = le__shard_dir(sd, sizeof sd, dir, shard);
	memset(out, 0, sizeof *out);
	if (rc == 0)
		rc = le__seg_path(path, sizeof path, sd, index);
	if (rc == 0 && (what & 2))
		rc = le__seg_stat(path, &out->bytes, &out->mtime_ns);
	if (rc == 0 && (what & 1)) {
		rc = le__seg_base(sd, index, &out->base_seq);
		if (rc == LE_ECORRUPT && !spool_exists(sd, index))
			rc = -ENOENT;
	}
	return rc < 0 ? rc : 0;
}
