/*
 * forward.c -- `logengine forward DIR`: ship the frames of every shard of
 * a log directory to a NATS JetStream stream, as they are stored.
 *
 *   shard-NNN --spool (le_spool_next: frames after the cursor, each CRC
 *     checked, deferred ones relinked)--> batch <= --max-batch-bytes
 *       --> message (headers: docs/INTERFACES.md) --> js_PublishMsgAsync
 *   window: <= --max-inflight-bytes and QCAP messages awaiting a PubAck
 *   ack handler (a libnats thread): marks the message's entry, wakes us
 *   settle (here): per shard, in publish order, acknowledged messages move
 *     the cursor (le_spool_ack); it goes to shard-NNN/FORWARD
 *     (le_spool_commit) at most every CURSOR_MS
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
 * Memory: one spool per shard (a scanner window and a batch), messages
 * in flight (the window), nothing that grows with the backlog.  Files: FORWARD, one per shard, written in
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
#include <sys/inotify.h>
#include <sys/random.h>
#include <unistd.h>

#include "logengine.h"

#define CMD "forward"
/* What a message's headers may take on top of a body of --max-batch-bytes
 * (docs/INTERFACES.md, "Message"). */
#define SHIP_HDR_ROOM 1024
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
	char dir[4200];      /* DIR/shard-NNN, for messages */
	int wd;              /* inotify watch */
	le_spool *sp;        /* its frames and its FORWARD cursor (locked) */
	/* cursor */
	uint64_t id_key;     /* in every Nats-Msg-Id (the spool's key) */
	unsigned salted;     /* another publisher took one of our ids: each
	                        id gets a random salt (dup_last) */
	uint64_t next_seq;   /* the acknowledged cursor: records below are
	                        in the stream (or reported lost) */
	int cur_dirty;
	uint64_t cur_ms;     /* when last written */
	/* reading */
	uint64_t read_seq;   /* next record to publish */
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
	int blocked;         /* settle(): an earlier entry is not OK */
};

/* A message's body and where it was read, from a spool event. */
struct body {
	const unsigned char *p;
	uint64_t len;
	uint32_t fields, crc;
	uint64_t pos;        /* Le-Pos: offset of its first frame */
	uint64_t ts;         /* Le-Ts of a gap message */
	uint64_t end_seg, end_off; /* where the record after it is */
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
	/* the window, guarded by mu (the ack handler runs on a libnats
	 * thread) */
	pthread_mutex_t mu;
	struct entry q[QCAP];
	uint64_t head, tail;  /* entries [head, tail) in publish order */
	uint64_t inflight;    /* bytes of pending entries */
	natsMsg *sending;     /* inside js_PublishMsgAsync now, or NULL */
	int sending_done;     /* its ack handler ran meanwhile: ours to free */
	/* counters */
	uint64_t msgs, records, bytes, acked, dups, rewinds, lost, oversize;
};

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
                           const struct entry *e, const struct body *b)
{
	char subj[320];

	/* One subject per origin (host token, shard): the collector takes
	 * the origin from it, and the server's permissions decide who may
	 * publish there. */
	snprintf(subj, sizeof subj, "%s.%" PRIu32, f->subject, s->id);
	natsStatus st = natsMsg_Create(m, subj, NULL, (const char *)b->p,
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
	set_hdr(*m, "Le-Fields", "%" PRIu32, b->fields);
	if (b->p && e->bytes)
		set_hdr(*m, "Le-Pos", "%" PRIu64, b->pos);
	if (!(b->fields & LE_FIELD_CRC) && e->bytes)
		set_hdr(*m, "Le-Body-Crc", "%08" PRIx32, b->crc);
	if (e->gap) {
		set_hdr(*m, "Le-Gap", "%" PRIu64, e->gap);
		set_hdr(*m, "Le-Ts", "%" PRIu64, b->ts);
	}
	return NATS_OK;
}

/*
 * js_PublishMsgAsync, with m kept alive until it returns.  The call
 * registers m (and starts its MaxWait timer) before it writes m to the
 * socket, and writes a message larger than libnats's buffer straight
 * from m's bytes, waiting while the socket is full (a slow or stopped
 * server).  If the wait outlasts MaxWait, libnats's timer reports m
 * timed out and on_ack runs on its thread during the write: freeing m
 * there would pull the bytes from under the writer (a use after free;
 * a crash, or another message's bytes sent under m's headers).  So
 * on_ack leaves f->sending to us, and we free it once the call is over.
 * @return the call's status; on failure m is still the caller's.
 */
static natsStatus publish_async(struct fwd *f, natsMsg **m,
                                jsPubOptions *po)
{
	natsMsg *sent = *m;

	pthread_mutex_lock(&f->mu);
	f->sending = sent;
	f->sending_done = 0;
	pthread_mutex_unlock(&f->mu);
	natsStatus st = js_PublishMsgAsync(f->js, m, po);
	pthread_mutex_lock(&f->mu);
	int done = f->sending_done;
	f->sending = NULL;
	pthread_mutex_unlock(&f->mu);
	/* The handler ran only if the library took m (st is NATS_OK, *m
	 * NULL); *m cleared all the same, so m is freed once. */
	if (done) {
		natsMsg_Destroy(sent);
		*m = NULL;
	}
	return st;
}

/* Publish body b as records first..last of s (a gap message when gap).
 * The entry is in the window before the call, so an ack that comes back
 * at once finds it. */
static int publish(struct fwd *f, struct fshard *s, uint64_t first,
                   uint64_t last, const struct body *b, uint64_t gap)
{
	natsMsg *m = NULL;
	jsPubOptions po;
	uint64_t bytes = b->len;
	struct entry e = {
		.si = (uint32_t)(s - f->sh), .state = E_PENDING,
		.first = first, .last = last, .gap = gap, .bytes = bytes,
		.end_seg = b->end_seg, .end_off = b->end_off,
	};
	natsStatus st = make_msg(f, s, &m, &e, b);

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
	st = publish_async(f, &m, &po);
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
	/* Still being written by publish_async: it frees m when done. */
	int keep = m == f->sending;
	if (keep)
		f->sending_done = 1;
	pthread_mutex_unlock(&f->mu);
	if (!keep)
		natsMsg_Destroy(m);
	if (write(f->wake[1], &b, 1) < 0) {
		/* full: the main loop is awake anyway */
	}
}

/* ---- batches ---- */

static struct body event_body(const le_spool_batch *ev)
{
	struct body b = {
		.p = ev->frames, .len = ev->len, .fields = ev->fields,
		.crc = ev->crc, .pos = ev->pos, .ts = ev->ts_ns,
		.end_seg = ev->end_segment, .end_off = ev->end_offset,
	};
	return b;
}

/* Report a frame no message can carry, and ship a gap for it. */
static int oversize(struct fwd *f, struct fshard *s, const le_spool_batch *ev)
{
	struct body b = event_body(ev);

	fprintf(stderr, "logengine %s: %s/%016" PRIx64 ".seg: offset %" PRIu64
	        ": record %" PRIu64 " is %" PRIu64 " bytes stored, more than "
	        "--max-batch-bytes %" PRIu64 ": not shipped (a gap marker "
	        "takes its place)\n", CMD, s->dir, ev->segment, ev->offset,
	        ev->first, ev->size, f->max_batch);
	f->oversize++;
	return publish(f, s, ev->first, ev->first, &b, 1);
}

/* Damage the spool stepped over: the records in it come as a gap. */
static void damage(const struct fshard *s, const le_spool_batch *ev)
{
	fprintf(stderr, "logengine %s: %s/%016" PRIx64 ".seg: offset %" PRIu64
	        ": %s; %s\n", CMD, s->dir, ev->segment, ev->offset, ev->why,
	        ev->resume ? "skipped to the next valid frame"
	                   : "rest of the segment skipped");
}

/*
 * Read one batch of shard s and publish it: frames, or a gap message for
 * records gone or too large.  @return 1 published, 0 nothing to publish
 * now, < 0 error.
 */
static int ship_batch(struct fwd *f, struct fshard *s)
{
	le_spool_batch ev;
	struct body b;

	for (;;) {
		int rc = le_spool_next(s->sp, (size_t)f->max_batch, 0, &ev);
		if (rc < 0) {
			fprintf(stderr, "logengine %s: %s: %s\n", CMD, s->dir,
			        le_strerror(rc));
			return rc;
		}
		b = event_body(&ev);
		switch (rc) {
		case LE_SPOOL_DAMAGE:
			damage(s, &ev);
			continue;
		case LE_SPOOL_ROTATED:
			continue;
		case LE_SPOOL_GAP:
			return publish(f, s, ev.first, ev.first + ev.count - 1,
			               &b, ev.count) < 0 ? -1 : 1;
		case LE_SPOOL_TOO_BIG:
			return oversize(f, s, &ev) < 0 ? -1 : 1;
		case LE_SPOOL_FRAMES:
			s->tail_seen = 0;
			f->records += ev.count;
			f->bytes += ev.len;
			return publish(f, s, ev.first, ev.first + ev.count - 1,
			               &b, 0) < 0 ? -1 : 1;
		default: /* IDLE, END */
			s->tail_seen = 1;
			return 0;
		}
	}
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
	if (last + 1 > s->next_seq || e->gap) {
		le_spool_ack(s->sp, last + 1, last == e->last ? e->end_seg : 0,
		             last == e->last ? e->end_off : 0, e->gap);
		s->cur_dirty = 1;
	}
	if (last + 1 > s->next_seq)
		s->next_seq = last + 1;
	f->lost += e->gap;
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
		        s->next_seq);
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
				        CMD, s->id, e->err, s->next_seq);
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
	le_spool_rewind(s->sp);
	s->read_seq = s->next_seq ? s->next_seq : 1;
	s->tail_seen = 0; /* what was read past the cursor goes again */
}

static void rewind_idle(struct fwd *f)
{
	for (size_t i = 0; i < f->nsh; i++) {
		struct fshard *s = &f->sh[i];
		pthread_mutex_lock(&f->mu);
		unsigned awaiting = s->awaiting;
		pthread_mutex_unlock(&f->mu);
		uint64_t at = s->next_seq ? s->next_seq : 1;
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
	int rc = le_spool_commit(s->sp);
	if (rc < 0) {
		fprintf(stderr, "logengine %s: %s/FORWARD: %s\n", CMD, s->dir,
		        le_strerror(rc));
		return rc;
	}
	(void)f;
	s->cur_dirty = 0;
	s->cur_ms = now;
	return 0;
}

/* Open shard s's spool: its FORWARD file locked, the cursor read. */
static int cursor_open(struct fwd *f, struct fshard *s)
{
	le_spool_cursor c;
	int rc = le_spool_open(&s->sp, f->dir, s->id,
	                       f->once ? LE_SPOOL_ONCE : 0);

	if (rc == LE_EBUSY)
		fprintf(stderr, "logengine %s: %s/FORWARD: another forwarder "
		        "has it\n", CMD, s->dir);
	else if (rc < 0 && le_errmsg()[0]) /* names the kind of file */
		fprintf(stderr, "logengine %s: %s: %s\n", CMD, f->dir,
		        le_errmsg());
	else if (rc < 0)
		fprintf(stderr, "logengine %s: %s/FORWARD: %s\n", CMD, s->dir,
		        le_strerror(rc));
	if (rc < 0)
		return rc;
	le_spool_cursor_get(s->sp, &c);
	s->id_key = c.key;
	s->next_seq = c.next_seq;
	s->cur_dirty = 1; /* a new cursor is written at once */
	/* Every origin's shipping starts at sequence 1 (le_spool_next). */
	s->read_seq = s->next_seq ? s->next_seq : 1;
	/* What a previous run had in flight may be in the stream under the
	 * ids we are about to use, cut differently: one at a time first. */
	s->probe = s->next_seq > 0;
	return cursor_flush(f, s, 1);
}

/* ---- shards ---- */

static int shard_add(struct fwd *f, uint32_t id)
{
	for (size_t i = 0; i < f->nsh; i++)
		if (f->sh[i].id == id)
			return 0;
	struct fshard *s = &f->sh[f->nsh];
	memset(s, 0, sizeof *s);
	s->id = id;
	snprintf(s->dir, sizeof s->dir, "%s/shard-%03" PRIu32, f->dir, id);
	int rc = cursor_open(f, s);
	if (rc < 0) {
		le_spool_close(s->sp);
		return rc;
	}
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
	unsigned ids[LE_MAX_SHARDS];
	int rc = le_spool_shards(f->dir, ids, LE_MAX_SHARDS);

	if (rc < 0) {
		fprintf(stderr, "logengine %s: %s: %s\n", CMD, f->dir,
		        le_strerror(rc));
		return rc;
	}
	size_t n = (size_t)rc < LE_MAX_SHARDS ? (size_t)rc : LE_MAX_SHARDS;
	rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = shard_add(f, ids[i]);
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
		    s->read_seq != (s->next_seq ? s->next_seq : 1))
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
 * logs.HOSTTOKEN (le_spool_host_token: dots written as '~'), or --subject,
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
	if (!le_spool_host_token(tok, sizeof tok, f->host)) {
		fprintf(stderr, "logengine %s: host name '%s': use 1 to %d of "
		        "A-Z a-z 0-9 . _ - (--host NAME)\n", CMD, f->host,
		        LE_HOST_MAX);
		return -1;
	}
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
		f->max_batch = mp > 2 * SHIP_HDR_ROOM ? mp - SHIP_HDR_ROOM
		                                         : mp / 2;
	if (f->max_batch + SHIP_HDR_ROOM > mp) {
		fprintf(stderr, "logengine %s: --max-batch-bytes %" PRIu64
		        " and %d bytes of headers exceed the server's "
		        "max_payload %" PRIu64 "\n", CMD, f->max_batch,
		        SHIP_HDR_ROOM, mp);
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
	return 0;
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
	                   (int64_t)(f->max_batch + SHIP_HDR_ROOM), 1,
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
	for (size_t i = 0; i < f->nsh; i++)
		le_spool_close(f->sh[i].sp);
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
