/*
 * fuzz_collect.c -- libFuzzer target for what a collector decodes of what
 * a peer sends (collect_store.c): a message's origin host
 * (le__host_valid), its body of frames against its headers
 * (le__ship_check_body, le__ship_body_skip), a gap marker's text
 * (le__gap_marker_count), and the ORIGIN file of a collector's shard
 * directory (le__origin_decode).
 *
 * Input layout:
 *
 *   byte 0      control
 *                 bit 0  the rest is an ORIGIN file image, not a message
 *                 bit 1  the field set is LE_FIELD_ALL, not bytes 1-4
 *   bytes 1-4   field set (u32, masked to LE_FIELD_ALL)
 *   byte 5      shard
 *   bytes 6-9   first sequence - 1 (u32)
 *   bytes 10-11 count - 1 (u16)
 *   byte 12     host length h (0..63)
 *   h bytes     host
 *   rest        body
 *
 * Invariants (abort() on violation):
 *   - a body le__ship_check_body accepts is, decoded frame by frame with
 *     le__frame_decode, exactly `count` valid frames of that shard and
 *     those sequences, ending at its last byte; one it refuses gives an
 *     offset inside the body and a reason
 *   - le__ship_body_skip of an accepted body lands on each frame's start
 *   - the host check agrees with the documented alphabet and length
 *   - an ORIGIN image that decodes re-encodes to its own first bytes
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "logengine.h"
#include "record/format.h"
#include "ship/ship.h"

#define FUZZ_NAME "fuzz_collect"
#include "fuzz.h"

#define HDR 13

static int host_ok(const uint8_t *h, size_t n)
{
	if (n < 1 || n > LE_HOST_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((h[i] >= 'a' && h[i] <= 'z') || (h[i] >= 'A' && h[i] <= 'Z') ||
		      (h[i] >= '0' && h[i] <= '9') || h[i] == '.' ||
		      h[i] == '_' || h[i] == '-'))
			return 0;
	return 1;
}

static void origin(const uint8_t *in, size_t len)
{
	le__origin o;
	unsigned char again[LE_ORIGIN_MAX_BYTES];

	if (le__origin_decode(in, len, &o) != 0)
		return;
	REQUIRE(host_ok((const uint8_t *)o.host, strlen(o.host)));
	size_t n = le__origin_encode(again, &o);
	/* version 1 and 2 differ only by the kind word; compare as made */
	if (le__get16(in + 8) == (o.kind == LE_ORIGIN_CHAIN ? 1 : 2))
		REQUIRE(n <= len && memcmp(again, in, n) == 0);
}

/* An accepted body, walked again frame by frame. */
static void walk(const uint8_t *b, size_t len, uint32_t fields,
                 uint32_t shard, uint64_t first, uint64_t count)
{
	size_t off = 0;
	le__frame f;
	const char *why;

	for (uint64_t i = 0; i < count; i++) {
		REQUIRE(le__ship_body_skip(b, len, i) == off);
		REQUIRE(off < len);
		REQUIRE(le__frame_decode(b + off, len - off, fields,
		                         LE_FRAME_MAX, &f, &why) == LE_FRAME_OK);
		REQUIRE(!(fields & LE_FIELD_SHARD) || f.shard == shard);
		REQUIRE(!(fields & LE_FIELD_SEQUENCE) || f.seq == first + i);
		off += (size_t)f.size + 4;
	}
	REQUIRE(off == len && le__ship_body_skip(b, len, count) == len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < HDR)
		return 0;
	if (data[0] & 1) {
		origin(data + 1, size - 1);
		return 0;
	}
	uint32_t fields = data[0] & 2 ? LE_FIELD_ALL
	                              : le__get32(data + 1) & LE_FIELD_ALL;
	uint32_t shard = data[5];
	uint64_t first = (uint64_t)le__get32(data + 6) + 1;
	uint64_t count = (uint64_t)le__get16(data + 10) + 1;
	size_t h = data[12] & 63;
	if (size < HDR + h)
		return 0;
	const uint8_t *host = data + HDR, *body = host + h;
	size_t len = size - HDR - h;

	REQUIRE(le__host_valid((const char *)host, h) == host_ok(host, h));
	uint64_t n = le__gap_marker_count(body, len);
	REQUIRE(n <= LE_SHIP_SEQ_MAX);
	uint64_t bad = 0;
	const char *why = NULL;
	int rc = le__ship_check_body(body, len, fields, shard, first, count,
	                             &bad, &why);
	if (rc == 0)
		walk(body, len, fields, shard, first, count);
	else
		REQUIRE(rc == LE_ECORRUPT && why && bad <= len);
	return 0;
}
