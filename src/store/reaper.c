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

#include "base/os.h"
#include "store/seg_zst.h"
#include "store/segment.h"

#include <errno.h>
#include <string.h>

static void *reaper_main(void *arg)
{
	le__reaper *r = arg;
	char path[LE_PATH_MAX];

	for (;;) {
		pthread_mutex_lock(&r->mu);
		while (!r->n && !r->stop)
			pthread_cond_wait(&r->cv, &r->mu);
		if (!r->n) {
			pthread_mutex_unlock(&r->mu);
			break; /* stop, and nothing left */
		}
		/* The entry stays in q (counted against the bound) until its
		 * unlink is done: if it fails, it needs a place in back. */
		le__reap x = r->q[r->head];
		pthread_mutex_unlock(&r->mu);
		le__seg_path(path, sizeof path, x.dir, x.index);
		int rc = le__seg_unlink(path);
		int failed = rc < 0 && rc != -ENOENT;
		if (failed)
			atomic_store(r->last_error, rc);
		else
			atomic_fetch_add(x.deleted, 1);
		pthread_mutex_lock(&r->mu);
		r->head = (r->head + 1) % LE_REAP_MAX;
		r->n--;
		if (failed) {
			r->back[atomic_load_explicit(&r->nback,
			                             memory_order_relaxed)] = x;
			atomic_fetch_add(&r->nback, 1);
		}
		pthread_mutex_unlock(&r->mu);
	}
	return NULL;
}

int le__reaper_start(le__reaper *r, _Atomic int *last_error)
{
	int rc;

	r->last_error = last_error;
	if ((rc = pthread_mutex_init(&r->mu, NULL)) != 0)
		return -rc;
	if ((rc = pthread_cond_init(&r->cv, NULL)) != 0) {
		pthread_mutex_destroy(&r->mu);
		return -rc;
	}
	r->inited = 1;
	rc = pthread_create(&r->thread, NULL, reaper_main, r);
	if (rc != 0)
		return -rc;
	le__name_thread(r->thread, "le-reaper");
	r->started = 1;
	return 0;
}

int le__reaper_push(le__reaper *r, const le__reap *x)
{
	if (!r->started)
		return 0;
	pthread_mutex_lock(&r->mu);
	int ok = r->n + atomic_load(&r->nback) < LE_REAP_MAX && !r->stop;
	if (ok) {
		r->q[(r->head + r->n) % LE_REAP_MAX] = *x;
		r->n++;
		pthread_cond_broadcast(&r->cv);
	}
	pthread_mutex_unlock(&r->mu);
	return ok;
}

size_t le__reaper_take_back(le__reaper *r, const void *owner, le__reap *out,
                            size_t cap)
{
	size_t got = 0;

	if (!atomic_load_explicit(&r->nback, memory_order_relaxed))
		return 0; /* the common case: no lock */
	pthread_mutex_lock(&r->mu);
	unsigned nb = atomic_load(&r->nback), keep = 0;
	for (unsigned i = 0; i < nb; i++) {
		if (r->back[i].owner == owner && got < cap)
			out[got++] = r->back[i];
		else
			r->back[keep++] = r->back[i];
	}
	atomic_store(&r->nback, keep);
	pthread_mutex_unlock(&r->mu);
	return got;
}

void le__reaper_stop(le__reaper *r)
{
	if (!r->started)
		return;
	pthread_mutex_lock(&r->mu);
	r->stop = 1;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	pthread_join(r->thread, NULL);
	r->started = 0;
}

void le__reaper_free(le__reaper *r)
{
	if (!r->inited)
		return;
	pthread_mutex_destroy(&r->mu);
	pthread_cond_destroy(&r->cv);
	r->inited = 0;
}
