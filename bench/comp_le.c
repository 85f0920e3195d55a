/*
 * comp_le.c -- logengine as a benchmark competitor.  The configuration is
 * the driver's (cfg->le: fields, shards, batch, queue, durability, ...);
 * finish() returns when le_flush says every record is in a segment file
 * (the page cache, with LE_SYNC_NONE: where spdlog and glog leave theirs);
 * le_close, which also fdatasyncs whatever the durability, runs in close()
 * after the clock has stopped.  count() reads the directory back with the
 * reader API and adds up the segment files' sizes.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

struct le_state {
	le_engine *e;
	le_logger *lg; /* "bench": BENCH_KV's records */
};

static int le_b_open(const struct bench_cfg *cfg, void **st)
{
	struct le_state *s = calloc(1, sizeof *s);
	le_config c = cfg->le;

	if (!s)
		return -1;
	c.dir = cfg->dir;
	c.create_dir = 1;
	if (cfg->soak && !c.retention_bytes)
		c.retention_bytes = 1ull << 30; /* the disk must survive */
	int rc = le_open(&s->e, &c);
	if (rc < 0) {
		fprintf(stderr, "logengine: le_open: %s: %s\n", le_strerror(rc),
		        le_errmsg());
		free(s);
		return rc;
	}
	s->lg = le_logger_get(s->e, "bench");
	if (!s->lg) {
		fprintf(stderr, "logengine: le_logger_get: %s\n", le_errmsg());
		le_close(s->e);
		free(s);
		return -1;
	}
	*st = s;
	return 0;
}

static int result(int rc)
{
	if (rc == 0)
		return 0;
	if (rc == LE_EFULL)
		return 1;
	fprintf(stderr, "logengine: %s\n", le_strerror(rc));
	return rc;
}

static int le_b_log(void *st, int tid, uint64_t key, const char *p,
                    uint32_t len)
{
	(void)tid;
	return result(le_write(((struct le_state *)st)->e, key, LE_INFO, p,
	                       len));
}

static int le_b_log_fmt(void *st, int tid, int a, int b, double d)
{
	(void)tid;
	return result(le_logf(((struct le_state *)st)->e, LE_INFO, BENCH_FMT,
	                      a, b, d));
}

/* The level macro with a literal format: the call copies the arguments
 * (docs/FORMAT.md, "Deferred records"), the text is made when read. */
static int le_b_log_deferred(void *st, int tid, int a, int b, double d)
{
	(void)tid;
	le_info(((struct le_state *)st)->e, BENCH_FMT, a, b, d);
	return 0;
}

/* The level macro with three typed fields, as an application logs a
 * request: the values stay typed in the record (no text is made). */
static int le_b_log_kv(void *st, int tid, int a, int b, double d)
{
	(void)tid;
	le_info_kv(((struct le_state *)st)->lg,
	           LE_FIELDS(LE_I64("a", a), LE_I64("b", b), LE_F64("d", d)),
	           "request");
	return 0;
}

static int le_b_finish(void *st, struct bench_finish *out)
{
	struct le_state *s = st;
	le_stats stats;
	int rc = le_flush(s->e, -1);

	le_stats_get(s->e, &stats);
	out->dropped = stats.dropped;
	out->written = stats.written;
	if (rc < 0)
		fprintf(stderr, "logengine: le_flush: %s\n", le_strerror(rc));
	/* Closing syncs (it is the engine's promise at close, even with
	 * LE_SYNC_NONE): outside the clock, where the driver calls it. */
	return rc;
}

static void le_b_progress(void *st, uint64_t *written, uint64_t *dropped,
                          uint64_t *queued)
{
	le_stats stats;
	le_stats_get(((struct le_state *)st)->e, &stats);
	*written = stats.written;
	*dropped = stats.dropped;
	*queued = stats.queue_records;
}

static int le_b_close(void *st)
{
	struct le_state *s = st;
	int rc = le_close(s->e);
	free(s);
	return rc;
}

static int le_b_count(const struct bench_cfg *cfg, struct bench_count *out)
{
	le_reader *rd;
	le_record rec;
	int rc = le_reader_open(&rd, cfg->dir, NULL);

	if (rc < 0) {
		snprintf(out->why, sizeof out->why, "le_reader_open: %s",
		         le_strerror(rc));
		return rc;
	}
	while ((rc = le_reader_next(rd, &rec)) == 1)
		out->records += !(rec.flags & LE_REC_MARKER);
	le_reader_close(rd);
	if (rc < 0)
		snprintf(out->why, sizeof out->why, "le_reader_next: %s",
		         le_strerror(rc));
	int r2 = bench_scan_files(cfg->dir, ".seg", &out->bytes, NULL, NULL);
	return rc < 0 ? rc : r2;
}

const struct competitor bench_le = {
	.name = "logengine",
	.version = LE_VERSION_STRING,
	.open = le_b_open,
	.log = le_b_log,
	.log_fmt = le_b_log_fmt,
	.finish = le_b_finish,
	.close = le_b_close,
	.count = le_b_count,
	.progress = le_b_progress,
	.log_kv = le_b_log_kv,
	.log_deferred = le_b_log_deferred,
};
