/*
 * sync.c -- a shard's sync thread: the fdatasyncs of LE_SYNC_INTERVAL and
 * LE_SYNC_BATCH, off the writer's thread.
 *
 * The writer pwrites a batch, releases its ring space, stores done_pos,
 * and (every batch with BATCH, every sync_ms with INTERVAL, or when a
 * le_flush waits) asks for that position.  One round of this thread:
 *
 *   take     under mu: want, the active segment, the sealed files handed
 *            over, whether a new file's directory entry is pending, the
 *            checkpoint to write
 *   sync     the directory (fsync), each sealed file (fdatasync, close),
 *            the active segment (fdatasync), then the checkpoint
 *            (pwrite, fdatasync) when everything it names was synced
 *   publish  failures logged (le__progress_fail), then durable_pos = want,
 *            then le_flush woken
 *
 * Asks that arrive during a round are served by the next one: a single
 * fdatasync covers every batch written while the previous one ran (group
 * commit), and the writer never waits for the disk.
 *
 * Why a round's durable_pos is true.  The writer asks for position P only
 * after every record before P was written (pwrite returned) to the file
 * that was active then, or to one sealed since.  The round that serves P
 * takes its snapshot under mu after that ask (the ask is made under mu),
 * and a sealed file is handed over under mu before the writer writes to
 * the next one: so the snapshot holds every file with records before P,
 * and each fdatasync starts after those records' pwrites.  A file is
 * closed only by this thread, after its last fdatasync, so none can be
 * closed, and its number reused, under a sync.  A new segment's directory
 * entry is synced in the first round after it was made, before any
 * position in it is published.  A crash (kill -9) at any point loses
 * nothing: the page cache keeps what was written; a power cut loses at
 * most what no published durable_pos covered.
 *
 * Failures.  A failed fdatasync is never retried: the kernel may have
 * marked the failed pages clean, so a later success would lie.  Records
 * written since the last good round are logged in doubt, [have, want) and
 * up to a sealed file's `hi`, before durable_pos passes them (le_flush
 * reads the log after it sees durable_pos: flush.c).  An active segment
 * whose sync failed stays bad: each later round logs its records in doubt
 * without syncing it, until the writer, which sees `failed` before its
 * next write, hands it over and moves to a new segment; the hand-over's
 * `hi` covers what it wrote there in between.
 *
 * Retention (the reaper) may unlink a sealed segment this thread still
 * holds: the open descriptor keeps the inode, the fdatasync and close
 * then act on a file no reader will open again.  Nothing else deletes or
 * closes a segment file while this thread runs.
 *
 * The writer's side (what it has asked, and the syncs it makes on its
 * own thread when this one does not run) is the engine's wsync.c.
 */
#define _GNU_SOURCE
#include "store/sync.h"

#include <stdio.h>
#include <string.h>

#include "base/os.h"

static void fail(le__progress *p, uint64_t lo, uint64_t hi, int rc)
{
	if (hi > lo)
		le__progress_fail(p, lo, hi, rc);
}

/* A timed fdatasync of a segment file.  @return 0 or -errno. */
static int data_sync(le__syncer *s, int fd, le__hist *lat)
{
	uint64_t t0 = le__mono_ns();
	int rc = le__fdatasync(fd);
	le__hist_add(lat, le__mono_ns() - t0);
	atomic_fetch_add(s->st.syncs, 1);
	if (rc < 0) {
		const le__sync_target *st = &s->st;
		uint64_t w = atomic_load(st->written);
		atomic_fetch_add(st->sync_errors, 1);
		/* records written since the last good sync: in doubt (this
		 * may count some the other files' syncs covered) */
		atomic_fetch_add(st->sync_lost, w - s->good_written);
		s->good_written = w;
		atomic_store(st->last_error, rc);
	}
	return rc;
}

/* mu held */
static void add_lat(le__syncer *s, const le__hist *lat)
{
	for (unsigned i = 0; i < LE_LIVE_BUCKETS; i++)
		s->lat.b[i] += lat->b[i];
	s->lat.count += lat->count;
	s->lat.sum += lat->sum;
}

/* Sync and close the sealed files handed over, logging failures. */
static void sync_sealed(le__syncer *s, le__sealed *sealed, unsigned n,
                        uint64_t have, le__hist *lat)
{
	for (unsigned i = 0; i < n; i++) {
		le__sealed *e = &sealed[i];
		int r = e->bad_rc ? e->bad_rc : data_sync(s, e->fd, lat);
		if (r < 0)
			fail(s->prog, have, e->hi, r);
		le__close(e->fd);
	}
}

/* One round; mu is held on entry and on return. */
static void sync_round(le__syncer *s)
{
	le__progress *prog = s->prog;
	const le__sync_target *st = &s->st;
	le__sealed sealed[LE_SYNC_SEALED];
	le__hist lat = {0};
	le__ckpt c = s->ckpt;

	uint64_t pos = s->want, have = s->have;
	int fd = s->fd, bad = s->bad_fd, bad_rc = s->bad_rc;
	int ckpt = s->ckpt_due, sync = pos > have || ckpt;
	int dir = sync && s->dir_dirty;
	uint64_t wb_lo = s->wb_from, wb_hi = s->wb_to;
	unsigned n = s->nsealed;
	memcpy(sealed, s->sealed, n * sizeof *sealed);
	s->nsealed = 0;
	if (n)
		pthread_cond_broadcast(&s->room_cv); /* a writer with 16 */
	s->ckpt_due = 0;
	if (dir)
		s->dir_dirty = 0;
	if (wb_hi > wb_lo)
		s->wb_from = wb_hi;
	uint64_t written = atomic_load(st->written);
	pthread_mutex_unlock(&s->mu);

	if (n)
		sync_sealed(s, sealed, n, have, &lat);
	int rc = 0;          /* the round's first failure */
	int new_bad = 0;     /* the active segment's sync failed now */
	if (!sync) {
		/* only write-back to start: what the next sync would write */
		if (fd >= 0 && fd != bad && wb_hi > wb_lo)
			le__writeback(fd, wb_lo, wb_hi - wb_lo);
		pthread_mutex_lock(&s->mu);
		add_lat(s, &lat);
		return;
	}
	if (dir) {
		rc = le__fsync_dir_in(st->dir, LE_IN_DIR);
		if (rc < 0)
			atomic_store(st->last_error, rc);
	}
	if (fd >= 0) {
		int r = fd == bad ? bad_rc : data_sync(s, fd, &lat);
		if (r < 0) {
			fail(prog, have, pos, r);
			new_bad = fd != bad;
			bad_rc = r;
			if (!rc)
				rc = r;
		}
	}
	if (dir && rc < 0)
		fail(prog, have, pos, rc); /* the new file's name may be gone */
	if (ckpt && rc == 0) {
		/* It names bytes of a file just synced: a recovery that
		 * trusts it finds them there. */
		c.gen = s->ckpt_gen + 1;
		int r = le__ckpt_write(st->ckpt_fd, &c);
		if (r == 0)
			r = le__fdatasync(st->ckpt_fd);
		if (r == 0) {
			s->ckpt_gen = c.gen;
			atomic_fetch_add(st->checkpoints, 1);
		} else {
			atomic_store(st->last_error, r);
		}
	}
	if (rc == 0)
		s->good_written = written;

	pthread_mutex_lock(&s->mu);
	if (dir && rc < 0)
		s->dir_dirty = 1;
	if (new_bad) {
		/* Still active: bad from now on.  Handed over meanwhile (its
		 * entry waits in sealed[]): that entry is closed unsynced. */
		if (s->fd == fd) {
			s->bad_fd = fd;
			s->bad_rc = bad_rc;
			/* before durable_pos: a producer that sees it, and then
			 * writes, has the writer see `failed` before its write */
			atomic_store(&s->failed, 1);
		}
		for (unsigned i = 0; i < s->nsealed; i++)
			if (s->sealed[i].fd == fd)
				s->sealed[i].bad_rc = bad_rc;
	}
	add_lat(s, &lat);
	if (pos > s->have) {
		s->have = pos;
		/* after the failures it covers (progress.h) */
		le__progress_durable(prog, pos);
	}
}

static int has_work(const le__syncer *s)
{
	return s->want > s->have || s->nsealed || s->ckpt_due ||
	       (s->fd >= 0 && s->wb_to > s->wb_from);
}

static void *sync_main(void *arg)
{
	le__syncer *s = arg;

	pthread_mutex_lock(&s->mu);
	for (;;) {
		while (!has_work(s) && !s->stop)
			pthread_cond_wait(&s->work_cv, &s->mu);
		if (!has_work(s))
			break; /* stopping, and everything is done */
		sync_round(s);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

int le__sync_start(le__syncer *s, const le__sync_target *st,
                   le__progress *prog, uint32_t shard)
{
	char name[32];

	memset(s, 0, sizeof *s);
	s->prog = prog;
	s->st = *st;
	s->fd = st->fd;
	s->bad_fd = -1;
	s->want = s->have = atomic_load(&prog->durable_pos);
	s->ckpt_gen = st->ckpt_gen;
	s->good_written = atomic_load(st->written);
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->work_cv, NULL);
	pthread_cond_init(&s->room_cv, NULL);
	/* the writer's signal mask (all blocked) is inherited */
	int rc = -pthread_create(&s->thread, NULL, sync_main, s);
	if (rc < 0) {
		pthread_mutex_destroy(&s->mu);
		pthread_cond_destroy(&s->work_cv);
		pthread_cond_destroy(&s->room_cv);
		return rc;
	}
	snprintf(name, sizeof name, "le-sync-%u", shard);
	le__name_thread(s->thread, name);
	s->started = 1;
	return 0;
}

void le__sync_stop(le__syncer *s)
{
	if (!s->started)
		return;
	le__sync_ask(s, atomic_load(&s->prog->done_pos));
	pthread_mutex_lock(&s->mu);
	s->stop = 1;
	pthread_cond_signal(&s->work_cv);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->thread, NULL);
	s->started = 0;
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->work_cv);
	pthread_cond_destroy(&s->room_cv);
}

void le__sync_ask(le__syncer *s, uint64_t pos)
{
	pthread_mutex_lock(&s->mu);
	if (pos > s->want) {
		s->want = pos;
		pthread_cond_signal(&s->work_cv);
	}
	pthread_mutex_unlock(&s->mu);
}

void le__sync_newfile(le__syncer *s, int fd)
{
	s->w_wb = 0;
	pthread_mutex_lock(&s->mu);
	s->fd = fd;
	s->dir_dirty = 1;
	s->wb_to = s->wb_from = 0;
	pthread_mutex_unlock(&s->mu);
}

void le__sync_seal(le__syncer *s, int fd, int this_batch)
{
	pthread_mutex_lock(&s->mu);
	while (s->nsealed == LE_SYNC_SEALED)
		pthread_cond_wait(&s->room_cv, &s->mu);
	le__sealed *e = &s->sealed[s->nsealed++];
	e->fd = fd;
	e->hi = this_batch ? s->w_rd : s->w_done;
	e->bad_rc = fd == s->bad_fd ? s->bad_rc : 0;
	if (e->bad_rc) {
		s->bad_fd = -1;
		atomic_store(&s->failed, 0);
	}
	if (s->fd == fd)
		s->fd = -1;
	/* The writer goes on: the file's sync (and a failure of it, logged
	 * by position) comes before durable_pos passes its records, in the
	 * round that takes it. */
	pthread_cond_signal(&s->work_cv);
	pthread_mutex_unlock(&s->mu);
}

void le__sync_wrote(le__syncer *s, uint64_t end)
{
	if (end < s->w_wb + LE_SYNC_WB_CHUNK)
		return;
	s->w_wb = end;
	pthread_mutex_lock(&s->mu);
	s->wb_to = end;
	pthread_cond_signal(&s->work_cv);
	pthread_mutex_unlock(&s->mu);
}

void le__sync_ckpt(le__syncer *s, const le__ckpt *c)
{
	pthread_mutex_lock(&s->mu);
	s->ckpt = *c;
	s->ckpt_due = 1;
	pthread_cond_signal(&s->work_cv);
	pthread_mutex_unlock(&s->mu);
}

int le__sync_is_bad(le__syncer *s, int fd)
{
	pthread_mutex_lock(&s->mu);
	int bad = fd >= 0 && fd == s->bad_fd;
	pthread_mutex_unlock(&s->mu);
	return bad;
}

void le__sync_lat(le__syncer *s, le__hist *h)
{
	if (s->started)
		pthread_mutex_lock(&s->mu);
	*h = s->lat;
	if (s->started)
		pthread_mutex_unlock(&s->mu);
}
