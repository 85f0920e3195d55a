/*
 * sites.c -- call sites of deferred records: their numbers (one counter
 * for the process) and each shard's SITES file (sites.h has the layout).
 *
 * Registration.  A site is registered by the first call that finds its
 * state 0 and moves it to 1 with a CAS: it compiles the format
 * (le__dplan_make), takes the next number, and stores state 2 with
 * release (number and plan before it).  A call that finds 1 formats at
 * once rather than wait; one that finds 3 (a format deferred records do
 * not take) always does.  No lock, no malloc, no system call.
 *
 * Table.  Entries are put by producers: room from a fetch-and-add on the
 * area's use word, the CRC and descriptor written, then the offset CASed
 * into the entry's table word (release).  Two producers may race to put
 * the same site: the loser's bytes are left unused, so the area holds at
 * most one spare copy per racing thread.  An area that runs out leaves
 * its word past the end; calls of sites not yet put format at once.
 *
 * Blocks.  A file table is sparse: blocks for its header, its table words
 * and the area's first LE_SITES_AREA_INIT bytes at creation, then, as
 * entries reach past `backed`, the producer putting one doubles them
 * (sites_grow; once per site at most, never per record).  A store into a
 * hole of a full file system would be a SIGBUS: after a growth fails, no
 * entry is put, and those sites format at the call.
 */
#define _GNU_SOURCE
#include "queue/sites.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/crc32c.h"
#include "record/format.h"
#include "base/internal.h"
#include "base/os.h"
#include "queue/queue.h"

_Static_assert(sizeof(le__dplan) <= sizeof(((le__dsite *)0)->plan_),
               "a site's plan fits its words");

static _Atomic uint32_t next_id;

enum { S_NEW, S_BUSY, S_DEFER, S_NOW };

uint32_t le__dsite_number(le__dsite *ds, const char *fmt)
{
	uint32_t st = __atomic_load_n(&ds->state, __ATOMIC_ACQUIRE);
	if (st == S_DEFER)
		return ds->id;
	if (st != S_NEW || !__atomic_compare_exchange_n(
		                   &ds->state, &st, S_BUSY, 0, __ATOMIC_ACQUIRE,
		                   __ATOMIC_RELAXED))
		return 0;
	le__dplan *p = (le__dplan *)(void *)ds->plan_;
	if (sizeof(long) != 8 || !LE__HOST_LE || ds->nk > LE_DEFER_ARGS_MAX ||
	    le__dplan_make(p, fmt, ds->kinds + 1, ds->nk) < 0) {
		__atomic_store_n(&ds->state, S_NOW, __ATOMIC_RELEASE);
		return 0;
	}
	size_t nlen = ds->site.file_len < 1024 ? ds->site.file_len : 1024;
	p->dlen = (uint32_t)(LE_DESC_FIXED + strlen(fmt) + nlen);
	if (p->dlen > LE_DESC_MAX) {
		__atomic_store_n(&ds->state, S_NOW, __ATOMIC_RELEASE);
		return 0;
	}
	ds->fmt = fmt;
	ds->id = atomic_fetch_add_explicit(&next_id, 1, memory_order_relaxed) + 1;
	/* release: the plan, the format and the number before the state */
	__atomic_store_n(&ds->state, S_DEFER, __ATOMIC_RELEASE);
	return ds->id;
}

/* ---- the table ---- */

static size_t file_bytes(uint32_t n)
{
	return LE_SITES_HDR + 4 * (size_t)n + (size_t)n * LE_SITES_AREA_PER;
}

static void put_header(unsigned char *h, uint32_t n, uint32_t shard)
{
	memset(h, 0, 64);
	memcpy(h, LE_SITES_MAGIC, 8);
	le__put32(h + 8, LE_SITES_VERSION);
	le__put32(h + 12, n);
	le__put32(h + 16, n * LE_SITES_AREA_PER);
	le__put32(h + 20, shard);
	le__put64(h + 24, le__boot_id());
	le__put32(h + 60, le__crc_mask(le__crc32c_extend(0, h, 60)));
}

/* What makes a kept file's header unusable, or NULL when it is whole and
 * this shard's, of this boot, of a version read here. */
static const char *header_damage(const unsigned char *h, size_t len,
                                 uint32_t shard)
{
	if (len < LE_SITES_HDR)
		return "shorter than its header";
	uint32_t n = le__get32(h + 12), v = le__get32(h + 8);
	if (memcmp(h, LE_SITES_MAGIC, 8) != 0)
		return "bad magic";
	if (le__get32(h + 60) != le__crc_mask(le__crc32c_extend(0, h, 60)))
		return "header checksum";
	if (v < LE_SITES_VERSION_MIN || v > LE_SITES_VERSION)
		return "unknown version";
	if (n > LE_SITES_MAX || le__get32(h + 16) != n * LE_SITES_AREA_PER ||
	    len != file_bytes(n))
		return "sizes do not match the file";
	if (le__get32(h + 20) != shard)
		return "another shard's";
	if (le__get64(h + 24) != le__boot_id())
		return "another boot's";
	return NULL;
}

/* An entry's CRC: in version 2 the site number is covered too, so an
 * entry reached through another site's table word fails it. */
static uint32_t entry_crc(uint32_t version, uint32_t id,
                          const unsigned char *d, size_t dl)
{
	unsigned char idb[4];
	uint32_t c = 0;
	if (version >= 2) {
		le__put32(idb, id);
		c = le__crc32c_extend(0, idb, 4);
	}
	return le__crc_mask(le__crc32c_extend(c, d, dl));
}

static int attach(le__sitetab *t, void *m, size_t len)
{
	unsigned char *b = m;
	t->map = m;
	t->map_len = len;
	t->n = le__get32(b + 12);
	t->area_bytes = le__get32(b + 16);
	t->version = le__get32(b + 8);
	t->used = (_Atomic uint32_t *)(void *)(b + LE_SITES_USED_OFF);
	t->tab = (_Atomic uint32_t *)(void *)(b + LE_SITES_HDR);
	t->area = b + LE_SITES_HDR + 4 * (size_t)t->n;
	t->seen = calloc(t->n ? t->n : 1, sizeof *t->seen);
	if (!t->seen)
		return LE_ENOMEM;
	if (atomic_load(t->used) < LE_SITES_AREA_FIRST)
		atomic_store(t->used, LE_SITES_AREA_FIRST);
	return 0;
}

/* Blocks for the file's bytes [from, to) (clipped to len), by faulting
 * its pages in writable: a full file system fails this call where a
 * producer's store would have been a SIGBUS (os.h). */
static int back(void *m, size_t len, size_t from, size_t to)
{
	from &= ~(size_t)4095;
	if (to > len)
		to = len;
	return to > from ? le__populate_write((char *)m + from, to - from) : 0;
}

/* A file's area bytes with blocks: up to its first hole (SEEK_HOLE). */
static uint32_t kept_backed(const le__sitetab *t)
{
	size_t start = LE_SITES_HDR + 4 * (size_t)t->n;
	int64_t h = le__lseek(t->fd, (int64_t)start, SEEK_HOLE);
	if (h < (int64_t)start)
		return 0;
	uint64_t b = (uint64_t)h - start;
	return b > t->area_bytes ? t->area_bytes : (uint32_t)b;
}

/* A new table: anonymous, or a sparse file with blocks for its header,
 * its table words and the first LE_SITES_AREA_INIT area bytes (all of
 * it where faulting in cannot reserve blocks: a kernel before 5.14, a
 * seccomp filter). */
static int create(le__sitetab *t, uint32_t n, uint32_t shard)
{
	size_t len = file_bytes(n), first = len;
	void *m;
	if (t->fd >= 0) {
		int rc = le__ftruncate(t->fd, 0);
		if (rc == 0)
			rc = le__ftruncate(t->fd, len);
		if (rc < 0)
			return rc;
		m = le__mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, t->fd, 0);
		if (m == MAP_FAILED)
			return -errno;
		first = LE_SITES_HDR + 4 * (size_t)n + LE_SITES_AREA_INIT;
		rc = back(m, len, 0, first);
		if (rc < 0 && rc != -ENOSPC && rc != -ENOMEM) {
			rc = le__prealloc(t->fd, 0, len);
			first = len;
		}
		if (rc < 0 && rc != -EOPNOTSUPP) {
			le__munmap(m, len);
			return rc;
		}
	} else {
		m = le__mmap(NULL, len, PROT_READ | PROT_WRITE,
		         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m == MAP_FAILED)
			return -errno;
	}
	put_header(m, n, shard);
	int rc = attach(t, m, len);
	size_t area0 = LE_SITES_HDR + 4 * (size_t)n;
	atomic_store(&t->backed, (uint32_t)((first < len ? first : len) - area0));
	return rc;
}

/* Blocks for area bytes up to `want` at least, doubling, with no lock
 * (a logging call never waits on one): concurrent growers each reserve
 * their own range from the backed they read, and backed becomes the
 * largest end (le__ring_grow's reasoning).  @return 0, or -errno (and no
 * entry is put from then on). */
static int sites_grow(le__sitetab *t, uint32_t want)
{
	if (atomic_load(&t->grow_failed))
		return -ENOSPC;
	uint32_t b = atomic_load_explicit(&t->backed, memory_order_acquire);
	if (b >= want)
		return 0;
	uint64_t to = (uint64_t)b * 2 > want ? (uint64_t)b * 2 : want;
	if (to > t->area_bytes)
		to = t->area_bytes;
	size_t area0 = LE_SITES_HDR + 4 * (size_t)t->n;
	int rc = back(t->map, t->map_len, area0 + b, area0 + to);
	if (rc < 0) {
		atomic_store(&t->grow_failed, 1);
		return rc;
	}
	/* release: the blocks before an entry put there */
	while (b < to && !atomic_compare_exchange_weak_explicit(
		                 &t->backed, &b, (uint32_t)to,
		                 memory_order_release, memory_order_acquire))
		;
	return 0;
}

/* The mapping is all a made table needs: no descriptor is kept (a dead
 * engine's file keeps its own until le__sitetab_renew). */
static void keep_no_fd(le__sitetab *t)
{
	if (t->fd >= 0)
		le__close(t->fd);
	t->fd = -1;
}

int le__sitetab_open(le__sitetab *t, const char *path, uint32_t n,
                     uint32_t shard, int keep, unsigned mode)
{
	struct stat st;
	int rc;

	memset(t, 0, sizeof *t);
	t->fd = -1;
	t->opened = 1;
	if (path) {
		/* DIR/shard-NNN/SITES, as the QUEUE beside it: never
		 * through a link, never a FIFO (le__open_in). */
		t->fd = le__open_in(path, LE_IN_SHARD, O_RDWR | O_CREAT,
		                    (mode_t)mode);
		if (t->fd < 0) {
			if (t->fd != LE_EUNSAFE)
				le__seterr("sites: cannot open %s: %s", path,
				           le_strerror(t->fd));
			return t->fd;
		}
	}
	if (keep && t->fd >= 0 && le__fstat(t->fd, &st) == 0) {
		size_t len = (size_t)st.st_size;
		void *m = len >= LE_SITES_HDR
		                  ? le__mmap(NULL, len, PROT_READ | PROT_WRITE,
		                         MAP_SHARED, t->fd, 0)
		                  : MAP_FAILED;
		const char *why = len < LE_SITES_HDR ? "shorter than its header"
		                  : m == MAP_FAILED  ? "cannot be mapped"
		                                     : header_damage(m, len, shard);
		if (!why) {
			t->reused = 1;
			rc = attach(t, m, len);
			atomic_store(&t->backed, kept_backed(t));
			return rc;
		}
		if (m != MAP_FAILED)
			le__munmap(m, len);
		/* Made anew below; the dead queue's deferred records find
		 * no site, and recovery reports them with this. */
		t->hdr_damage = why;
	}
	rc = create(t, n, shard);
	if (rc < 0) {
		le__seterr("sites: %s: %s", path ? path : "(memory)",
		           le_strerror(rc));
		le__sitetab_close(t);
	} else {
		keep_no_fd(t);
	}
	return rc;
}

int le__sitetab_renew(le__sitetab *t, const char *path, uint32_t n,
                      uint32_t shard)
{
	if (!t->reused)
		return 0;
	le__munmap(t->map, t->map_len);
	free(t->seen);
	t->map = NULL;
	t->seen = NULL;
	t->reused = 0;
	int rc = create(t, n, shard);
	if (rc < 0)
		le__seterr("sites: %s: %s", path, le_strerror(rc));
	else
		keep_no_fd(t);
	return rc;
}

void le__sitetab_close(le__sitetab *t)
{
	if (!t->opened)
		return;
	if (t->map)
		le__munmap(t->map, t->map_len);
	if (t->fd >= 0)
		le__close(t->fd);
	free(t->seen);
	memset(t, 0, sizeof *t);
	t->fd = -1;
}

int le__sitetab_put(le__sitetab *t, uint32_t id, const le__dsite *ds)
{
	if (id >= t->n)
		return -1;
	if (atomic_load_explicit(&t->tab[id], memory_order_relaxed))
		return 0;
	size_t flen = strlen(ds->fmt), nlen = ds->site.file_len;
	size_t dl = LE_DESC_FIXED + flen + (nlen < 1024 ? nlen : 1024);
	uint32_t need = (uint32_t)((4 + dl + 3) & ~(size_t)3);
	if (dl > LE_DESC_MAX || need > t->area_bytes)
		return -1;
	uint32_t off = atomic_fetch_add_explicit(t->used, need,
	                                         memory_order_relaxed);
	if (off > t->area_bytes - need) {
		/* full: keep the word from wrapping on later tries */
		atomic_fetch_sub_explicit(t->used, need, memory_order_relaxed);
		return -1;
	}
	/* acquire: the blocks before a store into them.  A failed growth
	 * leaves the bytes unused, as a lost race does. */
	if (off + need > atomic_load_explicit(&t->backed, memory_order_acquire) &&
	    sites_grow(t, off + need) < 0)
		return -1;
	unsigned char *d = t->area + off + 4;
	le__desc_encode(d, dl, ds->site.level, ds->site.line, ds->fmt, flen,
	                ds->site.file, nlen);
	le__put32(d - 4, entry_crc(t->version, id, d, dl));
	uint32_t zero = 0;
	/* release: the entry's bytes before its offset */
	atomic_compare_exchange_strong_explicit(&t->tab[id], &zero, off,
	                                        memory_order_release,
	                                        memory_order_relaxed);
	return 0;
}

const unsigned char *le__sitetab_get(le__sitetab *t, uint32_t id,
                                     size_t *dlen)
{
	if (id >= t->n) {
		t->why = "site number past the table";
		return NULL;
	}
	if (t->seen[id]) {
		*dlen = le__get16(t->seen[id]);
		return t->seen[id];
	}
	/* acquire: pairs with the producer's CAS */
	uint32_t off = atomic_load_explicit(&t->tab[id], memory_order_acquire);
	le__desc d;
	const char *why;
	if (!off) {
		t->why = "no entry";
		return NULL;
	}
	if (off < LE_SITES_AREA_FIRST || off > t->area_bytes - 4 - LE_DESC_FIXED) {
		t->why = "entry offset past the area";
		return NULL;
	}
	const unsigned char *p = t->area + off + 4;
	size_t n = le__desc_decode(p, t->area_bytes - off - 4, &d, &why);
	if (!n || le__get32(p - 4) != entry_crc(t->version, id, p, n)) {
		t->why = n ? "entry checksum" : "entry does not decode";
		return NULL;
	}
	t->seen[id] = p;
	*dlen = n;
	return p;
}
