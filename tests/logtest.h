/*
 * logtest.h -- helpers the engine's tests share: read a whole log through
 * the public reader.  Include after harness.h and logengine.h.
 */
#ifndef LE_TEST_LOGTEST_H
#define LE_TEST_LOGTEST_H

typedef void (*rec_fn)(const le_record *r, void *arg);

/* Read every record of dir in `mode`, calling fn (if any) for each.
 * @return the number of records, or the reader's negative error. */
static inline long read_all(const char *dir, int mode, rec_fn fn, void *arg)
{
	le_reader *r;
	le_reader_opts o;
	le_record rec;
	long n = 0;
	int rc;

	le_reader_opts_init(&o);
	o.mode = mode;
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

#endif
