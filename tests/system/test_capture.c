/*
 * test_capture.c -- `logengine capture -- CMD`, run as a user runs it: CMD
 * never blocks on its own output even when logengine's stdout is a pipe
 * nobody reads; every line lands in the segment store (checked with the
 * reader API), stderr lines tagged ERROR, a last line without a newline
 * kept, long lines split without loss; CMD's exit status comes back, and
 * SIGTERM sent to logengine reaches CMD.
 *
 * The CLI is $LE_CLI, else $BUILD/logengine (BUILD defaults to "build");
 * run from the top of the tree.  CMD is often this very binary, re-run in
 * a "--child-*" mode (see child_main), so that what it writes is known
 * exactly and needs no other program.
 */
#include "harness.h"

#include <fcntl.h>

#include "logengine.h"

#define LINE_BYTES 100                       /* with its newline */
#define BIG_LINES (50 * 1000 * 1000 / LINE_BYTES) /* 50 MB */
#define MAX_REC 65536u                       /* le_config default */

static const char *cli(void)
{
	return t_build_tool("LE_CLI", "logengine");
}

static const char *self(void)
{
	static char path[512];
	ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
	CHECK(n > 0);
	path[n] = '\0';
	return path;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- CMD: this binary in a child mode ---- */

/* Line i of the big output, without its newline: "%09d " and filler
 * that depends on i, 99 bytes. */
static void big_line(char *b, long i)
{
	int k = snprintf(b, 16, "%09ld ", i);
	for (; k < LINE_BYTES - 1; k++)
		b[k] = (char)('a' + (i + k) % 26);
}

/* --child-lines N CODE FILE: N lines on stdout, "child done" on stderr,
 * the seconds it took in FILE, exit CODE. */
static int child_lines(long n, int code, const char *file)
{
	static char out[1 << 16];
	char b[LINE_BYTES];
	double t0 = now_s();

	setvbuf(stdout, out, _IOFBF, sizeof out);
	b[LINE_BYTES - 1] = '\n';
	for (long i = 0; i < n; i++) {
		big_line(b, i);
		fwrite(b, 1, LINE_BYTES, stdout);
	}
	fflush(stdout);
	fputs("child done\n", stderr);
	FILE *f = fopen(file, "w");
	if (f) {
		fprintf(f, "%.3f\n", now_s() - t0);
		fclose(f);
	}
	return code;
}

/* --child-term FILE: say "ready" (and create FILE), wait for SIGTERM,
 * then say goodbye on both streams and exit 3.  SIGTERM is blocked and
 * waited for, not handled: nothing between its arrival and our wait can
 * lose it, under a sanitizer's deferred handlers too. */
static int child_term(const char *file)
{
	sigset_t term;
	struct timespec limit = {60, 0};

	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	sigprocmask(SIG_BLOCK, &term, NULL);
	printf("ready\n");
	fflush(stdout);
	close(open(file, O_WRONLY | O_CREAT, 0644));
	while (sigtimedwait(&term, NULL, &limit) != SIGTERM)
		if (errno != EINTR)
			return 99; /* never came */
	printf("got TERM\n");
	fflush(stdout);
	fputs("bye\n", stderr);
	return 3;
}

/* --child-long: a line of 3.5 pieces, one of exactly max_record_bytes,
 * and "tail" without a newline. */
static int child_long(void)
{
	size_t n = 3 * MAX_REC + MAX_REC / 2;
	char *b = malloc(n);
	for (size_t i = 0; i < n; i++)
		b[i] = (char)('A' + i % 23);
	fwrite(b, 1, n, stdout);
	putchar('\n');
	memset(b, 'x', MAX_REC);
	fwrite(b, 1, MAX_REC, stdout);
	putchar('\n');
	fputs("tail", stdout);
	free(b);
	return 0;
}

static int child_main(int argc, char **argv)
{
	if (!strcmp(argv[1], "--child-lines") && argc == 5)
		return child_lines(atol(argv[2]), atoi(argv[3]), argv[4]);
	if (!strcmp(argv[1], "--child-term") && argc == 3)
		return child_term(argv[2]);
	if (!strcmp(argv[1], "--child-long"))
		return child_long();
	return 100;
}

/* ---- running logengine capture ---- */

/* Start "logengine capture --dir DIR ARGS..." with stdout on out_fd and
 * stderr in the file err.  @return its pid. */
static pid_t start(const char *dir, int out_fd, const char *err,
                   const char *const *args)
{
	const char *argv[32] = {"logengine", "capture", "--dir", dir};
	int n = 4;

	if (access(cli(), X_OK) != 0) {
		fprintf(stderr, "  %s: not built (set LE_CLI or BUILD)\n", cli());
		_exit(1);
	}
	while (*args && n < 31)
		argv[n++] = *args++;
	argv[n] = NULL;
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		int fd = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		dup2(out_fd, 1);
		dup2(fd, 2);
		execv(cli(), (char **)argv);
		_exit(126);
	}
	return pid;
}

/* Wait for pid.  @return its exit status (-signal if killed). */
static int finish(pid_t pid)
{
	int st;
	while (waitpid(pid, &st, 0) < 0)
		CHECK(errno == EINTR);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
}

/* Run capture to the end with stdout into the file out.  @return exit. */
static int run(const char *dir, const char *out, const char *err,
               const char *const *args)
{
	int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	pid_t pid = start(dir, fd, err, args);
	close(fd);
	return finish(pid);
}

/* The records of a capture directory, copied out. */
struct rec {
	int level;
	uint32_t flags;
	char *msg; /* NUL-terminated copy */
	size_t len;
};

static struct rec *read_all(const char *dir, size_t *n)
{
	le_reader *r;
	le_record rec;
	size_t cap = 64;
	struct rec *v = malloc(cap * sizeof *v);
	int rc;

	CHECK_RC(le_reader_open(&r, dir, NULL));
	*n = 0;
	while ((rc = le_reader_next(r, &rec)) > 0) {
		if (*n == cap)
			v = realloc(v, (cap *= 2) * sizeof *v);
		v[*n].level = rec.level;
		v[*n].flags = rec.flags;
		v[*n].len = rec.len;
		v[*n].msg = malloc(rec.len + 1);
		memcpy(v[*n].msg, rec.payload, rec.len);
		v[*n].msg[rec.len] = '\0';
		(*n)++;
	}
	CHECK_EQ(rc, 0);
	le_reader_close(r);
	return v;
}

/* Paths of one test: the log, and scratch files beside it. */
struct paths {
	char top[256], log[300], out[300], err[300], aux[300];
};

static void paths(struct paths *p)
{
	t_tmpdir(p->top);
	snprintf(p->log, sizeof p->log, "%s/log", p->top);
	snprintf(p->out, sizeof p->out, "%s/out", p->top);
	snprintf(p->err, sizeof p->err, "%s/err", p->top);
	snprintf(p->aux, sizeof p->aux, "%s/aux", p->top);
}

/* ---- tests ---- */

TEST(child_writing_50mb_into_a_stalled_stdout_exits_promptly_losing_nothing)
{
	struct paths p;
	char n[32];
	int pp[2];

	paths(&p);
	snprintf(n, sizeof n, "%d", BIG_LINES);
	CHECK(pipe(pp) == 0); /* our stdout: nobody will ever read pp[0] */
	const char *args[] = {"--passthrough", "--verbose", "--", self(),
	                      "--child-lines", n, "7", p.aux, NULL};
	double t0 = now_s();
	pid_t pid = start(p.log, pp[1], p.err, args);
	close(pp[1]);
	CHECK_EQ(finish(pid), 7); /* CMD's status */
	double total = now_s() - t0;
	char *t = t_slurp_text(p.aux);
	double child = atof(t);
	fprintf(stderr, "  child wrote 50 MB in %.2f s; capture done in %.2f s\n",
	        child, total);
	/* Without capture reading on, CMD would block forever on a full
	 * pipe; the bounds only keep a slow sanitizer build in. */
	CHECK(child < 60.0);
	CHECK(total < child + 15.0);
	/* Most passthrough lines were dropped, and said so. */
	char *err = t_slurp_text(p.err);
	char *pt = strstr(err, "passthrough: ");
	CHECK(pt != NULL);
	unsigned long long shown = 0, dropped = 0;
	CHECK(sscanf(pt, "passthrough: %llu lines, %llu dropped", &shown,
	             &dropped) == 2);
	CHECK(dropped > 0);
	CHECK_EQ(shown + dropped, BIG_LINES + 1);
	/* The store has every line, in order, intact. */
	size_t nrec = 0;
	struct rec *v = read_all(p.log, &nrec);
	CHECK_EQ(nrec, BIG_LINES + 1);
	char want[LINE_BYTES];
	long next = 0;
	for (size_t i = 0; i < nrec; i++) {
		if (v[i].level == LE_ERROR) {
			CHECK(strcmp(v[i].msg, "child done") == 0);
			continue;
		}
		CHECK_EQ(v[i].level, LE_INFO);
		CHECK_EQ(v[i].len, LINE_BYTES - 1);
		big_line(want, next++);
		CHECK(memcmp(v[i].msg, want, LINE_BYTES - 1) == 0);
	}
	CHECK_EQ(next, BIG_LINES);
	close(pp[0]);
	t_rmrf(p.top);
}

TEST(stderr_lines_are_tagged_error_and_stdout_lines_info)
{
	struct paths p;
	paths(&p);
	const char *args[] = {"--", "sh", "-c",
	                      "echo out1; echo err1 >&2; echo out2; "
	                      "echo err2 >&2",
	                      NULL};
	CHECK_EQ(run(p.log, p.out, p.err, args), 0);
	size_t n;
	struct rec *v = read_all(p.log, &n);
	CHECK_EQ(n, 4);
	/* Two pipes: order holds within a stream, not across them. */
	const char *info[2], *error[2];
	int ni = 0, ne = 0;
	for (size_t i = 0; i < n; i++) {
		CHECK(v[i].level == LE_INFO || v[i].level == LE_ERROR);
		CHECK_EQ(v[i].flags, 0);
		if (v[i].level == LE_INFO)
			info[ni++] = v[i].msg;
		else
			error[ne++] = v[i].msg;
		CHECK(ni <= 2 && ne <= 2);
	}
	CHECK(!strcmp(info[0], "out1") && !strcmp(info[1], "out2"));
	CHECK(!strcmp(error[0], "err1") && !strcmp(error[1], "err2"));
	t_rmrf(p.top);
}

TEST(last_line_without_newline_and_empty_lines_are_kept)
{
	struct paths p;
	paths(&p);
	const char *args[] = {"--", "sh", "-c", "printf 'a\\n\\nb\\r\\nlast'",
	                      NULL};
	CHECK_EQ(run(p.log, p.out, p.err, args), 0);
	size_t n;
	struct rec *v = read_all(p.log, &n);
	CHECK_EQ(n, 4);
	CHECK(!strcmp(v[0].msg, "a"));
	CHECK_EQ(v[1].len, 0);
	CHECK(!strcmp(v[2].msg, "b\r")); /* bytes as they came */
	CHECK(!strcmp(v[3].msg, "last"));
	t_rmrf(p.top);
}

TEST(exit_status_and_signal_death_are_passed_through)
{
	struct paths p;
	paths(&p);
	const char *code[] = {"--", "sh", "-c", "exit 42", NULL};
	CHECK_EQ(run(p.log, p.out, p.err, code), 42);
	const char *killed[] = {"--", "sh", "-c", "kill -KILL $$", NULL};
	CHECK_EQ(run(p.log, p.out, p.err, killed), 128 + SIGKILL);
	const char *ok[] = {"--", "true", NULL};
	CHECK_EQ(run(p.log, p.out, p.err, ok), 0);
	const char *missing[] = {"--", "/nonexistent/cmd", NULL};
	CHECK_EQ(run(p.log, p.out, p.err, missing), 127);
	CHECK(strstr(t_slurp_text(p.err), "/nonexistent/cmd") != NULL);
	t_rmrf(p.top);
}

TEST(sigterm_sent_to_capture_reaches_cmd_and_its_last_words_are_kept)
{
	struct paths p;
	paths(&p);
	int fd = open("/dev/null", O_WRONLY);
	const char *args[] = {"--", self(), "--child-term", p.aux, NULL};
	pid_t pid = start(p.log, fd, p.err, args);
	close(fd);
	for (int i = 0; i < 2000 && access(p.aux, F_OK) != 0; i++)
		usleep(5000);
	CHECK(access(p.aux, F_OK) == 0);
	CHECK(kill(pid, SIGTERM) == 0); /* to logengine, not to CMD */
	CHECK_EQ(finish(pid), 3);       /* CMD's answer to SIGTERM */
	size_t n;
	struct rec *v = read_all(p.log, &n);
	CHECK_EQ(n, 3);
	int seen = 0;
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(v[i].msg, "ready") && v[i].level == LE_INFO)
			seen |= 1;
		if (!strcmp(v[i].msg, "got TERM") && v[i].level == LE_INFO)
			seen |= 2;
		if (!strcmp(v[i].msg, "bye") && v[i].level == LE_ERROR)
			seen |= 4;
	}
	CHECK_EQ(seen, 7);
	t_rmrf(p.top);
}

TEST(line_longer_than_max_record_is_split_into_flagged_pieces_not_cut)
{
	struct paths p;
	paths(&p);
	const char *args[] = {"--", self(), "--child-long", NULL};
	CHECK_EQ(run(p.log, p.out, p.err, args), 0);
	size_t n;
	struct rec *v = read_all(p.log, &n);
	CHECK_EQ(n, 6);
	/* 3.5 x max: three full pieces flagged "continued", the rest not. */
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(v[i].len, MAX_REC);
		CHECK_EQ(v[i].flags, LE_REC_TRUNCATED);
	}
	CHECK_EQ(v[3].len, MAX_REC / 2);
	CHECK_EQ(v[3].flags, 0);
	for (size_t i = 0; i < 3 * MAX_REC + MAX_REC / 2; i++)
		CHECK_EQ(v[i / MAX_REC].msg[i % MAX_REC], 'A' + (int)(i % 23));
	/* Exactly max_record_bytes is one record, unflagged. */
	CHECK_EQ(v[4].len, MAX_REC);
	CHECK_EQ(v[4].flags, 0);
	CHECK(!strcmp(v[5].msg, "tail"));
	t_rmrf(p.top);
}

TEST(passthrough_copies_lines_to_a_stdout_that_keeps_up)
{
	struct paths p;
	paths(&p);
	const char *args[] = {"--passthrough", "--", "sh", "-c",
	                      "i=0; while [ $i -lt 2000 ]; do echo line $i; "
	                      "i=$((i+1)); done; printf end",
	                      NULL};
	CHECK_EQ(run(p.log, p.out, p.err, args), 0);
	char *out = t_slurp_text(p.out), *line = out;
	for (int i = 0; i < 2000; i++) {
		char want[32];
		snprintf(want, sizeof want, "line %d\n", i);
		CHECK(!strncmp(line, want, strlen(want)));
		line += strlen(want);
	}
	CHECK(!strcmp(line, "end\n"));
	const char *json[] = {"--passthrough", "--format", "json", "--", "sh",
	                      "-c", "echo oops >&2", NULL};
	CHECK_EQ(run(p.log, p.out, p.err, json), 0);
	out = t_slurp_text(p.out);
	CHECK(strstr(out, "\"level\":\"ERROR\"") != NULL);
	CHECK(strstr(out, "\"msg\":\"oops\"") != NULL);
	t_rmrf(p.top);
}

TEST(usage_errors_exit_2_and_run_nothing)
{
	struct paths p;
	paths(&p);
	const char *none[] = {"--passthrough", NULL};
	CHECK_EQ(run(p.log, p.out, p.err, none), 2);
	const char *fmt[] = {"--format", "xml", "--", "true", NULL};
	CHECK_EQ(run(p.log, p.out, p.err, fmt), 2);
	CHECK(access(p.log, F_OK) != 0); /* no log created either */
	t_rmrf(p.top);
}

TEST(default_directory_comes_from_le_capture_dir)
{
	struct paths p;
	paths(&p);
	setenv("LE_CAPTURE_DIR", p.log, 1);
	int fd = open(p.out, O_WRONLY | O_CREAT, 0644);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		dup2(fd, 1);
		execl(cli(), "logengine", "capture", "--", "echo", "hi",
		      (char *)NULL);
		_exit(126);
	}
	close(fd);
	CHECK_EQ(finish(pid), 0);
	size_t n;
	struct rec *v = read_all(p.log, &n);
	CHECK_EQ(n, 1);
	CHECK(!strcmp(v[0].msg, "hi"));
	t_rmrf(p.top);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strncmp(argv[1], "--child-", 8))
		return child_main(argc, argv);
	T_INIT(argc, argv);
	RUN(child_writing_50mb_into_a_stalled_stdout_exits_promptly_losing_nothing);
	RUN(stderr_lines_are_tagged_error_and_stdout_lines_info);
	RUN(last_line_without_newline_and_empty_lines_are_kept);
	RUN(exit_status_and_signal_death_are_passed_through);
	RUN(sigterm_sent_to_capture_reaches_cmd_and_its_last_words_are_kept);
	RUN(line_longer_than_max_record_is_split_into_flagged_pieces_not_cut);
	RUN(passthrough_copies_lines_to_a_stdout_that_keeps_up);
	RUN(usage_errors_exit_2_and_run_nothing);
	RUN(default_directory_comes_from_le_capture_dir);
	return t_done();
}
