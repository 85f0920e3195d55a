/*
 * sites.h -- deferred call sites: the process's numbering of them, and
 * each shard's SITES file, the table of descriptors its queue's deferred
 * records use (docs/FORMAT.md, "Deferred records"):
 *
 *   0   64  header: magic "LOGENGSI", version 2, S entries, A area bytes,
 *           shard, boot id, CRC of bytes 0..59
 *  64    4  area bytes in use: producers take room with a fetch-and-add
 * 128  4 S  table: site number -> offset of its entry in the area (0 none)
 *  ...   A  area: entries [u32 masked CRC32C][descriptor]; in version 2
 *           the CRC covers the site number (u32) then the descriptor, so
 *           a table word damaged into another entry's offset fails it
 *           (version 1, still read: the descriptor alone)
 *
 * A shared mapping beside QUEUE, opened, kept and made anew with it: a
 * producer puts a site's descriptor here (memcpy into the mapping, no
 * system call) and publishes its offset with a release store before the
 * first slot of that site, so a writer that reads the slot (acquire) finds
 * the entry, and so does the next le_open after a kill -9.
 */
#ifndef LE_SITES_H
#define LE_SITES_H

#include <stdatomic.h>
#include <stdint.h>

#include "record/defer.h"

#define LE_SITES_MAGIC "LOGENGSI"
#define LE_SITES_VERSION 2u     /* written */
#define LE_SITES_VERSION_MIN 1u /* the oldest read: CRC of the descriptor */
#define LE_SITES_HDR 128u
#define LE_SITES_USED_OFF 64u
#define LE_SITES_MAX 65536u
#define LE_SITES_AREA_PER 256u  /* area bytes per entry (the mean) */
#define LE_SITES_AREA_FIRST 8u  /* offset 0 means none */

typedef struct le__sitetab {
	_Atomic uint32_t *used;    /* [atomic] producers fetch-and-add */
	_Atomic uint32_t *tab;     /* [atomic] producers CAS 0 -> offset */
	unsigned char *area;
	uint32_t n, area_bytes;    /* [const] */
	void *map;
	size_t map_len;
	int fd;                    /* -1: anonymous */
	int opened;                /* le__sitetab_open ran (a zeroed
	                              struct has nothing to close) */
	int reused;                /* a dead engine's file, kept to drain */
	uint32_t version;          /* [const] the file's (LE_SITES_VERSION*) */
	/* [const] why a dead engine's file could not be kept (its header
	 * damaged), NULL when it was or there was none: the table is
	 * empty, and every site its queue's deferred records name is lost */
	const char *hdr_damage;
	const char *why;           /* [writer] why le__sitetab_get last
	                              returned NULL */
	/* [writer] descriptors checked once: entry -> descriptor, or NULL */
	const unsigned char **seen;
	/* [atomic] area bytes [0, backed) have their blocks (a file's grow
	 * with use, as the ring's: a store into a hole of a full file
	 * system would be a SIGBUS); producers grow it (sites_grow) and
	 * put entries only there.  After a failed growth, no more entries:
	 * their sites format at the call. */
	_Atomic uint32_t backed;
	_Atomic int grow_failed;
} le__sitetab;

/* A SITES file's first area bytes with blocks (doubled as entries come). */
#define LE_SITES_AREA_INIT (16u << 10)

/* Open the shard's table: path NULL, anonymous; else the file, kept as
 * it is when `keep` (the queue beside it holds a dead process's records)
 * and valid, else made anew for n entries.  n 0: no table (every call
 * formats at once).  mode: the file's, as le_config.file_mode.
 * @return 0 or -errno (le_errmsg set). */
int le__sitetab_open(le__sitetab *t, const char *path, uint32_t n,
                     uint32_t shard, int keep, unsigned mode);
/* Made anew, empty, for n entries (after the queue was drained). */
int le__sitetab_renew(le__sitetab *t, const char *path, uint32_t n,
                      uint32_t shard);
void le__sitetab_close(le__sitetab *t);

/* The producers' side.  A site's number and plan, registering it on its
 * first call: @return the number (>= 1), or 0 when this call must format
 * at once (the format is not one deferred records take, or another thread
 * is registering the site right now). */
uint32_t le__dsite_number(le__dsite *ds, const char *fmt);
static inline const le__dplan *le__dsite_plan(const le__dsite *ds)
{
	return (const le__dplan *)(const void *)ds->plan_;
}
/* Put site `id`'s descriptor in the table if it is not there.
 * @return 0, or -1 (no room: the call formats at once). */
int le__sitetab_put(le__sitetab *t, uint32_t id, const le__dsite *ds);
static inline int le__sitetab_has(le__sitetab *t, uint32_t id)
{
	return id < t->n &&
	       atomic_load_explicit(&t->tab[id], memory_order_relaxed) != 0;
}

/* The writer's side: entry id's descriptor (checked: offset, CRC,
 * decoding), or NULL (t->why says why).  *dlen its bytes. */
const unsigned char *le__sitetab_get(le__sitetab *t, uint32_t id,
                                     size_t *dlen);

#endif
