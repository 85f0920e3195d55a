/*
 * logtest.h -- helpers the engine's tests share: read a whole log through
 * the public reader.  Include after harness.h and logengine.h.
 */
#ifndef LE_TEST_LOGTEST_H
#define LE_TEST_LOGTEST_H

#include <pthread.h>

/* An engine opened with c, or the test fails saying why (le_errmsg names
 * the configuration field or the file). */
static inline le_engine *t_open(const le_config *c)
{
	le_engine *e = NULL;
	int rc = le_open(&e, c);
	if (rc < 0) {
		fprintf(stderr, "  le_open(%s): %s (%s)\n",
		        c->dir ? c->dir : "NULL", le_strerror(rc), le_errmsg());
		_exit(1);
	}
	return e;
}

typedef void (*rec_fn)(const le_record *r, void *arg);

/* Read every record of dir in `mode`, calling fn (if any) for each, and
 * on_problem (if any) with parg for each problem the reader reports.
 * @return the number of records, or the reader's negative error. */
static inline long read_all_reporting(const char *dir, int mode, rec_fn fn,
                                      void *arg, le_problem_fn on_problem,
                                      void *parg)
{
	le_reader *r;
	le_reader_opts o;
	le_record rec;
	long n = 0;
	int rc;

	le_reader_opts_init(&o);
	o.mode = mode;
	o.on_problem = on_problem;
	o.arg = parg;
	CHECK_RC(le_reader_open(&r, dir, &o));
	while ((rc = le_reader_next(r, &rec)) == 1) {
		if (fn)
			fn(&rec, arg);
		n++;
	}
	le_reader_close(r);
	if (rc < 0)
		return rc;
	return n;
}

/* read_all_reporting without a problem callback. */
static inline long read_all(const char *dir, int mode, rec_fn fn, void *arg)
{
	return read_all_reporting(dir, mode, fn, arg, NULL, NULL);
}

/* "[name]" of a record's "logger" field into out (cap bytes), "" when it
 * has none. */
static inline void t_logger_tag(const le_record *r, char *out, size_t cap)
{
	size_t pos = 0;
	le_field f;
	out[0] = '\0';
	while (le_record_field(r, &pos, &f) == 1)
		if (f.key_len == 6 && !memcmp(f.key, "logger", 6))
			snprintf(out, cap, "[%.*s]", (int)f.v.str.len,
			         (const char *)f.v.str.ptr);
}

static inline void count_app_record(const le_record *r, void *arg)
{
	if (!(r->flags & LE_REC_MARKER))
		(*(long *)arg)++;
}

/* Records the application wrote (markers left out), read in ABSOLUTE
 * mode, which must reach the end cleanly. */
static inline long count_records(const char *dir)
{
	long n = 0;
	CHECK_EQ(read_all(dir, LE_RECOVER_ABSOLUTE, count_app_record, &n) >= 0,
	         1);
	return n;
}

/* A le_flush run on a thread of its own, for a test that must act while
 * the flush waits: t_flush_start, then t_flush_join for its result. */
typedef struct t_flusher {
	pthread_t t;
	le_engine *e;
	int timeout_ms;
	int rc; /* le_flush's result, once joined */
} t_flusher;

static inline void *t_flusher_main(void *arg)
{
	t_flusher *f = arg;
	f->rc = le_flush(f->e, f->timeout_ms);
	return NULL;
}

static inline void t_flush_start(t_flusher *f, le_engine *e, int timeout_ms)
{
	f->e = e;
	f->timeout_ms = timeout_ms;
	f->rc = 1;
	CHECK_EQ(pthread_create(&f->t, NULL, t_flusher_main, f), 0);
}

/* @return what the flush returned. */
static inline int t_flush_join(t_flusher *f)
{
	CHECK_EQ(pthread_join(f->t, NULL), 0);
	return f->rc;
}

/* Wait until le_stats_get says ok(st), polling each millisecond; fail
 * the test if it has not after ms milliseconds.  @return the ms it took. */
static inline double t_stats_until(le_engine *e, int (*ok)(const le_stats *st),
                                   int ms)
{
	struct timespec t0, t;
	le_stats st;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		le_stats_get(e, &st);
		clock_gettime(CLOCK_MONOTONIC, &t);
		double took = (double)(t.tv_sec - t0.tv_sec) * 1e3 +
		              (double)(t.tv_nsec - t0.tv_nsec) / 1e6;
		if (ok(&st))
			return took;
		CHECK(took < ms);
		usleep(1000);
	}
}

#endif
