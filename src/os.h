/*
 * os.h -- every file and sync call the engine makes goes through this one
 * table, as SQLite's aSyscall[] does, so tests can inject ENOSPC, EIO, short
 * writes and EINTR, or simulate a power cut, by swapping entries.
 *
 * The wrappers return -errno on failure (never set errno for the caller) and
 * retry EINTR themselves, so the engine's code reads as plain sequences.
 */
#ifndef LE_OS_H
#define LE_OS_H

#include <stddef.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct le__os {
	int (*open)(const char *path, int flags, mode_t mode);
	int (*close)(int fd);
	ssize_t (*pwrite)(int fd, const void *buf, size_t len, off_t off);
	ssize_t (*pread)(int fd, void *buf, size_t len, off_t off);
	int (*fdatasync)(int fd);
	int (*fsync)(int fd);
	int (*ftruncate)(int fd, off_t len);
	int (*unlink)(const char *path);
	int (*mkdir)(const char *path, mode_t mode);
	int (*fallocate)(int fd, int mode, off_t off, off_t len);
} le__os;

/* The table in use.  Tests replace entries before le_open and restore them
 * after le_close; it is not changed while an engine runs. */
extern le__os le__os_table;
/* The real calls, for tests that wrap them. */
extern const le__os le__os_real;

/* Wrappers: 0 / a byte count on success, -errno on failure. */
int le__open(const char *path, int flags, mode_t mode);
int le__close(int fd);
/* Writes all len bytes (looping over short writes); -errno on failure. */
int le__pwrite_all(int fd, const void *buf, size_t len, uint64_t off);
/* The same, telling in *done how many bytes got written before a failure
 * (a write past ulimit -f writes up to the limit, then fails: EFBIG). */
int le__pwrite_some(int fd, const void *buf, size_t len, uint64_t off,
                    size_t *done);
/* Reads up to len bytes (looping until EOF); count or -errno. */
ssize_t le__pread_full(int fd, void *buf, size_t len, uint64_t off);
int le__fdatasync(int fd);
int le__fsync_path(const char *dir); /* fsync a directory by path */
int le__ftruncate(int fd, uint64_t len);
int le__unlink(const char *path);
int le__mkdir(const char *path, mode_t mode);
/* Reserve blocks [off, off + len) without changing the file size (a hint:
 * file systems without it return -EOPNOTSUPP, and callers go on). */
int le__prealloc(int fd, uint64_t off, uint64_t len);

/* Time in ns: wall clock (for record timestamps) and monotonic. */
uint64_t le__now_ns(void);
uint64_t le__mono_ns(void);
/* The calling thread's CPU time (0 if unknown): an engine thread reads its
 * own as it ends, for le_close_stats, which runs after the join. */
uint64_t le__self_cpu_ns(void);
/* Name a thread (top -H, perf --sort comm, /proc/PID/task/N/comm; at
 * most 15 bytes).  Called by its creator right after pthread_create, so
 * the name is there when le_open returns.  Best effort. */
void le__name_thread(pthread_t t, const char *name);


/*
 * Record timestamps.  Where the TSC can stand for the kernel's clock, a
 * producer stores the raw counter (rdtsc, 7-11 ns) instead of calling
 * clock_gettime (20-25 ns, and on a KVM guest's kvm-clock two to three
 * times le_write's other work in a loop: 5-9 M vs 21-23 M records/s from
 * build/writer-cost, docs/BENCHMARKS.md), and the shard's writer converts ticks to
 * wall-clock ns.  The TSC stands for the clock when:
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
extern int le__tsc_forbid;
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
static inline uint64_t le__clock_ns(const le__clock *c, uint64_t stamp)
{
	if (c->ns_per_tick == 0)
		return stamp;
	/* Integer multiply-shift: the writer converts every record, and the
	 * double round trip (int -> double -> int) was most of it.  32
	 * fraction bits are 0.6 ns over a second of ticks; recal rebases
	 * every second or so.  A stamp before base (another thread's, taken
	 * just before a rebase) gives a negative delta: signed arithmetic. */
	__int128 d = (__int128)(int64_t)(stamp - c->base_tsc) * (__int128)c->mult;
	return c->base_ns + (uint64_t)(int64_t)(d >> 32);
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
