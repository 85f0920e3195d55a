/*
 * ship_common.c -- what `forward` and `collect` share: options, the
 * connection with its backoff, the stream's settings, signals.
 */
#define _GNU_SOURCE
#include "ship_cli.h"

#ifdef LE_NO_NATS
#include <stdio.h>

static int no_nats(const char *cmd)
{
	fprintf(stderr, "logengine %s: this logengine was built without "
	        "libnats (install libnats-dev: sh scripts/deps.sh nats, "
	        "then rebuild)\n", cmd);
	return 2;
}

int cmd_forward(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	return no_nats("forward");
}

int cmd_collect(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	return no_nats("collect");
}
#else

#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Atomic, not volatile sig_atomic_t: besides the signal handler (for
 * which a lock-free atomic is as safe), libnats's callback thread sets
 * them (on_async_error) while the main loop reads them. */
atomic_int ship_stop;
atomic_int ship_refused;
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "ship_stop is set by a signal "
               "handler: it must be lock-free");
static int wake_write_fd = -1;

static void on_signal(int sig)
{
	int saved = errno;
	char b = 1;

	(void)sig;
	ship_stop = 1;
	if (wake_write_fd >= 0 && write(wake_write_fd, &b, 1) < 0) {
		/* full: the reader wakes anyway */
	}
	errno = saved;
}

void ship_signals(int wake_fd)
{
	struct sigaction sa;

	wake_write_fd = wake_fd;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

int ship_usage(const char *cmd, const char *fmt, const char *what)
{
	fprintf(stderr, "logengine %s: ", cmd);
	fprintf(stderr, fmt, what);
	fprintf(stderr, "\n(see 'logengine %s --help')\n", cmd);
	return -1;
}

/* A byte count: digits with an optional K, M, G (powers of 1024).
 * @return 0 or -1 after a message naming opt. */
static int ship_size(const char *cmd, const char *opt, const char *s,
                     uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	unsigned shift = 0;

	if (*end == 'K' || *end == 'k')
		shift = 10;
	else if (*end == 'M' || *end == 'm')
		shift = 20;
	else if (*end == 'G' || *end == 'g')
		shift = 30;
	if (shift)
		end++;
	if (errno || end == s || *end || s[0] == '-' ||
	    (shift && v > (UINT64_MAX >> shift))) {
		fprintf(stderr, "logengine %s: %s: '%s' is not a byte count "
		        "(digits, optionally followed by K, M or G)\n", cmd, opt,
		        s);
		return -1;
	}
	*out = (uint64_t)v << shift;
	return 0;
}

/* The value of option d at argv[*i]: "--name VALUE" (argv[*i] moves to
 * it) or "--name=VALUE".  @return 1 and *val, 0 not d, -1 after a usage
 * message (no value). */
static int opt_value(const char *cmd, int argc, char **argv, int *i,
                     const struct ship_optdef *d, const char **val)
{
	const char *a = argv[*i];
	size_t n = strlen(d->name);

	if (d->arg == SHIP_FLAG)
		return !strcmp(a, d->name) || (d->alias && !strcmp(a, d->alias));
	if (strcmp(a, d->name) == 0) {
		if (*i + 1 >= argc)
			return ship_usage(cmd, "option %s needs a value", a);
		*val = argv[++*i];
		return 1;
	}
	if (strncmp(a, d->name, n) == 0 && a[n] == '=') {
		*val = a + n + 1;
		return 1;
	}
	return 0;
}

/* Take option d's value val.  @return 0, -1 after a message. */
static int opt_take(const char *cmd, const struct ship_optdef *d,
                    const char *val)
{
	switch (d->arg) {
	case SHIP_FLAG:
		*(int *)d->out = 1;
		return 0;
	case SHIP_STR:
		*(const char **)d->out = val;
		return 0;
	case SHIP_SIZE:
		return ship_size(cmd, d->name, val, d->out);
	case SHIP_CALL:
		return d->take(cmd, d->out, val);
	}
	return -1;
}

/* If argv[*i] is one of the n options of t, take it.  @return 1 taken,
 * 0 not one, -1 after a usage message. */
static int opt_find(const char *cmd, int argc, char **argv, int *i,
                    const struct ship_optdef *t, size_t n)
{
	const char *val = NULL;

	for (size_t k = 0; k < n; k++) {
		int m = opt_value(cmd, argc, argv, i, &t[k], &val);
		if (m)
			return m < 0 || opt_take(cmd, &t[k], val) < 0 ? -1 : 1;
	}
	return 0;
}

int ship_parse(const char *cmd, const char *usage, int argc, char **argv,
               const struct ship_optdef *t, size_t n,
               struct ship_conn *conn, const char **dir)
{
	const struct ship_optdef ct[] = {
		{"--nats", NULL, SHIP_STR, &conn->url, NULL},
		{"--stream", NULL, SHIP_STR, &conn->stream, NULL},
		{"--creds", NULL, SHIP_STR, &conn->creds, NULL},
		{"--user", NULL, SHIP_STR, &conn->user, NULL},
		{"--password-file", NULL, SHIP_STR, &conn->password_file, NULL},
		{"--tls", NULL, SHIP_FLAG, &conn->tls, NULL},
		{"--tls-ca", NULL, SHIP_STR, &conn->tls_ca, NULL},
		{"--tls-cert", NULL, SHIP_STR, &conn->tls_cert, NULL},
		{"--tls-key", NULL, SHIP_STR, &conn->tls_key, NULL},
	};

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			fputs(usage, stdout);
			return 1;
		}
		int m = opt_find(cmd, argc, argv, &i, t, n);
		if (!m)
			m = opt_find(cmd, argc, argv, &i, ct,
			             sizeof ct / sizeof ct[0]);
		if (m < 0)
			return -1;
		if (m)
			continue;
		if (a[0] == '-' && a[1])
			return ship_usage(cmd, "unknown option '%s'", a);
		if (*dir)
			return ship_usage(cmd, "unexpected argument '%s'", a);
		*dir = a;
	}
	return *dir ? 0 : ship_usage(cmd, "%s", "missing DIR");
}

/* url with each "user:password@" written "user:***@": error lines end
 * up in logs that others read. */
static void hide_passwords(const char *url, char *out, size_t cap)
{
	size_t o = 0;

	out[0] = '\0';
	for (const char *p = url; o < cap;) {
		size_t len = strcspn(p, ",");
		const char *sl = strstr(p, "://");
		const char *at = memrchr(p, '@', len); /* a password may hold one */
		const char *pw = sl && at && sl < at
		                 ? memchr(sl + 3, ':', (size_t)(at - sl - 3)) : NULL;
		if (pw)
			o += (size_t)snprintf(out + o, cap - o, "%.*s:***%.*s",
			                      (int)(pw - p), p,
			                      (int)(p + len - at), at);
		else
			o += (size_t)snprintf(out + o, cap - o, "%.*s", (int)len, p);
		if (!p[len] || o >= cap)
			break;
		o += (size_t)snprintf(out + o, cap - o, ",");
		p += len + 1;
	}
}

/* Whether every address of res is this machine's loopback (127/8, ::1,
 * ::ffff:127.0.0.0/104): traffic to it never crosses a network. */
static int all_loopback(const struct addrinfo *res)
{
	for (const struct addrinfo *a = res; a; a = a->ai_next) {
		const unsigned char *b;
		if (a->ai_family == AF_INET) {
			b = (const unsigned char *)&((const struct sockaddr_in *)
			                             a->ai_addr)->sin_addr;
			if (b[0] != 127)
				return 0;
		} else if (a->ai_family == AF_INET6) {
			const struct in6_addr *x =
				&((const struct sockaddr_in6 *)a->ai_addr)->sin6_addr;
			b = x->s6_addr;
			if (!IN6_IS_ADDR_LOOPBACK(x) &&
			    !(IN6_IS_ADDR_V4MAPPED(x) && b[12] == 127))
				return 0;
		} else {
			return 0;
		}
	}
	return res != NULL;
}

/* One URL of the list: scheme://[user[:pass]@]host[:port].  *clear is
 * set when it is a nats:// URL whose host is not (or may not be, being
 * unresolved yet) a loopback address. */
static int check_one_url(const char *cmd, const char *u, size_t len,
                         int *clear)
{
	char buf[512], shown[512], host[256], port[16] = "4222";
	const char *p, *at, *h, *colon;
	struct addrinfo hints, *res = NULL;

	if (len >= sizeof buf)
		goto bad;
	memcpy(buf, u, len);
	buf[len] = '\0';
	if (strncmp(buf, "nats://", 7) == 0)
		p = buf + 7;
	else if (strncmp(buf, "tls://", 6) == 0)
		p = buf + 6;
	else
		goto bad;
	at = strrchr(p, '@');
	h = at ? at + 1 : p;
	colon = strchr(h, ':');
	size_t hl = colon ? (size_t)(colon - h) : strlen(h);
	if (hl == 0 || hl >= sizeof host || strchr(h, '/'))
		goto bad;
	memcpy(host, h, hl);
	host[hl] = '\0';
	if (colon) {
		char *end;
		long v = strtol(colon + 1, &end, 10);
		if (*end || end == colon + 1 || v <= 0 || v > 65535)
			goto bad;
		snprintf(port, sizeof port, "%ld", v);
	}
	memset(&hints, 0, sizeof hints);
	hints.ai_socktype = SOCK_STREAM;
	int rc = getaddrinfo(host, port, &hints, &res);
	*clear = p == buf + 7 && (rc != 0 || !all_loopback(res));
	if (res)
		freeaddrinfo(res);
	if (rc == 0 || rc == EAI_AGAIN) /* a DNS hiccup: retry later */
		return 0;
	hide_passwords(buf, shown, sizeof shown);
	fprintf(stderr, "logengine %s: --nats %s: cannot resolve host '%s': "
	        "%s\n", cmd, shown, host, gai_strerror(rc));
	return -1;
bad:
	snprintf(buf, sizeof buf, "%.*s", (int)len, u);
	hide_passwords(buf, shown, sizeof shown);
	fprintf(stderr, "logengine %s: --nats '%s': not a NATS URL "
	        "(nats://HOST[:PORT] or tls://HOST[:PORT], comma separated)\n",
	        cmd, shown);
	return -1;
}

/* Check every URL of the list; *clear: some URL goes off this machine
 * in clear text (check_one_url). */
static int check_urls(const char *cmd, const char *url, int *clear)
{
	const char *p = url;

	*clear = 0;
	for (;;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		int c = 0;
		if (check_one_url(cmd, p, len, &c) < 0)
			return -1;
		*clear |= c;
		if (!comma)
			return 0;
		p = comma + 1;
	}
}

int ship_check_url(const char *cmd, const char *url)
{
	int clear;
	return check_urls(cmd, url, &clear);
}

int ship_check_conn(const char *cmd, const struct ship_conn *c)
{
	int clear;

	if (check_urls(cmd, c->url, &clear) < 0)
		return -1;
	if (!c->tls_cert != !c->tls_key)
		return ship_usage(cmd, "%s", "--tls-cert and --tls-key go "
		                  "together (a client certificate and its key)");
	if (c->password_file && !c->user)
		return ship_usage(cmd, "%s", "--password-file needs --user NAME");
	if (c->user && c->creds)
		return ship_usage(cmd, "%s", "--user and --creds are two ways to "
		                  "say who this is: give one");
	/* --tls and its files make every URL a TLS one. */
	if (clear && !c->tls && !c->tls_ca && !c->tls_cert)
		fprintf(stderr, "logengine %s: warning: --nats reaches a host off "
		        "this machine without TLS: credentials and records cross "
		        "the network in clear text (use tls:// and --tls-ca; see "
		        "\"Shipping across hosts\" in logengine(1))\n", cmd);
	return 0;
}

uint64_t ship_mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void ship_wait(int fd, int ms)
{
	struct pollfd p = {fd, POLLIN, 0};
	char buf[256];

	if (poll(&p, 1, ms) > 0)
		while (read(fd, buf, sizeof buf) > 0)
			;
}

void ship_malloc_tune(void)
{
	/* Messages of 128 KiB and more would each be a fresh mmap (or,
	 * from libnats's reader thread, a heap trimmed by madvise after
	 * each free): every page copied into them faults first.  Kept in
	 * the heap and not trimmed, the same pages serve message after
	 * message; the heap then stays at the window's high-water mark,
	 * which the window (or the fetch) bounds. */
	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	mallopt(M_TRIM_THRESHOLD, 64 << 20);
}

long ship_peak_rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long v = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "VmHWM: %ld", &v) == 1)
			break;
	fclose(f);
	return v;
}

/* The servers of --nats, a comma separated list (checked already). */
static natsStatus set_servers(natsOptions *o, const char *url)
{
	char buf[2048], *save = NULL;
	const char *list[16];
	int n = 0;

	snprintf(buf, sizeof buf, "%s", url);
	for (char *t = strtok_r(buf, ",", &save); t && n < 16;
	     t = strtok_r(NULL, ",", &save))
		list[n++] = t;
	return natsOptions_SetServers(o, list, n);
}

/* cmd and --nats with any password hidden, for the lines the connection
 * says (the error handler runs on a libnats thread: set before). */
static const char *conn_cmd = "";
static char conn_shown[512];

/* The first line of path into buf (without its line end).  @return 0,
 * or -1 after a message. */
static int read_secret(const char *cmd, const char *path, char *buf,
                       size_t cap)
{
	FILE *f = fopen(path, "r");
	int ok = f && fgets(buf, (int)cap, f);

	if (f)
		fclose(f);
	if (ok)
		buf[strcspn(buf, "\r\n")] = '\0';
	if (ok && *buf && strlen(buf) + 1 < cap)
		return 0;
	fprintf(stderr, "logengine %s: --password-file %s: %s\n", cmd, path,
	        !f ? strerror(errno) : "no password on its first line");
	return -1;
}

/* Subjects whose refused publishes the command copes with
 * (ship_may_refuse); set before the connection, read by its thread. */
#define SOFT_MAX 4
static char soft[SOFT_MAX][300];
static atomic_int soft_said[SOFT_MAX];

int ship_may_refuse(const char *a, const char *b)
{
	for (int i = 0; i < SOFT_MAX; i++) {
		if (soft[i][0])
			continue;
		snprintf(soft[i], sizeof soft[i], "%s%s", a, b);
		return 0;
	}
	return -1;
}

/* The pattern (ship_may_refuse) that the subject of a refused publish
 * matches, from the server's text ("Permissions Violation for Publish
 * to \"SUBJ\""), or -1. */
static int soft_refusal(const char *text)
{
	const char *p = text ? strstr(text, "Publish to \"") : NULL;
	char subj[300];

	if (!p || sscanf(p + 12, "%299[^\"]", subj) != 1)
		return -1;
	for (int i = 0; i < SOFT_MAX && soft[i][0]; i++)
		if (ship_subject_match(soft[i], subj))
			return i;
	return -1;
}

/* Errors the server sends on a live connection (libnats's thread).  A
 * permission violation or a refused authorization would come again on
 * every retry: say it once, and stop the command (ship_refused), which
 * then exits 1 instead of resending for ever without a word; unless the
 * command copes without what was refused (soft_refusal), which is said
 * once too. */
static void on_async_error(natsConnection *nc, natsSubscription *sub,
                           natsStatus err, void *closure)
{
	static atomic_int said;
	const char *text = NULL;
	char b = 1;

	(void)sub;
	(void)closure;
	if (err != NATS_NOT_PERMITTED && err != NATS_CONNECTION_AUTH_FAILED)
		return;
	natsConnection_GetLastError(nc, &text);
	if (!text || !*text)
		text = natsStatus_GetText(err);
	int k = soft_refusal(text);
	if (k >= 0 && !atomic_exchange(&soft_said[k], 1))
		fprintf(stderr, "logengine %s: %s: the server refused: %s (the "
		        "credentials do not allow it: see \"Shipping across "
		        "hosts\" in logengine(1)); going on without it\n",
		        conn_cmd, conn_shown, text);
	if (k >= 0)
		return;
	if (!atomic_exchange(&said, 1))
		fprintf(stderr, "logengine %s: %s: the server refused: %s (the "
		        "credentials do not allow it: see \"Shipping across "
		        "hosts\" in logengine(1)); stopping\n", conn_cmd,
		        conn_shown, text);
	ship_refused = 1;
	ship_stop = 1;
	if (wake_write_fd >= 0 && write(wake_write_fd, &b, 1) < 0) {
		/* full: the main loop wakes anyway */
	}
}

int ship_exit(int status)
{
	return status ? status : ship_refused ? SHIP_EXIT_FAIL : 0;
}

/* Who we are: a credentials file, or a user with the password pw
 * (NULL: none). */
static natsStatus conn_auth(const struct ship_conn *c, const char *pw,
                            natsOptions *o)
{
	if (c->creds)
		return natsOptions_SetUserCredentialsFromFiles(o, c->creds, NULL);
	if (c->user)
		return natsOptions_SetUserInfo(o, c->user, pw);
	return NATS_OK;
}

static natsStatus conn_tls(const struct ship_conn *c, natsOptions *o)
{
	natsStatus s = NATS_OK;

	if (c->tls || c->tls_ca || c->tls_cert)
		s = natsOptions_SetSecure(o, true);
	if (s == NATS_OK && c->tls_ca)
		s = natsOptions_LoadCATrustedCertificates(o, c->tls_ca);
	if (s == NATS_OK && (c->tls_cert || c->tls_key))
		s = natsOptions_LoadCertificatesChain(o, c->tls_cert, c->tls_key);
	return s;
}

static natsStatus conn_options(const struct ship_conn *c, const char *pw,
                               natsOptions **out)
{
	natsOptions *o = NULL;
	natsStatus s = natsOptions_Create(&o);

	if (s == NATS_OK)
		s = set_servers(o, c->url);
	if (s == NATS_OK)
		s = natsOptions_SetTimeout(o, 2000);
	/* Reconnect for ever: the window and the acks decide what is
	 * resent, libnats only keeps the connection. */
	if (s == NATS_OK)
		s = natsOptions_SetMaxReconnect(o, -1);
	if (s == NATS_OK)
		s = natsOptions_SetReconnectWait(o, 250);
	if (s == NATS_OK)
		s = natsOptions_SetErrorHandler(o, on_async_error, NULL);
	if (s == NATS_OK)
		s = conn_auth(c, pw, o);
	if (s == NATS_OK)
		s = conn_tls(c, o);
	if (s != NATS_OK)
		natsOptions_Destroy(o);
	*out = s == NATS_OK ? o : NULL;
	return s;
}

/* The library's last error text without the place in libnats it was
 * set at ("(js.c:1750): Leadership Change": the place says nothing to
 * an operator); "" when there is none. */
static const char *lib_error(void)
{
	const char *t = nats_GetLastError(NULL);

	if (t && t[0] == '(' && strstr(t, "): "))
		t = strstr(t, "): ") + 3;
	return t ? t : "";
}

/* The library's last error text, or the status's name. */
static const char *last_error(natsStatus s)
{
	const char *t = lib_error();
	return *t ? t : natsStatus_GetText(s);
}

/*
 * With TLS 1.3 the server checks the client's certificate after the
 * client has finished its handshake: a server that requires one and got
 * none (or one its CA did not sign) closes the connection, which libnats
 * reports as a protocol error ("Expected 'PONG', got ''"), a retry away
 * from success for all it knows.  The server's alert saying why stays in
 * this thread's OpenSSL error queue.  Its functions are looked up by
 * name: libnats brought libcrypto into the process, and the build needs
 * no OpenSSL headers.
 */
struct ssl_err {
	unsigned long (*get)(void);
	void (*string)(unsigned long, char *, size_t);
};

static struct ssl_err ssl_err_fns(void)
{
	struct ssl_err e;
	void *g = dlsym(RTLD_DEFAULT, "ERR_get_error");
	void *t = dlsym(RTLD_DEFAULT, "ERR_error_string_n");

	/* POSIX: a data pointer from dlsym converts to a function's. */
	memcpy(&e.get, &g, sizeof g);
	memcpy(&e.string, &t, sizeof t);
	if (!g || !t)
		e.get = NULL;
	return e;
}

/* Empty the queue (before a try), or (buf) keep its last alert.
 * @return 1 when an alert from the server was there. */
static int ssl_alert(char *buf, size_t cap)
{
	struct ssl_err e = ssl_err_fns();
	unsigned long v;
	int found = 0;

	while (e.get && (v = e.get()) != 0) {
		char t[256];
		e.string(v, t, sizeof t);
		const char *a = strstr(t, " alert ");
		if (!a || !buf)
			continue;
		/* "error:0A000412:SSL routines::sslv3 alert bad certificate" */
		const char *r = strrchr(t, ':');
		snprintf(buf, cap, "%s", r && r < a ? r + 1 : t);
		found = 1;
	}
	return found;
}

/* A refusal that trying again cannot cure; anything else (no server, a
 * server that does not answer or answers garbage) is retried. */
static int connect_refused(natsStatus s)
{
	return s == NATS_CONNECTION_AUTH_FAILED || s == NATS_NOT_PERMITTED ||
	       s == NATS_SSL_ERROR || s == NATS_SECURE_CONNECTION_REQUIRED ||
	       s == NATS_SECURE_CONNECTION_WANTED || s == NATS_INVALID_ARG ||
	       s == NATS_NO_MEMORY || s == NATS_ILLEGAL_STATE;
}

/* Say why the server refused; what the operator should look at. */
static void say_refused(const char *cmd, const struct ship_conn *c,
                        natsStatus s, const char *alert)
{
	const char *hint = "";

	/* Alerts about our certificate, or a drop that can only be one. */
	if (alert && (strstr(alert, "certificate") || strstr(alert, "unknown "
	              "ca") || strstr(alert, "after the handshake")))
		hint = c->tls_cert ? "; does the server's CA sign --tls-cert?"
		                   : "; the server requires a client certificate "
		                     "(--tls-cert FILE --tls-key FILE)";
	else if (s == NATS_SSL_ERROR)
		hint = c->tls_ca ? "; is the server's certificate signed by a CA "
		                   "of --tls-ca, for this host name?"
		                 : "; --tls-ca FILE names the CA that signed the "
		                   "server's certificate";
	if (alert)
		fprintf(stderr, "logengine %s: %s: TLS: the server refused the "
		        "connection (%s)%s\n", cmd, conn_shown, alert, hint);
	else
		fprintf(stderr, "logengine %s: %s: %s%s\n", cmd, conn_shown,
		        last_error(s), hint);
}

/* Dropped right after the TLS handshake this many times in a row, with
 * no alert to read (OpenSSL's functions not found): taken as a refusal
 * of our certificate all the same (a missing one; one the server's CA
 * did not sign can show as an I/O error, which is retried).  A server
 * restarting at that moment drops one try, not three. */
#define TLS_DROPS_REFUSED 3

/* One try; *drops counts the tries in a row that TLS ended so.
 * @return NATS_OK, a status to retry, or (*refused set) one that ends
 * it, with the server's TLS alert in alert when it sent one. */
static natsStatus try_connect(const struct ship_conn *c, natsOptions *o,
                              natsConnection **nc, char *alert, size_t cap,
                              int *drops, int *refused)
{
	ssl_alert(NULL, 0);
	natsStatus s = natsConnection_Connect(nc, o);
	int tls = c->tls || c->tls_ca || c->tls_cert ||
	          strstr(c->url, "tls://") != NULL;

	*alert = '\0';
	*drops = tls && s == NATS_PROTOCOL_ERROR ? *drops + 1 : 0;
	if (*drops >= TLS_DROPS_REFUSED)
		snprintf(alert, cap, "it closed the connection after the "
		         "handshake, %d times", *drops);
	if (s != NATS_OK && tls && (ssl_alert(alert, cap) || *alert))
		*refused = 1;
	else
		*refused = s != NATS_OK && connect_refused(s);
	return s;
}

natsConnection *ship_connect(const char *cmd, const struct ship_conn *c,
                             int wake_fd, int *status)
{
	natsConnection *nc = NULL;
	natsOptions *o;
	int backoff = SHIP_BACKOFF_MIN_MS, said = 0, refused, drops = 0;
	char alert[256], pw[1024];
	uint64_t t0 = ship_mono_ms();

	conn_cmd = cmd;
	hide_passwords(c->url, conn_shown, sizeof conn_shown);
	if (c->password_file &&
	    read_secret(cmd, c->password_file, pw, sizeof pw) < 0) {
		*status = SHIP_EXIT_USAGE;
		return NULL;
	}
	natsStatus s = conn_options(c, c->password_file ? pw : NULL, &o);
	memset(pw, 0, sizeof pw); /* libnats keeps its own copy */
	*status = 0;
	if (s != NATS_OK) {
		fprintf(stderr, "logengine %s: connection options: %s\n", cmd,
		        last_error(s));
		*status = SHIP_EXIT_FAIL;
		return NULL;
	}
	while (!ship_stop) {
		s = try_connect(c, o, &nc, alert, sizeof alert, &drops,
		                &refused);
		if (s == NATS_OK)
			break;
		if (refused) {
			say_refused(cmd, c, s, *alert ? alert : NULL);
			*status = SHIP_EXIT_FAIL;
			break;
		}
		if (c->give_up_ms && ship_mono_ms() - t0 >= c->give_up_ms) {
			fprintf(stderr, "logengine %s: %s: %s; given up after "
			        "%.1f s\n", cmd, conn_shown, last_error(s),
			        (double)(ship_mono_ms() - t0) / 1000);
			*status = SHIP_EXIT_FAIL;
			break;
		}
		if (!said++)
			fprintf(stderr, "logengine %s: %s: %s; retrying (every "
			        "%d s at most)\n", cmd, conn_shown, last_error(s),
			        SHIP_BACKOFF_MAX_MS / 1000);
		ship_wait(wake_fd, backoff);
		backoff = backoff * 2 > SHIP_BACKOFF_MAX_MS ? SHIP_BACKOFF_MAX_MS
		                                            : backoff * 2;
	}
	natsOptions_Destroy(o);
	if (nc && said)
		fprintf(stderr, "logengine %s: %s: connected\n", cmd, conn_shown);
	return nc;
}

int ship_subject_match(const char *p, const char *s)
{
	for (;;) {
		const char *pe = strchr(p, '.'), *se = strchr(s, '.');
		size_t pl = pe ? (size_t)(pe - p) : strlen(p);
		size_t sl = se ? (size_t)(se - s) : strlen(s);
		if (pl == 1 && p[0] == '>')
			return 1;
		if (!(pl == 1 && p[0] == '*') && (pl != sl || memcmp(p, s, pl)))
			return 0;
		if (!pe || !se)
			return !pe && !se;
		p = pe + 1;
		s = se + 1;
	}
}

int ship_subject_origin(const char *subject, char *host, uint32_t *shard)
{
	const char *end = subject + strlen(subject), *dot, *tok;
	uint64_t v = 0;

	dot = memrchr(subject, '.', (size_t)(end - subject));
	if (!dot || dot + 1 == end || end - dot - 1 > 5 ||
	    (dot[1] == '0' && end - dot - 1 > 1))
		return -1;
	for (const char *p = dot + 1; p < end; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (v > 65535)
		return -1;
	tok = memrchr(subject, '.', (size_t)(dot - subject));
	tok = tok ? tok + 1 : subject;
	size_t n = (size_t)(dot - tok);
	if (n == 0 || n > LE_HOST_MAX)
		return -1;
	for (size_t i = 0; i < n; i++)
		host[i] = tok[i] == '~' ? '.' : tok[i];
	host[n] = '\0';
	if (!le_collector_host_valid(host, n))
		return -1;
	*shard = (uint32_t)v;
	return 0;
}

/* JetStream errors a wait may cure: the cluster without quorum or
 * electing (its meta leader, the stream's or the consumer's), a server
 * restarting and catching up, placement short of the peers that are
 * down, a consumer gone with a restarted server's store. */
static int js_code_transient(jsErrCode je)
{
	switch ((int)je) {
	case JSClusterIncompleteErr:
	case JSClusterNoPeersErr:
	case JSClusterNotAssignedErr:
	case JSClusterNotAvailErr:
	case JSClusterNotLeaderErr:
	case JSInsufficientResourcesErr:
	case JSRaftGeneralErr:
	case JSStreamOfflineErr:
	case JSConsumerOfflineErr:
	case JSConsumerNotFoundErr:
		return 1;
	default:
		return 0;
	}
}

/* A permissions violation the server sent on nc for a JetStream request
 * (or its reply inbox): the request itself only times out. */
static int js_denied(natsConnection *nc)
{
	const char *t = NULL;

	return nc && natsConnection_GetLastError(nc, &t) == NATS_NOT_PERMITTED &&
	       t && (strstr(t, "$JS.") || strstr(t, "_INBOX."));
}

int ship_js_transient(natsConnection *nc, natsStatus s, jsErrCode je)
{
	if (js_denied(nc))
		return 0;
	/* libnats reports no responders as "JetStream not enabled"; it is
	 * also a server whose JetStream has not started yet */
	if (s == NATS_NO_RESPONDERS)
		return 1;
	if (je)
		return js_code_transient(je);
	/* No JetStream code: the request did not get a verdict from the
	 * API.  Only what states a refusal or a programming error is
	 * final; a server that answered nothing, or a status (409
	 * Leadership Change, 503) in place of an answer, may answer
	 * later. */
	switch (s) {
	case NATS_CONNECTION_AUTH_FAILED:
	case NATS_NOT_PERMITTED:
	case NATS_INVALID_ARG:
	case NATS_INVALID_SUBJECT:
	case NATS_INVALID_SUBSCRIPTION:
	case NATS_ILLEGAL_STATE:
	case NATS_NO_MEMORY:
	case NATS_NO_SERVER_SUPPORT:
	case NATS_CONNECTION_CLOSED:
		return 0;
	default:
		return 1;
	}
}

const char *ship_js_why(natsStatus s, jsErrCode je, char *buf, size_t cap)
{
	const char *t = lib_error();

	if (!*t && s == NATS_TIMEOUT)
		t = "no answer in time (Timeout)";
	if (s == NATS_NO_RESPONDERS)
		t = "no JetStream server answers (no responders: its servers "
		    "down, or JetStream not enabled)";
	if (!*t)
		t = natsStatus_GetText(s);
	if (je)
		snprintf(buf, cap, "%s (JetStream error %d)", t, (int)je);
	else
		snprintf(buf, cap, "%s", t);
	return buf;
}

void ship_outage_lost(const char *cmd, struct ship_outage *o,
                      const char *stream, const char *why, int wake_fd,
                      int waited_ms)
{
	if (!o->since) {
		o->since = ship_mono_ms();
		o->backoff = SHIP_BACKOFF_MIN_MS;
		fprintf(stderr, "logengine %s: stream %s unreachable: %s; "
		        "retrying (every %d s at most)\n", cmd, stream, why,
		        SHIP_BACKOFF_MAX_MS / 1000);
	}
	if (waited_ms < o->backoff)
		ship_wait(wake_fd, o->backoff - waited_ms);
	o->backoff = o->backoff * 2 > SHIP_BACKOFF_MAX_MS ? SHIP_BACKOFF_MAX_MS
	                                                  : o->backoff * 2;
}

void ship_outage_back(const char *cmd, struct ship_outage *o,
                      const char *stream)
{
	if (o->since)
		fprintf(stderr, "logengine %s: stream %s reachable again after "
		        "%.1f s\n", cmd, stream,
		        (double)(ship_mono_ms() - o->since) / 1000);
	o->since = 0;
	o->backoff = SHIP_BACKOFF_MIN_MS;
}

static int stream_create(const char *cmd, natsConnection *nc, jsCtx *js,
                         const char *stream, const char *subject,
                         int replicas, int *clustered, char *why, size_t cap)
{
	jsStreamConfig sc;
	jsStreamInfo *si = NULL;
	jsErrCode je = 0;
	char pattern[256];
	const char *dot = strchr(subject, '.');
	const char *subjects[1] = {pattern};

	/* "logs.web-1" -> "logs.>": one stream for every host's subject. */
	snprintf(pattern, sizeof pattern, "%.*s.>",
	         (int)(dot ? (size_t)(dot - subject) : strlen(subject)),
	         subject);
	if (!dot)
		snprintf(pattern, sizeof pattern, "%s", subject);
	jsStreamConfig_Init(&sc);
	sc.Name = stream;
	sc.Subjects = subjects;
	sc.SubjectsLen = 1;
	sc.Storage = js_FileStorage;
	sc.Replicas = replicas;
	natsStatus s = js_AddStream(&si, js, &sc, NULL, &je);
	if (s == NATS_OK && clustered)
		*clustered = si && si->Cluster;
	jsStreamInfo_Destroy(si);
	if (s == NATS_OK)
		return 0;
	ship_js_why(s, je, why, cap);
	if (ship_js_transient(nc, s, je))
		return -1;
	fprintf(stderr, "logengine %s: cannot create stream %s (subjects %s, "
	        "%d replica%s): %s\n", cmd, stream, pattern, replicas,
	        replicas == 1 ? "" : "s", why);
	return SHIP_EXIT_FAIL;
}

/* An existing stream: does it take our subject and our messages? */
static int stream_check(const char *cmd, const char *stream,
                        const jsStreamConfig *sc, const char *subject,
                        int64_t max_msg)
{
	int takes = subject == NULL;
	char list[512] = "";

	for (int i = 0; i < sc->SubjectsLen; i++) {
		takes |= subject && ship_subject_match(sc->Subjects[i], subject);
		size_t n = strlen(list);
		snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "",
		         sc->Subjects[i]);
	}
	if (!takes) {
		fprintf(stderr, "logengine %s: stream %s does not take subject "
		        "%s (its subjects: %s); choose another --subject or "
		        "--stream\n", cmd, stream, subject, *list ? list : "none");
		return SHIP_EXIT_FAIL;
	}
	if (sc->MaxMsgSize > 0 && max_msg > sc->MaxMsgSize) {
		fprintf(stderr, "logengine %s: stream %s takes messages of at "
		        "most %d bytes (max_msg_size), and a batch needs %lld; "
		        "lower --max-batch-bytes\n", cmd, stream,
		        (int)sc->MaxMsgSize, (long long)max_msg);
		return SHIP_EXIT_FAIL;
	}
	if (sc->Sealed) {
		fprintf(stderr, "logengine %s: stream %s is sealed: it takes no "
		        "new messages\n", cmd, stream);
		return SHIP_EXIT_FAIL;
	}
	return 0;
}

int ship_stream_try(const char *cmd, natsConnection *nc, jsCtx *js,
                    const char *stream, const char *subject, int replicas,
                    int64_t max_msg, int check, int *clustered, char *why,
                    size_t cap)
{
	jsStreamInfo *si = NULL;
	jsErrCode je = 0;
	natsStatus s = js_GetStreamInfo(&si, js, stream, NULL, &je);
	int rc;

	if (s == NATS_NOT_FOUND || je == JSStreamNotFoundErr)
		return stream_create(cmd, nc, js, stream, subject, replicas,
		                     clustered, why, cap);
	if (s != NATS_OK) {
		ship_js_why(s, je, why, cap);
		if (ship_js_transient(nc, s, je))
			return -1;
		fprintf(stderr, "logengine %s: stream %s: %s\n", cmd, stream,
		        why);
		return SHIP_EXIT_FAIL;
	}
	if (clustered)
		*clustered = si->Cluster != NULL;
	rc = stream_check(cmd, stream, si->Config, check ? subject : NULL,
	                  max_msg);
	jsStreamInfo_Destroy(si);
	return rc;
}

int ship_stream(const char *cmd, jsCtx *js, const char *stream,
                const char *subject, int replicas, int64_t max_msg,
                int check, int wake_fd)
{
	struct ship_outage o = {0, SHIP_BACKOFF_MIN_MS};
	char why[512];

	while (!ship_stop) {
		int rc = ship_stream_try(cmd, NULL, js, stream, subject, replicas,
		                         max_msg, check, NULL, why, sizeof why);
		if (rc >= 0) {
			if (rc == 0)
				ship_outage_back(cmd, &o, stream);
			return rc;
		}
		ship_outage_lost(cmd, &o, stream, why, wake_fd, 0);
	}
	return 0;
}
#endif
