/*
 * index.c -- the sparse time index of sealed segments: the file format
 * (index.h, docs/INTERFACES.md), building one from a segment, loading one
 * without trusting it, and the lookups a seek needs.
 *
 * Who writes it.  The writer calls le__index_on_seal once a segment is
 * sealed.  Building means reading the segment back (64 MiB by default):
 * done on the writer thread that would stop taking records for tens of
 * milliseconds at every rotation, longer than the queue lasts at full
 * rate.  Recording entries while encoding would cost the hot loop a test
 * per frame and fields in the shard's structure.  So the seal only queues
 * (shard dir, segment index) for one builder thread per process, which
 * reads the file from the page cache it was just written to:
 *
 *   writer: seal --> le__index_on_seal --[jobs, IDX_JOBS]--> builder thread
 *                    (mutex, copy)          full: dropped      read segment,
 *                                                              write .idx
 *                                                              (tmp+rename),
 *                                                              drop orphans
 *
 * The builder's file calls go through the le__os table like the rest
 * (a test's faults and memfs reach it); le_close waits for the builds of
 * its directory (le__index_wait_dir), so none runs on a table a test has
 * put back.  A
 * build that a process exit cuts short leaves at most a temporary file
 * (removed by the next build in that shard) and a segment without index.
 * Memory: the job list (IDX_JOBS paths) and, while a build runs, one read
 * window and the entries (24 bytes per 64 KiB of segment).
 */
#define _GNU_SOURCE
#include "store/index.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/crc32c.h"
#include "base/os.h"
#include "store/seg_zst.h"
#include "store/segment.h"

#define IDX_JOBS 16       /* seals waiting for the builder */

/* ---- the file ---- */

int le__index_path(char *buf, size_t cap, const char *shard_dir,
                   uint64_t seg_index)
{
	int n = snprintf(buf, cap, "%s/%016" PRIx64 ".idx", shard_dir,
	                 seg_index);
	return (n < 0 || (size_t)n >= cap) ? -ENAMETOOLONG : 0;
}

static uint32_t entries_crc(const unsigned char *p, size_t n)
{
	return le__crc_mask(le__crc32c_extend(0, p, n * LE_IDX_ENTRY));
}

size_t le__index_encode(unsigned char *out, const le__index *x)
{
	unsigned char *h = out, *p = out + LE_IDX_HDR;

	for (size_t i = 0; i < x->n; i++, p += LE_IDX_ENTRY) {
		le__put64(p, x->e[i].off);
		le__put64(p + 8, x->e[i].seq);
		le__put64(p + 16, x->e[i].before);
	}
	memset(h, 0, LE_IDX_HDR);
	memcpy(h, LE_IDX_MAGIC, 8);
	le__put16(h + 8, LE_IDX_VERSION);
	le__put16(h + 10, LE_IDX_HDR);
	le__put32(h + 12, LE_IDX_ENTRY);
	le__put32(h + 16, x->shard);
	le__put32(h + 20, x->spacing);
	le__put64(h + 24, x->seg_index);
	le__put64(h + 32, x->base_seq);
	le__put64(h + 40, x->created_ns);
	le__put64(h + 48, x->end);
	le__put64(h + 56, x->records);
	le__put64(h + 64, x->ts_min);
	le__put64(h + 72, x->ts_max);
	le__put32(h + 80, (uint32_t)x->n);
	le__put32(h + 84, entries_crc(out + LE_IDX_HDR, x->n));
	le__put32(h + 92, le__crc_mask(le__crc32c_extend(0, h, 92)));
	return LE_IDX_HDR + x->n * LE_IDX_ENTRY;
}

static int bad(const char **why, const char *what)
{
	*why = what;
	return LE_ECORRUPT;
}

/* The entries must describe frames of the segment in order: each a frame
 * of the covered range, sequences and offsets rising, `before` never
 * falling, the first one the segment's first frame. */
static int check_entries(const le__index *x, const char **why)
{
	if (x->records == 0)
		return x->n == 0 && x->end == LE_SEG_HDR
		               ? 0 : bad(why, "index of no records has entries");
	if (x->n == 0 || x->e[0].off != LE_SEG_HDR ||
	    x->e[0].seq != x->base_seq || x->e[0].before != 0)
		return bad(why, "first entry is not the first frame");
	for (size_t i = 0; i < x->n; i++) {
		const le__idx_entry *e = &x->e[i];
		if (e->off >= x->end || e->seq - x->base_seq >= x->records ||
		    e->before > x->ts_max)
			return bad(why, "entry outside the range covered");
		if (i && (e->off <= e[-1].off || e->seq <= e[-1].seq ||
		          e->before < e[-1].before))
			return bad(why, "entries out of order");
	}
	return 0;
}

int le__index_decode(const unsigned char *buf, size_t len, le__index *x,
                     const char **why)
{
	const unsigned char *h = buf;

	memset(x, 0, sizeof *x);
	if (len < LE_IDX_HDR || memcmp(h, LE_IDX_MAGIC, 8) != 0)
		return bad(why, "not an index file");
	if (le__get32(h + 92) != le__crc_mask(le__crc32c_extend(0, h, 92)))
		return bad(why, "index header checksum mismatch");
	if (le__get16(h + 8) != LE_IDX_VERSION) {
		*why = "unknown index version";
		return LE_EVERSION;
	}
	uint32_t n = le__get32(h + 80);
	if (le__get16(h + 10) != LE_IDX_HDR ||
	    le__get32(h + 12) != LE_IDX_ENTRY || le__get32(h + 88) != 0 ||
	    le__get32(h + 20) == 0)
		return bad(why, "index header fields out of range");
	if (n > LE_IDX_MAX_ENTRIES ||
	    len != LE_IDX_HDR + (size_t)n * LE_IDX_ENTRY)
		return bad(why, "index file size does not match its entries");
	if (le__get32(h + 84) != entries_crc(buf + LE_IDX_HDR, n))
		return bad(why, "index entries checksum mismatch");
	x->shard = le__get32(h + 16);
	x->spacing = le__get32(h + 20);
	x->seg_index = le__get64(h + 24);
	x->base_seq = le__get64(h + 32);
	x->created_ns = le__get64(h + 40);
	x->end = le__get64(h + 48);
	x->records = le__get64(h + 56);
	x->ts_min = le__get64(h + 64);
	x->ts_max = le__get64(h + 72);
	if (x->end < LE_SEG_HDR || x->ts_min > x->ts_max)
		return bad(why, "index header fields out of range");
	if (n && !(x->e = malloc((size_t)n * sizeof *x->e)))
		return LE_ENOMEM;
	x->n = x->cap = n;
	for (size_t i = 0; i < n; i++) {
		const unsigned char *p = buf + LE_IDX_HDR + i * LE_IDX_ENTRY;
		x->e[i] = (le__idx_entry){le__get64(p), le__get64(p + 8),
		                          le__get64(p + 16)};
	}
	int rc = check_entries(x, why);
	if (rc < 0)
		le__index_free(x);
	return rc;
}

void le__index_free(le__index *x)
{
	free(x->e);
	x->e = NULL;
	x->n = x->cap = 0;
}

/* ---- building ---- */

static int add_entry(le__index *x, uint64_t off, uint64_t seq,
                     uint64_t before)
{
	if (x->n == x->cap) {
		size_t nc = x->cap ? x->cap * 2 : 64;
		le__idx_entry *ne = realloc(x->e, nc * sizeof *ne);
		if (!ne)
			return LE_ENOMEM;
		x->e = ne;
		x->cap = nc;
	}
	x->e[x->n++] = (le__idx_entry){off, seq, before};
	return 0;
}

/* Walk every frame the segment scanner accepts (the same validation a
 * reader applies), adding an entry at the first frame and at the first
 * frame LE_IDX_SPACING bytes past the last entry; stop at the first frame
 * that does not validate (end of data, a torn or damaged frame, one of
 * another shard or out of sequence). */
static int walk_frames(le__scan *s, le__index *x)
{
	uint64_t before = 0, last = 0;
	le__frame f;
	const char *why;
	int rc;

	for (;;) {
		uint64_t off = s->off;
		if ((rc = le__scan_next(s, &f, &why)) != LE_FRAME_OK)
			break;
		if (x->n == 0 || off >= last + x->spacing) {
			if ((rc = add_entry(x, off, f.seq, before)) < 0)
				return rc;
			last = off;
		}
		if (x->records++ == 0 || f.ts < x->ts_min)
			x->ts_min = f.ts;
		if (f.ts > before)
			before = f.ts;
	}
	if (rc < 0)
		return rc;
	x->end = s->off;
	x->ts_max = before;
	return 0;
}

int le__index_build(const char *seg_path, le__index *x)
{
	le__scan s;
	const char *why;

	memset(x, 0, sizeof *x);
	int rc = le__scan_open(&s, seg_path, UINT32_MAX, &why);
	if (rc < 0)
		return rc;
	x->shard = s.hdr.shard;
	x->spacing = LE_IDX_SPACING;
	x->seg_index = s.hdr.index;
	x->base_seq = s.hdr.base_seq;
	x->created_ns = s.hdr.created_ns;
	rc = walk_frames(&s, x);
	le__scan_close(&s);
	if (rc < 0)
		le__index_free(x);
	return rc;
}

int le__index_write(const char *shard_dir, const le__index *x)
{
	char path[LE_PATH_MAX], tmp[LE_PATH_MAX + 8];
	size_t len = LE_IDX_HDR + x->n * LE_IDX_ENTRY;
	unsigned char *img = malloc(len);
	int rc = le__index_path(path, sizeof path, shard_dir, x->seg_index);

	if (!img)
		return LE_ENOMEM;
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	le__index_encode(img, x);
	/* Readable by whoever may read the segment it indexes. */
	char seg[LE_PATH_MAX];
	struct stat sst;
	mode_t mode = 0640;
	if (le__seg_path(seg, sizeof seg, shard_dir, x->seg_index) == 0 &&
	    le__lstat(seg, &sst) == 0 && S_ISREG(sst.st_mode))
		mode = sst.st_mode & 0666;
	int fd = rc < 0 ? -1
	                : le__open_in(tmp, LE_IN_SHARD,
	                              O_WRONLY | O_CREAT | O_TRUNC, mode);
	if (rc == 0 && fd < 0)
		rc = fd;
	if (rc == 0)
		rc = le__pwrite_all(fd, img, len, 0);
	if (fd >= 0)
		le__close(fd);
	/* No fsync: after a power cut the file may be short or zeros, which
	 * its checks refuse, and the segment is read without it. */
	if (rc == 0)
		rc = le__rename(tmp, path);
	if (rc < 0 && fd >= 0)
		le__unlink(tmp);
	free(img);
	return rc;
}

/* ---- reading ---- */

int le__index_load(const char *shard_dir, const le__seg_hdr *h,
                   uint64_t seg_len, le__index *x)
{
	char path[LE_PATH_MAX];
	struct stat st;
	const char *why;
	int rc = le__index_path(path, sizeof path, shard_dir, h->index);

	memset(x, 0, sizeof *x);
	if (rc < 0)
		return rc;
	int fd = le__open_in(path, LE_IN_SHARD, O_RDONLY, 0);
	if (fd < 0)
		return fd;
	rc = le__fstat(fd, &st);
	unsigned char *img = NULL;
	size_t len = rc == 0 ? (size_t)st.st_size : 0;
	if (rc == 0 && (len < LE_IDX_HDR ||
	                len > LE_IDX_HDR + (size_t)LE_IDX_MAX_ENTRIES *
	                                           LE_IDX_ENTRY))
		rc = LE_ECORRUPT;
	if (rc == 0 && !(img = malloc(len)))
		rc = LE_ENOMEM;
	if (rc == 0) {
		ssize_t got = le__pread_full(fd, img, len, 0);
		rc = got < 0 ? (int)got : (size_t)got != len ? LE_ECORRUPT : 0;
	}
	le__close(fd);
	if (rc == 0)
		rc = le__index_decode(img, len, x, &why);
	free(img);
	if (rc == LE_EVERSION)
		rc = LE_ECORRUPT; /* a newer index: only a hint, not ours */
	if (rc == 0 && (x->shard != h->shard || x->seg_index != h->index ||
	                x->base_seq != h->base_seq ||
	                x->created_ns != h->created_ns || x->end > seg_len)) {
		le__index_free(x);
		rc = LE_ECORRUPT;
	}
	return rc;
}

void le__index_find_time(const le__index *x, uint64_t ts, uint64_t *off,
                         uint64_t *seq)
{
	if (x->records == 0 || ts > x->ts_max) {
		*off = x->end;
		*seq = x->base_seq + x->records;
		return;
	}
	/* before[] never falls: the last entry below ts, by bisection
	 * (entry 0 has before = 0, so only ts == 0 finds none). */
	size_t lo = 0, hi = x->n;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (x->e[mid].before < ts)
			lo = mid;
		else
			hi = mid;
	}
	*off = x->e[lo].off;
	*seq = x->e[lo].seq;
}

void le__index_find_seq(const le__index *x, uint64_t seq, uint64_t *off,
                        uint64_t *at_seq)
{
	size_t lo = 0, hi = x->n;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (x->e[mid].seq <= seq)
			lo = mid;
		else
			hi = mid;
	}
	*off = x->n ? x->e[lo].off : LE_SEG_HDR;
	*at_seq = x->n ? x->e[lo].seq : x->base_seq;
}

/* ---- the builder thread ---- */

struct job {
	char dir[LE_PATH_MAX];
	uint64_t index;
};

static struct builder {
	pthread_mutex_t mu;   /* guards everything below */
	pthread_cond_t cv;    /* jobs arrived / the builder went idle */
	int started;          /* the thread runs (in this process) */
	struct job q[IDX_JOBS];
	unsigned head, n;     /* waiting jobs, oldest at head */
	int busy;             /* a build in progress: cur's */
	struct job cur;       /* written only here, under mu */
} B = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, {{"", 0}},
       0, 0, 0, {"", 0}};

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

/* fork(): the child has no builder thread, and its copy of the mutex must
 * not be one the parent's builder held.  Jobs queued in the parent stay
 * the parent's. */
static void fork_prepare(void) { pthread_mutex_lock(&B.mu); }
static void fork_parent(void) { pthread_mutex_unlock(&B.mu); }
static void fork_child(void)
{
	pthread_mutex_init(&B.mu, NULL);
	pthread_cond_init(&B.cv, NULL);
	B.started = B.busy = 0;
	B.head = B.n = 0;
}

static void atfork_register(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* Is name "IIIIIIIIIIIIIIII" + suffix (16 lower-case hex digits, as
 * le__seg_path writes them)?  *idx set. */
static int hex_name(const char *name, const char *suffix, uint64_t *idx)
{
	if (strspn(name, "0123456789abcdef") != 16 || strcmp(name + 16, suffix))
		return 0;
	*idx = strtoull(name, NULL, 16);
	return 1;
}

/* Remove the indexes whose segment is gone (retention, vacuum), and
 * temporary files a build cut short left (this thread is the only
 * builder of the process, and one engine at a time owns the directory:
 * any .tmp not being written now is stale). */
/* The index named nm in dir, if its segment is gone (nor archived): a
 * temporary file a build left, or what retention or vacuum left. */
static int drop_orphan(void *arg, const char *nm, unsigned type)
{
	const char *dir = arg;
	char path[LE_PATH_MAX + 300];
	struct stat st;
	uint64_t idx;
	int orphan = 0;

	(void)type;
	if (hex_name(nm, ".idx.tmp", &idx)) {
		orphan = 1;
	} else if (hex_name(nm, ".idx", &idx)) {
		snprintf(path, sizeof path, "%s/%016" PRIx64 ".seg", dir, idx);
		orphan = le__lstat(path, &st) == -ENOENT;
		/* an archived segment keeps its index: the offsets are those
		 * of the archive's content */
		snprintf(path, sizeof path,
		         "%s/%016" PRIx64 ".seg" LE_ZST_SUFFIX, dir, idx);
		orphan = orphan && le__lstat(path, &st) == -ENOENT;
	}
	if (orphan) {
		snprintf(path, sizeof path, "%s/%s", dir, nm);
		le__unlink(path);
	}
	return 0;
}

static void drop_orphans(const char *dir)
{
	int fd = le__open_in(dir, LE_IN_DIR, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		return;
	le__dir_each(fd, drop_orphan, (void *)dir);
	le__close(fd);
}

static void build_one(const struct job *j)
{
	char path[LE_PATH_MAX];
	le__index x;

	if (le__seg_path(path, sizeof path, j->dir, j->index) < 0)
		return;
	drop_orphans(j->dir);
	if (le__index_build(path, &x) == 0) {
		le__index_write(j->dir, &x);
		le__index_free(&x);
		/* Retention may have deleted the segment (and its index,
		 * le__seg_unlink) while this read it: the index just written
		 * would be an orphan until the next build. */
		uint64_t bytes, mtime;
		char ipath[LE_PATH_MAX];
		if (le__seg_stat(path, &bytes, &mtime) == -ENOENT &&
		    le__index_path(ipath, sizeof ipath, j->dir, j->index) >= 0)
			le__unlink(ipath);
	}
}

static void *builder_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&B.mu);
	for (;;) {
		while (B.n == 0)
			pthread_cond_wait(&B.cv, &B.mu);
		/* B.cur changes only here, under mu, and only while not
		 * busy: read unlocked below, it is stable. */
		B.cur = B.q[B.head];
		B.head = (B.head + 1) % IDX_JOBS;
		B.n--;
		B.busy = 1;
		pthread_mutex_unlock(&B.mu);
		build_one(&B.cur);
		pthread_mutex_lock(&B.mu);
		B.busy = 0;
		pthread_cond_broadcast(&B.cv); /* le__index_idle */
	}
	return NULL;
}

/* Start the builder, detached (nothing joins it: it lives as long as the
 * process, idle on its condition variable), with every signal blocked as
 * the writers have them.  Called with B.mu held.  @return 0 or -errno. */
static int builder_start(void)
{
	pthread_attr_t at;
	pthread_t t;
	sigset_t all, old;
	int rc;

	pthread_once(&atfork_once, atfork_register);
	if (pthread_attr_init(&at) != 0)
		return -ENOMEM;
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = pthread_create(&t, &at, builder_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&at);
	if (rc != 0)
		return -rc;
	le__name_thread(t, "le-index");
	B.started = 1;
	return 0;
}

void le__index_on_seal(const char *shard_dir, uint64_t seg_index)
{
	pthread_mutex_lock(&B.mu);
	if ((B.started || builder_start() == 0) && B.n < IDX_JOBS &&
	    strlen(shard_dir) < LE_PATH_MAX) {
		struct job *j = &B.q[(B.head + B.n) % IDX_JOBS];
		strcpy(j->dir, shard_dir);
		j->index = seg_index;
		B.n++;
		pthread_cond_broadcast(&B.cv);
	}
	pthread_mutex_unlock(&B.mu);
}

/* Is job j's directory dir or inside it? */
static int job_in(const struct job *j, const char *dir, size_t n)
{
	return strncmp(j->dir, dir, n) == 0 &&
	       (j->dir[n] == '\0' || j->dir[n] == '/');
}

void le__index_wait_dir(const char *dir)
{
	size_t n = strlen(dir);

	pthread_mutex_lock(&B.mu);
	for (;;) {
		int mine = B.busy && job_in(&B.cur, dir, n);
		for (unsigned k = 0; !mine && k < B.n; k++)
			mine = job_in(&B.q[(B.head + k) % IDX_JOBS], dir, n);
		if (!mine)
			break;
		pthread_cond_wait(&B.cv, &B.mu);
	}
	pthread_mutex_unlock(&B.mu);
}

int le__index_idle(int timeout_ms)
{
	struct timespec dl;
	int idle;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += timeout_ms / 1000;
	dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&B.mu);
	while ((B.n || B.busy) &&
	       pthread_cond_timedwait(&B.cv, &B.mu, &dl) == 0)
		;
	idle = !B.n && !B.busy;
	pthread_mutex_unlock(&B.mu);
	return idle;
}
