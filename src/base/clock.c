/*
 * clock.c -- TSC calibration and the stamp-to-ns conversion (clock.h).
 * Nothing here runs on the producer's hot path but le__stamp (inline).
 */
#define _GNU_SOURCE
#include "base/clock.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

static int tsc_ok;
static double tsc_ratio; /* ns per tick, from the first calibration */
static pthread_once_t tsc_once = PTHREAD_ONCE_INIT;

/* A (tsc, CLOCK_REALTIME, CLOCK_MONOTONIC) triple read as close together
 * as the machine allows: the best of five by the counter's span. */
static void triple(uint64_t *tsc, uint64_t *real, uint64_t *mono)
{
#if defined(__x86_64__)
	uint64_t best = UINT64_MAX;
	for (int i = 0; i < 5; i++) {
		uint64_t a = __rdtsc(), n = le__now_ns(), m = le__mono_ns(),
		         b = __rdtsc();
		if (b - a < best) {
			best = b - a;
			*tsc = a + (b - a) / 2;
			*real = n;
			*mono = m;
		}
	}
#else
	*tsc = 0;
	*real = le__now_ns();
	*mono = le__mono_ns();
#endif
}

#if defined(__x86_64__)
/* "tsc": the kernel vouches for the counter.  "kvm-clock": it may do, if
 * every CPU says the counter is invariant; the skew check decides. */
static int tsc_source(void)
{
	char cs[64] = "", line[4096];
	int flags = 0, bad = 0;
	FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/"
	                "current_clocksource", "re");
	if (f) {
		if (!fgets(cs, sizeof cs, f))
			cs[0] = '\0';
		fclose(f);
	}
	if (strncmp(cs, "tsc", 3) == 0)
		return 1;
	if (strncmp(cs, "kvm-clock", 9) != 0 ||
	    !(f = fopen("/proc/cpuinfo", "re")))
		return 0;
	while (fgets(line, sizeof line, f)) {
		if (strncmp(line, "flags", 5) != 0)
			continue;
		flags++;
		if (!strstr(line, " constant_tsc") || !strstr(line, " nonstop_tsc"))
			bad++;
	}
	fclose(f);
	return flags && !bad ? 2 : 0;
}

struct skew {
	uint64_t tsc, mono;
};

static void *skew_read(void *arg)
{
	struct skew *k = arg;
	uint64_t real;
	triple(&k->tsc, &real, &k->mono);
	return NULL;
}

/* On every CPU this process may run on (every CPU a thread can be
 * pinned to: the caller's own mask may be narrower than its process's),
 * the counter against CLOCK_MONOTONIC (which kvm-clock keeps consistent
 * across CPUs) on the line through (t0, m0) at the calibrated ratio.  The
 * probe threads block every signal (the process's are not theirs).
 * @return 1 when every such CPU is within LE_TSC_SKEW_NS of it. */
static int skew_ok(uint64_t t0, uint64_t m0)
{
	struct skew k;
	pthread_attr_t a;
	pthread_t th;
	sigset_t all, old;
	long ncpu = sysconf(_SC_NPROCESSORS_CONF);
	int checked = 0, ok = 1;

	if (ncpu < 1 || ncpu > CPU_SETSIZE)
		return 0;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (int cpu = 0; ok && cpu < ncpu; cpu++) {
		cpu_set_t one;
		CPU_ZERO(&one);
		CPU_SET(cpu, &one);
		if (pthread_attr_init(&a) != 0) {
			ok = 0;
			break;
		}
		int rc = pthread_attr_setaffinity_np(&a, sizeof one, &one);
		if (rc == 0)
			rc = pthread_create(&th, &a, skew_read, &k);
		pthread_attr_destroy(&a);
		if (rc == EINVAL)
			continue; /* offline, or outside the process's cpuset */
		if (rc != 0 || pthread_join(th, NULL) != 0)
			ok = 0;
		else if (le__tsc_skewed(t0, m0, tsc_ratio, k.tsc, k.mono))
			ok = 0;
		checked++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return ok && checked > 0;
}
#endif

static void tsc_probe(void)
{
#if defined(__x86_64__)
	int src = getenv("LE_NO_TSC") ? 0 : tsc_source();
	if (!src)
		return;
	uint64_t t0 = 0, r0, m0 = 0, t1 = 0, r1, m1 = 0;
	triple(&t0, &r0, &m0);
	do
		triple(&t1, &r1, &m1);
	while (m1 - m0 < 5000000u);
	if (t1 <= t0)
		return;
	tsc_ratio = (double)(m1 - m0) / (double)(t1 - t0);
	tsc_ok = tsc_ratio > 0.01 && tsc_ratio < 100.0 &&
	         (src == 1 || skew_ok(t1, m1));
#endif
}

static int le__tsc_forbid;

void le__tsc_forbid_set(int forbid)
{
	le__tsc_forbid = forbid;
}

int le__tsc_usable(void)
{
	pthread_once(&tsc_once, tsc_probe);
	return tsc_ok && !le__tsc_forbid;
}

void le__clock_rebase(le__clock *c, uint64_t tsc, uint64_t real,
                      uint64_t mono)
{
	c->mult = (uint64_t)(c->ns_per_tick * 4294967296.0 + 0.5);
	c->base_tsc = tsc;
	c->base_ns = real;
	c->base_mono = mono;
}

void le__clock_init(le__clock *c)
{
	uint64_t t = 0, n = 0, m = 0;

	memset(c, 0, sizeof *c);
	if (!le__tsc_usable())
		return;
	triple(&t, &n, &m);
	c->ns_per_tick = tsc_ratio;
	le__clock_rebase(c, t, n, m);
}

int le__clock_ratio_ok(double first, double now)
{
	return now > first * 0.999 && now < first * 1.001;
}

void le__clock_recal(le__clock *c)
{
	uint64_t t = 0, n = 0, m = 0;
	if (c->ns_per_tick == 0)
		return;
	triple(&t, &n, &m);
	le__clock_recal_at(c, t, n, m, tsc_ratio);
}

void le__clock_recal_at(le__clock *c, uint64_t tsc, uint64_t real,
                        uint64_t mono, double first)
{
	/* Over half a second or more the triple's jitter (tens of ns) is
	 * noise.  Against CLOCK_MONOTONIC: CLOCK_REALTIME may be stepped. */
	if (mono > c->base_mono + 500000000u && tsc > c->base_tsc) {
		double r = (double)(mono - c->base_mono) /
		           (double)(tsc - c->base_tsc);
		if (le__clock_ratio_ok(first, r))
			c->ns_per_tick = r;
	}
	le__clock_rebase(c, tsc, real, mono);
}

int le__tsc_skewed(uint64_t t0, uint64_t m0, double ratio, uint64_t tsc,
                   uint64_t mono)
{
	double want = (double)m0 + (double)(int64_t)(tsc - t0) * ratio;
	double off = (double)mono - want;
	return off > LE_TSC_SKEW_NS || off < -(double)LE_TSC_SKEW_NS;
}

int le__clock_slipped(const le__clock *c, uint64_t tsc, uint64_t real)
{
	uint64_t ns = le__clock_ns(c, tsc);
	return ns > real + LE_CLOCK_SLIP_NS || ns + LE_CLOCK_SLIP_NS < real;
}

void le__clock_check(le__clock *c, uint64_t *real)
{
#if defined(__x86_64__)
	if (c->ns_per_tick != 0) {
		uint64_t t = __rdtsc(), m = 0;
		*real = le__now_ns();
		if (le__clock_slipped(c, t, *real)) {
			triple(&t, real, &m);
			le__clock_rebase(c, t, *real, m);
		}
		return;
	}
#endif
	*real = le__now_ns();
}
