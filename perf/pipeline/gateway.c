/*
 * gateway.c -- the service of seed 001: a small HTTP gateway that, for each
 * request, calls an upstream (mock_backend.c beside it, 1 ms per answer)
 * and writes one access-log line through logengine to its stdout.  It is
 * what compare-log-pipeline.sh beside it loads with wrk; it is also the
 * example of logging from request threads to a pipe that may stall.
 *
 *   usage: gateway [--port N] [--backend-port N] [--log sync|async|store|off]
 *                  [--format raw|text|json] [--stuck-ms N] [--queue-bytes N]
 *                  [--quiet-from A.B.C.D/LEN ...] [--sample N]
 *                  [--dir DIR] [--tls-cert PEM --tls-key PEM]
 *
 *   --log async   store 0, stream_fd 1: the request thread queues the line
 *                 (no lock, no syscall) and returns; the engine's threads
 *                 write it, and drop (counting) what a stalled stdout
 *                 cannot take.  The default.
 *   --log sync    no engine: the request thread formats the same line and
 *                 writes it itself with a blocking write(2) -- the
 *                 baseline that a stalled stdout brings to a halt.
 *   --log store   (seed 004) logengine as a service would use it: the
 *                 engine's defaults, the lines kept in the segment store
 *                 in --dir (created if missing), nothing on stdout.
 *   --log off     no access log.
 *   --backend-port 0
 *                 (seed 004) no upstream: every request is a route that
 *                 matches nothing, answered 404 by the gateway itself.
 *   --port 0      a free port, the kernel's pick: the "listening" line on
 *                 stderr says which.
 *   --tls-cert, --tls-key
 *                 (seed 004) HTTPS: libmicrohttpd's TLS (GnuTLS) with
 *                 this certificate and key, both PEM files.
 *   --quiet-from  (seed 004: health checks and load tests from loopback
 *                 flooding the access log) requests from this IPv4
 *                 network are not logged, or only 1 in N of them with
 *                 --sample N; repeatable (8 at most).  Both counts are in
 *                 the JSON line: quiet_dropped, quiet_logged.
 *
 * Threads: libmicrohttpd with one thread per client connection (so one
 * blocked write stalls one connection, and a stalled pipe soon all of
 * them); each connection thread keeps its own keep-alive connection to the
 * backend (a thread-specific socket, closed when the thread ends).
 *
 * On SIGTERM or SIGINT it prints one JSON line on stderr -- requests,
 * backend errors, the longest log line, the engine's counters and
 * high-water marks (queue_hwm_records, queue_hwm_bytes, stream_dropped,
 * ...), CPU and max RSS -- then stops.  Listens on 127.0.0.1 only.
 *
 * Requests that never get an answer: wrk counts a response slower than
 * its --timeout, but not one that never comes (a thread stuck in write).
 * So each connection thread publishes the start time of the request it is
 * in; SIGUSR1 marks the start of the measured window; the JSON line's
 * "stuck" counts requests begun since the mark and still unanswered after
 * --stuck-ms (default 2000, wrk's default timeout).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <stdarg.h>
#include <time.h>
#include <unistd.h>

#include "logengine.h"

enum { LOG_OFF, LOG_SYNC, LOG_ASYNC, LOG_STORE };
static const char *const log_names[] = {"off", "sync", "async", "store"};

static struct {
	int port, backend_port, log, format, stuck_ms;
	uint64_t queue_bytes; /* le_config.queue_capacity_bytes; 0: default */
	unsigned nquiet;      /* --quiet-from networks */
	struct {
		uint32_t net, mask; /* host order */
	} quiet[8];
	uint64_t sample;      /* --sample: log 1 in N of them; 0: none */
	const char *dir;      /* --log store: the log directory */
	const char *tls_cert, *tls_key; /* PEM files; NULL: plain HTTP */
} opt = {18080, 18081, LOG_ASYNC, LE_STREAM_TEXT, 2000, 0, 0, {{0, 0}}, 0,
         "gateway-log", NULL, NULL};

/* Requests from a --quiet-from network left out of the log, and those
 * logged as the 1 in --sample. */
static atomic_uint_fast64_t n_quiet_dropped, n_quiet_logged, n_quiet_seen;

/* Is the request from addr (network order) to be left out of the log?
 * Counts it either way. */
static int quiet(uint32_t addr)
{
	uint32_t a = ntohl(addr);
	unsigned i = 0;

	while (i < opt.nquiet && (a & opt.quiet[i].mask) != opt.quiet[i].net)
		i++;
	if (i == opt.nquiet)
		return 0;
	if (opt.sample &&
	    atomic_fetch_add_explicit(&n_quiet_seen, 1, memory_order_relaxed) %
	                    opt.sample == 0) {
		atomic_fetch_add_explicit(&n_quiet_logged, 1,
		                          memory_order_relaxed);
		return 0;
	}
	atomic_fetch_add_explicit(&n_quiet_dropped, 1, memory_order_relaxed);
	return 1;
}

#define MAX_SLOTS 4096 /* connection threads tracked, one slot each */
/* Start (CLOCK_MONOTONIC ns) of the request slot i's thread is in, 0 when
 * idle.  Written by that thread, read by report(); relaxed is enough for
 * a count taken after the load stopped. */
static _Atomic uint64_t inflight[MAX_SLOTS];
static atomic_int next_slot;
static _Atomic uint64_t window_mark; /* SIGUSR1: measured window begins */

static le_engine *eng;          /* NULL with --log off */
static pthread_key_t backend_key; /* per connection thread: its socket */
static atomic_uint_fast64_t n_requests, n_backend_errors, n_log_errors;
/*
 * What access_log costs a request thread (building the line, handing it
 * over): with the writer's and the stream thread's CPU (le_stats), what
 * logging costs the process, measured apart from the machine's noise.
 * One call in LOG_SAMPLE is timed (monotonic clock, ~25 ns) into a fixed
 * array; at exit the mean of the samples below their 99th percentile is
 * the estimate.  Not the plain mean, nor the thread CPU clock: on a busy
 * 2-CPU machine a call is now and then preempted, or charged with the
 * network interrupts that arrive during it, and those rare microseconds
 * would outweigh the call itself.
 */
#define LOG_SAMPLE 16
#define LOG_SAMPLES (1u << 16)
static _Atomic uint32_t log_samples[LOG_SAMPLES]; /* threads still run at exit */
static atomic_uint_fast32_t n_log_samples;
static _Thread_local unsigned log_tick;

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* Mean of the samples below their 99th percentile, in ns (0: none). */
static uint64_t log_call_ns(void)
{
	uint32_t n = (uint32_t)atomic_load(&n_log_samples);
	if (n > LOG_SAMPLES)
		n = LOG_SAMPLES;
	uint32_t *v = n ? malloc(n * sizeof *v) : NULL;
	if (!v)
		return 0;
	for (uint32_t i = 0; i < n; i++)
		v[i] = atomic_load_explicit(&log_samples[i], memory_order_relaxed);
	qsort(v, n, sizeof *v, cmp_u32);
	uint32_t keep = n - n / 100;
	uint64_t sum = 0;
	for (uint32_t i = 0; i < keep; i++)
		sum += v[i];
	free(v);
	return sum / keep;
}
static atomic_uint_fast64_t next_conn;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}


/* What the timer around a sampled call adds to it: the median of 1,001
 * back-to-back reads of the clock, in ns ("log_timer_ns" in the JSON
 * line: a harness may take it off log_call_ns). */
static uint64_t timer_ns(void)
{
	uint32_t d[1001];

	for (int i = 0; i < 1001; i++) {
		uint64_t t0 = now_ns();
		d[i] = (uint32_t)(now_ns() - t0);
	}
	qsort(d, 1001, sizeof d[0], cmp_u32);
	return d[500];
}

/* ---- the upstream call ---- */

struct backend {
	int fd;        /* keep-alive connection, -1 when none */
	uint64_t conn; /* this connection thread's number (in the log line) */
	int slot;      /* in inflight[], or -1 past MAX_SLOTS */
	/* The client's address as text, kept while the client stays the
	 * same: inet_ntop on every request cost as much as the rest of the
	 * access-log line. */
	uint32_t ip4;
	char ip[INET6_ADDRSTRLEN];
};

static void backend_free(void *p)
{
	struct backend *b = p;
	if (b->fd >= 0)
		close(b->fd);
	free(b);
}

static struct backend *my_backend(void)
{
	struct backend *b = pthread_getspecific(backend_key);
	if (!b && (b = malloc(sizeof *b)) != NULL) {
		b->fd = -1;
		b->ip4 = 0;
		strcpy(b->ip, "-");
		b->conn = atomic_fetch_add(&next_conn, 1);
		b->slot = atomic_fetch_add(&next_slot, 1);
		if (b->slot >= MAX_SLOTS)
			b->slot = -1;
		pthread_setspecific(backend_key, b);
	}
	return b;
}

static int backend_connect(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
	                        .sin_port = htons((uint16_t)opt.backend_port),
	                        .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Read one response with a Content-Length body into buf (cap bytes).
 * @return the body's offset in buf and *body_len, or -1. */
static int read_response(int fd, char *buf, size_t cap, size_t *body_len)
{
	size_t len = 0;
	char *hdr_end = NULL;

	while (!hdr_end) {
		ssize_t n = recv(fd, buf + len, cap - 1 - len, 0);
		if (n <= 0)
			return -1;
		len += (size_t)n;
		buf[len] = '\0';
		hdr_end = strstr(buf, "\r\n\r\n");
		if (!hdr_end && len == cap - 1)
			return -1;
	}
	if (strncmp(buf, "HTTP/1.1 200", 12) != 0)
		return -1;
	char *cl = strcasestr(buf, "\r\ncontent-length:");
	if (!cl || cl > hdr_end)
		return -1;
	size_t want = strtoul(cl + 17, NULL, 10);
	size_t off = (size_t)(hdr_end + 4 - buf);
	if (off + want >= cap)
		return -1;
	while (len < off + want) {
		ssize_t n = recv(fd, buf + len, off + want - len, 0);
		if (n <= 0)
			return -1;
		len += (size_t)n;
	}
	*body_len = want;
	return (int)off;
}

/* GET the backend on this thread's connection (reconnecting once when a
 * kept-alive connection turns out closed).  @return body offset or -1. */
static int backend_get(struct backend *b, char *buf, size_t cap,
                       size_t *body_len)
{
	static const char req[] = "GET /v1/complete HTTP/1.1\r\n"
	                          "Host: 127.0.0.1\r\n\r\n";
	for (int attempt = 0; attempt < 2; attempt++) {
		if (b->fd < 0 && (b->fd = backend_connect()) < 0)
			return -1;
		if (send(b->fd, req, sizeof req - 1, MSG_NOSIGNAL) ==
		    (ssize_t)(sizeof req - 1)) {
			int off = read_response(b->fd, buf, cap, body_len);
			if (off >= 0)
				return off;
		}
		close(b->fd);
		b->fd = -1;
	}
	return -1;
}

/* ---- the access log ---- */

/* --log sync: the line as the stream sink would print it, written in the
 * request's thread with a blocking write(2) to stdout. */
static _Atomic uint64_t sync_lines, sync_bytes;

static size_t sync_ts(char *o, size_t cap)
{
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	return (size_t)snprintf(o, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%09ldZ",
	                        tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
	                        tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec);
}

static int log_sync(const char *fmt, ...)
        __attribute__((format(printf, 1, 2)));
static int log_sync(const char *fmt, ...)
{
	char msg[4096], line[8192];
	size_t n = 0;
	va_list ap;

	va_start(ap, fmt);
	int m = vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (m < 0)
		return -1;
	if ((size_t)m >= sizeof msg)
		m = sizeof msg - 1;
	if (opt.format == LE_STREAM_TEXT) {
		n = sync_ts(line, sizeof line);
		n += (size_t)snprintf(line + n, sizeof line - n, " INFO  ");
	} else if (opt.format == LE_STREAM_JSON) {
		n = (size_t)snprintf(line, sizeof line, "{\"ts\":\"");
		n += sync_ts(line + n, sizeof line - n);
		n += (size_t)snprintf(line + n, sizeof line - n,
		                      "\",\"level\":\"INFO\",\"msg\":\"");
	}
	for (int i = 0; i < m && n + 8 < sizeof line; i++) {
		unsigned char c = (unsigned char)msg[i];
		if (opt.format == LE_STREAM_JSON && (c == '"' || c == '\\'))
			line[n++] = '\\';
		if (c < 0x20)
			n += (size_t)snprintf(line + n, 8, "\\u%04x", c);
		else
			line[n++] = (char)c;
	}
	if (opt.format == LE_STREAM_JSON)
		line[n++] = '"', line[n++] = '}';
	line[n++] = '\n';
	for (size_t off = 0; off < n;) {
		ssize_t w = write(1, line + off, n - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		off += (size_t)w;
	}
	atomic_fetch_add(&sync_lines, 1);
	atomic_fetch_add(&sync_bytes, n);
	return 0;
}

/* One access-log line: client, request line, status, body bytes, times
 * and connection number.  A literal, so le_info can defer it. */
#define ACCESS_FMT                                                            \
	"%s \"%s %.200s %s\" %u %zu rt_us=%" PRIu64 " upstream_us=%" PRIu64    \
	" conn=%" PRIu64

static void access_log(struct backend *b, struct MHD_Connection *c,
                       const char *method, const char *url,
                       const char *version, unsigned status, size_t bytes,
                       uint64_t total_us, uint64_t upstream_us)
{
	char ipbuf[INET6_ADDRSTRLEN];
	const char *ip = "-";
	const union MHD_ConnectionInfo *ci =
	        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);

	if (opt.log == LOG_OFF)
		return;
	int timed = ++log_tick % LOG_SAMPLE == 0;
	uint64_t t0 = timed ? now_ns() : 0;
	if (ci && ci->client_addr && ci->client_addr->sa_family == AF_INET) {
		const struct in_addr *a =
		        &((const struct sockaddr_in *)ci->client_addr)->sin_addr;
		if (opt.nquiet && quiet(a->s_addr))
			goto timed_out;
		if (!b) {
			ip = inet_ntop(AF_INET, a, ipbuf, sizeof ipbuf);
		} else {
			if (b->ip4 != a->s_addr || b->ip[0] == '-') {
				inet_ntop(AF_INET, a, b->ip, sizeof b->ip);
				b->ip4 = a->s_addr;
			}
			ip = b->ip;
		}
		if (!ip)
			ip = "-";
	}
	/* async: le_logf formats into a stack buffer and copies the line
	 * into the queue, and returns at once (LE_EFULL counted if full).
	 * store: le_info copies the arguments, not the text (deferred
	 * formatting: readers make the line), the cheapest call for the
	 * request thread.  sync: the line is written here, blocking while
	 * stdout is full. */
	int rc = 0;
	uint64_t conn = b ? b->conn : 0;
	if (opt.log == LOG_STORE)
		le_info(eng, ACCESS_FMT, ip, method, url, version, status,
		        bytes, total_us, upstream_us, conn);
	else if (opt.log == LOG_SYNC)
		rc = log_sync(ACCESS_FMT, ip, method, url, version, status,
		              bytes, total_us, upstream_us, conn);
	else
		rc = le_logf(eng, LE_INFO, ACCESS_FMT, ip, method, url,
		             version, status, bytes, total_us, upstream_us,
		             conn);
	if (rc < 0)
		atomic_fetch_add(&n_log_errors, 1);
timed_out:
	if (timed) {
		uint64_t d = now_ns() - t0;
		uint32_t i = (uint32_t)atomic_fetch_add(&n_log_samples, 1);
		if (i < LOG_SAMPLES)
			atomic_store_explicit(&log_samples[i],
			                      d > UINT32_MAX ? UINT32_MAX
			                                     : (uint32_t)d,
			                      memory_order_relaxed);
	}
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c,
                              const char *url, const char *method,
                              const char *version, const char *upload,
                              size_t *upload_len, void **req)
{
	static int seen;
	char buf[4096];
	size_t body_len = 0;

	(void)cls, (void)upload;
	/* libmicrohttpd's protocol: the first call only announces the
	 * request; answering there makes it close the connection.  A body,
	 * if any, is skipped over. */
	if (!*req) {
		*req = &seen;
		return MHD_YES;
	}
	if (*upload_len) {
		*upload_len = 0;
		return MHD_YES;
	}
	uint64_t t0 = now_ns();
	struct backend *b = my_backend();
	if (b && b->slot >= 0)
		atomic_store_explicit(&inflight[b->slot], now_ns(),
		                      memory_order_relaxed);
	int off = b && opt.backend_port ? backend_get(b, buf, sizeof buf,
	                                              &body_len)
	                                : -1;
	uint64_t t1 = now_ns();
	unsigned status = off >= 0 ? MHD_HTTP_OK : MHD_HTTP_BAD_GATEWAY;
	const char *body = off >= 0 ? buf + off : "{\"error\":\"backend\"}";
	if (!opt.backend_port) {
		status = MHD_HTTP_NOT_FOUND;
		body = "{\"error\":\"no route\"}";
		body_len = strlen(body);
	} else if (off < 0) {
		body_len = strlen(body);
		atomic_fetch_add(&n_backend_errors, 1);
	}
	struct MHD_Response *r = MHD_create_response_from_buffer(
	        body_len, (void *)body, MHD_RESPMEM_MUST_COPY);
	MHD_add_response_header(r, "Content-Type", "application/json");
	enum MHD_Result ok = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	atomic_fetch_add(&n_requests, 1);
	access_log(b, c, method, url, version, status, body_len,
	           (now_ns() - t0) / 1000, (t1 - t0) / 1000);
	if (b && b->slot >= 0)
		atomic_store_explicit(&inflight[b->slot], 0, memory_order_relaxed);
	return ok;
}

/* ---- start, stop, report ---- */

static void usage(void)
{
	fputs("usage: gateway [--port N] [--backend-port N] "
	      "[--log sync|async|store|off] [--format raw|text|json] "
	      "[--stuck-ms N] [--queue-bytes N] [--quiet-from A.B.C.D/LEN] "
	      "[--sample N] [--dir DIR] [--tls-cert PEM --tls-key PEM]\n",
	      stderr);
	exit(2);
}

/* --quiet-from A.B.C.D/LEN (LEN 0..32; none: 32). */
static void add_quiet(const char *v)
{
	char ip[INET_ADDRSTRLEN];
	const char *slash = strchr(v, '/');
	size_t n = slash ? (size_t)(slash - v) : strlen(v);
	int len = slash ? atoi(slash + 1) : 32;
	struct in_addr a;

	if (opt.nquiet == 8 || n >= sizeof ip || len < 0 || len > 32)
		usage();
	memcpy(ip, v, n);
	ip[n] = '\0';
	if (inet_pton(AF_INET, ip, &a) != 1)
		usage();
	uint32_t mask = len ? ~0u << (32 - len) : 0;
	opt.quiet[opt.nquiet].mask = mask;
	opt.quiet[opt.nquiet++].net = ntohl(a.s_addr) & mask;
}

static void parse(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v)
			usage();
		i++;
		if (!strcmp(a, "--port"))
			opt.port = atoi(v);
		else if (!strcmp(a, "--backend-port"))
			opt.backend_port = atoi(v);
		else if (!strcmp(a, "--stuck-ms"))
			opt.stuck_ms = atoi(v);
		else if (!strcmp(a, "--queue-bytes"))
			opt.queue_bytes = strtoull(v, NULL, 10);
		else if (!strcmp(a, "--quiet-from"))
			add_quiet(v);
		else if (!strcmp(a, "--sample"))
			opt.sample = strtoull(v, NULL, 10);
		else if (!strcmp(a, "--dir"))
			opt.dir = v;
		else if (!strcmp(a, "--tls-cert"))
			opt.tls_cert = v;
		else if (!strcmp(a, "--tls-key"))
			opt.tls_key = v;
		else if (!strcmp(a, "--log"))
			opt.log = !strcmp(v, "sync")    ? LOG_SYNC
			          : !strcmp(v, "async") ? LOG_ASYNC
			          : !strcmp(v, "store") ? LOG_STORE
			          : !strcmp(v, "off")   ? LOG_OFF
			                                : (usage(), 0);
		else if (!strcmp(a, "--format"))
			opt.format = !strcmp(v, "raw")    ? LE_STREAM_RAW
			             : !strcmp(v, "text") ? LE_STREAM_TEXT
			             : !strcmp(v, "json") ? LE_STREAM_JSON
			                                  : (usage(), 0);
		else
			usage();
	}
	if (!opt.tls_cert != !opt.tls_key)
		usage();
}

static le_config cfg;

/* --log async: seed 001's pipeline to stdout (8,192 records, 16 MiB, 64
 * KiB max); --log store: the engine's defaults, into --dir. */
static int open_log(void)
{
	if (opt.log != LOG_ASYNC && opt.log != LOG_STORE)
		return 0;
	le_config_init(&cfg);
	if (opt.log == LOG_STORE) {
		cfg.dir = opt.dir;
		cfg.create_dir = 1;
	} else {
		cfg.queue_capacity_bytes = 16u << 20;
		cfg.store = 0;
		cfg.stream_fd = 1;
		cfg.stream_format = opt.format;
	}
	if (opt.queue_bytes)
		cfg.queue_capacity_bytes = opt.queue_bytes;
	int rc = le_open(&eng, &cfg);
	if (rc < 0)
		fprintf(stderr, "gateway: le_open: %s (%s)\n", le_strerror(rc),
		        le_errmsg());
	return rc;
}

/* Requests begun since the window mark, unanswered for stuck_ms; and
 * all requests in progress. */
static void count_stuck(uint64_t *stuck, uint64_t *busy)
{
	uint64_t now = now_ns(), mark = atomic_load(&window_mark);
	uint64_t limit = (uint64_t)opt.stuck_ms * 1000000u;
	int n = atomic_load(&next_slot);

	*stuck = *busy = 0;
	for (int i = 0; i < n && i < MAX_SLOTS; i++) {
		uint64_t t = atomic_load_explicit(&inflight[i],
		                                  memory_order_relaxed);
		if (!t)
			continue;
		(*busy)++;
		if (mark && t >= mark && now - t >= limit)
			(*stuck)++;
	}
}

/* The one JSON line the harness reads: the bounds come from the engine. */
static void report(void)
{
	le_stats st;
	struct rusage ru;
	uint64_t stuck, busy;

	count_stuck(&stuck, &busy);

	memset(&st, 0, sizeof st);
	if (eng)
		le_stats_get(eng, &st);
	if (opt.log == LOG_SYNC) {
		st.accepted = st.stream_lines = atomic_load(&sync_lines);
		st.stream_bytes = atomic_load(&sync_bytes);
	}
	getrusage(RUSAGE_SELF, &ru);
	fprintf(stderr,
	        "{\"log\":\"%s\",\"requests\":%" PRIu64
	        ",\"stuck\":%" PRIu64 ",\"in_progress\":%" PRIu64
	        ",\"backend_errors\":%" PRIu64 ",\"log_errors\":%" PRIu64
	        ",\"accepted\":%" PRIu64
	        ",\"written\":%" PRIu64 ",\"dropped\":%" PRIu64
	        ",\"truncated\":%" PRIu64 ",\"rejected\":%" PRIu64
	        ",\"queue_hwm_records\":%" PRIu64 ",\"queue_hwm_bytes\":%" PRIu64
	        ",\"queue_capacity\":%" PRIu32 ",\"queue_capacity_bytes\":%" PRIu64
	        ",\"max_record_bytes\":%" PRIu32 ",\"stream_lines\":%" PRIu64
	        ",\"stream_dropped\":%" PRIu64 ",\"stream_bytes\":%" PRIu64
	        ",\"writer_cpu_ns\":%" PRIu64 ",\"stream_cpu_ns\":%" PRIu64
	        ",\"log_call_ns\":%" PRIu64 ",\"log_timer_ns\":%" PRIu64
	        ",\"record_hwm_bytes\":%" PRIu64
	        ",\"quiet_dropped\":%" PRIu64 ",\"quiet_logged\":%" PRIu64
	        ",\"cpu_user_s\":%.3f"
	        ",\"cpu_sys_s\":%.3f,\"maxrss_kb\":%ld}\n",
	        log_names[opt.log], (uint64_t)atomic_load(&n_requests), stuck, busy,
	        (uint64_t)atomic_load(&n_backend_errors),
	        (uint64_t)atomic_load(&n_log_errors),
	        st.accepted, opt.log == LOG_STORE ? st.written : st.stream_lines,
	        st.dropped_full + st.stream_dropped, st.truncated, st.rejected, st.queue_hwm_records,
	        st.queue_hwm_bytes, eng ? cfg.queue_capacity : 0,
	        eng ? cfg.queue_capacity_bytes : 0,
	        eng ? cfg.max_record_bytes : 0, st.stream_lines,
	        st.stream_dropped, st.stream_bytes, st.writer_cpu_ns,
	        st.stream_cpu_ns, opt.log != LOG_OFF ? log_call_ns() : 0,
	        timer_ns(),
	        st.record_hwm_bytes, (uint64_t)atomic_load(&n_quiet_dropped),
	        (uint64_t)atomic_load(&n_quiet_logged),
	        (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6,
	        (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6,
	        ru.ru_maxrss);
	fflush(stderr);
}

/* The whole of file path, NUL-terminated (libmicrohttpd wants PEM text
 * in memory), or NULL with a message. */
static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long len;

	if (f && fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 &&
	    fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)len + 1)) &&
	    fread(buf, 1, (size_t)len, f) == (size_t)len)
		buf[len] = '\0';
	else {
		fprintf(stderr, "gateway: %s: %s\n", path, strerror(errno));
		free(buf);
		buf = NULL;
	}
	if (f)
		fclose(f);
	return buf;
}

/* One thread per connection on address a; with --tls-cert, HTTPS.  The
 * PEM texts stay allocated for the daemon's life (the process's).
 * @return the daemon, or NULL with a message. */
static struct MHD_Daemon *start_daemon(const struct sockaddr_in *a)
{
	unsigned flags = MHD_USE_THREAD_PER_CONNECTION |
	                 MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
	struct MHD_OptionItem ops[] = {
		{MHD_OPTION_SOCK_ADDR, 0, (void *)a},
		{MHD_OPTION_CONNECTION_TIMEOUT, 30, NULL},
		{MHD_OPTION_CONNECTION_LIMIT, 1000, NULL},
		{MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024, NULL},
		{MHD_OPTION_THREAD_STACK_SIZE, 256 << 10, NULL},
		{MHD_OPTION_END, 0, NULL}, /* HTTPS_MEM_KEY */
		{MHD_OPTION_END, 0, NULL}, /* HTTPS_MEM_CERT */
		{MHD_OPTION_END, 0, NULL},
	};

	if (opt.tls_cert) {
		if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
			fputs("gateway: this libmicrohttpd has no TLS (Debian's "
			      "libmicrohttpd12 is built with GnuTLS)\n", stderr);
			return NULL;
		}
		char *key = slurp(opt.tls_key), *cert = slurp(opt.tls_cert);
		if (!key || !cert)
			return NULL;
		flags |= MHD_USE_TLS;
		ops[5] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, key};
		ops[6] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0,
		                                 cert};
	}
	return MHD_start_daemon(flags, (uint16_t)opt.port, NULL, NULL, handle,
	                        NULL, MHD_OPTION_ARRAY, ops, MHD_OPTION_END);
}

/* A connection thread stuck in a blocking write (sync, stalled stdout)
 * never returns: stopping gives them this long, then exits anyway. */
static void *watchdog(void *arg)
{
	(void)arg;
	sleep(3);
	_exit(0);
	return NULL;
}

int main(int argc, char **argv)
{
	sigset_t ss;
	int sig = 0;
	pthread_t wd;

	parse(argc, argv);
	/* Every thread (ours, libmicrohttpd's, the engine's) inherits this
	 * mask; the main thread takes the signals with sigwait.  A closed
	 * stdout must be EPIPE, not death. */
	sigemptyset(&ss);
	sigaddset(&ss, SIGINT);
	sigaddset(&ss, SIGTERM);
	sigaddset(&ss, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &ss, NULL);
	signal(SIGPIPE, SIG_IGN);
	pthread_key_create(&backend_key, backend_free);
	if (open_log() < 0)
		return 1;
	struct sockaddr_in a = {.sin_family = AF_INET,
	                        .sin_port = htons((uint16_t)opt.port),
	                        .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct MHD_Daemon *d = start_daemon(&a);
	if (!d) {
		fprintf(stderr, "gateway: cannot listen on 127.0.0.1:%d\n",
		        opt.port);
		le_close(eng);
		return 1;
	}
	/* --port 0: the kernel's pick, said on this line. */
	const union MHD_DaemonInfo *di =
	        MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	if (di && di->port)
		opt.port = di->port;
	fprintf(stderr, "gateway: listening on 127.0.0.1:%d (%s), backend %d, "
	        "log %s\n", opt.port, opt.tls_cert ? "https" : "http",
	        opt.backend_port, log_names[opt.log]);
	while (sigwait(&ss, &sig) != 0 || sig == SIGUSR1)
		if (sig == SIGUSR1)
			atomic_store(&window_mark, now_ns());
	report();
	pthread_create(&wd, NULL, watchdog, NULL);
	MHD_stop_daemon(d);
	le_close(eng);
	return 0;
}
