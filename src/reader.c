/*
 * reader.c -- the reader API: the records of a log directory, oldest first,
 * merged across shards by timestamp.
 *
 * One cursor per shard walks that shard's segments in index order through
 * the validating scanner of segment.c.  A cursor holds at most one decoded
 * frame, its "head"; le_reader_next fills every empty head, returns the
 * smallest (timestamp, then shard), and leaves that cursor where it is until
 * the next call.  Because a cursor only moves when its head has been
 * consumed, the payload and file name handed out point straight into the
 * scanner's window and path buffer and stay valid until the next call with
 * no copy.
 *
 * A cursor, between heads:
 *
 *           +-----------+  le__scan_open ok, chain checked
 *   start ->| no segment|-------------------------------+
 *           +-----------+                               v
 *             ^   | no segments left          +--------------+
 *             |   v                           | segment open |--> head
 *             |  done  <-- stop (damage) -----+--------------+
 *             |                                  |  end of data / damage
 *             +----------------------------------+  skipped to its end
 *
 * What damage does depends on the recovery mode; every case is reported to
 * on_problem first:
 *
 *                    TOLERATE_TAIL    ABSOLUTE     POINT_IN_TIME   SKIP
 *   torn tail (*)    shard ends       LE_ECORRUPT  shard ends      shard ends
 *   other damage     LE_ECORRUPT      LE_ECORRUPT  shard ends      resync
 *   zero-filled tail segment ends     LE_ECORRUPT  segment ends    segment ends
 *   sequence gap     go on            LE_ECORRUPT  shard ends      go on
 *   bad seg header   LE_ECORRUPT      LE_ECORRUPT  shard ends      skip file
 *
 *   (*) damage in the last segment of a shard with no valid frame after it,
 *       or a last segment whose header was never completely written.
 *
 * An error returned by le_reader_next is sticky: every later call returns
 * it again, since the cursor that failed has no defined position.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"
#include "os.h"
#include "segment.h"

/* Room for "/" + 16 hex digits + ".seg" + NUL after a shard directory. */
#define SEG_NAME_ROOM 32

struct cursor {
	uint32_t shard;      /* from the directory name */
	char *dir;           /* DIR/shard-NNN, owned */
	char *path;          /* current segment path, owned; path_cap bytes */
	size_t path_cap;
	uint64_t *segs;      /* segment indexes listed at open, ascending */
	size_t nseg;
	size_t iseg;         /* index into segs of the open / next segment */
	le__scan scan;       /* valid while open */
	int open;
	le__frame head;      /* decoded frame not yet returned, when has */
	uint64_t head_off;   /* its offset in path */
	int has;
	int done;            /* no more frames from this shard */
	int chain;           /* 1: the next segment must start at expect */
	uint64_t expect;     /* sequence that follows the last segment read */
};

struct le_reader {
	le_reader_opts opts;
	struct cursor *cur;  /* ncur cursors, ascending shard order */
	size_t ncur;
	struct cursor *last; /* whose head the caller holds (consumed next) */
	int err;             /* sticky error, 0 if none */
	le_reader_stats st;
	char msg[512];       /* text of the problem being reported */
};

void le_reader_opts_init(le_reader_opts *o)
{
	memset(o, 0, sizeof *o);
	o->mode = LE_RECOVER_TOLERATE_TAIL;
	o->shard = -1;
}

/* ---- problems ---- */

/* Count a problem and hand it to the caller's callback. */
static void problem(le_reader *r, const struct cursor *c, uint64_t off,
                    const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 4, 5)))
#endif
	;

static void problem(le_reader *r, const struct cursor *c, uint64_t off,
                    const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->msg, sizeof r->msg, fmt, ap);
	va_end(ap);
	r->st.problems++;
	if (r->opts.on_problem)
		r->opts.on_problem(r->opts.arg, c->path, off, r->msg);
}

/* ---- cursor movement ---- */

static void seg_close(struct cursor *c)
{
	if (c->open)
		le__scan_close(&c->scan);
	c->open = 0;
}

/* Leave the open segment for the next one.  chain: whether the next
 * segment's base sequence can be checked against this one's end (not after
 * skipped bytes, whose frames nobody counted). */
static void seg_done(struct cursor *c, int chain)
{
	c->expect = c->scan.next_seq;
	c->chain = chain;
	seg_close(c);
	c->iseg++;
}

static void shard_stop(struct cursor *c)
{
	seg_close(c);
	c->done = 1;
}

static int is_last_seg(const struct cursor *c)
{
	return c->iseg + 1 == c->nseg;
}

/* @return 1 when the len bytes at off in fd are all zero (or missing: the
 * file shrank), 0 when one is not, -errno. */
static int all_zero(int fd, uint64_t off, uint64_t len)
{
	unsigned char buf[4096];

	while (len > 0) {
		size_t want = len < sizeof buf ? (size_t)len : sizeof buf;
		ssize_t got = le__pread_full(fd, buf, want, off);
		if (got <= 0)
			return got < 0 ? (int)got : 1;
		for (ssize_t i = 0; i < got; i++)
			if (buf[i])
				return 0;
		off += (uint64_t)got;
		len -= (uint64_t)got;
	}
	return 1;
}

/*
 * Was this segment's header never completely written?  True when the file
 * is shorter than a header, or the header does not decode and only zeros
 * follow it: what a crash between creating a segment (maybe preallocated)
 * and its first sync leaves, with no frame lost.  A header that decodes
 * (right format, wrong shard or index) was written on purpose somewhere
 * else, so it is never torn.  @return 1, 0, -errno; *size the file size.
 */
static int torn_header(const char *path, uint64_t *size)
{
	unsigned char h[LE_SEG_HDR];
	le__seg_hdr hdr;
	struct stat st;
	ssize_t got;
	int rc, fd = le__open(path, O_RDONLY, 0);

	*size = 0;
	if (fd < 0)
		return fd;
	rc = fstat(fd, &st) < 0 ? -errno : 0;
	if (rc < 0)
		goto out;
	*size = (uint64_t)st.st_size;
	got = le__pread_full(fd, h, sizeof h, 0);
	if (got < 0)
		rc = (int)got;
	else if (got < LE_SEG_HDR)
		rc = 1;
	else if (le__seg_hdr_decode(h, &hdr) == LE_ECORRUPT)
		rc = all_zero(fd, LE_SEG_HDR, (uint64_t)st.st_size - LE_SEG_HDR);
out:
	le__close(fd);
	return rc;
}

/* The next segment's header failed to decode (why says how). */
static int header_damage(le_reader *r, struct cursor *c, const char *why)
{
	uint64_t size;
	int mode = r->opts.mode;
	int torn = is_last_seg(c) ? torn_header(c->path, &size) : 0;

	if (torn < 0)
		return torn;
	if (torn) {
		problem(r, c, 0, "torn tail: %s (segment never completed, "
		        "%" PRIu64 " bytes)", why, size);
		if (mode == LE_RECOVER_ABSOLUTE)
			return LE_ECORRUPT;
		shard_stop(c);
		return 0;
	}
	problem(r, c, 0, "%s", why);
	if (mode == LE_RECOVER_ABSOLUTE || mode == LE_RECOVER_TOLERATE_TAIL)
		return LE_ECORRUPT;
	if (mode == LE_RECOVER_POINT_IN_TIME) {
		shard_stop(c);
		return 0;
	}
	struct stat st;
	if (stat(c->path, &st) == 0)
		r->st.skipped_bytes += (uint64_t)st.st_size;
	c->iseg++;
	c->chain = 0;
	return 0;
}

/* A segment just opened: does it continue the one before? */
static int check_chain(le_reader *r, struct cursor *c)
{
	uint64_t base = c->scan.hdr.base_seq;

	if (!c->chain || base == c->expect)
		return 0;
	problem(r, c, 0, "sequence %s: expected %" PRIu64
	        ", segment starts at %" PRIu64,
	        base > c->expect ? "gap" : "overlap", c->expect, base);
	if (r->opts.mode == LE_RECOVER_ABSOLUTE)
		return LE_ECORRUPT;
	if (r->opts.mode == LE_RECOVER_POINT_IN_TIME)
		shard_stop(c);
	return 0;
}

/* Open segs[iseg], or find the shard has no more. */
static int seg_open(le_reader *r, struct cursor *c)
{
	const char *why;
	int rc;

	if (c->iseg >= c->nseg) {
		c->done = 1;
		return 0;
	}
	rc = le__seg_path(c->path, c->path_cap, c->dir, c->segs[c->iseg]);
	if (rc < 0)
		return rc;
	rc = le__scan_open(&c->scan, c->path, c->shard, &why);
	if (rc == -ENOENT) {
		/* Deleted by retention since we listed it: not damage.  A
		 * hole this leaves shows up as a gap at the next segment. */
		c->iseg++;
		return 0;
	}
	if (rc == 0 || rc == LE_ECORRUPT || rc == LE_EVERSION)
		r->st.segments++;
	if (rc == LE_ECORRUPT)
		return header_damage(r, c, why);
	if (rc == LE_EVERSION)
		problem(r, c, 0, "%s", why);
	if (rc < 0)
		return rc;
	c->open = 1;
	if (c->scan.hdr.index != c->segs[c->iseg]) {
		seg_close(c);
		return header_damage(r, c, "segment header index does not "
		                           "match the file name");
	}
	return check_chain(r, c);
}

/*
 * The frame at scan.off is damaged (why).  Looking ahead for a valid frame
 * tells a torn tail -- nothing valid after it in the shard's last segment,
 * what a crash mid-append leaves -- from damage that lost data.
 */
static int on_damage(le_reader *r, struct cursor *c, const char *why)
{
	uint64_t off = c->scan.off, len = c->scan.file_len;
	int mode = r->opts.mode, found;

	if (mode == LE_RECOVER_ABSOLUTE || mode == LE_RECOVER_POINT_IN_TIME) {
		/* No look-ahead: the outcome is the same either way. */
		problem(r, c, off, "%s", why);
		if (mode == LE_RECOVER_ABSOLUTE)
			return LE_ECORRUPT;
		shard_stop(c);
		return 0;
	}
	found = le__scan_resync(&c->scan);
	if (found < 0)
		return found;
	if (!found && is_last_seg(c)) {
		problem(r, c, off, "torn tail: %s (%" PRIu64 " bytes)", why,
		        len - off);
		if (mode == LE_RECOVER_SKIP)
			r->st.skipped_bytes += len - off;
		shard_stop(c);
		return 0;
	}
	if (mode == LE_RECOVER_TOLERATE_TAIL) {
		problem(r, c, off, "%s (not a torn tail: %s)", why,
		        found ? "valid frames follow" : "later segments follow");
		return LE_ECORRUPT;
	}
	uint64_t end = found ? c->scan.off : len;
	problem(r, c, off, "%s; skipped %" PRIu64 " bytes", why, end - off);
	r->st.skipped_bytes += end - off;
	if (!found)
		seg_done(c, 0);
	return 0;
}

/*
 * No frame starts at scan.off: a zero size word or the end of the file.
 * Zeros to the end of the file are what preallocation or O_DIRECT padding
 * leave after a crash; they hold no frames, so the segment ends there and
 * the sequence chain carries on.  Zeros followed by anything else are not
 * padding but damage.
 */
static int on_end(le_reader *r, struct cursor *c)
{
	uint64_t off = c->scan.off, len = c->scan.file_len;
	int rc;

	if (off >= len) {
		seg_done(c, 1);
		return 0;
	}
	rc = all_zero(c->scan.fd, off, len - off);
	if (rc < 0)
		return rc;
	if (rc == 0)
		return on_damage(r, c, "zero size word before non-zero bytes");
	problem(r, c, off, "zero-filled tail at offset %" PRIu64
	        " (%" PRIu64 " bytes)", off, len - off);
	if (r->opts.mode == LE_RECOVER_ABSOLUTE)
		return LE_ECORRUPT;
	seg_done(c, 1);
	return 0;
}

/* Decode the next frame of the open segment into the head, or deal with
 * what stands there instead. */
static int seg_step(le_reader *r, struct cursor *c)
{
	const char *why;
	uint64_t off = c->scan.off;
	int rc = le__scan_next(&c->scan, &c->head, &why);

	if (rc == LE_FRAME_OK) {
		c->head_off = off;
		c->has = 1;
		r->st.bytes += (uint64_t)c->head.size + 4;
		return 0;
	}
	if (rc < 0)
		return rc;
	/* Fewer than 4 bytes left: no size word fits; zeros or a torn one. */
	if (rc == LE_FRAME_END ||
	    (rc == LE_FRAME_SHORT && c->scan.file_len - off < 4))
		return on_end(r, c);
	return on_damage(r, c, why);
}

/* Give c a head unless its shard has no more frames. */
static int cursor_fill(le_reader *r, struct cursor *c)
{
	while (!c->has && !c->done) {
		int rc = c->open ? seg_step(r, c) : seg_open(r, c);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* ---- open / close ---- */

/* Refuse at open a directory a newer library wrote, rather than after
 * returning part of it: look at the first segment's header only. */
static int check_version(struct cursor *c)
{
	unsigned char h[LE_SEG_HDR];
	le__seg_hdr hdr;
	ssize_t got = 0;

	if (c->nseg == 0 ||
	    le__seg_path(c->path, c->path_cap, c->dir, c->segs[0]) < 0)
		return 0;
	int fd = le__open(c->path, O_RDONLY, 0);
	if (fd >= 0) {
		got = le__pread_full(fd, h, sizeof h, 0);
		le__close(fd);
	}
	if (got < LE_SEG_HDR || le__seg_hdr_decode(h, &hdr) != LE_EVERSION)
		return 0; /* damage and I/O errors surface in le_reader_next */
	le__seterr("%s: format version %" PRIu32 " (this library reads %d)",
	           c->path, hdr.version, LE_SEG_VERSION);
	return LE_EVERSION;
}

static int cursor_init(struct cursor *c, const char *dir, uint32_t shard)
{
	char sdir[LE_PATH_MAX];
	int rc = le__shard_dir(sdir, sizeof sdir, dir, shard);

	c->shard = shard;
	if (rc < 0)
		return rc;
	c->dir = strdup(sdir);
	c->path_cap = strlen(sdir) + SEG_NAME_ROOM;
	c->path = calloc(1, c->path_cap);
	if (!c->dir || !c->path)
		return LE_ENOMEM;
	rc = le__seg_list(c->dir, &c->segs, &c->nseg);
	if (rc < 0) {
		le__seterr("%s: %s", c->dir, le_strerror(rc));
		return rc;
	}
	return check_version(c);
}

/* Keep only opts->shard in the list; -ENOENT when it is not there. */
static int pick_shard(uint32_t *shards, size_t *n, int want)
{
	for (size_t i = 0; i < *n; i++) {
		if (shards[i] == (uint32_t)want) {
			shards[0] = shards[i];
			*n = 1;
			return 0;
		}
	}
	return -ENOENT;
}

static int check_opts(const le_reader_opts *o)
{
	if (o->mode < LE_RECOVER_TOLERATE_TAIL || o->mode > LE_RECOVER_SKIP) {
		le__seterr("mode: %d is not an enum le_recovery value",
		           o->mode);
		return LE_EINVAL;
	}
	if (o->shard < -1 || o->shard >= LE_MAX_SHARDS) {
		le__seterr("shard: must be -1 or 0..%d", LE_MAX_SHARDS - 1);
		return LE_EINVAL;
	}
	return 0;
}

int le_reader_open(le_reader **out, const char *dir,
                   const le_reader_opts *opts)
{
	le_reader_opts def;
	le_reader *r = NULL;
	uint32_t *shards = NULL;
	size_t n = 0;
	int rc;

	le__clearerr();
	if (!out || !dir) {
		le__seterr("%s: must not be NULL", out ? "dir" : "out");
		return LE_EINVAL;
	}
	*out = NULL;
	if (!opts) {
		le_reader_opts_init(&def);
		opts = &def;
	}
	rc = check_opts(opts);
	if (rc < 0)
		return rc;
	rc = LE_ENOMEM;
	r = calloc(1, sizeof *r);
	if (!r)
		goto fail;
	r->opts = *opts;
	rc = le__shard_list(dir, &shards, &n);
	if (rc < 0) {
		le__seterr("%s: %s", dir, le_strerror(rc));
		goto fail;
	}
	if (opts->shard >= 0 && (rc = pick_shard(shards, &n, opts->shard))) {
		le__seterr("%s/shard-%03d: no such shard directory", dir,
		           opts->shard);
		goto fail;
	}
	rc = LE_ENOMEM;
	if (n && !(r->cur = calloc(n, sizeof *r->cur)))
		goto fail;
	for (; r->ncur < n; r->ncur++) {
		rc = cursor_init(&r->cur[r->ncur], dir, shards[r->ncur]);
		if (rc < 0) {
			r->ncur++; /* so that close frees what it holds */
			goto fail;
		}
	}
	free(shards);
	*out = r;
	return 0;
fail:
	free(shards);
	le_reader_close(r);
	return rc;
}

void le_reader_close(le_reader *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->ncur; i++) {
		struct cursor *c = &r->cur[i];
		seg_close(c);
		free(c->segs);
		free(c->path);
		free(c->dir);
	}
	free(r->cur);
	free(r);
}

/* ---- iteration ---- */

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
}

int le_reader_next(le_reader *r, le_record *rec)
{
	struct cursor *best = NULL;

	if (!r || !rec)
		return LE_EINVAL;
	if (r->err)
		return r->err;
	if (r->last) {
		r->last->has = 0; /* the caller is done with it now */
		r->last = NULL;
	}
	for (size_t i = 0; i < r->ncur; i++) {
		struct cursor *c = &r->cur[i];
		int rc = cursor_fill(r, c);
		if (rc < 0) {
			r->err = rc;
			return rc;
		}
		if (c->has && (!best || before(c, best)))
			best = c;
	}
	if (!best)
		return 0;
	to_record(best, rec);
	r->last = best;
	r->st.records++;
	return 1;
}

int le_reader_stats_get(const le_reader *r, le_reader_stats *out)
{
	if (!r || !out)
		return LE_EINVAL;
	*out = r->st;
	return 0;
}
