/*
 * sink_stream.c -- records as lines on a file descriptor (stdout, a pipe,
 * a file), beside or instead of the segment store, without ever letting a
 * slow or stalled reader reach a producer.
 *
 *   shard writers --(lines, under mu, once per batch)--> ring of bytes
 *                                                         |
 *   stream thread <--(poll POLLOUT, non-blocking write)---+--> fd
 *
 * The ring is bounded (stream_buffer_bytes).  A writer that finds no room
 * drops the lines of its batch that do not fit and counts them; once room
 * returns, the stream thread writes "N records dropped" before the next
 * line.  The stream thread writes through a descriptor of its own, opened
 * anew from /proc/self/fd/N with O_NONBLOCK, so making writes non-blocking
 * does not change the flags of a stdout shared with other processes; when
 * that is impossible (a socket) it writes at most PIPE_BUF bytes after
 * poll says POLLOUT.  Partial writes are resumed.  EPIPE (the reader is
 * gone) is not a death: every thread of ours blocks SIGPIPE, and the sink
 * just counts everything from then on as dropped.
 *
 * Accounting: every record a port takes is counted once, as a line
 * (stream_lines: handed over and not thrown away since) or as dropped
 * (stream_dropped: no room in the batch's stage or in the buffer, the
 * reader gone, or still buffered when le_close gave up on a stalled
 * reader).  Marker lines ("N records dropped", the stream's own or the
 * queue's) are neither.
 */
#define _GNU_SOURCE
#include "sink/stream.h"

#include <pthread.h>
#include <stdatomic.h>

#include "record/fields.h"
#include "base/fmt.h"
#include "base/internal.h"
#include "base/os.h"

#define LE_STREAM_MARKS 64       /* marker lines the buffer may hold */

struct le__stream {
	int fd;                  /* the caller's descriptor */
	int wfd;                 /* ours: a non-blocking reopen, or fd */
	int own_nonblock;
	/* stream_path: the file we opened (wfd == fd, ours to close), which
	 * le_reopen has the stream thread open again by name. */
	const char *path;        /* [const] the engine's copy, or NULL */
	mode_t mode;             /* [const] its mode when created: the
	                            engine's file_mode, as for the segments
	                            it holds the payloads of */
	_Atomic int reopen;      /* set by le_reopen (a signal handler) */
	_Atomic uint64_t reopens;
	int mid_line;            /* [thread] the last write ended inside a
	                            line (the ring wrapped there): no reopen
	                            until the rest of it is written */
	int format;
	pthread_t thread;
	int started;
	pthread_mutex_t mu;      /* guards ring, head, len, drops_pending and
	                            the line accounting below */
	pthread_cond_t cv;       /* CLOCK_MONOTONIC */
	unsigned char *ring;
	size_t cap, head, len;
	uint64_t drops_pending;  /* to report with a line */
	/* So that lines thrown away (the reader gone) are counted as
	 * dropped: every line ends in its only '\n', so the ring's newlines
	 * are its lines; the marker lines among them (not records) are known
	 * by where they end, in bytes ever put (the ring's bytes ever taken
	 * out are put_bytes - len). */
	uint64_t put_bytes;
	uint64_t mark_end[LE_STREAM_MARKS]; /* put_bytes at a marker's end */
	unsigned mark_head, mark_n;
	int stop;
	uint64_t stop_deadline;
	_Atomic int dead;        /* EPIPE or the like: the reader is gone */
	_Atomic uint64_t lines, dropped, bytes;
	uint64_t cpu_ns;         /* the thread's CPU time when it ended */
	size_t stage_cap;        /* a port's stage: a batch's lines */
};

/* A shard writer's port: the lines of its batch, formatted in put and
 * handed over in commit.  A marker line's length has MARK_BIT set. */
#define MARK_BIT 0x80000000u
typedef struct port {
	le__sink sink;
	le__stream *s;
	uint32_t shard;
	unsigned char *stage;
	size_t len, cap;
	uint32_t *lens;
	size_t n, max;
	uint64_t dropped;        /* records whose line did not fit */
	unsigned char *plain;    /* a deferred record's text (le__rec_plain) */
	size_t plain_cap;
} port;

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- formatting ---- */

/* Decimal v.  @return digits written (at most 20). */
static size_t put_u64(char *o, uint64_t v)
{
	int n = le__ndec(v);
	le__dec_fixed(v, o + n, n);
	return (size_t)n;
}

#define TS_LEN 30

static size_t put_ts(char *out, uint64_t ns)
{
	return le__put_ts(out, ns, 9); /* recfmt.c */
}

/* Level names padded to five, as " %-5s " would. */
static const char level_pad[6][5] = {{'T', 'R', 'A', 'C', 'E'},
                                     {'D', 'E', 'B', 'U', 'G'},
                                     {'I', 'N', 'F', 'O', ' '},
                                     {'W', 'A', 'R', 'N', ' '},
                                     {'E', 'R', 'R', 'O', 'R'},
                                     {'F', 'A', 'T', 'A', 'L'}};

static size_t put_str(unsigned char *o, const char *str)
{
	size_t n = strlen(str);
	memcpy(o, str, n);
	return n;
}

size_t le__stream_format(unsigned char *out, size_t cap, int format,
                         uint64_t ts, int level, uint32_t shard, uint64_t seq,
                         uint32_t flags, const void *payload, uint32_t len)
{
	size_t w = 0, flen = 0, mlen;
	const unsigned char *p = payload, *fb = NULL;

	if (cap < 256)
		return 0;
	/* A field block (fields.h) goes after the message, formatted by
	 * recfmt.c as every output formats it. */
	if ((flags & LE_REC_FIELDS) &&
	    le__fields_split(payload, len, &fb, &flen, &p, &mlen) == 0)
		len = (uint32_t)mlen;
	if (format == LE_STREAM_JSON) {
		/* {"seq":..,"ts":"..","level":"..","shard":..,"msg":".."} */
		w = put_str(out, "{\"seq\":");
		w += put_u64((char *)out + w, seq);
		w += put_str(out + w, ",\"ts\":\"");
		w += put_ts((char *)out + w, ts);
		w += put_str(out + w, "\",\"level\":\"");
		w += put_str(out + w, le_level_name(level));
		w += put_str(out + w, "\",\"shard\":");
		w += put_u64((char *)out + w, shard);
		out[w++] = ',';
		if (flags & LE_REC_TRUNCATED)
			w += put_str(out + w, "\"truncated\":true,");
		if (flags & LE_REC_MARKER)
			w += put_str(out + w, "\"marker\":true,");
		w += put_str(out + w, "\"msg\":\"");
		w += le__json_escape(out + w, cap - w - 4, p, len);
		out[w++] = '"';
		if (flen)
			w += le__fields_format(out + w, cap - w - 2, LE__FMT_JSON,
			                       fb, flen);
		out[w++] = '}';
	} else {
		if (format == LE_STREAM_TEXT) {
			w = put_ts((char *)out, ts);
			out[w++] = ' ';
			if (level >= LE_TRACE && level <= LE_FATAL)
				memcpy(out + w, level_pad[level], 5);
			else
				memcpy(out + w, "?    ", 5);
			w += 5;
			out[w++] = ' ';
		}
		/* One record, one line: a newline inside becomes "\n". */
		const unsigned char *q = p, *end = p + len;
		while (q < end && w + 3 < cap) {
			const unsigned char *nl = memchr(q, '\n', (size_t)(end - q));
			size_t k = (size_t)((nl ? nl : end) - q);
			if (k > cap - 3 - w)
				k = cap - 3 - w;
			memcpy(out + w, q, k);
			w += k;
			q += k;
			if (q < end && *q == '\n' && w + 3 < cap) {
				out[w++] = '\\';
				out[w++] = 'n';
				q++;
			}
		}
		if (flen)
			w += le__fields_format(out + w, cap - w - 1, LE__FMT_TEXT,
			                       fb, flen);
	}
	out[w++] = '\n';
	return w;
}

/* ---- the ring and its thread ---- */

/* Wait on s->cv (s->mu held) at most ms milliseconds (ms < 1000). */
static void wait_ms(le__stream *s, long ms)
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

/* Forget the markers whose bytes have left the ring.  Caller holds mu. */
static void pop_marks(le__stream *s)
{
	uint64_t out = s->put_bytes - s->len;
	while (s->mark_n && s->mark_end[s->mark_head] <= out) {
		s->mark_head = (s->mark_head + 1) % LE_STREAM_MARKS;
		s->mark_n--;
	}
}

static uint64_t newlines(const unsigned char *p, size_t n)
{
	uint64_t k = 0;
	for (const unsigned char *e = p + n;
	     (p = memchr(p, '\n', (size_t)(e - p))) != NULL; p++)
		k++;
	return k;
}

/* Throw away what is buffered (the reader is gone, or a stalled one ran
 * out of time at close), moving its record lines from `lines` to
 * `dropped`; a line half written counts too.  Caller holds mu. */
static void discard(le__stream *s)
{
	size_t first = s->cap - s->head < s->len ? s->cap - s->head : s->len;
	uint64_t lines = newlines(s->ring + s->head, first) +
	                 newlines(s->ring, s->len - first) - s->mark_n;
	atomic_fetch_sub(&s->lines, lines);
	atomic_fetch_add(&s->dropped, lines);
	s->head = (s->head + s->len) % s->cap;
	s->len = 0;
	s->mark_n = 0;
}

/* Write what is buffered, without ever blocking for long.  Called with mu
 * unlocked; takes it to look at the ring.  @return 0, or -1 when the
 * reader is gone (EPIPE and the like). */
static int pump(le__stream *s, int timeout_ms)
{
	struct pollfd pfd = {.fd = s->wfd, .events = POLLOUT};
	int pr = poll(&pfd, 1, timeout_ms);
	if (pr <= 0)
		return 0;
	if (pfd.revents & (POLLERR | POLLNVAL))
		return -1;
	pthread_mutex_lock(&s->mu);
	size_t n = s->len, start = s->head;
	if (start + n > s->cap)
		n = s->cap - start; /* the contiguous part first */
	if (!s->own_nonblock && n > PIPE_BUF)
		n = PIPE_BUF; /* POLLOUT promises a page, not more */
	pthread_mutex_unlock(&s->mu);
	if (!n)
		return 0;
	ssize_t w = write(s->wfd, s->ring + start, n);
	if (w < 0)
		return (errno == EAGAIN || errno == EINTR) ? 0 : -1;
	if (w > 0) /* read before head moves: producers may reuse it after */
		s->mid_line = s->ring[start + (size_t)w - 1] != '\n';
	pthread_mutex_lock(&s->mu);
	s->head = (s->head + (size_t)w) % s->cap;
	s->len -= (size_t)w;
	pop_marks(s);
	atomic_fetch_add(&s->bytes, (uint64_t)w);
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return 0;
}

/* Copy into the ring at its end; caller holds mu and checked the room. */
static void ring_put(le__stream *s, const void *p, size_t n)
{
	size_t at = (s->head + s->len) % s->cap, first = s->cap - at;
	if (first > n)
		first = n;
	memcpy(s->ring + at, p, first);
	memcpy(s->ring, (const char *)p + first, n - first);
	s->len += n;
	s->put_bytes += n;
}

/* The "N records dropped" line, if any are pending; caller holds mu and
 * has 64 bytes of room. */
static void put_drops(le__stream *s)
{
	if (!s->drops_pending || s->cap - s->len < 64 ||
	    s->mark_n == LE_STREAM_MARKS)
		return; /* later, with the count so far */
	char m[64];
	int k = snprintf(m, sizeof m, "%" PRIu64 " records dropped\n",
	                 s->drops_pending);
	ring_put(s, m, (size_t)k);
	s->mark_end[(s->mark_head + s->mark_n) % LE_STREAM_MARKS] = s->put_bytes;
	s->mark_n++;
	s->drops_pending = 0;
}

/*
 * Open stream_path again (logrotate renamed it).  Only this thread writes
 * wfd, so every byte pumped before this went to the old file and every
 * byte after goes to the new one.  If the open fails the old file is kept
 * (lines still go somewhere) and the next le_reopen tries again.
 */
static void reopen(le__stream *s)
{
	if (!s->path)
		return;
	int fd = open(s->path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC,
	              s->mode);
	if (fd < 0)
		return;
	close(s->wfd);
	s->fd = s->wfd = fd;
	atomic_fetch_add(&s->reopens, 1);
}

void le__stream_reopen(le__stream *s)
{
	if (s && s->path)
		atomic_store(&s->reopen, 1); /* lock-free: signal-safe */
}

static void *stream_main(void *arg)
{
	le__stream *s = arg;

	for (;;) {
		pthread_mutex_lock(&s->mu);
		/* le_reopen cannot signal cv (not async-signal-safe): a
		 * request is seen within one wait. */
		while (!s->len && !s->stop && !s->drops_pending &&
		       !atomic_load(&s->reopen)) {
			wait_ms(s, 100);
		}
		put_drops(s);
		int stop = s->stop, empty = !s->len;
		pthread_mutex_unlock(&s->mu);
		/* At a line's end only: a line is never split across the
		 * old file and the new one. */
		if (!s->mid_line && atomic_exchange(&s->reopen, 0))
			reopen(s);
		if (stop && (empty || s->dead ||
		             le__mono_ns() > s->stop_deadline))
			break;
		if (s->dead) {
			/* The reader is gone: throw away what is buffered. */
			pthread_mutex_lock(&s->mu);
			discard(s);
			pthread_cond_broadcast(&s->cv);
			pthread_mutex_unlock(&s->mu);
			continue;
		}
		if (pump(s, 100) < 0)
			atomic_store(&s->dead, 1);
	}
	s->cpu_ns = le__self_cpu_ns();
	return NULL;
}

int le__stream_open(le__stream **out, const le_config *c)
{
	char path[64];
	pthread_condattr_t ca;
	le__stream *s = calloc(1, sizeof *s);

	*out = NULL;
	if (!s)
		return LE_ENOMEM;
	s->fd = c->stream_fd;
	s->format = c->stream_format;
	pthread_mutex_init(&s->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cv, &ca);
	pthread_condattr_destroy(&ca);
	/* A file of our own: appended to (O_APPEND, so a file logrotate
	 * truncated is written from its new end), reopened by le_reopen. */
	if (c->stream_path) {
		s->path = c->stream_path;
		s->mode = (mode_t)(c->file_mode ? c->file_mode : 0640);
		s->fd = open(s->path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC,
		             s->mode);
		if (s->fd < 0) {
			int rc = -errno;
			le__seterr("stream_path: cannot open %s: %s", s->path,
			           strerror(errno));
			s->wfd = -1;
			le__stream_close(s);
			return rc;
		}
	}
	/* A description of our own, non-blocking, for pipes, FIFOs and
	 * terminals only: those have no file offset to share.  A regular
	 * file never stalls, and reopening it would give us an offset of
	 * our own, writing over whoever else writes to that stdout. */
	struct stat st;
	s->wfd = s->fd;
	if (!s->path && fstat(s->fd, &st) == 0 &&
	    (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode))) {
		snprintf(path, sizeof path, "/proc/self/fd/%d", s->fd);
		int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
		if (fd >= 0) {
			s->wfd = fd;
			s->own_nonblock = 1;
		}
	}
	s->cap = c->stream_buffer_bytes;
	/* A batch is at most max_pending_bytes of payload past its first
	 * record: twice that as plain lines, more only for lines that
	 * escape heavily (JSON), which are then dropped and counted. */
	s->stage_cap = (size_t)c->max_pending_bytes * 2 +
	               le__stream_line_max(c->max_record_bytes) + 256;
	s->ring = malloc(s->cap);
	if (!s->ring) {
		le__stream_close(s);
		return LE_ENOMEM;
	}
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = -pthread_create(&s->thread, NULL, stream_main, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc < 0) {
		le__seterr("stream_fd: cannot start the stream thread");
		le__stream_close(s);
		return rc;
	}
	le__name_thread(s->thread, "le-stream");
	s->started = 1;
	*out = s;
	return 0;
}

void le__stream_stop(le__stream *s)
{
	if (!s || !s->started)
		return;
	pthread_mutex_lock(&s->mu);
	s->stop = 1;
	/* A reader that keeps up gets everything; a stalled one gets a
	 * second, then the rest is thrown away, and counted: le_close_stats
	 * reports it. */
	s->stop_deadline = le__mono_ns() + 1000000000u;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->thread, NULL);
	s->started = 0;
	pthread_mutex_lock(&s->mu);
	if (s->len)
		discard(s);
	pthread_mutex_unlock(&s->mu);
}

void le__stream_forget(le__stream *s)
{
	if (!s)
		return;
	if ((s->own_nonblock || s->path) && s->wfd >= 0)
		close(s->wfd);
	free(s->ring);
	free(s);
}

void le__stream_close(le__stream *s)
{
	if (!s)
		return;
	le__stream_stop(s);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	le__stream_forget(s);
}

/* Hand lines over (lens[i] with MARK_BIT: a marker line).  @return the
 * record lines dropped for want of room or of a reader. */
static uint64_t push(le__stream *s, const unsigned char *lines,
                     const uint32_t *lens, size_t n)
{
	uint64_t dropped = 0, recs = 0;
	size_t off = 0;

	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < n; i++) {
		uint32_t len = lens[i] & ~MARK_BIT;
		int mark = (lens[i] & MARK_BIT) != 0;
		recs += !mark;
		if (atomic_load(&s->dead) || s->cap - s->len < len + 64 ||
		    (mark && s->mark_n == LE_STREAM_MARKS)) {
			dropped += !mark;
			s->drops_pending += !mark;
		} else {
			/* Lost lines are reported before the next one that
			 * gets through, in their place in the stream. */
			put_drops(s);
			ring_put(s, lines + off, len);
			if (mark) {
				s->mark_end[(s->mark_head + s->mark_n) %
				            LE_STREAM_MARKS] = s->put_bytes;
				s->mark_n++;
			}
		}
		off += len;
	}
	if (n)
		pthread_cond_signal(&s->cv);
	/* Under mu: a discard (which takes lines back out) never finds
	 * them not yet counted. */
	atomic_fetch_add(&s->lines, recs - dropped);
	atomic_fetch_add(&s->dropped, dropped);
	pthread_mutex_unlock(&s->mu);
	return dropped;
}

int le__stream_drained(le__stream *s, int timeout_ms)
{
	uint64_t dl = le__mono_ns() + (uint64_t)timeout_ms * 1000000u;
	pthread_mutex_lock(&s->mu);
	/* Until the bytes handed over before this call are out of the
	 * buffer, not until it is empty: with a reader slower than the
	 * producers it never is, and the lines put after ours are not the
	 * caller's to wait for. */
	uint64_t want = s->put_bytes;
	while (s->put_bytes - s->len < want && !atomic_load(&s->dead)) {
		if (timeout_ms >= 0 && le__mono_ns() > dl)
			break;
		wait_ms(s, 10);
	}
	int done = s->put_bytes - s->len >= want;
	pthread_mutex_unlock(&s->mu);
	return done;
}

void le__stream_stats(le__stream *s, le_stats *o, int forked)
{
	o->stream_lines += atomic_load(&s->lines);
	o->stream_dropped += atomic_load(&s->dropped);
	o->stream_bytes += atomic_load(&s->bytes);
	o->stream_reopens += atomic_load(&s->reopens);
	if (!s->started)
		o->stream_cpu_ns += s->cpu_ns; /* joined: le_close_stats */
	else if (!forked)
		o->stream_cpu_ns += le__thread_cpu_ns(s->thread);
}

/* ---- a shard writer's port ---- */

/* Format each record's line into the stage; a line that does not fit is
 * dropped and counted there.  Takes every record. */
static size_t port_put(le__sink *sk, const le__rec *r, size_t n)
{
	port *p = (port *)sk;

	for (size_t i = 0; i < n; i++) {
		le__rec x;
		le__rec_plain(&r[i], &x, p->plain, p->plain_cap);
		size_t need = le__stream_line_max(x.len);
		if (p->n == p->max || p->len + need > p->cap) {
			p->dropped += !(x.flags & LE_REC_MARKER);
			continue;
		}
		size_t k = le__stream_format(p->stage + p->len, p->cap - p->len,
		                             p->s->format, x.ts, x.level,
		                             p->shard, x.seq, x.flags,
		                             x.payload, x.len);
		p->lens[p->n++] = (uint32_t)k |
		                  ((x.flags & LE_REC_MARKER) ? MARK_BIT : 0);
		p->len += k;
	}
	return n;
}

/* Hand the stage's lines to the stream.  Never fails: what finds no room
 * is dropped and counted. */
static int port_commit(le__sink *sk)
{
	port *p = (port *)sk;
	le__stream *s = p->s;

	if (p->n)
		push(s, p->stage, p->lens, p->n);
	if (p->dropped) {
		pthread_mutex_lock(&s->mu);
		atomic_fetch_add(&s->dropped, p->dropped);
		s->drops_pending += p->dropped;
		pthread_cond_signal(&s->cv);
		pthread_mutex_unlock(&s->mu);
	}
	p->n = 0;
	p->len = 0;
	p->dropped = 0;
	return 0;
}

static void port_drop(le__sink *sk, uint64_t unseen)
{
	port *p = (port *)sk;

	p->dropped += unseen;
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
	free(p->lens);
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

int le__stream_port(le__sink **out, le__stream *s, uint32_t shard,
                    uint32_t batch, uint32_t max_rec)
{
	port *p = calloc(1, sizeof *p);

	*out = NULL;
	if (!p)
		return LE_ENOMEM;
	p->sink.ops = &port_ops;
	p->s = s;
	p->shard = shard;
	/* A batch's lines: its records (and a marker), each up to
	 * max_pending_bytes of payload in all, escaped. */
	p->max = (size_t)batch + 64;
	p->cap = s->stage_cap;
	p->stage = malloc(p->cap);
	p->lens = malloc(p->max * sizeof *p->lens);
	p->plain_cap = (size_t)max_rec + 1;
	p->plain = malloc(p->plain_cap);
	if (!p->stage || !p->lens || !p->plain) {
		port_free(&p->sink);
		return LE_ENOMEM;
	}
	*out = &p->sink;
	return 0;
}
