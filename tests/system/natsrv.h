/*
 * natsrv.h -- real nats-server processes for the system tests and the
 * forwarding benchmark: a JetStream server (or a cluster of them) on
 * 127.0.0.1, on ports picked free at run time, with a store directory of
 * its own; started, paused, restarted and stopped by the caller.  And
 * running the logengine tool as a child with a deadline.
 *
 *   t_nats n;
 *   t_nats_start(&n, "max_payload: 16MB\n");   extra config lines
 *   ... n.url ...
 *   t_nats_stop(&n);
 */
#ifndef LE_TEST_NATSRV_H
#define LE_TEST_NATSRV_H

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nats/nats.h>

#include "../tool.h"

typedef struct t_nats {
	pid_t pid;
	int port, cport;       /* client and cluster ports */
	char dir[256];         /* config, log and JetStream store */
	char conf[300];
	char url[64];
} t_nats;

static inline double t_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline void t_sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* A TCP port nobody listens on now (the kernel's pick). */
static inline int t_free_port(void)
{
	struct sockaddr_in a;
	socklen_t len = sizeof a;
	int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;

	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

static inline int t_port_open(int port)
{
	struct sockaddr_in a;
	int fd = socket(AF_INET, SOCK_STREAM, 0), ok;

	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
	close(fd);
	return ok;
}

/* Prepare n (ports, directory, URL) without starting it. */
static inline void t_nats_init(t_nats *n, const char *base)
{
	memset(n, 0, sizeof *n);
	n->port = t_free_port();
	n->cport = t_free_port();
	if (snprintf(n->dir, sizeof n->dir, "%s/nats-%d", base, n->port) >=
	            (int)sizeof n->dir ||
	    snprintf(n->conf, sizeof n->conf, "%s/server.conf", n->dir) >=
	            (int)sizeof n->conf)
		abort();
	mkdir(n->dir, 0755);
	snprintf(n->url, sizeof n->url, "nats://127.0.0.1:%d", n->port);
}

/* Write n's configuration: JetStream in n->dir/js, then `extra`. */
static inline int t_nats_conf(t_nats *n, const char *extra)
{
	FILE *f = fopen(n->conf, "w");
	if (!f)
		return -1;
	fprintf(f, "listen: 127.0.0.1:%d\nserver_name: s%d\n"
	        "jetstream { store_dir: \"%s/js\" }\n%s", n->port, n->port,
	        n->dir, extra ? extra : "");
	fclose(f);
	return 0;
}

/* Start (or restart) n from its configuration; wait until it takes
 * connections.  @return 0, -1. */
static inline int t_nats_run(t_nats *n)
{
	char log[300];
	/* Debian's is /usr/sbin/nats-server: off a normal user's PATH. */
	const char *bin = t_which("nats-server");
	if (!bin) {
		fprintf(stderr, "  nats-server: not on PATH nor in %s "
		        "(scripts/deps.sh nats)\n", T_SBIN_PATH);
		return -1;
	}
	if (snprintf(log, sizeof log, "%s/server.log", n->dir) >=
	    (int)sizeof log)
		abort();
	n->pid = fork();
	if (n->pid == 0) {
		/* A test that fails dies at once: its servers with it. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execl(bin, "nats-server", "-c", n->conf, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 200; i++) {
		if (t_port_open(n->port))
			return 0;
		if (waitpid(n->pid, NULL, WNOHANG) == n->pid) {
			n->pid = 0;
			return -1;
		}
		t_sleep_ms(25);
	}
	return -1;
}

/* Wait until JetStream answers on url (a cluster elects a leader first).
 * @return 0, -1. */
static inline int t_js_ready(const char *url, int timeout_ms)
{
	double end = t_now() + timeout_ms / 1000.0;
	int ok = 0;

	while (!ok && t_now() < end) {
		natsConnection *nc = NULL;
		jsCtx *js = NULL;
		jsAccountInfo *ai = NULL;
		if (natsConnection_ConnectTo(&nc, url) == NATS_OK &&
		    natsConnection_JetStream(&js, nc, NULL) == NATS_OK &&
		    js_GetAccountInfo(&ai, js, NULL, NULL) == NATS_OK)
			ok = 1;
		jsAccountInfo_Destroy(ai);
		jsCtx_Destroy(js);
		natsConnection_Destroy(nc);
		if (!ok)
			t_sleep_ms(100);
	}
	return ok ? 0 : -1;
}

static inline int t_nats_start(t_nats *n, const char *base, const char *extra)
{
	t_nats_init(n, base);
	if (t_nats_conf(n, extra) < 0 || t_nats_run(n) < 0)
		return -1;
	return t_js_ready(n->url, 10000);
}

/* Stop n (SIGTERM, then SIGKILL after 5 s). */
static inline void t_nats_stop(t_nats *n)
{
	if (n->pid <= 0)
		return;
	kill(n->pid, SIGCONT);
	kill(n->pid, SIGTERM);
	for (int i = 0; i < 200; i++) {
		if (waitpid(n->pid, NULL, WNOHANG) == n->pid) {
			n->pid = 0;
			return;
		}
		t_sleep_ms(25);
	}
	kill(n->pid, SIGKILL);
	waitpid(n->pid, NULL, 0);
	n->pid = 0;
}

/* Three servers routed to each other (cluster "le"), JetStream on each. */
static inline int t_nats_cluster(t_nats n[3], const char *base)
{
	char extra[512];

	for (int i = 0; i < 3; i++)
		t_nats_init(&n[i], base);
	for (int i = 0; i < 3; i++) {
		snprintf(extra, sizeof extra,
		         "cluster { name: le, listen: 127.0.0.1:%d, routes: ["
		         "nats-route://127.0.0.1:%d, nats-route://127.0.0.1:%d"
		         "] }\n", n[i].cport, n[(i + 1) % 3].cport,
		         n[(i + 2) % 3].cport);
		if (t_nats_conf(&n[i], extra) < 0 || t_nats_run(&n[i]) < 0)
			return -1;
	}
	return t_js_ready(n[0].url, 30000);
}

/* "u1,u2,u3" of a cluster, in buf (256 bytes). */
static inline const char *t_nats_urls(const t_nats n[3], char *buf)
{
	snprintf(buf, 256, "%s,%s,%s", n[0].url, n[1].url, n[2].url);
	return buf;
}

/* ---- the tool as a child ---- */

/* Start argv (argv[0] a path) with stdout to /dev/null and stderr to
 * errfile (NULL: inherited). */
static inline pid_t t_spawn(const char *errfile, char *const argv[])
{
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int nul = open("/dev/null", O_RDWR);
		dup2(nul, 0);
		dup2(nul, 1);
		if (errfile) {
			int fd = open(errfile, O_WRONLY | O_CREAT | O_TRUNC, 0644);
			if (fd >= 0)
				dup2(fd, 2);
		}
		execv(argv[0], argv);
		_exit(127);
	}
	return pid;
}

/* Wait for pid at most timeout_s (then SIGKILL).  @return its exit
 * status, 128 + signal when killed, -1 on timeout; *ru its usage. */
static inline int t_wait(pid_t pid, double timeout_s, struct rusage *ru)
{
	struct rusage dummy;
	double end = t_now() + timeout_s;
	int st;

	if (!ru)
		ru = &dummy;
	for (;;) {
		pid_t r = wait4(pid, &st, WNOHANG, ru);
		if (r == pid)
			break;
		if (t_now() > end) {
			kill(pid, SIGKILL);
			wait4(pid, &st, 0, ru);
			return -1;
		}
		t_sleep_ms(5);
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* CPU seconds (user + system) pid has used so far, from /proc. */
static inline double t_proc_cpu(pid_t pid)
{
	char path[64], buf[1024];
	unsigned long ut = 0, stt = 0;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
	                 "%lu %lu", &ut, &stt) != 2)
		return -1;
	return (double)(ut + stt) / (double)sysconf(_SC_CLK_TCK);
}

/* Resident set of pid now, KiB (VmRSS), or -1. */
static inline long t_proc_rss_kib(pid_t pid)
{
	char path[64], line[256];
	long v = -1;

	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "VmRSS: %ld", &v) == 1)
			break;
	fclose(f);
	return v;
}

/* Messages in stream `name` at url (-1 when it cannot be read). */
static inline long t_stream_msgs(const char *url, const char *name)
{
	natsConnection *nc = NULL;
	jsCtx *js = NULL;
	jsStreamInfo *si = NULL;
	long n = -1;

	if (natsConnection_ConnectTo(&nc, url) == NATS_OK &&
	    natsConnection_JetStream(&js, nc, NULL) == NATS_OK &&
	    js_GetStreamInfo(&si, js, name, NULL, NULL) == NATS_OK)
		n = (long)si->State.Msgs;
	jsStreamInfo_Destroy(si);
	jsCtx_Destroy(js);
	natsConnection_Destroy(nc);
	return n;
}

/* Whether durable consumer `durable` of stream `name` at url has taken
 * everything: nothing pending, nothing unacknowledged, and (clustered)
 * a leader running it, not only its name known.  @return 1, 0 not
 * (yet), -1 it cannot be read. */
static inline int t_consumer_done(const char *url, const char *name,
                                  const char *durable, int clustered)
{
	natsConnection *nc = NULL;
	jsCtx *js = NULL;
	jsConsumerInfo *ci = NULL;
	int done = -1;

	if (natsConnection_ConnectTo(&nc, url) == NATS_OK &&
	    natsConnection_JetStream(&js, nc, NULL) == NATS_OK &&
	    js_GetConsumerInfo(&ci, js, name, durable, NULL, NULL) == NATS_OK)
		done = ci->NumPending == 0 && ci->NumAckPending == 0 &&
		       (!clustered || (ci->Cluster && ci->Cluster->Leader &&
		                       *ci->Cluster->Leader));
	jsConsumerInfo_Destroy(ci);
	jsCtx_Destroy(js);
	natsConnection_Destroy(nc);
	return done;
}

/* Delivered and acknowledged messages of durable `durable` (its ack
 * floor's stream sequence), or -1 when it cannot be read. */
static inline long t_consumer_acked(const char *url, const char *name,
                                    const char *durable)
{
	natsConnection *nc = NULL;
	jsCtx *js = NULL;
	jsConsumerInfo *ci = NULL;
	long n = -1;

	if (natsConnection_ConnectTo(&nc, url) == NATS_OK &&
	    natsConnection_JetStream(&js, nc, NULL) == NATS_OK &&
	    js_GetConsumerInfo(&ci, js, name, durable, NULL, NULL) == NATS_OK)
		n = (long)ci->AckFloor.Stream;
	jsConsumerInfo_Destroy(ci);
	jsCtx_Destroy(js);
	natsConnection_Destroy(nc);
	return n;
}

#endif
