/*
 * test_ratelimit_death.c -- what a kill -9 leaves of a rate-limited call
 * site (the _every macros, docs/RELIABILITY.md): the records that passed
 * and the summaries already logged are in the queue and come back with
 * the next le_open; the count of the window still open was in the dead
 * process's memory and is lost.
 */
#include "harness.h"

#include <stdatomic.h>
#include <sys/prctl.h>

#include "logengine.h"
#include "logtest.h"

static char dir[256];
static _Atomic int *phase; /* the child's progress, in a shared mapping */

/* One call site, its window's length given at each call. */
static void flood(le_engine *e, long ms, int calls)
{
	for (int i = 0; i < calls; i++)
		le_warn_every(e, ms, 3, "flood %d", i);
}

/* The child: a 100-ms window of 1,000 calls, told by the writer's sweep;
 * then a minute-long window of 500 calls, left open.  _exit codes say
 * where it stopped. */
static void child(void)
{
	le_config c;
	le_engine *e;
	le_stats st;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	le_config_init(&c);
	c.dir = dir;
	c.flush_ms = 5;
	if (le_open(&e, &c) != 0)
		_exit(2);
	flood(e, 100, 1000);
	do { /* the sweep tells the first window soon after it ends */
		if (le_stats_get(e, &st) < 0)
			_exit(3);
		usleep(1000);
	} while (st.suppressed_summaries < 1);
	flood(e, 60000, 500);
	if (le_flush(e, 10000) < 0)
		_exit(4);
	atomic_store(phase, 1);
	for (;;)
		pause();
}

struct tally {
	long records, summaries;
	uint64_t suppressed;
};

static void tally_rec(const le_record *r, void *arg)
{
	struct tally *t = arg;
	size_t pos = 0;
	le_field f;

	while (le_record_field(r, &pos, &f) == 1)
		if (f.key_len == 10 && !memcmp(f.key, "suppressed", 10)) {
			t->summaries++;
			t->suppressed += f.v.u64;
			return;
		}
	t->records += r->len >= 5 && !memcmp(r->payload, "flood", 5);
}

TEST(kill9_keeps_passed_records_and_told_summaries_and_loses_the_open_count)
{
	le_config c;
	le_engine *e;
	struct tally t = {0};
	int st;

	t_tmpdir(dir);
	atomic_store(phase, 0);
	pid_t pid = fork();
	if (pid == 0)
		child();
	CHECK(pid > 0);
	for (int ms = 0; !atomic_load(phase); ms++) {
		CHECK(ms < 20000);
		CHECK(waitpid(pid, &st, WNOHANG) == 0); /* alive */
		usleep(1000);
	}
	kill(pid, SIGKILL);
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	le_config_init(&c);
	c.dir = dir;
	CHECK_RC(le_open(&e, &c)); /* writes the dead process's queue */
	CHECK_RC(le_close(e));
	CHECK(read_all(dir, LE_RECOVER_ABSOLUTE, tally_rec, &t) >= 0);
	CHECK_EQ(t.records, 3 + 3);    /* each window's burst */
	CHECK_EQ(t.summaries, 1);      /* the first window's, once */
	CHECK_EQ(t.suppressed, 997);   /* the open window's 497: lost */
	t_rmrf(dir);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	phase = t_shared(sizeof *phase);
	RUN(kill9_keeps_passed_records_and_told_summaries_and_loses_the_open_count);
	return t_done();
}
