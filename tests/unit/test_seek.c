/*
 * test_seek.c -- the reader's positioning and following
 * (src/read/reader_seek.c, reader_cursor.c, reader_follow.c): seeking by time,
 * from the end and by cursor gives exactly the records a full read gives
 * from that point, with and without time indexes, with an
 * index that lies; cursors survive deleted segments and say what was
 * skipped; follow mode sees appends, rotations, retention and a restart,
 * never twice and never missing one.
 */
#include "segfile.h"

#include "store/index.h"
#include "logengine.h"
#include "store/segment.h"

/* One record as read: enough to compare runs. */
typedef struct rec {
	uint32_t shard;
	uint64_t seq, ts;
} rec;

typedef struct recs {
	rec *r;
	size_t n, cap;
} recs;

static void push(recs *v, const le_record *lr)
{
	if (v->n == v->cap) {
		v->cap = v->cap ? v->cap * 2 : 1024;
		v->r = realloc(v->r, v->cap * sizeof *v->r);
		CHECK(v->r);
	}
	v->r[v->n++] = (rec){lr->shard, lr->seq, lr->ts_ns};
}

static le_reader *open_r(const char *dir)
{
	le_reader *r;
	CHECK_RC(le_reader_open(&r, dir, NULL));
	return r;
}

static void drain(le_reader *r, recs *v)
{
	le_record lr;
	int rc;
	while ((rc = le_reader_next(r, &lr)) > 0)
		push(v, &lr);
	CHECK_EQ(rc, 0);
}

static void read_all(const char *dir, recs *v)
{
	le_reader *r = open_r(dir);
	memset(v, 0, sizeof *v);
	drain(r, v);
	le_reader_close(r);
}

static int same(const rec *a, const rec *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (a[i].shard != b[i].shard || a[i].seq != b[i].seq ||
		    a[i].ts != b[i].ts) {
			fprintf(stderr, "  at %zu: %u:%" PRIu64 " vs %u:%" PRIu64
			        "\n", i, a[i].shard, a[i].seq, b[i].shard,
			        b[i].seq);
			return 0;
		}
	return 1;
}

/* A log of `runs` engine runs (restarts) of n records each over 3 shards,
 * rotating every seg_bytes; timestamps advance in steps a seek can hit. */
static void make_log_seg(const char *dir, int runs, int n, uint64_t seg_bytes)
{
	for (int run = 0; run < runs; run++) {
		le_config c;
		le_engine *e;
		le_config_init(&c);
		c.dir = dir;
		c.shards = 3;
		c.segment_bytes = seg_bytes;
		CHECK_RC(le_open(&e, &c));
		for (int i = 0; i < n; i++) {
			char p[64];
			int len = snprintf(p, sizeof p, "run %d record %d", run, i);
			while (le_write(e, (uint64_t)i, i % 6, p, (size_t)len) ==
			       LE_EFULL)
				le_flush(e, -1);
			if (i % 500 == 0)
				le_flush(e, -1);
		}
		CHECK_RC(le_close(e));
	}
	CHECK(le__index_idle(10000));
}

static void make_log(const char *dir, int runs, int n)
{
	make_log_seg(dir, runs, n, 32 << 10);
}

/* Remove every .idx of the log (readers must do without). */
static void drop_indexes(const char *dir)
{
	char cmd[600];
	snprintf(cmd, sizeof cmd, "rm -f '%s'/shard-*/*.idx", dir);
	CHECK(system(cmd) == 0);
}

static void check_seek_time(const char *dir, const recs *all)
{
	for (size_t k = 0; k < all->n; k += all->n / 37 + 1) {
		uint64_t t = all->r[k].ts;
		le_reader *r = open_r(dir);
		recs got = {0};
		CHECK_RC(le_reader_seek_time(r, t));
		drain(r, &got);
		le_reader_close(r);
		size_t first = 0;
		while (all->r[first].ts < t)
			first++;
		CHECK_EQ(got.n, all->n - first);
		CHECK(same(got.r, all->r + first, got.n));
		free(got.r);
	}
}

TEST(seek_time_matches_a_full_read_with_indexes)
{
	char dir[256];
	recs all;

	t_tmpdir(dir);
	make_log(dir, 3, 3000);
	read_all(dir, &all);
	CHECK_EQ(all.n, 9000);
	check_seek_time(dir, &all);
	free(all.r);
	t_rmrf(dir);
}

TEST(seek_time_matches_a_full_read_without_indexes)
{
	char dir[256];
	recs all;

	t_tmpdir(dir);
	make_log(dir, 3, 3000);
	drop_indexes(dir);
	read_all(dir, &all);
	check_seek_time(dir, &all);
	free(all.r);
	t_rmrf(dir);
}

/* Active segments of several MiB: found by bisection, not read whole. */
TEST(seeks_in_big_segments_without_index_match_a_full_read)
{
	char dir[256];
	recs all;

	t_tmpdir(dir);
	make_log_seg(dir, 2, 90000, 64 << 20);
	read_all(dir, &all);
	check_seek_time(dir, &all);
	static const uint64_t ns[] = {1, 7, 5000, 100000};
	for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
		le_reader *r = open_r(dir);
		recs got = {0};
		CHECK_RC(le_reader_seek_tail(r, ns[i]));
		drain(r, &got);
		le_reader_stats st;
		le_reader_stats_get(r, &st);
		le_reader_close(r);
		CHECK_EQ(got.n, ns[i]);
		CHECK(same(got.r, all.r + all.n - ns[i], got.n));
		if (ns[i] < 10)
			CHECK(st.bytes < (1u << 20)); /* not the whole segment */
		free(got.r);
	}
	free(all.r);
	t_rmrf(dir);
}

TEST(seek_time_near_the_end_reads_little_of_the_log)
{
	char dir[256];
	recs all;
	le_reader_stats st, full;

	t_tmpdir(dir);
	make_log(dir, 1, 20000);
	read_all(dir, &all);
	le_reader *r = open_r(dir);
	le_record lr;
	while (le_reader_next(r, &lr) > 0)
		;
	le_reader_stats_get(r, &full);
	le_reader_close(r);
	r = open_r(dir);
	CHECK_RC(le_reader_seek_time(r, all.r[all.n - 10].ts));
	recs got = {0};
	drain(r, &got);
	le_reader_stats_get(r, &st);
	le_reader_close(r);
	CHECK(got.n >= 10);
	/* the last segment of each shard and an index step, not the log */
	CHECK(st.bytes * 4 < full.bytes);
	free(got.r);
	free(all.r);
	t_rmrf(dir);
}

TEST(an_index_that_lies_is_not_followed)
{
	char dir[256], sdir[300];
	recs all;

	t_tmpdir(dir);
	make_log(dir, 1, 6000);
	read_all(dir, &all);
	/* Rewrite every index of shard 0 with valid checksums but entries
	 * pointing into the middle of frames. */
	snprintf(sdir, sizeof sdir, "%s/shard-000", dir);
	uint64_t *segs;
	size_t n;
	CHECK_RC(le__seg_list(sdir, &segs, &n));
	for (size_t i = 0; i + 1 < n; i++) {
		char path[600];
		le__index x;
		le__seg_path(path, sizeof path, sdir, segs[i]);
		CHECK_RC(le__index_build(path, &x));
		for (size_t k = 1; k < x.n; k++)
			x.e[k].off += 3;
		CHECK_RC(le__index_write(sdir, &x));
		le__index_free(&x);
	}
	free(segs);
	check_seek_time(dir, &all);
	free(all.r);
	t_rmrf(dir);
}

TEST(seek_tail_returns_the_last_n_of_the_merge)
{
	char dir[256];
	recs all;

	t_tmpdir(dir);
	make_log(dir, 2, 2500);
	read_all(dir, &all);
	static const uint64_t ns[] = {0, 1, 2, 10, 999, 4999, 5000, 7000};
	for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
		le_reader *r = open_r(dir);
		recs got = {0};
		CHECK_RC(le_reader_seek_tail(r, ns[i]));
		drain(r, &got);
		le_reader_close(r);
		size_t want = ns[i] < all.n ? ns[i] : all.n;
		CHECK_EQ(got.n, want);
		CHECK(same(got.r, all.r + all.n - want, want));
		free(got.r);
	}
	free(all.r);
	t_rmrf(dir);
}

TEST(cursor_resumes_exactly_after_its_record)
{
	char dir[256], cur[LE_CURSOR_MAX];
	recs all;
	le_record lr;

	t_tmpdir(dir);
	make_log(dir, 2, 2000);
	read_all(dir, &all);
	for (size_t k = 0; k < all.n; k += all.n / 29 + 1) {
		le_reader *r = open_r(dir);
		for (size_t i = 0; i <= k; i++)
			CHECK_EQ(le_reader_next(r, &lr), 1);
		CHECK(le_reader_cursor(r, cur, sizeof cur) > 0);
		le_reader_close(r);
		/* the same record's cursor, reached by a seek */
		r = open_r(dir);
		CHECK_RC(le_reader_seek_time(r, all.r[k].ts));
		char again[LE_CURSOR_MAX] = "";
		while (le_reader_next(r, &lr) > 0)
			if (lr.shard == all.r[k].shard && lr.seq == all.r[k].seq) {
				le_reader_cursor(r, again, sizeof again);
				break;
			}
		le_reader_close(r);
		CHECK_STR_EQ(again, cur);
		r = open_r(dir);
		uint64_t skipped = 7;
		CHECK_RC(le_reader_seek_cursor(r, cur, &skipped));
		CHECK_EQ(skipped, 0);
		recs got = {0};
		drain(r, &got);
		le_reader_close(r);
		CHECK_EQ(got.n, all.n - k - 1);
		CHECK(same(got.r, all.r + k + 1, got.n));
		free(got.r);
	}
	free(all.r);
	t_rmrf(dir);
}

TEST(cursor_into_deleted_segments_resumes_at_the_oldest_and_counts)
{
	char dir[256], cur[LE_CURSOR_MAX], cmd[600];
	recs all, left;
	le_record lr;

	t_tmpdir(dir);
	make_log(dir, 1, 6000);
	read_all(dir, &all);
	le_reader *r = open_r(dir);
	for (int i = 0; i < 10; i++)
		CHECK_EQ(le_reader_next(r, &lr), 1);
	CHECK(le_reader_cursor(r, cur, sizeof cur) > 0);
	le_reader_close(r);
	/* delete the two oldest segments of every shard */
	for (int s = 0; s < 3; s++) {
		snprintf(cmd, sizeof cmd, "cd '%s/shard-%03d' && ls *.seg | head "
		         "-n 2 | xargs rm -f", dir, s);
		CHECK(system(cmd) == 0);
	}
	read_all(dir, &left);
	r = open_r(dir);
	uint64_t skipped = 0;
	CHECK_RC(le_reader_seek_cursor(r, cur, &skipped));
	recs got = {0};
	drain(r, &got);
	le_reader_close(r);
	CHECK_EQ(got.n, left.n);
	CHECK(same(got.r, left.r, got.n));
	CHECK_EQ(skipped, all.n - 10 - left.n);
	free(got.r);
	free(left.r);
	free(all.r);
	t_rmrf(dir);
}

TEST(malformed_cursor_is_einval_and_leaves_the_reader_usable)
{
	char dir[256];
	static const char *const bad[] = {
		"", "x", "v=2,s=0,q=1,t=1", "v=1,s=0,q=1", "v=1,s=100000,q=1,t=1",
		"v=1,s=0,q=-1,t=1", "v=1;s=0;q=1;t=1", "v=1,s=0,q=1,t=1,n=1",
	};
	recs all;

	t_tmpdir(dir);
	make_log(dir, 1, 300);
	read_all(dir, &all);
	le_reader *r = open_r(dir);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		CHECK_EQ(le_reader_seek_cursor(r, bad[i], NULL), LE_EINVAL);
		CHECK(strstr(le_errmsg(), "cursor"));
	}
	recs got = {0};
	drain(r, &got);
	CHECK_EQ(got.n, all.n);
	le_reader_close(r);
	free(got.r);
	free(all.r);
	t_rmrf(dir);
}

/* ---- follow ---- */

/* Read everything available, waiting up to `quiet_ms` of silence. */
static void follow_until_quiet(le_reader *r, recs *v, int quiet_ms)
{
	le_record lr;
	int quiet = 0;
	while (quiet < quiet_ms) {
		int rc;
		int got = 0;
		while ((rc = le_reader_next(r, &lr)) > 0) {
			push(v, &lr);
			got = 1;
		}
		CHECK_EQ(rc, 0);
		if (got)
			quiet = 0;
		CHECK(le_reader_wait(r, 20) >= 0);
		quiet += 20;
	}
}

static void check_each_once(const recs *got, const recs *all)
{
	CHECK_EQ(got->n, all->n);
	/* same set; per shard the same order */
	for (uint32_t s = 0; s < 3; s++) {
		uint64_t last = 0;
		size_t n = 0;
		for (size_t i = 0; i < got->n; i++)
			if (got->r[i].shard == s) {
				CHECK(n == 0 || got->r[i].seq == last + 1);
				last = got->r[i].seq;
				n++;
			}
		size_t m = 0;
		for (size_t i = 0; i < all->n; i++)
			m += all->r[i].shard == s;
		CHECK_EQ(n, m);
	}
}

static void follow_through_restarts(int poll)
{
	char dir[256];
	recs all, got = {0};
	le_reader *r;

	setenv("LE_READER_POLL", poll ? "1" : "0", 1);
	t_tmpdir(dir);
	make_log(dir, 1, 500);
	CHECK_RC(le_reader_open(&r, dir, NULL));
	CHECK_RC(le_reader_follow(r, 20));
	follow_until_quiet(r, &got, 200);
	CHECK_EQ(got.n, 500);
	/* two more engine runs, rotating, while the reader follows */
	make_log(dir, 2, 2000);
	follow_until_quiet(r, &got, 1500);
	le_reader_close(r);
	read_all(dir, &all);
	check_each_once(&got, &all);
	free(got.r);
	free(all.r);
	t_rmrf(dir);
}

TEST(follow_sees_rotations_and_restarts_once_each_inotify)
{
	follow_through_restarts(0);
}

TEST(follow_sees_rotations_and_restarts_once_each_polling)
{
	follow_through_restarts(1);
}

TEST(follow_behind_retention_reports_what_was_deleted)
{
	char dir[256];
	le_reader *r;
	le_config c;
	le_engine *e;
	recs got = {0};
	uint64_t deleted = 0;

	t_tmpdir(dir);
	le_config_init(&c);
	c.dir = dir;
	c.segment_bytes = 16 << 10;
	c.retention_bytes = 64 << 10;
	CHECK_RC(le_open(&e, &c));
	CHECK_RC(le_logf(e, LE_INFO, "first"));
	CHECK_RC(le_flush(e, -1));
	le_reader_opts o;
	le_reader_opts_init(&o);
	CHECK_RC(le_reader_open(&r, dir, &o));
	CHECK_RC(le_reader_follow(r, 0));
	le_record lr;
	CHECK_EQ(le_reader_next(r, &lr), 1); /* holding shard 0's first */
	/* meanwhile the engine writes far past retention */
	for (int i = 0; i < 20000; i++)
		while (le_logf(e, LE_INFO, "record %d", i) == LE_EFULL)
			le_flush(e, -1);
	CHECK_RC(le_flush(e, -1));
	le_reader_stats st0;
	le_reader_stats_get(r, &st0);
	follow_until_quiet(r, &got, 300);
	le_reader_stats st;
	le_reader_stats_get(r, &st);
	CHECK(st.problems > st0.problems);
	/* sequence numbers rise, and what is missing was reported */
	for (size_t i = 1; i < got.n; i++)
		CHECK(got.r[i].seq > got.r[i - 1].seq);
	deleted = 20001 - 1 - got.n;
	CHECK(deleted > 0);
	CHECK_RC(le_close(e));
	le_reader_close(r);
	free(got.r);
	t_rmrf(dir);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	t_allow_jobs(); /* each test: its own log directory */
	RUN(seek_time_matches_a_full_read_with_indexes);
	RUN(seek_time_matches_a_full_read_without_indexes);
	RUN(seeks_in_big_segments_without_index_match_a_full_read);
	RUN(seek_time_near_the_end_reads_little_of_the_log);
	RUN(an_index_that_lies_is_not_followed);
	RUN(seek_tail_returns_the_last_n_of_the_merge);
	RUN(cursor_resumes_exactly_after_its_record);
	RUN(cursor_into_deleted_segments_resumes_at_the_oldest_and_counts);
	RUN(malformed_cursor_is_einval_and_leaves_the_reader_usable);
	RUN(follow_sees_rotations_and_restarts_once_each_inotify);
	RUN(follow_sees_rotations_and_restarts_once_each_polling);
	RUN(follow_behind_retention_reports_what_was_deleted);
	return t_done();
}
