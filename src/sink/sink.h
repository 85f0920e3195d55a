/*
 * sink.h -- where a shard's writer puts its records.  One interface; the
 * segment store (sink_store.c, store.c), the stream of lines
 * (sink_stream.c) and syslog (sink_syslog.c) are its implementations, and
 * the writer's loop (writer.c) calls whichever a shard has without knowing
 * which they are.
 *
 * A batch goes through every sink of the shard in the same order:
 *
 *   put(recs, n)   take records: encode frames, format lines.  May take
 *                  fewer than n when it must commit first (a segment is
 *                  full, its buffer is full); the writer commits and puts
 *                  the rest again.
 *   commit()       make what was taken the sink's responsibility: written
 *                  to the file, handed to the stream's buffer.  0, or
 *                  -errno when it could not (a full disk): nothing taken is
 *                  lost, and the writer calls commit again later.
 *   sync()         put committed records on stable storage.  An error
 *                  means the records committed since the last good sync
 *                  may or may not be there (never retried: see le__store_sync).
 *   tick(now)      periodic work: the interval sync, checkpoints, rotation
 *                  by age.  Called between batches.
 *   drop(unseen)   at close, after commit kept failing: forget what was
 *                  taken and not committed, counting it lost, and `unseen`
 *                  records more that never reached this sink.
 *   close()        the last commit and sync are done: end cleanly
 *                  (truncate preallocated blocks, checkpoint).
 *   stats(out)     add the sink's counters to a le_stats.
 *
 * Accounting.  Every record a sink took is, once committed, exactly one of
 * the sink's delivered or dropped counters; a sink sets `fault` to the
 * error when records it took were lost (a frame no file could hold), and
 * `sync_fault` when a sync failed (in sync(), or inside commit or tick
 * when a segment is sealed), which the writer reports to le_flush.
 *
 * Ring space is released only after every sink of the shard committed the
 * records in it, so a kill -9 at any instant leaves each record in the
 * queue file or in the files of every sink that keeps files.
 */
#ifndef LE_SINK_H
#define LE_SINK_H

#include <stddef.h>
#include <stdint.h>

#include "logengine.h"
#include "record/rec.h"

typedef struct le__sink le__sink;

typedef struct le__sink_ops {
	size_t (*put)(le__sink *s, const le__rec *recs, size_t n);
	int (*commit)(le__sink *s);
	int (*sync)(le__sink *s);
	void (*tick)(le__sink *s, uint64_t now_mono);
	void (*drop)(le__sink *s, uint64_t unseen);
	void (*close)(le__sink *s);
	void (*stats)(le__sink *s, le_stats *out);
	void (*free)(le__sink *s);
} le__sink_ops;

struct le__sink {
	const le__sink_ops *ops;
	/* [writer] nonzero: records taken since the writer last looked were
	 * lost, with this error (-errno or LE_E*). */
	int fault;
	/* [writer] nonzero: a sync failed with this error.  Every record
	 * committed since the last good sync is in doubt, not only those of
	 * the batch the writer is on: a segment sealed in a rotation holds
	 * records of earlier batches not yet synced (LE_SYNC_INTERVAL). */
	int sync_fault;
};

/* The most sinks a shard has: the store and the stream today. */
#define LE_SINKS_MAX 4

#endif
