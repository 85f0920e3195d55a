/*
 * syslog.h -- the syslog sink (sink_syslog.c): every record as an RFC 5424
 * message to a syslog server over TCP (octet counting, RFC 6587) or UDP,
 * through a bounded buffer and a thread of its own, so a slow, dead or
 * unreachable server costs dropped (and counted) records, never a blocked
 * producer.  Built as the stream sink is: one le__syslog per engine (its
 * buffer, its thread, its connection), and a port (a le__sink) per shard
 * that formats its batch's messages and hands them over once per commit.
 */
#ifndef LE_SYSLOG_H
#define LE_SYSLOG_H

#include <stddef.h>
#include <stdint.h>

#include "logengine.h"
#include "sink/sink.h"

/* Longest message sent (header, structured data and text): what rsyslog
 * accepts by default (maxMessageSize 8k).  Longer ones are cut. */
#define LE_SYSLOG_MSG_MAX 8192

typedef struct le__syslog le__syslog;

/* Parse cfg->syslog_addr, resolve it, start the thread (it connects, and
 * reconnects, on its own).  @return 0 and *out, or an error (le_errmsg
 * names syslog_addr and what is wrong). */
int le__syslog_open(le__syslog **out, const le_config *cfg);
/* A shard writer's port: at most `batch` messages between two commits. */
int le__syslog_port(le__sink **out, le__syslog *s, uint32_t shard,
                    uint32_t batch, uint32_t max_rec);
/* Stop the thread: a server that takes them gets every message, one that
 * does not a second; what is left is dropped and counted.  Idempotent;
 * NULL is a no-op. */
void le__syslog_stop(le__syslog *s);
/* Stop, then free (s may be NULL). */
void le__syslog_close(le__syslog *s);
/* A fork child's copy: free our memory and descriptor, nothing else. */
void le__syslog_forget(le__syslog *s);
/* Wait until every message handed over is sent.  @return 1 when sent, 0
 * at the timeout (< 0: none). */
int le__syslog_drained(le__syslog *s, int timeout_ms);
/* Add the counters: syslog_sent, _dropped, _bytes, _connects. */
void le__syslog_stats(le__syslog *s, le_stats *out, int forked);

/* What every message of an engine says of its sender. */
typedef struct le__syslog_id {
	int facility;
	char tail[400];  /* " HOSTNAME APP-NAME PROCID MSGID " */
	size_t tail_len;
} le__syslog_id;

/* Fill id: hostname (gethostname; "-" if none), app (NULL: the program's
 * name), pid; each field cut to RFC 5424's length and to printable
 * US-ASCII, a space or other byte becoming '_'. */
void le__syslog_id_init(le__syslog_id *id, int facility, const char *app,
                        long pid);
/* One record as an RFC 5424 message (no framing), at most
 * LE_SYSLOG_MSG_MAX bytes and cap (cap >= 512).  @return its length. */
size_t le__syslog_format(unsigned char *out, size_t cap,
                         const le__syslog_id *id, const le__rec *r);

#endif
