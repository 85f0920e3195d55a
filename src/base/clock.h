/*
 * clock.h -- record timestamps: what a producer stamps (TSC ticks where the
 * counter can stand for the kernel's clock, ns otherwise) and how a shard's
 * writer turns stamps into wall-clock ns.
 */
#ifndef LE_CLOCK_H
#define LE_CLOCK_H

#include <stdint.h>

#include "base/os.h"

/*
 * Record timestamps.  Where the TSC can stand for the kernel's clock, a
 * producer stores the raw counter (rdtsc, a few ns) instead of calling
 * clock_gettime (several times that, and on a KVM guest's kvm-clock more
 * than all the rest of le_write), and the shard's writer converts ticks
 * to wall-clock ns.  The TSC stands for the clock when:
 *   - the kernel keeps time with it (clocksource "tsc": it checked the
 *     counter is constant, non-stop and synchronised across cores), or
 *   - the kernel keeps time with kvm-clock (a KVM guest; the host scales
 *     the same counter), every CPU flags constant_tsc and nonstop_tsc,
 *     and at calibration the counter agrees with CLOCK_MONOTONIC on every
 *     CPU this process may run on to within LE_TSC_SKEW_NS.
 * A guest's counter can still jump (the VM restored from a snapshot or
 * moved to another host) and CLOCK_REALTIME can be stepped, so the writer
 * checks the conversion against CLOCK_REALTIME at every collect and
 * rebases when they differ by more than LE_CLOCK_SLIP_NS (le__clock_check),
 * and keeps each record within [the shard's previous record, a reading
 * taken after its stamp + LE_CLOCK_SLIP_NS] (le__ts_within; collect reads
 * the clock again before it clamps to an older reading).  LE_NO_TSC=1 in the
 * environment turns TSC stamps off.  Elsewhere producers store
 * le__now_ns() and the conversion is the identity.
 */
#define LE_TSC_SKEW_NS 2000u
#define LE_CLOCK_SLIP_NS 1000000u

typedef struct le__clock {
	uint64_t base_tsc;  /* counter at base_ns */
	uint64_t base_ns;   /* CLOCK_REALTIME, ns */
	uint64_t base_mono; /* CLOCK_MONOTONIC at base_tsc: the ratio's clock */
	double ns_per_tick; /* 0: timestamps are already ns */
	uint64_t mult;      /* ns_per_tick in 32.32 fixed point */
} le__clock;

/* 1 when le__stamp() returns TSC ticks.  Decided once per process. */
int le__tsc_usable(void);
/* Tests: nonzero makes le__tsc_usable() 0 from now on, as LE_NO_TSC=1 does
 * at the first call (a forked child cannot probe again). */
void le__tsc_forbid_set(int forbid);
/* Calibration for a new engine (first call per process spins ~5 ms). */
void le__clock_init(le__clock *c);
/* Refresh: the ratio over [base, now] against CLOCK_MONOTONIC (kept when
 * it strays from the first calibration by more than 1/1000: the counter
 * jumped), then rebase at now. */
void le__clock_recal(le__clock *c);
/* le__clock_recal with its reading given; `first`: the first ratio. */
void le__clock_recal_at(le__clock *c, uint64_t tsc, uint64_t real,
                        uint64_t mono, double first);
/* Rebase at (tsc, real ns, mono ns), ratio unchanged. */
void le__clock_rebase(le__clock *c, uint64_t tsc, uint64_t real,
                      uint64_t mono);
/* Read CLOCK_REALTIME into *real; for TSC stamps, also the counter, and
 * rebase when the conversion of it is more than LE_CLOCK_SLIP_NS from
 * *real. */
void le__clock_check(le__clock *c, uint64_t *real);
/* Whether stamp `tsc` converts to more than LE_CLOCK_SLIP_NS from real. */
int le__clock_slipped(const le__clock *c, uint64_t tsc, uint64_t real);
/* Whether a new ratio is the counter's (within 1/1000 of the first). */
int le__clock_ratio_ok(double first, double now);
/* Whether a CPU's reading (tsc, mono) is more than LE_TSC_SKEW_NS off the
 * line through (t0, m0) at `ratio` ns per tick. */
int le__tsc_skewed(uint64_t t0, uint64_t m0, double ratio, uint64_t tsc,
                   uint64_t mono);
/* ns since the epoch for a stamp taken by le__stamp(). */
/* The conversion's arithmetic alone, for a clock whose ns_per_tick is
 * not 0 or that le__clock_lin made. */
static inline uint64_t le__clock_ns_lin(const le__clock *c, uint64_t stamp)
{
	/* Integer multiply-shift: the writer converts every record, and the
	 * double round trip (int -> double -> int) was most of it.  32
	 * fraction bits are 0.6 ns over a second of ticks; recal rebases
	 * every second or so.  A stamp before base (another thread's, taken
	 * just before a rebase) gives a negative delta: signed arithmetic. */
	__int128 d = (__int128)(int64_t)(stamp - c->base_tsc) * (__int128)c->mult;
	return c->base_ns + (uint64_t)(int64_t)(d >> 32);
}

static inline uint64_t le__clock_ns(const le__clock *c, uint64_t stamp)
{
	if (c->ns_per_tick == 0)
		return stamp;
	return le__clock_ns_lin(c, stamp);
}

/* c for le__clock_ns_lin: as it is with ticks; with ns stamps, the
 * identity as a multiply-shift (one tick per ns from 0: exact below
 * 2^63 ns), so that a loop over many stamps tests nothing per stamp. */
static inline le__clock le__clock_lin(const le__clock *c)
{
	le__clock l = *c;

	if (l.ns_per_tick == 0) {
		l.base_tsc = l.base_ns = 0;
		l.mult = 1ull << 32;
	}
	return l;
}

/* A record's ns kept in order and believable: not before the shard's
 * previous record (`last`), and not more than LE_CLOCK_SLIP_NS after the
 * writer's reading `real`, taken after the record's stamp.  A stamp
 * past that was taken before the counter jumped back or the clock was
 * stepped back; `real` is the nearest time we can vouch for. */
static inline uint64_t le__ts_within(uint64_t ts, uint64_t last, uint64_t real)
{
	if (ts > real + LE_CLOCK_SLIP_NS)
		ts = real;
	return ts < last ? last : ts;
}

#if defined(__x86_64__)
#include <x86intrin.h>
static inline uint64_t le__stamp(int tsc)
{
	return tsc ? __rdtsc() : le__now_ns();
}
#else
static inline uint64_t le__stamp(int tsc)
{
	(void)tsc;
	return le__now_ns();
}
#endif

#endif
