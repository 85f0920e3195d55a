/*
 * os.h -- every file, directory, mapping, lock and sync call the engine and
 * its readers make on a log directory goes through this one table, as
 * SQLite's aSyscall[] does, so tests can inject ENOSPC, EIO, short writes
 * and EINTR, simulate a power cut, or put the whole directory in memory
 * (tests/memfs.c, where the fuzz targets that open an engine run), by
 * swapping entries.  The live page (statpage.c) and the index builder
 * (index.c) too: a test that fails every write fails theirs.  Outside it:
 * a user's own descriptors (stream_fd), the stream sink's file, sockets,
 * memfd and inotify descriptors, /proc and /sys.
 *
 * The wrappers return -errno on failure (never set errno for the caller) and
 * retry EINTR themselves, so the engine's code reads as plain sequences.
 */
#ifndef LE_OS_H
#define LE_OS_H

#include <stddef.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

typedef struct le__os {
	int (*open)(const char *path, int flags, mode_t mode);
	/* Every file and directory inside the log directory is opened with
	 * this (le__open_in), one path component at a time. */
	int (*openat)(int dirfd, const char *name, int flags, mode_t mode);
	int (*close)(int fd);
	ssize_t (*pwrite)(int fd, const void *buf, size_t len, off_t off);
	ssize_t (*pread)(int fd, void *buf, size_t len, off_t off);
	int (*fdatasync)(int fd);
	int (*fsync)(int fd);
	int (*ftruncate)(int fd, off_t len);
	int (*unlink)(const char *path);
	int (*mkdir)(const char *path, mode_t mode);
	int (*fallocate)(int fd, int mode, off_t off, off_t len);
	/* sync_file_range: NULL in a test's table means none */
	int (*sync_range)(int fd, off_t off, off_t len, unsigned flags);
	int (*rename)(const char *from, const char *to);
	int (*madvise)(void *addr, size_t len, int advice);
	int (*fstat)(int fd, struct stat *st);
	/* stat and lstat too: fstatat(AT_FDCWD, path, st, 0 or
	 * AT_SYMLINK_NOFOLLOW) */
	int (*fstatat)(int dirfd, const char *name, struct stat *st, int flags);
	/* F_GETFL and F_SETFL only */
	int (*fcntl)(int fd, int cmd, int arg);
	off_t (*lseek)(int fd, off_t off, int whence);
	int (*flock)(int fd, int op);
	/* The engine's shared file mappings (QUEUE, SITES, BTRING) and the
	 * anonymous reservation they are placed in; munmap of either. */
	void *(*mmap)(void *addr, size_t len, int prot, int flags, int fd,
	              off_t off);
	int (*munmap)(void *addr, size_t len);
	/* getdents64(2): struct linux_dirent64 records (le__dir_each) */
	ssize_t (*getdents)(int fd, void *buf, size_t len);
	int (*futimens)(int fd, const struct timespec ts[2]);
} le__os;

/* The real calls, for tests that wrap them. */
extern const le__os le__os_real;
/* Tests: the table in use (a copy of t; NULL: the real calls again), and
 * what it holds now.  Installed before le_open and restored after
 * le_close; it is not changed while an engine runs.  The table itself is
 * private to os.c, so no program that links the library can reach it. */
void le__os_install(const le__os *t);
const le__os *le__os_current(void);

/* Wrappers: 0 / a byte count on success, -errno on failure. */
int le__open(const char *path, int flags, mode_t mode);

/* How many trailing components of a path lie inside the log directory,
 * the part of the path the engine made and nobody may redirect: */
#define LE_IN_ROOT 0  /* the log directory itself (a symlink is allowed:
                         the user chose that path) */
#define LE_IN_DIR 1   /* DIR/NAME, and DIR/shard-NNN as a directory */
#define LE_IN_SHARD 2 /* DIR/shard-NNN/NAME */
/*
 * Open path as le__open does, but refuse to be redirected: its last depth
 * components are opened one at a time, each relative to its parent's
 * descriptor, with O_NOFOLLOW, and the last with O_NONBLOCK (a FIFO opens
 * at once instead of blocking until a writer comes; the flag is cleared
 * again unless flags asked for it).  The result must then be a regular
 * file (a directory with O_DIRECTORY in flags), and a file opened for
 * writing must have no other hard link.  Anything else -- a symbolic
 * link, a FIFO, a socket, a device, a hard link into another tree -- is
 * closed and refused: LE_EUNSAFE, and le_errmsg() names the path inside
 * the log directory and what it is ("shard-000/QUEUE is a symbolic link;
 * refusing to follow it").  @return a descriptor, or -errno / LE_EUNSAFE.
 */
int le__open_in(const char *path, int depth, int flags, mode_t mode);
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
/* The same for a directory inside the log directory (see le__open_in). */
int le__fsync_dir_in(const char *dir, int depth);
int le__ftruncate(int fd, uint64_t len);
int le__unlink(const char *path);
int le__rename(const char *from, const char *to);
int le__mkdir(const char *path, mode_t mode);
int le__fstat(int fd, struct stat *st);
/* futimens(2): 0 or -errno. */
int le__futimens(int fd, const struct timespec ts[2]);
/* stat(2) and lstat(2) of a path: 0 or -errno. */
int le__stat(const char *path, struct stat *st);
int le__lstat(const char *path, struct stat *st);
/* flock(2), retrying EINTR: 0 or -errno (-EWOULDBLOCK: held, with
 * LOCK_NB). */
int le__flock(int fd, int op);
/* lseek(2): the new offset, or -errno (-ENXIO: no data or hole there). */
int64_t le__lseek(int fd, int64_t off, int whence);
/* mmap(2) and munmap(2) as the calls are: MAP_FAILED / -1 with errno set
 * (the one exception to -errno here: callers test MAP_FAILED). */
void *le__mmap(void *addr, size_t len, int prot, int flags, int fd,
               off_t off);
int le__munmap(void *addr, size_t len);
/* madvise(2) of a mapping: 0 or -errno.  Advice only; callers go on. */
int le__madvise(void *addr, size_t len, int advice);
/*
 * Call each(arg, name, type) for every entry of the open directory dirfd
 * but "." and "..", in the order the file system gives (type: a DT_*
 * value, DT_UNKNOWN where the file system does not say).  Stops when each
 * returns nonzero, and returns that.  dirfd stays open and is read from
 * its current position.  @return 0, each's value, or -errno.
 */
int le__dir_each(int dirfd, int (*each)(void *arg, const char *name,
                                        unsigned type),
                 void *arg);
/* Reserve blocks [off, off + len) without changing the file size (a hint:
 * file systems without it return -EOPNOTSUPP, and callers go on). */
int le__prealloc(int fd, uint64_t off, uint64_t len);
/* Fault in [p, p + len) of a shared file mapping writable without
 * changing a byte (MADV_POPULATE_WRITE): the file system reserves the
 * blocks, or the call fails (-ENOSPC where a store would have been a
 * SIGBUS: full, a quota; -ENOMEM) instead.  -EINVAL: the kernel cannot
 * (before 5.14). */
int le__populate_write(void *p, size_t len);

/* Start writing back [off, off + len) of fd, without waiting for it
 * (sync_file_range, SYNC_FILE_RANGE_WRITE): a later fdatasync has that
 * much less to do.  Promises nothing about stable storage.  A hint. */
int le__writeback(int fd, uint64_t off, uint64_t len);

/* Time in ns: wall clock (for record timestamps) and monotonic. */
uint64_t le__now_ns(void);
uint64_t le__mono_ns(void);
/* The calling thread's CPU time (0 if unknown): an engine thread reads its
 * own as it ends, for le_close_stats, which runs after the join. */
uint64_t le__self_cpu_ns(void);
/* Another thread's CPU time, now (0 if unknown). */
uint64_t le__thread_cpu_ns(pthread_t t);
/* Wait while *w == val, at most ns nanoseconds (a futex, private to the
 * process); wake up to n waiters.  Spurious returns are allowed. */
void le__futex_wait(_Atomic uint32_t *w, uint32_t val, uint64_t ns);
void le__futex_wake(_Atomic uint32_t *w, int n);
/* Name a thread (top -H, perf --sort comm, /proc/PID/task/N/comm; at
 * most 15 bytes).  Called by its creator right after pthread_create, so
 * the name is there when le_open returns.  Best effort. */
void le__name_thread(pthread_t t, const char *name);

#endif
