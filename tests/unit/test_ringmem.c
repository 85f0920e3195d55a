/*
 * test_ringmem.c -- a large queue in process memory holds resident only
 * what is in use (queue.h, "Returned pages"), and returning pages loses,
 * reorders or duplicates no record; a producer whose head is a lap old
 * never keeps a returned word it finds zero.
 */
#include "harness.h"

#include <sys/mman.h>

#include "engine/shard.h"
#include "logtest.h"
#include "queue/queue.h"

static char dir[256];

/* Resident bytes of the ring's mapping (mincore). */
static uint64_t resident(const le__ring *r)
{
	size_t pages = (r->map_len + 4095) / 4096;
	unsigned char *v = malloc(pages);
	CHECK(v && mincore(r->map, r->map_len, v) == 0);
	uint64_t n = 0;
	for (size_t i = 0; i < pages; i++)
		n += v[i] & 1;
	free(v);
	return n * 4096;
}

/* Records "r <k>" read back in order, once each: *arg is the next k. */
static void in_order(const le_record *r, void *arg)
{
	long *next = arg, k;
	char b[64];
	snprintf(b, sizeof b, "%.*s", (int)(r->len < 60 ? r->len : 60),
	         (const char *)r->payload);
	CHECK(sscanf(b, "r %ld", &k) == 1);
	CHECK_EQ(k, *next);
	(*next)++;
}

/* An engine on a new dir with a queue of `bytes` in process memory
 * (mapped_queue 0), producers blocked rather than dropping. */
static le_engine *open_ring(uint64_t bytes)
{
	le_config c;
	le_engine *e;

	t_tmpdir(dir);
	le_config_init(&c);
	c.dir = dir;
	c.mapped_queue = 0;
	c.durability = LE_SYNC_NONE;
	c.queue_capacity_bytes = bytes;
	c.overflow = LE_OVERFLOW_BLOCK;
	CHECK_RC(le_open(&e, &c));
	return e;
}

/* Close e: its n records "r 0" .. "r n-1" read back in order; dir goes. */
static void close_and_read_in_order(le_engine *e, long n)
{
	long next = 0;
	CHECK_EQ(le_close(e), 0);
	CHECK(read_all(dir, LE_RECOVER_ABSOLUTE, in_order, &next) >= 0);
	CHECK_EQ(next, n);
	t_rmrf(dir);
}

/*
 * A 32 MiB queue at a light load (about 12 MB/s of ring, several laps):
 * what stays resident is what is queued plus the pages faulted in ahead,
 * not the ring; and every record comes back, in order.
 */
TEST(a_lightly_used_large_queue_keeps_little_of_its_ring_resident)
{
	char b[128];
	le_engine *e = open_ring(32u << 20);
	le__ring *r = &e->shards[0].ring;
	CHECK(r->trims);
	memset(b, 'x', sizeof b);
	long n = 0;
	uint64_t most = 0;
	/* 60,000 records of 128 B (a 192-byte slot each) a second, for 5 s */
	for (int ms = 0; ms < 5000; ms++) {
		for (int i = 0; i < 60; i++, n++) {
			int k = snprintf(b, sizeof b, "r %ld ", n);
			b[k] = 'x';
			CHECK_EQ(le_write(e, 0, LE_INFO, b, 128), 0);
		}
		usleep(1000);
		if (ms % 500 == 499 && ms > 1500) {
			uint64_t res = resident(r);
			if (res > most)
				most = res;
		}
	}
	uint64_t laps = atomic_load(r->tail) / r->lap;
	fflush(stdout);
	printf("  (%ld records, %" PRIu64 " laps of a %" PRIu64 " MiB ring; "
	       "at most %" PRIu64 " KiB of it resident)\n", n, laps,
	       r->size >> 20, most >> 10);
	fflush(stdout);
	CHECK(laps >= 1);
	/* queued (a batch: tens of KiB) + ahead (2 MiB) + pages not yet
	 * returned: far below the ring */
	CHECK(most < r->size / 4);
	close_and_read_in_order(e, n);
}

/* The same ring under a load that goes round it several times a second
 * keeps its pages (nothing to gain, a fault per page to lose), and loses
 * nothing either. */
TEST(a_busy_large_queue_loses_nothing)
{
	char b[128];
	le_engine *e = open_ring(8u << 20);
	memset(b, 'x', sizeof b);
	long n = 0;
	/* bursts with pauses: light, then busy, then light again */
	for (int round = 0; round < 30; round++) {
		for (int i = 0; i < 20000; i++, n++) {
			int k = snprintf(b, sizeof b, "r %ld ", n);
			b[k] = 'x';
			CHECK_EQ(le_write(e, 0, LE_INFO, b, 100), 0);
		}
		usleep(round % 3 ? 2000 : 150000);
	}
	close_and_read_in_order(e, n);
}

/*
 * A claim is one CAS on head, then the claim word: head moves past the
 * slot, the word says its lap and size (not READY), a slot that would run
 * past the ring's end leaves a pad (READY) and starts the next lap, and a
 * ring without room leaves head where it was.  A returned page (zeros)
 * takes a claim like any released line.
 */
TEST(a_claim_moves_head_past_its_slot_and_states_its_size)
{
	le__ring r;
	uint64_t used = 0;
	CHECK_RC(le__ring_open(&r, NULL, 8u << 20, 0, 0640, 0));
	CHECK(r.trims);

	le__slot *s = le__ring_reserve(&r, 192, &used);
	CHECK(s == (le__slot *)r.data);
	CHECK_EQ(atomic_load(r.head), 192);
	CHECK_EQ(atomic_load(&s->state), le__free_word(0) | 192);
	CHECK_EQ(used, 192);

	/* the end of the ring: a pad to the lap's end, the slot at the next
	 * lap's start, its claim word of lap 1 over a returned (zero) page */
	uint64_t h = r.size - 64;
	atomic_store(r.head, h);
	atomic_store(r.tail, h);
	le__slot *pad = (le__slot *)(r.data + h);
	atomic_store(&pad->state, le__free_word(0));
	atomic_store((_Atomic uint64_t *)r.data, 0);
	s = le__ring_reserve(&r, 128, &used);
	CHECK(s == (le__slot *)r.data);
	CHECK_EQ(atomic_load(&pad->state),
	         le__free_word(0) | (uint32_t)(r.lap - (r.size - 64)) |
	                 LE_SLOT_PAD | LE_SLOT_READY);
	CHECK_EQ(atomic_load(r.head), r.lap + 128);
	CHECK_EQ(atomic_load(&s->state), le__free_word(1) | 128);

	/* no room: a slot of 128 from head would end a lap and 64 past tail */
	atomic_store(r.tail, 192);
	CHECK(le__ring_reserve(&r, 128, &used) == NULL);
	CHECK_EQ(atomic_load(r.head), r.lap + 128);
	le__ring_close(&r);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	RUN(a_claim_moves_head_past_its_slot_and_states_its_size);
	RUN(a_lightly_used_large_queue_keeps_little_of_its_ring_resident);
	RUN(a_busy_large_queue_loses_nothing);
	return t_done();
}
