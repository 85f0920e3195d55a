/*
 * capture.c -- logengine capture -- CMD: log a program's stdout and stderr.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

/*
 * capture: run CMD with its stdout and stderr on two pipes, and turn each
 * line into a record.  One thread polls the two pipes and a signalfd, so
 * it reads CMD's output as fast as CMD writes it whatever happens to our
 * own stdout:
 *
 *   CMD stdout --pipe--+                      +--> segment store (DIR),
 *   CMD stderr --pipe--+--> poll, split      |    LE_OVERFLOW_BLOCK
 *   signals --signalfd-+    lines, le_write --+--> stream sink on fd 1
 *                                                  (--passthrough): async,
 *                                                  drops when stdout stalls
 *
 * The store's queue blocks when full (nothing is lost while the disk keeps
 * up); only this reader waits then, and CMD only once its pipe is full too.
 * A stalled stdout never reaches this thread: the stream sink drops and
 * counts lines instead of waiting.  The signals we pass on (and SIGCHLD)
 * stay blocked from before CMD starts until we exit and are read from the
 * signalfd: no handler runs, so none can be lost between a check and a
 * poll, and none reaches the engine's threads (they block every signal).  Memory is fixed at start: one buffer
 * per pipe (max_record_bytes + 1 + one read) and the engine's queue.
 */

static const char capture_usage[] =
	"usage: logengine capture [--dir DIR] [--passthrough]\n"
	"                         [--format raw|text|json] [--verbose] -- CMD "
	"[ARGS...]\n"
	"\n"
	"Run CMD, reading its stdout and stderr continuously so that CMD never\n"
	"blocks on its own output, and store each line as a record in DIR\n"
	"(default: $LE_CAPTURE_DIR, else ./capture-logs; created if missing).\n"
	"The level is the tag: stdout lines are INFO (route key 0), stderr\n"
	"lines ERROR (route key 1).  A last line without a newline is still a\n"
	"record.  A line longer than max_record_bytes (64 KiB) is split into\n"
	"pieces of that size so that nothing is lost: every piece but the last\n"
	"carries the {truncated} flag, meaning \"continued in the next record\n"
	"of the same level\".\n"
	"\n"
	"  --dir DIR       the log directory\n"
	"  --passthrough   also copy the lines to stdout, asynchronously: when\n"
	"                  stdout is slow or stalled, lines are dropped and\n"
	"                  counted there (\"N records dropped\"), never waited\n"
	"                  for.  The store is not affected.  Both streams go\n"
	"                  to stdout; use text or json to see the level.\n"
	"  --format F      passthrough line format: raw (the line, default),\n"
	"                  text (timestamp, level, line) or json\n"
	"  --verbose       print a one-line summary on stderr at the end\n"
	"\n"
	"The store never drops: when the disk falls behind, capture waits for\n"
	"it (and CMD waits once its pipe is full).  SIGINT, SIGTERM, SIGHUP,\n"
	"SIGQUIT, SIGUSR1 and SIGUSR2 sent to capture are passed on to CMD\n"
	"(not those a terminal sends to the whole process group: CMD has its\n"
	"own); capture keeps reading until CMD exits, then until its pipes are\n"
	"closed or idle for 200 ms.\n"
	"\n"
	"exit status: CMD's; 128+N when CMD was killed by signal N; 2 usage\n"
	"error; 125 the log could not be opened (CMD not run); 126 CMD could\n"
	"not be run; 127 CMD not found.\n";

#define CAPTURE_EXIT_FAILED 125
#define CAPTURE_READ_BYTES (64u << 10) /* largest single read() */
#define CAPTURE_PIPE_BYTES (1u << 20)  /* asked of the kernel per pipe */
#define CAPTURE_IDLE_MS 200 /* after CMD exits: pipes idle this long = done */

/* Signals passed on to CMD. */
static const int capture_fwd[] = {SIGINT, SIGTERM, SIGHUP,
                                  SIGQUIT, SIGUSR1, SIGUSR2};
#define CAPTURE_NFWD (sizeof capture_fwd / sizeof capture_fwd[0])

struct capture_src {    /* one of CMD's output pipes; owned by the loop */
	int fd;             /* read end; -1 after EOF */
	int level;          /* LE_INFO (stdout) or LE_ERROR (stderr) */
	uint64_t key;       /* route key: 0 stdout, 1 stderr */
	unsigned char *buf; /* the unfinished line, then room for one read */
	size_t len, cap;    /* bytes held; capacity */
	uint64_t lines;     /* records written (pieces of long lines too) */
	uint64_t split;     /* of those, pieces flagged "continued" */
	uint64_t bytes;     /* bytes read */
};

struct capture {
	const char *dir;
	int passthrough, format, verbose;
	char **cmd;            /* argv of CMD, NULL-terminated */
	le_engine *e;
	uint32_t max_rec;      /* le_config.max_record_bytes */
	struct capture_src src[2];
	pid_t child;
	int reaped, wstatus;   /* waitpid result once CMD is gone */
	uint64_t lost;         /* le_write refusals (should stay 0) */
};

/* @return 0, or -1 after a usage message. */
static int capture_parse(int argc, char **argv, struct capture *c)
{
	const char *v;
	int m, i;

	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--")) {
			i++;
			break;
		} else if (!strcmp(a, "--passthrough") || !strcmp(a, "-p")) {
			c->passthrough = 1;
		} else if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) {
			c->verbose = 1;
		} else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			fputs(capture_usage, stdout);
			return 1;
		} else if ((m = opt_value(argv, argc, &i, "-d", "--dir", &v))) {
			if (m < 0)
				return -1;
			c->dir = v;
		} else if ((m = opt_value(argv, argc, &i, "-f", "--format",
		                          &v))) {
			if (m < 0)
				return -1;
			if (!strcmp(v, "raw"))
				c->format = LE_STREAM_RAW;
			else if (!strcmp(v, "text"))
				c->format = LE_STREAM_TEXT;
			else if (!strcmp(v, "json"))
				c->format = LE_STREAM_JSON;
			else
				return usage_error("unknown format '%s'", v);
		} else {
			return usage_error("capture: unknown option '%s'", a);
		}
	}
	if (i >= argc)
		return usage_error("%s: missing CMD (capture [OPTIONS] -- CMD)",
		                   argv[0]);
	c->cmd = argv + i;
	return 0;
}

/* mkdir -p.  @return 0 or -errno. */
static int capture_mkdirs(const char *dir)
{
	char p[4096];
	size_t n = strlen(dir);

	if (n == 0 || n >= sizeof p)
		return -ENAMETOOLONG;
	memcpy(p, dir, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (p[i] != '/' && p[i] != '\0')
			continue;
		char keep = p[i];
		p[i] = '\0';
		if (mkdir(p, 0750) < 0 && errno != EEXIST)
			return -errno;
		p[i] = keep;
	}
	return 0;
}

/* Open the store (and the stream sink on stdout for --passthrough).
 * @return 0 or -1 after a message. */
static int capture_open(struct capture *c)
{
	le_config cfg;

	le_config_init(&cfg);
	cfg.dir = c->dir;
	cfg.create_dir = 1;
	cfg.shards = 1; /* one sequence: the order in which lines were read */
	cfg.overflow = LE_OVERFLOW_BLOCK;     /* the store loses nothing */
	cfg.oversize = LE_OVERSIZE_TRUNCATE;  /* how pieces are flagged */
	if (c->passthrough) {
		cfg.stream_fd = 1; /* async: drops, never blocks */
		cfg.stream_format = c->format;
	}
	int rc = capture_mkdirs(c->dir);
	if (rc == 0)
		rc = le_open(&c->e, &cfg);
	if (rc < 0) {
		/* le_errmsg names the field or file and says why: the same
		 * fact as le_strerror, so one or the other. */
		if (*le_errmsg())
			fprintf(stderr, "%s capture: %s\n", prog, le_errmsg());
		else
			fprintf(stderr, "%s capture: %s: %s\n", prog, c->dir,
			        le_strerror(rc));
		return -1;
	}
	c->max_rec = cfg.max_record_bytes;
	return 0;
}

/* One record.  A piece of a longer line is handed over one byte too long
 * so that the engine cuts it to max_record_bytes and flags it
 * LE_REC_TRUNCATED: the public API's only flag, used as "continued". */
static void capture_emit(struct capture *c, struct capture_src *s,
                         const unsigned char *p, size_t len, int continued)
{
	int rc = le_write(c->e, s->key, s->level, p, continued ? len + 1 : len);
	if (rc < 0)
		c->lost++;
	s->lines++;
	s->split += (uint64_t)continued;
}

/* Records for every complete line in s->buf, and pieces of a line longer
 * than max_rec; keep the rest.  At EOF the rest is a record too. */
static void capture_lines(struct capture *c, struct capture_src *s, int eof)
{
	unsigned char *p = s->buf, *end = s->buf + s->len, *nl;

	while ((nl = memchr(p, '\n', (size_t)(end - p))) != NULL) {
		while ((size_t)(nl - p) > c->max_rec) {
			capture_emit(c, s, p, c->max_rec, 1);
			p += c->max_rec;
		}
		capture_emit(c, s, p, (size_t)(nl - p), 0);
		p = nl + 1;
	}
	while ((size_t)(end - p) > c->max_rec) {
		capture_emit(c, s, p, c->max_rec, 1); /* needs p[max_rec] */
		p += c->max_rec;
	}
	if (eof && p < end) {
		capture_emit(c, s, p, (size_t)(end - p), 0);
		p = end;
	}
	s->len = (size_t)(end - p);
	memmove(s->buf, p, s->len);
}

/* Read what the pipe has.  EOF or an error closes it. */
static void capture_read(struct capture *c, struct capture_src *s)
{
	size_t room = s->cap - s->len;
	if (room > CAPTURE_READ_BYTES)
		room = CAPTURE_READ_BYTES;
	ssize_t n = read(s->fd, s->buf + s->len, room);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		close(s->fd);
		s->fd = -1;
		capture_lines(c, s, 1);
		return;
	}
	s->len += (size_t)n;
	s->bytes += (uint64_t)n;
	capture_lines(c, s, 0);
}

static void capture_reap(struct capture *c)
{
	int st;
	if (!c->reaped && waitpid(c->child, &st, WNOHANG) == c->child) {
		c->reaped = 1;
		c->wstatus = st;
	}
}

/* Empty the signalfd: pass signals on, reap CMD.  A signal from the
 * kernel (a terminal's ^C, ^\, hangup) went to the whole foreground
 * process group, CMD included, so it is not passed on a second time. */
static void capture_signals(struct capture *c, int sfd)
{
	struct signalfd_siginfo si[8];
	ssize_t n;

	while ((n = read(sfd, si, sizeof si)) > 0)
		for (size_t i = 0; i < (size_t)n / sizeof si[0]; i++)
			if (si[i].ssi_signo != SIGCHLD &&
			    si[i].ssi_code != SI_KERNEL && !c->reaped)
				kill(c->child, (int)si[i].ssi_signo);
	capture_reap(c);
}

/* poll until CMD has exited and its pipes are closed (or idle). */
static void capture_loop(struct capture *c, int sig_fd)
{
	for (;;) {
		struct pollfd pfd[3];
		struct capture_src *who[3];
		nfds_t n = 0;

		capture_reap(c);
		for (int i = 0; i < 2; i++)
			if (c->src[i].fd >= 0) {
				who[n] = &c->src[i];
				pfd[n++] = (struct pollfd){c->src[i].fd, POLLIN, 0};
			}
		if (n == 0 && c->reaped)
			break;
		who[n] = NULL;
		pfd[n++] = (struct pollfd){sig_fd, POLLIN, 0};
		int r = poll(pfd, n, c->reaped ? CAPTURE_IDLE_MS : -1);
		if (r == 0)
			break; /* CMD is gone and whoever holds its pipes is quiet */
		if (r < 0)
			continue; /* EINTR (a stop and continue) */
		for (nfds_t i = 0; i < n; i++) {
			if (!pfd[i].revents)
				continue;
			if (who[i])
				capture_read(c, who[i]);
			else
				capture_signals(c, sig_fd);
		}
	}
	for (int i = 0; i < 2; i++)
		if (c->src[i].fd >= 0) {
			close(c->src[i].fd);
			c->src[i].fd = -1;
			capture_lines(c, &c->src[i], 1);
		}
}

/* Block SIGCHLD and the signals we pass on, for the rest of our life, and
 * open a signalfd that reads them.  A signal sent before CMD exists waits
 * there for it.  *old is the mask we started with, which CMD gets.
 * @return the signalfd, or -errno. */
static int capture_signals_on(sigset_t *old)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	for (size_t i = 0; i < CAPTURE_NFWD; i++)
		sigaddset(&set, capture_fwd[i]);
	if (sigprocmask(SIG_BLOCK, &set, old) < 0)
		return -errno;
	int fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	return fd < 0 ? -errno : fd;
}

/* Start CMD with stdout and stderr on fresh pipes.  CMD gets the default
 * action for every signal we read or ignore (SIGPIPE included) and the
 * signal mask we started with.  @return 0, or an exit status (126, 127)
 * after a message. */
static int capture_spawn(struct capture *c, const sigset_t *mask)
{
	int p[2][2];
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t def;

	for (int i = 0; i < 2; i++)
		if (pipe2(p[i], O_CLOEXEC) < 0) {
			fprintf(stderr, "%s capture: pipe: %s\n", prog,
			        strerror(errno));
			return CAPTURE_EXIT_FAILED;
		}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[0][1], 1);
	posix_spawn_file_actions_adddup2(&fa, p[1][1], 2);
	posix_spawnattr_init(&at);
	sigemptyset(&def);
	sigaddset(&def, SIGPIPE);
	sigaddset(&def, SIGCHLD);
	for (size_t i = 0; i < CAPTURE_NFWD; i++)
		sigaddset(&def, capture_fwd[i]);
	posix_spawnattr_setsigdefault(&at, &def);
	posix_spawnattr_setsigmask(&at, mask);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGDEF |
	                                      POSIX_SPAWN_SETSIGMASK);
	int rc = posix_spawnp(&c->child, c->cmd[0], &fa, &at, c->cmd, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	close(p[0][1]);
	close(p[1][1]);
	for (int i = 0; i < 2; i++) {
		c->src[i].fd = p[i][0];
		/* A deeper pipe absorbs bursts; best effort, may be capped. */
		fcntl(p[i][0], F_SETPIPE_SZ, (int)CAPTURE_PIPE_BYTES);
	}
	if (rc != 0) {
		fprintf(stderr, "%s capture: %s: %s\n", prog, c->cmd[0],
		        strerror(rc));
		return rc == ENOENT ? 127 : 126;
	}
	return 0;
}

/* CMD's wait status as our exit status: its code, or 128 + signal. */
static int capture_status(const struct capture *c)
{
	if (WIFEXITED(c->wstatus))
		return WEXITSTATUS(c->wstatus);
	if (WIFSIGNALED(c->wstatus))
		return 128 + WTERMSIG(c->wstatus);
	return CAPTURE_EXIT_FAILED;
}

/* Close the engine; the summary (--verbose) and any loss always. */
static void capture_close(struct capture *c, int status, double secs)
{
	le_stats st;

	/* The flush bounds the wait for a slow disk (le_close still writes
	 * everything, and the counts below are taken after it has): the
	 * passthrough lines a stalled stdout never took (it gets a second)
	 * are among the passthrough's dropped, stream_dropped. */
	int rc = le_flush(c->e, 30000);
	if (rc == LE_ETIMEDOUT)
		rc = 0;
	int crc = le_close_stats(c->e, &st);
	c->e = NULL;
	if (rc >= 0)
		rc = crc;
	uint64_t recs = c->src[0].lines + c->src[1].lines;
	if (c->verbose)
		fprintf(stderr,
		        "%s capture: %s: exit %d after %.3f s; stdout %" PRIu64
		        " lines, stderr %" PRIu64 " lines, %" PRIu64
		        " bytes, %" PRIu64 " split; store %s: %" PRIu64
		        " records, %" PRIu64 " dropped, queue hwm %" PRIu64
		        " records / %" PRIu64 " bytes; passthrough: %" PRIu64
		        " lines, %" PRIu64 " dropped\n",
		        prog, c->cmd[0], status, secs,
		        c->src[0].lines, c->src[1].lines,
		        c->src[0].bytes + c->src[1].bytes,
		        c->src[0].split + c->src[1].split, c->dir, recs - c->lost,
		        st.dropped + c->lost, st.queue_hwm_records,
		        st.queue_hwm_bytes, st.stream_lines, st.stream_dropped);
	if (rc < 0 || st.dropped || c->lost)
		fprintf(stderr, "%s capture: %s: records may be missing: %s "
		        "(%" PRIu64 " dropped, %" PRIu64 " refused)\n", prog,
		        c->dir, rc < 0 ? le_strerror(rc) : "dropped",
		        st.dropped, c->lost);
}

/* fds 0-2 open, so that our pipes never land on them. */
static void capture_std_fds(void)
{
	for (int fd = 0; fd < 3; fd++)
		if (fcntl(fd, F_GETFD) < 0 && errno == EBADF)
			open("/dev/null", O_RDWR);
}

int cmd_capture(int argc, char **argv)
{
	struct capture c;
	sigset_t old;
	struct timespec t0, t1;
	int status, sig_fd;

	memset(&c, 0, sizeof c);
	c.src[0] = (struct capture_src){.fd = -1, .level = LE_INFO, .key = 0};
	c.src[1] = (struct capture_src){.fd = -1, .level = LE_ERROR, .key = 1};
	c.dir = getenv("LE_CAPTURE_DIR");
	if (!c.dir || !*c.dir)
		c.dir = "capture-logs";
	int pr = capture_parse(argc, argv, &c);
	if (pr != 0)
		return pr > 0 ? out_finish(0) : EXIT_USAGE;
	capture_std_fds();
	if (capture_open(&c) < 0)
		return CAPTURE_EXIT_FAILED;
	for (int i = 0; i < 2; i++) {
		c.src[i].cap = (size_t)c.max_rec + 1 + CAPTURE_READ_BYTES;
		c.src[i].buf = malloc(c.src[i].cap);
		if (!c.src[i].buf) {
			fprintf(stderr, "%s capture: out of memory\n", prog);
			le_close(c.e);
			return CAPTURE_EXIT_FAILED;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	sig_fd = capture_signals_on(&old);
	if (sig_fd < 0) {
		fprintf(stderr, "%s capture: signalfd: %s\n", prog,
		        strerror(-sig_fd));
		status = CAPTURE_EXIT_FAILED;
	} else if ((status = capture_spawn(&c, &old)) == 0) {
		capture_loop(&c, sig_fd);
		status = capture_status(&c);
	}
	if (sig_fd >= 0)
		close(sig_fd);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	capture_close(&c, status, (double)(t1.tv_sec - t0.tv_sec) +
	                                  (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	free(c.src[0].buf);
	free(c.src[1].buf);
	return status;
}

