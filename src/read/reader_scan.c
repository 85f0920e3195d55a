/*
 * reader_scan.c -- a reader cursor's movement through its shard's
 * segments (the state drawn in reader.h): open the next segment, check it
 * continues the one before, decode frames into the head, and deal with
 * damage.
 *
 * What damage does depends on the recovery mode; every case is reported to
 * on_problem first:
 *
 *                    TOLERATE_TAIL    ABSOLUTE     POINT_IN_TIME   SKIP
 *   torn tail (*)    shard ends       LE_ECORRUPT  shard ends      shard ends
 *   other damage     LE_ECORRUPT      LE_ECORRUPT  shard ends      resync
 *   zero-filled tail segment ends     LE_ECORRUPT  segment ends    segment ends
 *   sequence gap(***) go on           LE_ECORRUPT  shard ends      go on
 *   bad seg header   LE_ECORRUPT      LE_ECORRUPT  shard ends      skip file
 *   deferred record  its text says   LE_ECORRUPT  its text says   its text says
 *   not decodable    why (reader_next.c)           why             why
 *   deleted (**)     go on            go on        go on           go on
 *
 *   (*) damage in the last segment of a shard with no valid frame after it,
 *       or a last segment whose header was never completely written.
 *   (**) segments retention or vacuum deleted before the reader got to
 *       them: the oldest ones, so a jump in segment indexes up to the
 *       oldest segment left, or a file gone between listing and opening.
 *   (***) not one where a collector's marker says how many records are
 *       missing and why, nor between a collector's late runs (ship.h).
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
#include <string.h>
#include <sys/stat.h>

#include "base/os.h"
#include "read/reader.h"
#include "store/seg_zst.h"
#include "ship/ship.h"

/* ---- problems ---- */

/* Count a problem and hand it to the caller's callback. */
static void problem(le_reader *r, const struct cursor *c, int kind,
                    uint64_t off, const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 5, 6)))
#endif
	;

static void problem(le_reader *r, const struct cursor *c, int kind,
                    uint64_t off, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->msg, sizeof r->msg, fmt, ap);
	va_end(ap);
	r->st.problems++;
	r->kind = kind;
	if (r->opts.on_problem)
		r->opts.on_problem(r->opts.arg, c->path, off, r->msg);
	r->kind = 0;
}

int le_reader_problem(const le_reader *r)
{
	return r ? r->kind : 0;
}

/* ---- cursor movement ---- */

void le__rd_seg_close(struct cursor *c)
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
	c->prev_index = c->segs[c->iseg];
	c->chain = chain;
	if (!c->has) {
		c->next_seq = c->scan.next_seq;
		c->next_known = 1;
	}
	le__rd_seg_close(c);
	c->iseg++;
	c->next_index = c->prev_index + 1;
}

static void shard_stop(struct cursor *c)
{
	le__rd_seg_close(c);
	c->done = 1;
}

static int is_last_seg(const struct cursor *c)
{
	return c->iseg + 1 >= c->nseg;
}

/* The next segment's header failed its checks (why says how); torn: it
 * was never completed (le__scan_open_newest), size its size. */
static int header_damage(le_reader *r, struct cursor *c, const char *why,
                         int torn, uint64_t size)
{
	int mode = r->opts.mode;

	if (torn && r->follow) {
		/* Being created, or left so by a crash: the next engine
		 * replaces it.  Look again later. */
		c->idle = 1;
		return 0;
	}
	if (torn) {
		problem(r, c, LE_PROBLEM_TORN_TAIL, 0, "torn tail: %s (segment "
		        "never completed, %" PRIu64 " bytes)", why, size);
		if (mode == LE_RECOVER_ABSOLUTE)
			return LE_ECORRUPT;
		shard_stop(c);
		return 0;
	}
	problem(r, c, LE_PROBLEM_DAMAGE, 0, "%s", why);
	if (mode == LE_RECOVER_ABSOLUTE || mode == LE_RECOVER_TOLERATE_TAIL)
		return LE_ECORRUPT;
	if (mode == LE_RECOVER_POINT_IN_TIME) {
		shard_stop(c);
		return 0;
	}
	struct stat st;
	if (le__stat(c->path, &st) == 0)
		r->st.skipped_bytes += (uint64_t)st.st_size;
	c->iseg++;
	c->next_index = c->segs[c->iseg - 1] + 1;
	c->chain = 0;
	return 0;
}

/* Does the open segment of a collector's store begin with the marker
 * the collector wrote for the records expect .. base (it takes base, the
 * last of them, and says how many)?  Then the hole before it is recorded,
 * not lost.  @return 1 yes, 0 no, 2 not known yet: followed, the segment
 * is the newest and its first frame not (all) written. */
static int gap_marked(le_reader *r, struct cursor *c, uint64_t base)
{
	le__frame f;
	const char *why;

	if (!c->host || base <= c->expect)
		return 0;
	int rc = le__scan_peek(&c->scan, &f, &why);
	if (rc != LE_FRAME_OK)
		return r->follow && is_last_seg(c) &&
		       (rc == LE_FRAME_END || rc == LE_FRAME_SHORT) ? 2 : 0;
	return (f.flags & LE_REC_MARKER) && f.seq == base &&
	       le__gap_marker_count(f.payload, f.len) == base - c->expect + 1;
}

/* A segment just opened: does it continue the one before?  A hole where
 * deleted segments were (retention and vacuum take the oldest, so the
 * segments between are older than any left) is not damage, nor one a
 * collector's marker stands for, nor any in a collector's late records
 * (runs in no chain). */
static int check_chain(le_reader *r, struct cursor *c)
{
	uint64_t base = c->scan.hdr.base_seq, idx = c->segs[c->iseg];

	if (!c->chain || base == c->expect || c->late)
		return 0;
	int marked = gap_marked(r, c, base);
	if (marked == 2) { /* opened again when more is written */
		le__rd_seg_close(c);
		c->idle = 1;
	}
	if (marked)
		return 0;
	if (base > c->expect &&
	    (c->deleted || (idx > c->prev_index + 1 && idx <= c->oldest))) {
		problem(r, c, LE_PROBLEM_DELETED, 0, "%" PRIu64 " records "
		        "(%" PRIu64 "..%" PRIu64 ") were deleted before they "
		        "were read", base - c->expect, c->expect, base - 1);
		return 0;
	}
	problem(r, c, LE_PROBLEM_GAP, 0, "sequence %s: expected %" PRIu64
	        ", segment starts at %" PRIu64,
	        base > c->expect ? "gap" : "overlap", c->expect, base);
	if (r->opts.mode == LE_RECOVER_ABSOLUTE)
		return LE_ECORRUPT;
	if (r->opts.mode == LE_RECOVER_POINT_IN_TIME)
		shard_stop(c);
	return 0;
}

/* The largest window a cursor's scanner grows to.  What every shard's
 * scanner may hold at once: up to 256 shards each get
 * the scanner's 1 MiB; more share it (a store of 16,384 origins reads with
 * 16 KiB windows), so the reader's memory stays bounded however many shard
 * directories it reads. */
#define READ_WINDOWS_BYTES (256u << 20)
#define WINDOW_FLOOR (16u << 10)

static size_t window_max(const le_reader *r)
{
	size_t w = r->ncur ? READ_WINDOWS_BYTES / r->ncur : READ_WINDOWS_BYTES;
	if (w > (1u << 20))
		w = 1u << 20;
	return w < WINDOW_FLOOR ? WINDOW_FLOOR : w;
}

/* Open segs[iseg], or find the shard has no more. */
int le__rd_seg_open(le_reader *r, struct cursor *c)
{
	const char *why;
	uint64_t size = 0;
	int rc, torn;

	if (c->iseg >= c->nseg) {
		if (r->follow)
			c->idle = 1;
		else
			c->done = 1;
		return 0;
	}
	rc = le__seg_path(c->path, c->path_cap, c->dir, c->segs[c->iseg]);
	if (rc < 0)
		return rc;
	torn = 0;
	rc = is_last_seg(c) ? le__scan_open_newest(&c->scan, c->path,
	                                           c->seg_shard, &why, &torn,
	                                           &size)
	                    : le__scan_open(&c->scan, c->path, c->seg_shard,
	                                    &why);
	if (c->scan.archived) /* problems name the file read: the archive */
		strncat(c->path, LE_ZST_SUFFIX, c->path_cap - strlen(c->path) - 1);
	if (rc == -ENOENT) {
		/* Deleted by retention since we listed it: not damage. */
		c->deleted = 1;
		c->iseg++;
		c->next_index = c->segs[c->iseg - 1] + 1;
		return 0;
	}
	if (rc == 0 || rc == LE_ECORRUPT || rc == LE_EVERSION)
		r->st.segments++;
	if (rc == LE_ECORRUPT)
		return header_damage(r, c, why, torn, size);
	if (rc == LE_EVERSION)
		problem(r, c, LE_PROBLEM_DAMAGE, 0, "%s", why);
	if (rc == LE_EUNSAFE) /* a link, a FIFO...: le_errmsg says which */
		problem(r, c, LE_PROBLEM_DAMAGE, 0, "%s", le_errmsg());
	if (rc < 0)
		return rc;
	c->open = 1;
	c->scan.win_max = window_max(r);
	c->next_index = c->segs[c->iseg];
	if (c->scan.hdr.index != c->segs[c->iseg]) {
		le__rd_seg_close(c);
		return header_damage(r, c, "segment header index does not "
		                           "match the file name", 0, 0);
	}
	rc = check_chain(r, c);
	if (c->open) /* else it is opened again, and checked again, later */
		c->deleted = 0;
	return rc;
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
		problem(r, c, LE_PROBLEM_DAMAGE, off, "%s", why);
		if (mode == LE_RECOVER_ABSOLUTE)
			return LE_ECORRUPT;
		shard_stop(c);
		return 0;
	}
	found = le__scan_resync(&c->scan);
	if (found < 0)
		return found;
	if (!found && is_last_seg(c)) {
		problem(r, c, LE_PROBLEM_TORN_TAIL, off, "torn tail: %s "
		        "(%" PRIu64 " bytes)", why, len - off);
		if (mode == LE_RECOVER_SKIP)
			r->st.skipped_bytes += len - off;
		shard_stop(c);
		return 0;
	}
	if (mode == LE_RECOVER_TOLERATE_TAIL) {
		problem(r, c, LE_PROBLEM_DAMAGE, off, "%s (not a torn tail: %s)",
		        why, found ? "valid frames follow"
		                   : "later segments follow");
		return LE_ECORRUPT;
	}
	uint64_t end = found ? c->scan.off : len;
	problem(r, c, LE_PROBLEM_DAMAGE, off, "%s; skipped %" PRIu64 " bytes",
	        why, end - off);
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
	rc = le__all_zero(c->scan.fd, off, len - off);
	if (rc < 0)
		return rc;
	if (rc == 0)
		return on_damage(r, c, "zero size word before non-zero bytes");
	problem(r, c, LE_PROBLEM_ZERO_TAIL, off, "zero-filled tail at offset "
	        "%" PRIu64 " (%" PRIu64 " bytes)", off, len - off);
	if (r->opts.mode == LE_RECOVER_ABSOLUTE)
		return LE_ECORRUPT;
	seg_done(c, 1);
	return 0;
}

/* The frame just decoded into c->head, which stood at off, is c's head:
 * counted as read, and (following) seen now. */
void le__rd_take_head(le_reader *r, struct cursor *c, uint64_t off)
{
	c->head_off = off;
	c->has = 1;
	r->st.bytes += (uint64_t)c->head.size + 4;
	if (r->follow)
		c->seen_mono = le__mono_ns();
}

/* Decode the next frame of the open segment into the head, or deal with
 * what stands there instead. */
static int seg_step(le_reader *r, struct cursor *c)
{
	const char *why;
	uint64_t off = c->scan.off;
	int rc = le__scan_next(&c->scan, &c->head, &why);

	if (rc == LE_FRAME_OK) {
		le__rd_take_head(r, c, off);
		return 0;
	}
	if (rc < 0)
		return rc;
	if (r->follow && is_last_seg(c)) {
		/* The end of what is written so far, or a frame being
		 * written: nothing is final in the last segment. */
		c->idle = 1;
		return 0;
	}
	/* Fewer than 4 bytes left: no size word fits; zeros or a torn one. */
	if (rc == LE_FRAME_END ||
	    (rc == LE_FRAME_SHORT && c->scan.file_len - off < 4))
		return on_end(r, c);
	return on_damage(r, c, why);
}

/* Give c a head unless its shard has no more frames (for now). */
int le__rd_cursor_fill(le_reader *r, struct cursor *c)
{
	while (!c->has && !c->done && !c->idle) {
		int rc = c->open ? seg_step(r, c) : le__rd_seg_open(r, c);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* The caller is done with c's head. */
void le__rd_consume(struct cursor *c)
{
	c->has = 0;
	c->next_seq = c->head.seq + 1;
	c->next_known = 1;
}
