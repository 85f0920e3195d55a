/*
 * test_reader.c -- the reader API against hand-built segment files: merge
 * order, every recovery mode against torn tails, zero and garbage tails,
 * bit flips at every byte, absurd lengths, frames and segments copied to
 * the wrong place, sequence gaps, and the field sets.
 */
#include "segfile.h"
#include "probs.h"
#include "allocwatch.h"


#include "base/crc32c.h"
#include "logengine.h"
#include "base/os.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

#define ALL LE_FIELD_ALL
#define TS0 1796074227000000000ull /* 2026-11-30T21:30:27Z */

/* ---- reading everything back ---- */

typedef struct rec {
	uint64_t seq, ts, off;
	int level;
	uint32_t shard, flags;
	size_t len;
	unsigned char *payload;
	char file[512];
} rec;

typedef struct got {
	rec *r;
	int n, cap;
	int rc;               /* what ended the read: 0 or an error */
	t_probs pr;
	le_reader_stats st;
} got;

static void keep(got *g, const le_record *lr)
{
	if (g->n == g->cap) {
		g->cap = g->cap ? g->cap * 2 : 64;
		g->r = realloc(g->r, (size_t)g->cap * sizeof *g->r);
		CHECK(g->r);
	}
	rec *r = &g->r[g->n++];
	r->seq = lr->seq;
	r->ts = lr->ts_ns;
	r->off = lr->offset;
	r->level = lr->level;
	r->shard = lr->shard;
	r->flags = lr->flags;
	r->len = lr->len;
	r->payload = malloc(lr->len + 1);
	CHECK(r->payload);
	memcpy(r->payload, lr->payload, lr->len);
	snprintf(r->file, sizeof r->file, "%s", lr->file);
}

static void got_free(got *g)
{
	for (int i = 0; i < g->n; i++)
		free(g->r[i].payload);
	free(g->r);
	memset(g, 0, sizeof *g);
}

/* Leaks inside the forked child would go unseen (it ends with _exit), so
 * ask LeakSanitizer directly. */
static void check_no_leaks(void)
{
#if defined(__SANITIZE_ADDRESS__)
	CHECK_EQ(__lsan_do_recoverable_leak_check(), 0);
#endif
}

/* Read dir in mode (shard -1 = all; following it, as le_reader_follow
 * with no reorder window, when follow is 1) until the end or an error. */
static void read_dir(got *g, const char *dir, int mode, int shard,
                     int follow)
{
	le_reader_opts o;
	le_reader *r;
	le_record lr;
	int rc;

	memset(g, 0, sizeof *g);
	le_reader_opts_init(&o);
	o.mode = mode;
	o.shard = shard;
	o.on_problem = t_probs_note;
	o.arg = &g->pr;
	CHECK_RC(le_reader_open(&r, dir, &o));
	if (follow)
		CHECK_RC(le_reader_follow(r, 0));
	while ((rc = le_reader_next(r, &lr)) > 0)
		keep(g, &lr);
	g->rc = rc;
	CHECK_RC(le_reader_stats_get(r, &g->st));
	CHECK_EQ(g->st.problems, g->pr.n);
	CHECK_EQ(g->st.records, g->n);
	le_reader_close(r);
}

static void read_all(got *g, const char *dir, int mode)
{
	read_dir(g, dir, mode, -1, 0);
}

/* Read dir in mode and check what ended the read and how many records came
 * back; g keeps them for more checks. */
static void read_expect(got *g, const char *dir, int mode, int rc, int n)
{
	read_all(g, dir, mode);
	if (g->rc != rc || g->n != n)
		fprintf(stderr, "  mode %d: rc %d, %d records; "
		        "want rc %d, %d\n", mode, g->rc, g->n, rc, n);
	CHECK_EQ(g->rc, rc);
	CHECK_EQ(g->n, n);
}

/* read_expect when nothing more is checked. */
static void expect_read(const char *dir, int mode, int rc, int n)
{
	got g;
	read_expect(&g, dir, mode, rc, n);
	got_free(&g);
}

/* The payload written for (shard, seq): lengths vary with seq. */
static size_t payload_of(char *buf, size_t cap, uint32_t shard, uint64_t seq)
{
	int n = snprintf(buf, cap, "shard %u record %" PRIu64 " ", shard, seq);
	for (uint64_t i = 0; i < seq % 7 && (size_t)n + 1 < cap; i++)
		buf[n++] = (char)('a' + i);
	buf[n] = '\0';
	return (size_t)n;
}

/* A segment of n frames with payload_of payloads, ts TS0 + seq * step. */
static void seg_n(t_seg *s, uint32_t fields, uint32_t shard, uint64_t index,
                  uint64_t base, int n, uint64_t step)
{
	char p[128];
	t_seg_begin(s, fields, shard, index, base);
	for (int i = 0; i < n; i++) {
		uint64_t seq = base + (uint64_t)i;
		t_seg_add(s, i % 6, TS0 + seq * step, (payload_of(p, sizeof p,
		          shard, seq), p));
	}
}

/* seg_n, saved into dir. */
static void save_seg_n(const char *dir, uint32_t fields, uint32_t shard,
                       uint64_t index, uint64_t base, int n, uint64_t step)
{
	t_seg s;
	seg_n(&s, fields, shard, index, base, n, step);
	t_seg_save(&s, dir);
	t_seg_free(&s);
}

/* Is r exactly what seg_n wrote for its (shard, seq)? */
static int rec_is_original(const rec *r, uint64_t step)
{
	char p[128];
	size_t len = payload_of(p, sizeof p, r->shard, r->seq);
	return r->len == len && memcmp(r->payload, p, len) == 0 &&
	       r->ts == TS0 + r->seq * step;
}

/* Frame offsets of a seg_n segment. */
static size_t frame_off(const t_seg *s, int k)
{
	size_t off = LE_SEG_HDR;
	for (int i = 0; i < k; i++)
		off += 4 + le__get32(s->buf + off);
	return off;
}

/* ---- order ---- */

TEST(records_come_back_in_file_order)
{
	char dir[256], p[128];
	t_seg s;
	got g;

	t_tmpdir(dir);
	t_seg_begin(&s, ALL, 0, 1, 1);
	size_t offs[10];
	for (int i = 0; i < 10; i++) /* timestamps go backwards on purpose */
		offs[i] = t_seg_add(&s, LE_INFO, TS0 - (uint64_t)i,
		                    (payload_of(p, sizeof p, 0, 1 + (uint64_t)i), p));
	t_seg_save(&s, dir);
	read_expect(&g, dir, LE_RECOVER_TOLERATE_TAIL, 0, 10);
	CHECK_EQ(g.pr.n, 0);
	for (int i = 0; i < 10; i++) {
		CHECK_EQ(g.r[i].seq, i + 1);
		CHECK_EQ(g.r[i].off, offs[i]);
		CHECK_EQ(g.r[i].level, LE_INFO);
		CHECK_EQ(g.r[i].shard, 0);
		size_t len = payload_of(p, sizeof p, 0, 1 + (uint64_t)i);
		CHECK_EQ(g.r[i].len, len);
		CHECK(memcmp(g.r[i].payload, p, len) == 0);
		CHECK(strstr(g.r[i].file, "shard-000/0000000000000001.seg"));
	}
	CHECK_EQ(g.st.segments, 1);
	CHECK_EQ(g.st.bytes, s.len - LE_SEG_HDR);
	CHECK_EQ(g.st.skipped_bytes, 0);
	got_free(&g);
	t_seg_free(&s);
	check_no_leaks();
	t_rmrf(dir);
}

TEST(segments_are_read_in_index_order)
{
	char dir[256];
	got g;
	/* Index 0x10 sorts after 0x9 numerically and as fixed-width hex. */
	uint64_t idx[3] = {0x10, 0x9, 0x2};
	uint64_t base[3] = {11, 6, 1};

	t_tmpdir(dir);
	for (int k = 0; k < 3; k++)
		save_seg_n(dir, ALL, 0, idx[k], base[k], 5, 1000);
	read_expect(&g, dir, LE_RECOVER_ABSOLUTE, 0, 15);
	CHECK_EQ(g.pr.n, 0);
	for (int i = 0; i < 15; i++) {
		CHECK_EQ(g.r[i].seq, i + 1);
		CHECK(rec_is_original(&g.r[i], 1000));
	}
	CHECK_EQ(g.st.segments, 3);
	got_free(&g);
	t_rmrf(dir);
}

TEST(shards_are_merged_by_timestamp)
{
	char dir[256];
	t_seg s;
	got g;

	t_tmpdir(dir);
	/* shard k, record i: ts = TS0 + 10 * i + (k == 1 ? 5 : 0); shard 2
	 * copies shard 0's timestamps exactly, so ties go to shard 0. */
	for (uint32_t k = 0; k < 3; k++) {
		t_seg_begin(&s, ALL, k, 1, 1);
		for (int i = 0; i < 20; i++) {
			char p[64];
			snprintf(p, sizeof p, "%u/%d", k, i);
			t_seg_add(&s, LE_INFO,
			          TS0 + 10 * (uint64_t)i + (k == 1 ? 5 : 0), p);
		}
		t_seg_save(&s, dir);
		t_seg_free(&s);
	}
	read_expect(&g, dir, LE_RECOVER_TOLERATE_TAIL, 0, 60);
	uint64_t last_seq[3] = {0, 0, 0};
	for (int i = 0; i < 60; i++) {
		const rec *r = &g.r[i];
		if (i > 0) {
			const rec *q = &g.r[i - 1];
			CHECK(q->ts < r->ts ||
			      (q->ts == r->ts && q->shard < r->shard));
		}
		CHECK_EQ(r->seq, last_seq[r->shard] + 1);
		last_seq[r->shard] = r->seq;
	}
	/* The first three: shard 0 (ts+0), shard 2 (ts+0), shard 1 (ts+5). */
	CHECK_EQ(g.r[0].shard, 0);
	CHECK_EQ(g.r[1].shard, 2);
	CHECK_EQ(g.r[2].shard, 1);
	got_free(&g);
	t_rmrf(dir);
}

TEST(within_a_shard_file_order_beats_timestamps)
{
	char dir[256];
	t_seg s;
	got g;

	t_tmpdir(dir);
	t_seg_begin(&s, ALL, 0, 1, 1);
	t_seg_add(&s, LE_INFO, TS0 + 100, "late");
	t_seg_add(&s, LE_INFO, TS0 + 1, "early");
	t_seg_save(&s, dir);
	t_seg_free(&s);
	t_seg_begin(&s, ALL, 1, 1, 1);
	t_seg_add(&s, LE_INFO, TS0 + 50, "middle");
	t_seg_save(&s, dir);
	t_seg_free(&s);
	read_all(&g, dir, LE_RECOVER_TOLERATE_TAIL);
	CHECK_EQ(g.n, 3);
	/* Shard 1's record (ts 50) goes before shard 0's head (ts 100);
	 * "early" cannot overtake "late", which precedes it in its file. */
	CHECK(memcmp(g.r[0].payload, "middle", 6) == 0);
	CHECK(memcmp(g.r[1].payload, "late", 4) == 0);
	CHECK(memcmp(g.r[2].payload, "early", 5) == 0);
	got_free(&g);
	t_rmrf(dir);
}

/* Payloads far larger than the scanner's 1 MiB window, from two shards
 * whose heads alternate: each must come back intact. */
TEST(records_larger_than_the_read_window_are_intact)
{
	char dir[256];
	t_seg s;
	size_t sizes[2] = {300000, 2100000};
	unsigned char *p = malloc(sizes[1]), *q = malloc(sizes[1]);
	le_reader *r;
	le_record lr;
	int n = 0, rc;

	CHECK(p && q);
	t_tmpdir(dir);
	for (uint32_t k = 0; k < 2; k++) {
		t_seg_begin(&s, ALL, k, 1, 1);
		for (int i = 0; i < 6; i++) {
			t_fill_random(p, sizes[k], k * 100 + (uint64_t)i);
			t_seg_add_ex(&s, 0, LE_INFO, TS0 + 2 * (uint64_t)i + k,
			             p, sizes[k]);
		}
		t_seg_save(&s, dir);
		t_seg_free(&s);
	}
	CHECK_RC(le_reader_open(&r, dir, NULL));
	while ((rc = le_reader_next(r, &lr)) > 0) {
		uint32_t k = lr.shard;
		CHECK_EQ(k, (uint32_t)n % 2);
		CHECK_EQ(lr.len, sizes[k]);
		t_fill_random(q, sizes[k], k * 100 + lr.seq - 1);
		CHECK(memcmp(lr.payload, q, lr.len) == 0);
		n++;
	}
	CHECK_EQ(rc, 0);
	CHECK_EQ(n, 12);
	le_reader_close(r);
	free(p);
	free(q);
	check_no_leaks();
	t_rmrf(dir);
}

/* ---- torn, zero and garbage tails ---- */

TEST(truncated_last_record_at_every_byte_is_a_torn_tail)
{
	char dir[256];
	t_seg s;
	got g;

	t_tmpdir(dir);
	seg_n(&s, ALL, 0, 1, 1, 5, 1);
	size_t last = frame_off(&s, 4);
	for (size_t cut = last; cut < s.len; cut++) {
		t_seg_save_len(&s, dir, cut);
		int torn = cut > last; /* cut == last: a clean end */

		read_expect(&g, dir, LE_RECOVER_TOLERATE_TAIL, 0, 4);
		CHECK_EQ(g.pr.n, torn);
		if (torn) {
			CHECK(t_probs_has(&g.pr, "torn tail"));
			CHECK_EQ(g.pr.off[0], last);
		}
		got_free(&g);

		expect_read(dir, LE_RECOVER_ABSOLUTE, torn ? LE_ECORRUPT : 0,
		            4);

		expect_read(dir, LE_RECOVER_POINT_IN_TIME, 0, 4);

		read_expect(&g, dir, LE_RECOVER_SKIP, 0, 4);
		CHECK_EQ(g.st.skipped_bytes, cut - last);
		got_free(&g);
	}
	t_seg_free(&s);
	check_no_leaks();
	t_rmrf(dir);
}

TEST(zero_filled_tail_ends_the_log)
{
	char dir[256];
	unsigned char zeros[4096] = {0};
	t_seg s;
	got g;

	t_tmpdir(dir);
	seg_n(&s, ALL, 0, 1, 1, 5, 1);
	size_t end = s.len;
	t_seg_raw(&s, zeros, sizeof zeros);
	t_seg_save(&s, dir);

	read_expect(&g, dir, LE_RECOVER_TOLERATE_TAIL, 0, 5);
	CHECK_EQ(g.pr.n, 1);
	CHECK(t_probs_has(&g.pr, "zero-filled tail"));
	CHECK_EQ(g.pr.off[0], end);
	got_free(&g);

	expect_read(dir, LE_RECOVER_ABSOLUTE, LE_ECORRUPT, 5);

	/* One to three zero bytes: too short for a size word, still zeros. */
	for (size_t z = 1; z < 4; z++) {
		t_seg_save_len(&s, dir, end + z);
		read_expect(&g, dir, LE_RECOVER_TOLERATE_TAIL, 0, 5);
		CHECK(t_probs_has(&g.pr, "zero-filled tail"));
		got_free(&g);
	}
	t_seg_free(&s);
	t_rmrf(dir);
}

/* Preallocated segment sealed by rotation: its zeros end it, and the next
 * segment carries on the sequence. */
TEST(zero_filled_tail_in_earlier_segment_is_not_a_gap)
{
	char dir[256];
	unsigned char zeros[1000] = {0};
	t_seg s;
	got g;

	t_tmpdir(dir);
	seg_n(&s, ALL, 0, 1, 1, 5, 1);
	t_seg_raw(&s, zeros, sizeof zeros);
	t_seg_save(&s, dir);
	t_seg_free(&s);
	save_seg_n(dir, ALL, 0, 2, 6, 5, 1);
	for (int mode = 0; mode < 4; mode++) {
		read_all(&g, dir, mode);
		CHECK_EQ(g.pr.n, 1);
		CHECK(t_probs_has(&g.pr, "zero-filled tail"));
		if (mode == LE_RECOVER_ABSOLUTE) {
			CHECK_EQ(g.rc, LE_ECORRUPT);
			CHECK_EQ(g.n, 5);
		} else {
			CHECK_EQ(g.rc, 0);
			CHECK_EQ(g.n, 10);
		}
		got_free(&g);
	}
	t_rmrf(dir);
}

TEST(garbage_tail_is_a_torn_tail)
{
	char dir[256];
	unsigned char junk[300];
	t_seg s;
	got g;

	t_tmpdir(dir);
	for (uint64_t seed = 1; seed <= 20; seed++) {
		seg_n(&s, ALL, 0, 1, 1, 5, 1);
		size_t end = s.len;
		t_fill_random(junk, sizeof junk, seed);
		t_seg_raw(&s, junk, sizeof junk);
		t_seg_save(&s, dir);

		read_expect(&g, dir, LE_RECOVER_TOLERATE_TAIL, 0, 5);
		CHECK_EQ(g.pr.n, 1);
		CHECK(t_probs_has(&g.pr, "torn tail"));
		CHECK_EQ(g.pr.off[0], end);
		got_free(&g);

		read_expect(&g, dir, LE_RECOVER_SKIP, 0, 5);
		CHECK_EQ(g.st.skipped_bytes, sizeof junk);
		got_free(&g);

		read_all(&g, dir, LE_RECOVER_ABSOLUTE);
		CHECK_EQ(g.rc, LE_ECORRUPT);
		got_free(&g);
		t_seg_free(&s);
	}
	t_rmrf(dir);
}

/* Garbage at the end of a segment that is not the shard's last lost the
 * records between it and the next segment: that is not a tail. */
TEST(garbage_tail_before_another_segment_is_corruption)
{
	char dir[256];
	unsigned char junk[100];
	t_seg s;
	got g;

	t_tmpdir(dir);
	seg_n(&s, ALL, 0, 1, 1, 5, 1);
	t_fill_random(junk, sizeof junk, 7);
	t_seg_raw(&s, junk, sizeof junk);
	t_seg_save(&s, dir);
	t_seg_free(&s);
	save_seg_n(dir, ALL, 0, 2, 7, 5, 1);

	expect_read(dir, LE_RECOVER_TOLERATE_TAIL, LE_ECORRUPT, 5);

	/* SKIP: the damage is reported; no gap report for the segment after
	 * it, since nobody knows how many frames the garbage held. */
	read_expect(&g, dir, LE_RECOVER_SKIP, 0, 10);
	CHECK_EQ(g.pr.n, 1);
	CHECK_EQ(g.st.skipped_bytes, sizeof junk);
	got_free(&g);
	t_rmrf(dir);
}

/* ---- damage in the middle ---- */

TEST(bit_flip_in_middle_is_corruption_not_tail)
{
	char dir[256];
	t_seg s;
	got g;

	t_tmpdir(dir);
	seg_n(&s, ALL, 0, 1, 1, 10, 1);
	size_t bad = frame_off(&s, 4);
	s.buf[bad + 20] ^= 0x10;
	t_seg_save(&s, dir);

	read_expect(&g, dir, LE_RECOVER_TOLERATE_TAIL, LE_ECORRUPT, 4);
	CHECK_EQ(g.pr.n, 1);
	CHECK_EQ(g.pr.off[0], bad);
	CHECK(t_probs_has(&g.pr, "checksum"));
	got_free(&g);

	expect_read(dir, LE_RECOVER_ABSOLUTE, LE_ECORRUPT, 4);

	read_expect(&g, dir, LE_RECOVER_POINT_IN_TIME, 0, 4);
	CHECK_EQ(g.pr.n, 1);
	got_free(&g);

	read_expect(&g, dir, LE_RECOVER_SKIP, 0, 9);
	CHECK_EQ(g.pr.n, 1);
	CHECK_EQ(g.pr.off[0], bad);
	CHECK_EQ(g.st.skipped_bytes, frame_off(&s, 5) - bad);
	for (int i = 0; i < 9; i++) {
		CHECK_EQ(g.r[i].seq, i < 4 ? i + 1 : i + 2);
		CHECK(rec_is_original(&g.r[i], 1));
	}
	got_free(&g);
	t_seg_free(&s);
	check_no_leaks();
	t_rmrf(dir);
}

TEST(corruption_error_is_sticky)
{
	char dir[256];
	t_seg s;
	le_reader *r;
	le_record lr;
	le_reader_stats st;

	t_tmpdir(dir);
	seg_n(&s, ALL, 0, 1, 1, 4, 1);
	s.buf[frame_off(&s, 1) + 10] ^= 1;
	t_seg_save(&s, dir);
	CHECK_RC(le_reader_open(&r, dir, NULL));
	CHECK_EQ(le_reader_next(r, &lr), 1);
	CHECK_EQ(le_reader_next(r, &lr), LE_ECORRUPT);
	CHECK_EQ(le_reader_next(r, &lr), LE_ECORRUPT);
	CHECK_RC(le_reader_stats_get(r, &st));
	CHECK_EQ(st.problems, 1);
	CHECK_EQ(st.records, 1);
	le_reader_close(r);
	t_seg_free(&s);
	t_rmrf(dir);
}

TEST(point_in_time_stops_only_the_damaged_shard)
{
	char dir[256];
	t_seg s;
	got g;

	t_tmpdir(dir);
	seg_n(&s, ALL, 0, 1, 1, 6, 10);
	s.buf[frame_off(&s, 2) + 12] ^= 4;
	t_seg_save(&s, dir);
	t_seg_free(&s);
	save_seg_n(dir, ALL, 1, 1, 1, 6, 10);
	read_expect(&g, dir, LE_RECOVER_POINT_IN_TIME, 0, 2 + 6);
	int n0 = 0;
	for (int i = 0; i < g.n; i++)
		n0 += g.r[i].shard == 0;
	CHECK_EQ(n0, 2);
	got_free(&g);
	t_rmrf(dir);
}

/* A single-bit flip anywhere in a segment is always reported, and no mode
 * ever hands back a record that differs from what was written. */
TEST(bit_flip_at_every_byte_is_detected)
{
	char dir[256];
	t_seg s;
	got g;

	t_tmpdir(dir);
	seg_n(&s, ALL, 0, 1, 1, 5, 1);
	for (size_t i = 0; i < s.len; i++) {
		int frame = -1; /* damaged frame, -1 for the header */
		for (int k = 0; k < 5; k++)
			if (i >= frame_off(&s, k))
				frame = k;
		for (int bit = 0; bit < 8; bit += 3) { /* bits 0, 3, 6 */
			s.buf[i] ^= (unsigned char)(1u << bit);
			t_seg_save(&s, dir);
			s.buf[i] ^= (unsigned char)(1u << bit);
			for (int mode = 0; mode < 4; mode++) {
				read_all(&g, dir, mode);
				CHECK(g.pr.n >= 1);
				for (int j = 0; j < g.n; j++)
					CHECK(rec_is_original(&g.r[j], 1));
				if (mode == LE_RECOVER_ABSOLUTE)
					CHECK_EQ(g.rc, LE_ECORRUPT);
				if (mode == LE_RECOVER_SKIP)
					CHECK_EQ(g.n, frame < 0 ? 0 : 4);
				if (mode == LE_RECOVER_POINT_IN_TIME)
					CHECK_EQ(g.n, frame < 0 ? 0 : frame);
				if (mode != LE_RECOVER_ABSOLUTE &&
				    mode != LE_RECOVER_TOLERATE_TAIL)
					CHECK_EQ(g.rc, 0);
				got_free(&g);
			}
		}
	}
	t_seg_free(&s);
	t_rmrf(dir);
}

/* ---- absurd lengths ---- */

/* Fail any allocation far above what a reader needs. */
#define ALLOC_SLACK (64u << 20)

TEST(absurd_length_does_not_allocate)
{
	char dir[256];
	t_seg s;
	uint32_t words[] = {0xFFFFFFF0u, 0x7FFFFFFFu, 0x01000000u,
	                    LE_FRAME_MAX};

	t_tmpdir(dir);
	t_watch_allocations(ALLOC_SLACK);
	for (size_t w = 0; w < sizeof words / sizeof words[0]; w++) {
		/* In the last frame: a torn tail.  In the middle: damage. */
		for (int k = 2; k <= 4; k += 2) {
			seg_n(&s, ALL, 0, 1, 1, 5, 1);
			le__put32(s.buf + frame_off(&s, k), words[w]);
			t_seg_save(&s, dir);
			expect_read(dir, LE_RECOVER_TOLERATE_TAIL,
			            k == 4 ? 0 : LE_ECORRUPT, k);
			expect_read(dir, LE_RECOVER_SKIP, 0, 4);
			t_seg_free(&s);
		}
	}
#if defined(__SANITIZE_ADDRESS__)
	CHECK(t_max_alloc <= (2u << 20)); /* the 1 MiB window and change */
#endif
	t_rmrf(dir);
}

/* ---- frames and segments in the wrong place ---- */

TEST(frame_copied_to_wrong_offset_is_rejected)
{
	char dir[256];
	t_seg s;
	got g;

	t_tmpdir(dir);
	t_seg_begin(&s, ALL, 0, 1, 1);
	for (int i = 0; i < 8; i++)
		t_seg_add(&s, LE_INFO, TS0 + (uint64_t)i, "same-size payload");
	size_t f1 = frame_off(&s, 1), f4 = frame_off(&s, 4);
	memcpy(s.buf + f4, s.buf + f1, frame_off(&s, 2) - f1);
	t_seg_save(&s, dir);

	read_expect(&g, dir, LE_RECOVER_TOLERATE_TAIL, LE_ECORRUPT, 4);
	CHECK_EQ(g.pr.off[0], f4);
	CHECK(t_probs_has(&g.pr, "sequence"));
	got_free(&g);

	read_expect(&g, dir, LE_RECOVER_SKIP, 0, 7);
	for (int i = 0; i < 7; i++) /* seq 2 once, 5 missing */
		CHECK_EQ(g.r[i].seq, i < 4 ? i + 1 : i + 2);
	got_free(&g);
	t_seg_free(&s);
	t_rmrf(dir);
}

TEST(frame_copied_to_other_shard_is_rejected)
{
	char dir[256];
	t_seg a, b;
	got g;

	t_tmpdir(dir);
	t_seg_begin(&a, ALL, 0, 1, 1);
	t_seg_begin(&b, ALL, 1, 1, 1);
	for (int i = 0; i < 5; i++) {
		t_seg_add(&a, LE_INFO, TS0 + (uint64_t)i, "from shard zero");
		t_seg_add(&b, LE_INFO, TS0 + (uint64_t)i, "from shard one!");
	}
	/* Same size, same sequence number: only the shard field differs. */
	size_t f2 = frame_off(&a, 2);
	memcpy(a.buf + f2, b.buf + f2, frame_off(&a, 3) - f2);
	t_seg_save(&a, dir);
	t_seg_save(&b, dir);

	read_all(&g, dir, LE_RECOVER_TOLERATE_TAIL);
	CHECK_EQ(g.rc, LE_ECORRUPT);
	CHECK(t_probs_has(&g.pr, "another shard"));
	CHECK_EQ(g.pr.off[0], f2);
	got_free(&g);

	read_expect(&g, dir, LE_RECOVER_SKIP, 0, 9);
	for (int i = 0; i < g.n; i++)
		CHECK(memcmp(g.r[i].payload, g.r[i].shard ? "from shard one!"
		                                          : "from shard zero",
		             15) == 0);
	got_free(&g);
	t_seg_free(&a);
	t_seg_free(&b);
	t_rmrf(dir);
}

TEST(segment_copied_to_other_shard_is_rejected)
{
	char dir[256], from[512], to[512], cmd[1200];
	got g;

	t_tmpdir(dir);
	save_seg_n(dir, ALL, 0, 1, 1, 3, 1);
	snprintf(cmd, sizeof cmd, "%s/shard-001", dir);
	mkdir(cmd, 0755);
	t_seg_path(from, sizeof from, dir, 0, 1);
	t_seg_path(to, sizeof to, dir, 1, 1);
	snprintf(cmd, sizeof cmd, "cp '%s' '%s'", from, to);
	CHECK(system(cmd) == 0);

	read_all(&g, dir, LE_RECOVER_TOLERATE_TAIL);
	CHECK_EQ(g.rc, LE_ECORRUPT);
	CHECK(t_probs_has(&g.pr, "another shard"));
	got_free(&g);

	read_expect(&g, dir, LE_RECOVER_SKIP, 0, 3);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(g.r[i].shard, 0);
	got_free(&g);
	t_rmrf(dir);
}

TEST(segment_renamed_to_other_index_is_rejected)
{
	char dir[256], from[512], to[512];
	got g;

	t_tmpdir(dir);
	save_seg_n(dir, ALL, 0, 1, 1, 3, 1);
	t_seg_path(from, sizeof from, dir, 0, 1);
	t_seg_path(to, sizeof to, dir, 0, 7);
	CHECK(rename(from, to) == 0);
	read_all(&g, dir, LE_RECOVER_TOLERATE_TAIL);
	CHECK_EQ(g.rc, LE_ECORRUPT);
	CHECK(t_probs_has(&g.pr, "index"));
	got_free(&g);
	t_rmrf(dir);
}

/* ---- segment headers and sequence continuity ---- */

TEST(sequence_gap_between_segments_is_reported)
{
	char dir[256];
	t_seg s;
	got g;

	t_tmpdir(dir);
	save_seg_n(dir, ALL, 0, 1, 1, 5, 1);
	seg_n(&s, ALL, 0, 2, 9, 5, 1); /* 6, 7, 8 are missing */
	t_seg_save(&s, dir);
	t_seg_free(&s);

	read_expect(&g, dir, LE_RECOVER_TOLERATE_TAIL, 0, 10);
	CHECK_EQ(g.pr.n, 1);
	CHECK(t_probs_has(&g.pr,
	                  "sequence gap: expected 6, segment starts at 9"));
	got_free(&g);

	expect_read(dir, LE_RECOVER_ABSOLUTE, LE_ECORRUPT, 5);

	expect_read(dir, LE_RECOVER_POINT_IN_TIME, 0, 5);

	read_expect(&g, dir, LE_RECOVER_SKIP, 0, 10);
	CHECK_EQ(g.pr.n, 1);
	got_free(&g);
	t_rmrf(dir);
}

/* Retention deletes the oldest segments: a shard starting past 1 is
 * normal. */
TEST(deleted_leading_segments_are_not_a_gap)
{
	char dir[256];
	got g;

	t_tmpdir(dir);
	save_seg_n(dir, ALL, 0, 40, 1000, 3, 1);
	save_seg_n(dir, ALL, 0, 41, 1003, 3, 1);
	read_expect(&g, dir, LE_RECOVER_ABSOLUTE, 0, 6);
	CHECK_EQ(g.pr.n, 0);
	CHECK_EQ(g.r[0].seq, 1000);
	CHECK_EQ(g.r[5].seq, 1005);
	got_free(&g);
	t_rmrf(dir);
}

TEST(torn_header_of_last_segment_is_a_torn_tail)
{
	char dir[256];
	unsigned char zeros[4096] = {0};
	t_seg s, h;
	got g;

	t_tmpdir(dir);
	seg_n(&s, ALL, 0, 1, 1, 5, 1);
	t_seg_save(&s, dir);
	/* Three ways a crash leaves a new segment: empty, header cut short,
	 * preallocated zeros. */
	seg_n(&h, ALL, 0, 2, 6, 0, 1);
	t_seg_raw(&h, zeros, sizeof zeros);
	size_t lens[] = {0, 30, LE_SEG_HDR - 1};
	for (int v = 0; v < 4; v++) {
		if (v < 3) {
			t_seg_save_len(&h, dir, lens[v]);
		} else {
			memset(h.buf, 0, LE_SEG_HDR);
			t_seg_save(&h, dir);
		}
		read_expect(&g, dir, LE_RECOVER_TOLERATE_TAIL, 0, 5);
		CHECK_EQ(g.pr.n, 1);
		CHECK(t_probs_has(&g.pr, "torn tail"));
		got_free(&g);
		expect_read(dir, LE_RECOVER_ABSOLUTE, LE_ECORRUPT, 5);
	}
	/* But a damaged header with frames after it lost those frames. */
	t_seg_free(&h);
	seg_n(&h, ALL, 0, 2, 6, 3, 1);
	h.buf[20] ^= 0x40;
	t_seg_save(&h, dir);
	read_all(&g, dir, LE_RECOVER_TOLERATE_TAIL);
	CHECK_EQ(g.rc, LE_ECORRUPT);
	CHECK(!t_probs_has(&g.pr, "torn tail"));
	got_free(&g);
	t_seg_free(&s);
	t_seg_free(&h);
	t_rmrf(dir);
}

/* A writer creates a segment, then writes its header.  This pread finds
 * the new file empty once, and the header and frames land just after:
 * the reader's first look sees no header, its second a whole one. */
static const t_seg *landing;
static const char *landing_dir;
static int landing_armed;

static ssize_t header_lands_pread(int fd, void *buf, size_t len, off_t off)
{
	ssize_t n = pread(fd, buf, len, off);
	if (landing_armed && off == 0 && n == 0) {
		landing_armed = 0;
		t_seg_save(landing, landing_dir);
	}
	return n;
}

TEST(a_header_written_between_two_looks_is_read_not_called_damage)
{
	static const int modes[] = {LE_RECOVER_TOLERATE_TAIL,
	                            LE_RECOVER_ABSOLUTE};
	char dir[256];
	t_seg s, h;
	le__os os = le__os_real;
	got g;

	t_tmpdir(dir);
	seg_n(&s, ALL, 0, 1, 1, 5, 1);
	t_seg_save(&s, dir);
	seg_n(&h, ALL, 0, 2, 6, 3, 1);
	landing = &h;
	landing_dir = dir;
	os.pread = header_lands_pread;
	le__os_install(&os);
	for (int follow = 0; follow < 2; follow++)
		for (int m = 0; m < 2; m++) {
			t_seg_save_len(&h, dir, 0); /* created, nothing in it */
			landing_armed = 1;
			read_dir(&g, dir, modes[m], -1, follow);
			CHECK_EQ(g.rc, 0);
			CHECK_EQ(landing_armed, 0);
			for (int i = 0; i < g.pr.n && i < T_MAX_PROBS; i++)
				fprintf(stderr, "  problem: %s\n",
				        g.pr.what[i]);
			CHECK_EQ(g.pr.n, 0);
			CHECK_EQ(g.n, 8);
			for (int i = 0; i < g.n; i++)
				CHECK_EQ(g.r[i].seq, (uint64_t)i + 1);
			got_free(&g);
		}
	le__os_install(NULL);
	t_seg_free(&s);
	t_seg_free(&h);
	t_rmrf(dir);
}

TEST(damaged_header_of_middle_segment_is_corruption)
{
	char dir[256];
	t_seg s;
	got g;

	t_tmpdir(dir);
	for (int k = 0; k < 3; k++) {
		seg_n(&s, ALL, 0, 1 + (uint64_t)k, 1 + 4 * (uint64_t)k, 4, 1);
		if (k == 1)
			s.buf[33] ^= 0x01; /* base sequence, under the CRC */
		t_seg_save(&s, dir);
		t_seg_free(&s);
	}
	read_expect(&g, dir, LE_RECOVER_TOLERATE_TAIL, LE_ECORRUPT, 4);
	CHECK(t_probs_has(&g.pr, "header"));
	CHECK_EQ(g.pr.off[0], 0);
	got_free(&g);

	expect_read(dir, LE_RECOVER_POINT_IN_TIME, 0, 4);

	read_expect(&g, dir, LE_RECOVER_SKIP, 0, 8);
	CHECK_EQ(g.pr.n, 1);
	CHECK_EQ(g.r[4].seq, 9);
	got_free(&g);
	t_rmrf(dir);
}

TEST(unknown_version_is_refused_at_open)
{
	char dir[256];
	t_seg s;
	le_reader *r = (le_reader *)&s;

	t_tmpdir(dir);
	seg_n(&s, ALL, 0, 1, 1, 2, 1);
	le__put16(s.buf + 8, LE_SEG_VERSION + 1);
	le__put32(s.buf + LE_SEG_HDR_CRC_OFF,
	          le__crc_mask(le__crc32c_extend(0, s.buf,
	                                         LE_SEG_HDR_CRC_OFF)));
	t_seg_save(&s, dir);
	CHECK_EQ(le_reader_open(&r, dir, NULL), LE_EVERSION);
	CHECK(r == NULL);
	CHECK(strstr(le_errmsg(), "0000000000000001.seg"));
	char want[64];
	snprintf(want, sizeof want, "version %d", LE_SEG_VERSION + 1);
	CHECK(strstr(le_errmsg(), want));
	t_seg_free(&s);
	t_rmrf(dir);
}

/* ---- fields and flags ---- */

TEST(fields_off_still_decode)
{
	char dir[256], p[128];
	uint32_t sets[] = {ALL & ~LE_FIELD_CRC, ALL & ~LE_FIELD_TIMESTAMP,
	                   ALL & ~LE_FIELD_LEVEL, ALL & ~LE_FIELD_SHARD,
	                   ALL & ~LE_FIELD_SEQUENCE, 0};
	t_seg s;
	got g;

	for (size_t v = 0; v < sizeof sets / sizeof sets[0]; v++) {
		uint32_t f = sets[v];
		t_tmpdir(dir);
		seg_n(&s, f, 3, 1, 50, 6, 1000);
		t_seg_save(&s, dir);
		read_all(&g, dir, LE_RECOVER_ABSOLUTE);
		CHECK_EQ(g.rc, 0);
		CHECK_EQ(g.pr.n, 0);
		CHECK_EQ(g.n, 6);
		for (int i = 0; i < 6; i++) {
			const rec *r = &g.r[i];
			uint64_t seq = 50 + (uint64_t)i;
			/* Without the field the scanner counts from the
			 * segment's base sequence. */
			CHECK_EQ(r->seq, seq);
			CHECK_EQ(r->shard, 3);
			CHECK_EQ(r->ts, (f & LE_FIELD_TIMESTAMP)
			                     ? TS0 + seq * 1000 : 0);
			CHECK_EQ(r->level, (f & LE_FIELD_LEVEL) ? i % 6 : -1);
			size_t len = payload_of(p, sizeof p, 3, seq);
			CHECK_EQ(r->len, len);
			CHECK(memcmp(r->payload, p, len) == 0);
		}
		got_free(&g);
		t_seg_free(&s);
		t_rmrf(dir);
	}
}

TEST(marker_and_truncated_flags_come_through)
{
	char dir[256];
	t_seg s;
	got g;

	t_tmpdir(dir);
	t_seg_begin(&s, ALL, 0, 1, 1);
	t_seg_add_ex(&s, LE_REC_MARKER, LE_WARN, TS0, "3 records dropped", 17);
	t_seg_add_ex(&s, LE_REC_TRUNCATED, LE_INFO, TS0 + 1, "cut", 3);
	t_seg_add_ex(&s, 0, LE_INFO, TS0 + 2, "", 0);
	t_seg_save(&s, dir);
	read_expect(&g, dir, LE_RECOVER_ABSOLUTE, 0, 3);
	CHECK_EQ(g.r[0].flags, LE_REC_MARKER);
	CHECK_EQ(g.r[1].flags, LE_REC_TRUNCATED);
	CHECK_EQ(g.r[2].flags, 0);
	CHECK_EQ(g.r[2].len, 0);
	got_free(&g);
	t_seg_free(&s);
	t_rmrf(dir);
}

/* A deferred record whose descriptor does not decode (its frame sound):
 * damage, so ABSOLUTE stops there as for any other; the other modes
 * read it as a text that says why (found by fuzz_segment). */
TEST(absolute_mode_stops_at_an_undecodable_deferred_record)
{
	char dir[256];
	t_seg s;
	got g;

	t_tmpdir(dir);
	t_seg_begin(&s, ALL, 0, 1, 1);
	t_seg_add(&s, LE_INFO, TS0, "before");
	t_seg_add_ex(&s, LE_REC_DEFERRED, LE_INFO, TS0 + 1, "garbage", 7);
	t_seg_add(&s, LE_INFO, TS0 + 2, "after");
	t_seg_save(&s, dir);
	read_expect(&g, dir, LE_RECOVER_ABSOLUTE, LE_ECORRUPT, 1);
	CHECK_EQ(g.pr.n, 1);
	got_free(&g);
	read_expect(&g, dir, LE_RECOVER_SKIP, 0, 3);
	CHECK_EQ(g.pr.n, 1);
	static const char lost[] = "[undecodable deferred record";
	CHECK(g.r[1].len > sizeof lost - 1 &&
	      memcmp(g.r[1].payload, lost, sizeof lost - 1) == 0);
	got_free(&g);
	t_seg_free(&s);
	t_rmrf(dir);
}

/* ---- directories and options ---- */

TEST(missing_dir_is_enoent)
{
	char dir[256], missing[300];
	le_reader *r;

	t_tmpdir(dir);
	snprintf(missing, sizeof missing, "%s/nope", dir);
	CHECK_EQ(le_reader_open(&r, missing, NULL), -ENOENT);
	CHECK(r == NULL);
	CHECK(strstr(le_errmsg(), missing));
	/* A shard asked for by number that is not there. */
	le_reader_opts o;
	le_reader_opts_init(&o);
	o.shard = 5;
	CHECK_EQ(le_reader_open(&r, dir, &o), -ENOENT);
	CHECK(strstr(le_errmsg(), "shard-005"));
	t_rmrf(dir);
}

TEST(empty_dir_reads_nothing)
{
	char dir[256], sub[300];
	le_reader *r;
	le_record lr;
	le_reader_stats st;

	t_tmpdir(dir);
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 1) { /* a shard directory with no segment */
			snprintf(sub, sizeof sub, "%s/shard-000", dir);
			CHECK(mkdir(sub, 0755) == 0);
		}
		CHECK_RC(le_reader_open(&r, dir, NULL));
		CHECK_EQ(le_reader_next(r, &lr), 0);
		CHECK_EQ(le_reader_next(r, &lr), 0);
		CHECK_RC(le_reader_stats_get(r, &st));
		CHECK_EQ(st.records + st.segments + st.problems, 0);
		le_reader_close(r);
	}
	le_reader_close(NULL);
	check_no_leaks();
	t_rmrf(dir);
}

TEST(shard_option_reads_one_shard)
{
	char dir[256];
	got g;

	t_tmpdir(dir);
	for (uint32_t k = 0; k < 3; k++)
		save_seg_n(dir, ALL, k, 1, 1, 4, 1);
	read_dir(&g, dir, LE_RECOVER_ABSOLUTE, 1, 0);
	CHECK_EQ(g.rc, 0);
	CHECK_EQ(g.n, 4);
	for (int i = 0; i < 4; i++)
		CHECK_EQ(g.r[i].shard, 1);
	got_free(&g);
	t_rmrf(dir);
}

TEST(bad_options_are_einval)
{
	le_reader *r;
	le_reader_opts o;

	le_reader_opts_init(&o);
	o.mode = 9;
	CHECK_EQ(le_reader_open(&r, "/tmp", &o), LE_EINVAL);
	CHECK(strstr(le_errmsg(), "mode"));
	le_reader_opts_init(&o);
	o.shard = 100000; /* shard-000 .. shard-99999 */
	CHECK_EQ(le_reader_open(&r, "/tmp", &o), LE_EINVAL);
	CHECK_EQ(le_reader_open(&r, NULL, NULL), LE_EINVAL);
	CHECK_EQ(le_reader_open(NULL, "/tmp", NULL), LE_EINVAL);
	CHECK_EQ(le_reader_next(NULL, NULL), LE_EINVAL);
	CHECK_EQ(le_reader_stats_get(NULL, NULL), LE_EINVAL);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	RUN(records_come_back_in_file_order);
	RUN(segments_are_read_in_index_order);
	RUN(shards_are_merged_by_timestamp);
	RUN(within_a_shard_file_order_beats_timestamps);
	RUN(records_larger_than_the_read_window_are_intact);
	RUN(truncated_last_record_at_every_byte_is_a_torn_tail);
	RUN(zero_filled_tail_ends_the_log);
	RUN(zero_filled_tail_in_earlier_segment_is_not_a_gap);
	RUN(garbage_tail_is_a_torn_tail);
	RUN(garbage_tail_before_another_segment_is_corruption);
	RUN(bit_flip_in_middle_is_corruption_not_tail);
	RUN(corruption_error_is_sticky);
	RUN(point_in_time_stops_only_the_damaged_shard);
	RUN(bit_flip_at_every_byte_is_detected);
	RUN(absurd_length_does_not_allocate);
	RUN(frame_copied_to_wrong_offset_is_rejected);
	RUN(frame_copied_to_other_shard_is_rejected);
	RUN(segment_copied_to_other_shard_is_rejected);
	RUN(segment_renamed_to_other_index_is_rejected);
	RUN(sequence_gap_between_segments_is_reported);
	RUN(deleted_leading_segments_are_not_a_gap);
	RUN(torn_header_of_last_segment_is_a_torn_tail);
	RUN(a_header_written_between_two_looks_is_read_not_called_damage);
	RUN(damaged_header_of_middle_segment_is_corruption);
	RUN(unknown_version_is_refused_at_open);
	RUN(fields_off_still_decode);
	RUN(marker_and_truncated_flags_come_through);
	RUN(absolute_mode_stops_at_an_undecodable_deferred_record);
	RUN(missing_dir_is_enoent);
	RUN(empty_dir_reads_nothing);
	RUN(shard_option_reads_one_shard);
	RUN(bad_options_are_einval);
	return t_done();
}
