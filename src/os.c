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

int le__pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
	const char *p = buf;

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
	}
	return 0;
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
