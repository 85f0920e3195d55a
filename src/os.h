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
/* Name a thread (top -H, perf --sort comm, /proc/PID/task/N/comm; at
 * most 15 bytes).  Called by its creator right after pthread_create, so
 * the name is there when le_open returns.  Best effort. */
void le__name_thread(pthread_t t, const char *name);


/*
 * Record timestamps.  Where the kernel itself keeps time with the TSC
 * (clocksource "tsc": constant, non-stop, synchronised across cores), a
 * producer stores the raw counter (rdtsc, ~7 ns) instead of calling
 * clock_gettime (~20 ns), and the shard's writer converts ticks to
 * wall-clock ns with a calibration it refreshes every second.  Elsewhere
 * producers store le__now_ns() and the conversion is the identity.
 */
typedef struct le__clock {
	uint64_t base_tsc;  /* counter at base_ns */
	uint64_t base_ns;   /* CLOCK_REALTIME, ns */
	double ns_per_tick; /* 0: timestamps are already ns */
	uint64_t mult;      /* ns_per_tick in 32.32 fixed point */
} le__clock;

/* 1 when le__stamp() returns TSC ticks.  Decided once per process. */
int le__tsc_usable(void);
/* Calibration for a new engine (first call per process spins ~5 ms). */
void le__clock_init(le__clock *c);
/* Refresh: the ratio over [base, now], then rebase at now. */
void le__clock_recal(le__clock *c);
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
