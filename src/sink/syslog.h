/*
 * syslog.h -- the syslog sink (sink_syslog.c): every record as an RFC 5424
 * message to a syslog server over TCP (octet counting, RFC 6587) or UDP,
 * through a bounded buffer and a thread of its own, so a slow, dead or
 * unreachable server costs dropped (and counted) records, never a blocked
 * producer.  A line output (linesink.h): one le__syslog per engine, its
 * buffer, thread and ports there; what is syslog's own is the message,
 * the connection and how whole messages are sent.
 */
#ifndef LE_SYSLOG_H
#define LE_SYSLOG_H

#include <stddef.h>
#include <stdint.h>

#include "logengine.h"
#include "sink/linesink.h"

/* Longest message sent (header, structured data and text): what rsyslog
 * accepts by default (maxMessageSize 8k).  Longer ones are cut. */
#define LE_SYSLOG_MSG_MAX 8192

typedef struct le__syslog le__syslog;

/* Syslog's kind of line output (linesink.h): open when syslog_addr is
 * set.  Its open parses syslog_addr and resolves it (le_errmsg names
 * syslog_addr and what is wrong); the thread connects, and reconnects,
 * on its own. */
extern const le__linekind le__syslog_kind;

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
