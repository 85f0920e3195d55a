/*
 * worker.h -- one background thread that works through a bounded list of
 * entries and hands some of them back to the thread that queued them.
 *
 *   push ──> q[cap] (ring, oldest at head) ──> run(entry) ──> done[cap]
 *                                                               │
 *   take(owner) <── entries whose first field is owner ─────────┘
 *
 * An entry is the caller's struct of `size` bytes whose first field is
 * `const void *owner`: who takes it back.  The entry being worked on
 * stays in q until its outcome has a place in done, and a push is refused
 * while n + ndone == cap, so done never overflows.  The store's archiver
 * and reaper run on this.
 */
#ifndef LE_WORKER_H
#define LE_WORKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

struct le__worker;
/* Work on entry (a copy, taken out of the lock; run may change it).
 * @return 1 to hand it back to its owner (done), 0 to let it go. */
typedef int (*le__worker_fn)(struct le__worker *w, void *entry);

/* What a worker does, and on what: set once, at start. */
typedef struct le__worker_def {
	le__worker_fn run;
	void *arg;               /* run's context */
	size_t size;             /* bytes of one entry */
	unsigned cap;            /* entries in q, and in done */
	int drain;               /* on stop: finish q (1), or leave it (0) */
	void *q, *done;          /* the owner's arrays, cap entries each */
} le__worker_def;

typedef struct le__worker {
	pthread_t thread;
	int inited, started;     /* [starter] mu and cv made; thread running */
	le__worker_def def;      /* [const] */
	pthread_mutex_t mu;      /* guards q, head, n, done, and every write
	                            of ndone and stop */
	pthread_cond_t cv;       /* a push, or stop */
	unsigned head, n;
	/* Read without the lock too: ndone by take, to skip the lock when
	 * nothing waits; stop by run, between the steps of long work. */
	_Atomic unsigned ndone;
	_Atomic int stop;
} le__worker;

/* Start the thread, named name, to do what def says (entries of at most
 * 64 bytes).  w is zeroed.  @return 0 or -errno (-EINVAL: a bad def); on
 * failure le__worker_free still releases what was made. */
int le__worker_start(le__worker *w, const char *name,
                     const le__worker_def *def);
/* Queue a copy of entry.  @return 1: queued; 0: not (full, stopping or
 * not running). */
int le__worker_push(le__worker *w, const void *entry);
/* Move up to cap of owner's handed-back entries to out, oldest first; the
 * rest keep their order.  @return how many. */
size_t le__worker_take(le__worker *w, const void *owner, void *out,
                       size_t cap);
/* Stop and join: what waits is done first when drain, else left. */
void le__worker_stop(le__worker *w);
void le__worker_free(le__worker *w);

#endif
