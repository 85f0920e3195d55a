/*
 * queue.c -- ring set-up, release and sizing.  The hot-path operations are
 * inline in queue.h.
 *
 * Why `end - tail <= lap` is the whole space check.  Let the live region be
 * virtual [tail, head) and a new slot be [start, end), never crossing a lap
 * boundary and never past `size` within its lap.
 *  - Same lap as tail: the slot lies at or after head's real offset, and
 *    live data lies before it, so nothing overlaps (and end - tail < lap).
 *  - Next lap: the slot occupies real [0, end & mask) and live data starts
 *    at tail's real offset; they are disjoint iff (end & mask) <= (tail &
 *    mask), i.e. iff end - tail <= lap.
 *  - Two laps ahead: end - tail > lap, refused.
 * Padding and the unreal gap [size, lap) of each lap count as live until
 * released, which is what makes the virtual difference the right measure.
 */
#define _GNU_SOURCE
#include "queue.h"

#include <errno.h>
#include <sys/mman.h>

int le__ring_init(le__ring *r, uint64_t size)
{
	uint64_t lap = LE_SLOT_ALIGN;

	while (lap < size)
		lap <<= 1;
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	atomic_init(&r->head, 0);
	atomic_init(&r->tail, 0);
	r->size = size;
	r->lap = lap;
	r->data = p;
	return 0;
}

void le__ring_free(le__ring *r)
{
	if (r->data)
		munmap(r->data, r->size);
	r->data = NULL;
}

void le__ring_release(le__ring *r, uint64_t from, uint64_t to)
{
	uint64_t mask = r->lap - 1;

	while (from < to) {
		uint64_t off = from & mask;
		uint64_t lap_end = from - off + r->lap;
		uint64_t stop = to < lap_end ? to : lap_end;
		uint64_t real_end = off + (stop - from);
		if (real_end > r->size)
			real_end = r->size;
		for (; off < real_end; off += LE_SLOT_ALIGN)
			*(uint64_t *)(r->data + off) = 0;
		from = stop;
	}
	/* release: producers that see the new tail (acquire) see zeros. */
	atomic_store_explicit(&r->tail, to, memory_order_release);
}

uint64_t le__ring_size_for(uint64_t cap_rec, uint64_t cap_bytes,
                           uint32_t max_record)
{
	/* payload + per-record header and alignment + one pad and one slot
	 * of slack for the lap boundary (see queue.h). */
	uint64_t max_slot = le__slot_bytes(max_record);
	uint64_t s = cap_bytes + cap_rec * (LE_SLOT_HDR + LE_SLOT_ALIGN - 1) +
	             2 * max_slot;
	return (s + 4095) & ~(uint64_t)4095;
}
