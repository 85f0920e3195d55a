/*
 * fuzz.h -- what the fuzz targets share.
 *
 * REQUIRE(c): an invariant; a target that defines FUZZ_NAME before
 * including this gets it (abort() with the condition and le_errmsg, so
 * libFuzzer keeps the input).
 *
 * The files.  The targets that write their input as files (and open an
 * engine, or a reader, on them) put them in memfs (tests/memfs.h): a file
 * system in this process's memory behind the engine's OS-call table
 * (src/base/os.h), as SQLite's fuzzers run through an in-memory VFS.  An
 * input then costs no system call but the writer thread's start, and a
 * call that bypasses the table fails (memfs paths lie in /proc, its
 * descriptors above any real one) instead of reaching a disk.  Each input
 * must also close every descriptor it opened: fuzz_fds_left() counts them.
 *
 * FUZZ_REAL_OS=1 runs the same targets on real files in $TMPDIR (make fuzz
 * sets it to /dev/shm), with a table that only drops what costs there and
 * no decoder needs: fallocate (EOPNOTSUPP, as on a file system without
 * it; on tmpfs it zeroes every page up to segment_bytes ahead), fdatasync
 * and fsync (nothing is durable in RAM), sync_file_range, and
 * MADV_POPULATE_WRITE (it only reserves blocks early).
 *
 * Also the directory the file targets write their input to.
 */
#ifndef FUZZ_H
#define FUZZ_H

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include "base/os.h"
#include "logengine.h"
#include "memfs.h"

#ifdef FUZZ_NAME
#define REQUIRE(c)                                                            \
	do {                                                                  \
		if (!(c)) {                                                   \
			fprintf(stderr, FUZZ_NAME ": %s:%d: %s (%s)\n",      \
			        __FILE__, __LINE__, #c, le_errmsg());         \
			abort();                                              \
		}                                                             \
	} while (0)
#endif

static inline int fuzz_no_fallocate(int fd, int mode, off_t off, off_t len)
{
	(void)fd, (void)mode, (void)off, (void)len;
	errno = EOPNOTSUPP;
	return -1;
}

static inline int fuzz_no_sync(int fd)
{
	(void)fd;
	return 0;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* MADV_POPULATE_WRITE skipped; any other advice (MADV_DONTNEED, which the
 * queue relies on to read as zeros, MADV_HUGEPAGE) as the kernel does. */
static inline int fuzz_no_populate(void *p, size_t len, int advice)
{
	return advice == MADV_POPULATE_WRITE ? 0 : madvise(p, len, advice);
}

static inline int fuzz_real_os(void)
{
	return getenv("FUZZ_REAL_OS") != NULL;
}

/* Install the table (once per process, before the first le_open): the
 * cheap durability calls, and memfs over them unless FUZZ_REAL_OS. */
static inline void fuzz_os_install(void)
{
	static int done;
	if (done++)
		return;
	le__os t = le__os_real;
	t.fallocate = fuzz_no_fallocate;
	t.fdatasync = fuzz_no_sync;
	t.fsync = fuzz_no_sync;
	t.sync_range = NULL;
	t.madvise = fuzz_no_populate;
	le__os_install(&t);
	if (!fuzz_real_os() && memfs_install() != 0)
		abort();
}

static char fuzz_top[256]; /* the directory fuzz_shard_dir made */

static inline void fuzz_rm_top(void)
{
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", fuzz_top);
	if (fuzz_top[0] && system(cmd) != 0)
		fprintf(stderr, "fuzz: could not remove %s\n", fuzz_top);
}

/* A new log directory, and its shard-000, whose path goes to shard (cap
 * bytes): MEMFS_ROOT/fuzz-NAME, or with FUZZ_REAL_OS
 * $TMPDIR/fuzz-NAME-XXXXXX (removed at exit).  Installs the table.
 * @return 0, or -1 (errno set). */
static inline int fuzz_shard_dir(const char *name, char *shard, size_t cap)
{
	fuzz_os_install();
	if (!fuzz_real_os()) {
		snprintf(fuzz_top, sizeof fuzz_top, MEMFS_ROOT "/fuzz-%s",
		         name);
		snprintf(shard, cap, "%s/shard-000", fuzz_top);
		int rc = le__mkdir(fuzz_top, 0750);
		if (rc == 0)
			rc = le__mkdir(shard, 0750);
		errno = -rc;
		return rc < 0 ? -1 : 0;
	}
	const char *t = getenv("TMPDIR");
	snprintf(fuzz_top, sizeof fuzz_top, "%s/fuzz-%s-XXXXXX",
	         t && *t ? t : "/tmp", name);
	if (!mkdtemp(fuzz_top))
		return -1;
	atexit(fuzz_rm_top);
	snprintf(shard, cap, "%s/shard-000", fuzz_top);
	return mkdir(shard, 0755);
}

/* Write len bytes as the file at path (made, or cut to them), through the
 * table.  @return 0 or -errno. */
static inline int fuzz_put(const char *path, const void *p, size_t len)
{
	int fd = le__open(path, O_WRONLY | O_CREAT | O_TRUNC, 0640);
	if (fd < 0)
		return fd;
	int rc = len ? le__pwrite_all(fd, p, len, 0) : 0;
	int rc2 = le__close(fd);
	return rc < 0 ? rc : rc2;
}

static inline int fuzz_unlink_in(void *dir, const char *name, unsigned type)
{
	char p[600];
	(void)type;
	snprintf(p, sizeof p, "%s/%s", (const char *)dir, name);
	return le__unlink(p) < 0 ? -1 : 0;
}

/* Remove every file in dir (which holds no directory), through the table.
 * @return 0, or -1 if one could not be. */
static inline int fuzz_empty_dir(const char *dir)
{
	int fd = le__open(dir, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		return fd == -ENOENT ? 0 : -1;
	int rc = le__dir_each(fd, fuzz_unlink_in, (void *)dir);
	le__close(fd);
	return rc ? -1 : 0;
}

/* Descriptors of memfs still open (0 with FUZZ_REAL_OS): after an input
 * has closed everything it opened, any is a leak. */
static inline int fuzz_fds_left(void)
{
	return fuzz_real_os() ? 0 : memfs_open_fds();
}

#endif
