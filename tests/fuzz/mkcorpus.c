/*
 * mkcorpus.c -- write the seed corpus of the fuzz targets, with the codec's
 * own encoders, so that each fuzzer starts from inputs that decode (and
 * from the classic ways they stop decoding) instead of from nothing.
 *
 *   mkcorpus DIR     writes DIR/frame/, DIR/segment/, DIR/recover/ (the
 *                    same inputs as segment/), DIR/checkpoint/, DIR/fmt/,
 *                    DIR/queue/, DIR/defer/, DIR/sites/, DIR/index/,
 *                    DIR/zst/ (with libzstd), DIR/collect/, DIR/fwd/,
 *                    DIR/stats/, DIR/cursor/
 *
 * Input layouts are described at the top of each fuzz_*.c; the first byte
 * is always a control byte.  Output is deterministic: regenerating gives
 * the same files, so the checked-in corpus only changes when this does.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/crc32c.h"
#include "live/statpage.h"
#include "record/defer.h"
#include "record/fields.h"
#include "record/format.h"
#include "queue/queue.h"
#include "queue/sites.h"
#include "ship/ship.h"
#include "store/fwd_cursor.h"
#include "store/index.h"
#ifdef LE_HAVE_ZSTD
#include <zstd.h>
#endif

#define TS0 1796074227000000000ull

static const char *out_dir;

struct buf {
	unsigned char b[16384];
	size_t len;
};

static void put(struct buf *b, const void *p, size_t len)
{
	if (b->len + len > sizeof b->b) {
		fprintf(stderr, "mkcorpus: buffer full\n");
		exit(1);
	}
	memcpy(b->b + b->len, p, len);
	b->len += len;
}

static void put_byte(struct buf *b, int c)
{
	unsigned char x = (unsigned char)c;
	put(b, &x, 1);
}

static void save1(const char *target, const char *name, const struct buf *b)
{
	char path[1024];
	snprintf(path, sizeof path, "%s/%s", out_dir, target);
	if (mkdir(path, 0755) < 0 && errno != EEXIST) {
		perror(path);
		exit(1);
	}
	snprintf(path, sizeof path, "%s/%s/%s", out_dir, target, name);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(b->b, 1, b->len, f) != b->len || fclose(f) != 0) {
		perror(path);
		exit(1);
	}
}

/* fuzz_recover reads the same inputs as fuzz_segment. */
static void save(const char *target, const char *name, const struct buf *b)
{
	save1(target, name, b);
	if (strcmp(target, "segment") == 0)
		save1("recover", name, b);
}

/* n frames with payloads "record <seq> ..." of varying length, every
 * third with a field block; @return the offset of the last frame within
 * b. */
static size_t frames(struct buf *b, uint32_t fields, uint32_t shard,
                     uint64_t seq, int n)
{
	unsigned char f[256];
	char p[160];
	size_t last = b->len;

	for (int i = 0; i < n; i++, seq++) {
		le_field kv[] = {LE_STR("k", "v"), LE_I64("n", (int64_t)seq)};
		le__fieldset fs = {.f = kv, .n = 2};
		size_t fb = seq % 3 ? 0 : le__fields_encode((unsigned char *)p,
		                                            sizeof p, &fs);
		int len = (int)fb +
		          snprintf(p + fb, sizeof p - fb, "record %llu %.*s",
		                   (unsigned long long)seq, (int)(seq % 23),
		                   "abcdefghijklmnopqrstuvwxyz");
		uint32_t flags = (seq % 11 == 0) ? LE_REC_TRUNCATED : 0;
		if (fb)
			flags |= LE_REC_FIELDS;
		last = b->len;
		put(b, f, le__frame_encode(f, fields, flags, (int)(seq % 6),
		                           shard, seq, TS0 + seq * 1000, p,
		                           (uint32_t)len));
	}
	return last;
}

static void header_v(struct buf *b, uint32_t version, uint32_t fields,
                     uint32_t shard, uint64_t index, uint64_t base)
{
	unsigned char h[LE_SEG_HDR];
	le__seg_hdr hd = {.version = version, .fields = fields,
	                  .shard = shard, .index = index, .base_seq = base,
	                  .created_ns = TS0};
	le__seg_hdr_encode(h, &hd);
	put(b, h, sizeof h);
}

static void header(struct buf *b, uint32_t fields, uint32_t shard,
                   uint64_t index, uint64_t base)
{
	header_v(b, LE_SEG_VERSION, fields, shard, index, base);
}

/* A segment file image: header + n frames; *last = last frame's offset. */
static void segment(struct buf *b, uint32_t fields, uint64_t index,
                    uint64_t base, int n, size_t *last)
{
	header(b, fields, 0, index, base);
	size_t l = frames(b, fields, 0, base, n);
	if (last)
		*last = l;
}

static void ckpt_file(struct buf *b, uint64_t gen0, uint64_t gen1,
                      uint64_t seg, uint64_t end, uint64_t next_seq,
                      uint64_t last_off)
{
	unsigned char img[LE_CKPT_FILE_BYTES];
	le__ckpt c = {.seg_index = seg, .offset = end, .next_seq = next_seq,
	              .last_ts = TS0, .last_off = last_off, .shard = 0};

	memset(img, 0, sizeof img);
	if (gen0) {
		c.gen = gen0;
		le__ckpt_encode(img, &c);
	}
	if (gen1) {
		c.gen = gen1;
		le__ckpt_encode(img + LE_CKPT_SLOT1_OFF, &c);
	}
	put(b, img, sizeof img);
}

/* ---- fuzz_frame: control byte, tiny bound, frame bytes ---- */

static void corpus_frame(void)
{
	static const uint32_t sets[] = {0, LE_FIELD_CRC, LE_FIELD_CRC |
	                                LE_FIELD_SEQUENCE, LE_FIELD_ALL,
	                                LE_FIELD_LEVEL | LE_FIELD_SHARD |
	                                LE_FIELD_TIMESTAMP};
	struct buf b;
	char name[64];

	for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
		b.len = 0;
		put_byte(&b, (int)sets[i]);
		put_byte(&b, 16);
		frames(&b, sets[i], 3, 1, 3);
		snprintf(name, sizeof name, "valid-fields-%02x", sets[i]);
		save("frame", name, &b);
	}
	/* Damage, every field on. */
	struct buf v;
	v.len = 0;
	put_byte(&v, LE_FIELD_ALL);
	put_byte(&v, 16);
	frames(&v, LE_FIELD_ALL, 3, 1, 2);

	b = v;
	b.b[2 + 9] ^= 0x04; /* payload bit: CRC mismatch */
	save("frame", "crc-mismatch", &b);
	b = v;
	b.len -= 3;         /* second frame cut short */
	save("frame", "cut-short", &b);
	b = v;
	le__put32(b.b + 2, 0xFFFFFFFFu);
	save("frame", "size-all-ones", &b);
	b = v;
	le__put32(b.b + 2, LE_FRAME_MAX + 1);
	save("frame", "size-above-max", &b);
	b = v;
	le__put32(b.b + 2, 3);
	save("frame", "size-below-fixed", &b);
	b = v;
	b.b[0] |= 0x20;     /* seal, so the flags check is reached */
	b.b[2 + 8] = 0x80;
	save("frame", "unknown-flags-sealed", &b);
	b = v;
	b.b[0] |= 0x20;
	b.b[2 + 9] = 9;
	save("frame", "bad-level-sealed", &b);
	b = v;
	b.b[0] = LE_FIELD_ALL | 0xC0; /* max_size mode 3: byte 1 bounds */
	save("frame", "tiny-max-size", &b);
	b.len = 2;
	put(&b, "\0\0\0\0", 4);
	save("frame", "zero-size-word", &b);

	/* A segment header followed by frames. */
	b.len = 0;
	put_byte(&b, LE_FIELD_ALL);
	put_byte(&b, 0);
	header(&b, LE_FIELD_ALL, 2, 7, 100);
	save("frame", "segment-header", &b);
	b.len = 2;
	header_v(&b, LE_SEG_VERSION + 1, LE_FIELD_ALL, 2, 7, 100);
	save("frame", "segment-header-unknown-version", &b);
	b.len = 2;
	header_v(&b, LE_SEG_VERSION_MIN, LE_FIELD_ALL, 2, 7, 100);
	save("frame", "segment-header-version-1", &b);
}

/* ---- fuzz_segment: control, split (2 bytes), body ---- */

enum { ONE = 0, TWO = 1, ONE_CK = 2, TWO_CK = 3, FIX = 4, RENUM = 8 };

static void seg_input(struct buf *b, int ctl, size_t split)
{
	b->len = 0;
	put_byte(b, ctl);
	put_byte(b, (int)(split & 0xff));
	put_byte(b, (int)(split >> 8));
}

static void corpus_segment(void)
{
	struct buf b, s1, s2, ck;
	size_t last;

	s1.len = 0;
	segment(&s1, LE_FIELD_ALL, 1, 1, 6, &last);

	seg_input(&b, ONE, 0);
	put(&b, s1.b, s1.len);
	save("segment", "one-valid", &b);
	b.b[0] = ONE;
	save("segment", "one-valid", &b);
	b.b[0] = ONE | FIX | RENUM;
	save("segment", "one-valid-fixed", &b);

	/* regression: a sound frame flagged deferred whose descriptor does
	 * not decode, between two records (test_reader.c
	 * absolute_mode_stops_at_an_undecodable_deferred_record) */
	{
		struct buf u = {.len = 0};
		unsigned char f[64];
		header(&u, LE_FIELD_ALL, 0, 1, 1);
		frames(&u, LE_FIELD_ALL, 0, 1, 1);
		put(&u, f, le__frame_encode(f, LE_FIELD_ALL, LE_REC_DEFERRED,
		                            LE_INFO, 0, 2, TS0 + 2000,
		                            "garbage", 7));
		frames(&u, LE_FIELD_ALL, 0, 3, 1);
		seg_input(&b, ONE, 0);
		put(&b, u.b, u.len);
		save("segment", "undecodable-deferred", &b);
	}

	/* Torn tails: cut inside the last frame; zeros; garbage. */
	seg_input(&b, ONE, 0);
	put(&b, s1.b, s1.len - 7);
	save("segment", "torn-last-frame", &b);
	seg_input(&b, ONE, 0);
	put(&b, s1.b, s1.len);
	for (int i = 0; i < 100; i++)
		put_byte(&b, 0);
	save("segment", "zero-tail", &b);
	seg_input(&b, ONE, 0);
	put(&b, s1.b, s1.len);
	for (int i = 0; i < 100; i++)
		put_byte(&b, (i * 131 + 7) & 0xff);
	save("segment", "garbage-tail", &b);

	/* Damage in the middle: a flipped bit, an absurd length. */
	seg_input(&b, ONE, 0);
	put(&b, s1.b, s1.len);
	b.b[3 + s1.len / 2] ^= 0x10;
	save("segment", "bit-flip-middle", &b);
	seg_input(&b, ONE, 0);
	put(&b, s1.b, s1.len);
	le__put32(b.b + 3 + LE_SEG_HDR, 0xFFFFFFFFu);
	save("segment", "absurd-length-first", &b);
	seg_input(&b, ONE, 0);
	put(&b, s1.b, s1.len);
	le__put32(b.b + 3 + last, LE_FRAME_MAX + 1);
	save("segment", "absurd-length-last", &b);

	/* A frame copied to another offset (wrong sequence). */
	seg_input(&b, ONE, 0);
	put(&b, s1.b, s1.len);
	{
		size_t f0 = LE_SEG_HDR, n0 = 4 + le__get32(s1.b + f0);
		put(&b, s1.b + f0, n0);
	}
	save("segment", "frame-copied-to-end", &b);

	/* Header damage; a header only; fields off. */
	seg_input(&b, ONE, 0);
	put(&b, s1.b, s1.len);
	b.b[3 + 20] = 1;
	save("segment", "header-crc-bad", &b);
	seg_input(&b, ONE, 0);
	put(&b, s1.b, LE_SEG_HDR);
	save("segment", "header-only", &b);
	seg_input(&b, ONE, 0);
	for (int i = 0; i < 200; i++)
		put_byte(&b, 0);
	save("segment", "unborn-zeros", &b);
	struct buf s0;
	s0.len = 0;
	segment(&s0, 0, 1, 1, 6, NULL);
	seg_input(&b, ONE, 0);
	put(&b, s0.b, s0.len);
	save("segment", "fields-none", &b);
	s0.len = 0;
	segment(&s0, LE_FIELD_CRC | LE_FIELD_TIMESTAMP, 1, 1, 6, NULL);
	seg_input(&b, ONE, 0);
	put(&b, s0.b, s0.len);
	save("segment", "fields-crc-ts", &b);

	/* Two segments of one shard: continuous, with a gap, overlapping. */
	s2.len = 0;
	segment(&s2, LE_FIELD_ALL, 2, 7, 4, NULL);
	seg_input(&b, TWO, s1.len);
	put(&b, s1.b, s1.len);
	put(&b, s2.b, s2.len);
	save("segment", "two-valid", &b);
	s2.len = 0;
	segment(&s2, LE_FIELD_ALL, 2, 20, 4, NULL);
	seg_input(&b, TWO, s1.len);
	put(&b, s1.b, s1.len);
	put(&b, s2.b, s2.len);
	save("segment", "two-gap", &b);
	s2.len = 0;
	segment(&s2, LE_FIELD_ALL, 2, 3, 4, NULL);
	seg_input(&b, TWO, s1.len);
	put(&b, s1.b, s1.len);
	put(&b, s2.b, s2.len);
	save("segment", "two-overlap", &b);
	/* Rotation crash: the second segment was created, never written. */
	seg_input(&b, TWO, s1.len);
	put(&b, s1.b, s1.len);
	save("segment", "two-second-empty", &b);

	/* Recovery's traps.  A segment file whose header names another
	 * index: readers reject it, so le_open must not append to it (the
	 * record would vanish). */
	s0.len = 0;
	segment(&s0, LE_FIELD_ALL, 7, 1, 6, NULL);
	seg_input(&b, ONE, 0);
	put(&b, s0.b, s0.len);
	save("segment", "regress-header-names-other-index", &b);
	/* The last payload holds a well-formed frame and the checkpoint
	 * names it: le_open must not scan on from there, take the rest of
	 * the payload for a torn tail and cut the real record. */
	{
		unsigned char inner[64], outer[128], f[256];
		uint32_t ilen = le__frame_encode(inner, LE_FIELD_ALL, 0, 2, 0,
		                                 777, 1, "inner", 5);
		memcpy(outer, "prefix:", 7);
		memcpy(outer + 7, inner, ilen);
		memcpy(outer + 7 + ilen, ":suffix", 7);
		s0.len = 0;
		segment(&s0, LE_FIELD_ALL, 1, 1, 3, NULL);
		size_t at = s0.len;
		put(&s0, f, le__frame_encode(f, LE_FIELD_ALL, 0, 2, 0, 4, TS0,
		                             outer, 7 + ilen + 7));
		size_t in_at = at + LE_FRAME_FIXED_MAX + 7;
		ck.len = 0;
		ckpt_file(&ck, 10, 0, 1, in_at + ilen, 778, in_at);
		seg_input(&b, ONE_CK, 0);
		put(&b, s0.b, s0.len);
		put(&b, ck.b, ck.len);
		save("segment", "regress-ckpt-names-frame-in-payload", &b);
	}

	/* With a CHECKPOINT: right, torn, lying (ahead of the log). */
	ck.len = 0;
	ckpt_file(&ck, 2, 1, 1, s1.len, 7, last);
	seg_input(&b, ONE_CK, 0);
	put(&b, s1.b, s1.len);
	put(&b, ck.b, ck.len);
	save("segment", "ckpt-valid", &b);
	b.b[3 + s1.len + 30] ^= 0x01;
	save("segment", "ckpt-torn", &b);
	ck.len = 0;
	ckpt_file(&ck, 4, 3, 1, s1.len + 1000, 900, last + 1000);
	seg_input(&b, ONE_CK, 0);
	put(&b, s1.b, s1.len);
	put(&b, ck.b, ck.len);
	save("segment", "ckpt-ahead", &b);
	ck.len = 0;
	ckpt_file(&ck, 2, 0, 2, 64, 7, 64);
	seg_input(&b, TWO_CK | FIX | RENUM, s1.len);
	put(&b, s1.b, s1.len);
	put(&b, s1.b, s1.len);
	put(&b, ck.b, ck.len);
	save("segment", "two-ckpt-fixed", &b);
}

/* ---- fuzz_checkpoint: control, file image ---- */

static void corpus_checkpoint(void)
{
	struct buf b, ck;

	ck.len = 0;
	ckpt_file(&ck, 4, 3, 7, 4096, 200, 4000);
	b.len = 0;
	put_byte(&b, 0);
	put(&b, ck.b, ck.len);
	save("checkpoint", "both-slots", &b);
	b.b[1 + 20] ^= 0x40;
	save("checkpoint", "slot0-torn", &b);
	b.b[0] = 1; /* sealed again by the fuzzer: gen 4 wins once more */
	save("checkpoint", "slot0-torn-resealed", &b);

	ck.len = 0;
	ckpt_file(&ck, 3, 0, 7, 4096, 200, 4000); /* odd gen in slot 0 */
	b.len = 0;
	put_byte(&b, 0);
	put(&b, ck.b, ck.len);
	save("checkpoint", "wrong-parity", &b);

	ck.len = 0;
	ckpt_file(&ck, 0, 5, 7, 4096, 200, 4000);
	b.len = 0;
	put_byte(&b, 0);
	put(&b, ck.b, ck.len);
	save("checkpoint", "slot1-only", &b);
	b.len = 1 + LE_CKPT_SLOT1_OFF + 30; /* torn off mid slot 1 */
	save("checkpoint", "slot1-cut-short", &b);

	ck.len = 0;
	ckpt_file(&ck, 2, 0, 1, 100, 2, 64);
	b.len = 0;
	put_byte(&b, 0);
	put(&b, ck.b, LE_CKPT_SLOT);
	save("checkpoint", "slot0-only-short-file", &b);
	b.len = 1;
	save("checkpoint", "empty", &b);
}

/* ---- fuzz_fmt: choices for tests/unit/fmt_gen.h ---- */

static void corpus_fmt(void)
{
	struct buf b;
	char name[64];
	uint64_t x = 0;

	/* All zeros: six conversions in a row, bare (%d%f%s%lld%lu%p), of
	 * zeros and NULLs; all ones: the other end of every choice. */
	b.len = 0;
	for (int i = 0; i < 96; i++)
		put_byte(&b, 0);
	save("fmt", "zeros", &b);
	b.len = 0;
	for (int i = 0; i < 96; i++)
		put_byte(&b, 0xff);
	save("fmt", "ones", &b);
	/* Pseudo-random choices of a few lengths (splitmix64 of a counter):
	 * every kind of case, values of every size. */
	for (int k = 0; k < 6; k++) {
		b.len = 0;
		for (size_t i = 0; i < (size_t)48 << k && i < 1024; i++) {
			uint64_t z = (x += 0x9e3779b97f4a7c15u);
			z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
			z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
			put_byte(&b, (int)((z ^ (z >> 31)) & 0xff));
		}
		snprintf(name, sizeof name, "random-%zu", b.len);
		save("fmt", name, &b);
	}
}

/* ---- fuzz_defer: cap, format, a segment's deferred payload ---- */

/* A payload of FORMATS[k] (fuzz_defer.c) with its descriptor inline (or
 * not: then the fuzzer's own copy of the format is used), from the
 * encoder and these arguments. */
static void defer_seed(const char *name, int k, int inline_desc,
                       const char *fmt, ...)
{
	struct buf b;
	le__dplan p;
	le__dargs a;
	unsigned char blk[1024];
	va_list ap;

	if (le__dplan_make(&p, fmt, NULL, 0) < 0) {
		fprintf(stderr, "mkcorpus: \"%s\" not deferred\n", fmt);
		exit(1);
	}
	va_start(ap, fmt);
	size_t n = le__dargs_read(&p, &a, ap, sizeof blk);
	va_end(ap);
	le__dargs_put(&p, &a, blk);
	b.len = 0;
	put_byte(&b, 0x80);
	put_byte(&b, k);
	unsigned char w[4];
	le__put32(w, inline_desc ? LE_DEFER_INLINE : 64);
	put(&b, w, 4);
	if (inline_desc) {
		unsigned char d[512];
		size_t dl = le__desc_encode(d, sizeof d, LE_INFO, 1, fmt,
		                            strlen(fmt), "f.c", 3);
		put(&b, d, dl);
	}
	put(&b, blk, n);
	save("defer", name, &b);
}

static void corpus_defer(void)
{
	defer_seed("three", 0, 0, "Logging int: %d, int: %d, double: %f", 7,
	           -14, 3.5);
	defer_seed("three-inline", 0, 1, "Logging int: %d, int: %d, double: %f",
	           7, -14, 3.5);
	defer_seed("strings", 1, 0, "%s|%10s|%-10s|%.2s|%.*s|%*.*s|%s", "abc",
	           "r", "l", "xyz", 2, "hello", 6, 3, "world", (char *)NULL);
	defer_seed("sizes", 2, 0, "%p %lld %lu %hhd %hd %zu %c %%", (void *)(uintptr_t)0x1234,
	           -1ll, 5ul, 300, 70000, (size_t)9, 'q');
	defer_seed("floats", 3, 0, "%+08.3e %-#12x %G %a %.0f % i", 1e-300,
	           255, 1e300, 0.1, 2.5, -3);
	defer_seed("plain-inline", 4, 1, "plain");
	defer_seed("other-inline", 4, 1, "%.*f and %*s", 3, 1.0 / 3, -5, "x");
}

/* fuzz_queue: control, head, tail, releasing, then a ring of QRING bytes
 * holding slots as producers leave them (see fuzz_queue.c). */
#define QRING 8192u
#define QSLOT 192u

static unsigned char qring[QRING];

static void qslot(uint64_t pos, int ready, uint32_t len, uint64_t seq)
{
	le__slot s;
	uint32_t off = (uint32_t)(pos % QRING);
	memset(&s, 0, sizeof s);
	s.ts = TS0 + pos;
	s.seq = seq;
	s.len = len;
	s.level = (uint8_t)le__slot_lvbyte(2, 0);
	atomic_init(&s.state, (pos / QRING) << 32 | QSLOT | (ready ? LE_SLOT_READY : 0));
	memcpy(qring + off, &s, sizeof s);
	for (uint32_t i = 0; i < len; i++)
		qring[off + LE_SLOT_HDR + i] = (unsigned char)('a' + (pos / QSLOT + i) % 26);
}

static void qsave(const char *name, int ctl, uint64_t head, uint64_t tail,
                  uint64_t rel)
{
	static struct buf b;
	unsigned char w[8];
	b.len = 0;
	put_byte(&b, ctl);
	uint64_t v[3] = {head, tail, rel};
	for (int i = 0; i < 3; i++) {
		le__put64(w, v[i]);
		put(&b, w, 8);
	}
	if (ctl & 2) {
		/* header bytes 16..59 as fuzz_queue.c makes them (boot id
		 * 0x5eed5eed5eed) */
		unsigned char h[44];
		memset(h, 0, sizeof h);
		le__put64(h + 0, QRING);
		le__put64(h + 8, QRING);
		le__put32(h + 16, 0);
		le__put32(h + 20, LE_SLOT_HDR);
		le__put64(h + 24, 0x5eed5eed5eedull);
		put(&b, h, sizeof h);
	}
	put(&b, qring, QRING);
	save("queue", name, &b);
}

static void corpus_queue(void)
{
	/* 20 records in lap 0, and the same with the lap bit (lap 1) */
	memset(qring, 0, sizeof qring);
	for (uint64_t i = 0; i < 20; i++)
		qslot(i * QSLOT, 1, 100, 0);
	qsave("lap0-20", 0, 20 * QSLOT, 0, 0);
	qsave("lap0-20-header", 2, 20 * QSLOT, 0, 0);
	/* the same slots with checks (queue_checksum): made good by the
	 * target (control bits 3 and 4), and left as they are (bit 3) */
	qsave("lap0-20-checked", 8 | 16, 20 * QSLOT, 0, 0);
	qsave("lap0-20-unchecked", 8, 20 * QSLOT, 0, 0);
	/* one claimed and never published in the middle */
	qslot(10 * QSLOT, 0, 100, 0);
	qsave("lap0-claimed", 0, 20 * QSLOT, 0, 0);
	/* a release in progress: slots 0..4 already FREE for lap 1 */
	qslot(10 * QSLOT, 1, 100, 0);
	for (uint64_t off = 0; off < 5 * QSLOT; off += LE_SLOT_ALIGN)
		le__put64(qring + off, le__free_word(1));
	qsave("lap0-releasing", 0, 20 * QSLOT, 0, 5 * QSLOT);
	/* records the writer had written (seq set) before the kill */
	memset(qring, 0, sizeof qring);
	for (uint64_t i = 0; i < 20; i++)
		qslot(i * QSLOT, 1, 100, i < 8 ? i + 1 : 0);
	qsave("lap0-seq", 0, 20 * QSLOT, 0, 0);
	/* lap 1 in the words (control bit 0 adds the lap to positions) */
	memset(qring, 0, sizeof qring);
	for (uint64_t i = 0; i < 20; i++)
		qslot(QRING + i * QSLOT, 1, 100, 0);
	qsave("lap1-20", 1, 20 * QSLOT, 0, 0);
	/* wrapped: lap 1 from offset 6144 to a pad at the lap's end, then
	 * lap 2 from offset 0 */
	memset(qring, 0, sizeof qring);
	uint64_t pos = QRING + 6144;
	while (pos + QSLOT <= 2 * QRING) {
		qslot(pos, 1, 100 + (uint32_t)(pos % 50), 0);
		pos += QSLOT;
	}
	le__put64(qring + pos % QRING, 1ull << 32 | (2 * QRING - pos) |
	                                   LE_SLOT_PAD | LE_SLOT_READY);
	for (pos = 2 * QRING; pos < 2 * QRING + 5 * QSLOT; pos += QSLOT)
		qslot(pos, 1, 150, 0);
	qsave("wrapped", 0, pos, QRING + 6144, 0);
	qsave("wrapped-checked", 8 | 16, pos, QRING + 6144, 0);
	/* the same under a header that fails its CRC */
	qsave("wrapped-checked-hdr", 8 | 16 | 32, pos, QRING + 6144, 0);
	qsave("wrapped-hdr", 32, pos, QRING + 6144, 0);
	/* empty: head == tail, words FREE for lap 1 */
	memset(qring, 0, sizeof qring);
	for (uint64_t off = 0; off < QRING; off += LE_SLOT_ALIGN)
		le__put64(qring + off, le__free_word(1));
	qsave("empty-lap1", 0, QRING, QRING, 0);
}

/* ---- fuzz_sites: control (n, version), the file from byte 64 ---- */

/* One entry for site id at area offset off: [CRC][descriptor].
 * @return the next free offset. */
static uint32_t site_entry(unsigned char *area, uint32_t off, uint32_t id,
                           uint32_t version, const char *fmt)
{
	static const char file[] = "src/app/main.c";
	unsigned char *d = area + off + 4;
	size_t dl = le__desc_encode(d, 1024, LE_INFO, 40 + (int)id, fmt,
	                            strlen(fmt), file, sizeof file - 1);
	unsigned char idb[4];
	uint32_t c = 0;
	if (version >= 2) {
		le__put32(idb, id);
		c = le__crc32c_extend(0, idb, 4);
	}
	le__put32(d - 4, le__crc_mask(le__crc32c_extend(c, d, dl)));
	return off + (uint32_t)((4 + dl + 3) & ~(size_t)3);
}

/* A table of n entries, the first k of them filled. */
static void sites_seed(const char *name, int ctl, uint32_t k)
{
	static const char *const fmts[] = {"user %s logged in from %s",
	                                   "took %d ms", "%llu bytes at %p",
	                                   "%.3f%% done", "plain text"};
	uint32_t n = (uint32_t)ctl & 31, version = ctl & 64 ? 1 : 2;
	size_t file = LE_SITES_HDR + 4 * (size_t)n + n * LE_SITES_AREA_PER;
	static unsigned char img[LE_SITES_HDR + 32 * (4 + LE_SITES_AREA_PER)];
	struct buf b = {.len = 0};

	memset(img, 0, sizeof img);
	unsigned char *area = img + LE_SITES_HDR + 4 * (size_t)n;
	uint32_t off = LE_SITES_AREA_FIRST;
	for (uint32_t id = 1; id <= k && id < n; id++) {
		le__put32(img + LE_SITES_HDR + 4 * id, off);
		off = site_entry(area, off, id, version, fmts[id % 5]);
	}
	le__put32(img + LE_SITES_USED_OFF, off);
	put_byte(&b, ctl);
	put(&b, img + 64, file - 64);
	save("sites", name, &b);
}

static void corpus_sites(void)
{
	sites_seed("empty-8", 8, 0);
	sites_seed("five-of-8", 8, 5);
	sites_seed("full-31", 31, 30);
	sites_seed("v1-four-of-6", 64 | 6, 4);
	sites_seed("short-five-of-8", 128 | 8, 5);
	sites_seed("long-five-of-9", 128 | 9, 5);
}

/* ---- fuzz_index: control, look-ups, the .idx image ---- */

static void index_seed(const char *name, uint64_t records, size_t n)
{
	static unsigned char img[LE_IDX_HDR + 64 * LE_IDX_ENTRY];
	le__idx_entry e[64];
	le__index x = {.shard = 0, .spacing = LE_IDX_SPACING, .seg_index = 3,
	               .base_seq = 1000, .created_ns = TS0,
	               .end = LE_SEG_HDR + records * 100, .records = records,
	               .ts_min = records ? TS0 : 0,
	               .ts_max = records ? TS0 + records * 1000 : 0,
	               .e = e, .n = n, .cap = 64};
	struct buf b = {.len = 0};

	for (size_t i = 0; i < n; i++)
		e[i] = (le__idx_entry){LE_SEG_HDR + i * 100 * (records / n),
		                       1000 + i * (records / n),
		                       i ? TS0 + i * 1000 * (records / n) : 0};
	put_byte(&b, 0);
	unsigned char look[8];
	le__put32(look, (uint32_t)(records * 400));
	le__put32(look + 4, (uint32_t)(records / 2));
	put(&b, look, sizeof look);
	put(&b, img, le__index_encode(img, &x));
	save("index", name, &b);
}

static void corpus_index(void)
{
	index_seed("none", 0, 0);
	index_seed("one", 1, 1);
	index_seed("hundred-in-ten", 100, 10);
	index_seed("thousand-in-sixty", 1000, 60);
}

/* ---- fuzz_zst: the archive, whole ---- */

#ifdef LE_HAVE_ZSTD
static void zst_seed(const char *name, const struct buf *seg, int checksum,
                     size_t cut)
{
	static unsigned char z[16384];
	struct buf b = {.len = 0};
	ZSTD_CCtx *cc = ZSTD_createCCtx();

	ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, checksum);
	ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 1);
	size_t n = ZSTD_compress2(cc, z, sizeof z, seg->b, seg->len);
	ZSTD_freeCCtx(cc);
	if (ZSTD_isError(n)) {
		fprintf(stderr, "mkcorpus: zstd: %s\n", ZSTD_getErrorName(n));
		exit(1);
	}
	put(&b, z, n > cut ? n - cut : 0);
	save("zst", name, &b);
}

static void corpus_zst(void)
{
	struct buf seg = {.len = 0};

	header(&seg, LE_FIELD_ALL, 0, 1, 1);
	zst_seed("header-only", &seg, 1, 0);
	frames(&seg, LE_FIELD_ALL, 0, 1, 40);
	zst_seed("forty", &seg, 1, 0);
	zst_seed("forty-no-checksum", &seg, 0, 0);
	zst_seed("forty-cut", &seg, 1, 7);
	seg.len = 0;
	zst_seed("empty", &seg, 1, 0);
	/* regression: no content, and a checksum its blocks do not have
	 * (test_archive.c an_empty_archive_with_a_wrong_checksum_is_refused) */
	struct buf b = {.len = 0};
	static const unsigned char bad[] = {0x28, 0xb5, 0x2f, 0xfd, 0x24,
	                                    0x00, 0x01, 0x00, 0x00, 0x99,
	                                    0xe9, 0xe0, 0x51};
	put(&b, bad, sizeof bad);
	save("zst", "empty-bad-check", &b);
}
#endif

/* ---- fuzz_collect: control, headers, host, body; or ORIGIN ---- */

static void collect_seed(const char *name, uint32_t fields, uint32_t shard,
                         uint64_t first, uint16_t count, const char *host,
                         int drop_last)
{
	struct buf b = {.len = 0};
	unsigned char h[13];

	h[0] = 0;
	le__put32(h + 1, fields);
	h[5] = (unsigned char)shard;
	le__put32(h + 6, (uint32_t)(first - 1));
	le__put16(h + 10, (uint16_t)(count - 1));
	h[12] = (unsigned char)strlen(host);
	put(&b, h, sizeof h);
	put(&b, host, strlen(host));
	frames(&b, fields, shard, first, count - drop_last);
	save("collect", name, &b);
}

static void origin_seed(const char *name, const char *host, uint32_t kind)
{
	le__origin o = {.shard = 3, .kind = kind};
	unsigned char img[LE_ORIGIN_MAX_BYTES];
	struct buf b = {.len = 0};

	snprintf(o.host, sizeof o.host, "%s", host);
	put_byte(&b, 1);
	put(&b, img, le__origin_encode(img, &o));
	save("collect", name, &b);
}

static void corpus_collect(void)
{
	collect_seed("all-fields", LE_FIELD_ALL, 2, 1, 20, "web-1.example", 0);
	collect_seed("crc-seq", LE_FIELD_CRC | LE_FIELD_SEQUENCE, 0, 5000, 7,
	             "db_2", 0);
	collect_seed("no-fields", 0, 7, 9, 3, "h", 0);
	collect_seed("one-missing", LE_FIELD_ALL, 1, 100, 6, "a.b.c", 1);
	origin_seed("origin-chain", "web-1.example", LE_ORIGIN_CHAIN);
	origin_seed("origin-late", "db_2", LE_ORIGIN_LATE);
}

/* ---- fuzz_fwd: control, the FORWARD image ---- */

static void fwd_seed(const char *name, uint64_t gen0, uint64_t gen1,
                     int with_key)
{
	unsigned char img[LE_FWD_FILE_BYTES];
	le__fwd_cursor c = {.next_seq = 1234, .seg_index = 5, .offset = 4096,
	                    .lost = 2, .written_ns = TS0, .shard = 1};
	struct buf b = {.len = 0};

	memset(img, 0, sizeof img);
	if (gen0) {
		c.gen = gen0;
		le__fwd_encode(img, &c);
	}
	if (gen1) {
		c.gen = gen1;
		c.next_seq += 10;
		le__fwd_encode(img + LE_FWD_SLOT1_OFF, &c);
	}
	if (with_key) {
		unsigned char *k = img + LE_FWD_KEY_OFF;
		memcpy(k, LE_FWD_KEY_MAGIC, 8);
		le__put64(k + 8, 0x0123456789abcdefull);
		le__put32(k + 16, le__crc_mask(le__crc32c_extend(0, k, 16)));
	}
	put_byte(&b, 0);
	put(&b, img, sizeof img);
	save("fwd", name, &b);
}

static void corpus_fwd(void)
{
	fwd_seed("both", 4, 5, 1);
	fwd_seed("first-only", 2, 0, 1);
	fwd_seed("second-newer-no-key", 6, 7, 0);
	fwd_seed("swapped-parity", 3, 4, 1);
}

/* ---- fuzz_stats: control, the page ---- */

static void stats_seed(const char *name, uint64_t state, int pubs)
{
	static unsigned char page[LE_SP_BYTES];
	uint64_t w[LE_SP_WORDS];
	struct buf b = {.len = 0};

	memset(page, 0, sizeof page);
	le__statpage_header(page, 0);
	for (int p = 0; p < pubs; p++) {
		for (size_t i = 0; i < LE_SP_WORDS; i++)
			w[i] = (uint64_t)(i * 7 + (size_t)p);
		w[LE_SP_STATE] = state;
		w[LE_SP_PID] = 1;
		w[LE_SP_BOOT] = 0x5eed5eed5eedull; /* fuzz_stats sets this boot id */
		le__statpage_put(page, w);
	}
	put_byte(&b, 0);
	put(&b, page, sizeof page);
	save("stats", name, &b);
}

static void corpus_stats(void)
{
	stats_seed("made", 0, 0);
	stats_seed("running", LE_SP_RUNNING, 3);
	stats_seed("closed", LE_SP_CLOSED, 2);
}

/* ---- fuzz_cursor: the cursor string ---- */

static void corpus_cursor(void)
{
	static const char *const c[][2] = {
		{"own-shard", "v=1,s=0,q=5,t=0"},
		{"hinted", "v=1,s=1,q=100,t=1796074227000000000,i=2,o=64,"
		           "n=0:50/1:101"},
		{"both-next", "v=1,s=0,q=300,t=1,n=0:301/1:0"},
		{"later-key", "v=1,s=1,q=7,t=0,x=something,n=1:8"},
		{"past-end", "v=1,s=0,q=99999,t=18446744073709551615"},
	};
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		struct buf b = {.len = 0};
		put(&b, c[i][1], strlen(c[i][1]));
		save("cursor", c[i][0], &b);
	}
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: mkcorpus DIR\n");
		return 2;
	}
	out_dir = argv[1];
	if (mkdir(out_dir, 0755) < 0 && errno != EEXIST) {
		perror(out_dir);
		return 1;
	}
	corpus_frame();
	corpus_segment();
	corpus_checkpoint();
	corpus_fmt();
	corpus_queue();
	corpus_defer();
	corpus_sites();
	corpus_index();
#ifdef LE_HAVE_ZSTD
	corpus_zst();
#endif
	corpus_collect();
	corpus_fwd();
	corpus_stats();
	corpus_cursor();
	return 0;
}
