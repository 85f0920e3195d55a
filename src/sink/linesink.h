/*
 * linesink.h -- what every output of lines shares (linesink.c): the
 * stream of lines on a descriptor (sink_stream.c) and syslog
 * (sink_syslog.c) differ in how they format a record, what their buffer
 * holds and how their thread sends it; the rest is here, once.
 *
 *   shard writers --(port: format in put, hand over in commit, under mu)
 *                                    |
 *                                    v
 *                   bounded buffer (cap bytes, the kind's layout)
 *                                    |
 *   the output's thread <------------+--> descriptor, socket
 *
 * One le__linesink per engine and kind, each with its own thread; each
 * shard's writer formats its batch through a port of its own (a le__sink)
 * and hands the batch over once per commit.  A record that finds no room
 * (in the port's stage, or in the buffer) is dropped and counted, never
 * waited for: a slow or stalled reader costs counted drops, never a
 * blocked producer.  Once room returns the kind writes "N records
 * dropped" in their place.
 *
 * The engine names no kind: it goes through the table of kinds (kinds.h),
 * opening those its configuration asks for.
 */
#ifndef LE_LINESINK_H
#define LE_LINESINK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "logengine.h"
#include "sink/sink.h"

/* A line's length word, in a port's stage: this bit set for a marker (a
 * "records dropped" line, not a record). */
#define LE_LINE_MARK 0x80000000u

typedef struct le__linesink le__linesink;

/* A kind of output: what differs between the stream and syslog. */
typedef struct le__linekind {
	const char *name;        /* "stream": its thread is le-stream */
	/* Does cfg ask for one? */
	int (*wanted)(const le_config *cfg);
	/* Make one (its own fields, then le__linesink_start).  @return 0
	 * and *out, an error (le_errmsg set), or 1 with *out NULL: a setting
	 * it cannot use, named in le_errmsg, which the engine reports and
	 * opens without this output. */
	int (*open)(le__linesink **out, const le_config *cfg);
	/* The output's thread: empties the buffer until told to stop. */
	void *(*main)(void *ls);
	/* Room a record of payload len bytes may need, formatted. */
	size_t (*line_max)(const le__linesink *ls, size_t len);
	/* A record formatted into out (cap bytes, at least line_max).
	 * @return its length. */
	size_t (*format)(le__linesink *ls, unsigned char *out, size_t cap,
	                 uint32_t shard, const le__rec *r);
	/* Under mu: take a port's stage (len bytes: n lines, each after its
	 * u32 length word) into the buffer, dropping and counting what finds
	 * no room or no reader, count `dropped` more records the port could
	 * not stage, and wake the thread. */
	void (*push)(le__linesink *ls, const unsigned char *stage, size_t len,
	             size_t n, uint64_t dropped);
	/* Wait until everything handed over before the call is sent (or
	 * the reader is gone).  @return 1 when sent, 0 at the timeout. */
	int (*drained)(le__linesink *ls, int timeout_ms);
	/* Add the counters to a le_stats. */
	void (*stats)(le__linesink *ls, le_stats *out, int forked);
	/* le_reopen (async-signal-safe), or NULL: nothing to reopen. */
	void (*reopen)(le__linesink *ls);
	/* After the thread was joined (mu free), or NULL: what is left. */
	void (*stopped)(le__linesink *ls);
	/* Free what the kind owns, and the struct (not the buffer). */
	void (*forget)(le__linesink *ls);
} le__linekind;

/* The shared part, first in each kind's struct. */
struct le__linesink {
	const le__linekind *kind;   /* [const] */
	size_t stage_cap;           /* [const] a port's stage, in bytes */
	pthread_t thread;
	int started;
	/* mu guards the buffer (ring, head, len, put_bytes), drops_pending,
	 * stop and stop_deadline, and what the kind adds to them; cv
	 * (CLOCK_MONOTONIC) wakes the thread, and drained waiters. */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned char *ring;
	size_t cap, head, len;
	uint64_t put_bytes;         /* bytes ever put in the ring */
	uint64_t drops_pending;     /* records to report with a marker */
	int stop;
	uint64_t stop_deadline;     /* mono ns: then the rest is dropped */
	_Atomic uint64_t dropped;   /* records, cumulative */
	uint64_t cpu_ns;            /* the thread's CPU time when it ended */
};

/* First thing a kind's open does: ls is its kind's, with mu and cv made
 * (le__linesink_close undoes it whatever follows). */
void le__linesink_init(le__linesink *ls, const le__linekind *kind);
/* Last thing: a ring of cap bytes, ports' stages of stage_cap, and the
 * kind's thread, started with every signal blocked.  @return 0, or an
 * error (le_errmsg names `what`); the caller then closes ls. */
int le__linesink_start(le__linesink *ls, size_t cap, size_t stage_cap,
                       const char *what);
/* Stop the thread: a reader that keeps up gets everything, a stalled
 * one a second; what is left is dropped and counted.  Idempotent; NULL
 * is a no-op. */
void le__linesink_stop(le__linesink *ls);
/* Stop, then free (ls may be NULL). */
void le__linesink_close(le__linesink *ls);
/* A fork child's copy: free our memory and descriptors, nothing else
 * (the thread, its mutex and condition variable are the parent's). */
void le__linesink_forget(le__linesink *ls);
/* A port: the sink one shard's writer puts its records in, formatting at
 * most `batch` records between two commits. */
int le__linesink_port(le__sink **out, le__linesink *ls, uint32_t shard,
                      uint32_t batch, uint32_t max_rec);
/* Wait on cv (mu held) at most ms milliseconds (ms < 1000). */
void le__linesink_wait(le__linesink *ls, long ms);
/* Copy n bytes in at the ring's end (mu held, room checked). */
void le__linesink_put(le__linesink *ls, const void *p, size_t n);

#endif
