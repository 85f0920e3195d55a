/*
 * test_faults.c -- faults injected through the table of OS calls (os.h):
 * a full disk, EIO on write and on fsync, short writes, EINTR, ulimit -f.
 * Each test installs a table with some calls swapped (le__os_install)
 * before le_open and puts the real ones back after le_close.
 */
#include "harness.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "logengine.h"
#include "engine/shard.h" /* the reaper's list, to check its bound */
#include "base/clock.h"
#include "base/os.h"
#include "logtest.h"
#include "segfd.h"

static char dir[256];
static atomic_int disk_full, fail_sync_once, short_writes, eio_writes;
static atomic_int sync_failed_fd = -1, syncs_after_failure;
static atomic_long pwrite_calls;

static ssize_t fake_pwrite(int fd, const void *buf, size_t len, off_t off)
{
	long n = atomic_fetch_add(&pwrite_calls, 1);
	if (atomic_load(&disk_full)) {
		errno = ENOSPC;
		return -1;
	}
	if (t_is_seg_fd(fd) && atomic_load(&eio_writes) > 0) {
		atomic_fetch_sub(&eio_writes, 1);
		errno = EIO;
		return -1;
	}
	if (atomic_load(&short_writes)) {
		if (n % 3 == 0) {
			errno = EINTR;
			return -1;
		}
		if (len > 7)
			len = 7;
	}
	return le__os_real.pwrite(fd, buf, len, off);
}

static atomic_int slow_failing_sync; /* ms the failing sync takes */

static int fake_fdatasync(int fd)
{
	if (fd == atomic_load(&sync_failed_fd))
		atomic_fetch_add(&syncs_after_failure, 1);
	if (atomic_exchange(&fail_sync_once, 0)) {
		usleep((useconds_t)atomic_load(&slow_failing_sync) * 1000);
		atomic_store(&sync_failed_fd, fd);
		errno = EIO;
		return -1;
	}
	return le__os_real.fdatasync(fd);
}

static int fake_close(int fd)
{
	int expect = fd; /* its number may be reused by the next file */
	atomic_compare_exchange_strong(&sync_failed_fd, &expect, -1);
	return le__os_real.close(fd);
}

/* Install the real table with one or more calls swapped. */
static void install_os(ssize_t (*pw)(int, const void *, size_t, off_t),
                       int (*fds)(int), int (*cl)(int),
                       int (*ul)(const char *))
{
	le__os t = *le__os_current();
	t.openat = t_segfd_openat; /* eio_writes: segments only */
	if (pw)
		t.pwrite = pw;
	if (fds)
		t.fdatasync = fds;
	if (cl)
		t.close = cl;
	if (ul)
		t.unlink = ul;
	le__os_install(&t);
}

static void install(void)
{
	install_os(fake_pwrite, fake_fdatasync, fake_close, NULL);
}

static void restore(void)
{
	le__os_install(NULL);
}

static le_config cfg(void)
{
	le_config c;
	le_config_init(&c);
	c.dir = t_tmpdir(dir);
	c.durability = LE_SYNC_NONE;
	return c;
}

/* Write text n times to shard 0 at LE_INFO, each accepted. */
static void write_same(le_engine *e, const char *text, int n)
{
	for (int i = 0; i < n; i++)
		CHECK_EQ(le_write(e, 0, LE_INFO, text, strlen(text)), 0);
}

/* Sum the counts that "N records dropped" markers report. */
static void sum_markers(const le_record *r, void *arg)
{
	char b[64];
	unsigned long long k;
	if (!(r->flags & LE_REC_MARKER))
		return;
	snprintf(b, sizeof b, "%.*s", (int)r->len, (const char *)r->payload);
	CHECK(sscanf(b, "%llu records dropped", &k) == 1);
	*(uint64_t *)arg += k;
}

static int verify_ok(void)
{
	char cmd[1024];
	const char *cli = t_build_tool("LE_CLI", "logengine");
	snprintf(cmd, sizeof cmd, "%s verify '%s' >/dev/null", cli, dir);
	return system(cmd) == 0;
}

TEST(disk_full_never_blocks_producers_and_drops_are_counted)
{
	le_config c = cfg();
	c.queue_capacity = 256;
	install();
	le_engine *e;
	CHECK_RC(le_open(&e, &c));
	atomic_store(&disk_full, 1);
	long ok = 0, full = 0;
	char buf[100];
	memset(buf, 'x', sizeof buf);
	/* With the disk full, the queue fills and every further call
	 * returns LE_EFULL at once (the harness's alarm catches a hang). */
	for (int i = 0; i < 200000; i++) {
		int rc = le_write(e, 0, LE_INFO, buf, sizeof buf);
		CHECK(rc == 0 || rc == LE_EFULL);
		rc == 0 ? ok++ : full++;
	}
	CHECK(full > 190000);
	le_stats st;
	/* The producers may finish before the writer's first attempt (it
	 * wakes within flush_ms): wait for it, the alarm bounds the wait. */
	do {
		usleep(1000);
		le_stats_get(e, &st);
	} while (st.write_errors == 0);
	CHECK(st.write_errors > 0);
	CHECK_EQ(st.last_error, -ENOSPC);
	atomic_store(&disk_full, 0); /* space returns */
	do { /* the writer retries (backing off), the queue empties */
		usleep(10000);
		le_stats_get(e, &st);
	} while (st.queue_records > 0);
	for (int i = 0; i < 100; i++)
		CHECK_EQ(le_write(e, 0, LE_INFO, buf, sizeof buf), 0);
	ok += 100;
	le_flush(e, 10000); /* reports the ENOSPC seen since open */
	CHECK_RC(le_flush(e, 10000));
	le_stats_get(e, &st);
	CHECK_EQ(st.accepted, (uint64_t)(ok + full));
	CHECK_EQ(st.accepted, st.written + st.dropped);
	CHECK_EQ(st.written, (uint64_t)ok);
	le_close(e);
	restore();
	uint64_t dropped = 0;
	CHECK_EQ(count_records(dir), ok);
	CHECK(read_all(dir, LE_RECOVER_ABSOLUTE, sum_markers, &dropped) > 0);
	CHECK_EQ(dropped, (uint64_t)full);
	CHECK(verify_ok());
	t_rmrf(dir);
}

TEST(failed_fsync_is_reported_never_retried_and_a_new_segment_begins)
{
	le_config c = cfg();
	c.durability = LE_SYNC_BATCH;
	install();
	le_engine *e;
	CHECK_RC(le_open(&e, &c));
	write_same(e, "before", 100);
	CHECK_RC(le_flush(e, 5000));
	atomic_store(&fail_sync_once, 1);
	write_same(e, "during", 100);
	int rc = le_flush(e, 5000);
	CHECK_EQ(rc, -EIO); /* the caller learns the sync failed */
	write_same(e, "after", 100);
	CHECK_EQ(le_flush(e, 5000), 0);
	le_stats st;
	le_stats_get(e, &st);
	CHECK_EQ(st.sync_errors, 1);
	CHECK(st.sync_lost >= 1 && st.sync_lost <= 100);
	CHECK(st.segments_created >= 2);
	CHECK_EQ(le_close(e), 0);
	/* The file whose sync failed was never synced again. */
	CHECK_EQ(atomic_load(&syncs_after_failure), 0);
	restore();
	CHECK_EQ(count_records(dir), 300);
	CHECK(verify_ok());
	t_rmrf(dir);
}

/* Flushers waiting for the records a failed sync touched all hear of it
 * (not just the first to look), and flushes of other records do not. */
TEST(a_failed_sync_is_reported_to_every_flush_of_its_records_only)
{
	le_config c = cfg();
	c.durability = LE_SYNC_INTERVAL;
	c.sync_ms = 600000; /* syncs come from the flushes alone */
	c.checkpoint_ms = 0;
	install();
	le_engine *e;
	CHECK_RC(le_open(&e, &c));
	write_same(e, "before", 100);
	CHECK_RC(le_flush(e, 5000));
	/* The failing sync takes 300 ms: every flusher is waiting by then. */
	atomic_store(&slow_failing_sync, 300);
	atomic_store(&fail_sync_once, 1);
	write_same(e, "during", 100);
	t_flusher f[4];
	for (int i = 0; i < 4; i++)
		t_flush_start(&f[i], e, 10000);
	for (int i = 0; i < 4; i++)
		CHECK_EQ(t_flush_join(&f[i]), -EIO);
	atomic_store(&slow_failing_sync, 0);
	/* Nothing new since: this flush's records are none of those. */
	CHECK_EQ(le_flush(e, 5000), 0);
	write_same(e, "after", 100);
	CHECK_EQ(le_flush(e, 5000), 0);
	CHECK_EQ(le_close(e), 0); /* reported: not again */
	restore();
	CHECK_EQ(count_records(dir), 300);
	t_rmrf(dir);
}

/* A sync failure no flush waited for: le_close is the last chance to
 * say so. */
TEST(a_failed_sync_no_flush_reported_is_returned_by_le_close)
{
	le_config c = cfg();
	c.durability = LE_SYNC_INTERVAL;
	c.sync_ms = 5;
	install();
	le_engine *e;
	CHECK_RC(le_open(&e, &c));
	atomic_store(&fail_sync_once, 1);
	write_same(e, "x", 100);
	le_stats st;
	do { /* the interval sync fails; the alarm bounds the wait */
		usleep(5000);
		le_stats_get(e, &st);
	} while (st.sync_errors == 0);
	CHECK_EQ(le_close(e), -EIO);
	restore();
	CHECK_EQ(count_records(dir), 100);
	t_rmrf(dir);
}

TEST(short_writes_and_eintr_lose_nothing)
{
	le_config c = cfg();
	install();
	atomic_store(&short_writes, 1);
	le_engine *e;
	CHECK_RC(le_open(&e, &c));
	c.overflow = LE_OVERFLOW_BLOCK;
	for (int i = 0; i < 3000; i++)
		CHECK_EQ(le_logf(e, LE_INFO, "short write %d", i), 0);
	CHECK_EQ(le_close(e), 0);
	atomic_store(&short_writes, 0);
	restore();
	CHECK_EQ(count_records(dir), 3000);
	CHECK(verify_ok());
	t_rmrf(dir);
}

TEST(eio_on_write_moves_the_batch_to_a_new_segment)
{
	le_config c = cfg();
	install();
	le_engine *e;
	CHECK_RC(le_open(&e, &c));
	write_same(e, "first", 500);
	CHECK_RC(le_flush(e, 5000));
	atomic_store(&eio_writes, 2);
	write_same(e, "second", 500);
	le_flush(e, 10000);
	le_stats st;
	le_stats_get(e, &st);
	CHECK(st.write_errors >= 2);
	CHECK(st.segments_created >= 2);
	CHECK_EQ(st.written, 1000);
	CHECK_EQ(le_close(e), 0);
	restore();
	CHECK_EQ(count_records(dir), 1000);
	CHECK(verify_ok());
	t_rmrf(dir);
}

TEST(file_size_limit_gives_efbig_not_death_by_sigxfsz)
{
	le_config c = cfg();
	c.segment_bytes = 4 << 20;
	c.overflow = LE_OVERFLOW_BLOCK;
	c.mapped_queue = 0; /* its file alone is bigger than the limit */
	pid_t pid = fork();
	if (pid == 0) {
		struct rlimit rl = {200 << 10, 200 << 10}; /* ulimit -f 200 */
		setrlimit(RLIMIT_FSIZE, &rl);
		le_engine *e;
		if (le_open(&e, &c) != 0)
			_exit(2);
		char buf[200];
		memset(buf, 'y', sizeof buf);
		for (int i = 0; i < 5000; i++) /* ~1.1 MB: several limits */
			if (le_write(e, 0, LE_INFO, buf, sizeof buf) != 0)
				_exit(3);
		le_flush(e, 20000);
		le_stats st;
		le_stats_get(e, &st);
		le_close(e);
		if (st.written != 5000 || st.segments_created < 5)
			fprintf(stderr, "  written %llu segments %llu errors %llu "
			        "last %d\n", (unsigned long long)st.written,
			        (unsigned long long)st.segments_created,
			        (unsigned long long)st.write_errors, st.last_error);
		_exit(st.written == 5000 && st.segments_created >= 5 ? 0 : 4);
	}
	int st;
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st));
	CHECK_EQ(WEXITSTATUS(st), 0);
	CHECK_EQ(count_records(dir), 5000);
	t_rmrf(dir);
}

TEST(queue_file_past_ulimit_f_fails_le_open_cleanly)
{
	le_config c = cfg();
	pid_t pid = fork();
	if (pid == 0) {
		struct rlimit rl = {200 << 10, 200 << 10};
		setrlimit(RLIMIT_FSIZE, &rl);
		le_engine *e;
		int rc = le_open(&e, &c); /* the ~1.8 MB queue file cannot be */
		_exit(rc == -EFBIG && strstr(le_errmsg(), "queue") ? 0 : 1);
	}
	int st;
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st)); /* not killed by SIGXFSZ */
	CHECK_EQ(WEXITSTATUS(st), 0);
	t_rmrf(dir);
}

/* An unlink that takes as long as the test likes: ext4 freeing a big
 * segment's blocks, made endless until released. */
static pthread_mutex_t unlink_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t unlink_cv = PTHREAD_COND_INITIALIZER;
static int unlink_held, unlink_entered;
/* failing_unlink fails the next unlink_fail_left unlinks of segment
 * files (-1: all) with EACCES; unlink_failed counts the failures. */
static atomic_int unlink_fail_left, unlink_failed;

/* Note an unlink; wait while the test holds unlinks (every one, or only
 * the first).  @return 1 for the first. */
static int enter_unlink(int hold_every)
{
	pthread_mutex_lock(&unlink_mu);
	int first = unlink_entered++ == 0;
	pthread_cond_broadcast(&unlink_cv);
	while ((first || hold_every) && unlink_held)
		pthread_cond_wait(&unlink_cv, &unlink_mu);
	pthread_mutex_unlock(&unlink_mu);
	return first;
}

static int slow_unlink(const char *path)
{
	enter_unlink(1);
	return le__os_real.unlink(path);
}

static void write_recs(le_engine *e, int from, int n)
{
	char p[64];
	for (int i = from; i < from + n; i++) {
		int len = snprintf(p, sizeof p, "record %08d ........................", i);
		CHECK_EQ(le_write(e, 0, LE_INFO, p, (size_t)len), 0);
	}
}

/* An engine that rotates every 16 KiB and keeps `keep` bytes, opened
 * with unlink replaced by hook (unlinks held, none seen or failed yet). */
static le_engine *open_retention(uint64_t keep, int (*hook)(const char *))
{
	le_config c = cfg();
	le_engine *e;
	c.segment_bytes = 16384;
	c.retention_bytes = keep;
	c.overflow = LE_OVERFLOW_BLOCK;
	unlink_held = 1;
	unlink_entered = 0;
	atomic_store(&unlink_failed, 0);
	install_os(NULL, NULL, NULL, hook);
	CHECK_RC(le_open(&e, &c));
	return e;
}

TEST(slow_retention_unlink_never_stops_the_writer)
{
	le_engine *e = open_retention(32768, slow_unlink);
	/* Enough to rotate past the retention bound: an unlink starts, and
	 * hangs. */
	write_recs(e, 1, 2000);
	CHECK_RC(le_flush(e, 10000));
	pthread_mutex_lock(&unlink_mu);
	while (!unlink_entered)
		pthread_cond_wait(&unlink_cv, &unlink_mu);
	pthread_mutex_unlock(&unlink_mu);
	/* While it hangs the writer rotates on (fewer segments than the
	 * reaper's list holds, so none is unlinked by the writer itself). */
	write_recs(e, 2001, 1500);
	CHECK_EQ(le_flush(e, 10000), 0);
	le_stats st;
	le_stats_get(e, &st);
	CHECK_EQ(st.written, 3500);
	pthread_mutex_lock(&unlink_mu);
	CHECK_EQ(unlink_entered, 1); /* still the first one, still hanging */
	unlink_held = 0;
	pthread_cond_broadcast(&unlink_cv);
	pthread_mutex_unlock(&unlink_mu);
	CHECK_EQ(le_close(e), 0); /* waits for the queued unlinks */
	le__os_install(NULL);
	CHECK(unlink_entered > 1);
	/* Retention held once the reaper caught up; the newest records are
	 * all there, in order, ending at the last one. */
	long n = count_records(dir);
	CHECK(n > 0 && n < 3500);
	CHECK(n * 60 <= 32768 + 2 * 16384);
	t_rmrf(dir);
}

static int failing_unlink(const char *path)
{
	size_t n = strlen(path);
	int left = atomic_load(&unlink_fail_left);
	if (n > 4 && !strcmp(path + n - 4, ".seg") && left != 0) {
		if (left > 0)
			atomic_fetch_sub(&unlink_fail_left, 1);
		atomic_fetch_add(&unlink_failed, 1);
		errno = EACCES;
		return -1;
	}
	return le__os_real.unlink(path);
}

/* Shard 0's segment files: how many, lowest and highest index, bytes. */
struct segs_on_disk {
	int n;
	uint64_t lo, hi, bytes;
};

static struct segs_on_disk segs_on_disk(void)
{
	struct segs_on_disk d = {0, UINT64_MAX, 0, 0};
	char sd[512], p[800];
	snprintf(sd, sizeof sd, "%s/shard-000", dir);
	DIR *dd = opendir(sd);
	CHECK(dd != NULL);
	struct dirent *de;
	while (dd && (de = readdir(dd))) {
		uint64_t i;
		char tail[8];
		struct stat st;
		if (sscanf(de->d_name, "%16" SCNx64 "%7s", &i, tail) != 2 ||
		    strcmp(tail, ".seg"))
			continue;
		snprintf(p, sizeof p, "%s/%s", sd, de->d_name);
		if (stat(p, &st) < 0) {
			CHECK_EQ(errno, ENOENT); /* the reaper got to it */
			continue;
		}
		d.n++;
		d.bytes += (uint64_t)st.st_size;
		d.lo = i < d.lo ? i : d.lo;
		d.hi = i > d.hi ? i : d.hi;
	}
	if (dd)
		closedir(dd);
	return d;
}

/* le_flush after a failed unlink: no record was lost, so the flush
 * succeeds; le_stats.last_error says what failed. */
static void flush_ok(le_engine *e)
{
	CHECK_EQ(le_flush(e, 10000), 0);
}

/* Waits up to 10 s for the reaper to have failed `n` unlinks. */
static void wait_unlink_failed(int n)
{
	for (int i = 0; i < 1000 && atomic_load(&unlink_failed) < n; i++)
		usleep(10000);
	CHECK(atomic_load(&unlink_failed) >= n);
}

/* The failing unlink counts itself before its caller stores the error:
 * wait up to 5 s for last_error to say it.  @return the last seen. */
static int wait_last_error(le_engine *e, int want)
{
	le_stats st;
	for (int i = 0; i < 500; i++) {
		le_stats_get(e, &st);
		if (st.last_error == want)
			break;
		usleep(10000);
	}
	return st.last_error;
}

/* Waits up to 5 s for every segment that ever existed to be either on
 * disk or counted deleted; 1 if so. */
static int deleted_plus_on_disk_is_all(le_engine *e)
{
	for (int i = 0; i < 500; i++) {
		le_stats st;
		le_stats_get(e, &st);
		struct segs_on_disk d = segs_on_disk();
		if (st.segments_deleted + (uint64_t)d.n == d.hi)
			return 1; /* segment indices start at 1 */
		usleep(10000);
	}
	return 0;
}

TEST(failed_retention_unlink_keeps_the_segment_counted_and_tries_again)
{
	atomic_store(&unlink_fail_left, 2);
	le_engine *e = open_retention(32768, failing_unlink);
	write_recs(e, 1, 2000);
	flush_ok(e);
	wait_unlink_failed(2); /* the two oldest segments stayed */
	/* Rotations after the failures: retention must still see those two
	 * (they take space) and try them again. */
	write_recs(e, 2001, 2000);
	flush_ok(e);
	CHECK(deleted_plus_on_disk_is_all(e));
	CHECK_EQ(wait_last_error(e, -EACCES), -EACCES);
	CHECK_EQ(le_close(e), 0);
	le__os_install(NULL);
	/* No segment left behind: what is on disk is the newest, one run of
	 * indices, within retention (plus the active segment and one more
	 * that a rotation may have sealed past the bound). */
	struct segs_on_disk d = segs_on_disk();
	fprintf(stderr, "  (%d segments on disk, %" PRIu64 "..%" PRIu64
	        ", %" PRIu64 " bytes)\n", d.n, d.lo, d.hi, d.bytes);
	CHECK(d.lo > 2);
	CHECK_EQ(d.hi - d.lo + 1, (uint64_t)d.n);
	CHECK(d.bytes <= 32768 + 2 * 16384);
	t_rmrf(dir);
}

TEST(unlink_that_always_fails_deletes_nothing_and_loses_nothing)
{
	atomic_store(&unlink_fail_left, -1);
	le_engine *e = open_retention(32768, failing_unlink);
	write_recs(e, 1, 3000);
	flush_ok(e);
	wait_unlink_failed(1);
	CHECK(deleted_plus_on_disk_is_all(e));
	le_stats st;
	le_stats_get(e, &st);
	CHECK_EQ(st.segments_deleted, 0); /* none is gone */
	CHECK_EQ(wait_last_error(e, -EACCES), -EACCES);
	CHECK_EQ(le_close(e), 0); /* nothing lost: unlinks are not records */
	le__os_install(NULL);
	CHECK_EQ(segs_on_disk().lo, 1);
	CHECK_EQ(count_records(dir), 3000); /* retention could not; no loss */
	CHECK(verify_ok());
	t_rmrf(dir);
}

/* Every unlink of a segment fails with EACCES; the reaper's first only
 * once the test lets it go on (a slow unlink that ends in an error: EIO
 * from a failing disk, a file system remounted read-only meanwhile).  The
 * reaper's, not the first of all: a writer unlinks itself when the
 * reaper's list is full, and on a busy machine it can fill the list and
 * make the first unlink before the woken reaper runs at all; holding that
 * one would stop the writer, the producer and the test. */
static int held_failing_unlink(const char *path)
{
	size_t n = strlen(path);
	char name[16] = "";
	if (n <= 4 || strcmp(path + n - 4, ".seg"))
		return le__os_real.unlink(path);
	pthread_getname_np(pthread_self(), name, sizeof name);
	if (!strcmp(name, "le-reaper"))
		enter_unlink(0);
	atomic_fetch_add(&unlink_failed, 1);
	errno = EACCES;
	return -1;
}

/* While one unlink is in progress the writers fill the reaper's list; if
 * that unlink then fails it needs a place among the failed ones too, so
 * the list's bound counts the unlink in progress.  One place short, the
 * list would be written past its end, over the engine's next fields (a
 * mutex among them), and le_flush would hang. */
TEST(failing_unlinks_never_overflow_the_reapers_list)
{
	le_engine *e = open_retention(16384, held_failing_unlink);
	/* ~125 segments: far more rotations than the list holds */
	write_recs(e, 1, 30000);
	CHECK_EQ(le_flush(e, 10000), 0);
	pthread_mutex_lock(&unlink_mu);
	unlink_held = 0;
	pthread_cond_broadcast(&unlink_cv);
	pthread_mutex_unlock(&unlink_mu);
	/* Let the reaper fail the rest of what it holds. */
	int before;
	do {
		before = atomic_load(&unlink_failed);
		usleep(100000);
	} while (atomic_load(&unlink_failed) != before);
	le__worker *r = &e->reaper.w;
	pthread_mutex_lock(&r->mu);
	unsigned n = r->n, nback = atomic_load(&r->ndone);
	pthread_mutex_unlock(&r->mu);
	fprintf(stderr, "  (%d unlinks failed; queued %u, failed and waiting "
	        "%u of %u)\n", atomic_load(&unlink_failed), n, nback,
	        LE_REAP_MAX);
	CHECK(n + nback <= LE_REAP_MAX);
	CHECK_EQ(le_flush(e, 10000), 0);
	CHECK_EQ(le_close(e), 0);
	le__os_install(NULL);
	CHECK_EQ(count_records(dir), 30000); /* nothing could be deleted */
	t_rmrf(dir);
}

/* A producer stopped between claiming its slot and publishing it (a
 * thread preempted, or stopped in a debugger): a le_flush waits for that
 * slot.  The writer must not spin meanwhile (a whole CPU for as long as
 * it takes, and after the flush gives up, for ever): it yields for a
 * millisecond, then naps a millisecond at a time.  When the producer goes
 * on, the record is written and the next flush returns. */
TEST(producer_stopped_between_claim_and_publish_costs_the_writer_no_cpu)
{
	le_config c = cfg();
	le_engine *e;
	CHECK_RC(le_open(&e, &c));
	write_recs(e, 1, 10);
	CHECK_RC(le_flush(e, 5000));
	/* What le_write does, up to the publish. */
	le__shard *sh = &e->shards[0];
	uint64_t used;
	CHECK(le__budget_take(&e->budget, 5, e->cap_rec, e->cap_bytes) != 0);
	le__slot *slot = le__ring_reserve(&sh->ring, le__slot_bytes(5), &used);
	CHECK(slot != NULL);
	le_stats a, b;
	le_stats_get(e, &a);
	CHECK_EQ(le_flush(e, 500), LE_ETIMEDOUT);
	le_stats_get(e, &b);
	double ms = (double)(b.writer_cpu_ns - a.writer_cpu_ns) / 1e6;
	fprintf(stderr, "  (writer CPU while the flush waited 500 ms: %.1f ms)\n",
	        ms);
	CHECK(ms < 100);
	/* Other producers log on meanwhile: the queue fills behind the
	 * stuck slot and they drop.  Waking the writer for each drop (a
	 * futex call per le_write) would cost them, and it, a CPU. */
	long ok = 0, calls = 0;
	uint64_t t0 = le__mono_ns();
	le_stats_get(e, &a);
	while (le__mono_ns() - t0 < 300000000u) {
		int rc = le_write(e, 0, LE_INFO, "meanwhile", 9);
		CHECK(rc == 0 || rc == LE_EFULL);
		ok += rc == 0;
		calls++;
	}
	le_stats_get(e, &b);
	ms = (double)(b.writer_cpu_ns - a.writer_cpu_ns) / 1e6;
	fprintf(stderr, "  (writer CPU while %ld calls went on for 300 ms: "
	        "%.1f ms)\n", calls, ms);
	CHECK(ms < 60);
	CHECK(ok > 0 && ok < calls);
	/* The producer goes on. */
	slot->len = 5;
	slot->seq = 0;
	slot->ts = le__stamp(e->use_tsc);
	slot->level = LE_INFO;
	slot->flags = 0;
	memcpy(slot + 1, "later", 5);
	le__slot_publish(slot);
	CHECK_RC(le_flush(e, 5000));
	le_stats_get(e, &b);
	CHECK_EQ(b.written, 11 + ok);
	CHECK_EQ(le_close(e), 0);
	CHECK_EQ(count_records(dir), 11 + ok);
	t_rmrf(dir);
}

/* A write that stalls for a while (a disk that stops answering) on its
 * first call, then works. */
static atomic_int stall_ms;

static ssize_t stalled_pwrite(int fd, const void *buf, size_t len, off_t off)
{
	int ms = atomic_exchange(&stall_ms, 0);
	if (ms)
		usleep((useconds_t)ms * 1000);
	return le__os_real.pwrite(fd, buf, len, off);
}

static double thread_cpu_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/*
 * A producer blocked on a full queue (overflow block) yields for up to a
 * millisecond, in case the writer is about to free a batch, and then
 * sleeps until it does: through a write that stalls for 400 ms it must
 * not burn the CPU for 400 ms, and it must lose nothing.  (A rule that
 * spun until space came back would use ~400 ms of CPU here.)
 */
TEST(blocked_producer_sleeps_through_a_stalled_write_instead_of_spinning)
{
	le_config c = cfg();
	c.queue_capacity = 64;
	c.overflow = LE_OVERFLOW_BLOCK;
	atomic_store(&stall_ms, 400);
	install_os(stalled_pwrite, NULL, NULL, NULL);
	le_engine *e;
	CHECK_RC(le_open(&e, &c));
	double cpu0 = thread_cpu_s();
	uint64_t t0 = le__mono_ns();
	write_recs(e, 1, 1000); /* blocks while the first write stalls */
	double cpu = thread_cpu_s() - cpu0;
	double wall = (double)(le__mono_ns() - t0) * 1e-9;
	CHECK_EQ(le_flush(e, 10000), 0);
	le_stats st;
	le_stats_get(e, &st);
	CHECK_EQ(st.written, 1000);
	CHECK_EQ(st.dropped, 0);
	CHECK(st.blocked >= 1);
	CHECK_EQ(le_close(e), 0);
	restore();
	fprintf(stderr, "  (blocked for %.0f ms of wall time, %.1f ms of CPU)\n",
	        wall * 1e3, cpu * 1e3);
	CHECK(wall >= 0.3);      /* it did wait for the stalled write */
	CHECK(cpu < wall / 4);   /* ... mostly asleep */
	CHECK_EQ(count_records(dir), 1000);
	t_rmrf(dir);
}

/* A full disk holds back the segment store, not the stream beside it:
 * its lines go on while the store retries, and nothing is lost from
 * either once space returns. */
TEST(a_full_disk_holds_back_the_store_not_the_stream)
{
	int p[2];
	CHECK(pipe(p) == 0);
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	le_config c = cfg();
	c.stream_fd = p[1];
	c.flush_ms = 5;
	install();
	atomic_store(&disk_full, 1);
	le_engine *e;
	CHECK_RC(le_open(&e, &c));
	write_same(e, "line", 100);
	char buf[4096];
	size_t got = 0;
	for (int i = 0; i < 500 && got < 500; i++) { /* 100 x "line\n" */
		ssize_t n = read(p[0], buf, sizeof buf);
		if (n > 0)
			got += (size_t)n;
		else
			usleep(10000);
	}
	CHECK_EQ(got, 500);
	le_stats st;
	le_stats_get(e, &st);
	CHECK(st.write_errors > 0);
	CHECK_EQ(st.written, 0);
	CHECK_EQ(st.stream_lines, 100);
	atomic_store(&disk_full, 0);
	CHECK_EQ(le_flush(e, 10000), 0);
	le_stats_get(e, &st);
	CHECK_EQ(st.written, 100);
	CHECK_EQ(st.stream_lines, 100); /* none twice */
	CHECK_EQ(le_close(e), 0);
	restore();
	close(p[0]);
	close(p[1]);
	CHECK_EQ(count_records(dir), 100);
	t_rmrf(dir);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	RUN(disk_full_never_blocks_producers_and_drops_are_counted);
	RUN(a_full_disk_holds_back_the_store_not_the_stream);
	RUN(failed_fsync_is_reported_never_retried_and_a_new_segment_begins);
	RUN(a_failed_sync_is_reported_to_every_flush_of_its_records_only);
	RUN(a_failed_sync_no_flush_reported_is_returned_by_le_close);
	RUN(short_writes_and_eintr_lose_nothing);
	RUN(eio_on_write_moves_the_batch_to_a_new_segment);
	RUN(file_size_limit_gives_efbig_not_death_by_sigxfsz);
	RUN(queue_file_past_ulimit_f_fails_le_open_cleanly);
	RUN(slow_retention_unlink_never_stops_the_writer);
	RUN(failed_retention_unlink_keeps_the_segment_counted_and_tries_again);
	RUN(unlink_that_always_fails_deletes_nothing_and_loses_nothing);
	RUN(failing_unlinks_never_overflow_the_reapers_list);
	RUN(producer_stopped_between_claim_and_publish_costs_the_writer_no_cpu);
	RUN(blocked_producer_sleeps_through_a_stalled_write_instead_of_spinning);
	return t_done();
}
