/*
 * test_spool.c -- the public spool (le_spool_*): each stored record comes
 * once, in order, in batches within their limits; what stands in the way
 * (records gone, damage, a record too large, the end of what is stored)
 * comes as its typed event; the cursor committed is the one a reopen
 * reads.
 */
#include "harness.h"

#include <fcntl.h>
#include <sys/stat.h>

#include "logengine.h"
#include "record/format.h"

/* n records "r<k>" (k from 1) in one shard; seg_bytes per segment; record
 * big (1-based, 0: none) is `big_len` bytes. */
static void write_log(const char *dir, int n, uint64_t seg_bytes, int big,
                      size_t big_len)
{
	le_config cfg;
	le_engine *e;
	static char buf[8192];

	le_config_init(&cfg);
	cfg.dir = dir;
	cfg.segment_bytes = seg_bytes;
	cfg.overflow = LE_OVERFLOW_BLOCK;
	CHECK_RC(le_open(&e, &cfg));
	for (int k = 1; k <= n; k++) {
		size_t len = (size_t)snprintf(buf, sizeof buf, "r%d", k);
		if (k == big) {
			memset(buf + len, 'x', big_len - len);
			len = big_len;
		}
		CHECK_RC(le_write(e, 0, LE_INFO, buf, len));
	}
	CHECK_RC(le_close(e));
}

/* A FRAMES batch's bytes: count frames, each record first.. in turn
 * with the payload write_log gave it ("r<seq>"), and nothing after. */
static void check_frames(const le_spool_batch *ev)
{
	const unsigned char *p = ev->frames;
	size_t off = 0;
	char want[32];

	for (uint64_t seq = ev->first; seq < ev->first + ev->count; seq++) {
		le__frame f;
		const char *why;
		CHECK_EQ(le__frame_decode(p + off, ev->len - off, ev->fields,
		                          LE_FRAME_MAX, &f, &why),
		         LE_FRAME_OK);
		CHECK_EQ(f.seq, seq);
		int n = snprintf(want, sizeof want, "r%" PRIu64, seq);
		CHECK(f.len == (uint32_t)n && !memcmp(f.payload, want, f.len));
		off += (size_t)f.size + 4;
	}
	CHECK_EQ(off, ev->len);
}

/* Events until IDLE: frames counted into *frames (checked to follow on,
 * and each frame's bytes by check_frames), every other event's kind
 * counted in seen[]. */
static void drain(le_spool *sp, size_t max_bytes, uint64_t max_records,
                  uint64_t *next, int seen[8], uint64_t *frames)
{
	le_spool_batch ev;
	int rc;

	while ((rc = le_spool_next(sp, max_bytes, max_records, &ev)) !=
	       LE_SPOOL_IDLE) {
		CHECK(rc > 0 && rc < 8);
		seen[rc]++;
		if (rc == LE_SPOOL_FRAMES || rc == LE_SPOOL_GAP ||
		    rc == LE_SPOOL_TOO_BIG) {
			CHECK_EQ(ev.first, *next);
			*next += ev.count;
		}
		if (rc == LE_SPOOL_FRAMES) {
			CHECK(ev.len <= max_bytes && ev.frames != NULL);
			CHECK(!max_records || ev.count <= max_records);
			check_frames(&ev);
			*frames += ev.count;
		}
	}
}

TEST(every_record_comes_once_in_batches_within_both_limits)
{
	char dir[256];
	le_spool *sp;
	uint64_t next = 1, frames = 0;
	int seen[8] = {0};

	write_log(t_tmpdir(dir), 5000, 64 << 10, 0, 0);
	CHECK_RC(le_spool_open(&sp, dir, 0, 0));
	drain(sp, 4096, 100, &next, seen, &frames);
	CHECK_EQ(frames, 5000u);
	CHECK_EQ(next, 5001u);
	CHECK(seen[LE_SPOOL_ROTATED] >= 1); /* it crossed segments */
	CHECK_EQ(seen[LE_SPOOL_GAP] + seen[LE_SPOOL_DAMAGE], 0);
	le_spool_close(sp);
	t_rmrf(dir);
}

TEST(record_larger_than_max_bytes_comes_as_too_big_and_the_rest_moves)
{
	char dir[256];
	le_spool *sp;
	le_spool_batch ev;

	write_log(t_tmpdir(dir), 21, 1 << 20, 11, 3000);
	CHECK_RC(le_spool_open(&sp, dir, 0, 0));
	CHECK_EQ(le_spool_next(sp, 1000, 0, &ev), LE_SPOOL_FRAMES);
	CHECK(ev.first == 1 && ev.count == 10);
	CHECK_EQ(le_spool_next(sp, 1000, 0, &ev), LE_SPOOL_TOO_BIG);
	CHECK(ev.first == 11 && ev.count == 1 && ev.size > 3000);
	CHECK_EQ(le_spool_next(sp, 1000, 0, &ev), LE_SPOOL_FRAMES);
	CHECK(ev.first == 12 && ev.count == 10);
	CHECK_EQ(le_spool_next(sp, 1000, 0, &ev), LE_SPOOL_IDLE);
	le_spool_close(sp);
	t_rmrf(dir);
}

/* A flipped byte in a sealed segment: DAMAGE names segment and offset,
 * the records in it come as a GAP, the rest as frames. */
TEST(damage_in_a_sealed_segment_is_an_event_and_its_records_a_gap)
{
	char dir[256], path[400];
	le_spool *sp;
	uint64_t *idx, next = 1, frames = 0;
	size_t n;
	int seen[8] = {0};

	write_log(t_tmpdir(dir), 3000, 32 << 10, 0, 0);
	CHECK_RC(le_spool_segments(dir, 0, &idx, &n));
	CHECK(n >= 2);
	snprintf(path, sizeof path, "%s/shard-000/%016" PRIx64 ".seg", dir,
	         idx[0]);
	free(idx);
	int fd = open(path, O_RDWR);
	CHECK(fd >= 0);
	unsigned char c;
	CHECK(pread(fd, &c, 1, 8000) == 1);
	c ^= 0x55;
	CHECK(pwrite(fd, &c, 1, 8000) == 1);
	close(fd);
	CHECK_RC(le_spool_open(&sp, dir, 0, 0));
	drain(sp, 64 << 10, 0, &next, seen, &frames);
	CHECK_EQ(seen[LE_SPOOL_DAMAGE], 1);
	CHECK_EQ(seen[LE_SPOOL_GAP], 1);
	CHECK_EQ(next, 3001u);       /* every record: shipped or a gap */
	CHECK(frames >= 2990 && frames < 3000);
	le_spool_close(sp);
	t_rmrf(dir);
}

TEST(records_deleted_before_shipping_come_as_a_gap_from_one)
{
	char dir[256], path[400];
	le_spool *sp;
	le_spool_batch ev;
	le_spool_seg sg;
	uint64_t *idx;
	size_t n;

	write_log(t_tmpdir(dir), 3000, 32 << 10, 0, 0);
	CHECK_RC(le_spool_segments(dir, 0, &idx, &n));
	CHECK(n >= 2);
	CHECK_RC(le_spool_segment_info(dir, 0, idx[1], 3, &sg));
	snprintf(path, sizeof path, "%s/shard-000/%016" PRIx64 ".seg", dir,
	         idx[0]);
	CHECK_RC(unlink(path));
	free(idx);
	CHECK_RC(le_spool_open(&sp, dir, 0, 0));
	CHECK_EQ(le_spool_next(sp, 64 << 10, 0, &ev), LE_SPOOL_GAP);
	CHECK(ev.first == 1 && ev.count == sg.base_seq - 1 && ev.ts_ns > 0);
	CHECK_EQ(le_spool_next(sp, 64 << 10, 0, &ev), LE_SPOOL_FRAMES);
	CHECK_EQ(ev.first, sg.base_seq);
	le_spool_close(sp);
	t_rmrf(dir);
}

/* The cursor a commit wrote is the one the next open reads (and the
 * one without a spool, le_spool_cursor_read); what was read and not
 * acknowledged comes again after a rewind. */
TEST(committed_cursor_is_where_a_reopen_starts_and_rewind_reads_again)
{
	char dir[256];
	le_spool *sp;
	le_spool_batch ev;
	le_spool_cursor c, disk;

	write_log(t_tmpdir(dir), 100, 1 << 20, 0, 0);
	CHECK_RC(le_spool_open(&sp, dir, 0, 0));
	CHECK_EQ(le_spool_next(sp, 1 << 20, 40, &ev), LE_SPOOL_FRAMES);
	CHECK_RC(le_spool_ack(sp, ev.first + ev.count, ev.end_segment,
	                      ev.end_offset, 0));
	CHECK_RC(le_spool_commit(sp));
	CHECK_EQ(le_spool_next(sp, 1 << 20, 40, &ev), LE_SPOOL_FRAMES);
	CHECK_EQ(ev.first, 41u);
	CHECK_RC(le_spool_rewind(sp));
	CHECK_EQ(le_spool_next(sp, 1 << 20, 40, &ev), LE_SPOOL_FRAMES);
	CHECK_EQ(ev.first, 41u); /* not acknowledged: again */
	CHECK_RC(le_spool_cursor_get(sp, &c));
	le_spool_close(sp);
	CHECK_RC(le_spool_cursor_read(dir, 0, &disk));
	CHECK(disk.next_seq == 41 && disk.segment == c.segment &&
	      disk.offset == c.offset && c.key != 0);
	CHECK_RC(le_spool_open(&sp, dir, 0, 0));
	CHECK_EQ(le_spool_next(sp, 1 << 20, 0, &ev), LE_SPOOL_FRAMES);
	CHECK(ev.first == 41 && ev.count == 60);
	CHECK_RC(le_spool_cursor_get(sp, &disk));
	CHECK_EQ(disk.key, c.key); /* the key is drawn once */
	le_spool_close(sp);
	CHECK_EQ(le_spool_cursor_read(dir, 1, &disk), -ENOENT);
	t_rmrf(dir);
}

TEST(once_ends_at_what_was_stored_at_open)
{
	char dir[256];
	le_spool *sp;
	le_spool_batch ev;
	uint64_t got = 0;
	int rc;

	write_log(t_tmpdir(dir), 500, 1 << 20, 0, 0);
	CHECK_RC(le_spool_open(&sp, dir, 0, LE_SPOOL_ONCE));
	while ((rc = le_spool_next(sp, 4096, 0, &ev)) == LE_SPOOL_FRAMES)
		got += ev.count;
	CHECK_EQ(rc, LE_SPOOL_END);
	CHECK_EQ(got, 500u);
	le_spool_close(sp);
	t_rmrf(dir);
}

/* A program that passes NULL (an unset pointer, a failed open's handle)
 * gets LE_EINVAL or 0, never a crash: logging must not take it down. */
TEST(spool_and_collector_calls_refuse_null_without_crashing)
{
	le_spool *sp = (le_spool *)1;
	le_collector *co = (le_collector *)1;
	le_spool_batch b;
	le_spool_cursor c;
	le_spool_seg sg;
	le_collector_msg m = {0};
	le_collector_res r;
	uint64_t *segs;
	size_t n;

	CHECK_EQ(le_spool_open(NULL, "/nonexistent", 0, 0), LE_EINVAL);
	CHECK_EQ(le_spool_open(&sp, NULL, 0, 0), LE_EINVAL);
	CHECK(sp == NULL);
	CHECK_EQ(le_spool_next(NULL, 4096, 0, &b), LE_EINVAL);
	CHECK_EQ(le_spool_ack(NULL, 1, 0, 0, 0), LE_EINVAL);
	CHECK_EQ(le_spool_commit(NULL), LE_EINVAL);
	CHECK_EQ(le_spool_rewind(NULL), LE_EINVAL);
	CHECK_EQ(le_spool_cursor_get(NULL, &c), LE_EINVAL);
	le_spool_close(NULL);
	CHECK_EQ(le_spool_cursor_read(NULL, 0, &c), LE_EINVAL);
	CHECK_EQ(le_spool_cursor_read("/nonexistent", 0, NULL), LE_EINVAL);
	CHECK_EQ(le_spool_shards(NULL, NULL, 0), LE_EINVAL);
	CHECK_EQ(le_spool_segments(NULL, 0, &segs, &n), LE_EINVAL);
	CHECK_EQ(le_spool_segment_info(NULL, 0, 1, 3, &sg), LE_EINVAL);
	CHECK_EQ(le_spool_host_token(NULL, 0, "a"), 0);
	CHECK_EQ(le_spool_host_token(NULL, 0, NULL), 0);
	CHECK_EQ(le_collector_open(NULL, "/nonexistent", NULL, &r), LE_EINVAL);
	CHECK_EQ(le_collector_open(&co, NULL, NULL, NULL), LE_EINVAL);
	CHECK(co == NULL);
	CHECK_EQ(le_collector_append(NULL, &m, 0, &r), LE_EINVAL);
	CHECK_EQ(le_collector_append(NULL, NULL, 0, NULL), LE_EINVAL);
	CHECK_EQ(le_collector_sync(NULL), LE_EINVAL);
	CHECK_EQ(le_collector_next(NULL), 0);
	CHECK(le_collector_data(NULL) == NULL);
	le_collector_close(NULL);
	CHECK_EQ(le_collector_host_valid(NULL, 3), 0);
	CHECK_EQ(le_utf8_len(NULL, 5), 0);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	RUN(every_record_comes_once_in_batches_within_both_limits);
	RUN(record_larger_than_max_bytes_comes_as_too_big_and_the_rest_moves);
	RUN(damage_in_a_sealed_segment_is_an_event_and_its_records_a_gap);
	RUN(records_deleted_before_shipping_come_as_a_gap_from_one);
	RUN(committed_cursor_is_where_a_reopen_starts_and_rewind_reads_again);
	RUN(once_ends_at_what_was_stored_at_open);
	RUN(spool_and_collector_calls_refuse_null_without_crashing);
	return t_done();
}
