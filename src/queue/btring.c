/*
 * btring.c -- the flight recorder's ring (btring.h draws its layout and
 * the protocol between producers and readers).
 */
#define _GNU_SOURCE
#include "queue/btring.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>

#include "base/internal.h"
#include "base/os.h"
#include "record/format.h"
#include "queue/queue.h"

#include <sys/stat.h>

static uint32_t round_cap(uint32_t cap)
{
	uint32_t c = 16;
	while (c < cap && c < (1u << 24))
		c <<= 1;
	return c;
}

static void put_header(unsigned char *m, uint32_t cap, uint32_t shard,
                       uint32_t unit)
{
	le__put32(m + 32, unit);
	le__put64(m + 40, le__boot_id());
	memcpy(m, LE_BT_MAGIC, 8);
	le__put32(m + 8, LE_BT_VERSION);
	le__put32(m + 12, LE_BT_HDR);
	le__put32(m + 16, cap);
	le__put32(m + 20, LE_BT_ENTRY);
	le__put32(m + 24, shard);
	le__put32(m + 28, 1);
}

int le__btring_open(le__btring *r, const char *path, uint32_t cap,
                    uint32_t shard, uint32_t unit, unsigned mode)
{
	memset(r, 0, sizeof *r);
	r->fd = -1;
	r->cap = round_cap(cap);
	r->map_len = LE_BT_HDR + (size_t)r->cap * LE_BT_ENTRY;
	int flags = MAP_PRIVATE | MAP_ANONYMOUS;
	if (path) {
		r->fd = le__open_in(path, LE_IN_SHARD, O_RDWR | O_CREAT,
		                    (mode_t)mode);
		if (r->fd < 0)
			return r->fd;
		int rc = le__ftruncate(r->fd, 0);
		if (rc == 0)
			rc = le__ftruncate(r->fd, r->map_len);
		/* blocks now: a store into a hole of a full disk would be a
		 * SIGBUS in a producer */
		if (rc == 0)
			rc = le__prealloc(r->fd, 0, r->map_len);
		if (rc < 0 && rc != -EOPNOTSUPP) {
			le__close(r->fd);
			r->fd = -1;
			return rc;
		}
		flags = MAP_SHARED;
	}
	void *m = le__mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, flags, r->fd,
	               0);
	if (m == MAP_FAILED) {
		int rc = -errno;
		if (r->fd >= 0)
			le__close(r->fd);
		r->fd = -1;
		return rc;
	}
	r->map = m;
	put_header(m, r->cap, shard, unit);
	r->unit = unit;
	r->boot = le__boot_id();
	r->claims = (_Atomic uint64_t *)(void *)((unsigned char *)m +
	                                         LE_BT_CLAIMS_OFF);
	r->taken = (_Atomic uint64_t *)(void *)((unsigned char *)m +
	                                        LE_BT_TAKEN_OFF);
	r->ent = (le__btent *)(void *)((unsigned char *)m + LE_BT_HDR);
	return 0;
}

/* Does the header at m (len bytes of file) describe a ring of shard
 * `shard` of exactly that size, left open? */
static int header_ok(const unsigned char *m, size_t len, uint32_t shard)
{
	uint32_t cap = le__get32(m + 16);

	return !memcmp(m, LE_BT_MAGIC, 8) &&
	       le__get32(m + 8) == LE_BT_VERSION &&
	       le__get32(m + 12) == LE_BT_HDR &&
	       le__get32(m + 20) == LE_BT_ENTRY && cap >= 16 &&
	       !(cap & (cap - 1)) &&
	       len == LE_BT_HDR + (size_t)cap * LE_BT_ENTRY &&
	       le__get32(m + 24) == shard && le__get32(m + 28) == 1;
}

int le__btring_attach(le__btring *r, const char *path, uint32_t shard)
{
	struct stat st;

	memset(r, 0, sizeof *r);
	r->fd = le__open_in(path, LE_IN_SHARD, O_RDWR, 0);
	if (r->fd < 0)
		return r->fd;
	if (le__fstat(r->fd, &st) < 0 || (size_t)st.st_size < LE_BT_HDR)
		goto none;
	r->map_len = (size_t)st.st_size;
	r->map = le__mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_SHARED,
	              r->fd, 0);
	if (r->map == MAP_FAILED) {
		r->map = NULL;
		goto none;
	}
	const unsigned char *m = r->map;
	if (!header_ok(m, r->map_len, shard)) {
		le__munmap(r->map, r->map_len);
		r->map = NULL;
		goto none;
	}
	r->cap = le__get32(m + 16);
	r->unit = le__get32(m + 32);
	r->boot = le__get64(m + 40);
	r->claims = (_Atomic uint64_t *)(void *)((unsigned char *)r->map +
	                                         LE_BT_CLAIMS_OFF);
	r->taken = (_Atomic uint64_t *)(void *)((unsigned char *)r->map +
	                                        LE_BT_TAKEN_OFF);
	r->ent = (le__btent *)(void *)((unsigned char *)r->map + LE_BT_HDR);
	return 1;
none:
	le__close(r->fd);
	r->fd = -1;
	return 0;
}

void le__btring_close(le__btring *r, int clean)
{
	if (!r->map)
		return;
	if (clean)
		le__put32((unsigned char *)r->map + 28, 0);
	le__munmap(r->map, r->map_len);
	if (r->fd >= 0)
		le__close(r->fd);
	r->map = NULL;
	r->fd = -1;
}

/* Take entry n (claim number) if it is kept (or, dead, being read) and
 * of `logger` (-1: any), and copy it into *copy.  @return 1, or 0. */
static int take_one(le__btring *r, uint64_t n, int logger, int dead,
                    le__btcopy *copy)
{
	le__btent *e = &r->ent[n & (r->cap - 1)];
	uint64_t g = atomic_load_explicit(&e->gen, memory_order_acquire);
	uint64_t mine = (n + 1) << 2;

	if (g != (mine | LE_BT_KEPT) && !(dead && g == (mine | LE_BT_READING)))
		return 0;
	uint64_t meta = atomic_load_explicit(&e->meta, memory_order_relaxed);
	if (logger >= 0 && LE_BT_LOGGER(meta) != (uint16_t)logger)
		return 0;
	/* acquire: the producer's bytes, published before state 2 */
	if (!atomic_compare_exchange_strong_explicit(
		    &e->gen, &g, mine | LE_BT_READING, memory_order_acquire,
		    memory_order_relaxed))
		return 0;
	/* relaxed: a count for le__btring_dropped, which orders nothing */
	atomic_fetch_add_explicit(r->taken, 1, memory_order_relaxed);
	copy->ts = e->ts;
	copy->meta = atomic_load_explicit(&e->meta, memory_order_relaxed);
	uint32_t len = LE_BT_LEN(copy->meta);
	if (len <= LE_BT_PAYLOAD_MAX)
		memcpy(copy->payload, e->payload, len);
	/* release: the copy is done before a producer takes the entry */
	atomic_store_explicit(&e->gen, mine | LE_BT_OUT, memory_order_release);
	return len <= LE_BT_PAYLOAD_MAX;
}

/* The claim number the newest `max` kept entries of `logger` (-1: any)
 * start at: a look at each entry's state and meta words alone. */
static uint64_t start_of(le__btring *r, uint64_t end, uint32_t max,
                         int logger)
{
	uint64_t lo = end > r->cap ? end - r->cap : 0, n = end;
	uint32_t k = 0;

	while (n > lo && k < max) {
		le__btent *e = &r->ent[(n - 1) & (r->cap - 1)];
		uint64_t g = atomic_load_explicit(&e->gen, memory_order_acquire);
		uint64_t m = atomic_load_explicit(&e->meta, memory_order_relaxed);
		k += g == (n << 2 | LE_BT_KEPT) &&
		     (logger < 0 || LE_BT_LOGGER(m) == (uint16_t)logger);
		n--;
	}
	return n;
}

uint64_t le__btring_take(le__btring *r, uint32_t max, int logger, int dead,
                         le__btvisit_fn fn, void *arg, le__btcopy *copy)
{
	if (!r->map)
		return 0;
	uint64_t end = atomic_load_explicit(r->claims, memory_order_acquire);
	uint64_t n = max ? start_of(r, end, max, logger)
	                 : end > r->cap ? end - r->cap : 0, k = 0;

	for (; n < end; n++) {
		if (!take_one(r, n, logger, dead, copy))
			continue;
		fn(copy, arg);
		k++;
	}
	return k;
}

uint64_t le__btring_dropped(le__btring *r)
{
	if (!r->map)
		return 0;
	/* acquire: the entries of every claim counted are looked at after */
	uint64_t n = atomic_load_explicit(r->claims, memory_order_acquire);
	uint64_t held = 0;

	n -= atomic_load_explicit(r->taken, memory_order_relaxed);
	for (uint32_t i = 0; i < r->cap; i++) {
		uint64_t g = atomic_load_explicit(&r->ent[i].gen,
		                                  memory_order_relaxed);
		held += g != 0 && ((g & 3) == LE_BT_WRITING ||
		                   (g & 3) == LE_BT_KEPT);
	}
	return n > held ? n - held : 0;
}
