/*
 * test_kill9.c -- records that le_write accepted survive kill -9.
 *
 * A child process logs numbered records as fast as it can (two threads,
 * two route keys, LE_OVERFLOW_BLOCK) and, after each le_write that returned
 * 0, bumps its thread's counter in a shared mapping.  The parent kills it
 * with SIGKILL at a random moment, then starts the next child on the same
 * directory: its le_open must first write out what the dead one left
 * queued.  At the end every record counted as accepted must be in the log
 * exactly once, in order, and the log must verify.  (A record may also be
 * there uncounted: accepted, then killed before the counter moved.  Only
 * the one right after the counted ones, per thread.)
 *
 * Once as configured by default, once with queue_checksum: each record's
 * check is put by le_write as the record is published, so a kill at any
 * moment leaves slots whose checks match or slots never published, and
 * no recovery may call one damaged.
 *
 * LE_KILL_CYCLES sets the number of kills (default 20; `make check-long`
 * runs hundreds).
 */
#include "harness.h"

#include <sys/prctl.h>

#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>

#include "logengine.h"
#include "logtest.h"

#define THREADS 2
#define MAX_CYCLES 2000

struct shared {
	_Atomic long count[THREADS]; /* accepted in the current cycle */
	_Atomic long damaged;        /* recovery_damaged, all cycles */
	long final[MAX_CYCLES][THREADS];
};

static struct shared *sh;
static char dir[256];
static int cycle;
static le_engine *eng;
static int checksum; /* queue_checksum of every engine */

static void *child_thread(void *arg)
{
	int t = (int)(intptr_t)arg;
	char buf[96];
	for (long k = 0;; k++) {
		int n = snprintf(buf, sizeof buf, "c%d:t%d:%ld:%s", cycle, t, k,
		                 "padding-padding-padding-padding");
		if (le_write(eng, (uint64_t)t, LE_INFO, buf, (size_t)n) != 0)
			_exit(3);
		atomic_store(&sh->count[t], k + 1);
	}
	return NULL;
}

static void child(void)
{
	/* This loops until killed: never outlive the test if it dies. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() == 1)
		_exit(9);
	le_config c;
	le_config_init(&c);
	c.dir = dir;
	c.shards = 2;
	c.overflow = LE_OVERFLOW_BLOCK;
	c.durability = LE_SYNC_NONE;
	c.segment_bytes = 256 << 10; /* rotate often: kills land mid-rotation */
	c.queue_capacity = 4096;
	c.queue_checksum = (uint32_t)checksum;
	if (le_open(&eng, &c) != 0) {
		fprintf(stderr, "child le_open: %s\n", le_errmsg());
		_exit(2);
	}
	if (le_errmsg()[0])
		fprintf(stderr, "  cycle %d: le_open: %s\n", cycle, le_errmsg());
	le_stats rs;
	if (le_stats_get(eng, &rs) == 0)
		atomic_fetch_add(&sh->damaged, (long)rs.recovery_damaged);
	if (getenv("LE_KILL_DEBUG")) {
		le_stats st;
		le_stats_get(eng, &st);
		fprintf(stderr, "  cycle %d: recovered %llu abandoned %llu "
		        "truncated %llu\n", cycle,
		        (unsigned long long)st.recovered_records,
		        (unsigned long long)st.abandoned_slots,
		        (unsigned long long)st.recovered_truncated_bytes);
	}
	pthread_t th[THREADS];
	for (int t = 0; t < THREADS; t++)
		pthread_create(&th[t], NULL, child_thread, (void *)(intptr_t)t);
	for (;;)
		pause();
}

struct check {
	long next[MAX_CYCLES][THREADS];
	long bad, extra;
};

static void check_rec(const le_record *r, void *arg)
{
	struct check *x = arg;
	char b[128];
	size_t n = r->len < sizeof b - 1 ? r->len : sizeof b - 1;
	memcpy(b, r->payload, n);
	b[n] = 0;
	int c, t;
	long k;
	if (sscanf(b, "c%d:t%d:%ld:", &c, &t, &k) != 3 || c < 0 ||
	    c >= MAX_CYCLES || t < 0 || t >= THREADS) {
		x->bad++;
		return;
	}
	if (k != x->next[c][t]) {
		fprintf(stderr, "  cycle %d thread %d: got %ld, expected %ld\n",
		        c, t, k, x->next[c][t]);
		x->bad++;
	}
	x->next[c][t] = k + 1;
}

static void kill_cycles(void)
{
	int cycles = getenv("LE_KILL_CYCLES") ? atoi(getenv("LE_KILL_CYCLES"))
	                                      : 20;
	if (cycles > MAX_CYCLES)
		cycles = MAX_CYCLES;
	sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
	          MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(sh != MAP_FAILED);
	cycle = 0;
	t_tmpdir(dir);
	srand((unsigned)getpid());
	long total = 0;
	for (cycle = 0; cycle < cycles; cycle++) {
		for (int t = 0; t < THREADS; t++)
			atomic_store(&sh->count[t], 0);
		pid_t pid = fork();
		if (pid == 0)
			child();
		/* Let it get going (past le_open and its drain), then kill
		 * it at a random moment. */
		for (int i = 0; i < 5000 && atomic_load(&sh->count[0]) == 0; i++)
			usleep(1000);
		usleep((useconds_t)(rand() % 20000));
		kill(pid, SIGKILL);
		int st;
		waitpid(pid, &st, 0);
		CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
		for (int t = 0; t < THREADS; t++) {
			sh->final[cycle][t] = atomic_load(&sh->count[t]);
			total += sh->final[cycle][t];
		}
	}
	/* The last child's queue is drained by this open. */
	le_config c;
	le_config_init(&c);
	c.dir = dir;
	c.shards = 2;
	le_engine *e;
	CHECK_RC(le_open(&e, &c));
	le_stats st;
	le_stats_get(e, &st);
	CHECK_EQ(le_close(e), 0);
	CHECK_EQ(st.recovery_damaged, 0);
	CHECK_EQ(atomic_load(&sh->damaged), 0);

	static struct check x;
	long rc = read_all(dir, LE_RECOVER_ABSOLUTE, check_rec, &x);
	if (rc < 0) {
		char cmd[1024];
		snprintf(cmd, sizeof cmd, "%s verify '%s' | head -5",
		         t_build_tool("LE_CLI", "logengine"), dir);
		if (system(cmd) != 0)
			fprintf(stderr, "  (verify failed)\n");
	}
	CHECK(rc >= 0);
	CHECK_EQ(x.bad, 0);
	for (int cy = 0; cy < cycles; cy++)
		for (int t = 0; t < THREADS; t++) {
			long got = x.next[cy][t], want = sh->final[cy][t];
			if (got != want && got != want + 1) {
				fprintf(stderr, "  cycle %d thread %d: %ld in the "
				        "log, %ld accepted\n", cy, t, got, want);
				_exit(1);
			}
		}
	printf("  %d kills, %ld accepted records, all present once, in "
	       "order\n", cycles, total);
	char cmd[1024];
	const char *cli = t_build_tool("LE_CLI", "logengine");
	snprintf(cmd, sizeof cmd, "%s verify '%s' >/dev/null", cli, dir);
	CHECK_EQ(system(cmd), 0);
	t_rmrf(dir);
	munmap(sh, sizeof *sh);
}

TEST(accepted_records_survive_kill9_exactly_once_in_order)
{
	checksum = 0;
	kill_cycles();
}

TEST(checksummed_records_survive_kill9_and_none_is_called_damaged)
{
	checksum = 1;
	kill_cycles();
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	RUN(accepted_records_survive_kill9_exactly_once_in_order);
	RUN(checksummed_records_survive_kill9_and_none_is_called_damaged);
	return t_done();
}
