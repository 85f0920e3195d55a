/*
 * test_gateway_tls.c -- seed 004's gateway (perf/pipeline/gateway.c) as
 * tls-sweep.sh runs it: it serves HTTPS with a certificate made by
 * openssl, answers a route that matches nothing with 404, and every
 * request's access-log line reaches its logengine directory, read back
 * by `logengine cat`.  The requests go over one TLS connection made by
 * `openssl s_client`, so a gateway that spoke plain HTTP would get none.
 *
 * Needs scripts/deps.sh pipeline (libmicrohttpd, openssl); builds
 * $BUILD/gateway with make.  The CLI is $LE_CLI, else $BUILD/logengine.
 */
#include "harness.h"
#include "system/sys.h"

#define NREQ 20

/* Poll file path (for at most secs seconds) until it holds text.
 * @return 1 when it does. */
static int wait_text(const char *path, const char *text, double secs)
{
	for (int i = 0; i < (int)(secs * 50); i++) {
		size_t len;
		char *s = (char *)t_slurp(path, &len);
		int hit = s && strstr(s, text);
		free(s);
		if (hit)
			return 1;
		usleep(20 * 1000);
	}
	return 0;
}

/* Requests /tls-check/0 .. NREQ-1 on one connection, the last asking to
 * close it, into dir/req. */
static void write_requests(const char *dir)
{
	char req[NREQ * 96], *o = req;

	for (int i = 0; i < NREQ; i++)
		o += sprintf(o, "GET /tls-check/%d HTTP/1.1\r\n"
		             "Host: loadtest.invalid\r\n%s\r\n", i,
		             i == NREQ - 1 ? "Connection: close\r\n" : "");
	t_write_file(dir, "req", req);
}

/* How many times needle occurs in hay. */
static int count(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

TEST(https_requests_reach_the_logengine_directory)
{
	char tmp[256], gw_err[300], want[64];
	const char *build = t_build_dir();
	int port = 0;

	t_need("pipeline");
	t_tmpdir(tmp);
	T_SH_OK("make --no-print-directory -s BUILD='%s' '%s/gateway'", build,
	        build);
	/* An EC key: RSA key generation takes seconds on a busy machine. */
	T_SH_OK("openssl req -x509 -newkey ec -pkeyopt "
	        "ec_paramgen_curve:prime256v1 -nodes -days 1 "
	        "-subj /CN=loadtest.invalid -keyout '%s/key.pem' "
	        "-out '%s/cert.pem'", tmp, tmp);
	/* Under timeout(1), which passes SIGTERM on: a test that fails
	 * half-way leaves no gateway running for long. */
	T_SH_OK("timeout 60 '%s/gateway' --port 0 --backend-port 0 --log store "
	        "--dir '%s/log' --tls-cert '%s/cert.pem' --tls-key "
	        "'%s/key.pem' >/dev/null 2>'%s/gw.err' & echo $! >'%s/pid'",
	        build, tmp, tmp, tmp, tmp, tmp);
	snprintf(gw_err, sizeof gw_err, "%s/gw.err", tmp);
	CHECK(wait_text(gw_err, "(https)", 20));
	size_t len;
	char *err = (char *)t_slurp(gw_err, &len);
	CHECK(err && sscanf(strstr(err, "127.0.0.1:") + 10, "%d", &port) == 1);
	free(err);

	write_requests(tmp);
	int rc = t_sh("timeout 30 openssl s_client -quiet -connect "
	              "127.0.0.1:%d -servername loadtest.invalid <'%s/req'",
	              port, tmp);
	int answers = count(t_sh_out, "HTTP/1.1 404 Not Found");
	if (answers != NREQ)
		fprintf(stderr, "  s_client exit %d:\n%s\n", rc, t_sh_out);
	CHECK_EQ(answers, NREQ);

	/* SIGTERM: the gateway reports, closes the engine (every queued
	 * line written) and exits. */
	T_SH_OK("kill -TERM $(cat '%s/pid')", tmp);
	CHECK(wait_text(gw_err, "\"log\":\"store\"", 20));
	int lines = 0;
	for (int i = 0; i < 20 * 50 && lines != NREQ; i++) {
		T_SH_OK("'%s' cat '%s/log'", t_build_tool("LE_CLI", "logengine"),
		        tmp);
		lines = count(t_sh_out, "\" 404 ");
		if (lines != NREQ)
			usleep(20 * 1000);
	}
	CHECK_EQ(lines, NREQ);
	for (int i = 0; i < NREQ; i++) {
		snprintf(want, sizeof want, "\"GET /tls-check/%d HTTP/1.1\" 404 ",
		         i);
		CHECK(strstr(t_sh_out, want));
	}
	t_sh("kill -KILL $(cat '%s/pid') 2>/dev/null", tmp);
	t_rmrf(tmp);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	RUN(https_requests_reach_the_logengine_directory);
	return t_done();
}
