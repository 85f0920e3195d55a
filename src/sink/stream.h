/*
 * stream.h -- the stream sink (sink_stream.c): every record as a line on a
 * descriptor, through a bounded buffer and a thread of its own, so a slow
 * or stalled reader costs dropped (and counted) lines, never a blocked
 * producer.
 *
 * One le__stream per engine (its buffer, its thread); each shard's writer
 * formats its batch's lines through a port of its own (a le__sink) and
 * hands them over once per commit.
 */
#ifndef LE_STREAM_H
#define LE_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "logengine.h"
#include "sink/sink.h"

typedef struct le__stream le__stream;

/* Start the stream thread for cfg->stream_fd.  @return 0 and *out, or an
 * error (le_errmsg set). */
int le__stream_open(le__stream **out, const le_config *cfg);
/* A port: the sink one shard's writer puts its records in, formatting at
 * most `batch` lines between two commits. */
int le__stream_port(le__sink **out, le__stream *s, uint32_t shard,
                    uint32_t batch, uint32_t max_rec);
/* Stop the thread: a reader that keeps up gets every line, a stalled one
 * a second; what is left is thrown away and counted.  Idempotent. */
void le__stream_stop(le__stream *s);
/* Stop, then free (s may be NULL). */
void le__stream_close(le__stream *s);
/* A fork child's copy: free our memory and descriptor, nothing else (the
 * thread, its mutex and condition variable are the parent's). */
void le__stream_forget(le__stream *s);
/* Wait until everything handed over before the call is written (or the
 * reader is gone).  @return 1 when written, 0 at the timeout (< 0:
 * none). */
int le__stream_drained(le__stream *s, int timeout_ms);
/* le_reopen: have the stream thread open stream_path again (a flag:
 * async-signal-safe).  Nothing without a stream_path. */
void le__stream_reopen(le__stream *s);
/* Add the stream's counters: stream_lines, _dropped, _bytes, _reopens,
 * _cpu_ns. */
void le__stream_stats(le__stream *s, le_stats *out, int forked);

/* Room a formatted line may need for a payload of len bytes: JSON escapes
 * at most 6 bytes per byte, plus the fixed fields and the newline. */
static inline size_t le__stream_line_max(size_t len)
{
	return 6 * len + 256;
}

/* One record as a line in `format` (enum le_stream_format), newline
 * included.  @return its length (0 when cap < 256). */
size_t le__stream_format(unsigned char *out, size_t cap, int format,
                         uint64_t ts, int level, uint32_t shard, uint64_t seq,
                         uint32_t flags, const void *payload, uint32_t len);

#endif
