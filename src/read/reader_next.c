/*
 * reader_next.c -- le_reader_next: the records of every shard merged by
 * timestamp, then shard.
 *
 * Following, records of different shards are merged as they arrive: the
 * oldest head waits while some shard has none and may still write an older
 * record (its queue is not empty: settle()), for at most the reorder window
 * after its timestamp or after it was read, whichever comes first.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "base/crc32c.h"
#include "base/os.h"
#include "queue/queue.h"
#include "read/reader.h"
#include "record/fields.h"

/* Merge order: timestamp, then shard.  Within a shard only the head
 * competes, so file order is kept whatever the timestamps say. */
static int before(const struct cursor *a, const struct cursor *b)
{
	if (a->head.ts != b->head.ts)
		return a->head.ts < b->head.ts;
	return a->shard < b->shard;
}

static void to_record(const struct cursor *c, le_record *rec)
{
	rec->seq = c->head.seq; /* the scanner derives it when not stored */
	rec->ts_ns = c->head.ts;
	rec->level = c->head.level;
	rec->shard = c->shard;
	rec->flags = c->head.flags;
	rec->payload = c->head.payload;
	rec->len = c->head.len;
	rec->file = c->path;
	rec->offset = c->head_off;
	rec->host = c->host;
	rec->origin_shard = c->host ? c->seg_shard : 0;
	rec->origin_seq = c->host ? c->head.seq : 0;
	rec->fields = c->head.fields;
	rec->fields_len = c->head.fields_len;
	le__rec_backtrace(rec); /* fields.c */
}

/*
 * A deferred record's text in place of its arguments (docs/FORMAT.md,
 * "Deferred records"), made in the cursor's buffer: valid, as the payload
 * is, until the next call.  One that does not decode is reported as
 * damage and read as a text that says why.  @return 0, or -1 when it did
 * not decode.
 */
static int deferred_text(le_reader *r, struct cursor *c, le_record *rec)
{
	const char *text, *why;
	long n = le__dcache_text(&c->dc, c->scan.fd, c->scan.hdr.index,
	                         c->scan.hdr.version, c->scan.hdr.fields,
	                         c->head_off, rec->payload, rec->len, &text,
	                         &rec->flags, &why);
	int lost = n < 0;
	if (lost) {
		snprintf(r->msg, sizeof r->msg,
		         "undecodable deferred record: %s", why);
		r->st.problems++;
		r->kind = LE_PROBLEM_DAMAGE;
		if (r->opts.on_problem)
			r->opts.on_problem(r->opts.arg, c->path, c->head_off,
			                   r->msg);
		r->kind = 0;
		n = (long)strlen(text);
	}
	rec->payload = text;
	rec->len = (size_t)n;
	return lost ? -1 : 0;
}

/* Following, with some shard at the end of what it has written: may the
 * oldest head go out, or could that shard still write an older record?
 * It goes once the reorder window has passed since its timestamp (clocks
 * permitting) or since it was read. */
static int due(le_reader *r, const struct cursor *best)
{
	uint64_t mono = le__mono_ns(), real = le__now_ns();
	uint64_t w = r->reorder_ns;

	if (best->seen_mono + w <= mono || best->head.ts + w <= real)
		return 1;
	uint64_t by_mono = best->seen_mono + w;
	uint64_t by_real = best->head.ts + w > real
	                           ? mono + (best->head.ts + w - real)
	                           : mono;
	r->hold_until = by_mono < by_real ? by_mono : by_real;
	return 0;
}

/*
 * Following, shard c has nothing new: can it still write a record older
 * than ts?  Not once its QUEUE is empty (head == tail: every record
 * claimed is in the file, for the writer releases a slot only after its
 * write) and the files have been read to their end after that: a record
 * claimed later is stamped later (a producer stamps its slot after
 * claiming it), at worst by the clock's slip.  Then c->quiet_until says
 * so, and the oldest record goes out at once instead of after the reorder
 * window.  Without a queue file (mapped_queue 0) nothing is known.
 * @return 1 c has a head now (merge again), 0 otherwise.
 */
#define QUIET_SLIP_NS 2000000ull

static int queue_empty(const struct cursor *c)
{
	char path[LE_PATH_MAX];
	unsigned char h[LE_QUEUE_TAIL_OFF + 8];
	int n = snprintf(path, sizeof path, "%s/QUEUE", c->dir);
	if (n < 0 || (size_t)n >= sizeof path)
		return 0;
	/* opened each time: a new engine makes the file anew */
	int fd = le__open_in(path, LE_IN_SHARD, O_RDONLY, 0);
	if (fd < 0)
		return 0;
	ssize_t got = le__pread_full(fd, h, sizeof h, 0);
	le__close(fd);
	return got == (ssize_t)sizeof h && !memcmp(h, LE_QUEUE_MAGIC, 8) &&
	       le__get32(h + 60) == le__crc_mask(le__crc32c_extend(0, h, 60)) &&
	       le__get32(h + 32) == c->shard &&
	       le__get64(h + LE_QUEUE_HEAD_OFF) ==
	               le__get64(h + LE_QUEUE_TAIL_OFF);
}


static int settle(le_reader *r, struct cursor *c, uint64_t ts)
{
	if (ts < c->quiet_until)
		return 0;
	uint64_t t = le__now_ns();
	if (!queue_empty(c))
		return 0;
	int rc = le__rd_refresh(c, 1);
	if (rc == 0)
		rc = le__rd_cursor_fill(r, c);
	if (rc < 0) {
		r->err = rc;
		return 0;
	}
	if (c->has)
		return 1;
	if (t > QUIET_SLIP_NS)
		c->quiet_until = t - QUIET_SLIP_NS;
	return 0;
}

/* Hand out best's head as rec; best stays where it is until the next
 * call.  ABSOLUTE makes any damage an error, a deferred record whose text
 * is lost too (sticky, as reader_scan.c's).  @return 1, or LE_ECORRUPT. */
static int give(le_reader *r, struct cursor *best, le_record *rec)
{
	to_record(best, rec);
	if ((rec->flags & LE_REC_DEFERRED) && deferred_text(r, best, rec) < 0 &&
	    r->opts.mode == LE_RECOVER_ABSOLUTE)
		return r->err = LE_ECORRUPT;
	r->last = best - r->cur;
	r->ret.valid = 1;
	r->ret.shard = best->shard;
	r->ret.seq = best->head.seq;
	r->ret.ts = best->head.ts;
	r->ret.seg = best->scan.hdr.index;
	r->ret.off = best->head_off;
	r->st.records++;
	return 1;
}

/*
 * Not following, a cursor's head changes only when it is consumed (the
 * one returned last, or skipped): every other one has its head, or is
 * done, or idle, until a seek.  So the cursors with a head wait in a
 * binary heap ordered by before(), and a record costs one cursor's fill
 * and O(log shards) comparisons, not a look at every shard directory (a
 * collector's store has thousands).  A seek (le__rd_seek_begin) drops the
 * heap; the next call builds it again from every cursor, in their order,
 * as the merge below does.
 */
static void heap_swap(le_reader *r, size_t a, size_t b)
{
	uint32_t t = r->heap[a];
	r->heap[a] = r->heap[b];
	r->heap[b] = t;
}

static int heap_less(const le_reader *r, size_t a, size_t b)
{
	return before(&r->cur[r->heap[a]], &r->cur[r->heap[b]]);
}

static void heap_down(le_reader *r, size_t i)
{
	for (;;) {
		size_t m = i, k = 2 * i + 1;
		if (k < r->nheap && heap_less(r, k, m))
			m = k;
		if (k + 1 < r->nheap && heap_less(r, k + 1, m))
			m = k + 1;
		if (m == i)
			return;
		heap_swap(r, i, m);
		i = m;
	}
}

/* Fill cursor ci and, when it has a head, put it in the heap (which has
 * room for every cursor).  @return 0 or a reader error. */
static int heap_add(le_reader *r, size_t ci)
{
	int rc = le__rd_cursor_fill(r, &r->cur[ci]);
	if (rc < 0 || !r->cur[ci].has)
		return rc;
	size_t i = r->nheap++;
	r->heap[i] = (uint32_t)ci;
	while (i > 0 && heap_less(r, i, (i - 1) / 2)) {
		heap_swap(r, i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
	return 0;
}

static int heap_build(le_reader *r)
{
	uint32_t *h = realloc(r->heap, (r->ncur ? r->ncur : 1) * sizeof *h);
	int rc = 0;

	if (!h)
		return LE_ENOMEM;
	r->heap = h;
	r->nheap = 0;
	for (size_t i = 0; rc == 0 && i < r->ncur; i++)
		rc = heap_add(r, i);
	r->heap_ok = rc == 0;
	return rc;
}

/* reader_next, not following; `consumed` is the cursor whose head the
 * caller gave back (out of the heap), -1 none. */
static int next_heap(le_reader *r, le_record *rec, long consumed)
{
	int rc = 0;

	if (!r->heap_ok)
		rc = heap_build(r);
	else if (consumed >= 0)
		rc = heap_add(r, (size_t)consumed);
	while (rc == 0 && r->nheap) {
		size_t ci = r->heap[0];
		r->heap[0] = r->heap[--r->nheap];
		heap_down(r, 0);
		if (!r->skip)
			return give(r, &r->cur[ci], rec);
		r->skip--;
		le__rd_consume(&r->cur[ci]);
		rc = heap_add(r, ci);
	}
	if (rc < 0)
		r->err = rc;
	return rc;
}

/* The next record into a full-size le_record: le_reader_next_sized
 * copies it out at the caller's size (abi.c says why sizes differ). */
static int reader_next(le_reader *r, le_record *rec)
{
	long consumed = r ? r->last : -1;

	if (!r || !rec)
		return LE_EINVAL;
	if (r->err)
		return r->err;
	if (r->last >= 0) {
		/* the caller is done with it now */
		le__rd_consume(&r->cur[r->last]);
		r->last = -1;
	}
	r->positioned = 1;
	r->hold_until = 0;
	if (!r->follow)
		return next_heap(r, rec, consumed);
	for (;;) {
		struct cursor *best = NULL;
		int waiting = 0;
		for (size_t i = 0; i < r->ncur; i++) {
			struct cursor *c = &r->cur[i];
			int rc = le__rd_cursor_fill(r, c);
			if (rc < 0) {
				r->err = rc;
				return rc;
			}
			if (c->has && (!best || before(c, best)))
				best = c;
			else if (!c->has && c->idle)
				waiting = 1;
		}
		if (!best)
			return 0;
		if (r->follow && waiting && r->reorder_ns) {
			int again = 0, blocked = 0;
			for (size_t i = 0; i < r->ncur; i++) {
				struct cursor *c = &r->cur[i];
				if (c->has || !c->idle)
					continue;
				again |= settle(r, c, best->head.ts);
				if (r->err)
					return r->err;
				if (!c->has && best->head.ts >= c->quiet_until)
					blocked = 1;
			}
			if (again)
				continue; /* a shard found more: merge again */
			if (blocked && !due(r, best))
				return 0;
		}
		if (r->skip) {
			r->skip--;
			le__rd_consume(best);
			continue;
		}
		return give(r, best, rec);
	}
}

int le_reader_stats_get(const le_reader *r, le_reader_stats *out)
{
	if (!r || !out)
		return LE_EINVAL;
	*out = r->st;
	return 0;
}

/* The smallest le_record any release had: up to offset, before fields. */
#define RECORD_MIN_SIZE (offsetof(le_record, offset) + sizeof(uint64_t))

int le_reader_next_sized(le_reader *r, le_record *rec, size_t size)
{
	le_record full;

	if (!rec || size < RECORD_MIN_SIZE)
		return LE_EINVAL;
	if (size == sizeof full) /* this release's callers: no copy */
		return reader_next(r, rec);
	int rc = reader_next(r, &full);
	if (rc == 1)
		le__copy_sized(rec, size, &full, sizeof full);
	return rc;
}
