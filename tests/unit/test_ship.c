/*
 * test_ship.c -- the library's side of forwarding, without a server: the
 * FORWARD cursor and ORIGIN file against INTERFACES.md's test vectors, the
 * checks on a message body, the collector's store (fencing, torn tails,
 * gap markers, origins seen by the reader), and retention holding what a
 * forwarder has not shipped.
 */
#include "segfile.h"

#include <fcntl.h>
#include <sys/wait.h>

#include "logengine.h"
#include "record/defer.h"
#include "logtest.h"
#include "store/segment.h"
#include "ship/ship.h"

#define TS0 1796074227000000000ull

static void hex_eq(const unsigned char *got, const char *want_hex)
{
	char buf[1024];
	size_t n = 0, len = 0;

	for (const char *p = want_hex; *p; p++)
		if (*p != ' ' && *p != '\n')
			len++;
	CHECK(len / 2 < sizeof buf / 2);
	for (size_t i = 0; i < len / 2; i++)
		n += (size_t)snprintf(buf + n, sizeof buf - n, "%02x", got[i]);
	char want[1024];
	size_t k = 0;
	for (const char *p = want_hex; *p; p++)
		if (*p != ' ' && *p != '\n')
			want[k++] = *p;
	want[k] = '\0';
	CHECK_STR_EQ(buf, want);
}

/* ---- FORWARD ---- */

TEST(forward_slot_matches_the_test_vector)
{
	le__fwd_cursor c = {.gen = 5, .next_seq = 1001, .seg_index = 3,
	                    .offset = 4096, .lost = 17,
	                    .written_ns = 1764538227123456789ull, .shard = 2};
	unsigned char b[LE_FWD_SLOT];
	le__fwd_cursor d;

	le__fwd_encode(b, &c);
	hex_eq(b, "4c4f4745 4e474657 05000000 00000000"
	          "e9030000 00000000 03000000 00000000"
	          "00100000 00000000 11000000 00000000"
	          "158b4a2c 2be67c18 02000000 f86820f4");
	CHECK_RC(le__fwd_decode(b, &d));
	CHECK_EQ(d.next_seq, 1001);
	CHECK_EQ(d.lost, 17);
	CHECK_EQ(d.shard, 2);
	b[20] ^= 1;
	CHECK_EQ(le__fwd_decode(b, &d), LE_ECORRUPT);
}

TEST(torn_forward_slot_falls_back_to_the_other)
{
	unsigned char file[LE_FWD_FILE_BYTES] = {0};
	le__fwd_cursor c = {.gen = 6, .next_seq = 500, .shard = 0}, got;

	le__fwd_encode(file, &c);
	c.gen = 7;
	c.next_seq = 900;
	le__fwd_encode(file + LE_FWD_SLOT1_OFF, &c);
	CHECK_RC(le__fwd_pick(file, sizeof file, &got));
	CHECK_EQ(got.next_seq, 900);
	file[LE_FWD_SLOT1_OFF + 30] ^= 0x40; /* slot 1 torn mid-write */
	CHECK_RC(le__fwd_pick(file, sizeof file, &got));
	CHECK_EQ(got.gen, 6);
	CHECK_EQ(got.next_seq, 500);
	/* A slot in the wrong place is not trusted. */
	memcpy(file + LE_FWD_SLOT1_OFF, file, LE_FWD_SLOT);
	CHECK_RC(le__fwd_pick(file, sizeof file, &got));
	CHECK_EQ(got.gen, 6);
	memset(file, 0, LE_FWD_SLOT);
	CHECK_EQ(le__fwd_pick(file, sizeof file, &got), LE_ECORRUPT);
}

TEST(short_forward_file_reads_as_zero_filled)
{
	unsigned char file[LE_FWD_SLOT];
	le__fwd_cursor c = {.gen = 2, .next_seq = 42}, got;

	le__fwd_encode(file, &c);
	CHECK_RC(le__fwd_pick(file, sizeof file, &got));
	CHECK_EQ(got.next_seq, 42);
	CHECK_EQ(le__fwd_pick(file, 10, &got), LE_ECORRUPT);
}

/* ---- ORIGIN ---- */

TEST(origin_matches_the_test_vector)
{
	le__origin o = {.host = "web-1", .shard = 2}, d;
	unsigned char b[LE_ORIGIN_MAX_BYTES];

	CHECK_EQ(le__origin_encode(b, &o), 25);
	hex_eq(b, "4c4f4745 4e474f52 01000500 02000000 7765622d 3196d6a0 e8");
	CHECK_RC(le__origin_decode(b, 25, &d));
	CHECK_STR_EQ(d.host, "web-1");
	CHECK_EQ(d.shard, 2);
	CHECK_EQ(le__origin_decode(b, 24, &d), LE_ECORRUPT);
}

TEST(late_origin_is_version_2_with_its_kind_and_version_1_reads_as_a_chain)
{
	le__origin o = {.host = "web-1", .shard = 2, .kind = LE_ORIGIN_LATE}, d;
	unsigned char b[LE_ORIGIN_MAX_BYTES];

	CHECK_EQ(le__origin_encode(b, &o), 29);
	hex_eq(b, "4c4f4745 4e474f52 02000500 02000000 01000000 7765622d "
	          "31ea881a 8a");
	CHECK_RC(le__origin_decode(b, 29, &d));
	CHECK_STR_EQ(d.host, "web-1");
	CHECK_EQ(d.shard, 2);
	CHECK_EQ(d.kind, LE_ORIGIN_LATE);
	CHECK_EQ(le__origin_decode(b, 28, &d), LE_ECORRUPT);
	o.kind = LE_ORIGIN_CHAIN; /* written as version 1, read as a chain */
	CHECK_EQ(le__origin_encode(b, &o), 25);
	d.kind = 7;
	CHECK_RC(le__origin_decode(b, 25, &d));
	CHECK_EQ(d.kind, LE_ORIGIN_CHAIN);
}

TEST(origin_host_outside_the_alphabet_is_refused)
{
	le__origin o = {.host = "we\"b", .shard = 0}, d;
	unsigned char b[LE_ORIGIN_MAX_BYTES];
	size_t n = le__origin_encode(b, &o); /* CRC right, name not */

	CHECK_EQ(le__origin_decode(b, n, &d), LE_ECORRUPT);
	CHECK(le__host_valid("a.b_c-9", 7));
	CHECK(!le__host_valid("", 0));
	CHECK(!le__host_valid("a b", 3));
	CHECK(!le__host_valid("a/b", 3));
}

/* ---- message bodies ---- */

/* Frames of shard 2, records first.., every field, "rec N" payloads. */
static size_t body(unsigned char *out, uint32_t fields, uint64_t first,
                   int n)
{
	size_t len = 0;
	char p[32];

	for (int i = 0; i < n; i++) {
		int pl = snprintf(p, sizeof p, "rec %d", i);
		len += le__frame_encode(out + len, fields, 0, LE_INFO, 2,
		                        first + (uint64_t)i, TS0 + (uint64_t)i, p,
		                        (uint32_t)pl);
	}
	return len;
}

TEST(body_of_valid_frames_passes)
{
	unsigned char b[4096];
	uint64_t off;
	const char *why;
	size_t len = body(b, LE_FIELD_ALL, 100, 5);

	CHECK_RC(le__ship_check_body(b, len, LE_FIELD_ALL, 2, 100, 5, &off,
	                             &why));
	size_t skip = le__ship_body_skip(b, len, 2);
	CHECK_EQ(le__get64(b + skip + 12), 102); /* its sequence field */
	CHECK_EQ(le__ship_body_skip(b, len, 5), len);
}

TEST(body_with_one_bad_crc_is_rejected_at_that_frame)
{
	unsigned char b[4096];
	uint64_t off;
	const char *why;
	size_t len = body(b, LE_FIELD_ALL, 100, 5);
	size_t third = le__ship_body_skip(b, len, 3);

	b[third + 30] ^= 1; /* a payload byte of the fourth frame */
	CHECK_EQ(le__ship_check_body(b, len, LE_FIELD_ALL, 2, 100, 5, &off,
	                             &why), LE_ECORRUPT);
	CHECK_EQ(off, third);
	CHECK_STR_EQ(why, "checksum mismatch");
}

TEST(body_whose_frames_disagree_with_its_headers_is_rejected)
{
	unsigned char b[4096];
	uint64_t off;
	const char *why;
	size_t len = body(b, LE_FIELD_ALL, 100, 5);

	CHECK_EQ(le__ship_check_body(b, len, LE_FIELD_ALL, 2, 101, 5, &off,
	                             &why), LE_ECORRUPT); /* wrong first */
	CHECK_EQ(off, 0);
	CHECK_EQ(le__ship_check_body(b, len, LE_FIELD_ALL, 3, 100, 5, &off,
	                             &why), LE_ECORRUPT); /* wrong shard */
	CHECK_EQ(le__ship_check_body(b, len, LE_FIELD_ALL, 2, 100, 6, &off,
	                             &why), LE_ECORRUPT); /* one missing */
	CHECK_EQ(off, len);
	CHECK_EQ(le__ship_check_body(b, len, LE_FIELD_ALL, 2, 100, 4, &off,
	                             &why), LE_ECORRUPT); /* one too many */
	CHECK_EQ(le__ship_check_body(b, len - 1, LE_FIELD_ALL, 2, 100, 5,
	                             &off, &why), LE_ECORRUPT); /* cut */
	memset(b + len, 0, 8);
	CHECK_EQ(le__ship_check_body(b, len + 8, LE_FIELD_ALL, 2, 100, 5,
	                             &off, &why), LE_ECORRUPT); /* padding */
}

TEST(body_test_vector_of_format_md)
{
	static const char hex[] = "1d0000006d5cf1c900020200640000000000000015"
	                          "8b4a2c2be67c1868656c6c6f";
	unsigned char b[40];
	uint64_t off;
	const char *why;

	for (int i = 0; i < 33; i++)
		sscanf(hex + 2 * i, "%2hhx", &b[i]);
	CHECK_RC(le__ship_check_body(b, 33, 31, 2, 100, 1, &off, &why));
	CHECK_EQ(le__ship_check_body(b, 33, 31, 2, 100, 2, &off, &why),
	         LE_ECORRUPT);
	CHECK_EQ(le__ship_check_body(b, 33, 31, 3, 100, 1, &off, &why),
	         LE_ECORRUPT);
	for (int i = 0; i < 33; i++) {
		b[i] ^= 0x10;
		CHECK_EQ(le__ship_check_body(b, 33, 31, 2, 100, 1, &off, &why),
		         LE_ECORRUPT);
		b[i] ^= 0x10;
	}
}

TEST(body_without_sequence_field_is_numbered_from_first)
{
	unsigned char b[4096];
	uint64_t off;
	const char *why;
	uint32_t fields = LE_FIELD_CRC | LE_FIELD_TIMESTAMP;
	size_t len = body(b, fields, 7, 3);

	CHECK_RC(le__ship_check_body(b, len, fields, 2, 7, 3, &off, &why));
}

/* ---- the collector's store ---- */

static le__cstore *store_open(const char *dir, uint64_t seg_bytes)
{
	le__cstore *s;
	le__cstore_opts o = {.segment_bytes = seg_bytes, .sync = 1};
	char err[512];
	int rc = le__cstore_open(&s, dir, &o, err, sizeof err);
	if (rc < 0)
		fprintf(stderr, "  open: %s\n", err);
	CHECK_RC(rc);
	return s;
}

static le__cstore_origin *origin(le__cstore *s, const char *host,
                                 uint32_t shard)
{
	char err[256];
	le__cstore_origin *o;
	CHECK_RC(le__cstore_origin_get(s, host, shard, 1, &o, err, sizeof err));
	CHECK(o);
	if (o->next_seq == 0)
		o->next_seq = 1;
	return o;
}

struct seen {
	int n;
	uint64_t seq[64];
	char host[64][16];
	uint32_t flags[64];
	char msg[64][48];
};

static void see(const le_record *r, void *arg)
{
	struct seen *s = arg;
	if (s->n >= 64)
		return;
	s->seq[s->n] = r->origin_seq;
	snprintf(s->host[s->n], 16, "%s", r->host ? r->host : "-");
	s->flags[s->n] = r->flags;
	snprintf(s->msg[s->n], 48, "%.*s", (int)r->len,
	         (const char *)r->payload);
	s->n++;
}

TEST(store_keeps_frames_and_origin_for_the_reader)
{
	char dir[256];
	unsigned char b[4096];
	struct seen sn = {0};
	le__cstore *s = store_open(t_tmpdir(dir), 1 << 20);
	le__cstore_origin *o = origin(s, "web-1", 2);
	size_t len = body(b, LE_FIELD_ALL, 1, 4);

	CHECK_RC(le__cstore_append(s, o, LE_FIELD_ALL, b, len, 4, NULL));
	CHECK_EQ(o->next_seq, 5);
	CHECK_RC(le__cstore_sync(s));
	le__cstore_close(s);
	CHECK_EQ(read_all(dir, LE_RECOVER_ABSOLUTE, see, &sn), 4);
	CHECK_STR_EQ(sn.host[0], "web-1");
	CHECK_EQ(sn.seq[3], 4);
	CHECK_STR_EQ(sn.msg[3], "rec 3");
	t_rmrf(dir);
}

TEST(reopened_store_expects_the_next_sequence)
{
	char dir[256];
	unsigned char b[4096];
	le__cstore *s = store_open(t_tmpdir(dir), 1 << 20);
	size_t len = body(b, LE_FIELD_ALL, 1, 3);

	CHECK_RC(le__cstore_append(s, origin(s, "a", 2), LE_FIELD_ALL, b, len,
	                           3, NULL));
	le__cstore_close(s);
	s = store_open(dir, 1 << 20);
	char err[128];
	le__cstore_origin *o;
	CHECK_RC(le__cstore_origin_get(s, "a", 2, 0, &o, err, sizeof err));
	CHECK(o);
	CHECK_EQ(o->next_seq, 4);
	CHECK_EQ(le__cstore_origin_get(s, "b", 0, 0, &o, err, sizeof err),
	         -ENOENT);
	CHECK(!o);
	le__cstore_close(s);
	t_rmrf(dir);
}

/* A new store in dir (a fresh temporary directory) holding the first two
 * of three records of origin ("a", 2), in body b (len bytes, the first
 * two frames `*two` of them).  Closed. */
static void store_two_of_three(char *dir, unsigned char *b, size_t *len,
                               size_t *two)
{
	le__cstore *s = store_open(t_tmpdir(dir), 1 << 20);
	*len = body(b, LE_FIELD_ALL, 1, 3);
	*two = le__ship_body_skip(b, *len, 2);
	CHECK_RC(le__cstore_append(s, origin(s, "a", 2), LE_FIELD_ALL, b, *two,
	                           2, NULL));
	le__cstore_close(s);
}

TEST(torn_tail_of_a_killed_collector_is_cut_at_open)
{
	char dir[256], path[512];
	unsigned char b[4096];
	size_t len, two;

	/* Two whole frames and half of the third: a write cut by a kill. */
	store_two_of_three(dir, b, &len, &two);
	snprintf(path, sizeof path, "%s/shard-000/0000000000000001.seg", dir);
	int fd = open(path, O_WRONLY | O_APPEND);
	CHECK(fd >= 0);
	CHECK_EQ(write(fd, b + two, (len - two) / 2), (ssize_t)((len - two) / 2));
	close(fd);
	le__cstore *s = store_open(dir, 1 << 20);
	le__cstore_origin *o = origin(s, "a", 2);
	CHECK_EQ(o->next_seq, 3);
	/* The redelivered message is fenced: only its third record goes. */
	CHECK_RC(le__cstore_append(s, o, LE_FIELD_ALL, b + two, len - two, 1, NULL));
	le__cstore_close(s);
	CHECK_EQ(count_records(dir), 3);
	t_rmrf(dir);
}

/* A collector killed between creating a segment and writing its header
 * leaves it empty, cut inside the header, or (after a power loss) zeros.
 * It held nothing: the next open removes it, as the engine's recovery
 * does, so that it never sits between two segments as damage.  A header
 * that is there but wrong is kept for readers to report. */
TEST(segment_a_killed_collector_created_but_never_wrote_is_removed_at_open)
{
	static const struct {
		const char *name;
		size_t len;      /* bytes of the second segment */
		int garbage;     /* nonzero bytes: a damaged header */
		int removed;
	} cases[] = {
		{"empty", 0, 0, 1},
		{"cut inside its header", 10, 0, 1},
		{"a header of zeros", LE_SEG_HDR, 0, 1},
		{"a block of zeros", 4096, 0, 1},
		{"a damaged header", LE_SEG_HDR, 1, 0},
	};
	char dir[256], path[512];
	unsigned char b[4096], z[4096];

	for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
		size_t len, two;
		store_two_of_three(dir, b, &len, &two);
		snprintf(path, sizeof path, "%s/shard-000/%016x.seg", dir, 2);
		memset(z, cases[k].garbage ? 0x5a : 0, sizeof z);
		int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0640);
		CHECK(fd >= 0);
		CHECK_EQ(write(fd, z, cases[k].len), (ssize_t)cases[k].len);
		close(fd);

		le__cstore *s = store_open(dir, 1 << 20);
		le__cstore_origin *o = origin(s, "a", 2);
		CHECK_EQ(o->next_seq, 3);
		CHECK_RC(le__cstore_append(s, o, LE_FIELD_ALL, b + two,
		                           len - two, 1, NULL));
		CHECK_RC(le__cstore_sync(s));
		le__cstore_close(s);
		long n = read_all(dir, LE_RECOVER_ABSOLUTE, NULL, NULL);
		if (n != (cases[k].removed ? 3 : LE_ECORRUPT))
			fprintf(stderr, "  %s: read %ld\n", cases[k].name, n);
		if (cases[k].removed) {
			CHECK_EQ(n, 3);
		} else {
			/* kept, and reported where it is */
			CHECK_EQ(n, LE_ECORRUPT);
			CHECK_EQ(read_all(dir, LE_RECOVER_TOLERATE_TAIL, NULL,
			                  NULL), LE_ECORRUPT);
		}
		t_rmrf(dir);
	}
}

TEST(gap_marker_says_how_many_and_the_chain_goes_on)
{
	char dir[256];
	unsigned char b[4096];
	struct seen sn = {0};
	le__cstore *s = store_open(t_tmpdir(dir), 1 << 20);
	le__cstore_origin *o = origin(s, "h", 2);
	size_t len = body(b, LE_FIELD_ALL, 1, 2);

	CHECK_RC(le__cstore_append(s, o, LE_FIELD_ALL, b, len, 2, NULL));
	CHECK_RC(le__cstore_gap(s, o, LE_FIELD_ALL, 3, 9, TS0 + 5,
	                        "lost before shipping"));
	CHECK_EQ(o->next_seq, 10);
	len = body(b, LE_FIELD_ALL, 10, 2);
	CHECK_RC(le__cstore_append(s, o, LE_FIELD_ALL, b, len, 2, NULL));
	le__cstore_close(s);
	CHECK_EQ(read_all(dir, LE_RECOVER_TOLERATE_TAIL, see, &sn), 5);
	CHECK_EQ(sn.flags[2], LE_REC_MARKER);
	CHECK_STR_EQ(sn.msg[2], "7 records lost before shipping");
	CHECK_EQ(sn.seq[2], 9);
	CHECK_EQ(sn.seq[3], 10);
	t_rmrf(dir);
}

/* Records of a message of records first..first+n-1 that are below o's
 * next sequence, to le__cstore_late.  @return how many it stored. */
static uint64_t redeliver(le__cstore *s, le__cstore_origin *o, uint64_t first,
                          int n, le__late *out)
{
	unsigned char b[8192];
	size_t len = body(b, LE_FIELD_ALL, first, n);
	le__ship_body from = {b, len, UINT64_MAX, LE_FIELD_ALL};
	uint64_t below = o->next_seq - first;

	CHECK_RC(le__cstore_late(s, o, first, b, len,
	                         below < (uint64_t)n ? below : (uint64_t)n,
	                         &from, out));
	return out->n;
}

struct probs {
	int n, gaps;
};

static void on_prob(void *arg, const char *file, uint64_t off,
                    const char *what)
{
	struct probs *p = arg;
	(void)file, (void)off;
	p->n++;
	p->gaps += strstr(what, "sequence gap") != NULL;
	fprintf(stderr, "  problem: %s\n", what);
}

/* Every record of dir in mode (ABSOLUTE: the read must end cleanly),
 * with the problems the reader reported.  @return the count. */
static long read_probs(const char *dir, int mode, struct seen *sn,
                       struct probs *p)
{
	return read_all_reporting(dir, mode, sn ? see : NULL, sn, on_prob, p);
}

/* Records 1..2, a claim "7 records <why>" for 3..9, records 10..11. */
static le__cstore *claimed_store(char *dir, le__cstore_origin **o,
                                 const char *why)
{
	unsigned char b[4096];
	le__cstore *s = store_open(t_tmpdir(dir), 1 << 20);
	size_t len = body(b, LE_FIELD_ALL, 1, 2);

	*o = origin(s, "h", 2);
	CHECK_RC(le__cstore_append(s, *o, LE_FIELD_ALL, b, len, 2, NULL));
	CHECK_RC(le__cstore_gap(s, *o, LE_FIELD_ALL, 3, 9, TS0 + 2, why));
	len = body(b, LE_FIELD_ALL, 10, 2);
	CHECK_RC(le__cstore_append(s, *o, LE_FIELD_ALL, b + 0, len, 2, NULL));
	return s;
}

TEST(records_inside_a_gap_claim_are_stored_when_they_come_and_only_once)
{
	char dir[256], err[256];
	le__late out;
	struct seen sn = {0};
	struct probs pr = {0};
	le__cstore_origin *o;
	le__cstore *s = claimed_store(dir, &o, LE_GAP_LOST);

	/* 4..6 come first, then the whole message 1..11 again: 3 and 7..9
	 * are what is left of the claim; 1, 2, 10, 11 are in the chain. */
	CHECK_EQ(redeliver(s, o, 4, 3, &out), 3);
	CHECK_EQ(out.lo, 4);
	CHECK_EQ(out.hi, 6);
	CHECK_EQ(redeliver(s, o, 1, 11, &out), 4);
	CHECK_EQ(out.lo, 3);
	CHECK_EQ(out.hi, 9);
	CHECK_EQ(redeliver(s, o, 1, 11, &out), 0);
	CHECK_EQ(o->next_seq, 12);
	le__cstore_close(s);
	/* What is stored and what is claimed come back from the store. */
	s = store_open(dir, 1 << 20);
	CHECK_RC(le__cstore_origin_get(s, "h", 2, 0, &o, err, sizeof err));
	CHECK_EQ(redeliver(s, o, 1, 11, &out), 0);
	le__cstore_close(s);
	/* Every record once, the marker too, merged by time, and no
	 * problem even in ABSOLUTE mode: the late runs are no chain. */
	CHECK_EQ(read_probs(dir, LE_RECOVER_ABSOLUTE, &sn, &pr), 12);
	CHECK_EQ(pr.n, 0);
	int times[12] = {0}, marks = 0;
	for (int i = 0; i < 12; i++) {
		CHECK(sn.seq[i] >= 1 && sn.seq[i] <= 11);
		times[sn.seq[i]]++;
		marks += sn.flags[i] == LE_REC_MARKER;
		CHECK_STR_EQ(sn.host[i], "h");
	}
	for (int q = 1; q <= 11; q++) /* 9: the marker and the record */
		CHECK_EQ(times[q], q == 9 ? 2 : 1);
	CHECK_EQ(marks, 1);
	t_rmrf(dir);
}

TEST(records_missing_from_the_stream_that_come_after_a_reopen_are_stored)
{
	char dir[256], err[256];
	le__late out;
	le__cstore_origin *o;
	le__cstore *s = claimed_store(dir, &o, LE_GAP_MISSING);

	le__cstore_close(s);
	s = store_open(dir, 1 << 20);
	CHECK_RC(le__cstore_origin_get(s, "h", 2, 0, &o, err, sizeof err));
	CHECK_EQ(redeliver(s, o, 1, 11, &out), 7);
	le__cstore_close(s);
	CHECK_EQ(count_records(dir), 11);
	t_rmrf(dir);
}

/* ---- the public collector interface (logengine.h, "Collector") ---- */

/* A store in a directory of its own, a message and what a call did. */
struct cfix {
	char dir[256];
	unsigned char b[4096]; /* the message's body */
	le_collector *c;
	le_collector_msg m;
	le_collector_res res;
};

static le_collector *coll_open(const char *dir, uint32_t max_origins)
{
	le_collector_opts o = {.segment_bytes = 1 << 20, .sync = 1,
	                       .max_origins = max_origins};
	le_collector_res res;
	le_collector *c;
	int rc = le_collector_open(&c, dir, &o, &res);
	if (rc < 0)
		fprintf(stderr, "  open: %s\n", res.msg);
	CHECK_RC(rc);
	return c;
}

/* A message of host h shard 2 holding records first .. first + n - 1
 * (body b, room for them). */
static le_collector_msg coll_msg(unsigned char *b, uint64_t first, int n)
{
	le_collector_msg m = {.host = "h", .shard = 2, .fields = LE_FIELD_ALL,
	                      .first = first, .last = first + (uint64_t)n - 1,
	                      .pos = UINT64_MAX, .body = b};
	m.len = body(b, LE_FIELD_ALL, first, n);
	return m;
}

/* f's store opened, and records 1 .. n of host h shard 2 appended. */
static void cfix_open(struct cfix *f, uint32_t max_origins, int n)
{
	f->c = coll_open(t_tmpdir(f->dir), max_origins);
	f->m = coll_msg(f->b, 1, n);
	CHECK_RC(le_collector_append(f->c, &f->m, 0, &f->res));
	CHECK_EQ(f->res.stored, (uint64_t)n);
}

TEST(collector_stores_a_batch_sent_twice_once)
{
	struct cfix f;
	struct seen sn = {0};
	struct probs pr = {0};

	cfix_open(&f, 0, 5);
	CHECK_EQ(f.res.bytes, f.m.len);
	CHECK_EQ(le_collector_next(f.res.origin), 6);
	CHECK_RC(le_collector_append(f.c, &f.m, 0, &f.res)); /* again */
	CHECK(!f.res.stored && !f.res.late && !f.res.lost && !f.res.missing);
	f.m = coll_msg(f.b, 4, 5); /* 4..8: only 6..8 are new */
	CHECK_RC(le_collector_append(f.c, &f.m, 0, &f.res));
	CHECK_EQ(f.res.stored, 3);
	CHECK_RC(le_collector_sync(f.c));
	le_collector_close(f.c);
	/* Reopened, the store knows what it has. */
	f.c = coll_open(f.dir, 0);
	f.m = coll_msg(f.b, 1, 8);
	CHECK_RC(le_collector_append(f.c, &f.m, 0, &f.res));
	CHECK_EQ(f.res.stored, 0);
	CHECK_EQ(le_collector_next(f.res.origin), 9);
	le_collector_close(f.c);
	CHECK_EQ(read_probs(f.dir, LE_RECOVER_ABSOLUTE, &sn, &pr), 8);
	for (int i = 0; i < 8; i++)
		CHECK_EQ(sn.seq[i], (uint64_t)i + 1);
	t_rmrf(f.dir);
}

/* f.m refused for `why`.  @return the byte offset it names. */
static uint64_t refused(struct cfix *f, int rc, int why)
{
	CHECK_EQ(le_collector_append(f->c, &f->m, 0, &f->res), rc);
	CHECK_EQ(f->res.refused, why);
	CHECK(f->res.msg[0]);
	return f->res.offset;
}

TEST(collector_refuses_a_damaged_or_forged_body_at_its_frame_storing_nothing)
{
	struct cfix f;
	le_collector_origin *o;

	f.c = coll_open(t_tmpdir(f.dir), 0);
	f.m = coll_msg(f.b, 1, 5);
	size_t fourth = le__ship_body_skip(f.b, f.m.len, 3);
	f.b[fourth + 30] ^= 1; /* a payload byte of the fourth frame */
	CHECK_EQ(refused(&f, LE_ECORRUPT, LE_COLLECT_DAMAGED), fourth);
	CHECK_STR_EQ(f.res.msg, "checksum mismatch");
	/* Frames of shard 2 under a message of shard 3: refused at the
	 * first, and the origin never made. */
	f.m = coll_msg(f.b, 1, 5);
	f.m.shard = 3;
	CHECK_EQ(refused(&f, LE_ECORRUPT, LE_COLLECT_DAMAGED), 0);
	CHECK_EQ(le_collector_origin_get(f.c, "h", 3, 0, &o, &f.res),
	         -ENOENT);
	/* Frames without a CRC need the body's. */
	f.m.shard = 2;
	f.m.fields = LE_FIELD_TIMESTAMP | LE_FIELD_SHARD | LE_FIELD_SEQUENCE;
	f.m.len = body(f.b, f.m.fields, 1, 5);
	CHECK_EQ(refused(&f, LE_ECORRUPT, LE_COLLECT_DAMAGED), UINT64_MAX);
	/* Headers out of bounds, a gap message with a body. */
	f.m = coll_msg(f.b, 1, 5);
	f.m.host = "a/b";
	refused(&f, LE_ECORRUPT, LE_COLLECT_MALFORMED);
	f.m = coll_msg(f.b, 1, 5);
	f.m.gap = 5;
	f.m.ts = TS0;
	refused(&f, LE_ECORRUPT, LE_COLLECT_GAP_CLAIM);
	CHECK_EQ(le_collector_origin_get(f.c, "h", 2, 0, &o, &f.res),
	         -ENOENT);
	le_collector_close(f.c);
	t_rmrf(f.dir);
}

TEST(collector_past_its_origin_limit_refuses_a_new_origin_only)
{
	struct cfix f;

	cfix_open(&f, 1, 2);
	f.m.host = "other";
	refused(&f, LE_EFULL, LE_COLLECT_ORIGIN_LIMIT);
	CHECK(strstr(f.res.msg, "origin limit reached"));
	f.m = coll_msg(f.b, 3, 2);
	CHECK_RC(le_collector_append(f.c, &f.m, 0, &f.res));
	CHECK_EQ(f.res.stored, 2);
	le_collector_close(f.c);
	t_rmrf(f.dir);
}

TEST(collector_hole_is_reported_then_filled_by_a_marker_and_late_records_kept)
{
	struct cfix f;
	struct seen sn = {0};
	struct probs pr = {0};

	cfix_open(&f, 0, 2);
	f.m = coll_msg(f.b, 6, 2); /* 3..5 not come */
	CHECK_RC(le_collector_append(f.c, &f.m, 0, &f.res));
	CHECK_EQ(f.res.missing, 3);
	CHECK_EQ(f.res.stored, 0);
	CHECK_EQ(le_collector_next(f.res.origin), 3);
	CHECK_EQ(*le_collector_data(f.res.origin), 0);
	CHECK_RC(le_collector_append(f.c, &f.m, LE_COLLECT_FILL_HOLE, &f.res));
	CHECK_EQ(f.res.missing, 3);
	CHECK_EQ(f.res.stored, 2);
	CHECK_EQ(le_collector_next(f.res.origin), 8);
	/* 3..5 come after all: kept, once. */
	f.m = coll_msg(f.b, 3, 3);
	CHECK_RC(le_collector_append(f.c, &f.m, 0, &f.res));
	CHECK_EQ(f.res.late, 3);
	CHECK_EQ(f.res.late_lo, 3);
	CHECK_EQ(f.res.late_hi, 5);
	CHECK_EQ(f.res.stored, 0);
	CHECK_RC(le_collector_append(f.c, &f.m, 0, &f.res));
	CHECK_EQ(f.res.late, 0);
	/* A forwarder's gap message: 8..9 lost before shipping. */
	f.m = (le_collector_msg){.host = "h", .shard = 2, .first = 8,
	                         .last = 9, .gap = 2, .ts = TS0 + 9,
	                         .fields = LE_FIELD_ALL, .pos = UINT64_MAX};
	CHECK_RC(le_collector_append(f.c, &f.m, 0, &f.res));
	CHECK_EQ(f.res.lost, 2);
	CHECK_EQ(le_collector_next(f.res.origin), 10);
	le_collector_close(f.c);
	CHECK_EQ(read_probs(f.dir, LE_RECOVER_ABSOLUTE, &sn, &pr), 9);
	int marks = 0;
	for (int i = 0; i < sn.n; i++)
		marks += sn.flags[i] == LE_REC_MARKER &&
		         (!strcmp(sn.msg[i], "3 records missing from the stream") ||
		          !strcmp(sn.msg[i], "2 records lost before shipping"));
	CHECK_EQ(marks, 2);
	t_rmrf(f.dir);
}

TEST(marker_text_in_an_origins_own_record_claims_nothing)
{
	char dir[256], err[256];
	unsigned char b[4096];
	const char *txt = "3 records " LE_GAP_LOST;
	le__late out;
	le__cstore *s = store_open(t_tmpdir(dir), 200);
	le__cstore_origin *o = origin(s, "h", 2);
	size_t len = body(b, LE_FIELD_ALL, 1, 4);

	/* 1..4, then (segment_bytes 200: a segment of its own) a record 5
	 * that looks like a collector's marker for 3..5. */
	CHECK_RC(le__cstore_append(s, o, LE_FIELD_ALL, b, len, 4, NULL));
	len = le__frame_encode(b, LE_FIELD_ALL, LE_REC_MARKER, LE_WARN, 2, 5,
	                       TS0 + 5, txt, (uint32_t)strlen(txt));
	CHECK_RC(le__cstore_append(s, o, LE_FIELD_ALL, b, len, 1, NULL));
	le__cstore_close(s);
	s = store_open(dir, 1 << 20);
	CHECK_RC(le__cstore_origin_get(s, "h", 2, 0, &o, err, sizeof err));
	/* 3 and 4 are in the chain: only 5, which the frame took, is left
	 * of the "claim", and it is stored already by its own frame. */
	CHECK_EQ(redeliver(s, o, 1, 4, &out), 0);
	le__cstore_close(s);
	t_rmrf(dir);
}

TEST(claims_past_the_bound_forget_the_lowest)
{
	char dir[256];
	unsigned char b[256];
	le__late out;
	le__cstore *s;
	le__cstore_opts op = {.segment_bytes = 1 << 20, .sync = 0};
	char err[256];

	CHECK_RC(le__cstore_open(&s, t_tmpdir(dir), &op, err, sizeof err));
	le__cstore_origin *o = origin(s, "h", 2);
	/* LE_CLAIM_RANGES + 1 claims of two records each, a record between
	 * each two. */
	for (uint64_t i = 0; i <= LE_CLAIM_RANGES; i++) {
		CHECK_RC(le__cstore_gap(s, o, LE_FIELD_ALL, 3 * i + 1,
		                        3 * i + 2, TS0, LE_GAP_LOST));
		size_t len = body(b, LE_FIELD_ALL, 3 * i + 3, 1);
		CHECK_RC(le__cstore_append(s, o, LE_FIELD_ALL, b, len, 1, NULL));
	}
	CHECK_EQ(o->forgotten, 2);
	CHECK_EQ(redeliver(s, o, 1, 1, &out), 0); /* forgotten */
	CHECK_EQ(redeliver(s, o, 4, 1, &out), 1); /* the second claim */
	le__cstore_close(s);
	t_rmrf(dir);
}

/* `logengine cat DIR` to files; @return its exit status. */
static int cat(const char *dir, char *out, char *err)
{
	char cmd[1400];
	snprintf(out, 300, "%s.out", dir);
	snprintf(err, 300, "%s.err", dir);
	snprintf(cmd, sizeof cmd, "'%s' cat '%s' > '%s' 2> '%s'",
	         t_build_tool("LE_CLI", "logengine"), dir, out, err);
	int rc = system(cmd);
	return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static int lines(const char *text)
{
	int n = 0;
	for (; *text; text++)
		n += *text == '\n';
	return n;
}

TEST(cat_reads_across_a_gap_marker_and_shows_it)
{
	char dir[256], out[300], err[300];
	struct probs pr = {0};
	le__cstore_origin *o;

	le__cstore_close(claimed_store(dir, &o, LE_GAP_LOST));
	CHECK_EQ(cat(dir, out, err), 0);
	char *o_txt = t_slurp_text(out), *e_txt = t_slurp_text(err);
	CHECK_EQ(lines(o_txt), 5);
	CHECK(strstr(o_txt, "7 records lost before shipping"));
	CHECK(strstr(o_txt, "rec 1")); /* record 11 */
	CHECK_STR_EQ(e_txt, "");
	CHECK_EQ(read_probs(dir, LE_RECOVER_ABSOLUTE, NULL, &pr), 5);
	CHECK_EQ(pr.n, 0);
	free(o_txt);
	free(e_txt);
	unlink(out);
	unlink(err);
	t_rmrf(dir);
}

TEST(chain_gap_without_a_marker_is_still_reported)
{
	char dir[256], out[300], err[300];
	unsigned char b[4096];
	/* the frames after the hole without a CRC: another field set, so
	 * they start a segment of their own */
	const uint32_t f2 = LE_FIELD_ALL & ~LE_FIELD_CRC;

	for (int marked = 0; marked < 2; marked++) {
		le__cstore *s = store_open(t_tmpdir(dir), 1 << 20);
		le__cstore_origin *o = origin(s, "h", 2);
		size_t len = body(b, LE_FIELD_ALL, 1, 2);
		CHECK_RC(le__cstore_append(s, o, LE_FIELD_ALL, b, len, 2, NULL));
		/* 3..4 missing: what follows starts a segment at 5, with no
		 * marker, or with one that counts only itself */
		o->next_seq = 5;
		if (marked)
			CHECK_RC(le__cstore_gap(s, o, f2, 5, 5, TS0,
			                        LE_GAP_LOST));
		len = body(b, f2, o->next_seq, 2);
		CHECK_RC(le__cstore_append(s, o, f2, b, len, 2, NULL));
		le__cstore_close(s);
		CHECK(cat(dir, out, err) != 0);
		char *e_txt = t_slurp_text(err);
		if (!strstr(e_txt, "sequence gap: expected 3, segment starts "
		                   "at 5"))
			fprintf(stderr, "  cat said: %s\n", e_txt);
		CHECK(strstr(e_txt, "sequence gap: expected 3, segment starts "
		                    "at 5"));
		free(e_txt);
		struct probs pr = {0};
		CHECK_EQ(read_probs(dir, LE_RECOVER_ABSOLUTE, NULL, &pr),
		         LE_ECORRUPT);
		CHECK_EQ(pr.gaps, 1);
		unlink(out);
		unlink(err);
		t_rmrf(dir);
	}
}

TEST(follower_waits_for_a_marker_being_written_rather_than_report_a_gap)
{
	char dir[256], path[400];
	unsigned char b[4096], h[LE_SEG_HDR];
	const char *txt = "7 records " LE_GAP_LOST;
	struct probs pr = {0};
	le__seg_hdr hdr = {.version = LE_SEG_VERSION, .fields = LE_FIELD_ALL,
	                   .shard = 2, .index = 2, .base_seq = 9,
	                   .created_ns = TS0};
	le_reader_opts o;
	le_reader *r;
	le_record rec;
	le__cstore *s = store_open(t_tmpdir(dir), 1 << 20);
	size_t len = body(b, LE_FIELD_ALL, 1, 2);

	CHECK_RC(le__cstore_append(s, origin(s, "h", 2), LE_FIELD_ALL, b, len,
	                           2, NULL));
	le__cstore_close(s);
	/* What a follower may meet while the collector writes a marker:
	 * the segment's header, not yet its first frame. */
	snprintf(path, sizeof path, "%s/shard-000/%016x.seg", dir, 2);
	le__seg_hdr_encode(h, &hdr);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
	CHECK(fd >= 0);
	CHECK_EQ(pwrite(fd, h, sizeof h, 0), (ssize_t)sizeof h);
	le_reader_opts_init(&o);
	o.on_problem = on_prob;
	o.arg = &pr;
	CHECK_RC(le_reader_open(&r, dir, &o));
	CHECK_RC(le_reader_follow(r, 0));
	CHECK_EQ(le_reader_next(r, &rec), 1);
	CHECK_EQ(le_reader_next(r, &rec), 1);
	CHECK_EQ(le_reader_next(r, &rec), 0);
	CHECK_EQ(pr.n, 0);
	len = le__frame_encode(b, LE_FIELD_ALL, LE_REC_MARKER, LE_WARN, 2, 9,
	                       TS0 + 5, txt, (uint32_t)strlen(txt));
	CHECK_EQ(pwrite(fd, b, len, LE_SEG_HDR), (ssize_t)len);
	close(fd);
	int rc = 0;
	for (int i = 0; i < 100 && rc == 0; i++) { /* up to 5 s */
		rc = le_reader_next(r, &rec);
		if (rc == 0)
			CHECK(le_reader_wait(r, 50) >= 0);
	}
	CHECK_EQ(rc, 1);
	CHECK(rec.flags & LE_REC_MARKER);
	CHECK_EQ(rec.origin_seq, 9);
	CHECK_EQ(pr.n, 0);
	le_reader_close(r);
	t_rmrf(dir);
}

TEST(store_rotates_at_segment_bytes_between_frames)
{
	char dir[256], sdir[300];
	unsigned char b[8192], p[170];
	le__cstore *s = store_open(t_tmpdir(dir), 4096);
	le__cstore_origin *o = origin(s, "h", 2);
	size_t len = 0;

	memset(p, 'p', sizeof p);
	for (int i = 0; i < 40; i++) /* 40 frames of ~200 bytes */
		len += le__frame_encode(b + len, LE_FIELD_ALL, 0, LE_INFO, 2,
		                        (uint64_t)i + 1, TS0, p, sizeof p);
	CHECK_RC(le__cstore_append(s, o, LE_FIELD_ALL, b, len, 40, NULL));
	le__cstore_close(s);
	snprintf(sdir, sizeof sdir, "%s/shard-000", dir);
	uint64_t *segs;
	size_t n;
	CHECK_RC(le__seg_list(sdir, &segs, &n));
	CHECK(n >= 2);
	free(segs);
	CHECK_EQ(count_records(dir), 40);
	t_rmrf(dir);
}

/* A deferred frame of shard 2, record seq: format fmt (one %d) with
 * value v, carrying the descriptor when ref is LE_DEFER_INLINE, else
 * naming it by ref. */
static size_t dframe(unsigned char *out, uint64_t seq, const char *fmt,
                     uint32_t ref, int32_t v)
{
	unsigned char p[512];
	size_t n = 4;
	le__put32(p, ref);
	if (ref == LE_DEFER_INLINE)
		n += le__desc_encode(p + 4, sizeof p - 4, LE_INFO, 7, fmt,
		                     strlen(fmt), "x.c", 3);
	memcpy(p + n, &v, 4);
	n += 4;
	return le__frame_encode(out, LE_FIELD_ALL, LE_REC_DEFERRED, LE_INFO, 2,
	                        seq, TS0 + seq, p, (uint32_t)n);
}

/* Deferred frames reach the collector named by Le-Pos + body offset;
 * stored, each must read back to its own text: one whose descriptor
 * went in another segment of the store takes it inline, and one naming
 * a frame outside its message reads as undecodable, never as the text
 * of the call site that happens to be at that offset. */
TEST(collector_relinks_deferred_frames_to_its_own_segments)
{
	char dir[256];
	unsigned char a[4096], b[4096];
	struct seen sn = {0};
	/* 1 inline "a=%d", 2 names it; a second message: 3 names a frame
	 * of the first (outside its own), 4 inline "b=%d", 5 names 4 */
	size_t la = dframe(a, 1, "a=%d", LE_DEFER_INLINE, 1);
	la += dframe(a + la, 2, "a=%d", 1000, 2);
	size_t lb = dframe(b, 3, "a=%d", 1000, 3);
	size_t at4 = lb;
	lb += dframe(b + lb, 4, "b=%d", LE_DEFER_INLINE, 4);
	lb += dframe(b + lb, 5, "b=%d", (uint32_t)(5000 + at4), 5);
	/* segments just big enough for two of them: frame 2 goes to the
	 * segment after its descriptor's */
	le__cstore *s = store_open(t_tmpdir(dir), 64 + la + 8);
	le__cstore_origin *o = origin(s, "h", 2);
	le__ship_body fa = {a, la, 1000, LE_FIELD_ALL};
	le__ship_body fb = {b, lb, 5000, LE_FIELD_ALL};
	CHECK_RC(le__cstore_append(s, o, LE_FIELD_ALL, a, la, 2, &fa));
	CHECK_RC(le__cstore_append(s, o, LE_FIELD_ALL, b, lb, 3, &fb));
	le__cstore_close(s);
	char sdir[300];
	uint64_t *segs;
	size_t nseg;
	snprintf(sdir, sizeof sdir, "%s/shard-000", dir);
	CHECK_RC(le__seg_list(sdir, &segs, &nseg));
	CHECK(nseg >= 3);
	free(segs);
	CHECK_EQ(read_all(dir, LE_RECOVER_SKIP, see, &sn), 5);
	CHECK_STR_EQ(sn.msg[0], "a=1");
	CHECK_STR_EQ(sn.msg[1], "a=2");
	CHECK(strstr(sn.msg[2], "undecodable") != NULL);
	CHECK_STR_EQ(sn.msg[3], "b=4");
	CHECK_STR_EQ(sn.msg[4], "b=5");
	t_rmrf(dir);
}

struct texts {
	long n, bad;
};

/* Record q (from 1) of every origin: site (q - 1) % 256, value 1000 *
 * ((q - 1) / 256) + site. */
static void see_text(const le_record *r, void *arg)
{
	struct texts *t = arg;
	char want[32];
	int i = (int)((r->origin_seq - 1) % 256);
	int k = snprintf(want, sizeof want, "s%03d %d", i,
	                 (int)((r->origin_seq - 1) / 256) * 1000 + i);
	t->n++;
	if (r->len != (uint32_t)k || memcmp(r->payload, want, (size_t)k)) {
		if (!t->bad++)
			fprintf(stderr, "  %s %" PRIu64 ": %.*s, not %s\n",
			        r->host, r->origin_seq, (int)r->len,
			        (const char *)r->payload, want);
	}
}

/* The collector's memory does not grow with what the stream holds
 * (logengine(1), collect): 100 origins, each sending a message of 256
 * call sites with 1 KiB descriptors, the first frame of each carrying
 * it and a second naming it (26 MB of descriptors stored), leave the
 * collector's memory where it was, and every record reads back to its
 * text. */
TEST(collector_memory_stays_flat_over_origins_with_many_descriptors)
{
	enum { ORIGINS = 100, SITES = 256 };
	char dir[256], err[256], host[16], file[1000];
	static unsigned char b[SITES * 1200];
	struct texts t = {0};
	le__cstore *s = store_open(t_tmpdir(dir), 64u << 20);

	memset(file, 'f', sizeof file);
	long before = t_rss_kib();
	for (int org = 0; org < ORIGINS; org++) {
		size_t len = 0, at[SITES];
		snprintf(host, sizeof host, "h%d", org);
		le__cstore_origin *o;
		CHECK_RC(le__cstore_origin_get(s, host, 2, 1, &o, err,
		                               sizeof err));
		o->next_seq = 1;
		for (int q = 0; q < 2 * SITES; q++) {
			unsigned char p[1100];
			char fmt[16];
			int i = q % SITES, fl = snprintf(fmt, sizeof fmt,
			                                 "s%03d %%d", i);
			int32_t v = (q / SITES) * 1000 + i;
			size_t k = 4;
			if (q < SITES) {
				at[i] = len;
				le__put32(p, LE_DEFER_INLINE);
				k += le__desc_encode(p + 4, sizeof p - 4, LE_INFO,
				                     i, fmt, (size_t)fl, file,
				                     sizeof file);
			} else {
				le__put32(p, (uint32_t)(1000 + at[i]));
			}
			memcpy(p + k, &v, 4);
			len += le__frame_encode(b + len, LE_FIELD_ALL,
			                        LE_REC_DEFERRED, LE_INFO, 2,
			                        (uint64_t)q + 1, TS0, p,
			                        (uint32_t)(k + 4));
		}
		le__ship_body fb = {b, len, 1000, LE_FIELD_ALL};
		CHECK_RC(le__cstore_append(s, o, LE_FIELD_ALL, b, len, 2 * SITES,
		                           &fb));
	}
	long grew = t_rss_kib() - before;
	le__cstore_close(s);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
	/* (a sanitizer holds freed memory back: resident grows there) */
	if (grew >= 8 * 1024)
		fprintf(stderr, "  memory grew %ld KiB\n", grew);
	CHECK(grew < 8 * 1024);
#else
	(void)grew;
#endif
	CHECK_EQ(read_all(dir, LE_RECOVER_SKIP, see_text, &t),
	         ORIGINS * 2 * SITES);
	CHECK_EQ(t.n, ORIGINS * 2 * SITES);
	CHECK_EQ(t.bad, 0);
	t_rmrf(dir);
}

TEST(origins_get_a_shard_directory_each_and_merge_by_time)
{
	char dir[256];
	unsigned char b[4096];
	struct seen sn = {0};
	le__cstore *s = store_open(t_tmpdir(dir), 1 << 20);
	size_t len = body(b, LE_FIELD_ALL, 1, 2); /* ts TS0, TS0 + 1 */

	CHECK_RC(le__cstore_append(s, origin(s, "a", 2), LE_FIELD_ALL, b, len,
	                           2, NULL));
	CHECK_RC(le__cstore_append(s, origin(s, "b", 2), LE_FIELD_ALL, b, len,
	                           2, NULL));
	le__cstore_close(s);
	CHECK_EQ(read_all(dir, LE_RECOVER_ABSOLUTE, see, &sn), 4);
	CHECK_STR_EQ(sn.host[0], "a");
	CHECK_STR_EQ(sn.host[1], "b");
	CHECK_STR_EQ(sn.host[2], "a");
	CHECK_STR_EQ(sn.host[3], "b");
	t_rmrf(dir);
}

/* ---- many origins ---- */

static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	CHECK(d != NULL);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* Store one record (sequence 1, time TS0 + n - i, text "h<i>") of each of
 * origins h<from> .. h<to - 1>, shard 2, in store s. */
static void one_each(le__cstore *s, int from, int to, int n)
{
	unsigned char f[128];
	char host[16], err[256];

	for (int i = from; i < to; i++) {
		le__cstore_origin *o;
		int hl = snprintf(host, sizeof host, "h%d", i);
		CHECK_RC(le__cstore_origin_get(s, host, 2, 1, &o, err,
		                               sizeof err));
		o->next_seq = 1;
		uint32_t fl = le__frame_encode(f, LE_FIELD_ALL, 0, LE_INFO, 2, 1,
		                               TS0 + (uint64_t)(n - i), host,
		                               (uint32_t)hl);
		CHECK_RC(le__cstore_append(s, o, LE_FIELD_ALL, f, fl, 1, NULL));
	}
}

struct merged {
	long n, bad;
	uint64_t last_ts;
	int want; /* the host number the next record must have */
};

/* Records come newest origin first (h<n-1> has the oldest time), each
 * from the host its text names. */
static void see_merged(const le_record *r, void *arg)
{
	struct merged *m = arg;
	char want[16];
	int wl = snprintf(want, sizeof want, "h%d", m->want--);

	if (r->ts_ns < m->last_ts || !r->host || strcmp(r->host, want) ||
	    r->len != (size_t)wl || memcmp(r->payload, want, (size_t)wl))
		m->bad++;
	m->last_ts = r->ts_ns;
	m->n++;
}

/* More origins than the 256 shard directories an engine has: each gets
 * one (shard-1000 and up past a thousand), a reopened store finds every
 * one, and a reader merges them all by time. */
/* A sanitizer's own bookkeeping (redzones, shadow memory, quarantine)
 * multiplies what an allocation costs: the bound is the plain build's. */
#if defined(__SANITIZE_THREAD__)
#define SAN_MEM 8
#elif defined(__SANITIZE_ADDRESS__)
#define SAN_MEM 4
#else
#define SAN_MEM 1
#endif

TEST(store_takes_a_thousand_origins_and_reads_them_back_merged)
{
	enum { N = 1100 };
	char dir[256], err[256], path[512];
	struct merged m = {.want = N};
	le__cstore_origin *o;
	t_need_fds(N + 64); /* the reader holds a segment an origin */
	le__cstore *s = store_open(t_tmpdir(dir), 1 << 20);
	int fds = open_fds();
	long before = t_rss_kib();

	one_each(s, 0, N, N);
	/* Memory (docs/INTERFACES.md: about 450 bytes an origin) and
	 * descriptors (256 segment files open at most) stay bounded. */
	long grew = t_rss_kib() - before;
	fprintf(stderr, "  %d origins: %ld KiB more resident, %d more "
	        "descriptors\n", N, grew, open_fds() - fds);
	CHECK(grew < N * SAN_MEM); /* under 1 KiB an origin */
	CHECK(open_fds() - fds <= 256);
	CHECK_RC(le__cstore_sync(s));
	le__cstore_close(s);
	snprintf(path, sizeof path, "%s/shard-1099/ORIGIN", dir);
	CHECK(access(path, F_OK) == 0);
	s = store_open(dir, 1 << 20);
	CHECK_RC(le__cstore_origin_get(s, "h1099", 2, 0, &o, err, sizeof err));
	CHECK_EQ(o->dir_shard, 1099);
	CHECK_EQ(o->next_seq, 2);
	one_each(s, N, N + 1, N); /* a new one after a reopen, oldest */
	CHECK_EQ(o->next_seq, 2);
	le__cstore_close(s);
	CHECK_EQ(read_all(dir, LE_RECOVER_ABSOLUTE, see_merged, &m), N + 1);
	CHECK_EQ(m.bad, 0);
	t_rmrf(dir);
}

/* At max_origins a new origin is refused with LE_EFULL and says so; the
 * store is unchanged: known origins still take records, a reopen finds
 * them, and a reopen with a higher limit takes the refused one. */
TEST(origin_limit_refuses_one_message_and_keeps_the_store_usable)
{
	char dir[256], err[256];
	le__cstore *s;
	le__cstore_origin *o;
	le__cstore_opts opts = {.segment_bytes = 1 << 20, .sync = 1,
	                        .max_origins = 300};

	CHECK_RC(le__cstore_open(&s, t_tmpdir(dir), &opts, err, sizeof err));
	one_each(s, 0, 300, 300);
	CHECK_EQ(le__cstore_origin_get(s, "fake-300", 2, 1, &o, err,
	                               sizeof err), LE_EFULL);
	CHECK(!o);
	CHECK(strstr(err, "origin limit reached (300 origins; --max-origins)"));
	CHECK_EQ(le__cstore_origin_get(s, "fake-301", 2, 1, &o, err,
	                               sizeof err), LE_EFULL);
	/* A known origin takes its next record. */
	CHECK_RC(le__cstore_origin_get(s, "h7", 2, 1, &o, err, sizeof err));
	unsigned char b[4096];
	size_t len = body(b, LE_FIELD_ALL, 2, 1);
	CHECK_RC(le__cstore_append(s, o, LE_FIELD_ALL, b, len, 1, NULL));
	CHECK_RC(le__cstore_sync(s));
	le__cstore_close(s);
	CHECK_EQ(read_all(dir, LE_RECOVER_ABSOLUTE, NULL, NULL), 301);
	opts.max_origins = 301;
	CHECK_RC(le__cstore_open(&s, dir, &opts, err, sizeof err));
	CHECK_RC(le__cstore_origin_get(s, "h7", 2, 0, &o, err, sizeof err));
	CHECK_EQ(o->next_seq, 3);
	CHECK_RC(le__cstore_origin_get(s, "fake-300", 2, 1, &o, err,
	                               sizeof err));
	CHECK_EQ(o->dir_shard, 300);
	le__cstore_close(s);
	t_rmrf(dir);
}

/* A cursor of a store of 1,500 origins names every shard directory: longer
 * than LE_CURSOR_MAX, it fits le_reader_cursor_cap, and a reader seeking
 * it returns exactly the records after it. */
TEST(cursor_of_a_store_of_more_than_256_origins_resumes_after_its_record)
{
	enum { N = 1500, FIRST = 700 };
	char dir[256], small[LE_CURSOR_MAX];
	struct merged m = {.want = N - 1};
	le_record rec;
	le_reader *r;
	t_need_fds(N + 64); /* the reader holds a segment an origin */
	le__cstore *s = store_open(t_tmpdir(dir), 1 << 20);

	one_each(s, 0, N, N);
	le__cstore_close(s);
	CHECK_RC(le_reader_open(&r, dir, NULL));
	for (int i = 0; i < FIRST; i++) {
		CHECK_EQ(le_reader_next(r, &rec), 1);
		see_merged(&rec, &m);
	}
	size_t cap = le_reader_cursor_cap(r);
	char *cur = malloc(cap);
	CHECK(cap > LE_CURSOR_MAX);
	CHECK_EQ(le_reader_cursor(r, small, sizeof small), -ENOSPC);
	CHECK(le_reader_cursor(r, cur, cap) > LE_CURSOR_MAX);
	CHECK(strstr(cur, ",s=800,") && strstr(cur, "/1499:2"));
	le_reader_close(r);
	CHECK_RC(le_reader_open(&r, dir, NULL));
	CHECK_RC(le_reader_seek_cursor(r, cur, NULL));
	while (le_reader_next(r, &rec) == 1)
		see_merged(&rec, &m);
	CHECK_EQ(m.n, N);
	CHECK_EQ(m.bad, 0);
	le_reader_close(r);
	free(cur);
	t_rmrf(dir);
}

TEST(second_collector_on_a_store_is_refused)
{
	char dir[256], err[256];
	le__cstore *s = store_open(t_tmpdir(dir), 1 << 20), *t;
	le__cstore_opts o = {.segment_bytes = 1 << 20};

	CHECK_EQ(le__cstore_open(&t, dir, &o, err, sizeof err), LE_EBUSY);
	CHECK(strstr(err, "in use"));
	le__cstore_close(s);
	t_rmrf(dir);
}

/* ---- retention and the cursor ---- */

static void put_cursor(const char *dir, uint32_t shard, uint64_t next)
{
	char path[512];
	le__fwd_cursor c = {.gen = 1, .next_seq = next, .shard = shard};

	snprintf(path, sizeof path, "%s/shard-%03u/FORWARD", dir, shard);
	int fd = open(path, O_RDWR | O_CREAT, 0644);
	CHECK(fd >= 0);
	CHECK_RC(le__fwd_write(fd, &c));
	close(fd);
}

static int segments(const char *dir)
{
	char sdir[300];
	uint64_t *segs;
	size_t n;

	snprintf(sdir, sizeof sdir, "%s/shard-000", dir);
	CHECK_RC(le__seg_list(sdir, &segs, &n));
	free(segs);
	return (int)n;
}

/* `records` 128-byte records, written. */
static void fill(le_engine *e, int records)
{
	char p[128];
	memset(p, 'r', sizeof p);
	for (int i = 0; i < records; i++)
		CHECK_RC(le_write(e, 0, LE_INFO, p, sizeof p));
	CHECK_RC(le_flush(e, -1));
}

static le_engine *engine(const char *dir, uint64_t margin)
{
	le_config c;
	le_engine *e;

	le_config_init(&c);
	c.dir = dir;
	c.segment_bytes = 64 << 10;
	c.retention_bytes = 256 << 10;
	c.retention_unshipped_bytes = margin;
	c.overflow = LE_OVERFLOW_BLOCK;
	CHECK_RC(le_open(&e, &c));
	return e;
}

TEST(retention_keeps_unshipped_segments_up_to_the_margin)
{
	char dir[256];
	le_stats st;
	le_engine *e = engine(t_tmpdir(dir), 1 << 20);

	fill(e, 10);
	put_cursor(dir, 0, 1); /* a forwarder that has shipped nothing */
	fill(e, 6000);         /* ~1 MiB: four times retention_bytes */
	CHECK(segments(dir) > 256 / 64 + 4);
	CHECK_RC(le_stats_get(e, &st));
	CHECK_EQ(st.segments_deleted, 0);
	CHECK_EQ(st.lost_unshipped, 0);
	CHECK_RC(le_close(e));
	CHECK_EQ(count_records(dir), 6010);
	t_rmrf(dir);
}

TEST(retention_past_the_margin_deletes_and_counts_the_unshipped)
{
	char dir[256];
	le_stats st;
	le_engine *e = engine(t_tmpdir(dir), 128 << 10);

	fill(e, 10);
	put_cursor(dir, 0, 1);
	fill(e, 6000);
	/* The reaper unlinks, and counts, on its own thread: wait for it. */
	for (int i = 0; i < 1000; i++) {
		CHECK_RC(le_stats_get(e, &st));
		if (st.segments_deleted > 0)
			break;
		usleep(10 * 1000);
	}
	CHECK(st.segments_deleted > 0);
	CHECK_RC(le_close_stats(e, &st)); /* every unlink done and counted */
	/* What was deleted is exactly what the counter says was lost. */
	long left = 0;
	CHECK(read_all(dir, LE_RECOVER_TOLERATE_TAIL, count_app_record,
	               &left) >= 0);
	CHECK_EQ((uint64_t)left + st.lost_unshipped, 6010);
	t_rmrf(dir);
}

TEST(retention_deletes_shipped_segments_as_before)
{
	char dir[256];
	le_stats st;
	le_engine *e = engine(t_tmpdir(dir), 1 << 30);

	fill(e, 10);
	put_cursor(dir, 0, 1000000); /* everything shipped */
	fill(e, 6000);
	CHECK_RC(le_close_stats(e, &st)); /* the reaper's unlinks counted */
	CHECK(st.segments_deleted > 0);
	CHECK_EQ(st.lost_unshipped, 0);
	CHECK(segments(dir) <= 256 / 64 + 2);
	t_rmrf(dir);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	RUN(forward_slot_matches_the_test_vector);
	RUN(torn_forward_slot_falls_back_to_the_other);
	RUN(short_forward_file_reads_as_zero_filled);
	RUN(origin_matches_the_test_vector);
	RUN(late_origin_is_version_2_with_its_kind_and_version_1_reads_as_a_chain);
	RUN(origin_host_outside_the_alphabet_is_refused);
	RUN(body_of_valid_frames_passes);
	RUN(body_with_one_bad_crc_is_rejected_at_that_frame);
	RUN(body_whose_frames_disagree_with_its_headers_is_rejected);
	RUN(body_test_vector_of_format_md);
	RUN(body_without_sequence_field_is_numbered_from_first);
	RUN(store_keeps_frames_and_origin_for_the_reader);
	RUN(reopened_store_expects_the_next_sequence);
	RUN(torn_tail_of_a_killed_collector_is_cut_at_open);
	RUN(segment_a_killed_collector_created_but_never_wrote_is_removed_at_open);
	RUN(gap_marker_says_how_many_and_the_chain_goes_on);
	RUN(records_inside_a_gap_claim_are_stored_when_they_come_and_only_once);
	RUN(records_missing_from_the_stream_that_come_after_a_reopen_are_stored);
	RUN(marker_text_in_an_origins_own_record_claims_nothing);
	RUN(claims_past_the_bound_forget_the_lowest);
	RUN(cat_reads_across_a_gap_marker_and_shows_it);
	RUN(chain_gap_without_a_marker_is_still_reported);
	RUN(follower_waits_for_a_marker_being_written_rather_than_report_a_gap);
	RUN(store_rotates_at_segment_bytes_between_frames);
	RUN(collector_relinks_deferred_frames_to_its_own_segments);
	RUN(collector_memory_stays_flat_over_origins_with_many_descriptors);
	RUN(origins_get_a_shard_directory_each_and_merge_by_time);
	RUN(store_takes_a_thousand_origins_and_reads_them_back_merged);
	RUN(origin_limit_refuses_one_message_and_keeps_the_store_usable);
	RUN(cursor_of_a_store_of_more_than_256_origins_resumes_after_its_record);
	RUN(second_collector_on_a_store_is_refused);
	RUN(collector_stores_a_batch_sent_twice_once);
	RUN(collector_refuses_a_damaged_or_forged_body_at_its_frame_storing_nothing);
	RUN(collector_past_its_origin_limit_refuses_a_new_origin_only);
	RUN(collector_hole_is_reported_then_filled_by_a_marker_and_late_records_kept);
	RUN(retention_keeps_unshipped_segments_up_to_the_margin);
	RUN(retention_past_the_margin_deletes_and_counts_the_unshipped);
	RUN(retention_deletes_shipped_segments_as_before);
	return t_done();
}
