/*
 * forward.c -- `logengine forward DIR`: ship the frames of every shard of
 * a log directory to a NATS JetStream stream, as they are stored.
 *
 *   shard-NNN/INDEX.seg --scanner: each frame's CRC checked--> batch:
 *     frames of one segment, as stored, <= --max-batch-bytes (sent from
 *     the scanner's window, or read again when it moved on)
 *       --> message (headers: docs/INTERFACES.md) --> js_PublishMsgAsync
 *   window: <= --max-inflight-bytes and QCAP messages awaiting a PubAck
 *   ack handler (a libnats thread): marks the message's entry, wakes us
 *   settle (here): per shard, in publish order, acknowledged messages move
 *     the cursor; the cursor goes to shard-NNN/FORWARD (ship.h) in place,
 *     at most every CURSOR_MS
 *
 * A shard's state, between messages:
 *
 *   FOLLOW --publish failed / timed out (then a backoff, 0.1 s to 5 s),
 *          or a duplicate of a shorter message (at once)-->
 *   REWIND (publish nothing; wait until none of its messages is pending)
 *     --> read again from the cursor, PROBE: one message in flight at a
 *   time until one is stored that was not a duplicate --> FOLLOW
 *
 * A restart with a cursor begins in PROBE.
 *
 * Why PROBE.  A message's id is (host, shard, first sequence).  After a
 * restart or a failure, the batch that starts at the cursor may hold more
 * records than the one stored under the same id before; the server calls
 * it a duplicate and drops it whole.  The forwarder then reads the stored
 * message's range (js_GetMsg, header Le-Seq) and goes on after it.  One
 * message at a time keeps the stream in order while that happens; once a
 * message is new to the stream, nothing after it can have been stored.
 *
 * Memory: the batch buffer (--max-batch-bytes), one scanner window per
 * shard (<= 1 MiB, segment.c), messages in flight (the window), nothing
 * that grows with the backlog.  Files: FORWARD, one per shard, written in
 * place; nothing else is created.
 */
#define _GNU_SOURCE
#include "ship_cli.h"

#ifndef LE_NO_NATS
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/crc32c.h"
#include "record/defer.h"
#include "base/os.h"
#include "store/seg_zst.h"
#include "store/segment.h"
#include "ship/ship.h"

#define CMD "forward"
#define QCAP 1024                 /* messages in flight, at most */
#define CURSOR_MS 100             /* cursor write period, at most */
#define IDLE_MS 1000              /* wake-up period with nothing to do */
#define DEFAULT_INFLIGHT (16u << 20)
#define DEFAULT_MAX_RECORD (64u << 10) /* le_config's default */
#define DEFAULT_ACK_WAIT_MS 10000

enum { E_PENDING, E_OK, E_DUP, E_FAILED };

/* One published message, from publish until settled (ring q). */
struct entry {
	natsMsg *msg;        /* identity for the ack handler; NULL once it
	                        reported (never dereferenced) */
	uint32_t si;         /* index of its shard in f->sh */
	int state;           /* E_* */
	int done;            /* settled or dropped: the slot may be reused */
	uint64_t first, last;
	uint64_t gap;        /* gap message: records reported lost */
	uint64_t bytes;      /* body bytes (the window counts them) */
	uint64_t end_seg, end_off; /* where the next record starts */
	uint64_t stream_seq; /* from the PubAck */
	char err[160];       /* why it failed */
};

struct fshard {
	uint32_t id;
	char dir[LE_PATH_MAX];
	int wd;              /* inotify watch */
	/* cursor */
	int cfd;             /* FORWARD, flock()ed */
	uint64_t id_key;     /* in every Nats-Msg-Id (le__fwd_key) */
	unsigned salted;     /* another publisher took one of our ids: each
	                        id gets a random salt (dup_last) */
	le__fwd_cursor cur;
	int cur_dirty;
	uint64_t cur_ms;     /* when last written */
	/* reading */
	le__scan sc;
	int open;
	uint64_t seg;        /* index of the open segment */
	uint64_t min_seg;    /* segments below this are done with */
	uint64_t read_seq;   /* next record to publish (0: the oldest) */
	uint64_t pos;        /* offset of the batch's first frame (Le-Pos) */
	le__dcache dc;       /* descriptors of deferred frames, by offset */
	int tail_seen;       /* the last read found no more data */
	/* shipping */
	unsigned pending;    /* entries not yet settled or dropped */
	unsigned awaiting;   /* of those, still waiting for their ack
	                        (guarded by f->mu: the handler counts) */
	int rewind, probe;
	int backoff;         /* the rewind follows a failure: wait first */
	uint64_t retry_ms;   /* no publish before this (backoff) */
	int backoff_ms;
	int said;            /* a failure streak was reported */
	/* --once: ship what was there at start */
	uint64_t tgt_seg, tgt_off;
	int blocked;         /* settle(): an earlier entry is not OK */
};

struct fwd {
	struct ship_conn conn;
	const char *dir, *subject, *host;
	char subject_buf[300];
	char host_buf[LE_HOST_MAX + 1];
	uint64_t max_batch, max_inflight, max_record, ack_wait_ms;
	int once, verbose, replicas;
	natsConnection *nc;
	jsCtx *js;
	int wake[2];         /* self-pipe: acks and signals */
	int ino;             /* inotify */
	int dir_wd;
	uint64_t scan_ms;    /* the last look for new shards (no inotify) */
	struct fshard *sh;
	size_t nsh;
	unsigned char *batch;
	unsigned char *relinked; /* a batch with deferred frames relinked */
	le__relink rl;           /* their descriptors in the message */
	/* the window, guarded by mu (the ack handler runs on a libnats
	 * thread) */
	pthread_mutex_t mu;
	struct entry q[QCAP];
	uint64_t head, tail;  /* entries [head, tail) in publish order */
	uint64_t inflight;    /* bytes of pending entries */
	/* counters */
	uint64_t msgs, records, bytes, acked, dups, rewinds, lost, oversize;
};

/* ---- the spool: the library's segment scanner, used directly ---- */

/* Base sequence and creation time of segment `index`. */
static int spool_base(const char *dir, uint64_t index, uint64_t *base)
{
	char path[LE_PATH_MAX];
	unsigned char h[LE_SEG_HDR];
	le__seg_hdr hdr;

	uint64_t len;
	int archived;

	if (le__seg_path(path, sizeof path, dir, index) < 0)
		return -ENAMETOOLONG;
	/* the segment, or the first bytes of its archive */
	ssize_t got = le__seg_head(path, h, sizeof h, &len, &archived);
	if (got < 0 && got != LE_ECORRUPT)
		return (int)got;
	if (got != LE_SEG_HDR || le__seg_hdr_decode(h, &hdr) < 0)
		return LE_ECORRUPT;
	*base = hdr.base_seq;
	return 0;
}

static int spool_exists(const char *dir, uint64_t index)
{
	char path[LE_PATH_MAX];
	uint64_t size, mtime;

	le__seg_path(path, sizeof path, dir, index);
	return le__seg_stat(path, &size, &mtime) >= 0; /* or its archive */
}

static int spool_open(struct fshard *s, uint64_t index)
{
	char path[LE_PATH_MAX];
	const char *why;

	le__seg_path(path, sizeof path, s->dir, index);
	int rc = le__scan_open(&s->sc, path, s->id, &why);
	if (rc < 0)
		return rc;
	s->open = 1;
	s->seg = index;
	return 0;
}

static void spool_close(struct fshard *s)
{
	if (s->open)
		le__scan_close(&s->sc);
	s->open = 0;
}

/* See what the writer appended since: the file's size again, and the
 * window forgotten (it may hold a frame caught half written). */
static void spool_refresh(struct fshard *s)
{
	struct stat st;

	if (fstat(s->sc.fd, &st) == 0)
		s->sc.file_len = (uint64_t)st.st_size;
	s->sc.win_len = 0;
}

/* Open the segment to read `want` from: the last one from min_seg on
 * whose base is <= want, else the first one from min_seg on (the
 * records before it are gone: the read finds the gap).  want 0: the
 * oldest record.  @return 1 open, 0 no segment yet, < 0 error. */
static int spool_position(struct fshard *s, uint64_t want)
{
	uint64_t *segs, base;
	size_t n, k = 0, pick;
	int rc = le__seg_list(s->dir, &segs, &n);

	if (rc < 0)
		return rc;
	while (k < n && segs[k] < s->min_seg)
		k++;
	/* A header not written yet (or damaged) cannot start the read. */
	while (k < n && spool_base(s->dir, segs[k], &base) < 0)
		k++;
	if (k == n) {
		free(segs);
		return 0;
	}
	pick = k;
	while (want && base <= want && ++k < n) {
		uint64_t b;
		if (spool_base(s->dir, segs[k], &b) < 0 || b > want)
			break;
		pick = k;
		base = b;
	}
	rc = spool_open(s, segs[pick]);
	free(segs);
	if (rc < 0)
		return rc;
	/* The cursor's hint: start at the frame it names, if one is there
	 * with the right sequence (checked by the first read). */
	if (s->cur.seg_index == s->seg && s->cur.offset > LE_SEG_HDR &&
	    want == s->cur.next_seq && s->sc.hdr.base_seq < want &&
	    s->cur.offset < s->sc.file_len) {
		le__frame f;
		const char *why;
		s->sc.off = s->cur.offset;
		s->sc.next_seq = want;
		if (le__scan_next(&s->sc, &f, &why) != LE_FRAME_OK ||
		    ((s->sc.hdr.fields & LE_FIELD_SEQUENCE) && f.seq != want)) {
			s->sc.off = LE_SEG_HDR;
			s->sc.next_seq = s->sc.hdr.base_seq;
		} else {
			s->sc.off = s->cur.offset;
			s->sc.next_seq = want;
		}
	}
	return 1;
}

/* ---- reading frames ---- */

enum { RD_FRAME, RD_NONE, RD_SEGEND, RD_GAP };

struct rd {
	le__frame f;
	uint64_t off;               /* its offset */
	uint64_t gap_last, gap_ts;  /* RD_GAP: records want..gap_last gone */
};

/* Leave a sealed segment whose end was reached. */
static void seg_next(struct fshard *s)
{
	s->min_seg = s->seg + 1;
	spool_close(s);
}

/* Damage in a sealed segment: skip to the next valid frame; the records
 * in between show up as a gap.  @return 0, or < 0. */
static int seg_damage(struct fwd *f, struct fshard *s, const char *why)
{
	uint64_t off = s->sc.off;
	int found = le__scan_resync(&s->sc);

	if (found < 0)
		return found;
	fprintf(stderr, "logengine %s: %s/%016" PRIx64 ".seg: offset %" PRIu64
	        ": %s; %s\n", CMD, s->dir, s->seg, off, why,
	        found ? "skipped to the next valid frame" : "rest of the "
	        "segment skipped");
	(void)f;
	if (!found)
		seg_next(s);
	return 0;
}

/* --once stops at what was there at start. */
static int past_target(const struct fwd *f, const struct fshard *s)
{
	return f->once && (s->seg > s->tgt_seg ||
	                   (s->seg == s->tgt_seg && s->sc.off >= s->tgt_off));
}

/*
 * The next frame of shard s at or after `want`.  stay: do not go on to
 * the next segment (a batch is open).  RD_GAP: the next frame there is
 * has a higher sequence (records gone), nothing consumed.
 */
static int next_frame(struct fwd *f, struct fshard *s, uint64_t want,
                      int stay, struct rd *r)
{
	int refreshed = 0;
	const char *why;

	for (;;) {
		if (!s->open) {
			if (stay)
				return RD_SEGEND;
			int rc = spool_position(s, want);
			if (rc <= 0)
				return rc < 0 ? rc : RD_NONE;
		}
		if (past_target(f, s))
			return RD_NONE;
		uint64_t off = s->sc.off, nseq = s->sc.next_seq;
		int rc = le__scan_next(&s->sc, &r->f, &why);
		if (rc == LE_FRAME_OK) {
			if (want && r->f.seq < want)
				continue; /* before the cursor */
			if (want && r->f.seq > want) {
				s->sc.off = off;
				s->sc.next_seq = nseq;
				s->sc.frames--;
				r->gap_last = r->f.seq - 1;
				r->gap_ts = r->f.ts ? r->f.ts : s->sc.hdr.created_ns;
				return RD_GAP;
			}
			r->off = off;
			return RD_FRAME;
		}
		if (rc < 0)
			return rc;
		if (!spool_exists(s->dir, s->seg + 1)) {
			/* The active segment: no more yet (a frame not
			 * wholly written reads as short or bad). */
			if (refreshed++)
				return RD_NONE;
			spool_refresh(s);
			continue;
		}
		/* Sealed: everything it will hold is there (the writer seals
		 * before it creates the next). */
		if (!refreshed++) {
			spool_refresh(s);
			continue;
		}
		if (stay)
			return RD_SEGEND;
		if (rc == LE_FRAME_END || s->sc.off >= s->sc.file_len ||
		    (rc == LE_FRAME_SHORT && s->sc.file_len - s->sc.off < 4))
			seg_next(s);
		else if ((rc = seg_damage(f, s, why)) < 0)
			return rc;
		refreshed = 0;
	}
}

/* Put scanner s back before the frame r just read. */
static void unread(struct fshard *s, const struct rd *r)
{
	s->sc.off = r->off;
	s->sc.next_seq--;
	s->sc.frames--;
}

/* ---- publishing ---- */

static void set_hdr(natsMsg *m, const char *k, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void set_hdr(natsMsg *m, const char *k, const char *fmt, ...)
{
	char v[320];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(v, sizeof v, fmt, ap);
	va_end(ap);
	natsMsgHeader_Set(m, k, v);
}

/* The headers of docs/INTERFACES.md ("Message"). */
static natsStatus make_msg(struct fwd *f, struct fshard *s, natsMsg **m,
                           const struct entry *e, const unsigned char *body,
                           uint32_t fields, uint64_t gap_ts)
{
	char subj[320];

	/* One subject per origin (host token, shard): the collector takes
	 * the origin from it, and the server's permissions decide who may
	 * publish there. */
	snprintf(subj, sizeof subj, "%s.%" PRIu32, f->subject, s->id);
	natsStatus st = natsMsg_Create(m, subj, NULL, (const char *)body,
	                               (int)e->bytes);
	if (st != NATS_OK)
		return st;
	uint64_t salt = 0;
	if (s->salted && getrandom(&salt, sizeof salt, 0) != sizeof salt)
		salt = (uint64_t)ship_mono_ms() ^ ((uint64_t)getpid() << 32);
	if (s->salted)
		set_hdr(*m, "Nats-Msg-Id", "%s/%" PRIu32 "/%" PRIu64 "/%016"
		        PRIx64 "/%016" PRIx64, f->host, s->id, e->first,
		        s->id_key, salt);
	else
		set_hdr(*m, "Nats-Msg-Id", "%s/%" PRIu32 "/%" PRIu64 "/%016"
		        PRIx64, f->host, s->id, e->first, s->id_key);
	set_hdr(*m, "Le-Format", "%d", LE_SHIP_FORMAT);
	set_hdr(*m, "Le-Host", "%s", f->host);
	set_hdr(*m, "Le-Shard", "%" PRIu32, s->id);
	set_hdr(*m, "Le-Seq", "%" PRIu64 "-%" PRIu64, e->first, e->last);
	set_hdr(*m, "Le-Fields", "%" PRIu32, fields);
	if (body && e->bytes)
		set_hdr(*m, "Le-Pos", "%" PRIu64, s->pos);
	if (!(fields & LE_FIELD_CRC) && e->bytes)
		set_hdr(*m, "Le-Body-Crc", "%08" PRIx32,
		        le__crc_mask(le__crc32c_extend(0, body,
		                                       (size_t)e->bytes)));
	if (e->gap) {
		set_hdr(*m, "Le-Gap", "%" PRIu64, e->gap);
		set_hdr(*m, "Le-Ts", "%" PRIu64, gap_ts);
	}
	return NATS_OK;
}

/* Publish body[0..bytes) as records first..last of s (a gap message
 * when gap).  The entry is in the window before the call, so an ack that
 * comes back at once finds it. */
static int publish(struct fwd *f, struct fshard *s, uint64_t first,
                   uint64_t last, const unsigned char *body, uint64_t bytes,
                   uint32_t fields, uint64_t gap, uint64_t gap_ts)
{
	natsMsg *m = NULL;
	jsPubOptions po;
	struct entry e = {
		.si = (uint32_t)(s - f->sh), .state = E_PENDING,
		.first = first, .last = last, .gap = gap, .bytes = bytes,
		.end_seg = s->open ? s->seg : 0, .end_off = s->open ? s->sc.off : 0,
	};
	natsStatus st = make_msg(f, s, &m, &e, body, fields, gap_ts);

	if (st != NATS_OK) {
		fprintf(stderr, "logengine %s: %s\n", CMD, natsStatus_GetText(st));
		return SHIP_EXIT_FAIL;
	}
	e.msg = m;
	pthread_mutex_lock(&f->mu);
	struct entry *slot = &f->q[f->tail++ % QCAP];
	*slot = e;
	f->inflight += bytes;
	s->awaiting++;
	pthread_mutex_unlock(&f->mu);
	s->pending++;
	s->read_seq = last + 1;
	f->msgs++;
	jsPubOptions_Init(&po);
	po.ExpectStream = f->conn.stream;
	po.MaxWait = (int64_t)f->ack_wait_ms;
	st = js_PublishMsgAsync(f->js, &m, &po);
	if (st != NATS_OK) {
		pthread_mutex_lock(&f->mu);
		if (slot->msg == e.msg && slot->state == E_PENDING) {
			slot->msg = NULL;
			slot->state = E_FAILED;
			f->inflight -= bytes;
			s->awaiting--;
			snprintf(slot->err, sizeof slot->err, "%s",
			         natsStatus_GetText(st));
		}
		pthread_mutex_unlock(&f->mu);
		natsMsg_Destroy(m); /* ours still: the library did not take it */
	}
	return 0;
}

static void on_ack(jsCtx *js, natsMsg *m, jsPubAck *pa, jsPubAckErr *pae,
                   void *closure)
{
	struct fwd *f = closure;
	char b = 1;

	(void)js;
	pthread_mutex_lock(&f->mu);
	for (uint64_t i = f->head; i < f->tail; i++) {
		struct entry *e = &f->q[i % QCAP];
		if (e->msg != m)
			continue;
		e->msg = NULL;
		f->inflight -= e->bytes;
		f->sh[e->si].awaiting--;
		if (pa) {
			e->state = pa->Duplicate ? E_DUP : E_OK;
			e->stream_seq = pa->Sequence;
		} else {
			e->state = E_FAILED;
			snprintf(e->err, sizeof e->err, "%s",
			         pae && pae->ErrText ? pae->ErrText
			         : natsStatus_GetText(pae ? pae->Err : NATS_ERR));
		}
		break;
	}
	pthread_mutex_unlock(&f->mu);
	natsMsg_Destroy(m);
	if (write(f->wake[1], &b, 1) < 0) {
		/* full: the main loop is awake anyway */
	}
}

/* ---- batches ---- */

/* Report a frame no message can carry, and ship a gap for it. */
static int oversize(struct fwd *f, struct fshard *s, const struct rd *r)
{
	fprintf(stderr, "logengine %s: %s/%016" PRIx64 ".seg: offset %" PRIu64
	        ": record %" PRIu64 " is %" PRIu32 " bytes stored, more than "
	        "--max-batch-bytes %" PRIu64 ": not shipped (a gap marker "
	        "takes its place)\n", CMD, s->dir, s->seg, r->off, r->f.seq,
	        r->f.size + 4, f->max_batch);
	f->oversize++;
	return publish(f, s, r->f.seq, r->f.seq, NULL, 0, s->sc.hdr.fields, 1,
	               r->f.ts);
}

/* The batch's bytes: the frames [off, off + len) of the open segment,
 * checked as they were read.  Still in the scanner's window (most often,
 * the window being four batches or more), they go from there; else they
 * are read again (a valid frame's bytes never change: the file only
 * grows, and a deleted one stays readable through our descriptor). */
static const unsigned char *batch_bytes(struct fwd *f, struct fshard *s,
                                        uint64_t off, uint64_t len)
{
	if (off >= s->sc.win_off && off + len <= s->sc.win_off + s->sc.win_len)
		return s->sc.buf + (off - s->sc.win_off);
	ssize_t got = le__pread_full(s->sc.fd, f->batch, (size_t)len, off);
	if (got == (ssize_t)len)
		return f->batch;
	fprintf(stderr, "logengine %s: %s/%016" PRIx64 ".seg: offset %" PRIu64
	        ": %s\n", CMD, s->dir, s->seg, off,
	        got < 0 ? strerror((int)-got) : "shorter than it was");
	return NULL;
}

/* The descriptor of the deferred frame at offset ref of s's segment. */
static const unsigned char *origin_desc(void *arg, uint32_t ref,
                                        size_t *dlen, const char **why)
{
	struct fshard *s = arg;
	return le__dcache_desc(&s->dc, s->sc.fd, s->seg, s->sc.hdr.version,
	                       s->sc.hdr.fields, ref, dlen, why);
}

static const unsigned char *no_desc(void *arg, uint32_t ref, size_t *dlen,
                                   const char **why)
{
	(void)arg;
	(void)ref;
	(void)dlen;
	*why = "no room for it";
	return NULL;
}

/*
 * The n frames body[0..*len) of s, as a message carries them: deferred
 * frames that name their descriptor by an offset made to name a frame of
 * the message (R = Le-Pos + its offset in the body), the first of each
 * call site carrying it (docs/INTERFACES.md, "Deferred records in
 * messages").  A body without deferred frames goes as it is.  Frames
 * that no longer fit --max-batch-bytes are put back for the next batch
 * (*n, *len say what is left).
 */
static const unsigned char *relink(struct fwd *f, struct fshard *s,
                                   const unsigned char *body, uint64_t *len,
                                   uint64_t *n)
{
	uint32_t fields = s->sc.hdr.fields;
	uint64_t in = 0, out = 0, k = 0;

	while (in < *len && !le__frame_deferred(body + in, fields))
		in += (uint64_t)le__get32(body + in) + 4;
	if (in == *len)
		return body;
	le__relink_reset(&f->rl);
	for (in = 0; k < *n; k++) {
		uint64_t fl = (uint64_t)le__get32(body + in) + 4;
		/* A frame only grows: one that does not fit as it is will
		 * not fit relinked, and f->relinked has room for the batch
		 * and one descriptor, not for a whole frame past it. */
		if (k > 0 && out + fl > f->max_batch)
			break;
		size_t got = le__relink_frame(&f->rl, body + in, (size_t)fl,
		                              fields, s->pos + out, origin_desc,
		                              s, f->relinked + out);
		if (!got) {
			got = (size_t)fl;
			memcpy(f->relinked + out, body + in, got);
		}
		if (out + got > f->max_batch && k > 0)
			break; /* grew past the batch: the rest goes next */
		if (out + got > f->max_batch) {
			/* A lone frame that outgrew a message with its
			 * descriptor goes without: its R made 0, which no
			 * frame has (read as undecodable, never as another
			 * call site's text).  The table noted its
			 * descriptor as carried at the body's start, where
			 * it now is not; the table holds nothing else yet
			 * (k == 0), so it starts again empty and the next
			 * frame of the call site carries the descriptor. */
			le__relink_reset(&f->rl);
			got = le__relink_frame(&f->rl, body, (size_t)fl, fields,
			                       s->pos, no_desc, NULL,
			                       f->relinked);
			if (!got) {
				got = (size_t)fl;
				memcpy(f->relinked, body, got);
			}
		}
		out += got;
		in += fl;
	}
	if (k < *n) {
		s->sc.off = s->pos + in;
		s->sc.next_seq -= *n - k;
		s->sc.frames -= *n - k;
		*n = k;
	}
	*len = out;
	return f->relinked;
}

/*
 * Read one batch of shard s and publish it.  @return 1 published, 0
 * nothing to publish now, < 0 error.
 */
static int ship_batch(struct fwd *f, struct fshard *s)
{
	uint64_t want = s->read_seq, first = 0, len = 0, n = 0, start = 0;
	uint32_t fields = 0;
	struct rd r;
	int rc;

	while (len < f->max_batch) {
		/* The common case: frames that follow on, taken a run at a
		 * time (CRCs checked side by side); whatever the run stops
		 * at goes through next_frame, which says what it is. */
		if (s->open && s->sc.next_seq == want && !past_target(f, s) &&
		    (n == 0 || s->sc.off == start + len)) {
			uint64_t lim = f->max_batch - len, off0 = s->sc.off, got;
			if (f->once && s->seg == s->tgt_seg &&
			    s->tgt_off - off0 < lim)
				lim = s->tgt_off - off0;
			int64_t k = le__scan_many(&s->sc, lim, &got);
			if (k < 0)
				return (int)k;
			if (k > 0) {
				if (n == 0) {
					first = want;
					fields = s->sc.hdr.fields;
					start = off0;
				}
				n += (uint64_t)k;
				len += got;
				want = s->sc.next_seq;
				continue;
			}
		}
		rc = next_frame(f, s, want, n > 0, &r);
		if (rc < 0)
			return rc;
		if (rc == RD_NONE || rc == RD_SEGEND)
			break;
		if (rc == RD_GAP) {
			if (n)
				break;
			return publish(f, s, want, r.gap_last, NULL, 0,
			               s->sc.hdr.fields, r.gap_last - want + 1,
			               r.gap_ts) < 0 ? -1 : 1;
		}
		uint64_t flen = (uint64_t)r.f.size + 4;
		if (flen > f->max_batch) {
			if (n) {
				unread(s, &r);
				break;
			}
			return oversize(f, s, &r) < 0 ? -1 : 1;
		}
		if (len + flen > f->max_batch) {
			unread(s, &r);
			break;
		}
		if (n++ == 0) {
			first = r.f.seq;
			fields = s->sc.hdr.fields;
			start = r.off;
		}
		len += flen;
		want = r.f.seq + 1;
	}
	s->tail_seen = n == 0;
	if (n == 0)
		return 0;
	const unsigned char *body = batch_bytes(f, s, start, len);
	if (!body)
		return -1;
	s->pos = start;
	body = relink(f, s, body, &len, &n);
	want = first + n;
	f->records += n;
	f->bytes += len;
	return publish(f, s, first, want - 1, body, len, fields, 0, 0) < 0
	               ? -1 : 1;
}

/* ---- settling acks ---- */

/* The range [first, last] of the message the server already had under
 * this id (stream sequence seq).  A message id is only as secret as the
 * stream (a host that may read it sees our keys), and the server drops a
 * message whose id it saw from anybody: the one it has must be ours, on
 * our subject, with our host, shard and first record, or its word is
 * worth nothing.  @return its last; 0 when it is not ours or is gone
 * from the stream (e->err says which): then the entry goes again, under
 * an id nobody can know in advance. */
static uint64_t dup_last(struct fwd *f, const struct fshard *s,
                         struct entry *e)
{
	natsMsg *m = NULL;
	jsErrCode je = 0;
	const char *v = NULL, *host = NULL, *shard = NULL;
	uint64_t a = 0, b = 0;
	char subj[320], id[16];

	snprintf(subj, sizeof subj, "%s.%" PRIu32, f->subject, s->id);
	snprintf(id, sizeof id, "%" PRIu32, s->id);
	if (js_GetMsg(&m, f->js, f->conn.stream, e->stream_seq, NULL, &je) !=
	    NATS_OK) {
		snprintf(e->err, sizeof e->err, "the message the server had "
		         "under this id (stream message %" PRIu64 ") cannot be "
		         "read", e->stream_seq);
		b = 0;
	} else if (strcmp(natsMsg_GetSubject(m), subj) != 0 ||
	           natsMsgHeader_Get(m, "Le-Host", &host) != NATS_OK ||
	           !host || strcmp(host, f->host) != 0 ||
	           natsMsgHeader_Get(m, "Le-Shard", &shard) != NATS_OK ||
	           !shard || strcmp(shard, id) != 0 ||
	           natsMsgHeader_Get(m, "Le-Seq", &v) != NATS_OK || !v ||
	           sscanf(v, "%" SCNu64 "-%" SCNu64, &a, &b) != 2 ||
	           a != e->first || b < a) {
		snprintf(e->err, sizeof e->err, "another publisher's message "
		         "(stream message %" PRIu64 ", subject %.64s) had this "
		         "id", e->stream_seq, natsMsg_GetSubject(m));
		b = 0;
	}
	natsMsg_Destroy(m);
	return b;
}

/* Entry e of shard s is in the stream up to `last`. */
static void advance(struct fwd *f, struct fshard *s, const struct entry *e,
                    uint64_t last)
{
	if (last + 1 > s->cur.next_seq) {
		s->cur.next_seq = last + 1;
		s->cur.seg_index = last == e->last ? e->end_seg : 0;
		s->cur.offset = last == e->last ? e->end_off : 0;
		s->cur_dirty = 1;
	}
	if (e->gap) {
		s->cur.lost += e->gap;
		f->lost += e->gap;
		s->cur_dirty = 1;
	}
	f->acked++;
}

/* A failure: report it once per streak, and go back to the cursor. */
static void failed(struct fwd *f, struct fshard *s, const char *why)
{
	s->rewind = 1;
	s->backoff = 1;
	f->rewinds++;
	/* Refused by the server: that was said, and nothing goes again. */
	if (!s->said++ && !ship_refused)
		fprintf(stderr, "logengine %s: shard %" PRIu32 ": %s; sending "
		        "again from record %" PRIu64 "\n", CMD, s->id, why,
		        s->cur.next_seq);
}

/* Walk the window in publish order; each shard's acknowledged prefix
 * moves its cursor. */
static void settle(struct fwd *f)
{
	for (size_t i = 0; i < f->nsh; i++)
		f->sh[i].blocked = 0;
	pthread_mutex_lock(&f->mu);
	for (uint64_t i = f->head; i < f->tail; i++) {
		struct entry *e = &f->q[i % QCAP];
		struct fshard *s = &f->sh[e->si];
		if (e->done || s->blocked)
			continue;
		if (e->state == E_PENDING || e->state == E_FAILED) {
			s->blocked = 1;
			if (e->state == E_FAILED && !s->rewind)
				failed(f, s, e->err);
			continue;
		}
		uint64_t last = e->last;
		if (e->state == E_DUP) {
			/* js_GetMsg waits for a reply the handler does not
			 * need the lock for; entries stay put meanwhile. */
			pthread_mutex_unlock(&f->mu);
			last = dup_last(f, s, e);
			pthread_mutex_lock(&f->mu);
			f->dups++;
		}
		if (e->state == E_DUP && last == 0) {
			/* Not ours: from the cursor again, each id with a
			 * salt drawn per message from now on. */
			if (!s->salted++)
				fprintf(stderr, "logengine %s: shard %" PRIu32
				        ": %s; sending again from record %" PRIu64
				        " under ids no one can know in advance\n",
				        CMD, s->id, e->err, s->cur.next_seq);
			e->done = 1;
			s->pending--;
			s->blocked = 1;
			s->rewind = 1;
			continue;
		} else if (e->state != E_DUP) {
			s->probe = 0; /* new to the stream */
			s->said = 0;
			s->backoff_ms = 0;
		}
		advance(f, s, e, last);
		e->done = 1;
		s->pending--;
		if (last < e->last) {
			/* Not a failure: a message of an earlier run, cut
			 * shorter; the rest goes again at once. */
			s->blocked = 1;
			s->rewind = 1;
		}
	}
	while (f->head < f->tail && f->q[f->head % QCAP].done)
		f->head++;
	pthread_mutex_unlock(&f->mu);
}

/* A shard with nothing pending that must read again from its cursor. */
static void rewind_shard(struct fwd *f, struct fshard *s)
{
	uint64_t now = ship_mono_ms();

	pthread_mutex_lock(&f->mu);
	for (uint64_t i = f->head; i < f->tail; i++) {
		struct entry *e = &f->q[i % QCAP];
		if (!e->done && e->si == (uint32_t)(s - f->sh)) {
			e->done = 1;
			s->pending--;
		}
	}
	pthread_mutex_unlock(&f->mu);
	if (s->rewind)
		s->probe = 1;
	if (s->backoff) {
		s->backoff_ms = s->backoff_ms ? s->backoff_ms * 2
		                              : SHIP_BACKOFF_MIN_MS;
		if (s->backoff_ms > SHIP_BACKOFF_MAX_MS)
			s->backoff_ms = SHIP_BACKOFF_MAX_MS;
		s->retry_ms = now + (uint64_t)s->backoff_ms;
	}
	s->rewind = s->backoff = 0;
	spool_close(s);
	s->min_seg = 0;
	s->read_seq = s->cur.next_seq ? s->cur.next_seq : 1;
	s->tail_seen = 0; /* what was read past the cursor goes again */
}

static void rewind_idle(struct fwd *f)
{
	for (size_t i = 0; i < f->nsh; i++) {
		struct fshard *s = &f->sh[i];
		pthread_mutex_lock(&f->mu);
		unsigned awaiting = s->awaiting;
		pthread_mutex_unlock(&f->mu);
		uint64_t at = s->cur.next_seq ? s->cur.next_seq : 1;
		if (awaiting == 0 &&
		    (s->rewind || (s->pending == 0 && s->read_seq != at)))
			rewind_shard(f, s);
	}
}

/* ---- the cursor file ---- */

static int cursor_flush(struct fwd *f, struct fshard *s, int force)
{
	uint64_t now = ship_mono_ms();

	if (!s->cur_dirty || (!force && now - s->cur_ms < CURSOR_MS))
		return 0;
	s->cur.gen++;
	s->cur.shard = s->id;
	s->cur.written_ns = le__now_ns();
	int rc = le__fwd_write(s->cfd, &s->cur);
	if (rc < 0) {
		fprintf(stderr, "logengine %s: %s/" LE_FWD_NAME ": %s\n", CMD,
		        s->dir, le_strerror(rc));
		return rc;
	}
	(void)f;
	s->cur_dirty = 0;
	s->cur_ms = now;
	return 0;
}

/* Open (creating) and lock shard s's FORWARD file; read the cursor. */
static int cursor_open(struct fshard *s)
{
	char path[LE_PATH_MAX];
	int rc;

	if (snprintf(path, sizeof path, "%s/" LE_FWD_NAME, s->dir) >=
	    (int)sizeof path)
		return -ENAMETOOLONG;
	s->cfd = le__open_in(path, LE_IN_SHARD, O_RDWR | O_CREAT, 0640);
	if (s->cfd < 0)
		return s->cfd;
	if (flock(s->cfd, LOCK_EX | LOCK_NB) < 0) {
		fprintf(stderr, "logengine %s: %s: another forwarder has it\n",
		        CMD, path);
		return LE_EBUSY;
	}
	rc = le__fwd_key(s->cfd, &s->id_key);
	if (rc < 0) {
		fprintf(stderr, "logengine %s: %s: message-id key: %s\n", CMD,
		        path, le_strerror(rc));
		return rc;
	}
	rc = le__fwd_read(s->dir, &s->cur);
	if (rc < 0) {
		/* New (or its first write torn): a cursor at 0 says a
		 * forwarder is here and has shipped nothing yet, so
		 * retention keeps what it has not shipped from now on. */
		memset(&s->cur, 0, sizeof s->cur);
		s->cur_dirty = 1;
	}
	/* Every origin's shipping starts at sequence 1: records retention
	 * deleted before any forwarder came are a gap like any other, so a
	 * collector knows where an origin begins. */
	s->read_seq = s->cur.next_seq ? s->cur.next_seq : 1;
	/* What a previous run had in flight may be in the stream under the
	 * ids we are about to use, cut differently: one at a time first. */
	s->probe = s->cur.next_seq > 0;
	return cursor_flush(NULL, s, 1);
}

/* ---- shards ---- */

/* Where --once stops: the end of the newest segment now. */
static void set_target(struct fshard *s)
{
	uint64_t *segs;
	size_t n;
	char path[LE_PATH_MAX];
	struct stat st;

	s->tgt_seg = 0;
	s->tgt_off = 0;
	if (le__seg_list(s->dir, &segs, &n) < 0 || n == 0) {
		free(segs);
		return;
	}
	s->tgt_seg = segs[n - 1];
	le__seg_path(path, sizeof path, s->dir, s->tgt_seg);
	if (stat(path, &st) == 0)
		s->tgt_off = (uint64_t)st.st_size;
	free(segs);
}

static int shard_add(struct fwd *f, uint32_t id)
{
	for (size_t i = 0; i < f->nsh; i++)
		if (f->sh[i].id == id)
			return 0;
	struct fshard *s = &f->sh[f->nsh];
	memset(s, 0, sizeof *s);
	s->id = id;
	s->cfd = -1;
	le__shard_dir(s->dir, sizeof s->dir, f->dir, id);
	int rc = cursor_open(s);
	if (rc < 0)
		return rc;
	set_target(s);
	s->wd = f->ino < 0 ? -1
	                   : inotify_add_watch(f->ino, s->dir, IN_MODIFY |
	                                       IN_CREATE | IN_MOVED_TO |
	                                       IN_DELETE);
	f->nsh++;
	return 0;
}

/* Every shard-NNN of DIR (again: new ones appear while we follow). */
static int shards_scan(struct fwd *f)
{
	uint32_t *ids;
	size_t n;
	int rc = le__shard_list(f->dir, &ids, &n);

	if (rc < 0) {
		fprintf(stderr, "logengine %s: %s: %s\n", CMD, f->dir,
		        le_strerror(rc));
		return rc;
	}
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = shard_add(f, ids[i]);
	free(ids);
	return rc;
}

/* ---- the loop ---- */

static int may_publish(struct fwd *f, const struct fshard *s, uint64_t now)
{
	if (s->rewind || (s->probe && s->pending) || now < s->retry_ms)
		return 0;
	/* inflight and the queue's ends change in on_ack, on libnats'
	 * thread: read them under the lock it takes */
	pthread_mutex_lock(&f->mu);
	int room = f->inflight + f->max_batch <= f->max_inflight &&
	           f->tail - f->head < QCAP;
	pthread_mutex_unlock(&f->mu);
	return room;
}

/* Publish what every shard has, while the window has room.  @return
 * messages published, or < 0. */
static int ship_all(struct fwd *f)
{
	int sent = 0, more = 1;
	uint64_t now = ship_mono_ms();

	while (more && !ship_stop) {
		more = 0;
		for (size_t i = 0; i < f->nsh; i++) {
			struct fshard *s = &f->sh[i];
			if (!may_publish(f, s, now))
				continue;
			int rc = ship_batch(f, s);
			if (rc < 0)
				return rc;
			sent += rc;
			more |= rc;
		}
	}
	return sent;
}

static int all_done(const struct fwd *f)
{
	for (size_t i = 0; i < f->nsh; i++) {
		const struct fshard *s = &f->sh[i];
		if (s->pending || s->rewind || !s->tail_seen ||
		    s->read_seq != (s->cur.next_seq ? s->cur.next_seq : 1))
			return 0;
	}
	return 1;
}

/* Drain inotify; new shard directories are taken in. */
static void read_events(struct fwd *f)
{
	char buf[4096] __attribute__((aligned(8)));
	ssize_t n;
	int rescan = 0;

	while ((n = read(f->ino, buf, sizeof buf)) > 0)
		for (char *p = buf; p < buf + n;) {
			struct inotify_event *ev = (struct inotify_event *)p;
			rescan |= ev->wd == f->dir_wd;
			p += sizeof *ev + ev->len;
		}
	if (rescan && !f->once && f->nsh < LE_MAX_SHARDS)
		shards_scan(f);
}

static int wait_ms(const struct fwd *f)
{
	uint64_t now = ship_mono_ms(), t = now + IDLE_MS;

	for (size_t i = 0; i < f->nsh; i++) {
		const struct fshard *s = &f->sh[i];
		if (s->cur_dirty && s->cur_ms + CURSOR_MS < t)
			t = s->cur_ms + CURSOR_MS;
		if (s->retry_ms > now && s->retry_ms < t)
			t = s->retry_ms;
	}
	return t > now ? (int)(t - now) : 0;
}

static void wait_event(struct fwd *f, int ms)
{
	struct pollfd p[2] = {{f->wake[0], POLLIN, 0}, {f->ino, POLLIN, 0}};
	char buf[256];

	int n = poll(p, 2, ms); /* a negative fd (no inotify) is skipped */

	/* New shard directories, without inotify: a look a period. */
	if (f->ino < 0 && !f->once && f->nsh < LE_MAX_SHARDS &&
	    ship_mono_ms() - f->scan_ms >= IDLE_MS) {
		f->scan_ms = ship_mono_ms();
		shards_scan(f);
	}
	if (n <= 0)
		return;
	if (p[0].revents)
		while (read(f->wake[0], buf, sizeof buf) > 0)
			;
	if (p[1].revents)
		read_events(f);
}

static int flush_cursors(struct fwd *f, int force)
{
	int rc = 0;
	for (size_t i = 0; i < f->nsh; i++)
		if (cursor_flush(f, &f->sh[i], force) < 0)
			rc = SHIP_EXIT_FAIL;
	return rc;
}

/* Until --once is done or a signal; then the acks of what is in flight
 * (bounded by the ack wait). */
static int run(struct fwd *f)
{
	uint64_t stop_by = 0;

	for (;;) {
		settle(f);
		rewind_idle(f);
		if (flush_cursors(f, 0) < 0)
			return SHIP_EXIT_FAIL;
		if (ship_stop) {
			if (!stop_by)
				stop_by = ship_mono_ms() + f->ack_wait_ms + 2000;
			if (f->head == f->tail || ship_mono_ms() > stop_by)
				break;
			wait_event(f, 50);
			continue;
		}
		int sent = ship_all(f);
		if (sent < 0)
			return SHIP_EXIT_FAIL;
		if (f->once && all_done(f))
			break;
		if (!sent)
			wait_event(f, wait_ms(f));
	}
	settle(f);
	return flush_cursors(f, 1) < 0 ? SHIP_EXIT_FAIL : 0;
}

/* ---- setup ---- */

static const char usage[] =
	"usage: logengine forward [OPTIONS] DIR\n"
	"\n"
	"Ship the records of every shard of DIR to a NATS JetStream stream,\n"
	"as they are stored (each frame's CRC checked as it is read), many\n"
	"per message, and follow the log as it grows.  Each shard's last\n"
	"acknowledged record is kept in DIR/shard-NNN/FORWARD; a restart\n"
	"goes on from there.\n"
	"\n"
	"  --nats URL              server(s), comma separated "
	"(nats://127.0.0.1:4222)\n"
	"  --stream NAME           stream (LOGS), created if missing\n"
	"  --subject SUBJ          subject, the host's token last: messages\n"
	"                          go to SUBJ.SHARD (logs.HOST, dots in HOST\n"
	"                          written as '~')\n"
	"  --host NAME             origin name (the host name)\n"
	"  --creds FILE            NATS credentials file, or\n"
	"  --user NAME --password-file FILE\n"
	"  --tls, --tls-ca FILE, --tls-cert FILE, --tls-key FILE\n"
	"  --max-batch-bytes N     message body limit (server max_payload - "
	"1 KiB)\n"
	"  --max-inflight-bytes N  unacknowledged bytes at most (16M)\n"
	"  --max-record-bytes N    largest record the log may hold (64K)\n"
	"  --ack-wait-ms N         a message not acknowledged by then is sent\n"
	"                          again (10000)\n"
	"  --replicas N            replicas of a stream it creates (1)\n"
	"  --once                  exit 0 once what DIR held at start is\n"
	"                          acknowledged\n"
	"  --verbose               a summary on stderr at the end\n"
	"\n"
	"Without --once it runs until SIGTERM or SIGINT, then waits for the\n"
	"acks of what is in flight and exits 0.\n"
	"exit status: 0 ok; 1 refused by the server, stream conflict, I/O "
	"error;\n2 usage error.\n";

/* --replicas 1..5 */
static int replicas_opt(const char *cmd, void *out, const char *v)
{
	int n = atoi(v);

	if (n < 1 || n > 5)
		return ship_usage(cmd, "--replicas: 1..5, not %s", v);
	*(int *)out = n;
	return 0;
}

static int parse(struct fwd *f, int argc, char **argv)
{
	const struct ship_optdef t[] = {
		{"--once", NULL, SHIP_FLAG, &f->once, NULL},
		{"--verbose", "-v", SHIP_FLAG, &f->verbose, NULL},
		{"--subject", NULL, SHIP_STR, &f->subject, NULL},
		{"--host", NULL, SHIP_STR, &f->host, NULL},
		{"--max-batch-bytes", NULL, SHIP_SIZE, &f->max_batch, NULL},
		{"--max-inflight-bytes", NULL, SHIP_SIZE, &f->max_inflight, NULL},
		{"--max-record-bytes", NULL, SHIP_SIZE, &f->max_record, NULL},
		{"--ack-wait-ms", NULL, SHIP_SIZE, &f->ack_wait_ms, NULL},
		{"--replicas", NULL, SHIP_CALL, &f->replicas, replicas_opt},
	};

	return ship_parse(CMD, usage, argc, argv, t, sizeof t / sizeof t[0],
	                  &f->conn, &f->dir);
}

/* Host name and subject: --host or the machine's; the subject is
 * logs.HOSTTOKEN (le__host_token: dots written as '~'), or --subject,
 * whose last token must be that token: the collector takes the origin
 * from it.  Messages go to SUBJECT.SHARD. */
static int names(struct fwd *f)
{
	char tok[LE_HOST_MAX + 1];

	if (!f->host) {
		if (gethostname(f->host_buf, sizeof f->host_buf) < 0)
			snprintf(f->host_buf, sizeof f->host_buf, "localhost");
		f->host_buf[sizeof f->host_buf - 1] = '\0';
		f->host = f->host_buf;
	}
	if (!le__host_valid(f->host, strlen(f->host))) {
		fprintf(stderr, "logengine %s: host name '%s': use 1 to %d of "
		        "A-Z a-z 0-9 . _ - (--host NAME)\n", CMD, f->host,
		        LE_HOST_MAX);
		return -1;
	}
	le__host_token(tok, sizeof tok, f->host);
	if (!f->subject) {
		snprintf(f->subject_buf, sizeof f->subject_buf, "logs.%s", tok);
		f->subject = f->subject_buf;
	}
	const char *last = strrchr(f->subject, '.');
	if (!last || strcmp(last + 1, tok) != 0 || strlen(f->subject) > 256 ||
	    strpbrk(f->subject, "*> \t\r\n") || strstr(f->subject, "..") ||
	    f->subject[0] == '.') {
		fprintf(stderr, "logengine %s: --subject '%s': must be "
		        "PREFIX.%s, the host's token last (the collector takes "
		        "the origin from it; no wildcard, no empty token)\n",
		        CMD, f->subject, tok);
		return -1;
	}
	return 0;
}

/* The limits against each other and the server's max_payload. */
static int limits(struct fwd *f)
{
	uint64_t mp = (uint64_t)natsConnection_GetMaxPayload(f->nc);

	if (!f->max_batch)
		f->max_batch = mp > 2 * LE_SHIP_HDR_ROOM ? mp - LE_SHIP_HDR_ROOM
		                                         : mp / 2;
	if (f->max_batch + LE_SHIP_HDR_ROOM > mp) {
		fprintf(stderr, "logengine %s: --max-batch-bytes %" PRIu64
		        " and %d bytes of headers exceed the server's "
		        "max_payload %" PRIu64 "\n", CMD, f->max_batch,
		        LE_SHIP_HDR_ROOM, mp);
		return SHIP_EXIT_USAGE;
	}
	if (f->max_record + LE_FRAME_FIXED_MAX > f->max_batch) {
		fprintf(stderr, "logengine %s: --max-record-bytes %" PRIu64
		        " (a stored record of up to %" PRIu64 " bytes) does not "
		        "fit --max-batch-bytes %" PRIu64 "\n", CMD, f->max_record,
		        f->max_record + LE_FRAME_FIXED_MAX, f->max_batch);
		return SHIP_EXIT_USAGE;
	}
	if (f->max_inflight < f->max_batch) {
		fprintf(stderr, "logengine %s: --max-inflight-bytes %" PRIu64
		        " is below --max-batch-bytes %" PRIu64 "\n", CMD,
		        f->max_inflight, f->max_batch);
		return SHIP_EXIT_USAGE;
	}
	f->batch = malloc(f->max_batch);
	f->relinked = malloc(f->max_batch + LE_DESC_MAX);
	return f->batch && f->relinked ? 0 : SHIP_EXIT_FAIL;
}

static int start(struct fwd *f)
{
	jsOptions jo;
	int status;

	f->nc = ship_connect(CMD, &f->conn, f->wake[0], &status);
	if (!f->nc)
		return status;
	status = limits(f);
	if (status)
		return status;
	jsOptions_Init(&jo);
	jo.PublishAsync.AckHandler = on_ack;
	jo.PublishAsync.AckHandlerClosure = f;
	jo.PublishAsync.MaxPending = QCAP * 2; /* our window bounds it */
	if (natsConnection_JetStream(&f->js, f->nc, &jo) != NATS_OK) {
		fprintf(stderr, "logengine %s: JetStream: %s\n", CMD,
		        nats_GetLastError(NULL));
		return SHIP_EXIT_FAIL;
	}
	char subj[320]; /* what shard 0 publishes on stands for them all */
	snprintf(subj, sizeof subj, "%s.0", f->subject);
	return ship_stream(CMD, f->js, f->conn.stream, subj, f->replicas,
	                   (int64_t)(f->max_batch + LE_SHIP_HDR_ROOM), 1,
	                   f->wake[0]);
}

static void summary(const struct fwd *f)
{
	fprintf(stderr, "logengine %s: %s: %" PRIu64 " records, %" PRIu64
	        " bytes in %" PRIu64 " messages; %" PRIu64 " acknowledged, %"
	        PRIu64 " duplicates, %" PRIu64 " resends from a cursor, %"
	        PRIu64 " records lost before shipping, %" PRIu64
	        " records too large; peak RSS %ld KiB\n", CMD, f->dir,
	        f->records, f->bytes, f->msgs, f->acked, f->dups, f->rewinds,
	        f->lost, f->oversize, ship_peak_rss_kib());
}

static void cleanup(struct fwd *f)
{
	for (size_t i = 0; i < f->nsh; i++) {
		spool_close(&f->sh[i]);
		le__dcache_free(&f->sh[i].dc);
		if (f->sh[i].cfd >= 0)
			le__close(f->sh[i].cfd);
	}
	if (f->js)
		jsCtx_Destroy(f->js);
	if (f->nc)
		natsConnection_Destroy(f->nc);
	nats_Close(); /* libnats's own threads and memory */
	if (f->ino >= 0)
		close(f->ino);
	for (int i = 0; i < 2; i++)
		if (f->wake[i] >= 0)
			close(f->wake[i]);
	free(f->batch);
	free(f->relinked);
	le__relink_free(&f->rl);
	free(f->sh);
	pthread_mutex_destroy(&f->mu);
}

int cmd_forward(int argc, char **argv)
{
	static struct fwd f; /* the window is large: not on the stack */
	int status;

	memset(&f, 0, sizeof f);
	f.conn.url = SHIP_DEFAULT_URL;
	f.conn.stream = SHIP_DEFAULT_STREAM;
	f.max_inflight = DEFAULT_INFLIGHT;
	f.max_record = DEFAULT_MAX_RECORD;
	f.ack_wait_ms = DEFAULT_ACK_WAIT_MS;
	f.replicas = 1;
	f.ino = f.wake[0] = f.wake[1] = -1;
	pthread_mutex_init(&f.mu, NULL);
	status = parse(&f, argc, argv);
	if (status)
		return status > 0 ? 0 : SHIP_EXIT_USAGE;
	if (names(&f) < 0 || ship_check_conn(CMD, &f.conn) < 0)
		return SHIP_EXIT_USAGE;
	if (f.max_batch && f.max_record + LE_FRAME_FIXED_MAX > f.max_batch) {
		fprintf(stderr, "logengine %s: --max-record-bytes %" PRIu64
		        " (a stored record of up to %" PRIu64 " bytes) does not "
		        "fit --max-batch-bytes %" PRIu64 "\n", CMD, f.max_record,
		        f.max_record + LE_FRAME_FIXED_MAX, f.max_batch);
		return SHIP_EXIT_USAGE;
	}
	if (pipe2(f.wake, O_NONBLOCK | O_CLOEXEC) < 0 ||
	    !(f.sh = calloc(LE_MAX_SHARDS, sizeof *f.sh))) {
		fprintf(stderr, "logengine %s: %s\n", CMD, strerror(errno));
		cleanup(&f);
		return SHIP_EXIT_FAIL;
	}
	/* inotify only wakes the follower sooner: --once needs none, and
	 * a user out of instances (fs.inotify.max_user_instances, 128 by
	 * default) follows by looking every IDLE_MS instead. */
	if (!f.once && (f.ino = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) < 0)
		fprintf(stderr, "logengine %s: no inotify instance (%s): "
		        "looking for new records every %d ms instead\n", CMD,
		        strerror(errno), IDLE_MS);
	ship_malloc_tune();
	ship_signals(f.wake[1]);
	f.dir_wd = f.ino < 0 ? -1 : inotify_add_watch(f.ino, f.dir,
	                                              IN_CREATE | IN_MOVED_TO);
	status = shards_scan(&f) < 0 ? SHIP_EXIT_FAIL : 0;
	if (status == 0)
		status = start(&f);
	if (status == 0 && f.nc)
		status = run(&f);
	if (f.verbose)
		summary(&f);
	cleanup(&f);
	return ship_exit(status);
}
#endif
