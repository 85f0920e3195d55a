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
 *   - Threads: le_write(), le_logf(), le_logf_kv(), the level macros,
 *     le_logger_get(), le_set_level(), le_get_level(),
 *     le_set_ratelimit(), le_get_ratelimit(), le_set_backtrace(),
 *     le_dump_backtrace(), le_reopen(),
 *     le_flush() and le_stats_get() may be called from any number of
 *     threads at once.  le_close() is like
 *     free(): call it once, after every other call on the engine has
 *     returned and when no more will be made (a call racing with it, or
 *     any call after it, is undefined).  The engine's threads block every
 *     signal, so process-directed signals reach the application's
 *     threads, and SIGXFSZ (ulimit -f) becomes EFBIG.
 *   - fork(): in the child, engines opened before the fork refuse records
 *     (LE_ECLOSED) and le_close() only frees the child's copy; the
 *     parent's engine, files and threads are unaffected.  A child that
 *     wants to log opens its own directory.
 *   - NULL handles: a NULL le_engine * or le_logger * in a logging call
 *     never crashes: the call logs to the default engine
 *     (le_set_default), or without one does nothing and returns
 *     LE_EINVAL.  Nothing about logging stops the program either: a bad
 *     logger name gives a usable logger (le_logger_get), and le_open
 *     reports a bad level item or syslog host and goes on (le_stats
 *     .config_errors, .syslog_resolve_errors).
 *
 * The hot path (le_write, le_logf, le_logf_kv, the level macros) takes no
 * lock, calls no malloc and makes no system call in the common case; with
 * LE_OVERFLOW_DROP it never blocks.
 */
#ifndef LOGENGINE_H
#define LOGENGINE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * LE_API marks the functions the library exports.  It is built with
 * -fvisibility=hidden, so the shared library's dynamic symbol table holds
 * these and nothing else: its internals cannot be called, or clash with a
 * program's own names.
 */
#if defined(__GNUC__) && __GNUC__ >= 4
#define LE_API __attribute__((visibility("default")))
#else
#define LE_API
#endif

#define LE_VERSION_MAJOR 0
#define LE_VERSION_MINOR 1
#define LE_VERSION_PATCH 0
#define LE_VERSION_STRING "0.1.0"

/** @return the library's version string, e.g. "0.1.0" (static storage). */
LE_API const char *le_version(void);

/* ---------------------------------------------------------------------- */
/* Error codes.  System errors are returned as -errno; ours start at -1000. */

#define LE_OK 0
#define LE_EINVAL (-1000)    /* bad argument or configuration value */
#define LE_EFULL (-1001)     /* queue full: record dropped and counted */
#define LE_ETOOBIG (-1002)   /* record above max_record_bytes (reject mode) */
#define LE_ETIMEDOUT (-1003) /* le_flush deadline passed */
#define LE_ECORRUPT (-1004)  /* damaged file or record */
#define LE_ECLOSED (-1005)   /* engine closed to this process (fork) */
#define LE_EBUSY (-1006)     /* directory is in use by another engine */
#define LE_EIO (-1007)       /* a write or sync failed; see le_stats */
#define LE_EVERSION (-1008)  /* file written by an unknown format version */
#define LE_ENOMEM (-1009)    /* allocation failed (only in open functions),
                                or no logger entry left (le_set_level) */
#define LE_EUNSAFE (-1010)   /* refused a file inside the log directory: a
                                symbolic link, FIFO, socket, device or hard
                                link where the engine's own file or
                                directory should be (le_errmsg names it) */

/**
 * @return a static, human-readable description of rc (an LE_E* code or
 * -errno).  Never NULL.
 */
LE_API const char *le_strerror(int rc);

/**
 * @return a description of the most recent failure of le_open(),
 * le_reader_open(), le_logger_get(), le_set_level() or
 * le_set_ratelimit() in the calling thread, naming the configuration field or
 * file involved ("queue_capacity: must be between 1 and 16777216").  Empty
 * string when there was none.  Thread-local storage, valid until the next
 * call into the library from the same thread.
 */
LE_API const char *le_errmsg(void);

/* ---------------------------------------------------------------------- */
/* Levels. */

enum le_level {
	LE_TRACE = 0,
	LE_DEBUG = 1,
	LE_INFO = 2,
	LE_WARN = 3,
	LE_ERROR = 4,
	LE_FATAL = 5,
	LE_OFF = 6   /* a threshold only (le_set_level): nothing passes it */
};

/** @return "TRACE".."FATAL" for a valid level, "?" otherwise. */
LE_API const char *le_level_name(int level);

/**
 * Parse a level name as LOGENGINE_LEVEL and le_config.levels spell it
 * (spdlog's names, any case): trace, debug, info, warn or warning, error
 * or err, fatal or critical, off.
 * @return LE_TRACE..LE_OFF, or LE_EINVAL.
 */
LE_API int le_level_parse(const char *name);

/**
 * Severity numbers of other systems (docs/FORMAT.md, "Severity"):
 *   level    syslog (RFC 5424)   OpenTelemetry SeverityNumber
 *   TRACE    7 debug             1  TRACE
 *   DEBUG    7 debug             5  DEBUG
 *   INFO     6 informational     9  INFO
 *   WARN     4 warning           13 WARN
 *   ERROR    3 error             17 ERROR
 *   FATAL    2 critical          21 FATAL
 * @return that number, or -1 for a level outside LE_TRACE..LE_FATAL.
 */
LE_API int le_level_syslog(int level);
LE_API int le_level_otel(int level);

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

/* Optional per-record fields.  A segment records which were on. */
#define LE_FIELD_CRC 0x01u       /* CRC32C over the frame */
#define LE_FIELD_TIMESTAMP 0x02u /* nanoseconds since the Unix epoch, UTC */
#define LE_FIELD_LEVEL 0x04u     /* LE_TRACE..LE_FATAL */
#define LE_FIELD_SHARD 0x08u     /* shard number */
#define LE_FIELD_SEQUENCE 0x10u  /* per-shard sequence number */
#define LE_FIELD_ALL 0x1fu

/* Line formats of the stream sink. */
enum le_stream_format {
	LE_STREAM_RAW = 0,  /* the payload, newline-terminated (typed fields,
	                       if any, follow as " key=value" in every
	                       format, or as "fields":{..} in JSON) */
	LE_STREAM_TEXT = 1, /* 2026-11-30T21:30:27.123456789Z INFO  payload */
	LE_STREAM_JSON = 2  /* {"seq":..,"ts":"..","level":"..","shard":..,
	                        "msg":".."} */
};

/* When segment data is forced to stable storage.  The fdatasyncs run on
 * a sync thread of each shard's own, never on the writer's: the writer
 * goes on writing while they run, and le_flush returns once the records
 * before it are synced. */
enum le_durability {
	LE_SYNC_NONE = 0,     /* only at close; the OS writes back when it likes */
	LE_SYNC_INTERVAL = 1, /* fdatasync every sync_ms if anything was written */
	LE_SYNC_BATCH = 2     /* every batch: one fdatasync covers all the
	                         batches written while the previous one ran
	                         (default: LE_SYNC_INTERVAL) */
};

#define LE_DEFERRED_OFF 0xffffffffu /* le_config.deferred_sites */

typedef struct le_config {
	size_t struct_size;       /* sizeof(le_config) as this program was
	                             compiled: set by le_config_init, not by
	                             hand (see le_config_init) */
	const char *dir;          /* log directory; must exist unless create_dir */
	int create_dir;           /* 1: mkdir dir (one level) if missing. 0 */
	unsigned shards;          /* writer threads / shard dirs, 1..256.
	                             Each shard has a writer thread, a sync
	                             thread (durability other than
	                             LE_SYNC_NONE) and keeps 2 descriptors
	                             (its segment and checkpoint; the engine
	                             1 more): 256 shards fit ulimit -n 1024.
	                             le_open out of descriptors fails with
	                             -EMFILE, le_errmsg saying how many the
	                             shards need and the limit. 1 */
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
	uint64_t segment_bytes;   /* rotate past this size.  The open
	                             segment's blocks are reserved ahead of
	                             the writes as the rate asks: 64 KiB
	                             first, doubled while each lasts under a
	                             second, up to 8 MiB; cut at close.
	                             64 MiB */
	uint32_t segment_max_age_ms; /* rotate older segments; 0 = never. 0 */
	uint64_t retention_bytes; /* keep at most this much per shard; 0 = all */
	uint32_t batch_size;      /* records per write, at most; at most
	                             queue_capacity / 4.  0: 2048, or
	                             queue_capacity / 4 if less. 0 */
	uint32_t flush_ms;        /* max time a record waits to be written.
	                             An idle shard (nothing logged for the
	                             longest of checkpoint_ms, sync_ms and
	                             1 s, plus twice this) sleeps up to 10 s
	                             (1 s with segment_max_age_ms or the
	                             retention or archive settings by age)
	                             and its next record wakes it (one futex
	                             call in that le_write): the promise
	                             holds, and an idle shard's threads wake
	                             at most once in 10 s. 50 */
	uint32_t max_pending_bytes; /* bytes per write, at most (a batch is
	                             written sooner once its payload is a
	                             quarter of queue_capacity_bytes). 1 MiB */
	int durability;           /* enum le_durability. LE_SYNC_INTERVAL */
	uint32_t sync_ms;         /* period of LE_SYNC_INTERVAL. 1000 */
	uint32_t checkpoint_ms;   /* checkpoint period; 0 = off. 1000 */
	int direct_io;            /* 1: O_DIRECT aligned appends. 0 */
	int mapped_queue;         /* 1: the queue is a shared file mapping,
	                             DIR/shard-NNN/QUEUE, so records le_write
	                             accepted survive a kill -9 of the process
	                             and the next le_open writes them out.
	                             The file is sparse: it gets its blocks
	                             as the queue first reaches them (64 KiB
	                             at le_open, doubled ahead of the
	                             producers by the writer, or by a
	                             producer that outruns it), so a quiet
	                             shard's QUEUE holds tens of KiB on disk
	                             and in memory.  A full disk then refuses
	                             records (LE_EFULL, counted as dropped),
	                             never a SIGBUS.  0: process memory.  1 */
	int store;                /* 1: segment files in dir (default).  0: no
	                             segment store (dir unused): the stream
	                             is the only output. */
	int stream_fd;            /* > 0: also write every record as a line
	                             to this descriptor (stdout = 1, a pipe, a
	                             file), never letting a slow or stalled
	                             reader block a producer: lines that do not
	                             fit stream_buffer_bytes are dropped,
	                             counted, and reported by a line "N records
	                             dropped".  0: none */
	int stream_format;        /* LE_STREAM_RAW (payload), LE_STREAM_TEXT
	                             (time, level, payload), LE_STREAM_JSON */
	uint32_t stream_buffer_bytes; /* lines waiting for the reader. 1 MiB */
	uint32_t crash_flush_ms;  /* > 0: on SIGSEGV, SIGBUS, SIGABRT, SIGFPE
	                             or SIGILL, write out what is queued (and
	                             first every flight recorder's kept
	                             records, le_set_backtrace), waiting at
	                             most this long, then run the handler
	                             that was there before (chained) or the
	                             default action.  0: no handler. 0 */
	/* Levels, loggers, the stream's file, syslog: 0 or NULL is each
	 * one's default (src/engine/abi.c), and the order leaves no padding. */
	uint32_t max_loggers;     /* named loggers (le_logger_get) and names
	                             with a level (le_set_level, levels,
	                             LOGENGINE_LEVEL), at most.  0: 64 */
	const char *levels;       /* the level macros' thresholds, in the
	                             syntax of LOGENGINE_LEVEL (below):
	                             "info,net=debug".  NULL: "info".  The
	                             environment variable LOGENGINE_LEVEL, when
	                             set, is applied after this (it wins).
	                             Copied by le_open */
	const char *stream_path;  /* instead of stream_fd: a file the stream
	                             sink appends to (created with file_mode,
	                             0640, if missing: it holds every
	                             payload), and opens again by name when
	                             le_reopen asks (logrotate).  Copied.
	                             NULL */
	const char *syslog_addr;  /* "tcp://HOST:PORT" or "udp://HOST:PORT"
	                             (HOST a name, an IPv4 address or an
	                             [IPv6] one): also send every record to a
	                             syslog server as an RFC 5424 message, its
	                             fields as structured data; over TCP with
	                             octet counting (RFC 6587), reconnecting
	                             with backoff.  A thread of its own and a
	                             bounded buffer: a slow or dead server
	                             costs dropped (and counted) records,
	                             never a blocked caller.  A HOST that
	                             does not resolve at le_open is
	                             reported (a line on stderr, le_errmsg,
	                             le_stats.syslog_resolve_errors) and
	                             looked up again at each reconnection;
	                             le_open succeeds.  A value that is not
	                             such an address ("tpc://...") is
	                             reported (stderr, le_errmsg naming
	                             syslog_addr, config_errors) and the
	                             engine opens without this output --
	                             unless it would be the only output
	                             (store 0, no stream): LE_EINVAL.
	                             Copied.  NULL */
	const char *syslog_app;   /* APP-NAME of the messages; NULL: the
	                             program's name.  Copied */
	int source_location;      /* 1: records of the level macros carry the
	                             call's file, line and function as fields
	                             code.file, code.line, code.func. 0 */
	int syslog_facility;      /* 1..23 (RFC 5424).  0: 1, user-level
	                             (0, kern, is the kernel's own) */
	uint32_t syslog_buffer_bytes; /* messages waiting to be sent, 64 KiB
	                             to 1 GiB.  0: 1 MiB */
	uint32_t reserved_;       /* 0.  Room for a later setting: le_config
	                             ends without padding, so struct_size
	                             covers every byte a program may set */
	uint64_t retention_unshipped_bytes; /* with a forwarder's cursor in a
	                             shard (DIR/shard-NNN/FORWARD, written by
	                             `logengine forward`), retention keeps the
	                             segments it has not shipped until the
	                             shard would hold more than retention_bytes
	                             plus this; past it they are deleted and
	                             their records counted in lost_unshipped.
	                             0: no such margin (retention as without a
	                             forwarder, the loss counted). 1 GiB */
	uint32_t file_mode;       /* permission bits of every file the engine
	                             creates in dir (segments, QUEUE,
	                             CHECKPOINT, LOCK, indexes, live pages),
	                             before the umask; must include 0600 and
	                             be within 0777.  0: 0640 (the owner
	                             writes, its group reads, others nothing) */
	uint32_t dir_mode;        /* the same for the directories it creates
	                             (dir with create_dir, shard-NNN); must
	                             include 0700.  0: 0750 */
	uint64_t retention_age_ms; /* delete sealed segments last written
	                             longer ago than this (checked every
	                             second; beside retention_bytes, and
	                             keeping what a forwarder has not shipped
	                             as it does).  0: no age limit (default) */
	uint32_t deferred_sites;  /* call sites whose records are queued as
	                             their arguments and formatted later (the
	                             level macros with a literal format): each
	                             shard's SITES file holds this many
	                             descriptors, 1 to 65536 (a sparse file:
	                             its area gets blocks as descriptors
	                             come); a site past them, or met once the
	                             disk was full, formats at the call (the
	                             text is the same either way).  LE_DEFERRED_OFF: every call
	                             formats at the call.  0: 4096 */
	uint32_t archive_keep_segments; /* compress each shard's sealed
	                             segments beyond its newest this many
	                             (NAME.seg -> NAME.seg.zst, zstd, on a
	                             thread of the engine's own, crash-safely;
	                             readers, cat, verify and stats read them
	                             as before).  0: not by count (default) */
	uint64_t archive_after_ms; /* compress sealed segments last written
	                             longer ago than this (checked every
	                             second).  Neither this nor
	                             archive_keep_segments compresses what a
	                             forwarder has not shipped yet.  0: not by
	                             age (default) */
	int archive_level;        /* zstd level of archives, 1..19.  0: 3 */
	uint32_t queue_checksum;  /* 1: each record in the mapped queue
	                             carries a CRC32C over its payload, level,
	                             flags, length and time, put by the
	                             logging call and checked when a dead
	                             process's queue is recovered: a record
	                             whose bytes changed after it was queued
	                             (a wild write of the crashing process, a
	                             flipped bit) is dropped, counted and
	                             named (recover exits 1, le_errmsg,
	                             recovery_damaged) instead of written out
	                             changed.  Costs each call a CRC of its
	                             payload (docs/BENCHMARKS.md).  Only with
	                             mapped_queue (a process's own memory
	                             is never recovered).  0: the checks that
	                             cost nothing (level, flags, lengths) */
	/* The flight recorder (le_set_backtrace): records below a logger's
	 * threshold kept in a ring per shard, written out when needed. */
	const char *backtrace;    /* the levels loggers keep below their
	                             threshold, in the syntax of levels:
	                             "debug,net=trace" keeps the root's (and
	                             so every logger's) DEBUG and up, and
	                             net's TRACE and up.  "off" keeps none.
	                             The environment variable
	                             LOGENGINE_BACKTRACE, when set, is applied
	                             after this (it wins).  NULL: none.
	                             Copied by le_open */
	uint32_t backtrace_records; /* entries of each shard's ring, rounded
	                             up to a power of two (at least 16); the
	                             oldest kept record is dropped (counted
	                             in backtrace_dropped) when a new one
	                             needs its entry.  0: 1024 */
	int backtrace_trigger;    /* a record at or above this level on a
	                             logger with a recorder writes that
	                             logger's kept records first, LE_DEBUG ..
	                             LE_OFF (LE_OFF: never).  0: LE_ERROR */
} le_config;

/**
 * Fill cfg with the defaults shown above (dir = NULL) and set its
 * struct_size.  Call it first: le_open refuses a configuration it did not
 * fill (LE_EINVAL, naming struct_size).
 *
 * le_config grows at its end as the library gains settings, without
 * breaking programs already built: le_config_init is a macro that records
 * the size of le_config this program was compiled with, so a newer
 * library gives the fields the program does not know their defaults, and
 * an older library runs the program as long as it leaves the fields that
 * library does not know at their defaults (or le_open: LE_EINVAL, saying
 * so).  le_config_init_sized is the function behind it, for bindings from
 * other languages: size is the size of their le_config.
 */
#define le_config_init(cfg) le_config_init_sized((cfg), sizeof(le_config))
LE_API void le_config_init_sized(le_config *cfg, size_t size);

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
 * be recovered), LE_EUNSAFE (a symbolic link, FIFO, device or hard link
 * inside the directory where the engine's file should be: le_errmsg()
 * names it; nothing was followed or written).  *out is NULL on failure,
 * and no empty segment is left behind.  On success le_errmsg() is ""
 * unless recovery met something in a queue file a dead process left: a
 * damaged header or clock, slots never published, or damaged slots --
 * those records dropped (or written with a clamped time), counted in
 * le_stats.recovery_damaged, and their positions named in le_errmsg() --
 * or a damaged SITES table: deferred records whose call site it no longer
 * holds are written as the text LE_SITE_LOST_TEXT, counted in
 * le_stats.recovery_damaged, the first named in le_errmsg().
 */
LE_API int le_open(le_engine **out, const le_config *cfg);

/**
 * Queue one record.  route_key picks the shard (route_key % shards); records
 * with the same route key are written in call order.  payload is copied
 * before the call returns; the caller keeps ownership.
 *
 * @return 0 when queued; LE_EFULL when the queue had no room (overflow DROP:
 * the record is counted in le_stats.dropped and a marker record reports the
 * count once room returns); LE_ETOOBIG (oversize REJECT); LE_EINVAL for a
 * NULL engine when no default is set (le_set_default; with one, e NULL
 * writes to it), an invalid level, or a NULL payload with len > 0;
 * LE_ECLOSED in a fork child (see fork() above).
 */
LE_API int le_write(le_engine *e, uint64_t route_key, int level,
                    const void *payload, size_t len);

/**
 * Format a record as printf would and queue it.  The route key is the
 * calling thread's (a number fixed per thread), so one thread's records stay
 * in order.  Messages longer than max_record_bytes are truncated and flagged.
 * The conversions logs use (d i u o x X c s p f F, with every flag, width,
 * precision and length modifier) are formatted by the engine's own code,
 * byte for byte as glibc's printf would, %f exactly rounded; the rest
 * (e g a, %ls, positional arguments, ...) by vsnprintf (src/base/fmt.c).
 * @return as le_write.
 */
LE_API int le_logf(le_engine *e, int level, const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 3, 4)))
#endif
	;

/** va_list form of le_logf. */
LE_API int le_vlogf(le_engine *e, int level, const char *fmt, va_list ap);

/**
 * Wait until every record queued before this call is in the segment files
 * (and on stable storage when durability is LE_SYNC_BATCH or
 * LE_SYNC_INTERVAL); with store = 0, until its line is written to the
 * stream and its message handed to the syslog server.  timeout_ms < 0 waits forever.
 * @return 0; LE_ETIMEDOUT; or, when some of those records were lost or a
 * sync of them failed (they may or may not be on disk), the error
 * (-errno, or LE_EIO).  A write that failed and then succeeded when
 * retried is not an error of the records (le_stats counts it).
 * LE_ECLOSED in a fork child (see fork() above); LE_EINVAL for e NULL
 * with no default engine (le_set_default).
 */
LE_API int le_flush(le_engine *e, int timeout_ms);

/*
 * Counters.  Cumulative ones count since le_open.  Every record handed to
 * le_write / le_logf is accepted; of those, the queue drops some when it is
 * full (dropped_full), and each sink accounts for every other one, once it
 * has left the queue, and for the records le_open recovered from a dead
 * process's queue (recovered_records, which went through every sink):
 *   store:   accepted + recovered_records
 *              = dropped_full + written + dropped_io
 *   stream:  accepted + recovered_records
 *              = dropped_full + stream_lines + stream_dropped
 *   syslog:  accepted + recovered_records
 *              = dropped_full + syslog_sent + syslog_dropped
 * (records still queued or in a batch complete the sum; after
 * le_close_stats each holds exactly).  Recovery at le_open: damaged
 * records of a dead process's queue are dropped (no longer framable) or
 * written with a doubt (a time out of range, clamped), and le_errmsg
 * names the slots.  Retention deletes segments a forwarder has not shipped
 * only past retention_unshipped_bytes.
 */
typedef struct le_stats {
	uint64_t accepted;      /* records handed in, well formed */
	uint64_t dropped;       /* dropped_full + dropped_io */
	uint64_t dropped_full;  /* dropped: the queue was full */
	uint64_t dropped_io;    /* lost: the segment store could not write them */
	uint64_t written;       /* records written to segment files */
	uint64_t bytes_written; /* bytes written to segment files, all framing */
	uint64_t truncated;     /* records cut to max_record_bytes */
	uint64_t rejected;      /* records refused: above max_record_bytes */
	uint64_t markers;       /* "N records dropped" markers written */
	uint64_t queue_records; /* records in the queue now */
	uint64_t queue_bytes;   /* payload bytes in the queue now */
	uint64_t queue_hwm_records; /* most records ever queued at once */
	uint64_t queue_hwm_bytes;   /* most payload bytes ever queued at once */
	uint64_t segments_created;  /* segment files created */
	uint64_t segments_deleted;  /* segment files deleted by retention */
	uint64_t syncs;             /* fdatasync calls on segment files */
	uint64_t checkpoints;       /* checkpoints written */
	uint64_t write_errors;      /* failed segment writes (each retried) */
	uint64_t sync_errors;       /* failed syncs (never retried) */
	uint64_t sync_lost;         /* records written whose sync then failed */
	uint64_t blocked;           /* le_write calls that waited (BLOCK) */
	uint64_t recovered_truncated_bytes; /* torn tail cut at open */
	uint64_t recovered_records; /* records written at open from a dead process */
	uint64_t abandoned_slots;   /* a dead process's slots it never published */
	uint64_t stream_lines;      /* records written to the stream as lines */
	uint64_t stream_dropped;    /* records the stream sink dropped */
	uint64_t stream_bytes;      /* bytes written to the stream */
	uint64_t writer_cpu_ns;     /* CPU time of the writer threads */
	uint64_t stream_cpu_ns;     /* CPU time of the stream sink's thread */
	uint64_t record_hwm_bytes;  /* largest payload accepted (truncated) */
	int last_error;             /* most recent I/O error, 0 if none */
	uint64_t lost_unshipped;    /* records retention deleted before shipping */
	uint64_t syslog_sent;       /* records handed to the syslog socket */
	uint64_t syslog_dropped;    /* records the syslog sink dropped */
	uint64_t syslog_bytes;      /* bytes sent to the syslog server */
	uint64_t syslog_connects;   /* connections made to it (TCP) */
	uint64_t stream_reopens;    /* stream_path opened again (le_reopen) */
	uint64_t recovery_damaged;  /* a dead process's damaged records */
	uint64_t segments_archived; /* sealed segments compressed (archive_*) */
	uint64_t archived_bytes_in; /* their bytes before compression */
	uint64_t archived_bytes_out; /* the archives' bytes */
	uint64_t config_errors;     /* settings le_open reported and left
	                               out: an item of levels or
	                               LOGENGINE_LEVEL, a syslog_addr that
	                               is not tcp:// or udp://HOST:PORT */
	uint64_t syslog_resolve_errors; /* lookups of syslog_addr's host
	                               that failed (at le_open, then each
	                               retry) */
	uint64_t live_pages_off;    /* shards without a live page (STATS) */
	uint64_t level_records[LE_FATAL + 1]; /* records the writers took
	                               from the queue, by level (index
	                               LE_TRACE .. LE_FATAL): accepted less
	                               dropped_full and queue_records, each
	                               then written or lost (dropped_io);
	                               markers and recovered_records not */
	uint64_t suppressed;        /* calls of the rate-limited macros
	                               (le_info_every ...) suppressed, as
	                               their summaries reported them */
	uint64_t suppressed_summaries; /* "N similar records suppressed"
	                               records written */
	uint64_t backtrace_written; /* kept records handed to the queue as
	                               recorded history (le_set_backtrace) */
	uint64_t backtrace_dropped; /* kept records lost before being
	                               written out: overwritten by newer ones
	                               in a full ring, or a ring entry busy
	                               (counted as it is read: one look at
	                               each ring entry, none by the calls) */
} le_stats;

/**
 * Snapshot the counters.  A record moves between counters as the writers
 * work, so a snapshot taken while records flow can be one batch out of
 * step; after le_flush with no producers running, the sums above hold.
 * In a fork child the CPU times are 0 (its copy has no threads).
 *
 * le_stats grows at its end as the library counts more; le_stats_get is
 * a macro that passes the size of le_stats this program was compiled
 * with, so a newer library writes no byte past it, and an older one
 * zeroes the counters it does not keep.  le_stats_get_sized is the
 * function behind it (size: the caller's sizeof(le_stats)).
 * @return 0, or LE_EINVAL (e or out NULL).
 */
#define le_stats_get(e, out) le_stats_get_sized((e), (out), sizeof(le_stats))
LE_API int le_stats_get_sized(le_engine *e, le_stats *out, size_t size);

/**
 * Write everything queued, sync, checkpoint, join the engine's threads and
 * free the engine.  The stream sink gets a second to hand its last lines
 * to a stalled reader; what is left is counted in stream_dropped.
 * le_close(NULL) does nothing; any other call on e after it (a second
 * le_close included) is undefined, as with free().
 * @return 0, or the error of records lost or left in doubt (a failed sync)
 * that no le_flush reported (the engine is freed either way).
 */
LE_API int le_close(le_engine *e);

/**
 * le_close, and the counters as they stand once it has done everything
 * (the only way to read what le_close itself did): every thread joined, so
 * the sums of le_stats hold exactly.  final may be NULL; e NULL zeroes
 * it.  In a fork child, the copy's counters, as le_stats_get gives them.
 * A macro passing sizeof(le_stats), as le_stats_get.
 * @return as le_close.
 */
#define le_close_stats(e, final)                                              \
	le_close_stats_sized((e), (final), sizeof(le_stats))
LE_API int le_close_stats_sized(le_engine *e, le_stats *final, size_t size);

/**
 * Ask the stream sink to open stream_path again (after logrotate renamed
 * it: the `create` method).  Async-signal-safe: it only stores a flag, so
 * a SIGHUP handler may call it.  The stream's thread opens the file anew
 * within 100 ms; every line handed to the stream before that goes to the
 * old file, every line after to the new one, none to both.  (logrotate's
 * `copytruncate` cannot work so: lines written between its copy and its
 * truncate are in neither file.)
 * @return 0 (also when there is no stream_path: nothing to do), or
 * LE_EINVAL for a NULL engine.
 */
LE_API int le_reopen(le_engine *e);

/**
 * Make e the default engine: the one a NULL handle logs to, so that code
 * with no handle at hand can log, as spdlog::info does.  With a default
 * engine set, le_write, le_logf, le_vlogf, le_logf_kv, le_flush,
 * le_reopen, le_logger_get, le_set_level, le_get_level and the level
 * macros (and their _kv forms) given a NULL le_engine * or le_logger *
 * act on the default engine (a macro: its root logger).  Without one,
 * each of them given NULL does nothing and returns LE_EINVAL (the macros:
 * nothing at all); none ever crashes on a NULL handle.
 *
 * le_close of the default engine clears it (closing another engine does
 * not); le_set_default(NULL) clears it too.  As for any engine, no call
 * may still be running on it when it is closed: stop the threads that
 * log through NULL first.  One pointer, stored and loaded atomically: a
 * NULL handle costs the hot path one load more, no lock.
 * @return 0.
 */
LE_API int le_set_default(le_engine *e);

/** @return the default engine (le_set_default), or NULL. */
LE_API le_engine *le_get_default(void);

/* ---------------------------------------------------------------------- */
/* Levels, named loggers, fields: the level macros.
 *
 *   le_logger *net = le_logger_get(e, "net.http");
 *   le_info(net, "listening on port %d", port);
 *   le_warn_kv(net, LE_FIELDS(LE_STR("user", u), LE_I64("status", 503)),
 *              "slow request took %.1f ms", ms);
 *   le_debug(e, "the engine's root logger works too");
 *
 * A level macro takes a le_engine * (its root logger) or a le_logger *,
 * tests the logger's threshold, and only when the record passes evaluates
 * its arguments and queues it, routed by the calling thread, under the
 * hot path's rules (no lock, no malloc, no system call in the common
 * case).  A record below the threshold costs one load and one compare.
 * A NULL handle (NULL itself included: le_info(NULL, "...")) logs to the
 * default engine's root logger (le_set_default), and without one does
 * nothing: no crash, no argument evaluated.  The test for NULL is one
 * branch the processor predicts, before the threshold's load.
 *
 * Deferred formatting.  When the format is a string literal, the call
 * does not format: it copies the arguments (strings with their length)
 * into the queue with its call site's number, and the text is made later,
 * by the writer for the stream and syslog outputs and by readers for the
 * segment files, which carry each call site's format (docs/FORMAT.md,
 * "Deferred records").  The text is le_logf's (snprintf's) for the same
 * arguments, byte for byte; a string is read at the call, so it may be
 * freed as soon as the macro returns.  A format with a conversion outside
 * that list (%n, %m, %Lf, %ls, positional arguments ...), more than
 * LE_DEFER_ARGS_MAX arguments, an argument whose type is not the one
 * its conversion reads, a record above max_record_bytes, or a call site
 * past le_config.deferred_sites is formatted at the call, as le_logf
 * does.  A format that is not a literal always is.  At most 32 arguments
 * after the format.  The macros are statements; a record the
 * queue has no room for is dropped and counted as le_logf's would be.
 * le_fatal logs at LE_FATAL and returns: it does not end the program.
 *
 * Compile-time removal: `#define LE_MIN_LEVEL LE_WARN` before including
 * this header, and le_trace, le_debug and le_info calls compile to
 * nothing (their arguments are not evaluated; their formats are still
 * checked).
 *
 * Thresholds.  Logger names are dotted paths ("net", "net.http"): each
 * part 1 or more of A-Z a-z 0-9 _ -, at most LE_LOGGER_NAME_MAX bytes in
 * all.  A logger's threshold is the level set for its own name, else for
 * its nearest parent with one ("net" for "net.http"), else the root's.
 * The root starts at LE_INFO; le_config.levels and then the environment
 * variable LOGENGINE_LEVEL set levels at le_open, in spdlog's syntax:
 * comma-separated items, a bare level for the root, name=level for a
 * logger:
 *
 *   LOGENGINE_LEVEL=warn,net=debug,net.http.client=off
 *
 * An item that does not parse (a level that is not one, a logger name
 * that is not a dotted path, no room for the name) is left out, the
 * others apply: le_open prints one line on stderr naming the setting
 * (levels or LOGENGINE_LEVEL) and the item, counts it in
 * le_stats.config_errors, and le_errmsg() says the same once it returned
 * 0.  A service never fails to start over a typo in its level.
 * le_set_level changes thresholds at run time.  le_config.backtrace and
 * then LOGENGINE_BACKTRACE set flight recorders (le_set_backtrace) in the
 * same syntax and with the same reports: LOGENGINE_BACKTRACE=debug.
 */

#define LE_LOGGER_NAME_MAX 127

typedef struct le_logger le_logger;

/**
 * The logger named `name` (created on first use; name NULL or "" gives
 * the root).  Not for the hot path: it takes a lock, and its first call
 * for a name may allocate.  The logger lives until le_close; every call
 * with the same name returns the same pointer.  Records of a named logger
 * carry its name as the field "logger".
 *
 * Any name gives a usable logger.  A name that is not a dotted path is
 * cleaned: each byte outside A-Z a-z 0-9 _ - . becomes '_', empty parts
 * are left out, and it is cut to LE_LOGGER_NAME_MAX bytes ("net/http"
 * gives "net_http"; le_logger_name() says which); le_errmsg() says so.
 * When all max_loggers entries are in use, a new name gets the root
 * logger, and le_errmsg() says that.  e NULL: the default engine's
 * logger (le_set_default).
 * @return the logger; NULL only for e NULL with no default engine.
 */
LE_API le_logger *le_logger_get(le_engine *e, const char *name);

/** @return the logger's name ("" for the root); static until le_close. */
LE_API const char *le_logger_name(const le_logger *lg);

/**
 * Set the threshold of `name` (NULL or "": the root) and so of every
 * logger below it that has no level of its own.  level LE_TRACE..LE_OFF,
 * or -1 to remove the name's own level (it inherits again; not for the
 * root).  Takes a lock; the macros see the change at once, without one.
 * @return 0, LE_EINVAL (bad name or level; le_errmsg() says which), or
 * LE_ENOMEM (all max_loggers entries in use).
 */
LE_API int le_set_level(le_engine *e, const char *name, int level);

/*
 * The flight recorder.  A logger with a recorder level below its
 * threshold keeps the records between the two (captured as a deferred
 * call is: the call site and its arguments, no formatting) in a ring per
 * shard, DIR/shard-NNN/BACKTRACE, a shared file mapping like the queue,
 * instead of dropping them.  They are written to the log, each marked
 * as recorded history (LE_REC_BACKTRACE; `logengine cat`, the stream
 * and syslog lines show "{backtrace}", JSON "backtrace":true), with the
 * level and order they were logged with:
 *   - when that logger logs a record at or above
 *     le_config.backtrace_trigger (LE_ERROR): its own kept records (not
 *     those of its parent or children), at most `records` of the newest
 *     from each shard, before the trigger in its shard;
 *   - on le_dump_backtrace;
 *   - from the crash handler (le_config.crash_flush_ms), before the
 *     queue is flushed, then a record naming the signal;
 *   - after the process died without le_close (kill -9, the OOM killer,
 *     a crash without the handler): by the next le_open of the
 *     directory or `logengine recover`, then a record saying it died.
 * A record taken from the ring is written once.  Records formatted at
 * the call (a format that is not a literal, the _kv forms) are kept as
 * their text.  A kept record is cut to its entry (232 bytes of payload,
 * fields included): a longer deferred one is formatted and cut, flagged
 * LE_REC_TRUNCATED.  Times: a shard's times never go back, so a kept
 * record written after newer ones of its shard carries the newest time.
 */

/**
 * Keep lg's records at `level` and above that its threshold skips, and
 * those of every logger below it without a recorder of its own (as
 * thresholds are inherited).  level LE_TRACE..LE_FATAL, LE_OFF (keep
 * none), or -1 (inherit again; not for the root).  records: how many of
 * its newest kept records a trigger writes from each shard, 0: as many as
 * the rings hold (le_config.backtrace_records per shard).  lg NULL: the default engine's
 * root.  Takes a lock, like le_set_level.
 * @return 0, LE_EINVAL (bad level; le_errmsg() says so), or -errno /
 * LE_ENOMEM when the rings cannot be made (the first recorder makes them).
 */
LE_API int le_set_backtrace(le_logger *lg, int level, uint32_t records);

/**
 * Write every kept record of every logger in every shard, in each shard
 * in the order they were logged, into the log of that shard (so before
 * anything logged after this call returns).  e NULL: the default engine.
 * @return the number of records written out, or LE_EINVAL.
 */
LE_API int le_dump_backtrace(le_engine *e);

/** @return the threshold in force for `name` (NULL or "": the root),
 * inherited or its own, or LE_EINVAL for a bad name. */
LE_API int le_get_level(le_engine *e, const char *name);

/* Typed fields: key-value pairs a record carries beside its message,
 * stored typed in the segment (docs/FORMAT.md, "Field block"), read back
 * with le_record_field, printed as key=value in text and as a "fields"
 * object in JSON, sent to syslog as structured data. */
enum le_field_type {
	LE_FT_STRING = 1, /* UTF-8 text (any bytes are kept) */
	LE_FT_INT64 = 2,
	LE_FT_UINT64 = 3,
	LE_FT_DOUBLE = 4,
	LE_FT_BOOL = 5,
	LE_FT_BYTES = 6   /* opaque bytes: base64 in text and JSON */
};

/* Fields one call may pass, at most. */
#define LE_FIELDS_MAX 64

/*
 * One field.  Build them with LE_STR, LE_I64, LE_U64, LE_F64, LE_BOOL and
 * LE_BYTES, which fill in the lengths; a list of them with LE_FIELDS.  The
 * engine copies keys and values before the call returns.  A key is 1 to
 * 255 bytes (a longer one is cut to 255; any bytes are kept, and each
 * output escapes what it must).  From le_record_field, key and string
 * values point into the record and are not NUL-terminated.
 */
typedef struct le_field {
	const char *key;
	uint32_t key_len;
	uint32_t type;          /* enum le_field_type */
	union {
		int64_t i64;
		uint64_t u64;
		double f64;
		int b;              /* 0 or 1 */
		struct {
			const void *ptr;
			size_t len;
		} str;              /* LE_FT_STRING and LE_FT_BYTES */
	} v;
} le_field;

#if defined(__GNUC__) || defined(__clang__)
#define LE__STRLEN(s) __builtin_strlen(s)
#else
#define LE__STRLEN(s) le__strlen(s)
static inline size_t le__strlen(const char *s)
{
	size_t n = 0;
	while (s[n])
		n++;
	return n;
}
#endif

static inline le_field le__field(const char *k, uint32_t type)
{
	le_field f;
	f.key = k;
	f.key_len = (uint32_t)LE__STRLEN(k);
	f.type = type;
	f.v.str.ptr = 0;
	f.v.str.len = 0;
	return f;
}
static inline le_field le__field_str(const char *k, const char *s)
{
	le_field f = le__field(k, LE_FT_STRING);
	f.v.str.ptr = s;
	f.v.str.len = s ? LE__STRLEN(s) : 0;
	return f;
}
static inline le_field le__field_i64(const char *k, int64_t v)
{
	le_field f = le__field(k, LE_FT_INT64);
	f.v.i64 = v;
	return f;
}
static inline le_field le__field_u64(const char *k, uint64_t v)
{
	le_field f = le__field(k, LE_FT_UINT64);
	f.v.u64 = v;
	return f;
}
static inline le_field le__field_f64(const char *k, double v)
{
	le_field f = le__field(k, LE_FT_DOUBLE);
	f.v.f64 = v;
	return f;
}
static inline le_field le__field_bool(const char *k, int v)
{
	le_field f = le__field(k, LE_FT_BOOL);
	f.v.b = v != 0;
	return f;
}
static inline le_field le__field_bytes(const char *k, const void *p,
                                       size_t n)
{
	le_field f = le__field(k, LE_FT_BYTES);
	f.v.str.ptr = p;
	f.v.str.len = n;
	return f;
}

/* key: a NUL-terminated string; s: a NUL-terminated string (NULL: "") */
#define LE_STR(key, s) le__field_str((key), (s))
#define LE_I64(key, v) le__field_i64((key), (int64_t)(v))
#define LE_U64(key, v) le__field_u64((key), (uint64_t)(v))
#define LE_F64(key, v) le__field_f64((key), (double)(v))
#define LE_BOOL(key, v) le__field_bool((key), (v))
#define LE_BYTES(key, p, n) le__field_bytes((key), (p), (n))

/*
 * LE_FIELDS(f1, f2, ...) stands for two arguments, an array on the
 * caller's stack and its length, so the _kv macros take either
 * LE_FIELDS(...) or `array, count`.  Why this shape: the fields are
 * built where the call is (no allocation, nothing to free), typed by the
 * compiler, and the engine gets them as one array it walks twice (to
 * size the record, then to copy it into its queue slot).  C only (C++:
 * pass an array and its count).
 */
#define LE_FIELDS(...)                                                        \
	((const le_field[]){__VA_ARGS__}),                                    \
	        (sizeof((const le_field[]){__VA_ARGS__}) / sizeof(le_field))

/**
 * le_logf with fields: format a record as printf would, attach n fields
 * (n <= LE_FIELDS_MAX) and queue it.  No threshold is tested (as le_logf).
 * A record above max_record_bytes loses message bytes first, then whole
 * fields from the end, and is flagged truncated (oversize TRUNCATE).
 * @return as le_logf; LE_EINVAL also for n > LE_FIELDS_MAX, f NULL with
 * n > 0, or a field whose type is not an enum le_field_type.
 */
LE_API int le_logf_kv(le_engine *e, int level, const le_field *f, size_t n,
                      const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 5, 6)))
#endif
	;

#ifndef LE_MIN_LEVEL
#define LE_MIN_LEVEL LE_TRACE
#endif

#define le_trace(log, ...) LE__LOG(log, LE_TRACE, __VA_ARGS__)
#define le_debug(log, ...) LE__LOG(log, LE_DEBUG, __VA_ARGS__)
#define le_info(log, ...) LE__LOG(log, LE_INFO, __VA_ARGS__)
#define le_warn(log, ...) LE__LOG(log, LE_WARN, __VA_ARGS__)
#define le_error(log, ...) LE__LOG(log, LE_ERROR, __VA_ARGS__)
#define le_fatal(log, ...) LE__LOG(log, LE_FATAL, __VA_ARGS__)

/* The same with fields: le_info_kv(log, LE_FIELDS(...), "fmt", ...). */
#define le_trace_kv(log, ...) LE__LOG_KV(log, LE_TRACE, __VA_ARGS__)
#define le_debug_kv(log, ...) LE__LOG_KV(log, LE_DEBUG, __VA_ARGS__)
#define le_info_kv(log, ...) LE__LOG_KV(log, LE_INFO, __VA_ARGS__)
#define le_warn_kv(log, ...) LE__LOG_KV(log, LE_WARN, __VA_ARGS__)
#define le_error_kv(log, ...) LE__LOG_KV(log, LE_ERROR, __VA_ARGS__)
#define le_fatal_kv(log, ...) LE__LOG_KV(log, LE_FATAL, __VA_ARGS__)

/*
 * Rate limits per call site.
 *
 *   for (;;) {
 *           if (recv(fd, buf, sizeof buf, 0) < 0)
 *                   le_warn_every(net, 1000, 10, "recv: %d", errno);
 *   }
 *
 * A _every macro is its level macro with a limit: at most `burst`
 * records of that call site pass per window of `interval_ms`
 * milliseconds; the calls past them are counted and not logged (their
 * arguments are not evaluated).  The window opens with the first
 * record that passes.  When it has ended with calls suppressed, a
 * summary is logged, on the same logger and at the same level:
 *
 *   37 similar records suppressed at net/recv.c:42
 *
 * with the fields suppressed=37 (an integer) and site="net/recv.c:42"
 * (and logger=, as every record of a named logger).  The next call that
 * passes logs it, before its own record; a site that falls silent has
 * it logged by the engine (the writer of shard 0, which keeps the clock
 * below) once the window has been over for 10 ms, so within about
 * 10 ms + flush_ms of the window's end, with no call of the site.  That
 * summary never waits for queue room (a full queue: the writer tries
 * again at its next pass), and the suppressed calls pay nothing for it.
 * le_close writes every summary still pending.  Two limits.  An engine
 * tracks the first 1024 sites that open a window on it; the count of
 * one past them waits for that site's next record that passes (on this
 * engine or the next one to use the site), le_close does not write it.
 * And the counts are in the process's memory, not in the queue: a
 * process that ends without le_close (kill -9, a crash, with or without
 * the crash handler) loses the counts not yet in a summary: its open
 * windows', and a window's that ended less than 10 ms + flush_ms before
 * (docs/RELIABILITY.md).  Never a record that passed, nor a summary
 * already logged.  le_stats.suppressed and the live page (`logengine stats
 * --live`, `logengine serve`'s dashboard, and its /metrics as
 * logengine_records_suppressed_total) count what the summaries
 * reported.
 *
 * Each call site keeps its window in a static of its own: two sites are
 * limited apart, and one site is one window whatever logger it is given
 * (the summary names the logger of the window's first record).
 * interval_ms <= 0 lets every record pass.
 *
 * Cost.  A suppressed call loads the threshold, the site's state and a
 * clock the engine's writers keep (a word they store at each pass, at
 * least every flush_ms; no clock is read by the call), and adds one to a
 * count: no lock, no system call, no allocation.  Under 5 ns
 * (docs/BENCHMARKS.md).  The first calls a window suppresses, before
 * the inline test knows its burst is spent, take le_every_at's path
 * instead; there, once a window, the engine's writer is woken if it has
 * slept long (idle for a second or more: a futex call), so that the
 * summary is not late.  So a window ends when that clock passes its
 * end: never early, and late by flush_ms (and a millisecond) at most.
 *
 * Threads.  Any number of threads may share a site.  The records let
 * through per window are at most burst + (threads racing at the window's
 * start - 1): a thread that took its place in the old window as the new
 * one opened is counted in the new one.  Suppressed calls are counted
 * exactly: each is in exactly one summary, a call that races with a
 * summary being in the next one.
 *
 * Limits per logger.  An operator can override the limits written in
 * the code without a rebuild, per logger and inherited by children like
 * thresholds: le_set_ratelimit at run time, and at le_open the
 * environment variable LOGENGINE_RATELIMIT, in LOGENGINE_LEVEL's syntax
 * with BURST/INTERVAL for a level:
 *
 *   LOGENGINE_RATELIMIT=20/1s,net=5/10s,net.http=off
 *
 * (INTERVAL in ms, or with a unit ms, s or m; "off" lets every record of
 * a logger's _every sites pass).  A logger's limit in force applies to
 * each of its _every call sites, each site with a window of its own; a
 * logger with none in force (the default) uses the one at the call.  A
 * bad item is reported and left out as LOGENGINE_LEVEL's are
 * (le_stats.config_errors, a line on stderr, le_errmsg()).  A new limit
 * applies from each site's next window.
 */
#define le_log_every(log, lvl, interval_ms, burst, ...)                       \
	LE__LOG_EVERY(log, lvl, interval_ms, burst, __VA_ARGS__)
#define le_trace_every(log, ...) le_log_every(log, LE_TRACE, __VA_ARGS__)
#define le_debug_every(log, ...) le_log_every(log, LE_DEBUG, __VA_ARGS__)
#define le_info_every(log, ...) le_log_every(log, LE_INFO, __VA_ARGS__)
#define le_warn_every(log, ...) le_log_every(log, LE_WARN, __VA_ARGS__)
#define le_error_every(log, ...) le_log_every(log, LE_ERROR, __VA_ARGS__)
#define le_fatal_every(log, ...) le_log_every(log, LE_FATAL, __VA_ARGS__)

/**
 * Set the rate limit of the _every call sites of `name` (NULL or "":
 * the root) and of every logger below it without one of its own:
 * interval_ms > 0 and burst >= 0, at most burst records per site per
 * window (burst 0: only the summaries); interval_ms 0: no limit, every
 * record passes; interval_ms -1: remove the name's own setting (it
 * inherits again; the root's: each site's own limit, at the call).
 * Takes a lock; each site uses the new limit from its next window.
 * @return 0, LE_EINVAL (bad name or values; le_errmsg() says which), or
 * LE_ENOMEM (all max_loggers entries in use).
 */
LE_API int le_set_ratelimit(le_engine *e, const char *name, int interval_ms,
                            int burst);

/**
 * The rate limit in force for `name`, inherited or its own.
 * @return 1 and *interval_ms, *burst set (interval_ms 0: no limit); 0
 * when none is set (each site's own limit applies); LE_EINVAL for a bad
 * name or e NULL without a default engine.
 */
LE_API int le_get_ratelimit(le_engine *e, const char *name, int *interval_ms,
                            int *burst);

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
#define LE_REC_FIELDS 0x04u    /* the record carries typed fields */
#define LE_REC_DEFERRED 0x08u  /* stored as a call site's format and its
                                  arguments; readers return the text */
/* Recorded history: a record the flight recorder kept below its logger's
 * threshold and wrote out later (le_set_backtrace).  Stored as the bool
 * field "le.backtrace" first in the record's field block (docs/FORMAT.md,
 * "Recorded history"), which le_reader_next takes out and reports as
 * this flag. */
#define LE_REC_BACKTRACE 0x10u

/* The text a deferred record is written with when recovery found no call
 * site for it in its shard's damaged SITES table (le_open counts those in
 * le_stats.recovery_damaged; `logengine verify` reports each). */
#define LE_SITE_LOST_TEXT "[deferred record: call site lost]"

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
	/* A record in a collector's store (`logengine collect`: one shard
	 * directory per origin, frames kept as the origin wrote them): */
	const char *host;    /* the host that wrote it; NULL in a local log.
	                        Valid until le_reader_close */
	uint32_t origin_shard; /* its shard there (0 in a local log) */
	uint64_t origin_seq; /* its sequence there (0 in a local log); seq
	                        holds the same number, since the frame is
	                        stored as it was received */
	const void *fields;  /* the field block (LE_REC_FIELDS), valid as
	                        payload: read it with le_record_field.
	                        payload and len are the message alone */
	size_t fields_len;   /* its bytes; 0 (and fields NULL) without */
} le_record;

/* Called for every problem found (damage, torn tail, gap). */
typedef void (*le_problem_fn)(void *arg, const char *file, uint64_t offset,
                              const char *what);

typedef struct le_reader_opts {
	int mode;               /* enum le_recovery */
	le_problem_fn on_problem; /* may be NULL */
	void *arg;              /* passed to on_problem */
	int shard;              /* -1: all shards (default), else only this
	                           shard directory (0 .. 99999) */
} le_reader_opts;

typedef struct le_reader le_reader;

/** Fill o with defaults: TOLERATE_TAIL, no callback, all shards. */
LE_API void le_reader_opts_init(le_reader_opts *o);

/**
 * Open dir for reading.  opts may be NULL for the defaults.
 * @return 0 and *out set; -ENOENT when dir does not exist; LE_ECORRUPT,
 * LE_EVERSION, LE_ENOMEM, -errno.
 */
LE_API int le_reader_open(le_reader **out, const char *dir,
                          const le_reader_opts *opts);

/**
 * Fetch the next record into *rec.
 * @return 1 when a record was stored, 0 at the end of the log, LE_ECORRUPT
 * when damage stops the read (mode TOLERATE_TAIL or ABSOLUTE; the problem
 * was reported to on_problem), or -errno.
 *
 * le_record grows at its end as le_stats does; le_reader_next is a macro
 * passing the size of le_record the program was compiled with, so a newer
 * library writes no byte past it and an older one zeroes the members it
 * does not fill.  le_reader_next_sized is the function behind it: size
 * must cover at least up to `offset`, else LE_EINVAL.
 */
LE_API int le_reader_next_sized(le_reader *r, le_record *rec, size_t size);
#define le_reader_next(r, rec) le_reader_next_sized((r), (rec), sizeof *(rec))

typedef struct le_reader_stats {
	uint64_t records;   /* returned so far */
	uint64_t segments;  /* segment files opened */
	uint64_t bytes;     /* valid frame bytes read */
	uint64_t problems;  /* problems reported */
	uint64_t skipped_bytes; /* bytes skipped over (SKIP mode) */
} le_reader_stats;

/** Counters of a reader so far.  @return 0 or LE_EINVAL. */
LE_API int le_reader_stats_get(const le_reader *r, le_reader_stats *out);

/** Close a reader; NULL is a no-op. */
LE_API void le_reader_close(le_reader *r);

/* What a problem handed to on_problem is (le_reader_problem). */
enum le_problem_kind {
	LE_PROBLEM_DAMAGE = 1,    /* a damaged frame or segment header */
	LE_PROBLEM_TORN_TAIL = 2, /* the end of a shard's last segment cut
	                             short, as a crash mid-write leaves it
	                             (le_open, `logengine recover` cut it) */
	LE_PROBLEM_ZERO_TAIL = 3, /* zeros to the end of a segment
	                             (preallocation, O_DIRECT padding) */
	LE_PROBLEM_GAP = 4,       /* sequence numbers missing between two
	                             segments: records lost */
	LE_PROBLEM_DELETED = 5    /* records deleted (retention, vacuum)
	                             before this reader got to them: the
	                             oldest segments, not damage */
};

/**
 * The kind of the problem being reported: call it from inside on_problem
 * (the reader is the one le_reader_open returned).
 * @return an enum le_problem_kind, or 0 outside a callback.
 */
LE_API int le_reader_problem(const le_reader *r);

/* ---- Positioning.  After a seek, le_reader_next goes on from the new
 * position, oldest first, merged as always.  A seek reads only segment
 * headers, time indexes (docs/INTERFACES.md) and the records near the new
 * position, not the log before it.  A failed seek is sticky, as a failed
 * le_reader_next is. ---- */

/**
 * Put each shard at its first record with a timestamp at or after ts_ns
 * (ns since the epoch, UTC).  A shard's timestamps never go back in a log
 * the engine wrote; in a file where they do, records older than ts_ns that
 * follow a newer one are still returned (filter on ts_ns if that matters).
 * @return 0; LE_ECORRUPT when damage stops the reader on the way (mode
 * permitting; reported to on_problem); -errno.
 */
LE_API int le_reader_seek_time(le_reader *r, uint64_t ts_ns);

/**
 * Put the reader before the last n records of the log (merged order), so
 * that le_reader_next returns those n, then whatever is written after
 * (following).  n = 0: at the end.  @return as le_reader_seek_time.
 */
LE_API int le_reader_seek_tail(le_reader *r, uint64_t n);

/* Room for any cursor string of a reader of at most 256 shard directories
 * (every log an engine writes: it has 256 shards at most), NUL included.
 * A collector's store has a shard directory per origin, up to 100,000:
 * size the buffer with le_reader_cursor_cap. */
#define LE_CURSOR_MAX 8192

/**
 * Room for any cursor string of r as it stands, NUL included:
 * LE_CURSOR_MAX, or more when r reads more than 256 shard directories
 * (27 bytes each, plus 128).  A following reader takes in shard
 * directories as they appear: ask again after le_reader_next.
 * @return the room; LE_CURSOR_MAX when r is NULL.
 */
LE_API size_t le_reader_cursor_cap(const le_reader *r);

/**
 * The cursor of the record le_reader_next returned last: a string that
 * names it and where every shard stands after it (docs/INTERFACES.md,
 * "Cursors"), the same for that record however the reader got there,
 * shell-safe ASCII.  Written to buf (cap bytes, NUL-terminated).  Still
 * that record's after le_reader_next has returned 0 (the end, or nothing
 * new yet): the cursor to save when stopping.
 * @return its length; LE_EINVAL (no record returned yet, or since a
 * seek); -ENOSPC (cap too small: le_reader_cursor_cap(r) suffices).
 */
LE_API int le_reader_cursor(const le_reader *r, char *buf, size_t cap);

/**
 * Put the reader right after the record a cursor names, in every shard:
 * the records le_reader_next returns next are exactly those that would
 * have followed it, across rotations and engine restarts.  Where records
 * the cursor points at were deleted since (retention, vacuum), that shard
 * resumes at its oldest record, and *skipped (may be NULL) gets how many
 * records were passed over that way (0 when none).
 * @return 0; LE_EINVAL (not a cursor of this format: le_errmsg() says
 * why; the reader is unchanged); others as le_reader_seek_time.
 */
LE_API int le_reader_seek_cursor(le_reader *r, const char *cursor,
                                 uint64_t *skipped);

/* ---- Following a live log. ---- */

/**
 * Follow mode: at the end of what has been written, le_reader_next
 * returns 0 ("nothing yet") rather than "end of log", and later calls see
 * what was written since -- appended frames, new segments after a
 * rotation, segments retention deleted (reported as LE_PROBLEM_DELETED when
 * the reader had not got to them), new shards, and the log as the next
 * engine recovers and continues it after a crash or restart.  A record is
 * never returned twice.  Records of different shards are merged in
 * timestamp order: while some shard has nothing new but records in
 * flight (its QUEUE file is not empty), the oldest record waits, at most
 * reorder_ms after its timestamp or after it was read (whichever is
 * first), for an older one from that shard; a record that arrives later
 * than that comes out when it arrives.  0: no waiting.
 * Call it right after le_reader_open, before any le_reader_next or seek.
 * @return 0 or LE_EINVAL.
 */
LE_API int le_reader_follow(le_reader *r, uint32_t reorder_ms);

/**
 * Following: block until something may have been written, a held record
 * is due, or timeout_ms passed (< 0: at most a second; the reader looks
 * at the directory at least that often).  Wakes on inotify events, or
 * polls every 50 ms where inotify is not available (or LE_READER_POLL=1
 * is in the environment).  Then call le_reader_next again.
 * @return 1; -EINTR when a signal arrived; LE_EINVAL when not following;
 * -errno.
 */
LE_API int le_reader_wait(le_reader *r, int timeout_ms);

/* ---- After a crash. ---- */

/**
 * The records a process that died left in shard `shard`'s queue file
 * (dir/shard-NNN/QUEUE, config mapped_queue): accepted by le_write and
 * not yet in the segments, which the next le_open (or `logengine recover
 * DIR`) writes out, in order, once.  Reads only.  While an engine has dir
 * open its queue is live and the count means nothing.
 * @return 0 and *records (0 when the file is missing, of another boot,
 * or empty); LE_EINVAL; -errno.
 */
LE_API int le_queue_pending(const char *dir, unsigned shard,
                            uint64_t *records);

/* ---------------------------------------------------------------------- */
/* Live counters, read from another process.  While an engine runs, each
 * shard's writer thread publishes the shard's counters, its share of the
 * queue, its disk use and four latency histograms in DIR/shard-NNN/STATS,
 * a 4 KiB page (docs/INTERFACES.md) it rewrites every LE_LIVE_PERIOD_MS at
 * most (and at least once per flush_ms while records come; an idle shard
 * publishes as it goes to sleep, with its period set to the idle sleep,
 * see le_config.flush_ms), and once more, marked closed, as le_close
 * finishes.  The application's threads never touch
 * it.  Readers take no lock and send no signal: the page is double
 * buffered, each copy under a sequence counter. */

#define LE_LIVE_PERIOD_MS 100
#define LE_LIVE_BUCKETS 40   /* bucket i: [2^i, 2^(i+1)) ns (0 and 1 in
                                bucket 0); the last one also holds all
                                above */
#define LE_LIVE_SUBMIT_SAMPLE 1024 /* one le_write / le_logf call in this
                                      many, per thread, is timed */

enum le_live_state {
	LE_LIVE_NONE = 0,    /* the page holds nothing yet */
	LE_LIVE_RUNNING = 1, /* its process runs and the page is fresh */
	LE_LIVE_STALE = 2,   /* its process runs, but the writer has not
	                        published for three periods and 2 s: stuck
	                        (a disk that does not answer), or stopped
	                        (SIGSTOP) */
	LE_LIVE_CLOSED = 3,  /* le_close finished: the counters are final */
	LE_LIVE_DEAD = 4     /* its process is gone without le_close
	                        (killed, crashed): the counters are those of
	                        the last publication */
};

typedef struct le_live_hist {
	uint64_t count;      /* values recorded */
	uint64_t sum_ns;     /* their sum */
	uint64_t bucket[LE_LIVE_BUCKETS];
} le_live_hist;

typedef struct le_live {
	int state;           /* enum le_live_state, as decided by the reader */
	int pid;             /* the engine's process */
	uint32_t shard, nshards;
	uint64_t started_ns; /* when the writer started (ns since the epoch) */
	uint64_t updated_ns; /* when this copy was published */
	uint64_t age_ns;     /* how long ago, when read */
	/* This shard's share of le_stats (cumulative since le_open).
	 * accepted counts records the writer took or that were dropped as
	 * the queue was full; those still queued are in queue_records
	 * (engine-wide), so at close the shards' sums equal le_stats. */
	uint64_t accepted, written, dropped, dropped_full, dropped_io;
	uint64_t bytes_written, markers;
	uint64_t segments_created, segments_deleted, syncs, checkpoints;
	uint64_t write_errors, sync_errors, sync_lost;
	uint64_t recovered_truncated_bytes, recovered_records, abandoned_slots;
	uint64_t writer_cpu_ns;
	int failing;         /* writes failing now (being retried) */
	/* This shard's ring: bytes claimed now (slot headers and padding
	 * included), and its size. */
	uint64_t ring_bytes, ring_size;
	/* The engine's queue, all shards (the budget is global): records
	 * and payload bytes queued, the bounds, the high-water marks. */
	uint64_t queue_records, queue_bytes;
	uint64_t queue_capacity, queue_capacity_bytes;
	uint64_t queue_hwm_records, queue_hwm_bytes, record_hwm_bytes;
	uint64_t truncated, rejected, blocked; /* engine-wide, as le_stats */
	int last_error;
	/* Disk: segment files of this shard now (the active one included),
	 * their bytes, and where the writer is: the active segment's index,
	 * the end of what it has written there, the offset of the last frame
	 * written (for le_tail_open), the next sequence number. */
	uint64_t segments, disk_bytes;
	uint64_t segment, segment_end, last_frame_off, next_seq;
	/* Latency: a batch's write system call(s); fdatasync of a segment;
	 * queue wait, from a record's stamp until the batch that carried it
	 * was committed by every sink (in the segment file: written; sampled
	 * records only); submit, the duration of a sampled le_write /
	 * le_logf call (one in LE_LIVE_SUBMIT_SAMPLE per thread). */
	le_live_hist write, sync, queue_wait, submit;
	/* This shard's share of le_stats.level_records: records its writer
	 * took from the queue, by level (index LE_TRACE .. LE_FATAL); 0 in
	 * the page of an engine older than this field. */
	uint64_t level_records[LE_FATAL + 1];
	/* Engine-wide, as le_stats.suppressed: calls of the rate-limited
	 * macros suppressed, as their summaries reported them. */
	uint64_t suppressed;
	uint64_t backtrace_written; /* this shard's kept records written out
	                               as recorded history (le_set_backtrace) */
} le_live;

/**
 * Read shard `shard`'s page in dir and decide its state: its process
 * (pid, and the process's start time and boot recorded with it) gone
 * and the page not closed: DEAD; alive but not published for three
 * periods and at least 2 s: STALE.
 * @return 0 and *out filled; -ENOENT (no page: no engine with live
 * counters has run there), LE_EVERSION (a page of another format
 * version), LE_ECORRUPT (not a page), LE_ETIMEDOUT (the writer kept
 * publishing faster than the page could be copied), -errno.
 * le_live grows at its end between versions, as le_stats does: the
 * macro passes the size the program was compiled with to
 * le_live_read_sized, which writes no byte past it.
 */
#define le_live_read(dir, shard, out)                                         \
	le_live_read_sized((dir), (shard), (out), sizeof(le_live))
LE_API int le_live_read_sized(const char *dir, unsigned shard, le_live *out,
                              size_t size);

/*
 * The same for a reader that comes back (a dashboard, a scraper): the
 * pages stay mapped between calls, and the process an engine's pages
 * name is asked after at most once a period, so a reading costs a copy
 * of the page, not five system calls.  A page's path is looked at again
 * every second (a directory made anew).  One thread at a time per handle.
 */
typedef struct le_live_dir le_live_dir;

/** @return 0 and *out (nothing is opened yet), LE_EINVAL, LE_ENOMEM. */
LE_API int le_live_open(le_live_dir **out, const char *dir);
/** As le_live_read, for shard `shard` of the handle's directory. */
#define le_live_get(d, shard, out)                                            \
	le_live_get_sized((d), (shard), (out), sizeof(le_live))
LE_API int le_live_get_sized(le_live_dir *d, unsigned shard, le_live *out,
                             size_t size);
LE_API void le_live_close(le_live_dir *d);

/** @return the q-quantile (0..1) of h in ns, interpolated within its
 * bucket; 0 when h is empty. */
LE_API double le_live_quantile(const le_live_hist *h, double q);

/* ---------------------------------------------------------------------- */
/* Spool: a shard's stored frames, shipped elsewhere in batches.  A
 * forwarder (`logengine forward`, examples/ship_to_file.c, your own)
 * opens each shard of a log directory, takes the batches of frames after
 * its cursor, puts them somewhere safe (a stream, a file, an HTTP
 * endpoint) and then acknowledges and commits the cursor.  The cursor is
 * the shard's FORWARD file (docs/INTERFACES.md, "Forwarding"): while it
 * exists, retention keeps the segments not yet acknowledged (up to
 * retention_unshipped_bytes past the budget; what it deletes anyway is
 * reported as a gap) and the archiver compresses only shipped ones, so
 * the hook that protects the unshipped records is the file itself.
 *
 * Exactly once is the forwarder's: a batch starts at a known sequence
 * (first), so a destination that remembers the last sequence it holds
 * can skip what a restart after a crash sends again (between "stored
 * there" and le_spool_commit).  One spool per shard and process: the
 * cursor file is locked while open.  Not thread-safe: one thread per
 * spool. */

typedef struct le_spool le_spool;

/* le_spool_open flags. */
#define LE_SPOOL_ONCE 0x01u /* stop at what the shard holds at open:
                               LE_SPOOL_END there instead of IDLE */

/* What le_spool_next found (le_spool_batch.event). */
enum le_spool_event {
	LE_SPOOL_FRAMES = 1, /* count frames, records first..first+count-1 */
	LE_SPOOL_GAP,        /* records first..first+count-1 are gone
	                        (deleted by retention before they were
	                        shipped, or in damage): ship a note of them
	                        and acknowledge them as lost */
	LE_SPOOL_TOO_BIG,    /* record first (count 1), stored at `offset`
	                        in `size` bytes, is larger than max_bytes: not
	                        returned; acknowledge it as lost or open a
	                        batch that fits it */
	LE_SPOOL_DAMAGE,     /* frames at `offset` of `segment` do not read
	                        (why): skipped to `resume` (0: the rest of
	                        the segment); the records there come as a
	                        GAP.  Nothing to ship */
	LE_SPOOL_ROTATED,    /* `segment` was read to its end; the next
	                        call reads the one after.  Nothing to ship */
	LE_SPOOL_IDLE,       /* nothing more stored yet: wait (inotify on
	                        the shard directory, or a timer), call again */
	LE_SPOOL_END         /* LE_SPOOL_ONCE: everything stored at open
	                        has been returned */
};

/* One event of le_spool_next.  Pointers are valid until the next call on
 * the spool.  Growable: fields are only added at the end (the _sized
 * call fills what the program knows of). */
typedef struct le_spool_batch {
	int event;            /* enum le_spool_event */
	uint32_t fields;      /* the frames' field set (LE_FIELD_*) */
	uint64_t first;       /* FRAMES, GAP, TOO_BIG: the first record */
	uint64_t count;       /* how many records (frames, or lost) */
	const void *frames;   /* FRAMES: the frames as stored, each
	                         self-contained (docs/INTERFACES.md,
	                         "Deferred records in messages") and its CRC
	                         checked; NULL otherwise */
	size_t len;           /* their bytes, <= max_bytes */
	uint32_t crc;         /* FRAMES: masked CRC32C of frames[0..len)
	                         when the frames carry none (fields without
	                         LE_FIELD_CRC), else 0 */
	uint64_t pos;         /* FRAMES: offset in its segment of the first
	                         frame, the base of the back-references
	                         (R) of relinked deferred frames */
	uint64_t segment;     /* the segment (index) the event is in */
	uint64_t offset;      /* DAMAGE, TOO_BIG: offset of the frame */
	uint64_t resume;      /* DAMAGE: offset read on from (0: next
	                         segment) */
	uint64_t size;        /* TOO_BIG: the frame's stored bytes */
	uint64_t ts_ns;       /* GAP: time of the record after it (or the
	                         segment's creation); TOO_BIG: its time */
	const char *why;      /* DAMAGE: what is wrong */
	uint64_t end_segment; /* where the record after this event is: */
	uint64_t end_offset;  /* pass both to le_spool_ack (0: unknown) */
} le_spool_batch;

/* A shard's cursor (its FORWARD file). */
typedef struct le_spool_cursor {
	uint64_t next_seq;    /* records below are shipped or reported lost;
	                         0: a forwarder came, nothing shipped yet */
	uint64_t segment;     /* hint: the segment holding next_seq (0: none) */
	uint64_t offset;      /* hint: its frame's offset there */
	uint64_t lost;        /* records acknowledged as lost, in all */
	uint64_t written_ns;  /* when it was last committed */
	uint64_t key;         /* the shard's message-id key: random, drawn
	                         once and kept in the file, the same across
	                         restarts (Nats-Msg-Id; a destination's
	                         de-duplication key) */
} le_spool_cursor;

/**
 * The shard numbers of dir's shard-NNN directories, ascending, into
 * out[0..cap).  @return how many there are (more than cap: only cap
 * written), or -errno.
 */
LE_API int le_spool_shards(const char *dir, unsigned *out, size_t cap);

/**
 * Open shard `shard` of dir for shipping: its FORWARD file created
 * (0640) when missing and locked, its key drawn when it has none, the
 * cursor read (a new or unreadable one starts at 0: nothing shipped; it
 * is written at the first le_spool_commit).  Reading starts at the
 * cursor.  flags: LE_SPOOL_*.
 * @return 0; LE_EBUSY (another forwarder has the shard: le_errmsg()
 * names its FORWARD file), LE_EUNSAFE (FORWARD is a symbolic link, FIFO,
 * socket, device or has a second hard link: le_errmsg names it and why),
 * LE_ENOMEM, -errno.
 */
LE_API int le_spool_open(le_spool **out, const char *dir, unsigned shard,
                         unsigned flags);

/**
 * The next event after what was returned before: a batch of whole
 * frames of one segment, at most max_bytes (relinked deferred frames
 * included) and max_records (0: no limit), or what stands in its way.
 * Records before the first ever shipped start at 1: records deleted
 * before any forwarder came are a GAP like any other.  Frames are
 * returned once; le_spool_rewind reads again from the cursor.
 * @return ev->event (> 0), LE_EINVAL (max_bytes below a frame's header),
 * or -errno (the spool may be rewound and used again).
 */
#define le_spool_next(sp, max_bytes, max_records, ev) \
	le_spool_next_sized((sp), (max_bytes), (max_records), (ev), \
	                    sizeof(le_spool_batch))
LE_API int le_spool_next_sized(le_spool *sp, size_t max_bytes,
                               uint64_t max_records, le_spool_batch *ev,
                               size_t size);

/**
 * Records below next_seq are safe elsewhere (or, for GAP and TOO_BIG,
 * reported lost: `lost` of them, added to the cursor's count).
 * segment and offset: where next_seq is stored (a FRAMES event's
 * end_segment and end_offset when next_seq = first + count; 0, 0 when
 * unknown), so a restart opens there.  In memory only: le_spool_commit
 * writes it.  A next_seq at or below the cursor leaves it (lost is still
 * added).  @return 0, LE_EINVAL (sp NULL).
 */
LE_API int le_spool_ack(le_spool *sp, uint64_t next_seq, uint64_t segment,
                        uint64_t offset, uint64_t lost);

/**
 * Write the acknowledged cursor to FORWARD, durably (fdatasync), when it
 * changed since the last commit; retention may then delete what it no
 * longer keeps.  The file holds two slots written alternately, so a
 * crash during the write leaves the previous cursor.
 * @return 0, LE_EINVAL (sp NULL), or -errno (the cursor stays to commit
 * again).
 */
LE_API int le_spool_commit(le_spool *sp);

/**
 * Read again from the acknowledged cursor: what was returned past it and
 * not acknowledged comes again (after a failed send, a restart of the
 * destination's connection).  @return 0, LE_EINVAL (sp NULL).
 */
LE_API int le_spool_rewind(le_spool *sp);

/** The acknowledged cursor (in memory) and the key.  @return 0,
 * LE_EINVAL. */
LE_API int le_spool_cursor_get(const le_spool *sp, le_spool_cursor *out);

/** Close, without a commit; the lock goes with it. */
LE_API void le_spool_close(le_spool *sp);

/**
 * Shard `shard`'s cursor as committed, read from its FORWARD file without
 * opening a spool (vacuum, stats; key 0).
 * @return 0; -ENOENT (no forwarder ever opened the shard); LE_ECORRUPT
 * (no slot reads: its first write was torn; nothing is known shipped);
 * -errno.
 */
LE_API int le_spool_cursor_read(const char *dir, unsigned shard,
                                le_spool_cursor *out);

/**
 * The segment indexes of shard `shard`, ascending (archived ones too),
 * in *out (release it with free()).  A shard directory that is a symbolic
 * link or not a directory is refused.
 * @return 0; LE_EUNSAFE (le_errmsg() names it); -errno.
 */
LE_API int le_spool_segments(const char *dir, unsigned shard,
                             uint64_t **out, size_t *n);

/* Longest origin (host) name: a DNS name's limit. */
#define LE_HOST_MAX 253

/* The most bytes a stored frame takes besides its record's payload
 * (size, CRC, flags, level, shard, sequence, timestamp: docs/FORMAT.md):
 * a batch of max_bytes holds any record of max_bytes - this. */
#define LE_FRAME_FIXED_MAX 28

/**
 * A host name's token in a subject or key: the name with each '.'
 * written as '~' (no host name holds one), so a token names exactly one
 * host.  host must be a valid origin name, 1 to LE_HOST_MAX bytes
 * of A-Z a-z 0-9 . _ - (what a collector takes).
 * @return the token's length (out NUL-terminated), or 0 when host is
 * not valid or out (cap bytes) is too small.
 */
LE_API size_t le_spool_host_token(char *out, size_t cap, const char *host);

/* A segment of a shard: its first record and its size. */
typedef struct le_spool_seg {
	uint64_t base_seq;    /* sequence of its first record */
	uint64_t bytes;       /* its file's size (an archive's when
	                         archived) */
	uint64_t mtime_ns;    /* its file's modification time */
} le_spool_seg;

/**
 * Segment `index` of shard `shard`, or its archive.  what: 1 its header
 * (base_seq), 2 its size and time, 3 both.
 * @return 0; -ENOENT; LE_ECORRUPT (header unreadable); -errno.
 */
LE_API int le_spool_segment_info(const char *dir, unsigned shard,
                                 uint64_t index, int what,
                                 le_spool_seg *out);

/* ---------------------------------------------------------------------- */
/* Collector: the receiving end of shipping.  A forwarder sends a shard's
 * frames as they are stored, many per message, each message naming its
 * origin (host, shard) and the origin sequences it holds
 * (docs/INTERFACES.md, "Message").  A collector store keeps one shard
 * directory per origin, the frames as they came, readable by le_reader
 * like any log (records gain host, origin_shard and origin_seq).  Whatever
 * carries the messages (NATS for `logengine collect`, or a program's own
 * transport) hands each one to le_collector_append and acknowledges it to
 * its sender once the call (and le_collector_sync) returned: a message
 * sent again, whole or in part, is stored once.
 *
 * Each origin expects a next sequence (le_collector_next).  A message
 * below it is already stored; one that starts above it leaves a hole,
 * which the caller waits for (the message that fills it is still on its
 * way) or gives up (LE_COLLECT_FILL_HOLE: a marker takes the missing
 * records' place).  A forwarder's gap message (records lost before
 * shipping) becomes a marker too.  Records a marker claimed lost that
 * come after all are stored in the origin's late directory, never
 * dropped.  One thread at a time per store. */

#define LE_SHIP_FORMAT 1       /* message format version (Le-Format) */
#define LE_SHIP_SEQ_MAX (UINT64_C(1) << 62) /* largest origin sequence */
#define LE_MAX_SHARDS 256      /* shards of an engine, so of an origin host */
#define LE_ORIGINS_DEFAULT 16384 /* origins a store takes by default */
#define LE_ORIGINS_MAX 50000   /* and at most */

typedef struct le_collector le_collector;
typedef struct le_collector_origin le_collector_origin;

typedef struct le_collector_opts {
	uint64_t segment_bytes; /* a segment is sealed past this size (0:
	                           64 MiB) */
	int sync;               /* 1: le_collector_sync makes what was
	                           stored durable (fdatasync) */
	uint32_t max_origins;   /* new origins are refused past this many
	                           (0: LE_ORIGINS_DEFAULT; LE_ORIGINS_MAX at
	                           most) */
} le_collector_opts;

/* One message as a forwarder sent it: its headers and its body. */
typedef struct le_collector_msg {
	const char *host;     /* origin host (Le-Host), le_collector_host_valid */
	uint32_t shard;       /* origin shard (Le-Shard), below LE_MAX_SHARDS */
	uint32_t fields;      /* the frames' field set (Le-Fields), LE_FIELD_* */
	uint64_t first, last; /* origin sequences it holds (Le-Seq), 1 <=
	                         first <= last <= LE_SHIP_SEQ_MAX */
	uint64_t gap;         /* 0, or a gap message (Le-Gap): records first
	                         .. last were lost before shipping; gap is
	                         their count and the body is empty */
	uint64_t ts;          /* a gap message's time, ns (Le-Ts) */
	uint64_t pos;         /* where the first frame was in its segment
	                         (Le-Pos), UINT64_MAX when unknown */
	int has_crc;          /* crc is given (Le-Body-Crc) */
	uint32_t crc;         /* masked CRC32C of the body (FORMAT.md); a
	                         body whose frames have no CRC needs it */
	const void *body;     /* the frames of first .. last, in order */
	size_t len;           /* body bytes */
} le_collector_msg;

/* Why a message was refused: its own fault, so sending it again will not
 * help (an error with refused 0 is the store's: try again later). */
enum le_collect_refusal {
	LE_COLLECT_OK = 0,
	LE_COLLECT_MALFORMED,    /* host, shard, sequences or fields out of
	                            bounds */
	LE_COLLECT_DAMAGED,      /* the body does not match its headers: a
	                            bad frame (offset says where), a wrong
	                            checksum, frames missing or left over */
	LE_COLLECT_GAP_CLAIM,    /* a gap message with a body, a count not
	                           its range, or a time out of bounds */
	LE_COLLECT_ORIGIN_LIMIT  /* a new origin past max_origins */
};

/* What a call did, or why it did not. */
typedef struct le_collector_res {
	int refused;          /* enum le_collect_refusal */
	uint64_t offset;      /* LE_COLLECT_DAMAGED: the first bad frame's
	                         byte offset in the body (its length when
	                         frames are missing); else UINT64_MAX */
	uint64_t stored;      /* records stored in sequence by this call */
	uint64_t bytes;       /* their frames' bytes */
	uint64_t lost;        /* records a gap message's marker stands for */
	uint64_t missing;     /* records between the origin's next sequence
	                         and the message: without FILL_HOLE nothing
	                         was stored; with it a marker stands for them */
	uint64_t late;        /* records a marker had claimed lost, stored now
	                         in the late directory ... */
	uint64_t late_lo, late_hi; /* ... the lowest and highest of them */
	le_collector_origin *origin; /* the message's origin (NULL when it
	                                was refused before it was found) */
	char msg[512];        /* why, naming the origin or file; empty when
	                         le_strerror of the result says all */
} le_collector_res;

/**
 * Open (or create) a collector store in dir, made if missing (mode 0750):
 * lock it, read every origin, cut a torn tail a killed collector left.
 * A store holding more origins than max_origins opens (new ones are
 * refused).
 * @return 0 and *out; LE_EBUSY (another collector has it); LE_EINVAL
 * (max_origins above LE_ORIGINS_MAX); LE_ECORRUPT, LE_ENOMEM, -errno;
 * res->msg says which file.
 */
LE_API int le_collector_open(le_collector **out, const char *dir,
                             const le_collector_opts *opts,
                             le_collector_res *res);
/** Sync (when opts.sync) and close; NULL is ignored. */
LE_API void le_collector_close(le_collector *c);

/** 1 when host is 1 to LE_HOST_MAX bytes of A-Z a-z 0-9 . _ -, else 0. */
LE_API int le_collector_host_valid(const char *host, size_t len);

/**
 * The origin (host, shard), made (its shard directory and ORIGIN file,
 * durable) when new and create is 1.  The handle lives until
 * le_collector_close.
 * @return 0 and *out; -ENOENT (unknown, create 0); LE_EFULL (new, past
 * max_origins: res->refused LE_COLLECT_ORIGIN_LIMIT); LE_EINVAL (host not
 * valid); -errno.  *out is NULL on error.
 */
LE_API int le_collector_origin_get(le_collector *c, const char *host,
                                   uint32_t shard, int create,
                                   le_collector_origin **out,
                                   le_collector_res *res);
/** @return the origin sequence o expects next (1: nothing stored yet). */
LE_API uint64_t le_collector_next(const le_collector_origin *o);
/**
 * @return a word the caller keeps with o (0 when the store opens); the
 * library never reads or writes it.  `logengine collect` keeps there when
 * it began to wait for a hole.
 */
LE_API uint64_t *le_collector_data(le_collector_origin *o);

#define LE_COLLECT_FILL_HOLE 1 /* give up the records a hole misses */

/**
 * Store message m, idempotently by origin sequence.  First m is checked
 * whole: headers in bounds, every frame valid (its CRC, or the body's),
 * numbered first .. last, of m's shard; a refused message stores nothing.
 * Then its origin is found or made, and against the sequence E it
 * expects:
 *   last < E             already stored: nothing to do (every count 0);
 *                        but records of it a marker claimed lost are
 *                        stored now (res->late)
 *   first <= E <= last   E .. last stored (res->stored), or a marker for
 *                        them (a gap message: res->lost); E becomes
 *                        last + 1
 *   first > E            a hole: res->missing = first - E and nothing
 *                        stored; with flags LE_COLLECT_FILL_HOLE a marker
 *                        "N records missing from the stream", dated m's
 *                        first record, takes E .. first - 1 and m is
 *                        stored after it
 * What is stored is durable after le_collector_sync.  m's memory is not
 * kept.
 * @return 0 and *res; a refusal (res->refused, res->msg, res->offset):
 * LE_ECORRUPT, LE_EFULL (origin limit); a store error (refused 0):
 * -errno, LE_ENOMEM, LE_EUNSAFE, after which the message is to be sent
 * again.
 */
LE_API int le_collector_append(le_collector *c, const le_collector_msg *m,
                               int flags, le_collector_res *res);
/**
 * fdatasync every segment written since the last call (when opts.sync):
 * acknowledge messages to their senders after it.
 * @return 0 or -errno (a failed sync is returned by every later call).
 */
LE_API int le_collector_sync(le_collector *c);

/* ---------------------------------------------------------------------- */
/* Tail: one shard's records from a position, for followers (a live
 * tail).  No listing of the directory: it opens the segment it is given
 * and, at its end, the one after, so its cost does not grow with the
 * number of segments kept.  A frame cut short by the file's end is being
 * written: the tail stops before it.  Damage is stepped over, not
 * reported. */

typedef struct le_tail le_tail;

/**
 * Open shard `shard` of dir at the frame starting at or after `offset`
 * in segment `segment` (offset 0: its first frame).  A position from
 * le_live (segment, last_frame_off) starts at the latest record; one
 * from le_tail_position resumes.
 * @return 0; -ENOENT (no such segment: deleted, or not made yet),
 * LE_ECORRUPT / LE_EVERSION (its header), -errno.
 */
LE_API int le_tail_open(le_tail **out, const char *dir, unsigned shard,
                        uint64_t segment, uint64_t offset);

/**
 * The next record, as le_reader_next (recorded history flagged
 * LE_REC_BACKTRACE, its marking field out of `fields`).  @return 1
 * stored; 0 nothing more for now (the segment ends there and no later
 * one exists yet: come back later with le_tail_position); -errno.  seq is 0 when the log has no
 * sequence field and the tail started inside a segment.
 */
LE_API int le_tail_next(le_tail *t, le_record *rec);

/** Where the next record would be read: segment and offset. */
LE_API void le_tail_position(const le_tail *t, uint64_t *segment,
                             uint64_t *offset);

LE_API void le_tail_close(le_tail *t);

/**
 * The next typed field of rec, in the order they were logged.  Start with
 * *pos = 0; each call moves it on.  out's key and values point into the
 * record (valid as its payload).
 * @return 1 and *out filled, 0 after the last one (or a record without
 * fields), LE_ECORRUPT for a field block that does not decode (a reader
 * never returns one: the frame would have been damage), LE_EINVAL.
 */
LE_API int le_record_field(const le_record *rec, size_t *pos, le_field *out);

/* Room le_record_fields_format needs for a field block of len bytes. */
#define LE_FIELDS_TEXT_MAX(len) (6 * (size_t)(len) + 64)

/**
 * rec's fields as the stream sink and `logengine cat` print them, into
 * buf (NUL-terminated): format LE_STREAM_TEXT (or RAW) gives
 * " key=value key2=\"a b\"" (each preceded by a space), LE_STREAM_JSON
 * gives ",\"fields\":{\"key\":value,...}" (to follow "msg"); "" for a record
 * without fields.  Escaping and number formats: docs/FORMAT.md,
 * "Field block".
 * @return the bytes written (not counting the NUL), or LE_EINVAL when
 * cap < LE_FIELDS_TEXT_MAX(rec->fields_len) or the format is unknown,
 * LE_ECORRUPT for a block that does not decode.
 */
LE_API int le_record_fields_format(const le_record *rec, int format,
                                   char *buf, size_t cap);

/**
 * The length of the valid UTF-8 character at p, of at most len bytes: the
 * rule by which every output of the library (fields, JSON strings, RFC 5424
 * values) lets a byte out as it is or escapes it, for a program that prints
 * payloads beside them.  Overlong forms, UTF-16 surrogates (U+D800 to
 * U+DFFF), code points past U+10FFFF and a sequence cut short by len are
 * not valid (RFC 3629).
 * @return 1 for an ASCII byte (a control byte included), 2 to 4 for a
 * valid multi-byte character, 0 when p does not start one or len is 0.
 */
LE_API size_t le_utf8_len(const void *p, size_t len);

/* ---------------------------------------------------------------------- */
/* Internal: what the level macros expand to.  Not API (names, layout and
 * calls may change in any release): use the macros.
 *
 * The first member of a le_engine and of a le_logger is a le__head: the
 * threshold the macros test, with one relaxed load (a plain move; the
 * atomic only tells compilers and sanitizers that le_set_level may store
 * it meanwhile).
 *
 * The seam.  After the threshold test a macro makes exactly one call,
 * le_logd_at (a literal format: deferred, with a static le__dsite per
 * call), le_log_at or le_log_kv_at (formatted at the call, with a
 * static const le__site: file, function, line, level, all constants). */

struct le__head {
	int level;  /* records below it are skipped (LE_OFF: all): the
	               threshold, or the recorder's level when lower */
	int kind;   /* 0: an engine (its root logger), 1: a named logger */
	int keep;   /* the threshold proper: a record below it that passed
	               `level` goes to the flight recorder (le_set_backtrace) */
};

typedef struct le__site {
	const char *file;   /* __FILE__ */
	const char *func;   /* __func__ */
	uint32_t file_len;  /* bytes, without the NUL */
	uint32_t func_len;
	int line;
	int level;
} le__site;

/* The head a NULL handle stands for: the default engine's, else one
 * whose threshold is LE_OFF (so the macro calls nothing). */
LE_API struct le__head *le_default_head(void);

#if defined(__GNUC__) || defined(__clang__)
#define LE__UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define LE__UNLIKELY(x) (x)
#endif

/* A macro's handle, NULL replaced by the default: one predictable
 * branch on the hot path, a call only when the handle is NULL. */
#define LE__HEAD_OR_DEFAULT(log)                                              \
	struct le__head *le__h_ = LE__HEAD(log);                              \
	if (LE__UNLIKELY(!le__h_))                                            \
		le__h_ = le_default_head()

LE_API int le_log_at(struct le__head *h, const le__site *site,
                      const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 3, 4)))
#endif
	;

LE_API int le_log_kv_at(struct le__head *h, const le__site *site,
                         const le_field *f, size_t n, const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 5, 6)))
#endif
	;

/* Deferred call sites.  A level macro with a literal format keeps one of
 * these per call (static, zero until the site first logs): the site, the
 * kinds of its arguments (from _Generic), and, once registered, its
 * number and its format compiled (src/record/defer.h, le__dplan).  Later calls
 * copy the arguments raw; the text is made by the writer or a reader. */
#define LE_DEFER_ARGS_MAX 16 /* arguments a deferred call takes ('*'s
                                 counted); more format at the call */
enum { LE_K_I32 = 1, LE_K_I64, LE_K_F64, LE_K_STR, LE_K_PTR, LE_K_OTHER };

typedef struct le__dsite {
	le__site site;
	uint8_t nk;                 /* arguments after the format (255:
	                               more than LE_DEFER_ARGS_MAX) */
	uint8_t kinds[LE_DEFER_ARGS_MAX + 1]; /* LE_K_*, from kinds[1] */
	uint32_t state;             /* 0 new, 1 registering, 2 deferred,
	                               3 formatted at the call */
	uint32_t id;                /* the site's number, from 1 */
	const char *fmt;            /* its format, once registered */
	uint64_t plan_[12];         /* the compiled format */
} le__dsite;

LE_API int le_logd_at(struct le__head *h, le__dsite *site,
                       const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 3, 4)))
#endif
	;

#if defined(__GNUC__) || defined(__clang__)
#define LE__LEVEL(h) __atomic_load_n(&(h)->level, __ATOMIC_RELAXED)
#else
#define LE__LEVEL(h) (*(volatile int *)&(h)->level)
#endif

#define LE__SITE(lvl)                                                         \
	{__FILE__, __func__, sizeof(__FILE__) - 1, sizeof(__func__) - 1,      \
	 __LINE__, (lvl)}

#if defined(__GNUC__) || defined(__clang__)
/* A string literal (an address the compiler knows), so a call site's
 * format is the same bytes at every call. */
#define LE__LITERAL(f) __builtin_constant_p(f)
#else
#define LE__LITERAL(f) 0
#endif

#ifndef __cplusplus
/* The kind of one argument, as the deferred path stores it (an int-sized
 * integer, a long-sized one, a double, a string, another pointer). */
#define LE__KIND(x)                                                           \
	_Generic((x), _Bool: LE_K_I32, char: LE_K_I32,                        \
	         signed char: LE_K_I32, unsigned char: LE_K_I32,              \
	         short: LE_K_I32, unsigned short: LE_K_I32, int: LE_K_I32,    \
	         unsigned int: LE_K_I32,                                      \
	         long: (sizeof(long) == 8 ? LE_K_I64 : LE_K_I32),             \
	         unsigned long: (sizeof(long) == 8 ? LE_K_I64 : LE_K_I32),    \
	         long long: LE_K_I64, unsigned long long: LE_K_I64,           \
	         float: LE_K_F64, double: LE_K_F64, long double: LE_K_OTHER,  \
	         char *: LE_K_STR, const char *: LE_K_STR,                    \
	         signed char *: LE_K_STR, const signed char *: LE_K_STR,      \
	         unsigned char *: LE_K_STR, const unsigned char *: LE_K_STR,  \
	         default: LE_K_PTR)

#define LE__NARG(...)                                                         \
	LE__NARG_(__VA_ARGS__, 33, 32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define LE__NARG_(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16, _17, _18, _19, _20, _21, _22, _23, _24, _25, _26, _27, _28, _29, _30, _31, _32, _33, n, ...) n
#define LE__CAT_(a, b) a##b
#define LE__CAT(a, b) LE__CAT_(a, b)
#define LE__FIRST(...) LE__FIRST_(__VA_ARGS__, ~)
#define LE__FIRST_(a, ...) a
/* , kind of each argument after the format (17 and more: none) */
#define LE__KINDS(...) LE__CAT(LE__KL, LE__NARG(__VA_ARGS__))(__VA_ARGS__, ~)
#define LE__KL1(...)
#define LE__KL2(f, a, ...) , LE__KIND(a) LE__KL1(f, __VA_ARGS__)
#define LE__KL3(f, a, ...) , LE__KIND(a) LE__KL2(f, __VA_ARGS__)
#define LE__KL4(f, a, ...) , LE__KIND(a) LE__KL3(f, __VA_ARGS__)
#define LE__KL5(f, a, ...) , LE__KIND(a) LE__KL4(f, __VA_ARGS__)
#define LE__KL6(f, a, ...) , LE__KIND(a) LE__KL5(f, __VA_ARGS__)
#define LE__KL7(f, a, ...) , LE__KIND(a) LE__KL6(f, __VA_ARGS__)
#define LE__KL8(f, a, ...) , LE__KIND(a) LE__KL7(f, __VA_ARGS__)
#define LE__KL9(f, a, ...) , LE__KIND(a) LE__KL8(f, __VA_ARGS__)
#define LE__KL10(f, a, ...) , LE__KIND(a) LE__KL9(f, __VA_ARGS__)
#define LE__KL11(f, a, ...) , LE__KIND(a) LE__KL10(f, __VA_ARGS__)
#define LE__KL12(f, a, ...) , LE__KIND(a) LE__KL11(f, __VA_ARGS__)
#define LE__KL13(f, a, ...) , LE__KIND(a) LE__KL12(f, __VA_ARGS__)
#define LE__KL14(f, a, ...) , LE__KIND(a) LE__KL13(f, __VA_ARGS__)
#define LE__KL15(f, a, ...) , LE__KIND(a) LE__KL14(f, __VA_ARGS__)
#define LE__KL16(f, a, ...) , LE__KIND(a) LE__KL15(f, __VA_ARGS__)
#define LE__KL17(f, a, ...) , LE__KIND(a) LE__KL16(f, __VA_ARGS__)
#define LE__KL18(...)
#define LE__KL19(...)
#define LE__KL20(...)
#define LE__KL21(...)
#define LE__KL22(...)
#define LE__KL23(...)
#define LE__KL24(...)
#define LE__KL25(...)
#define LE__KL26(...)
#define LE__KL27(...)
#define LE__KL28(...)
#define LE__KL29(...)
#define LE__KL30(...)
#define LE__KL31(...)
#define LE__KL32(...)
#define LE__KL33(...)
#define LE__NK(...) ((LE__NARG(__VA_ARGS__) - 1) <= LE_DEFER_ARGS_MAX ? (LE__NARG(__VA_ARGS__) - 1) : 255)

#define LE__DSITE(lvl, ...)                                                   \
	{LE__SITE(lvl), LE__NK(__VA_ARGS__), {0 LE__KINDS(__VA_ARGS__)}, 0,   \
	 0, 0, {0}}

/* A literal format goes the deferred way (le_logd_at), another formats
 * at the call (le_log_at); the compiler keeps one of the two calls. */
#define LE__LOG(log, lvl, ...)                                                \
	do {                                                                  \
		if ((lvl) >= (LE_MIN_LEVEL)) {                                \
			LE__HEAD_OR_DEFAULT(log);                             \
			if (LE__LEVEL(le__h_) <= (lvl)) {                     \
				static le__dsite le__s_ =                     \
					LE__DSITE(lvl, __VA_ARGS__);          \
				if (LE__LITERAL(LE__FIRST(__VA_ARGS__)))      \
					le_logd_at(le__h_, &le__s_,          \
					            __VA_ARGS__);             \
				else                                          \
					le_log_at(le__h_, &le__s_.site,      \
					           __VA_ARGS__);              \
			}                                                     \
		}                                                             \
	} while (0)
#else
#define LE__LOG(log, lvl, ...)                                                \
	do {                                                                  \
		if ((lvl) >= (LE_MIN_LEVEL)) {                                \
			LE__HEAD_OR_DEFAULT(log);                             \
			if (LE__LEVEL(le__h_) <= (lvl)) {                     \
				static const le__site le__s_ = LE__SITE(lvl); \
				le_log_at(le__h_, &le__s_, __VA_ARGS__);     \
			}                                                     \
		}                                                             \
	} while (0)
#endif

#define LE__LOG_KV(log, lvl, ...)                                             \
	do {                                                                  \
		if ((lvl) >= (LE_MIN_LEVEL)) {                                \
			LE__HEAD_OR_DEFAULT(log);                             \
			if (LE__LEVEL(le__h_) <= (lvl)) {                     \
				static const le__site le__s_ = LE__SITE(lvl); \
				le_log_kv_at(le__h_, &le__s_, __VA_ARGS__);  \
			}                                                     \
		}                                                             \
	} while (0)

/* Rate-limited call sites (the _every macros).  One per call, static,
 * zero but for its le__dsite until its first record.  The quick test
 * (le__rl_skip) is inline; everything else is le_every_at's
 * (src/engine/ratelimit.c), which says who writes what. */
typedef struct le__rsite {
	le__dsite d;            /* the site of its records (deferred) */
	uint64_t deadline;      /* [atomic] le_every_clock value at which the
	                           window ends; 0: none open */
	uint64_t full_until;    /* [atomic] the deadline of the window whose
	                           burst is spent (0: none): calls before it
	                           are suppressed by the inline test */
	uintptr_t owner;        /* [atomic] the thread that counts in `own` */
	uint64_t own;           /* [owner] its suppressed calls, cumulative */
	uint64_t other;         /* [atomic] other threads', cumulative */
	uint64_t told;          /* [lock] of those, in a summary already */
	uint64_t gen;           /* [lock, atomic] the engine it is registered
	                           with (le__rlreg.gen) */
	struct le__head *head;  /* [lock] the logger of the window's first */
	uint32_t passed;        /* [atomic] records let through this window */
	uint32_t burst;         /* [atomic] this window's burst */
	uint32_t lock;          /* [atomic] 1 while a window opens */
} le__rsite;

/* The engine's coarse clock: CLOCK_MONOTONIC ns as the writers last
 * stored it (at each pass, at least every flush_ms). */
LE_API extern uint64_t le_every_clock;

/* The slow path: open a window or count the call.  @return 1: log it. */
LE_API int le_every_at(struct le__head *h, le__rsite *s, long interval_ms,
                       long burst);

#if (defined(__GNUC__) && __GNUC__ >= 11 && defined(__x86_64__)) ||          \
        (defined(__clang__) && defined(__x86_64__))
#define LE__SELF() ((uintptr_t)__builtin_thread_pointer())
#else
#define LE__SELF() ((uintptr_t)0) /* no owner: every count is atomic */
#endif

#if defined(__GNUC__) || defined(__clang__)
/* Count one suppressed call of s.  The owner counts with a load and a
 * store (no other thread writes `own`); any other thread with an atomic
 * add.  Relaxed throughout: the counts are read by whoever writes the
 * next summary, and a call racing with that summary is in the one after
 * it. */
static inline void le__rl_count(le__rsite *s, uintptr_t me)
{
	if (me && __atomic_load_n(&s->owner, __ATOMIC_RELAXED) == me)
		__atomic_store_n(&s->own,
		                 __atomic_load_n(&s->own, __ATOMIC_RELAXED) + 1,
		                 __ATOMIC_RELAXED);
	else
		__atomic_fetch_add(&s->other, 1, __ATOMIC_RELAXED);
}

/* A call of a site whose burst is spent, in a window the coarse clock
 * has not seen end: count it and @return 1. */
static inline int le__rl_skip(le__rsite *s)
{
	if (__atomic_load_n(&le_every_clock, __ATOMIC_RELAXED) >=
	    __atomic_load_n(&s->full_until, __ATOMIC_RELAXED))
		return 0;
	le__rl_count(s, LE__SELF());
	return 1;
}
#else
static inline int le__rl_skip(le__rsite *s)
{
	(void)s;
	return 0; /* le_every_at decides and counts */
}
#endif

#define LE__RL_PASS(ms, burst)                                                \
	(!le__rl_skip(&le__r_) &&                                             \
	 le_every_at(le__h_, &le__r_, (long)(ms), (long)(burst)))

#ifndef __cplusplus
#define LE__RSITE(lvl, ...)                                                   \
	{LE__DSITE(lvl, __VA_ARGS__), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
#define LE__LOG_EVERY(log, lvl, ms, burst, ...)                               \
	do {                                                                  \
		if ((lvl) >= (LE_MIN_LEVEL)) {                                \
			LE__HEAD_OR_DEFAULT(log);                             \
			if (LE__LEVEL(le__h_) <= (lvl)) {                     \
				static le__rsite le__r_ =                     \
					LE__RSITE(lvl, __VA_ARGS__);          \
				if (!LE__RL_PASS(ms, burst))                  \
					break;                                \
				if (LE__LITERAL(LE__FIRST(__VA_ARGS__)))      \
					le_logd_at(le__h_, &le__r_.d,        \
					           __VA_ARGS__);              \
				else                                          \
					le_log_at(le__h_, &le__r_.d.site,    \
					          __VA_ARGS__);               \
			}                                                     \
		}                                                             \
	} while (0)
#else
#define LE__LOG_EVERY(log, lvl, ms, burst, ...)                               \
	do {                                                                  \
		if ((lvl) >= (LE_MIN_LEVEL)) {                                \
			LE__HEAD_OR_DEFAULT(log);                             \
			if (LE__LEVEL(le__h_) <= (lvl)) {                     \
				static le__rsite le__r_ = {                   \
					{LE__SITE(lvl), 0, {0}, 3, 0, 0, {0}},\
					0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};     \
				if (LE__RL_PASS(ms, burst))                   \
					le_log_at(le__h_, &le__r_.d.site,    \
					          __VA_ARGS__);               \
			}                                                     \
		}                                                             \
	} while (0)
#endif

#ifndef __cplusplus
/* A le_engine * or a le_logger * compiles, and NULL (a void *): the
 * default engine.  The macro cannot tell a void * that is NULL from one
 * that is not, so any void * stands for the default engine: cast a
 * handle kept in one back to its type. */
#define LE__HEAD(log)                                                         \
	_Generic((log), le_engine *: (struct le__head *)(void *)(log),        \
	         le_logger *: (struct le__head *)(void *)(log),               \
	         void *: (struct le__head *)0)
#endif

#ifdef __cplusplus
}

static inline struct le__head *le__head_of(le_engine *e)
{
	return reinterpret_cast<struct le__head *>(e);
}
static inline struct le__head *le__head_of(le_logger *lg)
{
	return reinterpret_cast<struct le__head *>(lg);
}
#if __cplusplus >= 201103L
static inline struct le__head *le__head_of(decltype(nullptr))
{
	return nullptr; /* the default engine */
}
#endif
#define LE__HEAD(log) le__head_of(log)
#endif
#endif /* LOGENGINE_H */
