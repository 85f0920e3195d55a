/*
 * fuzz_frame.c -- libFuzzer target for the frame and segment header
 * decoders of codec.c (le__frame_decode, le__seg_hdr_decode), with the
 * CRC code they stand on checked against itself on the way.
 *
 * Input layout:
 *
 *   byte 0   control
 *              bits 0-4  fields: the LE_FIELD_* set to decode with
 *              bit  5    seal: recompute the CRC word of every frame whose
 *                        size word fits, so mutations reach the checks
 *                        that follow the CRC (flags, level, length)
 *              bits 6-7  max_size: 0 LE_FRAME_MAX, 1 UINT32_MAX (the
 *                        decoder must clamp it), 2 the bytes available,
 *                        3 byte 1 (a tiny bound)
 *   byte 1   tiny bound for max_size mode 3
 *   rest     bytes to decode, copied into an allocation of exactly their
 *            length so that ASan sees any read past them
 *
 * Invariants checked (abort() on violation, so libFuzzer keeps the input):
 *   - every outcome is one of the four LE_FRAME_*; a non-OK one has a why
 *   - an OK frame lies inside the bytes given, its fields are in range and
 *     absent fields have their "absent" values, and encoding what was
 *     decoded gives back exactly the bytes decoded (so nothing was read
 *     from the wrong place and the CRC check is not vacuous)
 *   - frames are walked back to back as the scanner does
 *   - a frame with LE_REC_FIELDS has a field block that walks to its end
 *     field by field, and prints in every style within the bound the
 *     outputs reserve (LE_FIELDS_TEXT_MAX)
 *   - a segment header that decodes re-encodes to the same fields, and to
 *     the same bytes when its reserved bytes were zero
 *   - le__frame_seal's four-way CRC (le__crc32c_multi) equals the one-way
 *     CRC for up to four frames cut from the input, and the software CRC
 *     equals the hardware one
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/crc32c.h"
#include "record/fields.h"
#include "record/format.h"

#define REQUIRE(c)                                                            \
	do {                                                                  \
		if (!(c)) {                                                   \
			fprintf(stderr, "fuzz_frame: %s:%d: %s\n", __FILE__,  \
			        __LINE__, #c);                                \
			abort();                                              \
		}                                                             \
	} while (0)

/* Recompute the CRC word of each frame along buf whose size word fits. */
static void seal_all(unsigned char *buf, size_t len, uint32_t fields)
{
	size_t off = 0;
	uint32_t fixed = le__frame_fixed(fields);

	if (!(fields & LE_FIELD_CRC))
		return;
	while (len - off >= 8) {
		uint32_t size = le__get32(buf + off);
		if (size < fixed - 4 || (uint64_t)size + 4 > len - off)
			return;
		unsigned char *f = buf + off;
		le__frame_seal(&f, 1);
		off += (size_t)size + 4;
	}
}

/* A field block the decoder accepted: every field decodes, and every
 * style prints within the bound its callers reserve. */
static void check_fields(const unsigned char *b, uint32_t len)
{
	size_t pos = 0, cap = LE_FIELDS_TEXT_MAX(len);
	le_field f;
	int rc;

	while ((rc = le__field_next(b, len, &pos, &f)) == 1)
		REQUIRE(f.key_len >= 1 && pos <= len);
	REQUIRE(rc == 0 && pos == len);
	unsigned char *out = malloc(cap);
	REQUIRE(out);
	for (int style = LE__FMT_TEXT; style <= LE__FMT_SD; style++)
		REQUIRE(le__fields_format(out, cap, style, b, len) <= cap);
	free(out);
}

/* Check one decoded frame against the bytes it came from. */
static void check_ok(const unsigned char *buf, uint64_t avail,
                     uint32_t fields, uint32_t max_size, const le__frame *f)
{
	uint32_t fixed = le__frame_fixed(fields);
	uint32_t bound = max_size > LE_FRAME_MAX ? LE_FRAME_MAX : max_size;

	REQUIRE(f->size >= fixed - 4 && f->size <= bound);
	REQUIRE((uint64_t)f->size + 4 <= avail);
	REQUIRE((f->flags & ~LE_REC_KNOWN_FLAGS) == 0);
	const unsigned char *raw = buf + fixed;
	uint32_t raw_len = f->size + 4 - fixed;
	if (f->flags & LE_REC_FIELDS) {
		REQUIRE(f->fields == raw + 4);
		REQUIRE(f->fields_len == le__get32(raw) && f->fields_len > 0);
		REQUIRE(f->payload == f->fields + f->fields_len);
		REQUIRE((uint64_t)f->len + 4 + f->fields_len == raw_len);
		check_fields(f->fields, f->fields_len);
	} else {
		REQUIRE(f->fields == NULL && f->fields_len == 0);
		REQUIRE(f->payload == raw);
		REQUIRE(f->len == raw_len);
	}
	if (fields & LE_FIELD_LEVEL)
		REQUIRE(f->level >= LE_TRACE && f->level <= LE_FATAL);
	else
		REQUIRE(f->level == -1);
	if (fields & LE_FIELD_SHARD)
		REQUIRE(f->shard <= 0xffff);
	else
		REQUIRE(f->shard == UINT32_MAX);
	if (!(fields & LE_FIELD_SEQUENCE))
		REQUIRE(f->seq == 0);
	if (!(fields & LE_FIELD_TIMESTAMP))
		REQUIRE(f->ts == 0);

	/* What was decoded encodes back to the very same bytes. */
	unsigned char *again = malloc((size_t)f->size + 4);
	REQUIRE(again);
	uint32_t n = le__frame_encode(again, fields, f->flags, f->level,
	                              f->shard, f->seq, f->ts, raw, raw_len);
	REQUIRE(n == f->size + 4);
	REQUIRE(memcmp(again, buf, n) == 0);
	free(again);
}

/* Decode frames back to back from buf, as the scanner walks a segment. */
static void walk(const unsigned char *buf, size_t len, uint32_t fields,
                 uint32_t max_size)
{
	size_t off = 0;

	for (;;) {
		le__frame f;
		const char *why = NULL;
		int rc = le__frame_decode(buf + off, len - off, fields,
		                          max_size, &f, &why);
		REQUIRE(rc >= LE_FRAME_OK && rc <= LE_FRAME_BAD);
		if (rc != LE_FRAME_OK) {
			REQUIRE(why != NULL && why[0] != '\0');
			if (rc == LE_FRAME_END)
				REQUIRE(off == len || le__get32(buf + off) == 0);
			if (rc == LE_FRAME_SHORT && len - off >= 4)
				REQUIRE((uint64_t)le__get32(buf + off) + 4 >
				        len - off);
			return;
		}
		check_ok(buf + off, len - off, fields, max_size, &f);
		off += (size_t)f.size + 4;
	}
}

static void check_header(const unsigned char *in)
{
	le__seg_hdr h, h2;
	unsigned char out[LE_SEG_HDR];
	int rc = le__seg_hdr_decode(in, &h);

	REQUIRE(rc == 0 || rc == LE_ECORRUPT || rc == LE_EVERSION);
	if (rc != 0)
		return;
	REQUIRE(h.version >= LE_SEG_VERSION_MIN && h.version <= LE_SEG_VERSION);
	REQUIRE((h.fields & ~LE_FIELD_ALL) == 0);
	le__seg_hdr_encode(out, &h);
	REQUIRE(le__seg_hdr_decode(out, &h2) == 0);
	REQUIRE(h2.fields == h.fields && h2.shard == h.shard &&
	        h2.index == h.index && h2.base_seq == h.base_seq &&
	        h2.created_ns == h.created_ns);
	/* Bytes 20..23 and 48..59 are reserved: encode writes zeros there. */
	REQUIRE(memcmp(out, in, 20) == 0);
	REQUIRE(memcmp(out + 24, in + 24, 24) == 0);
	static const unsigned char zero[12];
	if (memcmp(in + 20, zero, 4) == 0 && memcmp(in + 48, zero, 12) == 0)
		REQUIRE(memcmp(out, in, LE_SEG_HDR) == 0);
}

/* Up to four frames with payloads cut from the input, sealed together,
 * must each carry the CRC the one-frame path computes. */
static void check_multi_seal(const unsigned char *data, size_t len)
{
	unsigned char *fr[4];
	uint32_t plen[4];
	int n = (int)(len % 4) + 1;
	size_t off = 0;

	for (int i = 0; i < n; i++) {
		size_t left = len - off;
		plen[i] = (uint32_t)(i + 1 < n ? left / (size_t)(n - i) : left);
		fr[i] = malloc(LE_FRAME_FIXED_MAX + (size_t)plen[i]);
		REQUIRE(fr[i]);
		le__frame_put(fr[i], LE_FIELD_ALL, 0, LE_INFO, 7,
		              (uint64_t)i + 1, 99, data + off, plen[i]);
		off += plen[i];
	}
	le__frame_seal(fr, n);
	for (int i = 0; i < n; i++) {
		le__frame f;
		const char *why;
		uint32_t total = LE_FRAME_FIXED_MAX + plen[i];
		REQUIRE(le__frame_decode(fr[i], total, LE_FIELD_ALL,
		                         LE_FRAME_MAX, &f, &why) == LE_FRAME_OK);
		REQUIRE(f.len == plen[i] && f.seq == (uint64_t)i + 1);
		free(fr[i]);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	uint32_t fields = data[0] & LE_FIELD_ALL;
	int seal = (data[0] >> 5) & 1, how = data[0] >> 6;
	size_t len = size - 2;
	uint32_t max_size = how == 0 ? LE_FRAME_MAX
	                  : how == 1 ? UINT32_MAX
	                  : how == 2 ? (uint32_t)len
	                             : data[1];
	unsigned char *buf = malloc(len ? len : 1);

	REQUIRE(buf);
	memcpy(buf, data + 2, len);
	if (seal)
		seal_all(buf, len, fields);
	walk(buf, len, fields, max_size);
	if (len >= LE_SEG_HDR)
		check_header(buf);
	REQUIRE(le__crc32c_extend(0, buf, len) == le__crc32c_sw(0, buf, len));
	check_multi_seal(buf, len);
	free(buf);
	return 0;
}
