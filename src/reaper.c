/*
 * reaper.c -- retention's unlinks, off the writer threads.
 *
 * Deleting a 64 MiB segment on ext4 frees its extents inside unlink(2):
 * 50-130 ms in the soak (docs/BENCHMARKS.md), during which a writer that
 * did it itself took no records, and the queue (1 MiB: a few tens of
 * milliseconds at full rate) filled.  Writers hand the paths to this one
 * thread per engine instead, through a bounded list; when the list is full
 * the writer unlinks the file itself, as before.
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
#include "engine.h"

#include <errno.h>
#include <string.h>

static void *reaper_main(void *arg)
{
	le_engine *e = arg;
	le__reaper *r = &e->reaper;
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
		le__seg_path(path, sizeof path, x.sh->dir, x.index);
		int rc = le__unlink(path);
		int failed = rc < 0 && rc != -ENOENT;
		if (failed) {
			atomic_store(&e->last_error, rc);
			atomic_fetch_add(&e->errors_total, 1);
		} else {
			atomic_fetch_add(&x.sh->segments_deleted, 1);
		}
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

int le__reaper_start(le_engine *e)
{
	le__reaper *r = &e->reaper;
	int rc;

	if ((rc = pthread_mutex_init(&r->mu, NULL)) != 0)
		return -rc;
	if ((rc = pthread_cond_init(&r->cv, NULL)) != 0) {
		pthread_mutex_destroy(&r->mu);
		return -rc;
	}
	r->inited = 1;
	rc = pthread_create(&r->thread, NULL, reaper_main, e);
	if (rc != 0)
		return -rc;
	le__name_thread(r->thread, "le-reaper");
	r->started = 1;
	return 0;
}

int le__reaper_push(le_engine *e, le__shard *sh, uint64_t index,
                    uint64_t bytes)
{
	le__reaper *r = &e->reaper;

	if (!r->started)
		return 0;
	pthread_mutex_lock(&r->mu);
	int ok = r->n + atomic_load(&r->nback) < LE_REAP_MAX && !r->stop;
	if (ok) {
		r->q[(r->head + r->n) % LE_REAP_MAX] =
			(le__reap){.sh = sh, .index = index, .bytes = bytes};
		r->n++;
		pthread_cond_broadcast(&r->cv);
	}
	pthread_mutex_unlock(&r->mu);
	return ok;
}

size_t le__reaper_take_back(le_engine *e, le__shard *sh, le__reap *out,
                            size_t cap)
{
	le__reaper *r = &e->reaper;
	size_t got = 0;

	if (!atomic_load_explicit(&r->nback, memory_order_relaxed))
		return 0; /* the common case: no lock */
	pthread_mutex_lock(&r->mu);
	unsigned nb = atomic_load(&r->nback), keep = 0;
	for (unsigned i = 0; i < nb; i++) {
		if (r->back[i].sh == sh && got < cap)
			out[got++] = r->back[i];
		else
			r->back[keep++] = r->back[i];
	}
	atomic_store(&r->nback, keep);
	pthread_mutex_unlock(&r->mu);
	return got;
}

void le__reaper_stop(le_engine *e)
{
	le__reaper *r = &e->reaper;

	if (!r->started)
		return;
	pthread_mutex_lock(&r->mu);
	r->stop = 1;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	pthread_join(r->thread, NULL);
	r->started = 0;
}

void le__reaper_free(le_engine *e)
{
	le__reaper *r = &e->reaper;

	if (!r->inited)
		return;
	pthread_mutex_destroy(&r->mu);
	pthread_cond_destroy(&r->cv);
	r->inited = 0;
}
