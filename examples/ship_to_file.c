/*
 * ship_to_file.c -- a complete forwarder on the public spool: the records
 * of every shard of a log directory appended to one file, exactly once,
 * whenever it is killed.
 *
 *  cc -Iinclude -o ship_to_file ship_to_file.c liblogengine.a -pthread [-lzstd]
 *  ship_to_file DIR OUT [--once]     (--once: stop at what DIR holds)
 *
 * OUT is a run of blocks: a header (struct blk), then for frames the
 * frames as stored.  Each step is: write a block, fdatasync OUT, then
 * acknowledge and commit the shard's cursor.  A kill between the sync and
 * the commit leaves records in OUT that the cursor does not cover, so at
 * start the block headers of OUT are read to learn each shard's last
 * sequence there and the cursor is moved past it: nothing comes twice.
 * A block cut short by a kill is cut off; its records were never
 * acknowledged, so they come again: nothing is lost.
 */
#define _DEFAULT_SOURCE /* pread, usleep, O_CLOEXEC */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "logengine.h"

#define SHARDS 256        /* an engine writes 256 shards at most */
#define BATCH (256u << 10) /* bytes of frames per block, at most */

struct blk {
	char magic[4];     /* "LESF" */
	uint32_t shard;
	uint32_t len;      /* frame bytes after the header */
	uint32_t lost;     /* 1: records first.. are gone; no frames */
	uint64_t first, count;
};

static uint64_t last[SHARDS]; /* each shard's last sequence in OUT */

/* Read OUT's block headers; cut off a block a kill left short. */
static int recover(int fd)
{
	struct blk b;
	off_t off = 0, end = lseek(fd, 0, SEEK_END);

	while (off + (off_t)sizeof b <= end &&
	       pread(fd, &b, sizeof b, off) == (ssize_t)sizeof b &&
	       !memcmp(b.magic, "LESF", 4) && b.shard < SHARDS &&
	       off + (off_t)(sizeof b + b.len) <= end) {
		last[b.shard] = b.first + b.count - 1;
		off += (off_t)(sizeof b + b.len);
	}
	return off < end ? ftruncate(fd, off) : 0;
}

/* Append one block, durably.  A short write leaves a torn block: exit,
 * and the next start cuts it off. */
static int append(int fd, const struct blk *b, const void *frames)
{
	struct iovec v[2] = {{(void *)b, sizeof *b}, {(void *)frames, b->len}};

	if (writev(fd, v, 2) != (ssize_t)(sizeof *b + b->len))
		return -1;
	return fdatasync(fd);
}

/* One event of shard `shard`.  @return 1 busy, 0 idle, 2 done, < 0. */
static int step(int fd, le_spool *sp, unsigned shard)
{
	le_spool_batch ev;
	int rc = le_spool_next(sp, BATCH, 0, &ev);
	struct blk b = {{'L', 'E', 'S', 'F'}, shard, 0, 0, ev.first, ev.count};

	if (rc == LE_SPOOL_DAMAGE) /* its records come next, as a gap */
		fprintf(stderr, "shard %u: segment %llu, offset %llu: %s\n",
		        shard, (unsigned long long)ev.segment,
		        (unsigned long long)ev.offset, ev.why);
	if (rc == LE_SPOOL_DAMAGE || rc == LE_SPOOL_ROTATED)
		return 1;
	if (rc == LE_SPOOL_IDLE || rc == LE_SPOOL_END || rc < 0)
		return rc == LE_SPOOL_IDLE ? 0 : rc == LE_SPOOL_END ? 2 : rc;
	b.lost = rc != LE_SPOOL_FRAMES; /* GAP, TOO_BIG: records lost */
	b.len = b.lost ? 0 : (uint32_t)ev.len;
	if (append(fd, &b, ev.frames) < 0)
		return LE_EIO;
	last[shard] = ev.first + ev.count - 1;
	le_spool_ack(sp, ev.first + ev.count, ev.end_segment, ev.end_offset,
	             b.lost ? ev.count : 0);
	rc = le_spool_commit(sp);
	return rc < 0 ? rc : 1;
}

/* Open shard id; move its cursor past what OUT already holds. */
static int open_shard(le_spool **sp, const char *dir, unsigned id,
                      unsigned flags)
{
	le_spool_cursor c;
	int rc = id < SHARDS ? le_spool_open(sp, dir, id, flags) : LE_EINVAL;

	if (rc < 0)
		return rc;
	le_spool_cursor_get(*sp, &c);
	if (last[id] && last[id] >= c.next_seq) {
		le_spool_ack(*sp, last[id] + 1, 0, 0, 0);
		rc = le_spool_commit(*sp);
		le_spool_rewind(*sp);
	}
	return rc;
}

int main(int argc, char **argv)
{
	static le_spool *sp[SHARDS];
	unsigned ids[SHARDS];
	int once = argc == 4 && !strcmp(argv[3], "--once"), n, rc = 0;

	if (argc != 3 && !once) {
		fprintf(stderr, "usage: ship_to_file DIR OUT [--once]\n");
		return 2;
	}
	int fd = open(argv[2], O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
	if (fd < 0 || recover(fd) < 0) {
		perror(argv[2]);
		return 1;
	}
	if ((rc = n = le_spool_shards(argv[1], ids, SHARDS)) > SHARDS)
		n = SHARDS;
	for (int i = 0; i < n && rc >= 0; i++)
		rc = open_shard(&sp[i], argv[1], ids[i], once ? LE_SPOOL_ONCE : 0);
	for (int done = 0; rc >= 0 && done < n;) {
		int busy = 0;
		done = 0;
		for (int i = 0; i < n && rc >= 0; i++) {
			rc = step(fd, sp[i], ids[i]);
			busy |= rc == 1;
			done += rc == 2;
		}
		if (!busy && done < n && rc >= 0)
			usleep(100 * 1000); /* or inotify on each shard dir */
	}
	if (rc < 0)
		fprintf(stderr, "ship_to_file: %s: %s\n", le_strerror(rc),
		        le_errmsg());
	for (int i = 0; i < n; i++)
		le_spool_close(sp[i]);
	close(fd);
	return rc < 0;
}
