/*
 * test_lifecycle.c -- fork() while logging, and the crash handler.
 */
#include "harness.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>

#include "logengine.h"
#include "logtest.h"

static char dir[256];

static void write_n(le_engine *e, int n)
{
	for (int i = 0; i < n; i++)
		CHECK_EQ(le_write(e, (uint64_t)i, LE_INFO, "record", 6), 0);
}

/* In a child: c opened on dir with a writer that sleeps a minute
 * (flush_ms), so that what is logged stays queued; exit 3 if it does not
 * open. */
static le_engine *child_open_sleeping(le_config *c)
{
	le_engine *e;
	c->dir = dir;
	c->flush_ms = 60000;
	if (le_open(&e, c) != 0)
		_exit(3);
	return e;
}

static atomic_int stop_bg;

static void *background(void *arg)
{
	le_engine *e = arg;
	while (!atomic_load(&stop_bg))
		le_write(e, 7, LE_DEBUG, "background", 10);
	return NULL;
}

TEST(fork_child_gets_eclosed_and_parent_is_unaffected)
{
	le_config c;
	le_config_init(&c);
	c.dir = t_tmpdir(dir);
	c.shards = 2;
	c.overflow = LE_OVERFLOW_BLOCK;
	/* and a stream sink, whose thread (and its lock) is the parent's
	 * too: a child's le_close must neither join that thread nor destroy
	 * the lock and condition variable it waits on, or it hangs */
	int devnull = open("/dev/null", O_WRONLY);
	CHECK(devnull >= 0);
	c.stream_fd = devnull;
	le_engine *e;
	CHECK_RC(le_open(&e, &c));
	write_n(e, 1000);
	/* Fork while another thread logs as fast as it can: the child must
	 * not inherit a lock or a half-claimed slot it then waits on. */
	pthread_t bg;
	pthread_create(&bg, NULL, background, e);
	le_stats st0;
	int waited = 0;
	do { /* until the thread logs: up to 10 s */
		CHECK(waited++ < 10000);
		usleep(1000);
		le_stats_get(e, &st0);
	} while (st0.accepted <= 1000);
	for (int round = 0; round < 20; round++) {
		pid_t pid = fork();
		if (pid == 0) {
			alarm(10);
			if (le_write(e, 0, LE_INFO, "child", 5) != LE_ECLOSED)
				_exit(1);
			if (le_logf(e, LE_INFO, "child %d", 1) != LE_ECLOSED)
				_exit(2);
			/* Stats from the copy; the threads are the parent's:
			 * their CPU time is not the child's to report. */
			le_stats cs;
			if (le_stats_get(e, &cs) != 0 || cs.writer_cpu_ns != 0 ||
			    cs.stream_cpu_ns != 0)
				_exit(4);
			if (round & 1) {
				if (le_close(e) != 0)
					_exit(3);
				_exit(0);
			}
			/* le_close_stats: the copy's counters, as above */
			le_stats fin;
			memset(&fin, 0xff, sizeof fin);
			if (le_close_stats(e, &fin) != 0)
				_exit(3);
			if (fin.written != cs.written || fin.stream_cpu_ns != 0 ||
			    fin.writer_cpu_ns != 0)
				_exit(5);
			_exit(0);
		}
		int st;
		waitpid(pid, &st, 0);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	atomic_store(&stop_bg, 1);
	pthread_join(bg, NULL);
	write_n(e, 1000);
	le_stats st;
	CHECK_RC(le_flush(e, 10000));
	le_stats_get(e, &st);
	CHECK_EQ(le_close(e), 0);
	close(devnull);
	CHECK_EQ(count_records(dir), (long)st.written);
	CHECK(st.written >= 2000);
	t_rmrf(dir);
}

static int app_pipe[2];

static void app_handler(int sig)
{
	char m[16];
	int n = snprintf(m, sizeof m, "app %d", sig);
	if (write(app_pipe[1], m, (size_t)n) < 0)
		_exit(5);
	_exit(42);
}

/* Child: open with the handler, log n records the writer would not write
 * for a minute (flush_ms), then crash with a real SIGSEGV. */
static void crash_child(int with_app_handler, int n)
{
	if (with_app_handler)
		signal(SIGSEGV, app_handler);
	le_config c;
	le_config_init(&c);
	c.mapped_queue = 0;      /* so only the handler can save them */
	c.crash_flush_ms = 5000;
	write_n(child_open_sleeping(&c), n);
	volatile int *bad = NULL;
	if (getpid() > 0) /* opaque to the compiler */
		bad = (volatile int *)(uintptr_t)strtoul("8", NULL, 10);
	*bad = 1; /* a real SIGSEGV */
	_exit(4);
}

TEST(crash_handler_flushes_then_chains_to_app_handler)
{
	t_tmpdir(dir);
	CHECK(pipe(app_pipe) == 0);
	pid_t pid = fork();
	if (pid == 0)
		crash_child(1, 500);
	int st;
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st));
	CHECK_EQ(WEXITSTATUS(st), 42);
	char m[16] = {0};
	CHECK(read(app_pipe[0], m, sizeof m - 1) > 0);
	CHECK(strcmp(m, "app 11") == 0);
	/* The handler wrote them; le_open finds them without any queue. */
	CHECK_EQ(count_records(dir), 500);
	t_rmrf(dir);
}

TEST(crash_handler_flushes_then_default_action_kills)
{
	t_tmpdir(dir);
	pid_t pid = fork();
	if (pid == 0)
		crash_child(0, 300);
	int st;
	waitpid(pid, &st, 0);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	/* The sanitizer's SEGV handler is the one we chain to: it reports
	 * and exits instead of letting the default action kill. */
	CHECK(WIFSIGNALED(st) || (WIFEXITED(st) && WEXITSTATUS(st) != 0));
#else
	CHECK(WIFSIGNALED(st));
	CHECK_EQ(WTERMSIG(st), SIGSEGV);
#endif
	CHECK_EQ(count_records(dir), 300);
	t_rmrf(dir);
}

TEST(without_crash_handler_mapped_queue_still_saves_records)
{
	t_tmpdir(dir);
	pid_t pid = fork();
	if (pid == 0) {
		le_config c;
		le_config_init(&c); /* nothing written before the crash */
		write_n(child_open_sleeping(&c), 400);
		abort();
	}
	int st;
	waitpid(pid, &st, 0);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
	le_config c;
	le_config_init(&c);
	c.dir = dir;
	le_engine *e;
	CHECK_RC(le_open(&e, &c)); /* drains the dead process's queue */
	le_stats s;
	le_stats_get(e, &s);
	CHECK_EQ(s.recovered_records, 400);
	CHECK_EQ(s.accepted, 0);
	le_close(e);
	CHECK_EQ(count_records(dir), 400);
	t_rmrf(dir);
}

TEST(queued_records_in_a_shard_not_opened_are_not_abandoned)
{
	t_tmpdir(dir);
	pid_t pid = fork();
	if (pid == 0) {
		le_config c;
		le_config_init(&c);
		c.shards = 4;
		le_engine *e = child_open_sleeping(&c);
		for (int i = 0; i < 100; i++)
			le_write(e, 3, LE_INFO, "shard three", 11);
		abort();
	}
	int st;
	waitpid(pid, &st, 0);
	le_config c;
	le_config_init(&c);
	c.dir = dir;
	c.shards = 2; /* would leave shard 3's queue behind */
	le_engine *e;
	CHECK_EQ(le_open(&e, &c), LE_EINVAL);
	CHECK(strstr(le_errmsg(), "shard-003") != NULL);
	char cmd[1024];
	snprintf(cmd, sizeof cmd, "%s recover '%s' >/dev/null",
	         t_build_tool("LE_CLI", "logengine"), dir);
	CHECK_EQ(system(cmd), 0);
	CHECK_RC(le_open(&e, &c)); /* drained: now it may */
	le_close(e);
	CHECK_EQ(count_records(dir), 100);
	t_rmrf(dir);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	RUN(fork_child_gets_eclosed_and_parent_is_unaffected);
	RUN(crash_handler_flushes_then_chains_to_app_handler);
	RUN(crash_handler_flushes_then_default_action_kills);
	RUN(without_crash_handler_mapped_queue_still_saves_records);
	RUN(queued_records_in_a_shard_not_opened_are_not_abandoned);
	return t_done();
}
