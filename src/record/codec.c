/*
 * codec.c -- encode and decode segment headers, frames and checkpoint slots.
 *
 * Decoders trust nothing: every length is checked against the bytes
 * available and against LE_FRAME_MAX before it is used, so a damaged file
 * can make a decode fail but never read out of bounds.  The byte layouts
 * are drawn at the top of format.h.
 */
#include "base/crc32c.h"
#include "record/fields.h"
#include "record/format.h"

void le__seg_hdr_encode(unsigned char out[LE_SEG_HDR], const le__seg_hdr *h)
{
	memset(out, 0, LE_SEG_HDR);
	memcpy(out, LE_SEG_MAGIC, 8);
	le__put16(out + 8, (uint16_t)h->version);
	le__put16(out + 10, LE_SEG_HDR);
	le__put32(out + 12, h->fields);
	le__put32(out + 16, h->shard);
	le__put64(out + 24, h->index);
	le__put64(out + 32, h->base_seq);
	le__put64(out + 40, h->created_ns);
	le__put32(out + LE_SEG_HDR_CRC_OFF,
	          le__crc_mask(le__crc32c_extend(0, out, LE_SEG_HDR_CRC_OFF)));
}

int le__seg_hdr_decode(const unsigned char in[LE_SEG_HDR], le__seg_hdr *h)
{
	uint32_t want = le__crc_mask(le__crc32c_extend(0, in, LE_SEG_HDR_CRC_OFF));

	if (memcmp(in, LE_SEG_MAGIC, 8) != 0)
		return LE_ECORRUPT;
	if (le__get32(in + LE_SEG_HDR_CRC_OFF) != want)
		return LE_ECORRUPT;
	h->version = le__get16(in + 8);
	if (h->version < LE_SEG_VERSION_MIN || h->version > LE_SEG_VERSION)
		return LE_EVERSION;
	if (le__get16(in + 10) != LE_SEG_HDR)
		return LE_ECORRUPT;
	h->fields = le__get32(in + 12);
	if (h->fields & ~LE_FIELD_ALL)
		return LE_ECORRUPT;
	h->shard = le__get32(in + 16);
	h->index = le__get64(in + 24);
	h->base_seq = le__get64(in + 32);
	h->created_ns = le__get64(in + 40);
	return 0;
}

uint32_t le__frame_put(unsigned char *out, uint32_t fields, uint32_t flags,
                       int level, uint32_t shard, uint64_t seq, uint64_t ts,
                       const void *payload, uint32_t len)
{
	unsigned char *p = out + 4 + ((fields & LE_FIELD_CRC) ? 4 : 0);

	*p++ = (unsigned char)flags;
	if (fields & LE_FIELD_LEVEL)
		*p++ = (unsigned char)level;
	if (fields & LE_FIELD_SHARD) {
		le__put16(p, (uint16_t)shard);
		p += 2;
	}
	if (fields & LE_FIELD_SEQUENCE) {
		le__put64(p, seq);
		p += 8;
	}
	if (fields & LE_FIELD_TIMESTAMP) {
		le__put64(p, ts);
		p += 8;
	}
	if (len)
		memcpy(p, payload, len);
	p += len;
	uint32_t total = (uint32_t)(p - out);
	le__put32(out, total - 4);
	return total;
}

/* CRC input of a frame: its size word, then everything after the crc word.
 * Inline, so that le__frame_seal's call with n = LE_CRC_WAYS (the
 * writer's) gets loops of a constant count, unrolled (with the inline tails of
 * crc32c.c's multi_hw: put + seal of a 156-byte frame in L1 went from
 * 58-68 to 38-45 TSC cycles). */
static inline __attribute__((always_inline)) void
seal_n(unsigned char *const *frames, int n)
{
	uint32_t crc[LE_CRC_WAYS] = {0}, pre[LE_CRC_WAYS] = {0};
	const unsigned char *p[LE_CRC_WAYS] = {0};
	size_t len[LE_CRC_WAYS] = {0};

	for (int i = 0; i < n; i++) {
		pre[i] = le__get32(frames[i]);
		p[i] = frames[i] + 8;
		len[i] = pre[i] - 4;
	}
	le__crc32c_multi(crc, pre, p, len, n);
	for (int i = 0; i < n; i++)
		le__put32(frames[i] + 4, le__crc_mask(crc[i]));
}

/* LE_CRC_WAYS frames of one size, evenly spaced (the writer's records of
 * one length, back to back), through le__crc32c_strided.  @return 1 when
 * sealed, 0 when they are not such a run (or the CPU has no crc32). */
static int seal_run(unsigned char *const *frames)
{
	const uint32_t size = le__get32(frames[0]);
	const ptrdiff_t stride = frames[1] - frames[0];
	uint32_t crc[LE_CRC_WAYS];

	for (int i = 1; i < LE_CRC_WAYS; i++)
		if (frames[i] != frames[0] + i * stride ||
		    le__get32(frames[i]) != size)
			return 0;
	if (!le__crc32c_strided(crc, size, frames[0] + 8, stride, size - 4))
		return 0;
	for (int i = 0; i < LE_CRC_WAYS; i++)
		le__put32(frames[i] + 4, le__crc_mask(crc[i]));
	return 1;
}

void le__frame_seal(unsigned char *const *frames, int n)
{
	if (n == LE_CRC_WAYS) {
		if (!seal_run(frames))
			seal_n(frames, LE_CRC_WAYS);
	} else {
		seal_n(frames, n);
	}
}

uint32_t le__frame_encode(unsigned char *out, uint32_t fields, uint32_t flags,
                          int level, uint32_t shard, uint64_t seq,
                          uint64_t ts, const void *payload, uint32_t len)
{
	uint32_t total = le__frame_put(out, fields, flags, level, shard, seq,
	                               ts, payload, len);
	if (fields & LE_FIELD_CRC)
		le__frame_seal(&out, 1);
	return total;
}

/* A payload with LE_REC_FIELDS: the block must decode whole, or the
 * frame is damaged (the writer never stores one that does not). */
static int split_fields(le__frame *f, const char **why)
{
	const unsigned char *b, *msg;
	size_t blen, mlen;

	if (le__fields_split(f->payload, f->len, &b, &blen, &msg, &mlen) < 0) {
		*why = "field block longer than the payload";
		return LE_FRAME_BAD;
	}
	if (le__fields_check(b, blen, why) < 0)
		return LE_FRAME_BAD;
	f->fields = b;
	f->fields_len = (uint32_t)blen;
	f->payload = msg;
	f->len = (uint32_t)mlen;
	return LE_FRAME_OK;
}

int le__frame_decode(const unsigned char *buf, uint64_t avail,
                     uint32_t fields, uint32_t max_size, le__frame *f,
                     const char **why)
{
	return le__frame_decode_v(buf, avail, LE_SEG_VERSION, fields, max_size,
	                          f, why);
}

int le__frame_decode_v(const unsigned char *buf, uint64_t avail,
                       uint32_t version, uint32_t fields, uint32_t max_size,
                       le__frame *f, const char **why)
{
	uint32_t fixed = le__frame_fixed(fields);
	const unsigned char *p;

	if (avail < 4) {
		*why = "frame header cut short";
		return (avail == 0) ? LE_FRAME_END : LE_FRAME_SHORT;
	}
	f->size = le__get32(buf);
	if (f->size == 0) {
		*why = "zero size word";
		return LE_FRAME_END;
	}
	if (max_size > LE_FRAME_MAX)
		max_size = LE_FRAME_MAX;
	if (f->size < fixed - 4 || f->size > max_size) {
		*why = "frame size out of range";
		return LE_FRAME_BAD;
	}
	if ((uint64_t)f->size + 4 > avail) {
		*why = "frame runs past end of data";
		return LE_FRAME_SHORT;
	}
	p = buf + 4;
	const unsigned char *crc_at = (fields & LE_FIELD_CRC) ? p : NULL;
	if (crc_at)
		p += 4;
	f->flags = *p++;
	if (f->flags & ~(version >= 2 ? LE_REC_KNOWN_FLAGS
	                              : LE_REC_KNOWN_FLAGS_V1)) {
		*why = "unknown record flags";
		return LE_FRAME_BAD;
	}
	f->level = -1;
	if (fields & LE_FIELD_LEVEL) {
		f->level = *p++;
		if (f->level > LE_FATAL) {
			*why = "level out of range";
			return LE_FRAME_BAD;
		}
	}
	f->shard = UINT32_MAX;
	if (fields & LE_FIELD_SHARD) {
		f->shard = le__get16(p);
		p += 2;
	}
	f->seq = 0;
	if (fields & LE_FIELD_SEQUENCE) {
		f->seq = le__get64(p);
		p += 8;
	}
	f->ts = 0;
	if (fields & LE_FIELD_TIMESTAMP) {
		f->ts = le__get64(p);
		p += 8;
	}
	if (crc_at) {
		uint32_t c = le__crc32c_extend(0, buf, 4);
		c = le__crc32c_extend(c, crc_at + 4, f->size - 4);
		if (le__crc_mask(c) != le__get32(crc_at)) {
			*why = "checksum mismatch";
			return LE_FRAME_BAD;
		}
	}
	f->payload = p;
	f->len = f->size + 4 - fixed;
	f->fields = NULL;
	f->fields_len = 0;
	if (f->flags & LE_REC_FIELDS)
		return split_fields(f, why);
	return LE_FRAME_OK;
}

/* Everything of a frame at p (size word read, within avail) but its CRC:
 * @return 1 valid so far, 0 not (le__frame_decode_v will say why). */
static int frame_plain_check(const unsigned char *p, uint32_t size,
                             uint32_t fixed, uint32_t known, uint32_t fields,
                             uint32_t shard, uint64_t seq)
{
	const unsigned char *q = p + ((fields & LE_FIELD_CRC) ? 8 : 4);
	uint32_t flags = *q++;

	if (flags & ~known)
		return 0;
	if (fields & LE_FIELD_LEVEL) {
		if (*q > LE_FATAL)
			return 0;
		q++;
	}
	if (fields & LE_FIELD_SHARD) {
		if (shard != UINT32_MAX && le__get16(q) != shard)
			return 0;
		q += 2;
	}
	if ((fields & LE_FIELD_SEQUENCE) && le__get64(q) != seq)
		return 0;
	if (flags & LE_REC_FIELDS) {
		const unsigned char *b, *msg;
		size_t blen, mlen;
		const char *why;
		if (le__fields_split(p + fixed, size + 4 - fixed, &b, &blen, &msg,
		                     &mlen) < 0 ||
		    le__fields_check(b, blen, &why) < 0)
			return 0;
	}
	return 1;
}

/* Of the n frames at buf + off[i], how many in a row from the first have
 * the CRC they carry (computed side by side: le__crc32c_multi). */
static int crc_run(const unsigned char *buf, const size_t *off, int n)
{
	uint32_t crc[LE_CRC_WAYS] = {0}, pre[LE_CRC_WAYS];
	const unsigned char *p[LE_CRC_WAYS];
	size_t len[LE_CRC_WAYS];

	for (int i = 0; i < n; i++) {
		pre[i] = le__get32(buf + off[i]);
		p[i] = buf + off[i] + 8;
		len[i] = pre[i] - 4;
	}
	le__crc32c_multi(crc, pre, p, len, n);
	for (int i = 0; i < n; i++)
		if (le__crc_mask(crc[i]) != le__get32(buf + off[i] + 4))
			return i;
	return n;
}

uint64_t le__frames_check(const unsigned char *buf, size_t avail,
                          uint32_t version, uint32_t fields, uint32_t shard,
                          size_t max_bytes, uint64_t *seq, size_t *used)
{
	uint32_t fixed = le__frame_fixed(fields);
	uint32_t known = version >= 2 ? LE_REC_KNOWN_FLAGS
	                              : LE_REC_KNOWN_FLAGS_V1;
	size_t off = 0, group[LE_CRC_WAYS], end = avail < max_bytes ? avail
	                                                          : max_bytes;
	uint64_t n = 0, next = *seq;
	int g = 0, stop = 0;

	while (!stop) {
		uint32_t size = 0;
		stop = end - off < 4;
		if (!stop) {
			size = le__get32(buf + off);
			stop = size < fixed - 4 || size > LE_FRAME_MAX ||
			       (uint64_t)size + 4 > end - off ||
			       !frame_plain_check(buf + off, size, fixed, known,
			                          fields, shard, next + (uint64_t)g);
		}
		if (!stop)
			group[g++] = off;
		/* A full group, or the last: its CRCs, side by side. */
		if (g == LE_CRC_WAYS || (stop && g)) {
			int ok = (fields & LE_FIELD_CRC) ? crc_run(buf, group, g)
			                                 : g;
			n += (uint64_t)ok;
			next += (uint64_t)ok;
			if (ok < g) {
				off = group[ok];
				break;
			}
			g = 0;
		}
		if (!stop)
			off += (size_t)size + 4;
	}
	*seq = next;
	*used = off;
	return n;
}

void le__ckpt_encode(unsigned char out[LE_CKPT_SLOT], const le__ckpt *c)
{
	memset(out, 0, LE_CKPT_SLOT);
	memcpy(out, LE_CKPT_MAGIC, 8);
	le__put64(out + 8, c->gen);
	le__put64(out + 16, c->seg_index);
	le__put64(out + 24, c->offset);
	le__put64(out + 32, c->next_seq);
	le__put64(out + 40, c->last_ts);
	le__put64(out + 48, c->last_off);
	le__put32(out + 56, c->shard);
	le__put32(out + 60, le__crc_mask(le__crc32c_extend(0, out, 60)));
}

int le__ckpt_decode(const unsigned char in[LE_CKPT_SLOT], le__ckpt *c)
{
	if (memcmp(in, LE_CKPT_MAGIC, 8) != 0)
		return LE_ECORRUPT;
	if (le__get32(in + 60) != le__crc_mask(le__crc32c_extend(0, in, 60)))
		return LE_ECORRUPT;
	c->gen = le__get64(in + 8);
	c->seg_index = le__get64(in + 16);
	c->offset = le__get64(in + 24);
	c->next_seq = le__get64(in + 32);
	c->last_ts = le__get64(in + 40);
	c->last_off = le__get64(in + 48);
	c->shard = le__get32(in + 56);
	return c->gen ? 0 : LE_ECORRUPT;
}

int le__ckpt_pick(const unsigned char *file, uint64_t len, le__ckpt *c)
{
	le__ckpt a, b;
	int ok_a = len >= LE_CKPT_SLOT && le__ckpt_decode(file, &a) == 0;
	int ok_b = len >= LE_CKPT_SLOT1_OFF + LE_CKPT_SLOT &&
	           le__ckpt_decode(file + LE_CKPT_SLOT1_OFF, &b) == 0;

	/* A slot is also wrong if it sits where its generation does not. */
	ok_a = ok_a && (a.gen % 2) == 0;
	ok_b = ok_b && (b.gen % 2) == 1;
	if (ok_a && (!ok_b || a.gen > b.gen))
		*c = a;
	else if (ok_b)
		*c = b;
	else
		return LE_ECORRUPT;
	return 0;
}
