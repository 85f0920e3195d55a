/*
 * test_footprint.c -- an engine that is given little to do costs little:
 * wake-ups, memory, disk and descriptors follow use.  Each test is named
 * after what would break; none times a call: they count context
 * switches, resident pages, disk blocks and descriptors.
 */
#include "harness.h"

#include <dirent.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "logengine.h"
#include "engine/shard.h" /* the writer's idle word */
#include "base/os.h"
#include "logtest.h"

#include <errno.h>
#include <ftw.h>
#include <sys/mman.h>

static char dir[256];

/* Skip the running test, saying why. */
static void skip(const char *why)
{
	printf("skipped: %s\n", why);
	fflush(stdout);
	_exit(T_SKIP_STATUS);
}

/* 1 when task `tid` of this process is this thread or one of an
 * engine's (named le-...): not a sanitizer runtime's own. */
static int ours(const char *tid)
{
	char path[300], comm[32] = "";
	if (atoi(tid) == gettid())
		return 1;
	snprintf(path, sizeof path, "/proc/self/task/%s/comm", tid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	if (!fgets(comm, sizeof comm, f))
		comm[0] = '\0';
	fclose(f);
	return strncmp(comm, "le-", 3) == 0;
}

/* Voluntary context switches so far of this thread and every thread of
 * the engine. */
static long long voluntary_switches(void)
{
	long long sum = 0;
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;

	CHECK(d != NULL);
	while ((de = readdir(d))) {
		char path[300], line[256];
		if (de->d_name[0] == '.' || !ours(de->d_name))
			continue;
		snprintf(path, sizeof path, "/proc/self/task/%s/status",
		         de->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue; /* a thread that just ended */
		while (fgets(line, sizeof line, f))
			if (!strncmp(line, "voluntary_ctxt_switches:", 24))
				sum += atoll(line + 24);
		fclose(f);
	}
	closedir(d);
	return sum;
}

/* The defaults, in a fresh directory. */
static void fresh_config(le_config *c)
{
	le_config_init(c);
	c->dir = t_tmpdir(dir);
}

/* Wait (up to 10 s, else fail) until shard 0's writer has gone idle. */
static void writer_idle(le_engine *e)
{
	uint64_t t0 = le__mono_ns();
	while (!atomic_load(&e->shards[0].idle)) {
		CHECK(le__mono_ns() - t0 < 10000000000u);
		usleep(10000);
	}
}

static int written_two(const le_stats *st)
{
	return st->written >= 2;
}

/* An engine in a fresh directory (c as le_config_init leaves it, but for
 * flush_ms when not 0) that wrote one record and whose writer then went
 * idle. */
static le_engine *idle_engine(le_config *c, uint32_t flush_ms)
{
	fresh_config(c);
	if (flush_ms)
		c->flush_ms = flush_ms;
	le_engine *e = t_open(c);
	CHECK_EQ(le_write(e, 0, LE_INFO, "one", 3), 0);
	CHECK_EQ(le_flush(e, 5000), 0);
	writer_idle(e);
	return e;
}

/*
 * An engine with nothing to log must let the machine sleep: a writer
 * that looked at its queue every flush_ms woke 20 times a second.  Once
 * idle, the engine's threads (the writer, the sync thread) and this one
 * together may wake at most once a second.
 */
TEST(idle_engine_wakes_at_most_once_a_second)
{
	le_config c;
	le_engine *e = idle_engine(&c, 0);
	const int secs = 3;
	long long a = voluntary_switches();
	sleep(secs); /* the window measured, not a synchronisation */
	long long n = voluntary_switches() - a;
	fprintf(stderr, "  (%lld voluntary context switches in %d s)\n", n,
	        secs);
	CHECK(n <= secs); /* the sleep itself is one */
	CHECK_EQ(le_close(e), 0);
	t_rmrf(dir);
}

/*
 * An idle writer sleeps for seconds; a record that came then must still
 * be written within flush_ms: its producer wakes the writer.  A lost
 * wake-up shows as the whole idle sleep.
 */
TEST(a_record_wakes_an_idle_writer_within_flush_ms)
{
	le_config c;
	le_engine *e = idle_engine(&c, 100);
	CHECK_EQ(le_write(e, 0, LE_INFO, "two", 3), 0);
	double ms = t_stats_until(e, written_two, 20000);
	fprintf(stderr, "  (written %.0f ms after le_write; flush_ms 100)\n",
	        ms);
	CHECK(ms < 2000); /* the idle sleep is 10 s */
	CHECK_EQ(le_close(e), 0);
	t_rmrf(dir);
}

/* ---- disk ---- */

static long long blocks_sum;

static int add_blocks(const char *p, const struct stat *st, int flag,
                      struct FTW *w)
{
	(void)p, (void)flag, (void)w;
	blocks_sum += st->st_blocks;
	return 0;
}

/* Bytes on disk of everything under path (st_blocks, as du counts). */
static long long disk_bytes(const char *path)
{
	blocks_sum = 0;
	CHECK_EQ(nftw(path, add_blocks, 16, FTW_PHYS), 0);
	return blocks_sum * 512;
}

static long long file_disk_bytes(const char *d, const char *name)
{
	char p[512];
	struct stat st;
	snprintf(p, sizeof p, "%s/shard-000/%s", d, name);
	CHECK_EQ(stat(p, &st), 0);
	return (long long)st.st_blocks * 512;
}

/* One 100-byte record.  @return le_write's result. */
static int write_100(le_engine *e)
{
	char rec[100];
	memset(rec, 'r', sizeof rec);
	return le_write(e, 0, LE_INFO, rec, sizeof rec);
}

/* 16,000 such records, 4,000 at a time (written out between): past
 * a whole lap of the default ring, none dropped. */
static void write_laps(le_engine *e)
{
	for (int k = 0; k < 4; k++) {
		for (int i = 0; i < 4000; i++)
			CHECK_EQ(write_100(e), 0);
		CHECK_EQ(le_flush(e, 10000), 0);
	}
}

/*
 * A small service's log must be small: a directory holding one record
 * took 3 MB (a 2 MiB QUEUE and a 1 MiB SITES made whole at le_open) and
 * 8 MiB more while the segment was open (its preallocation).  Under
 * 512 KiB, open and closed.
 */
TEST(one_record_log_directory_takes_under_512_kib_on_disk)
{
	le_config c;
	fresh_config(&c);
	le_engine *e = t_open(&c);
	CHECK_EQ(write_100(e), 0);
	le_info(e, "one deferred record %d", 1); /* a SITES entry too */
	CHECK_EQ(le_flush(e, 5000), 0);
	long long open_b = disk_bytes(dir);
	CHECK_EQ(le_close(e), 0);
	long long closed_b = disk_bytes(dir);
	fprintf(stderr, "  (%lld KiB open, %lld KiB closed)\n", open_b >> 10,
	        closed_b >> 10);
	CHECK(open_b < 512 * 1024);
	CHECK(closed_b < 512 * 1024);
	t_rmrf(dir);
}

/*
 * The queue file gets its blocks as producers reach them: a burst well
 * past the first blocks, faster than the writer looks, must lose no
 * record (the producer grows the file itself), and after a lap the file
 * is whole.
 */
TEST(queue_file_grows_with_use_and_loses_no_record)
{
	le_config c;
	fresh_config(&c);
	le_engine *e = t_open(&c);
	long long q0 = file_disk_bytes(dir, "QUEUE");
	uint64_t ring = e->shards[0].ring.size;
	write_laps(e);
	long long q1 = file_disk_bytes(dir, "QUEUE");
	le_stats st;
	le_stats_get(e, &st);
	fprintf(stderr, "  (QUEUE %lld KiB at open, %lld KiB after 16,000 "
	        "records)\n", q0 >> 10, q1 >> 10);
	CHECK_EQ(st.dropped_full, 0);
	CHECK_EQ(st.written, 16000);
	CHECK(q0 <= 128 * 1024);
	CHECK(q1 >= (long long)ring);
	CHECK_EQ(le_close(e), 0);
	CHECK_EQ(count_records(dir), 16000);
	t_rmrf(dir);
}

static atomic_int disk_full;

/* MADV_POPULATE_WRITE as a full file system answers it: EFAULT where
 * a store would have been a SIGBUS. */
static int full_madvise(void *p, size_t len, int advice)
{
	if (advice == 23 && atomic_load(&disk_full)) {
		errno = EFAULT;
		return -1;
	}
	return madvise(p, len, advice);
}

/*
 * A full disk while the queue file grows: producers that would store
 * into blocks the file does not have must be refused (LE_EFULL, counted
 * as drops), never take a SIGBUS; once there is room again the writer
 * grows the file and records flow.
 */
TEST(full_disk_while_the_queue_grows_drops_records_never_crashes)
{
	le_config c;
	fresh_config(&c);
	le__os t = le__os_real;
	t.madvise = full_madvise;
	le__os_install(&t);
	le_engine *e = t_open(&c);
	atomic_store(&disk_full, 1);
	long ok = 0, full = 0;
	for (int i = 0; i < 4000; i++) {
		int rc = write_100(e);
		CHECK(rc == 0 || rc == LE_EFULL);
		ok += rc == 0;
		full += rc == LE_EFULL;
	}
	fprintf(stderr, "  (%ld accepted, %ld refused while full)\n", ok,
	        full);
	CHECK(ok > 0);
	CHECK(full > 0);
	CHECK_EQ(le_flush(e, 10000), 0);
	atomic_store(&disk_full, 0);
	/* the writer tries again on its next turn (a drop wakes it) */
	uint64_t t0 = le__mono_ns();
	while (write_100(e) == LE_EFULL) {
		full++;
		CHECK(le__mono_ns() - t0 < 10000000000u);
		usleep(1000);
	}
	ok++;
	write_laps(e);
	le_stats st;
	le_stats_get(e, &st);
	CHECK_EQ(st.dropped_full, (uint64_t)full);
	CHECK_EQ(st.written, (uint64_t)ok + 16000);
	CHECK_EQ(le_close(e), 0);
	le__os_install(NULL);
	t_rmrf(dir);
}

/* ---- memory and descriptors ---- */

/*
 * An engine that logs little must cost little memory: its ring was
 * faulted in whole (2 MiB) at le_open.  le_open and a few records add
 * under 2 MiB to the process's resident set.
 */
TEST(idle_engine_adds_under_2_mib_resident)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	skip("a sanitizer's shadow memory is the process's too");
#endif
	le_config c;
	fresh_config(&c);
	long before = t_rss_kib();
	le_engine *e = t_open(&c);
	for (int i = 0; i < 5; i++)
		le_info(e, "record %d of a quiet service", i);
	CHECK_EQ(le_flush(e, 5000), 0);
	long after = t_rss_kib();
	fprintf(stderr, "  (VmRSS %ld KiB -> %ld KiB: +%ld KiB)\n", before,
	        after, after - before);
	CHECK(after - before < 2048);
	CHECK_EQ(le_close(e), 0);
	t_rmrf(dir);
}

static int open_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	CHECK(d != NULL);
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n - 1; /* the directory's own */
}

/* Lower this process's descriptor limit to n; the test skips when the
 * hard limit is lower still (it cannot be raised back). */
static void limit_fds(rlim_t n)
{
	struct rlimit rl;
	CHECK_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < n)
		skip("the hard descriptor limit is below the one tested");
	rl.rlim_cur = n;
	CHECK_EQ(setrlimit(RLIMIT_NOFILE, &rl), 0);
}

/*
 * The usual ulimit -n is 1,024, and an engine has up to 256 shards: each
 * kept four descriptors (QUEUE, SITES, its segment, its checkpoint), so
 * 256 could not open.  A shard keeps two now.
 */
TEST(two_hundred_fifty_six_shards_open_under_a_1024_descriptor_limit)
{
	le_config c;
	fresh_config(&c);
	c.shards = 256;
	limit_fds(1024);
	int fd0 = open_fds();
	le_engine *e = t_open(&c);
	int per = (open_fds() - fd0 - 1) / 256; /* LOCK is the engine's */
	fprintf(stderr, "  (%d descriptors for 256 shards)\n",
	        open_fds() - fd0);
	CHECK(per <= 2);
	for (uint64_t k = 0; k < 256; k++)
		CHECK_EQ(le_write(e, k, LE_INFO, "x", 1), 0);
	CHECK_EQ(le_close(e), 0);
	CHECK_EQ(count_records(dir), 256);
	t_rmrf(dir);
}

/* Past the limit, le_open fails, and says why in terms a user can act
 * on: how many descriptors the shards need and what the limit is. */
TEST(too_many_shards_for_the_descriptor_limit_say_how_many_are_needed)
{
	le_config c;
	fresh_config(&c);
	c.shards = 256;
	limit_fds(256);
	le_engine *e = NULL;
	int rc = le_open(&e, &c);
	fprintf(stderr, "  (%s)\n", le_errmsg());
	CHECK_EQ(rc, -EMFILE);
	CHECK(strstr(le_errmsg(), "256 shards need about 517 descriptors"));
	CHECK(strstr(le_errmsg(), "ulimit -n allows 256"));
	t_rmrf(dir);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	RUN(idle_engine_wakes_at_most_once_a_second);
	RUN(a_record_wakes_an_idle_writer_within_flush_ms);
	RUN(one_record_log_directory_takes_under_512_kib_on_disk);
	RUN(queue_file_grows_with_use_and_loses_no_record);
	RUN(full_disk_while_the_queue_grows_drops_records_never_crashes);
	RUN(idle_engine_adds_under_2_mib_resident);
	RUN(two_hundred_fifty_six_shards_open_under_a_1024_descriptor_limit);
	RUN(too_many_shards_for_the_descriptor_limit_say_how_many_are_needed);
	return t_done();
}
