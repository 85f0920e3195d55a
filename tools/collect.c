/*
 * collect.c -- `logengine collect DIR`: a durable JetStream pull consumer
 * that stores what forwarders ship in a store with one shard directory
 * per origin (host, shard), frames as they were received: NATS glue over
 * the library's collector interface (le_collector_*, logengine.h;
 * docs/INTERFACES.md, "Collector store"), which checks each message and
 * stores what its origin does not have yet.
 *
 *   fetch (<= --fetch-bytes) --> each message: headers and subject, then
 *   le_collector_append: every frame checked (one bad frame rejects the
 *   message whole), fenced by the origin's next sequence, appended -->
 *   le_collector_sync (--sync batch) --> ack
 *
 * What a message's range [first, last] is against the origin's next
 * expected sequence E (from the store itself, so a restart knows it):
 *
 *   last < E            already stored (a redelivery, a resend): ack;
 *                       but records a marker claimed were lost (a gap
 *                       claim) and that come now are stored, in the
 *                       origin's late directory ("gap claim
 *                       contradicted"): a marker never erases a record
 *   first <= E <= last  store E..last (and, as above, what of first..E-1
 *                       a claim holds): ack
 *   first > E           a hole: another message is still to come (the
 *                       forwarder resends what failed, and a killed
 *                       collector's unacknowledged messages come back
 *                       after the ack wait), later in the stream: hold
 *                       it, unacknowledged (its ack timer reset while
 *                       it waits), and go on fetching; when the hole
 *                       fills, the held messages are stored in order.
 *                       Held messages are bounded (HOLD_MSGS, and
 *                       --fetch-bytes of bodies); past that a hole's
 *                       message is nakked with a delay of one ack wait
 *                       (a short delay would fill every fetch with the
 *                       same messages, and the missing one never come);
 *                       once every message the consumer has delivered
 *                       and not had acknowledged is in our hands (none
 *                       is pending elsewhere, or still to come again
 *                       after its ack wait: a message delivered into a
 *                       fetch that had already ended comes back behind
 *                       later ones), and --gap-wait-ms has passed
 *                       since, store a marker "N records missing from
 *                       the stream" and take it
 *
 * Memory: one fetch's messages and the held ones, each bounded by
 * --fetch-bytes; nothing grows with the stream.
 */
#define _GNU_SOURCE
#include "ship_cli.h"

#ifndef LE_NO_NATS
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "logengine.h"

#define CMD "collect"
#define FETCH_MSGS 256
#define FETCH_EXPIRE_MS 500
#define MAX_ACK_PENDING 20000
#define DEFAULT_DURABLE "logengine-collect"
#define DEFAULT_FILTER "logs.>"
#define DEFAULT_ACK_WAIT_MS 10000
#define DEFAULT_GAP_WAIT_MS 60000
#define DEFAULT_OUTAGE_MS 60000    /* --outage-deadline-ms with --once */
#define PEER_HEARD_MS 5000         /* a consumer's replica still up */
#define ASK_POLL_MS 200            /* the consumer asked, at most */
#define HOLD_MSGS (2 * FETCH_MSGS) /* messages held behind a hole */

enum { ACT_ACK, ACT_TERM, ACT_NAK, ACT_HOLD, ACT_KEPT };

/* Why a message was refused: each counted, and the token of the
 * dead-letter subject its copy goes to (DEAD.TOKEN). */
enum reason {
	R_HEADERS,  /* headers missing or malformed */
	R_BODY,     /* the body does not match its headers, a bad frame */
	R_FORGED,   /* the headers name another origin than the subject */
	R_ORIGINS,  /* a new origin past --max-origins */
	R_GAP,      /* a gap claim out of bounds */
	R_COUNT
};
static const char *const reason_token[R_COUNT] = {
	"malformed", "damaged", "forged", "origin-limit", "gap-claim",
};

#define DEFAULT_DEAD "logs-dead"
#define DEAD_HDR_MAX 512 /* bytes of a header value copied, at most */
#define DEAD_ROOM 8192   /* headers of a dead-letter copy, at most */
#define DEAD_BACKOFF_MAX_MS 60000 /* between tries of a failing copy */
#define DEAD_KEEP_MAX 1000 /* refused messages left for a later copy */

/* The reason a refusal of the store counts under. */
static const enum reason refusal_reason[] = {
	[LE_COLLECT_MALFORMED] = R_HEADERS,
	[LE_COLLECT_DAMAGED] = R_BODY,
	[LE_COLLECT_GAP_CLAIM] = R_GAP,
	[LE_COLLECT_ORIGIN_LIMIT] = R_ORIGINS,
};

/* The next fetch, made on a thread of its own while the main thread
 * stores the last one: the server's work and the transfer overlap the
 * checks, writes and sync.  One list ahead, at most. */
struct ahead {
	pthread_t t;
	int running;
	pthread_mutex_t mu;
	pthread_cond_t cv;    /* the slot filled or emptied, or stop */
	int full;
	_Atomic int stop;     /* also read, unlocked, by a failing fetch */
	natsMsgList list;     /* the slot */
	int asked;            /* the batch it was fetched with */
	int batch;            /* the next request, set by the main thread */
	uint64_t wait_ms;     /* how long it may wait for a first message */
	_Atomic uint64_t lost_ms; /* out.since, for the main thread */
	_Atomic int fatal;    /* our consumer could not be made again */
};

/* A message held behind a hole of its origin: checked, not stored. */
struct held {
	natsMsg *m;
	le_collector_msg h;   /* its body is m's */
	uint64_t bytes, sseq; /* body bytes, stream sequence */
};

struct col {
	struct ship_conn conn;
	const char *dir, *subject, *durable;
	int subject_tokens;      /* of a message's subject: --subject's
	                            tokens before its '>', then HOSTTOKEN
	                            and SHARD */
	const char *dead;        /* --dead-letter: subject prefix */
	const char *dead_stream; /* --dead-letter-stream */
	char dead_stream_buf[128];
	uint64_t dead_bytes;     /* --dead-letter-bytes: that stream's size */
	int dead_said;           /* a failing dead-letter copy was reported */
	uint64_t dead_retry_ms;  /* no copy tried before (mono ms) */
	uint64_t dead_backoff_ms; /* since the last failed copy */
	uint64_t dead_fail_since; /* copies fail since (mono ms; 0: they do
	                            not) */
	uint64_t dead_kept;      /* refused messages left in the stream for a
	                            later copy since copies fail, counted by
	                            the highest stream sequence (a message
	                            coming again is not counted again) */
	uint64_t dead_kept_seq;  /* that highest stream sequence */
	uint64_t dead_dropped;   /* refused, dropped without a copy */
	uint64_t segment_bytes, fetch_bytes, ack_wait_ms, gap_wait_ms;
	uint64_t max_origins; /* le_collector_opts.max_origins */
	uint64_t outage_ms;  /* --outage-deadline-ms; 0: never give up */
	int sync, once, verbose;
	int clustered;       /* [start()] the stream's servers are a cluster:
	                        its consumer has a leader when it runs */
	natsConnection *nc;
	jsCtx *js;
	natsSubscription *sub; /* [start(), then the fetching thread] made
	                          again when the server lost our consumer */
	struct ship_outage out; /* [same] the stream out of reach since */
	uint64_t quiet_ms;    /* [the fetching thread] when a fetch last
	                         brought messages or the consumer answered */
	le_collector *st;
	int wake[2];
	uint64_t max_msg;    /* largest message seen (max_payload at first) */
	uint64_t recent_msg; /* largest of the last fetch that brought any
	                        (max_payload at first) */
	int no_max_bytes;    /* the server ignores a fetch's byte limit */
	uint64_t asked_ms;   /* when the consumer was last asked whether all
	                        it has pending is in our hands */
	int asked_yes;       /* and its answer */
	uint64_t progress_ms; /* when the fetch being handled came, or its
	                         messages' ack timers were last reset */
	struct held hold[HOLD_MSGS];
	int nhold;
	uint64_t hold_bytes, hold_ms; /* bodies held; ack timers reset */
	natsMsg *done[HOLD_MSGS];     /* held ones placed: acked after sync */
	int ndone;
	natsMsg **cur;                /* the fetch being handled */
	int ncur;
	struct ahead ah;
	int short_fetch;              /* the last fetch brought less than
	                                 it asked for */
	/* counters */
	uint64_t msgs, records, bytes, dups, rejected, held, lost, missing;
	uint64_t refused[R_COUNT]; /* rejected, by reason */
	uint64_t dead_copies;      /* copies in the dead-letter stream */
	uint64_t contradicted; /* records stored inside a gap claim */
};


static int hdr_u64(natsMsg *m, const char *k, uint64_t *v, int need)
{
	const char *s = NULL;
	char *end;

	if (natsMsgHeader_Get(m, k, &s) != NATS_OK || !s)
		return need ? -1 : 0;
	errno = 0;
	*v = strtoull(s, &end, 10);
	return (errno || end == s || *end || s[0] == '-') ? -1 : 1;
}

/* The headers of m (docs/INTERFACES.md, "Message") and its body, in h.
 * @return 0, or -1 with *why naming the header. */
static int parse_hdrs(natsMsg *m, le_collector_msg *h, const char **why)
{
	const char *seq = NULL, *crc = NULL;
	uint64_t v;

	memset(h, 0, sizeof h[0]);
	h->body = natsMsg_GetData(m);
	h->len = (size_t)natsMsg_GetDataLength(m);
	if (hdr_u64(m, "Le-Format", &v, 1) < 0 || v != LE_SHIP_FORMAT)
		return *why = "header Le-Format missing or not 1", -1;
	if (natsMsgHeader_Get(m, "Le-Host", &h->host) != NATS_OK || !h->host ||
	    !le_collector_host_valid(h->host, strlen(h->host)))
		return *why = "header Le-Host missing or not a host name", -1;
	/* An engine has LE_MAX_SHARDS shards at most: a host claiming more
	 * would only be filling the store's origin limit. */
	if (hdr_u64(m, "Le-Shard", &v, 1) < 0 || v >= LE_MAX_SHARDS)
		return *why = "header Le-Shard missing or above 255 (an "
		              "engine's shards)", -1;
	h->shard = (uint32_t)v;
	if (natsMsgHeader_Get(m, "Le-Seq", &seq) != NATS_OK || !seq ||
	    sscanf(seq, "%" SCNu64 "-%" SCNu64, &h->first, &h->last) != 2 ||
	    h->first == 0 || h->last < h->first)
		return *why = "header Le-Seq missing or not FIRST-LAST", -1;
	if (h->last > LE_SHIP_SEQ_MAX)
		return *why = "header Le-Seq beyond 2^62, the largest sequence an "
		              "origin may have", -1;
	if (hdr_u64(m, "Le-Fields", &v, 1) < 0 || (v & ~(uint64_t)LE_FIELD_ALL))
		return *why = "header Le-Fields missing or unknown bits", -1;
	h->fields = (uint32_t)v;
	if (hdr_u64(m, "Le-Gap", &h->gap, 0) < 0 ||
	    hdr_u64(m, "Le-Ts", &h->ts, 0) < 0)
		return *why = "header Le-Gap or Le-Ts not a number", -1;
	int has_pos = hdr_u64(m, "Le-Pos", &h->pos, 0);
	if (has_pos < 0)
		return *why = "header Le-Pos not a number", -1;
	if (!has_pos)
		h->pos = UINT64_MAX;
	if (natsMsgHeader_Get(m, "Le-Body-Crc", &crc) == NATS_OK && crc) {
		char *end;
		h->crc = (uint32_t)strtoul(crc, &end, 16);
		if (*end || end == crc)
			return *why = "header Le-Body-Crc not hexadecimal", -1;
		h->has_crc = 1;
	}
	return 0;
}

/* The stream sequence of m, for reports (0 when unknown). */
static uint64_t stream_seq(natsMsg *m)
{
	jsMsgMetaData *md = NULL;
	uint64_t seq = 0;

	if (natsMsg_GetMetaData(&md, m) == NATS_OK) {
		seq = md->Sequence.Stream;
		jsMsgMetaData_Destroy(md);
	}
	return seq;
}

/* Create the dead-letter stream: file storage, its subjects DEAD.>,
 * bounded by --dead-letter-bytes (the oldest copies go first), so a
 * flood of bad messages costs the server a fixed amount of disk. */
static natsStatus dead_stream_create(struct col *c)
{
	jsStreamConfig sc;
	jsStreamInfo *si = NULL;
	jsErrCode je = 0;
	char pattern[300];
	const char *subjects[1] = {pattern};
	int replicas = 1;

	/* As many replicas as the stream it takes from: a copy is as safe
	 * as the message it replaces. */
	if (js_GetStreamInfo(&si, c->js, c->conn.stream, NULL, &je) ==
	    NATS_OK && si->Config->Replicas > 0)
		replicas = (int)si->Config->Replicas;
	jsStreamInfo_Destroy(si);
	si = NULL;
	snprintf(pattern, sizeof pattern, "%s.>", c->dead);
	jsStreamConfig_Init(&sc);
	sc.Replicas = replicas;
	sc.Name = c->dead_stream;
	sc.Subjects = subjects;
	sc.SubjectsLen = 1;
	sc.Storage = js_FileStorage;
	sc.MaxBytes = (int64_t)c->dead_bytes;
	sc.Discard = js_DiscardOld;
	natsStatus s = js_AddStream(&si, c->js, &sc, NULL, &je);
	jsStreamInfo_Destroy(si);
	return s;
}

static void dead_hdr(natsMsg *d, const char *k, const char *v)
{
	char buf[DEAD_HDR_MAX + 1];
	size_t n = strnlen(v, DEAD_HDR_MAX);

	memcpy(buf, v, n); /* a sender's header may be long: cut it */
	buf[n] = '\0';
	natsMsgHeader_Set(d, k, buf);
}

/* The copy of refused message m for the dead-letter stream: its body
 * (cut to what a message may carry beside the headers), the documented
 * headers it had (each cut to DEAD_HDR_MAX bytes), and why. */
static natsStatus dead_msg(struct col *c, natsMsg *m, enum reason r,
                           const char *why, uint64_t sseq, natsMsg **out)
{
	static const char *const keep[] = {
		"Nats-Msg-Id", "Le-Format", "Le-Host", "Le-Shard", "Le-Seq",
		"Le-Fields", "Le-Body-Crc", "Le-Pos", "Le-Gap", "Le-Ts",
	};
	char subj[320], id[64];
	int len = natsMsg_GetDataLength(m);
	int64_t room = natsConnection_GetMaxPayload(c->nc) - DEAD_ROOM;

	snprintf(subj, sizeof subj, "%s.%s", c->dead, reason_token[r]);
	if (len > room)
		len = room > 0 ? (int)room : 0;
	natsStatus s = natsMsg_Create(out, subj, NULL, natsMsg_GetData(m),
	                              len);
	if (s != NATS_OK)
		return s;
	for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
		const char *v = NULL;
		char k[40];
		if (natsMsgHeader_Get(m, keep[i], &v) != NATS_OK || !v)
			continue;
		/* the original's id is the sender's word: kept, not used */
		snprintf(k, sizeof k, "%s%s", i == 0 ? "Le-Dead-" : "",
		         keep[i]);
		dead_hdr(*out, k, v);
	}
	/* One copy per stream message, should we die before its Term. */
	snprintf(id, sizeof id, "%s/%" PRIu64, c->conn.stream, sseq);
	dead_hdr(*out, "Nats-Msg-Id", id);
	dead_hdr(*out, "Le-Dead-Reason", why);
	dead_hdr(*out, "Le-Dead-Subject", natsMsg_GetSubject(m));
	snprintf(id, sizeof id, "%" PRIu64, sseq);
	dead_hdr(*out, "Le-Dead-Stream-Seq", id);
	if (len < natsMsg_GetDataLength(m)) {
		snprintf(id, sizeof id, "%d", natsMsg_GetDataLength(m));
		dead_hdr(*out, "Le-Dead-Body-Bytes", id);
	}
	return NATS_OK;
}

/* Put a copy of m in the dead-letter stream, acknowledged by it; the
 * stream is created when missing.  @return 0, -1 (nothing there). */
static int dead_letter(struct col *c, natsMsg *m, enum reason r,
                       const char *why, uint64_t sseq)
{
	natsMsg *d = NULL;
	jsPubAck *pa = NULL;
	jsErrCode je = 0;
	jsPubOptions po;
	uint64_t now = ship_mono_ms();

	/* After a failed copy, the next ones wait for a backoff: a flood of
	 * bad messages while the dead-letter stream cannot take them (no
	 * quorum, no permission) must not cost each one a publish timeout
	 * and hold up the good ones behind it. */
	if (now < c->dead_retry_ms)
		return -1;
	natsStatus s = dead_msg(c, m, r, why, sseq, &d);

	jsPubOptions_Init(&po);
	po.ExpectStream = c->dead_stream;
	po.MaxWait = 5000;
	if (s == NATS_OK)
		s = js_PublishMsg(&pa, c->js, d, &po, &je);
	jsPubAck_Destroy(pa);
	pa = NULL;
	if ((s == NATS_NO_RESPONDERS || je == JSStreamNotFoundErr) &&
	    dead_stream_create(c) == NATS_OK) {
		s = js_PublishMsg(&pa, c->js, d, &po, &je); /* once more */
		jsPubAck_Destroy(pa);
	}
	natsMsg_Destroy(d);
	if (s == NATS_OK) {
		c->dead_copies++;
		c->dead_said = 0;
		c->dead_backoff_ms = 0;
		c->dead_fail_since = 0;
		c->dead_kept = 0;
		return 0;
	}
	if (!c->dead_fail_since)
		c->dead_fail_since = ship_mono_ms();
	c->dead_backoff_ms = c->dead_backoff_ms ? 2 * c->dead_backoff_ms
	                                        : SHIP_BACKOFF_MAX_MS;
	if (c->dead_backoff_ms > DEAD_BACKOFF_MAX_MS)
		c->dead_backoff_ms = DEAD_BACKOFF_MAX_MS;
	c->dead_retry_ms = ship_mono_ms() + c->dead_backoff_ms;
	if (!c->dead_said++)
		fprintf(stderr, "logengine %s: dead-letter stream %s: %s; "
		        "refused messages are left in %s and tried again\n",
		        CMD, c->dead_stream, *nats_GetLastError(NULL)
		        ? nats_GetLastError(NULL) : natsStatus_GetText(s),
		        c->conn.stream);
	return -1;
}

/*
 * Refuse m: say why on stderr, count it, copy it to the dead-letter
 * stream, then terminate it (the server never sends it again) and go on
 * with the next.  A copy that could not be made leaves m to come back
 * after a delay (ACT_NAK): a refused message is never lost unseen.
 */
static int reject(struct col *c, natsMsg *m, const le_collector_msg *h,
                  enum reason r, const char *why, uint64_t off)
{
	char text[512];
	uint64_t sseq = stream_seq(m);
	int n = 0;

	c->rejected++;
	c->refused[r]++;
	if (h && h->host)
		n = snprintf(text, sizeof text, "host %s shard %" PRIu32
		             " records %" PRIu64 "-%" PRIu64 ": ", h->host,
		             h->shard, h->first, h->last);
	if (off != UINT64_MAX && n >= 0 && (size_t)n < sizeof text)
		n += snprintf(text + n, sizeof text - (size_t)n, "frame at byte %"
		              PRIu64 ": ", off);
	if (n >= 0 && (size_t)n < sizeof text)
		snprintf(text + n, sizeof text - (size_t)n, "%s", why);
	fprintf(stderr, "logengine %s: stream %s message %" PRIu64 " rejected "
	        "(subject %s; nothing of it stored): %s\n", CMD,
	        c->conn.stream, sseq, natsMsg_GetSubject(m), text);
	if (dead_letter(c, m, r, text, sseq) == 0)
		return ACT_TERM;
	/* Left in the stream for a later copy; but messages left so count
	 * against the consumer's MAX_ACK_PENDING, and a flood of them
	 * would end its deliveries: past DEAD_KEEP_MAX of them, a refused
	 * message goes with its line on stderr as its only record. */
	if (sseq > c->dead_kept_seq) {
		c->dead_kept_seq = sseq;
		c->dead_kept++;
	}
	if (c->dead_kept <= DEAD_KEEP_MAX)
		return ACT_NAK;
	c->dead_dropped++;
	fprintf(stderr, "logengine %s: stream %s message %" PRIu64 " dropped "
	        "without a dead-letter copy (%d already wait for one)\n", CMD,
	        c->conn.stream, sseq, DEAD_KEEP_MAX);
	return ACT_TERM;
}

/* first > E: wait for the rest, up to --gap-wait-ms.  @return 1 to nak,
 * 0 to take it (a marker for the hole stored), < 0. */
static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Messages in our hands, not acknowledged yet: held, placed from the
 * held ones, and the fetch being handled, each stream sequence once (a
 * message sent again while we held it is in two of them). */
static uint64_t in_hand_count(struct col *c)
{
	uint64_t seq[HOLD_MSGS * 2 + FETCH_MSGS * 2], n = 0, k = 0;

	for (int i = 0; i < c->nhold; i++)
		seq[n++] = c->hold[i].sseq;
	for (int i = 0; i < c->ndone; i++)
		seq[n++] = stream_seq(c->done[i]);
	for (int i = 0; i < c->ncur; i++)
		if (c->cur[i])
			seq[n++] = stream_seq(c->cur[i]);
	pthread_mutex_lock(&c->ah.mu);
	for (int i = 0; c->ah.full && i < c->ah.list.Count &&
	                i < FETCH_MSGS; i++)
		seq[n++] = stream_seq(c->ah.list.Msgs[i]);
	pthread_mutex_unlock(&c->ah.mu);
	qsort(seq, (size_t)n, sizeof seq[0], cmp_u64);
	for (uint64_t i = 0; i < n; i++)
		k += seq[i] && (i == 0 || seq[i] != seq[i - 1]);
	return k;
}

/* Is ci the state of a running consumer?  In a cluster: a leader, and
 * with it a majority of its replicas up (current, or heard from within
 * the last PEER_HEARD_MS: a follower of a consumer just made, or under
 * load, lags a little and is still there).  A server that has only
 * heard of the consumer (its creation proposed while the cluster had no
 * quorum, and not carried out) answers without a leader and with every
 * count zero: "nothing pending" from it means nothing; a leader whose
 * replicas are down answers but cannot deliver.  A single server names
 * no leader at all. */
static int consumer_live(const struct col *c, const jsConsumerInfo *ci)
{
	const jsClusterInfo *ki = ci->Cluster;
	int current = 1; /* the leader */

	if (!c->clustered)
		return 1;
	if (!ki || !ki->Leader || !*ki->Leader)
		return 0;
	for (int i = 0; i < ki->ReplicasLen; i++) {
		const jsPeerInfo *p = ki->Replicas[i];
		current += !p->Offline &&
		           (p->Current || p->Active < PEER_HEARD_MS * 1000000LL);
	}
	return 2 * current > 1 + ki->ReplicasLen;
}

/* Is every message the consumer delivered and has not had acknowledged
 * one we hold (or are handling now)?  Then nothing before a held
 * message can still come from the stream but a resend, which is what
 * --gap-wait-ms waits for.  Asked at most every ASK_POLL_MS; a no
 * only delays. */
static int in_hand(struct col *c, uint64_t now)
{
	jsConsumerInfo *ci = NULL;
	jsErrCode je = 0;
	int yes = 0;

	if (now - c->asked_ms < ASK_POLL_MS)
		return c->asked_yes;
	c->asked_ms = now;
	/* Counted before the question: what we hold now is pending when the
	 * server answers (what the fetching thread takes meanwhile makes
	 * the answer larger, a no).  Our acks of earlier fetches first: a
	 * flush is a round trip behind them (one the server has not
	 * applied yet reads as a no too). */
	uint64_t mine = in_hand_count(c);
	if (natsConnection_FlushTimeout(c->nc, 5000) == NATS_OK &&
	    js_GetConsumerInfo(&ci, c->js, c->conn.stream, c->durable, NULL,
	                       &je) == NATS_OK)
		yes = consumer_live(c, ci) && (uint64_t)ci->NumAckPending <= mine;
	jsConsumerInfo_Destroy(ci);
	return c->asked_yes = yes;
}

/* Records [E, h->first) are not there (res->missing of them, E the
 * origin's next sequence).  @return 1 to wait, 0 when a marker took
 * their place and h was stored after it (res says), < 0. */
static int hole(struct col *c, const le_collector_msg *h,
                le_collector_res *res)
{
	uint64_t now = ship_mono_ms();
	uint64_t *since = le_collector_data(res->origin); /* mono ms, 0 */

	/* The wait starts once nothing delivered can still bring them. */
	if (!*since && !in_hand(c, now))
		return 1;
	if (!*since)
		*since = now;
	if (now - *since < c->gap_wait_ms)
		return 1;
	fprintf(stderr, "logengine %s: host %s shard %" PRIu32 ": records %"
	        PRIu64 "-%" PRIu64 " still missing from the stream after %"
	        PRIu64 " ms: a marker takes their place\n", CMD, h->host,
	        h->shard, h->first - res->missing, h->first - 1,
	        c->gap_wait_ms);
	int rc = le_collector_append(c->st, h, LE_COLLECT_FILL_HOLE, res);
	if (rc == 0)
		c->missing += res->missing;
	return rc;
}

/* Count what the store did with a message, and say when records a
 * marker had claimed lost came after all. */
static void tally(struct col *c, const le_collector_msg *h,
                  const le_collector_res *res)
{
	if (res->late) {
		c->contradicted += res->late;
		fprintf(stderr, "logengine %s: host %s shard %" PRIu32 ": "
		        "records %" PRIu64 "-%" PRIu64 " came after a marker "
		        "said they were lost: %" PRIu64 " stored (gap claim "
		        "contradicted)\n", CMD, h->host, h->shard, res->late_lo,
		        res->late_hi, res->late);
	}
	c->records += res->late + res->stored;
	c->bytes += res->bytes;
	c->lost += res->lost;
	c->dups += !res->late && !res->stored && !res->lost;
}

static int tokens(const char *subject)
{
	int n = 1;

	for (const char *p = subject; *p; p++)
		n += *p == '.';
	return n;
}

/* Does the origin the headers name agree with the subject's?  The
 * subject is what the server's permissions bound to a publisher's
 * credentials (docs/logengine.1, "Shipping across hosts"); the headers
 * are anybody's word.  @return 0, or the refusal (reject). */
static int check_origin(struct col *c, natsMsg *m, const le_collector_msg *h)
{
	char host[LE_HOST_MAX + 1], why[LE_HOST_MAX + 160];
	uint32_t shard;

	const char *subj = natsMsg_GetSubject(m);

	if (tokens(subj) != c->subject_tokens ||
	    ship_subject_origin(subj, host, &shard) < 0)
		return reject(c, m, h, R_FORGED, "the subject is not "
		              "PREFIX.HOSTTOKEN.SHARD (a forwarder's, PREFIX "
		              "what --subject takes)", UINT64_MAX);
	if (strcmp(host, h->host) == 0 && shard == h->shard)
		return 0;
	snprintf(why, sizeof why, "the headers claim another origin than "
	         "the subject's (host %s shard %" PRIu32 ")", host, shard);
	return reject(c, m, h, R_FORGED, why, UINT64_MAX);
}

/* Headers and origin of m (its body is checked as it is stored).
 * @return 0, or the refusal's act. */
static int check(struct col *c, natsMsg *m, le_collector_msg *h)
{
	const char *why;

	c->msgs++;
	if (parse_hdrs(m, h, &why) < 0)
		return reject(c, m, NULL, R_HEADERS, why, UINT64_MAX);
	return check_origin(c, m, h);
}

/* Store what of message m (headers h) its origin does not have; the
 * store checks the body first.  may_wait: a hole is waited for
 * (ACT_HOLD) rather than given up on.  @return ACT_ACK, ACT_HOLD, a
 * refusal's act (reject), or < 0 when the store failed (nothing is
 * acknowledged then). */
static int place(struct col *c, natsMsg *m, const le_collector_msg *h,
                 int may_wait)
{
	le_collector_res res;

	int rc = le_collector_append(c->st, h, 0, &res);
	if (rc == 0 && res.missing) {
		if (!may_wait)
			return ACT_HOLD;
		if ((rc = hole(c, h, &res)) > 0)
			return ACT_HOLD;
	}
	if (rc < 0 && res.refused)
		return reject(c, m, h, refusal_reason[res.refused], res.msg,
		              res.offset);
	if (rc < 0) {
		if (res.msg[0])
			fprintf(stderr, "logengine %s: %s\n", CMD, res.msg);
		return rc;
	}
	*le_collector_data(res.origin) = 0; /* no hole now */
	tally(c, h, &res);
	return ACT_ACK;
}

/* Keep m (ours now) until its hole fills.  @return 0, -1 no room. */
static int hold(struct col *c, natsMsg *m, const le_collector_msg *h)
{
	uint64_t len = (uint64_t)natsMsg_GetDataLength(m), sseq = stream_seq(m);

	for (int i = 0; i < c->nhold; i++)
		if (sseq && c->hold[i].sseq == sseq) {
			/* sent again (its ack wait ran out): the new copy,
			 * whose timer is fresh, replaces ours */
			natsMsg_Destroy(c->hold[i].m);
			c->hold[i].m = m;
			c->hold[i].h = *h;
			return 0;
		}
	if (c->nhold == HOLD_MSGS ||
	    (c->nhold && c->hold_bytes + len > c->fetch_bytes))
		return -1;
	c->hold[c->nhold++] = (struct held){m, *h, len, sseq};
	c->hold_bytes += len;
	c->held++;
	return 0;
}

/* Store the held messages whose holes filled, in each origin's order:
 * the lowest first sequence of an origin goes first, and only it may
 * give up on its hole (a later one giving up would mark as missing the
 * records an earlier held one has).  Placed ones wait in c->done for
 * the sync before their acks.  @return 0, < 0. */
static int drain(struct col *c)
{
	unsigned char stuck[HOLD_MSGS] = {0}; /* its origin's hole stays */

	for (;;) {
		int best = -1;
		for (int i = 0; i < c->nhold; i++)
			if (!stuck[i] && (best < 0 || c->hold[i].h.first <
			                                  c->hold[best].h.first))
				best = i;
		if (best < 0)
			return 0;
		struct held *e = &c->hold[best];
		int rc = place(c, e->m, &e->h, 1);
		if (rc < 0)
			return rc;
		if (rc == ACT_HOLD) {
			/* every held message of this origin stays */
			for (int i = 0; i < c->nhold; i++)
				stuck[i] |= c->hold[i].h.shard == e->h.shard &&
				            !strcmp(c->hold[i].h.host, e->h.host);
			continue;
		}
		c->done[c->ndone++] = e->m;
		c->hold_bytes -= e->bytes;
		*e = c->hold[--c->nhold];
		stuck[best] = stuck[c->nhold];
	}
}

static void act(const struct col *c, natsMsg *m, int a)
{
	if (a == ACT_ACK)
		natsMsg_Ack(m, NULL);
	else if (a == ACT_TERM)
		natsMsg_Term(m, NULL);
	else
		natsMsg_NakWithDelay(m, (int64_t)c->ack_wait_ms, NULL);
}

/* Nothing left for us in the stream (--once). */
static int drained(struct col *c)
{
	jsConsumerInfo *ci = NULL;
	jsErrCode je = 0;
	int done = 0;

	if (js_GetConsumerInfo(&ci, c->js, c->conn.stream, c->durable, NULL,
	                       &je) == NATS_OK)
		done = consumer_live(c, ci) && ci->NumPending == 0 &&
		       ci->NumAckPending == 0;
	jsConsumerInfo_Destroy(ci);
	return done;
}

/*
 * Messages to ask for: fetch_bytes of messages the size of the last
 * fetch's largest, so that the server's count and the library's agree
 * and a fetch ends with nothing of it still on the way (a fetch that
 * the byte limit ends, the library counting bytes as the server does
 * not, may leave messages arriving after it returned).  The request's
 * byte limit (MaxBytes, honoured by servers 2.8.3 on) still bounds a
 * fetch whose messages grew; a server found to ignore it gets
 * fetch_bytes / the largest message ever seen.
 */
static int fetch_batch(const struct col *c)
{
	uint64_t m = c->no_max_bytes ? c->max_msg : c->recent_msg;
	uint64_t n = c->fetch_bytes / (m ? m : 1);
	return n < 1 ? 1 : n > FETCH_MSGS ? FETCH_MSGS : (int)n;
}

/* A fetch taking a third of the ack wait to handle (a slow disk, a
 * loaded host) resets its messages' ack timers: else the server sends
 * them again behind later ones while they are being stored. */
static void keep_fetch(struct col *c, const natsMsgList *list, int n)
{
	uint64_t now = ship_mono_ms();

	if (now - c->progress_ms < c->ack_wait_ms / 3)
		return;
	c->progress_ms = now;
	for (int i = 0; i < n; i++)
		if (list->Msgs[i])
			natsMsg_InProgress(list->Msgs[i], NULL);
	pthread_mutex_lock(&c->ah.mu); /* and the one fetched meanwhile */
	for (int i = 0; c->ah.full && i < c->ah.list.Count; i++)
		natsMsg_InProgress(c->ah.list.Msgs[i], NULL);
	pthread_mutex_unlock(&c->ah.mu);
}

/* The held messages' ack timers, reset every third of the ack wait. */
static void keep_held(struct col *c)
{
	uint64_t now = ship_mono_ms();

	if (now - c->hold_ms < c->ack_wait_ms / 3)
		return;
	c->hold_ms = now;
	for (int i = 0; i < c->nhold; i++)
		natsMsg_InProgress(c->hold[i].m, NULL);
}

/* Our durable consumer's settings. */
static void consumer_config(const struct col *c, jsConsumerConfig *cc)
{
	jsConsumerConfig_Init(cc);
	cc->Durable = c->durable;
	cc->FilterSubject = c->subject;
	cc->AckPolicy = js_AckExplicit;
	cc->AckWait = (int64_t)c->ack_wait_ms * 1000000;
	cc->MaxAckPending = MAX_ACK_PENDING;
}

/* Our durable consumer on the stream, made if missing, bound if there.
 * @return 0; -1 out of reach for now, why[cap] saying what the server
 * answered; SHIP_EXIT_FAIL after a message (refused, or settings the
 * server rejects). */
static int subscribe(struct col *c, char *why, size_t cap)
{
	jsSubOptions so;
	jsErrCode je = 0;

	jsSubOptions_Init(&so);
	so.Stream = c->conn.stream;
	consumer_config(c, &so.Config);
	natsStatus s = js_PullSubscribe(&c->sub, c->js, c->subject, c->durable,
	                                NULL, &so, &je);
	if (s == NATS_OK)
		return 0;
	c->sub = NULL;
	ship_js_why(s, je, why, cap);
	/* A server's refusal carries a JetStream code; without one, the
	 * error is libnats's own: the durable there does not take our
	 * subject or settings (final). */
	if (ship_js_transient(c->nc, s, je) && !(s == NATS_ERR && !je))
		return -1;
	fprintf(stderr, "logengine %s: durable consumer %s on stream %s "
	        "(subjects %s): %s\n", CMD, c->durable, c->conn.stream,
	        c->subject, why);
	return SHIP_EXIT_FAIL;
}

/*
 * Does our consumer run?  Asked before the collector says the stream is
 * reachable, and while it is not.  Made again when the servers lost it
 * (a store wiped, a server restarted alone: the store already has what
 * it delivers again) or only know of it (in a cluster, no leader: its
 * creation was proposed without quorum and not carried out).
 * @return 0 it runs; -1 not yet, why[cap] saying why; SHIP_EXIT_FAIL
 * after a message (making it again was refused).
 */
static int consumer_runs(struct col *c, char *why, size_t cap)
{
	jsConsumerInfo *ci = NULL;
	jsConsumerConfig cc;
	jsErrCode je = 0;

	if (c->sub) {
		natsStatus s = js_GetConsumerInfo(&ci, c->js, c->conn.stream,
		                                  c->durable, NULL, &je);
		int live = s == NATS_OK && consumer_live(c, ci);
		int known_only = s == NATS_OK && c->clustered &&
		                 (!ci->Cluster || !ci->Cluster->Leader ||
		                  !*ci->Cluster->Leader);
		jsConsumerInfo_Destroy(ci);
		if (live)
			return 0;
		if (known_only) {
			/* The same settings: a running one is left as it is. */
			consumer_config(c, &cc);
			ci = NULL;
			js_AddConsumer(&ci, c->js, c->conn.stream, &cc, NULL, &je);
			jsConsumerInfo_Destroy(ci);
		}
		if (s == NATS_OK) {
			snprintf(why, cap, "consumer %s has no leader with a "
			         "quorum", c->durable);
			return -1;
		}
		ship_js_why(s, je, why, cap);
		if (s != NATS_NOT_FOUND && je != JSConsumerNotFoundErr)
			return -1;
		natsSubscription_Destroy(c->sub);
		c->sub = NULL;
	}
	int rc = subscribe(c, why, cap);
	if (rc == 0)
		snprintf(why, cap, "consumer %s made again", c->durable);
	return rc ? rc : -1; /* the next probe sees it run */
}

/* The fetching thread's outage began (why), or goes on: said once, then
 * the backoff waited, less waited_ms spent since the try. */
static void fetch_lost(struct col *c, const char *why, int waited_ms)
{
	ship_outage_lost(CMD, &c->out, c->conn.stream, why, c->wake[0],
	                 waited_ms);
	atomic_store(&c->ah.lost_ms, c->out.since);
}

/* A fetch failed with status s: the stream is out of reach (a leader
 * election answers 409, a stream without quorum has no responders, the
 * connection is being made again).  Retried for ever: a setting cannot
 * have changed under a running collector, and --outage-deadline-ms is
 * the main thread's to apply. */
static void fetch_failed(struct col *c, natsStatus s)
{
	char why[512], probe[512];
	uint64_t t0 = ship_mono_ms();

	ship_js_why(s, 0, why, sizeof why);
	/* Said at once; from the second failure on, the consumer is asked
	 * whether it is still there (made again if not) within the wait. */
	if (c->out.since &&
	    consumer_runs(c, probe, sizeof probe) == SHIP_EXIT_FAIL)
		atomic_store(&c->ah.fatal, 1);
	fetch_lost(c, why, (int)(ship_mono_ms() - t0));
}

/* A fetch came back without an error after an outage: back once it
 * brought messages or the consumer answers. */
static void fetch_back(struct col *c, int count)
{
	char why[512];
	int rc = count > 0 ? 0 : consumer_runs(c, why, sizeof why);

	if (rc == 0) {
		ship_outage_back(CMD, &c->out, c->conn.stream);
		atomic_store(&c->ah.lost_ms, 0);
	} else if (rc == SHIP_EXIT_FAIL) {
		atomic_store(&c->ah.fatal, 1);
	} else {
		fetch_lost(c, why, 0);
	}
}

/* An empty fetch is also what a consumer whose leader lost its quorum
 * gives (the request times out): after SHIP_BACKOFF_MAX_MS of them, ask
 * whether it still runs, and if not, the stream is out of reach. */
static void fetch_quiet(struct col *c, int count)
{
	char why[512];
	uint64_t now = ship_mono_ms();

	if (count > 0 || now - c->quiet_ms < SHIP_BACKOFF_MAX_MS) {
		if (count > 0)
			c->quiet_ms = now;
		return;
	}
	int rc = consumer_runs(c, why, sizeof why);
	c->quiet_ms = ship_mono_ms();
	if (rc == SHIP_EXIT_FAIL)
		atomic_store(&c->ah.fatal, 1);
	else if (rc < 0)
		fetch_lost(c, why, 0);
}

/* Ask the server for what is there (batch messages, --fetch-bytes); when
 * nothing is, wait up to wait_ms for the first message to come (a fetch
 * of N waits for N, or its expiry: a stream that trickles would pay
 * that).  On the fetching thread.  @return the list (maybe empty). */
static natsMsgList fetch_list(struct col *c, int batch, uint64_t wait_ms)
{
	natsMsgList list = {0};
	jsFetchRequest req;

	if (!c->sub) { /* lost with its consumer, not made again yet */
		fetch_back(c, 0);
		return list;
	}
	jsFetchRequest_Init(&req);
	req.Batch = batch;
	req.MaxBytes = (int64_t)c->fetch_bytes;
	req.NoWait = true;
	/* With an expiry the library waits for the server's answer to end
	 * (the batch, or a status); without one it returns as soon as its
	 * queue is empty for a moment, the rest of the answer still on the
	 * way, and requests overlap until it drops messages.  The expiry is
	 * also how long a fetch waits when nothing is there (the server
	 * does not end it sooner while messages are pending), so it stays
	 * short: on a host too loaded to take a whole fetch in it, the
	 * messages it drops come back an ack wait later, the ones after
	 * them held meanwhile. */
	req.Expires = (int64_t)FETCH_EXPIRE_MS * 1000000;
	natsStatus s = natsSubscription_FetchRequest(&list, c->sub, &req);
	if ((s == NATS_OK || s == NATS_TIMEOUT || s == NATS_NOT_FOUND) &&
	    list.Count == 0) {
		natsMsgList_Destroy(&list);
		jsFetchRequest_Init(&req);
		req.Batch = 1;
		req.MaxBytes = (int64_t)c->fetch_bytes;
		req.Expires = (int64_t)wait_ms * 1000000;
		s = natsSubscription_FetchRequest(&list, c->sub, &req);
	}
	if (s != NATS_OK && s != NATS_TIMEOUT && s != NATS_NOT_FOUND) {
		natsMsgList_Destroy(&list);
		if (!atomic_load(&c->ah.stop)) /* else: we closed it */
			fetch_failed(c, s);
		return (natsMsgList){0};
	}
	if (c->out.since)
		fetch_back(c, list.Count);
	else
		fetch_quiet(c, list.Count);
	return list;
}

static void *ahead_main(void *arg)
{
	struct col *c = arg;
	struct ahead *a = &c->ah;

	pthread_mutex_lock(&a->mu);
	while (!a->stop && !atomic_load(&a->fatal)) {
		if (a->full) {
			pthread_cond_wait(&a->cv, &a->mu);
			continue;
		}
		int batch = a->batch;
		uint64_t wait_ms = a->wait_ms;
		pthread_mutex_unlock(&a->mu);
		natsMsgList l = fetch_list(c, batch, wait_ms);
		pthread_mutex_lock(&a->mu);
		a->list = l;
		a->asked = batch;
		a->full = 1;
		pthread_cond_broadcast(&a->cv);
	}
	pthread_mutex_unlock(&a->mu);
	return NULL;
}

/* The next request's parameters, from what the main thread knows. */
static void ahead_params(struct col *c)
{
	c->ah.batch = fetch_batch(c);
	/* held messages' timers are reset between fetches */
	c->ah.wait_ms = c->nhold && c->ack_wait_ms / 3 < FETCH_EXPIRE_MS
	                ? c->ack_wait_ms / 3 : FETCH_EXPIRE_MS;
}

static int ahead_start(struct col *c)
{
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->ah.cv, &ca);
	pthread_condattr_destroy(&ca);
	ahead_params(c);
	c->quiet_ms = ship_mono_ms(); /* the consumer just answered */
	if (pthread_create(&c->ah.t, NULL, ahead_main, c) != 0) {
		fprintf(stderr, "logengine %s: cannot start a thread\n", CMD);
		return SHIP_EXIT_FAIL;
	}
	c->ah.running = 1;
	return 0;
}

/* Stop the fetching thread: closing the connection (the acks flushed
 * before) ends the fetch it may be waiting in.  What it fetched and
 * nobody took goes unacknowledged, and comes back. */
static void ahead_stop(struct col *c)
{
	if (!c->ah.running)
		return;
	pthread_mutex_lock(&c->ah.mu);
	c->ah.stop = 1;
	pthread_cond_broadcast(&c->ah.cv);
	pthread_mutex_unlock(&c->ah.mu);
	if (write(c->wake[1], "", 1) < 0) {
		/* full: it wakes anyway */
	}
	natsConnection_Close(c->nc);
	pthread_join(c->ah.t, NULL);
	c->ah.running = 0;
	if (c->ah.full)
		natsMsgList_Destroy(&c->ah.list);
	c->ah.full = 0;
}

/* The list fetched ahead, when it is there (waiting up to 200 ms); the
 * next fetch starts at once.  @return 1 taken, 0 none yet. */
static int ahead_take(struct col *c, natsMsgList *out, int *asked)
{
	struct ahead *a = &c->ah;
	struct timespec t;
	int got;

	clock_gettime(CLOCK_MONOTONIC, &t);
	t.tv_nsec += 200 * 1000000L;
	if (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&a->mu);
	while (!a->full && !ship_stop &&
	       pthread_cond_timedwait(&a->cv, &a->mu, &t) == 0)
		;
	if ((got = a->full) != 0) {
		*out = a->list;
		*asked = a->asked;
		memset(&a->list, 0, sizeof a->list);
		a->full = 0;
		ahead_params(c);
		pthread_cond_broadcast(&a->cv);
	}
	pthread_mutex_unlock(&a->mu);
	return got;
}

/* One fetch: handle, sync, then ack.  @return messages, or < 0. */
static int fetch_once(struct col *c)
{
	natsMsgList list = {0};
	int acts[FETCH_MSGS], rc = 0, asked = 0;

	/* Nothing came: the held messages still wait (and a hole may be
	 * given up on, below). */
	if (!ahead_take(c, &list, &asked) && !c->nhold)
		return 0;
	/* the server had no more when it answered: --once may be done */
	c->short_fetch = list.Count < asked;
	/* Never more than asked for; should the library hand over more, the
	 * rest is neither stored nor acknowledged: it comes back. */
	int n = list.Count < FETCH_MSGS ? list.Count : FETCH_MSGS;
	uint64_t got = 0, largest = 0;
	c->progress_ms = ship_mono_ms();
	c->cur = list.Msgs;
	c->ncur = n;
	keep_held(c);
	for (int i = 0; i < n && rc >= 0; i++) {
		natsMsg *m = list.Msgs[i];
		le_collector_msg h;
		keep_fetch(c, &list, n);
		uint64_t len = (uint64_t)natsMsg_GetDataLength(m);
		if (len > largest)
			largest = len;
		if (len > c->max_msg)
			c->max_msg = len;
		got += len;
		if ((rc = acts[i] = check(c, m, &h)) != 0)
			continue; /* rejected */
		rc = acts[i] = place(c, m, &h, 0);
		if (rc == ACT_HOLD) {
			if (hold(c, m, &h) == 0) {
				list.Msgs[i] = NULL; /* ours until placed */
				acts[i] = ACT_KEPT;
			} else {
				/* out of our hands: ask again */
				acts[i] = ACT_NAK;
				c->asked_yes = 0;
				c->asked_ms = 0;
			}
			rc = 0;
		} else if (rc >= 0 && c->nhold) {
			rc = drain(c); /* it may have filled a hole */
		}
	}
	if (rc >= 0)
		rc = drain(c); /* and a hole may be given up on */
	if (largest)
		c->recent_msg = largest;
	/* A server that honours the limit stops within one message of it. */
	if (got > c->fetch_bytes + c->max_msg && !c->no_max_bytes) {
		c->no_max_bytes = 1;
		fprintf(stderr, "logengine %s: the server ignores a fetch's byte "
		        "limit (nats-server before 2.8.3): fetching --fetch-bytes "
		        "/ the largest message from now on\n", CMD);
	}
	if (rc >= 0) {
		keep_fetch(c, &list, n);
		rc = le_collector_sync(c->st);
	}
	if (rc < 0) {
		fprintf(stderr, "logengine %s: %s: storing failed: %s (nothing "
		        "of this fetch acknowledged)\n", CMD, c->dir,
		        le_strerror(rc));
		c->ncur = 0;
		natsMsgList_Destroy(&list);
		return rc;
	}
	c->ncur = 0;
	for (int i = 0; i < n; i++)
		if (acts[i] != ACT_KEPT)
			act(c, list.Msgs[i], acts[i]);
	for (int i = 0; i < c->ndone; i++) {
		natsMsg_Ack(c->done[i], NULL);
		natsMsg_Destroy(c->done[i]);
	}
	c->ndone = 0;
	natsMsgList_Destroy(&list);
	return n;
}

/* Out of reach since `since` (0: it is not) for longer than
 * --outage-deadline-ms?  Then say so.  @return 1 give up, 0 go on. */
static int given_up(const struct col *c, uint64_t since)
{
	uint64_t now = ship_mono_ms();

	if (!c->outage_ms || !since || now - since < c->outage_ms)
		return 0;
	fprintf(stderr, "logengine %s: stream %s unreachable for %.1f s "
	        "(--outage-deadline-ms %" PRIu64 "): giving up; what was not "
	        "acknowledged comes again to the next run\n", CMD,
	        c->conn.stream, (double)(now - since) / 1000, c->outage_ms);
	return 1;
}

/* --once, and rejected messages the dead-letter stream has not taken
 * for --outage-deadline-ms: they stay in the stream (nakked, they would
 * keep a --once run from ever finding it drained).  @return 1 give up. */
static int dead_given_up(const struct col *c)
{
	uint64_t now = ship_mono_ms();

	if (!c->once || !c->outage_ms || !c->dead_fail_since ||
	    now - c->dead_fail_since < c->outage_ms)
		return 0;
	fprintf(stderr, "logengine %s: rejected messages could not be copied "
	        "to the dead-letter stream %s for %.1f s (--outage-deadline-ms "
	        "%" PRIu64 "): giving up; they stay in %s for the next run\n",
	        CMD, c->dead_stream, (double)(now - c->dead_fail_since) / 1000,
	        c->outage_ms, c->conn.stream);
	return 1;
}

static int run(struct col *c)
{
	while (!ship_stop) {
		int n = fetch_once(c);
		if (n < 0 || atomic_load(&c->ah.fatal) ||
		    given_up(c, atomic_load(&c->ah.lost_ms)) || dead_given_up(c))
			return SHIP_EXIT_FAIL;
		/* A short fetch may have been the last: once the server has
		 * our acks (a flush is a round trip behind them), ask. */
		if (c->once && (n <= 1 || c->short_fetch) &&
		    natsConnection_FlushTimeout(c->nc, 5000) == NATS_OK &&
		    drained(c))
			break;
	}
	/* Acks are published asynchronously: make sure they left. */
	natsConnection_FlushTimeout(c->nc, 5000);
	return 0;
}

/* ---- setup ---- */

static const char usage[] =
	"usage: logengine collect [OPTIONS] DIR\n"
	"\n"
	"Store what `logengine forward` ships in DIR (created if missing),\n"
	"one shard directory per origin host and shard, records as they were\n"
	"stored there: `logengine cat -o json DIR` shows host, origin_shard\n"
	"and origin_seq, and merges every host by time.  Each message is\n"
	"checked whole (headers, sizes, every frame's CRC, sequence numbers)\n"
	"before anything of it is stored, and acknowledged once stored.\n"
	"\n"
	"  --nats URL            server(s) (nats://127.0.0.1:4222)\n"
	"  --stream NAME         stream (LOGS), created if missing\n"
	"  --subject FILTER      subjects to take (logs.>)\n"
	"  --durable NAME        durable consumer (logengine-collect)\n"
	"  --creds FILE, --user NAME --password-file FILE: who this is\n"
	"  --tls, --tls-ca FILE, --tls-cert FILE, --tls-key FILE\n"
	"  --sync batch|none     fdatasync before acknowledging (batch)\n"
	"  --segment-bytes N     rotate segments past N bytes (64M)\n"
	"  --max-origins N       origins (host, shard) DIR takes, at most\n"
	"                        (16384; 50000 at most); a message of a\n"
	"                        new origin past it is refused\n"
	"  --fetch-bytes N       bytes fetched at once, at most (16M)\n"
	"  --ack-wait-ms N       the consumer's ack wait (10000)\n"
	"  --gap-wait-ms N       how long records missing from the stream are\n"
	"                        waited for, once every message before the\n"
	"                        one after them is settled, before a marker\n"
	"                        takes their place (60000)\n"
	"  --dead-letter PREFIX  refused messages (malformed, damaged,\n"
	"                        forged, past --max-origins) are copied to\n"
	"                        PREFIX.REASON with the reason, then\n"
	"                        dropped from the stream (logs-dead)\n"
	"  --dead-letter-stream NAME  the stream of those copies, created\n"
	"                        if missing (STREAM_DEAD)\n"
	"  --dead-letter-bytes N its size; the oldest copies go first (1G)\n"
	"  --once                exit 0 when nothing is left to take\n"
	"  --outage-deadline-ms N  exit 1 once the server or the stream has\n"
	"                        been out of reach this long (lost quorum, a\n"
	"                        leader election, servers down); 0: wait for\n"
	"                        ever (60000 with --once, else 0)\n"
	"  --verbose             a summary on stderr at the end\n"
	"\n"
	"While the stream is out of reach, collect retries every 0.1 s to 5 s\n"
	"and says so once when it goes and once when it is back.\n"
	"\n"
	"exit status: 0 ok; 1 refused by the server (authorization, settings\n"
	"that conflict), out of reach past --outage-deadline-ms, store I/O\n"
	"error; 2 usage.\n";

/* The dead-letter stream's name (STREAM_DEAD unless given) and subject
 * prefix: tokens without wildcards, outside what the collector takes
 * (a refused message copied where it would be fetched again would go
 * round for ever). */
static int dead_names(struct col *c)
{
	char probe[320];

	if (!c->dead_stream) {
		snprintf(c->dead_stream_buf, sizeof c->dead_stream_buf,
		         "%.100s_DEAD", c->conn.stream);
		c->dead_stream = c->dead_stream_buf;
	}
	snprintf(probe, sizeof probe, "%.256s.%s", c->dead,
	         reason_token[R_FORGED]);
	if (!*c->dead || strlen(c->dead) > 256 || c->dead[0] == '.' ||
	    strpbrk(c->dead, "*> \t\r\n") || strstr(c->dead, "..") ||
	    c->dead[strlen(c->dead) - 1] == '.')
		return ship_usage(CMD, "--dead-letter '%s': a subject prefix "
		                  "of tokens, no wildcard", c->dead);
	if (ship_subject_match(c->subject, probe))
		return ship_usage(CMD, "--dead-letter '%s' is inside --subject: "
		                  "refused messages would be taken again",
		                  c->dead);
	if (strpbrk(c->dead_stream, ".*> \t\r\n/\\") ||
	    !strcmp(c->dead_stream, c->conn.stream))
		return ship_usage(CMD, "--dead-letter-stream '%s': a stream "
		                  "name of its own", c->dead_stream);
	return 0;
}

/* --sync batch|none */
static int sync_opt(const char *cmd, void *out, const char *v)
{
	if (strcmp(v, "batch") && strcmp(v, "none"))
		return ship_usage(cmd, "--sync: batch or none, not '%s'", v);
	*(int *)out = !strcmp(v, "batch");
	return 0;
}

static int parse(struct col *c, int argc, char **argv)
{
	const struct ship_optdef t[] = {
		{"--once", NULL, SHIP_FLAG, &c->once, NULL},
		{"--verbose", "-v", SHIP_FLAG, &c->verbose, NULL},
		{"--subject", NULL, SHIP_STR, &c->subject, NULL},
		{"--durable", NULL, SHIP_STR, &c->durable, NULL},
		{"--dead-letter", NULL, SHIP_STR, &c->dead, NULL},
		{"--dead-letter-stream", NULL, SHIP_STR, &c->dead_stream, NULL},
		{"--sync", NULL, SHIP_CALL, &c->sync, sync_opt},
		{"--segment-bytes", NULL, SHIP_SIZE, &c->segment_bytes, NULL},
		{"--fetch-bytes", NULL, SHIP_SIZE, &c->fetch_bytes, NULL},
		{"--ack-wait-ms", NULL, SHIP_SIZE, &c->ack_wait_ms, NULL},
		{"--gap-wait-ms", NULL, SHIP_SIZE, &c->gap_wait_ms, NULL},
		{"--dead-letter-bytes", NULL, SHIP_SIZE, &c->dead_bytes, NULL},
		{"--max-origins", NULL, SHIP_SIZE, &c->max_origins, NULL},
		{"--outage-deadline-ms", NULL, SHIP_SIZE, &c->outage_ms, NULL},
	};
	int rc = ship_parse(CMD, usage, argc, argv, t, sizeof t / sizeof t[0],
	                    &c->conn, &c->dir);

	if (rc)
		return rc;
	if (dead_names(c) < 0)
		return -1;
	/* A subject the filter takes names its origin in the two tokens
	 * after the filter's fixed ones: with logs.>, logs.A.0 is host A's
	 * shard 0, and logs.A.B.0 (which a permission on logs.A.> lets A
	 * publish) is refused rather than read as host B's. */
	size_t fl = strlen(c->subject);
	if (!strcmp(c->subject, ">"))
		c->subject_tokens = 2;
	else if (fl > 2 && !strcmp(c->subject + fl - 2, ".>"))
		c->subject_tokens = tokens(c->subject) + 1;
	else
		c->subject_tokens = tokens(c->subject);
	if (c->subject_tokens < 2)
		return ship_usage(CMD, "--subject '%s': a forwarder's subjects "
		                  "end in HOSTTOKEN.SHARD (logs.>)", c->subject);
	if (c->max_origins < 1 || c->max_origins > LE_ORIGINS_MAX)
		return ship_usage(CMD, "%s", "--max-origins: 1 to 50000");
	if (c->outage_ms == UINT64_MAX)
		c->outage_ms = c->once ? DEFAULT_OUTAGE_MS : 0;
	if (c->segment_bytes < 4096 || c->ack_wait_ms < 100 ||
	    c->gap_wait_ms < 2 * c->ack_wait_ms)
		return ship_usage(CMD, "%s", "--segment-bytes is at least 4K, "
		                  "--ack-wait-ms at least 100, and --gap-wait-ms "
		                  "at least twice --ack-wait-ms");
	return 0;
}

static int open_store(struct col *c)
{
	le_collector_opts o = {.segment_bytes = c->segment_bytes,
	                       .sync = c->sync,
	                       .max_origins = (uint32_t)c->max_origins};
	le_collector_res res;

	int rc = le_collector_open(&c->st, c->dir, &o, &res);
	if (rc < 0) {
		fprintf(stderr, "logengine %s: %s\n", CMD,
		        res.msg[0] ? res.msg : le_strerror(rc));
		return SHIP_EXIT_FAIL;
	}
	return 0;
}

/* The stream (made if missing) and our consumer on it, tried until both
 * answer: an outage said once, and once more when it ends.  @return 0
 * (also when a signal ended the wait: c->sub NULL), SHIP_EXIT_FAIL
 * after a message (refused, or out of reach past the deadline). */
static int attach(struct col *c)
{
	char why[512];

	while (!ship_stop) {
		int rc = ship_stream_try(CMD, c->nc, c->js, c->conn.stream,
		                         c->subject, 1, 0, 0, &c->clustered, why,
		                         sizeof why);
		if (rc == 0 && !c->sub)
			rc = subscribe(c, why, sizeof why);
		/* bound to it: does it run? */
		if (rc == 0)
			rc = consumer_runs(c, why, sizeof why);
		if (rc == 0)
			ship_outage_back(CMD, &c->out, c->conn.stream);
		if (rc >= 0)
			return rc;
		if (given_up(c, c->out.since))
			return SHIP_EXIT_FAIL;
		ship_outage_lost(CMD, &c->out, c->conn.stream, why, c->wake[0],
		                 0);
	}
	return 0;
}

static int start(struct col *c)
{
	int status;

	c->conn.give_up_ms = c->outage_ms;
	c->nc = ship_connect(CMD, &c->conn, c->wake[0], &status);
	if (!c->nc)
		return status;
	if (natsConnection_JetStream(&c->js, c->nc, NULL) != NATS_OK) {
		fprintf(stderr, "logengine %s: JetStream: %s\n", CMD,
		        nats_GetLastError(NULL));
		return SHIP_EXIT_FAIL;
	}
	int64_t mp = natsConnection_GetMaxPayload(c->nc);
	if (!c->fetch_bytes)
		c->fetch_bytes = (uint64_t)(2 * mp > (16 << 20) ? 2 * mp
		                                                : (16 << 20));
	c->max_msg = c->recent_msg = (uint64_t)mp;
	return attach(c);
}

static void summary(const struct col *c)
{
	fprintf(stderr, "logengine %s: %s: %" PRIu64 " messages, %" PRIu64
	        " records (%" PRIu64 " bytes) stored, %" PRIu64 " already "
	        "stored, %" PRIu64 " rejected (", CMD, c->dir, c->msgs,
	        c->records, c->bytes, c->dups, c->rejected);
	for (int r = 0; r < R_COUNT; r++)
		fprintf(stderr, "%s%" PRIu64 " %s", r ? ", " : "", c->refused[r],
		        reason_token[r]);
	fprintf(stderr, "; %" PRIu64 " dead-lettered, %" PRIu64 " dropped "
	        "without a copy), %" PRIu64 " held back, %"
	        PRIu64 " records lost before shipping, %" PRIu64 " missing "
	        "from the stream, %" PRIu64 " records came inside a gap claim "
	        "(gap claim contradicted); peak RSS %ld KiB\n", c->dead_copies,
	        c->dead_dropped, c->held, c->lost, c->missing,
	        c->contradicted, ship_peak_rss_kib());
}

int cmd_collect(int argc, char **argv)
{
	struct col c;
	int status;

	memset(&c, 0, sizeof c);
	c.conn.url = SHIP_DEFAULT_URL;
	c.conn.stream = SHIP_DEFAULT_STREAM;
	c.subject = DEFAULT_FILTER;
	c.durable = DEFAULT_DURABLE;
	c.dead = DEFAULT_DEAD;
	c.dead_bytes = 1u << 30;
	c.segment_bytes = 64u << 20;
	c.ack_wait_ms = DEFAULT_ACK_WAIT_MS;
	c.gap_wait_ms = DEFAULT_GAP_WAIT_MS;
	c.max_origins = LE_ORIGINS_DEFAULT;
	c.outage_ms = UINT64_MAX; /* unset: by --once */
	c.sync = 1;
	c.wake[0] = c.wake[1] = -1;
	pthread_mutex_init(&c.ah.mu, NULL);
	status = parse(&c, argc, argv);
	if (status)
		return status > 0 ? 0 : SHIP_EXIT_USAGE;
	if (ship_check_conn(CMD, &c.conn) < 0)
		return SHIP_EXIT_USAGE;
	/* Without the dead-letter permissions, refused messages stay in the
	 * stream (dead_letter()); the others are still stored. */
	ship_may_refuse(c.dead, ".>");
	ship_may_refuse("$JS.API.STREAM.*.", c.dead_stream);
	if (pipe2(c.wake, O_NONBLOCK | O_CLOEXEC) < 0) {
		fprintf(stderr, "logengine %s: %s\n", CMD, strerror(errno));
		return SHIP_EXIT_FAIL;
	}
	ship_malloc_tune();
	ship_signals(c.wake[1]);
	status = open_store(&c);
	if (status == 0)
		status = start(&c);
	if (status == 0 && c.sub && (status = ahead_start(&c)) == 0)
		status = run(&c);
	ahead_stop(&c);
	if (c.verbose)
		summary(&c);
	/* Held and placed-but-unsynced messages go unacknowledged: the
	 * server sends them again to the next run. */
	for (int i = 0; i < c.nhold; i++)
		natsMsg_Destroy(c.hold[i].m);
	for (int i = 0; i < c.ndone; i++)
		natsMsg_Destroy(c.done[i]);
	if (c.sub)
		natsSubscription_Destroy(c.sub);
	if (c.js)
		jsCtx_Destroy(c.js);
	if (c.nc)
		natsConnection_Destroy(c.nc);
	nats_Close();
	le_collector_close(c.st);
	close(c.wake[0]);
	close(c.wake[1]);
	return ship_exit(status);
}
#endif
