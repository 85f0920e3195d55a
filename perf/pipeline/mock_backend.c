/*
 * mock_backend.c -- the gateway's upstream in the log-pipeline benchmark
 * (seed 001): a tiny HTTP/1.1 server that answers every request a fixed
 * delay (1 ms) after it arrived, on keep-alive connections, from one thread.
 *
 *   usage: mock-backend [--port N] [--delay-us N]      (defaults 18081, 1000)
 *
 * One epoll loop owns everything.  A request is complete at its blank line
 * (GET, no body).  Since every request waits the same delay, answers fall
 * due in arrival order: a FIFO of (connection, generation, due) is the
 * whole timer queue, and one timerfd is armed at its head.
 *
 *   accept -> read until "\r\n\r\n" -> FIFO (due = now + delay)
 *   timerfd fires -> answer every due entry -> re-arm at the new head
 *
 * A connection that closed before its answer was due is skipped (its slot
 * generation changed).  Listens on 127.0.0.1 only; stops on SIGINT/SIGTERM.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS 4096      /* slots, indexed by fd */
#define FIFO_CAP 65536      /* requests waiting for their answer */
#define IN_CAP 8192         /* request bytes buffered per connection */
#define TAG_LISTEN UINT64_MAX
#define TAG_TIMER (UINT64_MAX - 1)
#define TAG_SIGNAL (UINT64_MAX - 2)

struct conn {
	uint32_t gen; /* bumped at close: stale FIFO entries are skipped */
	int open;
	size_t len;   /* bytes in in[] */
	char in[IN_CAP];
};

struct pending {
	int fd;
	uint32_t gen;
	uint64_t due_ns; /* CLOCK_MONOTONIC */
};

static struct conn conns[MAX_CONNS];
static struct pending fifo[FIFO_CAP];
static size_t fifo_head, fifo_len;
static uint64_t answered;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void arm(int tfd)
{
	struct itimerspec it = {0};
	if (fifo_len) {
		uint64_t due = fifo[fifo_head].due_ns;
		it.it_value.tv_sec = (time_t)(due / 1000000000u);
		it.it_value.tv_nsec = (long)(due % 1000000000u);
		if (!it.it_value.tv_sec && !it.it_value.tv_nsec)
			it.it_value.tv_nsec = 1;
	}
	timerfd_settime(tfd, TFD_TIMER_ABSTIME, &it, NULL);
}

static void conn_close(int ep, int fd)
{
	epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
	close(fd);
	conns[fd].open = 0;
	conns[fd].gen++;
	conns[fd].len = 0;
}

/* The answer: small, always the same size, keep-alive. */
static void answer(int ep, int fd)
{
	char body[96], msg[256];
	int bl = snprintf(body, sizeof body,
	                  "{\"ok\":true,\"backend\":\"mock\",\"n\":%010llu}",
	                  (unsigned long long)answered++);
	int n = snprintf(msg, sizeof msg,
	                 "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
	                 "Content-Length: %d\r\n\r\n%s",
	                 bl, body);
	/* A fresh socket's send buffer holds far more than one answer for a
	 * client that waits for each; a client that lets them pile up past
	 * that is cut off rather than buffered for. */
	if (send(fd, msg, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) != n)
		conn_close(ep, fd);
}

static void on_timer(int ep, int tfd)
{
	uint64_t t = now_ns(), ticks;
	if (read(tfd, &ticks, sizeof ticks) < 0) {
		/* spurious: re-armed below anyway */
	}
	while (fifo_len && fifo[fifo_head].due_ns <= t) {
		struct pending *p = &fifo[fifo_head];
		if (conns[p->fd].open && conns[p->fd].gen == p->gen)
			answer(ep, p->fd);
		fifo_head = (fifo_head + 1) % FIFO_CAP;
		fifo_len--;
	}
	arm(tfd);
}

/* Queue one answer per complete request in the connection's buffer. */
static void on_data(int ep, int tfd, int fd, uint64_t delay_ns)
{
	struct conn *c = &conns[fd];
	ssize_t n = recv(fd, c->in + c->len, IN_CAP - c->len, 0);
	if (n <= 0) {
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		conn_close(ep, fd);
		return;
	}
	c->len += (size_t)n;
	char *p = c->in, *end = c->in + c->len, *hdr_end;
	while ((hdr_end = memmem(p, (size_t)(end - p), "\r\n\r\n", 4))) {
		if (fifo_len == FIFO_CAP) {
			conn_close(ep, fd); /* overloaded: shed this client */
			return;
		}
		int was_empty = fifo_len == 0;
		fifo[(fifo_head + fifo_len++) % FIFO_CAP] =
		        (struct pending){fd, c->gen, now_ns() + delay_ns};
		if (was_empty)
			arm(tfd);
		p = hdr_end + 4;
	}
	c->len = (size_t)(end - p);
	memmove(c->in, p, c->len);
	if (c->len == IN_CAP)
		conn_close(ep, fd); /* a header that never ends */
}

static void on_accept(int ep, int lfd)
{
	int fd, one = 1;
	while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >=
	       0) {
		if (fd >= MAX_CONNS) {
			close(fd);
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		conns[fd].open = 1;
		conns[fd].len = 0;
		struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)fd};
		epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
	}
}

static int listen_on(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;
	struct sockaddr_in a = {.sin_family = AF_INET,
	                        .sin_port = htons((uint16_t)port),
	                        .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 1024) < 0) {
		fprintf(stderr, "mock-backend: port %d: %s\n", port,
		        strerror(errno));
		exit(1);
	}
	return fd;
}

static void add(int ep, int fd, uint64_t tag)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = tag};
	epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
}

int main(int argc, char **argv)
{
	int port = 18081;
	long delay_us = 1000;
	sigset_t ss;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--port"))
			port = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--delay-us"))
			delay_us = atol(argv[i + 1]);
		else {
			fprintf(stderr, "usage: mock-backend [--port N] "
			                "[--delay-us N]\n");
			return 2;
		}
	}
	sigemptyset(&ss);
	sigaddset(&ss, SIGINT);
	sigaddset(&ss, SIGTERM);
	sigprocmask(SIG_BLOCK, &ss, NULL);
	signal(SIGPIPE, SIG_IGN);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	int lfd = listen_on(port);
	int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	int sfd = signalfd(-1, &ss, SFD_CLOEXEC);
	add(ep, lfd, TAG_LISTEN);
	add(ep, tfd, TAG_TIMER);
	add(ep, sfd, TAG_SIGNAL);
	fprintf(stderr, "mock-backend: listening on 127.0.0.1:%d, delay %ld us\n",
	        port, delay_us);
	for (;;) {
		struct epoll_event ev[64];
		int n = epoll_wait(ep, ev, 64, -1);
		for (int i = 0; i < n; i++) {
			uint64_t tag = ev[i].data.u64;
			if (tag == TAG_LISTEN)
				on_accept(ep, lfd);
			else if (tag == TAG_TIMER)
				on_timer(ep, tfd);
			else if (tag == TAG_SIGNAL)
				goto out;
			else
				on_data(ep, tfd, (int)tag,
				        (uint64_t)delay_us * 1000u);
		}
	}
out:
	fprintf(stderr, "mock-backend: %llu answers\n",
	        (unsigned long long)answered);
	return 0;
}
