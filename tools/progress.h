/*
 * progress.h -- a progress line on stderr for long commands (cat, verify,
 * recover): records, bytes, rate and time left, redrawn in place at most
 * five times a second once the work has run a second
 * ($LE_PROGRESS_AFTER_MS changes that delay), and wiped when done.
 * Nothing is ever written unless stderr is a terminal; and nothing when
 * the command's own output goes to that same terminal (a cat to the
 * screen: the records are the progress there).
 *
 *   struct progress p;
 *   progress_start(&p, "verify", dir, 0);
 *   while (le_reader_next(r, &rec) > 0)
 *           progress_reader(&p, r);
 *   progress_done(&p);
 */
#ifndef LE_TOOLS_PROGRESS_H
#define LE_TOOLS_PROGRESS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "logengine.h"

struct progress {
	int fd;                /* where the line goes; -1: off */
	const char *what;
	uint64_t total;        /* bytes to go through; 0: unknown */
	uint64_t t0, next;     /* CLOCK_MONOTONIC ns: start, next redraw */
	uint64_t after_ns;     /* no line before the work is this old */
	unsigned calls;
	int shown;             /* a line is on the terminal */
	pthread_t ticker;      /* progress_tick's thread */
	int ticking;
	pthread_mutex_t mu;    /* guards the line and stop (ticker) */
	int stop;
};

/* On when stderr is a terminal, and (stdout_busy) stdout is not that
 * terminal.  dir: the log, whose segment bytes are the total (NULL:
 * unknown). */
void progress_start(struct progress *p, const char *what, const char *dir,
                    int stdout_busy);
/* The same, on a descriptor of the caller's (-1: off): for tests. */
void progress_start_fd(struct progress *p, int fd, const char *what,
                       uint64_t total);

/* After each record: every 1024th call looks at the reader's counts. */
void progress_reader(struct progress *p, const le_reader *r);
/* Redraw now if due, with these counts. */
void progress_update(struct progress *p, uint64_t records, uint64_t bytes);
/* Work that reports nothing until it ends (le_open's recovery): a thread
 * redraws the time spent until progress_done. */
void progress_tick(struct progress *p);
/* Wipe the line (and stop the ticker). */
void progress_done(struct progress *p);

/* The line's text: "verify: 1.2M records, 150 MB of 2.0 GB (7%),
 * 45 MB/s, 0:38 left".  @return its length. */
size_t progress_format(char *buf, size_t cap, const char *what,
                       uint64_t records, uint64_t bytes, uint64_t total,
                       double secs);

#endif
