/*
 * test_ringmem.c -- a large queue in process memory holds resident only
 * what is in use (queue.h, "Returned pages"), and returning pages loses,
 * reorders or duplicates no record; a producer whose head is a lap old
 * never keeps a returned word it finds zero.
 */
#include "harness.h"

#include <sys/mman.h>

#include "engine.h"
#include "logtest.h"
#include "queue.h"

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

/*
 * A 32 MiB queue at a light load (about 12 MB/s of ring, several laps):
 * what stays resident is what is queued plus the pages faulted in ahead,
 * not the ring; and every record comes back, in order.
 */
TEST(a_lightly_used_large_queue_keeps_little_of_its_ring_resident)
{
	le_config c;
	le_engine *e;
	char b[128];

	t_tmpdir(dir);
	le_config_init(&c);
	c.dir = dir;
	c.mapped_queue = 0; /* process memory */
	c.durability = LE_SYNC_NONE;
	c.queue_capacity_bytes = 32u << 20;
	c.overflow = LE_OVERFLOW_BLOCK;
	CHECK_RC(le_open(&e, &c));
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
	CHECK_EQ(le_close(e), 0);
	long next = 0;
	CHECK(read_all(dir, LE_RECOVER_ABSOLUTE, in_order, &next) >= 0);
	CHECK_EQ(next, n);
	t_rmrf(dir);
}

/* The same ring under a load that goes round it several times a second
 * keeps its pages (nothing to gain, a fault per page to lose), and loses
 * nothing either. */
TEST(a_busy_large_queue_loses_nothing)
{
	le_config c;
	le_engine *e;
	char b[128];

	t_tmpdir(dir);
	le_config_init(&c);
	c.dir = dir;
	c.mapped_queue = 0;
	c.durability = LE_SYNC_NONE;
	c.queue_capacity_bytes = 8u << 20;
	c.overflow = LE_OVERFLOW_BLOCK;
	CHECK_RC(le_open(&e, &c));
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
	CHECK_EQ(le_close(e), 0);
	long next = 0;
	CHECK(read_all(dir, LE_RECOVER_ABSOLUTE, in_order, &next) >= 0);
	CHECK_EQ(next, n);
	t_rmrf(dir);
}

/*
 * A zero word is FREE for its next lap only: a producer holding a head
 * from the lap before (the position the last release consumed, and
 * returned) gives the word back; one at the next lap's position keeps it.
 * The detector is proved on both sides.
 */
TEST(a_stale_producer_never_keeps_a_returned_word)
{
	le__ring r;
	CHECK_RC(le__ring_open(&r, NULL, 8u << 20, 0, 0640));
	CHECK(r.trims);
	le__slot *s = (le__slot *)(r.data + 4096);
	uint64_t h = r.lap + 4096; /* lap 1 */
	uint64_t claim = le__free_word(1) | 192;

	/* next-lap position: tail and `trimming` are at or before it */
	atomic_store(r.tail, h);
	atomic_store(r.head, h);
	atomic_store(&r.trimming, h);
	atomic_store(&s->state, 0);
	CHECK_EQ(le__ring_claim_zero(&r, s, h, claim), 1);
	CHECK_EQ(atomic_load(&s->state), claim);

	/* stale: the release that returned the page moved tail past h */
	atomic_store(&s->state, 0);
	atomic_store(r.tail, h + r.lap);
	CHECK_EQ(le__ring_claim_zero(&r, s, h, claim), 0);
	CHECK_EQ(atomic_load(&s->state), 0);

	/* stale, tail not yet stored: `trimming` (stored first) tells */
	atomic_store(r.tail, h);
	atomic_store(&r.trimming, h + 8192);
	CHECK_EQ(le__ring_claim_zero(&r, s, h, claim), 0);
	CHECK_EQ(atomic_load(&s->state), 0);

	/* a word not zero (claimed by another): not ours */
	atomic_store(&r.trimming, h);
	atomic_store(&s->state, le__free_word(1) | 64);
	CHECK_EQ(le__ring_claim_zero(&r, s, h, claim), 0);
	le__ring_close(&r);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	RUN(a_stale_producer_never_keeps_a_returned_word);
	RUN(a_lightly_used_large_queue_keeps_little_of_its_ring_resident);
	RUN(a_busy_large_queue_loses_nothing);
	return t_done();
}
