/*
 * queue.h -- the producer/consumer queue: a global budget word and one
 * variable-length ring per shard.  Everything here is position arithmetic
 * on offsets, never pointers into the ring, so the ring and its control
 * words can live in a shared file mapping (the crash-safety work moves them
 * there); only `data` is a process-local base address.
 *
 * Budget.  One 64-bit word counts what is queued in all shards: records in
 * bits 0..23, payload bytes in bits 24..63.  A producer takes (1, len) with
 * one CAS that checks both limits, so queue_capacity and
 * queue_capacity_bytes hold globally and exactly; a writer gives its batch
 * back with one fetch_sub after the batch is in the segment file.
 *
 * Ring.  Positions are virtual byte counts that only grow.  A lap is
 * `lap` virtual bytes (a power of two) of which the first `size` are real
 * memory; position p lives at data[p & (lap - 1)].  A slot never wraps: a
 * producer whose slot would run past `size` pads the rest of the lap and
 * starts at the next lap.  Space check: a slot ending at virtual `end` fits
 * iff end - tail <= lap (see the proof in queue.c's header comment).
 *
 *   virtual:  tail ........ rd ........... head
 *             |  written?  | encoded, not | reserved and
 *             |  no: held  | yet written  | being filled / ready
 *             ^ released by the writer after its pwrite returns
 *
 * Slot layout (64-byte aligned, 24-byte header, payload, padding):
 *
 *   0  u32 state   0: not published.  Else slot bytes | flag bits:
 *                  bit 0 READY, bit 1 PAD (skip `bytes`; no record)
 *   4  u32 len     payload bytes
 *   8  u64 ts      ns since the epoch, taken by the producer
 *  16  u8  level
 *  17  u8  flags   LE_REC_*
 *  18  6 bytes     reserved
 *  24  payload
 *
 * Slots start only on 64-byte boundaries, so only the first word of each
 * 64-byte line can ever be read as a state word.  The writer zeroes that
 * word of every line it consumed before it moves `tail`; so a state word
 * the consumer reads is either 0 (not yet published) or one a producer
 * stored in this lap: stale payload bytes can never pass for a published
 * slot header.  (One store per line instead of a memset of the region; and
 * no two slots share a cache line, so producers never false-share.)
 */
#ifndef LE_QUEUE_H
#define LE_QUEUE_H

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#define LE_SLOT_HDR 24u
#define LE_SLOT_READY 1u
#define LE_SLOT_PAD 2u
#define LE_SLOT_ALIGN 64u
#define LE_SLOT_SIZE_MASK (~(uint32_t)7)

#define LE_BUDGET_REC_BITS 24
#define LE_BUDGET_REC_MASK ((1ull << LE_BUDGET_REC_BITS) - 1)
#define LE_QUEUE_CAP_MAX ((uint32_t)LE_BUDGET_REC_MASK)
#define LE_QUEUE_BYTES_MAX (1ull << 30)

typedef struct le__slot {
	_Atomic uint32_t state;
	uint32_t len;
	uint64_t ts;
	uint8_t level;
	uint8_t flags;
	uint8_t reserved[6];
} le__slot;

_Static_assert(sizeof(le__slot) == LE_SLOT_HDR, "slot header is 24 bytes");

typedef struct le__ring {
	/* Written by producers (CAS); read by the writer. */
	_Alignas(64) _Atomic uint64_t head;
	/* Written by the writer only (release, after zeroing); read by
	 * producers with acquire before they reuse the memory. */
	_Alignas(64) _Atomic uint64_t tail;
	/* Constant after init. */
	_Alignas(64) uint64_t size; /* real bytes, multiple of 8 */
	uint64_t lap;               /* power of two >= size */
	unsigned char *data;
} le__ring;

/* Slot bytes for a payload of len bytes. */
static inline uint32_t le__slot_bytes(uint32_t len)
{
	return (LE_SLOT_HDR + len + LE_SLOT_ALIGN - 1) & ~(LE_SLOT_ALIGN - 1);
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
 * Reserve `need` bytes (a multiple of 64) in the ring.
 * @return the slot (state still 0: the caller fills and publishes it), or
 * NULL when the ring has no room.  *used gets the ring bytes in use after
 * the reservation, for the caller's wake-up decision.
 */
static inline le__slot *le__ring_reserve(le__ring *r, uint32_t need,
                                         uint64_t *used)
{
	uint64_t mask = r->lap - 1;
	uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
	uint64_t start, end, off, t;

	for (;;) {
		off = h & mask;
		start = (off + need > r->size) ? h - off + r->lap : h;
		end = start + need;
		/* acquire: the writer zeroed this memory before it moved tail;
		 * our stores into the slot must come after its zeroing. */
		t = atomic_load_explicit(&r->tail, memory_order_acquire);
		if (end - t > r->lap)
			return NULL;
		if (atomic_compare_exchange_weak_explicit(
			    &r->head, &h, end, memory_order_relaxed,
			    memory_order_relaxed))
			break;
	}
	if (start != h && off + LE_SLOT_HDR <= r->size) {
		/* Tell the writer to skip to the next lap.  When fewer than
		 * LE_SLOT_HDR bytes were left it skips without being told. */
		le__slot *pad = (le__slot *)(r->data + off);
		atomic_store_explicit(&pad->state,
		                      (uint32_t)(start - h) | LE_SLOT_PAD |
		                              LE_SLOT_READY,
		                      memory_order_release);
	}
	*used = end - t;
	return (le__slot *)(r->data + (start & mask));
}

/* Publish a filled slot: release pairs with the writer's acquire load. */
static inline void le__slot_publish(le__slot *s, uint32_t bytes)
{
	atomic_store_explicit(&s->state, bytes | LE_SLOT_READY,
	                      memory_order_release);
}

/* Ring of a shard: init/free (anonymous mapping, zero-filled). */
int le__ring_init(le__ring *r, uint64_t size);
void le__ring_free(le__ring *r);

/* Zero the first word of each line behind virtual [from, to) and move
 * tail to `to`. */
void le__ring_release(le__ring *r, uint64_t from, uint64_t to);

/* Size a shard's ring so that the budget, not the ring, is always what
 * limits a producer: every queued record could be in this one shard. */
uint64_t le__ring_size_for(uint64_t cap_rec, uint64_t cap_bytes,
                           uint32_t max_record);

#endif
