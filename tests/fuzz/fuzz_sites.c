/*
 * fuzz_sites.c -- libFuzzer target for the SITES table a dead process
 * leaves beside its QUEUE (sites.c: le__sitetab_open keeping the file,
 * le__sitetab_get on every entry): the descriptors of deferred records,
 * in a shared mapping a crashing process may have written over.
 *
 * Input layout:
 *
 *   byte 0   control
 *              bits 0-4  n, the table's entries (0..31)
 *              bit 5     header from the input: bytes 8..59 of the header
 *                        (version, n, area bytes, shard, boot) are the 52
 *                        bytes after the control byte, the CRC still made
 *                        to match (the header's own checks)
 *              bit 6     version 1 (the entry CRC without the site number)
 *              bit 7     the file one byte short or long (the size check)
 *   rest     the file from byte 64 on (the area's use word, the table of
 *            offsets, the area), zero-padded or cut to the file's size
 *
 * The file is written as DIR/shard-000/SITES and opened as le_open opens
 * it when a dead queue is there (keep).  Invariants (abort() on
 * violation):
 *   - the open succeeds: a damaged header makes the table anew and says
 *     why (hdr_damage), it never fails the engine
 *   - a header that checks out is kept (reused), and each entry the table
 *     gives lies inside the area, decodes as a descriptor of exactly the
 *     length given, and is given again the same on a second call
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/crc32c.h"
#include "record/defer.h"
#include "record/format.h"
#include "logengine.h"
#include "queue/queue.h"
#include "queue/sites.h"

#define FUZZ_NAME "fuzz_sites"
#include "fuzz.h"

#define BOOT 0x5eed5eed5eedull

static char path[512];

static void setup(void)
{
	char sd[300];
	REQUIRE(fuzz_shard_dir("sites", sd, sizeof sd) == 0);
	snprintf(path, sizeof path, "%s/SITES", sd);
	le__boot_id_set(BOOT);
}

static size_t file_bytes(uint32_t n)
{
	return LE_SITES_HDR + 4 * (size_t)n + (size_t)n * LE_SITES_AREA_PER;
}

/* The file image of the input; @return its length (img holds it). */
static size_t image(const uint8_t *data, size_t size, unsigned char *img,
                    size_t cap)
{
	uint32_t n = data[0] & 31;
	size_t len = file_bytes(n), at = 1;

	memset(img, 0, cap);
	memcpy(img, LE_SITES_MAGIC, 8);
	le__put32(img + 8, data[0] & 64 ? 1 : LE_SITES_VERSION);
	le__put32(img + 12, n);
	le__put32(img + 16, n * LE_SITES_AREA_PER);
	le__put32(img + 20, 0);
	le__put64(img + 24, BOOT);
	if ((data[0] & 32) && size >= 1 + 52) {
		memcpy(img + 8, data + 1, 52);
		at += 52;
	}
	le__put32(img + 60, le__crc_mask(le__crc32c_extend(0, img, 60)));
	if (data[0] & 128)
		len += data[0] & 1 ? 1 : (size_t)-1;
	if (size > at)
		memcpy(img + 64, data + at,
		       size - at < len - 64 ? size - at : len - 64);
	return len;
}

static void write_file(const unsigned char *img, size_t len)
{
	REQUIRE(fuzz_put(path, img, len) == 0);
}

/* Every entry the kept table gives is a whole descriptor in the area. */
static void check_entries(le__sitetab *t)
{
	for (uint32_t id = 0; id < t->n; id++) {
		size_t dl = 0, dl2 = 0;
		const unsigned char *p = le__sitetab_get(t, id, &dl);
		if (!p) {
			REQUIRE(t->why != NULL);
			continue;
		}
		REQUIRE(p >= t->area && dl >= LE_DESC_FIXED &&
		        p + dl <= t->area + t->area_bytes);
		le__desc d;
		const char *why;
		REQUIRE(le__desc_decode(p, dl, &d, &why) == dl);
		REQUIRE(le__sitetab_get(t, id, &dl2) == p && dl2 == dl);
	}
	REQUIRE(le__sitetab_get(t, t->n, &(size_t){0}) == NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static unsigned char img[LE_SITES_HDR + 32 * (4 + LE_SITES_AREA_PER)];
	le__sitetab t;

	if (size < 1)
		return 0;
	if (!path[0])
		setup();
	write_file(img, image(data, size, img, sizeof img));
	REQUIRE(le__sitetab_open(&t, path, 4, 0, 1, 0600) == 0);
	if (getenv("FUZZ_TRACE"))
		fprintf(stderr, "reused %d, damage %s\n", t.reused,
		        t.hdr_damage ? t.hdr_damage : "none");
	REQUIRE(t.reused != (t.hdr_damage != NULL));
	/* every file the input can make checks out in its default shape */
	REQUIRE(t.reused || (data[0] & (32 | 128)));
	if (t.reused)
		check_entries(&t);
	le__sitetab_close(&t);
	REQUIRE(fuzz_fds_left() == 0);
	return 0;
}
