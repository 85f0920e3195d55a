/*
 * segfile.h -- build segment files by hand for reader and CLI tests, with
 * the codec's own encoders, so a test can damage any byte it likes.
 *
 *   t_seg s;
 *   t_seg_begin(&s, LE_FIELD_ALL, 0, 1, 1);     fields, shard, index, base
 *   size_t off = t_seg_add(&s, LE_INFO, ts, "hello");   frame offset
 *   t_seg_save(&s, dir);     DIR/shard-000/0000000000000001.seg
 *   t_seg_free(&s);
 */
#ifndef LE_TEST_SEGFILE_H
#define LE_TEST_SEGFILE_H

#include "harness.h"

#include "record/format.h"

typedef struct t_seg {
	unsigned char *buf; /* header + frames */
	size_t len, cap;
	uint32_t fields, shard;
	uint64_t index;
	uint64_t next_seq;  /* sequence of the next frame added */
} t_seg;

static inline void t_seg_reserve(t_seg *s, size_t more)
{
	if (s->len + more <= s->cap)
		return;
	size_t nc = s->cap ? s->cap : 4096;
	while (nc < s->len + more)
		nc *= 2;
	s->buf = realloc(s->buf, nc);
	if (!s->buf)
		_exit(3);
	s->cap = nc;
}

static inline void t_seg_begin(t_seg *s, uint32_t fields, uint32_t shard,
                               uint64_t index, uint64_t base_seq)
{
	le__seg_hdr h = {.version = LE_SEG_VERSION, .fields = fields,
	                 .shard = shard, .index = index,
	                 .base_seq = base_seq, .created_ns = 1};
	memset(s, 0, sizeof *s);
	s->fields = fields;
	s->shard = shard;
	s->index = index;
	s->next_seq = base_seq;
	t_seg_reserve(s, LE_SEG_HDR);
	le__seg_hdr_encode(s->buf, &h);
	s->len = LE_SEG_HDR;
}

/* Append one frame; @return its offset in the file. */
static inline size_t t_seg_add_ex(t_seg *s, uint32_t flags, int level,
                                  uint64_t ts, const void *p, size_t len)
{
	size_t off = s->len;
	t_seg_reserve(s, le__frame_fixed(s->fields) + len);
	s->len += le__frame_encode(s->buf + off, s->fields, flags, level,
	                           s->shard, s->next_seq++, ts, p,
	                           (uint32_t)len);
	return off;
}

static inline size_t t_seg_add(t_seg *s, int level, uint64_t ts,
                               const char *msg)
{
	return t_seg_add_ex(s, 0, level, ts, msg, strlen(msg));
}

/* Append raw bytes (garbage, zeros). */
static inline void t_seg_raw(t_seg *s, const void *p, size_t len)
{
	t_seg_reserve(s, len);
	memcpy(s->buf + s->len, p, len);
	s->len += len;
}

static inline void t_seg_path(char *buf, size_t cap, const char *dir,
                              uint32_t shard, uint64_t index)
{
	snprintf(buf, cap, "%s/shard-%03u/%016" PRIx64 ".seg", dir, shard,
	         index);
}

/* Write the first len bytes of s to its file (len = s->len normally). */
static inline void t_seg_save_len(const t_seg *s, const char *dir, size_t len)
{
	char path[512];
	snprintf(path, sizeof path, "%s/shard-%03u", dir, s->shard);
	mkdir(path, 0755);
	t_seg_path(path, sizeof path, dir, s->shard, s->index);
	if (t_spit(path, s->buf, len) != 0) {
		perror(path);
		_exit(3);
	}
}

static inline void t_seg_save(const t_seg *s, const char *dir)
{
	t_seg_save_len(s, dir, s->len);
}

static inline void t_seg_free(t_seg *s)
{
	free(s->buf);
	memset(s, 0, sizeof *s);
}

/* Deterministic bytes (xorshift64), so a failure reproduces. */
static inline void t_fill_random(unsigned char *p, size_t len, uint64_t seed)
{
	uint64_t x = seed | 1;
	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (unsigned char)(x >> 24);
	}
}

#endif
