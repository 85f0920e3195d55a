/*
 * serve.c -- `logengine serve [--listen ADDR:PORT] [--listen-any]
 * [--max-clients N] [--max-connections N] [--max-per-ip N]
 * [--request-timeout S] [--tls-cert FILE --tls-key FILE]
 * [--basic-auth-file FILE] DIR...`: the live pages of running engines over
 * HTTP (libmicrohttpd), loopback only unless told otherwise.
 *
 *   GET /metrics   Prometheus text exposition (format 0.0.4), read from
 *                  the live pages at each scrape
 *   GET /          the dashboard (tools/dashboard.html, built in: no
 *                  other request leaves the page)
 *   GET /events    server-sent events: one frame a second (frame.h)
 *   GET /tail      the newest records the frames carried, for a page
 *                  that has just loaded (?logger=NAME: that logger's
 *                  and its children's only)
 *   GET /history.json  the last 15 minutes of each directory, a sample
 *                  a frame (frame.h), for a page that has just loaded
 *
 * Threads: libmicrohttpd's one epoll loop, which holds every connection
 * (thousands cost a few KiB each, not a thread each); the frame builder,
 * which builds each frame once, whatever the number of clients; and the
 * reaper, which cuts connections past their deadline:
 *
 *   builder --(every second)--> frame (refcounted) --> latest
 *                                                        |
 *   /events client: takes a reference to a frame newer than the one it
 *   sent and sends it; with none, it is suspended until the builder
 *   publishes the next one and resumes every suspended client
 *
 * A client holds at most one frame: one that reads slowly sends the
 * latest frame when it is done with the one it has, and the frames it
 * never saw are counted (skipped), never queued for it.  Clients past
 * --max-clients get 503 (counted); a client that stops reading is cut
 * when 30 s pass without progress; every /events disconnection is
 * counted.  All of it is in /metrics.
 *
 * Connections (one struct conn each, from libmicrohttpd's connect to its
 * close notice) are in one of three states:
 *
 *   WAIT   --(request head complete)-->  REPLY  --(reply sent)--> WAIT
 *          --(GET /events)----------->  STREAM (until it closes)
 *
 * A WAIT connection (no request yet, or idle between two) is cut
 * --request-timeout seconds after it entered WAIT, however it trickles:
 * libmicrohttpd's own timeout restarts at every byte, which a slowloris
 * client defeats.  A REPLY is cut after REPLY_S.  When a new connection
 * makes more than --max-connections (or more than --max-per-ip from its
 * address), the oldest WAIT connection (then the oldest REPLY) is cut to
 * make room: a new connection is always served, and what an attacker
 * holds open only ever costs it its own oldest connections.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <crypt.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"
#include "livedir.h"
#include "cli.h"
#include "observe.h"

static const char serve_usage[] =
	"usage: logengine serve [--listen ADDR:PORT] [--listen-any]\n"
	"                       [--max-clients N] [--max-connections N]\n"
	"                       [--max-per-ip N] [--request-timeout S]\n"
	"                       [--tls-cert FILE --tls-key FILE]\n"
	"                       [--basic-auth-file FILE] DIR...\n"
	"  --listen ADDR:PORT  where to listen (default 127.0.0.1:9470; port 0:\n"
	"                      any free port, printed at start)\n"
	"  --listen-any        allow an address that is not loopback\n"
	"  --max-clients N     /events streams at once (default 16)\n"
	"  --max-connections N connections held at once (default 4096); past\n"
	"                      it, a new one cuts the oldest waiting one\n"
	"  --max-per-ip N      connections held from one address (default 0:\n"
	"                      no limit but --max-connections)\n"
	"  --request-timeout S a request must arrive complete within S seconds\n"
	"                      of the connection or of the previous reply\n"
	"                      (default 5)\n"
	"  --tls-cert FILE, --tls-key FILE  serve HTTPS (PEM files)\n"
	"  --basic-auth-file FILE  require HTTP basic auth: USER:HASH lines,\n"
	"                      HASH from crypt(3) (bcrypt $2b$/$2y$, $6$, $y$)\n"
	"GET /metrics (Prometheus), / (dashboard), /events (server-sent\n"
	"events, one frame a second), /tail (newest records, JSON;\n"
	"?logger=NAME), /history.json (the last 15 minutes, a sample a\n"
	"second).  DIR: a log directory, or an empty one an engine is to\n"
	"write.\n";

#ifndef LE_HAVE_MHD

int cmd_serve(int argc, char **argv)
{
	if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		fputs(serve_usage, stdout);
		return 0;
	}
	fprintf(stderr, "logengine serve: this logengine was built without "
	        "libmicrohttpd (install libmicrohttpd-dev: scripts/deps.sh "
	        "observe, then make)\n");
	return 2;
}

#else
#include <microhttpd.h>

/* How far a forwarder is behind a shard (tools/logdir.c reads its
 * FORWARD cursor).  @return 0 when the shard has none. */
static int forwarder_lag(const char *dir, const le_live *l,
                         uint64_t *records, uint64_t *bytes)
{
	return forward_lag(dir, l->shard, l->next_seq, records, bytes);
}

#define DEFAULT_PORT 9470
#define DEFAULT_CLIENTS 16
#define DEFAULT_CONNS 4096
#define DEFAULT_REQUEST_S 5
#define REPLY_S 30             /* a reply other than /events, sent whole */
#define STREAM_IDLE_S 30       /* an /events client that takes nothing */
#define CONN_SLACK 64          /* libmicrohttpd's limit above ours: room
                                * for connections cut and not yet closed */
#define FD_SPARE 128           /* descriptors kept for the rest: the live
                                * pages, segment files, TLS */
#define FRAME_MAX (8u << 20)   /* a frame larger than this is cut */
#define METRICS_MAX (64u << 20)
#define HISTORY_MAX (16u << 20) /* 64 directories' 15 minutes fit */

/* The dashboard, built into the binary (no file to find at run time). */
__asm__(".section .rodata\n"
        ".global serve_dashboard_html\n"
        ".hidden serve_dashboard_html\n"
        "serve_dashboard_html:\n"
        ".incbin \"tools/dashboard.html\"\n"
        ".global serve_dashboard_html_end\n"
        ".hidden serve_dashboard_html_end\n"
        "serve_dashboard_html_end:\n"
        ".byte 0\n"
        ".previous\n");
extern const char serve_dashboard_html[], serve_dashboard_html_end[];

/* One frame as an event ("data: {...}\n\n"), shared by the clients
 * sending it. */
struct frame {
	char *data;
	size_t len;
	uint64_t seq;
	unsigned refs;          /* guarded by srv.mu */
};

static struct server {
	char **dirs;
	int ndirs;
	struct frames frames;   /* guarded by build_mu */
	pthread_mutex_t build_mu;
	pthread_mutex_t mu;     /* guards latest, refs, clients, stopping */
	pthread_cond_t cv;      /* stopping: the builder's sleep ends */
	struct frame *latest;
	struct sse *waiting;    /* suspended /events clients, under mu */
	int stopping;
	/* /metrics' readings, pages kept mapped: one scrape at a time */
	pthread_mutex_t metrics_mu;
	struct live_dir *mdirs;
	unsigned max_clients, clients;
	uint64_t refused, disconnects, sent, skipped, built; /* under mu */
	uint64_t frame_bytes, frame_ns;                      /* under mu */
} srv;

static void frame_unref(struct frame *f) /* srv.mu held */
{
	if (f && --f->refs == 0) {
		free(f->data);
		free(f);
	}
}

/* ---- the frame builder ---- */

static void wake_streams(void);

static void publish(struct buf *b, uint64_t ns)
{
	struct frame *f = malloc(sizeof *f);
	if (!f) {
		buf_free(b);
		return;
	}
	f->data = b->p;
	f->len = b->len;
	f->refs = 1; /* latest's */
	pthread_mutex_lock(&srv.mu);
	f->seq = ++srv.built;
	srv.frame_bytes = f->len;
	srv.frame_ns = ns;
	struct frame *old = srv.latest;
	srv.latest = f;
	frame_unref(old);
	wake_streams();
	pthread_cond_broadcast(&srv.cv);
	pthread_mutex_unlock(&srv.mu);
}

static void *builder(void *arg)
{
	(void)arg;
	struct timespec next;
	clock_gettime(CLOCK_MONOTONIC, &next);
	pthread_mutex_lock(&srv.mu);
	while (!srv.stopping) {
		char extra[256];
		snprintf(extra, sizeof extra,
		         "\"srv\":{\"clients\":%u,\"refused\":%" PRIu64
		         ",\"disconnects\":%" PRIu64 ",\"frame_bytes\":%" PRIu64
		         ",\"frame_us\":%.1f}",
		         srv.clients, srv.refused, srv.disconnects,
		         srv.frame_bytes, (double)srv.frame_ns / 1e3);
		pthread_mutex_unlock(&srv.mu);
		struct buf b;
		buf_init(&b, FRAME_MAX);
		uint64_t t0 = live_mono_ns();
		buf_put(&b, "data: ", 6);
		pthread_mutex_lock(&srv.build_mu);
		frames_build(&srv.frames, &b, extra);
		pthread_mutex_unlock(&srv.build_mu);
		buf_put(&b, "\n\n", 2);
		uint64_t ns = live_mono_ns() - t0;
		if (b.full) {
			buf_free(&b);
			buf_init(&b, 256);
			buf_printf(&b, "data: {\"error\":\"frame above %u bytes\"}\n\n",
			           FRAME_MAX);
		}
		publish(&b, ns);
		next.tv_sec++;
		pthread_mutex_lock(&srv.mu);
		while (!srv.stopping &&
		       pthread_cond_timedwait(&srv.cv, &srv.mu, &next) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&srv.mu);
	return NULL;
}

/* ---- /events ---- */

struct sse {
	struct MHD_Connection *mc; /* [const] */
	struct sse *next;       /* in srv.waiting while suspended, under mu */
	struct frame *f;        /* the frame being sent, referenced */
	size_t off;
	uint64_t seq;           /* of the last frame taken */
	int hello;              /* "retry:" sent */
};

static size_t put(char *buf, size_t max, const char *s, size_t n, size_t *off)
{
	size_t k = n - *off < max ? n - *off : max;
	memcpy(buf, s + *off, k);
	*off += k;
	return k;
}

/* Take the latest frame if it is newer than c's; srv.mu held.
 * @return 1 taken, 0 none newer. */
static int next_frame(struct sse *c)
{
	if (!srv.latest || srv.latest->seq == c->seq)
		return 0;
	if (c->seq && srv.latest->seq > c->seq + 1)
		srv.skipped += srv.latest->seq - c->seq - 1;
	c->f = srv.latest;
	c->f->refs++;
	c->seq = c->f->seq;
	c->off = 0;
	return 1;
}

/* Resume every suspended /events client (a new frame, or stopping);
 * srv.mu held.  The order srv.mu, then libmicrohttpd's own lock, is the
 * one sse_read's suspend takes too. */
static void wake_streams(void)
{
	for (struct sse *c = srv.waiting; c; c = c->next)
		MHD_resume_connection(c->mc);
	srv.waiting = NULL;
}

/* libmicrohttpd's reader for /events, on its event loop: it must never
 * wait.  With no newer frame the client is suspended (taken out of the
 * loop) and 0 returned; publish() resumes it and libmicrohttpd calls
 * again. */
static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	static const char hello[] = "retry: 2000\n\n";
	struct sse *c = cls;
	size_t off = 0;

	(void)pos;
	if (!c->hello) {
		c->hello = 1;
		return (ssize_t)put(buf, max, hello, sizeof hello - 1, &off);
	}
	if (!c->f || c->off == c->f->len) {
		pthread_mutex_lock(&srv.mu);
		if (c->f) {
			srv.sent++;
			frame_unref(c->f);
			c->f = NULL;
		}
		if (srv.stopping) {
			pthread_mutex_unlock(&srv.mu);
			return MHD_CONTENT_READER_END_OF_STREAM;
		}
		if (!next_frame(c)) {
			c->next = srv.waiting;
			srv.waiting = c;
			MHD_suspend_connection(c->mc);
			pthread_mutex_unlock(&srv.mu);
			return 0;
		}
		pthread_mutex_unlock(&srv.mu);
	}
	return (ssize_t)put(buf, max, c->f->data, c->f->len, &c->off);
}

static void sse_free(void *cls)
{
	struct sse *c = cls;
	pthread_mutex_lock(&srv.mu);
	frame_unref(c->f);
	srv.clients--;
	srv.disconnects++;
	pthread_mutex_unlock(&srv.mu);
	free(c);
}

/* ---- connections: deadlines and room ---- */

enum cstate { C_WAIT, C_REPLY, C_STREAM, C_CUT };

struct conn {
	struct conn *prev, *next; /* in conns.list[state], oldest first */
	int fd;                   /* [const] the socket, open until closed() */
	struct sockaddr_storage addr; /* [const] the peer */
	enum cstate state;        /* under conns.mu */
	uint64_t since_ns;        /* entered state, monotonic; under conns.mu */
};

struct clist {
	struct conn *head, *tail;
	unsigned n;
};

enum cut_why { CUT_DEADLINE, CUT_ROOM, CUT_PER_IP, CUT_WHYS };

static struct conns {
	pthread_mutex_t mu;       /* guards all below and every conn */
	pthread_cond_t cv;        /* stopping */
	struct clist list[C_CUT]; /* WAIT, REPLY, STREAM; cut ones in none */
	unsigned max, per_ip;     /* [const] --max-connections, --max-per-ip */
	uint64_t deadline_ns[C_STREAM]; /* [const] of WAIT, of REPLY */
	uint64_t cut[CUT_WHYS];   /* connections cut, by reason */
	uint64_t accepted;        /* connections seen */
	int stopping;
} conns;

static void clist_add(struct clist *l, struct conn *c)
{
	c->next = NULL;
	c->prev = l->tail;
	if (l->tail)
		l->tail->next = c;
	else
		l->head = c;
	l->tail = c;
	l->n++;
}

static void clist_del(struct clist *l, struct conn *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		l->head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		l->tail = c->prev;
	l->n--;
}

/* Move c to state st from now; conns.mu held.  A cut connection stays
 * cut: libmicrohttpd may still finish a request on it before it reads
 * the shutdown. */
static void conn_move(struct conn *c, enum cstate st)
{
	if (c->state == C_CUT)
		return;
	clist_del(&conns.list[c->state], c);
	c->state = st;
	c->since_ns = live_mono_ns();
	if (st != C_CUT)
		clist_add(&conns.list[st], c);
}

/* Cut c: shut its socket down, so that libmicrohttpd's loop reads the
 * end of it and closes the connection; conns.mu held.  Safe against a
 * descriptor reused by another connection: libmicrohttpd closes the
 * descriptor only after its close notice, and the notice (closed())
 * takes conns.mu and unlinks c first. */
static void conn_cut(struct conn *c, enum cut_why why)
{
	if (c->state == C_CUT)
		return;
	conn_move(c, C_CUT);
	conns.cut[why]++;
	shutdown(c->fd, SHUT_RDWR);
}

static int same_addr(const struct sockaddr_storage *a,
                     const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return 0;
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
	               &((const struct sockaddr_in6 *)b)->sin6_addr,
	               sizeof(struct in6_addr));
}

/* The oldest WAIT connection, else the oldest REPLY, from addr (any
 * address when NULL), other than c; conns.mu held.  @return it or NULL. */
static struct conn *oldest(const struct sockaddr_storage *addr,
                           const struct conn *c)
{
	for (int st = C_WAIT; st <= C_REPLY; st++)
		for (struct conn *o = conns.list[st].head; o; o = o->next)
			if (o != c && (!addr || same_addr(addr, &o->addr)))
				return o;
	return NULL;
}

static unsigned held_from(const struct sockaddr_storage *addr)
{
	unsigned n = 0;
	for (int st = C_WAIT; st < C_CUT; st++)
		for (struct conn *o = conns.list[st].head; o; o = o->next)
			n += same_addr(addr, &o->addr);
	return n;
}

static unsigned held(void)
{
	return conns.list[C_WAIT].n + conns.list[C_REPLY].n +
	       conns.list[C_STREAM].n;
}

/* Make room for c, just come: past --max-per-ip from its address, or
 * past --max-connections in all, cut the oldest waiting (then replying)
 * connection, or c itself when every other one streams; conns.mu held. */
static void make_room(struct conn *c)
{
	while (conns.per_ip && c->state != C_CUT &&
	       held_from(&c->addr) > conns.per_ip) {
		struct conn *o = oldest(&c->addr, c);
		conn_cut(o ? o : c, CUT_PER_IP);
	}
	while (c->state != C_CUT && held() > conns.max) {
		struct conn *o = oldest(NULL, c);
		conn_cut(o ? o : c, CUT_ROOM);
	}
}

static void opened(struct MHD_Connection *mc, void **ctx)
{
	const union MHD_ConnectionInfo *fd =
		MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
	const union MHD_ConnectionInfo *ad =
		MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	struct conn *c = fd ? calloc(1, sizeof *c) : NULL;
	*ctx = c; /* NULL: untracked, in no list (closed() skips it);
	             libmicrohttpd's own timeout still holds */
	if (!c)
		return;
	c->fd = fd->connect_fd;
	if (ad && ad->client_addr) {
		socklen_t len = ad->client_addr->sa_family == AF_INET6
			? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
		memcpy(&c->addr, ad->client_addr, len);
	}
	pthread_mutex_lock(&conns.mu);
	conns.accepted++;
	c->state = C_WAIT;
	c->since_ns = live_mono_ns();
	clist_add(&conns.list[C_WAIT], c);
	make_room(c);
	pthread_mutex_unlock(&conns.mu);
}

static void closed(struct conn *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&conns.mu);
	if (c->state != C_CUT)
		clist_del(&conns.list[c->state], c);
	pthread_mutex_unlock(&conns.mu);
	free(c);
}

/* libmicrohttpd's notice of a connection opened or closed. */
static void on_connection(void *cls, struct MHD_Connection *mc, void **ctx,
                          enum MHD_ConnectionNotificationCode code)
{
	(void)cls;
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		opened(mc, ctx);
	} else {
		closed(*ctx);
		*ctx = NULL;
	}
}

static struct conn *conn_of(struct MHD_Connection *mc)
{
	const union MHD_ConnectionInfo *i =
		MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return i ? i->socket_context : NULL;
}

/* The connection's state changes: a request head has come (REPLY or
 * STREAM), or a reply has been sent (WAIT). */
static void conn_state(struct MHD_Connection *mc, enum cstate st)
{
	struct conn *c = conn_of(mc);
	if (!c)
		return;
	pthread_mutex_lock(&conns.mu);
	conn_move(c, st);
	pthread_mutex_unlock(&conns.mu);
}

/* libmicrohttpd's notice that a request ended (its reply sent, or not):
 * the connection waits for the next request, on a new deadline. */
static void on_completed(void *cls, struct MHD_Connection *mc, void **state,
                         enum MHD_RequestTerminationCode why)
{
	(void)cls;
	(void)state;
	(void)why;
	conn_state(mc, C_WAIT);
}

/* Cut the connections of list st past their deadline; conns.mu held.
 * @return ns until the next deadline there, at most 1 s. */
static uint64_t reap(enum cstate st, uint64_t now)
{
	uint64_t wait = 1000000000;
	struct conn *c;
	while ((c = conns.list[st].head)) {
		uint64_t due = c->since_ns + conns.deadline_ns[st];
		if (due > now) {
			if (due - now < wait)
				wait = due - now;
			break;
		}
		conn_cut(c, CUT_DEADLINE);
	}
	return wait;
}

/* The reaper: each list is in deadline order (a connection enters at the
 * tail, and all of a list share one timeout), so only heads are due. */
static void *reaper(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&conns.mu);
	while (!conns.stopping) {
		uint64_t now = live_mono_ns();
		uint64_t w = reap(C_WAIT, now), r = reap(C_REPLY, now);
		if (r < w)
			w = r;
		struct timespec dl;
		clock_gettime(CLOCK_MONOTONIC, &dl);
		w += 1000000; /* 1 ms late rather than 1 ns early, again */
		dl.tv_sec += (time_t)(w / 1000000000);
		dl.tv_nsec += (long)(w % 1000000000);
		if (dl.tv_nsec >= 1000000000) {
			dl.tv_sec++;
			dl.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&conns.cv, &conns.mu, &dl);
	}
	pthread_mutex_unlock(&conns.mu);
	return NULL;
}

/* ---- /metrics ---- */

enum kind { U64, INT, NS };

struct fam {
	const char *name, *type, *help;
	size_t off;
	enum kind kind;
};

#define F(name, type, field, kind, help) \
	{"logengine_" name, type, help, offsetof(le_live, field), kind}

/* Per shard: labels dir and shard. */
static const struct fam shard_fams[] = {
	F("records_accepted_total", "counter", accepted, U64,
	  "Records accepted: taken from the queue by the writer, or dropped "
	  "because the queue was full. Records still queued are in "
	  "logengine_queue_records."),
	F("records_written_total", "counter", written, U64,
	  "Records written to segment files (drop markers excluded)."),
	F("records_dropped_total", "counter", dropped, U64,
	  "Records dropped: the queue was full, or their write failed."),
	F("records_dropped_io_total", "counter", dropped_io, U64,
	  "Records dropped because their write failed."),
	F("bytes_written_total", "counter", bytes_written, U64,
	  "Bytes written to segment files, framing included."),
	F("markers_total", "counter", markers, U64,
	  "'N records dropped' marker records written."),
	F("segments_created_total", "counter", segments_created, U64,
	  "Segment files created."),
	F("segments_deleted_total", "counter", segments_deleted, U64,
	  "Segment files deleted by retention."),
	F("syncs_total", "counter", syncs, U64, "fdatasync calls on segments."),
	F("checkpoints_total", "counter", checkpoints, U64,
	  "Checkpoints written."),
	F("write_errors_total", "counter", write_errors, U64,
	  "Failed write attempts (retried)."),
	F("sync_errors_total", "counter", sync_errors, U64, "Failed syncs."),
	F("records_sync_lost_total", "counter", sync_lost, U64,
	  "Records written whose sync then failed."),
	F("records_recovered_total", "counter", recovered_records, U64,
	  "Records a dead process left queued, written when the engine "
	  "opened."),
	F("writer_cpu_seconds_total", "counter", writer_cpu_ns, NS,
	  "CPU time of the shard's writer thread."),
	F("queue_ring_bytes", "gauge", ring_bytes, U64,
	  "Bytes of the shard's ring claimed now, slot headers and padding "
	  "included."),
	F("queue_ring_size_bytes", "gauge", ring_size, U64,
	  "Size of the shard's ring."),
	F("segments", "gauge", segments, U64,
	  "Segment files of the shard now, the active one included."),
	F("disk_bytes", "gauge", disk_bytes, U64,
	  "Bytes of the shard's segment files."),
	F("writes_failing", "gauge", failing, INT,
	  "1 while the shard's writes fail and are retried."),
	F("live_page_age_seconds", "gauge", age_ns, NS,
	  "Time since the shard's writer last published its live page."),
};

/* The flight recorder, per shard (a table of its own). */
static const struct fam bt_fams[] = {
	F("backtrace_records_total", "counter", backtrace_written, U64,
	  "Records the flight recorder kept below their logger's threshold "
	  "and wrote out as recorded history (le_set_backtrace)."),
};

/* Per directory, from the page published last: label dir. */
static const struct fam dir_fams[] = {
	F("queue_records", "gauge", queue_records, U64,
	  "Records queued now, all shards (the queue's bounds are global)."),
	F("queue_bytes", "gauge", queue_bytes, U64,
	  "Payload bytes queued now, all shards."),
	F("queue_capacity_records", "gauge", queue_capacity, U64,
	  "The queue's bound in records (queue_capacity)."),
	F("queue_capacity_bytes", "gauge", queue_capacity_bytes, U64,
	  "The queue's bound in payload bytes (queue_capacity_bytes)."),
	F("queue_high_water_records", "gauge", queue_hwm_records, U64,
	  "Most records ever queued at once."),
	F("queue_high_water_bytes", "gauge", queue_hwm_bytes, U64,
	  "Most payload bytes ever queued at once."),
	F("records_truncated_total", "counter", truncated, U64,
	  "Records cut to max_record_bytes."),
	F("records_rejected_total", "counter", rejected, U64,
	  "Records refused as too big (oversize REJECT)."),
	F("calls_blocked_total", "counter", blocked, U64,
	  "le_write calls that waited for room (overflow BLOCK)."),
};

/* Rate limits per call site (the _every macros): label dir. */
static const struct fam rl_fams[] = {
	F("records_suppressed_total", "counter", suppressed, U64,
	  "Calls of rate-limited call sites suppressed, as their \"N similar "
	  "records suppressed\" records reported them."),
};

static const struct {
	const char *name, *help;
	size_t off;
} hists[] = {
	{"logengine_write_latency_seconds",
	 "Duration of a batch's write system calls.",
	 offsetof(le_live, write)},
	{"logengine_fsync_latency_seconds", "Duration of fdatasync on a segment.",
	 offsetof(le_live, sync)},
	{"logengine_queue_wait_seconds",
	 "Time from a record's stamp until the batch that carried it was "
	 "written (sampled records: one le_write call in 1024 per thread).",
	 offsetof(le_live, queue_wait)},
	{"logengine_submit_latency_seconds",
	 "Duration of a le_write or le_logf call (one in 1024 per thread).",
	 offsetof(le_live, submit)},
};

/* The level names of logengine_records_total, LE_TRACE .. LE_FATAL. */
static const char *const level_names[LE_FATAL + 1] = {
	"trace", "debug", "info", "warn", "error", "fatal",
};

/* Label value: backslash, double quote and newline escaped. */
static void label(struct buf *b, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			buf_printf(b, "\\%c", *s);
		else if (*s == '\n')
			buf_put(b, "\\n", 2);
		else
			buf_put(b, s, 1);
	}
}

static void head(struct buf *b, const char *name, const char *type,
                 const char *help)
{
	buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void labels(struct buf *b, const char *name, const char *dir,
                   int shard, const char *more)
{
	buf_printf(b, "%s{dir=\"", name);
	label(b, dir);
	if (shard >= 0)
		buf_printf(b, "\",shard=\"%d", shard);
	buf_printf(b, "\"%s} ", more ? more : "");
}

static void value(struct buf *b, const le_live *l, const struct fam *f)
{
	const char *p = (const char *)l + f->off;
	if (f->kind == INT) {
		int v;
		memcpy(&v, p, sizeof v);
		buf_printf(b, "%d\n", v);
		return;
	}
	uint64_t v;
	memcpy(&v, p, sizeof v);
	if (f->kind == NS)
		buf_printf(b, "%.9f\n", (double)v / 1e9);
	else
		buf_printf(b, "%" PRIu64 "\n", v);
}

/* Buckets with upper bounds 2^6 ns (64 ns) .. 2^36 ns (68.7 s). */
#define LE_LO 6
#define LE_HI 36

static void hist(struct buf *b, const char *name, const char *dir, int shard,
                 const le_live_hist *h)
{
	char n[96], le[64];
	uint64_t cum = 0;
	int k = 0;
	snprintf(n, sizeof n, "%s_bucket", name);
	for (int i = LE_LO; i <= LE_HI; i++) {
		while (k < i && k < LE_LIVE_BUCKETS)
			cum += h->bucket[k++];
		snprintf(le, sizeof le, ",le=\"%.9g\"", (double)(1ull << i) / 1e9);
		labels(b, n, dir, shard, le);
		buf_printf(b, "%" PRIu64 "\n", cum);
	}
	labels(b, n, dir, shard, ",le=\"+Inf\"");
	buf_printf(b, "%" PRIu64 "\n", h->count);
	snprintf(n, sizeof n, "%s_sum", name);
	labels(b, n, dir, shard, NULL);
	buf_printf(b, "%.9f\n", (double)h->sum_ns / 1e9);
	snprintf(n, sizeof n, "%s_count", name);
	labels(b, n, dir, shard, NULL);
	buf_printf(b, "%" PRIu64 "\n", h->count);
}

/* logengine_records_total{level}: per shard, what its writer counted. */
static void level_metrics(struct buf *b, const struct live_dir *d, int nd)
{
	char more[32];
	head(b, "logengine_records_total", "counter",
	     "Records the shard's writer took from the queue, by level (those "
	     "dropped as the queue was full never reach it: "
	     "logengine_records_dropped_total).");
	for (int k = 0; k < nd; k++)
		for (unsigned i = 0; i < d[k].n; i++)
			for (int lv = 0; lv <= LE_FATAL; lv++) {
				snprintf(more, sizeof more, ",level=\"%s\"",
				         level_names[lv]);
				labels(b, "logengine_records_total", d[k].path,
				       (int)i, more);
				buf_printf(b, "%" PRIu64 "\n",
				           d[k].cur[i].level_records[lv]);
			}
}

/* logengine_shard_state{state}: 1 for the shard's state, 0 for the
 * others, as Prometheus has an enumeration. */
static void state_metrics(struct buf *b, const struct live_dir *d, int nd)
{
	char more[32];
	head(b, "logengine_shard_state", "gauge",
	     "The shard's state, from its live page: 1 for the state it is in "
	     "(none, running, stale, stopped, dead), 0 for the others.");
	for (int k = 0; k < nd; k++)
		for (unsigned i = 0; i < d[k].n; i++)
			for (int st = LE_LIVE_NONE; st <= LE_LIVE_DEAD; st++) {
				snprintf(more, sizeof more, ",state=\"%s\"",
				         live_state_name(st));
				labels(b, "logengine_shard_state", d[k].path,
				       (int)i, more);
				buf_printf(b, "%d\n", d[k].cur[i].state == st);
			}
}

/* The connections' gauges and counters, in /metrics. */
static void conn_metrics(struct buf *b)
{
	static const char *const states[] = {"wait", "reply", "stream"};
	static const char *const whys[] = {"deadline", "room", "per_ip"};
	unsigned n[C_CUT];
	uint64_t cut[CUT_WHYS], accepted;
	pthread_mutex_lock(&conns.mu);
	for (int k = 0; k < C_CUT; k++)
		n[k] = conns.list[k].n;
	memcpy(cut, conns.cut, sizeof cut);
	accepted = conns.accepted;
	pthread_mutex_unlock(&conns.mu);
	head(b, "logengine_serve_connections", "gauge",
	     "Connections held now, by state: wait (for a request), reply, "
	     "stream (/events).");
	for (int k = 0; k < C_CUT; k++)
		buf_printf(b, "logengine_serve_connections{state=\"%s\"} %u\n",
		           states[k], n[k]);
	head(b, "logengine_serve_connections_total", "counter",
	     "Connections accepted.");
	buf_printf(b, "logengine_serve_connections_total %" PRIu64 "\n",
	           accepted);
	head(b, "logengine_serve_connections_cut_total", "counter",
	     "Connections the server cut: past the request deadline "
	     "(--request-timeout) or the reply's, to make room for a new one "
	     "(--max-connections), or past --max-per-ip.");
	for (int k = 0; k < CUT_WHYS; k++)
		buf_printf(b, "logengine_serve_connections_cut_total{reason=\"%s\"} "
		           "%" PRIu64 "\n", whys[k], cut[k]);
}

static void serve_metrics(struct buf *b)
{
	pthread_mutex_lock(&srv.mu);
	uint64_t st[] = {srv.clients, srv.refused, srv.disconnects, srv.built,
	                 srv.skipped, srv.frame_bytes, srv.frame_ns};
	pthread_mutex_unlock(&srv.mu);
	head(b, "logengine_serve_sse_clients", "gauge",
	     "/events streams open now.");
	buf_printf(b, "logengine_serve_sse_clients %" PRIu64 "\n", st[0]);
	head(b, "logengine_serve_sse_refused_total", "counter",
	     "/events streams refused: --max-clients open already.");
	buf_printf(b, "logengine_serve_sse_refused_total %" PRIu64 "\n", st[1]);
	head(b, "logengine_serve_sse_disconnects_total", "counter",
	     "/events streams that ended (the client left, or was cut).");
	buf_printf(b, "logengine_serve_sse_disconnects_total %" PRIu64 "\n",
	           st[2]);
	head(b, "logengine_serve_frames_total", "counter", "Frames built.");
	buf_printf(b, "logengine_serve_frames_total %" PRIu64 "\n", st[3]);
	head(b, "logengine_serve_frames_skipped_total", "counter",
	     "Frames a slow /events client never got (it was sent the latest "
	     "instead).");
	buf_printf(b, "logengine_serve_frames_skipped_total %" PRIu64 "\n",
	           st[4]);
	head(b, "logengine_serve_frame_bytes", "gauge",
	     "Bytes of the latest frame.");
	buf_printf(b, "logengine_serve_frame_bytes %" PRIu64 "\n", st[5]);
	head(b, "logengine_serve_frame_build_seconds", "gauge",
	     "Time the latest frame took to build.");
	buf_printf(b, "logengine_serve_frame_build_seconds %.9f\n",
	           (double)st[6] / 1e9);
	conn_metrics(b);
}

/* Families of per-shard values: labels dir and shard. */
static void shard_families(struct buf *b, const struct live_dir *d, int nd,
                           const struct fam *fams, size_t n)
{
	for (size_t f = 0; f < n; f++) {
		head(b, fams[f].name, fams[f].type, fams[f].help);
		for (int k = 0; k < nd; k++)
			for (unsigned i = 0; i < d[k].n; i++) {
				labels(b, fams[f].name, d[k].path, (int)i, NULL);
				value(b, &d[k].cur[i], &fams[f]);
			}
	}
}

/* Families with one value per directory, from its engine's page. */
static void dir_families(struct buf *b, struct live_dir *d, int nd,
                         const struct fam *fams, size_t n)
{
	for (size_t f = 0; f < n; f++) {
		head(b, fams[f].name, fams[f].type, fams[f].help);
		for (int k = 0; k < nd; k++)
			if (d[k].engine) {
				labels(b, fams[f].name, d[k].path, -1, NULL);
				value(b, d[k].engine, &fams[f]);
			}
	}
}

static void metrics(struct buf *b, struct live_dir *d, int nd)
{
	for (int k = 0; k < nd; k++)
		live_dir_read(&d[k]);
	head(b, "logengine_up", "gauge",
	     "1 while the engine writing the directory runs (a shard's live "
	     "page is fresh), else 0.");
	for (int k = 0; k < nd; k++) {
		labels(b, "logengine_up", d[k].path, -1, NULL);
		buf_printf(b, "%d\n", d[k].state == LE_LIVE_RUNNING);
	}
	shard_families(b, d, nd, shard_fams,
	               sizeof shard_fams / sizeof *shard_fams);
	shard_families(b, d, nd, bt_fams, sizeof bt_fams / sizeof *bt_fams);
	level_metrics(b, d, nd);
	state_metrics(b, d, nd);
	dir_families(b, d, nd, dir_fams, sizeof dir_fams / sizeof *dir_fams);
	dir_families(b, d, nd, rl_fams, sizeof rl_fams / sizeof *rl_fams);
	for (size_t h = 0; h < sizeof hists / sizeof *hists; h++) {
		head(b, hists[h].name, "histogram", hists[h].help);
		for (int k = 0; k < nd; k++)
			for (unsigned i = 0; i < d[k].n; i++)
				hist(b, hists[h].name, d[k].path, (int)i,
				     (const le_live_hist *)((const char *)&d[k].cur[i] +
				                            hists[h].off));
	}
	/* Forwarder lag, only where a forwarder keeps a cursor. */
	static const char *const lag[2][2] = {
		{"logengine_forwarder_lag_records",
		 "Records written and not yet shipped by logengine forward."},
		{"logengine_forwarder_lag_bytes",
		 "Bytes written and not yet shipped by logengine forward."},
	};
	for (int f = 0; f < 2; f++) {
		int seen = 0;
		for (int k = 0; k < nd; k++)
			for (unsigned i = 0; i < d[k].n; i++) {
				uint64_t v[2];
				if (!forwarder_lag(d[k].path, &d[k].cur[i], &v[0],
				                   &v[1]))
					continue;
				if (!seen++)
					head(b, lag[f][0], "gauge", lag[f][1]);
				labels(b, lag[f][0], d[k].path, (int)i, NULL);
				buf_printf(b, "%" PRIu64 "\n", v[f]);
			}
	}
	serve_metrics(b);
}

/* ---- basic auth ---- */

struct user {
	char *name, *hash;        /* [const] from --basic-auth-file */
	char *good;               /* the last password that matched, under
	                           * auth.mu: a scrape every 15 s would
	                           * otherwise pay a bcrypt each time */
};

static struct auth {
	struct user *u;           /* [const] */
	char *text;               /* [const] the file, which u points into */
	int n;                    /* [const] 0: no auth */
	pthread_mutex_t mu;
} auth;

/* Equal strings, in a time that does not tell how much of them match. */
static int same_secret(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned char d = la != lb;
	for (size_t i = 0; i < la && i < lb; i++)
		d |= (unsigned char)(a[i] ^ b[i]);
	return d == 0;
}

/*
 * The time the event loop may spend hashing passwords: a bucket of
 * seconds, HASH_BURST_S at most, refilled at HASH_SHARE of the clock,
 * under auth.mu.  Every hash runs on the one event-loop thread, and a
 * bcrypt of cost 12 takes a quarter of a second: without a budget, a
 * stream of wrong passwords would keep the loop hashing and every other
 * request waiting.  A hash is tried while the bucket is not empty and
 * its time taken out after (so it may go below zero); a scraper whose
 * password matched once is checked against its cached password and
 * never needs the budget.
 */
#define HASH_SHARE 0.1
#define HASH_BURST_S 1.0
static double hash_tokens = HASH_BURST_S, hash_last;

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* May a password be hashed now?  Under auth.mu. */
static int hash_budget(void)
{
	double now = mono_s();

	hash_tokens += (now - hash_last) * HASH_SHARE;
	if (hash_tokens > HASH_BURST_S)
		hash_tokens = HASH_BURST_S;
	hash_last = now;
	return hash_tokens > 0;
}

/* Does pass hash to u's hash (crypt(3): bcrypt, sha512crypt, yescrypt)?
 * u NULL (no such user) hashes against the first user's hash all the
 * same, so that a name's existence does not show in the time taken.
 * Past the hashing budget the answer is no, at once.  @return 1 yes, 0
 * no. */
static int password_ok(struct user *u, const char *pass)
{
	int ok = 0, may;
	pthread_mutex_lock(&auth.mu);
	if (u && u->good && same_secret(u->good, pass))
		ok = 1;
	may = ok || hash_budget();
	pthread_mutex_unlock(&auth.mu);
	if (ok || !may)
		return ok;
	const char *want = u ? u->hash : auth.u[0].hash;
	struct crypt_data *cd = calloc(1, sizeof *cd);
	double t0 = mono_s();
	const char *h = cd ? crypt_rn(pass, want, cd, sizeof *cd) : NULL;
	ok = u && h && h[0] == '$' && same_secret(h, want);
	pthread_mutex_lock(&auth.mu);
	hash_tokens -= mono_s() - t0;
	pthread_mutex_unlock(&auth.mu);
	free(cd);
	if (ok) {
		char *g = strdup(pass);
		pthread_mutex_lock(&auth.mu);
		free(u->good);
		u->good = g;
		pthread_mutex_unlock(&auth.mu);
	}
	return ok;
}

/* @return 1 when no auth is asked for or c's credentials match. */
static int authorized(struct MHD_Connection *c)
{
	if (!auth.n)
		return 1;
	char *pass = NULL;
	char *name = MHD_basic_auth_get_username_password(c, &pass);
	struct user *u = NULL;
	for (int i = 0; name && !u && i < auth.n; i++)
		if (!strcmp(auth.u[i].name, name))
			u = &auth.u[i];
	int ok = name && pass && password_ok(u, pass);
	MHD_free(name);
	MHD_free(pass);
	return ok;
}

static enum MHD_Result deny(struct MHD_Connection *c)
{
	static const char msg[] = "unauthorized\n";
	struct MHD_Response *r = MHD_create_response_from_buffer(
		sizeof msg - 1, (void *)msg, MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	enum MHD_Result ok = MHD_queue_basic_auth_fail_response(c, "logengine",
	                                                        r);
	MHD_destroy_response(r);
	return ok;
}

/* A whole file, NUL-terminated.  @return it (malloc'd) or NULL, errno
 * set. */
static char *read_file(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0)
		return NULL;
	char *p = NULL;
	if (fstat(fd, &st) == 0 && st.st_size < (1 << 24) &&
	    (p = malloc((size_t)st.st_size + 1))) {
		ssize_t n = read(fd, p, (size_t)st.st_size);
		if (n != st.st_size) {
			free(p);
			p = NULL;
			errno = n < 0 ? errno : EIO;
		} else {
			p[n] = '\0';
		}
	}
	int e = errno;
	close(fd);
	errno = e;
	return p;
}

/* One "USER:HASH" line into u.  @return 0, or -1 when it is not one. */
static int parse_user(char *line, struct user *u)
{
	char *colon = strchr(line, ':');
	if (!colon || colon == line || colon[1] != '$')
		return -1;
	*colon = '\0';
	u->name = line;
	u->hash = colon + 1;
	struct crypt_data *cd = calloc(1, sizeof *cd);
	/* crypt(3) of a hash it cannot read starts with '*'. */
	const char *h = cd ? crypt_rn("", u->hash, cd, sizeof *cd) : NULL;
	int ok = h && h[0] == '$';
	free(cd);
	return ok ? 0 : -1;
}

/* Forget the users read so far (a bad file). */
static void drop_users(void)
{
	free(auth.u);
	free(auth.text);
	auth.u = NULL;
	auth.text = NULL;
	auth.n = 0;
}

/* One line of --basic-auth-file into the next user.  @return 0, or -1
 * when it is not "USER:HASH" or memory ran out. */
static int add_user(char *l)
{
	struct user *u = realloc(auth.u, (size_t)(auth.n + 1) * sizeof *u);
	if (!u)
		return -1;
	auth.u = u;
	memset(&u[auth.n], 0, sizeof *u);
	if (parse_user(l, &u[auth.n]) < 0)
		return -1;
	auth.n++;
	return 0;
}

/* --basic-auth-file: USER:HASH lines; blank lines and '#' comments.
 * @return 0, or 2 (the exit status) after saying why. */
static int load_users(const char *path)
{
	char *save = NULL;
	if (!(auth.text = read_file(path))) {
		fprintf(stderr, "logengine serve: --basic-auth-file %s: %s\n",
		        path, strerror(errno));
		return 2;
	}
	int lineno = 0;
	for (char *l = strtok_r(auth.text, "\n", &save); l;
	     l = strtok_r(NULL, "\n", &save)) {
		lineno++;
		l[strcspn(l, "\r")] = '\0';
		if (!*l || *l == '#' || add_user(l) == 0)
			continue;
		fprintf(stderr, "logengine serve: --basic-auth-file %s:%d: want "
		        "USER:HASH, HASH from crypt(3) (htpasswd -nB USER, or "
		        "mkpasswd -m bcrypt)\n", path, lineno);
		drop_users();
		return 2;
	}
	if (!auth.n) {
		fprintf(stderr, "logengine serve: --basic-auth-file %s: no "
		        "user\n", path);
		drop_users();
		return 2;
	}
	return 0;
}

/* ---- requests ---- */

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status,
                             const char *type, void *body, size_t len,
                             enum MHD_ResponseMemoryMode mode)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, body, mode);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", type);
	MHD_add_response_header(r, "Cache-Control", "no-store");
	enum MHD_Result ok = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ok;
}

static enum MHD_Result text(struct MHD_Connection *c, unsigned status,
                            const char *msg)
{
	return reply(c, status, "text/plain; charset=utf-8", (void *)msg,
	             strlen(msg), MHD_RESPMEM_PERSISTENT);
}

static enum MHD_Result send_buf(struct MHD_Connection *c, struct buf *b,
                                const char *type)
{
	if (b->full || !b->p) {
		buf_free(b);
		return text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
	}
	return reply(c, MHD_HTTP_OK, type, b->p, b->len, MHD_RESPMEM_MUST_FREE);
}

static enum MHD_Result get_metrics(struct MHD_Connection *c)
{
	struct buf b;

	buf_init(&b, METRICS_MAX);
	pthread_mutex_lock(&srv.metrics_mu);
	metrics(&b, srv.mdirs, srv.ndirs);
	pthread_mutex_unlock(&srv.metrics_mu);
	return send_buf(c, &b, "text/plain; version=0.0.4; charset=utf-8");
}

static enum MHD_Result get_events(struct MHD_Connection *c)
{
	pthread_mutex_lock(&srv.mu);
	int full = srv.clients >= srv.max_clients;
	if (full)
		srv.refused++;
	else
		srv.clients++;
	pthread_mutex_unlock(&srv.mu);
	if (full)
		return text(c, MHD_HTTP_SERVICE_UNAVAILABLE,
		            "too many /events clients (--max-clients)\n");
	struct sse *s = calloc(1, sizeof *s);
	if (s)
		s->mc = c;
	struct MHD_Response *r =
		s ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 << 10,
		                                      sse_read, s, sse_free)
		  : NULL;
	if (!r) {
		if (s)
			sse_free(s);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", "text/event-stream");
	MHD_add_response_header(r, "Cache-Control", "no-store");
	/* A stream has no deadline but --max-clients and its idleness. */
	conn_state(c, C_STREAM);
	MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT,
	                          (unsigned)STREAM_IDLE_S);
	enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ok;
}

static enum MHD_Result get_tail(struct MHD_Connection *c)
{
	struct buf b;
	buf_init(&b, 1u << 20);
	pthread_mutex_lock(&srv.build_mu);
	frames_tail_json(&srv.frames, &b,
	                 MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND,
	                                             "logger"));
	pthread_mutex_unlock(&srv.build_mu);
	return send_buf(c, &b, "application/json");
}

static enum MHD_Result get_history(struct MHD_Connection *c)
{
	struct buf b;
	buf_init(&b, HISTORY_MAX);
	pthread_mutex_lock(&srv.build_mu);
	frames_history_json(&srv.frames, &b);
	pthread_mutex_unlock(&srv.build_mu);
	return send_buf(c, &b, "application/json");
}

static enum MHD_Result get_dashboard(struct MHD_Connection *c)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(
		(size_t)(serve_dashboard_html_end - serve_dashboard_html),
		(void *)serve_dashboard_html, MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", "text/html; charset=utf-8");
	MHD_add_response_header(r, "Cache-Control", "no-store");
	/* Everything the page needs is in it, or from this server. */
	MHD_add_response_header(r, "Content-Security-Policy",
	                        "default-src 'self'; script-src 'unsafe-inline'; "
	                        "style-src 'unsafe-inline'; img-src 'self' data:");
	enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ok;
}

static enum MHD_Result route(struct MHD_Connection *c, const char *url,
                             const char *method)
{
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
		return text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "GET only\n");
	if (!strcmp(url, "/"))
		return get_dashboard(c);
	if (!strcmp(url, "/metrics"))
		return get_metrics(c);
	if (!strcmp(url, "/events"))
		return get_events(c);
	if (!strcmp(url, "/tail"))
		return get_tail(c);
	if (!strcmp(url, "/history.json"))
		return get_history(c);
	return text(c, MHD_HTTP_NOT_FOUND,
	            "not found: /, /metrics, /events, /tail, /history.json\n");
}

/* libmicrohttpd's handler: called when a request's head is complete
 * (again for each piece of a body, which no route takes: the first call
 * answers).  The connection leaves WAIT; get_events makes it STREAM. */
static enum MHD_Result handle(void *cls, struct MHD_Connection *c,
                              const char *url, const char *method,
                              const char *version, const char *upload,
                              size_t *upload_len, void **state)
{
	(void)cls;
	(void)version;
	(void)upload;
	(void)upload_len;
	(void)state;
	conn_state(c, C_REPLY);
	if (!authorized(c))
		return deny(c);
	return route(c, url, method);
}

/* ---- arguments ---- */

struct listen {
	struct sockaddr_storage ss;
	int v6, loopback;
};

/* ADDR:PORT with ADDR an IPv4 address, [IPv6] or localhost.
 * @return 0 or -1. */
static int parse_listen(const char *s, struct listen *l)
{
	char host[128];
	const char *colon = strrchr(s, ':');
	if (!colon || colon == s || (size_t)(colon - s) >= sizeof host)
		return -1;
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = '\0';
	char *end;
	long port = strtol(colon + 1, &end, 10);
	if (!colon[1] || *end || port < 0 || port > 65535)
		return -1;
	memset(l, 0, sizeof *l);
	if (!strcmp(host, "localhost"))
		strcpy(host, "127.0.0.1");
	size_t hl = strlen(host);
	if (host[0] == '[' && host[hl - 1] == ']') {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&l->ss;
		host[hl - 1] = '\0';
		if (inet_pton(AF_INET6, host + 1, &a->sin6_addr) != 1)
			return -1;
		a->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)port);
		l->v6 = 1;
		l->loopback = IN6_IS_ADDR_LOOPBACK(&a->sin6_addr);
		return 0;
	}
	struct sockaddr_in *a = (struct sockaddr_in *)&l->ss;
	if (inet_pton(AF_INET, host, &a->sin_addr) != 1)
		return -1;
	a->sin_family = AF_INET;
	a->sin_port = htons((uint16_t)port);
	l->loopback = (ntohl(a->sin_addr.s_addr) >> 24) == 127;
	return 0;
}

static int usage(const char *why, const char *what)
{
	fprintf(stderr, "logengine serve: ");
	fprintf(stderr, why, what);
	fprintf(stderr, "\n%s", serve_usage);
	return 2;
}

struct opts {
	const char *addr, *cert, *key, *users;
	int any;
	long max_clients, max_conns, per_ip, request_s;
	struct listen l;
};

/* A number option's value in [lo, hi].  @return 0, or -1 when not. */
static int num(const char *s, long lo, long hi, long *v)
{
	char *end;
	errno = 0;
	long n = strtol(s, &end, 10);
	if (errno || end == s || *end || n < lo || n > hi)
		return -1;
	*v = n;
	return 0;
}

static const struct {
	const char *name;
	size_t off;
	long lo, hi;
} num_opts[] = {
	{"--max-clients", offsetof(struct opts, max_clients), 1, 1024},
	{"--max-connections", offsetof(struct opts, max_conns), 32, 1 << 20},
	{"--max-per-ip", offsetof(struct opts, per_ip), 0, 1 << 20},
	{"--request-timeout", offsetof(struct opts, request_s), 1, 3600},
};

/* Option a with value v, if a is a number option.  @return 1 taken,
 * 0 not one, or 2 (the exit status) after saying why. */
static int num_opt(struct opts *o, const char *a, const char *v)
{
	for (size_t k = 0; k < sizeof num_opts / sizeof *num_opts; k++) {
		if (strcmp(a, num_opts[k].name) != 0)
			continue;
		if (!v || num(v, num_opts[k].lo, num_opts[k].hi,
		              (long *)((char *)o + num_opts[k].off)) < 0) {
			fprintf(stderr, "logengine serve: %s: want %ld to %ld\n%s",
			        a, num_opts[k].lo, num_opts[k].hi, serve_usage);
			return 2;
		}
		return 1;
	}
	return 0;
}

/* A string option's value, or NULL when a is not one. */
static const char **str_opt(struct opts *o, const char *a)
{
	if (!strcmp(a, "--listen"))
		return &o->addr;
	if (!strcmp(a, "--tls-cert"))
		return &o->cert;
	if (!strcmp(a, "--tls-key"))
		return &o->key;
	if (!strcmp(a, "--basic-auth-file"))
		return &o->users;
	return NULL;
}

/* The command line into o and srv.dirs.  @return 0, 1 after --help, or
 * 2 (the exit status) after saying why. */
static int serve_args(int argc, char **argv, struct opts *o, char **dirs)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		const char **s = str_opt(o, a);
		int r;
		if (s && v) {
			*s = v;
			i++;
		} else if (!strncmp(a, "--listen=", 9))
			o->addr = a + 9;
		else if (!strcmp(a, "--listen-any"))
			o->any = 1;
		else if ((r = num_opt(o, a, v)) == 1)
			i++;
		else if (r)
			return r;
		else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			fputs(serve_usage, stdout);
			fflush(stdout);
			return 1;
		} else if (a[0] == '-')
			return usage("unknown option '%s' (or its value missing)", a);
		else if (srv.ndirs == LIVE_MAX_DIRS)
			return usage("at most 64 directories (%s)", a);
		else
			dirs[srv.ndirs++] = argv[i];
	}
	if (!srv.ndirs)
		return usage("%s", "missing DIR");
	for (int k = 0; k < srv.ndirs; k++)
		if (check_log_dir_to_come(dirs[k]))
			return 2;
	if (!o->cert != !o->key)
		return usage("%s", "--tls-cert and --tls-key go together");
	if (parse_listen(o->addr, &o->l) < 0)
		return usage("--listen '%s': want ADDR:PORT (127.0.0.1:9470, "
		             "[::1]:9470)", o->addr);
	if (!o->l.loopback && !o->any)
		return usage("--listen '%s' is not a loopback address: the "
		             "counters and records would be open to the "
		             "network; add --listen-any to mean it", o->addr);
	return 0;
}

/* Raise the open-file soft limit to the hard one (a connection is a
 * descriptor), and keep --max-connections within it. */
static void fit_files(struct opts *o)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	if (rl.rlim_cur < rl.rlim_max) {
		rlim_t want = rl.rlim_max;
		rl.rlim_cur = want;
		/* an unlimited hard limit is not a number setrlimit takes */
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0 && want == RLIM_INFINITY) {
			rl.rlim_cur = 1 << 20;
			setrlimit(RLIMIT_NOFILE, &rl);
		}
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	long room = rl.rlim_cur > (rlim_t)(1 << 21) ? 1 << 21
		: (long)rl.rlim_cur - CONN_SLACK - FD_SPARE;
	if (o->max_conns > room) {
		fprintf(stderr, "logengine serve: --max-connections %ld lowered to "
		        "%ld: the open-file limit is %lu (raise its hard limit: "
		        "ulimit -Hn, LimitNOFILE=)\n", o->max_conns,
		        room < 32 ? 32 : room, (unsigned long)rl.rlim_cur);
		o->max_conns = room < 32 ? 32 : room;
	}
}

/* Say loudly what an open listener without TLS or auth gives away. */
static void warn_open(const struct opts *o)
{
	if (o->l.loopback || (o->cert && o->users))
		return;
	fprintf(stderr, "logengine serve: WARNING: listening on %s, not a "
	        "loopback address, %s%s%s: anyone who reaches it reads the "
	        "counters and the newest records%s\n", o->addr,
	        o->cert ? "" : "without TLS (--tls-cert, --tls-key)",
	        !o->cert && !o->users ? " and " : "",
	        o->users ? "" : "without auth (--basic-auth-file)",
	        o->cert ? "" : ", and what a client sends is in the clear");
}

static void shutdown_all(struct MHD_Daemon *d, pthread_t b, pthread_t r)
{
	pthread_mutex_lock(&srv.mu);
	srv.stopping = 1;
	wake_streams(); /* each resumed reader sees stopping and ends */
	pthread_cond_broadcast(&srv.cv);
	pthread_mutex_unlock(&srv.mu);
	if (d)
		MHD_stop_daemon(d);
	pthread_mutex_lock(&conns.mu);
	conns.stopping = 1;
	pthread_cond_broadcast(&conns.cv);
	pthread_mutex_unlock(&conns.mu);
	pthread_join(r, NULL);
	pthread_join(b, NULL);
	frame_unref(srv.latest);
	srv.latest = NULL;
	frames_free(&srv.frames);
	for (int k = 0; srv.mdirs && k < srv.ndirs; k++)
		live_dir_free(&srv.mdirs[k]);
	free(srv.mdirs);
}

static void init_locks(void)
{
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_mutex_init(&srv.mu, NULL);
	pthread_mutex_init(&srv.build_mu, NULL);
	pthread_mutex_init(&srv.metrics_mu, NULL);
	pthread_cond_init(&srv.cv, &ca);
	pthread_mutex_init(&conns.mu, NULL);
	pthread_cond_init(&conns.cv, &ca);
	pthread_mutex_init(&auth.mu, NULL);
}

/* The TLS files and the users, read before anything starts.
 * @return 0, or 2 (the exit status) after saying why. */
static int load_secrets(const struct opts *o, char **cert, char **key)
{
	if (o->cert && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
		fprintf(stderr, "logengine serve: this libmicrohttpd has no TLS\n");
		return 2;
	}
	const char *paths[2] = {o->cert, o->key};
	char **out[2] = {cert, key};
	for (int k = 0; o->cert && k < 2; k++)
		if (!(*out[k] = read_file(paths[k]))) {
			fprintf(stderr, "logengine serve: %s: %s\n", paths[k],
			        strerror(errno));
			return 2;
		}
	return o->users ? load_users(o->users) : 0;
}

/* libmicrohttpd's messages, at most one a second with a count of those
 * left out: a client makes one per connection it drops, and an attack
 * thousands. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	static uint64_t last_ns, quiet;
	(void)cls;
	uint64_t now = live_mono_ns();
	pthread_mutex_lock(&mu);
	if (last_ns && now - last_ns < 1000000000u) {
		quiet++;
		pthread_mutex_unlock(&mu);
		return;
	}
	last_ns = now;
	char msg[512];
	vsnprintf(msg, sizeof msg, fmt, ap);
	msg[strcspn(msg, "\n")] = '\0';
	if (quiet)
		fprintf(stderr, "logengine serve: %s (%" PRIu64 " messages "
		        "since the one before left out)\n", msg, quiet);
	else
		fprintf(stderr, "logengine serve: %s\n", msg);
	quiet = 0;
	pthread_mutex_unlock(&mu);
}

/* libmicrohttpd on one epoll thread, with our connection notices and
 * timeouts.  @return the daemon or NULL. */
static struct MHD_Daemon *start_daemon(const struct opts *o, char *cert,
                                       char *key)
{
	struct MHD_OptionItem tls[] = {
		{MHD_OPTION_HTTPS_MEM_CERT, 0, cert},
		{MHD_OPTION_HTTPS_MEM_KEY, 0, key},
		{MHD_OPTION_END, 0, NULL},
	};
	return MHD_start_daemon(
		MHD_USE_EPOLL_INTERNALLY | MHD_ALLOW_SUSPEND_RESUME |
			MHD_USE_ERROR_LOG | (o->l.v6 ? MHD_USE_IPv6 : 0) |
			(cert ? MHD_USE_TLS : 0),
		0, NULL, NULL, handle, NULL,
		MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, /* first: for all */
		MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&o->l.ss,
		MHD_OPTION_CONNECTION_LIMIT,
		(unsigned)(o->max_conns + CONN_SLACK),
		/* no progress for this long cuts any connection; a stream
		 * gets STREAM_IDLE_S.  One second past the reaper's deadline,
		 * which counts from the connection's start: a connection that
		 * sends nothing reaches both together, and the reaper must
		 * cut it first, counted as a deadline cut. */
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)o->request_s + 1,
		MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL,
		MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
		MHD_OPTION_ARRAY, cert ? tls : tls + 2,
		MHD_OPTION_END);
}

static int start_threads(pthread_t *b, pthread_t *r)
{
	if (pthread_create(b, NULL, builder, NULL) != 0)
		return -1;
	if (pthread_create(r, NULL, reaper, NULL) == 0)
		return 0;
	pthread_mutex_lock(&srv.mu);
	srv.stopping = 1;
	pthread_cond_broadcast(&srv.cv);
	pthread_mutex_unlock(&srv.mu);
	pthread_join(*b, NULL);
	return -1;
}

static void say_listening(const struct opts *o, struct MHD_Daemon *d)
{
	const union MHD_DaemonInfo *di =
		MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	printf("logengine serve: listening on http%s://%.*s:%u/ (%d "
	       "director%s)\n", o->cert ? "s" : "",
	       (int)(strrchr(o->addr, ':') - o->addr), o->addr,
	       di ? di->port : 0, srv.ndirs, srv.ndirs == 1 ? "y" : "ies");
	fflush(stdout);
}

int cmd_serve(int argc, char **argv)
{
	static char *dirs[LIVE_MAX_DIRS];
	struct opts o = {.addr = "127.0.0.1:9470",
	                 .max_clients = DEFAULT_CLIENTS,
	                 .max_conns = DEFAULT_CONNS,
	                 .request_s = DEFAULT_REQUEST_S};
	static char *cert, *key; /* static: whatever path returns, reachable */

	int rc = serve_args(argc, argv, &o, dirs);
	if (rc)
		return rc == 1 ? 0 : rc;
	fit_files(&o);
	if (o.max_clients + 16 > o.max_conns)
		return usage("%s", "--max-clients: at most --max-connections "
		             "less 16");
	if ((rc = load_secrets(&o, &cert, &key)))
		return rc;
	warn_open(&o);
	srv.dirs = dirs;
	srv.max_clients = (unsigned)o.max_clients;
	conns.max = (unsigned)o.max_conns;
	conns.per_ip = (unsigned)o.per_ip;
	conns.deadline_ns[C_WAIT] = (uint64_t)o.request_s * 1000000000u;
	conns.deadline_ns[C_REPLY] = (uint64_t)REPLY_S * 1000000000u;
	init_locks();
	srv.mdirs = calloc((size_t)srv.ndirs, sizeof *srv.mdirs);
	int ok = srv.mdirs != NULL;
	for (int k = 0; ok && k < srv.ndirs; k++)
		ok = live_dir_init(&srv.mdirs[k], dirs[k]) == 0;
	if (!ok || frames_init(&srv.frames, dirs, srv.ndirs) < 0) {
		fprintf(stderr, "logengine serve: out of memory\n");
		return 2;
	}
	/* Every thread blocks the stop signals; this one waits for them. */
	sigset_t stop;
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &stop, NULL);
	/* a client gone mid-reply must not end the process */
	signal(SIGPIPE, SIG_IGN);
	pthread_t b, r;
	if (start_threads(&b, &r) < 0) {
		fprintf(stderr, "logengine serve: cannot start a thread\n");
		return 2;
	}
	struct MHD_Daemon *d = start_daemon(&o, cert, key);
	if (!d) {
		fprintf(stderr, "logengine serve: cannot listen on %s: %s\n",
		        o.addr, strerror(errno));
		shutdown_all(NULL, b, r);
		return 2;
	}
	say_listening(&o, d);
	int sig;
	sigwait(&stop, &sig);
	shutdown_all(d, b, r);
	printf("logengine serve: stopped (%s)\n", strsignal(sig));
	fflush(stdout);
	return 0;
}

#endif /* LE_HAVE_MHD */
