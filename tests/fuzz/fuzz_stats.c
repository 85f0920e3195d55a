/*
 * fuzz_stats.c -- libFuzzer target for the live counters page a reader
 * maps, DIR/shard-NNN/STATS (statpage.c: le_live_read_sized, through
 * le__statpage_copy and the page's decoding into a le_live): the page of
 * a running or dead engine, which may be anything.
 *
 * Input layout:
 *
 *   byte 0   control
 *              bit 0  seal the header (magic and a CRC that matches), so
 *                     that mutations reach the size and version checks
 *              bit 1  the file cut to the input's length (else padded
 *                     with zeros to the page's 4096 bytes)
 *   rest     the page
 *
 * Both slots' sequence counters are made even: an odd one is a writer in
 * the middle of a publication, which the reader waits out (10,000 tries),
 * a cost, not a decoding.
 *
 * Invariants (abort() on violation):
 *   - le_live_read_sized returns 0, LE_ECORRUPT or LE_EVERSION (with
 *     le_errmsg naming the file) and never reads outside the page
 *   - a page read is reported in one of the documented states
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/crc32c.h"
#include "live/statpage.h"
#include "logengine.h"
#include "queue/queue.h"
#include "record/format.h"

#define FUZZ_NAME "fuzz_stats"
#include "fuzz.h"

#define BOOT 0x5eed5eed5eedull /* the seeds' pages say this boot */

static char dir[256], path[512];

static void setup(void)
{
	char sd[300];
	REQUIRE(fuzz_shard_dir("stats", sd, sizeof sd) == 0);
	snprintf(dir, sizeof dir, "%s", fuzz_top);
	snprintf(path, sizeof path, "%s/STATS", sd);
	le__boot_id_set(BOOT);
}

static void even(unsigned char *page, size_t off)
{
	page[off] &= 0xfe;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static unsigned char page[LE_SP_BYTES];
	le_live l;

	if (size < 1)
		return 0;
	if (!dir[0])
		setup();
	size_t len = size - 1 < LE_SP_BYTES ? size - 1 : LE_SP_BYTES;
	memset(page, 0, sizeof page);
	memcpy(page, data + 1, len);
	if (data[0] & 1) {
		memcpy(page, LE_SP_MAGIC, 8);
		le__put32(page + 60,
		          le__crc_mask(le__crc32c_extend(0, page, 60)));
	}
	even(page, LE_SP_SLOT0_OFF);
	even(page, LE_SP_SLOT1_OFF);
	if (!(data[0] & 2))
		len = LE_SP_BYTES;
	REQUIRE(fuzz_put(path, page, len) == 0);

	int rc = le_live_read_sized(dir, 0, &l, sizeof l);
	REQUIRE(rc == 0 || rc == LE_ECORRUPT || rc == LE_EVERSION);
	REQUIRE(rc == 0 || strstr(le_errmsg(), "STATS"));
	if (rc == 0)
		REQUIRE(l.state == LE_LIVE_NONE || l.state == LE_LIVE_RUNNING ||
		        l.state == LE_LIVE_STALE || l.state == LE_LIVE_DEAD ||
		        l.state == LE_LIVE_CLOSED);
	REQUIRE(fuzz_fds_left() == 0);
	return 0;
}
