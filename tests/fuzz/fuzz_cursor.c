/*
 * fuzz_cursor.c -- libFuzzer target for the reader's cursor strings
 * (reader_cursor.c: le_reader_seek_cursor), which a program or a user
 * hands back to resume reading (`logengine tail --cursor`), so any text.
 *
 * A log of two shards, several segments each, is written once per
 * process; one reader stays open on it.  The input, cut at its first NUL
 * and at 1023 bytes, is the cursor.
 *
 * Invariants (abort() on violation):
 *   - the seek returns 0, or LE_EINVAL with le_errmsg naming the cursor
 *     (the reader unchanged); nothing else on a sound log
 *   - after a seek that succeeds, the reader reads on without error, in
 *     order of each shard's sequence numbers
 *   - a record's own cursor leads back to the record after it: read A and
 *     B, seek to A's cursor, and the next record is B
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "logengine.h"

#define FUZZ_NAME "fuzz_cursor"
#include "fuzz.h"

#define RECORDS 600

static le_reader *rd;

/* The log: RECORDS records over two shards, 4 KiB segments. */
static void setup(void)
{
	char sd[300], line[64];
	le_config c;
	le_engine *e;

	REQUIRE(fuzz_shard_dir("cursor", sd, sizeof sd) == 0);
	le_config_init(&c);
	c.dir = fuzz_top;
	c.shards = 2;
	c.segment_bytes = 4096;
	c.durability = LE_SYNC_NONE;
	REQUIRE(le_open(&e, &c) == 0);
	for (int i = 0; i < RECORDS; i++) {
		int n = snprintf(line, sizeof line, "record %d", i);
		REQUIRE(le_write(e, (uint64_t)i % 3, LE_INFO, line,
		                 (size_t)n) == 0);
	}
	REQUIRE(le_close(e) == 0);
	le_reader_opts o;
	le_reader_opts_init(&o);
	REQUIRE(le_reader_open(&rd, fuzz_top, &o) == 0);
}

/* Read on after a seek: no error, each shard's sequence rising. */
static void read_on(void)
{
	uint64_t last[2] = {0, 0};
	le_record r;
	int rc;
	for (int k = 0; k < 4 && (rc = le_reader_next(rd, &r)) == 1; k++) {
		REQUIRE(r.shard < 2 && r.seq > last[r.shard]);
		last[r.shard] = r.seq;
	}
	REQUIRE(rc >= 0);
}

/* A record's cursor leads back to the record after it. */
static void round_trip(void)
{
	static char cur[LE_CURSOR_MAX];
	le_record a, b, again;
	if (le_reader_next(rd, &a) != 1)
		return;
	REQUIRE(le_reader_cursor(rd, cur, sizeof cur) > 0);
	if (le_reader_next(rd, &b) != 1)
		return;
	uint32_t shard = b.shard;
	uint64_t seq = b.seq;
	REQUIRE(le_reader_seek_cursor(rd, cur, NULL) == 0);
	REQUIRE(le_reader_next(rd, &again) == 1);
	REQUIRE(again.shard == shard && again.seq == seq);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char s[1024];
	if (!rd)
		setup();
	size_t n = size < sizeof s - 1 ? size : sizeof s - 1;
	memcpy(s, data, n);
	s[n] = '\0';
	int rc = le_reader_seek_cursor(rd, s, NULL);
	REQUIRE(rc == 0 || rc == LE_EINVAL);
	if (rc == LE_EINVAL) {
		REQUIRE(strstr(le_errmsg(), "cursor") != NULL);
		return 0;
	}
	read_on();
	REQUIRE(le_reader_seek_cursor(rd, s, NULL) == 0);
	round_trip();
	return 0;
}
