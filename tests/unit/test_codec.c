/*
 * test_codec.c -- CRC32C against RFC 3720, every implementation agreeing,
 * and the byte-exact test vectors of docs/FORMAT.md.
 */
#include "harness.h"

#include <sys/wait.h>

#include "base/crc32c.h"
#include "record/format.h"
#include "base/clock.h"
#include "base/os.h"

static void check_all_impls(const void *buf, size_t len, uint32_t want)
{
	CHECK_EQ(le__crc32c_sw(0, buf, len), want);
	CHECK_EQ(le__crc32c_extend(0, buf, len), want);
	if (le__crc32c_hw())
		CHECK_EQ(le__crc32c_hw()(0, buf, len), want);
}

TEST(crc32c_matches_rfc3720_vectors_in_every_implementation)
{
	unsigned char b[48];
	memset(b, 0, 32);
	check_all_impls(b, 32, 0x8a9136aa);
	memset(b, 0xff, 32);
	check_all_impls(b, 32, 0x62a8ab43);
	for (int i = 0; i < 32; i++)
		b[i] = (unsigned char)i;
	check_all_impls(b, 32, 0x46dd794e);
	for (int i = 0; i < 32; i++)
		b[i] = (unsigned char)(31 - i);
	check_all_impls(b, 32, 0x113fdb5c);
	static const unsigned char iscsi[48] = {
		0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00,
		0x00, 0x18, 0x28, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
	check_all_impls(iscsi, 48, 0xd9963a56);
	check_all_impls("123456789", 9, 0xe3069283);
	check_all_impls("", 0, 0);
}

TEST(crc32c_hw_and_sw_agree_at_every_length_and_alignment)
{
	unsigned char b[300];
	for (int i = 0; i < 300; i++)
		b[i] = (unsigned char)(i * 7 + 3);
	for (size_t off = 0; off < 9; off++)
		for (size_t len = 0; len + off <= 290; len++) {
			uint32_t sw = le__crc32c_sw(0, b + off, len);
			CHECK_EQ(le__crc32c_extend(0, b + off, len), sw);
			/* extend in two pieces == one piece */
			uint32_t a = le__crc32c_extend(0, b + off, len / 3);
			CHECK_EQ(le__crc32c_extend(a, b + off + len / 3,
			                           len - len / 3), sw);
		}
	printf("  (crc32c implementation: %s)\n", le__crc32c_impl());
}

TEST(crc32c_multi_equals_one_at_a_time)
{
	enum { W = LE_CRC_WAYS };
	unsigned char b[W][300];
	for (int k = 0; k < W; k++)
		for (int i = 0; i < 300; i++)
			b[k][i] = (unsigned char)(i * 13 + k * 7 + 1);
	/* Shapes: 0 unequal lengths; 1 all equal (four or eight of one
	 * length take a path of their own, the writer's usual case, so every
	 * length 0..199 is tried there); 2 the first longer than the others,
	 * which are equal (not all of one length, though the others match
	 * the shortest); 3 the last longer than the others. */
	for (int shape = 0; shape < 4; shape++) {
		for (int n = 1; n <= W; n++) {
			for (size_t base = 0; base < 200; base += shape ? 1 : 7) {
				uint32_t crc[W], want[W], pre[W];
				const unsigned char *p[W];
				size_t len[W];
				for (int k = 0; k < n; k++) {
					len[k] = shape == 0 ? base + (size_t)k * 5 % 13
					         : shape == 1 ? base
					         : shape == 2 ? base + (k ? 0 : 9)
					                      : base + (k == n - 1 ? 11 : 0);
					p[k] = b[k] + k + 4; /* misaligned */
					/* the 4 bytes before */
					memcpy(&pre[k], b[k] + k, 4);
					crc[k] = (uint32_t)k * 0x9e3779b9u;
					want[k] = le__crc32c_sw(crc[k], b[k] + k,
					                        len[k] + 4);
				}
				le__crc32c_multi(crc, pre, p, len, n);
				for (int k = 0; k < n; k++)
					CHECK_EQ(crc[k], want[k]);
			}
		}
	}
}

TEST(crc_mask_roundtrips)
{
	for (uint32_t x = 1; x < 0xfffffff0u; x += 0x01234567u)
		CHECK_EQ(le__crc_unmask(le__crc_mask(x)), x);
}

/* The vectors printed in docs/FORMAT.md. */
static const char *HDR_VEC =
	"4c4f4745 4e475347 01004000 1f000000\n"
	"02000000 00000000 07000000 00000000\n"
	"64000000 00000000 00beee24 2be67c18\n"
	"00000000 00000000 00000000 3874ac50";
static const char *FRAME_ALL_VEC =
	"1d000000 6d5cf1c9 00020200 64000000\n"
	"00000000 158b4a2c 2be67c18 68656c6c 6f";
static const char *FRAME_CRC_VEC = "0a000000 c0f7fe1b 0168656c 6c6f";
static const char *FRAME_NONE_VEC = "06000000 0068656c 6c6f";
static const char *CKPT_VEC =
	"4c4f4745 4e47434b 03000000 00000000\n"
	"07000000 00000000 00100000 00000000\n"
	"c8000000 00000000 158b4a2c 2be67c18\n"
	"a00f0000 00000000 02000000 108950c4";

TEST(segment_header_matches_format_md_vector)
{
	unsigned char want[64], got[64];
	size_t n = t_unhex(HDR_VEC, want);
	CHECK_EQ(n, 64);
	le__seg_hdr h = {.version = 1, .fields = LE_FIELD_ALL, .shard = 2,
	                 .index = 7, .base_seq = 100,
	                 .created_ns = 1764538227000000000ull};
	le__seg_hdr_encode(got, &h);
	CHECK(memcmp(got, want, 64) == 0);
	le__seg_hdr d;
	CHECK_EQ(le__seg_hdr_decode(want, &d), 0);
	CHECK(d.index == 7 && d.base_seq == 100 && d.shard == 2);
	want[30] ^= 1;
	CHECK_EQ(le__seg_hdr_decode(want, &d), LE_ECORRUPT);
	want[30] ^= 1;
	want[8] = 9; /* version 9 with a valid crc */
	le__put32(want + 60, le__crc_mask(le__crc32c_extend(0, want, 60)));
	CHECK_EQ(le__seg_hdr_decode(want, &d), LE_EVERSION);
}

static void frame_vec(const char *vec, uint32_t fields, uint32_t flags,
                      int level, uint32_t shard, uint64_t seq, uint64_t ts)
{
	unsigned char want[64], got[64];
	size_t n = t_unhex(vec, want);
	uint32_t len = le__frame_encode(got, fields, flags, level, shard, seq,
	                                ts, "hello", 5);
	CHECK_EQ(len, n);
	CHECK(memcmp(got, want, n) == 0);
	le__frame f;
	const char *why;
	CHECK_EQ(le__frame_decode(want, n, fields, LE_FRAME_MAX, &f, &why),
	         LE_FRAME_OK);
	CHECK(f.len == 5 && memcmp(f.payload, "hello", 5) == 0);
	CHECK_EQ(f.flags, flags);
	if (fields & LE_FIELD_SEQUENCE)
		CHECK_EQ(f.seq, seq);
	if (fields & LE_FIELD_TIMESTAMP)
		CHECK_EQ(f.ts, ts);
	/* Cut short anywhere: never OK, never out of bounds (ASan). */
	for (size_t cut = 0; cut < n; cut++) {
		unsigned char *c = malloc(cut ? cut : 1);
		memcpy(c, want, cut);
		CHECK(le__frame_decode(c, cut, fields, LE_FRAME_MAX, &f, &why) !=
		      LE_FRAME_OK);
		free(c);
	}
}

TEST(frames_match_format_md_vectors)
{
	frame_vec(FRAME_ALL_VEC, LE_FIELD_ALL, 0, LE_INFO, 2, 100,
	          1764538227123456789ull);
	frame_vec(FRAME_CRC_VEC, LE_FIELD_CRC, LE_REC_TRUNCATED, 0, 0, 0, 0);
	frame_vec(FRAME_NONE_VEC, 0, 0, 0, 0, 0, 0);
}

/* The writer's inline put for every field must write the bytes the
 * general one does, for values that fill every byte of their field. */
TEST(frame_put_all_writes_what_frame_put_writes)
{
	static const struct {
		uint32_t flags, shard;
		int level;
		uint64_t seq, ts;
	} v[] = {
		{0, 0, 0, 0, 0},
		{LE_REC_TRUNCATED, 2, LE_INFO, 100, 1764538227123456789ull},
		{LE_REC_MARKER, 0xfffe, LE_FATAL, 0x0123456789abcdefull,
		 0xfedcba9876543210ull},
		{LE_REC_TRUNCATED | LE_REC_MARKER, 0x1234, LE_TRACE,
		 0xffffffffffffffffull, 0x8000000000000001ull},
	};
	unsigned char pay[300], a[400], b[400];
	for (size_t i = 0; i < sizeof pay; i++)
		pay[i] = (unsigned char)(i * 7 + 1);
	for (size_t k = 0; k < sizeof v / sizeof v[0]; k++)
		for (uint32_t len = 0; len <= sizeof pay; len++) {
			memset(a, 0xaa, sizeof a);
			memset(b, 0xaa, sizeof b);
			uint32_t na = le__frame_put(a, LE_FIELD_ALL, v[k].flags,
			                            v[k].level, v[k].shard,
			                            v[k].seq, v[k].ts, pay, len);
			uint32_t nb = le__frame_put_all(b, v[k].flags, v[k].level,
			                                v[k].shard, v[k].seq,
			                                v[k].ts, pay, len);
			CHECK_EQ(na, nb);
			CHECK(memcmp(a, b, sizeof a) == 0);
		}
	/* And the FORMAT.md vector, sealed. */
	unsigned char want[64], got[64];
	size_t n = t_unhex(FRAME_ALL_VEC, want);
	unsigned char *f = got;
	CHECK_EQ(le__frame_put_all(got, 0, LE_INFO, 2, 100,
	                           1764538227123456789ull, "hello", 5),
	         n);
	le__frame_seal(&f, 1);
	CHECK(memcmp(got, want, n) == 0);
}

/* Eight frames sealed at once get the CRC each would get alone, whether
 * they are a run of one size evenly spaced (the writer's usual batch,
 * which takes a path of its own: back to back, with gaps, backwards) or
 * not quite (one frame shorter, one out of step). */
TEST(frames_sealed_eight_at_once_match_one_at_a_time)
{
	enum { W = LE_CRC_WAYS, ROOM = 8 * 260 };
	static unsigned char buf[2 * ROOM], one[260];
	unsigned char pay[230];
	for (size_t i = 0; i < sizeof pay; i++)
		pay[i] = (unsigned char)(i * 29 + 3);
	for (int shape = 0; shape < 5; shape++)
		for (uint32_t len = 0; len < 200; len++) {
			uint32_t total = le__frame_fixed(LE_FIELD_ALL) + len;
			ptrdiff_t stride = shape == 1 || shape == 4 ? total + 5
			                   : shape == 2 ? -(ptrdiff_t)total
			                                : (ptrdiff_t)total;
			unsigned char *f[W], *at = buf + (stride < 0 ? ROOM : 0);
			memset(buf, 0, sizeof buf);
			for (int k = 0; k < W; k++) {
				f[k] = at + k * stride + (shape == 4 && k == 5);
				uint32_t l = len - (shape == 3 && k == 6 && len);
				le__frame_put_all(f[k], 0, LE_INFO, 1,
				                  (uint64_t)k + 7, 1000 + (uint64_t)k,
				                  pay + k, l);
			}
			le__frame_seal(f, W);
			for (int k = 0; k < W; k++) {
				uint32_t l = len - (shape == 3 && k == 6 && len);
				le__frame_encode(one, LE_FIELD_ALL, 0, LE_INFO, 1,
				                 (uint64_t)k + 7, 1000 + (uint64_t)k,
				                 pay + k, l);
				CHECK(memcmp(f[k], one,
				             le__frame_fixed(LE_FIELD_ALL) + l) == 0);
			}
		}
}

TEST(flipped_bit_anywhere_in_a_crc_frame_is_detected)
{
	unsigned char f0[64];
	size_t n = t_unhex(FRAME_ALL_VEC, f0);
	for (size_t i = 0; i < n; i++)
		for (int bit = 0; bit < 8; bit++) {
			unsigned char f[64];
			memcpy(f, f0, n);
			f[i] ^= (unsigned char)(1 << bit);
			le__frame fr;
			const char *why;
			CHECK(le__frame_decode(f, n, LE_FIELD_ALL, LE_FRAME_MAX,
			                       &fr, &why) != LE_FRAME_OK);
		}
}

TEST(absurd_size_word_is_rejected_before_use)
{
	unsigned char f[16] = {0xf0, 0xff, 0xff, 0xff};
	le__frame fr;
	const char *why;
	CHECK_EQ(le__frame_decode(f, sizeof f, LE_FIELD_ALL, LE_FRAME_MAX, &fr,
	                          &why), LE_FRAME_BAD);
	unsigned char z[16] = {0};
	CHECK_EQ(le__frame_decode(z, sizeof z, LE_FIELD_ALL, LE_FRAME_MAX, &fr,
	                          &why), LE_FRAME_END);
}

/* 30 frames of shard 2 from sequence 100, payloads of varied lengths;
 * off[k] where frame k starts, off[30] the end. */
static size_t run_of_frames(unsigned char *buf, uint32_t fields, size_t *off)
{
	unsigned char pay[200];
	size_t n = 0;
	for (size_t i = 0; i < sizeof pay; i++)
		pay[i] = (unsigned char)(i * 13 + 5);
	for (int k = 0; k < 30; k++) {
		off[k] = n;
		n += le__frame_encode(buf + n, fields, 0, LE_INFO, 2,
		                      100 + (uint64_t)k, 1000 + (uint64_t)k, pay,
		                      (uint32_t)(k * 37 % 190));
	}
	off[30] = n;
	return n;
}

/* What le__frame_decode_v says, one frame at a time: the valid frames of
 * shard 2 in sequence from 100 at the start of buf[0..len). */
static uint64_t one_at_a_time(const unsigned char *buf, size_t len,
                              uint32_t fields, size_t *used)
{
	uint64_t n = 0;
	size_t off = 0;
	le__frame f;
	const char *why;
	while (le__frame_decode_v(buf + off, len - off, LE_SEG_VERSION, fields,
	                          LE_FRAME_MAX, &f, &why) == LE_FRAME_OK &&
	       (!(fields & LE_FIELD_SHARD) || f.shard == 2) &&
	       (!(fields & LE_FIELD_SEQUENCE) || f.seq == 100 + n)) {
		off += (size_t)f.size + 4;
		n++;
	}
	*used = off;
	return n;
}

TEST(frames_checked_together_stop_where_one_at_a_time_stops)
{
	static const uint32_t sets[] = {LE_FIELD_ALL,
	                                LE_FIELD_ALL & ~(uint32_t)LE_FIELD_CRC};
	unsigned char buf[8192], bad[8192];
	size_t off[31];

	for (size_t s = 0; s < 2; s++) {
		uint32_t fields = sets[s];
		size_t len = run_of_frames(buf, fields, off), used, want_used;
		uint64_t seq = 100;
		/* Whole: every frame, every byte. */
		CHECK_EQ(le__frames_check(buf, len, LE_SEG_VERSION, fields, 2,
		                          len, &seq, &used), 30);
		CHECK_EQ(used, len);
		CHECK_EQ(seq, 130);
		/* Cut anywhere: the whole frames before the cut. */
		for (size_t cut = 0; cut <= len; cut += 7) {
			seq = 100;
			uint64_t n = le__frames_check(buf, cut, LE_SEG_VERSION,
			                              fields, 2, len, &seq, &used);
			CHECK_EQ(n, one_at_a_time(buf, cut, fields, &want_used));
			CHECK_EQ(used, want_used);
			/* The same cut made by max_bytes. */
			seq = 100;
			CHECK_EQ(le__frames_check(buf, len, LE_SEG_VERSION, fields,
			                          2, cut, &seq, &used), n);
		}
		/* A flipped bit in frame k (any of a group of eight, and
		 * the groups after): the run ends before k. */
		for (int k = 0; k < 30; k++) {
			memcpy(bad, buf, len);
			size_t at = off[k] + (off[k + 1] - off[k]) - 1;
			if (!(fields & LE_FIELD_CRC))
				at = off[k] + 4 + 3; /* the sequence */
			bad[at] ^= 0x10;
			seq = 100;
			CHECK_EQ(le__frames_check(bad, len, LE_SEG_VERSION, fields,
			                          2, len, &seq, &used),
			         (uint64_t)k);
			CHECK_EQ(used, off[k]);
			CHECK_EQ(seq, 100 + (uint64_t)k);
		}
		/* Another shard, another starting sequence: nothing. */
		seq = 100;
		CHECK_EQ(le__frames_check(buf, len, LE_SEG_VERSION, fields, 3,
		                          len, &seq, &used), 0);
		seq = 101;
		CHECK_EQ(le__frames_check(buf, len, LE_SEG_VERSION, fields, 2,
		                          len, &seq, &used), 0);
		CHECK_EQ(used, 0);
	}
}

TEST(checkpoint_matches_vector_and_newest_valid_slot_wins)
{
	unsigned char want[64], got[64];
	CHECK_EQ(t_unhex(CKPT_VEC, want), 64);
	le__ckpt c = {.gen = 3, .seg_index = 7, .offset = 4096, .next_seq = 200,
	              .last_ts = 1764538227123456789ull, .last_off = 4000,
	              .shard = 2};
	le__ckpt_encode(got, &c);
	CHECK(memcmp(got, want, 64) == 0);
	unsigned char file[LE_CKPT_FILE_BYTES] = {0};
	le__ckpt a = c, d;
	a.gen = 4;
	le__ckpt_encode(file, &a);                     /* slot 0: gen 4 */
	le__ckpt_encode(file + LE_CKPT_SLOT1_OFF, &c); /* slot 1: gen 3 */
	CHECK_EQ(le__ckpt_pick(file, sizeof file, &d), 0);
	CHECK_EQ(d.gen, 4);
	file[20] ^= 0x40; /* tear slot 0: fall back to gen 3 */
	CHECK_EQ(le__ckpt_pick(file, sizeof file, &d), 0);
	CHECK_EQ(d.gen, 3);
	file[LE_CKPT_SLOT1_OFF + 9] ^= 1; /* both torn */
	CHECK_EQ(le__ckpt_pick(file, sizeof file, &d), LE_ECORRUPT);
	CHECK_EQ(le__ckpt_pick(file, 10, &d), LE_ECORRUPT);
	/* a valid slot in the wrong place is not trusted */
	memset(file, 0, sizeof file);
	le__ckpt_encode(file, &c); /* gen 3 (odd) in slot 0 */
	CHECK_EQ(le__ckpt_pick(file, sizeof file, &d), LE_ECORRUPT);
}

/* The writer turns TSC stamps into ns with a 32.32 fixed-point multiply;
 * it must agree with the exact ratio to a nanosecond over a second's ticks
 * either side of the base (a stamp taken just before a rebase is behind
 * it), at this CPU's ratio and at the extremes of plausible clocks. */
TEST(tsc_stamps_convert_to_ns_within_a_nanosecond_either_side_of_base)
{
	const double ratios[] = {1.0 / 2.445, 1.0 / 0.8, 1.0 / 5.3, 1.0};
	for (size_t k = 0; k < sizeof ratios / sizeof *ratios; k++) {
		le__clock c = {
			.base_tsc = 1000000000000ull,
			.base_ns = 1764547200000000000ull, /* 2025-12-01 */
			.ns_per_tick = ratios[k],
			.mult = (uint64_t)(ratios[k] * 4294967296.0 + 0.5),
		};
		double span = 1e9 / ratios[k]; /* ticks in one second */
		for (int i = -1000; i <= 1000; i++) {
			int64_t d = (int64_t)(span * i / 1000.0);
			/* deltas from base: a double holds 1.7e18 to 256 ns */
			double want = (double)d * ratios[k];
			double got = (double)(int64_t)(le__clock_ns(
				&c, c.base_tsc + (uint64_t)d) - c.base_ns);
			CHECK(got - want < 1.5 && want - got < 1.5);
		}
	}
	le__clock ns = {0}; /* no TSC: stamps are ns already */
	CHECK_EQ(le__clock_ns(&ns, 123456789), 123456789);
}

/* A clock at 0.5 ns a tick, based at (1e12 ticks, R, M). */
#define T0 1000000000000ull
#define R0 1764547200000000000ull /* 2025-12-01 */
#define M0 5000000000000ull
static le__clock half_ns_clock(void)
{
	le__clock c = {.ns_per_tick = 0.5};
	le__clock_rebase(&c, T0, R0, M0);
	return c;
}

/* A VM restored from a snapshot (or moved to another host) can find its
 * counter moved back: records stamped before the jump and converted after
 * the writer rebased would land in the future.  The writer's check sees
 * the slip, rebases, and keeps such records at its own clock's reading:
 * in order, and never later than the writer saw them. */
TEST(tsc_jumping_back_leaves_no_record_in_the_future_or_out_of_order)
{
	le__clock c = half_ns_clock();
	uint64_t before = T0 + 2000000; /* 1 ms after base */
	CHECK_EQ(le__clock_ns(&c, before), R0 + 1000000);
	/* The counter goes back 20 s while the real clock goes on 2 ms. */
	uint64_t t_now = T0 - 40000000000ull, real = R0 + 2000000;
	CHECK(le__clock_slipped(&c, t_now, real));
	le__clock_rebase(&c, t_now, real, M0 + 2000000);
	CHECK(!le__clock_slipped(&c, t_now + 2000, real + 1000));
	uint64_t last = R0 + 900000; /* the shard's previous record */
	uint64_t ts = le__ts_within(le__clock_ns(&c, before), last, real);
	CHECK_EQ(ts, real); /* would be 20 s ahead */
	/* A record stamped after the jump converts exactly again. */
	uint64_t after = le__ts_within(le__clock_ns(&c, t_now + 1000), ts,
	                               real + 500);
	CHECK_EQ(after, real + 500);
	/* Stamps a little past the reading (taken while the writer
	 * collected) are believed, not clamped. */
	CHECK_EQ(le__ts_within(real + 300000, last, real), real + 300000);
}

/* The counter moving forward instead: old stamps convert to the past,
 * which the shard's order turns into its previous record's time. */
TEST(tsc_jumping_forward_keeps_records_in_order)
{
	le__clock c = half_ns_clock();
	uint64_t before = T0 + 2000000;
	uint64_t t_now = T0 + 7200000000000ull, real = R0 + 3000000;
	CHECK(le__clock_slipped(&c, t_now, real));
	le__clock_rebase(&c, t_now, real, M0 + 3000000);
	uint64_t last = R0 + 900000;
	CHECK_EQ(le__ts_within(le__clock_ns(&c, before), last, real), last);
	/* no slip: a counter the clock agrees with to within the bound */
	CHECK(!le__clock_slipped(&c, t_now + 2000000, real + 1000000 + 900000));
	CHECK(le__clock_slipped(&c, t_now + 2000000, real + 1000000 + 1100000));
}

/* Recalibration measures the ratio against CLOCK_MONOTONIC: a step of
 * CLOCK_REALTIME (settimeofday, an NTP step) between two recalibrations
 * must move the base, not the ratio (with the ratio from CLOCK_REALTIME
 * an hour's step would put every stamp of the next second hours off). */
TEST(realtime_step_moves_the_base_not_the_ratio)
{
	le__clock c = half_ns_clock();
	/* 1 s later by the counter and CLOCK_MONOTONIC; realtime +1 h */
	le__clock_recal_at(&c, T0 + 2000000000ull,
	                   R0 + 3600000000000ull + 1000000000ull,
	                   M0 + 1000000000ull, 0.5);
	CHECK(c.ns_per_tick == 0.5);
	CHECK_EQ(le__clock_ns(&c, T0 + 2000000000ull + 2000),
	         R0 + 3601000000000ull + 1000);
	/* A slightly different rate is taken (the counter's true rate)... */
	le__clock_recal_at(&c, T0 + 4000000000ull, R0 + 3602000000000ull,
	                   M0 + 2000100000ull, 0.5);
	CHECK(c.ns_per_tick > 0.50004 && c.ns_per_tick < 0.50006);
	/* ...a counter that jumped 1000 s within 1 s is not. */
	double r = c.ns_per_tick;
	le__clock_recal_at(&c, T0 + 2004000000000ull, R0 + 3603000000000ull,
	                   M0 + 3000100000ull, 0.5);
	CHECK(c.ns_per_tick == r);
	CHECK(le__clock_ratio_ok(0.5, 0.5004) && !le__clock_ratio_ok(0.5, 0.5006));
	CHECK(!le__clock_ratio_ok(0.5, 0.4994));
}

/* The skew check at calibration (kvm-clock): a CPU whose counter is off
 * the calibrated line by more than LE_TSC_SKEW_NS vetoes TSC stamps. */
TEST(tsc_skew_beyond_the_bound_is_seen_either_way)
{
	uint64_t t = T0 + 2000000; /* 1 ms on at 0.5 ns a tick */
	CHECK(!le__tsc_skewed(T0, M0, 0.5, t, M0 + 1000000));
	CHECK(!le__tsc_skewed(T0, M0, 0.5, t, M0 + 1000000 + 1900));
	CHECK(le__tsc_skewed(T0, M0, 0.5, t, M0 + 1000000 + 2100));
	CHECK(le__tsc_skewed(T0, M0, 0.5, t, M0 + 1000000 - 2100));
	/* a counter behind the base (signed): 10 ns is fine, 10 us is not */
	CHECK(!le__tsc_skewed(T0, M0, 0.5, T0 - 20, M0));
	CHECK(le__tsc_skewed(T0, M0, 0.5, T0 - 20000, M0));
}

/* LE_NO_TSC=1 is the operator's way out of TSC stamps (os.h): it must
 * win over any clock source.  Asked in a child before this process
 * decides (the decision is made once per process). */
TEST(le_no_tsc_in_the_environment_turns_tsc_stamps_off)
{
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		setenv("LE_NO_TSC", "1", 1);
		_exit(le__tsc_usable() ? 1 : 0);
	}
	int st = 0;
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	printf("  (record stamps here: %s)\n",
	       le__tsc_usable() ? "TSC" : "clock_gettime");
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	RUN(crc32c_matches_rfc3720_vectors_in_every_implementation);
	RUN(crc32c_hw_and_sw_agree_at_every_length_and_alignment);
	RUN(crc32c_multi_equals_one_at_a_time);
	RUN(crc_mask_roundtrips);
	RUN(segment_header_matches_format_md_vector);
	RUN(frames_match_format_md_vectors);
	RUN(frame_put_all_writes_what_frame_put_writes);
	RUN(frames_sealed_eight_at_once_match_one_at_a_time);
	RUN(flipped_bit_anywhere_in_a_crc_frame_is_detected);
	RUN(absurd_size_word_is_rejected_before_use);
	RUN(frames_checked_together_stop_where_one_at_a_time_stops);
	RUN(checkpoint_matches_vector_and_newest_valid_slot_wins);
	RUN(tsc_stamps_convert_to_ns_within_a_nanosecond_either_side_of_base);
	RUN(tsc_jumping_back_leaves_no_record_in_the_future_or_out_of_order);
	RUN(tsc_jumping_forward_keeps_records_in_order);
	RUN(realtime_step_moves_the_base_not_the_ratio);
	RUN(tsc_skew_beyond_the_bound_is_seen_either_way);
	RUN(le_no_tsc_in_the_environment_turns_tsc_stamps_off);
	return t_done();
}
