/*
 * inspect.c -- le_queue_pending: what a process that died left in a
 * shard's queue file, counted without changing anything, so that a reader
 * (logengine cat, verify, stats) can say that records are waiting and
 * that `logengine recover` writes them out.
 *
 * The count is the walk recovery makes (writer.c, gather, with deadq.c
 * while recovering): from where the dead writer's release resumes to head,
 * published slots, stopping at the first word no live ring can hold;
 * a slot the writer had already numbered below the segments' next
 * sequence was written before the death and is not counted.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/internal.h"
#include "base/os.h"
#include "queue/queue.h"
#include "store/segment.h"

/* The sequence number after shard's last record in the segments (0 for a
 * shard without records): a queue slot numbered below it is written. */
static uint64_t shard_end_seq(const char *dir, unsigned shard)
{
	le_reader_opts o;
	le_reader *r;
	le_record rec;
	uint64_t end = 0;

	le_reader_opts_init(&o);
	o.mode = LE_RECOVER_POINT_IN_TIME;
	o.shard = (int)shard;
	if (le_reader_open(&r, dir, &o) < 0)
		return 0;
	if (le_reader_seek_tail(r, 1) == 0 && le_reader_next(r, &rec) == 1)
		end = rec.seq + 1;
	le_reader_close(r);
	return end;
}

/* A read-only view of the ring in map (len bytes, header checked). */
static int ring_view(le__ring *r, unsigned char *map, size_t len)
{
	memset(r, 0, sizeof *r);
	r->map = map;
	r->map_len = len;
	r->fd = -1;
	r->data = map + LE_QUEUE_HDR;
	r->head = (_Atomic uint64_t *)(void *)(map + LE_QUEUE_HEAD_OFF);
	r->tail = (_Atomic uint64_t *)(void *)(map + LE_QUEUE_TAIL_OFF);
	r->rel = (_Atomic uint64_t *)(void *)(map + LE_QUEUE_REL_OFF);
	memcpy(&r->size, map + 16, 8);
	memcpy(&r->lap, map + 24, 8);
	while (r->lap_shift < 63 && (1ull << r->lap_shift) < r->lap)
		r->lap_shift++;
	return r->lap == 1ull << r->lap_shift && r->size <= r->lap &&
	       r->size <= len - LE_QUEUE_HDR ? 0 : LE_ECORRUPT;
}

int le_queue_pending(const char *dir, unsigned shard, uint64_t *records)
{
	char sd[LE_PATH_MAX], path[LE_PATH_MAX + 8];
	struct stat st;
	le__ring r;

	if (!dir || !records || shard >= LE_MAX_SHARDS)
		return LE_EINVAL;
	*records = 0;
	int rc = le__shard_dir(sd, sizeof sd, dir, shard);
	if (rc < 0)
		return rc;
	snprintf(path, sizeof path, "%s/QUEUE", sd);
	/* a header of this boot, the right shard, head != tail */
	if (!le__ring_file_busy(path, shard))
		return 0;
	int fd = le__open_in(path, LE_IN_SHARD, O_RDONLY, 0);
	if (fd < 0)
		return fd == -ENOENT ? 0 : fd;
	if (le__fstat(fd, &st) < 0 || (uint64_t)st.st_size <= LE_QUEUE_HDR) {
		le__close(fd);
		return 0;
	}
	size_t len = (size_t)st.st_size;
	unsigned char *map = le__mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	rc = map == MAP_FAILED ? -errno : 0;
	le__close(fd);
	if (rc < 0)
		return rc;
	uint64_t n = 0, end = shard_end_seq(dir, shard);
	if (ring_view(&r, map, len) == 0) {
		uint64_t pos = le__ring_resume(&r), head = atomic_load(r.head);
		while (pos % LE_SLOT_ALIGN == 0 && pos < head) {
			le__slot *sl;
			uint32_t bytes;
			int k = le__ring_peek(&r, &pos, &sl, &bytes);
			if (k == LE_PEEK_EMPTY) {
				/* a producer killed between moving head and
				 * its claim word: nothing there (deadq.c) */
				uint64_t next = le__ring_skip_free(&r, pos, head);
				if (next == pos)
					break;
				pos = next;
				continue;
			}
			/* a claimed slot's length is a last lap's */
			if (k == LE_PEEK_RECORD && sl->len > bytes - LE_SLOT_HDR)
				break;
			if (k == LE_PEEK_RECORD && (sl->seq == 0 || sl->seq >= end))
				n++;
			pos += bytes;
		}
	}
	le__munmap(map, len);
	*records = n;
	return 0;
}
