/*
 * os.c -- the injectable table of OS calls and thin wrappers over it.
 * See os.h.  Nothing here is on the producer's hot path except le__now_ns,
 * which is clock_gettime through the vDSO (no system call on the clock
 * sources Linux normally uses: tsc, arch_sys_counter).
 */
#define _GNU_SOURCE
#include "os.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int real_open(const char *path, int flags, mode_t mode)
{
	return open(path, flags, mode);
}

const le__os le__os_real = {
	.open = real_open,
	.close = close,
	.pwrite = pwrite,
	.pread = pread,
	.fdatasync = fdatasync,
	.fsync = fsync,
	.ftruncate = ftruncate,
	.unlink = unlink,
	.mkdir = mkdir,
	.fallocate = fallocate,
};

le__os le__os_table = {
	.open = real_open,
	.close = close,
	.pwrite = pwrite,
	.pread = pread,
	.fdatasync = fdatasync,
	.fsync = fsync,
	.ftruncate = ftruncate,
	.unlink = unlink,
	.mkdir = mkdir,
	.fallocate = fallocate,
};

int le__open(const char *path, int flags, mode_t mode)
{
	int fd;
	do
		fd = le__os_table.open(path, flags | O_CLOEXEC, mode);
	while (fd < 0 && errno == EINTR);
	return fd < 0 ? -errno : fd;
}

int le__close(int fd)
{
	/* Linux closes the descriptor even when close reports EINTR: never
	 * retry, or we might close a descriptor another thread just got. */
	return le__os_table.close(fd) < 0 && errno != EINTR ? -errno : 0;
}

int le__pwrite_some(int fd, const void *buf, size_t len, uint64_t off,
                    size_t *done)
{
	const char *p = buf;

	*done = 0;
	while (len > 0) {
		ssize_t n = le__os_table.pwrite(fd, p, len, (off_t)off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO; /* no progress: treat as an error */
		p += n;
		off += (uint64_t)n;
		len -= (size_t)n;
		*done += (size_t)n;
	}
	return 0;
}

int le__pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
	size_t done;
	return le__pwrite_some(fd, buf, len, off, &done);
}

ssize_t le__pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	char *p = buf;
	size_t got = 0;

	while (got < len) {
		ssize_t n = le__os_table.pread(fd, p + got, len - got,
		                               (off_t)(off + got));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

int le__fdatasync(int fd)
{
	/* No EINTR loop on purpose: after a failed sync the page state is
	 * unknown (the kernel may have dropped the dirty pages), so the
	 * caller must treat the data as lost, never retry and trust. */
	return le__os_table.fdatasync(fd) < 0 ? -errno : 0;
}

int le__fsync_path(const char *dir)
{
	int fd = le__open(dir, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		return fd;
	int rc = le__os_table.fsync(fd) < 0 ? -errno : 0;
	le__close(fd);
	return rc;
}

int le__ftruncate(int fd, uint64_t len)
{
	int rc;
	do
		rc = le__os_table.ftruncate(fd, (off_t)len);
	while (rc < 0 && errno == EINTR);
	return rc < 0 ? -errno : 0;
}

int le__unlink(const char *path)
{
	return le__os_table.unlink(path) < 0 ? -errno : 0;
}

int le__mkdir(const char *path, mode_t mode)
{
	return le__os_table.mkdir(path, mode) < 0 ? -errno : 0;
}

int le__prealloc(int fd, uint64_t off, uint64_t len)
{
	return le__os_table.fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)off,
	                              (off_t)len) < 0 ? -errno : 0;
}

uint64_t le__now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t le__mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- TSC timestamps (see os.h) ---- */

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static int tsc_ok;
static double tsc_ratio; /* ns per tick, from the first calibration */
static pthread_once_t tsc_once = PTHREAD_ONCE_INIT;

/* A (tsc, ns) pair read as close together as the machine allows. */
static void pair(uint64_t *tsc, uint64_t *ns)
{
#if defined(__x86_64__)
	uint64_t best = UINT64_MAX;
	for (int i = 0; i < 5; i++) {
		uint64_t a = __rdtsc(), n = le__now_ns(), b = __rdtsc();
		if (b - a < best) {
			best = b - a;
			*tsc = a + (b - a) / 2;
			*ns = n;
		}
	}
#else
	*tsc = 0;
	*ns = le__now_ns();
#endif
}

static void tsc_probe(void)
{
#if defined(__x86_64__)
	char cs[64] = "";
	FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/"
	                "current_clocksource", "re");
	if (f) {
		if (!fgets(cs, sizeof cs, f))
			cs[0] = '\0';
		fclose(f);
	}
	if (strncmp(cs, "tsc", 3) != 0 || getenv("LE_NO_TSC"))
		return;
	uint64_t t0 = 0, n0 = 0, t1 = 0, n1 = 0;
	pair(&t0, &n0);
	do
		pair(&t1, &n1);
	while (n1 - n0 < 5000000u);
	if (t1 <= t0)
		return;
	tsc_ratio = (double)(n1 - n0) / (double)(t1 - t0);
	tsc_ok = tsc_ratio > 0.01 && tsc_ratio < 100.0;
#endif
}

int le__tsc_usable(void)
{
	pthread_once(&tsc_once, tsc_probe);
	return tsc_ok;
}

void le__clock_init(le__clock *c)
{
	memset(c, 0, sizeof *c);
	if (!le__tsc_usable())
		return;
	pair(&c->base_tsc, &c->base_ns);
	c->ns_per_tick = tsc_ratio;
	c->mult = (uint64_t)(tsc_ratio * 4294967296.0 + 0.5);
}

void le__clock_recal(le__clock *c)
{
	uint64_t t = 0, n = 0;
	if (c->ns_per_tick == 0)
		return;
	pair(&t, &n);
	/* Over a second or more the pair's jitter (tens of ns) is noise. */
	if (n > c->base_ns + 500000000u && t > c->base_tsc)
		c->ns_per_tick = (double)(n - c->base_ns) /
		                 (double)(t - c->base_tsc);
	c->mult = (uint64_t)(c->ns_per_tick * 4294967296.0 + 0.5);
	c->base_tsc = t;
	c->base_ns = n;
}

void le__name_thread(pthread_t t, const char *name)
{
	pthread_setname_np(t, name);
}
