/*
 * queue.h -- the producer/consumer queue: a global budget word and one
 * variable-length ring per shard.  Everything in a ring is position
 * arithmetic on offsets, never pointers, so a ring and its control words
 * live in a shared file mapping (DIR/shard-NNN/QUEUE): what producers put
 * there survives a kill -9 of the process, and the next le_open drains it.
 *
 * Budget.  One 64-bit word counts what is queued in all shards: records in
 * bits 0..23, payload bytes in bits 24..63.  A producer takes (1, len) with
 * one CAS that checks both limits, so queue_capacity and
 * queue_capacity_bytes hold globally and exactly; a writer gives its batch
 * back with one fetch_sub after the batch is in the segment file.
 *
 * Ring.  Positions are virtual byte counts that only grow.  A lap is
 * `lap` virtual bytes (a power of two) of which the first `size` are real
 * memory; position p lives at data[p & (lap - 1)] in lap p >> lap_shift.  A
 * slot never wraps: a producer whose slot would run past `size` claims the
 * rest of the lap as padding and starts at the next lap.  Space check: a
 * slot ending at virtual `end` fits iff end - tail <= lap (proof at the top
 * of queue.c).
 *
 *   virtual:  tail ........ rd ........... head
 *             |  encoded,  | published or | claimed, being filled,
 *             |  written?  | being filled | or published
 *             ^ released by the writer after its pwrite returns
 *
 * Slot layout (64-byte aligned; 32-byte header; payload; padding):
 *
 *   0  u64 state  lap << 32 | slot bytes | READY (1) | PAD (2)
 *   8  u64 ts     the producer's stamp (os.h: ns or TSC ticks)
 *  16  u64 seq    sequence number the writer gave it (0: not yet)
 *  24  u32 len    payload bytes
 *  28  u8  level  bits 0..2 the level, bit 3 zero, bits 4..7 the check
 *  29  u8  flags  LE_REC_*
 *  30  u8  reserved[2]: the submit-time sample (le__sp_code), or 0
 *  32  payload
 *
 * The check (le__slot_lvbyte) is the complement of flags bits 0..3 xor
 * the level: one flipped bit of the level, of the flags or of the check
 * leaves them disagreeing, so recovery never takes a slot's payload for
 * a deferred record's arguments or a field block when it is not (or the
 * other way round).  It rides in the store that writes level and flags
 * (submit.c, fill): a few ALU instructions, no store or load more.
 * A QUEUE of version 2 or 3 has it (version 1 has the level alone).
 *
 * The slot checksum (queue_checksum; a QUEUE of version 3): the last 4 bytes of every record slot hold the masked CRC32C
 * of header bytes 8..31 (seq as 0) and the payload, put by the producer
 * just before it publishes (le__slot_publish_ck), so a slot takes 4
 * bytes more (LE_SLOT_CSUM).  Not covered: the state word (its size is
 * checked against len, its lap against the position) and seq (the
 * writer's, stored after the check was made).  Recovery drops and names
 * a slot that fails it; nobody else reads it: a live process's own
 * memory is not checked.
 *
 * Claiming.  A producer owns [h, h + need) once it has moved head from h
 * to h + need with one CAS (positions only grow: a producer with a stale
 * head fails it).  It then stores the claim word, lap << 32 | need, at h:
 * from there on the slot's size is known, and a slot whose producer died
 * before publishing can be stepped over at recovery.  A producer that died
 * between the two leaves the FREE word of the lap below head, and nothing
 * in the slot: recovery walks over its lines (le__ring_skip_free).
 * One atomic read-modify-write per claim, not two: each is a full barrier
 * on the hot path.
 *
 * Releasing.  Slots start only on 64-byte boundaries, so only the first
 * word of each line can ever be read as a state word.  The writer sets that
 * word of every line it consumed to FREE(next lap) before it moves `tail`:
 * stale payload bytes can never pass for a state word, and the next lap's
 * producers find exactly the value they expect.  (One store per line, and
 * no two slots share a cache line, so producers never false-share.)
 *
 * A fresh file or anonymous mapping is all zeros: FREE(lap 0) everywhere.
 *
 * Blocks.  A QUEUE file is sparse: real bytes [0, backed) have blocks,
 * the rest is a hole, which reads as zeros (no slot) and must never be
 * stored into (a full file system answers with a SIGBUS).  A producer
 * claims only below `backed`; the writer doubles it once head is past
 * half, and a producer that outruns the writer grows it itself
 * (le__ring_grow), or, on a full disk, finds the queue full.  A release
 * writes no FREE word past `backed` (a pad's tail).  Once a lap went
 * round, backed == size for good.
 *
 * Returned pages.  A ring that trims (LE_TRIM_MIN, anonymous) returns the
 * pages of lines it releases while little is queued (MADV_DONTNEED) instead
 * of writing their FREE words: they read as zeros afterwards, which the
 * writer takes for no slot until a producer claims there.  Pages go only in
 * the release, before tail passes them: no producer is writing there.
 */
#ifndef LE_QUEUE_H
#define LE_QUEUE_H

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "base/crc32c.h"

#define LE_SLOT_HDR 32u
#define LE_SLOT_READY 1u
#define LE_SLOT_PAD 2u
#define LE_SLOT_ALIGN 64u
#define LE_SLOT_SIZE_MASK (~(uint32_t)(LE_SLOT_ALIGN - 1))
/* The level's bits of its byte and bit 3 (zero): a level byte of a
 * version 2 slot masked with it reads above FATAL when bit 3 is set. */
#define LE_SLOT_LEVEL_MASK 0x0fu
/* The slot checksum's bytes, at the end of a slot when the ring has it. */
#define LE_SLOT_CSUM 4u

/* The level byte of a slot of this level and these flags (see "The
 * check" above).  level 0..5, flags LE_REC_* (bits 0..3). */
static inline uint32_t le__slot_lvbyte(uint32_t level, uint32_t flags)
{
	return level | ((level ^ flags ^ 0x0fu) & 0x0fu) << 4;
}

#define LE_BUDGET_REC_BITS 24
#define LE_BUDGET_REC_MASK ((1ull << LE_BUDGET_REC_BITS) - 1)
#define LE_QUEUE_CAP_MAX ((uint32_t)LE_BUDGET_REC_MASK)
#define LE_QUEUE_BYTES_MAX (1ull << 30)

/* The QUEUE file: a 4 KiB header page, then the ring's `size` bytes.
 *   0  8  magic "LOGENGQU"      16  8  size       32  4  shard
 *   8  4  version (2, 3; 1 read) 24 8  lap        36  4  slot header (32)
 *  12  4  header bytes (4096)   40  8  boot (hash of the kernel's boot_id)
 *  60  4  masked CRC32C of bytes 0..59
 *  64  8  head (own line)      128  8  tail (own line)
 * 192  8  releasing: where a release in progress will move tail (its
 *         FREE words are being written; a crash there leaves them
 *         half-done, and recovery starts the walk here, not at tail)
 * 200 24  the last release's mark: u64 position, u64 sequence, u64 check
 *         (le__ring_mark)
 * 256 36  the clock the slots' stamps are in (le__ring_put_clock) */
#define LE_QUEUE_MAGIC "LOGENGQU"
/* 2: slots carry the check over their level and flags.  3: version 2
 * whose record slots also end with their checksum (queue_checksum): its
 * own version, so a library before it refuses the file (LE_EVERSION)
 * instead of taking its slots' sizes for damage.  A version 1 file (a
 * library before the check, killed) is still recovered, its slots without
 * the check; one of a newer version is refused, never discarded. */
#define LE_QUEUE_VERSION 2u
#define LE_QUEUE_VERSION_CSUM 3u
#define LE_QUEUE_VERSION_MIN 1u
#define LE_QUEUE_VERSION_MAX 3u
/* Above any ring le__ring_size_for makes (~2.7 GB at the largest bounds):
 * a header claiming more is not ours. */
#define LE_RING_MAX (1ull << 32)
#define LE_QUEUE_HDR 4096u
#define LE_QUEUE_HEAD_OFF 64u
#define LE_QUEUE_TAIL_OFF 128u
#define LE_QUEUE_REL_OFF 192u
#define LE_QUEUE_MARK_OFF 200u
#define LE_QUEUE_CLOCK_OFF 256u

typedef struct le__slot {
	_Atomic uint64_t state;
	uint64_t ts;
	uint64_t seq;
	uint32_t len;
	uint8_t level;
	uint8_t flags;
	uint8_t reserved[2];
} le__slot;

_Static_assert(sizeof(le__slot) == LE_SLOT_HDR, "slot header is 32 bytes");
_Static_assert(LE_QUEUE_CLOCK_OFF + 36 <= LE_QUEUE_HDR, "header page");

typedef struct le__ring {
	/* In the mapping: head (producers CAS; read by the writer and
	 * le_flush) and tail (the writer stores with release after setting
	 * FREE words; producers read with acquire before reusing memory). */
	_Atomic uint64_t *head;
	_Atomic uint64_t *tail;
	_Atomic uint64_t *rel;      /* writer only: see LE_QUEUE_REL_OFF */
	/* Process-local, constant after open. */
	uint64_t size;              /* real bytes, multiple of 64 */
	uint64_t lap;               /* power of two >= size */
	unsigned lap_shift;         /* log2(lap) */
	unsigned char *data;        /* map + LE_QUEUE_HDR */
	void *map;
	size_t map_len;
	int fd;                     /* -1: anonymous mapping */
	int reused;                 /* the file was there (a previous
	                               engine's): made anew once drained */
	int hdr_damaged;            /* its header failed its checks: its
	                               geometry was taken from its length */
	int csum;                   /* its record slots carry LE_SLOT_CSUM
	                               (a kept file's version 3; a damaged
	                               header's, what its slots show; a new
	                               file's, what le__ring_open was asked) */
	int csum_cfg;               /* what le__ring_open was asked: a
	                               renewed file's */
	uint32_t version;           /* the file's LE_QUEUE_VERSION (a damaged
	                               header's: its field if 1 or 2, else
	                               the current); 1: slots unchecked */
	/* Memory that follows use (le__ring_release's `trim`): an anonymous
	 * ring of LE_TRIM_MIN or more whose released pages may be returned
	 * to the kernel, then faulted in again `ahead` bytes before the
	 * producers reach them (le__ring_populate). */
	int trims;
	uint64_t ahead;
	int pfw;                    /* the CPU has PREFETCHW (le__prefetch_w) */
	/* Disk that follows use (le__ring_grow): a file ring's real bytes
	 * [0, backed) have their blocks (a store into a hole of a full file
	 * system would be a SIGBUS, not an error), and producers claim only
	 * there.  size once whole; anonymous rings are whole from the start.
	 * Only grows; stored with release once the blocks are there. */
	_Atomic uint64_t backed;
	_Atomic int grow_failed;    /* the last growth failed: producers
	                               refuse until the writer's succeeds */
} le__ring;

/* A file ring's first blocks, at most (le__ring_grow doubles them). */
#define LE_RING_FIRST (64u << 10)

/*
 * Give the ring blocks up to real offset `want` at least (doubling what it
 * has, up to size), without ever letting a producer store into a hole.
 * Producers call it when a claim reaches past `backed` (rare: the writer
 * grows the ring ahead of them, `writer` 1); after a failure (disk full)
 * they refuse at once (the record is dropped or waits, as for a full
 * queue) until a writer's try succeeds.  Takes no lock: threads that
 * grow at once each reserve their own range.  @return 0, or -errno.
 */
int le__ring_grow(le__ring *r, uint64_t want, int writer);

/* Smallest ring whose pages are returned when little is queued: below
 * it, the whole ring is faulted in at open (and in one huge page). */
#define LE_TRIM_MIN (4ull << 20)

static inline uint64_t le__free_word(uint64_t lap_no)
{
	return (uint64_t)(uint32_t)lap_no << 32;
}

/* Slot bytes for a slot of `room` bytes after the header. */
static inline uint32_t le__slot_bytes(uint32_t room)
{
	return (LE_SLOT_HDR + room + LE_SLOT_ALIGN - 1) & LE_SLOT_SIZE_MASK;
}

/*
 * Take one record of len payload bytes from the budget if both limits allow.
 * @return the budget word after the take, or 0 when full.
 */
static inline uint64_t le__budget_take(_Atomic uint64_t *b, uint32_t len,
                                       uint64_t cap_rec, uint64_t cap_bytes)
{
	uint64_t add = 1u | (uint64_t)len << LE_BUDGET_REC_BITS;
	uint64_t cur = atomic_load_explicit(b, memory_order_relaxed);

	do {
		if ((cur & LE_BUDGET_REC_MASK) + 1 > cap_rec ||
		    (cur >> LE_BUDGET_REC_BITS) + len > cap_bytes)
			return 0;
		/* relaxed: the budget is a counter; memory reuse is ordered
		 * by the ring's tail (acquire in le__ring_reserve). */
	} while (!atomic_compare_exchange_weak_explicit(
		b, &cur, cur + add, memory_order_relaxed, memory_order_relaxed));
	return cur + add;
}

static inline void le__budget_give(_Atomic uint64_t *b, uint64_t recs,
                                   uint64_t bytes)
{
	atomic_fetch_sub_explicit(b, recs | bytes << LE_BUDGET_REC_BITS,
	                          memory_order_release);
}

/*
 * Claim `need` bytes (a multiple of 64) in the ring.
 * @return the slot (claimed, not published: the caller fills and
 * publishes it), or NULL when the ring has no room.  *used gets the ring
 * bytes in use after the claim, for the caller's wake-up decision.
 */
#define LE_PRODUCER_AHEAD 128u

/*
 * Ask for the line at p for writing.  __builtin_prefetch(p, 1) is no such
 * request on baseline x86-64: without -mprfchw GCC emits PREFETCHT0, a read
 * prefetch, so the line arrives shared and the claim's CAS then waits for
 * the writer's core to give up its copy -- as long a stall as no prefetch
 * at all, on the lines the writer set FREE in the last lap.  PREFETCHW
 * asks for the line exclusive; used where CPUID says the CPU has it.
 */
static inline void le__prefetch_w(const le__ring *r, const void *p)
{
#if defined(__x86_64__) || defined(__i386__)
	if (r->pfw) {
		__asm__ volatile("prefetchw %0" : : "m"(*(const char *)p));
		return;
	}
#else
	(void)r;
#endif
	__builtin_prefetch(p, 1);
}

/* always_inline: with the growth branch GCC no longer inlines it by itself,
 * and the call costs every le_write a frame and spilled registers. */
static inline __attribute__((always_inline)) le__slot *
le__ring_reserve(le__ring *r, uint32_t need, uint64_t *used)
{
	const uint64_t mask = r->lap - 1;
	uint64_t h = atomic_load_explicit(r->head, memory_order_relaxed);

	for (;;) {
		uint64_t off = h & mask, lapno = h >> r->lap_shift;
		/* acquire: the writer set the FREE words (and returned pages)
		 * before it moved tail; our stores into the slot come after. */
		uint64_t t = atomic_load_explicit(r->tail, memory_order_acquire);
		if (off >= r->size) {
			/* A slot ended exactly at `size`: no line is left to
			 * hold a pad word, so step to the next lap unclaimed
			 * (the writer steps the same way, in le__ring_peek). */
			uint64_t next = h - off + r->lap;
			if (atomic_compare_exchange_weak_explicit(
				    r->head, &h, next, memory_order_relaxed,
				    memory_order_relaxed))
				h = next;
			continue;
		}
		int pad = off + need > r->size;
		/* A pad writes one line, a slot all of its own: both only
		 * where the file has blocks (grown first, off the common
		 * path: a whole ring never takes the branch). */
		if (__builtin_expect(off + (pad ? LE_SLOT_ALIGN : need) >
		                             atomic_load_explicit(
		                                     &r->backed,
		                                     memory_order_acquire),
		                     0)) {
			if (le__ring_grow(r, off + (pad ? LE_SLOT_ALIGN : need),
			                  0) < 0)
				return NULL;
			continue;
		}
		uint32_t take = pad ? (uint32_t)(r->lap - off) : need;
		/* A pad writes only its state word (its line must be free);
		 * a slot needs all of [h, h + need) free. */
		if ((pad ? h + LE_SLOT_ALIGN : h + need) - t > r->lap)
			return NULL;
		/* seq_cst on success: the claim then comes before any
		 * seq_cst load the caller makes next in the one order a
		 * consumer going to sleep uses too (the engine's idle
		 * writer); on x86 it is the same locked instruction as a
		 * relaxed CAS.  Otherwise
		 * head orders nothing: tail's acquire above and the
		 * publishing store do.  A failure reloads h. */
		if (!atomic_compare_exchange_weak_explicit(
			    r->head, &h, h + take, memory_order_seq_cst,
			    memory_order_relaxed))
			continue;
		le__slot *s = (le__slot *)(r->data + off);
		uint64_t claim = le__free_word(lapno) | take;
		if (pad) {
			/* release: the writer that sees the pad steps over it */
			atomic_store_explicit(&s->state,
			                      claim | LE_SLOT_PAD | LE_SLOT_READY,
			                      memory_order_release);
			h += take;
			continue;
		}
		atomic_store_explicit(&s->state, claim, memory_order_relaxed);
		/* The claim word before any byte of the slot, in the order a
		 * kill leaves them (the CPU keeps stores in order; this keeps
		 * the compiler from sinking it): a slot with bytes but no
		 * claim word would read as damage. */
		atomic_signal_fence(memory_order_release);
		/* Ask for the lines a record or two on, for writing:
		 * their trip from the writer's core (or from memory)
		 * then overlaps this record instead of stalling a later
		 * one.  Near, not far: a line asked for many records
		 * ahead is the more often gone again by its claim the
		 * longer it waits (perf/burst-floor.c counts the calls
		 * that stall), and a burst's calls come a few tens of
		 * nanoseconds apart.  Only lines already released: in a
		 * full ring they hold records the writer has yet to
		 * read, and taking them now only makes both sides miss
		 * twice. */
		uint64_t pf = h + need + LE_PRODUCER_AHEAD;
		if (pf + need - t <= r->lap)
			for (uint64_t p = pf, e = pf + need; p < e;
			     p += LE_SLOT_ALIGN)
				le__prefetch_w(r, r->data + (p & mask));
		*used = h + need - t;
		return s;
	}
}

/* Publish a filled slot (its claim word plus READY): release pairs with
 * the writer's acquire load.  Only the claimer writes the word now. */
static inline void le__slot_publish(le__slot *s)
{
	uint64_t st = atomic_load_explicit(&s->state, memory_order_relaxed);
	atomic_store_explicit(&s->state, st | LE_SLOT_READY,
	                      memory_order_release);
}

/* The masked CRC32C a checksummed slot ends with (see "The slot
 * checksum" above), as recovery computes it: bytes 8..31 with seq taken
 * as the 0 the producer left there, then len payload bytes. */
static inline uint32_t le__slot_crc(const le__slot *s, uint32_t len)
{
	unsigned char h[LE_SLOT_HDR - 8];
	memcpy(h, (const unsigned char *)s + 8, sizeof h);
	memset(h + 8, 0, 8); /* seq */
	uint32_t c = le__crc32c_extend(0, h, sizeof h);
	return le__crc_mask(le__crc32c_extend(c, s + 1, len));
}

/* Publish a slot of a ring with slot checksums (r->csum): its check into
 * its last 4 bytes, then READY.  One CRC over the header's bytes 8..31
 * and the payload, which follow each other (seq is still the producer's
 * 0).  The claim word holds the slot's size. */
static inline void le__slot_publish_ck(const le__ring *r, le__slot *s)
{
	if (__builtin_expect(r->csum, 0)) {
		uint32_t n = (uint32_t)atomic_load_explicit(
			&s->state, memory_order_relaxed) & LE_SLOT_SIZE_MASK;
		uint32_t c = le__crc_mask(le__crc32c_extend(
			0, (const unsigned char *)s + 8,
			LE_SLOT_HDR - 8 + s->len));
		memcpy((unsigned char *)s + n - LE_SLOT_CSUM, &c, sizeof c);
	}
	le__slot_publish(s);
}

/* The ring bytes a record slot of `room` bytes after its header takes in
 * r: room, and the check when r has it. */
static inline uint32_t le__ring_slot_bytes(const le__ring *r, uint32_t room)
{
	return le__slot_bytes(room + (r->csum ? LE_SLOT_CSUM : 0));
}

/* What the writer finds at position *rd. */
enum { LE_PEEK_EMPTY, LE_PEEK_RECORD, LE_PEEK_CLAIMED };

/* A ring's geometry, constant after open, as the writer's loop keeps it:
 * in locals (registers), where the fields of *r would be loaded again
 * after each store the loop makes into the slots and the batch (any of
 * them could, to the compiler, be one of those fields). */
typedef struct le__ring_geo {
	unsigned char *data;
	uint64_t size, lap;
	unsigned lap_shift;
} le__ring_geo;

static inline le__ring_geo le__ring_geometry(const le__ring *r)
{
	return (le__ring_geo){.data = r->data, .size = r->size,
	                      .lap = r->lap, .lap_shift = r->lap_shift};
}

/*
 * Look at position *rd, stepping over padding.  @return LE_PEEK_RECORD
 * (published: *out, *bytes set), LE_PEEK_CLAIMED (claimed, not yet
 * published: *out, *bytes set -- at recovery, an abandoned slot), or
 * LE_PEEK_EMPTY (nothing claimed there yet).
 */
static inline int le__ring_peek_geo(const le__ring_geo *r, uint64_t *rd,
                                    le__slot **out, uint32_t *bytes)
{
	const uint64_t mask = r->lap - 1;

	for (;;) {
		uint64_t pos = *rd;
		if ((pos & mask) >= r->size) {
			*rd += r->lap - (pos & mask); /* see le__ring_reserve */
			continue;
		}
		le__slot *s = (le__slot *)(r->data + (pos & mask));
		/* acquire: pairs with the producer's publishing store */
		uint64_t st = atomic_load_explicit(&s->state,
		                                   memory_order_acquire);
		uint32_t n = (uint32_t)st & LE_SLOT_SIZE_MASK;
		if ((uint32_t)(st >> 32) != (uint32_t)(pos >> r->lap_shift) ||
		    n == 0)
			return LE_PEEK_EMPTY;
		/* A pad runs exactly to the end of its lap and a slot ends
		 * within the ring: anything else is a damaged word (a queue
		 * file written over), never followed out of the ring. */
		if ((st & (LE_SLOT_PAD | LE_SLOT_READY)) ==
		    (LE_SLOT_PAD | LE_SLOT_READY)) {
			if (n != r->lap - (pos & mask))
				return LE_PEEK_EMPTY;
			*rd += n;
			continue;
		}
		if ((pos & mask) + n > r->size)
			return LE_PEEK_EMPTY;
		*out = s;
		*bytes = n;
		return (st & LE_SLOT_READY) ? LE_PEEK_RECORD : LE_PEEK_CLAIMED;
	}
}

static inline int le__ring_peek(const le__ring *r, uint64_t *rd,
                                le__slot **out, uint32_t *bytes)
{
	le__ring_geo g = le__ring_geometry(r);

	return le__ring_peek_geo(&g, rd, out, bytes);
}

/*
 * Open a shard's ring.  path NULL: an anonymous mapping (nothing survives
 * the process).  Otherwise the QUEUE file at path: created with `size`
 * bytes if missing or unreadable, else mapped with the geometry it has
 * (which may differ from `size`: drain it, then le__ring_renew); mode:
 * the file's permission bits when it is created; csum: its record slots
 * carry checksums (a file made now or by le__ring_renew; a kept file's
 * slots are as its version says; an anonymous ring never: nobody
 * recovers it).
 * @return 0, or -errno / LE_ECORRUPT (set le_errmsg) on failure.
 */
int le__ring_open(le__ring *r, const char *path, uint64_t size,
                  uint32_t shard, unsigned mode, int csum);
void le__ring_close(le__ring *r);

/*
 * The clock the producers' stamps are in (os.h: ns, or TSC ticks with the
 * conversion to ns), kept in the file's header page by the engine that
 * owns it, so that a process recovering the file dates the records as
 * their own writer would have, whatever its own stamps are (LE_NO_TSC set
 * or not, another version, another clock source).  get: 0, or
 * LE_ECORRUPT when the file holds none (a file from before this field, or
 * a put cut short by the kill).
 */
struct le__clock;
void le__ring_put_clock(le__ring *r, const struct le__clock *c);
int le__ring_get_clock(const le__ring *r, struct le__clock *c);
/* 1 when the clock area holds anything (get failing then means damage). */
int le__ring_has_clock(const le__ring *r);

/*
 * The mark: the record slots from ring position pos on get sequence
 * numbers from seq on, in ring order (markers may take numbers between
 * them).  The writer puts it before each release (the release's end and
 * its next sequence) and at start; recovery counts the records its
 * segments hold from seq on and skips that many slots from pos -- what a
 * kill between a batch's write and its release, a copied directory or a
 * second recovery of the same file would otherwise write twice.  It also
 * witnesses tail and the releasing word.  Three words, the last a check
 * of the other two, so a kill between the stores (or damage) reads as no
 * mark.  get: 0, or LE_ECORRUPT when there is none.
 */
void le__ring_mark(le__ring *r, uint64_t pos, uint64_t seq);
int le__ring_get_mark(const le__ring *r, uint64_t *pos, uint64_t *seq);

/*
 * Recovery after damage: the first position in (from, end) on a 64-byte
 * line where a slot a producer could have written starts -- published,
 * of that position's lap, within the ring, its header consistent
 * (ok(r, slot, bytes) says), and followed by another such slot, a pad, or
 * end.  @return 1 (*at set), or 0 when there is none.
 */
int le__ring_resync(const le__ring *r, uint64_t from, uint64_t end,
                    int (*ok)(const le__ring *, const le__slot *, uint32_t),
                    uint64_t *at);

/*
 * Whether a slot can start at pos: 2 when pos is end or past it, or in
 * the lap's unreal gap, or the word there is a state word of pos's lap
 * with a size that fits (a record slot, published or not, or a pad to
 * the lap's end); 1 when it is pos's lap's FREE word (a claim whose
 * producer died before its claim word -- or any line no producer wrote,
 * such as a slot's own padding: weak); 0 when none can.  What recovery
 * asks of where a slot's size says the next one begins, before it
 * trusts that size.
 */
int le__ring_starts(const le__ring *r, uint64_t pos, uint64_t end);

/*
 * Past a slot whose producer moved head and died before its claim word:
 * the first position in [from, end) whose line does not hold the FREE word
 * of its lap (every line of a slot never claimed does: the release writes
 * it to each line, and a new file is zeros), stepping over each lap's end;
 * end when there is none.
 */
uint64_t le__ring_skip_free(const le__ring *r, uint64_t from, uint64_t end);

/* Tests simulate a reboot by setting the boot id queue files are stamped
 * with and checked against (0: the kernel's boot_id again). */
void le__boot_id_set(uint64_t id);
/* FNV-1a of the kernel's boot_id (or the test's): which boot a file
 * belongs to (the QUEUE header, the live counters page). */
uint64_t le__boot_id(void);

/* 1 when the QUEUE file at path (of this boot) holds queued records. */
int le__ring_file_busy(const char *path, uint32_t shard);

/* 1 when the ring holds claimed slots (head != tail). */
int le__ring_busy(const le__ring *r);

/* Where a dead writer's walk must resume: tail, or past a release that
 * was cut short (every slot before it was already written). */
uint64_t le__ring_resume(const le__ring *r);

/* A ring file a previous engine left (reused), once drained: made anew,
 * empty, with `size` bytes and positions from 0.  A file this engine
 * made is left as it is.  @return 0 or an error. */
int le__ring_renew(le__ring *r, const char *path, uint64_t size,
                   uint32_t shard);

/* Mark each line behind virtual [from, to) FREE for its next lap, and move
 * tail to `to`.  trim (a ring that trims): the whole pages in the range
 * are returned to the kernel instead (they read as zeros: no slot, to the
 * writer, until a producer claims there). */
void le__ring_release(le__ring *r, uint64_t from, uint64_t to, int trim);
/* Fault in, writable, the pages under virtual [from, to) (a ring that
 * trims: before the producers get there).  Changes no byte. */
void le__ring_populate(le__ring *r, uint64_t from, uint64_t to);

/* Size a shard's ring so that the budget, not the ring, is always what
 * limits a producer: every queued record could be in this one shard. */
uint64_t le__ring_size_for(uint64_t cap_rec, uint64_t cap_bytes,
                           uint32_t max_record, int csum);

#endif
