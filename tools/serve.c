/*
 * serve.c -- `logengine serve [--listen ADDR:PORT] [--listen-any]
 * [--max-clients N] DIR...`: the live pages of running engines over HTTP
 * (libmicrohttpd), loopback only unless told otherwise.
 *
 *   GET /metrics   Prometheus text exposition (format 0.0.4), read from
 *                  the live pages at each scrape
 *   GET /          the dashboard (tools/dashboard.html, built in: no
 *                  other request leaves the page)
 *   GET /events    server-sent events: one frame a second (frame.h)
 *   GET /tail      the newest records the frames carried, for a page
 *                  that has just loaded
 *
 * Threads: libmicrohttpd's, one per connection (capped), and the frame
 * builder, which builds each frame once, whatever the number of clients:
 *
 *   builder --(every second)--> frame (refcounted) --> latest
 *                                                        |
 *   /events client: waits for a frame newer than the one it sent,
 *   takes a reference, sends it, drops it
 *
 * A client holds at most one frame: one that reads slowly sends the
 * latest frame when it is done with the one it has, and the frames it
 * never saw are counted (skipped), never queued for it.  Clients past
 * --max-clients get 503 (counted); a client that stops reading is cut
 * when libmicrohttpd's 30 s timeout passes without progress; every
 * /events disconnection is counted.  All of it is in /metrics.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"
#include "livedir.h"
#include "cli.h"
#include "observe.h"

static const char serve_usage[] =
	"usage: logengine serve [--listen ADDR:PORT] [--listen-any]\n"
	"                       [--max-clients N] DIR...\n"
	"  --listen ADDR:PORT  where to listen (default 127.0.0.1:9470; port 0:\n"
	"                      any free port, printed at start)\n"
	"  --listen-any        allow an address that is not loopback\n"
	"  --max-clients N     /events streams at once (default 16)\n"
	"GET /metrics (Prometheus), / (dashboard), /events (server-sent\n"
	"events, one frame a second), /tail (newest records, JSON).\n";

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
#define FRAME_MAX (8u << 20)   /* a frame larger than this is cut */
#define METRICS_MAX (64u << 20)
#define KEEPALIVE_MS 15000

/* The dashboard, built into the binary (no file to find at run time). */
__asm__(".section .rodata\n"
        ".global le__dashboard_html\n"
        ".hidden le__dashboard_html\n"
        "le__dashboard_html:\n"
        ".incbin \"tools/dashboard.html\"\n"
        ".global le__dashboard_html_end\n"
        ".hidden le__dashboard_html_end\n"
        "le__dashboard_html_end:\n"
        ".byte 0\n"
        ".previous\n");
extern const char le__dashboard_html[], le__dashboard_html_end[];

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
	pthread_cond_t cv;      /* a new frame, or stopping */
	struct frame *latest;
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

/* Wait for a frame newer than c's; srv.mu held.  @return 1 taken, 0 none
 * before the keep-alive time, -1 stopping. */
static int next_frame(struct sse *c)
{
	struct timespec dl;
	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_sec += KEEPALIVE_MS / 1000;
	while (!srv.stopping && (!srv.latest || srv.latest->seq == c->seq))
		if (pthread_cond_timedwait(&srv.cv, &srv.mu, &dl) == ETIMEDOUT)
			break;
	if (srv.stopping)
		return -1;
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

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	static const char hello[] = "retry: 2000\n\n", ping[] = ": ping\n\n";
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
		int got = next_frame(c);
		pthread_mutex_unlock(&srv.mu);
		if (got < 0)
			return MHD_CONTENT_READER_END_OF_STREAM;
		if (got == 0)
			return (ssize_t)put(buf, max, ping, sizeof ping - 1, &off);
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
	F("shard_state", "gauge", state, INT,
	  "The shard's live page: 0 none, 1 running, 2 stale, 3 stopped, "
	  "4 dead."),
	F("live_page_age_seconds", "gauge", age_ns, NS,
	  "Time since the shard's writer last published its live page."),
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
	for (size_t f = 0; f < sizeof shard_fams / sizeof *shard_fams; f++) {
		head(b, shard_fams[f].name, shard_fams[f].type, shard_fams[f].help);
		for (int k = 0; k < nd; k++)
			for (unsigned i = 0; i < d[k].n; i++) {
				labels(b, shard_fams[f].name, d[k].path, (int)i, NULL);
				value(b, &d[k].cur[i], &shard_fams[f]);
			}
	}
	for (size_t f = 0; f < sizeof dir_fams / sizeof *dir_fams; f++) {
		head(b, dir_fams[f].name, dir_fams[f].type, dir_fams[f].help);
		for (int k = 0; k < nd; k++)
			if (d[k].engine) {
				labels(b, dir_fams[f].name, d[k].path, -1, NULL);
				value(b, d[k].engine, &dir_fams[f]);
			}
	}
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
	enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ok;
}

static enum MHD_Result get_tail(struct MHD_Connection *c)
{
	struct buf b;
	buf_init(&b, 1u << 20);
	pthread_mutex_lock(&srv.build_mu);
	frames_tail_json(&srv.frames, &b);
	pthread_mutex_unlock(&srv.build_mu);
	return send_buf(c, &b, "application/json");
}

static enum MHD_Result get_dashboard(struct MHD_Connection *c)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(
		(size_t)(le__dashboard_html_end - le__dashboard_html),
		(void *)le__dashboard_html, MHD_RESPMEM_PERSISTENT);
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
	return text(c, MHD_HTTP_NOT_FOUND,
	            "not found: /, /metrics, /events, /tail\n");
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

static void shutdown_all(struct MHD_Daemon *d, pthread_t b)
{
	pthread_mutex_lock(&srv.mu);
	srv.stopping = 1;
	pthread_cond_broadcast(&srv.cv);
	pthread_mutex_unlock(&srv.mu);
	if (d)
		MHD_stop_daemon(d); /* /events readers see stopping and end */
	pthread_join(b, NULL);
	frame_unref(srv.latest);
	srv.latest = NULL;
	frames_free(&srv.frames);
	for (int k = 0; srv.mdirs && k < srv.ndirs; k++)
		live_dir_free(&srv.mdirs[k]);
	free(srv.mdirs);
}

int cmd_serve(int argc, char **argv)
{
	const char *addr = "127.0.0.1:9470";
	int any = 0;
	static char *dirs[LIVE_MAX_DIRS];
	struct listen l;

	srv.max_clients = DEFAULT_CLIENTS;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--listen") && i + 1 < argc)
			addr = argv[++i];
		else if (!strncmp(a, "--listen=", 9))
			addr = a + 9;
		else if (!strcmp(a, "--listen-any"))
			any = 1;
		else if (!strcmp(a, "--max-clients") && i + 1 < argc)
			srv.max_clients = (unsigned)atoi(argv[++i]);
		else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			fputs(serve_usage, stdout);
			fflush(stdout);
			return 0;
		} else if (a[0] == '-')
			return usage("unknown option '%s'", a);
		else if (srv.ndirs == LIVE_MAX_DIRS)
			return usage("at most 64 directories (%s)", a);
		else
			dirs[srv.ndirs++] = argv[i];
	}
	if (!srv.ndirs)
		return usage("%s", "missing DIR");
	if (srv.max_clients < 1 || srv.max_clients > 1024)
		return usage("%s", "--max-clients: 1 to 1024");
	if (parse_listen(addr, &l) < 0)
		return usage("--listen '%s': want ADDR:PORT (127.0.0.1:9470, "
		             "[::1]:9470)", addr);
	if (!l.loopback && !any)
		return usage("--listen '%s' is not a loopback address: the "
		             "counters and records would be open to the "
		             "network; add --listen-any to mean it", addr);
	srv.dirs = dirs;
	pthread_mutex_init(&srv.mu, NULL);
	pthread_mutex_init(&srv.build_mu, NULL);
	pthread_mutex_init(&srv.metrics_mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&srv.cv, &ca);
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
	pthread_t b;
	if (pthread_create(&b, NULL, builder, NULL) != 0) {
		fprintf(stderr, "logengine serve: cannot start a thread\n");
		return 2;
	}
	struct MHD_Daemon *d = MHD_start_daemon(
		MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
			MHD_USE_ERROR_LOG | (l.v6 ? MHD_USE_IPv6 : 0),
		0, NULL, NULL, handle, NULL,
		MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&l.ss,
		MHD_OPTION_CONNECTION_LIMIT, srv.max_clients + 32,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30,
		MHD_OPTION_THREAD_STACK_SIZE, (size_t)(256 << 10),
		MHD_OPTION_END);
	if (!d) {
		fprintf(stderr, "logengine serve: cannot listen on %s: %s\n",
		        addr, strerror(errno));
		shutdown_all(NULL, b);
		return 2;
	}
	const union MHD_DaemonInfo *di =
		MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	char shown[160];
	snprintf(shown, sizeof shown, "%.*s:%u", (int)(strrchr(addr, ':') - addr),
	         addr, di ? di->port : 0);
	printf("logengine serve: listening on http://%s/ (%d director%s)\n",
	       shown, srv.ndirs, srv.ndirs == 1 ? "y" : "ies");
	fflush(stdout);
	int sig;
	sigwait(&stop, &sig);
	shutdown_all(d, b);
	printf("logengine serve: stopped (%s)\n", strsignal(sig));
	fflush(stdout);
	return 0;
}

#endif /* LE_HAVE_MHD */
