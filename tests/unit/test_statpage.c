/*
 * test_statpage.c -- the live counters page (src/live/statpage.c,
 * docs/INTERFACES.md): its bytes, its double-buffered sequence counters under
 * a reader that never stops, what it says of a running, closed, killed
 * and stopped engine, and the hot path's sampled durations.
 */
#include "harness.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>

#include "logengine.h"
#include "base/crc32c.h"
#include "record/format.h"
#include "live/statpage.h"
#include "base/os.h"

static le_engine *open_engine(const char *dir, unsigned shards)
{
	le_config c;
	le_engine *e;
	le_config_init(&c);
	c.dir = dir;
	c.shards = shards;
	c.flush_ms = 5;
	c.overflow = LE_OVERFLOW_BLOCK; /* every record counted written */
	CHECK_RC(le_open(&e, &c));
	return e;
}

static void write_n(le_engine *e, uint64_t key, int n)
{
	char msg[64];
	for (int i = 0; i < n; i++) {
		int len = snprintf(msg, sizeof msg, "record %d", i);
		CHECK_RC(le_write(e, key + (uint64_t)i, LE_INFO, msg, (size_t)len));
	}
}

static void sleep_ms(int ms)
{
	struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000};
	nanosleep(&t, NULL);
}

/* The header of shard 2's page, as docs/INTERFACES.md shows it. */
TEST(page_header_matches_format_md_vector)
{
	static const unsigned char want[64] = {
		0x4c, 0x4f, 0x47, 0x45, 0x4e, 0x47, 0x53, 0x54, /* LOGENGST */
		0x01, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00,
		0x02, 0x00, 0x00, 0x00, 0xdf, 0x00, 0x00, 0x00,
		0x80, 0x00, 0x00, 0x00, 0xc0, 0x07, 0x00, 0x00,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		0x04, 0x5a, 0xa8, 0x1d,
	};
	unsigned char *m = aligned_alloc(4096, LE_SP_BYTES);
	memset(m, 0xaa, LE_SP_BYTES);
	le__statpage_header(m, 2);
	for (int i = 0; i < 64; i++)
		if (m[i] != want[i]) {
			fprintf(stderr, "  byte %d: %02x, want %02x\n", i, m[i],
			        want[i]);
			CHECK(0);
		}
	/* A header made anew clears both slots. */
	for (size_t i = 64; i < LE_SP_BYTES; i++)
		CHECK_EQ(m[i], 0);
	uint64_t w[LE_SP_WORDS];
	CHECK_EQ(le__statpage_copy(m, w), 0);
	CHECK_EQ(w[LE_SP_STATE], LE_SP_NONE);
	free(m);
}

TEST(submit_code_round_trips_within_a_1024th)
{
	CHECK_EQ(le__sp_code(0), 0x8000); /* 0 is "not sampled": bit 15 */
	/* the vectors of docs/INTERFACES.md */
	CHECK_EQ(le__sp_code(1000), 0x83e8);
	CHECK_EQ(le__sp_code(1024), 0x8400);
	CHECK_EQ(le__sp_code(2048), 0x8800);
	CHECK_EQ(le__sp_code(3001), 0x89dc);
	CHECK_EQ(le__sp_decode(0x89dc), 3000);
	for (uint64_t d = 0; d < (1ull << 41); d = d * 3 / 2 + 1) {
		uint16_t c = le__sp_code(d);
		CHECK(c & 0x8000);
		uint64_t back = le__sp_decode(c);
		CHECK(back <= d);
		CHECK(d - back <= d / 1024);
	}
	CHECK_EQ(le__sp_code(1ull << 50), 0xffff); /* saturates */
	CHECK_EQ(le__hist_bucket(0), 0);
	CHECK_EQ(le__hist_bucket(1), 0);
	CHECK_EQ(le__hist_bucket(1023), 9);
	CHECK_EQ(le__hist_bucket(1024), 10);
	CHECK_EQ(le__hist_bucket(UINT64_MAX), LE_LIVE_BUCKETS - 1);
}

TEST(quantiles_interpolate_within_their_bucket)
{
	le_live_hist h;
	memset(&h, 0, sizeof h);
	CHECK(le_live_quantile(&h, 0.5) == 0);
	h.count = 100;
	h.bucket[10] = 50; /* [1024, 2048) */
	h.bucket[20] = 50; /* [1 Mi, 2 Mi) */
	double p50 = le_live_quantile(&h, 0.5), p99 = le_live_quantile(&h, 0.99);
	CHECK(p50 >= 1024 && p50 <= 2048);
	CHECK(p99 >= (1 << 20) && p99 <= (2 << 20));
}

/* ---- the protocol under a reader that never stops ---- */

struct hammer {
	unsigned char *map;
	_Atomic int stop;
	_Atomic uint64_t copies;
};

/* Every publication's words are all one value: a copy mixing two
 * publications has two. */
static void *reader_thread(void *arg)
{
	struct hammer *h = arg;
	uint64_t w[LE_SP_WORDS], last = 0;
	while (!atomic_load(&h->stop)) {
		CHECK_EQ(le__statpage_copy(h->map, w), 0);
		for (size_t i = 1; i < LE_SP_WORDS; i++)
			if (w[i] != w[0]) {
				fprintf(stderr, "  torn copy: word %zu is %llu, "
				        "word 0 %llu\n", i,
				        (unsigned long long)w[i],
				        (unsigned long long)w[0]);
				CHECK(0);
			}
		CHECK(w[0] >= last); /* never an older publication */
		last = w[0];
		atomic_fetch_add(&h->copies, 1);
	}
	return NULL;
}

TEST(reader_hammering_a_publishing_page_sees_only_whole_copies)
{
	struct hammer h = {0};
	uint64_t w[LE_SP_WORDS];
	pthread_t t[2];

	h.map = aligned_alloc(4096, LE_SP_BYTES);
	le__statpage_header(h.map, 0);
	for (int i = 0; i < 2; i++)
		CHECK_EQ(pthread_create(&t[i], NULL, reader_thread, &h), 0);
	uint64_t k;
	for (k = 1; k < 20000 || atomic_load(&h.copies) < 1000; k++) {
		for (size_t i = 0; i < LE_SP_WORDS; i++)
			w[i] = k;
		le__statpage_put(h.map, w);
	}
	atomic_store(&h.stop, 1);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	CHECK_EQ(le__statpage_copy(h.map, w), 0);
	CHECK_EQ(w[LE_SP_WORDS - 1], k - 1);
	free(h.map);
}

/* A writer killed while it fills a slot leaves that slot odd and half
 * new; the current copy still reads, and the next writer goes on. */
TEST(writer_killed_mid_publication_leaves_the_page_readable)
{
	unsigned char *m = aligned_alloc(4096, LE_SP_BYTES);
	uint64_t w[LE_SP_WORDS];

	le__statpage_header(m, 0);
	for (size_t i = 0; i < LE_SP_WORDS; i++)
		w[i] = 7;
	le__statpage_put(m, w); /* generation 1: slot 1 */
	/* the next would go to slot 0: cut short there */
	uint64_t *s0 = (uint64_t *)(m + LE_SP_SLOT0_OFF);
	s0[0] += 1;
	s0[1] = 8;
	CHECK_EQ(le__statpage_copy(m, w), 0);
	CHECK_EQ(w[0], 7);
	CHECK_EQ(w[LE_SP_WORDS - 1], 7);
	for (size_t i = 0; i < LE_SP_WORDS; i++)
		w[i] = 9;
	le__statpage_put(m, w);
	CHECK_EQ(s0[0] % 2, 0);
	CHECK_EQ(le__statpage_copy(m, w), 0);
	CHECK_EQ(w[LE_SP_WORDS - 1], 9);
	free(m);
}

TEST(page_of_another_version_is_refused)
{
	char dir[256], path[300];
	le_live l;

	t_tmpdir(dir);
	snprintf(path, sizeof path, "%s/shard-000", dir);
	CHECK_EQ(mkdir(path, 0755), 0);
	CHECK_EQ(le_live_read(dir, 0, &l), -ENOENT);
	snprintf(path, sizeof path, "%s/shard-000/STATS", dir);
	unsigned char *m = aligned_alloc(4096, LE_SP_BYTES);
	le__statpage_header(m, 0);
	m[8] = 2; /* version 2, CRC made again */
	le__put32(m + 60, le__crc_mask(le__crc32c_extend(0, m, 60)));
	FILE *f = fopen(path, "wb");
	CHECK(f && fwrite(m, 1, LE_SP_BYTES, f) == LE_SP_BYTES);
	fclose(f);
	CHECK_EQ(le_live_read(dir, 0, &l), LE_EVERSION);
	CHECK(strstr(le_errmsg(), "STATS"));
	m[8] = 1; /* version 1, CRC left as version 2's */
	f = fopen(path, "wb");
	CHECK(f && fwrite(m, 1, LE_SP_BYTES, f) == LE_SP_BYTES);
	fclose(f);
	CHECK_EQ(le_live_read(dir, 0, &l), LE_ECORRUPT);
	free(m);
	t_rmrf(dir);
}

/* ---- a real engine ---- */

TEST(closed_engine_page_holds_le_stats_at_close)
{
	char dir[256];
	le_stats st;
	le_live l[3];

	t_tmpdir(dir);
	le_engine *e = open_engine(dir, 3);
	write_n(e, 0, 30000);
	CHECK_RC(le_close_stats(e, &st));
	uint64_t acc = 0, wr = 0, dr = 0, by = 0, syncs = 0, segs = 0;
	for (unsigned i = 0; i < 3; i++) {
		CHECK_RC(le_live_read(dir, i, &l[i]));
		CHECK_EQ(l[i].state, LE_LIVE_CLOSED);
		CHECK_EQ(l[i].nshards, 3);
		CHECK_EQ(l[i].pid, getpid());
		acc += l[i].accepted;
		wr += l[i].written;
		dr += l[i].dropped;
		by += l[i].bytes_written;
		syncs += l[i].syncs;
		segs += l[i].segments_created;
		CHECK_EQ(l[i].segments, 1);
		CHECK_EQ(l[i].disk_bytes, l[i].segment_end);
		CHECK(l[i].write.count > 0);
	}
	CHECK_EQ(acc, st.accepted);
	CHECK_EQ(wr, st.written);
	CHECK_EQ(dr, st.dropped);
	CHECK_EQ(by, st.bytes_written);
	CHECK_EQ(syncs, st.syncs);
	CHECK_EQ(segs, st.segments_created);
	/* closed after every writer: the queue is empty in every copy */
	for (unsigned i = 0; i < 3; i++) {
		CHECK_EQ(l[i].queue_records, 0);
		CHECK_EQ(l[i].queue_hwm_records, st.queue_hwm_records);
		CHECK_EQ(l[i].truncated, st.truncated);
	}
	t_rmrf(dir);
}

/* Records by level: counted by the writers (not le_write), the same in
 * le_stats and in the shards' pages, and summing to the records taken. */
TEST(records_by_level_reach_le_stats_and_the_pages)
{
	char dir[256];
	le_stats st;
	le_live l;
	uint64_t page[LE_FATAL + 1] = {0}, sum = 0;

	t_tmpdir(dir);
	le_engine *e = open_engine(dir, 2);
	for (int lv = LE_TRACE; lv <= LE_FATAL; lv++)
		for (int i = 0; i < 10 * (lv + 1); i++)
			CHECK_RC(le_write(e, (uint64_t)i, lv, "r", 1));
	CHECK_RC(le_close_stats(e, &st));
	for (unsigned i = 0; i < 2; i++) {
		CHECK_RC(le_live_read(dir, i, &l));
		for (int lv = LE_TRACE; lv <= LE_FATAL; lv++)
			page[lv] += l.level_records[lv];
	}
	for (int lv = LE_TRACE; lv <= LE_FATAL; lv++) {
		CHECK_EQ(st.level_records[lv], (uint64_t)(10 * (lv + 1)));
		CHECK_EQ(page[lv], st.level_records[lv]);
		sum += st.level_records[lv];
	}
	CHECK_EQ(sum, st.accepted - st.dropped_full);
	t_rmrf(dir);
}

TEST(running_engine_page_is_fresh_and_advances)
{
	char dir[256];
	le_live a, b;

	t_tmpdir(dir);
	le_engine *e = open_engine(dir, 1);
	write_n(e, 0, 1000);
	CHECK_RC(le_flush(e, -1));
	sleep_ms(3 * LE_LIVE_PERIOD_MS);
	CHECK_RC(le_live_read(dir, 0, &a));
	CHECK_EQ(a.state, LE_LIVE_RUNNING);
	CHECK_EQ(a.written, 1000);
	CHECK(a.age_ns < 2000000000ull);
	write_n(e, 0, 500);
	CHECK_RC(le_flush(e, -1));
	sleep_ms(3 * LE_LIVE_PERIOD_MS);
	CHECK_RC(le_live_read(dir, 0, &b));
	CHECK_EQ(b.written, 1500);
	CHECK(b.updated_ns > a.updated_ns);
	CHECK(b.segment_end > a.segment_end);
	CHECK(b.last_frame_off >= a.segment_end);
	CHECK(b.last_frame_off < b.segment_end);
	le_close(e);
	t_rmrf(dir);
}

TEST(sampled_calls_fill_the_submit_and_queue_wait_histograms)
{
	char dir[256];
	le_live l;

	t_tmpdir(dir);
	le_engine *e = open_engine(dir, 1);
	/* one thread, fresh: calls 1024, 2048, ... are timed */
	for (int i = 0; i < 10; i++) {
		write_n(e, 0, 1024);
		CHECK_RC(le_flush(e, -1));
	}
	CHECK_RC(le_close(e));
	CHECK_RC(le_live_read(dir, 0, &l));
	CHECK_EQ(l.submit.count, 10);
	CHECK_EQ(l.queue_wait.count, 10);
	CHECK(l.submit.sum_ns > 0);
	CHECK(l.queue_wait.sum_ns >= l.submit.sum_ns / 100);
	uint64_t n = 0;
	for (int i = 0; i < LE_LIVE_BUCKETS; i++)
		n += l.submit.bucket[i];
	CHECK_EQ(n, 10);
	CHECK(l.sync.count > 0); /* le_flush syncs (LE_SYNC_INTERVAL) */
	CHECK_EQ(l.sync.count, l.syncs);
	t_rmrf(dir);
}

/* A handle keeps the pages mapped: it reads what le_live_read reads, and
 * finds the page of a directory made anew (after its second's recheck). */
TEST(live_handle_reads_the_pages_and_follows_a_directory_made_anew)
{
	char dir[256];
	le_live a, b;
	le_live_dir *h;

	t_tmpdir(dir);
	le_engine *e = open_engine(dir, 2);
	write_n(e, 0, 100);
	CHECK_RC(le_close(e));
	CHECK_RC(le_live_open(&h, dir));
	CHECK_RC(le_live_get(h, 1, &a));
	CHECK_RC(le_live_read(dir, 1, &b));
	CHECK_EQ(a.state, LE_LIVE_CLOSED);
	CHECK_EQ(a.written, b.written);
	CHECK_EQ(a.updated_ns, b.updated_ns);
	CHECK_EQ(le_live_get(h, 2, &a), -ENOENT);
	/* the same path, another directory, another engine */
	t_rmrf(dir);
	CHECK_EQ(mkdir(dir, 0755), 0);
	e = open_engine(dir, 2);
	write_n(e, 0, 10);
	CHECK_RC(le_flush(e, -1));
	sleep_ms(1100);
	CHECK_RC(le_live_get(h, 1, &a));
	CHECK_EQ(a.state, LE_LIVE_RUNNING);
	CHECK_EQ(a.written, 5);
	le_close(e);
	CHECK_RC(le_live_get(h, 1, &a)); /* same file: no recheck needed */
	CHECK_EQ(a.state, LE_LIVE_CLOSED);
	le_live_close(h);
	t_rmrf(dir);
}

/* The child opens an engine, writes, tells the parent, and waits. */
/* Records written as shards 0 and 1's live pages say. */
static uint64_t live_written(const char *dir)
{
	le_live a, b;
	if (le_live_read(dir, 0, &a) != 0 || le_live_read(dir, 1, &b) != 0)
		return 0;
	return a.written + b.written;
}

static pid_t child_engine(const char *dir, int *ready_fd)
{
	int p[2];
	CHECK_EQ(pipe(p), 0);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		close(p[0]);
		le_engine *e = open_engine(dir, 2);
		write_n(e, 0, 2000);
		CHECK_RC(le_flush(e, -1));
		/* Ready once both pages show every record written: a loaded
		 * machine may publish later than a period or two. */
		for (int i = 0; i < 1000 && live_written(dir) != 2000; i++)
			sleep_ms(10);
		if (write(p[1], "x", 1) != 1)
			_exit(3);
		for (;;)
			pause();
	}
	close(p[1]);
	char c;
	CHECK_EQ(read(p[0], &c, 1), 1);
	*ready_fd = p[0];
	return pid;
}

TEST(killed_engine_page_reads_dead_with_its_last_counts)
{
	char dir[256];
	le_live l;
	int fd;

	t_tmpdir(dir);
	pid_t pid = child_engine(dir, &fd);
	CHECK_RC(le_live_read(dir, 1, &l));
	CHECK_EQ(l.state, LE_LIVE_RUNNING);
	CHECK_EQ(l.pid, pid);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	close(fd);
	CHECK_RC(le_live_read(dir, 0, &l));
	CHECK_EQ(l.state, LE_LIVE_DEAD);
	uint64_t w0 = l.written;
	CHECK_RC(le_live_read(dir, 1, &l));
	CHECK_EQ(l.state, LE_LIVE_DEAD);
	CHECK_EQ(w0 + l.written, 2000);
	/* The next engine's page says running again. */
	le_engine *e = open_engine(dir, 2);
	sleep_ms(LE_LIVE_PERIOD_MS);
	CHECK_RC(le_live_read(dir, 0, &l));
	CHECK_EQ(l.state, LE_LIVE_RUNNING);
	CHECK_EQ(l.pid, getpid());
	le_close(e);
	t_rmrf(dir);
}

/* Where the file system has no fallocate and the kernel cannot fault
 * blocks in (before 5.14), the page's bytes are written instead, so a
 * full disk is an error at le_open, never a SIGBUS in the writer. */
static _Atomic int page_fills;

static int no_fallocate(int fd, int mode, off_t off, off_t len)
{
	(void)fd, (void)mode, (void)off, (void)len;
	errno = EOPNOTSUPP;
	return -1;
}

static int no_populate(void *p, size_t len, int advice)
{
	if (advice == 23) { /* MADV_POPULATE_WRITE */
		errno = EINVAL;
		return -1;
	}
	return madvise(p, len, advice);
}

static ssize_t count_fills(int fd, const void *buf, size_t len, off_t off)
{
	const unsigned char *b = buf;
	size_t i = 0;
	while (i < len && !b[i])
		i++;
	if (off == 0 && len == LE_SP_BYTES && i == len)
		atomic_fetch_add(&page_fills, 1);
	return le__os_real.pwrite(fd, buf, len, off);
}

TEST(page_is_made_where_neither_fallocate_nor_faulting_in_reserves_blocks)
{
	char dir[256];
	le__os t = le__os_real;
	t.fallocate = no_fallocate;
	t.madvise = no_populate;
	t.pwrite = count_fills;
	le__os_install(&t);
	le_engine *e = open_engine(t_tmpdir(dir), 2);
	le_stats st;
	CHECK_RC(le_stats_get(e, &st));
	CHECK_EQ(st.live_pages_off, 0);
	CHECK_EQ(atomic_load(&page_fills), 2); /* each shard's page, whole */
	write_n(e, 0, 10);
	CHECK_RC(le_close(e));
	le__os_install(NULL);
	le_live l;
	CHECK_RC(le_live_read(dir, 1, &l));
	CHECK_EQ(l.state, LE_LIVE_CLOSED);
	t_rmrf(dir);
}

TEST(stopped_engine_page_goes_stale)
{
	char dir[256];
	le_live l;
	int fd;

	t_tmpdir(dir);
	pid_t pid = child_engine(dir, &fd);
	kill(pid, SIGSTOP);
	sleep_ms(2500); /* past 2 s and three periods without a publication */
	CHECK_RC(le_live_read(dir, 0, &l));
	int st = l.state;
	kill(pid, SIGKILL);
	kill(pid, SIGCONT);
	waitpid(pid, NULL, 0);
	close(fd);
	CHECK_EQ(st, LE_LIVE_STALE);
	t_rmrf(dir);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	RUN(page_header_matches_format_md_vector);
	RUN(submit_code_round_trips_within_a_1024th);
	RUN(quantiles_interpolate_within_their_bucket);
	RUN(reader_hammering_a_publishing_page_sees_only_whole_copies);
	RUN(writer_killed_mid_publication_leaves_the_page_readable);
	RUN(page_of_another_version_is_refused);
	RUN(closed_engine_page_holds_le_stats_at_close);
	RUN(records_by_level_reach_le_stats_and_the_pages);
	RUN(running_engine_page_is_fresh_and_advances);
	RUN(sampled_calls_fill_the_submit_and_queue_wait_histograms);
	RUN(live_handle_reads_the_pages_and_follows_a_directory_made_anew);
	RUN(killed_engine_page_reads_dead_with_its_last_counts);
	RUN(stopped_engine_page_goes_stale);
	RUN(page_is_made_where_neither_fallocate_nor_faulting_in_reserves_blocks);
	return t_done();
}
