/*
 * recover.c -- what le_open does for a shard before its writer starts:
 * find where its store appends (the last segment's valid end, a torn tail
 * cut, sequence numbers continued), then write out what a dead process
 * left in its queue file, in order, exactly once.
 *
 * Valid end.  The last segment is scanned from its header (or from the
 * checkpoint's frame, once that frame is checked to decode there and end
 * where the checkpoint says) to the first frame that does not decode.
 * Nothing valid after it: a torn tail, cut (and the cut synced) before
 * anything is appended.  A valid frame after it: damage inside the file,
 * which is kept whole for readers to report, and new records go to a new
 * segment numbered on after every frame found.
 *
 * Dead queue.  Published slots are records the dead process's le_write
 * accepted; a slot it claimed but never published was never accepted and
 * is stepped over; a slot whose sequence number is already in the segment
 * was written before the kill and is skipped.  Each batch is released as
 * it is written, so a kill during recovery never writes a record twice.
 */
#define _GNU_SOURCE
#include "engine/recover.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/seg_zst.h"
#include "store/store.h"
#include "engine/writer.h"
#include "engine/wsync.h"

/* Check the checkpoint against the segment: the frame it names must decode
 * at last_off and end exactly at offset.  @return 1 when it can be used. */
static int ckpt_usable(le__scan *s, const le__ckpt *c)
{
	le__frame f;
	const char *why;

	if (c->offset <= LE_SEG_HDR || c->offset > s->file_len ||
	    c->last_off < LE_SEG_HDR || c->last_off >= c->offset ||
	    c->next_seq == 0)
		return 0;
	s->off = c->last_off;
	s->next_seq = c->next_seq - 1;
	if (le__scan_next(s, &f, &why) == LE_FRAME_OK && s->off == c->offset)
		return 1;
	s->off = LE_SEG_HDR;
	s->next_seq = s->hdr.base_seq;
	return 0;
}

/* Scan the last segment to its valid end.  Sets st->next_seq, last_ts,
 * w_last_off; *valid_end; *damaged when a valid frame follows the first
 * bad one (then the file must be kept whole and sealed, never truncated:
 * that would cut records that were written). */
static int scan_tail(le__store *st, le__scan *s, const le__ckpt *c,
                     int have_ckpt, uint64_t *valid_end, int *damaged)
{
	le__frame f;
	const char *why;
	int rc;

	if (have_ckpt && c->seg_index == s->hdr.index)
		ckpt_usable(s, c);
	while ((rc = le__scan_next(s, &f, &why)) == LE_FRAME_OK) {
		st->w_last_off = s->off - f.size - 4;
		if (f.ts > st->last_ts)
			st->last_ts = f.ts;
	}
	if (rc < 0)
		return rc;
	*valid_end = s->off;
	st->next_seq = s->next_seq;
	*damaged = 0;
	if (s->off >= s->file_len)
		return 0;
	rc = le__scan_resync(s);
	if (rc <= 0)
		return rc; /* nothing valid follows: a torn tail */
	/* Damage inside the file: continue numbering after its highest
	 * sequence so no number is used twice. */
	*damaged = 1;
	do {
		while ((rc = le__scan_next(s, &f, &why)) == LE_FRAME_OK)
			if (f.ts > st->last_ts)
				st->last_ts = f.ts;
		if (rc < 0)
			return rc;
	} while ((rc = le__scan_resync(s)) == 1);
	if (s->next_seq > st->next_seq)
		st->next_seq = s->next_seq;
	return rc < 0 ? rc : 0;
}

/* Set next_seq past every frame of segment `index` (best effort). */
static void seq_after(le__store *st, uint64_t index)
{
	char path[LE_PATH_MAX];
	le__scan s;
	le__frame f;
	const char *why;

	le__seg_path(path, sizeof path, st->dir, index);
	if (le__scan_open(&s, path, st->shard, &why) < 0)
		return;
	do
		while (le__scan_next(&s, &f, &why) == LE_FRAME_OK)
			;
	while (le__scan_resync(&s) == 1);
	if (s.next_seq > st->next_seq)
		st->next_seq = s.next_seq;
	le__scan_close(&s);
}

/* Cut a torn tail: [valid_end, file_len) goes, and the cut is synced
 * before anything is appended after it. */
static int cut_tail(le__store *st, const char *path, uint64_t valid_end,
                    uint64_t file_len)
{
	int fd = le__open_in(path, LE_IN_SHARD, O_WRONLY, 0);
	if (fd < 0)
		return fd;
	int rc = le__ftruncate(fd, valid_end);
	if (rc == 0)
		rc = le__fdatasync(fd);
	le__close(fd);
	if (rc == 0)
		atomic_fetch_add(&st->recovered_truncated, file_len - valid_end);
	return rc;
}

/*
 * The last segment, `index`: reopen it for appending at its valid end, or
 * (@return 1) leave it as it is and have the caller start segment
 * st->seg_index + 1.
 */
static int recover_last(le__store *st, uint64_t index, const le__ckpt *c,
                        int have_ckpt)
{
	char path[LE_PATH_MAX];
	le__scan s;
	const char *why;
	uint64_t valid_end;
	int damaged, rc;

	le__seg_path(path, sizeof path, st->dir, index);
	rc = le__scan_open(&s, path, st->shard, &why);
	if (rc == 0 && s.hdr.index != index) {
		/* A segment under another file's name (copied, renamed):
		 * readers refuse it, so never append to it. */
		le__scan_close(&s);
		rc = LE_ECORRUPT;
	}
	if (rc == LE_ECORRUPT && le__seg_unborn(path)) {
		/* Crash between create and first write: nothing was in it.
		 * Number on after the segment before it. */
		rc = le__unlink(path);
		if (rc < 0)
			return rc;
		if (st->sealed.nsegs)
			seq_after(st, st->sealed.segs[st->sealed.nsegs - 1].index);
		st->seg_index = index - 1;
		return 1;
	}
	if (rc == LE_ECORRUPT) {
		/* A header damaged after the fact, or a file under another
		 * name: keep it for readers to report; number on after every
		 * frame we can know of -- the previous segment's, this file's
		 * if its header still reads, or what a checkpoint about this
		 * very file says (the only witness left of a lost header). */
		if (st->sealed.nsegs)
			seq_after(st, st->sealed.segs[st->sealed.nsegs - 1].index);
		seq_after(st, index);
		if (have_ckpt && c->seg_index == index && c->next_seq > st->next_seq)
			st->next_seq = c->next_seq;
		le__store_add_sealed(st, index, 0);
		st->seg_index = index;
		return 1;
	}
	if (rc < 0) {
		if (rc != LE_EUNSAFE)
			le__seterr("%s: %s", path, why[0] ? why : le_strerror(rc));
		return rc;
	}
	rc = scan_tail(st, &s, c, have_ckpt, &valid_end, &damaged);
	if (rc == 0 && have_ckpt && valid_end < s.file_len) {
		/* Started from the checkpoint and did not reach the end: the
		 * checkpoint may have named bytes inside a payload that only
		 * looked like a frame.  Never cut on its word; scan again from
		 * the header. */
		s.off = LE_SEG_HDR;
		s.next_seq = s.hdr.base_seq;
		st->last_ts = 0;
		rc = scan_tail(st, &s, c, 0, &valid_end, &damaged);
	}
	uint64_t file_len = s.file_len;
	uint32_t fields = s.hdr.fields, version = s.hdr.version;
	le__scan_close(&s);
	if (rc < 0)
		return rc;
	if (!damaged && valid_end < file_len) {
		rc = cut_tail(st, path, valid_end, file_len);
		if (rc < 0)
			return rc;
	}
	if (damaged || fields != st->cfg->fields || version != LE_SEG_VERSION) {
		/* Keep the file as it is; new records go to a new segment
		 * (an older version's cannot hold today's frames). */
		le__store_add_sealed(st, index, damaged ? file_len : valid_end);
		st->seg_index = index;
		return 1;
	}
	return le__store_reopen(st, index, valid_end);
}

int le__recover_store(le__store *st)
{
	uint64_t *idx = NULL;
	size_t n = 0;
	le__ckpt c;
	char path[LE_PATH_MAX];
	int rc, have_ckpt;

	have_ckpt = le__ckpt_read(st->dir, &c) == 0 && c.shard == st->shard;
	st->ckpt_gen = have_ckpt ? c.gen : 0;
	le__zst_tidy(st->dir); /* what an archiver's crash left */
	rc = le__seg_list(st->dir, &idx, &n);
	if (rc < 0)
		goto out;
	int last_archived = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t size = 0, mtime;
		le__seg_path(path, sizeof path, st->dir, idx[i]);
		int which = le__seg_stat(path, &size, &mtime);
		if (i + 1 == n) {
			last_archived = which == 1;
			break;
		}
		rc = le__store_add_sealed(st, idx[i], which >= 0 ? size : 0);
		if (rc < 0)
			goto out;
	}
	st->next_seq = 1;
	if (n == 0) {
		if (have_ckpt && c.next_seq > st->next_seq)
			st->next_seq = c.next_seq; /* all segments deleted */
		rc = le__store_create(st, have_ckpt ? c.seg_index + 1 : 1);
		goto out;
	}
	if (last_archived) {
		/* Only sealed segments are archived, so the newest one of a
		 * shard is one only when the segments after it were deleted
		 * (by hand): it stays sealed, and numbers continue after it. */
		uint64_t size = 0, mtime;
		rc = 1;
		le__seg_path(path, sizeof path, st->dir, idx[n - 1]);
		le__seg_stat(path, &size, &mtime);
		seq_after(st, idx[n - 1]);
		if (have_ckpt && c.next_seq > st->next_seq)
			st->next_seq = c.next_seq;
		st->seg_index = idx[n - 1];
		if (le__store_add_sealed(st, idx[n - 1], size) < 0)
			rc = LE_ENOMEM;
	} else {
		rc = recover_last(st, idx[n - 1], &c, have_ckpt);
	}
	if (rc == 1) /* the checkpoint's word is not enough to skip numbers */
		rc = le__store_create(st, st->seg_index + 1);
out:
	free(idx);
	if (rc < 0 && !le_errmsg()[0])
		le__seterr("shard %u (%s): recovery failed: %s", st->shard,
		           st->dir, le_strerror(rc));
	return rc;
}

/* Records (markers left out) in st's segments numbered from `from` on:
 * scanned from the last segment back to the one holding `from`. */
static uint64_t written_since(le__store *st, uint64_t from)
{
	uint64_t *idx, n_rec = 0;
	size_t n;
	char path[LE_PATH_MAX];
	le__scan s;
	le__frame f;
	const char *why;

	if (from >= st->next_seq || le__seg_list(st->dir, &idx, &n) < 0)
		return 0;
	for (size_t i = n; i-- > 0;) {
		le__seg_path(path, sizeof path, st->dir, idx[i]);
		if (le__scan_open(&s, path, st->shard, &why) < 0)
			continue;
		uint64_t base = s.hdr.base_seq;
		do
			while (le__scan_next(&s, &f, &why) == LE_FRAME_OK)
				n_rec += f.seq >= from &&
				         !(f.flags & LE_REC_MARKER);
		while (le__scan_resync(&s) == 1);
		le__scan_close(&s);
		if (base <= from)
			break;
	}
	free(idx);
	return n_rec;
}

/* The walk stopped before head and nothing after could be framed. */
static void note_lost(le__shard *sh)
{
	le__qrecov *q = &sh->w.rq;
	q->dropped++;
	if (q->named < LE_QDMG_NAMED) {
		q->pos[q->named] = sh->w.rd;
		q->why[q->named++] = "nothing framable after it";
	}
}

/* Where the walk starts and stops, and what it may skip (le__qrecov). */
static void walk_bounds(le__shard *sh, uint64_t *start)
{
	const le__ring *r = &sh->ring;
	le__qrecov *q = &sh->w.rq;
	uint64_t head = atomic_load(r->head), tail = atomic_load(r->tail);
	uint64_t rel = atomic_load(r->rel), pos, seq;

	memset(q, 0, sizeof *q);
	*start = le__ring_resume(r);
	if (le__ring_get_mark(r, &pos, &seq) == 0 &&
	    (pos == tail || pos == rel)) {
		/* The last release ended at pos: whichever of tail and the
		 * releasing word says so is the undamaged one. */
		*start = pos;
		q->have_mark = 1;
		q->mark_pos = pos;
		q->written = sh->store ? written_since(sh->store, seq) : 0;
	} else if (le__ring_get_mark(r, &pos, &seq) == 0 && pos > *start &&
	           pos - *start <= r->lap) {
		/* killed between a release's mark and its first store */
		q->have_mark = 1;
		q->mark_pos = pos;
		q->written = sh->store ? written_since(sh->store, seq) : 0;
	}
	/* Every line before head was claimed; a head no walk from here
	 * can reach is damaged, and the walk ends where the words do. */
	q->head_sane = head >= *start && head - *start <= r->lap &&
	               head % LE_SLOT_ALIGN == 0;
	q->end = q->head_sane ? head : *start + r->lap;
}

/* Deferred records written without their text: counted as damage, and
 * named after what report() said of the QUEUE, if anything. */
static void report_sites(le__shard *sh, int queue_said)
{
	const le__qrecov *q = &sh->w.rq;
	char before[512];

	if (!q->sites_lost)
		return;
	atomic_fetch_add(&sh->prog.damaged, q->sites_lost);
	snprintf(before, sizeof before, "%s%s", queue_said ? le_errmsg() : "",
	         queue_said ? "; " : "");
	if (sh->sites.hdr_damage)
		le__seterr("%sshard %u: SITES header damaged (%s): %llu deferred "
		           "record(s) written as \"" LE_SITE_LOST_TEXT "\" (the "
		           "first at queue position %llu)",
		           before, sh->id, sh->sites.hdr_damage,
		           (unsigned long long)q->sites_lost,
		           (unsigned long long)q->site_pos);
	else
		le__seterr("%sshard %u: SITES damaged: %llu deferred record(s) "
		           "written as \"" LE_SITE_LOST_TEXT "\" (the first at "
		           "queue position %llu, call site %u: %s)",
		           before, sh->id, (unsigned long long)q->sites_lost,
		           (unsigned long long)q->site_pos, q->site_id,
		           q->site_why ? q->site_why : "unknown");
}

/* le_errmsg and the stats for what the walk met in the QUEUE.
 * @return 1 when le_errmsg was set. */
static int report_queue(le__shard *sh, uint64_t head)
{
	le__qrecov *q = &sh->w.rq;
	char where[256] = "";
	size_t off = 0;

	if (sh->ring.hdr_damaged)
		le__seterr("shard %u: QUEUE header damaged (checksum); the "
		           "ring's size was taken from the file's length",
		           sh->id);
	else if (q->clock_damaged)
		le__seterr("shard %u: QUEUE clock area damaged (checksum); its "
		           "records' times were converted with this process's "
		           "clock", sh->id);
	else if (q->abandoned)
		le__seterr("shard %u: QUEUE: %llu slot(s) claimed and never "
		           "published were skipped (a producer cut off inside "
		           "le_write, or a damaged state word)", sh->id,
		           (unsigned long long)q->abandoned);
	if (!q->dropped && !q->doubtful)
		return sh->ring.hdr_damaged || q->clock_damaged || q->abandoned;
	atomic_fetch_add(&sh->prog.damaged, q->dropped + q->doubtful);
	for (unsigned i = 0; i < q->named && off < sizeof where; i++)
		off += (size_t)snprintf(where + off, sizeof where - off,
		                        "%s%llu (%s)", i ? ", " : "",
		                        (unsigned long long)q->pos[i], q->why[i]);
	le__seterr("shard %u: QUEUE damaged%s: %llu record(s) dropped, %llu "
	           "doubtful (written, time clamped); slots at position %s%s "
	           "(queue head %llu)",
	           sh->id, sh->ring.hdr_damaged ? " (header too)" : "",
	           (unsigned long long)q->dropped,
	           (unsigned long long)q->doubtful, where,
	           q->dropped + q->doubtful > q->named ? ", ..." : "",
	           (unsigned long long)head);
	return 1;
}

/* le_errmsg and the stats for what recovery met: QUEUE, then SITES. */
static void report(le__shard *sh, uint64_t head)
{
	report_sites(sh, report_queue(sh, head));
}

int le__recover_queue(le__shard *sh)
{
	const le__ring *r = &sh->ring;
	uint64_t head = atomic_load(r->head);
	int rc = 0;

	walk_bounds(sh, &sh->w.rd);
	if (!le__ring_busy(r) && sh->w.rd == atomic_load(r->tail)) {
		report(sh, head);
		return 0;
	}
	/* The walk starts on a line (tail, the releasing word, or the
	 * mark); head may be anything: the walk stops where the words stop
	 * making sense, a lap later at the latest (a word's lap number
	 * never matches two laps).  It releases what it writes, batch by
	 * batch; the engine then renews the file. */
	if (sh->w.rd % LE_SLOT_ALIGN) {
		sh->w.rq.dropped = 1;
		atomic_fetch_add(&sh->prog.damaged, 1);
		le__seterr("shard %u: QUEUE damaged (tail %llu, not on a "
		           "slot line): its records were dropped, how many "
		           "is unknown", sh->id, (unsigned long long)sh->w.rd);
		sh->w.rd = atomic_load(r->tail);
		return 0;
	}
	/* Everything before the start is written: releases go on from
	 * there, whatever tail said (a damaged tail would have them write
	 * FREE words over slots not yet walked). */
	atomic_store(sh->ring.tail, sh->w.rd);
	/* The dead process may have taken records larger than this engine
	 * would (a larger max_record_bytes): room for the largest its ring
	 * can hold, or the walk would stop at the first of them as if the
	 * file were damaged. */
	if (sh->store && r->size > sh->e->max_rec)
		le__store_resize(sh->store, (uint32_t)(r->size < UINT32_MAX / 2
		                                               ? r->size
		                                               : UINT32_MAX / 2));
	/* Its stamps are in the dead process's clock (TSC ticks or ns, and
	 * its conversion), which need not be ours (LE_NO_TSC set in one and
	 * not the other, another version).  A file without one gets ours,
	 * and the clamp keeps its records in order and not after now. */
	le__clock own = sh->w.clock;
	if (le__ring_get_clock(r, &sh->w.clock) < 0) {
		sh->w.clock = own;
		sh->w.rq.clock_damaged = le__ring_has_clock(r);
	}
	sh->w.recovering = 1;
	while ((rc = le__writer_pass(sh)) == 1)
		;
	sh->w.recovering = 0;
	sh->w.clock = own;
	if (sh->store)
		le__store_resize(sh->store, 0);
	/* Stopping short of head is not: every slot before head was claimed
	 * (a producer moves head before it stores its claim word), and one
	 * whose producer died before that word was stepped over. */
	if (rc == 0 && sh->w.rd < sh->w.rq.end && sh->w.rq.end == head &&
	    !sh->w.rq.dropped)
		/* stopped before head without a slot it could frame */
		note_lost(sh);
	report(sh, head);
	if (rc == 0 && sh->e->cfg.durability != LE_SYNC_NONE)
		rc = le__sync_sinks(sh);
	return rc;
}
