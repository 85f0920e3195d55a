/*
 * test_engine.c -- the write side end to end: open, write from many
 * threads, flush, close, read back through the public reader, reopen.
 * Each test is named after what would break.
 */
#include "harness.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>

#include "logengine.h"
#include "logtest.h"
#include "base/os.h" /* le__mono_ns */

static char dirbuf[256];

static le_config base_cfg(void)
{
	le_config c;
	le_config_init(&c);
	c.dir = t_tmpdir(dirbuf);
	c.durability = LE_SYNC_NONE;
	return c;
}

/* Payloads are not NUL-terminated: copy one into a C string. */
static const char *cstr(const le_record *r, char *buf, size_t cap)
{
	size_t n = r->len < cap - 1 ? r->len : cap - 1;
	memcpy(buf, r->payload, n);
	buf[n] = '\0';
	return buf;
}

/* Payload "T<thread>:<n>" padded to a fixed size. */
static size_t make_payload(char *buf, size_t size, int t, long n)
{
	int k = snprintf(buf, size, "T%d:%ld:", t, n);
	for (size_t i = (size_t)k; i < size; i++)
		buf[i] = (char)('a' + (i % 26));
	return size;
}

/* ---- */

TEST(open_creates_shard_dirs_and_close_is_clean)
{
	le_config c = base_cfg();
	c.shards = 3;
	le_engine *e = t_open(&c);
	CHECK_EQ(le_close(e), 0);
	for (int i = 0; i < 3; i++) {
		char p[400];
		struct stat st;
		snprintf(p, sizeof p, "%s/shard-%03d", c.dir, i);
		CHECK(stat(p, &st) == 0 && S_ISDIR(st.st_mode));
	}
	CHECK_EQ(read_all(c.dir, LE_RECOVER_ABSOLUTE, NULL, NULL), 0);
	CHECK_EQ(le_close(NULL), 0);
	t_rmrf(c.dir);
}

struct expect {
	long n;
	long next[64];   /* next expected counter per producer */
	uint64_t last_seq[256];
	int bad;
};

static void check_order(const le_record *r, void *arg)
{
	struct expect *x = arg;
	int t;
	long n;
	if (r->flags & LE_REC_MARKER)
		return;
	char b[64];
	if (sscanf(cstr(r, b, sizeof b), "T%d:%ld:", &t, &n) != 2 || t < 0 ||
	    t >= 64) {
		x->bad++;
		return;
	}
	if (n != x->next[t])
		x->bad++;
	x->next[t] = n + 1;
	if (r->seq <= x->last_seq[r->shard])
		x->bad++;
	x->last_seq[r->shard] = r->seq;
	x->n++;
}

struct prod {
	le_engine *e;
	int id;
	long count;
	size_t size;
	long ok, full;
};

static void *producer(void *arg)
{
	struct prod *p = arg;
	char buf[4096];
	for (long i = 0; i < p->count;) {
		size_t len = make_payload(buf, p->size, p->id, p->ok);
		int rc = le_write(p->e, (uint64_t)p->id, LE_INFO, buf, len);
		if (rc == 0)
			p->ok++;
		else if (rc == LE_EFULL)
			p->full++;
		else {
			fprintf(stderr, "le_write: %s\n", le_strerror(rc));
			_exit(1);
		}
		i++;
	}
	return NULL;
}

static void run_producers(le_engine *e, struct prod *p, int n, long count,
                          size_t size)
{
	pthread_t th[64];
	for (int i = 0; i < n; i++) {
		p[i] = (struct prod){.e = e, .id = i, .count = count, .size = size};
		pthread_create(&th[i], NULL, producer, &p[i]);
	}
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
}

TEST(block_mode_loses_nothing_and_keeps_per_shard_order)
{
	le_config c = base_cfg();
	c.shards = 4;
	c.overflow = LE_OVERFLOW_BLOCK;
	c.queue_capacity = 512; /* small: producers really block */
	c.segment_bytes = 1 << 20;
	le_engine *e = t_open(&c);
	struct prod p[4];
	run_producers(e, p, 4, 50000, 100);
	CHECK_RC(le_flush(e, 10000));
	le_stats st;
	le_stats_get(e, &st);
	CHECK_EQ(st.accepted, 200000);
	CHECK_EQ(st.written, 200000);
	CHECK_EQ(st.dropped, 0);
	CHECK(st.queue_hwm_records <= 512);
	CHECK_EQ(le_close(e), 0);
	struct expect x = {0};
	CHECK_EQ(read_all(c.dir, LE_RECOVER_ABSOLUTE, check_order, &x), 200000);
	CHECK_EQ(x.bad, 0);
	for (int i = 0; i < 4; i++)
		CHECK_EQ(x.next[i], 50000);
	t_rmrf(c.dir);
}

struct markers {
	uint64_t dropped;
	long records;
};

static void sum_markers(const le_record *r, void *arg)
{
	struct markers *m = arg;
	unsigned long long n;
	if (r->flags & LE_REC_MARKER) {
		char b[64];
		CHECK(sscanf(cstr(r, b, sizeof b), "%llu records dropped", &n) ==
		      1);
		m->dropped += n;
	} else {
		m->records++;
	}
}

TEST(drops_are_counted_exactly_and_reported_by_markers)
{
	le_config c = base_cfg();
	c.shards = 2;
	c.queue_capacity = 64;
	c.queue_capacity_bytes = 64 * 1024;
	c.max_record_bytes = 1024;
	le_engine *e = t_open(&c);
	struct prod p[4];
	run_producers(e, p, 4, 100000, 200);
	CHECK_RC(le_flush(e, 10000));
	le_stats st;
	le_stats_get(e, &st);
	long ok = 0, full = 0;
	for (int i = 0; i < 4; i++) {
		ok += p[i].ok;
		full += p[i].full;
	}
	CHECK_EQ(st.accepted, 400000);
	CHECK_EQ(st.accepted, st.written + st.dropped);
	CHECK_EQ(st.written, ok);
	CHECK_EQ(st.dropped_full, full);
	CHECK(st.queue_hwm_records <= 64);
	CHECK(st.queue_hwm_bytes <= 64 * 1024);
	CHECK_EQ(le_close(e), 0);
	struct markers m = {0};
	read_all(c.dir, LE_RECOVER_ABSOLUTE, sum_markers, &m);
	CHECK_EQ(m.records, ok);
	CHECK_EQ(m.dropped, (uint64_t)full);
	t_rmrf(c.dir);
}

struct sampler {
	le_engine *e;
	atomic_int stop;
	uint64_t max_rec, max_bytes;
};

static void *sample(void *arg)
{
	struct sampler *s = arg;
	le_stats st;
	while (!atomic_load(&s->stop)) {
		le_stats_get(s->e, &st);
		if (st.queue_records > s->max_rec)
			s->max_rec = st.queue_records;
		if (st.queue_bytes > s->max_bytes)
			s->max_bytes = st.queue_bytes;
	}
	return NULL;
}

TEST(concurrent_producers_never_exceed_queue_bounds)
{
	le_config c = base_cfg();
	c.shards = 3;
	c.queue_capacity = 100;
	c.queue_capacity_bytes = 20000; /* bytes bind before records */
	c.max_record_bytes = 4096;
	le_engine *e = t_open(&c);
	struct sampler s = {.e = e};
	pthread_t th;
	pthread_create(&th, NULL, sample, &s);
	struct prod p[4];
	run_producers(e, p, 4, 50000, 700);
	atomic_store(&s.stop, 1);
	pthread_join(th, NULL);
	le_stats st;
	CHECK_RC(le_flush(e, 10000));
	le_stats_get(e, &st);
	CHECK(st.queue_hwm_records <= 100);
	CHECK(st.queue_hwm_bytes <= 20000);
	CHECK(st.queue_hwm_bytes > 20000 - 700 - 1); /* it did fill */
	CHECK(s.max_rec <= 100 && s.max_bytes <= 20000);
	CHECK_EQ(st.accepted, st.written + st.dropped);
	le_close(e);
	t_rmrf(c.dir);
}

static void grab_payload(const le_record *r, void *arg)
{
	memcpy(arg, &r->len, sizeof r->len);
	CHECK(r->flags & LE_REC_TRUNCATED);
}

TEST(oversize_record_is_truncated_and_flagged_or_rejected)
{
	le_config c = base_cfg();
	c.max_record_bytes = 100;
	c.queue_capacity_bytes = 4096;
	le_engine *e = t_open(&c);
	char big[300];
	memset(big, 'x', sizeof big);
	le_stats st;
	CHECK_EQ(le_write(e, 0, LE_INFO, big, sizeof big), 0);
	le_stats_get(e, &st);
	CHECK_EQ(st.truncated, 1);
	CHECK_EQ(st.record_hwm_bytes, 100); /* as stored: cut to the limit */
	le_close(e);
	size_t len = 0;
	CHECK_EQ(read_all(c.dir, 0, grab_payload, &len), 1);
	CHECK_EQ(len, 100);

	c.oversize = LE_OVERSIZE_REJECT;
	e = t_open(&c);
	CHECK_EQ(le_write(e, 0, LE_INFO, big, 7), 0);
	CHECK_EQ(le_write(e, 0, LE_INFO, big, 3), 0);
	le_stats_get(e, &st);
	CHECK_EQ(st.record_hwm_bytes, 7); /* the largest, not the last */
	CHECK_EQ(le_write(e, 0, LE_INFO, big, sizeof big), LE_ETOOBIG);
	le_stats_get(e, &st);
	CHECK_EQ(st.record_hwm_bytes, 7); /* a refused one is not counted */
	CHECK_EQ(le_write(e, 0, LE_INFO, big, 100), 0);
	le_stats_get(e, &st);
	CHECK_EQ(st.rejected, 1);
	CHECK_EQ(st.record_hwm_bytes, 100);
	CHECK_RC(le_flush(e, 5000)); /* the writer has run: its CPU shows */
	le_stats_get(e, &st);
	CHECK(st.writer_cpu_ns > 0);
	le_close(e);
	t_rmrf(c.dir);
}

struct seqs {
	uint64_t first, last;
	long n;
};

static void note_seq(const le_record *r, void *arg)
{
	struct seqs *s = arg;
	if (!s->n)
		s->first = r->seq;
	if (s->n && r->seq != s->last + 1)
		s->n = -1000000;
	s->last = r->seq;
	s->n++;
}

/* The sequences of dir's records read in mode, of which there must be
 * want. */
static struct seqs read_seqs(const char *dir, int mode, long want)
{
	struct seqs s = {0};
	CHECK_EQ(read_all(dir, mode, note_seq, &s), want);
	return s;
}

static void write_n(le_engine *e, int n, int tag)
{
	char buf[64];
	for (int i = 0; i < n; i++) {
		int len = snprintf(buf, sizeof buf, "rec %d.%d", tag, i);
		CHECK_EQ(le_write(e, 0, LE_INFO, buf, (size_t)len), 0);
	}
}

TEST(reopen_continues_sequence_numbers)
{
	le_config c = base_cfg();
	for (int round = 0; round < 3; round++) {
		le_engine *e = t_open(&c);
		write_n(e, 1000, round);
		CHECK_EQ(le_close(e), 0);
	}
	struct seqs s = read_seqs(c.dir, LE_RECOVER_ABSOLUTE, 3000);
	CHECK_EQ(s.first, 1);
	CHECK_EQ(s.last, 3000);
	CHECK_EQ(s.n, 3000);
	t_rmrf(c.dir);
}

static void seg_file(const char *dir, char *out, size_t cap)
{
	char sd[400];
	snprintf(sd, sizeof sd, "%s/shard-000", dir);
	DIR *d = opendir(sd);
	struct dirent *de;
	char best[256] = "";
	while ((de = readdir(d)))
		if (strstr(de->d_name, ".seg") && strcmp(de->d_name, best) > 0)
			snprintf(best, sizeof best, "%s", de->d_name);
	closedir(d);
	snprintf(out, cap, "%s/%s", sd, best);
}

static void last_payload(const le_record *r, void *arg)
{
	snprintf(arg, 64, "%.*s", (int)r->len, (const char *)r->payload);
}

TEST(segment_truncated_at_every_byte_of_last_record_reopens_cleanly)
{
	le_config c = base_cfg();
	le_engine *e = t_open(&c);
	write_n(e, 10, 0);
	le_close(e);
	char seg[1024];
	seg_file(c.dir, seg, sizeof seg);
	size_t len = 0;
	unsigned char *img = t_slurp(seg, &len);
	CHECK(img != NULL);
	/* The last frame: "rec 0.9" = 7 bytes + 28 fixed. */
	size_t frame = 7 + 28;
	for (size_t cut = len - frame; cut < len; cut++) {
		t_spit(seg, img, cut);
		e = t_open(&c);
		le_stats st;
		le_stats_get(e, &st);
		CHECK_EQ(st.recovered_truncated_bytes, cut - (len - frame));
		CHECK_EQ(le_write(e, 0, LE_INFO, "after", 5), 0);
		CHECK_EQ(le_close(e), 0);
		struct seqs s = read_seqs(c.dir, LE_RECOVER_ABSOLUTE, 10);
		CHECK_EQ(s.last, 10); /* rec 0.9 gone, "after" took seq 10 */
		char last[64];
		read_all(c.dir, 0, last_payload, last);
		CHECK(strcmp(last, "after") == 0);
	}
	free(img);
	t_rmrf(c.dir);
}

static void tail_case(int garbage)
{
	le_config c = base_cfg();
	le_engine *e = t_open(&c);
	write_n(e, 100, 0);
	le_close(e);
	char seg[1024];
	seg_file(c.dir, seg, sizeof seg);
	FILE *f = fopen(seg, "ab");
	for (int i = 0; i < 5000; i++)
		fputc(garbage ? (i * 131 + 7) & 0xff : 0, f);
	fclose(f);
	/* The reader sees a torn tail; verify-style ABSOLUTE refuses it. */
	CHECK_EQ(read_all(c.dir, LE_RECOVER_TOLERATE_TAIL, NULL, NULL), 100);
	CHECK(read_all(c.dir, LE_RECOVER_ABSOLUTE, NULL, NULL) < 0);
	e = t_open(&c);
	le_stats st;
	le_stats_get(e, &st);
	CHECK_EQ(st.recovered_truncated_bytes, 5000);
	write_n(e, 5, 1);
	le_close(e);
	struct seqs s = read_seqs(c.dir, LE_RECOVER_ABSOLUTE, 105);
	CHECK_EQ(s.last, 105);
	t_rmrf(c.dir);
}

TEST(zero_filled_tail_is_cut_at_open)
{
	tail_case(0);
}

TEST(garbage_tail_is_cut_at_open)
{
	tail_case(1);
}

static void damage_case(uint32_t checkpoint_ms)
{
	le_config c = base_cfg();
	c.checkpoint_ms = checkpoint_ms;
	le_engine *e = t_open(&c);
	write_n(e, 100, 0);
	le_close(e);
	char seg[1024];
	seg_file(c.dir, seg, sizeof seg);
	size_t len = 0;
	unsigned char *img = t_slurp(seg, &len);
	img[len / 2] ^= 0x10; /* a flipped bit in the middle */
	t_spit(seg, img, len);
	e = t_open(&c);
	le_stats st;
	le_stats_get(e, &st);
	CHECK_EQ(st.recovered_truncated_bytes, 0);
	write_n(e, 1, 1);
	le_close(e);
	size_t len2 = 0;
	unsigned char *img2 = t_slurp(seg, &len2);
	CHECK(len2 >= len); /* nothing of the damaged file was cut */
	CHECK(memcmp(img, img2, len) == 0);
	/* SKIP mode gets 99 old records and the new one, numbered after. */
	struct seqs s = read_seqs(c.dir, LE_RECOVER_SKIP, 100);
	CHECK_EQ(s.last, 101);
	free(img);
	free(img2);
	t_rmrf(c.dir);
}

/* Without a checkpoint, recovery scans the whole last segment, finds the
 * damage, and must keep the file whole rather than cut at the damage. */
TEST(damage_inside_last_segment_is_kept_not_truncated)
{
	damage_case(0);
}

/* With one, recovery starts at the checkpoint; the damage before it is
 * for readers to report, and appending after it is right. */
TEST(damage_before_checkpoint_does_not_stop_appends)
{
	damage_case(1000);
}

static long count_segs(const char *dir, int shard)
{
	char sd[400];
	snprintf(sd, sizeof sd, "%s/shard-%03d", dir, shard);
	DIR *d = opendir(sd);
	struct dirent *de;
	long n = 0;
	while ((de = readdir(d)))
		n += strstr(de->d_name, ".seg") != NULL;
	closedir(d);
	return n;
}

TEST(rotation_by_size_keeps_every_record)
{
	le_config c = base_cfg();
	c.segment_bytes = 8192;
	c.overflow = LE_OVERFLOW_BLOCK;
	le_engine *e = t_open(&c);
	write_n(e, 20000, 0);
	le_stats st;
	le_flush(e, 5000);
	le_stats_get(e, &st);
	le_close(e);
	long n = count_segs(c.dir, 0);
	CHECK(n > 10);
	CHECK_EQ((long)st.segments_created, n);
	struct seqs s = read_seqs(c.dir, LE_RECOVER_ABSOLUTE, 20000);
	CHECK_EQ(s.n, 20000);
	t_rmrf(c.dir);
}

TEST(retention_deletes_oldest_segments_only)
{
	le_config c = base_cfg();
	c.segment_bytes = 8192;
	c.retention_bytes = 40000;
	c.overflow = LE_OVERFLOW_BLOCK;
	le_engine *e = t_open(&c);
	write_n(e, 20000, 0);
	le_flush(e, 5000);
	le_stats st;
	CHECK_RC(le_close_stats(e, &st)); /* the reaper's unlinks counted */
	CHECK(st.segments_deleted > 0);
	long n = count_segs(c.dir, 0);
	CHECK(n * 8192 <= 40000 + 8192);
	/* What is left is the newest records, contiguous, ending at 20000. */
	struct seqs s = {0};
	long got = read_all(c.dir, LE_RECOVER_TOLERATE_TAIL, note_seq, &s);
	CHECK(got > 0 && got < 20000);
	CHECK_EQ(s.last, 20000);
	CHECK_EQ(s.n, got);
	t_rmrf(c.dir);
}

TEST(age_rotation_starts_new_segment)
{
	le_config c = base_cfg();
	c.segment_max_age_ms = 50;
	c.flush_ms = 5;
	le_engine *e = t_open(&c);
	write_n(e, 10, 0);
	le_flush(e, 1000);
	usleep(200000);
	write_n(e, 10, 1);
	le_close(e);
	CHECK(count_segs(c.dir, 0) >= 2);
	CHECK_EQ(read_all(c.dir, LE_RECOVER_ABSOLUTE, NULL, NULL), 20);
	t_rmrf(c.dir);
}

static void expect_bad(le_config *c, const char *field)
{
	le_engine *e = (le_engine *)1;
	CHECK_EQ(le_open(&e, c), LE_EINVAL);
	CHECK(e == NULL);
	if (!strstr(le_errmsg(), field)) {
		fprintf(stderr, "  errmsg '%s' lacks '%s'\n", le_errmsg(), field);
		_exit(1);
	}
}

TEST(bad_config_values_are_refused_naming_the_field)
{
	le_config c = base_cfg(), b;
	b = c; b.dir = NULL; expect_bad(&b, "dir");
	b = c; b.shards = 0; expect_bad(&b, "shards");
	b = c; b.shards = 1000; expect_bad(&b, "shards");
	b = c; b.queue_capacity = 0; expect_bad(&b, "queue_capacity");
	b = c; b.queue_capacity_bytes = 10; expect_bad(&b, "queue_capacity_bytes");
	b = c; b.max_record_bytes = 0; expect_bad(&b, "max_record_bytes");
	b = c; b.overflow = 7; expect_bad(&b, "overflow");
	b = c; b.oversize = 7; expect_bad(&b, "oversize");
	b = c; b.fields = 0x100; expect_bad(&b, "fields");
	b = c; b.segment_bytes = 100; expect_bad(&b, "segment_bytes");
	b = c; b.batch_size = c.queue_capacity; expect_bad(&b, "batch_size");
	b = c; b.flush_ms = 0; expect_bad(&b, "flush_ms");
	b = c; b.max_pending_bytes = 1; expect_bad(&b, "max_pending_bytes");
	b = c; b.durability = 9; expect_bad(&b, "durability");
	b = c; b.direct_io = 2; expect_bad(&b, "direct_io");
	b = c; b.queue_checksum = 2; expect_bad(&b, "queue_checksum");
	t_rmrf(c.dir);
}

TEST(missing_or_unusable_directory_fails_at_open)
{
	le_config c = base_cfg();
	char missing[400];
	snprintf(missing, sizeof missing, "%s/nope", c.dir);
	le_config b = c;
	b.dir = missing;
	le_engine *e;
	CHECK_EQ(le_open(&e, &b), -ENOENT);
	CHECK(strstr(le_errmsg(), "nope") != NULL);
	b.create_dir = 1;
	CHECK_RC(le_open(&e, &b));
	le_close(e);
	char file[400];
	snprintf(file, sizeof file, "%s/afile", c.dir);
	t_spit(file, "x", 1);
	b.dir = file;
	b.create_dir = 0;
	CHECK(le_open(&e, &b) < 0);
	t_rmrf(c.dir);
}

TEST(second_engine_on_same_dir_is_refused)
{
	le_config c = base_cfg();
	le_engine *e = t_open(&c), *e2;
	CHECK_EQ(le_open(&e2, &c), LE_EBUSY);
	le_close(e);
	e = t_open(&c);
	le_close(e);
	t_rmrf(c.dir);
}

static int vlogf_of(le_engine *e, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = le_vlogf(e, LE_INFO, fmt, ap);
	va_end(ap);
	return rc;
}

/* Every logging call given a NULL engine or logger, with no default
 * engine: LE_EINVAL (the macros: nothing), never a crash. */
TEST(null_engine_or_logger_in_any_logging_call_is_an_error_not_a_crash)
{
	le_engine *ne = NULL;
	le_logger *nl = NULL;
	int evaluated = 0;
	CHECK(le_get_default() == NULL);
	CHECK_EQ(le_write(NULL, 0, LE_INFO, "x", 1), LE_EINVAL);
	CHECK_EQ(le_logf(NULL, LE_INFO, "x %d", 1), LE_EINVAL);
	CHECK_EQ(vlogf_of(NULL, "x %d", 1), LE_EINVAL);
	CHECK_EQ(le_logf_kv(NULL, LE_INFO, LE_FIELDS(LE_I64("n", 1)), "x"),
	         LE_EINVAL);
	le_info(ne, "x %d", ++evaluated);
	le_error(nl, "x %d", ++evaluated);
	le_fatal(NULL, "x %d", ++evaluated);
	le_trace(nl, "x");
	le_warn_kv(ne, LE_FIELDS(LE_I64("n", ++evaluated)), "x");
	le_error_kv(nl, LE_FIELDS(LE_STR("k", "v")), "x %s", "y");
	CHECK_EQ(evaluated, 0); /* nowhere to log: arguments untouched */
	CHECK_EQ(le_flush(NULL, 0), LE_EINVAL);
	CHECK_EQ(le_reopen(NULL), LE_EINVAL);
	CHECK(le_logger_get(NULL, "net") == NULL);
	CHECK(strstr(le_errmsg(), "no default engine") != NULL);
	CHECK_EQ(le_set_level(NULL, "net", LE_DEBUG), LE_EINVAL);
	CHECK_EQ(le_get_level(NULL, "net"), LE_EINVAL);
	CHECK_STR_EQ(le_logger_name(NULL), "");
	CHECK_EQ(le_close(NULL), 0);
}

static void count_payload(const le_record *r, void *arg)
{
	char buf[64];
	if (strcmp(cstr(r, buf, sizeof buf), "written") == 0 ||
	    strncmp(buf, "via ", 4) == 0)
		(*(int *)arg)++;
}

/* le_set_default: a NULL handle logs to that engine, like spdlog::info,
 * until le_close of it clears the default (closing another does not). */
TEST(default_engine_takes_the_records_of_a_null_handle_until_closed)
{
	le_config c = base_cfg(), c2 = base_cfg();
	char d2[256];
	c2.dir = t_tmpdir(d2);
	le_engine *e = t_open(&c), *other = t_open(&c2);
	le_logger *nl = NULL;
	CHECK_RC(le_set_default(e));
	CHECK(le_get_default() == e);
	CHECK_RC(le_write(NULL, 0, LE_INFO, "written", 7));
	CHECK_RC(le_logf(NULL, LE_INFO, "via %s", "logf"));
	CHECK_RC(vlogf_of(NULL, "via %s", "vlogf"));
	CHECK_RC(le_logf_kv(NULL, LE_INFO, LE_FIELDS(LE_I64("n", 1)), "via kv"));
	le_info(NULL, "via %s", "macro");
	le_warn(nl, "via %s", "logger");
	le_error_kv(NULL, LE_FIELDS(LE_STR("k", "v")), "via %s", "macro_kv");
	le_debug(NULL, "via %s", "debug"); /* below the root's info */
	le_logger *net = le_logger_get(NULL, "net");
	CHECK(net != NULL && le_logger_get(e, "net") == net);
	CHECK_RC(le_set_level(NULL, "net", LE_DEBUG));
	CHECK_EQ(le_get_level(e, "net"), LE_DEBUG);
	le_debug(net, "via %s", "net");
	CHECK_RC(le_reopen(NULL));
	CHECK_RC(le_flush(NULL, 5000));
	CHECK_RC(le_close(other)); /* another engine: the default stays */
	CHECK(le_get_default() == e);
	CHECK_RC(le_close(e));
	CHECK(le_get_default() == NULL);
	le_info(NULL, "after close"); /* nothing, no crash */
	CHECK_EQ(le_logf(NULL, LE_INFO, "after close"), LE_EINVAL);
	int n = 0;
	CHECK(read_all(c.dir, LE_RECOVER_ABSOLUTE, count_payload, &n) >= 0);
	CHECK_EQ(n, 8);
	/* le_set_default(NULL) clears it too */
	e = t_open(&c);
	CHECK_RC(le_set_default(e));
	CHECK_RC(le_set_default(NULL));
	CHECK_EQ(le_write(NULL, 0, LE_INFO, "x", 1), LE_EINVAL);
	CHECK_RC(le_close(e));
	t_rmrf(c.dir);
	t_rmrf(d2);
}

TEST(bad_arguments_to_le_write_return_errors)
{
	le_config c = base_cfg();
	le_engine *e = t_open(&c);
	CHECK_EQ(le_write(e, 0, LE_INFO, NULL, 5), LE_EINVAL);
	CHECK_EQ(le_write(e, 0, 99, "x", 1), LE_EINVAL);
	CHECK_EQ(le_write(e, 0, -1, "x", 1), LE_EINVAL);
	CHECK_EQ(le_write(NULL, 0, LE_INFO, "x", 1), LE_EINVAL);
	CHECK_EQ(le_write(e, 0, LE_INFO, NULL, 0), 0); /* empty record */
	CHECK_EQ(le_logf(NULL, LE_INFO, "x"), LE_EINVAL);
	CHECK_EQ(le_flush(NULL, 0), LE_EINVAL);
	CHECK_EQ(le_close(e), 0);
	CHECK_EQ(read_all(c.dir, LE_RECOVER_ABSOLUTE, NULL, NULL), 1);
	CHECK(strcmp(le_strerror(LE_EFULL), "unknown error") != 0);
	CHECK(strcmp(le_strerror(-ENOENT), "No such file or directory") == 0);
	t_rmrf(c.dir);
}

static void check_fmt(const le_record *r, void *arg)
{
	long *i = arg;
	char want[128];
	if (*i == 0)
		snprintf(want, sizeof want, "Logging int: %d, int: %d, double: %f",
		         1, 2, 3.5);
	if (*i == 0)
		CHECK(r->len == strlen(want) && !memcmp(r->payload, want, r->len));
	if (*i == 1) {
		CHECK_EQ(r->len, 1000);
		CHECK(r->flags & LE_REC_TRUNCATED);
	}
	CHECK_EQ(r->level, *i == 0 ? LE_WARN : LE_ERROR);
	(*i)++;
}

TEST(logf_formats_and_truncates_long_messages)
{
	le_config c = base_cfg();
	c.max_record_bytes = 1000;
	le_engine *e = t_open(&c);
	CHECK_EQ(le_logf(e, LE_WARN, "Logging int: %d, int: %d, double: %f", 1,
	                 2, 3.5), 0);
	CHECK_EQ(le_logf(e, LE_ERROR, "%05000d", 7), 0);
	le_close(e);
	long i = 0;
	CHECK_EQ(read_all(c.dir, 0, check_fmt, &i), 2);
	t_rmrf(c.dir);
}

TEST(direct_io_roundtrip_and_reopen)
{
	le_config c = base_cfg();
	c.direct_io = 1;
	c.segment_bytes = 100000;
	for (int round = 0; round < 2; round++) {
		le_engine *e = NULL;
		int rc = le_open(&e, &c);
		if (rc < 0) {
			/* tmpfs has no O_DIRECT: that must be a clear error */
			CHECK(strstr(le_errmsg(), "direct_io") != NULL);
			t_rmrf(c.dir);
			return;
		}
		write_n(e, 3001, round);
		CHECK_EQ(le_close(e), 0);
	}
	struct seqs s = read_seqs(c.dir, LE_RECOVER_ABSOLUTE, 6002);
	CHECK_EQ(s.last, 6002);
	t_rmrf(c.dir);
}

TEST(torn_or_lying_checkpoint_is_not_trusted)
{
	le_config c = base_cfg();
	le_engine *e = t_open(&c);
	write_n(e, 100, 0);
	le_close(e);
	char ck[400];
	snprintf(ck, sizeof ck, "%s/shard-000/CHECKPOINT", c.dir);
	size_t len = 0;
	unsigned char *img = t_slurp(ck, &len);
	CHECK(img && len >= 64);
	/* Lie: claim more records than the log has (slot 0 and 1 both). */
	unsigned char junk[1024];
	memset(junk, 0xA5, sizeof junk);
	t_spit(ck, junk, sizeof junk);
	e = t_open(&c);
	write_n(e, 1, 1);
	le_close(e);
	struct seqs s = read_seqs(c.dir, LE_RECOVER_ABSOLUTE, 101);
	CHECK_EQ(s.last, 101);
	free(img);
	t_rmrf(c.dir);
}

TEST(durability_batch_syncs_before_flush_returns)
{
	le_config c = base_cfg();
	c.durability = LE_SYNC_BATCH;
	le_engine *e = t_open(&c);
	write_n(e, 10, 0);
	CHECK_RC(le_flush(e, 5000));
	le_stats st;
	le_stats_get(e, &st);
	CHECK(st.syncs >= 1);
	CHECK_EQ(st.written, 10);
	le_close(e);
	t_rmrf(c.dir);
}

TEST(flush_returns_promptly_with_nothing_queued)
{
	le_config c = base_cfg();
	c.flush_ms = 60000;
	le_engine *e = t_open(&c);
	CHECK_EQ(le_flush(e, 2000), 0);
	write_n(e, 3, 0);
	CHECK_EQ(le_flush(e, 2000), 0); /* does not wait for flush_ms */
	le_stats st;
	le_stats_get(e, &st);
	CHECK_EQ(st.written, 3);
	le_close(e);
	t_rmrf(c.dir);
}

static void check_fields(const le_record *r, void *arg)
{
	(void)arg;
	CHECK_EQ(r->ts_ns, 0);
	CHECK_EQ(r->level, -1);
	CHECK(r->len == 7 && memcmp(r->payload, "rec 0.", 6) == 0);
}

TEST(fields_switched_off_still_roundtrip)
{
	le_config c = base_cfg();
	c.fields = LE_FIELD_CRC | LE_FIELD_SEQUENCE;
	le_engine *e = t_open(&c);
	write_n(e, 10, 0);
	le_close(e);
	CHECK_EQ(read_all(c.dir, LE_RECOVER_ABSOLUTE, check_fields, NULL), 10);
	/* Reopened with every field on: a new segment, numbering goes on. */
	c.fields = LE_FIELD_ALL;
	e = t_open(&c);
	write_n(e, 10, 1);
	le_close(e);
	struct seqs s = read_seqs(c.dir, LE_RECOVER_ABSOLUTE, 20);
	CHECK_EQ(s.last, 20);
	t_rmrf(c.dir);
}

static uint64_t wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct stamps {
	uint64_t lo[8], hi[8];
	int i, bad;
};

static void check_stamp(const le_record *r, void *arg)
{
	struct stamps *s = arg;
	/* 2 ms of slack for the TSC calibration's extrapolation. */
	if (r->ts_ns + 2000000 < s->lo[s->i] || r->ts_ns > s->hi[s->i] + 2000000)
		s->bad++;
	s->i++;
}

/* Timestamps may come from the TSC (os.h); they must still be wall-clock
 * nanoseconds, taken when le_write was called, across recalibrations. */
TEST(timestamps_are_wall_clock_at_the_call)
{
	le_config c = base_cfg();
	le_engine *e = t_open(&c);
	struct stamps s = {0};
	for (int i = 0; i < 8; i++) {
		s.lo[i] = wall_ns();
		CHECK_EQ(le_write(e, 0, LE_INFO, "t", 1), 0);
		s.hi[i] = wall_ns();
		usleep(300000); /* spans the writer's 1 s recalibration */
	}
	le_close(e);
	CHECK_EQ(read_all(c.dir, 0, check_stamp, &s), 8);
	CHECK_EQ(s.bad, 0);
	t_rmrf(c.dir);
}

static le_engine *early_e;
static atomic_int early_stop;

static void *early_producer(void *arg)
{
	char p[64];
	(void)arg;
	memset(p, 'x', sizeof p);
	while (!atomic_load(&early_stop)) {
		uint64_t lo = wall_ns();
		memcpy(p, &lo, sizeof lo);
		le_write(early_e, 0, LE_INFO, p, sizeof p);
	}
	return NULL;
}

struct early {
	uint64_t n, early, worst;
};

static void check_early(const le_record *r, void *arg)
{
	struct early *x = arg;
	uint64_t lo;
	if (r->flags || r->len != 64)
		return; /* a "records dropped" marker */
	memcpy(&lo, r->payload, sizeof lo);
	x->n++;
	/* 5 us: the TSC conversion's own error is ~1 us */
	if (r->ts_ns + 5000 < lo) {
		x->early++;
		if (lo - r->ts_ns > x->worst)
			x->worst = lo - r->ts_ns;
	}
}

/* A record is never dated before its call.  The writer keeps stamps below
 * its clock reading at the start of a pass (a counter that jumped back);
 * in a pass that runs long (big batches, the writer preempted by
 * producers on a 2-CPU machine) that reading is older than records
 * stamped since, so a stamp past it is checked against a fresh reading
 * before it is clamped, or those records would be dated before their
 * call. */
TEST(records_are_never_dated_before_their_call)
{
	le_config c = base_cfg();
	c.queue_capacity = 1u << 18;
	c.queue_capacity_bytes = 64u << 20;
	c.max_pending_bytes = 32u << 20;
	c.batch_size = 1u << 16;
	early_e = t_open(&c);
	atomic_store(&early_stop, 0);
	pthread_t t[3];
	for (int i = 0; i < 3; i++)
		CHECK_EQ(pthread_create(&t[i], NULL, early_producer, NULL), 0);
	usleep(1500000);
	atomic_store(&early_stop, 1);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	le_close(early_e);
	struct early x = {0};
	CHECK(read_all(c.dir, 0, check_early, &x) > 0);
	fprintf(stderr, "  (%llu records, %llu dated before their call, worst "
	        "%.3f ms)\n", (unsigned long long)x.n,
	        (unsigned long long)x.early, (double)x.worst / 1e6);
	CHECK_EQ(x.early, 0);
	t_rmrf(c.dir);
}

/*
 * The default queue is one 2 MiB-aligned mapping of whole 2 MiB pages, so
 * the kernel can back it with a huge page (in small pages, a producer's
 * prefetch across a 4 KiB boundary of the ring is a TLB walk: a slow
 * le_write).  Alignment and size are ours to promise; whether a huge page is
 * used is the kernel's (THP, and large folios of the file system), so that
 * part is reported, not asserted.
 */
TEST(default_queue_is_one_aligned_mapping_of_whole_huge_pages)
{
	le_config c = base_cfg();
	le_engine *e = t_open(&c);
	char want[400], line[1024], path[400];
	snprintf(want, sizeof want, "%s/shard-000/QUEUE", c.dir);
	FILE *f = fopen("/proc/self/smaps", "r");
	CHECK(f != NULL);
	unsigned long lo = 0, hi = 0, pmd_kb = 0;
	int found = 0, in = 0;
	while (fgets(line, sizeof line, f)) {
		unsigned long a, b;
		int n = sscanf(line, "%lx-%lx %*s %*s %*s %*s %399s", &a, &b,
		               path);
		if (n >= 2) {
			/* a mapping's first line ("lo-hi perms ..."; field
			 * lines are "Name: value"); anonymous: no path */
			in = n == 3 && strcmp(path, want) == 0;
			if (in) {
				found++;
				lo = a, hi = b;
			}
		} else if (in) {
			sscanf(line, "FilePmdMapped: %lu kB", &pmd_kb);
		}
	}
	fclose(f);
	struct stat st;
	CHECK(stat(want, &st) == 0);
	CHECK_EQ(found, 1);                   /* one mapping, not pieces */
	CHECK_EQ(lo % (2ul << 20), 0);        /* starts on a 2 MiB boundary */
	CHECK_EQ((hi - lo) % (2ul << 20), 0); /* whole 2 MiB pages */
	CHECK_EQ((unsigned long)st.st_size, hi - lo); /* all of the file */
	fprintf(stderr, "  (QUEUE: %lu KiB mapped, %lu KiB of it by huge "
	        "pages on this kernel)\n", (hi - lo) >> 10, pmd_kb);
	CHECK_EQ(le_close(e), 0);
	t_rmrf(c.dir);
}

/* 1 when a thread of this process is named `name` (/proc/self/task). */
static int thread_named(const char *name)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	int found = 0;
	CHECK(d != NULL);
	while (!found && (de = readdir(d))) {
		char p[300], comm[32] = "";
		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof p, "/proc/self/task/%s/comm", de->d_name);
		FILE *f = fopen(p, "r");
		if (f && fgets(comm, sizeof comm, f))
			comm[strcspn(comm, "\n")] = '\0';
		if (f)
			fclose(f);
		found = strcmp(comm, name) == 0;
	}
	closedir(d);
	return found;
}

/* The engine's threads say what they are in top -H, perf and
 * /proc/PID/task: le-writer-N per shard, le-reaper for retention,
 * le-stream for the stream sink. */
TEST(engine_threads_are_named_for_top_and_perf)
{
	le_config c = base_cfg();
	int fds[2];
	CHECK(pipe(fds) == 0);
	c.shards = 2;
	c.retention_bytes = 1u << 30;
	c.stream_fd = fds[1];
	le_engine *e = t_open(&c);
	/* named by le_open itself, not by the threads when they get to it */
	CHECK(thread_named("le-writer-0"));
	CHECK(thread_named("le-writer-1"));
	CHECK(thread_named("le-reaper"));
	CHECK(thread_named("le-stream"));
	CHECK_EQ(le_close(e), 0);
	CHECK(!thread_named("le-writer-0")); /* joined */
	close(fds[0]);
	close(fds[1]);
	t_rmrf(c.dir);
}

/* Without a store the stream is the only sink: every record is a line,
 * counted in stream_lines (not written, which counts segment records), and
 * le_flush returns once the lines are on the descriptor. */
TEST(stream_only_engine_counts_its_records_as_stream_lines)
{
	le_config c = base_cfg();
	int fds[2];
	char buf[256];
	CHECK(pipe(fds) == 0);
	c.store = 0;
	c.stream_fd = fds[1];
	c.shards = 2;
	le_engine *e = t_open(&c);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(le_write(e, 0, LE_INFO, "line", 4), 0);
	CHECK_EQ(le_flush(e, 1000), 0);
	le_stats st;
	CHECK_EQ(le_stats_get(e, &st), 0);
	CHECK_EQ(st.stream_lines, 3);
	CHECK_EQ(st.written, 0);
	CHECK_EQ(st.accepted, st.dropped_full + st.stream_lines +
	                              st.stream_dropped);
	ssize_t n = read(fds[0], buf, sizeof buf - 1);
	CHECK_EQ(n, 15);
	buf[n > 0 ? n : 0] = '\0';
	CHECK_STR_EQ(buf, "line\nline\nline\n");
	CHECK_EQ(le_close(e), 0);
	close(fds[0]);
	close(fds[1]);
	t_rmrf(c.dir);
}

/* le_flush's wait against the writer's progress is a store-buffering
 * pair (each stores, then loads the other's word): without a full fence
 * on both sides a flusher can sleep on a position already reached, and
 * with timeout -1 sleep for ever.  Many flushers on an idle engine, and on
 * one with a trickle of records, must all return. */
static le_engine *hammer_e;
static atomic_int hammer_stop;

static int hammer_rounds;

static void *hammer_flush(void *arg)
{
	(void)arg;
	for (int i = 0; i < hammer_rounds; i++)
		if (le_flush(hammer_e, -1) != 0)
			return (void *)1;
	return NULL;
}

static void *trickle(void *arg)
{
	(void)arg;
	while (!atomic_load(&hammer_stop)) {
		le_write(hammer_e, 0, LE_INFO, "t", 1);
		usleep(50);
	}
	return NULL;
}

static void hammer(int with_trickle)
{
	le_config c = base_cfg();
	c.shards = 2;
	/* With a trickle, every flush needs a sync: fewer rounds. */
	c.durability = with_trickle ? LE_SYNC_INTERVAL : LE_SYNC_NONE;
	hammer_rounds = with_trickle ? 300 : 5000;
	hammer_e = t_open(&c);
	atomic_store(&hammer_stop, 0);
	pthread_t p, t[4];
	if (with_trickle)
		CHECK_EQ(pthread_create(&p, NULL, trickle, NULL), 0);
	for (int i = 0; i < 4; i++)
		CHECK_EQ(pthread_create(&t[i], NULL, hammer_flush, NULL), 0);
	for (int i = 0; i < 4; i++) {
		void *r;
		pthread_join(t[i], &r);
		CHECK(r == NULL);
	}
	atomic_store(&hammer_stop, 1);
	if (with_trickle)
		pthread_join(p, NULL);
	CHECK_EQ(le_close(hammer_e), 0);
	t_rmrf(c.dir);
}

TEST(flushes_forever_on_an_idle_engine_all_return)
{
	hammer(0);
}

TEST(flushes_forever_on_a_nearly_idle_engine_all_return)
{
	hammer(1);
}

/* A batch is written once it holds a quarter of the queue's payload
 * bytes, whatever max_pending_bytes allows: a batch that waited for more
 * than the queue can hold would hold the whole queue until flush_ms, with
 * producers blocked (or dropping) behind it. */
TEST(a_batch_is_written_once_it_holds_a_quarter_of_the_queue_bytes)
{
	le_config c = base_cfg();
	c.queue_capacity_bytes = 1u << 20;
	c.max_pending_bytes = 4u << 20;
	c.max_record_bytes = 4096;
	c.flush_ms = 60000;
	c.overflow = LE_OVERFLOW_BLOCK;
	le_engine *e = t_open(&c);
	static char big[4096];
	memset(big, 'b', sizeof big);
	uint64_t t0 = le__mono_ns();
	for (int i = 0; i < 1000; i++) /* 4 MB through a 1 MiB queue */
		CHECK_EQ(le_write(e, 0, LE_INFO, big, sizeof big), 0);
	double s = (double)(le__mono_ns() - t0) / 1e9;
	fprintf(stderr, "  (1000 x 4 KiB through a 1 MiB queue: %.2f s)\n", s);
	CHECK(s < 20); /* not a flush_ms (60 s) wait per queue-full */
	CHECK_EQ(le_close(e), 0);
	CHECK_EQ(read_all(c.dir, LE_RECOVER_ABSOLUTE, NULL, NULL), 1000);
	t_rmrf(c.dir);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	RUN(open_creates_shard_dirs_and_close_is_clean);
	RUN(default_queue_is_one_aligned_mapping_of_whole_huge_pages);
	RUN(engine_threads_are_named_for_top_and_perf);
	RUN(stream_only_engine_counts_its_records_as_stream_lines);
	RUN(a_batch_is_written_once_it_holds_a_quarter_of_the_queue_bytes);
	RUN(flushes_forever_on_an_idle_engine_all_return);
	RUN(flushes_forever_on_a_nearly_idle_engine_all_return);
	RUN(block_mode_loses_nothing_and_keeps_per_shard_order);
	RUN(drops_are_counted_exactly_and_reported_by_markers);
	RUN(concurrent_producers_never_exceed_queue_bounds);
	RUN(oversize_record_is_truncated_and_flagged_or_rejected);
	RUN(reopen_continues_sequence_numbers);
	RUN(segment_truncated_at_every_byte_of_last_record_reopens_cleanly);
	RUN(zero_filled_tail_is_cut_at_open);
	RUN(garbage_tail_is_cut_at_open);
	RUN(damage_inside_last_segment_is_kept_not_truncated);
	RUN(damage_before_checkpoint_does_not_stop_appends);
	RUN(rotation_by_size_keeps_every_record);
	RUN(retention_deletes_oldest_segments_only);
	RUN(age_rotation_starts_new_segment);
	RUN(bad_config_values_are_refused_naming_the_field);
	RUN(missing_or_unusable_directory_fails_at_open);
	RUN(second_engine_on_same_dir_is_refused);
	RUN(bad_arguments_to_le_write_return_errors);
	RUN(logf_formats_and_truncates_long_messages);
	RUN(direct_io_roundtrip_and_reopen);
	RUN(torn_or_lying_checkpoint_is_not_trusted);
	RUN(durability_batch_syncs_before_flush_returns);
	RUN(flush_returns_promptly_with_nothing_queued);
	RUN(fields_switched_off_still_roundtrip);
	RUN(timestamps_are_wall_clock_at_the_call);
	RUN(records_are_never_dated_before_their_call);
	RUN(null_engine_or_logger_in_any_logging_call_is_an_error_not_a_crash);
	RUN(default_engine_takes_the_records_of_a_null_handle_until_closed);
	return t_done();
}
