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
 * Synchronous mode (stream_sync) writes each line in the caller's thread
 * with a blocking write: the baseline of the pipeline comparison, the same
 * formatting code, and exactly the stall the async mode exists to remove.
 */
#define _GNU_SOURCE
#include "engine.h"
#include "fmt.h"

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

/*
 * "2026-11-30T21:30:27.123456789Z", 30 bytes.  The calendar part changes
 * once a second, and gmtime_r with snprintf cost more than all the rest of
 * a line, so each thread (a shard's writer; a caller in stream_sync mode)
 * keeps the text of the last second it formatted.
 */
#define TS_LEN 30
static _Thread_local struct {
	uint64_t sec;
	char text[64]; /* "YYYY-MM-DDTHH:MM:SS.", 20 used */
} ts_cache = {UINT64_MAX, ""};

static size_t put_ts(char *out, uint64_t ns)
{
	uint64_t sec = ns / 1000000000u;
	if (sec != ts_cache.sec) {
		time_t t = (time_t)sec;
		struct tm tm;
		gmtime_r(&t, &tm);
		snprintf(ts_cache.text, sizeof ts_cache.text,
		         "%04d-%02d-%02dT%02d:%02d:%02d.", tm.tm_year + 1900,
		         tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
		         tm.tm_sec);
		ts_cache.sec = sec;
	}
	memcpy(out, ts_cache.text, 20);
	le__dec_fixed(ns % 1000000000u, out + 29, 9);
	out[29] = 'Z';
	return TS_LEN;
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

/* JSON string body: escapes ", \, control bytes; bytes that are not valid
 * UTF-8 become \u00XX of their value (as logengine cat -o json does). */
static size_t json_escape(unsigned char *o, size_t cap, const unsigned char *p,
                          size_t n)
{
	static const char hex[] = "0123456789abcdef";
	size_t w = 0;
	for (size_t i = 0; i < n && w + 12 < cap;) {
		unsigned c = p[i];
		if (c == '"' || c == '\\') {
			o[w++] = '\\';
			o[w++] = (unsigned char)c;
			i++;
		} else if (c < 0x20 || c == 0x7f) {
			w += (size_t)snprintf((char *)o + w, 8, "\\u%04x", c);
			i++;
		} else if (c < 0x80) {
			o[w++] = (unsigned char)c;
			i++;
		} else {
			size_t k = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
			size_t j = 1;
			while (k && j < k && i + j < n && (p[i + j] & 0xc0) == 0x80)
				j++;
			if (k && j == k && k <= 4 && c <= 0xf4) {
				memcpy(o + w, p + i, k);
				w += k;
				i += k;
			} else {
				o[w++] = '\\', o[w++] = 'u', o[w++] = '0',
				o[w++] = '0', o[w++] = (unsigned char)hex[c >> 4],
				o[w++] = (unsigned char)hex[c & 15];
				i++;
			}
		}
	}
	return w;
}

size_t le__stream_format(unsigned char *out, size_t cap, int format,
                         uint64_t ts, int level, uint32_t shard, uint64_t seq,
                         uint32_t flags, const void *payload, uint32_t len)
{
	size_t w = 0;
	const unsigned char *p = payload;

	if (cap < 256)
		return 0;
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
		w += json_escape(out + w, cap - w - 4, p, len);
		out[w++] = '"';
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
	}
	out[w++] = '\n';
	return w;
}

/* ---- the ring and its thread ---- */

/* Wait on s->cv (s->mu held) at most ms milliseconds (ms < 1000). */
static void wait_ms(le__stream *s, long ms)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
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
	atomic_fetch_add(&s->discarded, lines);
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

static void *stream_main(void *arg)
{
	le__stream *s = arg;

	for (;;) {
		pthread_mutex_lock(&s->mu);
		while (!s->len && !s->stop && !s->drops_pending) {
			wait_ms(s, 100);
		}
		put_drops(s);
		int stop = s->stop, empty = !s->len;
		pthread_mutex_unlock(&s->mu);
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

int le__stream_open(le__stream *s, const le_config *c)
{
	char path[64];

	memset(s, 0, sizeof *s);
	s->fd = c->stream_fd;
	s->format = c->stream_format;
	s->sync = c->stream_sync;
	s->wfd = -1;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	if (s->sync)
		return 0;
	/* A description of our own, non-blocking, for pipes, FIFOs and
	 * terminals only: those have no file offset to share.  A regular
	 * file never stalls, and reopening it would give us an offset of
	 * our own, writing over whoever else writes to that stdout. */
	struct stat st;
	s->wfd = s->fd;
	if (fstat(s->fd, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode))) {
		snprintf(path, sizeof path, "/proc/self/fd/%d", s->fd);
		int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
		if (fd >= 0) {
			s->wfd = fd;
			s->own_nonblock = 1;
		}
	}
	s->cap = c->stream_buffer_bytes;
	s->ring = malloc(s->cap);
	if (!s->ring)
		return LE_ENOMEM;
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = -pthread_create(&s->thread, NULL, stream_main, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc < 0) {
		le__seterr("stream_fd: cannot start the stream thread");
		return rc;
	}
	le__name_thread(s->thread, "le-stream");
	s->started = 1;
	return 0;
}

void le__stream_stop(le__stream *s)
{
	if (!s->started)
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
	if (s->own_nonblock && s->wfd >= 0)
		close(s->wfd);
	s->wfd = -1;
	free(s->ring);
	s->ring = NULL;
	s->started = 0;
}

void le__stream_close(le__stream *s)
{
	le__stream_stop(s);
	le__stream_forget(s);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
}

uint64_t le__stream_push(le__stream *s, const unsigned char *lines,
                         const uint32_t *lens, size_t n)
{
	uint64_t dropped = 0;
	size_t off = 0;

	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < n; i++) {
		if (atomic_load(&s->dead) || s->cap - s->len < lens[i] + 64) {
			dropped++;
			s->drops_pending++;
		} else {
			/* Lost lines are reported before the next one that
			 * gets through, in their place in the stream. */
			put_drops(s);
			ring_put(s, lines + off, lens[i]);
		}
		off += lens[i];
	}
	if (n > dropped)
		pthread_cond_signal(&s->cv);
	/* Under mu: a discard (which takes lines back out) never finds
	 * them not yet counted. */
	atomic_fetch_add(&s->lines, n - dropped);
	atomic_fetch_add(&s->dropped, dropped);
	pthread_mutex_unlock(&s->mu);
	return dropped;
}

int le__stream_write_sync(le__stream *s, const unsigned char *line, size_t n)
{
	while (n > 0) {
		ssize_t w = write(s->fd, line, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			atomic_fetch_add(&s->dropped, 1);
			return -errno;
		}
		line += w;
		n -= (size_t)w;
		atomic_fetch_add(&s->bytes, (uint64_t)w);
	}
	atomic_fetch_add(&s->lines, 1);
	return 0;
}

int le__stream_drained(le__stream *s, int timeout_ms)
{
	uint64_t dl = le__mono_ns() + (uint64_t)timeout_ms * 1000000u;
	pthread_mutex_lock(&s->mu);
	while (s->len && !atomic_load(&s->dead)) {
		if (timeout_ms >= 0 && le__mono_ns() > dl)
			break;
		wait_ms(s, 10);
	}
	int done = !s->len;
	pthread_mutex_unlock(&s->mu);
	return done;
}
