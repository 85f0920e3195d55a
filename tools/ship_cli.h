/*
 * ship_cli.h -- `logengine forward` (forward.c) and `logengine collect`
 * (collect.c), and what they share (ship_common.c): the connection
 * options, connecting with a capped backoff, the stream's settings,
 * signals.  The transport is NATS JetStream through libnats; when the
 * tool is built without libnats (LE_NO_NATS), both commands only say so.
 */
#ifndef LE_SHIP_CLI_H
#define LE_SHIP_CLI_H

int cmd_forward(int argc, char **argv);
int cmd_collect(int argc, char **argv);

#ifndef LE_NO_NATS
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <nats/nats.h>

#include "logengine.h"

#define SHIP_EXIT_FAIL 1  /* refused by the server, stream conflict, I/O */
#define SHIP_EXIT_USAGE 2 /* bad option or URL */

#define SHIP_DEFAULT_URL "nats://127.0.0.1:4222"
#define SHIP_DEFAULT_STREAM "LOGS"
#define SHIP_BACKOFF_MIN_MS 100
#define SHIP_BACKOFF_MAX_MS 5000

struct ship_conn {
	const char *url;     /* --nats */
	const char *creds;   /* --creds FILE: a NATS credentials file */
	const char *user;    /* --user NAME */
	const char *password_file; /* --password-file FILE: the password,
	                              kept out of argv and the environment */
	int tls;             /* --tls: require TLS */
	const char *tls_ca;  /* --tls-ca FILE */
	const char *tls_cert, *tls_key; /* --tls-cert, --tls-key */
	const char *stream;  /* --stream */
	uint64_t give_up_ms; /* stop trying to connect after this long, ms
	                        (0: never) */
};

/*
 * A stream out of reach: said once when it goes, once when it is back,
 * and retried in between with a backoff from SHIP_BACKOFF_MIN_MS doubling
 * to SHIP_BACKOFF_MAX_MS.  Zeroed: reachable.
 */
struct ship_outage {
	uint64_t since; /* ship_mono_ms() when it went; 0 while reachable */
	int backoff;    /* ms before the next try */
};

/* SIGINT/SIGTERM seen; the handler also writes a byte to the wake
 * descriptor given to ship_signals (so a poll on it returns). */
extern atomic_int ship_stop;
void ship_signals(int wake_fd);

/* What an option of a command takes, and where it goes (out). */
enum ship_arg {
	SHIP_FLAG, /* no value: *(int *)out = 1 */
	SHIP_STR,  /* a value: *(const char **)out points into argv */
	SHIP_SIZE, /* a byte count or a number (ship_size): *(uint64_t *)out */
	SHIP_CALL  /* a value, given to take(cmd, out, value) */
};
struct ship_optdef {
	const char *name;  /* "--name": "--name VALUE" or "--name=VALUE" */
	const char *alias; /* a short name ("-v"), or NULL */
	enum ship_arg arg;
	void *out;
	/* SHIP_CALL: @return 0, or -1 after a usage message (ship_usage) */
	int (*take)(const char *cmd, void *out, const char *val);
};

/*
 * The command line of `logengine CMD [OPTIONS] DIR`: each argument an
 * option of t (n of them) or a connection option (into conn), or DIR,
 * the one operand; --help or -h prints usage.
 * @return 0 and *dir; 1 after --help; -1 after a usage message (an
 * unknown option, a value missing or not valid, a second operand, no
 * DIR).
 */
int ship_parse(const char *cmd, const char *usage, int argc, char **argv,
               const struct ship_optdef *t, size_t n,
               struct ship_conn *conn, const char **dir);
int ship_usage(const char *cmd, const char *fmt, const char *what);

/* Check --nats before any connection: nats:// or tls:// URLs, comma
 * separated, each with a host that resolves and a port.  @return 0, or -1
 * after a message naming the URL. */
int ship_check_url(const char *cmd, const char *url);

/* Check the connection options before any connection: the URLs
 * (ship_check_url), --tls-cert with --tls-key, --password-file with
 * --user, one way of saying who we are.  Warns (one line) when a host
 * off this machine would be reached without TLS.  @return 0, or -1 after
 * a message (a usage error). */
int ship_check_conn(const char *cmd, const struct ship_conn *c);

/* Set (with ship_stop) when the server refused something a retry cannot
 * cure while connected: a permission violation, an authorization that
 * expired or was revoked.  One line on stderr said what. */
extern atomic_int ship_refused;
/* The command's exit status: status, else SHIP_EXIT_FAIL when the server
 * refused (ship_refused), else 0. */
int ship_exit(int status);
/* A publish to a subject matching the pattern a + b that the server
 * refuses is said once but does not stop the command: it copes without
 * (collect: a refused message's dead-letter copy).  Four at most; call
 * before ship_connect.  @return 0, -1 (no room). */
int ship_may_refuse(const char *a, const char *b);

/*
 * Connect, retrying a server that does not answer with a backoff from
 * SHIP_BACKOFF_MIN_MS doubling to SHIP_BACKOFF_MAX_MS (asleep in poll
 * between tries, woken by a signal), saying so once.  A refusal that a
 * retry cannot cure (authorization, TLS, credentials) ends it.
 * @return a connection; NULL with *status SHIP_EXIT_FAIL after a message,
 * or 0 when ship_stop ended the wait.
 */
natsConnection *ship_connect(const char *cmd, const struct ship_conn *c,
                             int wake_fd, int *status);

/* Create the stream when missing (file storage, subjects "TOKEN.>" for a
 * subject "TOKEN.rest", replicas), or check that it takes messages of
 * max_msg bytes and (check) `subject`.  JetStream out of reach (no
 * quorum, a leader election, a server restarting: ship_js_transient) is
 * waited for as long as it takes, said once (ship_outage_lost) and once
 * more when it is back.  @return 0 (also when ship_stop ended the wait),
 * or SHIP_EXIT_FAIL after a message naming the setting or the refusal. */
int ship_stream(const char *cmd, jsCtx *js, const char *stream,
                const char *subject, int replicas, int64_t max_msg,
                int check, int wake_fd);
/* One try of ship_stream on js, a context of nc (NULL: a permissions
 * violation the server reported on the connection is not looked for,
 * and the request it made time out counts as transient).  @return 0
 * ready, *clustered (unless NULL) saying whether the stream lives in a
 * cluster (its info names one: its consumers have leaders); SHIP_EXIT_FAIL
 * after a message (a refusal or a conflicting setting: final); -1 out of
 * reach for now, why[cap] saying what the server answered. */
int ship_stream_try(const char *cmd, natsConnection *nc, jsCtx *js,
                    const char *stream, const char *subject, int replicas,
                    int64_t max_msg, int check, int *clustered, char *why,
                    size_t cap);

/* Whether a failed JetStream request may succeed later without anyone
 * changing a setting: a timeout, no responders, a cluster without
 * quorum or electing a leader ("JetStream system temporarily
 * unavailable"), a stream or consumer offline, a server restarting, a
 * consumer not found (gone with a restarted server's store: made again
 * by the caller).  Not: an authorization refusal (on nc, NULL: not
 * checked), a setting the server rejects. */
int ship_js_transient(natsConnection *nc, natsStatus s, jsErrCode je);
/* What a failed request s (JetStream error je, 0 if none) ran into, in
 * buf[cap]: the library's last error text, else the status's name, and
 * the JetStream error code.  Never empty.  @return buf. */
const char *ship_js_why(natsStatus s, jsErrCode je, char *buf, size_t cap);

/* The stream is out of reach (why): the first time since it was last
 * reachable, say so on stderr; then wait the backoff less waited_ms
 * (spent already since the try, on a probe), woken by a signal on
 * wake_fd, and double it. */
void ship_outage_lost(const char *cmd, struct ship_outage *o,
                      const char *stream, const char *why, int wake_fd,
                      int waited_ms);
/* The stream answered: if it was out of reach, say for how long, and
 * start the backoff again from its minimum. */
void ship_outage_back(const char *cmd, struct ship_outage *o,
                      const char *stream);

/* Whether NATS subject pattern p (tokens, '*', '>') matches subject s. */
int ship_subject_match(const char *p, const char *s);
/*
 * The origin a forwarder's subject names: its last two tokens,
 * `...HOSTTOKEN.SHARD` (HOSTTOKEN the host with each '.' written '~';
 * SHARD decimal 0..65535, no sign or leading zero); the caller checks the
 * subject has the tokens its filter allows.
 * @return 0 with host (room for LE_HOST_MAX + 1) and *shard set, or -1.
 */
int ship_subject_origin(const char *subject, char *host, uint32_t *shard);

/* Wait up to ms on fd (readable), then drain it. */
void ship_wait(int fd, int ms);
uint64_t ship_mono_ms(void);
/* Large messages reuse heap pages instead of new mappings (call first). */
void ship_malloc_tune(void);
/* Peak resident set size of this process, KiB (from /proc/self/status). */
long ship_peak_rss_kib(void);
#endif

#endif
