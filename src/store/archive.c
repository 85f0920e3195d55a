/*
 * archive.c -- the engine's archiver thread (archive.h).  Modelled on the
 * reaper (reaper.c): a bounded list in, outcomes back to their writer.
 */
#include "store/archive.h"

#include <errno.h>
#include <string.h>

#include "logengine.h"
#include "base/os.h"
#include "store/seg_zst.h"

static void *archiver_main(void *arg)
{
	le__archiver *a = arg;

	for (;;) {
		pthread_mutex_lock(&a->mu);
		while (!a->n && !atomic_load(&a->stop))
			pthread_cond_wait(&a->cv, &a->mu);
		if (atomic_load(&a->stop)) {
			pthread_mutex_unlock(&a->mu);
			break;
		}
		/* It stays in q (counted against the bound) until its
		 * outcome has a place in done. */
		le__arc_job j = a->q[a->head];
		pthread_mutex_unlock(&a->mu);
		uint64_t in;
		j.rc = le__zst_archive(j.dir, j.index, a->level, &a->stop, &in,
		                       &j.zbytes);
		if (j.rc == 0) {
			atomic_fetch_add(&a->archived, 1);
			atomic_fetch_add(&a->bytes_in, in);
			atomic_fetch_add(&a->bytes_out, j.zbytes);
		} else if (j.rc != -ENOENT && j.rc != -ECANCELED &&
		           j.rc != -EFBIG) {
			atomic_store(a->last_error, j.rc);
		}
		pthread_mutex_lock(&a->mu);
		a->head = (a->head + 1) % LE_ARC_MAX;
		a->n--;
		a->done[atomic_load(&a->ndone)] = j;
		atomic_fetch_add(&a->ndone, 1);
		pthread_mutex_unlock(&a->mu);
	}
	return NULL;
}

int le__archiver_start(le__archiver *a, int level, _Atomic int *last_error)
{
	int rc;

	a->level = level;
	a->last_error = last_error;
	if ((rc = pthread_mutex_init(&a->mu, NULL)) != 0)
		return -rc;
	if ((rc = pthread_cond_init(&a->cv, NULL)) != 0) {
		pthread_mutex_destroy(&a->mu);
		return -rc;
	}
	a->inited = 1;
	rc = pthread_create(&a->thread, NULL, archiver_main, a);
	if (rc != 0)
		return -rc;
	le__name_thread(a->thread, "le-archive");
	a->started = 1;
	return 0;
}

int le__archiver_push(le__archiver *a, const void *owner, const char *dir,
                      uint64_t index)
{
	if (!a || !a->started)
		return 0;
	pthread_mutex_lock(&a->mu);
	int ok = a->n + atomic_load(&a->ndone) < LE_ARC_MAX &&
	         !atomic_load(&a->stop);
	if (ok) {
		a->q[(a->head + a->n) % LE_ARC_MAX] =
			(le__arc_job){.owner = owner, .dir = dir, .index = index};
		a->n++;
		pthread_cond_broadcast(&a->cv);
	}
	pthread_mutex_unlock(&a->mu);
	return ok;
}

unsigned le__archiver_take(le__archiver *a, const void *owner,
                           le__arc_job *out, unsigned cap)
{
	unsigned got = 0;

	if (!a || !a->inited ||
	    !atomic_load_explicit(&a->ndone, memory_order_relaxed))
		return 0; /* the common case: no lock */
	pthread_mutex_lock(&a->mu);
	unsigned nd = atomic_load(&a->ndone), keep = 0;
	for (unsigned i = 0; i < nd; i++) {
		if (a->done[i].owner == owner && got < cap)
			out[got++] = a->done[i];
		else
			a->done[keep++] = a->done[i];
	}
	atomic_store(&a->ndone, keep);
	pthread_mutex_unlock(&a->mu);
	return got;
}

void le__archiver_stop(le__archiver *a)
{
	if (!a->started)
		return;
	pthread_mutex_lock(&a->mu);
	atomic_store(&a->stop, 1);
	pthread_cond_broadcast(&a->cv);
	pthread_mutex_unlock(&a->mu);
	pthread_join(a->thread, NULL);
	a->started = 0;
}

void le__archiver_free(le__archiver *a)
{
	if (!a->inited)
		return;
	pthread_mutex_destroy(&a->mu);
	pthread_cond_destroy(&a->cv);
	a->inited = 0;
}
