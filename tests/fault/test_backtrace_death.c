/*
 * test_backtrace_death.c -- the flight recorder's records outlive the
 * process (le_set_backtrace): a child keeps DEBUG records below an INFO
 * threshold and dies -- kill -9 at a random moment, or a real SIGSEGV
 * with the crash handler (crash_flush_ms) on or off -- and the next
 * le_open, or `logengine recover`, writes what it kept: the newest ring's
 * worth, in order, each once, marked, with a record saying the process
 * died.  The child counts each call that returned in a shared mapping,
 * so the parent knows which records it had accepted.
 *
 * LE_KILL_CYCLES sets the number of deaths of each kind (default 5).
 */
#include "harness.h"

#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>

#include "logengine.h"
#include "logtest.h"

#define RECORDS 1000 /* the recorder's ring: 1024 entries */

static char dir[256];
static _Atomic long *done; /* calls that returned, in the child */

enum death { BY_KILL9, BY_SEGV, BY_SEGV_HANDLED };

/* The child: an INFO threshold, DEBUG kept; logs until it dies (or
 * faults itself after `segv_at` calls). */
static void child(int crash_handler, long segv_at)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	le_config c;
	le_config_init(&c);
	c.dir = dir;
	c.backtrace = "debug";
	c.backtrace_records = RECORDS;
	c.crash_flush_ms = crash_handler ? 2000 : 0;
	le_engine *e;
	if (le_open(&e, &c) != 0)
		_exit(2);
	le_info(e, "child up");
	for (long k = 0;; k++) {
		if (k == segv_at) {
			/* a real fault, on a page that forbids access (a
			 * NULL store would be UBSan's report, not a fault) */
			volatile int *p = mmap(NULL, 4096, PROT_NONE,
			                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (p == MAP_FAILED)
				_exit(3);
			*p = 1;
		}
		le_debug(e, "k %ld", k);
		atomic_store(done, k + 1);
	}
}

/* What the log holds: the kept records' numbers, each once in order. */
struct seen {
	long first, last, n;
	int order_bad, died, unmarked_kept, marked_up;
};

static void check(const le_record *r, void *arg)
{
	struct seen *s = arg;
	long k;
	char tail, text[64];
	snprintf(text, sizeof text, "%.*s", (int)r->len,
	         (const char *)r->payload);
	if (sscanf(text, "k %ld%c", &k, &tail) == 1) {
		if (!(r->flags & LE_REC_BACKTRACE))
			s->unmarked_kept++;
		if (s->n && k != s->last + 1)
			s->order_bad++;
		if (!s->n)
			s->first = k;
		s->last = k;
		s->n++;
	} else if (r->len >= 20 && !memcmp(r->payload, "logengine: ", 11)) {
		s->died += !!(r->flags & LE_REC_BACKTRACE);
	} else if (r->flags & LE_REC_BACKTRACE) {
		s->marked_up++; /* "child up" was logged, not kept */
	}
}

static void reopen_dir(void)
{
	le_config c;
	le_config_init(&c);
	c.dir = dir;
	le_engine *e;
	CHECK_RC(le_open(&e, &c));
	CHECK_RC(le_close(e));
}

/* One death of the given kind; the log checked after recovery.  The
 * run must end at the last call that returned (or the one after it,
 * accepted but not counted) and hold at least RECORDS. */
static void one_death(enum death how, int by_tool)
{
	t_tmpdir(dir);
	atomic_store(done, 0);
	long segv_at = how == BY_KILL9 ? -1 : 3000 + rand() % 3000;
	pid_t pid = fork();
	if (pid == 0)
		child(how == BY_SEGV_HANDLED, segv_at);
	int st;
	if (how == BY_KILL9) {
		/* past a wrap of the ring, then at a random moment */
		while (atomic_load(done) < 3000 && waitpid(pid, &st, WNOHANG) == 0)
			sched_yield();
		usleep((useconds_t)(rand() % 5000));
		kill(pid, SIGKILL);
	}
	CHECK(waitpid(pid, &st, 0) == pid);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	/* The sanitizer's SEGV handler (the one ours chains to) reports
	 * and exits instead of letting the default action kill. */
	CHECK(how != BY_KILL9 ? WIFSIGNALED(st) || WIFEXITED(st)
	                      : WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
#else
	CHECK(WIFSIGNALED(st));
	CHECK_EQ(WTERMSIG(st), how == BY_KILL9 ? SIGKILL : SIGSEGV);
#endif
	long acc = atomic_load(done);
	if (how == BY_SEGV_HANDLED) {
		/* the handler wrote them out before the signal went on */
		struct seen s0 = {0};
		CHECK(read_all(dir, LE_RECOVER_SKIP, check, &s0) >= 0);
		CHECK(s0.n >= RECORDS && s0.died == 1 && s0.last == acc - 1);
	}
	if (by_tool) {
		char cmd[1024];
		snprintf(cmd, sizeof cmd, "%s recover '%s' >/dev/null",
		         t_build_tool("LE_CLI", "logengine"), dir);
		CHECK_EQ(system(cmd), 0);
	} else {
		reopen_dir();
	}
	struct seen s = {0};
	CHECK(read_all(dir, LE_RECOVER_ABSOLUTE, check, &s) >= 0);
	if (s.order_bad || s.unmarked_kept || s.marked_up || s.died != 1 ||
	    s.n < RECORDS || s.n > 1024 || s.last < acc - 1 || s.last > acc) {
		fprintf(stderr, "  death %d: %ld kept %ld..%ld, %ld accepted, "
		        "order %d unmarked %d died %d\n", how, s.n, s.first,
		        s.last, acc, s.order_bad, s.unmarked_kept, s.died);
		CHECK(0);
	}
	char path[512];
	struct stat sb;
	snprintf(path, sizeof path, "%s/shard-000/BACKTRACE", dir);
	CHECK(stat(path, &sb) < 0); /* no recorder now: no ring left */
	t_rmrf(dir);
}

static int cycles(void)
{
	const char *v = getenv("LE_KILL_CYCLES");
	return v && atoi(v) > 0 ? atoi(v) : 5;
}

TEST(kill9_kept_records_are_written_by_the_next_le_open)
{
	for (int i = 0; i < cycles(); i++)
		one_death(BY_KILL9, 0);
}

TEST(kill9_kept_records_are_written_by_logengine_recover)
{
	one_death(BY_KILL9, 1);
}

TEST(segv_without_handler_kept_records_are_written_by_le_open)
{
	for (int i = 0; i < cycles(); i++)
		one_death(BY_SEGV, 0);
}

TEST(segv_with_crash_handler_writes_kept_records_before_dying)
{
	for (int i = 0; i < cycles(); i++)
		one_death(BY_SEGV_HANDLED, 0);
}

/* A fork child's le_close frees its copy of the engine and leaves the
 * parent's ring as it was: the parent's kill -9 still has its kept
 * records written. */
TEST(fork_child_close_leaves_the_parents_ring_to_recover)
{
	t_tmpdir(dir);
	atomic_store(done, 0);
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		le_config c;
		le_config_init(&c);
		c.dir = dir;
		c.backtrace = "debug";
		le_engine *e;
		if (le_open(&e, &c) != 0)
			_exit(2);
		for (long k = 0; k < 10; k++)
			le_debug(e, "k %ld", k);
		pid_t g = fork();
		if (g == 0)
			_exit(le_close(e) == 0 ? 0 : 3);
		int gst;
		waitpid(g, &gst, 0);
		atomic_store(done, WIFEXITED(gst) && !WEXITSTATUS(gst) ? 1 : -1);
		for (;;)
			pause();
	}
	int st;
	while (atomic_load(done) == 0 && waitpid(pid, &st, WNOHANG) == 0)
		sched_yield();
	CHECK_EQ(atomic_load(done), 1);
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	reopen_dir();
	struct seen s = {0};
	CHECK(read_all(dir, LE_RECOVER_ABSOLUTE, check, &s) >= 0);
	CHECK(s.n == 10 && s.first == 0 && s.died == 1 && !s.order_bad);
	t_rmrf(dir);
}

/* A clean le_close leaves nothing to write: the next le_open writes no
 * recorded history and no death. */
TEST(clean_close_leaves_no_history_to_write)
{
	t_tmpdir(dir);
	le_config c;
	le_config_init(&c);
	c.dir = dir;
	c.backtrace = "debug";
	le_engine *e;
	CHECK_RC(le_open(&e, &c));
	le_debug(e, "k 1");
	CHECK_RC(le_close(e));
	reopen_dir();
	struct seen s = {0};
	CHECK(read_all(dir, LE_RECOVER_ABSOLUTE, check, &s) >= 0);
	CHECK(s.n == 0 && s.died == 0);
	t_rmrf(dir);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	done = t_shared(sizeof *done);
	srand((unsigned)getpid());
	RUN(kill9_kept_records_are_written_by_the_next_le_open);
	RUN(kill9_kept_records_are_written_by_logengine_recover);
	RUN(segv_without_handler_kept_records_are_written_by_le_open);
	RUN(segv_with_crash_handler_writes_kept_records_before_dying);
	RUN(fork_child_close_leaves_the_parents_ring_to_recover);
	RUN(clean_close_leaves_no_history_to_write);
	return t_done();
}
