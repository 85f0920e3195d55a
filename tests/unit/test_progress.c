/*
 * test_progress.c -- the progress line of long commands (tools/progress.c):
 * what it says, that it is drawn in place and wiped on a terminal, and
 * that nothing at all is written anywhere else.
 */
#include "harness.h"

#include <fcntl.h>
#include <poll.h>

#include "progress.h"

TEST(progress_line_says_records_bytes_rate_and_time_left)
{
	char b[256];
	progress_format(b, sizeof b, "verify", 1234567, 150000000, 2000000000,
	                3.0);
	CHECK_STR_EQ(b, "verify: 1.2M records, 150 MB of 2.0 GB (8%), "
	                "50 MB/s, 0:37 left");
	progress_format(b, sizeof b, "cat", 999, 4096, 0, 2.0);
	CHECK_STR_EQ(b, "cat: 999 records, 4.1 KB, 2.0 KB/s");
	progress_format(b, sizeof b, "verify", 10, 100, 1000, 0);
	CHECK_STR_EQ(b, "verify: 10 records, 100 B of 1.0 KB (10%), 0 B/s");
}

/* Everything fd has to read now. */
static size_t slurp_fd(int fd, char *buf, size_t cap)
{
	size_t n = 0;
	struct pollfd p = {fd, POLLIN, 0};
	while (n + 1 < cap && poll(&p, 1, 100) == 1) {
		ssize_t k = read(fd, buf + n, cap - 1 - n);
		if (k <= 0)
			break;
		n += (size_t)k;
	}
	buf[n] = '\0';
	return n;
}

TEST(progress_is_silent_when_stderr_is_not_a_terminal)
{
	int p[2];
	struct progress pg;
	char buf[4096];

	setenv("LE_PROGRESS_AFTER_MS", "0", 1);
	CHECK_EQ(pipe(p), 0);
	CHECK(dup2(p[1], 2) == 2);
	progress_start(&pg, "verify", NULL, 0);
	progress_update(&pg, 10, 100);
	progress_tick(&pg);
	progress_done(&pg);
	close(2);
	close(p[1]);
	CHECK_EQ(slurp_fd(p[0], buf, sizeof buf), 0);
}

TEST(progress_is_drawn_in_place_and_wiped_on_a_terminal)
{
	struct progress pg;
	char buf[4096];

	int m = posix_openpt(O_RDWR | O_NOCTTY);
	CHECK(m >= 0 && grantpt(m) == 0 && unlockpt(m) == 0);
	int s = open(ptsname(m), O_RDWR | O_NOCTTY);
	CHECK(s >= 0);
	CHECK(dup2(s, 2) == 2);
	setenv("LE_PROGRESS_AFTER_MS", "0", 1);
	progress_start(&pg, "verify", NULL, 0);
	CHECK_EQ(pg.fd, 2);
	progress_update(&pg, 2048, 300000);
	progress_update(&pg, 4096, 600000); /* too soon: not drawn */
	progress_done(&pg);
	slurp_fd(m, buf, sizeof buf);
	CHECK(!strncmp(buf, "\rverify: 2.0K records, 300 KB, ", 31));
	CHECK(strstr(buf, "\033[K\r\033[K") != NULL); /* then wiped */
	CHECK(!strstr(buf, "4.1K records"));
	/* work that says nothing until it ends: the time spent ticks */
	progress_start(&pg, "recover", NULL, 0);
	progress_tick(&pg);
	struct timespec ts = {0, 300 * 1000000};
	nanosleep(&ts, NULL);
	progress_done(&pg);
	slurp_fd(m, buf, sizeof buf);
	CHECK(!strncmp(buf, "\rrecover: 0.", 12));
	CHECK(strstr(buf, " s\033[K"));
	/* its own output on the same terminal: no line (a cat to the
	 * screen) */
	CHECK(dup2(s, 1) == 1);
	progress_start(&pg, "cat", NULL, 1);
	CHECK_EQ(pg.fd, -1);
	progress_done(&pg);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	RUN(progress_line_says_records_bytes_rate_and_time_left);
	RUN(progress_is_silent_when_stderr_is_not_a_terminal);
	RUN(progress_is_drawn_in_place_and_wiped_on_a_terminal);
	return t_done();
}
