/*
 * test_syslog.c -- the syslog sink against a real rsyslogd (Debian's
 * rsyslog), started by each test with a private configuration on a
 * loopback port picked free at run time (imtcp and imudp), writing what it
 * receives to a file in the test's directory: every record arrives with
 * its fields, in order, over TCP; over UDP; a stopped rsyslog costs
 * counted drops, never a blocked caller; a restarted one is found again.
 */
#include "harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>

#include "logengine.h"

static char dir[256];
static int port;
static pid_t rsyslog_pid;

static const char *rsyslogd(void)
{
	const char *p = getenv("RSYSLOGD");
	return p && *p ? p : t_need_tool("rsyslogd");
}

/* A port free for TCP and UDP on 127.0.0.1 (the kernel's pick). */
static int free_port(void)
{
	for (int tries = 0; tries < 50; tries++) {
		struct sockaddr_in a = {.sin_family = AF_INET};
		socklen_t len = sizeof a;
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		int t = socket(AF_INET, SOCK_STREAM, 0);
		CHECK(t >= 0);
		CHECK(bind(t, (struct sockaddr *)&a, sizeof a) == 0);
		CHECK(getsockname(t, (struct sockaddr *)&a, &len) == 0);
		int u = socket(AF_INET, SOCK_DGRAM, 0);
		int ok = bind(u, (struct sockaddr *)&a, sizeof a) == 0;
		close(u);
		close(t);
		if (ok)
			return ntohs(a.sin_port);
	}
	CHECK(0);
	return -1;
}

static int tcp_up(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
	                        .sin_port = htons((uint16_t)port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int s = socket(AF_INET, SOCK_STREAM, 0);
	int ok = connect(s, (struct sockaddr *)&a, sizeof a) == 0;
	close(s);
	return ok;
}

/* Start rsyslogd on `port`, receiving into DIR/out.log: each message as
 * "severity|app|procid|structured data|msg". */
static void rsyslog_start(void)
{
	char conf[300], text[2048];
	snprintf(conf, sizeof conf, "%s/rsyslog.conf", dir);
	snprintf(text, sizeof text,
	         "global(workDirectory=\"%s\" maxMessageSize=\"16k\")\n"
	         "module(load=\"imtcp\")\n"
	         "input(type=\"imtcp\" address=\"127.0.0.1\" port=\"%d\")\n"
	         "module(load=\"imudp\")\n"
	         /* UDP drops what the socket cannot hold: room for the
	          * whole burst, so a slow rsyslogd loses nothing. */
	         "input(type=\"imudp\" address=\"127.0.0.1\" port=\"%d\" "
	         "rcvbufSize=\"4m\")\n"
	         "template(name=\"t\" type=\"string\" string=\"%%syslogseverity%%|"
	         "%%app-name%%|%%procid%%|%%structured-data%%|%%msg%%\\n\")\n"
	         "action(type=\"omfile\" file=\"%s/out.log\" template=\"t\")\n",
	         dir, port, port, dir);
	CHECK(t_spit(conf, text, strlen(text)) == 0);
	char pidf[300];
	snprintf(pidf, sizeof pidf, "%s/rsyslog.pid", dir);
	const char *bin = rsyslogd();
	fflush(NULL);
	rsyslog_pid = fork();
	CHECK(rsyslog_pid >= 0);
	if (rsyslog_pid == 0) {
		/* dies with the test, whatever ends it */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 1);
		dup2(null, 2);
		execl(bin, "rsyslogd", "-n", "-f", conf, "-i", pidf,
		      (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 1000 && !tcp_up(); i++) {
		int st;
		CHECK(waitpid(rsyslog_pid, &st, WNOHANG) == 0); /* still up */
		usleep(10000);
	}
	CHECK(tcp_up());
}

static void rsyslog_stop(void)
{
	if (rsyslog_pid <= 0)
		return;
	kill(rsyslog_pid, SIGKILL);
	waitpid(rsyslog_pid, NULL, 0);
	rsyslog_pid = 0;
}

static void setup(void)
{
	t_need("syslog"); /* rsyslogd */
	t_tmpdir(dir);
	port = free_port();
	rsyslog_start();
}

static le_engine *open_engine(const char *proto, uint32_t buffer,
                              int overflow)
{
	le_config c;
	char segs[300], addr[64];
	le_config_init(&c);
	snprintf(segs, sizeof segs, "%s/log", dir);
	snprintf(addr, sizeof addr, "%s://127.0.0.1:%d", proto, port);
	c.dir = segs;
	c.create_dir = 1;
	c.durability = LE_SYNC_NONE;
	c.syslog_addr = addr;
	c.syslog_app = "lesyslogtest";
	c.flush_ms = 5;
	if (buffer)
		c.syslog_buffer_bytes = buffer;
	c.overflow = overflow;
	le_engine *e;
	int rc = le_open(&e, &c);
	if (rc < 0) {
		fprintf(stderr, "  le_open: %s (%s)\n", le_strerror(rc),
		        le_errmsg());
		_exit(1);
	}
	return e;
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Wait until the syslog sink has sent or dropped n records (polled each
 * millisecond; the test fails after 20 s). */
static void sink_took(le_engine *e, uint64_t n)
{
	double t0 = now_s();
	le_stats st;
	for (;;) {
		CHECK_RC(le_stats_get(e, &st));
		if (st.syslog_sent + st.syslog_dropped >= n)
			return;
		CHECK(now_s() - t0 < 20);
		usleep(1000);
	}
}

/* Lines of DIR/out.log once it has at least `want` (or 20 s passed). */
static char *received(int want, int *lines)
{
	char path[300];
	snprintf(path, sizeof path, "%s/out.log", dir);
	for (int i = 0; i < 2000; i++) {
		size_t n = 0;
		unsigned char *b = t_slurp(path, &n);
		int k = 0;
		for (size_t j = 0; b && j < n; j++)
			k += b[j] == '\n';
		if (b && (k >= want || i == 1999)) {
			*lines = k;
			return (char *)b;
		}
		free(b);
		usleep(10000);
	}
	*lines = 0;
	return NULL;
}

/* The lines carrying "msg" text "<tag> N", in order: the N of each. */
static int numbers(char *text, const char *tag, int *out, int max)
{
	int n = 0;
	size_t tl = strlen(tag);
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		char *m = strrchr(line, '|');
		if (m && !strncmp(m + 1, tag, tl) && m[1 + tl] == ' ' && n < max)
			out[n++] = atoi(m + 2 + tl);
	}
	return n;
}

TEST(every_record_arrives_with_its_fields_in_order_over_tcp)
{
	enum { N = 3000 };
	setup();
	le_engine *e = open_engine("tcp", 0, LE_OVERFLOW_DROP);
	le_logger *lg = le_logger_get(e, "app.net");
	for (int i = 0; i < N; i++) {
		le_warn_kv(lg, LE_FIELDS(LE_I64("i", i), LE_STR("user", "b\"o]b"),
		                         LE_F64("ms", 0.5)),
		           "rec %d", i);
		if (i % 500 == 0) /* the sink's buffer never overflows */
			sink_took(e, (uint64_t)i + 1);
	}
	le_stats st;
	CHECK_RC(le_close_stats(e, &st));
	CHECK_EQ(st.syslog_sent, N);
	CHECK_EQ(st.syslog_dropped, 0);
	CHECK_EQ(st.syslog_connects, 1);
	int lines;
	char *text = received(N, &lines);
	CHECK(text);
	CHECK_EQ(lines, N);
	char want[200];
	snprintf(want, sizeof want,
	         "4|lesyslogtest|%d|[fields@32473 logger=\"app.net\" i=\"0\" "
	         "user=\"b\\\"o\\]b\" ms=\"0.5\"]|rec 0\n",
	         (int)getpid());
	CHECK(strncmp(text, want, strlen(want)) == 0);
	snprintf(want, sizeof want, "i=\"%d\"", N - 1);
	CHECK(strstr(text, want) != NULL);
	static int got[N];
	CHECK_EQ(numbers(text, "rec", got, N), N);
	for (int i = 0; i < N; i++)
		CHECK_EQ(got[i], i);
	free(text);
	rsyslog_stop();
	t_rmrf(dir);
}

TEST(records_arrive_over_udp_as_one_datagram_each)
{
	enum { N = 300 };
	setup();
	le_engine *e = open_engine("udp", 0, LE_OVERFLOW_DROP);
	for (int i = 0; i < N; i++) {
		le_info_kv(e, LE_FIELDS(LE_I64("i", i)), "dgram %d", i);
		if (i % 10 == 9) { /* UDP: the receiver keeps up */
			int lines;
			free(received(i + 1, &lines));
			CHECK_EQ(lines, i + 1);
		}
	}
	le_stats st;
	CHECK_RC(le_close_stats(e, &st));
	CHECK_EQ(st.syslog_sent, N);
	int lines;
	char *text = received(N, &lines);
	CHECK(text);
	CHECK_EQ(lines, N);
	CHECK(strstr(text, "6|lesyslogtest|") == text);
	static int got[N], seen[N];
	CHECK_EQ(numbers(text, "dgram", got, N), N);
	for (int i = 0; i < N; i++) {
		CHECK(got[i] >= 0 && got[i] < N && !seen[got[i]]);
		seen[got[i]] = 1;
	}
	free(text);
	rsyslog_stop();
	t_rmrf(dir);
}


/* rsyslog killed: the sink's buffer fills, then records are dropped and
 * counted; the writer never waits for the dead server, so even callers
 * in overflow BLOCK mode (who wait for the writer) all get through. */
TEST(a_stopped_rsyslog_costs_counted_drops_not_a_blocked_caller)
{
	enum { N = 200000 };
	setup();
	le_engine *e = open_engine("tcp", 65536, LE_OVERFLOW_BLOCK);
	for (int i = 0; i < 10; i++)
		le_info(e, "before %d", i);
	int lines;
	free(received(10, &lines));
	CHECK_EQ(lines, 10);
	rsyslog_stop(); /* its sockets are closed once waitpid returns */
	double t0 = now_s();
	for (int i = 0; i < N; i++)
		CHECK_RC(le_logf_kv(e, LE_INFO, LE_FIELDS(LE_I64("i", i)),
		                    "after %d", i));
	double took = now_s() - t0;
	le_stats st;
	CHECK_RC(le_close_stats(e, &st));
	/* A blocked caller would hang until the harness's alarm; this bound
	 * is only far beyond what 200,000 unblocked calls take. */
	CHECK(took < 30);
	CHECK_EQ(st.accepted, N + 10);
	CHECK_EQ(st.dropped_full, 0);
	CHECK_EQ(st.written, N + 10); /* the store kept every one */
	/* The closed connection is seen before anything is written into
	 * it: none of the records after the kill counts as sent. */
	CHECK_EQ(st.syslog_sent, 10);
	CHECK_EQ(st.syslog_dropped, N);
	t_rmrf(dir);
}

/* A restarted server is connected to again (backoff up to 5 s), and what
 * is logged once it is back arrives. */
TEST(the_sink_reconnects_after_rsyslog_restarts)
{
	setup();
	le_engine *e = open_engine("tcp", 0, LE_OVERFLOW_DROP);
	le_info(e, "first");
	int lines;
	free(received(1, &lines));
	CHECK_EQ(lines, 1);
	rsyslog_stop();
	le_info(e, "while down"); /* buffered or dropped: counted either way */
	CHECK_RC(le_flush(e, 5000)); /* it reached the sink before the restart */
	rsyslog_start();
	le_stats st;
	for (int i = 0; i < 1500; i++) { /* up to 15 s for the backoff */
		CHECK_RC(le_stats_get(e, &st));
		if (st.syslog_connects >= 2)
			break;
		le_info(e, "probe %d", i);
		usleep(10000);
	}
	CHECK(st.syslog_connects >= 2);
	for (int i = 0; i < 100; i++)
		le_info(e, "back %d", i);
	CHECK_RC(le_close_stats(e, &st));
	CHECK_EQ(st.syslog_sent + st.syslog_dropped + st.dropped_full,
	         st.accepted);
	char path[300];
	int got[100];
	for (int tries = 0; tries < 2000; tries++) {
		snprintf(path, sizeof path, "%s/out.log", dir);
		char *text = t_slurp_text(path);
		int n = numbers(text, "back", got, 100);
		free(text);
		if (n == 100)
			break;
		usleep(10000);
	}
	char *text = t_slurp_text(path);
	CHECK_EQ(numbers(text, "back", got, 100), 100);
	for (int i = 0; i < 100; i++)
		CHECK_EQ(got[i], i);
	free(text);
	rsyslog_stop();
	t_rmrf(dir);
}

/* le_open of store plus syslog_addr, stderr caught in err; the
 * engine, or NULL with *rc set. */
static le_engine *open_caught(const char *addr, int store, int facility,
                              int *rc, char *err, size_t cap)
{
	le_config c;
	le_engine *e = NULL;
	char d[256];
	le_config_init(&c);
	c.dir = t_tmpdir(d);
	c.store = store;
	c.syslog_addr = addr;
	c.syslog_facility = facility;
	int saved;
	FILE *f = t_stderr_catch(&saved);
	*rc = le_open(&e, &c);
	t_stderr_release(f, saved, err, cap);
	snprintf(dir, sizeof dir, "%s", d);
	return e;
}

/* A syslog_addr that cannot be an address (a typo) is reported, on one
 * line of stderr and in le_errmsg naming the field, counted, and the
 * engine opens without the syslog output; it is refused only when it is
 * the engine's one output (nowhere else to log). */
TEST(syslog_addr_typo_is_reported_and_the_engine_opens_without_it)
{
	static const char *bad[] = {"127.0.0.1:514", "tpc://127.0.0.1:514",
	                            "tcp://127.0.0.1", "tcp://127.0.0.1:x",
	                            "udp://[::1:514"};
	char err[1024];
	int rc;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		le_engine *e = open_caught(bad[i], 1, 1, &rc, err, sizeof err);
		le_stats st;
		CHECK_RC(rc);
		CHECK(e != NULL);
		if (!strstr(le_errmsg(), "syslog_addr: \"") ||
		    !strstr(err, "is not tcp://HOST:PORT") ||
		    !strstr(err, "no syslog output") ||
		    strchr(err, '\n') != err + strlen(err) - 1) {
			fprintf(stderr, "  %s: errmsg \"%s\", stderr \"%s\"\n",
			        bad[i], le_errmsg(), err);
			CHECK(0);
		}
		CHECK_RC(le_logf(e, LE_INFO, "kept"));
		CHECK_RC(le_close_stats(e, &st));
		CHECK_EQ(st.config_errors, 1);
		CHECK_EQ(st.written, 1);
		CHECK_EQ(st.syslog_sent + st.syslog_dropped, 0);
		t_rmrf(dir);
	}
	CHECK(open_caught("tpc://127.0.0.1:514", 0, 1, &rc, err,
	                  sizeof err) == NULL);
	CHECK_EQ(rc, LE_EINVAL);
	CHECK(strstr(le_errmsg(), "syslog_addr: \"tpc://") != NULL);
	t_rmrf(dir);
	CHECK(open_caught("udp://127.0.0.1:514", 1, 24, &rc, err,
	                  sizeof err) == NULL);
	CHECK_EQ(rc, LE_EINVAL);
	CHECK(strstr(le_errmsg(), "syslog_facility: 24") != NULL);
	t_rmrf(dir);
}

/* A host that does not resolve is reported at le_open and counted; the
 * engine opens, and the sink looks the host up again in the background
 * as it reconnects to a server that is down, records waiting (or
 * dropped, counted) meanwhile. */
TEST(unresolvable_syslog_host_is_retried_in_the_background)
{
	char err[1024];
	int rc;
	le_stats st;
	le_engine *e = open_caught("tcp://no-such-host.invalid:514", 1, 1,
	                           &rc, err, sizeof err);
	CHECK_RC(rc);
	CHECK(e != NULL);
	CHECK(strstr(le_errmsg(), "syslog_addr: cannot resolve "
	                          "no-such-host.invalid") != NULL);
	CHECK(strstr(err, "cannot resolve no-such-host.invalid") != NULL);
	CHECK(strstr(err, "retrying in the background") != NULL);
	CHECK_RC(le_stats_get(e, &st));
	CHECK_EQ(st.syslog_resolve_errors, 1);
	CHECK_RC(le_logf(e, LE_INFO, "waits for the server"));
	double t0 = now_s();
	do {
		CHECK(now_s() - t0 < 20);
		usleep(1000);
		CHECK_RC(le_stats_get(e, &st));
	} while (st.syslog_resolve_errors < 3);
	CHECK_EQ(st.syslog_sent, 0);
	CHECK_RC(le_close_stats(e, &st));
	CHECK_EQ(st.written, 1);
	CHECK_EQ(st.syslog_sent + st.syslog_dropped, 1);
	t_rmrf(dir);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	signal(SIGPIPE, SIG_IGN);
	unsetenv("LOGENGINE_LEVEL");
	RUN(every_record_arrives_with_its_fields_in_order_over_tcp);
	RUN(records_arrive_over_udp_as_one_datagram_each);
	RUN(a_stopped_rsyslog_costs_counted_drops_not_a_blocked_caller);
	RUN(the_sink_reconnects_after_rsyslog_restarts);
	RUN(syslog_addr_typo_is_reported_and_the_engine_opens_without_it);
	RUN(unresolvable_syslog_host_is_retried_in_the_background);
	return t_done();
}
