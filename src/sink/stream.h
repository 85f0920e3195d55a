/*
 * stream.h -- the stream sink (sink_stream.c): every record as a line on a
 * descriptor, through a bounded buffer and a thread of its own, so a slow
 * or stalled reader costs dropped (and counted) lines, never a blocked
 * producer.
 *
 * A line output (linesink.h): one le__stream per engine, its buffer and
 * thread there; what is the stream's own is how a line looks, and how it
 * reaches the descriptor.
 */
#ifndef LE_STREAM_H
#define LE_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "logengine.h"
#include "sink/linesink.h"

typedef struct le__stream le__stream;

/* The stream's kind of line output (linesink.h): open when stream_fd or
 * stream_path is set. */
extern const le__linekind le__stream_kind;

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
