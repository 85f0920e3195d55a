/*
 * bench.h -- what the benchmark driver (bench.c) asks of a competitor.
 *
 * One file per competitor: comp_le.c (logengine), comp_spdlog.cc,
 * comp_glog.cc, comp_raw.c (the machine's limit: copy into a buffer,
 * write() it).  The driver runs every measured run in a child process of
 * its own, so CPU time and peak RSS are the whole process's and no
 * competitor sees another's threads, files or heap.  In that child:
 *
 *   open(cfg)            set up, outside the clock (threads, files)
 *   ... clock starts ...
 *   log / log_fmt        from cfg->threads producer threads at once, each
 *                        call timed alone (per-call submit latency)
 *   finish()             every submitted record is in its file (page
 *                        cache; no competitor fsyncs); threads stopped
 *   ... clock stops ...
 *   close()              optional: what finish may leave for later
 *   count(cfg)           read the files back and count the records; the
 *                        run is invalid unless every record that was not
 *                        reported dropped is there
 *
 * Callable from C and C++: the C++ competitors define their table with
 * extern "C" linkage.
 */
#ifndef LE_BENCH_H
#define LE_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "logengine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The formatted workload of NanoLog's and Quill's benchmarks. */
#define BENCH_FMT "Logging int: %d, int: %d, double: %f"

enum bench_workload {
	BENCH_RAW = 0, /* payload bytes as they are */
	BENCH_FORMATTED = 1, /* BENCH_FMT with (i, 2i, i/2.0) */
	BENCH_KV = 2,  /* three values (i, 2i, i/2.0) as fields (logengine:
	                  le_info_kv) or "{} {} {}" (spdlog) */
	BENCH_DEFERRED = 3 /* BENCH_FMT with (i, 2i, i/2.0) through the
	                  competitor's log_deferred (logengine: le_info, the
	                  arguments copied, the text made when read), else
	                  its log_fmt */
};

struct bench_cfg {
	const char *dir;     /* empty directory that holds this run's files */
	long records;        /* total records, all producers */
	uint32_t payload;    /* bytes per record (BENCH_RAW) */
	int threads;         /* producer threads */
	int workload;        /* enum bench_workload */
	int route_keys;      /* 0: one key per producer thread; K: records
	                        cycle over K route keys (logengine shards) */
	int soak;            /* 1: long run: bound the files (rotation,
	                        retention) because they cannot all be kept */
	int untimed;         /* driver only: calls are not timed one by one */
	int burst;           /* driver only: timed calls come in bursts of
	                        this many, BENCH_BURST_GAP_NS apart (0: back
	                        to back) */
	le_config le;        /* logengine's knobs; the others ignore them */
};

struct bench_count {
	long records;        /* records found in the files */
	uint64_t bytes;      /* bytes in the files */
	char why[160];       /* what was wrong, when counting failed */
};

/* What the competitor itself reports at finish (0 when it cannot tell). */
struct bench_finish {
	uint64_t dropped;    /* records it admits having discarded */
	uint64_t written;    /* records it says are in files (logengine) */
};

struct competitor {
	const char *name;    /* "logengine", "spdlog", "glog", "raw" */
	const char *version; /* static string */
	/* Set up for cfg; *st is passed to the other calls.  @return 0 or a
	 * negative error (message on stderr). */
	int (*open)(const struct bench_cfg *cfg, void **st);
	/* One raw record from producer `tid` (0..threads-1).
	 * @return 0 queued/written, 1 dropped, negative on error. */
	int (*log)(void *st, int tid, uint64_t key, const char *p,
	           uint32_t len);
	/* One BENCH_FMT record with these arguments.  @return as log. */
	int (*log_fmt)(void *st, int tid, int a, int b, double d);
	/* Everything submitted is in the files; stop.  @return 0 or < 0. */
	int (*finish)(void *st, struct bench_finish *out);
	/* Optional: release what finish kept, after the clock stopped (the
	 * engine's le_close, which also syncs).  @return 0 or < 0. */
	int (*close)(void *st);
	/* Count the records in cfg->dir after finish and close.
	 * @return 0 or < 0 (out->why says what was wrong). */
	int (*count)(const struct bench_cfg *cfg, struct bench_count *out);
	/* Optional (soak): records written and dropped so far, queue depth. */
	void (*progress)(void *st, uint64_t *written, uint64_t *dropped,
	                 uint64_t *queued);
	/* Optional (BENCH_KV): one record of three values, (a, b, d), the
	 * competitor's structured way.  @return as log. */
	int (*log_kv)(void *st, int tid, int a, int b, double d);
	/* Optional (BENCH_DEFERRED): one BENCH_FMT record whose text is made
	 * later.  @return as log. */
	int (*log_deferred)(void *st, int tid, int a, int b, double d);
};

/* The pause after each burst of timed calls: the writer drains what a
 * burst queued, so each call meets the queue as an application that logs
 * in bursts would, not a queue kept full. */
#define BENCH_BURST_GAP_NS 20000

extern const struct competitor bench_le, bench_spdlog, bench_glog, bench_raw;

/* Helpers shared by the competitors (bench.c). */

/* Add up the sizes of the regular files under dir (recursively) whose
 * names end in suffix (every file when suffix is NULL), and, if lines is
 * not NULL, the number of their lines that `want` accepts (every line
 * when want is NULL).  @return 0 or -errno. */
int bench_scan_files(const char *dir, const char *suffix, uint64_t *bytes,
                     long *lines, int (*want)(const char *line, size_t len));

#ifdef __cplusplus
}
#endif
#endif /* LE_BENCH_H */
