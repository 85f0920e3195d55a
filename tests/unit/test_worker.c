/*
 * test_worker.c -- the worker thread the archiver and the reaper run on
 * (src/base/worker.h): each owner gets back its own entries in order,
 * the list refuses what done could not hold, and stop finishes or leaves
 * what waits as the worker was told.
 */
#include "harness.h"

#include <pthread.h>
#include <stdatomic.h>

#include "base/clock.h"
#include "base/worker.h"

typedef struct job {
	const void *owner; /* first: the worker finds it there */
	int id;
	int ran;           /* set by run, so take returns run's copy */
} job;

static _Atomic int started, finished;

/* Hand back odd ids, let even ones go. */
static int hand_back_odd(le__worker *w, void *entry)
{
	job *j = entry;

	(void)w;
	j->ran = 1;
	atomic_fetch_add(&finished, 1);
	return j->id & 1;
}

/* Hand back everything. */
static int hand_back_all(le__worker *w, void *entry)
{
	(void)w;
	((job *)entry)->ran = 1;
	atomic_fetch_add(&finished, 1);
	return 1;
}

/* Long work, cut short by stop (as the archiver's compression is). */
static int run_until_stop(le__worker *w, void *entry)
{
	(void)entry;
	atomic_fetch_add(&started, 1);
	while (!atomic_load(&w->stop))
		sched_yield();
	atomic_fetch_add(&finished, 1);
	return 0;
}

/* Poll until *v (or, given w, its handed-back count) reaches want, for
 * at most 5 s. */
static int wait_for(_Atomic int *v, le__worker *w, int want)
{
	uint64_t end = le__mono_ns() + 5000000000ull;
	int now;

	while ((now = w ? (int)atomic_load(&w->ndone) : atomic_load(v)) <
	               want && le__mono_ns() < end)
		sched_yield();
	return now >= want;
}

static void start(le__worker *w, le__worker_fn run, int drain, job *q,
                  job *done, unsigned cap)
{
	memset(w, 0, sizeof *w);
	atomic_store(&started, 0);
	atomic_store(&finished, 0);
	CHECK_EQ(le__worker_start(w, "le-test", &(le__worker_def){
	                 .run = run, .drain = drain, .q = q, .done = done,
	                 .size = sizeof *q, .cap = cap}), 0);
}

static void push(le__worker *w, const void *owner, int id, int want)
{
	job j = {.owner = owner, .id = id};

	CHECK_EQ(le__worker_push(w, &j), want);
}

TEST(take_returns_only_the_owners_entries_oldest_first)
{
	static job q[8], done[8];
	le__worker w;
	int a, b;
	job out[8];

	start(&w, hand_back_odd, 1, q, done, 8);
	for (int id = 1; id <= 8; id++)
		push(&w, id <= 4 ? (void *)&a : (void *)&b, id, 1);
	CHECK(wait_for(&finished, NULL, 8));
	CHECK_EQ(le__worker_take(&w, &a, out, 1), 1); /* cap is kept */
	CHECK_EQ(out[0].id, 1);
	CHECK_EQ(out[0].ran, 1);
	CHECK_EQ(le__worker_take(&w, &a, out, 8), 1);
	CHECK_EQ(out[0].id, 3);
	CHECK_EQ(le__worker_take(&w, &b, out, 8), 2);
	CHECK_EQ(out[0].id, 5);
	CHECK_EQ(out[1].id, 7);
	CHECK_EQ(le__worker_take(&w, &a, out, 8), 0);
	le__worker_stop(&w);
	le__worker_free(&w);
}

/* What waits plus what was handed back never exceeds cap, so an outcome
 * always has a place in done: a push past that is refused. */
TEST(push_is_refused_while_handed_back_entries_fill_the_list)
{
	static job q[2], done[2];
	le__worker w;
	int a;
	job out[2];

	start(&w, hand_back_all, 0, q, done, 2);
	push(&w, &a, 1, 1);
	push(&w, &a, 2, 1);
	CHECK(wait_for(NULL, &w, 2)); /* both in done */
	push(&w, &a, 3, 0);
	CHECK_EQ(le__worker_take(&w, &a, out, 2), 2);
	push(&w, &a, 3, 1);
	CHECK(wait_for(&finished, NULL, 3));
	le__worker_stop(&w);
	push(&w, &a, 4, 0); /* not running */
	le__worker_free(&w);
}

/* Stop while one entry is in progress and two wait: the archiver (no
 * drain) leaves them for the next engine, the reaper (drain) does them. */
static void stop_with_two_waiting(int drain, int want_finished)
{
	static job q[4], done[4];
	le__worker w;
	int a;

	start(&w, run_until_stop, drain, q, done, 4);
	push(&w, &a, 1, 1);
	CHECK(wait_for(&started, NULL, 1));
	push(&w, &a, 2, 1);
	push(&w, &a, 3, 1);
	le__worker_stop(&w);
	CHECK_EQ(atomic_load(&finished), want_finished);
	CHECK_EQ(w.n, 3 - want_finished);
	le__worker_free(&w);
}

TEST(stop_without_drain_leaves_what_waits)
{
	stop_with_two_waiting(0, 1);
}

TEST(stop_with_drain_does_what_waits_first)
{
	stop_with_two_waiting(1, 3);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	t_allow_jobs();
	RUN(take_returns_only_the_owners_entries_oldest_first);
	RUN(push_is_refused_while_handed_back_entries_fill_the_list);
	RUN(stop_without_drain_leaves_what_waits);
	RUN(stop_with_drain_does_what_waits_first);
	return t_done();
}
