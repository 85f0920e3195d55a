/*
 * fuzz.h -- what the fuzz targets share.
 *
 * REQUIRE(c): an invariant; a target that defines FUZZ_NAME before
 * including this gets it (abort() with the condition and le_errmsg, so
 * libFuzzer keeps the input).
 *
 * The OS-call table the engine-opening fuzz targets install
 * (src/base/os.h, as SQLite's fuzzers run through their own VFS): the
 * files live in RAM already (TMPDIR=/dev/shm, make fuzz), so what costs
 * is what the table does to them for durability and space, none of which
 * a decoder's fuzzing needs:
 *
 *   fallocate   refused with EOPNOTSUPP, as on a file system without it
 *               (the engine goes on: le__prealloc is a hint); on tmpfs it
 *               zeroes every page up to segment_bytes ahead, and closing
 *               frees them again: most of an input's time
 *   fdatasync,  succeed at once: nothing is durable in RAM, and a crash
 *   fsync       is not what these targets simulate
 *   sync_range  none (NULL: le__writeback does nothing)
 *   madvise     succeeds at once: MADV_POPULATE_WRITE only reserves a
 *               mapping's blocks early so that a full disk is an error
 *               and not a SIGBUS; the pages of QUEUE, SITES and STATS
 *               come in on first touch just the same
 *
 * Everything that reads or writes the bytes (open, openat, pread,
 * pwrite, ftruncate, rename, unlink) stays the real call, so the
 * decoders see exactly the files the input made.
 *
 * Also the directory the file targets write their input to.
 */
#ifndef FUZZ_H
#define FUZZ_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include "base/os.h"
#include "logengine.h"

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

static inline int fuzz_no_populate(void *p, size_t len, int advice)
{
	(void)p, (void)len, (void)advice;
	return 0;
}

/* Install the table, once per process (before the first le_open). */
static inline void fuzz_os_install(void)
{
	le__os t = le__os_real;
	t.fallocate = fuzz_no_fallocate;
	t.fdatasync = fuzz_no_sync;
	t.fsync = fuzz_no_sync;
	t.sync_range = NULL;
	t.madvise = fuzz_no_populate;
	le__os_install(&t);
}

static char fuzz_top[256]; /* the directory fuzz_shard_dir made */

static inline void fuzz_rm_top(void)
{
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", fuzz_top);
	if (fuzz_top[0] && system(cmd) != 0)
		fprintf(stderr, "fuzz: could not remove %s\n", fuzz_top);
}

/* A new log directory $TMPDIR/fuzz-NAME-XXXXXX (make fuzz sets TMPDIR to
 * /dev/shm when it can), removed at exit, and its shard-000, whose path
 * goes to shard (cap bytes).  @return 0, or -1 (errno set). */
static inline int fuzz_shard_dir(const char *name, char *shard, size_t cap)
{
	const char *t = getenv("TMPDIR");
	snprintf(fuzz_top, sizeof fuzz_top, "%s/fuzz-%s-XXXXXX",
	         t && *t ? t : "/tmp", name);
	if (!mkdtemp(fuzz_top))
		return -1;
	atexit(fuzz_rm_top);
	snprintf(shard, cap, "%s/shard-000", fuzz_top);
	return mkdir(shard, 0755);
}

#endif
