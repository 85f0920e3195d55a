/*
 * test_deferred.c -- deferred records (docs/FORMAT.md, "Deferred
 * records"): a level macro with a literal format queues its arguments,
 * and the text made later, by the writer for the stream and by readers for
 * segments, must be snprintf's, byte for byte.
 *
 * The codec first, against glibc on a generated corpus (fmt_gen.h: every
 * conversion, flag, width, precision, '*', length, NULL %s, %p, values at
 * printf's edges; LE_DEFER_SEED and LE_DEFER_CASES change the seed and
 * number); then the macros through a real engine: segments read back,
 * lines of the stream, a segment copied away from its SITES and QUEUE, a
 * reader that starts in the middle of a segment, segments rotated, and the
 * queue of a process killed before its writer ran.
 */
#include "harness.h"

#include <fcntl.h>
#include <float.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>

#include "base/crc32c.h"
#include "record/defer.h"
#include "queue/sites.h"
#include "base/fmt.h"
#include "fmt_gen.h"
#include "record/format.h"
#include "logengine.h"
#include "logtest.h"
#include "system/sys.h"

#define NOT_TAKEN (-1000)

/* Capture ap with fmt's plan into blk (at most max bytes), encode fmt's
 * descriptor at desc (1 << 16 bytes, *dl of them) and decode it into d.
 * @return the block's bytes, or SIZE_MAX when the call is not deferred. */
static size_t capture(const char *fmt, va_list ap, unsigned char *blk,
                      size_t max, unsigned char *desc, size_t *dl,
                      le__desc *d)
{
	le__dplan p;
	le__dargs a;
	const char *why;

	if (le__dplan_make(&p, fmt, NULL, 0) < 0)
		return SIZE_MAX;
	size_t n = le__dargs_read(&p, &a, ap, max);
	if (n == SIZE_MAX)
		return SIZE_MAX;
	CHECK_EQ(le__dargs_put(&p, &a, blk), n);
	*dl = le__desc_encode(desc, 1 << 16, LE_INFO, 7, fmt, strlen(fmt),
	                      "f.c", 3);
	CHECK(*dl > 0);
	CHECK_EQ(le__desc_decode(desc, *dl, d, &why), *dl);
	return n;
}

/* Capture, then make the text: the whole deferred round trip, as a
 * vsnprintf. */
static int defer_vfn(char *buf, size_t cap, const char *fmt, va_list ap)
{
	static unsigned char blk[1 << 16], desc[1 << 16];
	le__desc d;
	const char *why;
	size_t dl, n = capture(fmt, ap, blk, sizeof blk / 2, desc, &dl, &d);

	if (n == SIZE_MAX)
		return NOT_TAKEN;
	if (cap == 0)
		return (int)le__defer_text(&d, blk, n, (char[1]){0}, 1, &why);
	long t = le__defer_text(&d, blk, n, buf, cap, &why);
	if (t < 0) {
		fprintf(stderr, "  \"%s\": %s\n", fmt, why);
		return -2000;
	}
	return (int)t;
}

TEST(deferred_text_is_snprintfs_for_a_generated_corpus)
{
	const char *seed_s = getenv("LE_DEFER_SEED"), *n_s = getenv("LE_DEFER_CASES");
	struct fg_src r = {.state = seed_s ? strtoull(seed_s, NULL, 0)
	                                   : 0x5eedf00dull};
	long cases = n_s ? atol(n_s) : 200000, taken = 0, declined = 0;
	static char a[FG_BUF], b[FG_BUF];
	struct fmt_case c;

	for (long i = 0; i < cases; i++) {
		fg_case(&r, &c);
		size_t cap = fg_below(&r, 4) ? FG_BUF : 1 + fg_below(&r, 80);
		if (c.kind == FG_JUNK) {
			/* a byte printf may read otherwise: never deferred */
			le__dplan p;
			if (le__dplan_make(&p, c.fmt, NULL, 0) == 0) {
				fprintf(stderr, "  junk format \"%s\" taken\n",
				        c.fmt);
				CHECK(0);
			}
			continue;
		}
		if (c.kind == FG_RAW && strchr(c.fmt, '*'))
			continue; /* a '*' read from a pointer: a width of GBs */
		memset(a, 0x5a, sizeof a);
		memset(b, 0x5a, sizeof b);
		int na = fg_call(defer_vfn, a, cap, &c);
		if (na == NOT_TAKEN) {
			declined++;
			continue;
		}
		int nb = fg_call(vsnprintf, b, cap, &c);
		if (na != nb || memcmp(a, b, sizeof a) != 0) {
			int show = cap < 200 ? (int)cap : 200;
			fprintf(stderr, "  \"%s\" cap %zu: ours %d \"%.*s\", "
			        "glibc %d \"%.*s\"\n", c.fmt, cap, na, show, a,
			        nb, show, b);
			CHECK(0);
		}
		taken++;
	}
	fprintf(stderr, "  (%ld formats deferred and identical, %ld not "
	        "taken)\n", taken, declined);
	/* RAW's random bytes are most of what is not taken */
	CHECK(taken > cases / 2);
}

/*
 * Readers make a record's text from its descriptor's format compiled once
 * (le__dtext_make, le__dtext_run): whenever the compiled form answers, it
 * must be le__defer_text's text byte for byte, and a block one byte short
 * or long must make it decline (le__defer_text then says what is wrong).
 * The vfn returns le__defer_text's text, for the caller to hold against
 * glibc as well.
 */
static long compiled_hits, compiled_declined;

static int compiled_vfn(char *buf, size_t cap, const char *fmt, va_list ap)
{
	static unsigned char blk[1 << 16], desc[1 << 16];
	static char ref[1 << 22], tmp[1 << 22];
	le__desc d;
	le__dtext t;
	const char *why;
	size_t dl, n = capture(fmt, ap, blk + 1, sizeof blk / 4, desc, &dl, &d);

	if (n == SIZE_MAX)
		return NOT_TAKEN;
	long want = le__defer_text(&d, blk + 1, n, ref, sizeof ref, &why);
	CHECK(want >= 0);
	if (want >= (long)sizeof ref) /* widths of megabytes: not compared */
		return (int)le__defer_text(&d, blk + 1, n, buf, cap, &why);
	if (le__dtext_make(&t, &d) < 0) {
		compiled_declined++;
	} else {
		/* the literals in 16-byte copies, as readers make them:
		 * desc has room past the descriptor */
		t.pad = dl + LE_DTEXT_PAD <= sizeof desc;
		long got = le__dtext_run(&t, blk + 1, n, tmp, cap);
		if (got >= 0) {
			compiled_hits++;
			if (got != want || memcmp(tmp, ref, (size_t)want + 1)) {
				fprintf(stderr, "  \"%s\": compiled %ld \"%s\", "
				        "le__defer_text %ld \"%s\"\n", fmt, got,
				        tmp, want, ref);
				CHECK(0);
			}
		} else {
			compiled_declined++;
		}
		CHECK(n == 0 || le__dtext_run(&t, blk + 1, n - 1, tmp,
		                              sizeof tmp) < 0);
		CHECK(le__dtext_run(&t, blk + 1, n + 1, tmp, sizeof tmp) < 0);
	}
	return (int)le__defer_text(&d, blk + 1, n, buf, cap, &why);
}

TEST(compiled_text_is_le__defer_texts_for_the_generated_corpus)
{
	struct fg_src r = {.state = 0xc0de5eedull};
	static char a[FG_BUF], b[FG_BUF];
	struct fmt_case c;
	long taken = 0;

	compiled_hits = compiled_declined = 0;
	for (long i = 0; i < 100000; i++) {
		fg_case(&r, &c);
		size_t cap = fg_below(&r, 4) ? FG_BUF : 1 + fg_below(&r, 80);
		if (c.kind == FG_JUNK || (c.kind == FG_RAW && strchr(c.fmt, '*')))
			continue;
		int na = fg_call(compiled_vfn, a, cap, &c);
		if (na == NOT_TAKEN)
			continue;
		int nb = fg_call(vsnprintf, b, cap, &c);
		CHECK(na == nb && memcmp(a, b, na < 0 || (size_t)na >= cap
		                                       ? cap : (size_t)na + 1) == 0);
		taken++;
	}
	fprintf(stderr, "  (%ld deferred: %ld made compiled, %ld declined)\n",
	        taken, compiled_hits, compiled_declined);
	/* the cut-short capacities and %e %g %a are most of what declines */
	CHECK(compiled_hits > taken / 2);
}

TEST(decoder_refuses_blocks_that_do_not_match_their_format)
{
	unsigned char d[256], blk[64];
	le__desc desc;
	const char *why;
	char out[64];

	size_t dl = le__desc_encode(d, sizeof d, LE_WARN, 12, "%d %s", 5,
	                            "a.c", 3);
	CHECK(le__desc_decode(d, dl, &desc, &why) == dl);
	le__put32(blk, 7);
	le__put32(blk + 4, 2);
	memcpy(blk + 8, "ok", 2);
	CHECK_EQ(le__defer_text(&desc, blk, 10, out, sizeof out, &why), 4);
	CHECK_STR_EQ(out, "7 ok");
	/* short by a byte, a byte too many, a length past the block */
	CHECK_EQ(le__defer_text(&desc, blk, 9, out, sizeof out, &why), -1);
	CHECK_EQ(le__defer_text(&desc, blk, 11, out, sizeof out, &why), -1);
	le__put32(blk + 4, 1000);
	CHECK_EQ(le__defer_text(&desc, blk, 10, out, sizeof out, &why), -1);
	/* descriptors whose lengths do not add up */
	CHECK_EQ(le__desc_decode(d, dl - 1, &desc, &why), 0);
	d[8]++;
	CHECK_EQ(le__desc_decode(d, dl, &desc, &why), 0);
}

static size_t block_of(const le__dplan *p, le__dargs *a, unsigned char *out,
                       ...)
{
	va_list ap;
	va_start(ap, out);
	size_t n = le__dargs_read(p, a, ap, 4096);
	va_end(ap);
	CHECK(n != SIZE_MAX);
	CHECK_EQ(le__dargs_put(p, a, out), n);
	return n;
}

/* The byte layouts of docs/FORMAT.md's test vectors. */
TEST(descriptor_and_arguments_match_format_md_vectors)
{
	unsigned char d[64], blk[64];
	le__dplan p;
	le__dargs a;

	size_t dl = le__desc_encode(d, sizeof d, LE_INFO, 42, "%s=%d %.1f",
	                            10, "app.c", 5);
	static const unsigned char want_d[] = {
		0x1b, 0x00, 0x01, 0x02, 0x2a, 0x00, 0x00, 0x00, 0x0a, 0x00,
		0x05, 0x00, '%', 's', '=', '%', 'd', ' ', '%', '.', '1', 'f',
		'a', 'p', 'p', '.', 'c'};
	CHECK_EQ(dl, sizeof want_d);
	CHECK(memcmp(d, want_d, dl) == 0);
	CHECK_EQ(le__dplan_make(&p, "%s=%d %.1f", NULL, 0), 0);
	/* the block of ("port", 8080, 0.5) */
	static const unsigned char want_a[] = {
		0x04, 0x00, 0x00, 0x00, 'p', 'o', 'r', 't', 0x90, 0x1f, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xe0, 0x3f};
	size_t n = block_of(&p, &a, blk, "port", 8080, 0.5);
	CHECK_EQ(n, sizeof want_a);
	CHECK(memcmp(blk, want_a, n) == 0);
}


/* ---- through an engine ---- */

#define MAXC 64
static char want[MAXC][1024];
static int want_deferred[MAXC];
static int nwant;

/* Log with le_info and keep snprintf's text of the same call. */
#define CASE(deferred, ...)                                                   \
	do {                                                                  \
		le_info(log, __VA_ARGS__);                                    \
		snprintf(want[nwant], sizeof want[0], __VA_ARGS__);           \
		want_deferred[nwant++] = (deferred);                          \
	} while (0)

enum color { RED, GREEN = 7 };

/* Every kind of argument and conversion the macros defer, and some they
 * do not (formatted at the call, the same text). */
static void log_cases(le_engine *log)
{
	const char *volatile nul = NULL;
	void *ptr = (void *)(uintptr_t)0x7ffe12345678ull;
	char arr[] = "array";
	signed char sc = -3;
	unsigned char uc = 250;
	short sh = -300;
	unsigned short ush = 60000;
	bool yes = true;
	enum color col = GREEN;
	float fl = 1.5f;
	size_t sz = 12345678901ull;
	long double ld = 2.5L;
	errno = ENOENT;

	nwant = 0;
	CASE(1, "plain text, no argument");
	CASE(1, "%d %i %u %o %x %X %c", -5, 7, 3000000000u, 8, 255, 0xabc, 'z');
	CASE(1, "%hhd %hd %ld %lld %jd %zd %td", 300, 70000, -1L, LLONG_MIN,
	     (intmax_t)-9, (ssize_t)-2, (ptrdiff_t)5);
	CASE(1, "%lu %llu %zu %lx %#llo", ULONG_MAX, ULLONG_MAX, sz, 0xdeadL,
	     8ull);
	CASE(1, "%f %.3f %10.2e %-12g| %G %a %A %F %E", 3.14159, -0.0005,
	     12345.678, 1e-5, 1e300, 1.0, -0.1, 1.0 / 0.0, DBL_MIN);
	CASE(1, "%s|%10s|%-10s|%.2s|%.*s|%*.*s|%s|%.3s|%8s", "abc", "r", "l",
	     "xyz", 2, "hello", 6, 3, "world", nul, nul, nul);
	CASE(1, "%p %p %20p %-20p|", ptr, (void *)0, ptr, ptr);
	CASE(1, "100%% done %5d%%", 7);
	CASE(1, "%+d % d %05d %-5d| %#x %#o %+.3f % .0f %#.0f", 5, 5, -42, 3,
	     255, 8, 2.0, 2.5, 3.0);
	CASE(1, "%*d|%-*d|%.*f|%*s", 6, 42, -6, 42, 2, 3.14159, -4, "ab");
	CASE(1, "%d %u %d %d %d %d %f %s", sc, uc, sh, ush, yes, col, fl, arr);
	CASE(1, "%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d", 1, 2, 3, 4, 5, 6, 7, 8, 9,
	     10, 11, 12, 13, 14, 15, 16);
	/* formatted at the call: 17 arguments, long double, errno, wide */
	CASE(0, "%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d", 1, 2, 3, 4, 5, 6, 7, 8,
	     9, 10, 11, 12, 13, 14, 15, 16, 17);
	CASE(0, "long double %Lf", ld);
	CASE(0, "%ls", L"wide");
	CASE(0, "%'d", 1234567);
	CASE(1, "after the others %s", "still deferred");
}

static int got_n, got_bad;
static void check_rec(const le_record *r, void *arg)
{
	(void)arg;
	if (r->flags & LE_REC_MARKER)
		return;
	if (got_n >= nwant || r->len != strlen(want[got_n]) ||
	    memcmp(r->payload, want[got_n], r->len) != 0 ||
	    !!(r->flags & LE_REC_DEFERRED) != want_deferred[got_n]) {
		fprintf(stderr, "  record %d: \"%.*s\" (flags %x)\n  want \"%s\""
		        " (%s)\n", got_n, (int)r->len, (const char *)r->payload,
		        r->flags, got_n < nwant ? want[got_n] : "(none)",
		        got_n < nwant && want_deferred[got_n] ? "deferred"
		                                               : "formatted");
		got_bad++;
	}
	got_n++;
}

static void check_dir(const char *dir)
{
	got_n = got_bad = 0;
	CHECK_EQ(read_all(dir, LE_RECOVER_ABSOLUTE, check_rec, NULL), nwant);
	CHECK_EQ(got_bad, 0);
	CHECK_EQ(got_n, nwant);
}

static le_engine *open_dir(const char *dir, le_config *c)
{
	le_engine *e;
	c->dir = dir;
	c->create_dir = 1;
	c->durability = LE_SYNC_NONE;
	CHECK_RC(le_open(&e, c));
	return e;
}

/* An engine of the default configuration on dir, the cases logged
 * `rounds` times, closed. */
static void log_cases_into(const char *dir, int rounds)
{
	le_config c;
	le_config_init(&c);
	le_engine *e = open_dir(dir, &c);
	for (int i = 0; i < rounds; i++)
		log_cases(e);
	CHECK_RC(le_close(e));
}

/* rec's text is case i's. */
static void check_is_case(const le_record *rec, int i)
{
	CHECK_EQ(rec->len, strlen(want[i]));
	CHECK(memcmp(rec->payload, want[i], rec->len) == 0);
}

TEST(level_macros_read_back_as_snprintf_prints_them)
{
	char dir[256];
	/* the second round's sites are registered: no descriptor in its
	 * frames */
	log_cases_into(t_tmpdir(dir), 2);
	/* two rounds: the expected list twice */
	int n1 = nwant;
	for (int i = 0; i < n1; i++) {
		memcpy(want[n1 + i], want[i], sizeof want[0]);
		want_deferred[n1 + i] = want_deferred[i];
	}
	nwant = 2 * n1;
	check_dir(dir);
	t_rmrf(dir);
}

TEST(stream_lines_are_snprintfs_text)
{
	char dir[256], path[300];
	le_config c;
	le_config_init(&c);
	t_tmpdir(dir);
	snprintf(path, sizeof path, "%s/app.log", dir);
	c.store = 0;
	c.stream_path = path;
	c.stream_format = LE_STREAM_RAW;
	le_engine *e = open_dir(dir, &c);
	log_cases(e);
	CHECK_RC(le_close(e));
	char *text = t_slurp_text(path), *p = text;
	for (int i = 0; i < nwant; i++) {
		char *nl = strchr(p, '\n');
		CHECK(nl);
		*nl = 0;
		CHECK_STR_EQ(p, want[i]);
		p = nl + 1;
	}
	CHECK_STR_EQ(p, "");
	free(text);
	t_rmrf(dir);
}

/* A segment alone, without the SITES and QUEUE files of the engine that
 * wrote it, in a directory of its own: the same text. */
TEST(a_segment_copied_away_reads_back_the_same)
{
	char dir[256], dir2[256], cmd[1200];
	log_cases_into(t_tmpdir(dir), 1);
	t_tmpdir(dir2);
	snprintf(cmd, sizeof cmd, "mkdir -p %s/shard-000 && cp %s/shard-000/*.seg "
	         "%s/shard-000/", dir2, dir, dir2);
	CHECK_EQ(system(cmd), 0);
	check_dir(dir2);
	t_rmrf(dir);
	t_rmrf(dir2);
}

/* Small segments: each starts without the descriptors of the one before,
 * so every segment carries its own. */
TEST(rotated_segments_each_carry_their_descriptors)
{
	char dir[256];
	le_config c;
	le_config_init(&c);
	c.segment_bytes = 4096;
	le_engine *e = open_dir(t_tmpdir(dir), &c);
	int total = 0;
	for (int k = 0; k < 40; k++) {
		log_cases(e);
		total += nwant;
	}
	CHECK_RC(le_close(e));
	got_n = got_bad = 0;
	long segs = 0;
	le_reader *r;
	le_record rec;
	CHECK_RC(le_reader_open(&r, dir, NULL));
	int rc, i = 0;
	while ((rc = le_reader_next(r, &rec)) == 1) {
		check_is_case(&rec, i % nwant);
		i++;
	}
	CHECK_EQ(rc, 0);
	le_reader_stats st;
	CHECK_RC(le_reader_stats_get(r, &st));
	segs = (long)st.segments;
	le_reader_close(r);
	CHECK_EQ(i, total);
	CHECK(segs > 5);
	t_rmrf(dir);
}

/* A reader that starts at the last record reads the descriptor from the
 * frame the record points back at. */
TEST(a_reader_started_mid_segment_finds_the_descriptor)
{
	char dir[256];
	log_cases_into(t_tmpdir(dir), 2);
	le_reader *r;
	le_record rec;
	CHECK_RC(le_reader_open(&r, dir, NULL));
	CHECK_RC(le_reader_seek_tail(r, 3));
	for (int i = nwant - 3; i < nwant; i++) {
		CHECK_EQ(le_reader_next(r, &rec), 1);
		check_is_case(&rec, i);
	}
	CHECK_EQ(le_reader_next(r, &rec), 0);
	le_reader_close(r);
	t_rmrf(dir);
}

/* le_tail (the dashboard's live tail) from the middle of a segment: the
 * text, as the reader gives it. */
TEST(a_tail_from_mid_segment_gives_the_text)
{
	char dir[256];
	log_cases_into(t_tmpdir(dir), 2);
	le_reader *r;
	le_record rec;
	uint64_t off = 0;
	CHECK_RC(le_reader_open(&r, dir, NULL));
	for (int i = 0; i <= nwant; i++) { /* the second round's first */
		CHECK_EQ(le_reader_next(r, &rec), 1);
		off = rec.offset;
	}
	le_reader_close(r);
	le_tail *t;
	CHECK_RC(le_tail_open(&t, dir, 0, 1, off));
	for (int i = 0; i < nwant; i++) {
		CHECK_EQ(le_tail_next(t, &rec), 1);
		check_is_case(&rec, i);
	}
	CHECK_EQ(le_tail_next(t, &rec), 0);
	le_tail_close(t);
	t_rmrf(dir);
}

/* Threads whose first calls of the same call sites race: registration
 * (one wins, the others format at once meanwhile) and the SITES entries
 * of two shards.  Every record reads back with its text. */
struct racer {
	le_engine *e;
	int id;
};

static void *race(void *arg)
{
	struct racer *r = arg;
	for (int i = 0; i < 2000; i++) {
		le_info(r->e, "thread %d record %d of %s", r->id, i, "race");
		le_warn(r->e, "%d: %.2f %*d|", r->id, i / 4.0, 5, i);
	}
	return NULL;
}

static int race_bad;
static long race_n;
static void check_race(const le_record *r, void *arg)
{
	char want1[128], want2[128];
	int id, i;
	(void)arg;
	if (r->flags & LE_REC_MARKER)
		return;
	race_n++;
	const char *p = r->payload;
	if (sscanf(p, "thread %d record %d", &id, &i) == 2) {
		snprintf(want1, sizeof want1, "thread %d record %d of %s", id,
		         i, "race");
		race_bad += r->len != strlen(want1) || memcmp(p, want1, r->len);
	} else if (sscanf(p, "%d: %*f %d|", &id, &i) == 2) {
		snprintf(want2, sizeof want2, "%d: %.2f %*d|", id, i / 4.0, 5,
		         i);
		race_bad += r->len != strlen(want2) || memcmp(p, want2, r->len);
	} else {
		race_bad++;
	}
}

TEST(threads_racing_to_register_sites_all_read_back)
{
	char dir[256];
	le_config c;
	le_config_init(&c);
	c.shards = 2;
	c.overflow = LE_OVERFLOW_BLOCK;
	le_engine *e = open_dir(t_tmpdir(dir), &c);
	pthread_t th[4];
	struct racer rs[4];
	for (int i = 0; i < 4; i++) {
		rs[i] = (struct racer){e, i};
		CHECK_EQ(pthread_create(&th[i], NULL, race, &rs[i]), 0);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	CHECK_RC(le_close(e));
	race_bad = 0;
	race_n = 0;
	CHECK(read_all(dir, LE_RECOVER_ABSOLUTE, check_race, NULL) > 0);
	CHECK_EQ(race_bad, 0);
	CHECK_EQ(race_n, 4 * 2 * 2000);
	t_rmrf(dir);
}

/* Small QUEUE and SITES files (64 KiB of payload, 256 sites): quick to
 * put back and to recover thousands of times. */
static void small_files(le_config *c)
{
	c->queue_capacity_bytes = 64 << 10;
	c->deferred_sites = 256;
}

/* A child process opens dir, logs with fill and is killed before its
 * writer takes any (flush_ms is long: the writer sleeps, all stays
 * queued).  small: with small_files. */
static void killed_after(const char *dir, int small,
                         void (*fill)(le_engine *e))
{
	fflush(NULL);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		le_config c;
		le_config_init(&c);
		c.flush_ms = 60000;
		if (small)
			small_files(&c);
		le_engine *e = open_dir(dir, &c);
		fill(e);
		raise(SIGKILL);
		_exit(3);
	}
	int st;
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFSIGNALED(st));
}

/* The cases logged into dir by a child killed before its writer ran. */
static void killed_with_cases_queued(const char *dir, int small)
{
	killed_after(dir, small, log_cases);
}

/* A dead process's directory in dir (t_tmpdir), the cases queued (small:
 * small_files); its shard's SITES path in path (300 bytes) and bytes,
 * malloc'd, returned (*len). */
static unsigned char *dead_sites(char *dir, char *path, int small, size_t *len)
{
	t_tmpdir(dir);
	killed_with_cases_queued(dir, small);
	snprintf(path, 300, "%s/shard-000/SITES", dir);
	unsigned char *b = t_slurp(path, len);
	CHECK(b);
	return b;
}

/* dir reads back the cases, logged once, with every text snprintf's. */
static void check_dir_has_cases(const char *dir)
{
	char d2[256];
	nwant = 0;
	/* the expected texts, from a log of our own */
	log_cases_into(t_tmpdir(d2), 1);
	t_rmrf(d2);
	check_dir(dir);
}

/* A process killed before its writer took anything: the next le_open
 * writes its deferred records out with the descriptors of its SITES. */
TEST(deferred_records_of_a_killed_process_are_recovered_with_their_text)
{
	char dir[256];
	t_tmpdir(dir);
	killed_with_cases_queued(dir, 0);
	/* all in QUEUE: no segment holds a record yet */
	CHECK(read_all(dir, LE_RECOVER_TOLERATE_TAIL, NULL, NULL) <= 0);
	le_config c;
	le_config_init(&c);
	le_engine *e = open_dir(dir, &c);
	CHECK_RC(le_close(e));
	check_dir_has_cases(dir);
	t_rmrf(dir);
}

/* A SITES entry damaged while the process was dead: its records are kept,
 * saying their call site is lost; the others keep their text. */
TEST(a_damaged_sites_entry_loses_only_its_records_text)
{
	char dir[256], path[300];
	size_t len;
	unsigned char *b = dead_sites(dir, path, 0, &len);
	/* the first entry of the area, the first site's descriptor: a
	 * format byte */
	b[LE_SITES_HDR + 4 * le__get32(b + 12) + 8 + 4 + 12] ^= 0xff;
	CHECK_EQ(t_spit(path, b, len), 0);
	free(b);
	le_config c;
	le_config_init(&c);
	le_engine *e = open_dir(dir, &c);
	CHECK_RC(le_close(e));
	int lost = 0, ok = 0;
	le_reader *r;
	le_record rec;
	CHECK_RC(le_reader_open(&r, dir, NULL));
	while (le_reader_next(r, &rec) == 1) {
		if (rec.len == 33 &&
		    !memcmp(rec.payload, "[deferred record: call site lost]", 33))
			lost++;
		else
			ok++;
	}
	le_reader_close(r);
	CHECK_EQ(lost, 1);
	CHECK(ok > 10);
	t_rmrf(dir);
}

/* ---- a damaged SITES: every change read back is reported ---- */

/* The files of a dead process's directory (top level and shard-000), kept
 * to be put back before each damage: the directory is restored in place
 * (no process started per damage, so thousands fit in seconds). */
#define KEPT_MAX 16
struct kept {
	char path[320];
	unsigned char *b;
	size_t len;
};
static struct kept kept[KEPT_MAX];
static int nkept;

static int is_kept(const char *path)
{
	for (int i = 0; i < nkept; i++)
		if (!strcmp(kept[i].path, path))
			return 1;
	return 0;
}

/* Call fn for each regular file of dir and of dir/shard-000. */
static void each_file(const char *dir, void (*fn)(const char *path))
{
	char sub[300], path[320];
	const char *dirs[2] = {dir, sub};
	snprintf(sub, sizeof sub, "%s/shard-000", dir);
	for (int k = 0; k < 2; k++) {
		DIR *d = opendir(dirs[k]);
		struct dirent *de;
		CHECK(d != NULL);
		while ((de = readdir(d))) {
			struct stat st;
			snprintf(path, sizeof path, "%s/%s", dirs[k], de->d_name);
			if (lstat(path, &st) == 0 && S_ISREG(st.st_mode))
				fn(path);
		}
		closedir(d);
	}
}

static void keep_one(const char *path)
{
	CHECK(nkept < KEPT_MAX);
	snprintf(kept[nkept].path, sizeof kept[0].path, "%s", path);
	kept[nkept].b = t_slurp(path, &kept[nkept].len);
	CHECK(kept[nkept++].b != NULL);
}

static void drop_new(const char *path)
{
	if (!is_kept(path))
		CHECK_EQ(unlink(path), 0);
}

/* The directory as kept, with its SITES as `sites` (len bytes). */
static void restore_with(const char *dir, const unsigned char *sites,
                         size_t len)
{
	each_file(dir, drop_new);
	for (int i = 0; i < nkept; i++) {
		size_t n = strlen(kept[i].path);
		int is_sites = n >= 6 && !strcmp(kept[i].path + n - 6, "/SITES");
		CHECK_EQ(t_spit(kept[i].path, is_sites ? sites : kept[i].b,
		                is_sites ? len : kept[i].len), 0);
	}
}

/* Every record's level and text, one a line. */
struct texts {
	char *b;
	size_t len, cap;
};

static void add_text(const le_record *r, void *arg)
{
	struct texts *t = arg;
	if (t->len + r->len + 4 > t->cap) {
		t->cap = (t->len + r->len + 4) * 2;
		t->b = realloc(t->b, t->cap);
		CHECK(t->b != NULL);
	}
	t->b[t->len++] = (char)('0' + r->level);
	memcpy(t->b + t->len, r->payload, r->len);
	t->len += r->len;
	t->b[t->len++] = '\n';
}

/* Recover dir; what its log reads back into *t (left as it was when
 * damage was reported).  @return 1 when le_open reported SITES damage
 * (counted and named in le_errmsg). */
static int recover_reading(const char *dir, struct texts *t)
{
	le_config c;
	le_stats st;
	le_config_init(&c);
	small_files(&c);
	le_engine *e = open_dir(dir, &c);
	int said = strstr(le_errmsg(), "SITES") != NULL;
	le_stats_get(e, &st);
	CHECK_RC(le_close(e));
	if (said && st.recovery_damaged > 0)
		return 1;
	t->len = 0;
	CHECK(read_all(dir, LE_RECOVER_ABSOLUTE, add_text, t) > 0);
	return 0;
}

static size_t add_bits(size_t *bits, size_t k, size_t from, size_t to)
{
	for (size_t bit = from * 8; bit < to * 8; bit++)
		bits[k++] = bit;
	return k;
}

/* The SITES bits the whole recovery is run on (bits has room for the
 * file's): a byte of each header field, the table words of sites 0 to 2
 * and the first entry's CRC and first 12 descriptor bytes -- each a
 * recovery of its own, so a sample: the table's own test below flips
 * every bit.  LE_SITES_FLIP_ALL set: every bit of the header, of the
 * table words in use and of the entries in use. */
static size_t sites_bits(const unsigned char *b, size_t *bits)
{
	static const size_t fields[] = {0, 8, 12, 16, 20, 24, 32, 60, 64, 68};
	uint32_t n = le__get32(b + 12), top = 0;
	size_t k = 0, area = LE_SITES_HDR + 4 * (size_t)n;
	for (uint32_t id = 0; id < n; id++)
		if (le__get32(b + LE_SITES_HDR + 4 * id))
			top = id + 1;
	if (getenv("LE_SITES_FLIP_ALL")) {
		k = add_bits(bits, 0, 0, LE_SITES_HDR + 4 * (size_t)(top + 1));
		return add_bits(bits, k, area,
		                area + le__get32(b + LE_SITES_USED_OFF));
	}
	for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
		k = add_bits(bits, k, fields[i], fields[i] + 1);
	k = add_bits(bits, k, LE_SITES_HDR, LE_SITES_HDR + 12);
	return add_bits(bits, k, area + LE_SITES_AREA_FIRST,
	                area + LE_SITES_AREA_FIRST + 16);
}

/* Every bit of a dead process's SITES that recovery reads, flipped one at
 * a time: what reads back is either the records as they were or damage
 * le_open counted and named -- never a changed text said nothing of. */
TEST(every_bit_flipped_in_sites_is_harmless_or_reported)
{
	char dir[256], path[300];
	size_t *bits;
	struct texts before = {0}, got = {0};
	t_tmpdir(dir);
	killed_with_cases_queued(dir, 1);
	nkept = 0;
	each_file(dir, keep_one);
	snprintf(path, sizeof path, "%s/shard-000/SITES", dir);
	size_t len;
	unsigned char *b = t_slurp(path, &len);
	CHECK(b);
	CHECK_EQ(recover_reading(dir, &before), 0);
	CHECK((bits = malloc(len * 8 * sizeof *bits)) != NULL);
	size_t nb = sites_bits(b, bits);
	unsigned harmless = 0, reported = 0, silent = 0;
	for (size_t i = 0; i < nb; i++) {
		b[bits[i] / 8] ^= (unsigned char)(1u << (bits[i] % 8));
		restore_with(dir, b, len);
		b[bits[i] / 8] ^= (unsigned char)(1u << (bits[i] % 8));
		int said = recover_reading(dir, &got);
		if (said)
			reported++;
		else if (got.len == before.len && !memcmp(got.b, before.b, got.len))
			harmless++;
		else if (silent++ < 5)
			fprintf(stderr, "  silent: bit %zu (byte %zu)\n", bits[i],
			        bits[i] / 8);
	}
	fprintf(stderr, "  %zu bits: %u harmless, %u reported, %u silent\n",
	        nb, harmless, reported, silent);
	CHECK_EQ(silent, 0u);
	CHECK(reported > 0); /* the detector fires */
	CHECK_EQ(harmless + reported, (unsigned)nb);
	for (int i = 0; i < nkept; i++)
		free(kept[i].b);
	free(bits);
	free(b);
	free(before.b);
	free(got.b);
	t_rmrf(dir);
}

/* Each site's descriptor as a table opened on path gives it (NULL none);
 * @return 1 when the header was kept. */
static int table_reads(const char *path, uint32_t n, unsigned char **d,
                       size_t *dl)
{
	le__sitetab t;
	CHECK_RC(le__sitetab_open(&t, path, n, 0, 1, 0640));
	int kept_hdr = t.reused;
	for (uint32_t id = 0; id < n; id++) {
		const unsigned char *p = le__sitetab_get(&t, id, &dl[id]);
		d[id] = p ? malloc(dl[id]) : NULL;
		if (p)
			memcpy(d[id], p, dl[id]);
	}
	le__sitetab_close(&t);
	return kept_hdr;
}

/* Every bit of a dead process's SITES that can be read (header, table,
 * entries in use), flipped one at a time, through the table's own reader:
 * each site gives its descriptor, byte for byte, or none -- and none is
 * what recovery counts and names (the tests above).  A flip that gave a
 * site another descriptor would be silent. */
TEST(every_bit_flipped_in_sites_gives_each_site_its_descriptor_or_none)
{
	char dir[256], path[300];
	size_t len;
	unsigned char *b = dead_sites(dir, path, 1, &len);
	uint32_t n = le__get32(b + 12);
	size_t end = LE_SITES_HDR + 4 * (size_t)n +
	             le__get32(b + LE_SITES_USED_OFF);
	unsigned char **want_d = calloc(n, sizeof *want_d);
	unsigned char **got_d = calloc(n, sizeof *got_d);
	size_t *want_l = calloc(n, sizeof *want_l), *got_l = calloc(n, sizeof *got_l);
	CHECK(want_d && got_d && want_l && got_l);
	CHECK_EQ(table_reads(path, n, want_d, want_l), 1);
	unsigned sites = 0, silent = 0, lost = 0, hdr = 0, harmless = 0;
	for (uint32_t id = 0; id < n; id++)
		sites += want_d[id] != NULL;
	CHECK(sites > 10);
	int fd = open(path, O_RDWR);
	CHECK(fd >= 0);
	for (size_t bit = 0; bit < end * 8; bit++) {
		size_t at = bit / 8;
		unsigned char v = (unsigned char)(b[at] ^ (1u << (bit % 8)));
		CHECK_EQ(pwrite(fd, &v, 1, (off_t)at), 1);
		int kept_hdr = table_reads(path, n, got_d, got_l);
		unsigned bad = 0, none = 0;
		for (uint32_t id = 0; id < n; id++) {
			if (want_d[id] && !got_d[id])
				none++;
			else if (want_d[id] &&
			         (got_l[id] != want_l[id] ||
			          memcmp(got_d[id], want_d[id], want_l[id])))
				bad++;
			free(got_d[id]);
		}
		if (bad && silent++ < 5)
			fprintf(stderr, "  silent: bit %zu (byte %zu)\n", bit, at);
		hdr += !kept_hdr;
		lost += none && kept_hdr;
		harmless += !bad && !none;
		/* a header found damaged was made anew: the whole file back */
		CHECK_EQ(pwrite(fd, b, kept_hdr ? end : len, 0),
		         (ssize_t)(kept_hdr ? end : len));
	}
	close(fd);
	fprintf(stderr, "  %zu bits (%u sites): %u harmless, %u a site lost, "
	        "%u the header, %u silent\n", end * 8, sites, harmless, lost,
	        hdr, silent);
	CHECK_EQ(silent, 0u);
	CHECK(lost > 0 && hdr > 0); /* the detectors fire */
	for (uint32_t id = 0; id < n; id++)
		free(want_d[id]);
	free(want_d);
	free(got_d);
	free(want_l);
	free(got_l);
	free(b);
	t_rmrf(dir);
}

/* A table word damaged into the offset of another site's entry (a wild
 * write, not one bit): that site gives no descriptor -- never the other
 * site's, whose text its records would silently take. */
TEST(a_table_word_pointing_at_another_sites_entry_gives_no_descriptor)
{
	char dir[256], path[300];
	uint32_t a = 0, c = 0; /* the first two sites in use: a takes c's entry */
	size_t len;
	unsigned char *b = dead_sites(dir, path, 1, &len);
	uint32_t n = le__get32(b + 12);
	for (uint32_t id = 0; id < n && !c; id++)
		if (le__get32(b + LE_SITES_HDR + 4 * id)) {
			if (!a)
				a = id;
			else
				c = id;
		}
	CHECK(a && c);
	memcpy(b + LE_SITES_HDR + 4 * a, b + LE_SITES_HDR + 4 * c, 4);
	CHECK_EQ(t_spit(path, b, len), 0);
	free(b);
	le__sitetab t;
	size_t dl;
	CHECK_RC(le__sitetab_open(&t, path, n, 0, 1, 0640));
	CHECK(t.reused);
	CHECK(le__sitetab_get(&t, c, &dl) != NULL);
	CHECK(le__sitetab_get(&t, a, &dl) == NULL);
	CHECK(strcmp(t.why, "entry checksum") == 0);
	le__sitetab_close(&t);
	t_rmrf(dir);
}

/* SITES as a process of an earlier release left it: version 1, each
 * entry's CRC of its descriptor alone. */
static void make_version_1(unsigned char *b)
{
	uint32_t n = le__get32(b + 12);
	unsigned char *area = b + LE_SITES_HDR + 4 * (size_t)n;
	for (uint32_t id = 0; id < n; id++) {
		uint32_t off = le__get32(b + LE_SITES_HDR + 4 * id);
		le__desc d;
		const char *why;
		if (!off)
			continue;
		size_t dl = le__desc_decode(area + off + 4, 1 << 16, &d, &why);
		CHECK(dl > 0);
		le__put32(area + off,
		          le__crc_mask(le__crc32c_extend(0, area + off + 4, dl)));
	}
	le__put32(b + 8, 1);
	le__put32(b + 60, le__crc_mask(le__crc32c_extend(0, b, 60)));
}

/* A queue left by a process of an earlier release, with a version 1
 * SITES: recovered with every text, nothing reported. */
TEST(a_version_1_sites_left_by_an_earlier_release_keeps_its_text)
{
	char dir[256], path[300];
	struct texts got = {0};
	size_t len;
	unsigned char *b = dead_sites(dir, path, 1, &len);
	make_version_1(b);
	CHECK_EQ(t_spit(path, b, len), 0);
	free(b);
	CHECK_EQ(recover_reading(dir, &got), 0);
	free(got.b);
	check_dir_has_cases(dir);
	t_rmrf(dir);
}

/* 100 deferred records and 100 plain ones, alternating. */
static void log_100_of_each(le_engine *e)
{
	for (int i = 0; i < 100; i++) {
		char b[32];
		int n = snprintf(b, sizeof b, "plain %d", i);
		le_info(e, "deferred %d of %s", i, "100");
		CHECK_EQ(le_write(e, 0, LE_INFO, b, (size_t)n), 0);
	}
}

/* A dead process's SITES with its first byte zeroed, through the CLI:
 * recover writes every record but exits 1 naming SITES and the records
 * that lost their text; verify reports each of them; cat marks them. */
TEST(recover_and_verify_report_a_sites_file_with_its_first_byte_zeroed)
{
	char dir[256], path[300];
	const char *cli = t_build_tool("LE_CLI", "logengine");
	t_tmpdir(dir);
	killed_after(dir, 0, log_100_of_each);
	snprintf(path, sizeof path, "%s/shard-000/SITES", dir);
	size_t len;
	unsigned char *b = t_slurp(path, &len);
	CHECK(b && len > 0);
	b[0] = 0;
	CHECK_EQ(t_spit(path, b, len), 0);
	free(b);
	int rc = t_sh("%s recover '%s'", cli, dir);
	fprintf(stderr, "  %s", t_sh_out);
	CHECK_EQ(rc, 1);
	CHECK(strstr(t_sh_out, "200 record(s) written") != NULL);
	CHECK(strstr(t_sh_out, "SITES header damaged (bad magic): 100 "
	                       "deferred record(s) written as") != NULL);
	CHECK_EQ(t_sh("%s verify '%s'", cli, dir), 1);
	CHECK(strstr(t_sh_out, "200 records, 1 segments") != NULL);
	CHECK(strstr(t_sh_out, ", 100 problems,") != NULL);
	CHECK(strstr(t_sh_out, "its call site was lost from a damaged "
	                       "SITES table") != NULL);
	CHECK_EQ(t_sh("%s cat '%s' | grep -cF '%s'", cli, dir,
	              LE_SITE_LOST_TEXT), 0);
	CHECK_EQ(atoi(t_sh_out), 100);
	t_rmrf(dir);
}

int main(int argc, char **argv)
{
	(void)fg_check; /* fmt_gen.h's le__vfmt check: test_fmt.c's */
	T_INIT(argc, argv);
	RUN(deferred_text_is_snprintfs_for_a_generated_corpus);
	RUN(compiled_text_is_le__defer_texts_for_the_generated_corpus);
	RUN(decoder_refuses_blocks_that_do_not_match_their_format);
	RUN(descriptor_and_arguments_match_format_md_vectors);
	RUN(level_macros_read_back_as_snprintf_prints_them);
	RUN(stream_lines_are_snprintfs_text);
	RUN(a_segment_copied_away_reads_back_the_same);
	RUN(rotated_segments_each_carry_their_descriptors);
	RUN(a_reader_started_mid_segment_finds_the_descriptor);
	RUN(a_tail_from_mid_segment_gives_the_text);
	RUN(threads_racing_to_register_sites_all_read_back);
	RUN(deferred_records_of_a_killed_process_are_recovered_with_their_text);
	RUN(a_damaged_sites_entry_loses_only_its_records_text);
	RUN(every_bit_flipped_in_sites_is_harmless_or_reported);
	RUN(every_bit_flipped_in_sites_gives_each_site_its_descriptor_or_none);
	RUN(a_table_word_pointing_at_another_sites_entry_gives_no_descriptor);
	RUN(a_version_1_sites_left_by_an_earlier_release_keeps_its_text);
	RUN(recover_and_verify_report_a_sites_file_with_its_first_byte_zeroed);
	return t_done();
}
