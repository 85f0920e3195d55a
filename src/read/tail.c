/*
 * tail.c -- le_tail: one shard's records from a position (segment, byte
 * offset), for a live tail that comes back every second.
 *
 * Unlike the reader, a tail never lists the shard's directory: it opens
 * the segment it is given and, at that segment's end, looks for the next
 * index by name, so what it costs depends on what it reads, not on how
 * many segments are kept.  The position given may be any offset: the
 * first frame that decodes at or after it is where reading starts
 * (le__scan_resync).  A frame the file's end cuts short is being
 * written: the tail stops there and reads it whole next time.  A frame
 * that fails its checks below the file's end is damage (an append moves
 * the size only after its bytes are in): stepped over, not reported; a
 * tail shows what it can.
 *
 *   open(seg, pos) --> resync from pos --> frames ... --> end of data
 *                                                 |
 *         the segment grew since?  read on.  seg + 1 exists?  open it at
 *         0.  Neither: return 0 (call again later, or reopen where
 *         le_tail_position says)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "record/defer.h"
#include "record/fields.h"
#include "base/internal.h"
#include "base/os.h"
#include "store/seg_zst.h"
#include "store/segment.h"

struct le_tail {
	char *dir;           /* DIR/shard-NNN, owned */
	char *path;          /* current segment's path; path_cap bytes */
	size_t path_cap;
	uint32_t shard;
	uint64_t seg;        /* current segment index */
	uint64_t pos;        /* where the next frame is looked for */
	int open;            /* scan valid */
	int synced;          /* scan.off is on a frame (resync done) */
	int seq_known;       /* scan.next_seq is the real sequence */
	le__scan scan;
	le__dcache dc;       /* deferred records: descriptors, their text */
};

/* Open segment t->seg.  One whose header a writer has not yet written
 * (le__scan_open_newest) stays closed, and the tail comes back to it, as
 * to a frame cut short.  @return 0 (t->open says which), -errno,
 * LE_ECORRUPT. */
static int seg_open(le_tail *t)
{
	const char *why;
	uint64_t size;
	int torn = 0;
	int rc = le__seg_path(t->path, t->path_cap, t->dir, t->seg);
	if (rc == 0)
		rc = le__scan_open_newest(&t->scan, t->path, t->shard, &why,
		                          &torn, &size);
	if (rc == LE_ECORRUPT && torn)
		return 0;
	if (rc < 0)
		return rc;
	t->open = 1;
	t->synced = 0;
	return 0;
}

static void seg_close(le_tail *t)
{
	if (t->open)
		le__scan_close(&t->scan);
	t->open = 0;
}

/* Put the scan on the first frame at or after pos.  @return 1 on one,
 * 0 none there yet, -errno. */
static int sync_scan(le_tail *t)
{
	uint64_t from = t->pos > LE_SEG_HDR ? t->pos : LE_SEG_HDR;
	t->scan.off = from - 1; /* resync looks from off + 1 */
	t->scan.next_seq = 0;
	int rc = le__scan_resync(&t->scan);
	if (rc <= 0) {
		t->scan.off = from;
		return rc;
	}
	t->synced = 1;
	t->seq_known = (t->scan.hdr.fields & LE_FIELD_SEQUENCE) != 0;
	if (!t->seq_known && t->scan.off == LE_SEG_HDR) {
		t->scan.next_seq = t->scan.hdr.base_seq;
		t->seq_known = 1;
	}
	return 1;
}

/* Is there a next segment, or its archive? */
static int next_exists(const le_tail *t)
{
	char path[LE_PATH_MAX];
	uint64_t bytes, mtime;
	return le__seg_path(path, sizeof path, t->dir, t->seg + 1) == 0 &&
	       le__seg_stat(path, &bytes, &mtime) >= 0;
}

/* Has the segment grown past what the scan was told at open?  Then the
 * scan reads on (its window dropped: a direct-I/O file's zero padding in
 * it may have become frames since). */
static int grew(le_tail *t)
{
	struct stat st;
	if (le__fstat(t->scan.fd, &st) < 0 ||
	    (uint64_t)st.st_size <= t->scan.file_len)
		return 0;
	t->scan.file_len = (uint64_t)st.st_size;
	t->scan.win_len = 0;
	return 1;
}

int le_tail_open(le_tail **out, const char *dir, unsigned shard,
                 uint64_t segment, uint64_t offset)
{
	char sdir[LE_PATH_MAX];
	le_tail *t;
	int rc;

	le__clearerr();
	if (!out || !dir || shard >= LE_MAX_SHARDS)
		return LE_EINVAL;
	*out = NULL;
	rc = le__shard_dir(sdir, sizeof sdir, dir, shard);
	if (rc < 0)
		return rc;
	t = calloc(1, sizeof *t);
	if (!t)
		return LE_ENOMEM;
	t->dir = strdup(sdir);
	t->path_cap = strlen(sdir) + 32;
	t->path = malloc(t->path_cap);
	t->shard = shard;
	t->seg = segment;
	t->pos = offset;
	if (!t->dir || !t->path) {
		le_tail_close(t);
		return LE_ENOMEM;
	}
	rc = seg_open(t);
	if (rc < 0) {
		le_tail_close(t);
		return rc;
	}
	*out = t;
	return 0;
}

static void to_record(le_tail *t, const le__frame *f, uint64_t off,
                      le_record *rec)
{
	const char *text, *why;
	rec->seq = t->seq_known ? f->seq : 0;
	rec->ts_ns = f->ts;
	rec->level = f->level;
	rec->shard = t->shard;
	rec->flags = f->flags;
	rec->payload = f->payload;
	rec->len = f->len;
	rec->file = t->path;
	rec->offset = off;
	rec->host = NULL; /* a local log's: as le_reader_next's */
	rec->origin_shard = 0;
	rec->origin_seq = 0;
	rec->fields = f->fields;
	rec->fields_len = f->fields_len;
	le__rec_backtrace(rec); /* fields.c: as le_reader_next reports it */
	if (f->flags & LE_REC_DEFERRED) {
		/* the text, or one that says why there is none */
		long n = le__dcache_text(&t->dc, t->scan.fd, t->seg,
		                         t->scan.hdr.version, t->scan.hdr.fields,
		                         off, f->payload, f->len, &text,
		                         &rec->flags, &why);
		rec->payload = text;
		rec->len = n < 0 ? strlen(text) : (size_t)n;
	}
}

int le_tail_next(le_tail *t, le_record *rec)
{
	le__frame f;
	const char *why;

	if (!t || !rec)
		return LE_EINVAL;
	for (;;) {
		if (!t->open) {
			int rc = seg_open(t);
			if (rc < 0 || !t->open)
				return rc == -ENOENT ? 0 : rc;
		}
		int rc = t->synced ? 1 : sync_scan(t);
		if (rc < 0)
			return rc;
		if (rc == 1) {
			uint64_t off = t->scan.off;
			rc = le__scan_next(&t->scan, &f, &why);
			if (rc < 0)
				return rc;
			if (rc == LE_FRAME_OK) {
				t->pos = t->scan.off;
				to_record(t, &f, off, rec);
				return 1;
			}
			t->synced = 0;
			if (rc == LE_FRAME_BAD) {
				/* Bytes below the file's size are written
				 * for good (an append moves the size after
				 * its copy): this is damage, stepped over. */
				t->pos = off + 1;
				continue;
			}
			/* The end, or a frame cut short by the file's end:
			 * come back here, or go on to the next segment. */
			t->pos = off;
		}
		/* The next segment first, then the size: the writer ends a
		 * segment before it makes the next, so a segment seen to
		 * exist means the size read after it is final. */
		int next = next_exists(t);
		if (grew(t))
			continue;
		if (!next)
			return 0;
		seg_close(t);
		t->seg++;
		t->pos = 0;
	}
}

void le_tail_position(const le_tail *t, uint64_t *segment, uint64_t *offset)
{
	if (!t)
		return;
	if (segment)
		*segment = t->seg;
	if (offset)
		*offset = t->pos;
}

void le_tail_close(le_tail *t)
{
	if (!t)
		return;
	seg_close(t);
	le__dcache_free(&t->dc);
	free(t->dir);
	free(t->path);
	free(t);
}
