/*
 * test_footprint.c -- an engine that is given little to do costs little:
 * wake-ups, memory, disk and descriptors follow use.  And what that must
 * not cost: an idle writer still writes each record within flush_ms and
 * never spins on a claimed slot; a QUEUE or SITES file that grows with use
 * on a full file system refuses records or formats at the call, never
 * raises SIGBUS; a dead process's sparse QUEUE is recovered whole.  Each
 * test is named after what would break; none times a call: they count
 * context switches, CPU, resident pages, disk blocks and descriptors.
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
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>

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

/* Resident KiB of this process's mappings of files under dir (QUEUE,
 * SITES, STATS ...), from /proc/self/smaps: a mapping's header line
 * starts with its address in lower-case hex, its fields with a capital. */
static long mapped_rss_kib(const char *d)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char l[1024];
	long kib = 0;
	int ours = 0;
	CHECK(f != NULL);
	while (fgets(l, sizeof l, f)) {
		if ((l[0] >= '0' && l[0] <= '9') || (l[0] >= 'a' && l[0] <= 'f'))
			ours = strstr(l, d) != NULL;
		else if (ours && !strncmp(l, "Rss:", 4))
			kib += atol(l + 4);
	}
	fclose(f);
	return kib;
}

/*
 * An engine that logs little must cost little memory: its ring was
 * faulted in whole (2 MiB) at le_open.  le_open and a few records add
 * under 2 MiB to the process's resident set.  Under a sanitizer, whose
 * shadow memory grows with every allocation, the same bound holds for
 * the engine's file mappings, which were most of that cost.
 */
TEST(idle_engine_adds_under_2_mib_resident)
{
	le_config c;
	fresh_config(&c);
	long before = t_rss_kib();
	le_engine *e = t_open(&c);
	for (int i = 0; i < 5; i++)
		le_info(e, "record %d of a quiet service", i);
	CHECK_EQ(le_flush(e, 5000), 0);
	long after = t_rss_kib(), mapped = mapped_rss_kib(dir);
	fprintf(stderr, "  (VmRSS %ld KiB -> %ld KiB: +%ld KiB; file mappings "
	        "%ld KiB)\n", before, after, after - before, mapped);
	CHECK(mapped > 0 && mapped < 2048);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
	CHECK(after - before < 2048);
#endif
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

static uint64_t cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- a producer stopped between its claim and its publish ---- */

static char *stall_page;
static uint64_t stall_cpu; /* CPU the process burnt while we stood still */
static le_engine *stall_e;
static atomic_int stalled;

/* Another producer of the shard, logging while the first stands still:
 * its record wakes the idle writer, which then meets the claimed slot. */
static void *second_producer(void *arg)
{
	(void)arg;
	while (!atomic_load(&stalled))
		usleep(1000);
	le_write(stall_e, 0, LE_INFO, "two", 3);
	return NULL;
}

/* The producer's memcpy from the payload faults: stand still a second
 * (as a preempted or page-faulting producer does, longer), then let the
 * copy go on.  This thread uses no CPU meanwhile: what the process burns
 * is its other threads'. */
static void stall(int sig, siginfo_t *si, void *uc)
{
	(void)sig, (void)si, (void)uc;
	atomic_store(&stalled, 1);
	struct timespec w = {0, 50000000};
	nanosleep(&w, NULL); /* the second producer's record is in */
	uint64_t c0 = cpu_ns();
	struct timespec s = {1, 0};
	nanosleep(&s, NULL);
	stall_cpu = cpu_ns() - c0;
	mprotect(stall_page, 4096, PROT_READ | PROT_WRITE);
}

static int written_three(const le_stats *st)
{
	return st->written >= 3;
}

/*
 * A writer gone idle that finds a slot claimed and not yet published
 * (its producer preempted, or faulting on its payload) must wait for it
 * without a CPU: before the idle sleep it slept flush_ms at a time; an
 * idle writer that returns at once from sleep_idle (head != rd) and goes
 * round its loop again spins for as long as the producer stands still.
 */
TEST(idle_writer_does_not_spin_while_a_claimed_slot_is_unpublished)
{
	le_config c;
	le_config_init(&c);
	c.dir = t_tmpdir(dir);
	c.durability = LE_SYNC_NONE;
	le_engine *e = t_open(&c);
	CHECK_EQ(le_write(e, 0, LE_INFO, "one", 3), 0);
	CHECK_EQ(le_flush(e, 5000), 0);
	writer_idle(e);
	stall_e = e;
	pthread_t th;
	CHECK_EQ(pthread_create(&th, NULL, second_producer, NULL), 0);

	stall_page = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
	                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(stall_page != MAP_FAILED);
	memset(stall_page, 'p', 100);
	struct sigaction sa = {0};
	sa.sa_sigaction = stall;
	sa.sa_flags = SA_SIGINFO;
	CHECK_EQ(sigaction(SIGSEGV, &sa, NULL), 0);
	CHECK_EQ(mprotect(stall_page, 4096, PROT_NONE), 0);
	CHECK_EQ(le_write(e, 0, LE_INFO, stall_page, 100), 0);
	fprintf(stderr, "  (engine threads burnt %.0f ms of CPU in the 1 s "
	        "the producer stood between claim and publish)\n",
	        stall_cpu / 1e6);
	pthread_join(th, NULL);
	CHECK(t_stats_until(e, written_three, 5000) < 5000);
	CHECK(stall_cpu < 200000000u); /* a fifth of the second */
	CHECK_EQ(le_close(e), 0);
	t_rmrf(dir);
}

/* ---- wake-ups across idle gaps ---- */

static le_engine *burst_e;
static atomic_int burst_go;

static void *burst_thread(void *arg)
{
	(void)arg;
	for (int r = 1; r <= 100; r++) {
		while (atomic_load(&burst_go) < r)
			if (atomic_load(&burst_go) < 0)
				return NULL;
		le_write(burst_e, 1, LE_INFO, "b", 1);
	}
	return NULL;
}

static uint64_t want_written;
static int written_enough(const le_stats *st)
{
	return st->written >= want_written;
}

/*
 * Records that come after an idle gap, from two threads at once (one
 * each: the first claims race the writer's look at head), are written
 * within flush_ms: a lost wake-up shows as the idle sleep (10 s).
 */
TEST(records_after_each_idle_gap_are_written_within_flush_ms)
{
	le_config c;
	le_config_init(&c);
	c.dir = t_tmpdir(dir);
	c.flush_ms = 20;
	c.durability = LE_SYNC_NONE;
	le_engine *e = t_open(&c);
	burst_e = e;
	pthread_t th;
	CHECK_EQ(pthread_create(&th, NULL, burst_thread, NULL), 0);
	double worst = 0;
	for (int r = 1; r <= 6; r++) {
		writer_idle(e);
		/* as close as we can get to the writer going idle */
		atomic_store(&burst_go, r);
		le_write(e, 0, LE_INFO, "a", 1);
		want_written = 2ull * r;
		double ms = t_stats_until(e, written_enough, 12000);
		if (ms > worst)
			worst = ms;
	}
	atomic_store(&burst_go, -1);
	pthread_join(th, NULL);
	fprintf(stderr, "  (worst %.0f ms after an idle gap; flush_ms 20)\n",
	        worst);
	CHECK(worst < 1000);
	CHECK_EQ(le_close(e), 0);
	t_rmrf(dir);
}

/* ---- a real full file system ---- */

/*
 * A QUEUE on a tmpfs that fills up: no producer may take a SIGBUS, the
 * refused records are counted, and what was accepted is written.
 */
TEST(queue_on_a_full_tmpfs_refuses_records_never_sigbus)
{
	const char *mnt = "/tmp/rf-full-tmpfs";
	mkdir(mnt, 0700);
	if (mount("tmpfs", mnt, "tmpfs", 0, "size=400k") != 0)
		t_skip("cannot mount a tmpfs (not root?)");
	le_config c;
	le_config_init(&c);
	c.dir = mnt;
	c.durability = LE_SYNC_NONE;
	le_engine *e = NULL;
	int rc = le_open(&e, &c);
	fprintf(stderr, "  (le_open: %d %s)\n", rc, rc ? le_errmsg() : "");
	if (rc == 0) {
		long ok = 0, full = 0, other = 0;
		char rec[1000];
		memset(rec, 'x', sizeof rec);
		for (int i = 0; i < 20000; i++) {
			int w = le_write(e, 0, LE_INFO, rec, sizeof rec);
			ok += w == 0;
			full += w == LE_EFULL;
			other += w != 0 && w != LE_EFULL;
		}
		fprintf(stderr, "  (%ld accepted, %ld refused, %ld other)\n", ok,
		        full, other);
		le_flush(e, 2000);
		le_close(e);
		CHECK(full > 0);
	}
	umount2(mnt, MNT_DETACH);
	rmdir(mnt);
}

/* ---- SITES growth on a full disk (disk_full and full_madvise above) ---- */

#define LONGFMT "site text that is long enough to fill the SITES area fast: " \
	"0123456789012345678901234567890123456789012345678901234567890123456789" \
	"0123456789012345678901234567890123456789012345678901234567890123456789" \
	"0123456789012345678901234567890123456789012345678901234567890123456789 %d"
#define S1(i) le_info(e, LONGFMT, (i));
#define S4(i) S1(i) S1(i) S1(i) S1(i)
#define S16(i) S4(i) S4(i) S4(i) S4(i)
#define S64(i) S16(i) S16(i) S16(i) S16(i)

static long good_text;
static void check_text(const le_record *r, void *arg)
{
	char want[400];
	(void)arg;
	if (r->flags & LE_REC_MARKER)
		return;
	snprintf(want, sizeof want, LONGFMT, 7);
	good_text += r->len == strlen(want) && !memcmp(r->payload, want, r->len);
}

/*
 * 128 distinct deferred sites, their descriptors far past the SITES
 * file's first blocks, while the disk is full (a growth fails): every
 * call is still logged, with its text (the sites past the blocks format
 * at the call), and no producer stores into a hole.
 */
TEST(sites_past_their_blocks_on_a_full_disk_format_at_the_call)
{
	le_config c;
	le_config_init(&c);
	c.dir = t_tmpdir(dir);
	le__os t = le__os_real;
	t.madvise = full_madvise;
	le__os_install(&t);
	le_engine *e = t_open(&c);
	atomic_store(&disk_full, 1);
	S64(7) S64(7)
	/* the detector: the area's first blocks did run out */
	CHECK_EQ(atomic_load(&e->shards[0].sites.grow_failed), 1);
	atomic_store(&disk_full, 0);
	S64(7) S64(7) /* the same sites again, the disk free */
	CHECK_EQ(le_flush(e, 5000), 0);
	le_stats st;
	le_stats_get(e, &st);
	CHECK_EQ(st.written, 256);
	CHECK_EQ(le_close(e), 0);
	le__os_install(NULL);
	CHECK(read_all(dir, LE_RECOVER_ABSOLUTE, check_text, NULL) >= 0);
	fprintf(stderr, "  (%ld of 256 records read back with their text)\n",
	        good_text);
	CHECK_EQ(good_text, 256);
	t_rmrf(dir);
}

/* Another thread stopped inside its growth: MADV_POPULATE_WRITE of any
 * thread but `runner` waits while `stall_others` is set (as a thread
 * preempted or interrupted by a signal handler in its madvise would). */
static pthread_t runner;
static atomic_int stall_others, stalled;

static int stalling_madvise(void *p, size_t len, int advice)
{
	if (advice == 23 && !pthread_equal(pthread_self(), runner) &&
	    atomic_load(&stall_others)) {
		atomic_fetch_add(&stalled, 1);
		while (atomic_load(&stall_others))
			usleep(1000);
	}
	return madvise(p, len, advice);
}

static void install_stalling(void)
{
	le__os t = le__os_real;
	t.madvise = stalling_madvise;
	runner = pthread_self();
	atomic_store(&stall_others, 1);
	le__os_install(&t);
}

static uint64_t sent;

/* The writer took every record sent, or stopped in its growth. */
static int written_or_stalled(const le_stats *st)
{
	return st->written >= sent || atomic_load(&stalled) > 0;
}

/*
 * A logging call never waits for another thread's growth of the queue:
 * with the writer stopped inside its growth of the ring, the producer
 * gives the ring its blocks itself and every record of a burst 20 times
 * the first blocks is accepted (overflow drop: a wait would have been a
 * refusal or a hang).
 */
TEST(a_producer_never_waits_for_another_threads_growth_of_the_queue)
{
	le_config c;
	fresh_config(&c);
	c.flush_ms = 5;
	install_stalling();
	le_engine *e = t_open(&c);
	/* a few records at a time, each written out, until the writer,
	 * growing the ring ahead of them, is stopped in that growth */
	long ok = 0;
	while (!atomic_load(&stalled)) {
		for (int i = 0; i < 8; i++)
			CHECK_EQ(write_100(e), 0);
		sent = (uint64_t)(ok += 8);
		t_stats_until(e, written_or_stalled, 10000);
		CHECK(ok < 100000);
	}
	for (int i = 0; i < 4000; i++)
		ok += write_100(e) == 0;
	le_stats st;
	le_stats_get(e, &st);
	CHECK_EQ(st.dropped_full, 0);
	atomic_store(&stall_others, 0);
	CHECK_EQ(le_close_stats(e, &st), 0);
	CHECK_EQ(st.written, (uint64_t)ok);
	le__os_install(NULL);
	CHECK_EQ(count_records(dir), ok);
	t_rmrf(dir);
}

static void *sites_thread(void *arg)
{
	le_engine *e = arg;
	S64(7) S64(7)
	return NULL;
}

/* The same for SITES: a thread stopped inside its growth of the area
 * holds back no other thread's new sites, and every text is kept. */
TEST(a_new_site_never_waits_for_another_threads_growth_of_sites)
{
	le_config c;
	le_config_init(&c);
	c.dir = t_tmpdir(dir);
	install_stalling();
	le_engine *e = t_open(&c);
	pthread_t th;
	CHECK_EQ(pthread_create(&th, NULL, sites_thread, e), 0);
	uint64_t t0 = le__mono_ns();
	while (!atomic_load(&stalled)) {
		CHECK(le__mono_ns() - t0 < 20000000000u);
		usleep(1000);
	}
	S64(7) S64(7)
	atomic_store(&stall_others, 0);
	CHECK_EQ(pthread_join(th, NULL), 0);
	CHECK_EQ(le_close(e), 0);
	le__os_install(NULL);
	CHECK(read_all(dir, LE_RECOVER_ABSOLUTE, check_text, NULL) >= 0);
	CHECK_EQ(good_text, 256);
	t_rmrf(dir);
}

/* ---- a dead process's sparse QUEUE ---- */

static atomic_int writes_hang;

static ssize_t hanging_pwrite(int fd, const void *b, size_t n, off_t off)
{
	while (atomic_load(&writes_hang))
		pause();
	return pwrite(fd, b, n, off);
}

/*
 * A process killed while its sparse QUEUE held records past its first
 * blocks (grown by the producers, the writer stuck in a write): the next
 * le_open finds the blocks (SEEK_HOLE) and writes every record out.
 */
static int no_populate(void *p, size_t len, int advice)
{
	if (advice == 23) {
		errno = EINVAL; /* a kernel before 5.14 */
		return -1;
	}
	return madvise(p, len, advice);
}

static void dead_queue_recovered(int whole)
{
	le_config c;
	le_config_init(&c);
	c.dir = t_tmpdir(dir);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		le__os t = le__os_real;
		t.pwrite = hanging_pwrite;
		if (whole) /* the file made whole, as the version before */
			t.madvise = no_populate;
		le__os_install(&t);
		le_engine *e = t_open(&c);
		atomic_store(&writes_hang, 1);
		char rec[100];
		memset(rec, 'd', sizeof rec);
		for (int i = 0; i < 3000; i++)
			if (le_write(e, 0, LE_INFO, rec, sizeof rec) != 0)
				_exit(3);
		_exit(0); /* as a kill -9: no le_close */
	}
	int status;
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	char q[512];
	struct stat st;
	snprintf(q, sizeof q, "%s/shard-000/QUEUE", dir);
	CHECK_EQ(stat(q, &st), 0);
	fprintf(stderr, "  (dead QUEUE: %lld KiB of %lld KiB on disk)\n",
	        (long long)st.st_blocks / 2, (long long)st.st_size >> 10);
	if (!whole)
		CHECK(st.st_blocks * 512 < st.st_size); /* sparse: grown */
	le_engine *e = t_open(&c);
	CHECK_EQ(le_close(e), 0);
	CHECK_EQ(count_records(dir), 3000);
	t_rmrf(dir);
}

TEST(dead_process_sparse_queue_past_its_first_blocks_is_recovered)
{
	dead_queue_recovered(0);
}

/* A QUEUE made whole (fallocate: unwritten extents, which SEEK_HOLE may
 * call holes) as the version before made it. */
TEST(dead_process_whole_queue_is_recovered)
{
	dead_queue_recovered(1);
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
	RUN(idle_writer_does_not_spin_while_a_claimed_slot_is_unpublished);
	RUN(records_after_each_idle_gap_are_written_within_flush_ms);
	RUN(queue_on_a_full_tmpfs_refuses_records_never_sigbus);
	RUN(sites_past_their_blocks_on_a_full_disk_format_at_the_call);
	RUN(a_producer_never_waits_for_another_threads_growth_of_the_queue);
	RUN(a_new_site_never_waits_for_another_threads_growth_of_sites);
	RUN(dead_process_sparse_queue_past_its_first_blocks_is_recovered);
	RUN(dead_process_whole_queue_is_recovered);
	return t_done();
}
