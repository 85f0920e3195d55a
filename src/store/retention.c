/*
 * retention.c -- a shard's sealed segments, oldest first: those to
 * compress (archive_keep_segments, archive_after_ms), and the deletion of
 * the oldest while the shard holds more than retention_bytes or they are
 * older than retention_age_ms.  The writer decides (at each rotation, and
 * every second when an age or a count is set); the archiver thread
 * (archive.c) compresses, the reaper thread (reaper.c) unlinks.  A
 * segment's bytes are what it takes on disk: its archive's once archived.
 */
#define _GNU_SOURCE
#include "store/store.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "store/archive.h"
#include "base/os.h"
#include "store/reaper.h"
#include "store/seg_zst.h"
#include "store/fwd_cursor.h"

/* Put (index, bytes) in the list at position at (st->nsegs: the end). */
static int segs_insert(le__store *st, size_t at, uint64_t index,
                       uint64_t bytes)
{
	if (st->nsegs == st->segs_cap) {
		size_t nc = st->segs_cap ? st->segs_cap * 2 : 16;
		le__segmeta *n = realloc(st->segs, nc * sizeof *n);
		if (!n)
			return LE_ENOMEM;
		st->segs = n;
		st->segs_cap = nc;
	}
	memmove(st->segs + at + 1, st->segs + at,
	        (st->nsegs - at) * sizeof *st->segs);
	st->segs[at].index = index;
	st->segs[at].bytes = bytes;
	st->segs[at].mtime_ns = 0;
	st->segs[at].arc = LE_ARC_PLAIN;
	const le_config *c = st->cfg;
	if (c->retention_age_ms || c->archive_after_ms ||
	    c->archive_keep_segments) {
		char path[LE_PATH_MAX];
		uint64_t size, mtime;
		int rc = le__seg_path(path, sizeof path, st->dir, index);
		if (rc == 0)
			rc = le__seg_stat(path, &size, &mtime);
		if (rc >= 0)
			st->segs[at].mtime_ns = mtime;
		if (rc == 1)
			st->segs[at].arc = LE_ARC_DONE;
	}
	st->nsegs++;
	st->segs_bytes += bytes;
	return 0;
}

int le__store_add_sealed(le__store *st, uint64_t index, uint64_t bytes)
{
	return segs_insert(st, st->nsegs, index, bytes);
}

/* Put segments whose unlink failed back in the list where their index
 * goes (before every segment it held: indices only grow). */
static void segs_take_back(le__store *st)
{
	le__reap back[LE_REAP_MAX];
	size_t n = le__reaper_take_back(st->reaper, st, back, LE_REAP_MAX);

	for (size_t i = 0; i < n; i++) {
		size_t at = 0;
		while (at < st->nsegs && st->segs[at].index < back[i].index)
			at++;
		if (segs_insert(st, at, back[i].index, back[i].bytes) < 0)
			return; /* ENOMEM: left out of retention until reopened */
	}
}

/* Delete the oldest sealed segments while the shard is over its budget.
 * The active segment is not in the list and is never deleted.  A segment
 * handed to the reaper leaves the list (and the shard's bytes) at once;
 * one whose unlink fails comes back (segs_take_back) and is tried again
 * at the next rotation.  The writer unlinks itself only when the reaper's
 * list is full; a failure then keeps the segment in the list. */
/* Was m last written more than retention_age_ms before now? */
static int too_old(const le__store *st, const le__segmeta *m, uint64_t now)
{
	uint64_t age = st->cfg->retention_age_ms * 1000000ull;

	return age && m->mtime_ns && now > m->mtime_ns &&
	       now - m->mtime_ns > age;
}

/* The outcomes of the archiver's work: an archived segment now takes its
 * archive's bytes; one that failed is not tried again by this engine. */
static void archive_take_back(le__store *st)
{
	le__arc_job done[LE_ARC_MAX];
	unsigned n = le__archiver_take(st->archiver, st, done, LE_ARC_MAX);

	for (unsigned i = 0; i < n; i++) {
		for (size_t k = 0; k < st->nsegs; k++) {
			le__segmeta *m = &st->segs[k];
			if (m->index != done[i].index)
				continue;
			if (done[i].rc == 0) {
				st->segs_bytes -= m->bytes;
				m->bytes = done[i].zbytes;
				st->segs_bytes += m->bytes;
				m->arc = LE_ARC_DONE;
			} else {
				/* Stopped (le_close): the next engine tries
				 * again.  Failed: not this engine. */
				m->arc = done[i].rc == -ECANCELED
				                 ? LE_ARC_PLAIN : LE_ARC_NEVER;
			}
			break;
		}
	}
}

/* Hand the archiver the sealed segments beyond the newest
 * archive_keep_segments or last written more than archive_after_ms ago,
 * oldest first, and none a forwarder has not shipped (it reads segments,
 * and would read an archive whole to ship a part of it). */
static void archive_pick(le__store *st, uint64_t now)
{
	const le_config *c = st->cfg;
	uint64_t after = c->archive_after_ms * 1000000ull;

	if (!st->archiver || (!c->archive_keep_segments && !after))
		return;
	for (size_t i = 0; i < st->nsegs; i++) {
		le__segmeta *m = &st->segs[i];
		if (m->arc != LE_ARC_PLAIN)
			continue;
		int beyond = c->archive_keep_segments &&
		             i + c->archive_keep_segments < st->nsegs;
		int old = after && m->mtime_ns && now > m->mtime_ns &&
		          now - m->mtime_ns > after;
		if (!beyond && !old)
			continue;
		if (m->bytes > LE_ZST_MAX_BYTES) {
			m->arc = LE_ARC_NEVER;
			continue;
		}
		if (!le__ship_done(st->dir, m->index))
			break; /* nor any after it */
		if (!le__archiver_push(st->archiver, st, st->dir, m->index))
			break; /* full: at the next look */
		m->arc = LE_ARC_QUEUED;
	}
}

void le__retention(le__store *st, uint64_t active_bytes)
{
	uint64_t keep = st->cfg->retention_bytes, now = le__now_ns();
	char path[LE_PATH_MAX];
	size_t drop = 0;

	archive_take_back(st); /* the bytes as they are on disk now */
	if (!keep && !st->cfg->retention_age_ms) {
		archive_pick(st, now);
		return;
	}
	segs_take_back(st);
	while (drop < st->nsegs) {
		le__segmeta *m = &st->segs[drop];
		uint64_t total = st->segs_bytes + active_bytes;
		int over = keep && total > keep;
		if (!over && !too_old(st, m, now))
			break;
		/* Too old but within the byte budget: what a forwarder has
		 * not shipped is kept up to the margin, as over it. */
		if (le__ship_retain(st->dir, m->index, total,
		                    over ? keep : total,
		                    st->cfg->retention_unshipped_bytes,
		                    &st->lost_unshipped))
			break; /* not yet forwarded (FORWARD): kept */
		le__reap x = {.owner = st, .dir = st->dir,
		              .deleted = &st->segments_deleted,
		              .index = m->index, .bytes = m->bytes};
		if (!le__reaper_push(st->reaper, &x)) {
			le__seg_path(path, sizeof path, st->dir, m->index);
			int rc = le__seg_unlink(path);
			if (rc < 0 && rc != -ENOENT) {
				atomic_store(st->last_error, rc);
				break;
			}
			atomic_fetch_add(&st->segments_deleted, 1);
		}
		st->segs_bytes -= m->bytes;
		drop++;
	}
	if (drop) {
		memmove(st->segs, st->segs + drop,
		        (st->nsegs - drop) * sizeof *st->segs);
		st->nsegs -= drop;
	}
	archive_pick(st, now); /* what retention keeps */
}
