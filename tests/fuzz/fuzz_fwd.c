/*
 * fuzz_fwd.c -- libFuzzer target for a forwarder's cursor file,
 * DIR/shard-NNN/FORWARD (fwd_cursor.c): le__fwd_decode on each slot,
 * le__fwd_pick on the whole image, and le__fwd_key on the message-id key
 * between the slots.
 *
 * Input layout:
 *
 *   byte 0   control
 *              bit 0  seal slot 0 (magic and a CRC that matches), so that
 *                     mutations reach the generation checks
 *              bit 1  seal slot 1, the same at offset 512
 *              bit 2  seal the key (magic and CRC at offset 256)
 *   rest     the FORWARD file image, of any length
 *
 * Invariants (abort() on violation):
 *   - decode returns 0 or LE_ECORRUPT; a decoded slot re-encodes to the
 *     same 64 bytes
 *   - pick returns 0 or LE_ECORRUPT, and what it returns is the slot of
 *     highest generation among those that decode where their parity puts
 *     them
 *   - le__fwd_key keeps a key that checks out, and otherwise leaves one
 *     that does in the file: read again, it is the same
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/crc32c.h"
#include "logengine.h"
#include "record/format.h"
#include "store/fwd_cursor.h"

#define FUZZ_NAME "fuzz_fwd"
#include "fuzz.h"

static void seal(unsigned char *p, const char *magic, size_t crc_at)
{
	memcpy(p, magic, 8);
	le__put32(p + crc_at, le__crc_mask(le__crc32c_extend(0, p, crc_at)));
}

/* Slot at off decoded, and in its parity's place. */
static int slot_ok(const unsigned char *img, size_t off, le__fwd_cursor *c)
{
	int rc = le__fwd_decode(img + off, c);
	REQUIRE(rc == 0 || rc == LE_ECORRUPT);
	if (rc != 0)
		return 0;
	unsigned char again[LE_FWD_SLOT];
	le__fwd_encode(again, c);
	REQUIRE(memcmp(again, img + off, LE_FWD_SLOT) == 0);
	return c->gen % 2 == (off == 0 ? 0u : 1u);
}

static void key(const unsigned char *img, size_t len)
{
	static int fd = -1;
	uint64_t k1, k2;

	if (fd < 0)
		REQUIRE((fd = memfd_create("fuzz-fwd", 0)) >= 0);
	REQUIRE(ftruncate(fd, 0) == 0);
	REQUIRE(len == 0 || pwrite(fd, img, len, 0) == (ssize_t)len);
	const unsigned char *kb = img + LE_FWD_KEY_OFF;
	int valid = len >= LE_FWD_KEY_OFF + LE_FWD_KEY_BYTES &&
	            memcmp(kb, LE_FWD_KEY_MAGIC, 8) == 0 &&
	            le__get32(kb + 16) ==
	                    le__crc_mask(le__crc32c_extend(0, kb, 16));
	REQUIRE(le__fwd_key(fd, &k1) == 0);
	if (valid)
		REQUIRE(k1 == le__get64(kb + 8));
	REQUIRE(le__fwd_key(fd, &k2) == 0 && k2 == k1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned char img[LE_FWD_FILE_BYTES] = {0};
	le__fwd_cursor a, b, got;

	if (size < 1)
		return 0;
	size_t len = size - 1;
	unsigned char *file = malloc(len ? len : 1);
	REQUIRE(file);
	memcpy(file, data + 1, len);
	if ((data[0] & 1) && len >= LE_FWD_SLOT)
		seal(file, LE_FWD_MAGIC, 60);
	if ((data[0] & 2) && len >= LE_FWD_FILE_BYTES)
		seal(file + LE_FWD_SLOT1_OFF, LE_FWD_MAGIC, 60);
	if ((data[0] & 4) && len >= LE_FWD_KEY_OFF + LE_FWD_KEY_BYTES)
		seal(file + LE_FWD_KEY_OFF, LE_FWD_KEY_MAGIC, 16);
	memcpy(img, file, len < sizeof img ? len : sizeof img);

	int ok_a = slot_ok(img, 0, &a);
	int ok_b = slot_ok(img, LE_FWD_SLOT1_OFF, &b);
	int rc = le__fwd_pick(file, len, &got);
	REQUIRE(rc == 0 || rc == LE_ECORRUPT);
	REQUIRE((rc == 0) == (ok_a || ok_b));
	if (rc == 0) {
		const le__fwd_cursor *w = !ok_b ? &a : !ok_a ? &b
		                        : a.gen > b.gen ? &a : &b;
		REQUIRE(got.gen == w->gen && got.next_seq == w->next_seq &&
		        got.seg_index == w->seg_index &&
		        got.offset == w->offset && got.lost == w->lost &&
		        got.written_ns == w->written_ns &&
		        got.shard == w->shard);
	}
	key(file, len);
	free(file);
	return 0;
}
