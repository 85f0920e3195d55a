/*
 * format.h -- every constant of the on-disk format, in one place.
 * docs/FORMAT.md is the prose version of this file; keep them in step.
 *
 * A log directory:
 *
 *   DIR/LOCK                      flock()ed by the engine that owns DIR
 *   DIR/shard-000/                one directory per shard
 *   DIR/shard-000/CHECKPOINT      two checkpoint slots (below)
 *   DIR/shard-000/0000000000000001.seg   segments, index in hex, ascending
 *
 * Segment file: a 64-byte header, then frames back to back (no padding, no
 * alignment).  All integers little-endian.
 *
 *   off len  segment header
 *     0   8  magic "LOGENGSG"
 *     8   2  format version (2; 1 is still read)
 *    10   2  header length (64)
 *    12   4  fields: LE_FIELD_* bits present in every frame of the file
 *    16   4  shard number
 *    20   4  reserved, zero
 *    24   8  segment index (same as the file name)
 *    32   8  base sequence: sequence number of the first frame
 *    40   8  creation time, ns since the epoch
 *    48  12  reserved, zero
 *    60   4  masked CRC32C of bytes 0..59
 *
 *   frame (fields in this order, [..] only when its bit is in "fields")
 *     u32  size    bytes of the frame after this word; 1 <= size
 *    [u32  crc ]   masked CRC32C of the size word followed by every byte
 *                  after the crc word (flags .. end of payload)
 *     u8   flags   LE_REC_TRUNCATED | LE_REC_MARKER, and in version 2
 *                  LE_REC_FIELDS (the payload starts with a field block,
 *                  fields.h) and LE_REC_DEFERRED (then a call site's
 *                  arguments, defer.h); other bits zero
 *    [u8   level]  0..5
 *    [u16  shard]
 *    [u64  seq  ]
 *    [u64  ts   ]  ns since the epoch, UTC
 *     ...  payload (the rest of the frame)
 *
 * A size word of zero marks the end of data (a preallocated or O_DIRECT
 * padded tail); it is never the start of a frame.
 *
 * Checkpoint file: two 64-byte slots at offsets 0 and 512 (separate disk
 * sectors, so one torn write damages at most one).  Slot g % 2 holds
 * generation g; a reader trusts the valid slot with the higher generation,
 * and then only after checking it against the segment it names.
 *
 *     0   8  magic "LOGENGCK"
 *     8   8  generation (1, 2, ...)
 *    16   8  segment index
 *    24   8  offset: end of the last frame known written
 *    32   8  next sequence number after that frame
 *    40   8  timestamp of that frame
 *    48   8  offset of that frame (where it starts), so the checkpoint
 *              can be checked: a frame must decode there and end at offset
 *    56   4  shard number
 *    60   4  masked CRC32C of bytes 0..59
 */
#ifndef LE_FORMAT_H
#define LE_FORMAT_H

#include <stdint.h>
#include <string.h>

#include "logengine.h"

#define LE_SEG_MAGIC "LOGENGSG"
#define LE_SEG_VERSION 2     /* written */
#define LE_SEG_VERSION_MIN 1 /* the oldest read: it has no field blocks */
#define LE_SEG_HDR 64
#define LE_SEG_HDR_CRC_OFF 60

#define LE_CKPT_MAGIC "LOGENGCK"
#define LE_CKPT_SLOT 64
#define LE_CKPT_SLOT1_OFF 512
#define LE_CKPT_FILE_BYTES (LE_CKPT_SLOT1_OFF + LE_CKPT_SLOT)

/* Limits.  A frame never exceeds LE_FRAME_MAX, so a reader never allocates
 * more than that for a size word read from a damaged file. */
#define LE_MAX_RECORD_LIMIT (16u << 20) /* max_record_bytes ceiling */
/* LE_FRAME_FIXED_MAX (28: size+crc+flags+level+shard+seq+ts) is in
 * logengine.h: a forwarder sizes its batches by it. */
#define LE_FRAME_MAX (LE_MAX_RECORD_LIMIT + LE_FRAME_FIXED_MAX)
/* LE_MAX_SHARDS (256) is in logengine.h: a collector checks it too. */
/* Shard directories a reader takes in one log directory: shard-000 ..
 * shard-999, then shard-1000 .. shard-99999 (a collector's store has one
 * per origin; an engine writes LE_MAX_SHARDS at most). */
#define LE_SHARD_DIRS_MAX 100000

#define LE_REC_KNOWN_FLAGS_V1 (LE_REC_TRUNCATED | LE_REC_MARKER)
#define LE_REC_KNOWN_FLAGS                                                    \
	(LE_REC_KNOWN_FLAGS_V1 | LE_REC_FIELDS | LE_REC_DEFERRED)
/* Flags a producer puts in a queue slot (markers are the writer's). */
#define LE_SLOT_KNOWN_FLAGS (LE_REC_TRUNCATED | LE_REC_FIELDS | LE_REC_DEFERRED)

_Static_assert(sizeof(LE_SEG_MAGIC) - 1 == 8, "segment magic is 8 bytes");
_Static_assert(sizeof(LE_CKPT_MAGIC) - 1 == 8, "checkpoint magic is 8 bytes");
_Static_assert(LE_SEG_HDR_CRC_OFF + 4 == LE_SEG_HDR, "header crc is last");
_Static_assert(LE_CKPT_SLOT <= LE_CKPT_SLOT1_OFF, "slots do not overlap");
_Static_assert(LE_FIELD_ALL == 0x1f, "five optional fields");
_Static_assert(LE_FRAME_FIXED_MAX == 4 + 4 + 1 + 1 + 2 + 8 + 8,
               "fixed frame bytes with every field on");
_Static_assert(LE_MAX_SHARDS <= 65536, "shard fits the u16 field");
_Static_assert(LE_FRAME_MAX < UINT32_MAX, "frame size fits the u32 word");

/* Little-endian loads and stores at any alignment.  On a little-endian
 * host they are one unaligned move each (memcpy); elsewhere, bytewise. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define LE__HOST_LE 1
#else
#define LE__HOST_LE 0
#endif
static inline void le__put16(unsigned char *p, uint16_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
}
static inline void le__put32(unsigned char *p, uint32_t v)
{
	if (LE__HOST_LE) {
		memcpy(p, &v, 4);
		return;
	}
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}
static inline void le__put64(unsigned char *p, uint64_t v)
{
	if (LE__HOST_LE) {
		memcpy(p, &v, 8);
		return;
	}
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}
static inline uint16_t le__get16(const unsigned char *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}
static inline uint32_t le__get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}
static inline uint64_t le__get64(const unsigned char *p)
{
	return (uint64_t)le__get32(p) | (uint64_t)le__get32(p + 4) << 32;
}

/* Bytes a frame carries before its payload, for a field set. */
static inline uint32_t le__frame_fixed(uint32_t fields)
{
	return 4 + ((fields & LE_FIELD_CRC) ? 4 : 0) + 1 +
	       ((fields & LE_FIELD_LEVEL) ? 1 : 0) +
	       ((fields & LE_FIELD_SHARD) ? 2 : 0) +
	       ((fields & LE_FIELD_SEQUENCE) ? 8 : 0) +
	       ((fields & LE_FIELD_TIMESTAMP) ? 8 : 0);
}

/* ---- codec.c ---- */

typedef struct le__seg_hdr {
	uint32_t version, fields, shard;
	uint64_t index, base_seq, created_ns;
} le__seg_hdr;

typedef struct le__frame {
	uint32_t size;    /* size word: frame bytes after it */
	uint32_t flags;
	int level;        /* -1 when absent */
	uint32_t shard;   /* UINT32_MAX when absent */
	uint64_t seq;     /* 0 when absent */
	uint64_t ts;      /* 0 when absent */
	const unsigned char *payload; /* the message (after a field block) */
	uint32_t len;
	const unsigned char *fields;  /* LE_REC_FIELDS: the block after its
	                                 length word; else NULL */
	uint32_t fields_len;
} le__frame;

typedef struct le__ckpt {
	uint64_t gen, seg_index, offset, next_seq, last_ts, last_off;
	uint32_t shard;
} le__ckpt;

void le__seg_hdr_encode(unsigned char out[LE_SEG_HDR], const le__seg_hdr *h);
/* 0, LE_ECORRUPT (magic/crc/length), LE_EVERSION. */
int le__seg_hdr_decode(const unsigned char in[LE_SEG_HDR], le__seg_hdr *h);

/*
 * Encode one frame into out (room for le__frame_fixed(fields) + len bytes).
 * @return the frame's total length.
 */
uint32_t le__frame_encode(unsigned char *out, uint32_t fields, uint32_t flags,
                          int level, uint32_t shard, uint64_t seq,
                          uint64_t ts, const void *payload, uint32_t len);

/*
 * The same in two steps, for the writer: le__frame_put leaves the crc word
 * unset; le__frame_seal fills it in for n <= LE_CRC_WAYS (8, crc32c.h)
 * frames at once (their CRCs computed side by side, see
 * le__crc32c_multi).  le__frame_encode is le__frame_put followed by
 * le__frame_seal of that one frame.
 */
uint32_t le__frame_put(unsigned char *out, uint32_t fields, uint32_t flags,
                       int level, uint32_t shard, uint64_t seq, uint64_t ts,
                       const void *payload, uint32_t len);
void le__frame_seal(unsigned char *const *frames, int n);

/*
 * le__frame_put for fields == LE_FIELD_ALL (the default), inline for the
 * writer's loop: flags, level, shard, seq and ts are 20 bytes from offset
 * 8, written as three stores instead of five field by field behind a test
 * of each bit: the store's put runs this for every record.
 */
static inline uint32_t le__frame_put_all(unsigned char *out, uint32_t flags,
                                         int level, uint32_t shard,
                                         uint64_t seq, uint64_t ts,
                                         const void *payload, uint32_t len)
{
	le__put32(out, 24 + len);
	le__put64(out + 8, (uint64_t)(flags & 0xff) |
	                           (uint64_t)(level & 0xff) << 8 |
	                           (uint64_t)(shard & 0xffff) << 16 |
	                           seq << 32);
	le__put64(out + 16, seq >> 32 | ts << 32);
	le__put32(out + 24, (uint32_t)(ts >> 32));
	if (len)
		memcpy(out + 28, payload, len);
	return 28 + len;
}

/* Outcome of le__frame_decode. */
enum {
	LE_FRAME_OK = 0,
	LE_FRAME_END = 1,     /* zero size word: end of data */
	LE_FRAME_SHORT = 2,   /* frame runs past the bytes available */
	LE_FRAME_BAD = 3      /* size out of range, CRC or field mismatch */
};

/*
 * Decode the frame at buf (avail bytes readable).  max_size bounds the size
 * word (never above LE_FRAME_MAX).  Fills *f on LE_FRAME_OK; *why names the
 * defect otherwise (static string).  A frame of the current version; the
 * _v form decodes one of a segment of format `version`.
 */
int le__frame_decode(const unsigned char *buf, uint64_t avail,
                     uint32_t fields, uint32_t max_size, le__frame *f,
                     const char **why);
int le__frame_decode_v(const unsigned char *buf, uint64_t avail,
                       uint32_t version, uint32_t fields, uint32_t max_size,
                       le__frame *f, const char **why);

/*
 * The run of whole, valid frames at the start of buf[0..avail): each
 * checked as le__frame_decode_v checks one (size within LE_FRAME_MAX,
 * flags, level, field block, CRC), plus its shard (when `shard` is not
 * UINT32_MAX and frames carry one) and its sequence (*seq, *seq + 1, ...
 * when frames carry one), CRCs LE_CRC_WAYS frames at a time.  The run
 * stops before the first frame that is cut short, would not be valid, or
 * would take it past max_bytes; that frame is left for
 * le__frame_decode_v to describe.  @return frames in the run; *used their
 * bytes; *seq moved past them.
 */
uint64_t le__frames_check(const unsigned char *buf, size_t avail,
                          uint32_t version, uint32_t fields, uint32_t shard,
                          size_t max_bytes, uint64_t *seq, size_t *used);

void le__ckpt_encode(unsigned char out[LE_CKPT_SLOT], const le__ckpt *c);
/* 0 or LE_ECORRUPT. */
int le__ckpt_decode(const unsigned char in[LE_CKPT_SLOT], le__ckpt *c);

/* Pick the newest valid slot from a whole checkpoint file image.
 * @return 0 and *c, or LE_ECORRUPT when neither slot is valid. */
int le__ckpt_pick(const unsigned char *file, uint64_t len, le__ckpt *c);

#endif
