/*
 * btring.h -- the flight recorder's ring: one per shard, the records a
 * logger keeps below its threshold (engine/backtrace.c), in a shared file
 * mapping DIR/shard-NNN/BACKTRACE so that they outlive the process
 * (docs/FORMAT.md, "Backtrace file"):
 *
 *     0   8  magic "LOGENGBT"
 *     8   4  version 1
 *    12   4  header bytes, 128
 *    16   4  entries (a power of two)
 *    20   4  entry bytes, 256
 *    24   4  shard number
 *    28   4  open: 1 while an engine has it, 0 after a clean close
 *    32   4  clock unit of the stamps: 1 ns since the epoch, 2 TSC ticks
 *    40   8  boot: FNV-1a of the kernel's boot_id (queue.h)
 *    64   8  claims: entries ever claimed (the next claim's number)
 *    72   8  taken: entries readers took (state 2 -> 0)
 *   128      entries, each:
 *              0  8  gen: (claim number + 1) << 2 | state
 *              8  8  ts: the producer's stamp (as a queue slot's)
 *             16  8  meta, one word: len (u32, payload bytes, at most
 *                    232) | logger (u16, its entry in the engine's
 *                    table, 0 the root) | level (u8) | flags (u8, a
 *                    queue slot's: TRUNCATED, FIELDS, DEFERRED)
 *             24     payload, as a queue slot's
 *
 * Entry states (gen 0: never used): 0 being read, 1 being written, 2
 * kept (not yet written out), 3 written out.  A producer claims number n
 * with a fetch-and-add on claims, then takes entry n % entries with one
 * CAS (acquire) from state 2 or 3 of an older number; an entry being
 * written or read, or holding a newer number, makes it drop its own
 * record instead (counted: le__btring_dropped): it never waits.  It
 * fills the entry and publishes with a release store of state 2.  A reader takes an entry by
 * CAS 2 -> 0 (acquire: it sees the producer's bytes), copies it, and
 * stores state 3 (release: a producer's later CAS sees the copy done).
 * So no byte of an entry is ever written while it is read.  meta is one
 * atomic word so that a reader may look at an entry's logger before
 * taking it.  A process that died leaves states 0 and 1 behind: the
 * next le_open writes out state 0 (its record was not yet queued) and
 * state 2, never state 1 (a record half written).
 */
#ifndef LE_BTRING_H
#define LE_BTRING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define LE_BT_MAGIC "LOGENGBT"
#define LE_BT_VERSION 1u
#define LE_BT_HDR 128u
#define LE_BT_ENTRY 256u
#define LE_BT_ENTRY_HDR 24u
#define LE_BT_PAYLOAD_MAX (LE_BT_ENTRY - LE_BT_ENTRY_HDR)
#define LE_BT_CLAIMS_OFF 64u
#define LE_BT_TAKEN_OFF 72u

enum { LE_BT_READING = 0, LE_BT_WRITING = 1, LE_BT_KEPT = 2, LE_BT_OUT = 3 };

typedef struct le__btent {
	_Atomic uint64_t gen;     /* [atomic] (n + 1) << 2 | state */
	uint64_t ts;              /* [owner] its producer's, then its reader's */
	_Atomic uint64_t meta;    /* [atomic] le__btmeta */
	unsigned char payload[LE_BT_PAYLOAD_MAX]; /* [owner] as ts */
} le__btent;

/* An entry's meta word, and its parts. */
static inline uint64_t le__btmeta(uint32_t len, uint16_t logger,
                                  uint8_t level, uint8_t flags)
{
	return (uint64_t)len | (uint64_t)logger << 32 |
	       (uint64_t)level << 48 | (uint64_t)flags << 56;
}
#define LE_BT_LEN(m) ((uint32_t)(m))
#define LE_BT_LOGGER(m) ((uint16_t)((m) >> 32))
#define LE_BT_LEVEL(m) ((uint8_t)((m) >> 48))
#define LE_BT_FLAGS(m) ((uint8_t)((m) >> 56))

typedef struct le__btring {
	_Atomic uint64_t *claims;  /* [atomic] producers fetch-and-add */
	le__btent *ent;            /* [const] cap entries */
	uint32_t cap;              /* [const] a power of two */
	_Atomic uint64_t *taken;   /* [atomic] readers add: in the mapping,
	                              so a fork child's dumps count too */
	void *map;
	size_t map_len;
	int fd;                    /* -1: anonymous */
	uint32_t unit;             /* [const] the stamps' clock unit */
	uint64_t boot;             /* [const] the boot they were taken in */
} le__btring;

/* A dead process's kept records made standalone (engine/backtrace.c),
 * held from the shard's recovery until its queue takes them: records
 * back to back, each u64 ts | u32 len | u8 level | u8 flags | u16 0 |
 * payload. */
typedef struct le__btdead {
	unsigned char *buf;        /* malloc'd */
	size_t len, cap;
	uint32_t n;                /* records in buf */
	uint32_t lost;             /* entries that did not check (level,
	                              flags, field block) */
	int seen;                  /* the shard had a BACKTRACE file */
} le__btdead;
#define LE_BT_DEAD_HDR 16u

/* Open the ring of shard `shard`: path NULL, anonymous; else the file,
 * made anew for cap entries (rounded up to a power of two, at least 16).
 * mode: the file's, as le_config.file_mode.  @return 0 or -errno. */
int le__btring_open(le__btring *r, const char *path, uint32_t cap,
                    uint32_t shard, uint32_t unit, unsigned mode);
/* Map the ring a previous engine left at path, as it is.  @return 1 when
 * it was not closed cleanly (its process died: r is open, its kept
 * entries that process's), 0 when there is nothing to write out (closed
 * cleanly, a header that does not check: another shard's, size or
 * geometry not its own), or -errno (-ENOENT: no file). */
int le__btring_attach(le__btring *r, const char *path, uint32_t shard);
/* Unmap the ring; clean: mark the file closed cleanly first (nothing kept
 * in it is a dead process's).  A fork child's copy passes 0: the mapping
 * is its parent's too. */
void le__btring_close(le__btring *r, int clean);

/*
 * The producer's side, inline on the hot path: claim an entry (*gen its
 * word), fill it, then le__btring_publish.  @return the entry, or NULL
 * when the record lost its entry.
 *
 * Two locked instructions, the claim and the CAS, and no count: every
 * claim ends as an entry being written or kept, one a reader took, or a
 * dropped record (it lost its entry, or a later claim overwrote its kept
 * entry), so le__btring_dropped derives the drops from the claim number,
 * the readers' count and a look at the entries, off the hot path.
 */
static inline le__btent *le__btring_claim(le__btring *r, uint64_t *gen)
{
	/* relaxed: the number only picks the entry; the CAS below orders */
	uint64_t n = atomic_fetch_add_explicit(r->claims, 1,
	                                       memory_order_relaxed);
	le__btent *e = &r->ent[n & (r->cap - 1)];
	uint64_t want = (n + 1) << 2 | LE_BT_WRITING;

	/* The entry two claims on, asked for now (its first line: state,
	 * stamp, meta and the payload's start): written a lap ago, it has
	 * often left this core's caches, and its trip then overlaps this
	 * call instead of stalling a later one of the burst.  Only this
	 * producer's side writes entries, so a read prefetch gets the line
	 * exclusive when no other core holds it. */
	__builtin_prefetch(&r->ent[(n + 2) & (r->cap - 1)], 1);
	uint64_t old = atomic_load_explicit(&e->gen, memory_order_relaxed);

	/* acquire: a reader's copy (its store of state 3) is done before
	 * this producer's stores to the entry */
	if ((old & 3) < LE_BT_KEPT && old != 0)
		old = 1; /* being written or read: not ours to take */
	if (old == 1 || (old >> 2) >= n + 1 ||
	    !atomic_compare_exchange_strong_explicit(&e->gen, &old, want,
	                                             memory_order_acquire,
	                                             memory_order_relaxed)) {
		return NULL;
	}
	*gen = want;
	return e;
}

static inline void le__btring_publish(le__btent *e, uint64_t gen,
                                      uint64_t ts, uint64_t meta)
{
	e->ts = ts;
	atomic_store_explicit(&e->meta, meta, memory_order_relaxed);
	/* release: the entry's bytes before its state (see the top) */
	atomic_store_explicit(&e->gen, (gen & ~3ull) | LE_BT_KEPT,
	                      memory_order_release);
}

/*
 * Records this ring dropped: claimed (claims), minus those whose entry a
 * reader took, minus those still in an entry (being written, or kept).
 * So an entry overwritten while kept, and a record that lost its entry,
 * both count, and no producer counts either.  Exact once producers are
 * still; while they run, a producer between its claim and its CAS counts
 * as a drop until its entry shows it (a few instructions).  Reads every
 * entry's state word: one line per entry, for le_stats_get.
 */
uint64_t le__btring_dropped(le__btring *r);

/* A kept entry as a reader copied it. */
typedef struct le__btcopy {
	uint64_t ts, meta;
	unsigned char payload[LE_BT_PAYLOAD_MAX];
} le__btcopy;

/* Visit the kept entries in claim order, at most `max` (0: all) of the
 * newest of logger `logger` (-1: every logger's), each taken (state 3)
 * and copied into *copy before fn sees it.  dead: the ring of a process
 * that died, whose entries being read are taken too.  No lock, no
 * allocation: the crash handler calls this.  @return entries visited. */
typedef void (*le__btvisit_fn)(const le__btcopy *c, void *arg);
uint64_t le__btring_take(le__btring *r, uint32_t max, int logger, int dead,
                         le__btvisit_fn fn, void *arg, le__btcopy *copy);

#endif
