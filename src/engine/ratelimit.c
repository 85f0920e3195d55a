/*
 * ratelimit.c -- the slow path of the _every macros (logengine.h, "Rate
 * limits per call site"): open a site's window, let its first `burst`
 * records through, count the rest, and write the summary of a window's
 * suppressed calls before the next record that passes, or, for a site
 * that fell silent, from the sweep once the window has ended.
 *
 * A site's state (le__rsite, a static of the caller's):
 *
 *   deadline 0 ──first call──> window open: passed < burst
 *        ^                         │ a call takes passed++ >= burst
 *        │                         v
 *   le_close          full_until = deadline: the inline test
 *   (reset),          (le__rl_skip) counts every call while
 *   the sweep         le_every_clock < full_until
 *   (told)                         │ the clock passes deadline
 *        │                         v
 *        └── no call ─────  the next call comes here: summary, new window
 *            in SETTLE
 *
 * Who writes what.  `lock` (an exchange, never waited on by a logging
 * call: a call that finds it taken goes on with the window it sees)
 * guards the window's opening: told, burst, gen, head, then passed and
 * full_until, then deadline, stored last with release.  `passed` is
 * taken with an atomic add, so a window lets through exactly `burst` of
 * the adds made in it; an add made in the old window by a thread that
 * then reads the new window's burst is the "+ threads - 1" the header
 * allows.  `own` is written by its owner only (the first thread to be
 * suppressed), `other` by atomic adds, so the sum is exact; a summary
 * takes the sum less what earlier summaries told.
 *
 * The sweep.  A site that falls silent has no next call to write its
 * summary, so shard 0's writer, which moves the clock, looks too: once
 * the clock is LE_RL_SETTLE_NS past the end of a window with calls not
 * told (`due` says when the first such is), it takes the site's lock as
 * a call would, writes the summary without waiting for queue room, and
 * closes the window (deadline 0).  A site still called has opened its
 * next window by then, so the sweep rarely meets its callers; when it
 * does, the lock decides.  A call that counted in the window after the
 * sweep read the counts (it read the clock before) is told with the next
 * summary: the next call finds deadline 0 and opens a window without one
 * (open_window), so each window still has at most one summary.  The
 * suppressed call itself does nothing for the sweep.
 */
#define _GNU_SOURCE
#include "engine/ratelimit.h"

#include <sched.h>
#include <stdio.h>

#include "base/os.h"
#include "engine/dflt.h"
#include "engine/logger.h"
#include "engine/shard.h"

#define MS 1000000ull

/* How long past its end the sweep leaves a window to its callers: a site
 * still called opens the next one (and writes the summary) well within
 * it. */
#define LE_RL_SETTLE_NS (10 * MS)

/* Written by writers (le__rl_tick) and by window openings; relaxed: it
 * only ever says how late it is at least. */
uint64_t le_every_clock;

static _Atomic uint64_t next_gen;

void le__rl_init(le__rlreg *r)
{
	r->gen = atomic_fetch_add(&next_gen, 1) + 1;
	atomic_store(&r->due, UINT64_MAX);
}

void le__rl_tick(uint64_t mono)
{
	uint64_t c = __atomic_load_n(&le_every_clock, __ATOMIC_RELAXED);

	/* a maximum, so that it never goes back: a window's end once
	 * passed stays passed (see le_every_at) */
	while (mono >= c + MS &&
	       !__atomic_compare_exchange_n(&le_every_clock, &c, mono, 1,
	                                    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

static le_engine *engine_of(struct le__head *h)
{
	if (h->kind == 0)
		return (le_engine *)(void *)h;
	return ((le_logger *)(void *)h)->e;
}

/* The limit of h's logger in force (logger.c keeps it derived), else the
 * call's.  @return the window's burst and its length in *ns; a window
 * with no limit is a second long and has no bound. */
static uint32_t limit_of(struct le__head *h, long ms, long burst,
                         uint64_t *ns)
{
	le_engine *e = engine_of(h);
	le_logger *lg = h->kind ? (le_logger *)(void *)h : &e->loggers->tab[0];
	uint64_t v = __atomic_load_n(&lg->rl, __ATOMIC_RELAXED);

	if (v & LE_RL_SET) {
		ms = (long)((v >> 32) & 0x7fffffff);
		burst = (long)(uint32_t)v;
	}
	if (ms <= 0) {
		*ns = 1000 * MS;
		return UINT32_MAX;
	}
	*ns = (uint64_t)ms * MS;
	return burst < 0 ? 0 : burst > (long)UINT32_MAX - 1 ? UINT32_MAX - 1
	                                                   : (uint32_t)burst;
}

/* The site's suppressed calls not told yet.  Caller holds s->lock. */
static uint64_t untold(const le__rsite *s, uint64_t *total)
{
	*total = __atomic_load_n(&s->own, __ATOMIC_RELAXED) +
	         __atomic_load_n(&s->other, __ATOMIC_RELAXED);
	return *total - s->told;
}

/* Write the site's suppressed calls not told yet as one record, on the
 * logger of the window they were counted in.  Caller holds s->lock.
 * @return 0, or LE_EFULL when the record found no room and le__nowait
 * is set: nothing is told, the caller tries again. */
static int summarize(le__rlreg *r, le__rsite *s)
{
	uint64_t total, n = untold(s, &total);
	char where[512];

	if (!n || !s->head)
		return 0;
	snprintf(where, sizeof where, "%s:%d", s->d.site.file, s->d.site.line);
	le_field f[2] = {LE_U64("suppressed", n), LE_STR("site", where)};
	int rc = le_log_kv_at(s->head, &s->d.site, f, 2,
	                      "%llu similar records suppressed at %s",
	                      (unsigned long long)n, where);
	if (rc == LE_EFULL && le__nowait)
		return rc;
	s->told = total;
	atomic_fetch_add_explicit(&r->suppressed, n, memory_order_relaxed);
	atomic_fetch_add_explicit(&r->summaries, 1, memory_order_relaxed);
	return 0;
}

/* Put s in e's registry, once per engine.  Caller holds s->lock. */
static void enlist(le__rlreg *r, le__rsite *s)
{
	uint32_t i = atomic_fetch_add_explicit(&r->n, 1, memory_order_relaxed);

	if (i < LE_RL_SITES)
		atomic_store_explicit(&r->tab[i], s, memory_order_release);
	__atomic_store_n(&s->gen, r->gen, __ATOMIC_RELAXED); /* read unlocked */
}

/* Open a new window at `now` (CLOCK_MONOTONIC), unless another thread
 * does, or did since the caller looked. */
static void open_window(le_engine *e, struct le__head *h, le__rsite *s,
                        long ms, long burst)
{
	le__rlreg *r = &e->rl;
	uint64_t ns, now;

	if (__atomic_exchange_n(&s->lock, 1, __ATOMIC_ACQUIRE))
		return;
	now = le__mono_ns();
	le__rl_tick(now);
	uint64_t dl = __atomic_load_n(&s->deadline, __ATOMIC_RELAXED);
	if (s->gen == r->gen && dl && now < dl)
		goto out;
	int fresh = s->gen != r->gen;
	if (fresh) {
		/* First on this engine.  What another engine's window left
		 * untold (one it is open on too, or one past its registry)
		 * goes into this one's log: its logger may be gone. */
		s->head = h;
		enlist(r, s);
	}
	/* Deadline 0 on this engine: the sweep closed the window and told
	 * it; what was counted since raced with that summary and waits for
	 * the next one. */
	if (fresh || dl)
		summarize(r, s);
	__atomic_store_n(&s->burst, limit_of(h, ms, burst, &ns),
	                 __ATOMIC_RELAXED);
	s->head = h;
	__atomic_store_n(&s->passed, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&s->full_until, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&s->deadline, now + ns, __ATOMIC_RELEASE);
out:
	__atomic_store_n(&s->lock, 0, __ATOMIC_RELEASE);
}

/* One suppressed call, counted as le__rl_skip counts (logengine.h); the
 * first thread to come here becomes the site's owner. */
static void count(le__rsite *s)
{
	uintptr_t me = LE__SELF(), none = 0;

	if (me && !__atomic_load_n(&s->owner, __ATOMIC_RELAXED))
		__atomic_compare_exchange_n(&s->owner, &none, me, 0,
		                            __ATOMIC_RELAXED, __ATOMIC_RELAXED);
	le__rl_count(s, me);
}

/* Lower r->due to `at` (release: the site's window and counts, stored
 * before, are seen by the sweep that takes it: le__rl_sweep). */
static int lower_due(le__rlreg *r, uint64_t at)
{
	uint64_t d = atomic_load_explicit(&r->due, memory_order_relaxed);

	while (at < d)
		if (atomic_compare_exchange_weak_explicit(
			    &r->due, &d, at, memory_order_seq_cst,
			    memory_order_relaxed))
			return 1;
	return 0;
}

/* A window with suppressed calls ends at `at` (+ settle): tell the sweep.
 * Once per window and thread at most, on the slow path.  A shard 0
 * writer asleep for long (pace.c, idle) read `due` before; seq_cst on
 * both sides (due here, idle there) means it either sees this due after
 * going idle (le__rl_wait, after its announcement) or is seen idle here
 * and woken. */
static void note_due(le_engine *e, uint64_t at)
{
	if (lower_due(&e->rl, at) && atomic_load(&e->shards[0].idle))
		le__wake_after(&e->shards[0]);
}

int le_every_at(struct le__head *h, le__rsite *s, long interval_ms,
                long burst)
{
	if (__builtin_expect(!h, 0))
		h = le__head_or_default(h); /* dflt.c */
	if (!h || !s)
		return 0;
	le_engine *e = engine_of(h);
	/* acquire: the window's burst and counts were stored before it */
	uint64_t dl = __atomic_load_n(&s->deadline, __ATOMIC_ACQUIRE);
	if (!dl || __atomic_load_n(&le_every_clock, __ATOMIC_RELAXED) >= dl ||
	    __atomic_load_n(&s->gen, __ATOMIC_RELAXED) != e->rl.gen) {
		open_window(e, h, s, interval_ms, burst);
		dl = __atomic_load_n(&s->deadline, __ATOMIC_ACQUIRE);
	}
	uint32_t n = __atomic_fetch_add(&s->passed, 1, __ATOMIC_RELAXED);
	if (n < __atomic_load_n(&s->burst, __ATOMIC_RELAXED))
		return 1;
	/* The window seen is spent.  If another has opened since, dl is
	 * one the clock has passed already (a window opens once the clock
	 * passed the one before, or when that was another engine's), so
	 * the inline test lets the next call come here to find it. */
	__atomic_store_n(&s->full_until, dl, __ATOMIC_RELAXED);
	count(s);
	note_due(e, dl + LE_RL_SETTLE_NS);
	return 0;
}

void le__rl_close(le_engine *e)
{
	le__rlreg *r = &e->rl;
	uint32_t n = atomic_load(&r->n);

	for (uint32_t i = 0; i < n && i < LE_RL_SITES; i++) {
		le__rsite *s = atomic_load_explicit(&r->tab[i],
		                                    memory_order_acquire);
		if (!s)
			continue;
		while (__atomic_exchange_n(&s->lock, 1, __ATOMIC_ACQUIRE))
			sched_yield(); /* another engine's call opening it */
		if (s->gen == r->gen) {
			summarize(r, s);
			__atomic_store_n(&s->full_until, 0, __ATOMIC_RELAXED);
			__atomic_store_n(&s->deadline, 0, __ATOMIC_RELAXED);
			__atomic_store_n(&s->gen, 0, __ATOMIC_RELAXED);
			s->head = NULL;
		}
		__atomic_store_n(&s->lock, 0, __ATOMIC_RELEASE);
	}
}

/* The sweep of one site at clock c.  @return the clock value at which
 * the site wants a look again (UINT64_MAX: none). */
static uint64_t sweep_site(le__rlreg *r, le__rsite *s, uint64_t c)
{
	uint64_t at = UINT64_MAX, total;

	/* taken: a call opens its window (and tells it), or le_close */
	if (__atomic_exchange_n(&s->lock, 1, __ATOMIC_ACQUIRE))
		return at;
	uint64_t dl = __atomic_load_n(&s->deadline, __ATOMIC_RELAXED);
	if (s->gen == r->gen && dl && untold(s, &total)) {
		if (c < dl + LE_RL_SETTLE_NS) {
			at = dl + LE_RL_SETTLE_NS;
		} else if (summarize(r, s) < 0) {
			at = c; /* the queue is full: the next pass */
		} else {
			__atomic_store_n(&s->full_until, 0, __ATOMIC_RELAXED);
			__atomic_store_n(&s->deadline, 0, __ATOMIC_RELEASE);
		}
	}
	__atomic_store_n(&s->lock, 0, __ATOMIC_RELEASE);
	return at;
}

void le__rl_sweep(le_engine *e)
{
	le__rlreg *r = &e->rl;
	uint64_t c = __atomic_load_n(&le_every_clock, __ATOMIC_RELAXED);
	uint64_t next = UINT64_MAX;

	if (c < atomic_load_explicit(&r->due, memory_order_relaxed))
		return;
	/* seq_cst (so acquire): a window noted before this exchange was
	 * stored before its note (lower_due), and is seen by the walk; one
	 * noted after it stays in due. */
	atomic_exchange(&r->due, UINT64_MAX);
	le__nowait = 1;
	uint32_t n = atomic_load(&r->n);
	for (uint32_t i = 0; i < n && i < LE_RL_SITES; i++) {
		le__rsite *s = atomic_load_explicit(&r->tab[i],
		                                    memory_order_acquire);
		uint64_t at = s ? sweep_site(r, s, c) : UINT64_MAX;
		if (at < next)
			next = at;
	}
	le__nowait = 0;
	lower_due(r, next);
}

uint64_t le__rl_wait(le_engine *e, uint64_t now)
{
	uint64_t d = atomic_load(&e->rl.due);

	if (d == UINT64_MAX)
		return UINT64_MAX;
	/* + MS: the clock is stored at most once a millisecond */
	return (d > now ? d - now : 0) + MS;
}
