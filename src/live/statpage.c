/*
 * statpage.c -- the live counters page (layout and protocol: statpage.h,
 * docs/INTERFACES.md): the writer's side (make, publish, close) and the
 * reader's (le_live_read, le_live_quantile).
 *
 * Who writes.  While the engine runs, only the shard's writer thread:
 * le__statpage_open at its start, then a publication from periodic() every
 * LE_LIVE_PERIOD_MS at most.  The last copy (closed) is written by
 * le_close's thread once it has joined the writer and the retention
 * thread, whose unlinks still count: never two writers at once.  The
 * application's threads only leave a sampled duration in a slot they own
 * (statpage.h).
 *
 * The page's file calls go through the le__os table like the log's, so a
 * test's faults reach it too: failing to make it costs the page (counted,
 * named in le_errmsg), never the engine.
 */
#define _GNU_SOURCE
#include "live/statpage.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/crc32c.h"
#include "base/internal.h"
#include "base/os.h"
#include "record/format.h"
#include "store/store.h"

#define MS 1000000ull

/* ---- the page, either side ---- */

static _Atomic uint64_t *word(const unsigned char *map, size_t off)
{
	return (_Atomic uint64_t *)(uintptr_t)(map + off);
}

static size_t slot_off(uint64_t gen)
{
	return (gen & 1) ? LE_SP_SLOT1_OFF : LE_SP_SLOT0_OFF;
}

void le__statpage_header(unsigned char *map, uint32_t shard)
{
	unsigned char h[64];

	memset(h, 0, sizeof h);
	memcpy(h, LE_SP_MAGIC, 8);
	le__put32(h + 8, LE_SP_VERSION);
	le__put32(h + 12, LE_SP_BYTES);
	le__put32(h + 16, shard);
	le__put32(h + 20, LE_SP_WORDS);
	le__put32(h + 24, LE_SP_SLOT0_OFF);
	le__put32(h + 28, LE_SP_SLOT_BYTES);
	le__put32(h + 60, le__crc_mask(le__crc32c_extend(0, h, 60)));
	/* A page a previous engine left has these very bytes: leave them,
	 * so that a reader never sees them change under it. */
	if (memcmp(map, h, sizeof h) != 0) {
		memset(map, 0, LE_SP_BYTES);
		memcpy(map, h, sizeof h);
	}
}

/*
 * The writer's protocol, on the slot that is not current:
 *   seq := even + 1 (relaxed); release fence; the words (relaxed);
 *   seq := even + 2 (release); current := current + 1 (release).
 * A reader that sees any word of this publication also sees the odd seq
 * (the fence pairs with the acquire fence after its copy), so it retries;
 * one that sees current advanced sees the whole slot (release/acquire).
 * A counter left odd by a writer killed in the middle is made even again
 * by the next one (the & ~1).
 */
void le__statpage_put(unsigned char *map, const uint64_t *w)
{
	_Atomic uint64_t *cur = word(map, LE_SP_CUR_OFF);
	uint64_t gen = atomic_load_explicit(cur, memory_order_relaxed) + 1;
	size_t off = slot_off(gen);
	_Atomic uint64_t *seq = word(map, off);
	uint64_t s = atomic_load_explicit(seq, memory_order_relaxed) & ~1ull;

	atomic_store_explicit(seq, s + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	for (size_t i = 0; i < LE_SP_WORDS; i++)
		atomic_store_explicit(seq + 1 + i, w[i], memory_order_relaxed);
	atomic_store_explicit(seq, s + 2, memory_order_release);
	atomic_store_explicit(cur, gen, memory_order_release);
}

/* @return the header's word count, or LE_ECORRUPT / LE_EVERSION. */
static int check_header(const unsigned char *h)
{
	if (memcmp(h, LE_SP_MAGIC, 8) != 0 ||
	    le__get32(h + 60) != le__crc_mask(le__crc32c_extend(0, h, 60)))
		return LE_ECORRUPT;
	if (le__get32(h + 8) != LE_SP_VERSION)
		return LE_EVERSION;
	uint32_t n = le__get32(h + 20);
	if (le__get32(h + 12) != LE_SP_BYTES ||
	    le__get32(h + 24) != LE_SP_SLOT0_OFF ||
	    le__get32(h + 28) != LE_SP_SLOT_BYTES ||
	    8 + 8 * (uint64_t)n > LE_SP_SLOT_BYTES)
		return LE_ECORRUPT;
	return (int)n;
}

/* The reader's side: seq (acquire), the words (relaxed), an acquire
 * fence, seq again; equal and even: a whole copy. */
int le__statpage_copy(const unsigned char *map, uint64_t *w)
{
	int n = check_header(map);
	if (n < 0)
		return n;
	size_t nw = (size_t)n < LE_SP_WORDS ? (size_t)n : LE_SP_WORDS;
	for (int tries = 0; tries < 10000; tries++) {
		uint64_t gen = atomic_load_explicit(word(map, LE_SP_CUR_OFF),
		                                    memory_order_acquire);
		_Atomic uint64_t *seq = word(map, slot_off(gen));
		uint64_t s1 = atomic_load_explicit(seq, memory_order_acquire);
		if (s1 & 1) {
			sched_yield();
			continue;
		}
		for (size_t i = 0; i < nw; i++)
			w[i] = atomic_load_explicit(seq + 1 + i,
			                            memory_order_relaxed);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(seq, memory_order_relaxed) == s1) {
			memset(w + nw, 0, (LE_SP_WORDS - nw) * sizeof *w);
			return 0;
		}
	}
	return LE_ETIMEDOUT;
}

/* ---- the writer's side ---- */

/* Field 22 of /proc/self/stat: when the process started, in clock ticks
 * after boot.  With the pid and the boot it names one process for good:
 * a pid used again by another process has another start. */
static uint64_t proc_start(int pid)
{
	char path[64], b[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, b, sizeof b - 1);
	close(fd);
	if (n <= 0)
		return 0;
	b[n] = '\0';
	char *p = strrchr(b, ')'); /* the name may hold spaces and ')' */
	if (!p)
		return 0;
	p++;
	for (int field = 3; field < 22 && p; field++)
		p = strchr(p + 1, ' ');
	return p ? strtoull(p + 1, NULL, 10) : 0;
}

/* This process's start, read once per process (a fork's child is another
 * pid and reads its own): every le_open asks for it.  start is stored
 * before the pid that says it is this process's (release), so a thread
 * that finds its pid (acquire) finds its start too. */
static uint64_t own_start(void)
{
	static _Atomic int pid;
	static _Atomic uint64_t start;
	int me = getpid();
	if (atomic_load_explicit(&pid, memory_order_acquire) == me)
		return atomic_load_explicit(&start, memory_order_relaxed);
	uint64_t s = proc_start(me);
	atomic_store_explicit(&start, s, memory_order_relaxed);
	atomic_store_explicit(&pid, me, memory_order_release);
	return s;
}

static void put_hist(uint64_t *w, const le__hist *h)
{
	w[0] = h->count;
	w[1] = h->sum;
	memcpy(w + 2, h->b, sizeof h->b);
}

#define LOAD(x) atomic_load_explicit(&(x), memory_order_relaxed)

void le__statpage_fill_store(const le__store *st, uint64_t *w)
{
	w[LE_SP_DROPPED_IO] = LOAD(st->dropped_io);
	w[LE_SP_WRITTEN] = LOAD(st->written);
	w[LE_SP_BYTES_WRITTEN] = LOAD(st->bytes_written);
	w[LE_SP_MARKERS] = LOAD(st->markers);
	w[LE_SP_SEGMENTS_CREATED] = LOAD(st->segments_created);
	w[LE_SP_SEGMENTS_DELETED] = LOAD(st->segments_deleted);
	w[LE_SP_SYNCS] = LOAD(st->syncs);
	w[LE_SP_CHECKPOINTS] = LOAD(st->checkpoints);
	w[LE_SP_WRITE_ERRORS] = LOAD(st->write_errors);
	w[LE_SP_SYNC_ERRORS] = LOAD(st->sync_errors);
	w[LE_SP_SYNC_LOST] = LOAD(st->sync_lost);
	w[LE_SP_RECOVERED_TRUNCATED] = LOAD(st->recovered_truncated);
	/* The active segment's bytes: what its writes have put there. */
	uint64_t end = st->fd >= 0 ? st->buf_off + st->buf_len - st->buf_new : 0;
	w[LE_SP_SEGMENTS] = st->sealed.nsegs + (st->fd >= 0);
	w[LE_SP_DISK_BYTES] = st->sealed.segs_bytes + end;
	w[LE_SP_SEGMENT] = st->seg_index;
	w[LE_SP_SEGMENT_END] = end;
	/* A new segment's first frame is not written yet: its header's end
	 * (w_last_off may still name a frame of the segment before). */
	w[LE_SP_LAST_FRAME_OFF] = st->w_last_off >= LE_SEG_HDR &&
	                                          st->w_last_off < end
	                                  ? st->w_last_off
	                                  : LE_SEG_HDR;
	w[LE_SP_NEXT_SEQ] = st->w_next_seq;
	put_hist(w + LE_SP_HIST + LE_H_WRITE * LE_SP_HIST_WORDS, &st->lat_write);
	put_hist(w + LE_SP_HIST + LE_H_SYNC * LE_SP_HIST_WORDS, &st->lat_sync);
}

/* The page's own words of a publication, over the engine's counters. */
static void fill_own(const le__statpage *p, uint64_t *w, uint64_t state,
                     uint64_t mono)
{
	w[LE_SP_STATE] = state;
	w[LE_SP_PID] = (uint64_t)getpid();
	w[LE_SP_PROC_START] = p->proc_start;
	w[LE_SP_BOOT] = p->boot;
	w[LE_SP_STARTED_NS] = p->started_ns;
	w[LE_SP_UPDATED_NS] = le__now_ns();
	w[LE_SP_UPDATED_MONO] = mono;
	w[LE_SP_PERIOD_NS] = p->period_ns;
	w[LE_SP_SAMPLE_PERIOD] = LE_LIVE_SUBMIT_SAMPLE;
	put_hist(w + LE_SP_HIST + LE_H_WAIT * LE_SP_HIST_WORDS,
	         &p->h[LE_W_WAIT]);
	put_hist(w + LE_SP_HIST + LE_H_SUBMIT * LE_SP_HIST_WORDS,
	         &p->h[LE_W_SUBMIT]);
}

void le__statpage_publish(le__statpage *p, uint64_t *w, uint64_t now_mono)
{
	fill_own(p, w, LE_SP_RUNNING, now_mono);
	le__statpage_put(p->map, w);
	p->next_mono = now_mono + LE_LIVE_PERIOD_MS * MS;
}

int le__statpage_open(le__statpage *p, const char *shard_dir,
                      uint32_t shard, unsigned file_mode, int flush_ms)
{
	char path[LE_PATH_MAX + 16];

	memset(p, 0, sizeof *p);
	snprintf(path, sizeof path, "%s/STATS", shard_dir);
	/* le__open_in names a link, FIFO, socket or device and refuses it */
	int fd = le__open_in(path, LE_IN_SHARD, O_RDWR | O_CREAT, file_mode);
	if (fd < 0) {
		if (fd != LE_EUNSAFE)
			le__seterr("%s: %s", path, le_strerror(fd));
		return fd;
	}
	/* Blocks first: a store into a hole of a full file system would
	 * be a SIGBUS in this thread, not an error. */
	struct stat st;
	void *m = MAP_FAILED;
	int fault_in = 0;
	int rc = le__fstat(fd, &st);
	if (rc == 0 && st.st_size != LE_SP_BYTES)
		rc = le__ftruncate(fd, LE_SP_BYTES);
	if (rc == 0 && (rc = le__prealloc(fd, 0, LE_SP_BYTES)) == -EOPNOTSUPP)
		rc = 0, fault_in = 1; /* the blocks come from the faults below */
	if (rc == 0)
		m = le__mmap(NULL, LE_SP_BYTES, PROT_READ | PROT_WRITE,
		             MAP_SHARED, fd, 0);
	if (rc == 0 && m == MAP_FAILED)
		rc = -errno;
	if (rc == 0 && fault_in &&
	    (rc = le__populate_write(m, LE_SP_BYTES)) == -EINVAL) {
		/* A kernel before 5.14 cannot fault blocks in: write the
		 * page's bytes instead (what posix_fallocate does where the
		 * file system has no fallocate).  The page's own header is
		 * written over them next. */
		static const unsigned char zero[LE_SP_BYTES];
		rc = le__pwrite_all(fd, zero, sizeof zero, 0);
	}
	if (rc < 0 && m != MAP_FAILED)
		le__munmap(m, LE_SP_BYTES);
	le__close(fd);
	if (rc < 0) {
		le__seterr("%s: %s", path, le_strerror(rc));
		return rc;
	}
	p->map = m;
	le__statpage_header(p->map, shard);
	p->started_ns = le__now_ns();
	p->proc_start = own_start();
	p->boot = le__boot_id();
	uint64_t flush = (uint64_t)flush_ms * MS;
	p->period_ns = flush > LE_LIVE_PERIOD_MS * MS ? flush
	                                              : LE_LIVE_PERIOD_MS * MS;
	return 0;
}

void le__statpage_close(le__statpage *p, uint64_t *w)
{
	if (!p->map)
		return;
	fill_own(p, w, LE_SP_CLOSED, le__mono_ns());
	le__statpage_put(p->map, w);
	le__munmap(p->map, LE_SP_BYTES);
	p->map = NULL;
}

void le__statpage_committed(le__statpage *p)
{
	if (!p->npend)
		return;
	uint64_t real = le__now_ns();
	for (uint32_t i = 0; i < p->npend; i++)
		le__hist_add(&p->h[LE_W_WAIT],
		             real > p->pend_ts[i] ? real - p->pend_ts[i] : 0);
	p->npend = 0;
}

void le__statpage_note(le__statpage *p, uint16_t code, const le__clock *clk,
                       uint64_t ts)
{
	if (!p->map) /* also: recovering a dead process's queue, in le_open */
		return;
	uint64_t d = le__sp_decode(code);
	if (clk->ns_per_tick != 0)
		d = (uint64_t)(((unsigned __int128)d * clk->mult) >> 32);
	le__hist_add(&p->h[LE_W_SUBMIT], d);
	if (p->npend < LE_SP_PENDING)
		p->pend_ts[p->npend++] = ts;
}

/* ---- the reader ---- */

/* What a reader last learnt of a process (a handle keeps one). */
struct proc_seen {
	int pid, alive;
	uint64_t start, at;      /* its start time; when asked (mono ns) */
};

/* Is the process that published w still the one running as its pid?
 * With `seen`, an answer less than a period old is taken again: the pages
 * of one engine name one process, so 256 shards ask /proc once. */
static int proc_alive(const uint64_t *w, struct proc_seen *seen)
{
	if (w[LE_SP_BOOT] != le__boot_id())
		return 0; /* published before a reboot */
	int pid = (int)w[LE_SP_PID];
	if (pid <= 0)
		return 0;
	uint64_t now = le__mono_ns();
	if (seen && pid == seen->pid && w[LE_SP_PROC_START] == seen->start &&
	    now - seen->at < LE_LIVE_PERIOD_MS * MS)
		return seen->alive;
	uint64_t start = proc_start(pid);
	int alive = start ? start == w[LE_SP_PROC_START]
	                  /* No /proc to ask: kill(0) only says the pid is
	                   * taken. */
	                  : kill(pid, 0) == 0 || errno == EPERM;
	if (seen)
		*seen = (struct proc_seen){pid, alive, w[LE_SP_PROC_START], now};
	return alive;
}

static void get_hist(le_live_hist *h, const uint64_t *w)
{
	h->count = w[0];
	h->sum_ns = w[1];
	memcpy(h->bucket, w + 2, sizeof h->bucket);
}

static void to_live(le_live *o, const uint64_t *w, uint32_t shard)
{
	memset(o, 0, sizeof *o);
	o->shard = shard;
	o->pid = (int)w[LE_SP_PID];
	o->nshards = (uint32_t)w[LE_SP_NSHARDS];
	o->started_ns = w[LE_SP_STARTED_NS];
	o->updated_ns = w[LE_SP_UPDATED_NS];
	uint64_t now = le__mono_ns(), at = w[LE_SP_UPDATED_MONO];
	o->age_ns = now > at ? now - at : 0;
	o->dropped_full = w[LE_SP_DROPPED_FULL];
	o->dropped_io = w[LE_SP_DROPPED_IO];
	o->dropped = o->dropped_full + o->dropped_io;
	o->accepted = w[LE_SP_CONSUMED] + o->dropped_full;
	o->written = w[LE_SP_WRITTEN];
	o->bytes_written = w[LE_SP_BYTES_WRITTEN];
	o->markers = w[LE_SP_MARKERS];
	o->segments_created = w[LE_SP_SEGMENTS_CREATED];
	o->segments_deleted = w[LE_SP_SEGMENTS_DELETED];
	o->syncs = w[LE_SP_SYNCS];
	o->checkpoints = w[LE_SP_CHECKPOINTS];
	o->write_errors = w[LE_SP_WRITE_ERRORS];
	o->sync_errors = w[LE_SP_SYNC_ERRORS];
	o->sync_lost = w[LE_SP_SYNC_LOST];
	o->recovered_truncated_bytes = w[LE_SP_RECOVERED_TRUNCATED];
	o->recovered_records = w[LE_SP_RECOVERED];
	o->abandoned_slots = w[LE_SP_ABANDONED];
	o->writer_cpu_ns = w[LE_SP_WRITER_CPU_NS];
	o->failing = w[LE_SP_FAILING] != 0;
	o->ring_bytes = w[LE_SP_RING_BYTES];
	o->ring_size = w[LE_SP_RING_SIZE];
	o->queue_records = w[LE_SP_QUEUE_RECORDS];
	o->queue_bytes = w[LE_SP_QUEUE_BYTES];
	o->queue_capacity = w[LE_SP_QUEUE_CAP];
	o->queue_capacity_bytes = w[LE_SP_QUEUE_CAP_BYTES];
	o->queue_hwm_records = w[LE_SP_HWM_RECORDS];
	o->queue_hwm_bytes = w[LE_SP_HWM_BYTES];
	o->record_hwm_bytes = w[LE_SP_HWM_RECORD_BYTES];
	o->truncated = w[LE_SP_TRUNCATED];
	o->rejected = w[LE_SP_REJECTED];
	o->blocked = w[LE_SP_BLOCKED];
	o->suppressed = w[LE_SP_SUPPRESSED];
	o->last_error = (int)(int64_t)w[LE_SP_LAST_ERROR];
	o->segments = w[LE_SP_SEGMENTS];
	o->disk_bytes = w[LE_SP_DISK_BYTES];
	o->segment = w[LE_SP_SEGMENT];
	o->segment_end = w[LE_SP_SEGMENT_END];
	o->last_frame_off = w[LE_SP_LAST_FRAME_OFF];
	o->next_seq = w[LE_SP_NEXT_SEQ];
	const uint64_t *h = w + LE_SP_HIST;
	get_hist(&o->write, h + LE_H_WRITE * LE_SP_HIST_WORDS);
	get_hist(&o->sync, h + LE_H_SYNC * LE_SP_HIST_WORDS);
	get_hist(&o->queue_wait, h + LE_H_WAIT * LE_SP_HIST_WORDS);
	get_hist(&o->submit, h + LE_H_SUBMIT * LE_SP_HIST_WORDS);
	memcpy(o->level_records, w + LE_SP_LEVEL, sizeof o->level_records);
	o->backtrace_written = w[LE_SP_BT_WRITTEN];
}

/* Running, stale or dead, for a page whose last word was "running". */
static int running_state(const uint64_t *w, uint64_t age_ns,
                         struct proc_seen *seen)
{
	if (!proc_alive(w, seen))
		return LE_LIVE_DEAD;
	uint64_t limit = 3 * w[LE_SP_PERIOD_NS];
	if (limit < 2000 * MS)
		limit = 2000 * MS;
	return age_ns > limit ? LE_LIVE_STALE : LE_LIVE_RUNNING;
}

/* Map the page at path.  @return 1 mapped (*map), 0 an empty file (being
 * made), or LE_ECORRUPT / -errno; *st its identity. */
static int map_page(const char *path, void **map, struct stat *st)
{
	int fd = le__open_in(path, LE_IN_SHARD, O_RDONLY, 0);
	if (fd < 0)
		return fd;
	int rc = le__fstat(fd, st);
	if (rc == 0)
		rc = st->st_size == 0                   ? 0
		     : st->st_size < (off_t)LE_SP_BYTES ? LE_ECORRUPT /* not a page */
		                                        : 1;
	if (rc == 1) {
		*map = le__mmap(NULL, LE_SP_BYTES, PROT_READ, MAP_SHARED, fd,
		                0);
		if (*map == MAP_FAILED)
			rc = -errno;
	}
	le__close(fd);
	return rc;
}

/* A copy of a mapped page (NULL: an empty file), its state decided. */
static int read_page(const unsigned char *m, const char *path,
                     unsigned shard, le_live *out, struct proc_seen *seen)
{
	static const unsigned char zero[64];
	uint64_t w[LE_SP_WORDS];
	int rc = 0;

	if (!m || memcmp(m, zero, sizeof zero) == 0)
		memset(w, 0, sizeof w); /* made, nothing in it yet */
	else
		rc = le__statpage_copy(m, w);
	if (rc < 0) {
		le__seterr("%s: %s", path,
		           rc == LE_EVERSION   ? "page of another format version"
		           : rc == LE_ECORRUPT ? "not a live counters page"
		                               : "page kept changing");
		return rc;
	}
	to_live(out, w, shard);
	switch (w[LE_SP_STATE]) {
	case LE_SP_RUNNING:
		out->state = running_state(w, out->age_ns, seen);
		break;
	case LE_SP_CLOSED:
		out->state = LE_LIVE_CLOSED;
		break;
	default:
		out->state = LE_LIVE_NONE;
	}
	return 0;
}

static void page_path(char *buf, size_t cap, const char *dir, unsigned shard)
{
	snprintf(buf, cap, "%s/shard-%03u/STATS", dir, shard);
}

/* Our le_live into the caller's, of `size` bytes: none past it, and what
 * it has past ours zeroed (include/logengine.h, src/engine/abi.c). */
static void live_out(le_live *out, size_t size, const le_live *l)
{
	memcpy(out, l, size < sizeof *l ? size : sizeof *l);
	if (size > sizeof *l)
		memset((char *)out + sizeof *l, 0, size - sizeof *l);
}

static int live_read(const char *dir, unsigned shard, le_live *out)
{
	char path[LE_PATH_MAX + 32];
	struct stat st;
	void *m = NULL;

	page_path(path, sizeof path, dir, shard);
	int rc = map_page(path, &m, &st);
	if (rc == LE_ECORRUPT)
		le__seterr("%s: not a live counters page", path);
	if (rc < 0)
		return rc;
	rc = read_page(rc ? m : NULL, path, shard, out, NULL);
	if (m)
		le__munmap(m, LE_SP_BYTES);
	return rc;
}

/* ---- a reader's handle: the pages kept mapped ---- */

/* How often a kept page's path is looked at again: a directory removed
 * and made anew holds another file. */
#define RECHECK_NS (1000 * MS)

struct le_live_dir {
	char *dir;
	struct proc_seen seen;
	struct kept {
		void *map;       /* NULL: not mapped */
		dev_t dev;
		ino_t ino;
		uint64_t checked; /* mono ns */
	} page[LE_MAX_SHARDS];
};

int le_live_open(le_live_dir **out, const char *dir)
{
	if (!out || !dir)
		return LE_EINVAL;
	le_live_dir *d = calloc(1, sizeof *d);
	if (!d || !(d->dir = strdup(dir))) {
		free(d);
		return LE_ENOMEM;
	}
	*out = d;
	return 0;
}

static void unkeep(struct kept *k)
{
	if (k->map)
		le__munmap(k->map, LE_SP_BYTES);
	k->map = NULL;
}

static int live_get(le_live_dir *d, unsigned shard, le_live *out)
{
	char path[LE_PATH_MAX + 32];
	struct stat st;

	struct kept *k = &d->page[shard];
	page_path(path, sizeof path, d->dir, shard);
	uint64_t now = le__mono_ns();
	if (!k->map || now - k->checked >= RECHECK_NS) {
		int rc = le__stat(path, &st);
		if (rc < 0 || !k->map || st.st_dev != k->dev ||
		    st.st_ino != k->ino) {
			unkeep(k);
			void *m = NULL;
			rc = rc < 0 ? rc : map_page(path, &m, &st);
			if (rc == LE_ECORRUPT)
				le__seterr("%s: not a live counters page", path);
			if (rc < 0)
				return rc;
			if (rc == 0) /* empty: being made */
				return read_page(NULL, path, shard, out, NULL);
			k->map = m;
			k->dev = st.st_dev;
			k->ino = st.st_ino;
		}
		k->checked = now;
	}
	return read_page(k->map, path, shard, out, &d->seen);
}

int le_live_read_sized(const char *dir, unsigned shard, le_live *out,
                       size_t size)
{
	le_live l;
	le__clearerr();
	if (!dir || !out || shard >= LE_MAX_SHARDS)
		return LE_EINVAL;
	int rc = live_read(dir, shard, &l);
	if (rc == 0)
		live_out(out, size, &l);
	return rc;
}

int le_live_get_sized(le_live_dir *d, unsigned shard, le_live *out,
                      size_t size)
{
	le_live l;
	le__clearerr();
	if (!d || !out || shard >= LE_MAX_SHARDS)
		return LE_EINVAL;
	int rc = live_get(d, shard, &l);
	if (rc == 0)
		live_out(out, size, &l);
	return rc;
}

void le_live_close(le_live_dir *d)
{
	if (!d)
		return;
	for (unsigned i = 0; i < LE_MAX_SHARDS; i++)
		unkeep(&d->page[i]);
	free(d->dir);
	free(d);
}

double le_live_quantile(const le_live_hist *h, double q)
{
	if (!h || !h->count)
		return 0;
	if (q < 0)
		q = 0;
	if (q > 1)
		q = 1;
	double want = q * (double)h->count, seen = 0;
	for (int i = 0; i < LE_LIVE_BUCKETS; i++) {
		double n = (double)h->bucket[i];
		if (n > 0 && seen + n >= want) {
			double lo = i ? (double)(1ull << i) : 0;
			double hi = (double)(1ull << (i + 1));
			return lo + (hi - lo) * ((want - seen) / n);
		}
		seen += n;
	}
	return (double)(1ull << LE_LIVE_BUCKETS);
}
