/*
 * fwd_cursor.c -- the forwarder's acknowledged cursor (DIR/shard-NNN/
 * FORWARD) and the retention hook that reads it.
 *
 * The cursor file is the checkpoint's design again: two slots in separate
 * sectors, written alternately in place, so a torn write damages at most
 * the slot being written and the other still holds the previous cursor.
 * Its only writer is the forwarder; the engine reads it at rotation.  A
 * cursor read while it is being written is either slot's: both are
 * cursors that were true once, and an older one only keeps more.
 */
#define _GNU_SOURCE
#include "store/fwd_cursor.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "base/crc32c.h"
#include "base/os.h"
#include "store/segment.h"

void le__fwd_encode(unsigned char out[LE_FWD_SLOT], const le__fwd_cursor *c)
{
	memset(out, 0, LE_FWD_SLOT);
	memcpy(out, LE_FWD_MAGIC, 8);
	le__put64(out + 8, c->gen);
	le__put64(out + 16, c->next_seq);
	le__put64(out + 24, c->seg_index);
	le__put64(out + 32, c->offset);
	le__put64(out + 40, c->lost);
	le__put64(out + 48, c->written_ns);
	le__put32(out + 56, c->shard);
	le__put32(out + 60, le__crc_mask(le__crc32c_extend(0, out, 60)));
}

int le__fwd_decode(const unsigned char in[LE_FWD_SLOT], le__fwd_cursor *c)
{
	if (memcmp(in, LE_FWD_MAGIC, 8) != 0)
		return LE_ECORRUPT;
	if (le__get32(in + 60) != le__crc_mask(le__crc32c_extend(0, in, 60)))
		return LE_ECORRUPT;
	c->gen = le__get64(in + 8);
	c->next_seq = le__get64(in + 16);
	c->seg_index = le__get64(in + 24);
	c->offset = le__get64(in + 32);
	c->lost = le__get64(in + 40);
	c->written_ns = le__get64(in + 48);
	c->shard = le__get32(in + 56);
	return c->gen ? 0 : LE_ECORRUPT;
}

int le__fwd_pick(const unsigned char *file, uint64_t len, le__fwd_cursor *c)
{
	unsigned char img[LE_FWD_FILE_BYTES] = {0};
	le__fwd_cursor a, b;

	memcpy(img, file, len < sizeof img ? (size_t)len : sizeof img);
	/* A slot sits where its generation says, or it is not trusted. */
	int ok_a = le__fwd_decode(img, &a) == 0 && a.gen % 2 == 0;
	int ok_b = le__fwd_decode(img + LE_FWD_SLOT1_OFF, &b) == 0 &&
	           b.gen % 2 == 1;
	if (ok_a && (!ok_b || a.gen > b.gen))
		*c = a;
	else if (ok_b)
		*c = b;
	else
		return LE_ECORRUPT;
	return 0;
}

ssize_t le__ship_read(const char *shard_dir, const char *name, void *buf,
                      size_t cap)
{
	char path[LE_PATH_MAX];
	int n = snprintf(path, sizeof path, "%s/%s", shard_dir, name);

	if (n < 0 || (size_t)n >= sizeof path)
		return -ENAMETOOLONG;
	int fd = le__open_in(path, LE_IN_SHARD, O_RDONLY, 0);
	if (fd < 0)
		return fd;
	ssize_t got = le__pread_full(fd, buf, cap, 0);
	le__close(fd);
	return got;
}

int le__fwd_read(const char *shard_dir, le__fwd_cursor *c)
{
	unsigned char buf[LE_FWD_FILE_BYTES];
	ssize_t got = le__ship_read(shard_dir, LE_FWD_NAME, buf, sizeof buf);

	return got < 0 ? (int)got : le__fwd_pick(buf, (uint64_t)got, c);
}

int le__fwd_write(int fd, const le__fwd_cursor *c)
{
	unsigned char slot[LE_FWD_SLOT];

	le__fwd_encode(slot, c);
	int rc = le__pwrite_all(fd, slot, sizeof slot,
	                        (c->gen % 2) ? LE_FWD_SLOT1_OFF : 0);
	return rc < 0 ? rc : le__fdatasync(fd);
}

int le__fwd_key(int fd, uint64_t *key)
{
	unsigned char b[LE_FWD_KEY_BYTES];
	ssize_t got = le__pread_full(fd, b, sizeof b, LE_FWD_KEY_OFF);

	if (got == (ssize_t)sizeof b && memcmp(b, LE_FWD_KEY_MAGIC, 8) == 0 &&
	    le__get32(b + 16) == le__crc_mask(le__crc32c_extend(0, b, 16))) {
		*key = le__get64(b + 8);
		return 0;
	}
	/* None yet, an older forwarder's file, or a torn first write: a
	 * new key costs only the server's dropping of this restart's
	 * resends, which the collector's fence drops instead. */
	if (getrandom(key, sizeof *key, 0) != (ssize_t)sizeof *key)
		return -errno;
	memcpy(b, LE_FWD_KEY_MAGIC, 8);
	le__put64(b + 8, *key);
	le__put32(b + 16, le__crc_mask(le__crc32c_extend(0, b, 16)));
	int rc = le__pwrite_all(fd, b, sizeof b, LE_FWD_KEY_OFF);
	return rc < 0 ? rc : le__fdatasync(fd);
}

int le__ship_done(const char *shard_dir, uint64_t index)
{
	le__fwd_cursor c;
	uint64_t end;
	int rc = le__fwd_read(shard_dir, &c);

	if (rc == -ENOENT)
		return 1; /* no forwarder */
	if (rc < 0 || le__seg_base(shard_dir, index + 1, &end) < 0)
		return 0;
	return c.next_seq >= end;
}

int le__ship_retain(const char *shard_dir, uint64_t index, uint64_t total,
                    uint64_t keep, uint64_t margin, _Atomic uint64_t *lost)
{
	le__fwd_cursor c;
	uint64_t base, end;

	int rc = le__fwd_read(shard_dir, &c);

	if (rc == -ENOENT)
		return 0; /* no forwarder: plain retention */
	if (rc < 0)
		c.next_seq = 0; /* torn first write: nothing known shipped */
	/* Where the segment's records end: the next segment's base. */
	if (le__seg_base(shard_dir, index + 1, &end) < 0)
		end = UINT64_MAX; /* unknown: treat the segment as unshipped */
	if (c.next_seq >= end)
		return 0;
	if (margin >= UINT64_MAX - keep || total <= keep + margin)
		return 1;
	if (le__seg_base(shard_dir, index, &base) < 0 || end == UINT64_MAX)
		base = end = 0; /* cannot count what we cannot read */
	if (c.next_seq > base)
		base = c.next_seq;
	if (end > base)
		atomic_fetch_add_explicit(lost, end - base, memory_order_relaxed);
	return 0;
}
