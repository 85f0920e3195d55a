/*
 * os.c -- the injectable table of OS calls and thin wrappers over it.
 * See os.h.  Nothing here is on the producer's hot path except le__now_ns,
 * which is clock_gettime through the vDSO (no system call on the clock
 * sources Linux normally uses: tsc, arch_sys_counter).
 */
#define _GNU_SOURCE
#include "base/os.h"
#include "base/internal.h"

#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int real_open(const char *path, int flags, mode_t mode)
{
	return open(path, flags, mode);
}

static int real_openat(int dirfd, const char *name, int flags, mode_t mode)
{
	return openat(dirfd, name, flags, mode);
}

static int real_fcntl(int fd, int cmd, int arg)
{
	return fcntl(fd, cmd, arg);
}

static ssize_t real_getdents(int fd, void *buf, size_t len)
{
	return syscall(SYS_getdents64, fd, buf, len);
}

const le__os le__os_real = {
	.open = real_open,
	.openat = real_openat,
	.close = close,
	.pwrite = pwrite,
	.pread = pread,
	.fdatasync = fdatasync,
	.fsync = fsync,
	.ftruncate = ftruncate,
	.unlink = unlink,
	.mkdir = mkdir,
	.fallocate = fallocate,
	.sync_range = sync_file_range,
	.rename = rename,
	.madvise = madvise,
	.fstat = fstat,
	.fstatat = fstatat,
	.fcntl = real_fcntl,
	.lseek = lseek,
	.flock = flock,
	.mmap = mmap,
	.munmap = munmap,
	.getdents = real_getdents,
	.futimens = futimens,
};

/*
 * The table in use, switched by pointer: a test installs a table while
 * an engine's threads may be between two calls, and each call reads the
 * pointer once (acquire) and then a table nobody writes.  A table is
 * copied into the slot the previous install did not use, so the table a
 * thread just loaded is not the one being overwritten.
 */
static le__os le__os_slot[2];
static unsigned le__os_next;
static _Atomic(const le__os *) le__os_cur = &le__os_real;
#define OS (atomic_load_explicit(&le__os_cur, memory_order_acquire))

void le__os_install(const le__os *t)
{
	if (!t) {
		atomic_store_explicit(&le__os_cur, &le__os_real,
		                      memory_order_release);
		return;
	}
	le__os *slot = &le__os_slot[le__os_next];
	le__os_next ^= 1;
	*slot = *t;
	atomic_store_explicit(&le__os_cur, slot, memory_order_release);
}

const le__os *le__os_current(void)
{
	return OS;
}

int le__open(const char *path, int flags, mode_t mode)
{
	int fd;
	do
		fd = OS->open(path, flags | O_CLOEXEC, mode);
	while (fd < 0 && errno == EINTR);
	return fd < 0 ? -errno : fd;
}

static const char *kind(mode_t m)
{
	return S_ISLNK(m)    ? "a symbolic link"
	       : S_ISFIFO(m) ? "a FIFO"
	       : S_ISSOCK(m) ? "a socket"
	       : S_ISCHR(m)  ? "a character device"
	       : S_ISBLK(m)  ? "a block device"
	       : S_ISDIR(m)  ? "a directory"
	       : S_ISREG(m)  ? "a regular file"
	                     : "of an unknown type";
}

/* Name what stands at dirfd/name, which could not be opened as it should
 * (rel: its path inside the log directory, for the message). */
static int refuse(int dirfd, const char *name, const char *rel, int rc)
{
	struct stat st;
	if (OS->fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return rc;
	if (S_ISLNK(st.st_mode))
		le__seterr("%s is a symbolic link; refusing to follow it", rel);
	else if (rc == -ENOTDIR && !S_ISDIR(st.st_mode))
		le__seterr("%s is %s, not a directory; refusing it", rel,
		           kind(st.st_mode));
	else if (rc == -ENXIO || rc == -EISDIR)
		le__seterr("%s is %s, not a regular file; refusing to open it",
		           rel, kind(st.st_mode));
	else
		return rc;
	return LE_EUNSAFE;
}

static int openat_retry(int dirfd, const char *name, int flags, mode_t mode)
{
	int fd;
	do
		fd = OS->openat(dirfd, name, flags | O_CLOEXEC, mode);
	while (fd < 0 && errno == EINTR);
	return fd < 0 ? -errno : fd;
}

/* The opened fd must be what flags asked for; see le__open_in. */
static int check_opened(int fd, int flags, const char *rel)
{
	struct stat st;
	int want_dir = (flags & O_DIRECTORY) != 0;
	int writes = (flags & O_ACCMODE) != O_RDONLY;

	if (OS->fstat(fd, &st) < 0)
		return -errno;
	if (want_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) {
		le__seterr("%s is %s, not a %s; refusing to open it", rel,
		           kind(st.st_mode),
		           want_dir ? "directory" : "regular file");
		return LE_EUNSAFE;
	}
	if (writes && !want_dir && st.st_nlink > 1) {
		le__seterr("%s has %lu hard links; refusing to write through "
		           "it into another file", rel,
		           (unsigned long)st.st_nlink);
		return LE_EUNSAFE;
	}
	if (!(flags & O_NONBLOCK)) {
		int fl = OS->fcntl(fd, F_GETFL, 0);
		if (fl < 0 || OS->fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
			return -errno;
	}
	return 0;
}

/* An opened descriptor checked (check_opened), then truncated if asked
 * (only now: never a file that is refused), or closed.  @return fd or
 * the error. */
static int settle_open(int fd, int flags, const char *name, int trunc)
{
	int rc = check_opened(fd, flags, name);
	if (rc == 0 && trunc)
		rc = le__ftruncate(fd, 0);
	if (rc < 0) {
		le__close(fd);
		return rc;
	}
	return fd;
}

int le__open_in(const char *path, int depth, int flags, mode_t mode)
{
	char buf[4096];
	size_t n = strlen(path), cut = n;
	int dfd, fd;

	if (n >= sizeof buf)
		return -ENAMETOOLONG;
	/* Truncate only what passed the checks (a hard link's other name
	 * must keep its bytes). */
	int trunc = (flags & O_TRUNC) != 0;
	flags &= ~O_TRUNC;
	/* The root: path without its last depth components. */
	for (int d = 0; d < depth && cut > 0; d++) {
		while (cut > 0 && path[cut - 1] != '/')
			cut--;
		while (d + 1 < depth && cut > 0 && path[cut - 1] == '/')
			cut--;
	}
	memcpy(buf, path, n + 1);
	const char *rel = path + cut;
	if (depth == 0) {
		fd = openat_retry(AT_FDCWD, path, flags | O_NONBLOCK, mode);
		if (fd < 0)
			return fd;
		return settle_open(fd, flags, path, trunc);
	}
	if (cut > 0) {
		buf[cut] = '\0';
		dfd = openat_retry(AT_FDCWD, buf, O_RDONLY | O_DIRECTORY, 0);
		if (dfd < 0)
			return dfd;
	} else {
		dfd = AT_FDCWD;
	}
	/* buf[cut..] is rel again; each component in turn. */
	memcpy(buf, path, n + 1);
	char *comp = buf + cut;
	for (;;) {
		char *slash = strchr(comp, '/');
		int last = slash == NULL;
		if (slash) {
			*slash = '\0';
			if (slash[1] == '\0')
				last = 1; /* "shard-000/": the directory */
		}
		int fl = last ? flags | O_NOFOLLOW | O_NONBLOCK
		              : O_RDONLY | O_DIRECTORY | O_NOFOLLOW;
		fd = openat_retry(dfd, comp, fl, mode);
		if (fd < 0) {
			/* the message names rel up to this component */
			char r[4096];
			snprintf(r, sizeof r, "%.*s", (int)(comp - buf - cut +
			         strlen(comp)), rel);
			if (fd == -ELOOP || fd == -ENOTDIR || fd == -ENXIO ||
			    fd == -EISDIR)
				fd = refuse(dfd, comp, r, fd);
			if (dfd != AT_FDCWD)
				le__close(dfd);
			return fd;
		}
		if (dfd != AT_FDCWD)
			le__close(dfd);
		if (last)
			break;
		dfd = fd;
		comp = slash + 1;
		while (*comp == '/')
			comp++;
	}
	return settle_open(fd, flags, rel, trunc);
}

int le__close(int fd)
{
	/* Linux closes the descriptor even when close reports EINTR: never
	 * retry, or we might close a descriptor another thread just got. */
	return OS->close(fd) < 0 && errno != EINTR ? -errno : 0;
}

int le__pwrite_some(int fd, const void *buf, size_t len, uint64_t off,
                    size_t *done)
{
	const char *p = buf;

	*done = 0;
	while (len > 0) {
		ssize_t n = OS->pwrite(fd, p, len, (off_t)off);
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
		ssize_t n = OS->pread(fd, p + got, len - got,
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
	return OS->fdatasync(fd) < 0 ? -errno : 0;
}

int le__fsync_path(const char *dir)
{
	int fd = le__open(dir, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		return fd;
	int rc = OS->fsync(fd) < 0 ? -errno : 0;
	le__close(fd);
	return rc;
}

int le__fsync_dir_in(const char *dir, int depth)
{
	int fd = le__open_in(dir, depth, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		return fd;
	int rc = OS->fsync(fd) < 0 ? -errno : 0;
	le__close(fd);
	return rc;
}

int le__ftruncate(int fd, uint64_t len)
{
	int rc;
	do
		rc = OS->ftruncate(fd, (off_t)len);
	while (rc < 0 && errno == EINTR);
	return rc < 0 ? -errno : 0;
}

int le__unlink(const char *path)
{
	return OS->unlink(path) < 0 ? -errno : 0;
}

int le__rename(const char *from, const char *to)
{
	return OS->rename(from, to) < 0 ? -errno : 0;
}

int le__mkdir(const char *path, mode_t mode)
{
	return OS->mkdir(path, mode) < 0 ? -errno : 0;
}

int le__fstat(int fd, struct stat *st)
{
	return OS->fstat(fd, st) < 0 ? -errno : 0;
}

int le__futimens(int fd, const struct timespec ts[2])
{
	return OS->futimens(fd, ts) < 0 ? -errno : 0;
}

int le__stat(const char *path, struct stat *st)
{
	return OS->fstatat(AT_FDCWD, path, st, 0) < 0 ? -errno : 0;
}

int le__lstat(const char *path, struct stat *st)
{
	return OS->fstatat(AT_FDCWD, path, st, AT_SYMLINK_NOFOLLOW) < 0
	               ? -errno
	               : 0;
}

int le__flock(int fd, int op)
{
	int rc;
	do
		rc = OS->flock(fd, op);
	while (rc < 0 && errno == EINTR);
	return rc < 0 ? -errno : 0;
}

int64_t le__lseek(int fd, int64_t off, int whence)
{
	off_t r = OS->lseek(fd, (off_t)off, whence);
	return r < 0 ? -errno : (int64_t)r;
}

void *le__mmap(void *addr, size_t len, int prot, int flags, int fd,
               off_t off)
{
	return OS->mmap(addr, len, prot, flags, fd, off);
}

int le__munmap(void *addr, size_t len)
{
	return OS->munmap(addr, len);
}

int le__madvise(void *addr, size_t len, int advice)
{
	/* a test's table from before this field: the real call */
	int (*adv)(void *, size_t, int) = OS->madvise ? OS->madvise : madvise;
	return adv(addr, len, advice) < 0 ? -errno : 0;
}

/* getdents64's record (the kernel's struct linux_dirent64; glibc has no
 * name for it). */
struct le__dirent64 {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

int le__dir_each(int dirfd, int (*each)(void *arg, const char *name,
                                        unsigned type),
                 void *arg)
{
	/* 8-aligned: the records are, and their fields are read in place */
	_Alignas(8) unsigned char buf[4096];
	for (;;) {
		ssize_t n;
		do
			n = OS->getdents(dirfd, buf, sizeof buf);
		while (n < 0 && errno == EINTR);
		if (n < 0)
			return -errno;
		if (n == 0)
			return 0;
		for (ssize_t at = 0; at < n;) {
			const struct le__dirent64 *d =
			        (const struct le__dirent64 *)(const void *)(buf +
			                                                    at);
			/* a record that does not fit what was returned is the
			 * table's bug, not a name: stop rather than read on */
			const size_t name_at = offsetof(struct le__dirent64,
			                                d_name);
			if ((size_t)(n - at) < name_at + 1 ||
			    d->d_reclen < name_at + 1 ||
			    d->d_reclen > (size_t)(n - at))
				return -EIO;
			at += d->d_reclen;
			const char *nm = d->d_name;
			if (memchr(nm, '\0', d->d_reclen - name_at) == NULL)
				return -EIO;
			if (nm[0] == '.' &&
			    (nm[1] == '\0' || (nm[1] == '.' && nm[2] == '\0')))
				continue;
			int rc = each(arg, nm, d->d_type);
			if (rc)
				return rc;
		}
	}
}

int le__prealloc(int fd, uint64_t off, uint64_t len)
{
	return OS->fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)off,
	                              (off_t)len) < 0 ? -errno : 0;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

int le__populate_write(void *p, size_t len)
{
	int rc = le__madvise(p, len, MADV_POPULATE_WRITE);
	/* EFAULT: a store would have been a SIGBUS, on a file system that
	 * has no block for it (full, or over a quota) */
	return rc == -EFAULT ? -ENOSPC : rc;
}

int le__writeback(int fd, uint64_t off, uint64_t len)
{
	if (!OS->sync_range)
		return 0;
	return OS->sync_range(fd, (off_t)off, (off_t)len,
	                               SYNC_FILE_RANGE_WRITE) < 0 ? -errno : 0;
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

uint64_t le__self_cpu_ns(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t le__thread_cpu_ns(pthread_t t)
{
	clockid_t cid;
	struct timespec ts;

	if (pthread_getcpuclockid(t, &cid) != 0 || clock_gettime(cid, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void le__futex_wait(_Atomic uint32_t *w, uint32_t val, uint64_t ns)
{
	struct timespec ts = {(time_t)(ns / 1000000000u),
	                      (long)(ns % 1000000000u)};
	syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT_PRIVATE, val, &ts, NULL,
	        0);
}

void le__futex_wake(_Atomic uint32_t *w, int n)
{
	syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

void le__name_thread(pthread_t t, const char *name)
{
	pthread_setname_np(t, name);
}
