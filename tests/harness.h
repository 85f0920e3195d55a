/*
 * harness.h -- the test harness: one binary per feature, each test run in a
 * forked child with a timeout (as libuv's runner does), so a crash or a hang
 * fails one test and not the suite.  Each binary ends with the line
 * "N passed, N failed" (", N skipped" added when a test was skipped);
 * tests/run.sh adds the binaries' lines up.
 *
 *   TEST(truncated_tail_is_ignored) { ... CHECK(x == 1); ... }
 *   int main(int argc, char **argv) {
 *       RUN(truncated_tail_is_ignored);
 *       return t_done();
 *   }
 *
 * A test fails by a CHECK* (prints file:line and the values) or by dying.
 * It is skipped, never passed, when what it needs is not there, and says
 * why on its "skip NAME: reason" line: a tool not installed (t_need,
 * t_need_tool: make check installs them when run as root), more open
 * files than the hard limit allows (t_need_fds).  Root, which installs
 * the tools and may raise the limit, lacks neither: CI skips nothing (and
 * fails on any skip).  argv[1], when given, runs only tests whose name
 * contains it.
 *
 * A binary whose tests share nothing (each makes its own directory, picks
 * free ports, measures no time or CPU another process could steal) says so
 * with t_allow_jobs() after T_INIT; then LE_TEST_JOBS=N (tests/run.sh sets
 * it) runs up to N of its tests at once, each one's output kept in a file
 * and printed whole, with its result line, when it ends.
 */
#ifndef LE_TEST_HARNESS_H
#define LE_TEST_HARNESS_H

#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tool.h"

#define TEST(name) static void name(void)

#define CHECK(c)                                                              \
	do {                                                                  \
		if (!(c)) {                                                   \
			fprintf(stderr, "  %s:%d: CHECK(%s) failed\n",        \
			        __FILE__, __LINE__, #c);                      \
			_exit(1);                                             \
		}                                                             \
	} while (0)

#define CHECK_EQ(a, b)                                                        \
	do {                                                                  \
		long long a_ = (long long)(a), b_ = (long long)(b);           \
		if (a_ != b_) {                                               \
			fprintf(stderr,                                       \
			        "  %s:%d: CHECK_EQ(%s, %s): %lld != %lld\n",  \
			        __FILE__, __LINE__, #a, #b, a_, b_);          \
			_exit(1);                                             \
		}                                                             \
	} while (0)

#define CHECK_STR_EQ(a, b)                                                    \
	do {                                                                  \
		const char *a_ = (a), *b_ = (b);                              \
		if (strcmp(a_, b_) != 0) {                                    \
			fprintf(stderr,                                       \
			        "  %s:%d: CHECK_STR_EQ(%s, %s):\n"            \
			        "    got  \"%s\"\n    want \"%s\"\n",            \
			        __FILE__, __LINE__, #a, #b, a_, b_);          \
			_exit(1);                                             \
		}                                                             \
	} while (0)

#define CHECK_RC(expr)                                                        \
	do {                                                                  \
		int rc_ = (expr);                                             \
		if (rc_ < 0) {                                                \
			fprintf(stderr, "  %s:%d: %s returned %d (%s)\n",     \
			        __FILE__, __LINE__, #expr, rc_,               \
			        le_strerror(rc_));                            \
			_exit(1);                                             \
		}                                                             \
	} while (0)

/* Exit status of a skipped test's child (as automake's). */
#define T_SKIP_STATUS 77

static int t_passed, t_failed, t_skipped;
static const char *t_name; /* the test being started, for its child */
static const char *t_filter;
static int t_timeout_s = 120;
static int t_jobs = 1; /* tests at once: 1 unless t_allow_jobs() */

/* A test in flight under t_allow_jobs: its child, its output file. */
struct t_job {
	pid_t pid; /* 0: slot free */
	const char *name;
	FILE *out; /* the child's stdout and stderr, printed at its end */
	struct timespec t0;
};
static struct t_job t_slots[16];

/* Count and print the end of one test: exit status st, started at t0. */
static inline void t_report(const char *name, int st, struct timespec t0)
{
	struct timespec t1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 +
	            (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
		t_passed++;
		printf("ok   %s (%.0f ms)\n", name, ms);
	} else if (WIFEXITED(st) && WEXITSTATUS(st) == T_SKIP_STATUS) {
		t_skipped++; /* the child printed its line, with the reason */
	} else {
		t_failed++;
		if (WIFSIGNALED(st))
			printf("FAIL %s: killed by signal %d%s\n", name,
			       WTERMSIG(st),
			       WTERMSIG(st) == SIGALRM ? " (timeout)" : "");
		else
			printf("FAIL %s: exit %d\n", name, WEXITSTATUS(st));
	}
	fflush(stdout);
}

/* Fork a child that runs fn under the timeout; out, when not NULL,
 * receives its stdout and stderr.  Returns the child's pid. */
static inline pid_t t_start(void (*fn)(void), FILE *out)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		_exit(2);
	}
	if (pid == 0) {
		if (out) {
			dup2(fileno(out), STDOUT_FILENO);
			dup2(fileno(out), STDERR_FILENO);
		}
		alarm((unsigned)t_timeout_s);
		fn();
		fflush(NULL);
		_exit(0);
	}
	return pid;
}

/* Wait for one job in flight to end, print its output and result, and
 * free its slot.  Children that are not jobs (none in a binary that
 * allows jobs) are reaped and passed over. */
static inline void t_reap_one(void)
{
	for (;;) {
		int st = 0;
		pid_t pid = waitpid(-1, &st, 0);
		if (pid < 0 && errno == EINTR)
			continue;
		if (pid < 0)
			return;
		for (int i = 0; i < t_jobs; i++) {
			struct t_job *j = &t_slots[i];
			if (j->pid != pid)
				continue;
			char buf[4096];
			size_t n;
			rewind(j->out);
			while ((n = fread(buf, 1, sizeof buf, j->out)) > 0)
				fwrite(buf, 1, n, stdout);
			fclose(j->out);
			t_report(j->name, st, j->t0);
			j->pid = 0;
			return;
		}
	}
}

/* Jobs in flight now. */
static inline int t_running(void)
{
	int n = 0;
	for (int i = 0; i < t_jobs; i++)
		n += t_slots[i].pid != 0;
	return n;
}

/* Start fn in a free slot, waiting for one to free when all are busy. */
static inline void t_run_job(const char *name, void (*fn)(void))
{
	while (t_running() == t_jobs)
		t_reap_one();
	int i = 0;
	while (t_slots[i].pid)
		i++;
	struct t_job *j = &t_slots[i];
	j->out = tmpfile();
	if (!j->out) {
		perror("tmpfile");
		_exit(2);
	}
	j->name = t_name = name;
	clock_gettime(CLOCK_MONOTONIC, &j->t0);
	j->pid = t_start(fn, j->out);
}

static inline void t_run(const char *name, void (*fn)(void))
{
	if (t_filter && !strstr(name, t_filter))
		return;
	if (t_jobs > 1) {
		t_run_job(name, fn);
		return;
	}
	struct timespec t0;
	t_name = name;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pid_t pid = t_start(fn, NULL);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	t_report(name, st, t0);
}

/* This binary's tests may run LE_TEST_JOBS at once (see the top). */
static inline void t_allow_jobs(void)
{
	const char *j = getenv("LE_TEST_JOBS");
	int n = j ? atoi(j) : 1;
	int max = (int)(sizeof t_slots / sizeof t_slots[0]);
	t_jobs = n < 1 ? 1 : n > max ? max : n;
	/* Before any output, so that the children inherit it: their stdout
	 * is a file, and a line is in it before a CHECK's _exit. */
	if (t_jobs > 1)
		setvbuf(stdout, NULL, _IOLBF, 0);
}

#define RUN(fn) t_run(#fn, fn)
#define T_INIT(argc, argv)                                                    \
	do {                                                                  \
		if ((argc) > 1)                                               \
			t_filter = (argv)[1];                                 \
		const char *to_ = getenv("LE_TEST_TIMEOUT");                  \
		if (to_)                                                      \
			t_timeout_s = atoi(to_);                              \
	} while (0)

static inline int t_done(void)
{
	while (t_running())
		t_reap_one();
	if (t_skipped)
		printf("%d passed, %d failed, %d skipped\n", t_passed, t_failed,
		       t_skipped);
	else
		printf("%d passed, %d failed\n", t_passed, t_failed);
	return t_failed ? 1 : 0;
}

/*
 * Skip the running test, saying why on its one line "skip NAME: reason"
 * (tests/run.sh lists these lines again under the suite's total).
 */
static inline void t_skip(const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 1, 2), noreturn))
#endif
	;

static inline void t_skip(const char *fmt, ...)
{
	va_list ap;

	printf("skip %s: ", t_name ? t_name : "?");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	_exit(T_SKIP_STATUS);
}

/* Skip the running test: `what` (a command, or the packages of a
 * scripts/deps.sh group) is not installed. */
#define T_SKIP(what) t_skip("%s not installed (scripts/deps.sh as root " \
                            "installs it)", (what))

/* The path of the program `tool` (on $PATH or in an sbin directory: see
 * tool.h); the running test is skipped when it is not installed. */
static inline const char *t_need_tool(const char *tool)
{
	const char *p = t_which(tool);
	if (!p)
		T_SKIP(tool);
	return p;
}

/*
 * Skip the running test unless this process may open n descriptors.  The
 * soft limit (often 1024) is raised to the hard one first, as the
 * logengine program does for itself, and by root, who may, the hard one
 * to n as well: only an administrator's hard limit below n skips.
 */
static inline void t_need_fds(long n)
{
	struct rlimit rl;

	CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur >= (rlim_t)n)
		return;
	struct rlimit up = rl;
	if (up.rlim_max != RLIM_INFINITY && up.rlim_max < (rlim_t)n)
		up.rlim_max = (rlim_t)n;
	up.rlim_cur = up.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &up) != 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t)n)
		t_skip("needs %ld open files, the hard limit is %llu (ulimit "
		       "-Hn, which root may raise)", n,
		       (unsigned long long)rl.rlim_max);
}

/*
 * Skip the running test unless every package of `scripts/deps.sh GROUP`
 * is installed (asks `scripts/deps.sh --missing GROUP`, from the top of
 * the tree, which make check runs in).
 */
static inline void t_need(const char *group)
{
	char cmd[256], missing[512] = "";

	snprintf(cmd, sizeof cmd, "sh scripts/deps.sh --missing %s 2>/dev/null",
	         group);
	fflush(NULL);
	FILE *p = popen(cmd, "r");
	if (!p)
		return;
	if (!fgets(missing, sizeof missing, p))
		missing[0] = '\0';
	pclose(p);
	missing[strcspn(missing, "\n")] = '\0';
	if (missing[0])
		T_SKIP(missing);
}

/* ---- helpers for tests ---- */

/* This process's resident set (VmRSS), in KiB. */
static inline long t_rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char l[256];
	long v = -1;
	CHECK(f != NULL);
	while (fgets(l, sizeof l, f))
		if (!strncmp(l, "VmRSS:", 6))
			v = atol(l + 6);
	fclose(f);
	return v;
}

/* A fresh empty directory under $TMPDIR (or /tmp); path in static storage
 * of the caller's choosing: buf must hold 256 bytes. */
static inline char *t_tmpdir(char *buf)
{
	const char *base = getenv("TMPDIR");
	snprintf(buf, 256, "%s/le-test-XXXXXX", base ? base : "/tmp");
	if (!mkdtemp(buf)) {
		perror("mkdtemp");
		_exit(2);
	}
	return buf;
}

/* len bytes of zeroed memory shared with the children the test forks
 * (their progress, read by the parent); fails the run when it cannot
 * map. */
static inline void *t_shared(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
	               MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		_exit(2);
	}
	return p;
}

/* Path of a program this build made: $ENV_NAME if set, else $BUILD/name
 * (build/ by default).  One buffer per test file: use it before the next
 * call. */
static inline const char *t_build_tool(const char *env_name, const char *name)
{
	static char path[512];
	const char *env = getenv(env_name), *build = getenv("BUILD");

	if (env && *env)
		return env;
	snprintf(path, sizeof path, "%s/%s", build ? build : "build", name);
	return path;
}

static inline void t_rmrf(const char *path)
{
	char cmd[600];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
	if (system(cmd) != 0)
		fprintf(stderr, "  warning: could not remove %s\n", path);
}

/* Read a whole file into malloc'd memory; *len set.  NULL on error. */
static inline unsigned char *t_slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	unsigned char *b = malloc((size_t)n + 1);
	if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
		free(b);
		b = NULL;
	}
	fclose(f);
	if (b)
		b[n] = '\0'; /* room was made for it: text can be read as such */
	*len = (size_t)n;
	return b;
}

/* A whole file as a NUL-terminated string; fails the test if unreadable. */
static inline char *t_slurp_text(const char *path)
{
	size_t len;
	unsigned char *b = t_slurp(path, &len);
	CHECK(b);
	return (char *)b;
}

static inline int t_spit(const char *path, const void *buf, size_t len)
{
	FILE *f = fopen(path, "wb");
	if (!f)
		return -1;
	size_t w = fwrite(buf, 1, len, f);
	fclose(f);
	return w == len ? 0 : -1;
}

/* A UNIX socket file at path, as a hostile neighbour would leave one
 * (bound, then closed: the file stays).  @return 0 or -1. */
static inline int t_mksocket(const char *path)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM, 0), rc = -1;
	if (fd >= 0 && strlen(path) < sizeof a.sun_path) {
		memcpy(a.sun_path, path, strlen(path) + 1);
		rc = bind(fd, (struct sockaddr *)&a, sizeof a);
	}
	if (fd >= 0)
		close(fd);
	return rc;
}

/* The bytes a test vector spells in hex ("0a1b 2c3d\n..."; spaces and
 * newlines between pairs ignored), into out.  @return their count. */
static inline size_t t_unhex(const char *hex, unsigned char *out)
{
	size_t n = 0;
	while (*hex) {
		if (*hex == ' ' || *hex == '\n') {
			hex++;
			continue;
		}
		unsigned v;
		CHECK(sscanf(hex, "%2x", &v) == 1);
		out[n++] = (unsigned char)v;
		hex += 2;
	}
	return n;
}

/* What the calling code writes to stderr between t_stderr_catch and
 * t_stderr_release goes to a temporary file, then into buf (cap bytes,
 * NUL-terminated), and stderr is back where it was. */
static inline FILE *t_stderr_catch(int *saved)
{
	FILE *f = tmpfile();
	fflush(stderr);
	*saved = dup(2);
	dup2(fileno(f), 2);
	return f;
}

static inline void t_stderr_release(FILE *f, int saved, char *buf,
                                    size_t cap)
{
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(f);
	size_t n = fread(buf, 1, cap - 1, f);
	buf[n] = '\0';
	fclose(f);
}

#endif
