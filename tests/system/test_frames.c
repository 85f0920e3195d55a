/*
 * test_frames.c -- the dashboard's frames (tools/frame.c, serve's
 * /events) are built from the live set only: a frame for an engine with
 * 10,000 old segments is the size of one with 10 (but for the digits of
 * the counts), and a directory that once had 256 shards and now runs 1
 * gives a frame of 1.  Each case prints its frame's bytes and its build
 * time (the median of 21 builds), for the record: the assertions are on
 * bytes, never on time.
 */
#include "harness.h"

#include "frame.h"
#include "logengine.h"

/* An engine on dir with `shards` shards, its segments 4 KiB, writing
 * until shard 0 has made `segments` of them; then closed. */
static void make_history(const char *dir, unsigned shards, uint64_t segments)
{
	le_config c;
	mkdir(dir, 0755);
	le_engine *e;
	le_stats st;
	char msg[128];

	le_config_init(&c);
	c.dir = dir;
	c.shards = shards;
	c.segment_bytes = 4096;
	c.durability = LE_SYNC_NONE;
	c.checkpoint_ms = 0;
	c.overflow = LE_OVERFLOW_BLOCK;
	CHECK_RC(le_open(&e, &c));
	memset(msg, 'x', sizeof msg);
	for (uint64_t i = 0;; i++) {
		CHECK_RC(le_write(e, i, LE_INFO, msg, 100));
		if (i % 1024 == 0) {
			CHECK_RC(le_stats_get(e, &st));
			if (st.segments_created >= segments * shards)
				break;
		}
	}
	CHECK_RC(le_close(e));
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* A frame's length with every number written as one digit: what a
 * frame holds, whatever the counts are (10 or 10000 segments). */
static size_t shape(const char *s)
{
	size_t n = 0;
	for (; *s; s++)
		if (!(*s >= '0' && *s <= '9' && s[1] >= '0' && s[1] <= '9'))
			n++;
	return n;
}

/* Build frames of dir until one has no new record; @return its bytes,
 * *us the median build time, *shape_len its shape(). */
static size_t frame_of(const char *dir, double *us, int *nshards,
                       size_t *shape_len)
{
	struct frames f;
	char *dirs[1] = {(char *)dir};
	uint64_t t[21];
	size_t bytes = 0;

	CHECK_EQ(frames_init(&f, dirs, 1), 0);
	for (int i = 0; i < 3; i++) { /* the tails catch up */
		struct buf b;
		buf_init(&b, 1u << 26);
		frames_build(&f, &b, NULL);
		buf_free(&b);
	}
	for (int i = 0; i < 21; i++) {
		struct buf b;
		buf_init(&b, 1u << 26);
		uint64_t t0 = live_mono_ns();
		frames_build(&f, &b, NULL);
		t[i] = live_mono_ns() - t0;
		CHECK(!b.full);
		CHECK(strstr(b.p, "\"tail\":[]")); /* nothing new */
		bytes = b.len;
		*shape_len = shape(b.p);
		buf_free(&b);
	}
	*nshards = (int)f.dirs[0].live.n;
	frames_free(&f);
	qsort(t, 21, sizeof *t, cmp_u64);
	*us = (double)t[10] / 1e3;
	return bytes;
}

TEST(frame_bytes_do_not_grow_with_10000_old_segments)
{
	char base[256], dir[300];
	double ua, ub;
	int na, nb;
	size_t sa, sb;

	/* one path for both, so that only the history differs */
	t_tmpdir(base);
	snprintf(dir, sizeof dir, "%s/log", base);
	make_history(dir, 1, 10);
	size_t fa = frame_of(dir, &ua, &na, &sa);
	t_rmrf(dir);
	make_history(dir, 1, 10000);
	size_t fb = frame_of(dir, &ub, &nb, &sb);
	fprintf(stderr, "  1 shard, %5d segments: %zu bytes, %.1f us a frame\n",
	        10, fa, ua);
	fprintf(stderr, "  1 shard, %5d segments: %zu bytes, %.1f us a frame\n",
	        10000, fb, ub);
	CHECK_EQ(na, 1);
	CHECK_EQ(nb, 1);
	/* The same frame but for its numbers' digits (the segment count and
	 * the disk bytes have three more each, latencies vary). */
	CHECK_EQ(sa, sb);
	t_rmrf(base);
}

TEST(frame_of_256_shards_holds_256_and_of_a_restart_with_1_holds_1)
{
	char a[256], b[256];
	double u1, u256, urestart;
	int n1, n256, nrestart;
	size_t s1, s256, sr;

	t_need_fds(256 * 4 + 64); /* an engine holds about 4 a shard */
	t_tmpdir(a);
	t_tmpdir(b);
	make_history(a, 1, 1);
	make_history(b, 256, 1);
	size_t f1 = frame_of(a, &u1, &n1, &s1),
	       f256 = frame_of(b, &u256, &n256, &s256);
	fprintf(stderr, "  %3d shard(s): %zu bytes, %.1f us a frame\n", n1, f1,
	        u1);
	fprintf(stderr, "  %3d shard(s): %zu bytes, %.1f us a frame\n", n256,
	        f256, u256);
	CHECK_EQ(n1, 1);
	CHECK_EQ(n256, 256);
	CHECK(f256 > f1);
	/* the same directory, opened again with 1 shard: the 255 others
	 * are history, not read */
	le_config c;
	le_engine *e;
	le_config_init(&c);
	c.dir = b;
	c.shards = 1;
	CHECK_RC(le_open(&e, &c));
	CHECK_RC(le_close(e));
	size_t fr = frame_of(b, &urestart, &nrestart, &sr);
	fprintf(stderr, "  %3d shard (255 left from before): %zu bytes, %.1f "
	        "us a frame\n", nrestart, fr, urestart);
	CHECK_EQ(nrestart, 1);
	CHECK(sr < s1 + 8); /* the directory's path is longer: a digit */
	CHECK(s256 >= s1 + 255 * 24); /* a row of 15 numbers per shard */
	t_rmrf(a);
	t_rmrf(b);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	/* 10,000 segment files are made and removed: on tmpfs when there is
	 * one and TMPDIR does not say otherwise (their bytes do not matter,
	 * and a disk's metadata journal makes it tens of seconds). */
	struct stat st;
	if (!getenv("TMPDIR") && stat("/dev/shm", &st) == 0 &&
	    S_ISDIR(st.st_mode) && access("/dev/shm", W_OK) == 0)
		setenv("TMPDIR", "/dev/shm", 1);
	RUN(frame_bytes_do_not_grow_with_10000_old_segments);
	RUN(frame_of_256_shards_holds_256_and_of_a_restart_with_1_holds_1);
	return t_done();
}
