/*
 * worker.c -- a thread working through a bounded list, entries handed
 * back to their owner (worker.h).
 *
 * Memory order: every write of n, ndone and stop is made under mu, so
 * under mu any order would do.  Two reads are made without it: take's
 * first look at ndone (relaxed: it is only a hint; a count just raised is
 * seen at the owner's next look, and the entries themselves are read
 * under mu, which orders them), and run's look at stop between steps of
 * long work (the archiver's compression), which only needs to see it in
 * time.
 */
#include "base/worker.h"

#include <errno.h>
#include <stdalign.h>
#include <string.h>

#include "base/os.h"

/* The largest entry: run works on a copy on the thread's stack. */
#define LE_WORKER_ENTRY_MAX 64

/* Entry i of arr (q, done, or take's out). */
static unsigned char *at(const le__worker *w, void *arr, size_t i)
{
	return (unsigned char *)arr + i * w->def.size;
}

static const void *owner_of(const unsigned char *entry)
{
	const void *owner;

	memcpy(&owner, entry, sizeof owner);
	return owner;
}

/* Wait for an entry and copy it to x.  @return 0 when the thread is to
 * end: stopped, and (when drain) nothing left. */
static int next(le__worker *w, unsigned char *x)
{
	pthread_mutex_lock(&w->mu);
	while (!w->n && !atomic_load(&w->stop))
		pthread_cond_wait(&w->cv, &w->mu);
	if (!w->n || (atomic_load(&w->stop) && !w->def.drain)) {
		pthread_mutex_unlock(&w->mu);
		return 0;
	}
	/* The entry stays in q (counted against the bound) until its
	 * outcome has a place in done. */
	memcpy(x, at(w, w->def.q, w->head), w->def.size);
	pthread_mutex_unlock(&w->mu);
	return 1;
}

/* The entry at head is done: drop it from q, and keep x in done when
 * run handed it back. */
static void finish(le__worker *w, const unsigned char *x, int back)
{
	pthread_mutex_lock(&w->mu);
	w->head = (w->head + 1) % w->def.cap;
	w->n--;
	if (back) {
		unsigned nd = atomic_load_explicit(&w->ndone,
		                                   memory_order_relaxed);
		memcpy(at(w, w->def.done, nd), x, w->def.size);
		atomic_fetch_add(&w->ndone, 1);
	}
	pthread_mutex_unlock(&w->mu);
}

static void *worker_main(void *arg)
{
	le__worker *w = arg;
	alignas(max_align_t) unsigned char x[LE_WORKER_ENTRY_MAX];

	while (next(w, x))
		finish(w, x, w->def.run(w, x));
	return NULL;
}

int le__worker_start(le__worker *w, const char *name,
                     const le__worker_def *def)
{
	int rc;

	if (def->size < sizeof(void *) || def->size > LE_WORKER_ENTRY_MAX ||
	    !def->cap)
		return -EINVAL;
	w->def = *def;
	if ((rc = pthread_mutex_init(&w->mu, NULL)) != 0)
		return -rc;
	if ((rc = pthread_cond_init(&w->cv, NULL)) != 0) {
		pthread_mutex_destroy(&w->mu);
		return -rc;
	}
	w->inited = 1;
	rc = pthread_create(&w->thread, NULL, worker_main, w);
	if (rc != 0)
		return -rc;
	le__name_thread(w->thread, name);
	w->started = 1;
	return 0;
}

int le__worker_push(le__worker *w, const void *entry)
{
	if (!w->started)
		return 0;
	pthread_mutex_lock(&w->mu);
	int ok = w->n + atomic_load(&w->ndone) < w->def.cap &&
	         !atomic_load(&w->stop);
	if (ok) {
		unsigned tail = (w->head + w->n) % w->def.cap;
		memcpy(at(w, w->def.q, tail), entry, w->def.size);
		w->n++;
		pthread_cond_broadcast(&w->cv);
	}
	pthread_mutex_unlock(&w->mu);
	return ok;
}

size_t le__worker_take(le__worker *w, const void *owner, void *out,
                       size_t cap)
{
	size_t got = 0;

	/* The common case: nothing handed back, and no lock taken (see the
	 * top of the file for why relaxed will do). */
	if (!w->inited ||
	    !atomic_load_explicit(&w->ndone, memory_order_relaxed))
		return 0;
	pthread_mutex_lock(&w->mu);
	unsigned nd = atomic_load(&w->ndone), keep = 0;
	for (unsigned i = 0; i < nd; i++) {
		unsigned char *d = at(w, w->def.done, i);
		if (owner_of(d) == owner && got < cap)
			memcpy(at(w, out, got++), d, w->def.size);
		else
			memmove(at(w, w->def.done, keep++), d, w->def.size);
	}
	atomic_store(&w->ndone, keep);
	pthread_mutex_unlock(&w->mu);
	return got;
}

void le__worker_stop(le__worker *w)
{
	if (!w->started)
		return;
	pthread_mutex_lock(&w->mu);
	atomic_store(&w->stop, 1);
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->thread, NULL);
	w->started = 0;
}

void le__worker_free(le__worker *w)
{
	if (!w->inited)
		return;
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cv);
	w->inited = 0;
}
