/*
 * test_review_foot.c -- a second reader's attempts to break the footprint
 * change (i28-foot): the idle writer, the sparse QUEUE on a real full file
 * system.  Each test is named after what would break.
 */
#include "harness.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <pthread.h>
#include <unistd.h>

#include "logengine.h"
#include "engine/shard.h"
#include "base/os.h"
#include "logtest.h"

static char dir[256];

static void skip(const char *why)
{
	printf("skipped: %s\n", why);
	fflush(stdout);
	_exit(T_SKIP_STATUS);
}

static void writer_idle(le_engine *e)
{
	uint64_t t0 = le__mono_ns();
	while (!atomic_load(&e->shards[0].idle)) {
		CHECK(le__mono_ns() - t0 < 10000000000u);
		usleep(10000);
	}
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
		skip("cannot mount a tmpfs (not root?)");
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

/* ---- SITES growth on a full disk ---- */

static atomic_int disk_full;

static int full_madvise(void *p, size_t len, int advice)
{
	if (advice == 23 && atomic_load(&disk_full)) {
		errno = EFAULT;
		return -1;
	}
	return madvise(p, len, advice);
}

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
	RUN(idle_writer_does_not_spin_while_a_claimed_slot_is_unpublished);
	RUN(records_after_each_idle_gap_are_written_within_flush_ms);
	RUN(queue_on_a_full_tmpfs_refuses_records_never_sigbus);
	RUN(sites_past_their_blocks_on_a_full_disk_format_at_the_call);
	RUN(dead_process_sparse_queue_past_its_first_blocks_is_recovered);
	RUN(dead_process_whole_queue_is_recovered);
	return t_done();
}
