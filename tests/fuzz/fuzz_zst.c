/*
 * fuzz_zst.c -- libFuzzer target for an archived segment's file,
 * NAME.seg.zst (seg_zst.c): le__seg_open_read, which checks the zstd
 * frame's header (content size, compressed size) and decompresses it into
 * a memfd, and le__seg_head, which decompresses only the first bytes.
 *
 * Input layout: the archive file, whole.  An archive whose header claims
 * more than 1 MiB of content (and no more than the 1 GiB the library
 * accepts) is skipped: the library would allocate that much before
 * finding the frame short, by design (LE_ZST_MAX_BYTES), and a run of
 * such inputs measures memory, not decoding.
 *
 * Invariants (abort() on violation):
 *   - open gives a descriptor or LE_ECORRUPT with a reason, and says the
 *     archive was the file tried
 *   - a descriptor holds what zstd decompresses the input to, the frame's
 *     content size exactly, and the head read gives its first bytes
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "logengine.h"
#include "store/seg_zst.h"
#include "store/segname.h"

#define FUZZ_NAME "fuzz_zst"
#include "fuzz.h"

#define HEAD 4096
#define CONTENT_MAX (1u << 20)

static char seg[512], zst[600];

static void setup(void)
{
	char sd[300];
	REQUIRE(fuzz_shard_dir("zst", sd, sizeof sd) == 0);
	REQUIRE(le__seg_path(seg, sizeof seg, sd, 1) == 0);
	snprintf(zst, sizeof zst, "%s" LE_ZST_SUFFIX, seg);
}

/* The descriptor's bytes against zstd's own decompression of data. */
static void check_content(int fd, const uint8_t *data, size_t size)
{
	struct stat st;
	unsigned long long cs = ZSTD_getFrameContentSize(data, size);
	REQUIRE(cs <= CONTENT_MAX && fstat(fd, &st) == 0 &&
	        (unsigned long long)st.st_size == cs);
	unsigned char *want = malloc(cs + 1), *got = malloc(cs + 1);
	REQUIRE(want && got);
	REQUIRE(ZSTD_decompress(want, cs + 1, data, size) == cs);
	REQUIRE(pread(fd, got, cs + 1, 0) == (ssize_t)cs);
	REQUIRE(memcmp(want, got, cs) == 0);

	unsigned char head[HEAD];
	uint64_t len = 0;
	int archived = 0;
	ssize_t n = le__seg_head(seg, head, sizeof head, &len, &archived);
	REQUIRE(archived && len == cs);
	REQUIRE(n == (ssize_t)(cs < HEAD ? cs : HEAD));
	REQUIRE(memcmp(head, want, (size_t)n) == 0);
	free(want);
	free(got);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!seg[0])
		setup();
	unsigned long long cs = ZSTD_getFrameContentSize(data, size);
	if (cs != ZSTD_CONTENTSIZE_ERROR && cs != ZSTD_CONTENTSIZE_UNKNOWN &&
	    cs > CONTENT_MAX && cs <= LE_ZST_MAX_BYTES)
		return 0;
	REQUIRE(fuzz_put(zst, data, size) == 0);

	const char *why = NULL;
	int archived = 0;
	int fd = le__seg_open_read(seg, &archived, &why);
	REQUIRE(archived);
	if (fd >= 0) {
		check_content(fd, data, size);
		close(fd);
	} else {
		REQUIRE(fd == LE_ECORRUPT && why);
		/* the head is a hint for listings: any outcome, no crash */
		unsigned char head[HEAD];
		uint64_t len;
		le__seg_head(seg, head, sizeof head, &len, &archived);
	}
	REQUIRE(fuzz_fds_left() == 0); /* the content is a memfd, closed */
	return 0;
}
