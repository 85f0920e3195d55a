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

#include "sink/linesink.h"

#include <pthread.h>
#include <stdatomic.h>

#include "record/fields.h"
#include "base/fmt.h"
#include "base/internal.h"
#include "base/os.h"

#define LE_STREAM_MARKS 64       /* marker lines the buffer may hold */

struct le__stream {
	le__linesink ls;         /* first: the shared part; its mu also
	                            guards the line accounting below */
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
	/* So that lines thrown away (the reader gone) are counted as
	 * dropped: every line ends in its only '\n', so the ring's newlines
	 * are its lines; the marker lines among them (not records) are known
	 * by where they end, in bytes ever put (the ring's bytes ever taken
	 * out are put_bytes - len). */
	uint64_t mark_end[LE_STREAM_MARKS]; /* put_bytes at a marker's end */
	unsigned mark_head, mark_n;
	_Atomic int dead;        /* EPIPE or the like: the reader is gone */
	_Atomic uint64_t lines, bytes;
};

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
	int bt = 0;

	if (cap < 256)
		return 0;
	/* A field block (fields.h) goes after the message, formatted by
	 * recfmt.c as every output formats it.  Recorded history (the
	 * flight recorder's) is marked as logengine cat marks it:
	 * "backtrace":true, or {backtrace} before the message. */
	if ((flags & LE_REC_FIELDS) &&
	    le__fields_split(payload, len, &fb, &flen, &p, &mlen) == 0) {
		len = (uint32_t)mlen;
		bt = le__fields_unmark(&fb, &flen);
	}
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
		if (bt)
			w += put_str(out + w, "\"backtrace\":true,");
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
		if (bt)
			w += put_str(out + w, "{backtrace} ");
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

/* Forget the markers whose bytes have left the ring.  Caller holds mu. */
static void pop_marks(le__stream *s)
{
	uint64_t out = s->ls.put_bytes - s->ls.len;
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
	le__linesink *ls = &s->ls;
	size_t first = ls->cap - ls->head < ls->len ? ls->cap - ls->head
	                                            : ls->len;
	uint64_t lines = newlines(ls->ring + ls->head, first) +
	                 newlines(ls->ring, ls->len - first) - s->mark_n;
	atomic_fetch_sub(&s->lines, lines);
	atomic_fetch_add(&ls->dropped, lines);
	ls->head = (ls->head + ls->len) % ls->cap;
	ls->len = 0;
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
	pthread_mutex_lock(&s->ls.mu);
	size_t n = s->ls.len, start = s->ls.head;
	if (start + n > s->ls.cap)
		n = s->ls.cap - start; /* the contiguous part first */
	if (!s->own_nonblock && n > PIPE_BUF)
		n = PIPE_BUF; /* POLLOUT promises a page, not more */
	pthread_mutex_unlock(&s->ls.mu);
	if (!n)
		return 0;
	ssize_t w = write(s->wfd, s->ls.ring + start, n);
	if (w < 0)
		return (errno == EAGAIN || errno == EINTR) ? 0 : -1;
	if (w > 0) /* read before head moves: producers may reuse it after */
		s->mid_line = s->ls.ring[start + (size_t)w - 1] != '\n';
	pthread_mutex_lock(&s->ls.mu);
	s->ls.head = (s->ls.head + (size_t)w) % s->ls.cap;
	s->ls.len -= (size_t)w;
	pop_marks(s);
	atomic_fetch_add(&s->bytes, (uint64_t)w);
	pthread_cond_broadcast(&s->ls.cv);
	pthread_mutex_unlock(&s->ls.mu);
	return 0;
}

/* The "N records dropped" line, if any are pending; caller holds mu and
 * has 64 bytes of room. */
static void put_drops(le__stream *s)
{
	if (!s->ls.drops_pending || s->ls.cap - s->ls.len < 64 ||
	    s->mark_n == LE_STREAM_MARKS)
		return; /* later, with the count so far */
	char m[64];
	int k = snprintf(m, sizeof m, "%" PRIu64 " records dropped\n",
	                 s->ls.drops_pending);
	le__linesink_put(&s->ls, m, (size_t)k);
	s->mark_end[(s->mark_head + s->mark_n) % LE_STREAM_MARKS] = s->ls.put_bytes;
	s->mark_n++;
	s->ls.drops_pending = 0;
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

static void stream_reopen(le__linesink *ls)
{
	le__stream *s = (le__stream *)ls;
	if (s->path)
		atomic_store(&s->reopen, 1); /* lock-free: signal-safe */
}

static void *stream_main(void *arg)
{
	le__stream *s = arg; /* its le__linesink, first */

	for (;;) {
		pthread_mutex_lock(&s->ls.mu);
		/* le_reopen cannot signal cv (not async-signal-safe): a
		 * request is seen within one wait. */
		while (!s->ls.len && !s->ls.stop && !s->ls.drops_pending &&
		       !atomic_load(&s->reopen)) {
			le__linesink_wait(&s->ls, 100);
		}
		put_drops(s);
		int stop = s->ls.stop, empty = !s->ls.len;
		pthread_mutex_unlock(&s->ls.mu);
		/* At a line's end only: a line is never split across the
		 * old file and the new one. */
		if (!s->mid_line && atomic_exchange(&s->reopen, 0))
			reopen(s);
		if (stop && (empty || s->dead ||
		             le__mono_ns() > s->ls.stop_deadline))
			break;
		if (s->dead) {
			/* The reader is gone: throw away what is buffered. */
			pthread_mutex_lock(&s->ls.mu);
			discard(s);
			pthread_cond_broadcast(&s->ls.cv);
			pthread_mutex_unlock(&s->ls.mu);
			continue;
		}
		if (pump(s, 100) < 0)
			atomic_store(&s->dead, 1);
	}
	s->ls.cpu_ns = le__self_cpu_ns();
	return NULL;
}

static int stream_open(le__linesink **out, const le_config *c)
{
	char path[64];
	le__stream *s = calloc(1, sizeof *s);

	*out = NULL;
	if (!s)
		return LE_ENOMEM;
	le__linesink_init(&s->ls, &le__stream_kind);
	s->fd = c->stream_fd;
	s->format = c->stream_format;
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
			le__linesink_close(&s->ls);
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
	/* A batch is at most max_pending_bytes of payload past its first
	 * record: twice that as plain lines, more only for lines that
	 * escape heavily (JSON), which are then dropped and counted. */
	size_t stage = (size_t)c->max_pending_bytes * 2 +
	               le__stream_line_max(c->max_record_bytes) + 256;
	int rc = le__linesink_start(&s->ls, c->stream_buffer_bytes, stage,
	                            "stream_fd");
	if (rc < 0) {
		le__linesink_close(&s->ls);
		return rc;
	}
	*out = &s->ls;
	return 0;
}

/* After the thread: what a stalled reader did not take is thrown away,
 * and counted. */
static void stream_stopped(le__linesink *ls)
{
	le__stream *s = (le__stream *)ls;

	pthread_mutex_lock(&s->ls.mu);
	if (s->ls.len)
		discard(s);
	pthread_mutex_unlock(&s->ls.mu);
}

static void stream_forget(le__linesink *ls)
{
	le__stream *s = (le__stream *)ls;

	if ((s->own_nonblock || s->path) && s->wfd >= 0)
		close(s->wfd);
	free(s);
}

/* linesink.h's push: the stage's lines into the ring, in order; a line
 * that finds no room (or no reader) is dropped and counted, and reported
 * before the next one that gets through, in its place in the stream.
 * Caller holds mu. */
static void stream_push(le__linesink *ls, const unsigned char *stage,
                        size_t len, size_t n, uint64_t port_dropped)
{
	le__stream *s = (le__stream *)ls;
	uint64_t dropped = 0, recs = 0;

	for (size_t off = 0; off < len;) {
		uint32_t v;
		memcpy(&v, stage + off, 4);
		uint32_t k = v & ~LE_LINE_MARK;
		int mark = (v & LE_LINE_MARK) != 0;
		recs += !mark;
		if (atomic_load(&s->dead) || s->ls.cap - s->ls.len < k + 64 ||
		    (mark && s->mark_n == LE_STREAM_MARKS)) {
			dropped += !mark;
			s->ls.drops_pending += !mark;
		} else {
			put_drops(s);
			le__linesink_put(&s->ls, stage + off + 4, k);
			if (mark) {
				s->mark_end[(s->mark_head + s->mark_n) %
				            LE_STREAM_MARKS] = s->ls.put_bytes;
				s->mark_n++;
			}
		}
		off += 4 + k;
	}
	/* Under mu: a discard (which takes lines back out) never finds
	 * them not yet counted. */
	atomic_fetch_add(&s->lines, recs - dropped);
	atomic_fetch_add(&s->ls.dropped, dropped + port_dropped);
	s->ls.drops_pending += port_dropped;
	if (n || port_dropped)
		pthread_cond_signal(&s->ls.cv);
}

static int stream_drained(le__linesink *ls, int timeout_ms)
{
	le__stream *s = (le__stream *)ls;
	uint64_t dl = le__mono_ns() + (uint64_t)timeout_ms * 1000000u;
	pthread_mutex_lock(&s->ls.mu);
	/* Until the bytes handed over before this call are out of the
	 * buffer, not until it is empty: with a reader slower than the
	 * producers it never is, and the lines put after ours are not the
	 * caller's to wait for. */
	uint64_t want = s->ls.put_bytes;
	while (s->ls.put_bytes - s->ls.len < want && !atomic_load(&s->dead)) {
		if (timeout_ms >= 0 && le__mono_ns() > dl)
			break;
		le__linesink_wait(&s->ls, 10);
	}
	int done = s->ls.put_bytes - s->ls.len >= want;
	pthread_mutex_unlock(&s->ls.mu);
	return done;
}

static void stream_stats(le__linesink *ls, le_stats *o, int forked)
{
	le__stream *s = (le__stream *)ls;
	o->stream_lines += atomic_load(&s->lines);
	o->stream_dropped += atomic_load(&s->ls.dropped);
	o->stream_bytes += atomic_load(&s->bytes);
	o->stream_reopens += atomic_load(&s->reopens);
	if (!s->ls.started)
		o->stream_cpu_ns += s->ls.cpu_ns; /* joined: le_close_stats */
	else if (!forked)
		o->stream_cpu_ns += le__thread_cpu_ns(s->ls.thread);
}

static int stream_wanted(const le_config *c)
{
	return c->stream_fd > 0 || c->stream_path;
}

static size_t stream_line_max(const le__linesink *ls, size_t len)
{
	(void)ls;
	return le__stream_line_max(len);
}

static size_t stream_line(le__linesink *ls, unsigned char *out, size_t cap,
                          uint32_t shard, const le__rec *r)
{
	return le__stream_format(out, cap, ((le__stream *)ls)->format, r->ts,
	                         r->level, shard, r->seq, r->flags, r->payload,
	                         r->len);
}

const le__linekind le__stream_kind = {
	.name = "stream",
	.wanted = stream_wanted,
	.open = stream_open,
	.main = stream_main,
	.line_max = stream_line_max,
	.format = stream_line,
	.push = stream_push,
	.drained = stream_drained,
	.stats = stream_stats,
	.reopen = stream_reopen,
	.stopped = stream_stopped,
	.forget = stream_forget,
};
