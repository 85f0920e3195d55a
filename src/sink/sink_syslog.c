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

#define MARK_BIT 0x80000000u
#define MS 1000000ull
#define BACKOFF_MIN (100 * MS)
#define BACKOFF_MAX (5000 * MS)
#define CONNECT_MS 500
/* The send buffer: whole messages taken from the ring, framed for TCP. */
#define SB_BYTES (64 * 1024 + LE_SYSLOG_MSG_MAX + 16)
#define SB_MSGS 256

struct le__syslog {
	/* [const] */
	int tcp;
	struct sockaddr_storage addr;
	socklen_t addrlen;
	le__syslog_id id;
	size_t stage_cap;            /* a port's stage */
	pthread_t thread;
	int started;
	/* mu guards ring, head, len, drops_pending, stop, stop_deadline;
	 * cv (CLOCK_MONOTONIC) wakes the thread, and le__syslog_drained. */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned char *ring;
	size_t cap, head, len;
	uint64_t drops_pending;
	int stop;
	uint64_t stop_deadline;
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
	_Atomic uint64_t sent, dropped, bytes, connects;
	uint64_t cpu_ns;             /* the thread's CPU time when it ended */
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

size_t le__syslog_format(unsigned char *out, size_t cap,
                         const le__syslog_id *id, const le__rec *r)
{
	const unsigned char *msg = r->payload, *fb = NULL;
	size_t mlen = r->len, flen = 0, w;
	int sev = le_level_syslog(r->level);

	if (cap > LE_SYSLOG_MSG_MAX)
		cap = LE_SYSLOG_MSG_MAX;
	if ((r->flags & LE_REC_FIELDS) &&
	    le__fields_split(r->payload, r->len, &fb, &flen, &msg, &mlen) < 0)
		flen = 0;
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
	if (mlen > cap - w)
		mlen = cap - w;
	memcpy(out + w, msg, mlen);
	return w + mlen;
}

/* ---- the ring (caller holds mu) ---- */

static void ring_copy_in(le__syslog *s, const void *p, size_t n)
{
	size_t at = (s->head + s->len) % s->cap, first = s->cap - at;
	if (first > n)
		first = n;
	memcpy(s->ring + at, p, first);
	memcpy(s->ring, (const char *)p + first, n - first);
	s->len += n;
}

static void ring_copy_out(le__syslog *s, size_t off, void *p, size_t n)
{
	size_t at = (s->head + off) % s->cap, first = s->cap - at;
	if (first > n)
		first = n;
	memcpy(p, s->ring + at, first);
	memcpy((char *)p + first, s->ring, n - first);
}

/* Room for one more message of n bytes (and its length word). */
static int ring_room(const le__syslog *s, size_t n)
{
	return s->cap - s->len >= n + 4;
}

static void ring_put(le__syslog *s, const unsigned char *m, uint32_t n,
                     int mark)
{
	unsigned char h[4];
	uint32_t v = n | (mark ? MARK_BIT : 0);
	memcpy(h, &v, 4);
	ring_copy_in(s, h, 4);
	ring_copy_in(s, m, n);
}

/* The "N records dropped" message, when drops are pending and it fits. */
static void put_drops(le__syslog *s)
{
	unsigned char m[512], txt[64];
	if (!s->drops_pending)
		return;
	int k = snprintf((char *)txt, sizeof txt, "%" PRIu64 " records dropped",
	                 s->drops_pending);
	le__rec r = {.payload = txt, .len = (uint32_t)k, .level = LE_WARN,
	             .flags = LE_REC_MARKER, .ts = le__now_ns()};
	size_t n = le__syslog_format(m, sizeof m, &s->id, &r);
	if (!ring_room(s, n))
		return; /* later, with the count so far */
	ring_put(s, m, (uint32_t)n, 1);
	s->drops_pending = 0;
}

/* Move whole messages from the ring into the send buffer (framed for
 * TCP) while they fit.  Caller holds mu. */
static void refill(le__syslog *s)
{
	if (s->done == s->nmsg) {
		s->sb_len = s->sb_off = 0;
		s->nmsg = s->done = 0;
	}
	while (s->len && s->nmsg < SB_MSGS) {
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
		s->head = (s->head + 4 + n) % s->cap;
		s->len -= 4 + n;
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
		atomic_fetch_add(&s->dropped, recs);
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

static void wait_ms(le__syslog *s, long ms)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	t.tv_nsec += ms * 1000000;
	if (t.tv_nsec >= 1000000000) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000;
	}
	pthread_cond_timedwait(&s->cv, &s->mu, &t);
}

/* At the end: what is still waiting is dropped.  Caller holds mu. */
static void drop_rest(le__syslog *s)
{
	finish(s, s->nmsg, 0);
	while (s->len) {
		refill(s);
		finish(s, s->nmsg, 0);
	}
	s->drops_pending = 0; /* counted when they were dropped */
}

static void *syslog_main(void *arg)
{
	le__syslog *s = arg;

	for (;;) {
		pthread_mutex_lock(&s->mu);
		while (!s->len && s->done == s->nmsg && !s->stop &&
		       !s->drops_pending)
			wait_ms(s, 100);
		put_drops(s);
		refill(s);
		int stop = s->stop, idle = s->done == s->nmsg;
		uint64_t now = le__mono_ns();
		pthread_cond_broadcast(&s->cv); /* drained waiters */
		if (stop && (idle || now > s->stop_deadline)) {
			drop_rest(s);
			pthread_cond_broadcast(&s->cv);
			pthread_mutex_unlock(&s->mu);
			break;
		}
		if (s->fd < 0 && now < s->retry_at && !idle) {
			/* Backing off; records wait in the ring, or drop. */
			long ms = (long)((s->retry_at - now) / MS) + 1;
			wait_ms(s, ms < 100 ? ms : 100);
		}
		pthread_mutex_unlock(&s->mu);
		if (idle)
			continue;
		if (s->fd < 0) {
			if (le__mono_ns() >= s->retry_at && try_connect(s) < 0)
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
	s->cpu_ns = le__self_cpu_ns();
	return NULL;
}

/* "tcp://HOST:PORT" or "udp://HOST:PORT"; HOST may be "[v6 address]". */
static int parse_addr(le__syslog *s, const char *a)
{
	char host[256], port[16];
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
	if (!hl || hl >= sizeof host || !colon[1] ||
	    strlen(colon + 1) >= sizeof port ||
	    strspn(colon + 1, "0123456789") != strlen(colon + 1))
		goto bad;
	memcpy(host, h, hl);
	host[hl] = '\0';
	strcpy(port, colon + 1);
	struct addrinfo hints = {.ai_socktype = s->tcp ? SOCK_STREAM : SOCK_DGRAM,
	                         .ai_flags = AI_NUMERICSERV};
	struct addrinfo *res;
	int rc = getaddrinfo(host, port, &hints, &res);
	if (rc) {
		le__seterr("syslog_addr: cannot resolve %s: %s", host,
		           gai_strerror(rc));
		return LE_EINVAL;
	}
	memcpy(&s->addr, res->ai_addr, res->ai_addrlen);
	s->addrlen = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
bad:
	le__seterr("syslog_addr: \"%s\" is not tcp://HOST:PORT or "
	           "udp://HOST:PORT", a);
	return LE_EINVAL;
}

int le__syslog_open(le__syslog **out, const le_config *c)
{
	pthread_condattr_t ca;
	le__syslog *s = calloc(1, sizeof *s);
	int rc;

	*out = NULL;
	if (!s)
		return LE_ENOMEM;
	s->fd = -1;
	s->backoff = BACKOFF_MIN;
	pthread_mutex_init(&s->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cv, &ca);
	pthread_condattr_destroy(&ca);
	rc = parse_addr(s, c->syslog_addr);
	if (rc < 0)
		goto fail;
	le__syslog_id_init(&s->id, c->syslog_facility, c->syslog_app,
	                   (long)getpid());
	s->cap = c->syslog_buffer_bytes;
	/* A batch's messages: at most max_pending_bytes of payload, each
	 * message at most LE_SYSLOG_MSG_MAX; with fields as structured
	 * data, more than the payload (cut at the message limit). */
	s->stage_cap = (size_t)c->max_pending_bytes * 2 + LE_SYSLOG_MSG_MAX + 256;
	s->ring = malloc(s->cap);
	s->sb = malloc(SB_BYTES);
	rc = LE_ENOMEM;
	if (!s->ring || !s->sb)
		goto fail;
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = -pthread_create(&s->thread, NULL, syslog_main, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc < 0) {
		le__seterr("syslog_addr: cannot start the syslog thread");
		goto fail;
	}
	le__name_thread(s->thread, "le-syslog");
	s->started = 1;
	*out = s;
	return 0;
fail:
	le__syslog_close(s);
	return rc;
}

void le__syslog_stop(le__syslog *s)
{
	if (!s || !s->started)
		return;
	pthread_mutex_lock(&s->mu);
	s->stop = 1;
	/* A server that keeps up gets everything; a dead or stalled one a
	 * second, then the rest is dropped and counted. */
	s->stop_deadline = le__mono_ns() + 1000 * MS;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->thread, NULL);
	s->started = 0;
}

void le__syslog_forget(le__syslog *s)
{
	if (!s)
		return;
	if (s->fd >= 0)
		close(s->fd);
	free(s->ring);
	free(s->sb);
	free(s);
}

void le__syslog_close(le__syslog *s)
{
	if (!s)
		return;
	le__syslog_stop(s);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	le__syslog_forget(s);
}

int le__syslog_drained(le__syslog *s, int timeout_ms)
{
	uint64_t dl = le__mono_ns() + (uint64_t)timeout_ms * MS;
	pthread_mutex_lock(&s->mu);
	while ((s->len || atomic_load(&s->inflight)) && s->started) {
		if (timeout_ms >= 0 && le__mono_ns() > dl)
			break;
		wait_ms(s, 10);
	}
	int done = !s->len && !atomic_load(&s->inflight);
	pthread_mutex_unlock(&s->mu);
	return done;
}

void le__syslog_stats(le__syslog *s, le_stats *o, int forked)
{
	o->syslog_sent += atomic_load(&s->sent);
	o->syslog_dropped += atomic_load(&s->dropped);
	o->syslog_bytes += atomic_load(&s->bytes);
	o->syslog_connects += atomic_load(&s->connects);
	(void)forked;
}

/* ---- a shard writer's port ---- */

typedef struct port {
	le__sink sink;
	le__syslog *s;
	unsigned char *stage;    /* messages, each after a u32 length */
	size_t len, cap;
	size_t n, max;
	uint64_t dropped;        /* records whose message did not fit */
	unsigned char *plain;    /* a deferred record's text (le__rec_plain) */
	size_t plain_cap;
} port;

/* Format each record's message into the stage; one that does not fit is
 * dropped and counted there.  Takes every record. */
static size_t port_put(le__sink *sk, const le__rec *r, size_t n)
{
	port *p = (port *)sk;

	for (size_t i = 0; i < n; i++) {
		if (p->n == p->max || p->cap - p->len < LE_SYSLOG_MSG_MAX + 4) {
			p->dropped += !(r[i].flags & LE_REC_MARKER);
			continue;
		}
		le__rec x;
		le__rec_plain(&r[i], &x, p->plain, p->plain_cap);
		size_t k = le__syslog_format(p->stage + p->len + 4,
		                             LE_SYSLOG_MSG_MAX, &p->s->id, &x);
		uint32_t v = (uint32_t)k |
		             ((x.flags & LE_REC_MARKER) ? MARK_BIT : 0);
		memcpy(p->stage + p->len, &v, 4);
		p->len += 4 + k;
		p->n++;
	}
	return n;
}

/* Hand the stage's messages to the ring.  Never fails: what finds no
 * room is dropped and counted. */
static int port_commit(le__sink *sk)
{
	port *p = (port *)sk;
	le__syslog *s = p->s;
	uint64_t dropped = p->dropped;

	pthread_mutex_lock(&s->mu);
	for (size_t off = 0; off < p->len;) {
		uint32_t v;
		memcpy(&v, p->stage + off, 4);
		uint32_t k = v & ~MARK_BIT;
		int mark = (v & MARK_BIT) != 0;
		/* Lost records are reported before the next one that gets
		 * through, in their place. */
		if (s->drops_pending && !mark)
			put_drops(s);
		if (!ring_room(s, k) || (s->drops_pending && !mark)) {
			dropped += !mark;
		} else {
			ring_put(s, p->stage + off + 4, k, mark);
		}
		off += 4 + k;
	}
	if (dropped) {
		atomic_fetch_add(&s->dropped, dropped);
		s->drops_pending += dropped;
	}
	if (p->n || dropped)
		pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
	p->n = p->len = 0;
	p->dropped = 0;
	return 0;
}

static void port_drop(le__sink *sk, uint64_t unseen)
{
	((port *)sk)->dropped += unseen;
	port_commit(sk);
}

static void port_close(le__sink *sk)
{
	port_commit(sk);
}

static void port_free(le__sink *sk)
{
	port *p = (port *)sk;
	if (!p)
		return;
	free(p->stage);
	free(p->plain);
	free(p);
}

static const le__sink_ops port_ops = {
	.put = port_put,
	.commit = port_commit,
	.drop = port_drop,
	.close = port_close,
	.free = port_free,
};

int le__syslog_port(le__sink **out, le__syslog *s, uint32_t shard,
                    uint32_t batch, uint32_t max_rec)
{
	port *p = calloc(1, sizeof *p);

	(void)shard;
	*out = NULL;
	if (!p)
		return LE_ENOMEM;
	p->sink.ops = &port_ops;
	p->s = s;
	p->max = (size_t)batch + 64;
	p->cap = s->stage_cap;
	p->stage = malloc(p->cap);
	p->plain_cap = (size_t)max_rec + 1;
	p->plain = malloc(p->plain_cap);
	if (!p->stage || !p->plain) {
		free(p->stage);
		free(p->plain);
		free(p);
		return LE_ENOMEM;
	}
	*out = &p->sink;
	return 0;
}
