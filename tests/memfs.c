/*
 * memfs.c -- see memfs.h.  One lock over everything: this is a test's file
 * system, where what matters is that every call behaves as the kernel's
 * would, not that two threads write at once.  Each call sets errno and
 * returns -1 as the system call does; the table's wrappers (os.c) turn
 * that into -errno.
 */
#define _GNU_SOURCE
#include "memfs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/os.h"

typedef struct mnode mnode;
struct mnode {
	char name[NAME_MAX + 1];
	mnode *parent, *kids, *next; /* the tree; parent NULL: unlinked */
	unsigned long cookie;        /* its place in parent's list (rising) */
	unsigned long next_cookie;   /* a directory's next entry's */
	mode_t mode;                 /* S_IFDIR or S_IFREG, and the bits */
	nlink_t nlink;               /* 0: unlinked; freed when no
	                                descriptor or mapping is left */
	ino_t ino;
	unsigned char *data;         /* MEMFS_FILE_MAX shared, or NULL */
	size_t size;
	size_t touched;              /* bytes of data ever written or mapped */
	int views;                   /* mappings of it not unmapped yet */
	int lost_view;               /* a view unmapped in part: never reuse */
	int opens;
	int lock_ex;                 /* descriptor slot holding LOCK_EX, -1 */
	int lock_sh;                 /* how many hold LOCK_SH */
	struct timespec atime, mtime, ctime;
};

typedef struct {
	mnode *n; /* NULL: a free slot */
	unsigned long gen; /* opens of this slot: a waiter knows its own */
	int flags;
	int lock; /* 0, LOCK_SH or LOCK_EX, held by this descriptor */
	off_t pos;
} mfd;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t unlocked = PTHREAD_COND_INITIALIZER;
static le__os below;
static int installed;
static mnode *root;
static mfd fds[MEMFS_FDS];
static ino_t next_ino = 2;
static mode_t mask;
static uid_t uid;
static gid_t gid;
static unsigned long calls;

#define ROOT_LEN (sizeof MEMFS_ROOT - 1)

static int fail(int e)
{
	errno = e;
	return -1;
}

static void now(struct timespec *t)
{
	clock_gettime(CLOCK_REALTIME, t);
}

/* Put n at the end of dir's list, which getdents reads in cookie order:
 * a reader's position is the last cookie it saw, so removing an entry
 * never makes it skip another, and a new one comes after it. */
static void link_in(mnode *dir, mnode *n)
{
	mnode **pp = &dir->kids;
	while (*pp)
		pp = &(*pp)->next;
	*pp = n;
	n->next = NULL;
	n->parent = dir;
	n->cookie = dir->next_cookie++;
	dir->mtime = n->mtime;
	if (S_ISDIR(n->mode))
		dir->nlink++;
}

static mnode *node_new(mnode *dir, const char *name, mode_t mode)
{
	mnode *n = calloc(1, sizeof *n);
	if (!n)
		return NULL;
	snprintf(n->name, sizeof n->name, "%s", name);
	n->mode = mode;
	n->nlink = S_ISDIR(mode) ? 2 : 1;
	n->ino = next_ino++;
	n->lock_ex = -1;
	now(&n->mtime);
	n->atime = n->ctime = n->mtime;
	n->next_cookie = 3; /* 1 ".", 2 ".." */
	if (dir)
		link_in(dir, n);
	return n;
}

/*
 * Spent storage, zeroed, for the next file: giving a region back costs a
 * munmap that zaps its pages and, in a process with threads, shoots down
 * their TLBs; a new one costs a page fault for every page touched.  Both
 * would be most of a fuzz input's time.  Up to POOL regions are kept.
 */
#define POOL 32
static unsigned char *pool[POOL];
static int pooled;

static void node_free(mnode *n)
{
	/* A region a view was cut out of may still be seen through what is
	 * left of it: let go, never reused (the kernel keeps the pages for
	 * that view). */
	if (n->data && !n->lost_view && pooled < POOL) {
		if (n->touched <= ((size_t)1 << 20)) {
			memset(n->data, 0, n->touched);
		} else if (madvise(n->data, (n->touched + 4095) & ~(size_t)4095,
		                   MADV_REMOVE) != 0) {
			memset(n->data, 0, n->touched);
		}
		pool[pooled++] = n->data;
	} else if (n->data) {
		munmap(n->data, MEMFS_FILE_MAX);
	}
	free(n);
}

static void touch(mnode *n, size_t end)
{
	if (end > n->touched)
		n->touched = end;
}

/* A file lives while it has a name, an open descriptor or a mapping, as
 * on Linux (a mapping keeps a deleted file). */
static void maybe_free(mnode *n)
{
	if (n != root && n->nlink == 0 && n->opens == 0 && n->views == 0)
		node_free(n);
}

/* Take n out of its directory; freed now if nobody has it open. */
static void node_detach(mnode *n)
{
	mnode **pp = &n->parent->kids;
	while (*pp != n)
		pp = &(*pp)->next;
	*pp = n->next;
	if (S_ISDIR(n->mode))
		n->parent->nlink--;
	now(&n->parent->mtime);
	n->parent = NULL;
	n->next = NULL;
	n->nlink = 0;
	maybe_free(n);
}

static mnode *find(const mnode *dir, const char *name)
{
	for (mnode *k = dir->kids; k; k = k->next)
		if (!strcmp(k->name, name))
			return k;
	return NULL;
}

static mfd *slot(int fd)
{
	if (fd < MEMFS_FD0 || fd >= MEMFS_FD0 + MEMFS_FDS)
		return NULL;
	mfd *f = &fds[fd - MEMFS_FD0];
	return f->n ? f : NULL;
}

static int ours_fd(int fd)
{
	return fd >= MEMFS_FD0 && fd < MEMFS_FD0 + MEMFS_FDS;
}

static int ours_path(int dirfd, const char *path)
{
	if (path[0] == '/')
		return !strncmp(path, MEMFS_ROOT, ROOT_LEN) &&
		       (path[ROOT_LEN] == '\0' || path[ROOT_LEN] == '/');
	return ours_fd(dirfd);
}

/*
 * Walk dirfd/path to its last component: *dir is the directory it is in
 * and last its name ("" when the path names a directory itself: the
 * root, ".", ".."), *slash whether the path ended in '/'.  @return 0 or
 * an errno value.
 */
static int walk(int dirfd, const char *path, mnode **dir, char *last,
                int *slash)
{
	mnode *d;
	const char *p = path;

	if (!*path)
		return ENOENT;
	if (path[0] == '/') {
		d = root;
		p += ROOT_LEN;
	} else {
		mfd *f = slot(dirfd);
		if (!f)
			return EBADF;
		if (!S_ISDIR(f->n->mode))
			return ENOTDIR;
		if (!f->n->parent && f->n != root)
			return ENOENT; /* removed */
		d = f->n;
	}
	*slash = 0;
	last[0] = '\0';
	for (;;) {
		while (*p == '/')
			p++;
		if (!*p)
			return 0;
		const char *e = strchr(p, '/');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (n > NAME_MAX)
			return ENAMETOOLONG;
		char c[NAME_MAX + 1];
		memcpy(c, p, n);
		c[n] = '\0';
		p += n;
		int trailing = 0;
		while (*p == '/')
			p++, trailing = 1;
		int end = *p == '\0';
		*slash = end && trailing;
		if (!strcmp(c, ".") || !strcmp(c, "..")) {
			if (c[1] == '.' && d->parent)
				d = d->parent;
			if (end) {
				last[0] = '\0';
				*dir = d;
				return 0;
			}
			continue;
		}
		if (end) {
			memcpy(last, c, n + 1);
			*dir = d;
			return 0;
		}
		mnode *k = find(d, c);
		if (!k)
			return ENOENT;
		if (!S_ISDIR(k->mode))
			return ENOTDIR;
		d = k;
	}
}

/* The node dirfd/path names, or NULL and errno in *err. */
static mnode *lookup(int dirfd, const char *path, int *err)
{
	mnode *d;
	char last[NAME_MAX + 1];
	int slash;
	int e = walk(dirfd, path, &d, last, &slash);
	if (e) {
		*err = e;
		return NULL;
	}
	mnode *n = last[0] ? find(d, last) : d;
	if (!n)
		*err = ENOENT;
	else if (slash && !S_ISDIR(n->mode)) {
		*err = ENOTDIR;
		n = NULL;
	}
	return n;
}

/* The file's bytes, made on first need.  @return 0 or an errno value. */
static int backing(mnode *n)
{
	if (n->data)
		return 0;
	if (pooled) {
		n->data = pool[--pooled];
		return 0;
	}
	void *m = mmap(NULL, MEMFS_FILE_MAX, PROT_READ | PROT_WRITE,
	               MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return ENOSPC;
	n->data = m;
	return 0;
}

/* Set the size; bytes past a shrunk end read as zeros if it grows back. */
static int resize(mnode *n, uint64_t len)
{
	if (len > MEMFS_FILE_MAX)
		return EFBIG;
	if (len < n->size) {
		size_t from = (size_t)len, to = n->size;
		size_t pg = ((from + 4095) & ~(size_t)4095);
		if (to - from > 65536 && pg < to) {
			memset(n->data + from, 0, pg - from);
			/* the shared pages themselves go: MADV_REMOVE */
			if (madvise(n->data + pg, (to - pg + 4095) &
			            ~(size_t)4095, MADV_REMOVE) != 0)
				memset(n->data + pg, 0, to - pg);
		} else {
			memset(n->data + from, 0, to - from);
		}
	} else if (len > n->size) {
		int e = backing(n);
		if (e)
			return e;
	}
	n->size = (size_t)len;
	touch(n, n->size);
	now(&n->mtime);
	n->ctime = n->mtime;
	return 0;
}

static void fill_stat(const mnode *n, struct stat *st)
{
	memset(st, 0, sizeof *st);
	st->st_dev = 0x6d656d;
	st->st_ino = n->ino;
	st->st_mode = n->mode;
	st->st_nlink = n->nlink;
	st->st_uid = uid;
	st->st_gid = gid;
	st->st_size = S_ISDIR(n->mode) ? 4096 : (off_t)n->size;
	st->st_blksize = 4096;
	st->st_blocks = (blkcnt_t)((st->st_size + 511) / 512);
	st->st_atim = n->atime;
	st->st_mtim = n->mtime;
	st->st_ctim = n->ctime;
}

/* ---- the table ---- */

static int m_openat(int dirfd, const char *path, int flags, mode_t mode)
{
	if (!ours_path(dirfd, path))
		return below.openat(dirfd, path, flags, mode);
	pthread_mutex_lock(&mu);
	calls++;
	mnode *d, *n;
	char last[NAME_MAX + 1];
	int slash, e = walk(dirfd, path, &d, last, &slash);
	int acc = flags & O_ACCMODE;
	if (e)
		goto out;
	n = last[0] ? find(d, last) : d;
	if (n && (flags & O_CREAT) && (flags & O_EXCL)) {
		e = EEXIST;
		goto out;
	}
	if (!n) {
		if (!(flags & O_CREAT)) {
			e = ENOENT;
			goto out;
		}
		if (slash || (flags & O_DIRECTORY)) {
			e = slash ? EISDIR : EINVAL;
			goto out;
		}
		n = node_new(d, last, S_IFREG | (mode & 07777 & ~mask));
		if (!n) {
			e = ENOMEM;
			goto out;
		}
	}
	if (((flags & O_DIRECTORY) || slash) && !S_ISDIR(n->mode)) {
		e = ENOTDIR;
		goto out;
	}
	if (S_ISDIR(n->mode) &&
	    (acc != O_RDONLY || (flags & (O_TRUNC | O_CREAT)))) {
		e = EISDIR;
		goto out;
	}
	int i = 0;
	while (i < MEMFS_FDS && fds[i].n)
		i++;
	if (i == MEMFS_FDS) {
		e = EMFILE;
		goto out;
	}
	if ((flags & O_TRUNC) && n->size) /* Linux: even with O_RDONLY */
		resize(n, 0);
	fds[i] = (mfd){.n = n,
	               .gen = fds[i].gen + 1,
	               .flags = flags & ~(O_CREAT | O_EXCL | O_TRUNC |
	                                  O_NOFOLLOW | O_CLOEXEC)};
	n->opens++;
	pthread_mutex_unlock(&mu);
	return MEMFS_FD0 + i;
out:
	pthread_mutex_unlock(&mu);
	return fail(e);
}

static int m_open(const char *path, int flags, mode_t mode)
{
	return m_openat(AT_FDCWD, path, flags, mode);
}

/* Drop the flock() that slot i holds on n (mu held). */
static void unlock_slot(mfd *f)
{
	if (f->lock == LOCK_EX)
		f->n->lock_ex = -1;
	else if (f->lock == LOCK_SH)
		f->n->lock_sh--;
	f->lock = 0;
	pthread_cond_broadcast(&unlocked); /* a waiter's slot may be closing */
}

static void close_slot(mfd *f)
{
	mnode *n = f->n;
	unlock_slot(f);
	f->n = NULL;
	n->opens--;
	maybe_free(n);
}

static int m_close(int fd)
{
	if (!ours_fd(fd))
		return below.close(fd);
	pthread_mutex_lock(&mu);
	calls++;
	mfd *f = slot(fd);
	if (f)
		close_slot(f);
	pthread_mutex_unlock(&mu);
	return f ? 0 : fail(EBADF);
}

static ssize_t m_pwrite(int fd, const void *buf, size_t len, off_t off)
{
	if (!ours_fd(fd))
		return below.pwrite(fd, buf, len, off);
	pthread_mutex_lock(&mu);
	calls++;
	mfd *f = slot(fd);
	int e = 0;
	ssize_t n = 0;
	if (!f || (f->flags & O_ACCMODE) == O_RDONLY)
		e = EBADF;
	else if (S_ISDIR(f->n->mode))
		e = EISDIR;
	else if (off < 0)
		e = EINVAL;
	else if ((uint64_t)off >= MEMFS_FILE_MAX && len)
		e = EFBIG;
	else if (len && !(e = backing(f->n))) {
		/* as the kernel does at a file size limit: short, then EFBIG */
		size_t room = MEMFS_FILE_MAX - (size_t)off;
		n = (ssize_t)(len < room ? len : room);
		memcpy(f->n->data + off, buf, (size_t)n);
		if ((size_t)off + (size_t)n > f->n->size)
			f->n->size = (size_t)off + (size_t)n;
		touch(f->n, f->n->size);
		now(&f->n->mtime);
		f->n->ctime = f->n->mtime;
	}
	pthread_mutex_unlock(&mu);
	return e ? fail(e) : n;
}

static ssize_t m_pread(int fd, void *buf, size_t len, off_t off)
{
	if (!ours_fd(fd))
		return below.pread(fd, buf, len, off);
	pthread_mutex_lock(&mu);
	calls++;
	mfd *f = slot(fd);
	int e = 0;
	ssize_t n = 0;
	if (!f || (f->flags & O_ACCMODE) == O_WRONLY)
		e = EBADF;
	else if (S_ISDIR(f->n->mode))
		e = EISDIR;
	else if (off < 0)
		e = EINVAL;
	else if ((uint64_t)off < f->n->size) {
		size_t have = f->n->size - (size_t)off;
		n = (ssize_t)(len < have ? len : have);
		memcpy(buf, f->n->data + off, (size_t)n);
	}
	pthread_mutex_unlock(&mu);
	return e ? fail(e) : n;
}

static int m_sync(int fd)
{
	if (!ours_fd(fd))
		return below.fsync(fd);
	pthread_mutex_lock(&mu);
	calls++;
	int ok = slot(fd) != NULL;
	pthread_mutex_unlock(&mu);
	return ok ? 0 : fail(EBADF);
}

static int m_datasync(int fd)
{
	if (!ours_fd(fd))
		return below.fdatasync(fd);
	return m_sync(fd);
}

static int m_sync_range(int fd, off_t off, off_t len, unsigned flags)
{
	if (!ours_fd(fd))
		return below.sync_range ? below.sync_range(fd, off, len, flags)
		                        : 0;
	return m_sync(fd);
}

static int m_ftruncate(int fd, off_t len)
{
	if (!ours_fd(fd))
		return below.ftruncate(fd, len);
	pthread_mutex_lock(&mu);
	calls++;
	mfd *f = slot(fd);
	int e = !f                                      ? EBADF
	        : len < 0 || S_ISDIR(f->n->mode) ||
	                  (f->flags & O_ACCMODE) == O_RDONLY
	                ? EINVAL
	                : resize(f->n, (uint64_t)len);
	pthread_mutex_unlock(&mu);
	return e ? fail(e) : 0;
}

static int m_fallocate(int fd, int mode, off_t off, off_t len)
{
	if (!ours_fd(fd))
		return below.fallocate(fd, mode, off, len);
	pthread_mutex_lock(&mu);
	calls++;
	mfd *f = slot(fd);
	int e = 0;
	if (!f || (f->flags & O_ACCMODE) == O_RDONLY)
		e = EBADF;
	else if (S_ISDIR(f->n->mode))
		e = ENODEV;
	else if (off < 0 || len <= 0)
		e = EINVAL;
	else if (mode & ~FALLOC_FL_KEEP_SIZE)
		e = EOPNOTSUPP;
	else if ((uint64_t)off + (uint64_t)len > MEMFS_FILE_MAX)
		e = EFBIG;
	else if (!(mode & FALLOC_FL_KEEP_SIZE) &&
	         (uint64_t)off + (uint64_t)len > f->n->size)
		e = resize(f->n, (uint64_t)off + (uint64_t)len);
	pthread_mutex_unlock(&mu);
	return e ? fail(e) : 0;
}

static int m_unlink(const char *path)
{
	if (!ours_path(AT_FDCWD, path))
		return below.unlink(path);
	pthread_mutex_lock(&mu);
	calls++;
	int e = 0;
	mnode *n = lookup(AT_FDCWD, path, &e);
	if (n && S_ISDIR(n->mode))
		e = EISDIR;
	else if (n)
		node_detach(n);
	pthread_mutex_unlock(&mu);
	return e ? fail(e) : 0;
}

static int m_mkdir(const char *path, mode_t mode)
{
	if (!ours_path(AT_FDCWD, path))
		return below.mkdir(path, mode);
	pthread_mutex_lock(&mu);
	calls++;
	mnode *d;
	char last[NAME_MAX + 1];
	int slash, e = walk(AT_FDCWD, path, &d, last, &slash);
	if (!e && (!last[0] || find(d, last)))
		e = EEXIST;
	if (!e && !node_new(d, last, S_IFDIR | (mode & 07777 & ~mask)))
		e = ENOMEM;
	pthread_mutex_unlock(&mu);
	return e ? fail(e) : 0;
}

static int m_rename(const char *from, const char *to)
{
	int a = ours_path(AT_FDCWD, from), b = ours_path(AT_FDCWD, to);
	if (!a && !b)
		return below.rename(from, to);
	if (a != b)
		return fail(EXDEV);
	pthread_mutex_lock(&mu);
	calls++;
	mnode *sd, *dd;
	char sl[NAME_MAX + 1], dl[NAME_MAX + 1];
	int s1, s2, e = walk(AT_FDCWD, from, &sd, sl, &s1);
	if (!e)
		e = walk(AT_FDCWD, to, &dd, dl, &s2);
	mnode *n = !e && sl[0] ? find(sd, sl) : NULL;
	if (!e && (!sl[0] || !dl[0]))
		e = EBUSY; /* the root, ".", ".." */
	else if (!e && !n)
		e = ENOENT;
	mnode *old = e ? NULL : find(dd, dl);
	if (!e && !S_ISDIR(n->mode) && (s1 || s2))
		e = ENOTDIR; /* "file/" names a directory that is not there */
	if (e)
		goto out;
	for (mnode *p = dd; p; p = p->parent)
		if (p == n) {
			e = EINVAL; /* into itself */
			goto out;
		}
	if (old == n)
		goto out;
	if (old) {
		if (S_ISDIR(old->mode) && !S_ISDIR(n->mode))
			e = EISDIR;
		else if (!S_ISDIR(old->mode) && S_ISDIR(n->mode))
			e = ENOTDIR;
		else if (S_ISDIR(old->mode) && old->kids)
			e = ENOTEMPTY;
		if (e)
			goto out;
		node_detach(old);
	}
	int opens = n->opens;
	nlink_t links = n->nlink;
	n->opens++; /* not freed while it moves */
	node_detach(n);
	n->opens = opens;
	n->nlink = links;
	snprintf(n->name, sizeof n->name, "%s", dl);
	link_in(dd, n);
	now(&n->ctime);
	dd->mtime = n->ctime;
out:
	pthread_mutex_unlock(&mu);
	return e ? fail(e) : 0;
}

static int m_fstat(int fd, struct stat *st)
{
	if (!ours_fd(fd))
		return below.fstat(fd, st);
	pthread_mutex_lock(&mu);
	calls++;
	mfd *f = slot(fd);
	if (f)
		fill_stat(f->n, st);
	pthread_mutex_unlock(&mu);
	return f ? 0 : fail(EBADF);
}

static int m_fstatat(int dirfd, const char *path, struct stat *st, int flags)
{
	if (!ours_path(dirfd, path))
		return below.fstatat(dirfd, path, st, flags);
	pthread_mutex_lock(&mu);
	calls++;
	int e = 0;
	mnode *n = lookup(dirfd, path, &e);
	if (n)
		fill_stat(n, st);
	pthread_mutex_unlock(&mu);
	return n ? 0 : fail(e);
}

static int m_fcntl(int fd, int cmd, int arg)
{
	if (!ours_fd(fd))
		return below.fcntl(fd, cmd, arg);
	pthread_mutex_lock(&mu);
	calls++;
	mfd *f = slot(fd);
	int r = -1, e = 0;
	const int settable = O_NONBLOCK | O_APPEND;
	if (!f)
		e = EBADF;
	else if (cmd == F_GETFL)
		r = f->flags;
	else if (cmd == F_SETFL)
		r = 0, f->flags = (f->flags & ~settable) | (arg & settable);
	else if (cmd == F_GETFD)
		r = FD_CLOEXEC;
	else if (cmd == F_SETFD)
		r = 0;
	else
		e = EINVAL;
	pthread_mutex_unlock(&mu);
	return e ? fail(e) : r;
}

static off_t m_lseek(int fd, off_t off, int whence)
{
	if (!ours_fd(fd))
		return below.lseek(fd, off, whence);
	pthread_mutex_lock(&mu);
	calls++;
	mfd *f = slot(fd);
	off_t r = -1;
	int e = 0;
	off_t size = f ? (off_t)f->n->size : 0;
	if (!f)
		e = EBADF;
	else if (whence == SEEK_SET)
		r = off;
	else if (whence == SEEK_CUR)
		r = f->pos + off;
	else if (whence == SEEK_END)
		r = size + off;
	else if (whence == SEEK_DATA || whence == SEEK_HOLE) {
		if (off < 0)
			e = EINVAL;
		else if (off >= size)
			e = ENXIO;
		else
			r = whence == SEEK_DATA ? off : size;
	} else
		e = EINVAL;
	if (!e && r < 0)
		e = EINVAL;
	if (!e)
		f->pos = r;
	pthread_mutex_unlock(&mu);
	return e ? fail(e) : r;
}

static int m_flock(int fd, int op)
{
	if (!ours_fd(fd))
		return below.flock(fd, op);
	pthread_mutex_lock(&mu);
	calls++;
	mfd *f = slot(fd);
	int e = 0, want = op & ~LOCK_NB, i = f ? (int)(f - fds) : -1;
	unsigned long gen = f ? f->gen : 0;
	if (!f)
		e = EBADF;
	else if (want == LOCK_UN)
		unlock_slot(f);
	else if (want != LOCK_SH && want != LOCK_EX)
		e = EINVAL;
	else if (f->lock != want) {
		/* a conversion is not atomic, as flock(2) says */
		unlock_slot(f);
		for (;;) {
			mnode *n = f->n;
			int busy = n->lock_ex >= 0 ||
			           (want == LOCK_EX && n->lock_sh > 0);
			if (!busy)
				break;
			if (op & LOCK_NB) {
				e = EWOULDBLOCK;
				break;
			}
			pthread_cond_wait(&unlocked, &mu);
			if (!fds[i].n || fds[i].gen != gen) {
				e = EBADF; /* closed meanwhile */
				break;
			}
		}
		if (!e) {
			f->lock = want;
			if (want == LOCK_EX)
				f->n->lock_ex = i;
			else
				f->n->lock_sh++;
		}
	}
	pthread_mutex_unlock(&mu);
	return e ? fail(e) : 0;
}

/* The live views of memfs files, to know when a file's last one goes. */
#define VIEWS 64
static struct view {
	void *addr;
	size_t len;
	mnode *n;
} views[VIEWS];

static void add_view(void *addr, size_t len, mnode *n)
{
	int i = 0;
	while (i < VIEWS && views[i].n)
		i++;
	if (i == VIEWS) {
		n->lost_view = 1; /* not followed: never reused */
		return;
	}
	views[i] = (struct view){addr, len, n};
	n->views++;
}

/* [addr, addr + len) is no longer mapped (munmap, or a MAP_FIXED
 * mapping over it): the views there are gone (mu held). */
static void forget_views(void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr, e = a + len;
	for (int i = 0; i < VIEWS; i++) {
		struct view *v = &views[i];
		uintptr_t va = (uintptr_t)v->addr, ve = va + v->len;
		if (!v->n || e <= va || a >= ve)
			continue;
		mnode *n = v->n;
		if (a > va || e < ve)
			n->lost_view = 1; /* part of it is still mapped */
		v->n = NULL;
		n->views--;
		maybe_free(n);
	}
}

static int m_munmap(void *addr, size_t len)
{
	pthread_mutex_lock(&mu);
	int rc = below.munmap(addr, len), err = errno;
	if (rc == 0)
		forget_views(addr, len);
	pthread_mutex_unlock(&mu);
	errno = err;
	return rc;
}

static void *m_mmap(void *addr, size_t len, int prot, int flags, int fd,
                    off_t off)
{
	if ((flags & MAP_ANONYMOUS) || !ours_fd(fd))
		return below.mmap(addr, len, prot, flags, fd, off);
	pthread_mutex_lock(&mu);
	calls++;
	mfd *f = slot(fd);
	int e = 0;
	void *m = MAP_FAILED;
	if (!f)
		e = EBADF;
	else if (S_ISDIR(f->n->mode))
		e = ENODEV;
	else if (!(flags & MAP_SHARED))
		e = EINVAL; /* nothing here maps a file private */
	else if ((prot & PROT_WRITE) && (f->flags & O_ACCMODE) != O_RDWR)
		e = EACCES;
	else if (!len || off < 0 || (off & 4095) ||
	         (uint64_t)off + len > MEMFS_FILE_MAX)
		e = EINVAL;
	else if (!(e = backing(f->n))) {
		/* Another view of the same shared pages (old size 0), at
		 * addr if MAP_FIXED: what mmap of a file gives. */
		m = mremap(f->n->data + off, 0, len,
		           MREMAP_MAYMOVE | ((flags & MAP_FIXED) ? MREMAP_FIXED
		                                                : 0),
		           addr);
		if (m != MAP_FAILED && (flags & MAP_FIXED))
			forget_views(m, len); /* what was there is replaced */
		if (m == MAP_FAILED) {
			e = errno;
		} else if (prot != (PROT_READ | PROT_WRITE) &&
		           mprotect(m, len, prot) != 0) {
			e = errno;
			munmap(m, len);
			m = MAP_FAILED;
		} else {
			touch(f->n, (size_t)off + len); /* stores may land */
			add_view(m, len, f->n);
		}
	}
	pthread_mutex_unlock(&mu);
	if (e)
		errno = e;
	return m;
}

/* getdents64's record, as os.c reads it. */
struct dirent64_rec {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

static ssize_t m_getdents(int fd, void *buf, size_t len)
{
	if (!ours_fd(fd))
		return below.getdents(fd, buf, len);
	pthread_mutex_lock(&mu);
	calls++;
	mfd *f = slot(fd);
	int e = 0;
	size_t at = 0;
	if (!f)
		e = EBADF;
	else if (!S_ISDIR(f->n->mode))
		e = ENOTDIR;
	else {
		/* The position is the cookie of the last entry returned (1
		 * ".", 2 "..", then the list's, rising): the next is the first
		 * above it, however the list changed meanwhile. */
		mnode *k = f->n->kids;
		while (k && k->cookie <= (unsigned long)f->pos)
			k = k->next;
		for (;;) {
			const mnode *n = f->pos < 1   ? f->n
			                 : f->pos < 2 ? (f->n->parent ? f->n->parent
			                                              : f->n)
			                              : k;
			if (!n)
				break;
			const char *nm = f->pos < 1   ? "."
			                 : f->pos < 2 ? ".."
			                              : n->name;
			unsigned long c = f->pos < 1 ? 1 : f->pos < 2 ? 2 : k->cookie;
			size_t rl = (offsetof(struct dirent64_rec, d_name) +
			             strlen(nm) + 1 + 7) & ~(size_t)7;
			if (at + rl > len) {
				if (at == 0)
					e = EINVAL;
				break;
			}
			struct dirent64_rec *d =
			        (struct dirent64_rec *)(void *)((char *)buf +
			                                        at);
			memset(d, 0, rl);
			d->d_ino = n->ino;
			d->d_off = (int64_t)c;
			d->d_reclen = (unsigned short)rl;
			d->d_type = S_ISDIR(n->mode) ? DT_DIR : DT_REG;
			strcpy(d->d_name, nm);
			at += rl;
			if (c > 2)
				k = k->next;
			f->pos = (off_t)c;
		}
	}
	pthread_mutex_unlock(&mu);
	return e ? fail(e) : (ssize_t)at;
}

static int m_futimens(int fd, const struct timespec ts[2])
{
	if (!ours_fd(fd))
		return below.futimens(fd, ts);
	pthread_mutex_lock(&mu);
	calls++;
	mfd *f = slot(fd);
	if (f) {
		struct timespec t[2], n;
		now(&n);
		for (int i = 0; i < 2; i++)
			t[i] = !ts || ts[i].tv_nsec == UTIME_NOW ? n : ts[i];
		if (!ts || ts[0].tv_nsec != UTIME_OMIT)
			f->n->atime = t[0];
		if (!ts || ts[1].tv_nsec != UTIME_OMIT)
			f->n->mtime = t[1];
		f->n->ctime = n;
	}
	pthread_mutex_unlock(&mu);
	return f ? 0 : fail(EBADF);
}

/* ---- set-up ---- */

static void free_tree(mnode *d)
{
	mnode *k = d->kids;
	while (k) {
		mnode *next = k->next;
		if (S_ISDIR(k->mode))
			free_tree(k);
		k->parent = NULL;
		k->nlink = 0;
		maybe_free(k);
		k = next;
	}
	d->kids = NULL;
	d->nlink = 2;
}

int memfs_clear(void)
{
	pthread_mutex_lock(&mu);
	int open = 0;
	for (int i = 0; i < MEMFS_FDS; i++)
		if (fds[i].n) {
			open++;
			close_slot(&fds[i]);
		}
	if (root)
		free_tree(root);
	pthread_mutex_unlock(&mu);
	return open;
}

int memfs_install(void)
{
	if (installed)
		return -1;
	below = *le__os_current();
	mask = umask(0);
	umask(mask);
	uid = getuid();
	gid = getgid();
	root = node_new(NULL, "", S_IFDIR | 0755);
	if (!root)
		return -1;
	le__os t = below;
	t.open = m_open;
	t.openat = m_openat;
	t.close = m_close;
	t.pwrite = m_pwrite;
	t.pread = m_pread;
	t.fdatasync = m_datasync;
	t.fsync = m_sync;
	t.ftruncate = m_ftruncate;
	t.unlink = m_unlink;
	t.mkdir = m_mkdir;
	t.fallocate = m_fallocate;
	t.sync_range = m_sync_range;
	t.rename = m_rename;
	t.fstat = m_fstat;
	t.fstatat = m_fstatat;
	t.fcntl = m_fcntl;
	t.lseek = m_lseek;
	t.flock = m_flock;
	t.mmap = m_mmap;
	t.munmap = m_munmap;
	t.getdents = m_getdents;
	t.futimens = m_futimens;
	/* madvise acts on the views, which are real mappings */
	le__os_install(&t);
	installed = 1;
	calls = 0;
	return 0;
}

int memfs_uninstall(void)
{
	if (!installed)
		return 0;
	le__os_install(&below);
	int open = memfs_clear();
	pthread_mutex_lock(&mu);
	for (int i = 0; i < VIEWS; i++) /* still mapped: theirs to keep */
		if (views[i].n) {
			mnode *n = views[i].n;
			views[i].n = NULL;
			n->lost_view = 1;
			n->views--;
			maybe_free(n);
		}
	pthread_mutex_unlock(&mu);
	node_free(root);
	root = NULL;
	while (pooled)
		munmap(pool[--pooled], MEMFS_FILE_MAX);
	installed = 0;
	return open;
}

int memfs_open_fds(void)
{
	pthread_mutex_lock(&mu);
	int open = 0;
	for (int i = 0; i < MEMFS_FDS; i++)
		open += fds[i].n != NULL;
	pthread_mutex_unlock(&mu);
	return open;
}

unsigned long memfs_calls(void)
{
	pthread_mutex_lock(&mu);
	unsigned long c = calls;
	pthread_mutex_unlock(&mu);
	return c;
}

int memfs_put(const char *path, const void *data, size_t len)
{
	char p[4096];
	if (!ours_path(AT_FDCWD, path) || strlen(path) >= sizeof p)
		return -EINVAL;
	snprintf(p, sizeof p, "%s", path);
	for (char *s = p + ROOT_LEN + 1; (s = strchr(s, '/')); s++) {
		*s = '\0';
		if (m_mkdir(p, 0750) < 0 && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	int fd = m_openat(AT_FDCWD, path, O_WRONLY | O_CREAT | O_TRUNC, 0640);
	if (fd < 0)
		return -errno;
	ssize_t n = len ? m_pwrite(fd, data, len, 0) : 0;
	int e = n < 0 ? errno : (size_t)n < len ? EFBIG : 0;
	m_close(fd);
	return -e;
}

ssize_t memfs_get(const char *path, void **data)
{
	struct stat st;
	*data = NULL;
	int fd = m_openat(AT_FDCWD, path, O_RDONLY, 0);
	if (fd < 0)
		return -errno;
	m_fstat(fd, &st);
	void *b = malloc((size_t)st.st_size + 1);
	ssize_t n = b ? m_pread(fd, b, (size_t)st.st_size, 0) : -1;
	int e = !b ? ENOMEM : n < 0 ? errno : 0;
	m_close(fd);
	if (e) {
		free(b);
		return -e;
	}
	*data = b;
	return n;
}
