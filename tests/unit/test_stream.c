/*
 * test_stream.c -- the stream sink: records as lines on a descriptor,
 * never letting a slow, stalled or dead reader block a producer.
 */
#include "harness.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>

#include "logengine.h"
#include "base/os.h" /* le__mono_ns */
#include "sink/stream.h" /* le__stream_format */

static char dir[256];
static int overflow = LE_OVERFLOW_DROP;
static uint32_t stream_buffer; /* 0: the default */

static le_engine *open_stream(int fd, int store, int format)
{
	le_config c;
	le_config_init(&c);
	c.store = store;
	c.dir = store ? t_tmpdir(dir) : NULL;
	c.durability = LE_SYNC_NONE;
	c.stream_fd = fd;
	c.stream_format = format;
	c.flush_ms = 5;
	c.overflow = overflow;
	if (stream_buffer)
		c.stream_buffer_bytes = stream_buffer;
	le_engine *e;
	int rc = le_open(&e, &c);
	if (rc < 0) {
		fprintf(stderr, "  le_open: %s (%s)\n", le_strerror(rc), le_errmsg());
		_exit(1);
	}
	return e;
}

TEST(producer_into_a_pipe_nobody_reads_finishes_promptly)
{
	int p[2];
	CHECK(pipe(p) == 0);
	le_engine *e = open_stream(p[1], 0, LE_STREAM_RAW);
	char buf[100];
	memset(buf, 'z', sizeof buf);
	/* Nobody reads: the pipe (64 KiB) and the sink's buffer (1 MiB)
	 * fill, and then lines are dropped, not waited for.  The harness's
	 * alarm fails this test if a call blocks. */
	for (int i = 0; i < 100000; i++) {
		int rc = le_write(e, 0, LE_INFO, buf, sizeof buf);
		CHECK(rc == 0 || rc == LE_EFULL);
	}
	CHECK_EQ(le_flush(e, 200), LE_ETIMEDOUT); /* the reader never came */
	le_stats st;
	do { /* the writer empties the queue into the sink (or drops) */
		usleep(1000);
		le_stats_get(e, &st);
	} while (st.queue_records > 0);
	CHECK_EQ(st.accepted, 100000);
	CHECK_EQ(st.accepted, st.dropped_full + st.stream_lines +
	                              st.stream_dropped);
	CHECK_EQ(st.written, 0); /* no store */
	/* 10 MB offered, ~1.1 MB of room (pipe + sink buffer): most were
	 * dropped, at the queue or at the sink, and all were counted. */
	CHECK(st.dropped_full + st.stream_dropped > 80000);
	CHECK(st.stream_lines > 0 && st.stream_lines < 20000);
	le_close(e); /* gives the reader a second, then counts the rest */
	close(p[0]);
	close(p[1]);
}

/* The reader is gone before the first line: the process lives on, and
 * every record is counted as dropped by the sink, whether it was refused
 * at the sink's door or already in its buffer when the write failed. */
TEST(dead_reader_does_not_kill_the_process)
{
	int p[2];
	CHECK(pipe(p) == 0);
	close(p[0]); /* the reader is gone before we start */
	signal(SIGPIPE, SIG_DFL); /* as in an application that never set it */
	overflow = LE_OVERFLOW_BLOCK; /* none lost at the queue */
	le_engine *e = open_stream(p[1], 0, LE_STREAM_TEXT);
	for (int i = 0; i < 10000; i++)
		CHECK_EQ(le_logf(e, LE_INFO, "line %d", i), 0);
	le_flush(e, 500);
	le_stats st;
	/* the sink counts what it throws away when it finds the reader
	 * gone: asynchronously, so wait for it (bounded) */
	uint64_t until = le__mono_ns() + 10000000000ull;
	do {
		usleep(1000);
		le_stats_get(e, &st);
	} while ((st.queue_records > 0 || st.stream_dropped < 10000) &&
	         le__mono_ns() < until);
	CHECK_EQ(st.accepted, 10000);
	CHECK_EQ(st.accepted, st.stream_lines + st.stream_dropped);
	CHECK_EQ(st.stream_bytes, 0);
	CHECK_EQ(st.stream_dropped, 10000); /* every one, exactly once */
	CHECK_EQ(le_close(e), 0); /* still alive to get here */
	close(p[1]);
	overflow = LE_OVERFLOW_DROP;
}

struct reader {
	int fd;
	char *buf;
	size_t len, cap;
};

static void *drain_pipe(void *arg)
{
	struct reader *r = arg;
	ssize_t n;
	while ((n = read(r->fd, r->buf + r->len, r->cap - r->len)) > 0)
		r->len += (size_t)n;
	return NULL;
}

TEST(lines_arrive_whole_and_in_order_beside_the_segments)
{
	int p[2];
	CHECK(pipe(p) == 0);
	struct reader rd = {.fd = p[0], .cap = 8 << 20};
	rd.buf = malloc(rd.cap);
	pthread_t th;
	pthread_create(&th, NULL, drain_pipe, &rd);
	overflow = LE_OVERFLOW_BLOCK;
	/* The whole burst fits the sink's buffer (2 MB of lines), so none
	 * may be dropped however the reader thread is scheduled. */
	stream_buffer = 8u << 20;
	le_engine *e = open_stream(p[1], 1, LE_STREAM_JSON);
	stream_buffer = 0;
	for (int i = 0; i < 20000; i++)
		CHECK_EQ(le_logf(e, LE_WARN, "msg \"%d\"", i), 0);
	CHECK_RC(le_flush(e, 10000));
	le_stats st;
	le_stats_get(e, &st);
	CHECK_EQ(st.written, 20000);
	CHECK_EQ(st.stream_dropped, 0);
	CHECK(st.stream_cpu_ns > 0 && st.writer_cpu_ns > 0);
	CHECK_EQ(st.record_hwm_bytes, 11); /* msg "10000" .. msg "19999" */
	le_stats fin;
	CHECK_EQ(le_close_stats(e, &fin), 0);
	CHECK_EQ(fin.written, 20000);
	CHECK_EQ(fin.stream_lines, 20000);
	CHECK_EQ(fin.stream_dropped, 0);
	/* the threads' CPU, read as they ended (they are joined now) */
	CHECK(fin.writer_cpu_ns >= st.writer_cpu_ns);
	CHECK(fin.stream_cpu_ns >= st.stream_cpu_ns);
	close(p[1]);
	pthread_join(th, NULL);
	/* Every line a JSON object, in order, with the escaped quotes. */
	char *line = rd.buf, *end = rd.buf + rd.len;
	for (int i = 0; i < 20000; i++) {
		char want[64];
		snprintf(want, sizeof want, "\"msg\":\"msg \\\"%d\\\"\"}", i);
		char *nl = memchr(line, '\n', (size_t)(end - line));
		CHECK(nl != NULL);
		*nl = 0;
		CHECK(strncmp(line, "{\"seq\":", 7) == 0);
		CHECK(strstr(line, "\"level\":\"WARN\"") != NULL);
		CHECK(strstr(line, want) != NULL);
		line = nl + 1;
	}
	CHECK(line == end);
	free(rd.buf);
	close(p[0]);
	t_rmrf(dir);
}

TEST(a_stalled_reader_that_returns_gets_a_drop_count_line)
{
	int p[2];
	CHECK(pipe(p) == 0);
	le_config c;
	le_config_init(&c);
	c.store = 0;
	c.stream_fd = p[1];
	c.stream_buffer_bytes = 8192;
	c.flush_ms = 2;
	le_engine *e;
	CHECK_RC(le_open(&e, &c));
	char buf[200];
	memset(buf, 'q', sizeof buf);
	for (int i = 0; i < 5000; i++)
		le_write(e, 0, LE_INFO, buf, sizeof buf);
	le_flush(e, 100);
	/* Now the reader comes back. */
	struct reader rd = {.fd = p[0], .cap = 4 << 20};
	rd.buf = malloc(rd.cap);
	pthread_t th;
	pthread_create(&th, NULL, drain_pipe, &rd);
	CHECK_EQ(le_write(e, 0, LE_INFO, "after", 5), 0);
	le_flush(e, 5000);
	le_close(e);
	close(p[1]);
	pthread_join(th, NULL);
	rd.buf[rd.len < rd.cap ? rd.len : rd.cap - 1] = 0;
	CHECK(strstr(rd.buf, " records dropped\n") != NULL);
	CHECK(rd.len >= 6 && memcmp(rd.buf + rd.len - 6, "after\n", 6) == 0);
	free(rd.buf);
	close(p[0]);
}

/* What is still buffered behind a reader that never reads, a second into
 * le_close, is thrown away: counted as dropped, never as lines written.
 * The pipe then holds exactly stream_lines record lines. */
static void stalled_reader_close(int store)
{
	int p[2];
	CHECK(pipe(p) == 0);
	overflow = LE_OVERFLOW_BLOCK; /* none lost at the queue */
	le_engine *e = open_stream(p[1], store, LE_STREAM_RAW);
	char buf[100];
	memset(buf, 'z', sizeof buf);
	/* 2 MB of lines against a 64 KiB pipe and a 1 MiB sink buffer:
	 * some are refused at the sink's door, ~1 MiB are buffered at close */
	for (int i = 0; i < 20000; i++)
		CHECK_EQ(le_write(e, 0, LE_INFO, buf, sizeof buf), 0);
	/* store: the segments have them; stream only: the reader never came */
	CHECK_EQ(le_flush(e, store ? 10000 : 200), store ? 0 : LE_ETIMEDOUT);
	le_stats st;
	uint64_t t0 = le__mono_ns();
	CHECK_EQ(le_close_stats(e, &st), 0);
	uint64_t ms = (le__mono_ns() - t0) / 1000000;
	CHECK(ms >= 900 && ms < 5000); /* the stalled reader's second */
	close(p[1]);
	/* what the descriptor got: record lines, and drop-count lines */
	struct reader rd = {.fd = p[0], .cap = 1 << 20};
	rd.buf = malloc(rd.cap);
	drain_pipe(&rd);
	uint64_t recs = 0;
	for (char *line = rd.buf, *end = rd.buf + rd.len, *nl;
	     (nl = memchr(line, '\n', (size_t)(end - line))) != NULL;
	     line = nl + 1) {
		*nl = 0;
		if ((size_t)(nl - line) == sizeof buf && line[0] == 'z' && line[99] == 'z')
			recs++;
		else
			CHECK(strstr(line, " records dropped") != NULL);
	}
	free(rd.buf);
	close(p[0]);
	CHECK(st.stream_dropped > 0 && recs > 0);
	CHECK_EQ(st.stream_lines, recs);
	CHECK_EQ(st.stream_lines + st.stream_dropped, 20000);
	CHECK_EQ(st.accepted, 20000);
	if (store) {
		CHECK_EQ(st.written, 20000); /* the segments have every one */
		CHECK_EQ(st.accepted, st.written + st.dropped);
	} else {
		CHECK_EQ(st.written, 0); /* no segments */
	}
	CHECK_EQ(st.queue_records, 0);
	overflow = LE_OVERFLOW_DROP;
	if (store)
		t_rmrf(dir);
}

TEST(lines_buffered_behind_a_stalled_reader_at_close_are_counted_dropped)
{
	stalled_reader_close(1);
}

TEST(stream_only_lines_lost_at_close_are_counted_dropped)
{
	stalled_reader_close(0);
}

/* A stdout redirected to a regular file is shared with whoever else writes
 * to it (the shell, the program itself): the sink must write through that
 * shared offset, never through an offset of its own over their bytes. */
TEST(regular_file_stdout_keeps_its_shared_offset)
{
	char path[300];
	snprintf(path, sizeof path, "%s/out", t_tmpdir(dir));
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	CHECK_EQ(write(fd, "before\n", 7), 7);
	le_engine *e = open_stream(fd, 0, LE_STREAM_RAW);
	CHECK_EQ(le_write(e, 0, LE_INFO, "rec", 3), 0);
	CHECK_EQ(le_flush(e, 5000), 0);
	CHECK_EQ(le_close(e), 0);
	CHECK_EQ(write(fd, "after\n", 6), 6);
	close(fd);
	size_t n = 0;
	unsigned char *b = t_slurp(path, &n);
	CHECK(b != NULL);
	CHECK_EQ(n, 17);
	CHECK(memcmp(b, "before\nrec\nafter\n", 17) == 0);
	free(b);
	t_rmrf(dir);
}

TEST(bad_stream_config_is_refused)
{
	le_config c;
	le_config_init(&c);
	c.store = 0;
	le_engine *e;
	CHECK_EQ(le_open(&e, &c), LE_EINVAL); /* nowhere to write */
	CHECK(strstr(le_errmsg(), "store") != NULL);
	c.stream_fd = 987; /* not open */
	CHECK_EQ(le_open(&e, &c), LE_EINVAL);
	CHECK(strstr(le_errmsg(), "stream_fd") != NULL);
	c.stream_fd = 1;
	c.stream_format = 9;
	CHECK_EQ(le_open(&e, &c), LE_EINVAL);
	CHECK(strstr(le_errmsg(), "stream_format") != NULL);
}

/* The line formats, byte for byte: the per-thread cache of the calendar
 * part must turn over at each second (and back), levels pad to five, a
 * newline inside a payload is escaped, JSON carries the flags. */
static const char *fmt_line(int format, uint64_t ts, int level, uint64_t seq,
                            uint32_t flags, const char *payload)
{
	static unsigned char out[1024];
	size_t n = le__stream_format(out, sizeof out, format, ts, level, 3, seq,
	                             flags, payload, (uint32_t)strlen(payload));
	out[n] = 0;
	return (const char *)out;
}

static const char *expect_ts(uint64_t ns)
{
	static char t[64];
	time_t sec = (time_t)(ns / 1000000000u);
	struct tm tm;
	gmtime_r(&sec, &tm);
	snprintf(t, sizeof t, "%04d-%02d-%02dT%02d:%02d:%02d.%09uZ",
	         tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
	         tm.tm_min, tm.tm_sec, (unsigned)(ns % 1000000000u));
	return t;
}

TEST(stream_line_formats_are_exact_across_seconds_and_levels)
{
	static const char *pad[] = {"TRACE", "DEBUG", "INFO ", "WARN ", "ERROR",
	                            "FATAL"};
	static const char *name[] = {"TRACE", "DEBUG", "INFO", "WARN", "ERROR",
	                             "FATAL"};
	/* 2026-11-30T23:59:59.999999999Z, then across midnight, a year
	 * boundary, the epoch, and back to an earlier second. */
	const uint64_t ts[] = {1796083199999999999ull, 1796083200000000000ull,
	                       1796083200000000001ull, 1798761599123456789ull,
	                       1798761600000000007ull, 0, 999999999ull,
	                       1796083199000000000ull, 1796083199999999999ull};
	char want[1024];
	for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
		int lv = (int)(i % 6);
		snprintf(want, sizeof want, "%s %s a\\nb\n", expect_ts(ts[i]),
		         pad[lv]);
		CHECK_STR_EQ(fmt_line(LE_STREAM_TEXT, ts[i], lv, 7, 0, "a\nb"),
		             want);
		snprintf(want, sizeof want,
		         "{\"seq\":%zu,\"ts\":\"%s\",\"level\":\"%s\","
		         "\"shard\":3,\"msg\":\"q\\\"\\u000a\"}\n",
		         i * 1000000007u, expect_ts(ts[i]), name[lv]);
		CHECK_STR_EQ(fmt_line(LE_STREAM_JSON, ts[i], lv,
		                      i * 1000000007u, 0, "q\"\n"),
		             want);
	}
	CHECK_STR_EQ(fmt_line(LE_STREAM_RAW, 5, LE_INFO, 1, 0, "\nx\n\n"),
	             "\\nx\\n\\n\n");
	CHECK_STR_EQ(fmt_line(LE_STREAM_RAW, 5, LE_INFO, 1, 0, ""), "\n");
	snprintf(want, sizeof want,
	         "{\"seq\":18446744073709551615,\"ts\":\"%s\",\"level\":"
	         "\"WARN\",\"shard\":3,\"truncated\":true,\"marker\":true,"
	         "\"msg\":\"m\"}\n", expect_ts(42));
	CHECK_STR_EQ(fmt_line(LE_STREAM_JSON, 42, LE_WARN, UINT64_MAX,
	                      LE_REC_TRUNCATED | LE_REC_MARKER, "m"),
	             want);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	RUN(producer_into_a_pipe_nobody_reads_finishes_promptly);
	RUN(dead_reader_does_not_kill_the_process);
	RUN(lines_arrive_whole_and_in_order_beside_the_segments);
	RUN(a_stalled_reader_that_returns_gets_a_drop_count_line);
	RUN(lines_buffered_behind_a_stalled_reader_at_close_are_counted_dropped);
	RUN(stream_only_lines_lost_at_close_are_counted_dropped);
	RUN(regular_file_stdout_keeps_its_shared_offset);
	RUN(bad_stream_config_is_refused);
	RUN(stream_line_formats_are_exact_across_seconds_and_levels);
	return t_done();
}
