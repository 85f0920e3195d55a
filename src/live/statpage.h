/*
 * statpage.h -- the live counters page, DIR/shard-NNN/STATS: written by
 * the shard's writer thread, read by any process (le_live_read).  The
 * byte layout is in docs/INTERFACES.md ("Live counters page"):
 *
 *      0   64  header: magic, version, sizes, shard, CRC (constant)
 *     64    8  current: generation of the copy last published; the
 *              copy is slot (current & 1)
 *    128 1984  slot 0: u64 seq, then LE_SP_WORDS u64 words
 *   2112 1984  slot 1: the same
 *
 * Publishing (the writer, the only one to write the page): copy the
 * words into the slot not current, under that slot's sequence counter
 * (odd while it is written), then advance current.  A reader copies the
 * current slot between two reads of its counter and keeps the copy when
 * they are equal and even.  Two copies, so that a writer killed in the
 * middle of a publication leaves the current copy whole: a dead engine's
 * page still reads.  Memory order: see le__statpage_put() and
 * le__statpage_copy() in statpage.c.
 *
 * The hot path (submit.c) takes part only through the slot header's two
 * reserved bytes: a sampled call writes its duration there (le__sp_code)
 * and every other call writes 0; the writer reads them as it collects the
 * record (le__statpage_sample) and keeps the histograms in its own memory
 * until the next publication.  The segment store keeps its write and
 * fsync histograms (store.h) the same way.
 */
#ifndef LE_STATPAGE_H
#define LE_STATPAGE_H

#include <stdint.h>
#include <string.h>

#include "base/clock.h"
#include "base/hist.h"
#include "logengine.h"
#include "queue/queue.h"

#define LE_SP_MAGIC "LOGENGST"
#define LE_SP_VERSION 1u
#define LE_SP_BYTES 4096u
#define LE_SP_CUR_OFF 64u
#define LE_SP_SLOT0_OFF 128u
#define LE_SP_SLOT_BYTES 1984u
#define LE_SP_SLOT1_OFF (LE_SP_SLOT0_OFF + LE_SP_SLOT_BYTES)

/* Words of a slot after its sequence counter.  Append only: a word's
 * meaning never changes within a version, so a reader reads the words it
 * knows of a page with more (LE_SP_WORDS is in the header). */
enum {
	LE_SP_STATE,          /* 0 none, 1 running, 2 closed */
	LE_SP_PID,
	LE_SP_PROC_START,     /* /proc/PID/stat field 22: clock ticks after
	                         boot at which the process started */
	LE_SP_BOOT,           /* FNV-1a of the kernel's boot_id */
	LE_SP_NSHARDS,
	LE_SP_STARTED_NS,     /* CLOCK_REALTIME, ns */
	LE_SP_UPDATED_NS,     /* CLOCK_REALTIME of this publication */
	LE_SP_UPDATED_MONO,   /* CLOCK_MONOTONIC of this publication */
	LE_SP_PERIOD_NS,      /* longest the writer goes between publications
	                         while it runs: max(100 ms, flush_ms) */
	LE_SP_CONSUMED,       /* the shard's counters, as le__shard */
	LE_SP_DROPPED_FULL,
	LE_SP_DROPPED_IO,
	LE_SP_WRITTEN,
	LE_SP_BYTES_WRITTEN,
	LE_SP_MARKERS,
	LE_SP_SEGMENTS_CREATED,
	LE_SP_SEGMENTS_DELETED,
	LE_SP_SYNCS,
	LE_SP_CHECKPOINTS,
	LE_SP_WRITE_ERRORS,
	LE_SP_SYNC_ERRORS,
	LE_SP_SYNC_LOST,
	LE_SP_RECOVERED_TRUNCATED,
	LE_SP_RECOVERED,
	LE_SP_ABANDONED,
	LE_SP_WRITER_CPU_NS,
	LE_SP_FAILING,
	LE_SP_RING_BYTES,     /* head - tail: claimed ring bytes */
	LE_SP_RING_SIZE,
	LE_SP_SEGMENTS,       /* segment files now, the active one included */
	LE_SP_DISK_BYTES,
	LE_SP_SEGMENT,        /* index of the active segment */
	LE_SP_SEGMENT_END,    /* bytes written to it */
	LE_SP_LAST_FRAME_OFF, /* where its last written frame starts */
	LE_SP_NEXT_SEQ,       /* sequence after the last written frame */
	LE_SP_QUEUE_RECORDS,  /* engine-wide from here to LAST_ERROR */
	LE_SP_QUEUE_BYTES,
	LE_SP_QUEUE_CAP,
	LE_SP_QUEUE_CAP_BYTES,
	LE_SP_HWM_RECORDS,
	LE_SP_HWM_BYTES,
	LE_SP_HWM_RECORD_BYTES,
	LE_SP_TRUNCATED,
	LE_SP_REJECTED,
	LE_SP_BLOCKED,
	LE_SP_LAST_ERROR,     /* int, sign-extended */
	LE_SP_SAMPLE_PERIOD,  /* LE_LIVE_SUBMIT_SAMPLE */
	LE_SP_SUPPRESSED,     /* engine-wide: le_stats.suppressed (0 in
	                         pages of engines before it) */
	LE_SP_HIST,           /* 4 histograms, LE_SP_HIST_WORDS each, in the
	                         order of enum le__sp_hist: count, sum_ns,
	                         then LE_LIVE_BUCKETS buckets */
};
#define LE_SP_HIST_WORDS (2 + LE_LIVE_BUCKETS)
#define LE_SP_NHIST 4
/* After the histograms: records taken from the queue by level
 * (LE_TRACE .. LE_FATAL), as le_stats.level_records; then the shard's
 * kept records written out (the flight recorder).  A page without the
 * later words reads them as 0. */
#define LE_SP_LEVEL (LE_SP_HIST + LE_SP_NHIST * LE_SP_HIST_WORDS)
#define LE_SP_BT_WRITTEN (LE_SP_LEVEL + LE_FATAL + 1)
#define LE_SP_WORDS (LE_SP_BT_WRITTEN + 1)
_Static_assert(8 + 8 * LE_SP_WORDS <= LE_SP_SLOT_BYTES, "a slot holds them");
_Static_assert(LE_SP_SLOT1_OFF + LE_SP_SLOT_BYTES == LE_SP_BYTES, "layout");

enum le__sp_hist { LE_H_WRITE, LE_H_SYNC, LE_H_WAIT, LE_H_SUBMIT };
/* The write and fsync histograms are the segment store's (store.h); the
 * writer keeps these two. */
enum { LE_W_WAIT, LE_W_SUBMIT, LE_W_NHIST };
enum { LE_SP_NONE = 0, LE_SP_RUNNING = 1, LE_SP_CLOSED = 2 };

/* Pending queue-wait samples: records of the batch being built whose
 * call was timed, by their stamp (ns).  More in one batch are not kept. */
#define LE_SP_PENDING 32

/* [writer] The writer's side of the page (in le__shard). */
typedef struct le__statpage {
	unsigned char *map;        /* the page, or NULL: none (no store,
	                              or it could not be made) */
	uint64_t next_mono;        /* publish when the clock passes this */
	uint64_t period_ns;        /* LE_SP_PERIOD_NS */
	uint64_t started_ns, proc_start, boot;
	le__hist h[LE_W_NHIST];
	uint64_t pend_ts[LE_SP_PENDING];
	uint32_t npend;
} le__statpage;

/* ---- the submit sample (the hot path, submit.c) ---- */

/*
 * A sampled call's duration in stamp units (TSC ticks or ns), in the 16
 * bits of le__slot.reserved: bit 15 set (so 0 is "not sampled"), bits
 * 14..10 an exponent e, bits 9..0 a mantissa m: the duration is m when
 * e is 0, else (1024 + m) << (e - 1): within 1/1024, up to 2^41 units.
 */
static inline uint16_t le__sp_code(uint64_t d)
{
	if (d < 1024)
		return (uint16_t)(0x8000u | d);
	unsigned k = 63u - (unsigned)__builtin_clzll(d); /* >= 10 */
	unsigned e = k - 9;
	if (e > 31)
		return 0xffffu;
	return (uint16_t)(0x8000u | e << 10 | ((d >> (e - 1)) - 1024));
}

static inline uint64_t le__sp_decode(uint16_t c)
{
	uint64_t e = (c >> 10) & 31, m = c & 1023u;
	return e ? (1024 + m) << (e - 1) : m;
}

/* ---- the hooks (the engine's shard_page.c, writer.c) ----
 *
 * The page knows its layout and its process, not the engine: at each
 * publication the engine hands it the counter words (the shard's, the
 * store's, the engine's) in w[LE_SP_WORDS], zero where it has none, and
 * the page adds its own (state, process, times, the writer's histograms)
 * before it puts them. */

struct le__store;

/* Make the page DIR/shard-NNN/STATS (file_mode) for shard `shard`;
 * publications come at least every max(LE_LIVE_PERIOD_MS, flush_ms).
 * Best effort: without a page (p->map NULL) the engine runs as before.
 * @return 0; or the error, and le_errmsg names the file and why (a
 * symbolic link, FIFO, socket or device there is refused, LE_EUNSAFE). */
int le__statpage_open(le__statpage *p, const char *shard_dir,
                      uint32_t shard, unsigned file_mode, int flush_ms);
/* Publish the counters in w (running); w is completed in place. */
void le__statpage_publish(le__statpage *p, uint64_t *w, uint64_t now_mono);
/* The last publication (closed), and the page is let go. */
void le__statpage_close(le__statpage *p, uint64_t *w);
/* Add a segment store's counters to w (its [writer] fields are read by
 * their owner, or at close once it was joined). */
void le__statpage_fill_store(const struct le__store *st, uint64_t *w);
/* Every sink committed the batch: the queue wait of its sampled
 * records ends now. */
void le__statpage_committed(le__statpage *p);
/* A sampled record (code from its slot), stamp ts (ns), being collected. */
void le__statpage_note(le__statpage *p, uint16_t code,
                       const le__clock *clk, uint64_t ts);

/* Is a publication due (the writer's tick)? */
static inline int le__statpage_due(const le__statpage *p, uint64_t now_mono)
{
	return p->map && now_mono >= p->next_mono;
}

/* In collect, for each record: a sampled call's code is not 0. */
static inline void le__statpage_sample(le__statpage *p, const le__slot *sl,
                                       const le__clock *clk, uint64_t ts)
{
	uint16_t c;
	memcpy(&c, sl->reserved, sizeof c);
	if (__builtin_expect(c != 0, 0))
		le__statpage_note(p, c, clk, ts);
}

/* ---- the reader (le_live_read) and tests ---- */

/* Copy the current slot's words into w[LE_SP_WORDS] (words past the
 * page's count are 0).  @return 0, LE_ECORRUPT / LE_EVERSION (header),
 * LE_ETIMEDOUT (no stable copy after many tries). */
int le__statpage_copy(const unsigned char *map, uint64_t *w);
/* Write the header of a page for `shard` (constant for a version). */
void le__statpage_header(unsigned char *map, uint32_t shard);
/* Publish w[LE_SP_WORDS] into a page (the writer's protocol). */
void le__statpage_put(unsigned char *map, const uint64_t *w);

#endif
