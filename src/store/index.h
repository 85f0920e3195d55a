/*
 * index.h -- the sparse time index of a sealed segment (docs/INTERFACES.md,
 * "Time index file"): DIR/shard-NNN/IIIIIIIIIIIIIIII.idx next to its .seg.
 *
 *   off len  index header (96 bytes)
 *     0   8  magic "LOGENGIX"
 *     8   2  version (1)
 *    10   2  header length (96)
 *    12   4  entry length (24)
 *    16   4  shard number            } copied from the segment's
 *    20   4  spacing: segment bytes  } header, and checked against
 *            per entry (65536)       } it before any use
 *    24   8  segment index           }
 *    32   8  base sequence           }
 *    40   8  creation time, ns       }
 *    48   8  end: offset just past the last frame covered
 *    56   8  records: frames covered
 *    64   8  smallest timestamp covered
 *    72   8  largest timestamp covered
 *    80   4  entries n
 *    84   4  masked CRC32C of the n entries
 *    88   4  reserved, zero
 *    92   4  masked CRC32C of bytes 0..91
 *
 *   entry (24 bytes), n of them, ascending
 *     0   8  offset of a frame
 *     8   8  its sequence number
 *    16   8  the largest timestamp of every frame BEFORE it in the segment
 *            (0 for the first frame): every frame before `offset` is older
 *            than any time above this, which is what a seek needs even
 *            when timestamps are not in order.
 *
 * An index is a hint.  It is never trusted unless the whole file checks
 * (size, both CRCs, the segment's identity, entries in order and inside
 * `end`), and a reader still decodes the frame an entry names and checks
 * its sequence before starting there; anything else means scanning the
 * segment from its header, as for a segment without an index.
 */
#ifndef LE_INDEX_H
#define LE_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "record/format.h"

#define LE_IDX_MAGIC "LOGENGIX"
#define LE_IDX_VERSION 1
#define LE_IDX_HDR 96
#define LE_IDX_ENTRY 24
#define LE_IDX_SPACING (64u << 10)
/* Bounds the file a reader will load: an index of a segment of 1 TiB. */
#define LE_IDX_MAX_ENTRIES (1u << 24)

typedef struct le__idx_entry {
	uint64_t off;    /* where a frame starts */
	uint64_t seq;    /* its sequence number */
	uint64_t before; /* largest timestamp of the frames before it */
} le__idx_entry;

typedef struct le__index {
	uint32_t shard, spacing;
	uint64_t seg_index, base_seq, created_ns; /* the segment's header */
	uint64_t end;     /* offset just past the last frame covered */
	uint64_t records; /* frames covered */
	uint64_t ts_min, ts_max; /* over the frames covered (0, 0: none) */
	le__idx_entry *e; /* n entries, malloc'd */
	size_t n, cap;
} le__index;

/* DIR/shard-NNN/IIIIIIIIIIIIIIII.idx.  @return 0 or -ENAMETOOLONG. */
int le__index_path(char *buf, size_t cap, const char *shard_dir,
                   uint64_t seg_index);

/* The file image of x: LE_IDX_HDR + n * LE_IDX_ENTRY bytes at out (which
 * must hold them).  @return the byte count. */
size_t le__index_encode(unsigned char *out, const le__index *x);
/* Parse and check a file image of len bytes (x gets its own copy of the
 * entries).  @return 0; LE_ECORRUPT (*why says what); LE_EVERSION;
 * LE_ENOMEM. */
int le__index_decode(const unsigned char *buf, size_t len, le__index *x,
                     const char **why);

/* Build the index of the segment at seg_path by reading it.  It covers
 * the frames up to the first that does not validate.  @return 0, -errno, LE_ECORRUPT (the
 * header), LE_ENOMEM. */
int le__index_build(const char *seg_path, le__index *x);
/* Write x as shard_dir's index of its segment: a temporary file renamed
 * over the name, so a reader sees a whole index or none.  @return 0 or
 * -errno. */
int le__index_write(const char *shard_dir, const le__index *x);

/* Load the index of the segment whose header is h and whose file is
 * seg_len bytes long.  @return 0; -ENOENT (none); LE_ECORRUPT (present
 * but not to be trusted: torn, damaged, for another file); -errno. */
int le__index_load(const char *shard_dir, const le__seg_hdr *h,
                   uint64_t seg_len, le__index *x);

/* Where to start reading for the records with a timestamp at or after ts:
 * the last entry whose `before` is below ts (every frame before it is
 * older than ts), or end when even the newest covered frame is older.
 * *seq is the sequence of the frame at *off (next_seq at end). */
void le__index_find_time(const le__index *x, uint64_t ts, uint64_t *off,
                         uint64_t *seq);
/* The entry at or before the frame of sequence seq (seq must be covered:
 * base_seq <= seq < base_seq + records). */
void le__index_find_seq(const le__index *x, uint64_t seq, uint64_t *off,
                        uint64_t *at_seq);

void le__index_free(le__index *x);

/*
 * The hook the writer calls once a segment is sealed (its last byte
 * written and the file closed): queue it for the index builder, a thread
 * of this file started at the first call, which reads the segment back
 * (from the page cache, just written) and writes its index.  The writer's
 * hot loop pays nothing, and the seal one mutex and a copy of the path;
 * when the builder's queue is full the segment is left without an index
 * (readers scan it).  The builder also removes the indexes of segments
 * that retention or vacuum deleted.
 */
void le__index_on_seal(const char *shard_dir, uint64_t seg_index);

/* Tests and tools: wait until every queued build is done, at most
 * timeout_ms.  @return 1 idle, 0 timed out. */
int le__index_idle(int timeout_ms);
/* Wait until no build for a shard of dir is waiting or running: le_close
 * calls it once the writers are gone, so that no thread of the library
 * touches a closed engine's directory (or the OS-call table a test puts
 * back) after le_close returns.  Bounded: IDX_JOBS builds at most. */
void le__index_wait_dir(const char *dir);

#endif
