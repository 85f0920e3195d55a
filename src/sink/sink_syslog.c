/*
 * sink_syslog.c -- records as RFC 5424 messages to a syslog server, over
 * TCP with octet counting (RFC 6587) or over UDP, without ever letting a
 * slow, stalled or dead server reach a producer.
 *
 *   shard writers --(messages, under mu, once per batch)--> ring
 *                                                            |
 *   syslog thread <--(whole messages, under mu)--------------+
 *        |
 *        +--> send buffer --(send / sendmmsg, non-blocking)--> socket
 *
 * A message:  <PRI>1 TIMESTAMP HOSTNAME APP-NAME PROCID - SD MSG
 * with PRI = facility * 8 + the level's syslog severity (le_level_syslog),
 * TIMESTAMP in UTC with microseconds, SD the record's fields as one
 * element [fields@32473 key="value" ...] (recfmt.c) or "-".  Over TCP each
 * goes out as "LEN SP MESSAGE".  docs/INTERFACES.md, "Syslog messages".
 *
 * The ring is bounded (syslog_buffer_bytes) and holds whole messages, each
 * after a u32 of its length (MARK_BIT: a marker, not a record).  A port
 * whose batch finds no room drops the messages that do not fit and counts
 * them; once room returns, the thread queues "N records dropped" before
 * the next message.
 *
 * Connection.  The thread connects, and after any failure closes the
 * socket and tries again after a backoff that doubles from 100 ms to 5 s;
 * meanwhile the ring fills and then records are dropped, counted.  Before
 * each send it looks for the server's end of the connection (POLLRDHUP:
 * rsyslog never writes to a client, so anything readable is the end), so
 * a server that went away is found before records are written into a
 * connection it no longer reads.  A message half sent when the connection
 * fails is sent again whole on the next one (the server drops the half
 * with the old connection).  What the kernel had taken when a server died
 * without closing is beyond knowing (plain TCP syslog has no
 * acknowledgements): those records count as sent.
 *
 * Accounting: every record a port takes is, once the thread is done with
 * it, exactly one of syslog_sent (all its bytes handed to the socket) or
 * syslog_dropped (no room in the batch's stage or the ring, a datagram
 * refused, or still waiting when le_close gave up on the server).
 *
 * One file, past 700 lines: the writers' ports, the ring and the thread
 * that drains it share mu and the ring's invariants (whole messages, the
 * accounting above), which are read in one place or not at all.
 */
#define _GNU_SOURCE
#include "sink/syslog.h"

#include "sink/linesink.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "record/fields.h"
#include "base/fmt.h"
#include "base/internal.h"
#include "base/os.h"

#define MARK_BIT LE_LINE_MARK
#define MS 1000000ull
#define BACKOFF_MIN (100 * MS)
#define BACKOFF_MAX (5000 * MS)
#define CONNECT_MS 500
/* The send buffer: whole messages taken from the ring, framed for TCP. */
#define SB_BYTES (64 * 1024 + LE_SYSLOG_MSG_MAX + 16)
#define SB_MSGS 256

struct le__syslog {
	le__linesink ls;             /* first: the shared part; its ring
	                                holds whole messages, each after a
	                                u32 length word */
	/* [const] */
	int tcp;
	char host[256], port[16];    /* syslog_addr's parts */
	le__syslog_id id;
	/* [thread] after le_open: the server's address, once its host
	 * resolved (addrlen 0: not yet, the thread tries again) */
	struct sockaddr_storage addr;
	socklen_t addrlen;
	/* [thread] the connection and the send buffer */
	int fd;                      /* -1: not connected */
	uint64_t retry_at, backoff;  /* mono ns */
	unsigned char *sb;
	size_t sb_len, sb_off;       /* bytes in sb; sent of them */
	uint32_t start[SB_MSGS], end[SB_MSGS]; /* each message's bytes in
	                                 sb (TCP: start is its frame's, end
	                                 past it; UDP: the message alone) */
	uint8_t mark[SB_MSGS];
	size_t nmsg, done;           /* messages in sb; fully sent of them */
	_Atomic size_t inflight;     /* nmsg - done, for drained */
	/* [atomic] */
	_Atomic uint64_t sent, bytes, connects;
	_Atomic uint64_t resolve_errors; /* lookups of host that failed */
};

/* ---- the sender's identity and the message ---- */

/* Copy at most max bytes of s, printable US-ASCII, others as '_'. */
static size_t put_name(char *o, const char *s, size_t max)
{
	size_t n = 0;
	for (; s && s[n] && n < max; n++)
		o[n] = s[n] > 0x20 && s[n] < 0x7f ? s[n] : '_';
	if (!n)
		o[n++] = '-';
	return n;
}

void le__syslog_id_init(le__syslog_id *id, int facility, const char *app,
                        long pid)
{
	char host[256] = "";
	size_t w = 0;

	id->facility = facility;
	gethostname(host, sizeof host - 1);
	id->tail[w++] = ' ';
	w += put_name(id->tail + w, host, 255);
	id->tail[w++] = ' ';
	w += put_name(id->tail + w, app ? app : program_invocation_short_name,
	              48);
	w += (size_t)snprintf(id->tail + w, sizeof id->tail - w, " %ld - ",
	                      pid);
	id->tail_len = w;
}

#define BT_TAG "{backtrace} "

size_t le__syslog_format(unsigned char *out, size_t cap,
                         const le__syslog_id *id, const le__rec *r)
{
	const unsigned char *msg = r->payload, *fb = NULL;
	size_t mlen = r->len, flen = 0, w;
	int sev = le_level_syslog(r->level);

	if (cap > LE_SYSLOG_MSG_MAX)
		cap = LE_SYSLOG_MSG_MAX;
	int bt = 0;

	if ((r->flags & LE_REC_FIELDS) &&
	    le__fields_split(r->payload, r->len, &fb, &flen, &msg, &mlen) < 0)
		flen = 0;
	/* recorded history (the flight recorder's): MSG starts with
	 * {backtrace}, as logengine cat shows it */
	if (flen)
		bt = le__fields_unmark(&fb, &flen);
	w = (size_t)snprintf((char *)out, cap, "<%d>1 ",
	                     id->facility * 8 + (sev < 0 ? 5 : sev));
	w += le__put_ts((char *)out + w, r->ts, 6);
	memcpy(out + w, id->tail, id->tail_len);
	w += id->tail_len;
	if (flen) {
		/* The fields first, but leave the text some room. */
		size_t keep = mlen + 1 < 512 ? mlen + 1 : 512;
		size_t room = cap - w > keep ? cap - w - keep : 0;
		size_t k = le__fields_format(out + w, room, LE__FMT_SD, fb, flen);
		w += k;
		if (!k)
			out[w++] = '-';
	} else {
		out[w++] = '-';
	}
	out[w++] = ' ';
	if (bt && cap - w >= sizeof BT_TAG - 1) {
		memcpy(out + w, BT_TAG, sizeof BT_TAG - 1);
		w += sizeof BT_TAG - 1;
	}
	if (mlen > cap - w)
		mlen = cap - w;
	memcpy(out + w, msg, mlen);
	return w + mlen;
}

/* ---- the ring (caller holds mu) ---- */

static void ring_copy_out(le__syslog *s, size_t off, void *p, size_t n)
{
	size_t at = (s->ls.head + off) % s->ls.cap, first = s->ls.cap - at;
	if (first > n)
		first = n;
	memcpy(p, s->ls.ring + at, first);
	memcpy((char *)p + first, s->ls.ring, n - first);
}

/* Room for one more message of n bytes (and its length word). */
static int ring_room(const le__syslog *s, size_t n)
{
	return s->ls.cap - s->ls.len >= n + 4;
}

static void ring_put(le__syslog *s, const unsigned char *m, uint32_t n,
                     int mark)
{
	unsigned char h[4];
	uint32_t v = n | (mark ? MARK_BIT : 0);
	memcpy(h, &v, 4);
	le__linesink_put(&s->ls, h, 4);
	le__linesink_put(&s->ls, m, n);
}

/* The "N records dropped" message, when drops are pending and it fits. */
static void put_drops(le__syslog *s)
{
	unsigned char m[512], txt[64];
	if (!s->ls.drops_pending)
		return;
	int k = snprintf((char *)txt, sizeof txt, "%" PRIu64 " records dropped",
	                 s->ls.drops_pending);
	le__rec r = {.payload = txt, .len = (uint32_t)k, .level = LE_WARN,
	             .flags = LE_REC_MARKER, .ts = le__now_ns()};
	size_t n = le__syslog_format(m, sizeof m, &s->id, &r);
	if (!ring_room(s, n))
		return; /* later, with the count so far */
	ring_put(s, m, (uint32_t)n, 1);
	s->ls.drops_pending = 0;
}

/* Move whole messages from the ring into the send buffer (framed for
 * TCP) while they fit.  Caller holds mu. */
static void refill(le__syslog *s)
{
	if (s->done == s->nmsg) {
		s->sb_len = s->sb_off = 0;
		s->nmsg = s->done = 0;
	}
	while (s->ls.len && s->nmsg < SB_MSGS) {
		uint32_t v;
		ring_copy_out(s, 0, &v, 4);
		uint32_t n = v & ~MARK_BIT;
		char pre[16];
		int k = s->tcp ? snprintf(pre, sizeof pre, "%u ", n) : 0;
		if (s->sb_len + (size_t)k + n > SB_BYTES)
			break;
		s->start[s->nmsg] = (uint32_t)s->sb_len;
		memcpy(s->sb + s->sb_len, pre, (size_t)k);
		ring_copy_out(s, 4, s->sb + s->sb_len + k, n);
		s->sb_len += (size_t)k + n;
		s->end[s->nmsg] = (uint32_t)s->sb_len;
		s->mark[s->nmsg] = (v & MARK_BIT) != 0;
		s->nmsg++;
		s->ls.head = (s->ls.head + 4 + n) % s->ls.cap;
		s->ls.len -= 4 + n;
	}
	atomic_store(&s->inflight, s->nmsg - s->done);
}

/* Count messages [done, upto) as sent (or dropped) and step over them. */
static void finish(le__syslog *s, size_t upto, int sent)
{
	uint64_t recs = 0, bytes = 0;
	for (; s->done < upto; s->done++) {
		recs += !s->mark[s->done];
		bytes += s->end[s->done] - s->start[s->done];
	}
	if (sent) {
		atomic_fetch_add(&s->sent, recs);
		atomic_fetch_add(&s->bytes, bytes);
	} else {
		atomic_fetch_add(&s->ls.dropped, recs);
	}
	atomic_store(&s->inflight, s->nmsg - s->done);
}

/* ---- the connection (the thread's) ---- */

static void disconnect(le__syslog *s)
{
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	s->retry_at = le__mono_ns() + s->backoff;
	s->backoff = s->backoff * 2 > BACKOFF_MAX ? BACKOFF_MAX : s->backoff * 2;
	/* A message half sent goes again whole, on the next connection. */
	s->sb_off = s->done < s->nmsg ? s->start[s->done] : s->sb_len;
}

/*
 * The server's address from its host and port, unless known already.  A
 * host that does not resolve (a typo, DNS down) is counted, and the
 * thread tries again after the connection's backoff, as for a server
 * that is down.  getaddrinfo may block for the resolver's timeout: only
 * le_open's first try and the sink's own thread call it, never a writer.
 * @return 0, or LE_EINVAL (le_errmsg names the host).
 */
static int resolve(le__syslog *s)
{
	struct addrinfo hints = {.ai_socktype = s->tcp ? SOCK_STREAM : SOCK_DGRAM,
	                         .ai_flags = AI_NUMERICSERV};
	struct addrinfo *res;

	if (s->addrlen)
		return 0;
	int rc = getaddrinfo(s->host, s->port, &hints, &res);
	if (rc) {
		atomic_fetch_add(&s->resolve_errors, 1);
		le__seterr("syslog_addr: cannot resolve %s: %s", s->host,
		           gai_strerror(rc));
		return LE_EINVAL;
	}
	memcpy(&s->addr, res->ai_addr, res->ai_addrlen);
	s->addrlen = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

static int try_connect(le__syslog *s)
{
	int type = (s->tcp ? SOCK_STREAM : SOCK_DGRAM) | SOCK_NONBLOCK |
	           SOCK_CLOEXEC;
	int fd = socket(s->addr.ss_family, type, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&s->addr, s->addrlen) < 0) {
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		int err = 0;
		socklen_t el = sizeof err;
		if (errno != EINPROGRESS || poll(&p, 1, CONNECT_MS) <= 0 ||
		    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0 || err) {
			close(fd);
			return -1;
		}
	}
	if (s->tcp) {
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	}
	s->fd = fd;
	s->backoff = BACKOFF_MIN;
	atomic_fetch_add(&s->connects, 1);
	return 0;
}

/* Has the server closed its end (or reset it)?  It never writes to us,
 * so anything readable means the end. */
static int peer_gone(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
	char b[256];
	if (poll(&p, 1, 0) <= 0)
		return 0;
	if (p.revents & (POLLRDHUP | POLLHUP | POLLERR))
		return 1;
	ssize_t n = recv(fd, b, sizeof b, MSG_DONTWAIT);
	return n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR);
}

/* Wait until fd takes more, at most 100 ms. */
static void wait_out(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	poll(&p, 1, 100);
}

static void send_tcp(le__syslog *s)
{
	if (peer_gone(s->fd)) {
		disconnect(s);
		return;
	}
	ssize_t w = send(s->fd, s->sb + s->sb_off, s->sb_len - s->sb_off,
	                 MSG_DONTWAIT | MSG_NOSIGNAL);
	if (w < 0) {
		if (errno == EAGAIN || errno == EINTR)
			wait_out(s->fd);
		else
			disconnect(s);
		return;
	}
	s->sb_off += (size_t)w;
	size_t upto = s->done;
	while (upto < s->nmsg && s->end[upto] <= s->sb_off)
		upto++;
	finish(s, upto, 1);
}

/* One datagram per message, up to 64 a call.  A datagram refused (no
 * server on the port: ECONNREFUSED from an earlier ICMP) is dropped. */
static void send_udp(le__syslog *s)
{
	struct mmsghdr mm[64];
	struct iovec iov[64];
	size_t n = s->nmsg - s->done < 64 ? s->nmsg - s->done : 64;

	memset(mm, 0, sizeof mm[0] * n);
	for (size_t i = 0; i < n; i++) {
		size_t m = s->done + i;
		iov[i].iov_base = s->sb + s->start[m];
		iov[i].iov_len = s->end[m] - s->start[m];
		mm[i].msg_hdr.msg_iov = &iov[i];
		mm[i].msg_hdr.msg_iovlen = 1;
	}
	int k = sendmmsg(s->fd, mm, (unsigned)n, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (k > 0) {
		finish(s, s->done + (size_t)k, 1);
	} else if (k < 0 && (errno == EAGAIN || errno == EINTR ||
	                     errno == ENOBUFS)) {
		wait_out(s->fd);
	} else {
		finish(s, s->done + 1, 0);
		if (errno != ECONNREFUSED)
			disconnect(s);
	}
	s->sb_off = s->done < s->nmsg ? s->start[s->done] : s->sb_len;
}

/* ---- the thread ---- */

/* At the end: what is still waiting is dropped.  Caller holds mu. */
static void drop_rest(le__syslog *s)
{
	finish(s, s->nmsg, 0);
	while (s->ls.len) {
		refill(s);
		finish(s, s->nmsg, 0);
	}
	s->ls.drops_pending = 0; /* counted when they were dropped */
}

static void *syslog_main(void *arg)
{
	le__syslog *s = arg; /* its le__linesink, first */

	for (;;) {
		pthread_mutex_lock(&s->ls.mu);
		while (!s->ls.len && s->done == s->nmsg && !s->ls.stop &&
		       !s->ls.drops_pending)
			le__linesink_wait(&s->ls, 100);
		put_drops(s);
		refill(s);
		int stop = s->ls.stop, idle = s->done == s->nmsg;
		uint64_t now = le__mono_ns();
		pthread_cond_broadcast(&s->ls.cv); /* drained waiters */
		if (stop && (idle || now > s->ls.stop_deadline)) {
			drop_rest(s);
			pthread_cond_broadcast(&s->ls.cv);
			pthread_mutex_unlock(&s->ls.mu);
			break;
		}
		if (s->fd < 0 && now < s->retry_at && !idle) {
			/* Backing off; records wait in the ring, or drop. */
			long ms = (long)((s->retry_at - now) / MS) + 1;
			le__linesink_wait(&s->ls, ms < 100 ? ms : 100);
		}
		pthread_mutex_unlock(&s->ls.mu);
		if (idle)
			continue;
		if (s->fd < 0) {
			if (le__mono_ns() >= s->retry_at &&
			    (resolve(s) < 0 || try_connect(s) < 0))
				disconnect(s);
			continue;
		}
		if (s->tcp)
			send_tcp(s);
		else
			send_udp(s);
	}
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	s->ls.cpu_ns = le__self_cpu_ns();
	return NULL;
}

/* "tcp://HOST:PORT" or "udp://HOST:PORT"; HOST may be "[v6 address]". */
static int parse_addr(le__syslog *s, const char *a)
{
	const char *h, *colon;
	size_t hl;

	if (strncmp(a, "tcp://", 6) == 0)
		s->tcp = 1;
	else if (strncmp(a, "udp://", 6) != 0)
		goto bad;
	h = a + 6;
	if (*h == '[') {
		const char *rb = strchr(h, ']');
		if (!rb || rb[1] != ':')
			goto bad;
		h++;
		hl = (size_t)(rb - h);
		colon = rb + 1;
	} else {
		colon = strrchr(h, ':');
		if (!colon)
			goto bad;
		hl = (size_t)(colon - h);
	}
	if (!hl || hl >= sizeof s->host || !colon[1] ||
	    strlen(colon + 1) >= sizeof s->port ||
	    strspn(colon + 1, "0123456789") != strlen(colon + 1))
		goto bad;
	memcpy(s->host, h, hl);
	s->host[hl] = '\0';
	strcpy(s->port, colon + 1);
	return 0;
bad:
	le__seterr("syslog_addr: \"%s\" is not tcp://HOST:PORT or "
	           "udp://HOST:PORT", a);
	return LE_EINVAL;
}

static int syslog_open(le__linesink **out, const le_config *c)
{
	le__syslog *s = calloc(1, sizeof *s);
	int rc;

	*out = NULL;
	if (!s)
		return LE_ENOMEM;
	le__linesink_init(&s->ls, &le__syslog_kind);
	s->fd = -1;
	s->backoff = BACKOFF_MIN;
	rc = parse_addr(s, c->syslog_addr);
	if (rc < 0 && (c->store || c->stream_fd > 0 || c->stream_path)) {
		rc = 1; /* reported; the engine goes on without this output */
		goto fail;
	}
	if (rc < 0)
		goto fail; /* the only output: nowhere to log, refused */
	if (resolve(s) < 0)
		fprintf(stderr, "logengine: %s; retrying in the background\n",
		        le_errmsg());
	le__syslog_id_init(&s->id, c->syslog_facility, c->syslog_app,
	                   (long)getpid());
	/* A batch's messages: at most max_pending_bytes of payload, each
	 * message at most LE_SYSLOG_MSG_MAX; with fields as structured
	 * data, more than the payload (cut at the message limit). */
	size_t stage = (size_t)c->max_pending_bytes * 2 + LE_SYSLOG_MSG_MAX + 256;
	s->sb = malloc(SB_BYTES);
	rc = LE_ENOMEM;
	if (!s->sb)
		goto fail;
	rc = le__linesink_start(&s->ls, c->syslog_buffer_bytes, stage,
	                        "syslog_addr");
	if (rc < 0)
		goto fail;
	*out = &s->ls;
	return 0;
fail:
	le__linesink_close(&s->ls);
	return rc;
}

static void syslog_forget(le__linesink *ls)
{
	le__syslog *s = (le__syslog *)ls;

	if (s->fd >= 0)
		close(s->fd);
	free(s->sb);
	free(s);
}

static int syslog_drained(le__linesink *ls, int timeout_ms)
{
	le__syslog *s = (le__syslog *)ls;
	uint64_t dl = le__mono_ns() + (uint64_t)timeout_ms * MS;
	pthread_mutex_lock(&s->ls.mu);
	while ((s->ls.len || atomic_load(&s->inflight)) && s->ls.started) {
		if (timeout_ms >= 0 && le__mono_ns() > dl)
			break;
		le__linesink_wait(&s->ls, 10);
	}
	int done = !s->ls.len && !atomic_load(&s->inflight);
	pthread_mutex_unlock(&s->ls.mu);
	return done;
}

static void syslog_stats(le__linesink *ls, le_stats *o, int forked)
{
	le__syslog *s = (le__syslog *)ls;
	o->syslog_sent += atomic_load(&s->sent);
	o->syslog_dropped += atomic_load(&s->ls.dropped);
	o->syslog_bytes += atomic_load(&s->bytes);
	o->syslog_connects += atomic_load(&s->connects);
	o->syslog_resolve_errors += atomic_load(&s->resolve_errors);
	(void)forked;
}

/* linesink.h's push: whole messages into the ring; one that finds no
 * room is dropped and counted, and every one after it while drops are
 * pending, so that the count is reported before the next message that
 * gets through, in its place.  Caller holds mu. */
static void syslog_push(le__linesink *ls, const unsigned char *stage,
                        size_t len, size_t n, uint64_t dropped)
{
	le__syslog *s = (le__syslog *)ls;

	for (size_t off = 0; off < len;) {
		uint32_t v;
		memcpy(&v, stage + off, 4);
		uint32_t k = v & ~MARK_BIT;
		int mark = (v & MARK_BIT) != 0;
		if (s->ls.drops_pending && !mark)
			put_drops(s);
		if (!ring_room(s, k) || (s->ls.drops_pending && !mark))
			dropped += !mark;
		else
			ring_put(s, stage + off + 4, k, mark);
		off += 4 + k;
	}
	if (dropped) {
		atomic_fetch_add(&s->ls.dropped, dropped);
		s->ls.drops_pending += dropped;
	}
	if (n || dropped)
		pthread_cond_signal(&s->ls.cv);
}

static int syslog_wanted(const le_config *c)
{
	return c->syslog_addr != NULL;
}

static size_t syslog_line_max(const le__linesink *ls, size_t len)
{
	(void)ls;
	(void)len;
	return LE_SYSLOG_MSG_MAX;
}

static size_t syslog_line(le__linesink *ls, unsigned char *out, size_t cap,
                          uint32_t shard, const le__rec *r)
{
	(void)shard;
	return le__syslog_format(out, cap, &((le__syslog *)ls)->id, r);
}

const le__linekind le__syslog_kind = {
	.name = "syslog",
	.wanted = syslog_wanted,
	.open = syslog_open,
	.main = syslog_main,
	.line_max = syslog_line_max,
	.format = syslog_line,
	.push = syslog_push,
	.drained = syslog_drained,
	.stats = syslog_stats,
	.forget = syslog_forget,
};
