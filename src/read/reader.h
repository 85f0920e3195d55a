/*
 * reader.h -- the reader API's internals, shared by its files: the records
 * of a log directory, oldest first, merged across shards by timestamp;
 * seeking by time, by position from the end and by cursor; following a
 * live log.
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
 * The files, each calling only those above it in this list:
 *
 *   reader_scan.c    a cursor's movement through its segments: frames
 *                    decoded, damage handled by recovery mode, problems
 *   reader_open.c    le_reader_open / _close: the shards of a directory
 *   reader_follow.c  le_reader_follow / _wait: new segments and shards
 *   reader_next.c    le_reader_next: the merge across shards
 *   reader_seek.c    le_reader_seek_time / _seek_tail: positioning
 *   reader_cursor.c  le_reader_cursor / _seek_cursor: cursor strings
 */
#ifndef LE_READER_H
#define LE_READER_H

#include <stddef.h>
#include <stdint.h>

#include "logengine.h"
#include "record/defer.h"
#include "store/segment.h"

struct cursor {
	uint32_t shard;      /* from the directory name */
	uint32_t seg_shard;  /* what segment headers say: shard, or the
	                        origin's in a collector's store */
	char *host;          /* a collector's store: the origin host (from
	                        ORIGIN, ship.h), owned; NULL: a local shard */
	int late;            /* a collector's late records: its segments
	                        are runs that need not continue each other */
	char *dir;           /* DIR/shard-NNN, owned */
	char *path;          /* current segment path, owned; path_cap bytes */
	size_t path_cap;
	uint64_t *segs;      /* segment indexes listed, ascending */
	size_t nseg;
	size_t iseg;         /* index into segs of the open / next segment */
	uint64_t next_index; /* segment index to open next (kept across
	                        listings: segs changes under follow) */
	uint64_t oldest;     /* oldest segment index in the last listing */
	le__scan scan;       /* valid while open */
	int open;
	le__frame head;      /* decoded frame not yet returned, when has */
	uint64_t head_off;   /* its offset in path */
	int has;
	int done;            /* no more frames from this shard */
	int chain;           /* 1: the next segment must start at expect */
	uint64_t expect;     /* sequence that follows the last segment read */
	uint64_t prev_index; /* index of the segment expect comes from */
	int deleted;         /* a listed segment was gone when opened */
	uint64_t next_seq;   /* sequence of the next record to return, */
	int next_known;      /* when known (cursors) */
	/* follow */
	int idle;            /* at the end of what is written now */
	int relist;          /* list the directory before going on */
	int wd;              /* inotify watch, -1 */
	uint64_t seen_mono;  /* when the head was read */
	le__dcache dc;       /* deferred records: descriptors, their text */
	uint64_t quiet_until; /* no record older than this (ns since the
	                        epoch) can still come from this shard */
};

struct le_reader {
	le_reader_opts opts;
	char *dir;           /* owned copy of the directory */
	struct cursor *cur;  /* ncur cursors (of cap) */
	size_t ncur, cap;
	long last;           /* cursor whose head the caller holds, -1 */
	struct {             /* the record returned last (le_reader_cursor) */
		int valid;
		uint32_t shard;
		uint64_t seq, ts, seg, off;
	} ret;
	uint32_t *heap;      /* not following: the cursors with a head,
	                        a binary heap by merge order (reader_next.c) */
	size_t nheap;
	int heap_ok;         /* 0: build heap again (after a seek) */
	int err;             /* sticky error, 0 if none */
	int kind;            /* enum le_problem_kind being reported */
	uint64_t skip;       /* records le_reader_next drops first */
	int positioned;      /* a record was asked for, or a seek made */
	le_reader_stats st;
	char msg[512];       /* text of the problem being reported */
	/* follow */
	int follow;
	uint64_t reorder_ns;
	int ifd;             /* inotify descriptor, -1: poll */
	int dir_wd;          /* watch on dir (new shards) */
	int shards_changed;
	uint64_t relisted_mono;
	uint64_t hold_until; /* mono ns when the held head is due, 0: none */
};

/* reader_scan.c */

/* Give c a head unless its shard has no more frames (for now).
 * @return 0 or a reader error. */
int le__rd_cursor_fill(le_reader *r, struct cursor *c);
/* The caller is done with c's head. */
void le__rd_consume(struct cursor *c);
/* The frame just decoded into c->head (at off) becomes c's head. */
void le__rd_take_head(le_reader *r, struct cursor *c, uint64_t off);
/* Open segs[iseg], or find the shard has no more.  @return 0 or a reader
 * error. */
int le__rd_seg_open(le_reader *r, struct cursor *c);
void le__rd_seg_close(struct cursor *c);

/* reader_open.c */

/* c for shard of dir, its segments listed.  @return 0 or an error (c then
 * holds what le__rd_cursor_free releases). */
int le__rd_cursor_init(struct cursor *c, const char *dir, uint32_t shard);
void le__rd_cursor_free(struct cursor *c);
/* Room for n cursors.  @return 0, LE_ENOMEM. */
int le__rd_cursors_reserve(le_reader *r, size_t n);

/* reader_follow.c */

/* Look again at an idle shard (its directory too when list).  @return 0 or
 * an error. */
int le__rd_refresh(struct cursor *c, int list);

/* reader_seek.c */

/* Put c at segs[k], at the frame at off that should carry sequence seq
 * (checked; else the segment's first frame).  @return 0 or an error. */
int le__rd_goto_frame(le_reader *r, struct cursor *c, size_t k, uint64_t off,
                      uint64_t seq);
/* Drop c's records before the first one keep() accepts (file order). */
int le__rd_skip_until(le_reader *r, struct cursor *c,
                      int (*keep)(const struct cursor *, const void *),
                      const void *arg);
/* Put c at its first record with a timestamp at or after ts. */
int le__rd_shard_seek_time(le_reader *r, struct cursor *c, uint64_t ts);
/* Put c at its record of sequence seq, or the first after it; *skipped
 * gets how many records before the oldest one left were asked for. */
int le__rd_shard_seek_seq(le_reader *r, struct cursor *c, uint64_t seq,
                          uint64_t *skipped);
/* Around a seek: start over (every cursor positioned anew); then make
 * an error sticky.  @return 0 or the error. */
int le__rd_seek_begin(le_reader *r);
int le__rd_seek_end(le_reader *r, int rc);

#endif
