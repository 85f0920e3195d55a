/*
 * logdir.c -- what a directory is, to the reader commands: a log
 * directory, a shard directory given by mistake, something else; whether
 * an engine has it open; what a process that died left in its queues; the
 * files the engine owns, for stats --disk-usage.
 *
 * Public API only: the records a dead process's QUEUE still holds come
 * from le_queue_pending (src/queue/inspect.c walks the queue as recovery does).
 * engine_live() reads whether the LOCK flock is held from /proc/locks, so
 * that asking never takes the lock (a reader holding it for an instant
 * would make an engine starting then fail with LE_EBUSY).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cli.h"

const char *const kind_names[KIND_N] = {
	"segments", "indexes", "queues", "checkpoints", "lock", "cursors",
	"directories", "other",
};

/* "shard-NNN" */
static int is_shard_name(const char *s)
{
	return !strncmp(s, "shard-", 6) && strlen(s) == 9 &&
	       strspn(s + 6, "0123456789") == 3 && atoi(s + 6) < MAX_SHARDS;
}

/* "IIIIIIIIIIIIIIII" + suffix */
static int is_hex_name(const char *s, const char *suffix)
{
	return strlen(s) == 16 + strlen(suffix) && !strcmp(s + 16, suffix) &&
	       strspn(s, "0123456789abcdef") == 16;
}

/* What a file in a shard directory is. */
static int shard_file_kind(const char *name)
{
	if (is_hex_name(name, ".seg") || is_hex_name(name, ".seg.zst") ||
	    is_hex_name(name, ".seg.zst.tmp"))
		return KIND_SEGMENT; /* archived ones too (and being made) */
	if (is_hex_name(name, ".idx") || is_hex_name(name, ".idx.tmp"))
		return KIND_INDEX;
	if (!strcmp(name, "QUEUE"))
		return KIND_QUEUE;
	if (!strcmp(name, "CHECKPOINT"))
		return KIND_CHECKPOINT;
	/* a forwarder's position (issue 15), a reader's --cursor-file kept
	 * in the shard: CURSOR, CURSOR.*, *.cursor */
	size_t n = strlen(name);
	if (!strncmp(name, "CURSOR", 6) ||
	    (n > 7 && !strcmp(name + n - 7, ".cursor")))
		return KIND_CURSOR;
	return KIND_OTHER;
}

/* Does shard directory sd hold a file the engine makes? */
static int has_engine_files(const char *sd)
{
	DIR *d = opendir(sd);
	struct dirent *de;
	int found = 0;

	if (!d)
		return 0;
	while (!found && (de = readdir(d)) != NULL) {
		int k = shard_file_kind(de->d_name);
		found = k == KIND_SEGMENT || k == KIND_QUEUE ||
		        k == KIND_CHECKPOINT;
	}
	closedir(d);
	return found;
}

/* What dir is, for check_log_dir and log_dir_pending. */
enum { DIR_LOG, DIR_MISSING, DIR_UNREADABLE, DIR_NOT_DIR, DIR_SHARD,
       DIR_EMPTY, DIR_OTHER };

/* Which of the above dir is; *err the errno of a failed stat/opendir. */
static int classify_dir(const char *dir, int *err)
{
	struct stat st;
	char path[4096];
	int shards = 0, engine = 0, others = 0, lock = 0, any = 0;

	if (stat(dir, &st) < 0) {
		*err = errno;
		return errno == ENOENT ? DIR_MISSING : DIR_UNREADABLE;
	}
	if (!S_ISDIR(st.st_mode))
		return DIR_NOT_DIR;
	DIR *d = opendir(dir);
	if (!d) {
		*err = errno;
		return DIR_UNREADABLE;
	}
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		const char *n = de->d_name;
		if (!strcmp(n, ".") || !strcmp(n, ".."))
			continue;
		any = 1;
		if (is_shard_name(n)) {
			shards++;
			snprintf(path, sizeof path, "%s/%s", dir, n);
			engine += has_engine_files(path);
		} else if (!strcmp(n, "LOCK")) {
			lock = 1;
		} else {
			others += shard_file_kind(n) != KIND_OTHER;
		}
	}
	closedir(d);
	if (shards && (engine || lock))
		return DIR_LOG;
	if (others || has_engine_files(dir))
		return DIR_SHARD;
	/* an engine opening it has made LOCK or shard-NNN/ and no more */
	return !any || ((lock || shards) && !others) ? DIR_EMPTY : DIR_OTHER;
}

int check_log_dir(const char *dir)
{
	int err = 0;
	switch (classify_dir(dir, &err)) {
	case DIR_LOG:
		return 0;
	case DIR_MISSING:
	case DIR_UNREADABLE:
		fprintf(stderr, "%s: %s: %s\n", prog, dir, strerror(err));
		break;
	case DIR_NOT_DIR:
		fprintf(stderr, "%s: %s is not a directory: give a logengine log "
		        "directory (one with shard-NNN/ subdirectories)\n", prog,
		        dir);
		break;
	case DIR_SHARD:
		fprintf(stderr, "%s: %s is a shard directory, not a log "
		        "directory: give the directory that holds it (the one "
		        "with LOCK and shard-NNN/)\n", prog, dir);
		break;
	default:
		fprintf(stderr, "%s: %s is not a logengine log directory: no "
		        "shard-NNN/ with segments\n", prog, dir);
	}
	return EXIT_USAGE;
}

int log_dir_pending(const char *dir)
{
	int err = 0, k = classify_dir(dir, &err);
	return k == DIR_MISSING || k == DIR_EMPTY;
}

int check_log_dir_to_come(const char *dir)
{
	int err = 0, k = classify_dir(dir, &err);

	if (k == DIR_MISSING || k == DIR_UNREADABLE) {
		fprintf(stderr, "%s: %s: %s: give a logengine log directory (one "
		        "with LOCK and shard-NNN/), or an empty directory an "
		        "engine is to write\n", prog, dir, strerror(err));
		return EXIT_USAGE;
	}
	return k == DIR_EMPTY ? 0 : check_log_dir(dir);
}

/* ---- the lock ---- */

/* Is there a flock on (dev, ino) in /proc/locks?  @return 1, 0, -1 when
 * /proc/locks cannot be read.  *pid the holder. */
static int proc_locks_has(dev_t dev, ino_t ino, long *pid)
{
	FILE *f = fopen("/proc/locks", "re");
	char line[256];
	int found = 0;

	if (!f)
		return -1;
	while (!found && fgets(line, sizeof line, f)) {
		char type[16];
		long p;
		unsigned maj, min;
		unsigned long long i;
		/* "1: FLOCK  ADVISORY  WRITE 1234 fd:01:123456 0 EOF"; a
		 * waiter's line has "->" after the number. */
		char *s = strchr(line, ':');
		if (!s || strstr(line, "->"))
			continue;
		if (sscanf(s + 1, " %15s %*s %*s %ld %x:%x:%llu", type, &p, &maj,
		           &min, &i) == 5 &&
		    !strcmp(type, "FLOCK") && i == (unsigned long long)ino &&
		    maj == major(dev) && min == minor(dev)) {
			found = 1;
			*pid = p;
		}
	}
	fclose(f);
	return found;
}

int engine_live(const char *dir, long *pid)
{
	char path[4096];
	struct stat st;

	*pid = 0;
	snprintf(path, sizeof path, "%s/LOCK", dir);
	if (stat(path, &st) < 0)
		return 0;
	int found = proc_locks_has(st.st_dev, st.st_ino, pid);
	if (found >= 0)
		return found;
	/* No /proc: ask the lock itself, shared and at once released. */
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	int live = flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK;
	close(fd);
	return live;
}

/* ---- a dead process's queue ---- */

uint64_t warn_dead_queues(const char *dir)
{
	unsigned char has[MAX_SHARDS] = {0};
	uint64_t total = 0;
	long pid;

	if (list_shards(dir, has) <= 0 || engine_live(dir, &pid))
		return 0; /* a live engine's queue is its business */
	for (unsigned s = 0; s < MAX_SHARDS; s++) {
		uint64_t n = 0;
		if (has[s] && le_queue_pending(dir, s, &n) < 0)
			n = 0;
		/* the words stay the same for one record: scripts grep them */
		if (n)
			fprintf(stderr, "%s: %" PRIu64 " records are waiting in "
			        "shard-%03u/QUEUE from a process that died; run "
			        "'logengine recover %s'\n", prog, n, s, dir);
		total += n;
	}
	return total;
}

/* ---- disk usage ---- */

static void count(struct usage *u, int kind, const struct stat *st)
{
	u->files[kind]++;
	u->apparent[kind] += (uint64_t)st->st_size;
	u->allocated[kind] += (uint64_t)st->st_blocks * 512;
}

static int usage_shard(const char *sd, struct usage *u)
{
	DIR *d = opendir(sd);
	struct dirent *de;
	struct stat st;

	if (!d)
		return -errno;
	while ((de = readdir(d)) != NULL) {
		const char *n = de->d_name;
		if (!strcmp(n, ".") || !strcmp(n, "..") ||
		    fstatat(dirfd(d), n, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		count(u, S_ISREG(st.st_mode) ? shard_file_kind(n) : KIND_OTHER,
		      &st);
	}
	closedir(d);
	return 0;
}

/* A directory that is not the engine's, and everything under it. */
static void usage_other(const char *path, struct usage *u)
{
	char sub[4096];
	struct stat st;
	struct dirent *de;
	DIR *d = opendir(path);

	if (!d || fstat(dirfd(d), &st) < 0) {
		if (d)
			closedir(d);
		return;
	}
	count(u, KIND_OTHER, &st);
	while ((de = readdir(d)) != NULL) {
		const char *n = de->d_name;
		if (!strcmp(n, ".") || !strcmp(n, "..") ||
		    fstatat(dirfd(d), n, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		snprintf(sub, sizeof sub, "%s/%s", path, n);
		if (S_ISDIR(st.st_mode))
			usage_other(sub, u);
		else
			count(u, KIND_OTHER, &st);
	}
	closedir(d);
}

int disk_usage(const char *dir, struct usage *u)
{
	char path[4096];
	DIR *d = opendir(dir);
	struct dirent *de;
	struct stat st;

	memset(u, 0, sizeof *u);
	if (!d || fstat(dirfd(d), &st) < 0) {
		int e = errno;
		if (d)
			closedir(d);
		return -e;
	}
	count(u, KIND_DIR, &st);
	while ((de = readdir(d)) != NULL) {
		const char *n = de->d_name;
		if (!strcmp(n, ".") || !strcmp(n, "..") ||
		    fstatat(dirfd(d), n, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISDIR(st.st_mode) && is_shard_name(n)) {
			count(u, KIND_DIR, &st);
			snprintf(path, sizeof path, "%s/%s", dir, n);
			usage_shard(path, u);
		} else if (S_ISREG(st.st_mode) && !strcmp(n, "LOCK")) {
			count(u, KIND_LOCK, &st);
		} else if (S_ISDIR(st.st_mode)) {
			/* not ours, but du counts what is under it too */
			snprintf(path, sizeof path, "%s/%s", dir, n);
			usage_other(path, u);
		} else {
			count(u, KIND_OTHER, &st);
		}
	}
	closedir(d);
	return 0;
}

/* ---- the forwarder ---- */

/* The forwarder's cursor (shard-NNN/FORWARD, le_spool_cursor_read) names
 * the next record to ship and, as a hint, the segment that holds it:
 * every segment before that one is shipped.  Without the hint, a segment
 * is shipped when the one after it starts at or below the cursor.  No
 * FORWARD file: no forwarder, nothing waits.  A FORWARD file no slot of
 * which reads: nothing is known to be shipped. */
uint64_t shipped_up_to(const char *dir, unsigned shard)
{
	le_spool_cursor c;
	le_spool_seg sg;
	uint64_t *idx, up = 0;
	size_t n;
	int rc = le_spool_cursor_read(dir, shard, &c);

	if (rc == -ENOENT)
		return UINT64_MAX;
	if (rc < 0)
		return 0;
	if (c.segment)
		return c.segment - 1;
	if (le_spool_segments(dir, shard, &idx, &n) < 0)
		return 0;
	for (size_t k = 0; k + 1 < n; k++) {
		if (le_spool_segment_info(dir, shard, idx[k + 1], 1, &sg) < 0 ||
		    sg.base_seq > c.next_seq)
			break;
		up = idx[k];
	}
	free(idx);
	return up;
}

int forward_lag(const char *dir, unsigned shard, uint64_t next_seq,
                uint64_t *records, uint64_t *bytes)
{
	le_spool_cursor c;
	le_spool_seg sg;
	uint64_t *idx;
	size_t n;

	*records = *bytes = 0;
	if (le_spool_cursor_read(dir, shard, &c) < 0)
		return 0; /* no forwarder (or no cursor that reads) */
	*records = next_seq > c.next_seq ? next_seq - c.next_seq : 0;
	uint64_t from = shipped_up_to(dir, shard);
	if (le_spool_segments(dir, shard, &idx, &n) < 0)
		return 1;
	for (size_t k = 0; k < n; k++) {
		if (from != UINT64_MAX && idx[k] <= from)
			continue; /* shipped whole */
		if (le_spool_segment_info(dir, shard, idx[k], 2, &sg) < 0)
			continue;
		if (idx[k] == c.segment && c.offset <= sg.bytes)
			sg.bytes -= c.offset;
		*bytes += sg.bytes;
	}
	free(idx);
	return 1;
}

int shard_segments(const char *dir, unsigned shard, uint64_t **out,
                   size_t *n)
{
	return le_spool_segments(dir, shard, out, n);
}
