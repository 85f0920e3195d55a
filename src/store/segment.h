/*
 * segment.h -- segment files: naming, listing, sequential scanning with
 * validation, and the checkpoint file.  Shared by recovery (engine.c), the
 * writers (writer.c) and the reader API (reader_*.c).
 */
#ifndef LE_SEGMENT_H
#define LE_SEGMENT_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "record/format.h"
#include "store/segname.h"

/* Segment indexes in shard_dir, ascending, archived ones (.seg.zst)
 * included; *out malloc'd (free it), may be NULL when *n == 0.  @return 0, -errno, LE_ENOMEM. */
int le__seg_list(const char *shard_dir, uint64_t **out, size_t *n);

/* Base sequence of segment index in shard_dir, from its header (or its
 * archive's first bytes).  @return 0; LE_ECORRUPT (the header is short
 * or does not decode, whatever why); -errno. */
int le__seg_base(const char *shard_dir, uint64_t index, uint64_t *base);

/* Shard numbers with a shard-NNN directory in dir, ascending. */
int le__shard_list(const char *dir, uint32_t **out, size_t *n);

/*
 * Sequential scanner over one segment.  It reads through a window (pread),
 * never holding more than max(1 MiB, one frame) of the file, and validates
 * each frame: size range, CRC, flags, level, shard and sequence continuity.
 */
typedef struct le__scan {
	int fd;
	uint64_t file_len;
	le__seg_hdr hdr;
	unsigned char *buf;   /* window of the file */
	size_t cap;           /* bytes allocated at buf */
	size_t win_max;       /* the window grows no larger, but to hold one
	                         frame (0: 1 MiB); set after open */
	uint64_t win_off;     /* file offset of buf[0] */
	size_t win_len;       /* valid bytes at buf */
	uint64_t off;         /* offset of the next frame */
	uint64_t next_seq;    /* sequence the next frame must carry */
	uint64_t frames;      /* frames returned */
	int archived;         /* path was gone, and its archive (.seg.zst,
	                         seg_zst.h) is what fd holds, decompressed;
	                         also set when opening the archive failed */
} le__scan;

/* Open path and check its header; expect_shard UINT32_MAX = any.  A path
 * that is gone is read from its archive, PATH.zst, when there is one.
 * @return 0; LE_ECORRUPT (short/damaged header: *why says); LE_EVERSION;
 * -errno.  On failure nothing needs closing. */
int le__scan_open(le__scan *s, const char *path, uint32_t expect_shard,
                  const char **why);

/* Open a shard's newest segment, which a writer may be creating (it
 * creates the file, then writes its header): as le__scan_open, and on
 * LE_ECORRUPT *torn says whether the header was never completed -- file
 * shorter than a header, or a header that does not decode and only zeros
 * after it -- and *size is the file's size.  A header found missing and
 * then whole is read, never called damage.  -errno also from the second
 * look (-ENOENT: deleted meanwhile). */
int le__scan_open_newest(le__scan *s, const char *path, uint32_t expect_shard,
                         const char **why, int *torn, uint64_t *size);

/* Was this segment created and never written?  True when the file is
 * shorter than a header, or is at most one page and all zeros: what a
 * crash between creating a segment and writing its header leaves.  Such a
 * file holds no byte of any frame, so recovery may delete it; a header
 * with anything else in it is kept for readers to report.  @return 1, or
 * 0 (also when the file cannot be read). */
int le__seg_unborn(const char *path);

/* @return 1 when the len bytes at off in fd are all zero (or missing: the
 * file shrank), 0 when one is not, -errno. */
int le__all_zero(int fd, uint64_t off, uint64_t len);

/* Decode the frame at s->off.  On LE_FRAME_OK *f is valid until the next
 * call and s->off / s->next_seq have advanced; otherwise *why says what is
 * wrong at s->off and nothing moved.  A negative return is an I/O error. */
int le__scan_next(le__scan *s, le__frame *f, const char **why);

/* The frame at s->off, as le__scan_next would decode it but without
 * moving (its sequence not checked against s->next_seq): a look at what
 * comes next.  *f is valid until the next call. */
int le__scan_peek(le__scan *s, le__frame *f, const char **why);

/*
 * Take the run of whole, valid frames from s->off on (le__frames_check:
 * CRCs checked several at a time), at most max_bytes of them and what one
 * window holds (refilled from s->off first if it must), as le__scan_next
 * would one by one.  @return frames taken (s->off, s->next_seq, s->frames
 * past them; *bytes their size; they are in the window at s->off as it
 * was), 0 when the next frame needs le__scan_next (cut short, damaged,
 * larger than max_bytes, the end), or < 0 on an I/O error.
 */
int64_t le__scan_many(le__scan *s, uint64_t max_bytes, uint64_t *bytes);

/* From s->off + 1, look for the next offset at which a valid frame with a
 * sequence at or past s->next_seq starts.  @return 1 found (s->off there,
 * s->next_seq its sequence), 0 none before the end of file, -errno. */
int le__scan_resync(le__scan *s);

void le__scan_close(le__scan *s);

/* Checkpoint file of a shard directory ("CHECKPOINT"). */
int le__ckpt_read(const char *shard_dir, le__ckpt *c);
int le__ckpt_write(int fd, const le__ckpt *c); /* slot by c->gen parity */

#endif
