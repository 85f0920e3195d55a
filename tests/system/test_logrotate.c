/*
 * test_logrotate.c -- the stream sink under a real logrotate (Debian's):
 * `create` renames the file and makes a new one, `postrotate` sends
 * SIGHUP, whose handler calls le_reopen.  A producer writes numbered lines
 * all along; read back oldest file first, they are every number once, in
 * order: none lost, none twice, across every rotation.
 */
#include "harness.h"

#include <pthread.h>
#include <stdatomic.h>

#include "logengine.h"

static char dir[256];
static le_engine *eng;
static _Atomic int producing;

static const char *logrotate_bin(void)
{
	const char *p = getenv("LOGROTATE");
	return p && *p ? p : t_need_tool("logrotate");
}

static void on_hup(int sig)
{
	(void)sig;
	le_reopen(eng); /* async-signal-safe: sets a flag */
}

static void *produce(void *arg)
{
	long *n = arg;
	for (long i = 0; atomic_load(&producing); i++) {
		/* LE_OVERFLOW_BLOCK: every line is accepted */
		if (le_logf(eng, LE_INFO, "line %ld", i) != 0)
			_exit(5);
		*n = i + 1;
		if (i % 256 == 0)
			usleep(200);
	}
	return NULL;
}

/* Run logrotate once, forced, with its own state file. */
static void rotate(const char *conf, const char *state)
{
	char cmd[2048];
	snprintf(cmd, sizeof cmd, "%s -f -s %s %s", logrotate_bin(), state,
	         conf);
	int st = system(cmd);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "  %s: exit %d\n", cmd, WEXITSTATUS(st));
		CHECK(0);
	}
}

/* Append the numbers of path's lines ("line N") to seq. */
static void read_lines(const char *path, long *seq, long *n, long max)
{
	size_t len;
	char *b = (char *)t_slurp(path, &len);
	if (!b)
		return;
	for (char *l = strtok(b, "\n"); l; l = strtok(NULL, "\n")) {
		if (strncmp(l, "line ", 5) != 0)
			fprintf(stderr, "  %s: \"%s\"\n", path, l);
		CHECK(strncmp(l, "line ", 5) == 0);
		CHECK(*n < max);
		seq[(*n)++] = atol(l + 5);
	}
	free(b);
}

TEST(logrotate_create_with_sighup_loses_and_repeats_no_line)
{
	enum { ROTATIONS = 4 };
	t_need("syslog"); /* logrotate */
	t_tmpdir(dir);
	char path[300], conf[300], state[300], text[1024];
	snprintf(path, sizeof path, "%s/app.log", dir);
	snprintf(conf, sizeof conf, "%s/logrotate.conf", dir);
	snprintf(state, sizeof state, "%s/logrotate.state", dir);
	snprintf(text, sizeof text,
	         "%s {\n  create 0644\n  rotate %d\n  missingok\n"
	         "  postrotate\n    kill -HUP %d\n  endscript\n}\n",
	         path, ROTATIONS + 2, (int)getpid());
	CHECK(t_spit(conf, text, strlen(text)) == 0);
	chmod(conf, 0644);

	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_hup;
	sa.sa_flags = SA_RESTART;
	CHECK(sigaction(SIGHUP, &sa, NULL) == 0);

	le_config c;
	le_config_init(&c);
	c.store = 0;
	c.stream_path = path;
	c.stream_format = LE_STREAM_RAW;
	c.overflow = LE_OVERFLOW_BLOCK;
	c.flush_ms = 5;
	CHECK_RC(le_open(&eng, &c));

	long produced = 0;
	pthread_t t;
	atomic_store(&producing, 1);
	CHECK(pthread_create(&t, NULL, produce, &produced) == 0);
	for (int r = 0; r < ROTATIONS; r++) {
		usleep(150000);
		rotate(conf, state);
	}
	usleep(150000);
	atomic_store(&producing, 0);
	pthread_join(t, NULL);
	le_stats st;
	CHECK_RC(le_close_stats(eng, &st));
	CHECK_EQ(st.stream_dropped, 0);
	CHECK_EQ(st.stream_lines, produced);
	CHECK_EQ(st.stream_reopens, ROTATIONS);

	/* oldest first: app.log.N .. app.log.1, then app.log */
	long max = produced + 16, n = 0;
	long *seq = malloc(sizeof *seq * (size_t)max);
	CHECK(seq);
	int files = 0;
	for (int k = ROTATIONS + 2; k >= 0; k--) {
		char p[320];
		if (k)
			snprintf(p, sizeof p, "%s.%d", path, k);
		else
			snprintf(p, sizeof p, "%s", path);
		if (access(p, F_OK) != 0)
			continue;
		files++;
		long before = n;
		read_lines(p, seq, &n, max);
		CHECK(n > before); /* each file got some of the lines */
	}
	CHECK_EQ(files, ROTATIONS + 1);
	CHECK_EQ(n, produced);
	for (long i = 0; i < n; i++)
		if (seq[i] != i) {
			fprintf(stderr, "  line %ld is %ld\n", i, seq[i]);
			CHECK(0);
		}
	free(seq);
	t_rmrf(dir);
}

/* Without a stream_path there is nothing to reopen: a no-op, safe to
 * call from a handler set up before the engine has a stream. */
TEST(reopen_without_a_stream_path_does_nothing)
{
	le_config c;
	le_config_init(&c);
	c.dir = t_tmpdir(dir);
	le_engine *e;
	CHECK_RC(le_open(&e, &c));
	CHECK_EQ(le_reopen(e), 0);
	CHECK_EQ(le_reopen(NULL), LE_EINVAL);
	le_stats st;
	CHECK_RC(le_close_stats(e, &st));
	CHECK_EQ(st.stream_reopens, 0);
	t_rmrf(dir);
}

TEST(bad_stream_path_is_refused_naming_it)
{
	le_config c;
	le_config_init(&c);
	c.store = 0;
	c.stream_path = "/nonexistent-dir/x.log";
	le_engine *e = NULL;
	CHECK_EQ(le_open(&e, &c), -ENOENT);
	CHECK(strstr(le_errmsg(), "stream_path: cannot open "
	                          "/nonexistent-dir/x.log") != NULL);
	c.stream_fd = 1;
	CHECK_EQ(le_open(&e, &c), LE_EINVAL);
	CHECK(strstr(le_errmsg(), "stream_path: set with stream_fd") != NULL);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	RUN(logrotate_create_with_sighup_loses_and_repeats_no_line);
	RUN(reopen_without_a_stream_path_does_nothing);
	RUN(bad_stream_path_is_refused_naming_it);
	return t_done();
}
