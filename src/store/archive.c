/*
 * archive.c -- the engine's archiver thread (archive.h), on the shared
 * worker (base/worker.h) as the reaper is: a bounded list in, every
 * outcome back to its writer.  On stop, what waits is left (the next
 * engine picks it again).
 */
#include "store/archive.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "logengine.h"
#include "store/seg_zst.h"

_Static_assert(offsetof(le__arc_job, owner) == 0,
               "the worker finds an entry's owner first");

/* Compress one segment; its outcome always goes back to its writer. */
static int archive_one(le__worker *w, void *entry)
{
	le__archiver *a = w->def.arg;
	le__arc_job *j = entry;
	uint64_t in;

	j->rc = le__zst_archive(j->dir, j->index, a->level, &w->stop, &in,
	                        &j->zbytes);
	if (j->rc == 0) {
		atomic_fetch_add(&a->archived, 1);
		atomic_fetch_add(&a->bytes_in, in);
		atomic_fetch_add(&a->bytes_out, j->zbytes);
	} else if (j->rc != -ENOENT && j->rc != -ECANCELED &&
	           j->rc != -EFBIG) {
		atomic_store(a->last_error, j->rc);
	}
	return 1;
}

int le__archiver_start(le__archiver *a, int level, _Atomic int *last_error)
{
	a->level = level;
	a->last_error = last_error;
	return le__worker_start(&a->w, "le-archive", &(le__worker_def){
		.run = archive_one, .arg = a, .drain = 0,
		.q = a->q, .done = a->done, .size = sizeof a->q[0], .cap = LE_ARC_MAX});
}

int le__archiver_push(le__archiver *a, const void *owner, const char *dir,
                      uint64_t index)
{
	le__arc_job j = {.owner = owner, .dir = dir, .index = index};

	return a ? le__worker_push(&a->w, &j) : 0;
}

unsigned le__archiver_take(le__archiver *a, const void *owner,
                           le__arc_job *out, unsigned cap)
{
	return a ? (unsigned)le__worker_take(&a->w, owner, out, cap) : 0;
}

void le__archiver_stop(le__archiver *a)
{
	le__worker_stop(&a->w);
}

void le__archiver_free(le__archiver *a)
{
	le__worker_free(&a->w);
}
