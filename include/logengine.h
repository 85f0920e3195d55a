/*
 * logengine.h -- the whole public API of liblogengine.
 *
 * logengine takes log records from many application threads without locks,
 * blocking or allocation, keeps them in a queue whose size is fixed by
 * configuration, and has one writer thread per shard batch them into
 * CRC32C-checked segment files that rotate, checkpoint and recover after a
 * crash.  The on-disk format is described byte by byte in docs/FORMAT.md.
 *
 * Conventions used throughout:
 *   - Every function that can fail returns an int: 0 (or a positive count) on
 *     success, a negative value on failure.  A failure is either -errno (a
 *     system error, e.g. -ENOENT) or one of the LE_E* codes below.
 *     le_strerror() names both kinds.
 *   - Memory: the engine allocates everything it needs in le_open() and frees
 *     it in le_close().  Nothing it returns needs to be freed by the caller,
 *     except handles, which are released by their own close function.
 *   - Threads: le_write(), le_logf(), le_flush() and le_stats_get() may be
 *     called from any number of threads at once.  le_open() and le_close()
 *     must not race with any other call on the same engine.  Writer
 *     threads block every signal, so process-directed signals reach the
 *     application's threads, and SIGXFSZ (ulimit -f) becomes EFBIG.
 *   - fork(): in the child, engines opened before the fork refuse records
 *     (LE_ECLOSED) and le_close() only frees the child's copy; the
 *     parent's engine, files and threads are unaffected.  A child that
 *     wants to log opens its own directory.
 *
 * The hot path (le_write, le_logf) takes no lock, calls no malloc and makes
 * no system call in the common case; with LE_OVERFLOW_DROP it never blocks.
 */
#ifndef LOGENGINE_H
#define LOGENGINE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LE_VERSION_MAJOR 0
#define LE_VERSION_MINOR 1
#define LE_VERSION_PATCH 0
#define LE_VERSION_STRING "0.1.0"

/** @return the library's version string, e.g. "0.1.0" (static storage). */
const char *le_version(void);

/* ---------------------------------------------------------------------- */
/* Error codes.  System errors are returned as -errno; ours start at -1000. */

#define LE_OK 0
#define LE_EINVAL (-1000)    /* bad argument or configuration value */
#define LE_EFULL (-1001)     /* queue full: record dropped and counted */
#define LE_ETOOBIG (-1002)   /* record above max_record_bytes (reject mode) */
#define LE_ETIMEDOUT (-1003) /* le_flush deadline passed */
#define LE_ECORRUPT (-1004)  /* damaged file or record */
#define LE_ECLOSED (-1005)   /* engine is closing */
#define LE_EBUSY (-1006)     /* directory is in use by another engine */
#define LE_EIO (-1007)       /* a write or sync failed; see le_stats */
#define LE_EVERSION (-1008)  /* file written by an unknown format version */
#define LE_ENOMEM (-1009)    /* allocation failed (only in open functions) */

/**
 * @return a static, human-readable description of rc (an LE_E* code or
 * -errno).  Never NULL.
 */
const char *le_strerror(int rc);

/**
 * @return a description of the most recent failure of le_open() or
 * le_reader_open() in the calling thread, naming the configuration field or
 * file involved ("queue_capacity: must be between 1 and 16777216").  Empty
 * string when there was none.  Thread-local storage, valid until the next
 * call into the library from the same thread.
 */
const char *le_errmsg(void);

/* ---------------------------------------------------------------------- */
/* Levels. */

enum le_level {
	LE_TRACE = 0,
	LE_DEBUG = 1,
	LE_INFO = 2,
	LE_WARN = 3,
	LE_ERROR = 4,
	LE_FATAL = 5
};

/** @return "TRACE".."FATAL" for a valid level, "?" otherwise. */
const char *le_level_name(int level);

/* ---------------------------------------------------------------------- */
/* Configuration. */

/* What le_write does when the queue has no room for a record. */
enum le_overflow {
	LE_OVERFLOW_DROP = 0,  /* drop it, count it, return LE_EFULL (default) */
	LE_OVERFLOW_BLOCK = 1  /* wait until the writers make room */
};

/* What le_write does with a record above max_record_bytes. */
enum le_oversize {
	LE_OVERSIZE_TRUNCATE = 0, /* keep the first max_record_bytes, flag it */
	LE_OVERSIZE_REJECT = 1    /* return LE_ETOOBIG, count it */
};

/* Optional per-record fields (seed 003).  A segment records which were on. */
#define LE_FIELD_CRC 0x01u       /* CRC32C over the frame */
#define LE_FIELD_TIMESTAMP 0x02u /* nanoseconds since the Unix epoch, UTC */
#define LE_FIELD_LEVEL 0x04u     /* LE_TRACE..LE_FATAL */
#define LE_FIELD_SHARD 0x08u     /* shard number */
#define LE_FIELD_SEQUENCE 0x10u  /* per-shard sequence number */
#define LE_FIELD_ALL 0x1fu

/* Line formats of the stream sink. */
enum le_stream_format {
	LE_STREAM_RAW = 0,  /* the payload, newline-terminated */
	LE_STREAM_TEXT = 1, /* 2026-11-30T21:30:27.123456789Z INFO  payload */
	LE_STREAM_JSON = 2  /* {"seq":..,"ts":"..","level":"..","shard":..,
	                        "msg":".."} */
};

/* When segment data is forced to stable storage. */
enum le_durability {
	LE_SYNC_NONE = 0,     /* only at close; the OS writes back when it likes */
	LE_SYNC_INTERVAL = 1, /* fdatasync every sync_ms if anything was written */
	LE_SYNC_BATCH = 2     /* fdatasync after every batch, before le_flush
	                         returns (default: LE_SYNC_INTERVAL) */
};

typedef struct le_config {
	const char *dir;          /* log directory; must exist unless create_dir */
	int create_dir;           /* 1: mkdir dir (one level) if missing. 0 */
	unsigned shards;          /* writer threads / shard dirs, 1..256. 1 */
	uint32_t queue_capacity;  /* max records queued, all shards. 8192 */
	uint64_t queue_capacity_bytes; /* max payload bytes queued.  Each
	                             shard's ring is sized to hold it, and
	                             producers walk the whole ring, so it
	                             sets the cache footprint (and the tail
	                             latency) as well as the memory. 1 MiB */
	uint32_t max_record_bytes;     /* max payload of one record. 64 KiB */
	int overflow;             /* enum le_overflow. LE_OVERFLOW_DROP */
	int oversize;             /* enum le_oversize. LE_OVERSIZE_TRUNCATE */
	uint32_t fields;          /* LE_FIELD_* bit set. LE_FIELD_ALL */
	uint64_t segment_bytes;   /* rotate past this size. 64 MiB */
	uint32_t segment_max_age_ms; /* rotate older segments; 0 = never. 0 */
	uint64_t retention_bytes; /* keep at most this much per shard; 0 = all */
	uint32_t batch_size;      /* records per write, at most (and at most
	                             queue_capacity / 4). 2048 */
	uint32_t flush_ms;        /* max time a record waits to be written. 50 */
	uint32_t max_pending_bytes; /* bytes per write, at most. 1 MiB */
	int durability;           /* enum le_durability. LE_SYNC_INTERVAL */
	uint32_t sync_ms;         /* period of LE_SYNC_INTERVAL. 1000 */
	uint32_t checkpoint_ms;   /* checkpoint period; 0 = off. 1000 */
	int direct_io;            /* 1: O_DIRECT aligned appends. 0 */
	int mapped_queue;         /* 1: the queue is a shared file mapping,
	                             DIR/shard-NNN/QUEUE, so records le_write
	                             accepted survive a kill -9 of the process
	                             and the next le_open writes them out.
	                             0: process memory.  1 */
	int store;                /* 1: segment files in dir (default).  0: no
	                             segment store (dir unused), the stream
	                             sink only. */
	int stream_fd;            /* > 0: also write every record as a line
	                             to this descriptor (stdout = 1, a pipe, a
	                             file), never letting a slow or stalled
	                             reader block a producer: lines that do not
	                             fit stream_buffer_bytes are dropped,
	                             counted, and reported by a line "N records
	                             dropped".  0: none */
	int stream_format;        /* LE_STREAM_RAW (payload), LE_STREAM_TEXT
	                             (time, level, payload), LE_STREAM_JSON */
	int stream_sync;          /* 1: write each line in the caller's thread,
	                             blocking (a baseline to compare with);
	                             with store = 0 no thread is started */
	uint32_t stream_buffer_bytes; /* lines waiting for the reader. 1 MiB */
	uint32_t crash_flush_ms;  /* > 0: on SIGSEGV, SIGBUS, SIGABRT, SIGFPE
	                             or SIGILL, write out what is queued,
	                             waiting at most this long, then run the
	                             handler that was there before (chained)
	                             or the default action.  0: no handler. 0 */
} le_config;

/** Fill cfg with the defaults shown above (dir = NULL). */
void le_config_init(le_config *cfg);

/* ---------------------------------------------------------------------- */
/* Engine. */

typedef struct le_engine le_engine;

/**
 * Open (or recover) the log directory cfg->dir and start one writer thread
 * per shard.  Recovery finds the valid end of every shard's last segment,
 * truncates a torn tail and continues the sequence numbers.  The engine
 * copies what it needs from cfg; cfg may be freed afterwards.
 *
 * @return 0 and *out set, or LE_EINVAL (bad config value: le_errmsg() names
 * the field), LE_EBUSY (another engine has the directory), -errno (directory
 * missing, unwritable, ...), LE_ECORRUPT / LE_EVERSION (a segment that cannot
 * be recovered).  *out is NULL on failure.  On success le_errmsg() is ""
 * unless a queue file a dead process left was damaged: its records up to
 * the damage were written, the rest dropped, and le_errmsg() says where.
 */
int le_open(le_engine **out, const le_config *cfg);

/**
 * Queue one record.  route_key picks the shard (route_key % shards); records
 * with the same route key are written in call order.  payload is copied
 * before the call returns; the caller keeps ownership.
 *
 * @return 0 when queued; LE_EFULL when the queue had no room (overflow DROP:
 * the record is counted in le_stats.dropped and a marker record reports the
 * count once room returns); LE_ETOOBIG (oversize REJECT); LE_EINVAL for a
 * NULL engine, an invalid level, or a NULL payload with len > 0;
 * LE_ECLOSED once le_close has begun.
 */
int le_write(le_engine *e, uint64_t route_key, int level, const void *payload,
             size_t len);

/**
 * Format a record as printf would and queue it.  The route key is the
 * calling thread's (a number fixed per thread), so one thread's records stay
 * in order.  Messages longer than max_record_bytes are truncated and flagged.
 * The conversions logs use (d i u o x X c s p f F, with every flag, width,
 * precision and length modifier) are formatted by the engine's own code,
 * byte for byte as glibc's printf would, %f exactly rounded; the rest
 * (e g a, %ls, positional arguments, ...) by vsnprintf (src/fmt.c).
 * @return as le_write.
 */
int le_logf(le_engine *e, int level, const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 3, 4)))
#endif
	;

/** va_list form of le_logf. */
int le_vlogf(le_engine *e, int level, const char *fmt, va_list ap);

/**
 * Wait until every record queued before this call is in the segment files
 * (and on stable storage when durability is LE_SYNC_BATCH or
 * LE_SYNC_INTERVAL).  timeout_ms < 0 waits forever.
 * @return 0; LE_ETIMEDOUT; LE_EIO (or -errno) when a write or sync of those
 * records failed.
 */
int le_flush(le_engine *e, int timeout_ms);

typedef struct le_stats {
	uint64_t accepted;      /* well-formed records handed to le_write/logf */
	uint64_t dropped;       /* of those, discarded (queue full or I/O) */
	uint64_t dropped_full;  /*   ... because the queue was full */
	uint64_t dropped_io;    /*   ... because their segment write failed,
	                           or (store = 0) the stream sink had no
	                           room for them, or threw them away after
	                           taking them (its reader gone, or behind a
	                           stalled one at close) */
	uint64_t written;       /* records in segment files (markers excluded);
	                           with store = 0, records handed to the
	                           stream sink and not thrown away since (so
	                           it can go down: to dropped_io, when the
	                           reader dies with lines buffered).
	                           stream_sync records bypass the queue and
	                           are counted only in stream_* */
	uint64_t bytes_written; /* bytes written to segment files (all framing) */
	uint64_t truncated;     /* records cut to max_record_bytes */
	uint64_t rejected;      /* records refused: too big (REJECT) */
	uint64_t markers;       /* "N records dropped" markers written */
	uint64_t queue_records; /* records in the queue now */
	uint64_t queue_bytes;   /* payload bytes in the queue now */
	uint64_t queue_hwm_records; /* most records ever queued at once */
	uint64_t queue_hwm_bytes;   /* most payload bytes ever queued at once */
	uint64_t segments_created;  /* since open */
	uint64_t segments_deleted;  /* by retention, since open */
	uint64_t syncs;             /* fdatasync calls */
	uint64_t checkpoints;       /* checkpoints written */
	uint64_t write_errors;      /* failed write attempts (retried) */
	uint64_t sync_errors;       /* failed syncs (never retried: the
	                               segment is sealed, a new one begun) */
	uint64_t sync_lost;         /* records written whose sync then failed:
	                               maybe on disk, maybe not (counted in
	                               written, reported here) */
	uint64_t blocked;           /* le_write calls that waited (BLOCK) */
	uint64_t recovered_truncated_bytes; /* torn tail cut at open */
	uint64_t recovered_records; /* left queued by a dead process, written
	                               at open (not counted in accepted) */
	uint64_t abandoned_slots;   /* slots claimed by a dead process but
	                               never published: not accepted, skipped */
	uint64_t stream_lines;      /* lines handed to the stream sink and
	                               not thrown away since: written, or
	                               still buffered (after le_close_stats:
	                               whole lines written, every one; a line
	                               cut short by the reader's end counts
	                               dropped) */
	uint64_t stream_dropped;    /* records the stream sink had no room
	                               for, or threw away: its reader gone,
	                               or a stalled reader's lines still
	                               buffered a second into le_close */
	uint64_t stream_bytes;      /* bytes written to stream_fd */
	uint64_t writer_cpu_ns;     /* CPU time of the writer threads (0 in a
	                               fork child, which has none) */
	uint64_t stream_cpu_ns;     /* CPU time of the stream sink's thread
	                               (0 without one, or in a fork child) */
	uint64_t record_hwm_bytes;  /* largest payload accepted (after
	                               truncation to max_record_bytes) */
	int last_error;             /* most recent I/O error, 0 if none */
} le_stats;

/**
 * Snapshot the counters.  Cumulative counters are since le_open; after a
 * le_flush with no concurrent writers, accepted == written + dropped.
 * @return 0, or LE_EINVAL.
 */
int le_stats_get(le_engine *e, le_stats *out);

/**
 * Stop accepting records, write everything queued, sync, checkpoint, join
 * the writer threads and free the engine.  le_close(NULL) does nothing.
 * @return 0, or the first I/O error seen while draining (the engine is
 * freed either way).
 */
int le_close(le_engine *e);

/**
 * le_close, and the counters as they stand once it has done everything:
 * every thread joined, the stream sink's last lines written or, behind a
 * reader stalled for a second, counted in stream_dropped (and, with
 * store 0, in dropped).  So accepted == written + dropped exactly, and
 * stream_lines is the whole lines the descriptor got (with stream_sync,
 * records skip the queue: only stream_* count them).  The only way to
 * read the counts of what le_close itself did.  final may be NULL
 * (le_close); e NULL zeroes it.  In a fork child (le_close there frees
 * the child's copy only) it is the copy's counters, as le_stats_get
 * gives them there.
 * @return as le_close.
 */
int le_close_stats(le_engine *e, le_stats *final);

/* ---------------------------------------------------------------------- */
/* Reader: iterate the records of a log directory, oldest first, merged
 * across shards by timestamp.  Uses only the files; it may run while an
 * engine writes the same directory (it sees what was written when it
 * reached each file). */

enum le_recovery {
	LE_RECOVER_TOLERATE_TAIL = 0, /* a torn tail of a shard's last segment
	                                 is the end of the log; other damage is
	                                 an error (default) */
	LE_RECOVER_ABSOLUTE = 1,      /* any damage, even a torn tail, is an
	                                 error */
	LE_RECOVER_POINT_IN_TIME = 2, /* stop a shard quietly at its first
	                                 damage: a consistent prefix */
	LE_RECOVER_SKIP = 3           /* skip damaged bytes, resume at the next
	                                 valid record */
};

/* Record flags, as stored on disk (docs/FORMAT.md). */
#define LE_REC_TRUNCATED 0x01u /* payload was cut to max_record_bytes */
#define LE_REC_MARKER 0x02u    /* engine marker: "N records dropped" */

typedef struct le_record {
	uint64_t seq;        /* per-shard sequence; when the field was off,
	                        counted from the segment's base sequence */
	uint64_t ts_ns;      /* ns since epoch, UTC (0 if off) */
	int level;           /* LE_* (-1 if the field was off) */
	uint32_t shard;      /* shard the record was read from */
	uint32_t flags;      /* LE_REC_* */
	const void *payload; /* valid until the next le_reader_next/close */
	size_t len;
	const char *file;    /* segment path, valid as payload */
	uint64_t offset;     /* byte offset of the frame in that file */
} le_record;

/* Called for every problem found (damage, torn tail, gap). */
typedef void (*le_problem_fn)(void *arg, const char *file, uint64_t offset,
                              const char *what);

typedef struct le_reader_opts {
	int mode;               /* enum le_recovery */
	le_problem_fn on_problem; /* may be NULL */
	void *arg;              /* passed to on_problem */
	int shard;              /* -1: all shards (default), else only this */
} le_reader_opts;

typedef struct le_reader le_reader;

/** Fill o with defaults: TOLERATE_TAIL, no callback, all shards. */
void le_reader_opts_init(le_reader_opts *o);

/**
 * Open dir for reading.  opts may be NULL for the defaults.
 * @return 0 and *out set; -ENOENT when dir does not exist; LE_ECORRUPT,
 * LE_EVERSION, LE_ENOMEM, -errno.
 */
int le_reader_open(le_reader **out, const char *dir,
                   const le_reader_opts *opts);

/**
 * Fetch the next record into *rec.
 * @return 1 when a record was stored, 0 at the end of the log, LE_ECORRUPT
 * when damage stops the read (mode TOLERATE_TAIL or ABSOLUTE; the problem
 * was reported to on_problem), or -errno.
 */
int le_reader_next(le_reader *r, le_record *rec);

typedef struct le_reader_stats {
	uint64_t records;   /* returned so far */
	uint64_t segments;  /* segment files opened */
	uint64_t bytes;     /* valid frame bytes read */
	uint64_t problems;  /* problems reported */
	uint64_t skipped_bytes; /* bytes skipped over (SKIP mode) */
} le_reader_stats;

/** Counters of a reader so far.  @return 0 or LE_EINVAL. */
int le_reader_stats_get(const le_reader *r, le_reader_stats *out);

/** Close a reader; NULL is a no-op. */
void le_reader_close(le_reader *r);

#ifdef __cplusplus
}
#endif
#endif /* LOGENGINE_H */
