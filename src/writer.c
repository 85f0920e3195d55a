/*
 * writer.c -- one thread per shard: take published slots from the shard's
 * ring, encode them as frames into an output buffer, write the buffer to
 * the active segment, then give the ring space and the budget back.
 *
 * State machine of one loop turn:
 *
 *   collect   encode ready slots from rd until batch_size frames, or
 *             max_pending_bytes, or the segment would overflow
 *   write?    when the batch is full, a le_flush waits, the oldest pending
 *             frame is flush_ms old, the segment must rotate, or we stop
 *   periodic  fdatasync (LE_SYNC_INTERVAL), checkpoint, age rotation
 *   sleep     nothing to do: spin briefly, then futex-sleep on `sleeping`
 *             for at most flush_ms (producers wake us when the queue fills)
 *
 * Ring space is released only after the pwrite that carries its records
 * has returned, so a record leaves the queue only once it is in the file.
 *
 * The output buffer mirrors file bytes [buf_off, buf_off + buf_len); its
 * last buf_new bytes are not yet written.  With direct_io the buffer starts
 * on a 4 KiB boundary and every write is whole blocks (zero padded, which
 * readers see as end of data); the partial last block stays in the buffer
 * and is written again, completed, next time.
 */
#define _GNU_SOURCE
#include "engine.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "crc32c.h"
#include "os.h"

#define ALIGN 4096u
#define MS 1000000ull

/* Largest a segment may grow: segment_bytes, or less under ulimit -f. */
static uint64_t seg_limit(const le__shard *sh)
{
	uint64_t lim = sh->e->cfg.segment_bytes;
	return sh->seg_cap && sh->seg_cap < lim ? sh->seg_cap : lim;
}

static uint64_t seg_end(const le__shard *sh)
{
	return sh->buf_off + sh->buf_len;
}

static uint64_t written_end(const le__shard *sh)
{
	return seg_end(sh) - sh->buf_new;
}

static void note_error(le__shard *sh, int rc)
{
	atomic_store(&sh->e->last_error, rc);
	atomic_fetch_add(&sh->e->errors_total, 1);
}

/* ---- segments ---- */

/* Put (index, bytes) in the list at position at (sh->nsegs: the end). */
static int segs_insert(le__shard *sh, size_t at, uint64_t index,
                       uint64_t bytes)
{
	if (sh->nsegs == sh->segs_cap) {
		size_t nc = sh->segs_cap ? sh->segs_cap * 2 : 16;
		le__segmeta *n = realloc(sh->segs, nc * sizeof *n);
		if (!n)
			return LE_ENOMEM;
		sh->segs = n;
		sh->segs_cap = nc;
	}
	memmove(sh->segs + at + 1, sh->segs + at,
	        (sh->nsegs - at) * sizeof *sh->segs);
	sh->segs[at].index = index;
	sh->segs[at].bytes = bytes;
	sh->nsegs++;
	sh->segs_bytes += bytes;
	return 0;
}

static int segs_push(le__shard *sh, uint64_t index, uint64_t bytes)
{
	return segs_insert(sh, sh->nsegs, index, bytes);
}

/* Put segments whose unlink failed back in the list where their index
 * goes (before every segment it held: indices only grow). */
static void segs_take_back(le__shard *sh)
{
	le__reap back[LE_REAP_MAX];
	size_t n = le__reaper_take_back(sh->e, sh, back, LE_REAP_MAX);

	for (size_t i = 0; i < n; i++) {
		size_t at = 0;
		while (at < sh->nsegs && sh->segs[at].index < back[i].index)
			at++;
		if (segs_insert(sh, at, back[i].index, back[i].bytes) < 0)
			return; /* ENOMEM: left out of retention until reopened */
	}
}

/* Delete the oldest sealed segments while the shard is over its budget.
 * The active segment is not in the list and is never deleted.  A segment
 * handed to the reaper leaves the list (and the shard's bytes) at once;
 * one whose unlink fails comes back (segs_take_back) and is tried again
 * at the next rotation.  The writer unlinks itself only when the reaper's
 * list is full; a failure then keeps the segment in the list. */
static void retention(le__shard *sh)
{
	uint64_t keep = sh->e->cfg.retention_bytes;
	char path[LE_PATH_MAX];
	size_t drop = 0;

	if (!keep)
		return;
	segs_take_back(sh);
	while (drop < sh->nsegs && sh->segs_bytes + seg_end(sh) > keep) {
		le__segmeta *m = &sh->segs[drop];
		/* Freeing a big file's blocks takes ext4 tens of ms: the
		 * reaper thread does it while this one writes on. */
		if (!le__reaper_push(sh->e, sh, m->index, m->bytes)) {
			le__seg_path(path, sizeof path, sh->dir, m->index);
			int rc = le__unlink(path);
			if (rc < 0 && rc != -ENOENT) {
				note_error(sh, rc);
				break;
			}
			atomic_fetch_add(&sh->segments_deleted, 1);
		}
		sh->segs_bytes -= m->bytes;
		drop++;
	}
	if (drop) {
		memmove(sh->segs, sh->segs + drop,
		        (sh->nsegs - drop) * sizeof *sh->segs);
		sh->nsegs -= drop;
	}
}

static int open_flags(const le__shard *sh)
{
	return O_WRONLY | (sh->e->cfg.direct_io ? O_DIRECT : 0);
}

/* Start segment `index`: create the file, put its header in the buffer
 * (written with the first batch), make the new name durable. */
static int seg_create(le__shard *sh, uint64_t index)
{
	char path[LE_PATH_MAX];
	le__seg_hdr h = {
		.version = LE_SEG_VERSION,
		.fields = sh->e->cfg.fields,
		.shard = sh->id,
		.index = index,
		.base_seq = sh->next_seq,
		.created_ns = le__now_ns(),
	};
	int rc = le__seg_path(path, sizeof path, sh->dir, index);
	if (rc < 0)
		return rc;
	int fd = le__open(path, open_flags(sh) | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		if (fd == -EINVAL && sh->e->cfg.direct_io)
			le__seterr("direct_io: %s does not support O_DIRECT",
			           sh->dir);
		return fd;
	}
	/* The directory entry must survive a power cut before any record
	 * that depends on it is reported written (a kill -9 needs nothing:
	 * the entry is in the kernel already).  With LE_SYNC_NONE nothing is
	 * promised across a power cut, and the fsync (up to 200 ms on this
	 * VM) would stall the writer at every rotation. */
	rc = sh->e->cfg.durability == LE_SYNC_NONE ? 0 : le__fsync_path(sh->dir);
	if (rc < 0) {
		le__close(fd);
		return rc;
	}
	sh->fd = fd;
	sh->seg_index = index;
	sh->seg_created_mono = le__mono_ns();
	sh->prealloc_end = 0;
	sh->buf_off = 0;
	le__seg_hdr_encode(sh->buf, &h);
	sh->buf_len = LE_SEG_HDR;
	sh->buf_new = LE_SEG_HDR;
	sh->ckpt_off = 0;
	atomic_fetch_add(&sh->segments_created, 1);
	return 0;
}

/* Seal the active segment (its buffer must be written). */
static int seg_seal(le__shard *sh)
{
	int rc = 0;

	if (sh->fd < 0)
		return 0;
	if (seg_end(sh) == 0) {
		/* Nothing of it, not even its header, reached the file. */
		char path[LE_PATH_MAX];
		le__close(sh->fd);
		sh->fd = -1;
		le__seg_path(path, sizeof path, sh->dir, sh->seg_index);
		le__unlink(path);
		return 0;
	}
	if (sh->e->cfg.direct_io || sh->prealloc_end > seg_end(sh))
		/* drop O_DIRECT's zero padding and unused reserved blocks */
		rc = le__ftruncate(sh->fd, seg_end(sh));
	if (rc == 0 && sh->dirty && sh->e->cfg.durability != LE_SYNC_NONE) {
		rc = le__fdatasync(sh->fd);
		atomic_fetch_add(&sh->syncs, 1);
		if (rc < 0)
			atomic_fetch_add(&sh->sync_errors, 1);
	}
	if (rc < 0)
		note_error(sh, rc);
	sh->dirty = 0;
	le__close(sh->fd);
	sh->fd = -1;
	segs_push(sh, sh->seg_index, seg_end(sh));
	return rc;
}

static int seg_rotate(le__shard *sh)
{
	sh->rotate_pending = 0;
	seg_seal(sh);
	int rc = seg_create(sh, sh->seg_index + 1);
	if (rc < 0) {
		note_error(sh, rc);
		return rc;
	}
	retention(sh);
	return 0;
}

/* ---- recovery ---- */

/* Check the checkpoint against the segment: the frame it names must decode
 * at last_off and end exactly at offset.  @return 1 when it can be used. */
static int ckpt_usable(le__scan *s, const le__ckpt *c)
{
	le__frame f;
	const char *why;

	if (c->offset <= LE_SEG_HDR || c->offset > s->file_len ||
	    c->last_off < LE_SEG_HDR || c->last_off >= c->offset ||
	    c->next_seq == 0)
		return 0;
	s->off = c->last_off;
	s->next_seq = c->next_seq - 1;
	if (le__scan_next(s, &f, &why) == LE_FRAME_OK && s->off == c->offset)
		return 1;
	s->off = LE_SEG_HDR;
	s->next_seq = s->hdr.base_seq;
	return 0;
}

/* Scan the last segment to its valid end.  Sets sh->next_seq, last_ts,
 * last_frame_off; *valid_end; *damaged when a valid frame follows the
 * first bad one (then the file must be kept whole and sealed, never
 * truncated: that would cut records that were written). */
static int scan_tail(le__shard *sh, le__scan *s, const le__ckpt *c,
                     int have_ckpt, uint64_t *valid_end, int *damaged)
{
	le__frame f;
	const char *why;
	int rc;

	if (have_ckpt && c->seg_index == s->hdr.index)
		ckpt_usable(s, c);
	while ((rc = le__scan_next(s, &f, &why)) == LE_FRAME_OK) {
		sh->last_frame_off = s->off - f.size - 4;
		if (f.ts > sh->last_ts)
			sh->last_ts = f.ts;
	}
	if (rc < 0)
		return rc;
	*valid_end = s->off;
	sh->next_seq = s->next_seq;
	*damaged = 0;
	if (s->off >= s->file_len)
		return 0;
	rc = le__scan_resync(s);
	if (rc <= 0)
		return rc; /* nothing valid follows: a torn tail */
	/* Damage inside the file: continue numbering after its highest
	 * sequence so no number is used twice. */
	*damaged = 1;
	do {
		while ((rc = le__scan_next(s, &f, &why)) == LE_FRAME_OK)
			if (f.ts > sh->last_ts)
				sh->last_ts = f.ts;
		if (rc < 0)
			return rc;
	} while ((rc = le__scan_resync(s)) == 1);
	if (s->next_seq > sh->next_seq)
		sh->next_seq = s->next_seq;
	return rc < 0 ? rc : 0;
}

/* Set next_seq past every frame of segment `index` (best effort). */
static void seq_after(le__shard *sh, uint64_t index)
{
	char path[LE_PATH_MAX];
	le__scan s;
	le__frame f;
	const char *why;

	le__seg_path(path, sizeof path, sh->dir, index);
	if (le__scan_open(&s, path, sh->id, &why) < 0)
		return;
	do
		while (le__scan_next(&s, &f, &why) == LE_FRAME_OK)
			;
	while (le__scan_resync(&s) == 1);
	if (s.next_seq > sh->next_seq)
		sh->next_seq = s.next_seq;
	le__scan_close(&s);
}

/* Open the last segment for appending at valid_end. */
static int seg_reopen(le__shard *sh, uint64_t index, uint64_t valid_end)
{
	char path[LE_PATH_MAX];
	int rc = le__seg_path(path, sizeof path, sh->dir, index);
	if (rc < 0)
		return rc;
	int fd = le__open(path, open_flags(sh), 0);
	if (fd < 0)
		return fd;
	sh->fd = fd;
	sh->seg_index = index;
	sh->seg_created_mono = le__mono_ns();
	sh->prealloc_end = valid_end;
	if (sh->e->cfg.direct_io) {
		/* The partial last block goes back in the buffer, to be
		 * rewritten whole with the next batch. */
		sh->buf_off = valid_end & ~(uint64_t)(ALIGN - 1);
		sh->buf_len = (size_t)(valid_end - sh->buf_off);
		int rfd = le__open(path, O_RDONLY, 0);
		if (rfd < 0)
			return rfd;
		ssize_t got = le__pread_full(rfd, sh->buf, sh->buf_len,
		                             sh->buf_off);
		le__close(rfd);
		if (got != (ssize_t)sh->buf_len)
			return got < 0 ? (int)got : LE_ECORRUPT;
	} else {
		sh->buf_off = valid_end;
		sh->buf_len = 0;
	}
	sh->buf_new = 0;
	sh->ckpt_off = valid_end;
	return 0;
}

/* A last segment whose header never made it to disk: empty or zeros. */
static int is_unborn(const char *path)
{
	unsigned char h[LE_SEG_HDR];
	int fd = le__open(path, O_RDONLY, 0);
	if (fd < 0)
		return 0;
	ssize_t got = le__pread_full(fd, h, sizeof h, 0);
	struct stat st;
	int r = fstat(fd, &st) == 0 && got >= 0;
	le__close(fd);
	if (!r)
		return 0;
	/* Shorter than a header: the crash came while the header itself
	 * was being written, and no record can be in the file. */
	if (st.st_size < (off_t)LE_SEG_HDR)
		return 1;
	for (ssize_t i = 0; i < got; i++)
		if (h[i])
			return 0;
	/* all zeros, and nothing but zeros could follow a missing header */
	return st.st_size <= (off_t)ALIGN;
}

static int recover_last(le__shard *sh, uint64_t index, const le__ckpt *c,
                        int have_ckpt)
{
	char path[LE_PATH_MAX];
	le__scan s;
	const char *why;
	uint64_t valid_end;
	int damaged, rc;

	le__seg_path(path, sizeof path, sh->dir, index);
	rc = le__scan_open(&s, path, sh->id, &why);
	if (rc == 0 && s.hdr.index != index) {
		/* A segment under another file's name (copied, renamed):
		 * readers refuse it, so never append to it. */
		le__scan_close(&s);
		rc = LE_ECORRUPT;
	}
	if (rc == LE_ECORRUPT && is_unborn(path)) {
		/* Crash between create and first write: nothing was in it.
		 * Number on after the segment before it. */
		rc = le__unlink(path);
		if (rc < 0)
			return rc;
		if (sh->nsegs)
			seq_after(sh, sh->segs[sh->nsegs - 1].index);
		sh->seg_index = index - 1;
		return 1; /* caller creates a fresh segment at `index` */
	}
	if (rc == LE_ECORRUPT) {
		/* A header damaged after the fact, or a file under another
		 * name: keep it for readers to report; number on after every
		 * frame we can know of -- the previous segment's, this file's
		 * if its header still reads, or what a checkpoint about this
		 * very file says (the only witness left of a lost header). */
		if (sh->nsegs)
			seq_after(sh, sh->segs[sh->nsegs - 1].index);
		seq_after(sh, index);
		if (have_ckpt && c->seg_index == index && c->next_seq > sh->next_seq)
			sh->next_seq = c->next_seq;
		segs_push(sh, index, 0);
		sh->seg_index = index;
		return 1;
	}
	if (rc < 0) {
		le__seterr("%s: %s", path, why[0] ? why : le_strerror(rc));
		return rc;
	}
	rc = scan_tail(sh, &s, c, have_ckpt, &valid_end, &damaged);
	if (rc == 0 && have_ckpt && valid_end < s.file_len) {
		/* Started from the checkpoint and did not reach the end: the
		 * checkpoint may have named bytes inside a payload that only
		 * looked like a frame.  Never cut on its word; scan again from
		 * the header. */
		s.off = LE_SEG_HDR;
		s.next_seq = s.hdr.base_seq;
		sh->last_ts = 0;
		rc = scan_tail(sh, &s, c, 0, &valid_end, &damaged);
	}
	uint64_t file_len = s.file_len;
	uint32_t fields = s.hdr.fields;
	le__scan_close(&s);
	if (rc < 0)
		return rc;
	if (!damaged && valid_end < file_len) {
		/* Torn tail: cut it before anything is appended. */
		int fd = le__open(path, O_WRONLY, 0);
		if (fd < 0)
			return fd;
		rc = le__ftruncate(fd, valid_end);
		if (rc == 0)
			rc = le__fdatasync(fd);
		le__close(fd);
		if (rc < 0)
			return rc;
		atomic_fetch_add(&sh->recovered_truncated, file_len - valid_end);
	}
	if (damaged || fields != sh->e->cfg.fields) {
		/* Keep the file as it is; new records go to a new segment. */
		segs_push(sh, index, damaged ? file_len : valid_end);
		sh->seg_index = index;
		return 1;
	}
	return seg_reopen(sh, index, valid_end);
}

static int drain_dead(le__shard *sh);

int le__writer_recover(le__shard *sh)
{
	le_engine *e = sh->e;
	uint64_t *idx = NULL;
	size_t n = 0;
	le__ckpt c;
	char path[LE_PATH_MAX + 16];
	int rc, have_ckpt;

	sh->buf_cap = e->cfg.max_pending_bytes +
	              le__frame_fixed(LE_FIELD_ALL) + e->max_rec + 64 +
	              3 * ALIGN;
	if (posix_memalign((void **)&sh->buf, ALIGN, sh->buf_cap) != 0) {
		sh->buf = NULL;
		return LE_ENOMEM;
	}
	if (e->has_stream) {
		sh->stage_max = e->batch + 64;
		sh->stage_cap = e->cfg.max_pending_bytes * 2 +
		                le__stream_line_max(e->max_rec) + 256;
		sh->stage = malloc(sh->stage_cap);
		sh->stage_lens = malloc(sh->stage_max * sizeof *sh->stage_lens);
		if (!sh->stage || !sh->stage_lens)
			return LE_ENOMEM;
	}
	if (!e->cfg.store) {
		sh->rd = atomic_load(sh->ring.tail);
		sh->buf_len = sh->buf_new = 0;
		return 0;
	}
	have_ckpt = le__ckpt_read(sh->dir, &c) == 0 && c.shard == sh->id;
	sh->ckpt_gen = have_ckpt ? c.gen : 0;
	snprintf(path, sizeof path, "%s/CHECKPOINT", sh->dir);
	sh->ckpt_fd = le__open(path, O_RDWR | O_CREAT, 0644);
	if (sh->ckpt_fd < 0)
		return sh->ckpt_fd;
	rc = le__seg_list(sh->dir, &idx, &n);
	if (rc < 0)
		goto out;
	for (size_t i = 0; i + 1 < n; i++) {
		struct stat st;
		le__seg_path(path, sizeof path, sh->dir, idx[i]);
		rc = segs_push(sh, idx[i],
		               stat(path, &st) == 0 ? (uint64_t)st.st_size : 0);
		if (rc < 0)
			goto out;
	}
	sh->next_seq = 1;
	if (n == 0) {
		if (have_ckpt && c.next_seq > sh->next_seq)
			sh->next_seq = c.next_seq; /* all segments deleted */
		rc = seg_create(sh, have_ckpt ? c.seg_index + 1 : 1);
		goto out;
	}
	rc = recover_last(sh, idx[n - 1], &c, have_ckpt);
	if (rc == 1) /* the checkpoint's word is not enough to skip numbers */
		rc = seg_create(sh, sh->seg_index + 1);
out:
	free(idx);
	sh->rd = le__ring_resume(&sh->ring);
	if (rc >= 0 && le__ring_busy(&sh->ring))
		rc = drain_dead(sh);
	if (rc < 0 && !le_errmsg()[0])
		le__seterr("shard %u (%s): recovery failed: %s", sh->id,
		           sh->dir, le_strerror(rc));
	return rc < 0 ? rc : 0;
}

void le__writer_free(le__shard *sh)
{
	if (sh->fd >= 0)
		le__close(sh->fd);
	if (sh->ckpt_fd >= 0)
		le__close(sh->ckpt_fd);
	sh->fd = sh->ckpt_fd = -1;
	free(sh->buf);
	free(sh->segs);
	free(sh->stage);
	free(sh->stage_lens);
	sh->buf = NULL;
	sh->segs = NULL;
	sh->stage = NULL;
	sh->stage_lens = NULL;
}

/* ---- the loop ---- */

/* The published slot at rd, or NULL.  Skips padding. */
static le__slot *peek_slot(le__shard *sh, uint32_t *bytes)
{
	le__slot *s;
	return le__ring_peek(&sh->ring, &sh->rd, &s, bytes) == LE_PEEK_RECORD
	               ? s
	               : NULL;
}

/* Format a record as a line for the stream sink, into the batch's stage;
 * a line that does not fit is counted and dropped there. */
static void stage(le__shard *sh, uint64_t ts, int level, uint64_t seq,
                  uint32_t flags, const void *payload, uint32_t len)
{
	size_t need = le__stream_line_max(len);
	if (sh->nstage == sh->stage_max || sh->stage_len + need > sh->stage_cap) {
		sh->stage_dropped++;
		return;
	}
	size_t n = le__stream_format(sh->stage + sh->stage_len,
	                             sh->stage_cap - sh->stage_len,
	                             sh->e->cfg.stream_format, ts, level, sh->id,
	                             seq, flags, payload, len);
	sh->stage_lens[sh->nstage++] = (uint32_t)n;
	sh->stage_len += n;
}

/* Hand the batch's lines to the stream sink.  @return lines dropped. */
static uint64_t unstage(le__shard *sh)
{
	uint64_t dropped = sh->stage_dropped;
	if (sh->nstage)
		dropped += le__stream_push(&sh->e->stream, sh->stage,
		                           sh->stage_lens, sh->nstage);
	if (sh->stage_dropped) {
		atomic_fetch_add(&sh->e->stream.dropped, sh->stage_dropped);
		pthread_mutex_lock(&sh->e->stream.mu);
		sh->e->stream.drops_pending += sh->stage_dropped;
		pthread_mutex_unlock(&sh->e->stream.mu);
	}
	sh->nstage = 0;
	sh->stage_len = 0;
	sh->stage_dropped = 0;
	return dropped;
}

/* Compute the CRCs of the frames encoded since the last seal. */
static void seal(le__shard *sh)
{
	unsigned char *f[LE_CRC_WAYS];

	for (int i = 0; i < sh->nunsealed; i++)
		f[i] = sh->buf + sh->unsealed[i];
	if (sh->nunsealed)
		le__frame_seal(f, sh->nunsealed);
	sh->nunsealed = 0;
}

/* Append one frame to the buffer; its CRC is computed LE_CRC_WAYS frames
 * at a time (le__frame_seal), before any write. */
static void encode(le__shard *sh, uint32_t flags, int level, uint64_t ts,
                   const void *payload, uint32_t len)
{
	uint32_t fields = sh->e->cfg.fields;

	if (ts < sh->last_ts)
		ts = sh->last_ts; /* keep a shard's timestamps monotonic */
	sh->last_ts = ts;
	sh->pend_last_off = seg_end(sh);
	uint32_t n = le__frame_put(sh->buf + sh->buf_len, fields, flags,
	                           level, sh->id, sh->next_seq, ts, payload,
	                           len);
	if (fields & LE_FIELD_CRC) {
		sh->unsealed[sh->nunsealed++] = sh->buf_len;
		if (sh->nunsealed == LE_CRC_WAYS)
			seal(sh);
	}
	sh->buf_len += n;
	sh->buf_new += n;
	sh->next_seq++;
	if (sh->pend_recs++ == 0)
		sh->pend_since = le__mono_ns();
}

static int room_for(le__shard *sh, uint32_t len)
{
	return sh->buf_len + le__frame_fixed(sh->e->cfg.fields) + len +
	               ALIGN <= sh->buf_cap;
}

/* Would a frame of len payload bytes overflow the active segment? */
static int must_rotate(le__shard *sh, uint32_t len)
{
	uint64_t end = seg_end(sh) + le__frame_fixed(sh->e->cfg.fields) + len;
	return end > seg_limit(sh) && seg_end(sh) > LE_SEG_HDR;
}

/* Marker for records dropped since the last one. */
static void encode_marker(le__shard *sh)
{
	char msg[64];
	uint64_t n = atomic_load_explicit(&sh->dropped_pending,
	                                  memory_order_relaxed);
	if (!n)
		return;
	int len = snprintf(msg, sizeof msg, "%" PRIu64 " records dropped", n);
	if (!room_for(sh, (uint32_t)len) || must_rotate(sh, (uint32_t)len))
		return;
	n = atomic_exchange_explicit(&sh->dropped_pending, 0,
	                             memory_order_relaxed);
	len = snprintf(msg, sizeof msg, "%" PRIu64 " records dropped", n);
	encode(sh, LE_REC_MARKER, LE_WARN, le__now_ns(), msg, (uint32_t)len);
	sh->pend_markers++;
}

enum { C_MORE, C_FULL, C_ROTATE };

/*
 * Encode ready slots until the batch is full.  @return why it stopped.
 * This is the writer's inner loop, so the state it advances lives in
 * locals (stores through the byte buffer would otherwise force every
 * sh-> field back to memory on each record) and is written back once.
 */
static int collect(le__shard *sh)
{
	le_engine *e = sh->e;
	le__ring *r = &sh->ring;
	const uint64_t mask = r->lap - 1;
	const uint32_t fields = e->cfg.fields;
	const uint32_t fixed = le__frame_fixed(fields);
	const int store = e->cfg.store;
	const uint64_t limit = store ? seg_limit(sh) : UINT64_MAX;
	const size_t cap = sh->buf_cap - ALIGN;
	const uint32_t batch = e->batch;
	const size_t max_new = e->cfg.max_pending_bytes;
	int why = C_FULL;

	encode_marker(sh);
	unsigned char *buf = sh->buf;
	size_t len = sh->buf_len, nw = sh->buf_new;
	uint64_t rd = sh->rd, seq = sh->next_seq, last_ts = sh->last_ts;
	uint64_t bytes_sum = 0, last_off = sh->pend_last_off;
	uint32_t recs = sh->pend_recs, slots = 0;
	uint64_t now_real;
	le__clock_check(&sh->clock, &now_real);
	/* Rebased (here or by the periodic recalibration): a process that
	 * recovers this queue after a kill -9 converts its stamps with the
	 * clock the QUEUE header holds. */
	if (!sh->recovering && (sh->clock.base_tsc != sh->clock_put_tsc ||
	                        sh->clock.mult != sh->clock_put_mult))
		le__writer_note_clock(sh);
	const le__clock clk = sh->clock;
	/* Frames waiting for their CRC, LE_CRC_WAYS at a time (encode()). */
	unsigned char *un[LE_CRC_WAYS];
	int nun = sh->nunsealed;
	for (int i = 0; i < nun; i++)
		un[i] = buf + sh->unsealed[i];

	while (recs < batch && nw < max_new) {
		le__slot *sl;
		uint32_t sbytes;
		int k = le__ring_peek(r, &rd, &sl, &sbytes);
		if (k == LE_PEEK_EMPTY || (k == LE_PEEK_CLAIMED && !sh->recovering)) {
			why = C_MORE;
			break;
		}
		if (k == LE_PEEK_CLAIMED || (sh->recovering && sl->seq &&
		                             sl->seq < seq)) {
			/* Recovery: a slot its dead producer never published
			 * (never accepted), or one already in the segment
			 * (written, then killed before the ring moved on). */
			if (k == LE_PEEK_CLAIMED)
				atomic_fetch_add(&sh->abandoned, 1);
			rd += sbytes;
			continue;
		}
		uint32_t plen = sl->len, flen = fixed + plen;
		if (plen > sbytes - LE_SLOT_HDR || sl->level > LE_FATAL ||
		    (sl->flags & ~LE_REC_TRUNCATED)) {
			/* A length its slot cannot hold, a level or flags no
			 * producer writes: a damaged queue file.  The walk
			 * stops here; recovery says so (drain_dead). */
			why = C_MORE;
			break;
		}
		if (sh->buf_off + len + flen > limit &&
		    sh->buf_off + len > LE_SEG_HDR) {
			why = C_ROTATE;
			break;
		}
		if (len + flen > cap)
			break;
		/* The producer wrote these lines on another core: ask for the
		 * next ones early (the hardware prefetcher stops at pages). */
		__builtin_prefetch(r->data + ((rd + 1024) & mask));
		__builtin_prefetch(r->data + ((rd + 1088) & mask));
		/* Recorded so that recovery after a kill -9 between our pwrite
		 * and the release can tell this slot is already written. */
		sl->seq = seq;
		/* Monotonic in a shard, and not from a jumped counter (os.h).
		 * A stamp past the reading may only mean this pass has been
		 * running (preempted, a long batch): read the clock again
		 * before calling it a jump, or records taken since would be
		 * dated to the pass's start (up to 10 ms before their call,
		 * found by a second reader). */
		uint64_t ts = le__clock_ns(&clk, sl->ts);
		if (ts > now_real + LE_CLOCK_SLIP_NS)
			now_real = le__now_ns();
		ts = le__ts_within(ts, last_ts, now_real);
		last_ts = ts;
		last_off = sh->buf_off + len;
		if (e->has_stream)
			stage(sh, ts, sl->level, seq, sl->flags, sl + 1, plen);
		/* Without a store the lines are the output: no frame, no CRC
		 * (len still counts them, as the batch's measure). */
		if (store) {
			if (fields == LE_FIELD_ALL)
				le__frame_put_all(buf + len, sl->flags, sl->level,
				                  sh->id, seq, ts, sl + 1, plen);
			else
				le__frame_put(buf + len, fields, sl->flags,
				              sl->level, sh->id, seq, ts, sl + 1,
				              plen);
			if (fields & LE_FIELD_CRC) {
				un[nun++] = buf + len;
				if (nun == LE_CRC_WAYS) {
					le__frame_seal(un, LE_CRC_WAYS);
					nun = 0;
				}
			}
		}
		if (recs++ == 0)
			sh->pend_since = le__mono_ns();
		len += flen;
		nw += flen;
		seq++;
		slots++;
		bytes_sum += plen;
		rd += sbytes;
	}
	for (int i = 0; i < nun; i++)
		sh->unsealed[i] = (size_t)(un[i] - buf);
	sh->nunsealed = nun;
	sh->buf_len = len;
	sh->buf_new = nw;
	sh->rd = rd;
	sh->next_seq = seq;
	sh->last_ts = last_ts;
	sh->pend_last_off = last_off;
	sh->pend_recs = recs;
	sh->pend_slots += slots;
	sh->pend_bytes += bytes_sum;
	return why;
}

static void signal_flushers(le__shard *sh)
{
	le_engine *e = sh->e;

	if (atomic_load(&e->flush_waiters)) {
		pthread_mutex_lock(&e->flush_mu);
		pthread_cond_broadcast(&e->flush_cv);
		pthread_mutex_unlock(&e->flush_mu);
	}
}

static int do_sync(le__shard *sh)
{
	if (!sh->dirty || sh->fd < 0)
		return 0;
	int rc = le__fdatasync(sh->fd);
	atomic_fetch_add(&sh->syncs, 1);
	sh->last_sync_mono = le__mono_ns();
	if (rc < 0) {
		/* Never retried: after a failed fdatasync the kernel may have
		 * dropped the dirty pages and marked them clean, so a second
		 * "success" would lie.  The records written since the last
		 * good sync are reported (they may or may not be on disk),
		 * le_flush returns the error, and the file is not trusted with
		 * anything more: the next write goes to a new segment. */
		atomic_fetch_add(&sh->sync_errors, 1);
		atomic_fetch_add(&sh->sync_lost, sh->unsynced);
		note_error(sh, rc);
		sh->unsynced = 0;
		sh->dirty = 0;
		sh->rotate_pending = 1;
		return rc;
	}
	sh->unsynced = 0;
	sh->dirty = 0;
	return 0;
}

static void checkpoint(le__shard *sh)
{
	le__ckpt c;
	uint64_t end = written_end(sh);

	if (sh->ckpt_fd < 0 || end == sh->ckpt_off || end <= LE_SEG_HDR ||
	    sh->last_frame_off < LE_SEG_HDR)
		return;
	c.gen = sh->ckpt_gen + 1;
	c.seg_index = sh->seg_index;
	c.offset = end;
	c.next_seq = sh->w_next_seq;
	c.last_ts = sh->w_last_ts;
	c.last_off = sh->last_frame_off;
	c.shard = sh->id;
	int rc = le__ckpt_write(sh->ckpt_fd, &c);
	if (rc == 0 && sh->e->cfg.durability != LE_SYNC_NONE)
		rc = le__fdatasync(sh->ckpt_fd);
	if (rc < 0) {
		note_error(sh, rc);
		return;
	}
	sh->ckpt_gen = c.gen;
	sh->ckpt_off = end;
	atomic_fetch_add(&sh->checkpoints, 1);
}

/* Give written slots back to producers and publish progress. */
static void release(le__shard *sh)
{
	le_engine *e = sh->e;
	uint64_t tail = atomic_load_explicit(sh->ring.tail,
	                                     memory_order_relaxed);

	if (sh->rd != tail)
		le__ring_release(&sh->ring, tail, sh->rd);
	if (sh->recovering) {
		/* A dead process's records: never in our budget. */
		atomic_fetch_add(&sh->recovered, sh->pend_slots);
	} else if (sh->pend_slots) {
		/* Count them consumed before they leave the queue's count, so
		 * a le_stats_get in between never sees them in neither. */
		atomic_fetch_add_explicit(&sh->consumed, sh->pend_slots,
		                          memory_order_release);
		le__budget_give(&e->budget, sh->pend_slots, sh->pend_bytes);
		if (atomic_load(&e->block_waiters)) {
			atomic_fetch_add(&e->space_seq, 1);
			le__futex_wake(&e->space_seq, INT_MAX);
		}
	}
	sh->pend_recs = sh->pend_slots = sh->pend_markers = 0;
	sh->pend_bytes = 0;
	atomic_store_explicit(&sh->done_pos, sh->rd, memory_order_release);
	signal_flushers(sh);
}

/* Reserve the segment's blocks ahead of the writes, PREALLOC at a time:
 * appending into reserved blocks spares the file system an allocation per
 * write (ext4's delayed allocation showed up at a fifth of the writer's
 * kernel time).  Failure is harmless: the write itself reports ENOSPC. */
#define PREALLOC (8u << 20)

static void prealloc(le__shard *sh)
{
	uint64_t end = seg_end(sh), limit = sh->e->cfg.segment_bytes;

	if (end <= sh->prealloc_end || sh->prealloc_end >= limit)
		return;
	uint64_t to = end + PREALLOC < limit ? end + PREALLOC : limit;
	if (le__prealloc(sh->fd, sh->prealloc_end, to - sh->prealloc_end) == 0)
		sh->prealloc_end = to;
	else
		sh->prealloc_end = limit; /* unsupported: do not ask again */
}

static uint32_t frame_total(const unsigned char *f)
{
	return le__get32(f) + 4;
}

/*
 * After a write error that the file itself caused (EIO, EFBIG, no file):
 * keep in the old segment the whole frames that `done` bytes of the write
 * carried (EFBIG writes up to the limit), cut the file there, and move the
 * rest (already sealed frames: they do not depend on their offset, only
 * the header's base sequence does) to the start of a new segment, to be
 * retried there.  A frame too big for any file under the learned size
 * limit is dropped and counted.
 */
static void relocate(le__shard *sh, size_t done)
{
	size_t n = sh->buf_new;
	uint64_t first = sh->buf_off + sh->buf_len - n;
	unsigned char *region = sh->buf + sh->buf_len - n;
	size_t hdr = first < LE_SEG_HDR ? (size_t)(LE_SEG_HDR - first) : 0;
	size_t keep = 0;

	if (done >= hdr && hdr <= n) {
		keep = hdr;
		while (keep + 4 <= n && keep + frame_total(region + keep) <= done)
			keep += frame_total(region + keep);
	}
	size_t from = keep > hdr ? keep : hdr; /* headers never move */
	uint64_t moved_frames = 0;
	for (size_t p = from; p + 4 <= n; p += frame_total(region + p))
		moved_frames++;
	unsigned char *tmp = n ? malloc(n) : NULL;
	if (n && !tmp)
		return; /* retry in place */
	if (tmp)
		memcpy(tmp, region, n);
	if (sh->fd >= 0)
		le__ftruncate(sh->fd, first + keep); /* no partial frame stays */
	atomic_fetch_add(&sh->bytes_written, keep);
	sh->buf_len -= n - keep;
	sh->buf_new = 0;
	uint64_t next = sh->next_seq;
	sh->next_seq -= moved_frames; /* the new header's base sequence */
	int rc = seg_rotate(sh);
	sh->next_seq = next;
	if (rc < 0) {
		/* No new segment (fd is now -1): what is not on disk stays
		 * pending; the next write fails with EBADF and comes back. */
		memcpy(sh->buf + sh->buf_len, tmp + keep, n - keep);
		sh->buf_len += n - keep;
		sh->buf_new = n - keep;
		free(tmp);
		return;
	}
	uint64_t room = seg_limit(sh) > LE_SEG_HDR ? seg_limit(sh) - LE_SEG_HDR : 0;
	for (size_t p = from; p + 4 <= n; p += frame_total(tmp + p)) {
		uint32_t t = frame_total(tmp + p);
		if (t > room && sh->seg_cap) {
			/* Can never fit a file under ulimit -f. */
			atomic_fetch_add(&sh->dropped_io, 1);
			sh->pend_lost++;
			continue;
		}
		if (first + p >= sh->pend_last_off)
			sh->pend_last_off = seg_end(sh);
		memcpy(sh->buf + sh->buf_len, tmp + p, t);
		sh->buf_len += t;
		sh->buf_new += t;
	}
	free(tmp);
}

/* Write the buffer's new bytes.  @return 0 or the write's error (the
 * batch stays pending, to be retried). */
static int write_batch(le__shard *sh)
{
	le_engine *e = sh->e;
	size_t done = 0;
	int rc = 0;

	seal(sh);
	if (!e->cfg.store) {
		/* Stream only: the lines are the output; what the stream had
		 * no room for is dropped (and counted) right here. */
		uint64_t d = unstage(sh);
		uint64_t recs = sh->pend_recs - sh->pend_markers;
		atomic_fetch_add(&sh->written, recs > d ? recs - d : 0);
		atomic_fetch_add(&sh->dropped_io, d < recs ? d : recs);
		sh->buf_len = sh->buf_new = 0;
		sh->buf_off = 0;
		release(sh);
		return 0;
	}
	if (sh->buf_new) {
		uint64_t end = seg_end(sh);
		prealloc(sh);
		if (e->cfg.direct_io) {
			size_t w = (sh->buf_len + ALIGN - 1) & ~(size_t)(ALIGN - 1);
			memset(sh->buf + sh->buf_len, 0, w - sh->buf_len);
			rc = le__pwrite_all(sh->fd, sh->buf, w, sh->buf_off);
		} else {
			rc = le__pwrite_some(sh->fd,
			                     sh->buf + sh->buf_len - sh->buf_new,
			                     sh->buf_new, end - sh->buf_new, &done);
		}
		if (rc < 0) {
			atomic_fetch_add(&sh->write_errors, 1);
			note_error(sh, rc);
			atomic_store(&sh->failing, 1);
			/* ENOSPC / EDQUOT: wait for space, same file.  EIO, EFBIG
			 * (ulimit -f): this file will not take them; a new one
			 * may.  EFBIG also tells where the limit is. */
			if (rc == -EFBIG && !e->cfg.direct_io)
				sh->seg_cap = end - sh->buf_new + done;
			if (rc == -EIO || rc == -EFBIG || rc == -EBADF)
				relocate(sh, rc == -EFBIG && !e->cfg.direct_io ? done
				                                               : 0);
			return rc;
		}
		atomic_store(&sh->failing, 0);
		if (e->has_stream)
			unstage(sh);
		atomic_fetch_add_explicit(&sh->bytes_written, sh->buf_new,
		                          memory_order_relaxed);
		atomic_fetch_add_explicit(&sh->written,
		                          sh->pend_recs - sh->pend_markers -
		                                  sh->pend_lost,
		                          memory_order_relaxed);
		sh->pend_lost = 0;
		atomic_fetch_add_explicit(&sh->markers, sh->pend_markers,
		                          memory_order_relaxed);
		sh->dirty = 1;
		sh->unsynced += sh->pend_recs - sh->pend_markers;
		sh->last_frame_off = sh->pend_recs ? sh->pend_last_off
		                                   : sh->last_frame_off;
		sh->w_next_seq = sh->next_seq;
		sh->w_last_ts = sh->last_ts;
		/* Keep the partial last block for O_DIRECT; else nothing. */
		size_t keep = e->cfg.direct_io ? (size_t)(end % ALIGN) : 0;
		if (keep && sh->buf_len > keep)
			memmove(sh->buf, sh->buf + sh->buf_len - keep, keep);
		sh->buf_off = end - keep;
		sh->buf_len = keep;
		sh->buf_new = 0;
	}
	int flush_wanted = atomic_load(&sh->flush_req) > atomic_load(&sh->done_pos);
	if (e->cfg.durability == LE_SYNC_BATCH ||
	    (flush_wanted && e->cfg.durability == LE_SYNC_INTERVAL))
		do_sync(sh);
	release(sh);
	return 0;
}

/* Does the batch go out now? */
static int due(le__shard *sh, int why, uint64_t now)
{
	le_engine *e = sh->e;

	if (why != C_MORE)
		return 1;
	if (atomic_load(&e->stopping))
		return 1;
	if (atomic_load(&sh->flush_req) > atomic_load(&sh->done_pos) &&
	    sh->rd >= atomic_load(&sh->flush_req))
		return 1;
	return sh->pend_recs && now - sh->pend_since >= e->cfg.flush_ms * MS;
}

static void periodic(le__shard *sh, uint64_t now)
{
	const le_config *c = &sh->e->cfg;

	if (now - sh->last_recal_mono >= 1000 * MS) {
		sh->last_recal_mono = now;
		le__clock_recal(&sh->clock);
	}
	if (c->durability == LE_SYNC_INTERVAL && sh->dirty &&
	    now - sh->last_sync_mono >= c->sync_ms * MS)
		do_sync(sh);
	if (c->checkpoint_ms && now - sh->last_ckpt_mono >= c->checkpoint_ms * MS) {
		sh->last_ckpt_mono = now;
		if (c->durability != LE_SYNC_NONE)
			do_sync(sh);
		checkpoint(sh);
	}
	if (c->segment_max_age_ms && !sh->pend_recs && !sh->buf_new &&
	    seg_end(sh) > LE_SEG_HDR &&
	    now - sh->seg_created_mono >= c->segment_max_age_ms * MS)
		seg_rotate(sh);
}

/* Anything for the writer to do right now? */
static int has_work(le__shard *sh)
{
	uint32_t bytes;
	le_engine *e = sh->e;

	return peek_slot(sh, &bytes) != NULL || atomic_load(&e->stopping) ||
	       atomic_load(&sh->dropped_pending) ||
	       atomic_load(&sh->flush_req) > atomic_load(&sh->done_pos);
}

/* How long a writer that cannot move on yields before it naps. */
#define LE_STUCK_SPIN_NS (1000u * 1000u)

/* Wait for a slot that has not come, stuck since `since`: yield while
 * that is recent (a producer between two instructions), then a
 * millisecond at a time without a CPU (a producer stopped there, or a
 * slot written over), and not as a sleeper (`sleeping` stays 0), so that
 * producers filling the queue behind it make no futex call to wake it. */
static void wait_stuck(uint64_t since, uint64_t now)
{
	struct timespec ms = {0, 1000000};

	if (now - since < LE_STUCK_SPIN_NS)
		sched_yield();
	else
		nanosleep(&ms, NULL);
}

/* 64 ring bytes a microsecond: ~330,000 records/s of 128 bytes. */
#define BUSY_BYTES_PER_US 64u

/*
 * A busy writer's nap: LE_BUSY_NAP_NS, or less when the producers would
 * fill a quarter of the ring sooner at the rate the last pass found.
 * Each batch the writer gives back costs a producer one or two cache
 * misses (the budget and tail words come back from the writer's core,
 * ~200 ns each on the reference VM), so the number of batches decides how
 * many calls are slow: at a timed producer's 12.8 M records/s a 50 us nap
 * made batches of ~640 records, 0.16% of calls, and p99.9 landed among
 * them.  200 us makes batches of ~2,000: p99.9 240-250 ns against 260-291
 * in four alternating rounds (`build/bench --only compare --targets
 * logengine -r 3`), the same throughput timed and untimed.
 */
#define LE_BUSY_NAP_NS (200u * 1000u)

/* The nap for the rate of the pass that just ended: `bytes` of ring
 * consumed in `dt` ns. */
static uint64_t nap_for(const le__shard *sh, uint64_t bytes, uint64_t dt)
{
	if (!bytes)
		return LE_BUSY_NAP_NS;
	/* a quarter ring at bytes/dt (dt at most a second: no overflow) */
	uint64_t s = dt < 1000 * MS ? dt : 1000 * MS;
	unsigned __int128 t = (unsigned __int128)s * (sh->ring.size / 4) / bytes;
	return t < LE_BUSY_NAP_NS ? (uint64_t)t : LE_BUSY_NAP_NS;
}

static void nap(le__shard *sh, uint64_t now)
{
	le_engine *e = sh->e;
	uint64_t wait = e->cfg.flush_ms * MS;

	if (sh->pend_recs) {
		uint64_t age = now - sh->pend_since;
		wait = age >= wait ? 0 : wait - age;
	}
	if (atomic_load(&sh->flush_req) > atomic_load(&sh->done_pos)) {
		/* A producer has reserved but not yet published: it is
		 * between two instructions, not worth a sleep.  Unless that
		 * lasts: a producer thread stopped between the two, or a
		 * slot whose words were written over (collect will not take
		 * it), must not cost a whole CPU while a le_flush waits (it
		 * did, until the flush gave up and after).  Then it looks
		 * again every millisecond. */
		if (!sh->stuck_since || sh->stuck_rd != sh->rd) {
			sh->stuck_rd = sh->rd;
			sh->stuck_since = now;
		}
		wait_stuck(sh->stuck_since, now);
		return;
	}
	sh->stuck_since = 0;
	if (wait == 0)
		return;
	/* While records arrive fast, the next ones are microseconds away:
	 * nap (nap_for) without saying so (`sleeping` stays 0), so no
	 * producer makes a futex call to wake us, and look again.  Not a
	 * spin: a writer polling the ring's next slot takes the line the
	 * producer writes next, which then has to come back to its core for
	 * every record (~200 ns a trip on the reference VM: a timed
	 * producer's median call was 180 ns instead of 50 in half the runs,
	 * and the writer's own polling was most of its CPU).  Nor a sleep
	 * the producers end: each wake-up was a futex call in a producer's
	 * le_write, once a batch (440-580 calls over 2 us per million, 6.5-15
	 * ms in all, against 73-133 napping).  A trickle (an access log) sleeps
	 * until woken or flush_ms: napping there costs wake-ups for nothing. */
	if (sh->busy) {
		uint64_t n = wait < sh->nap_ns ? wait : sh->nap_ns;
		if (n >= 1000) /* le_flush ends it early: see there */
			le__futex_wait(&sh->sleeping, 0, n);
		return;
	}
	/* RMW: pairs with the producer's RMW in publish_and_wake. */
	atomic_exchange_explicit(&sh->sleeping, 1, memory_order_acq_rel);
	if (!has_work(sh))
		le__futex_wait(&sh->sleeping, 1, wait);
	atomic_store(&sh->sleeping, 0);
}

/* Close: everything queued is written (retrying a failing disk for a
 * while), synced, checkpointed. */
static void drain(le__shard *sh)
{
	uint64_t start = le__mono_ns(), give_up = start + 2000 * MS;
	int why;

	for (;;) {
		uint64_t rd0 = sh->rd;
		why = collect(sh);
		if (sh->rd != rd0)
			start = le__mono_ns(); /* moving: stuck only from here */
		if (why == C_ROTATE) {
			if (write_batch(sh) == 0)
				seg_rotate(sh);
			continue;
		}
		if (sh->pend_recs || sh->buf_new) {
			if (write_batch(sh) < 0) {
				if (le__mono_ns() > give_up)
					break;
				usleep(10000);
			}
			continue;
		}
		if (sh->rd == atomic_load(sh->ring.head))
			break;
		uint64_t now = le__mono_ns();
		if (now > give_up)
			break; /* a producer never published: misuse */
		wait_stuck(start, now);
	}
	if (sh->pend_recs || sh->buf_new || sh->rd != atomic_load(sh->ring.head)) {
		/* The disk would not take them: count them lost. */
		uint64_t lost = sh->pend_slots;
		uint32_t bytes;
		while (peek_slot(sh, &bytes)) {
			lost++;
			sh->rd += bytes;
		}
		atomic_fetch_add(&sh->dropped_io, lost);
		sh->buf_len -= sh->buf_new;
		sh->buf_new = 0;
		sh->pend_recs = sh->pend_slots = sh->pend_markers = 0;
		sh->pend_bytes = 0;
		release(sh);
	}
	if (sh->fd >= 0 &&
	    (sh->e->cfg.direct_io || sh->prealloc_end > seg_end(sh)))
		le__ftruncate(sh->fd, seg_end(sh));
	do_sync(sh);
	checkpoint(sh);
	if (sh->ckpt_fd >= 0 && sh->e->cfg.durability == LE_SYNC_NONE)
		le__fdatasync(sh->ckpt_fd);
	release(sh);
}

/* The writer's buffer, made cap bytes (its bytes kept); a failure keeps
 * the old one, which is always enough for this engine's own records. */
static void buf_resize(le__shard *sh, size_t cap)
{
	unsigned char *b;

	if (cap == sh->buf_cap || sh->buf_len > cap ||
	    posix_memalign((void **)&b, ALIGN, cap) != 0)
		return;
	memcpy(b, sh->buf, sh->buf_len);
	free(sh->buf);
	sh->buf = b;
	sh->buf_cap = cap;
}

/*
 * The ring file holds what a dead process queued: write it out now, before
 * any new record, in order, exactly once.  Published slots are records the
 * dead process's le_write accepted; a slot it claimed but never published
 * was never accepted and is stepped over; a slot whose sequence number is
 * already in the segment was written before the kill and is skipped.
 */
static int drain_dead(le__shard *sh)
{
	const le__ring *r = &sh->ring;
	uint64_t head = atomic_load(r->head), tail = atomic_load(r->tail);
	int rc = 0;

	/* The walk starts at tail (or where a release was going), which
	 * must be on a line; head may be anything: the walk stops where the
	 * words stop making sense, a lap later at the latest (a word's lap
	 * number never matches two laps).  It releases what it writes,
	 * batch by batch (a kill during recovery must not write a record
	 * twice), never toward head; shard_init then renews the file. */
	if ((tail | sh->rd) % LE_SLOT_ALIGN) {
		le__seterr("shard %u: queue file damaged (tail %llu); its "
		           "records were dropped", sh->id,
		           (unsigned long long)tail);
		return 0;
	}
	/* The dead process may have taken records larger than this engine
	 * would (a larger max_record_bytes): room for the largest its ring
	 * can hold, for the walk, or it would stop at the first of them as
	 * if the file were damaged. */
	size_t normal_cap = sh->buf_cap;
	if (r->size > sh->e->max_rec)
		buf_resize(sh, normal_cap - sh->e->max_rec + r->size);
	/* Its stamps are in the dead process's clock (TSC ticks or ns, and
	 * its conversion), which need not be ours: LE_NO_TSC set in one and
	 * not the other, another version.  Converted with ours, ns read as
	 * ticks landed at the clamp's bound and ticks read as ns in 1970.  A
	 * file without one (from before the field) gets ours, and the clamp
	 * keeps its records in order and not after now. */
	le__clock own = sh->clock;
	if (le__ring_get_clock(r, &sh->clock) < 0)
		sh->clock = own;
	sh->recovering = 1;
	for (;;) {
		int why = collect(sh);
		if (why == C_ROTATE) {
			rc = write_batch(sh);
			if (rc == 0)
				rc = seg_rotate(sh);
		} else if (sh->pend_recs || sh->buf_new) {
			rc = write_batch(sh);
		} else {
			break; /* at head, or at a word that makes no sense */
		}
		if (rc < 0)
			break;
	}
	sh->recovering = 0;
	sh->clock = own;
	buf_resize(sh, normal_cap);
	/* Past head is fine: the dead process claimed a slot and died
	 * before moving head past it, and the walk stepped over it. */
	if (rc == 0 && sh->rd < head)
		/* A state word before head that no claim explains, or a
		 * length no slot can hold: the file was damaged.  What
		 * follows cannot be framed, and is dropped. */
		le__seterr("shard %u: queue file damaged at position %llu of "
		           "%llu; the rest of it was dropped", sh->id,
		           (unsigned long long)sh->rd, (unsigned long long)head);
	if (rc == 0 && sh->e->cfg.durability != LE_SYNC_NONE)
		rc = do_sync(sh);
	return rc;
}

void le__writer_restart(le__shard *sh)
{
	sh->rd = atomic_load(sh->ring.tail);
	atomic_store(&sh->done_pos, sh->rd);
	atomic_store(&sh->flush_req, sh->rd);
}

void le__writer_note_clock(le__shard *sh)
{
	le__ring_put_clock(&sh->ring, &sh->clock);
	sh->clock_put_tsc = sh->clock.base_tsc;
	sh->clock_put_mult = sh->clock.mult;
}

void *le__writer_main(void *arg)
{
	le__shard *sh = arg;
	le_engine *e = sh->e;
	uint64_t backoff = 0;
	sh->last_sync_mono = sh->last_ckpt_mono = le__mono_ns();
	sh->last_recal_mono = sh->last_sync_mono;
	while (!atomic_load(&e->stopping)) {
		uint64_t rd0 = sh->rd;
		int why = collect(sh);
		uint64_t now = le__mono_ns();
		/* Busy: this pass found at least BUSY_BYTES_PER_US ring bytes
		 * per microsecond since the last one (or filled a batch). */
		sh->busy = why != C_MORE ||
		           (sh->rd - rd0) * 1000 >=
		                   (now - sh->last_collect_mono) * BUSY_BYTES_PER_US;
		sh->nap_ns = nap_for(sh, sh->rd - rd0,
		                     now - sh->last_collect_mono);
		sh->last_collect_mono = now;
		if ((sh->pend_recs || sh->buf_new || why == C_ROTATE) &&
		    due(sh, why, now)) {
			if (write_batch(sh) < 0) {
				backoff = backoff ? backoff * 2 : 10 * MS;
				if (backoff > 250 * MS)
					backoff = 250 * MS;
				usleep((useconds_t)(backoff / 1000));
				continue;
			}
			backoff = 0;
			if (why == C_ROTATE || sh->rotate_pending)
				seg_rotate(sh);
			periodic(sh, now);
			continue;
		}
		if (sh->rotate_pending && !sh->pend_recs && !sh->buf_new)
			seg_rotate(sh); /* after a failed sync (do_sync) */
		if (!sh->pend_recs && sh->rd != atomic_load_explicit(
		                                      sh->ring.tail,
		                                      memory_order_relaxed))
			release(sh); /* only padding was consumed */
		periodic(sh, now);
		if (why == C_MORE)
			nap(sh, now);
	}
	drain(sh);
	sh->cpu_ns = le__self_cpu_ns();
	return NULL;
}
