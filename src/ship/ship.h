/*
 * ship.h -- forwarding a log to another host: the origin file of a
 * collector's shard (ORIGIN), the checks a collector makes on a message
 * body, the collector's segment writing, and deferred frames relinked
 * into messages.  The forwarder's cursor (FORWARD) and the retention hook
 * are the store's (store/fwd_cursor.h); the spool over them is public
 * (le_spool_* in logengine.h).  The byte layouts are in
 * docs/INTERFACES.md ("Forwarding"); the transport (NATS JetStream,
 * libnats) lives in the tools, so the library never depends on it.
 *
 *   ORIGIN
 *     0  8  magic "LOGENGOR"
 *     8  2  version (1 or 2)
 *    10  2  host length n
 *    12  4  origin shard
 *    16  4  kind (version 2)
 *   h=16/20  n  host
 *   h+n  4  masked CRC32C
 */
#ifndef LE_SHIP_H
#define LE_SHIP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "record/format.h"
#include "store/fwd_cursor.h"

#define LE_ORIGIN_MAGIC "LOGENGOR"
#define LE_ORIGIN_VERSION 2 /* the newest; a chain's ORIGIN is written as 1 */
#define LE_ORIGIN_NAME "ORIGIN"
#define LE_ORIGIN_MAX_BYTES (20 + LE_HOST_MAX + 4)

/* What an origin's shard directory of a collector's store holds. */
enum {
	LE_ORIGIN_CHAIN = 0, /* its records in sequence, gaps marked */
	LE_ORIGIN_LATE = 1   /* records that came inside a gap claim after
	                        its marker: consecutive runs, one or more
	                        segments each, in no chain */
};

/* LE_SHIP_SEQ_MAX (logengine.h), the largest sequence number a message
 * may name: far above what an origin writes in its life (a million
 * records a second for 146,000 years), far below where sums of sequences
 * overflow. */
/* A gap claim's time (Le-Ts, ns since the epoch) is refused below 10^18,
 * a time no log of a running clock can hold, or more than
 * LE_GAP_TS_AHEAD_NS ahead of the collector's clock. */
#define LE_GAP_TS_MIN UINT64_C(1000000000000000000)
#define LE_GAP_TS_AHEAD_NS (UINT64_C(86400) * 1000000000u)
/* What the collector's gap markers say after "N records ". */
#define LE_GAP_LOST "lost before shipping"
#define LE_GAP_MISSING "missing from the stream"
/* Open gap claims (ranges of records claimed lost and not come) an origin
 * keeps track of, at most; past it the lowest range is forgotten. */
#define LE_CLAIM_RANGES 4096


_Static_assert(sizeof(LE_ORIGIN_MAGIC) - 1 == 8, "origin magic is 8 bytes");

/* ---- the origin file and message bodies (collect_store.c) ---- */

typedef struct le__origin {
	char host[LE_HOST_MAX + 1];
	uint32_t shard;
	uint32_t kind; /* LE_ORIGIN_CHAIN or LE_ORIGIN_LATE */
} le__origin;

/* 1 when host is 1..LE_HOST_MAX bytes of A-Z a-z 0-9 . _ - */
int le__host_valid(const char *host, size_t len);
/*
 * A host's token in a NATS subject: the name with each '.' (the token
 * separator) written as '~', which no host name holds, so that a token
 * names exactly one host and a permission on `logs.TOKEN.>` exactly one
 * origin.  @return its length, or 0 when out (cap bytes) is too small.
 */
size_t le__host_token(char *out, size_t cap, const char *host);
/* Version 1 for a chain (what collectors before version 2 read), 2 for
 * another kind.  @return bytes written to out (room for
 * LE_ORIGIN_MAX_BYTES). */
size_t le__origin_encode(unsigned char *out, const le__origin *o);
/* Either version (1: a chain).  @return 0 or LE_ECORRUPT (also an
 * unknown kind). */
int le__origin_decode(const unsigned char *in, size_t len, le__origin *o);
/* shard_dir/ORIGIN.  @return 0, -ENOENT, LE_ECORRUPT, -errno. */
int le__origin_read(const char *shard_dir, le__origin *o);
/* N when the len bytes at p are a collector's gap marker text, "N records
 * " LE_GAP_LOST or LE_GAP_MISSING with N from 1 to LE_SHIP_SEQ_MAX; else
 * 0. */
uint64_t le__gap_marker_count(const unsigned char *p, size_t len);

/*
 * Check a message body: exactly `count` frames of field set `fields`,
 * valid (CRC when the set has it), of shard `shard` when the set has the
 * field, numbered first, first + 1, ... when it has the sequence field.
 * @return 0, or LE_ECORRUPT with *bad_off the offset of the first bad
 * frame (the body's length when frames are missing) and *why.
 */
int le__ship_check_body(const unsigned char *body, size_t len, uint32_t fields,
                        uint32_t shard, uint64_t first, uint64_t count,
                        uint64_t *bad_off, const char **why);
/* Offset in a checked body of the frame with sequence first + skip. */
size_t le__ship_body_skip(const unsigned char *body, size_t len,
                          uint64_t skip);

/* ---- the collector's store (collect_store.c) ---- */

typedef struct le__cstore le__cstore;

/* Origins of a store (LE_ORIGINS_DEFAULT, LE_ORIGINS_MAX in logengine.h):
 * each has a shard directory, shard-000 .. shard-99999, and each origin's
 * chain may have a late directory beside it, so at most half of
 * LE_SHARD_DIRS_MAX. */
_Static_assert(LE_ORIGINS_MAX * 2 <= LE_SHARD_DIRS_MAX,
               "a chain and its late directory for every origin");

typedef struct le__cstore_opts {
	uint64_t segment_bytes; /* rotate past this size */
	int sync;               /* 1: le__cstore_sync makes writes durable */
	uint32_t max_origins;   /* new origins are refused past this many
	                           (0: LE_ORIGINS_DEFAULT; LE_ORIGINS_MAX at
	                           most) */
} le__cstore_opts;

/* One origin's place in the store. */
typedef struct le__cstore_origin {
	le__origin o;
	uint32_t dir_shard;  /* the shard-NNN it lives in */
	uint64_t next_seq;   /* the next origin sequence it expects (1: none
	                        yet) */
	uint64_t stored;     /* records stored since open */
	uint64_t data;       /* the caller's word (le_collector_data): never
	                        read here */
	uint64_t forgotten;  /* claimed records no longer tracked (past
	                        LE_CLAIM_RANGES): if they come, they are
	                        taken as already stored */
} le__cstore_origin;

/* Open (or create) a collector store: lock DIR, read every ORIGIN, find the
 * valid end of each origin's last segment and cut a torn tail there.  A
 * store holding more origins than opts->max_origins opens (it refuses new
 * ones).  @return 0; LE_EBUSY (locked); LE_EINVAL (max_origins above
 * LE_ORIGINS_MAX); LE_ECORRUPT / -errno (*errbuf says). */
int le__cstore_open(le__cstore **out, const char *dir,
                    const le__cstore_opts *opts, char *errbuf, size_t cap);
void le__cstore_close(le__cstore *s);
/* The origin (host, shard) in *out, created when new (create = 1): its
 * shard directory and ORIGIN file made durable.  Found in constant time.
 * @return 0; -ENOENT (unknown and create = 0); LE_EFULL (new, and the
 * store holds max_origins already: errbuf says "origin limit reached (N
 * origins; --max-origins)"; the store is unchanged and takes its known
 * origins as before); LE_EINVAL (host not valid); LE_ENOMEM, LE_EUNSAFE,
 * -errno (errbuf says).  *out is NULL on error. */
int le__cstore_origin_get(le__cstore *s, const char *host, uint32_t shard,
                          int create, le__cstore_origin **out, char *errbuf,
                          size_t cap);
/* The message frames come from: its whole body, checked, and its Le-Pos
 * (UINT64_MAX when it has none: back-references are not followed). */
typedef struct le__ship_body {
	const unsigned char *body;
	size_t len;
	uint64_t pos;
	uint32_t fields;
} le__ship_body;

/* Append checked frames (first frame's sequence == o->next_seq, field set
 * `fields`), part of message `from`, to the origin's segment: deferred
 * frames relinked to name descriptors in that segment (ship_defer.c).
 * @return 0 or -errno. */
int le__cstore_append(le__cstore *s, le__cstore_origin *o, uint32_t fields,
                      const unsigned char *frames, size_t len,
                      uint64_t count, const le__ship_body *from);
/* Store a marker for records first .. last, which will never come (text
 * "N records <why>", time ts), in a new segment: the marker takes
 * sequence `last`.  first must be o->next_seq.  first .. last become a gap
 * claim of the origin: records of it that come later are stored by
 * le__cstore_late.  @return 0 or -errno. */
int le__cstore_gap(le__cstore *s, le__cstore_origin *o, uint32_t fields,
                   uint64_t first, uint64_t last, uint64_t ts,
                   const char *why);
/* What le__cstore_late stored: how many records, the lowest and highest
 * of them, and why it failed. */
typedef struct le__late {
	uint64_t n, lo, hi;
	char err[256];
} le__late;
/*
 * Checked frames (len bytes, of field set from->fields) of records first
 * .. first + count - 1, part of message `from`, all below o->next_seq:
 * those inside a gap claim of o and not stored yet go to o's late
 * directory (LE_ORIGIN_LATE, created when first needed), each run of them
 * in segments of its own, and leave the claim; the rest are already
 * stored.  @return 0 (out says what was stored), or < 0 (out->err says
 * why, or is empty for an I/O error).
 */
int le__cstore_late(le__cstore *s, le__cstore_origin *o, uint64_t first,
                    const unsigned char *frames, size_t len, uint64_t count,
                    const le__ship_body *from, le__late *out);
/* fdatasync every segment written since the last call (when opts.sync).
 * @return 0 or -errno. */
int le__cstore_sync(le__cstore *s);

/* ---- deferred frames in messages and collector segments (ship_defer.c) ---- */

/*
 * Which frame of one output (a message body, a collector segment) carries
 * each call site's descriptor, keyed by the descriptor's bytes, as the R
 * that names that frame.  Bounded: past LE_RELINK_MAX descriptors or
 * LE_RELINK_BYTES of them, frames carry their descriptor themselves.
 */
#define LE_RELINK_MAX 4096
#define LE_RELINK_BYTES (256u << 10)
typedef struct le__relink {
	struct le__rl_ent *e;
	size_t cap, n, bytes;
} le__relink;

/* The descriptor of the input's frame that R = ref names (*dlen bytes),
 * or NULL (*why). */
typedef const unsigned char *le__rl_find(void *arg, uint32_t ref,
                                         size_t *dlen, const char **why);

/* Does frame fr (of field set fields) hold a deferred record? */
int le__frame_deferred(const unsigned char *fr, uint32_t fields);

/*
 * Frame fr (n bytes of field set `fields`, checked) about to become the
 * output's frame that R = at names.  A deferred frame that names its
 * descriptor by R is made to name the output's frame carrying it (found
 * with `find`, noted in rl), or, when the output has none, to carry it
 * itself; a frame carrying one is noted.  An R that `find` cannot follow
 * becomes 0 (no frame is there: readers report the record undecodable).
 * out: room for n + LE_DESC_MAX bytes.  @return the new frame's bytes in
 * out, or 0: fr goes as it is.
 */
size_t le__relink_frame(le__relink *rl, const unsigned char *fr, size_t n,
                        uint32_t fields, uint64_t at, le__rl_find *find,
                        void *arg, unsigned char *out);
/* Forget the output (a new message, a new segment); free the table. */
void le__relink_reset(le__relink *rl);
void le__relink_free(le__relink *rl);

#endif
