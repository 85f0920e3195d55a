/*
 * fuzz_index.c -- libFuzzer target for the time index file of a sealed
 * segment (index.c: le__index_decode, then le__index_find_time and
 * le__index_find_seq on what it accepts): IIIIIIIIIIIIIIII.idx, a hint a
 * reader must never trust further than its checks.
 *
 * Input layout:
 *
 *   byte 0    control
 *               bit 0  seal the entries: the entries CRC (bytes 84..87)
 *                      made to match the entries the header counts
 *               bit 1  seal the header: its CRC (bytes 92..95) made to
 *                      match, after bit 0's
 *   bytes 1-8 a time and a sequence to look up (u32 each, scaled)
 *   rest      the file image, of any length
 *
 * Invariants (abort() on violation):
 *   - decode returns 0, LE_ECORRUPT or LE_EVERSION (with a reason)
 *   - what it accepts re-encodes to the very same bytes, and its entries
 *     are in order inside the range covered
 *   - a look-up by time or sequence lands on an entry's offset or on end,
 *     never before the first frame
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/crc32c.h"
#include "logengine.h"
#include "record/format.h"
#include "store/index.h"

#define FUZZ_NAME "fuzz_index"
#include "fuzz.h"

static void seal(unsigned char *img, size_t len, int ctl)
{
	if (len < LE_IDX_HDR)
		return;
	if (ctl & 1) {
		uint64_t n = le__get32(img + 80);
		uint32_t c = 0;
		if (len >= LE_IDX_HDR + n * LE_IDX_ENTRY)
			c = le__crc32c_extend(0, img + LE_IDX_HDR,
			                      (size_t)n * LE_IDX_ENTRY);
		le__put32(img + 84, le__crc_mask(c));
	}
	if (ctl & 2)
		le__put32(img + 92, le__crc_mask(le__crc32c_extend(0, img, 92)));
}

/* An offset a look-up returned: an entry's, or end. */
static int is_entry_off(const le__index *x, uint64_t off)
{
	for (size_t i = 0; i < x->n; i++)
		if (x->e[i].off == off)
			return 1;
	return off == x->end;
}

static void check_accepted(const le__index *x, const unsigned char *img,
                           size_t len, uint64_t ts, uint64_t seq)
{
	unsigned char *again = malloc(len);
	uint64_t off, at;

	REQUIRE(again && le__index_encode(again, x) == len);
	REQUIRE(memcmp(again, img, len) == 0);
	free(again);
	for (size_t i = 1; i < x->n; i++)
		REQUIRE(x->e[i].off > x->e[i - 1].off &&
		        x->e[i].seq > x->e[i - 1].seq);
	le__index_find_time(x, ts, &off, &at);
	REQUIRE(off >= LE_SEG_HDR && off <= x->end && is_entry_off(x, off));
	if (x->records && seq - x->base_seq < x->records) {
		le__index_find_seq(x, seq, &off, &at);
		REQUIRE(off >= LE_SEG_HDR && off < x->end &&
		        is_entry_off(x, off) && at <= seq);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 9)
		return 0;
	size_t len = size - 9;
	unsigned char *img = malloc(len ? len : 1);
	le__index x;
	const char *why = NULL;

	REQUIRE(img);
	memcpy(img, data + 9, len);
	seal(img, len, data[0]);
	int rc = le__index_decode(img, len, &x, &why);
	REQUIRE(rc == 0 || rc == LE_ECORRUPT || rc == LE_EVERSION);
	REQUIRE(rc == 0 || why != NULL);
	if (rc == 0) {
		/* near the index's own values, where the look-ups branch */
		uint64_t ts = x.ts_min + le__get32(data + 1);
		uint64_t seq = x.base_seq + le__get32(data + 5) % 4096;
		check_accepted(&x, img, len, ts, seq);
		le__index_free(&x);
	}
	free(img);
	return 0;
}
