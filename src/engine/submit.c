/*
 * submit.c -- the hot path: le_write, le_logf, le_vlogf, and the level
 * macros' records (le__submitf, with fields).
 *
 * In order:
 *   1. check arguments (no shared memory touched);
 *   2. take (1 record, len bytes) from the global budget: one CAS;
 *   3. reserve a slot in the shard's ring: one CAS;
 *   4. fill it (the TSC or clock_gettime through the vDSO, memcpy) and
 *      publish it with a release store;
 *   5. only when the queue is filling up (uncommon): wake the shard's
 *      writer if it sleeps (a futex system call).
 * No lock, no malloc, no system call in the common case.  When the budget
 * or the ring is full: DROP counts the record and returns LE_EFULL; BLOCK
 * waits on a futex until a writer gives budget back.
 */
#define _GNU_SOURCE
#include "engine/shard.h"

#include <limits.h>
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>

#include "record/defer.h"
#include "record/fields.h"
#include "base/fmt.h"
#include "record/format.h"
#include "engine/logger.h"
#include "engine/dflt.h"
#include "queue/sites.h"
#include "engine/backtrace.h"

/* How long a blocked producer yields before it sleeps (see reserve). */
#define LE_BLOCK_SPIN_NS 1000000u

static void note_hwm(le_engine *e, uint64_t b)
{
	uint64_t rec = b & LE_BUDGET_REC_MASK, bytes = b >> LE_BUDGET_REC_BITS;
	uint64_t h = atomic_load_explicit(&e->hwm_rec, memory_order_relaxed);

	while (rec > h && !atomic_compare_exchange_weak_explicit(
		                  &e->hwm_rec, &h, rec, memory_order_relaxed,
		                  memory_order_relaxed))
		;
	h = atomic_load_explicit(&e->hwm_bytes, memory_order_relaxed);
	while (bytes > h && !atomic_compare_exchange_weak_explicit(
		                    &e->hwm_bytes, &h, bytes,
		                    memory_order_relaxed, memory_order_relaxed))
		;
}

/* What a record that leaves budget word b and `used` ring bytes asks of
 * the writer (LE_WAKE_*), judged by its own shard's backlog
 * (le__shard_holds).  The thresholds nest: urgent ones are higher.
 * An idle writer (pace.c) is woken by any record.  seq_cst: this load
 * comes after the claim's seq_cst CAS on head (le__ring_reserve), and
 * the writer stores idle before its seq_cst look at head, so one of the
 * two sees the other: either the writer finds the claim and does not go
 * idle, or this producer finds it idle and wakes it. */
static inline int wake_for(const le_engine *e, const le__shard *sh,
                           uint64_t b, uint64_t used)
{
	uint64_t rec = b & LE_BUDGET_REC_MASK;

	if (__builtin_expect(rec < e->wake_rec && used < e->wake_bytes, 1))
		return atomic_load(&sh->idle) ? LE_WAKE_ASLEEP : LE_WAKE_NONE;
	if (used >= e->urgent_bytes ||
	    le__shard_holds(e, b, used, e->urgent_rec))
		return LE_WAKE_ANY;
	if (used >= e->wake_bytes || le__shard_holds(e, b, used, e->wake_rec))
		return LE_WAKE_ASLEEP;
	return atomic_load(&sh->idle) ? LE_WAKE_ASLEEP : LE_WAKE_NONE;
}

_Thread_local int le__nowait;

/* Budget for len payload bytes and `need` ring bytes for one slot, or
 * NULL (record dropped, or the engine is closing). */
static __attribute__((noinline)) le__slot *
reserve_slow(le_engine *e, le__shard *sh, uint32_t len, uint32_t need,
             int *rc, int *wake)
{
	uint64_t b, used, spin_from = 0;
	le__slot *s;
	unsigned yields = 0;

	for (;;) {
		b = le__budget_take(&e->budget, len, e->cap_rec, e->cap_bytes);
		if (b) {
			s = le__ring_reserve(&sh->ring, need, &used);
			if (s)
				break;
			/* The ring is sized so this cannot happen while the
			 * budget allows; give the budget back if it does. */
			le__budget_give(&e->budget, 1, len);
		}
		if (le__nowait) {
			*rc = LE_EFULL; /* not a drop: see shard.h */
			return NULL;
		}
		if (e->cfg.overflow == LE_OVERFLOW_DROP ||
		    atomic_load_explicit(&e->closing, memory_order_relaxed)) {
			atomic_fetch_add_explicit(&sh->sig.dropped_pending, 1,
			                          memory_order_relaxed);
			atomic_fetch_add_explicit(&sh->sig.dropped_full, 1,
			                          memory_order_relaxed);
			le__wake_writer(sh);
			*rc = LE_EFULL;
			return NULL;
		}
		/* BLOCK: wait until a writer gives budget back.  A busy writer
		 * frees a batch (up to a quarter of the queue) every 200 us to
		 * 2 ms, and a full queue ends its nap, so yield for up to
		 * LE_BLOCK_SPIN_NS before a futex sleep: waking a thread whose
		 * CPU went idle (slow on a VM) takes long enough that the
		 * writer would run out of records while the producer wakes. */
		if (!spin_from) {
			atomic_fetch_add_explicit(&e->blocked, 1,
			                          memory_order_relaxed);
			le__wake_writer(sh);
			spin_from = le__mono_ns();
		}
		/* the clock only every 16 yields: the yield is the wait */
		if ((++yields & 15) ||
		    le__mono_ns() - spin_from < LE_BLOCK_SPIN_NS) {
			sched_yield();
			continue;
		}
		uint32_t seq = atomic_load(&e->space_seq);
		atomic_fetch_add(&e->block_waiters, 1);
		le__wake_writer(sh);
		b = le__budget_take(&e->budget, len, e->cap_rec, e->cap_bytes);
		if (b) {
			atomic_fetch_sub(&e->block_waiters, 1);
			s = le__ring_reserve(&sh->ring, need, &used);
			if (s)
				break;
			le__budget_give(&e->budget, 1, len);
			continue;
		}
		le__futex_wait(&e->space_seq, seq, 10 * 1000000u);
		atomic_fetch_sub(&e->block_waiters, 1);
	}
	if ((b & LE_BUDGET_REC_MASK) >
	            atomic_load_explicit(&e->hwm_rec, memory_order_relaxed) ||
	    (b >> LE_BUDGET_REC_BITS) >
	            atomic_load_explicit(&e->hwm_bytes, memory_order_relaxed))
		note_hwm(e, b);
	/* Uncommon: the queue is filling; the caller makes sure the writer
	 * is awake once the slot is published.  Below the threshold a
	 * sleeping writer wakes by itself within flush_ms. */
	*wake = wake_for(e, sh, b, used);
	return s;
}

/* reserve_slow's first try, inline in each caller: a budget with room
 * and a ring with room (the common case) cost no call. */
static inline __attribute__((always_inline)) le__slot *
reserve(le_engine *e, le__shard *sh, uint32_t len, uint32_t need, int *rc,
        int *wake)
{
	uint64_t used;
	le__slot *s;
	uint64_t b = le__budget_take(&e->budget, len, e->cap_rec, e->cap_bytes);

	if (__builtin_expect(!b, 0))
		return reserve_slow(e, sh, len, need, rc, wake);
	s = le__ring_reserve(&sh->ring, need, &used);
	if (__builtin_expect(!s, 0)) {
		le__budget_give(&e->budget, 1, len);
		return reserve_slow(e, sh, len, need, rc, wake);
	}
	if (__builtin_expect((b & LE_BUDGET_REC_MASK) >
	                     atomic_load_explicit(&e->hwm_rec,
	                                          memory_order_relaxed) ||
	                     (b >> LE_BUDGET_REC_BITS) >
	                     atomic_load_explicit(&e->hwm_bytes,
	                                          memory_order_relaxed), 0))
		note_hwm(e, b);
	*wake = wake_for(e, sh, b, used);
	return s;
}

/* After publishing, when the queue is filling: wake the writer if it
 * sleeps, or naps while the queue is half full (le__wake_queued: no lost
 * wake-up, no fence on the common path). */
static inline __attribute__((always_inline)) void
publish_and_wake(le__shard *sh, le__slot *s, int wake)
{
	le__slot_publish_ck(&sh->ring, s);
	if (wake)
		le__wake_queued(sh, wake);
}

/*
 * Submit latency, for the live page: one call in LE_LIVE_SUBMIT_SAMPLE
 * of each thread is timed, from its start to just before it publishes,
 * and leaves its duration in the slot's reserved bytes (le__sp_code);
 * every other call leaves the 0 fill() put there.  The writer reads them as it collects
 * the record.  A thread-local count (initial-exec: no call to find it,
 * in the shared library too), so no shared line is touched to decide.
 */
static _Thread_local uint32_t sample_tick
	__attribute__((tls_model("initial-exec")));
static _Thread_local uint64_t sample_t0 /* the timed call's start */
	__attribute__((tls_model("initial-exec")));

/* The count and the start stay in thread-local memory, not in a register
 * across the call: the common case keeps nothing more live. */
static inline void sample_start(const le_engine *e)
{
	if (__builtin_expect(++sample_tick % LE_LIVE_SUBMIT_SAMPLE == 0, 0))
		sample_t0 = le__stamp(e->use_tsc);
}

static inline void sample_end(const le_engine *e, le__slot *s)
{
	if (__builtin_expect(sample_tick % LE_LIVE_SUBMIT_SAMPLE == 0, 0)) {
		uint16_t c = le__sp_code(le__stamp(e->use_tsc) - sample_t0);
		memcpy(s->reserved, &c, sizeof c);
	}
}

static le__shard *route(le_engine *e, uint64_t key)
{
	if (e->nshards == 1)
		return &e->shards[0];
	if (e->shard_mask)
		return &e->shards[key & e->shard_mask];
	return &e->shards[key % e->nshards];
}

/* Cut len to max_record_bytes or refuse it; *flags gets LE_REC_TRUNCATED.
 * Notes the largest payload (a shared line read by every call, written
 * only when a record is larger than all before it). */
static int clip(le_engine *e, size_t *len, uint8_t *flags)
{
	if (*len <= e->max_rec) {
		uint64_t h = atomic_load_explicit(&e->hwm_len,
		                                  memory_order_relaxed);
		while (*len > h && !atomic_compare_exchange_weak_explicit(
			                   &e->hwm_len, &h, *len,
			                   memory_order_relaxed, memory_order_relaxed))
			;
		return 0;
	}
	if (e->cfg.oversize == LE_OVERSIZE_REJECT) {
		atomic_fetch_add_explicit(&e->rejected, 1, memory_order_relaxed);
		return LE_ETOOBIG;
	}
	atomic_fetch_add_explicit(&e->truncated, 1, memory_order_relaxed);
	*len = e->max_rec;
	*flags = LE_REC_TRUNCATED;
	atomic_store_explicit(&e->hwm_len, e->max_rec, memory_order_relaxed);
	return 0;
}

static void fill(le_engine *e, le__slot *s, int level, uint8_t flags,
                 uint32_t len)
{
	s->len = len;
	s->seq = 0; /* the writer's; stale from the last lap until then */
	s->ts = le__stamp(e->use_tsc);
	/* level and its check over the flags (queue.h), flags and the two
	 * reserved bytes (0: not a timed call) in one store, the store level
	 * and flags took alone */
	uint32_t lfr = le__slot_lvbyte((uint32_t)level, flags) |
	               (uint32_t)flags << 8;
	memcpy((unsigned char *)s + offsetof(le__slot, level), &lfr, sizeof lfr);
}


/* le_write's arguments failed its check: a NULL engine goes to the
 * default one (dflt.c), if any; anything else is LE_EINVAL.  Out of
 * line, so the common case pays for its check and nothing more. */
static __attribute__((noinline, cold)) int
write_no_engine(le_engine *e, uint64_t route_key, int level,
                const void *payload, size_t len)
{
	if (e || !(e = le__engine_or_default(NULL)))
		return LE_EINVAL;
	return le_write(e, route_key, level, payload, len);
}

int le_write(le_engine *e, uint64_t route_key, int level, const void *payload,
             size_t len)
{
	uint8_t flags = 0;
	int rc, wake;

	if (!e || level < LE_TRACE || level > LE_FATAL || (!payload && len))
		return write_no_engine(e, route_key, level, payload, len);
	sample_start(e);
	if (atomic_load_explicit(&e->closing, memory_order_relaxed))
		return LE_ECLOSED;
	rc = clip(e, &len, &flags);
	if (rc < 0)
		return rc;
	le__shard *sh = route(e, route_key);
	le__slot *s = reserve(e, sh, (uint32_t)len,
	                      le__ring_slot_bytes(&sh->ring, (uint32_t)len),
	                      &rc, &wake);
	if (!s)
		return rc;
	fill(e, s, level, flags, (uint32_t)len);
	if (len)
		memcpy(s + 1, payload, len);
	sample_end(e, s);
	publish_and_wake(sh, s, wake);
	return 0;
}

/* Route key of the calling thread for le_logf: a number fixed per thread,
 * so one thread's formatted records stay in order in one shard.
 * initial-exec as sample_tick: no call to find it in the shared library. */
static _Atomic uint64_t next_thread_key;
static _Thread_local uint64_t thread_key
	__attribute__((tls_model("initial-exec")));

static uint64_t my_key(void)
{
	if (!thread_key)
		thread_key = atomic_fetch_add(&next_thread_key, 1) + 1;
	return thread_key - 1;
}

/* The calling thread's shard: with one shard, no key to look up. */
static inline le__shard *my_shard(le_engine *e)
{
	return e->nshards == 1 ? &e->shards[0] : route(e, my_key());
}

/*
 * A formatted record, with fields when fs is not NULL: the slot's payload
 * is then [field block][message] (fields.h), flagged LE_REC_FIELDS.  The
 * message is formatted into a stack buffer first, which is its final
 * copy when it fits; a longer one is formatted again straight into the
 * slot, once its length is known and reserved.  A record cut to
 * max_record_bytes loses message bytes first, then whole fields from the
 * end (le__fields_fit).
 */
int le__submitf(le_engine *e, int level, const le__fieldset *fs,
                const char *fmt, va_list ap)
{
	char small[512];
	va_list ap2;
	uint8_t flags = 0;
	size_t fb = 0;
	int rc, wake;

	if (!e || !fmt || level < LE_TRACE || level > LE_FATAL) {
		/* a NULL engine: the default one (dflt.c), if any */
		if (e || !(e = le__engine_or_default(NULL)))
			return LE_EINVAL;
		return le__submitf(e, level, fs, fmt, ap);
	}
	sample_start(e);
	if (atomic_load_explicit(&e->closing, memory_order_relaxed))
		return LE_ECLOSED;
	if (fs) {
		int64_t b = le__fields_size(fs); /* src/record/fields.c */
		if (b < 0)
			return LE_EINVAL;
		fb = (size_t)b;
	}
	va_copy(ap2, ap);
	int n = le__vsnprintf(small, sizeof small, fmt, ap); /* src/base/fmt.c */
	if (n < 0) {
		va_end(ap2);
		return LE_EINVAL;
	}
	size_t len = fb + (size_t)n;
	rc = clip(e, &len, &flags);
	if (rc < 0) {
		va_end(ap2);
		return rc;
	}
	if (fb > len)
		fb = le__fields_fit(fs, len);
	size_t mlen = len - fb < (size_t)n ? len - fb : (size_t)n;
	len = fb + mlen;
	le__shard *sh = my_shard(e);
	/* One ring byte more than the payload: vsnprintf's terminating NUL
	 * must land inside this slot, never in the next one. */
	uint32_t need = le__ring_slot_bytes(&sh->ring, (uint32_t)len + 1);
	le__slot *s = reserve(e, sh, (uint32_t)len, need, &rc, &wake);
	if (!s) {
		va_end(ap2);
		return rc;
	}
	unsigned char *p = (unsigned char *)(s + 1);
	if (fb) {
		le__fields_encode(p, fb, fs);
		flags |= LE_REC_FIELDS;
	}
	if ((size_t)n < sizeof small)
		memcpy(p + fb, small, mlen);
	else
		le__vsnprintf((char *)p + fb, mlen + 1, fmt, ap2);
	va_end(ap2);
	fill(e, s, level, flags, (uint32_t)len);
	sample_end(e, s);
	publish_and_wake(sh, s, wake);
	return 0;
}

/* A deferred record of a plan with no string and no '*' (the common
 * case): its size is known before any argument is read, so they go
 * straight from the va_list into the slot. */
static inline __attribute__((always_inline)) int
submit_fixed(le_engine *e, le__shard *sh, const le__dsite *ds, uint32_t id,
             const le__dplan *plan, va_list ap)
{
	uint32_t len = 4 + plan->fixed;
	int rc, wake;

	if (__builtin_expect(len + plan->dlen > e->max_rec, 0))
		return le__submitf(e, ds->site.level, NULL, ds->fmt, ap);
	if (__builtin_expect(len > atomic_load_explicit(&e->hwm_len,
	                                                memory_order_relaxed), 0)) {
		size_t l = len;
		uint8_t f = 0;
		clip(e, &l, &f);
	}
	le__slot *s = reserve(e, sh, len, le__ring_slot_bytes(&sh->ring, len),
	                      &rc, &wake);
	if (!s)
		return rc;
	unsigned char *p = (unsigned char *)(s + 1);
	le__put32(p, id);
	le__dargs_copy(plan, ap, p + 4);
	fill(e, s, ds->site.level, LE_REC_DEFERRED, len);
	sample_end(e, s);
	publish_and_wake(sh, s, wake);
	return 0;
}

/*
 * A deferred record (defer.h): [field block] u32 site number, the
 * arguments as the site's plan reads them.  Steps 1-5 as le_write, after
 * two checks a registered site makes with two loads: its number (state
 * word, acquire) and its entry in the shard's SITES table.  The arguments
 * are read once into a local array (strings: pointer and length), so the
 * slot is reserved at its exact size and filled with stores.  A record
 * that would pass max_record_bytes is formatted instead, and cut as
 * le_logf's would be.
 */
int le__submitd(le_engine *e, le__dsite *ds, const le__fieldset *fs,
                const char *fmt, va_list ap)
{
	le__dargs a;
	va_list ap2;
	uint8_t flags = LE_REC_DEFERRED;
	size_t fb = 0;
	int rc, wake;

	if (!e || !ds)
		return LE_EINVAL;
	/* acquire: the site's number and plan were stored before its state */
	uint32_t id = __atomic_load_n(&ds->state, __ATOMIC_ACQUIRE) == 2
	                      ? ds->id : le__dsite_number(ds, fmt);
	if (!e->dsites)
		id = 0;
	if (!id)
		return le__submitf(e, ds->site.level, fs, fmt, ap);
	le__shard *sh = my_shard(e);
	if (__builtin_expect(!le__sitetab_has(&sh->sites, id), 0) &&
	    le__sitetab_put(&sh->sites, id, ds) < 0)
		return le__submitf(e, ds->site.level, fs, fmt, ap);
	sample_start(e);
	if (atomic_load_explicit(&e->closing, memory_order_relaxed))
		return LE_ECLOSED;
	if (fs) {
		int64_t b = le__fields_size(fs);
		if (b < 0)
			return LE_EINVAL;
		fb = (size_t)b;
	}
	const le__dplan *plan = le__dsite_plan(ds);
	if (plan->fixed_only && !fb)
		return submit_fixed(e, sh, ds, id, plan, ap);
	va_copy(ap2, ap);
	size_t alen = le__dargs_read(plan, &a, ap, e->max_rec);
	size_t len = fb + 4 + alen;
	/* the frame that carries the descriptor stays a record's size too */
	if (alen == SIZE_MAX || len + plan->dlen > e->max_rec) {
		rc = le__submitf(e, ds->site.level, fs, fmt, ap2);
		va_end(ap2);
		return rc;
	}
	va_end(ap2);
	clip(e, &len, &flags); /* notes the largest; len fits */
	le__slot *s = reserve(e, sh, (uint32_t)len,
	                      le__ring_slot_bytes(&sh->ring, (uint32_t)len),
	                      &rc, &wake);
	if (!s)
		return rc;
	unsigned char *p = (unsigned char *)(s + 1);
	if (fb) {
		le__fields_encode(p, fb, fs);
		flags |= LE_REC_FIELDS;
	}
	le__put32(p + fb, id);
	le__dargs_put(plan, &a, p + fb + 4);
	fill(e, s, ds->site.level, flags, (uint32_t)len);
	sample_end(e, s);
	publish_and_wake(sh, s, wake);
	return 0;
}

/* ---- the flight recorder's hot side (backtrace.c writes out) ---- */

/* The engine of a macro's handle. */
static inline le_engine *engine_of(const struct le__head *h)
{
	return h->kind ? ((const le_logger *)(const void *)h)->e
	               : (le_engine *)(void *)(uintptr_t)h;
}

/* An entry of sh's ring for a record, or NULL (no ring yet, closing, or
 * the entry lost: counted). */
static inline le__btent *bt_claim(le_engine *e, le__shard *sh, uint64_t *gen)
{
	/* acquire: the rings were opened before bt_ready was stored */
	if (!atomic_load_explicit(&e->bt_ready, memory_order_acquire) ||
	    atomic_load_explicit(&e->closing, memory_order_relaxed))
		return NULL;
	return le__btring_claim(&sh->bt, gen);
}

static inline void bt_publish(le_engine *e, const struct le__head *h,
                              le__btent *en, uint64_t gen, int level,
                              uint8_t flags, size_t len)
{
	uint16_t lg = h->kind ? ((const le_logger *)(const void *)h)->index : 0;
	le__btring_publish(en, gen, le__stamp(e->use_tsc),
	                   le__btmeta((uint32_t)len, lg, (uint8_t)level,
	                              flags));
}

/* Keep a record as its text (fields first), cut to the entry: a format
 * the deferred path does not take, or arguments too long for an entry. */
static int bt_keep_text(le_engine *e, le__shard *sh, const struct le__head *h,
                        int level, const le__fieldset *fs, const char *fmt,
                        va_list ap)
{
	uint64_t gen;
	le__btent *en = bt_claim(e, sh, &gen);
	size_t cap = LE_BT_PAYLOAD_MAX < e->max_rec ? LE_BT_PAYLOAD_MAX
	                                            : e->max_rec;
	uint8_t flags = 0;

	if (!en)
		return 0;
	size_t fb = fs ? le__fields_fit(fs, cap) : 0;
	if (fb) {
		le__fields_encode(en->payload, fb, fs);
		flags |= LE_REC_FIELDS;
	}
	/* vsnprintf's NUL lands inside the payload: one byte of room less */
	int n = le__vsnprintf((char *)en->payload + fb, cap - fb, fmt, ap);
	size_t m = n < 0 ? 0 : (size_t)n;
	if (fb + m >= cap) {
		m = cap - fb - 1;
		flags |= LE_REC_TRUNCATED;
	}
	bt_publish(e, h, en, gen, level, flags, fb + m);
	return 0;
}

/* The logger's name as the field block a kept record starts with, at p
 * (fb = 4 + its bytes, or 0 for the root): a memcpy, as on the queue. */
static inline void bt_put_name(const struct le__head *h, unsigned char *p,
                               uint32_t fb)
{
	if (!fb)
		return;
	const le_logger *lg = (const le_logger *)(const void *)h;
	le__put32(p, lg->field_len);
	memcpy(p + 4, lg->field, lg->field_len);
}

/* A deferred record into an entry: [name] site number, then the
 * arguments, from a (read before) or straight from ap (a fixed-size
 * plan); alen bytes of them. */
static inline __attribute__((always_inline)) void
bt_keep_block(le_engine *e, le__shard *sh, const struct le__head *h,
              const le__dsite *ds, uint32_t id, uint32_t fb,
              const le__dargs *a, va_list ap, size_t alen)
{
	uint64_t gen;
	le__btent *en = bt_claim(e, sh, &gen);
	if (!en)
		return;
	bt_put_name(h, en->payload, fb);
	le__put32(en->payload + fb, id);
	if (a)
		le__dargs_put(le__dsite_plan(ds), a, en->payload + fb + 4);
	else
		le__dargs_copy(le__dsite_plan(ds), ap, en->payload + fb + 4);
	bt_publish(e, h, en, gen, ds->site.level,
	           (uint8_t)(LE_REC_DEFERRED | (fb ? LE_REC_FIELDS : 0)),
	           fb + 4 + alen);
}

/* bt_keepd's case of arguments with strings or '*': read once, kept when
 * they fit an entry, else as text. */
static int bt_keep_args(le_engine *e, le__shard *sh, const struct le__head *h,
                        le__dsite *ds, uint32_t id, uint32_t fb,
                        const le__fieldset *fs, const char *fmt, va_list ap)
{
	const le__dplan *plan = le__dsite_plan(ds);
	le__dargs a;
	va_list ap2;
	int rc = 0;

	va_copy(ap2, ap);
	size_t alen = le__dargs_read(plan, &a, ap, LE_BT_PAYLOAD_MAX);
	if (alen == SIZE_MAX || fb + 4 + alen > LE_BT_PAYLOAD_MAX ||
	    fb + 4 + alen + plan->dlen > e->max_rec) {
		rc = bt_keep_text(e, sh, h, ds->site.level, fs, fmt, ap2);
		va_end(ap2);
		return rc;
	}
	va_end(ap2);
	bt_keep_block(e, sh, h, ds, id, fb, &a, ap, alen);
	return 0;
}

/*
 * Keep a record of a logger with a recorder, below its threshold, in the
 * caller's shard's ring, as its queue slot would hold it: [the logger's
 * name as a field block] site number, arguments (defer.h); a format the
 * deferred path does not take, or source_location, as text.  No lock, no
 * allocation, no system call (a site's first call registers it, as on
 * the queued path).  @return 0: kept, or lost and counted.
 */
static __attribute__((noinline)) int
bt_keepd(struct le__head *h, le__dsite *ds, const char *fmt, va_list ap)
{
	le_engine *e = engine_of(h);
	const le_logger *lg = h->kind ? (const le_logger *)(const void *)h
	                              : NULL;
	uint32_t fb = lg && lg->field_len ? 4 + lg->field_len : 0;
	/* acquire: the site's number and plan were stored before its state */
	uint32_t id = __atomic_load_n(&ds->state, __ATOMIC_ACQUIRE) == 2
	                      ? ds->id : le__dsite_number(ds, fmt);
	le__shard *sh = my_shard(e);
	const le__dplan *plan = le__dsite_plan(ds);

	if (e->cfg.source_location || !e->dsites || !id ||
	    (!le__sitetab_has(&sh->sites, id) &&
	     le__sitetab_put(&sh->sites, id, ds) < 0)) {
		le__fieldset fs = {0};
		if (lg) {
			fs.pre = lg->field;
			fs.pre_len = lg->field_len;
		}
		if (e->cfg.source_location)
			fs.site = &ds->site;
		return bt_keep_text(e, sh, h, ds->site.level,
		                    fs.pre_len || fs.site ? &fs : NULL, fmt, ap);
	}
	if (!plan->fixed_only || fb + 4 + plan->fixed > LE_BT_PAYLOAD_MAX ||
	    fb + 4 + plan->fixed + plan->dlen > e->max_rec) {
		le__fieldset fs = {.pre = fb ? lg->field : NULL,
		                   .pre_len = fb ? lg->field_len : 0};
		return bt_keep_args(e, sh, h, ds, id, fb, fb ? &fs : NULL, fmt,
		                    ap);
	}
	/* the common case: a plan of fixed size, straight from ap */
	bt_keep_block(e, sh, h, ds, id, fb, NULL, ap, plan->fixed);
	return 0;
}

int le__bt_keepf(le_engine *e, const struct le__head *h, int level,
                 const le__fieldset *fs, const char *fmt, va_list ap)
{
	return bt_keep_text(e, my_shard(e), h, level, fs, fmt, ap);
}

/*
 * What a level macro with a literal format calls (logengine.h).  Here,
 * not in log.c with the others, so that the root logger's call is one
 * function: the va_list is made and read in the same frame.  A named
 * logger's records start with its name as a field, as log.c's do.
 */
int le_logd_at(struct le__head *h, le__dsite *ds, const char *fmt, ...)
{
	va_list ap;
	int rc;

	if (__builtin_expect(!h, 0))
		h = le__head_or_default(h); /* dflt.c */
	if (!h || !ds)
		return LE_EINVAL;
	va_start(ap, fmt);
	/* A logger with a flight recorder (its level below its threshold):
	 * a record below the threshold is kept; one at or above the
	 * trigger writes the logger's kept records out first. */
	int keep = __atomic_load_n(&h->keep, __ATOMIC_RELAXED);
	if (__builtin_expect(__atomic_load_n(&h->level, __ATOMIC_RELAXED) <
	                     keep, 0)) {
		if (ds->site.level < keep) {
			rc = bt_keepd(h, ds, fmt, ap);
			va_end(ap);
			return rc;
		}
		if (ds->site.level >= engine_of(h)->bt_trigger)
			le__bt_trigger(engine_of(h), h);
	}
	le_engine *e0 = (le_engine *)(void *)h;
	if (h->kind == 0 && !e0->cfg.source_location) {
		/* The common case in this frame: a registered site of a plan
		 * with no string and no '*', its entry in the shard's table. */
		const le__dplan *plan = le__dsite_plan(ds);
		le__shard *sh;
		if (__atomic_load_n(&ds->state, __ATOMIC_ACQUIRE) == 2 &&
		    plan->fixed_only && e0->dsites &&
		    le__sitetab_has(&(sh = my_shard(e0))->sites, ds->id)) {
			sample_start(e0);
			rc = atomic_load_explicit(&e0->closing,
			                          memory_order_relaxed)
			             ? LE_ECLOSED
			             : submit_fixed(e0, sh, ds, ds->id, plan, ap);
		} else {
			rc = le__submitd(e0, ds, NULL, fmt, ap);
		}
	} else {
		le__fieldset fs = {0};
		le_engine *e = (le_engine *)(void *)h;
		if (h->kind != 0) {
			le_logger *lg = (le_logger *)(void *)h;
			fs.pre = lg->field;
			fs.pre_len = lg->field_len;
			e = lg->e;
		}
		if (e->cfg.source_location)
			fs.site = &ds->site;
		rc = le__submitd(e, ds, fs.pre_len || fs.site ? &fs : NULL,
		                 fmt, ap);
	}
	va_end(ap);
	return rc;
}

int le_vlogf(le_engine *e, int level, const char *fmt, va_list ap)
{
	return le__submitf(e, level, NULL, fmt, ap);
}

int le_logf(le_engine *e, int level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = le_vlogf(e, level, fmt, ap);
	va_end(ap);
	return rc;
}

/* ---- flush, stats, close ---- */
