/*
 * queue.c -- ring files: create, map, check, release.  The hot-path
 * operations are inline in queue.h.
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
 * A pad writes only the state word of its first line, so it needs only
 * that line free: h + 64 - tail <= lap.
 */
#define _GNU_SOURCE
#include "queue/queue.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "base/crc32c.h"
#include "record/format.h"
#include "base/internal.h"
#include "base/clock.h"
#include "base/os.h"

static void geometry(le__ring *r, uint64_t size)
{
	r->size = size;
	r->lap = LE_SLOT_ALIGN;
	r->lap_shift = 6;
	while (r->lap < size) {
		r->lap <<= 1;
		r->lap_shift++;
	}
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* Fault the whole ring in now, writable, without changing a byte: left to
 * the producers, the first lap costs a page fault (microseconds) per 4 KiB
 * in le_write, which is where its slowest calls would be.  Best effort:
 * kernels before 5.14 lack it, and then the faults happen later. */
static void prefault(void *map, size_t len)
{
	le__madvise(map, len, MADV_POPULATE_WRITE);
}

/*
 * Map len bytes (of fd, or anonymous when fd < 0) at a 2 MiB boundary and
 * ask for huge pages.  The producers' calls touch a new 4 KiB page every
 * ~21 records of 128 B, and in a VM each miss in the TLB is a two-level
 * page walk: timing single calls, a third of the slow ones (p99.9) were
 * the calls whose prefetch reached into the next page.  One 2 MiB page
 * covers a default ring.  ext4 maps a file's large folios with one PMD
 * since Linux 6.16 (other file systems and kernels: small pages, same as
 * before), and its writeback every ~30 s then costs the producers one
 * fault instead of one per 4 KiB page (on 6.18 the ring was still one
 * huge page after 45 s of writes).  Anonymous memory gets one from THP.
 * Best effort throughout: a kernel without THP just ignores the advice.
 */
#define HUGE_SZ (2ull << 20)
#define PAGE 4096u

static void *map_aligned(size_t len, int fd, int huge)
{
	int flags = fd < 0 ? MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE
	                   : MAP_SHARED;
	if (len < HUGE_SZ)
		return le__mmap(NULL, len, PROT_READ | PROT_WRITE, flags, fd, 0);
	size_t span = len + HUGE_SZ;
	unsigned char *res = le__mmap(NULL, span, PROT_NONE,
	                              MAP_PRIVATE | MAP_ANONYMOUS |
	                                      MAP_NORESERVE,
	                              -1, 0);
	if (res == MAP_FAILED)
		return MAP_FAILED;
	unsigned char *at = (unsigned char *)(((uintptr_t)res + HUGE_SZ - 1) &
	                                      ~(uintptr_t)(HUGE_SZ - 1));
	void *m = le__mmap(at, len, PROT_READ | PROT_WRITE, flags | MAP_FIXED,
	                   fd, 0);
	if (m == MAP_FAILED) {
		int err = errno;
		le__munmap(res, span);
		errno = err;
		return MAP_FAILED;
	}
	if (at > res)
		le__munmap(res, (size_t)(at - res));
	if (res + span > at + len)
		le__munmap(at + len, (size_t)(res + span - (at + len)));
#ifdef MADV_HUGEPAGE
	/* A ring that trims returns 4 KiB pages: one huge page would keep
	 * 2 MiB resident for a few records. */
	le__madvise(m, len, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
#else
	(void)huge;
#endif
	return m;
}

static int trims(size_t len, int fd)
{
	return fd < 0 && len >= LE_QUEUE_HDR + LE_TRIM_MIN;
}

static void attach(le__ring *r, void *map, size_t len)
{
	r->trims = trims(len, r->fd);
	if (r->fd >= 0) {
		/* a file: its blocks, and the pages over them, come with
		 * use (back, le__ring_grow) */
		prefault(map, LE_QUEUE_HDR);
	} else if (r->trims) {
		/* What the producers fill first; the writer faults in the
		 * rest ahead of them (le__ring_populate). */
		uint64_t a = (len - LE_QUEUE_HDR) / 16;
		r->ahead = a < (256u << 10) ? 256u << 10
		           : a > (4u << 20) ? 4u << 20 : a;
		prefault(map, LE_QUEUE_HDR + r->ahead);
	} else {
		prefault(map, len);
	}
	r->map = map;
	r->map_len = len;
	atomic_store(&r->backed, r->fd >= 0 ? 0 : r->size);
	r->data = (unsigned char *)map + LE_QUEUE_HDR;
	r->head = (_Atomic uint64_t *)((unsigned char *)map + LE_QUEUE_HEAD_OFF);
	r->tail = (_Atomic uint64_t *)((unsigned char *)map + LE_QUEUE_TAIL_OFF);
	r->rel = (_Atomic uint64_t *)((unsigned char *)map + LE_QUEUE_REL_OFF);
}

/*
 * The queue protects against the death of the process, not of the machine:
 * after a power cut its pages hold whatever the kernel had written back,
 * perhaps a slot from before a write and a head from after it.  So the
 * file records the boot it belongs to, and a queue from another boot is
 * discarded (what it held was only ever promised by the durability
 * policy, which the segment files keep).
 */
static uint64_t le__boot_id_override;

void le__boot_id_set(uint64_t id)
{
	le__boot_id_override = id;
}

static uint64_t read_boot_id(void)
{
	char b[64] = "";
	if (le__boot_id_override)
		return le__boot_id_override;
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
	if (f) {
		if (!fgets(b, sizeof b, f))
			b[0] = '\0';
		fclose(f);
	}
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a of the text */
	for (const char *p = b; *p; p++)
		h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
	return h;
}

uint64_t le__boot_id(void)
{
	/* The kernel's cannot change under a running process: read once
	 * (a live page reader asks for every page it reads). */
	static _Atomic uint64_t kernel;
	if (le__boot_id_override)
		return le__boot_id_override;
	uint64_t b = atomic_load_explicit(&kernel, memory_order_relaxed);
	if (!b) {
		b = read_boot_id();
		atomic_store_explicit(&kernel, b, memory_order_relaxed);
	}
	return b;
}

static void put_header(unsigned char *h, const le__ring *r, uint32_t shard)
{
	memset(h, 0, 64);
	memcpy(h, LE_QUEUE_MAGIC, 8);
	le__put32(h + 8, r->csum ? LE_QUEUE_VERSION_CSUM : LE_QUEUE_VERSION);
	le__put32(h + 12, LE_QUEUE_HDR);
	le__put64(h + 16, r->size);
	le__put64(h + 24, r->lap);
	le__put32(h + 32, shard);
	le__put32(h + 36, LE_SLOT_HDR);
	le__put64(h + 40, le__boot_id());
	le__put32(h + 60, le__crc_mask(le__crc32c_extend(0, h, 60)));
}

/* Geometry from a header page; 0 or LE_ECORRUPT.  Versions
 * LE_QUEUE_VERSION_MIN..LE_QUEUE_VERSION_MAX (see newer()). */
static int get_header(const unsigned char *h, uint64_t file_len,
                      uint32_t shard, uint64_t *size)
{
	uint32_t v = le__get32(h + 8);
	if (memcmp(h, LE_QUEUE_MAGIC, 8) != 0 ||
	    le__get32(h + 60) != le__crc_mask(le__crc32c_extend(0, h, 60)) ||
	    v < LE_QUEUE_VERSION_MIN || v > LE_QUEUE_VERSION_MAX ||
	    le__get32(h + 12) != LE_QUEUE_HDR ||
	    le__get32(h + 36) != LE_SLOT_HDR || le__get32(h + 32) != shard ||
	    le__get64(h + 40) != le__boot_id())
		return LE_ECORRUPT; /* or another boot's: start afresh */
	*size = le__get64(h + 16);
	/* The size first: it must be the file's, and no larger than the
	 * largest configuration makes (~2.7 GB), before geometry() doubles
	 * a lap up to it (past 2^63 it never would). */
	if (*size == 0 || *size % LE_SLOT_ALIGN || *size > LE_RING_MAX ||
	    file_len < LE_QUEUE_HDR || *size != file_len - LE_QUEUE_HDR)
		return LE_ECORRUPT;
	le__ring probe;
	geometry(&probe, *size);
	if (probe.lap != le__get64(h + 24))
		return LE_ECORRUPT;
	return 0;
}

/* 1 when h is a whole header of this boot and shard of a version after
 * ours: a newer library's queue, which may hold records this one cannot
 * read -- refused (LE_EVERSION), never made anew over them. */
static int newer(const unsigned char *h, uint32_t shard)
{
	return memcmp(h, LE_QUEUE_MAGIC, 8) == 0 &&
	       le__get32(h + 60) == le__crc_mask(le__crc32c_extend(0, h, 60)) &&
	       le__get32(h + 8) > LE_QUEUE_VERSION_MAX &&
	       le__get32(h + 32) == shard && le__get64(h + 40) == le__boot_id();
}

/*
 * The version of a ring whose header is damaged, from its slots: the
 * version field is the one thing the damage may have hit that changes
 * how every slot reads (1, 2 and 3 are each one bit from another: taken
 * at its word, one flip has every slot fail its checks, or pass them
 * unchecked with its size read wrong).  A walk from tail (a word the
 * header's CRC does not cover) over the slots of that position's lap:
 * each published record slot whose size fits its length votes for 3
 * (its size fits the length plus a check, and the check holds), 2 (its
 * size fits the length alone and its level byte holds the level check)
 * or 1 (the level alone).  Most votes win; none: `field` when it is a
 * version, else LE_QUEUE_VERSION.  Bounded: LE_PROBE_VOTES votes, or
 * LE_PROBE_LINES lines looked at (4 MiB of a ring that may be GBs),
 * never more than one lap from tail (head is at most a ring ahead of
 * it, so a slot of a later lap cannot be a record: a small ring with no
 * voter is looked at once, not LE_PROBE_LINES / its lines times), and
 * never past the ring's first hole (a read there would give it pages).
 */
#define LE_PROBE_VOTES 64
#define LE_PROBE_LINES 65536
static uint32_t probe_version(const le__ring *r, uint32_t field)
{
	const uint64_t mask = r->lap - 1;
	const uint64_t backed = atomic_load_explicit(&r->backed,
	                                             memory_order_relaxed);
	uint64_t p = atomic_load_explicit(r->tail, memory_order_relaxed) &
	             ~(uint64_t)(LE_SLOT_ALIGN - 1);
	const uint64_t start = p; /* p - start: unsigned, so a tail near
	                             2^64 wraps with it */
	int votes[4] = {0, 0, 0, 0};
	for (int lines = 0, n_votes = 0;
	     p - start < r->lap && lines < LE_PROBE_LINES &&
	     n_votes < LE_PROBE_VOTES;
	     lines++) {
		uint64_t off = p & mask;
		if (off >= r->size || off >= backed) {
			p = (p | mask) + 1; /* the lap's gap, or a hole */
			continue;
		}
		const le__slot *s = (const le__slot *)(const void *)(r->data +
		                                                     off);
		uint64_t st = atomic_load_explicit(&s->state,
		                                   memory_order_relaxed);
		uint32_t n = (uint32_t)st & LE_SLOT_SIZE_MASK, len = s->len;
		int v = 0;
		if ((uint32_t)(st >> 32) == (uint32_t)(p >> r->lap_shift) &&
		    (st & (LE_SLOT_READY | LE_SLOT_PAD)) == LE_SLOT_READY &&
		    n >= LE_SLOT_ALIGN && n <= r->size - off &&
		    len <= n - LE_SLOT_HDR) {
			uint32_t c, level = s->level & LE_SLOT_LEVEL_MASK;
			memcpy(&c, (const unsigned char *)s + n - LE_SLOT_CSUM,
			       sizeof c);
			if (len <= n - LE_SLOT_HDR - LE_SLOT_CSUM &&
			    (n == le__slot_bytes(len + LE_SLOT_CSUM) ||
			     n == le__slot_bytes(len + 1 + LE_SLOT_CSUM)) &&
			    c == le__slot_crc(s, len))
				v = 3;
			else if (n != le__slot_bytes(len) &&
			         n != le__slot_bytes(len + 1))
				v = 0;
			else if (level <= 5 &&
			         s->level == le__slot_lvbyte(level, s->flags))
				v = 2;
			else if (s->level <= 5)
				v = 1;
		}
		if (v) {
			votes[v]++;
			n_votes++;
			p += n;
		} else {
			p += LE_SLOT_ALIGN;
		}
	}
	uint32_t best = field >= LE_QUEUE_VERSION_MIN &&
	                                field <= LE_QUEUE_VERSION_MAX
	                        ? field
	                        : LE_QUEUE_VERSION;
	for (uint32_t v = 1; v <= 3; v++)
		if (votes[v] > votes[best])
			best = v;
	return best;
}

/*
 * The clock area, LE_QUEUE_CLOCK_OFF:
 *   0 u32 unit: 1 ns since the epoch, 2 TSC ticks (0: none recorded)
 *   4 u32 0
 *   8 u64 base_tsc      16 u64 base_ns (at base_tsc)
 *  24 u64 mult: ns per tick, 32.32 fixed point (os.h, le__clock_ns)
 *  32 u32 masked CRC32C of bytes 0..31
 * Written whole, the CRC last; a put cut short reads as none.
 */
void le__ring_put_clock(le__ring *r, const le__clock *c)
{
	unsigned char b[36] = {0};

	le__put32(b, c->ns_per_tick != 0 ? 2 : 1);
	if (c->ns_per_tick != 0) {
		le__put64(b + 8, c->base_tsc);
		le__put64(b + 16, c->base_ns);
		le__put64(b + 24, c->mult);
	}
	le__put32(b + 32, le__crc_mask(le__crc32c_extend(0, b, 32)));
	memcpy((unsigned char *)r->map + LE_QUEUE_CLOCK_OFF, b, sizeof b);
}

int le__ring_get_clock(const le__ring *r, le__clock *c)
{
	const unsigned char *b = (const unsigned char *)r->map +
	                         LE_QUEUE_CLOCK_OFF;
	uint32_t unit = le__get32(b);
	uint64_t mult = le__get64(b + 24);

	if (le__get32(b + 32) != le__crc_mask(le__crc32c_extend(0, b, 32)) ||
	    (unit != 1 && unit != 2) || (unit == 2 && mult == 0))
		return LE_ECORRUPT;
	memset(c, 0, sizeof *c);
	if (unit == 2) {
		c->base_tsc = le__get64(b + 8);
		c->base_ns = le__get64(b + 16);
		c->mult = mult;
		c->ns_per_tick = (double)mult / 4294967296.0;
	}
	return 0;
}

/*
 * A header that fails its checksum was damaged (another boot's header
 * still passes it and is discarded for its boot id alone; a file cut off
 * before its header was written is zeros).  Its ring may still hold a
 * dead process's records, and the geometry it had is the one the file's
 * length gives: @return 0 and *size when that length is one a ring can
 * have.
 */
static int damaged_header(const unsigned char *h, uint64_t file_len,
                          uint64_t *size)
{
	int zeros = 1;
	for (int i = 0; i < 64; i++)
		zeros &= h[i] == 0;
	if (zeros || le__get32(h + 60) ==
	                     le__crc_mask(le__crc32c_extend(0, h, 60)))
		return LE_ECORRUPT;
	if (file_len <= LE_QUEUE_HDR)
		return LE_ECORRUPT;
	*size = file_len - LE_QUEUE_HDR;
	if (*size % LE_SLOT_ALIGN || *size > LE_RING_MAX)
		return LE_ECORRUPT;
	return 0;
}

int le__ring_has_clock(const le__ring *r)
{
	const unsigned char *b = (const unsigned char *)r->map +
	                         LE_QUEUE_CLOCK_OFF;
	for (int i = 0; i < 36; i++)
		if (b[i])
			return 1;
	return 0;
}

static int map_file(le__ring *r, int fd, uint64_t size)
{
	size_t len = LE_QUEUE_HDR + size;
	/* Small pages until the ring is whole: one huge folio of a file
	 * would take the blocks of all of it at the first store. */
	void *m = map_aligned(len, fd, 0);
	if (m == MAP_FAILED)
		return -errno;
	geometry(r, size);
	attach(r, m, len);
	return 0;
}

/*
 * Blocks for real ring bytes [from, to) (page multiples), by faulting the
 * pages in writable: the file system reserves their blocks at the fault,
 * and a full one fails the call (-ENOSPC) where a producer's store would
 * have been a SIGBUS.  Changes no byte.  Once the ring is whole, huge
 * pages are asked for (map_aligned), for the pages not yet in the page
 * cache: those faulted in before stay small.
 */
static int back(le__ring *r, uint64_t from, uint64_t to)
{
	int rc = to > from ? le__populate_write(r->data + from, to - from) : 0;
	if (rc < 0)
		return rc;
#ifdef MADV_HUGEPAGE
	if (to == r->size && r->map_len >= HUGE_SZ)
		le__madvise(r->map, r->map_len, MADV_HUGEPAGE);
#endif
	return 0;
}

static uint64_t first_extent(const le__ring *r)
{
	return r->size < LE_RING_FIRST ? r->size : LE_RING_FIRST;
}

/* A new, empty ring file of `size` bytes at fd (truncated first): sparse,
 * with blocks for its header and first extent (the rest as it is used:
 * le__ring_grow), or, where faulting pages in cannot reserve them (a
 * kernel before 5.14, a seccomp filter), for all of it now: a store into
 * a hole of a full file system would be a SIGBUS on the hot path, a
 * failed open is not. */
static int create(le__ring *r, int fd, uint64_t size, uint32_t shard)
{
	int rc = le__ftruncate(fd, 0);
	if (rc == 0)
		rc = le__ftruncate(fd, LE_QUEUE_HDR + size);
	if (rc < 0)
		return rc;
	rc = map_file(r, fd, size);
	if (rc < 0)
		return rc;
	uint64_t first = first_extent(r);
	rc = back(r, 0, first);
	if (rc < 0 && rc != -ENOSPC && rc != -ENOMEM) {
		/* the kernel cannot (EINVAL), or a filter forbids it */
		rc = le__prealloc(fd, 0, LE_QUEUE_HDR + size);
		if (rc == -EOPNOTSUPP)
			rc = 0;
		first = size;
	}
	if (rc < 0) {
		le__munmap(r->map, r->map_len);
		r->map = NULL;
		return rc;
	}
	atomic_store(&r->backed, first);
	put_header(r->map, r, shard);
	return 0;
}

/* A kept file's blocks: up to its first hole (SEEK_HOLE), in pages. */
static uint64_t kept_backed(const le__ring *r)
{
	int64_t h = le__lseek(r->fd, LE_QUEUE_HDR, SEEK_HOLE);
	if (h < (int64_t)LE_QUEUE_HDR)
		return 0;
	uint64_t b = (uint64_t)h - LE_QUEUE_HDR;
	return b >= r->size ? r->size : b & ~(uint64_t)(PAGE - 1);
}

int le__ring_grow(le__ring *r, uint64_t want, int writer)
{
	if (!writer && atomic_load_explicit(&r->grow_failed,
	                                    memory_order_relaxed))
		return -ENOSPC;
	/* No lock: a logging call never waits on one (the thread holding it
	 * may be the one a signal handler that logs interrupted).  Threads
	 * that grow at once each reserve the blocks of their own range
	 * (MADV_POPULATE_WRITE over a range with blocks is only a walk), and
	 * `backed` becomes the largest end among them.  Invariant: [0,
	 * backed) has its blocks, since each grower reserved from the
	 * backed it read, below which an earlier one had. */
	uint64_t b = atomic_load_explicit(&r->backed, memory_order_acquire);
	if (b >= want || b >= r->size)
		return 0;
	uint64_t to = b * 2 > want ? b * 2 : want;
	to = (to + PAGE - 1) & ~(uint64_t)(PAGE - 1);
	if (to > r->size)
		to = r->size;
	int rc = back(r, b & ~(uint64_t)(PAGE - 1), to);
	if (rc == 0)
		/* release: the blocks before a claim that counts on them */
		while (b < to && !atomic_compare_exchange_weak_explicit(
			                 &r->backed, &b, to, memory_order_release,
			                 memory_order_acquire))
			;
	atomic_store_explicit(&r->grow_failed, rc < 0, memory_order_relaxed);
	return rc;
}

/* PREFETCHW (CPUID 0x80000001 ECX bit 8, "3DNowPrefetch" on AMD and
 * "PRFCHW" on Intel): see le__prefetch_w. */
static int have_prefetchw(void)
{
#if defined(__x86_64__) || defined(__i386__)
	unsigned a, b, c, d;
	return __get_cpuid(0x80000001u, &a, &b, &c, &d) && (c & (1u << 8));
#else
	return 0;
#endif
}

/* The mapping is all a made ring needs (its blocks are grown through
 * it): a shard keeps no descriptor for its queue.  A kept file's stays
 * until le__ring_renew makes it anew. */
static void keep_no_fd(le__ring *r)
{
	if (r->fd >= 0)
		le__close(r->fd);
	r->fd = -1;
}

int le__ring_open(le__ring *r, const char *path, uint64_t size,
                  uint32_t shard, unsigned mode, int csum)
{
	memset(r, 0, sizeof *r);
	r->fd = -1;
	r->version = LE_QUEUE_VERSION;
	r->csum_cfg = path && csum;
	r->csum = r->csum_cfg;
	r->pfw = have_prefetchw();
	if (!path) {
		size_t len = LE_QUEUE_HDR + size;
		void *m = map_aligned(len, -1, !trims(len, -1));
		if (m == MAP_FAILED)
			return -errno;
		geometry(r, size);
		attach(r, m, len);
		return 0;
	}
	int fd = le__open_in(path, LE_IN_SHARD, O_RDWR | O_CREAT, (mode_t)mode);
	if (fd < 0) {
		if (fd != LE_EUNSAFE)
			le__seterr("queue: cannot open %s: %s", path,
			           le_strerror(fd));
		return fd;
	}
	r->fd = fd;
	struct stat st;
	unsigned char h[64] = {0};
	uint64_t old;
	int rc;
	if (le__fstat(fd, &st) == 0 && st.st_size >= (off_t)LE_QUEUE_HDR &&
	    le__pread_full(fd, h, sizeof h, 0) == (ssize_t)sizeof h &&
	    get_header(h, (uint64_t)st.st_size, shard, &old) == 0) {
		rc = map_file(r, fd, old); /* drain first, renew later */
		r->reused = 1;
		r->version = le__get32(h + 8);
		r->csum = r->version == LE_QUEUE_VERSION_CSUM;
		atomic_store(&r->backed, kept_backed(r));
	} else if (newer(h, shard)) {
		le__seterr("queue: %s: written by a newer logengine (QUEUE "
		           "version %u, this one reads %u to %u): recover it "
		           "with that version first", path, le__get32(h + 8),
		           LE_QUEUE_VERSION_MIN, LE_QUEUE_VERSION_MAX);
		le__ring_close(r);
		return LE_EVERSION;
	} else if (st.st_size > (off_t)LE_QUEUE_HDR &&
	           damaged_header(h, (uint64_t)st.st_size, &old) == 0) {
		rc = map_file(r, fd, old); /* recovery says so */
		r->reused = 1;
		r->hdr_damaged = 1;
		atomic_store(&r->backed, kept_backed(r));
		r->version = rc == 0 ? probe_version(r, le__get32(h + 8))
		                     : LE_QUEUE_VERSION;
		r->csum = r->version == LE_QUEUE_VERSION_CSUM;
	} else {
		rc = create(r, fd, size, shard);
	}
	if (rc < 0) {
		le__seterr("queue: %s: %s", path, le_strerror(rc));
		le__ring_close(r);
	} else if (!r->reused) {
		keep_no_fd(r);
	}
	return rc;
}

void le__ring_close(le__ring *r)
{
	if (r->map)
		le__munmap(r->map, r->map_len);
	if (r->fd >= 0)
		le__close(r->fd);
	r->map = NULL;
	r->fd = -1;
}

int le__ring_file_busy(const char *path, uint32_t shard)
{
	unsigned char h[LE_QUEUE_TAIL_OFF + 8];
	struct stat st;
	uint64_t size;
	int fd = le__open_in(path, LE_IN_SHARD, O_RDONLY, 0);
	if (fd < 0)
		return 0;
	int busy = le__fstat(fd, &st) == 0 &&
	           le__pread_full(fd, h, sizeof h, 0) == (ssize_t)sizeof h &&
	           get_header(h, (uint64_t)st.st_size, shard, &size) == 0 &&
	           le__get64(h + LE_QUEUE_HEAD_OFF) !=
	                   le__get64(h + LE_QUEUE_TAIL_OFF);
	le__close(fd);
	return busy;
}

int le__ring_busy(const le__ring *r)
{
	return atomic_load(r->head) != atomic_load(r->tail);
}

int le__ring_renew(le__ring *r, const char *path, uint64_t size,
                   uint32_t shard)
{
	if (!r->reused)
		return 0; /* made by this engine, at its size, empty */
	le__munmap(r->map, r->map_len);
	r->map = NULL;
	r->reused = 0;
	r->version = LE_QUEUE_VERSION;
	r->csum = r->csum_cfg;
	int rc = create(r, r->fd, size, shard);
	if (rc < 0)
		le__seterr("queue: %s: %s", path, le_strerror(rc));
	else
		keep_no_fd(r);
	return rc;
}

#define MARK_KEY 0x9e3779b97f4a7c15ull

static uint64_t mark_check(uint64_t pos, uint64_t seq)
{
	return pos ^ (seq << 32 | seq >> 32) ^ MARK_KEY;
}

void le__ring_mark(le__ring *r, uint64_t pos, uint64_t seq)
{
	_Atomic uint64_t *m = (_Atomic uint64_t *)((unsigned char *)r->map +
	                                           LE_QUEUE_MARK_OFF);
	/* Relaxed, in this order, before the release's own stores (a
	 * signal fence keeps the compiler from moving them): a kill sees
	 * what was stored, and between two of these reads as no mark. */
	atomic_store_explicit(&m[2], 0, memory_order_relaxed);
	atomic_store_explicit(&m[0], pos, memory_order_relaxed);
	atomic_store_explicit(&m[1], seq, memory_order_relaxed);
	atomic_store_explicit(&m[2], mark_check(pos, seq), memory_order_relaxed);
	atomic_signal_fence(memory_order_seq_cst);
}

int le__ring_get_mark(const le__ring *r, uint64_t *pos, uint64_t *seq)
{
	const unsigned char *m = (const unsigned char *)r->map +
	                         LE_QUEUE_MARK_OFF;
	*pos = le__get64(m);
	*seq = le__get64(m + 8);
	return le__get64(m + 16) == mark_check(*pos, *seq) && *seq != 0 &&
	               *pos % LE_SLOT_ALIGN == 0
	               ? 0
	               : LE_ECORRUPT;
}

/* A slot a producer could have left at pos: 1 and *bytes; a pad: 2. */
static int plausible(const le__ring *r, uint64_t pos,
                     int (*ok)(const le__ring *, const le__slot *, uint32_t),
                     uint32_t *bytes)
{
	const uint64_t mask = r->lap - 1;
	uint64_t off = pos & mask;
	if (off >= r->size)
		return 0;
	const le__slot *s = (const le__slot *)(r->data + off);
	uint64_t st = atomic_load_explicit(&s->state, memory_order_relaxed);
	uint32_t n = (uint32_t)st & LE_SLOT_SIZE_MASK;
	if ((uint32_t)(st >> 32) != (uint32_t)(pos >> r->lap_shift) || n == 0)
		return 0;
	if ((st & (LE_SLOT_PAD | LE_SLOT_READY)) ==
	    (LE_SLOT_PAD | LE_SLOT_READY))
		return n == r->lap - off ? 2 : 0;
	if (!(st & LE_SLOT_READY) || off + n > r->size || n < LE_SLOT_HDR ||
	    !ok(r, s, n))
		return 0;
	*bytes = n;
	return 1;
}

int le__ring_starts(const le__ring *r, uint64_t pos, uint64_t end)
{
	const uint64_t mask = r->lap - 1;
	uint64_t off = pos & mask;
	if (pos >= end || off >= r->size)
		return 1;
	uint64_t st = atomic_load_explicit(
		(const _Atomic uint64_t *)(const void *)(r->data + off),
		memory_order_relaxed);
	uint32_t n = (uint32_t)st & LE_SLOT_SIZE_MASK;
	if (st == le__free_word(pos >> r->lap_shift))
		return 1;
	return (uint32_t)(st >> 32) == (uint32_t)(pos >> r->lap_shift) &&
	               n >= LE_SLOT_ALIGN && n <= r->lap - off &&
	               ((st & LE_SLOT_PAD) ? n == r->lap - off
	                                   : n <= r->size - off)
	       ? 2
	       : 0;
}

int le__ring_resync(const le__ring *r, uint64_t from, uint64_t end,
                    int (*ok)(const le__ring *, const le__slot *, uint32_t),
                    uint64_t *at)
{
	const uint64_t mask = r->lap - 1;
	uint32_t n, m;
	for (uint64_t p = (from | (LE_SLOT_ALIGN - 1)) + 1; p < end;
	     p += LE_SLOT_ALIGN) {
		if ((p & mask) >= r->size) {
			/* the lap's unreal gap: at most size / 64 lines are
			 * looked at per lap, however large the lap */
			p = (p | mask) + 1 - LE_SLOT_ALIGN;
			continue;
		}
		if (plausible(r, p, ok, &n) != 1)
			continue;
		/* One slot-like line may be payload bytes; two in a row, or
		 * one that ends where the queue does, hardly. */
		if (p + n >= end || plausible(r, p + n, ok, &m) != 0) {
			*at = p;
			return 1;
		}
	}
	return 0;
}

uint64_t le__ring_resume(const le__ring *r)
{
	uint64_t t = atomic_load(r->tail), h = atomic_load(r->head);
	uint64_t rel = atomic_load(r->rel);
	/* A release moves tail by one batch, never a lap: anything else in
	 * the word is damage, and the walk starts at tail. */
	return (rel > t && rel <= h && rel - t <= r->lap &&
	        rel % LE_SLOT_ALIGN == 0) ? rel : t;
}

/* Return the whole pages in real [off, end) of the ring; @return where
 * the pages begin and end (lo == hi: none). */
static void trim_pages(le__ring *r, uint64_t off, uint64_t end,
                       uint64_t *lo, uint64_t *hi)
{
	*lo = (off + PAGE - 1) & ~(uint64_t)(PAGE - 1);
	*hi = end & ~(uint64_t)(PAGE - 1);
	if (*hi <= *lo) {
		*lo = *hi = off;
		return;
	}
	if (le__madvise(r->data + *lo, (size_t)(*hi - *lo), MADV_DONTNEED) != 0)
		*lo = *hi = off; /* kept: their FREE words are written */
}

/* The first word of each line in real [off, end) set to `word`: a loop of
 * nothing else, since the writer runs it for every line it consumed. */
static void free_lines(le__ring *r, uint64_t off, uint64_t end, uint64_t word)
{
	unsigned char *d = r->data;

	for (; off < end; off += LE_SLOT_ALIGN)
		atomic_store_explicit((_Atomic uint64_t *)(d + off), word,
		                      memory_order_release);
}

void le__ring_release(le__ring *r, uint64_t from, uint64_t to, int trim)
{
	const uint64_t mask = r->lap - 1;

	/* Say where we are going before touching a word, so that a crash in
	 * the middle of the FREE words leaves a walkable queue (FREE stores
	 * are release stores: none is seen before this one). */
	atomic_store_explicit(r->rel, to, memory_order_relaxed);
	while (from < to) {
		uint64_t off = from & mask;
		uint64_t lap_end = from - off + r->lap;
		uint64_t stop = to < lap_end ? to : lap_end;
		uint64_t real_end = off + (stop - from);
		uint64_t next = le__free_word((from >> r->lap_shift) + 1);
		uint64_t lo = real_end, hi = real_end;
		/* A pad's lines past `backed` are holes (zeros: no slot),
		 * never written: a store there could be a SIGBUS. */
		uint64_t backed = atomic_load_explicit(&r->backed,
		                                       memory_order_relaxed);
		if (real_end > backed)
			real_end = backed;
		if (trim && r->trims)
			trim_pages(r, off, real_end, &lo, &hi);
		if (hi > lo) {
			/* the returned pages read as zeros: FREE already */
			free_lines(r, off, lo < real_end ? lo : real_end, next);
			off = hi;
		}
		free_lines(r, off, real_end, next);
		from = stop;
	}
	/* release: producers that see the new tail (acquire) see FREE. */
	atomic_store_explicit(r->tail, to, memory_order_release);
}

void le__ring_populate(le__ring *r, uint64_t from, uint64_t to)
{
	const uint64_t mask = r->lap - 1;

	while (from < to) {
		uint64_t off = from & mask;
		uint64_t lap_end = from - off + r->lap;
		uint64_t stop = to < lap_end ? to : lap_end;
		uint64_t end = off + (stop - from);
		if (end > r->size)
			end = r->size;
		off &= ~(uint64_t)(PAGE - 1);
		if (end > off)
			prefault(r->data + off, (size_t)(end - off));
		from = stop;
	}
}

uint64_t le__ring_skip_free(const le__ring *r, uint64_t from, uint64_t end)
{
	const uint64_t mask = r->lap - 1;

	while (from < end) {
		if ((from & mask) >= r->size) {
			from += r->lap - (from & mask);
			continue;
		}
		uint64_t w = atomic_load_explicit(
			(const _Atomic uint64_t *)(const void *)(r->data +
			                                         (from & mask)),
			memory_order_relaxed);
		if (w != le__free_word(from >> r->lap_shift))
			return from;
		from += LE_SLOT_ALIGN;
	}
	return end;
}

uint64_t le__ring_size_for(uint64_t cap_rec, uint64_t cap_bytes,
                           uint32_t max_record, int csum)
{
	/* payload + per-record header, check and alignment + one pad and
	 * one slot of slack for the lap boundary (see queue.h).  +1:
	 * le_logf's NUL. */
	uint32_t ck = csum ? LE_SLOT_CSUM : 0;
	uint64_t max_slot = le__slot_bytes(max_record + 1 + ck);
	uint64_t s = cap_bytes + cap_rec * (LE_SLOT_HDR + LE_SLOT_ALIGN + ck) +
	             2 * max_slot;
	/* Header page + ring up to a whole number of huge pages (see
	 * map_aligned) when that costs at most an eighth more memory: the
	 * default 1 MiB queue's 1.97 MB ring becomes one 2 MiB page. */
	uint64_t file = LE_QUEUE_HDR + s;
	uint64_t huge = (file + HUGE_SZ - 1) & ~(HUGE_SZ - 1);
	if (file >= HUGE_SZ / 2 && huge - file <= file / 8)
		return huge - LE_QUEUE_HDR;
	return (s + 4095) & ~(uint64_t)4095;
}
