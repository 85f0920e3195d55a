/*
 * fwd_cursor.h -- a forwarder's acknowledged cursor, DIR/shard-NNN/FORWARD,
 * and the retention hook that reads it.  The store owns this file because
 * retention and the archiver consult it; the spool (src/ship/spool.c)
 * is its only writer.  The byte layout is in docs/INTERFACES.md
 * ("Forwarding").
 *
 *   FORWARD slot (64 bytes, at 0 and 512; the key at 256)
 *     0  8  magic "LOGENGFW"
 *     8  8  generation
 *    16  8  next sequence
 *    24  8  segment index (hint)
 *    32  8  frame offset (hint)
 *    40  8  records reported lost
 *    48  8  written at, ns
 *    56  4  shard
 *    60  4  masked CRC32C of 0..59
 */
#ifndef LE_FWD_CURSOR_H
#define LE_FWD_CURSOR_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define LE_FWD_MAGIC "LOGENGFW"
#define LE_FWD_SLOT 64
#define LE_FWD_SLOT1_OFF 512
#define LE_FWD_FILE_BYTES (LE_FWD_SLOT1_OFF + LE_FWD_SLOT)
#define LE_FWD_NAME "FORWARD"
/* The shard's message-id key: magic, 8 random bytes, masked CRC32C of
 * the 16 before, between the two slots (written once). */
#define LE_FWD_KEY_MAGIC "LOGENGFK"
#define LE_FWD_KEY_OFF 256
#define LE_FWD_KEY_BYTES 20

_Static_assert(sizeof(LE_FWD_MAGIC) - 1 == 8, "cursor magic is 8 bytes");
_Static_assert(LE_FWD_SLOT <= LE_FWD_SLOT1_OFF, "slots do not overlap");
_Static_assert(LE_FWD_SLOT <= LE_FWD_KEY_OFF &&
               LE_FWD_KEY_OFF + LE_FWD_KEY_BYTES <= LE_FWD_SLOT1_OFF,
               "the key lies between the slots");

typedef struct le__fwd_cursor {
	uint64_t gen;
	uint64_t next_seq;  /* records below are acknowledged or reported lost */
	uint64_t seg_index; /* hint: segment holding next_seq (0: unknown) */
	uint64_t offset;    /* hint: its frame's offset there */
	uint64_t lost;      /* records reported lost before shipping */
	uint64_t written_ns;
	uint32_t shard;
} le__fwd_cursor;

void le__fwd_encode(unsigned char out[LE_FWD_SLOT], const le__fwd_cursor *c);
/* 0 or LE_ECORRUPT (magic, CRC, generation 0). */
int le__fwd_decode(const unsigned char in[LE_FWD_SLOT], le__fwd_cursor *c);
/* The newest valid slot of a file image (len bytes; missing bytes read as
 * zeros).  @return 0, or LE_ECORRUPT when neither slot is valid. */
int le__fwd_pick(const unsigned char *file, uint64_t len, le__fwd_cursor *c);
/*
 * The shard's message-id key, in its FORWARD file (fd, open for reading
 * and writing): read when valid, else drawn at random and written there
 * (synced) for every later run.  Part of each Nats-Msg-Id, it keeps ids
 * the same across restarts (the server drops what a restart sends again)
 * and out of reach of a publisher who cannot read this host's files or
 * the stream (it cannot have one of ours dropped as its duplicate).
 * @return 0 and *key, or -errno.
 */
int le__fwd_key(int fd, uint64_t *key);
/* Read shard_dir/FORWARD.  @return 0; -ENOENT (no forwarder); LE_ECORRUPT
 * (no valid slot: the first write was torn); -errno. */
int le__fwd_read(const char *shard_dir, le__fwd_cursor *c);
/* Up to cap bytes of shard_dir/name.  @return the count, or -errno. */
ssize_t le__ship_read(const char *shard_dir, const char *name, void *buf,
                      size_t cap);
/* Write c in the slot of its generation and fdatasync.  @return 0, -errno. */
int le__fwd_write(int fd, const le__fwd_cursor *c);

/*
 * The retention hook.  Retention wants to delete sealed segment `index`
 * of shard_dir (segment indexes of a shard are consecutive, so the records
 * it holds end where segment index + 1 begins) while the shard holds
 * `total` bytes against its budget `keep`.  With no forwarder (no FORWARD
 * file) or the segment wholly acknowledged, it may go.  Otherwise it is
 * kept while total <= keep + margin; past that it goes and the records of
 * it at or above the cursor are added to *lost.
 * @return 1 keep it (stop deleting), 0 delete it.
 */
int le__ship_retain(const char *shard_dir, uint64_t index, uint64_t total,
                    uint64_t keep, uint64_t margin, _Atomic uint64_t *lost);
/* Has the forwarder shipped every record of sealed segment `index`
 * (or is there no forwarder)?  The archiver compresses only those.
 * @return 1 yes, 0 no or unknown. */
int le__ship_done(const char *shard_dir, uint64_t index);

#endif
