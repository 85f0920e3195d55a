/*
 * reaper.c -- retention's unlinks, off the writer threads.
 *
 * Deleting a large segment on ext4 frees its extents inside unlink(2):
 * tens of milliseconds, during which a writer that did it itself would
 * take no records, and the queue (a few tens of milliseconds of records at
 * full rate) would fill.  Writers hand the segments to this one thread per
 * engine instead, through a bounded list; when the list is full a writer
 * unlinks the file itself.
 *
 * A segment handed over and not yet unlinked is an old, whole segment:
 * if the process dies first, the next le_open lists it again, and
 * retention deletes it then.  Segment indices only grow, so no new segment
 * can take its name meanwhile.  An unlink that fails (EACCES, EROFS, EIO)
 * is counted as an error and the segment goes back to its writer, which
 * puts it first in retention's list again: it still takes space, so it
 * still counts against retention_bytes, and the next rotation tries it
 * again.  segments_deleted counts only segments that are gone.  le_close
 * joins the thread after the writers, once every queued unlink is done.
 */
#include "store/reaper.h"

#include "store/seg_zst.h"
#include "store/segment.h"

#include <errno.h>

_Static_assert(offsetof(le__reap, owner) == 0,
               "the worker finds an entry's owner first");

/* Unlink one segment; it goes back to its writer only if that failed. */
static int reap_one(le__worker *w, void *entry)
{
	le__reaper *r = w->def.arg;
	le__reap *x = entry;
	char path[LE_PATH_MAX];

	le__seg_path(path, sizeof path, x->dir, x->index);
	int rc = le__seg_unlink(path);
	int failed = rc < 0 && rc != -ENOENT;
	if (failed)
		atomic_store(r->last_error, rc);
	else
		atomic_fetch_add(x->deleted, 1);
	return failed;
}

int le__reaper_start(le__reaper *r, _Atomic int *last_error)
{
	r->last_error = last_error;
	return le__worker_start(&r->w, "le-reaper", &(le__worker_def){
		.run = reap_one, .arg = r, .drain = 1, .q = r->q, .done = r->back,
		.size = sizeof r->q[0], .cap = LE_REAP_MAX});
}

int le__reaper_push(le__reaper *r, const le__reap *x)
{
	return le__worker_push(&r->w, x);
}

size_t le__reaper_take_back(le__reaper *r, const void *owner, le__reap *out,
                            size_t cap)
{
	return le__worker_take(&r->w, owner, out, cap);
}

void le__reaper_stop(le__reaper *r)
{
	le__worker_stop(&r->w);
}

void le__reaper_free(le__reaper *r)
{
	le__worker_free(&r->w);
}
