/*
 * fuzz_checkpoint.c -- libFuzzer target for the checkpoint decoders of
 * codec.c: le__ckpt_decode on one slot, le__ckpt_pick on a whole file image.
 *
 * Input layout:
 *
 *   byte 0   control
 *              bit 0  seal slot 0: write the magic and a correct CRC into
 *                     the bytes at offset 0 (when there are 64), so that
 *                     mutations reach the generation and parity checks
 *              bit 1  seal slot 1, the same at offset 512
 *   rest     the CHECKPOINT file image, of any length
 *
 * Invariants checked (abort() on violation):
 *   - decode returns 0 or LE_ECORRUPT; a decoded slot re-encodes to the
 *     very same 64 bytes (every byte of a slot is covered)
 *   - pick returns 0 or LE_ECORRUPT, never reads past the image, and what
 *     it returns is a slot that decodes where its generation's parity puts
 *     it, with the highest generation of the slots that do
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/crc32c.h"
#include "record/format.h"

#define REQUIRE(c)                                                            \
	do {                                                                  \
		if (!(c)) {                                                   \
			fprintf(stderr, "fuzz_checkpoint: %s:%d: %s\n",       \
			        __FILE__, __LINE__, #c);                      \
			abort();                                              \
		}                                                             \
	} while (0)

static void seal(unsigned char *slot)
{
	memcpy(slot, LE_CKPT_MAGIC, 8);
	le__put32(slot + 60, le__crc_mask(le__crc32c_extend(0, slot, 60)));
}

/* Decode the slot at off when the image holds it and its parity fits. */
static int slot_ok(const unsigned char *img, size_t len, size_t off,
                   le__ckpt *c)
{
	if (len < off + LE_CKPT_SLOT)
		return 0;
	int rc = le__ckpt_decode(img + off, c);
	REQUIRE(rc == 0 || rc == LE_ECORRUPT);
	if (rc != 0)
		return 0;
	REQUIRE(c->gen != 0);
	unsigned char again[LE_CKPT_SLOT];
	le__ckpt_encode(again, c);
	REQUIRE(memcmp(again, img + off, LE_CKPT_SLOT) == 0);
	return (c->gen % 2) == (off == 0 ? 0u : 1u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t len = size - 1;
	unsigned char *img = malloc(len ? len : 1);
	le__ckpt a, b, got;

	REQUIRE(img);
	memcpy(img, data + 1, len);
	if ((data[0] & 1) && len >= LE_CKPT_SLOT)
		seal(img);
	if ((data[0] & 2) && len >= LE_CKPT_SLOT1_OFF + LE_CKPT_SLOT)
		seal(img + LE_CKPT_SLOT1_OFF);

	int ok_a = slot_ok(img, len, 0, &a);
	int ok_b = slot_ok(img, len, LE_CKPT_SLOT1_OFF, &b);
	int rc = le__ckpt_pick(img, len, &got);
	REQUIRE(rc == 0 || rc == LE_ECORRUPT);
	REQUIRE((rc == 0) == (ok_a || ok_b));
	if (rc == 0) {
		const le__ckpt *want = !ok_b ? &a : !ok_a ? &b
		                     : a.gen > b.gen ? &a : &b;
		REQUIRE(got.gen == want->gen &&
		        got.seg_index == want->seg_index &&
		        got.offset == want->offset &&
		        got.next_seq == want->next_seq &&
		        got.last_ts == want->last_ts &&
		        got.last_off == want->last_off &&
		        got.shard == want->shard);
	}
	free(img);
	return 0;
}
