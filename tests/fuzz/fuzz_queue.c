/*
 * fuzz_queue.c -- libFuzzer target for the recovery of a dead process's
 * QUEUE file at le_open (recover.c le__recover_queue, deadq.c, queue.h le__ring_peek): the
 * words of a shared mapping that a crashing process may have written over.
 *
 * The input becomes DIR/shard-000/QUEUE, with a header that checks out
 * (magic, version, geometry, shard 0, this process's boot id, CRC), so
 * every run reaches the walk:
 *
 *   byte 0      control
 *                 bit 0  lap 1: add one lap (RING bytes) to head, tail and
 *                        the release position, so that the walk expects
 *                        lap number 1 in the state words
 *                 bit 1  header from the input: bytes 16..59 of the
 *                        header (size, lap, shard, slot header, boot) are
 *                        the 44 bytes after the positions, the CRC still
 *                        made to match (the header's own checks)
 *                 bit 2  version 1 (slots without the level and flags
 *                        check, as an older library left them); else
 *                        LE_QUEUE_VERSION
 *                 bit 3  without bit 2: version 3, slots that end
 *                        with their checksum (queue_checksum)
 *                 bit 4  with bit 3: the checks of the slots a walk from
 *                        tail to head frames made good, so inputs reach
 *                        what follows a slot that passes (else nearly
 *                        every slot fails its check)
 *                 bit 5  the header's CRC broken: the damaged header's
 *                        path, where the slots say which version they
 *                        are
 *   bytes 1-24  head, tail, releasing position (u64 little-endian)
 *   [44 bytes   header bytes 16..59, with bit 1]
 *   rest        the ring, RING bytes (zero-padded, or cut)
 *
 * Then le_open, one record written, le_flush, le_close, and a read of the
 * directory.  The files are in memfs (fuzz.h; FUZZ_REAL_OS=1: real
 * files in $TMPDIR).
 * Invariants (abort() on violation):
 *   - le_open, le_write, le_flush and le_close all succeed: a damaged
 *     queue loses what follows the damage, never the engine
 *   - the read (SKIP mode) reports no problem: what recovery wrote is
 *     whole frames
 *   - no record's payload is longer than the ring, at most one record per
 *     64-byte line of the ring is recovered, and the record written after
 *     the recovery is there, last, once
 * A hang (a walk that does not end) is libFuzzer's -timeout.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/crc32c.h"
#include "record/format.h"
#include "logengine.h"
#include "queue/queue.h"
#include "fuzz.h"

#define RING 8192u /* a power of two: lap == size */
#define BOOT 0x5eed5eed5eedull

#define REQUIRE(c)                                                            \
	do {                                                                  \
		if (!(c)) {                                                   \
			fprintf(stderr, "fuzz_queue: %s:%d: %s (%s)\n",       \
			        __FILE__, __LINE__, #c, le_errmsg());         \
			abort();                                              \
		}                                                             \
	} while (0)

static char dir[256];

static void setup(void)
{
	char sd[300];
	REQUIRE(fuzz_shard_dir("queue", sd, sizeof sd) == 0);
	snprintf(dir, sizeof dir, "%s", fuzz_top);
	le__boot_id_set(BOOT);
}

/* Empty DIR/shard-000 (le_open makes no subdirectory). */
static void clear_shard(void)
{
	char sd[300];
	snprintf(sd, sizeof sd, "%s/shard-000", dir);
	REQUIRE(fuzz_empty_dir(sd) == 0);
}

/* Put the check a producer would have put into each published record
 * slot from tail to head that is framed (on a 64-byte line, its size
 * within the ring and its lap's room, its length within its size); stop
 * at the first that is not. */
static void fix_checks(unsigned char *ring, uint64_t tail, uint64_t head)
{
	if (tail % LE_SLOT_ALIGN)
		return; /* recovery drops such a queue whole */
	for (uint64_t p = tail; p < head && head - p <= RING;) {
		unsigned char *s = ring + (p & (RING - 1));
		uint64_t st = le__get64(s);
		uint32_t n = (uint32_t)st & LE_SLOT_SIZE_MASK;
		if (!(st & LE_SLOT_READY) || n < LE_SLOT_ALIGN ||
		    (p & (RING - 1)) + n > RING)
			return;
		uint32_t len = le__get32(s + offsetof(le__slot, len));
		if (!(st & LE_SLOT_PAD)) {
			if (len > n - LE_SLOT_HDR - LE_SLOT_CSUM)
				return;
			uint32_t c = le__slot_crc((const le__slot *)(void *)s,
			                          len);
			memcpy(s + n - LE_SLOT_CSUM, &c, sizeof c);
		}
		p += n;
	}
}

static void write_queue(const uint8_t *data, size_t size)
{
	static unsigned char file[LE_QUEUE_HDR + RING];
	char path[512];
	uint64_t pos[3] = {0, 0, 0};

	memset(file, 0, sizeof file);
	memcpy(file, LE_QUEUE_MAGIC, 8);
	le__put32(file + 8, data[0] & 4   ? 1
	                    : data[0] & 8 ? LE_QUEUE_VERSION_CSUM
	                                  : LE_QUEUE_VERSION);
	le__put32(file + 12, LE_QUEUE_HDR);
	le__put64(file + 16, RING);
	le__put64(file + 24, RING);
	le__put32(file + 32, 0);
	le__put32(file + 36, LE_SLOT_HDR);
	le__put64(file + 40, BOOT);
	size_t ring_at = 25;
	if ((data[0] & 2) && size >= 25 + 44) {
		memcpy(file + 16, data + 25, 44);
		ring_at += 44;
	}
	le__put32(file + 60, le__crc_mask(le__crc32c_extend(0, file, 60)) ^
	                             (data[0] & 32 ? 1u : 0u));
	for (int i = 0; i < 3; i++) {
		if (size >= 1 + 8 * (size_t)(i + 1))
			pos[i] = le__get64(data + 1 + 8 * i);
		if (data[0] & 1)
			pos[i] += RING;
	}
	le__put64(file + LE_QUEUE_HEAD_OFF, pos[0]);
	le__put64(file + LE_QUEUE_TAIL_OFF, pos[1]);
	le__put64(file + LE_QUEUE_REL_OFF, pos[2]);
	if (size > ring_at)
		memcpy(file + LE_QUEUE_HDR, data + ring_at,
		       size - ring_at < RING ? size - ring_at : RING);
	if ((data[0] & 28) == 24)
		fix_checks(file + LE_QUEUE_HDR, pos[1], pos[0]);

	clear_shard();
	snprintf(path, sizeof path, "%s/shard-000/QUEUE", dir);
	REQUIRE(fuzz_put(path, file, sizeof file) == 0);
}

static int problems;

static void on_problem(void *arg, const char *file, uint64_t off,
                       const char *what)
{
	(void)arg;
	if (getenv("FUZZ_TRACE"))
		fprintf(stderr, "problem: %s at %llu: %s\n", file,
		        (unsigned long long)off, what);
	problems++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if (!dir[0])
		setup();
	write_queue(data, size);

	le_config c;
	le_config_init(&c);
	c.dir = dir;
	c.queue_capacity = 16;
	c.queue_capacity_bytes = 1024;
	c.max_record_bytes = 1024;
	/* The store's buffer is max_pending_bytes and a record: at the
	 * default 1 MiB, ASan maps, fills and unmaps it on every open (its
	 * allocator gives anything past 128 KiB a mapping of its own). */
	c.max_pending_bytes = 4096;
	c.durability = LE_SYNC_NONE;
	c.checkpoint_ms = 0;
	le_engine *e;
	REQUIRE(le_open(&e, &c) == 0);
	if (getenv("FUZZ_TRACE"))
		fprintf(stderr, "le_open: '%s'\n", le_errmsg());
	REQUIRE(le_write(e, 0, LE_INFO, "after the queue", 15) == 0);
	REQUIRE(le_flush(e, 10000) == 0);
	REQUIRE(le_close(e) == 0);

	le_reader_opts o;
	le_reader_opts_init(&o);
	o.mode = LE_RECOVER_SKIP;
	o.on_problem = on_problem;
	le_reader *r;
	le_record rec;
	int rc;
	long n = 0, after = 0, last_is_after = 0;
	problems = 0;
	REQUIRE(le_reader_open(&r, dir, &o) == 0);
	while ((rc = le_reader_next(r, &rec)) == 1) {
		REQUIRE(rec.len <= RING);
		int is_after = rec.len == 15 &&
		               !memcmp(rec.payload, "after the queue", 15);
		after += is_after;
		last_is_after = is_after;
		n++;
	}
	REQUIRE(rc == 0);
	le_reader_close(r);
	if (getenv("FUZZ_TRACE"))
		fprintf(stderr, "read %ld records, %d problems\n", n, problems);
	REQUIRE(problems == 0);
	REQUIRE(last_is_after);
	/* the queue's records may say "after the queue" too, but it is last */
	REQUIRE(after >= 1 && n <= RING / LE_SLOT_ALIGN + 1);

	REQUIRE(fuzz_fds_left() == 0); /* the engine and reader closed all */
	clear_shard(); /* the next run starts with no segment at all */
	return 0;
}
