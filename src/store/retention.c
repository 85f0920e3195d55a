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
#include "store/retention.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "store/archive.h"
#include "base/os.h"
#include "store/reaper.h"
#include "store/seg_zst.h"
#include "store/fwd_cursor.h"

/* Put (index, bytes) in the list at position at (s->nsegs: the end). */
static int segs_insert(le__seglist *s, const le__retain_env *e, size_t at,
                       uint64_t index, uint64_t bytes)
{
	if (s->nsegs == s->segs_cap) {
		size_t nc = s->segs_cap ? s->segs_cap * 2 : 16;
		le__segmeta *n = realloc(s->segs, nc * sizeof *n);
		if (!n)
			return LE_ENOMEM;
		s->segs = n;
		s->segs_cap = nc;
	}
	memmove(s->segs + at + 1, s->segs + at,
	        (s->nsegs - at) * sizeof *s->segs);
	s->segs[at].index = index;
	s->segs[at].bytes = bytes;
	s->segs[at].mtime_ns = 0;
	s->segs[at].arc = LE_ARC_PLAIN;
	const le_config *c = e->cfg;
	if (c->retention_age_ms || c->archive_after_ms ||
	    c->archive_keep_segments) {
		char path[LE_PATH_MAX];
		uint64_t size, mtime;
		int rc = le__seg_path(path, sizeof path, e->dir, index);
		if (rc == 0)
			rc = le__seg_stat(path, &size, &mtime);
		if (rc >= 0)
			s->segs[at].mtime_ns = mtime;
		if (rc == 1)
			s->segs[at].arc = LE_ARC_DONE;
	}
	s->nsegs++;
	s->segs_bytes += bytes;
	return 0;
}

int le__seglist_add(le__seglist *s, const le__retain_env *e, uint64_t index,
                   uint64_t bytes)
{
	return segs_insert(s, e, s->nsegs, index, bytes);
}

/* Put segments whose unlink failed back in the list where their index
 * goes (before every segment it held: indices only grow). */
static void segs_take_back(le__seglist *s, const le__retain_env *e)
{
	le__reap back[LE_REAP_MAX];
	size_t n = le__reaper_take_back(e->reaper, s, back, LE_REAP_MAX);

	for (size_t i = 0; i < n; i++) {
		size_t at = 0;
		while (at < s->nsegs && s->segs[at].index < back[i].index)
			at++;
		if (segs_insert(s, e, at, back[i].index, back[i].bytes) < 0)
			return; /* ENOMEM: left out of retention until reopened */
	}
}

/* Was m last written more than retention_age_ms before now? */
static int too_old(const le__retain_env *e, const le__segmeta *m,
                   uint64_t now)
{
	uint64_t age = e->cfg->retention_age_ms * 1000000ull;

	return age && m->mtime_ns && now > m->mtime_ns &&
	       now - m->mtime_ns > age;
}

/* The outcomes of the archiver's work: an archived segment now takes its
 * archive's bytes; one that failed is not tried again by this engine. */
static void archive_take_back(le__seglist *s, const le__retain_env *e)
{
	le__arc_job done[LE_ARC_MAX];
	unsigned n = le__archiver_take(e->archiver, s, done, LE_ARC_MAX);

	for (unsigned i = 0; i < n; i++) {
		for (size_t k = 0; k < s->nsegs; k++) {
			le__segmeta *m = &s->segs[k];
			if (m->index != done[i].index)
				continue;
			if (done[i].rc == 0) {
				s->segs_bytes -= m->bytes;
				m->bytes = done[i].zbytes;
				s->segs_bytes += m->bytes;
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
static void archive_pick(le__seglist *s, const le__retain_env *e,
                         uint64_t now)
{
	const le_config *c = e->cfg;
	uint64_t after = c->archive_after_ms * 1000000ull;

	if (!e->archiver || (!c->archive_keep_segments && !after))
		return;
	for (size_t i = 0; i < s->nsegs; i++) {
		le__segmeta *m = &s->segs[i];
		if (m->arc != LE_ARC_PLAIN)
			continue;
		int beyond = c->archive_keep_segments &&
		             i + c->archive_keep_segments < s->nsegs;
		int old = after && m->mtime_ns && now > m->mtime_ns &&
		          now - m->mtime_ns > after;
		if (!beyond && !old)
			continue;
		if (m->bytes > LE_ZST_MAX_BYTES) {
			m->arc = LE_ARC_NEVER;
			continue;
		}
		if (!le__ship_done(e->dir, m->index))
			break; /* nor any after it */
		if (!le__archiver_push(e->archiver, s, e->dir, m->index))
			break; /* full: at the next look */
		m->arc = LE_ARC_QUEUED;
	}
}

/* Delete the oldest sealed segments while the shard is over its budget.
 * The active segment is not in the list and is never deleted.  A segment
 * handed to the reaper leaves the list (and the shard's bytes) at once;
 * one whose unlink fails comes back (segs_take_back) and is tried again
 * at the next rotation.  The writer unlinks itself only when the reaper's
 * list is full; a failure then keeps the segment in the list. */
void le__retention(le__seglist *s, const le__retain_env *e,
                   uint64_t active_bytes)
{
	uint64_t keep = e->cfg->retention_bytes, now = le__now_ns();
	char path[LE_PATH_MAX];
	size_t drop = 0;

	archive_take_back(s, e); /* the bytes as they are on disk now */
	if (!keep && !e->cfg->retention_age_ms) {
		archive_pick(s, e, now);
		return;
	}
	segs_take_back(s, e);
	while (drop < s->nsegs) {
		le__segmeta *m = &s->segs[drop];
		uint64_t total = s->segs_bytes + active_bytes;
		int over = keep && total > keep;
		if (!over && !too_old(e, m, now))
			break;
		/* Too old but within the byte budget: what a forwarder has
		 * not shipped is kept up to the margin, as over it. */
		if (le__ship_retain(e->dir, m->index, total,
		                    over ? keep : total,
		                    e->cfg->retention_unshipped_bytes,
		                    e->lost_unshipped))
			break; /* not yet forwarded (FORWARD): kept */
		le__reap x = {.owner = s, .dir = e->dir,
		              .deleted = e->segments_deleted,
		              .index = m->index, .bytes = m->bytes};
		if (!le__reaper_push(e->reaper, &x)) {
			le__seg_path(path, sizeof path, e->dir, m->index);
			int rc = le__seg_unlink(path);
			if (rc < 0 && rc != -ENOENT) {
				atomic_store(e->last_error, rc);
				break;
			}
			atomic_fetch_add(e->segments_deleted, 1);
		}
		s->segs_bytes -= m->bytes;
		drop++;
	}
	if (drop) {
		memmove(s->segs, s->segs + drop,
		        (s->nsegs - drop) * sizeof *s->segs);
		s->nsegs -= drop;
	}
	archive_pick(s, e, now); /* what retention keeps */
}
