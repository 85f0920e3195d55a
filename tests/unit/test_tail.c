/*
 * test_tail.c -- le_tail: one shard followed from a position, as a live
 * tail does: from the live page's last frame, across rotation, past
 * damage, and stopping before a frame still being written.
 */
#include "harness.h"

#include <fcntl.h>

#include "record/format.h"
#include "logengine.h"

static le_engine *open_engine(const char *dir, uint64_t segment_bytes)
{
	le_config c;
	le_engine *e;
	le_config_init(&c);
	c.dir = dir;
	c.flush_ms = 5;
	c.overflow = LE_OVERFLOW_BLOCK;
	if (segment_bytes)
		c.segment_bytes = segment_bytes;
	CHECK_RC(le_open(&e, &c));
	return e;
}

static void write_range(le_engine *e, int from, int to)
{
	char msg[64];
	for (int i = from; i < to; i++) {
		int len = snprintf(msg, sizeof msg, "record %d", i);
		CHECK_RC(le_write(e, 0, LE_INFO, msg, (size_t)len));
	}
	CHECK_RC(le_flush(e, -1));
}

/* The number in "record N", or -1. */
static int rec_no(const le_record *r)
{
	char b[64];
	size_t n = r->len < sizeof b - 1 ? r->len : sizeof b - 1;
	memcpy(b, r->payload, n);
	b[n] = '\0';
	int v;
	return sscanf(b, "record %d", &v) == 1 ? v : -1;
}

/* Read everything there now; @return how many, checking they are
 * "record first", "record first+1", ... */
static int drain(le_tail *t, int first)
{
	le_record r;
	int n = 0, rc;
	while ((rc = le_tail_next(t, &r)) == 1) {
		CHECK_EQ(rec_no(&r), first + n);
		n++;
	}
	CHECK_EQ(rc, 0);
	return n;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {0, (long)ms * 1000000};
	nanosleep(&ts, NULL);
}

TEST(tail_from_the_live_page_starts_at_the_latest_record_and_follows)
{
	char dir[256];
	le_live l;
	le_tail *t;
	uint64_t seg, off;

	t_tmpdir(dir);
	le_engine *e = open_engine(dir, 0);
	write_range(e, 0, 100);
	sleep_ms(3 * LE_LIVE_PERIOD_MS);
	CHECK_RC(le_live_read(dir, 0, &l));
	CHECK_RC(le_tail_open(&t, dir, 0, l.segment, l.last_frame_off));
	CHECK_EQ(drain(t, 99), 1);
	le_tail_position(t, &seg, &off);
	le_tail_close(t);
	CHECK_EQ(seg, l.segment);
	CHECK_EQ(off, l.segment_end);
	write_range(e, 100, 110);
	CHECK_RC(le_tail_open(&t, dir, 0, seg, off));
	CHECK_EQ(drain(t, 100), 10);
	le_tail_close(t);
	le_close(e);
	t_rmrf(dir);
}

TEST(tail_goes_on_into_the_next_segment)
{
	char dir[256];
	le_tail *t;
	le_record r;

	t_tmpdir(dir);
	le_engine *e = open_engine(dir, 4096);
	write_range(e, 0, 1000); /* ~40 segments of 4 KiB */
	CHECK_RC(le_tail_open(&t, dir, 0, 1, 0));
	CHECK_EQ(drain(t, 0), 1000);
	write_range(e, 1000, 1300);
	CHECK_EQ(drain(t, 1000), 300);
	le_tail_close(t);
	le_close(e);
	CHECK_EQ(le_tail_open(&t, dir, 0, 100000, 0), -ENOENT);
	CHECK_RC(le_tail_open(&t, dir, 0, 2, 0));
	CHECK_EQ(le_tail_next(t, &r), 1);
	CHECK(r.seq > 1);
	CHECK(rec_no(&r) > 0);
	le_tail_close(t);
	t_rmrf(dir);
}

/* A record's fields come with it, as from le_reader_next (a tail that
 * left them unset handed a follower garbage to read them from). */
TEST(tail_record_carries_its_fields_and_its_logger)
{
	char dir[256], text[1024];
	le_record r;
	le_tail *t;

	t_tmpdir(dir);
	le_engine *e = open_engine(dir, 0);
	le_logger *lg = le_logger_get(e, "net.http");
	le_warn_kv(lg, LE_FIELDS(LE_I64("status", 503)), "refused");
	CHECK_RC(le_write(e, 0, LE_INFO, "plain", 5));
	CHECK_RC(le_flush(e, -1));
	CHECK_RC(le_tail_open(&t, dir, 0, 1, 0));
	memset(&r, 0xa5, sizeof r);
	CHECK_EQ(le_tail_next(t, &r), 1);
	CHECK(r.fields_len > 0 && r.host == NULL);
	CHECK(le_record_fields_format(&r, LE_STREAM_TEXT, text,
	                              sizeof text) > 0);
	CHECK(strstr(text, "logger=net.http") && strstr(text, "status=503"));
	memset(&r, 0xa5, sizeof r);
	CHECK_EQ(le_tail_next(t, &r), 1);
	CHECK(r.fields == NULL && r.fields_len == 0);
	le_tail_close(t);
	CHECK_RC(le_close(e));
	t_rmrf(dir);
}

static char *seg_path(char *buf, const char *dir, int index)
{
	snprintf(buf, 512, "%s/shard-000/%016x.seg", dir, index);
	return buf;
}

/* A closed log in a new dir: "record 0" to "record n-1" in shard 0. */
static void closed_log(char *dir, size_t segment_bytes, int n)
{
	t_tmpdir(dir);
	le_engine *e = open_engine(dir, segment_bytes);
	write_range(e, 0, n);
	CHECK_RC(le_close(e));
}

TEST(tail_steps_over_damage_and_stops_before_a_frame_cut_short)
{
	char dir[256], path[512];
	le_tail *t;
	le_record r;

	closed_log(dir, 0, 50);
	size_t len;
	unsigned char *whole = t_slurp(seg_path(path, dir, 1), &len);
	CHECK(whole);
	/* every frame of "record N" with all fields: 28 + 8 or 9 bytes */
	CHECK_RC(le_tail_open(&t, dir, 0, 1, 0));
	CHECK_EQ(le_tail_next(t, &r), 1);
	uint64_t second = 0;
	le_tail_position(t, NULL, &second);
	le_tail_close(t);
	/* damage inside the second frame's payload */
	int fd = open(path, O_WRONLY);
	CHECK(fd >= 0);
	CHECK_EQ(pwrite(fd, "X", 1, (off_t)second + 30), 1);
	/* and the file cut in the middle of its last frame */
	CHECK_EQ(ftruncate(fd, (off_t)len - 3), 0);
	CHECK_RC(le_tail_open(&t, dir, 0, 1, 0));
	int got[64], n = 0, rc;
	while ((rc = le_tail_next(t, &r)) == 1 && n < 64)
		got[n++] = rec_no(&r);
	CHECK_EQ(rc, 0);
	CHECK_EQ(n, 48); /* 0, then 2..48: 1 damaged, 49 not whole yet */
	CHECK_EQ(got[0], 0);
	CHECK_EQ(got[1], 2);
	CHECK_EQ(got[47], 48);
	uint64_t off;
	le_tail_position(t, NULL, &off);
	le_tail_close(t);
	/* the rest of the last frame arrives */
	CHECK_EQ(pwrite(fd, whole + len - 3, 3, (off_t)len - 3), 3);
	close(fd);
	CHECK_RC(le_tail_open(&t, dir, 0, 1, off));
	CHECK_EQ(drain(t, 49), 1);
	le_tail_close(t);
	free(whole);
	t_rmrf(dir);
}

/* A writer creates a segment, then writes its header: a tail that finds
 * the next segment empty, its header cut short or zeros, waits for it as
 * for a frame cut short, whether it reached that segment or started
 * there. */
TEST(tail_waits_for_a_new_segment_s_header)
{
	char dir[256], path[512];
	le_tail *t;
	le_record r;

	closed_log(dir, 4096, 300);
	int last = 1;
	while (access(seg_path(path, dir, last + 1), F_OK) == 0)
		last++;
	CHECK(last >= 3);
	size_t len;
	unsigned char *whole = t_slurp(seg_path(path, dir, last), &len);
	CHECK(whole && len > LE_SEG_HDR);
	CHECK_RC(le_tail_open(&t, dir, 0, (uint64_t)last, 0));
	CHECK_EQ(le_tail_next(t, &r), 1);
	int k0 = rec_no(&r);
	CHECK(k0 > 0);
	le_tail_close(t);
	/* empty, cut inside its header, preallocated (zeros) */
	unsigned char *zeros = calloc(1, len);
	CHECK(zeros);
	const unsigned char *early[] = {whole, whole, zeros};
	const size_t cut[] = {0, 10, len};
	const int start[] = {1, last}; /* reaches it, or starts there */
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < 2; j++) {
			CHECK_EQ(t_spit(path, early[i], cut[i]), 0);
			CHECK_RC(le_tail_open(&t, dir, 0, (uint64_t)start[j], 0));
			CHECK_EQ(drain(t, 0), j == 0 ? k0 : 0);
			CHECK_EQ(le_tail_next(t, &r), 0);
			CHECK_EQ(t_spit(path, whole, len), 0);
			CHECK_EQ(drain(t, k0), 300 - k0);
			le_tail_close(t);
		}
	free(zeros);
	free(whole);
	t_rmrf(dir);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	RUN(tail_from_the_live_page_starts_at_the_latest_record_and_follows);
	RUN(tail_goes_on_into_the_next_segment);
	RUN(tail_steps_over_damage_and_stops_before_a_frame_cut_short);
	RUN(tail_waits_for_a_new_segment_s_header);
	RUN(tail_record_carries_its_fields_and_its_logger);
	return t_done();
}
