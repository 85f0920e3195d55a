/*
 * test_writer_faults.c -- failures inside the writer's commit and its
 * segment rotations, injected through the table of OS calls (os.h): a
 * sync that fails while a segment is sealed, a write cut short by the
 * file size limit.  Each is about what a le_flush learns and what ends up
 * on stable storage.
 */
#include "harness.h"

#include <fcntl.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <unistd.h>

#include "logengine.h"
#include "engine/shard.h" /* the shard's flush_req, to know a flush is waiting */
#include "base/os.h"
#include "logtest.h"
#include "segfd.h"

static char dir[256];

static void restore(void)
{
	le__os_install(NULL);
}

static le_config cfg(void)
{
	le_config c;
	le_config_init(&c);
	c.dir = t_tmpdir(dir);
	return c;
}

static void write_n(le_engine *e, const char *what, int n)
{
	char p[64];
	for (int i = 0; i < n; i++) {
		int len = snprintf(p, sizeof p, "%s %04d", what, i);
		CHECK_EQ(le_write(e, 0, LE_INFO, p, (size_t)len), 0);
	}
}

static void wait_written(le_engine *e, uint64_t n)
{
	le_stats st;
	do { /* the harness's alarm bounds the wait */
		usleep(2000);
		le_stats_get(e, &st);
	} while (st.written < n);
}

/* ---- a sync that fails while the segment is sealed ---- */

static atomic_int fail_next_sync, failing_sync_ms;

static int failing_fdatasync(int fd)
{
	if (atomic_exchange(&fail_next_sync, 0)) {
		usleep((useconds_t)atomic_load(&failing_sync_ms) * 1000);
		errno = EIO;
		return -1;
	}
	return le__os_real.fdatasync(fd);
}

/* Open c with failing_fdatasync in the table of OS calls (restore puts the
 * real one back). */
static le_engine *open_failing_sync(const le_config *c)
{
	le__os os = le__os_real;
	le_engine *e;
	os.fdatasync = failing_fdatasync;
	le__os_install(&os);
	CHECK_RC(le_open(&e, c));
	return e;
}

/*
 * Records written and not yet synced (LE_SYNC_INTERVAL) are in doubt when
 * the sync that seals their segment fails (rotation by age here).  A
 * flush that waits for them must hear of it, even when the writer next
 * commits records that came after the flush: the failure belongs to every
 * record since the last good sync, not to the batch the writer was on.
 */
TEST(a_failed_seal_sync_is_reported_to_the_flush_of_the_records_it_held)
{
	le_config c = cfg();
	c.durability = LE_SYNC_INTERVAL;
	c.sync_ms = 600000;     /* no interval sync: only the seal's */
	c.checkpoint_ms = 0;
	c.flush_ms = 5;
	c.segment_max_age_ms = 400;
	le_engine *e = open_failing_sync(&c);
	write_n(e, "held", 10);
	wait_written(e, 10); /* written, not synced */
	/* The next sync (the age rotation's seal) fails, slowly: the writer
	 * is inside it while a flush starts and more records come. */
	atomic_store(&failing_sync_ms, 300);
	atomic_store(&fail_next_sync, 1);
	while (atomic_load(&fail_next_sync))
		usleep(1000);
	le__shard *sh = &e->shards[0];
	uint64_t head = atomic_load(sh->ring.head);
	t_flusher f;
	t_flush_start(&f, e, 10000);
	while (atomic_load(&sh->prog.flush_req) < head)
		usleep(100);
	write_n(e, "after", 10); /* not the flush's records */
	CHECK_EQ(t_flush_join(&f), -EIO);
	le_stats st;
	le_stats_get(e, &st);
	CHECK_EQ(st.sync_errors, 1);
	CHECK_EQ(le_close(e), 0); /* reported by the flush: not again */
	restore();
	CHECK_EQ(count_records(dir), 20);
	t_rmrf(dir);
}

/* ---- a write cut short by the file size limit ---- */

/* Per descriptor: a segment file, written since its last good
 * fdatasync.  Only segments: an index (.idx) is written unsynced on
 * purpose (its checks refuse what a power cut leaves of it). */
#define FDS 1024
static atomic_int dirty[FDS], unsynced_closes;

static ssize_t tracking_pwrite(int fd, const void *buf, size_t len, off_t off)
{
	ssize_t n = le__os_real.pwrite(fd, buf, len, off);
	if (n > 0 && t_is_seg_fd(fd))
		atomic_store(&dirty[fd], 1);
	return n;
}

static int tracking_fdatasync(int fd)
{
	int rc = le__os_real.fdatasync(fd);
	if (rc == 0 && fd < FDS)
		atomic_store(&dirty[fd], 0);
	return rc;
}

static int tracking_close(int fd)
{
	if (fd < FDS && atomic_exchange(&dirty[fd], 0))
		atomic_fetch_add(&unsynced_closes, 1);
	return le__os_real.close(fd);
}

/*
 * Under ulimit -f a write stops at the limit: the whole frames before it
 * stay in that segment, the rest move to a new one.  With LE_SYNC_BATCH
 * le_flush promises every record it waited for is on stable storage, so
 * the frames kept in the old segment (and its cut) must be synced before
 * it is closed: no segment file is closed with writes not synced.
 */
TEST(frames_kept_before_a_file_size_limit_are_synced_with_their_segment)
{
	le_config c = cfg();
	c.durability = LE_SYNC_BATCH;
	c.segment_bytes = 4 << 20;
	c.overflow = LE_OVERFLOW_BLOCK;
	c.mapped_queue = 0;
	c.checkpoint_ms = 0;
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		struct rlimit rl = {200 << 10, 200 << 10}; /* ulimit -f 200 */
		setrlimit(RLIMIT_FSIZE, &rl);
		le__os t = le__os_real;
		t.openat = t_segfd_openat;
		t.pwrite = tracking_pwrite;
		t.fdatasync = tracking_fdatasync;
		t.close = tracking_close;
		le__os_install(&t);
		le_engine *e;
		if (le_open(&e, &c) != 0)
			_exit(2);
		char buf[200];
		memset(buf, 'y', sizeof buf);
		for (int i = 0; i < 2000; i++) /* ~450 KB: two limits */
			if (le_write(e, 0, LE_INFO, buf, sizeof buf) != 0)
				_exit(3);
		if (le_flush(e, 20000) != 0)
			_exit(4);
		le_stats st;
		le_stats_get(e, &st);
		int closes = atomic_load(&unsynced_closes);
		le_close(e);
		if (closes || st.written != 2000 || st.segments_created < 3)
			fprintf(stderr, "  segments closed unsynced: %d, written "
			        "%llu, segments %llu\n", closes,
			        (unsigned long long)st.written,
			        (unsigned long long)st.segments_created);
		_exit(closes == 0 && st.written == 2000 &&
		      st.segments_created >= 3 ? 0 : 5);
	}
	int st;
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st));
	CHECK_EQ(WEXITSTATUS(st), 0);
	CHECK_EQ(count_records(dir), 2000);
	t_rmrf(dir);
}

/*
 * Under a file size limit smaller than one record's frame, that record can
 * never be written: it is dropped and counted, and le_flush says so.  The
 * records around it are written, and every one of them reads back: the
 * segment that takes the frames after it must not look damaged.
 */
TEST(a_record_too_big_for_any_file_leaves_the_others_readable)
{
	le_config c = cfg();
	c.durability = LE_SYNC_NONE;
	c.overflow = LE_OVERFLOW_BLOCK;
	c.mapped_queue = 0;
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		struct rlimit rl = {60 << 10, 60 << 10}; /* ulimit -f 60 */
		setrlimit(RLIMIT_FSIZE, &rl);
		le_engine *e;
		if (le_open(&e, &c) != 0)
			_exit(2);
		static char big[64000];
		memset(big, 'b', sizeof big);
		write_n(e, "before", 10);
		if (le_write(e, 0, LE_INFO, big, sizeof big) != 0)
			_exit(3);
		write_n(e, "after", 10);
		int rc = le_flush(e, 10000);
		le_stats st;
		le_close_stats(e, &st);
		if (rc != -EFBIG || st.written != 20 || st.dropped_io != 1 ||
		    st.accepted != st.written + st.dropped_io) {
			fprintf(stderr, "  flush %d, written %llu, dropped_io "
			        "%llu\n", rc, (unsigned long long)st.written,
			        (unsigned long long)st.dropped_io);
			_exit(4);
		}
		_exit(0);
	}
	int st;
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st));
	CHECK_EQ(WEXITSTATUS(st), 0);
	CHECK_EQ(count_records(dir), 20);
	char cmd[1024];
	snprintf(cmd, sizeof cmd, "%s verify '%s' >/dev/null",
	         t_build_tool("LE_CLI", "logengine"), dir);
	CHECK_EQ(system(cmd), 0);
	t_rmrf(dir);
}

/* ---- a failed sync starts one new segment, not two ---- */

/*
 * A sync that fails while a segment is sealed (rotation by size) means
 * that file is not trusted again; the rotation under way already starts a
 * new one.  That new segment is trusted: it must not be sealed in its turn
 * after its first batch as if its own sync had failed.
 */
TEST(a_failed_seal_sync_starts_one_new_segment_not_two)
{
	le_config c = cfg();
	c.durability = LE_SYNC_INTERVAL;
	c.sync_ms = 600000;
	c.checkpoint_ms = 0;
	c.flush_ms = 5;
	c.segment_bytes = 8192;
	le_engine *e = open_failing_sync(&c);
	/* ~100 records of ~40 bytes a segment (8 KiB) */
	write_n(e, "first segment ..........", 60);
	wait_written(e, 60);
	atomic_store(&failing_sync_ms, 0);
	atomic_store(&fail_next_sync, 1); /* the seal's sync */
	write_n(e, "fills it and more ......", 100);
	wait_written(e, 160);
	/* The seal's sync runs on the sync thread, after the writer has
	 * gone on: its failure is counted when that thread gets to it. */
	le_stats st;
	do { /* the harness's alarm bounds the wait */
		usleep(2000);
		le_stats_get(e, &st);
	} while (st.sync_errors == 0);
	usleep(50000); /* a second failure would be counted by now */
	le_stats_get(e, &st);
	CHECK_EQ(st.sync_errors, 1);
	CHECK_EQ(st.segments_created, 2);
	write_n(e, "second segment .........", 20); /* fits in the second */
	wait_written(e, 180);
	usleep(50000); /* the writer's ticks after the batch */
	le_stats_get(e, &st);
	CHECK_EQ(st.segments_created, 2);
	CHECK_EQ(le_close(e), -EIO); /* no flush heard of the failure */
	restore();
	CHECK_EQ(count_records(dir), 180);
	t_rmrf(dir);
}

/* ---- le_close on a slow disk ---- */

/* Each write takes 250 ms; once armed, the fail_at-th write from then
 * on finds the disk full, once. */
static atomic_int slow_armed, slow_calls, slow_fail_at;

static ssize_t slow_pwrite(int fd, const void *buf, size_t len, off_t off)
{
	usleep(250000);
	if (atomic_load(&slow_armed) &&
	    atomic_fetch_add(&slow_calls, 1) + 1 == atomic_load(&slow_fail_at)) {
		errno = ENOSPC;
		return -1;
	}
	return le__os_real.pwrite(fd, buf, len, off);
}

/*
 * le_close writes out everything queued.  It gives up on a disk that stops
 * taking writes (2 s without progress), not on one that is slow: a queue
 * that takes more than 2 s to write, with one full-disk error late in it,
 * must still be written whole.
 */
TEST(close_after_a_long_drain_still_retries_a_failed_write)
{
	le_config c = cfg();
	c.durability = LE_SYNC_NONE;
	c.checkpoint_ms = 0;
	c.batch_size = 16;
	le__os t = le__os_real;
	t.pwrite = slow_pwrite;
	le__os_install(&t);
	le_engine *e;
	CHECK_RC(le_open(&e, &c));
	write_n(e, "queued", 200); /* 13 batches: over 3 s of writes */
	atomic_store(&slow_fail_at, 10); /* 2.5 s into le_close */
	atomic_store(&slow_armed, 1);
	le_stats st;
	int rc = le_close_stats(e, &st);
	restore();
	if (rc != 0 || st.written != 200)
		fprintf(stderr, "  le_close %d, written %llu, dropped_io %llu\n",
		        rc, (unsigned long long)st.written,
		        (unsigned long long)st.dropped_io);
	CHECK_EQ(rc, 0);
	CHECK_EQ(st.written, 200);
	CHECK_EQ(st.dropped_io, 0);
	CHECK_EQ(count_records(dir), 200);
	t_rmrf(dir);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	RUN(a_failed_seal_sync_is_reported_to_the_flush_of_the_records_it_held);
	RUN(frames_kept_before_a_file_size_limit_are_synced_with_their_segment);
	RUN(a_record_too_big_for_any_file_leaves_the_others_readable);
	RUN(a_failed_seal_sync_starts_one_new_segment_not_two);
	RUN(close_after_a_long_drain_still_retries_a_failed_write);
	return t_done();
}
