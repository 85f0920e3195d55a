/*
 * reader_seek.c -- le_reader_seek_time and le_reader_seek_tail, and the
 * positioning of one shard's cursor they and le_reader_seek_cursor share.
 *
 * Seeking puts each cursor at a segment and a frame in it, found without
 * reading what comes before: the segment by bisection over the segment
 * headers (base sequences, or creation times and first timestamps) and the
 * time indexes of sealed segments (index.c); the frame by the index, else
 * from the header; then forward to the exact record.  A hint from an index
 * or a cursor is checked by decoding the frame it names, with its
 * sequence, before it is used.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "store/index.h"
#include "base/os.h"
#include "read/reader.h"
#include "store/seg_zst.h"

/* The writer keeps a record's timestamp within LE_CLOCK_SLIP_NS (1 ms) of
 * its clock reading; the bound on a segment's timestamps from the next
 * segment's header allows twice that. */
#define TS_SLIP_NS 2000000ull

/* What the start of segment segs[k] says. */
struct probe {
	int ok;            /* the header decodes */
	le__seg_hdr h;
	uint64_t len;      /* file size */
	int has_first;     /* its first frame decodes */
	uint64_t first_ts;
};

static void seg_probe(const struct cursor *c, size_t k, struct probe *p)
{
	char path[LE_PATH_MAX];
	unsigned char b[LE_SEG_HDR + 4096];
	uint64_t len;
	int archived;
	le__frame f;
	const char *why;

	memset(p, 0, sizeof *p);
	if (le__seg_path(path, sizeof path, c->dir, c->segs[k]) < 0)
		return;
	/* an archived segment: only its first bytes decompressed */
	ssize_t got = le__seg_head(path, b, sizeof b, &len, &archived);
	if (got >= LE_SEG_HDR &&
	    le__seg_hdr_decode(b, &p->h) == 0 && p->h.index == c->segs[k] &&
	    p->h.shard == c->shard) {
		p->ok = 1;
		p->len = len;
		if (le__frame_decode(b + LE_SEG_HDR, (uint64_t)got - LE_SEG_HDR,
		                     p->h.fields, LE_FRAME_MAX, &f, &why) ==
		            LE_FRAME_OK &&
		    (!(p->h.fields & LE_FIELD_SEQUENCE) ||
		     f.seq == p->h.base_seq)) {
			p->has_first = 1;
			p->first_ts = f.ts;
		}
	}
}

/* The index of segment k, when it has a trustworthy one that covers the
 * whole file.  @return 1 (x filled: free it), 0. */
static int seg_index(const struct cursor *c, const struct probe *p,
                     le__index *x)
{
	if (!p->ok || le__index_load(c->dir, &p->h, p->len, x) < 0)
		return 0;
	if (x->end == p->len)
		return 1;
	le__index_free(x);
	return 0;
}

/* Is every record of segment k older than ts?  From its index, or else
 * from the next segment's header: a segment's records were all stamped
 * before the next segment was created, and a shard's timestamps never go
 * back, so neither that creation time nor the next segment's first
 * timestamp is below any of them (the later of the two is taken, in case
 * one of the assumptions does not hold for a file). */
static int seg_older(const struct cursor *c, size_t k, uint64_t ts)
{
	struct probe p, q;
	le__index x;

	seg_probe(c, k, &p);
	if (seg_index(c, &p, &x)) {
		int older = x.records == 0 || x.ts_max < ts;
		le__index_free(&x);
		return older;
	}
	if (k + 1 >= c->nseg)
		return 0;
	seg_probe(c, k + 1, &q);
	if (!q.ok)
		return 0;
	uint64_t bound = q.h.created_ns;
	if (q.has_first && q.first_ts > bound)
		bound = q.first_ts;
	return bound + TS_SLIP_NS < ts;
}

/* Put c at segs[k], at the frame at off that should carry sequence seq.
 * A hint that does not check (no such frame there) means the segment's
 * first frame; off at the end of the file means the end of the segment.
 * @return 0 or a reader error. */
int le__rd_goto_frame(le_reader *r, struct cursor *c, size_t k, uint64_t off,
                      uint64_t seq)
{
	const char *why;

	le__rd_seg_close(c);
	c->has = c->done = c->idle = 0;
	c->chain = 0;
	c->iseg = k;
	c->next_known = 0;
	int rc = le__rd_seg_open(r, c);
	if (rc < 0 || !c->open || off <= LE_SEG_HDR)
		return rc;
	uint64_t off0 = c->scan.off, seq0 = c->scan.next_seq;
	c->scan.off = off;
	c->scan.next_seq = seq;
	if (off == c->scan.file_len)
		return 0;
	if (off < c->scan.file_len &&
	    le__scan_next(&c->scan, &c->head, &why) == LE_FRAME_OK &&
	    c->head.seq == seq) {
		le__rd_take_head(r, c, off);
		return 0;
	}
	c->scan.off = off0;
	c->scan.next_seq = seq0;
	return 0;
}

/* Drop c's records before the first one keep() accepts (file order). */
int le__rd_skip_until(le_reader *r, struct cursor *c,
                      int (*keep)(const struct cursor *, const void *),
                      const void *arg)
{
	for (;;) {
		int rc = le__rd_cursor_fill(r, c);
		if (rc < 0 || !c->has || keep(c, arg))
			return rc;
		le__rd_consume(c);
	}
}

static int keep_from_ts(const struct cursor *c, const void *arg)
{
	return c->head.ts >= *(const uint64_t *)arg;
}

static int keep_from_seq(const struct cursor *c, const void *arg)
{
	return c->head.seq >= *(const uint64_t *)arg;
}

/*
 * A segment without an index (the active one, or one written before
 * indexes): where to start reading for a key (a timestamp, or a sequence
 * number), without reading the whole file.  Bisect on file offsets: at an
 * offset, the first frame that starts within PROBE_BYTES after it and is
 * followed by PROBE_CHAIN more valid frames, in sequence, is a frame of
 * the segment (CRC-checked, so bytes of a payload that look like a frame
 * will not also chain); its key says which half holds the answer.  The
 * start found is a frame whose key is below the one sought, so reading on
 * from it misses nothing; a probe that finds no frame only narrows the
 * search, it never moves the start.  For timestamps this relies on a
 * shard's timestamps never going back, which the writer guarantees
 * (le__ts_within); a segment too small to matter, or without the CRC,
 * sequence or timestamp field, is read from its header.
 */
#define BISECT_MIN (1u << 20)
#define PROBE_BYTES (64u << 10)
#define PROBE_CHAIN 3

struct frame_at {
	uint64_t off, seq, ts;
};

/* The first chained frame in [at, at + PROBE_BYTES).  @return 1 found. */
static int probe_frame(int fd, const le__seg_hdr *h, uint64_t file_len,
                       uint64_t at, unsigned char *buf, size_t cap,
                       struct frame_at *out)
{
	if (at >= file_len)
		return 0;
	size_t want = file_len - at < cap ? (size_t)(file_len - at) : cap;
	ssize_t got = le__pread_full(fd, buf, want, at);
	if (got <= 0)
		return 0;
	for (size_t i = 0; i < PROBE_BYTES && i + 4 < (size_t)got; i++) {
		le__frame f;
		const char *why;
		size_t o = i;
		uint64_t first_seq = 0, first_ts = 0;
		int k;
		for (k = 0; k <= PROBE_CHAIN; k++) {
			if (le__frame_decode(buf + o, (uint64_t)got - o, h->fields,
			                     LE_FRAME_MAX, &f, &why) != LE_FRAME_OK ||
			    f.shard != h->shard || f.seq < h->base_seq ||
			    (k && f.seq != first_seq + (uint64_t)k))
				break;
			if (k == 0) {
				first_seq = f.seq;
				first_ts = f.ts;
			}
			o += (size_t)f.size + 4;
		}
		/* a chain that ends at the end of the data read counts */
		if (k > PROBE_CHAIN || (k > 0 && o + 4 > (size_t)got)) {
			*out = (struct frame_at){at + i, first_seq, first_ts};
			return 1;
		}
	}
	return 0;
}

/* For a key: 0 timestamp, 1 sequence.  @return 1 and *off, *seq set. */
static int bisect(const struct cursor *c, size_t k, int by_seq,
                  uint64_t key, uint64_t *off, uint64_t *seq)
{
	const uint32_t need = LE_FIELD_CRC | LE_FIELD_SEQUENCE | LE_FIELD_SHARD |
	                      (by_seq ? 0 : LE_FIELD_TIMESTAMP);
	char path[LE_PATH_MAX];
	struct probe p;
	int found = 0;

	seg_probe(c, k, &p);
	if (!p.ok || p.len < BISECT_MIN || (p.h.fields & need) != need ||
	    le__seg_path(path, sizeof path, c->dir, c->segs[k]) < 0)
		return 0;
	int archived;
	const char *why;
	int fd = le__seg_open_read(path, &archived, &why);
	if (fd < 0)
		return 0;
	size_t cap = PROBE_BYTES + 4 * 4096;
	unsigned char *buf = malloc(cap);
	uint64_t lo = LE_SEG_HDR, lo_seq = p.h.base_seq, hi = p.len;
	while (buf && hi - lo > PROBE_BYTES) {
		struct frame_at f;
		uint64_t mid = lo + (hi - lo) / 2;
		if (!probe_frame(fd, &p.h, p.len, mid, buf, cap, &f) ||
		    f.off >= hi) {
			hi = mid;
			continue;
		}
		if ((by_seq ? f.seq : f.ts) < key) {
			lo = f.off;
			lo_seq = f.seq;
			found = 1;
		} else {
			hi = mid;
		}
	}
	free(buf);
	le__close(fd);
	*off = lo;
	*seq = lo_seq;
	return found;
}

/* Put c at its first record with a timestamp at or after ts. */
int le__rd_shard_seek_time(le_reader *r, struct cursor *c, uint64_t ts)
{
	size_t lo = 0, hi = c->nseg;
	uint64_t off = LE_SEG_HDR, seq = 0;
	struct probe p;
	le__index x;

	if (c->nseg == 0)
		return le__rd_goto_frame(r, c, 0, 0, 0);
	/* seg_older holds for a prefix of the segments: bisect for the
	 * first segment that may hold a record at or after ts. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (seg_older(c, mid, ts))
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == c->nseg)
		lo = c->nseg - 1;
	seg_probe(c, lo, &p);
	if (seg_index(c, &p, &x)) {
		le__index_find_time(&x, ts, &off, &seq);
		le__index_free(&x);
	} else {
		bisect(c, lo, 0, ts, &off, &seq);
	}
	int rc = le__rd_goto_frame(r, c, lo, off, seq);
	return rc < 0 ? rc : le__rd_skip_until(r, c, keep_from_ts, &ts);
}

/* Put c at its record of sequence seq, or the first after it; *skipped
 * gets how many records before the oldest one left were asked for. */
int le__rd_shard_seek_seq(le_reader *r, struct cursor *c, uint64_t seq,
                          uint64_t *skipped)
{
	size_t lo = 0, hi = c->nseg;
	uint64_t off = LE_SEG_HDR, at = 0;
	struct probe p;
	le__index x;

	*skipped = 0;
	if (c->nseg == 0)
		return le__rd_goto_frame(r, c, 0, 0, 0);
	/* The last segment whose base sequence is at or below seq (one
	 * whose header does not read counts as past it). */
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		seg_probe(c, mid, &p);
		if (p.ok && p.h.base_seq <= seq)
			lo = mid;
		else
			hi = mid;
	}
	seg_probe(c, lo, &p);
	if (lo == 0 && p.ok && p.h.base_seq > seq)
		*skipped = p.h.base_seq - seq;
	if (p.ok && p.h.base_seq <= seq && seg_index(c, &p, &x)) {
		if (seq < x.base_seq + x.records)
			le__index_find_seq(&x, seq, &off, &at);
		else
			off = x.end, at = x.base_seq + x.records;
		le__index_free(&x);
	} else if (p.ok && p.h.base_seq <= seq) {
		bisect(c, lo, 1, seq, &off, &at);
	}
	int rc = le__rd_goto_frame(r, c, lo, off, at);
	return rc < 0 ? rc : le__rd_skip_until(r, c, keep_from_seq, &seq);
}

/* Start over: every cursor will be positioned anew. */
int le__rd_seek_begin(le_reader *r)
{
	if (!r)
		return LE_EINVAL;
	if (r->err)
		return r->err;
	r->last = -1;
	r->skip = 0;
	r->heap_ok = 0;
	r->positioned = 1;
	r->ret.valid = 0;
	return 0;
}

int le__rd_seek_end(le_reader *r, int rc)
{
	if (rc < 0)
		r->err = rc;
	return rc;
}

int le_reader_seek_time(le_reader *r, uint64_t ts_ns)
{
	int rc = le__rd_seek_begin(r);
	for (size_t i = 0; rc == 0 && i < r->ncur; i++)
		rc = le__rd_shard_seek_time(r, &r->cur[i], ts_ns);
	return r ? le__rd_seek_end(r, rc) : rc;
}

/* The sequence after shard c's last record now, and the first one.  The
 * last segment is read from its checkpoint when that names one of its
 * frames (the end of a big active segment without reading all of it).
 * @return 0 (*end = *first = 0 for an empty shard) or -errno. */
static int shard_range(const struct cursor *c, uint64_t *first,
                       uint64_t *end)
{
	char path[LE_PATH_MAX];
	struct probe p;
	le__scan s;
	le__frame f;
	le__ckpt ck;
	const char *why;

	*first = *end = 0;
	if (c->nseg == 0)
		return 0;
	seg_probe(c, 0, &p);
	*first = p.ok ? p.h.base_seq : 0;
	size_t k = c->nseg - 1;
	int rc = le__seg_path(path, sizeof path, c->dir, c->segs[k]);
	if (rc == 0)
		rc = le__scan_open(&s, path, c->shard, &why);
	if (rc < 0)
		return rc == -ENOENT || rc == LE_ECORRUPT || rc == LE_EVERSION
		               ? 0 : rc;
	if (le__ckpt_read(c->dir, &ck) == 0 && ck.seg_index == c->segs[k] &&
	    ck.last_off >= LE_SEG_HDR && ck.last_off < s.file_len &&
	    ck.next_seq > s.hdr.base_seq) {
		uint64_t off0 = s.off, seq0 = s.next_seq;
		s.off = ck.last_off;
		s.next_seq = ck.next_seq - 1;
		if (le__scan_next(&s, &f, &why) != LE_FRAME_OK) {
			s.off = off0;
			s.next_seq = seq0;
		}
	}
	while ((rc = le__scan_next(&s, &f, &why)) == LE_FRAME_OK)
		;
	*end = s.next_seq;
	le__scan_close(&s);
	return rc < 0 ? rc : 0;
}

int le_reader_seek_tail(le_reader *r, uint64_t n)
{
	uint64_t total = 0, skipped;
	int rc = le__rd_seek_begin(r);

	for (size_t i = 0; rc == 0 && i < r->ncur; i++) {
		struct cursor *c = &r->cur[i];
		uint64_t first, end;
		rc = shard_range(c, &first, &end);
		if (rc < 0)
			break;
		uint64_t from = end > n ? end - n : 0;
		if (from < first)
			from = first;
		rc = le__rd_shard_seek_seq(r, c, from, &skipped);
		total += end > from ? end - from : 0;
	}
	/* Each shard now holds at most its last n: of their merge, the
	 * last n are the log's last n. */
	if (rc == 0 && total > n)
		r->skip = total - n;
	return r ? le__rd_seek_end(r, rc) : rc;
}
