/*
 * frame.c -- building the dashboard's frames (frame.h): live pages, then
 * the tails, then the JSON.
 */
#define _GNU_SOURCE
#include "frame.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int frames_init(struct frames *f, char **dirs, int ndirs)
{
	memset(f, 0, sizeof *f);
	f->dirs = calloc((size_t)ndirs, sizeof *f->dirs);
	if (!f->dirs)
		return -1;
	f->ndirs = ndirs;
	f->hist = calloc((size_t)HIST_N * (1 + (size_t)ndirs * HIST_WORDS),
	                 sizeof *f->hist);
	if (!f->hist)
		return -1;
	for (int i = 0; i < ndirs; i++) {
		f->dirs[i].pos = calloc(LIVE_MAX_SHARDS, sizeof *f->dirs[i].pos);
		if (!f->dirs[i].pos || live_dir_init(&f->dirs[i].live, dirs[i]) < 0)
			return -1;
	}
	return 0;
}

void frames_free(struct frames *f)
{
	for (int i = 0; f->dirs && i < f->ndirs; i++) {
		live_dir_free(&f->dirs[i].live);
		free(f->dirs[i].pos);
	}
	free(f->dirs);
	f->dirs = NULL;
	free(f->hist);
	f->hist = NULL;
}

/* The record's logger (the field "logger"; "" for the root) into t. */
static void rec_logger(struct tail_rec *t, const le_record *r)
{
	size_t pos = 0;
	le_field fl;

	t->logger_len = 0;
	while (le_record_field(r, &pos, &fl) == 1)
		if (fl.type == LE_FT_STRING && fl.key_len == 6 &&
		    !memcmp(fl.key, "logger", 6)) {
			size_t n = fl.v.str.len < TAIL_LOGGER ? fl.v.str.len
			                                      : TAIL_LOGGER;
			memcpy(t->logger, fl.v.str.ptr, n);
			t->logger_len = (uint8_t)n;
			return;
		}
}

/* The record's fields as a JSON object into t (fields_len -1: they would
 * not fit in TAIL_FIELDS); le_record_fields_format gives ,"fields":{...}. */
static void rec_fields(struct frames *f, struct tail_rec *t,
                       const le_record *r)
{
	static const char pre[] = ",\"fields\":";
	t->fields_len = -1;
	if (!r->fields_len) {
		memcpy(t->fields, "{}", 2);
		t->fields_len = 2;
		return;
	}
	if (LE_FIELDS_TEXT_MAX(r->fields_len) > sizeof f->scratch)
		return;
	int n = le_record_fields_format(r, LE_STREAM_JSON, f->scratch,
	                                sizeof f->scratch);
	size_t k = sizeof pre - 1;
	if (n < (int)k || memcmp(f->scratch, pre, k) != 0 ||
	    (size_t)n - k > TAIL_FIELDS)
		return;
	memcpy(t->fields, f->scratch + k, (size_t)n - k);
	t->fields_len = (int16_t)(n - (int)k);
}

static void ring_add(struct frames *f, int dir, const le_record *r)
{
	struct tail_rec *t;
	if (f->ring_n < TAIL_RING) {
		t = &f->ring[(f->ring_head + f->ring_n++) % TAIL_RING];
	} else {
		t = &f->ring[f->ring_head];
		f->ring_head = (f->ring_head + 1) % TAIL_RING;
	}
	t->dir = (uint16_t)dir;
	t->shard = (uint16_t)r->shard;
	t->level = (int8_t)r->level;
	t->flags = (uint8_t)r->flags;
	t->seq = r->seq;
	t->ts_ns = r->ts_ns;
	t->len = (uint16_t)(r->len < TAIL_MSG ? r->len : TAIL_MSG);
	memcpy(t->msg, r->payload, t->len);
	rec_logger(t, r);
	rec_fields(f, t, r);
	if (f->fresh < TAIL_RING)
		f->fresh++;
}

/*
 * The records shard i wrote since the last frame, at most TAIL_PER_SHARD:
 * from where the tail stopped, or, the first time and after falling
 * behind, from the page's last frame (the newest record).  A shard whose
 * page shows no new bytes is not opened at all.
 */
static void follow(struct frames *f, int k, unsigned i)
{
	struct frame_dir *d = &f->dirs[k];
	const le_live *l = &d->live.cur[i];
	struct tail_pos *p = &d->pos[i];

	if (l->state == LE_LIVE_NONE || l->segment == 0)
		return;
	if (!p->known || p->engine != l->started_ns || p->behind) {
		if (p->behind && p->known && p->seg == l->segment &&
		    l->last_frame_off > p->off)
			f->skipped++; /* only counted within one segment */
		p->seg = l->segment;
		p->off = l->last_frame_off;
		p->engine = l->started_ns;
		p->known = 1;
		p->behind = 0;
	} else if (p->seg == l->segment && p->off >= l->segment_end) {
		return; /* nothing new */
	}
	le_tail *t;
	le_record r;
	int n = 0, rc;
	if (le_tail_open(&t, d->live.path, i, p->seg, p->off) < 0) {
		p->behind = 1; /* deleted under us: start again at the page */
		return;
	}
	while (n < TAIL_PER_SHARD && (rc = le_tail_next(t, &r)) == 1) {
		ring_add(f, k, &r);
		n++;
	}
	le_tail_position(t, &p->seg, &p->off);
	if (n == TAIL_PER_SHARD && le_tail_next(t, &r) == 1)
		p->behind = 1;
	le_tail_close(t);
}

static void dir_json(struct buf *b, const struct live_dir *d)
{
	buf_put(b, "{\"dir\":\"", 8);
	buf_json_str(b, d->path, strlen(d->path));
	if (d->rc < 0) {
		buf_printf(b, "\",\"state\":\"none\",\"error\":\"%s\",\"shards\":[]}",
		           d->rc == -ENOENT ? "no live page" : le_strerror(d->rc));
		return;
	}
	const le_live *e = d->engine;
	uint64_t bt = 0;
	for (unsigned i = 0; i < d->n; i++)
		bt += d->cur[i].backtrace_written;
	buf_printf(b, "\",\"state\":\"%s\",\"pid\":%d,\"queue\":[%" PRIu64
	           ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 "],\"suppressed\":%" PRIu64
	           ",\"backtrace\":%" PRIu64 ",\"shards\":[",
	           live_state_name(d->state), e->pid, e->queue_records,
	           e->queue_bytes, e->queue_capacity, e->queue_capacity_bytes,
	           e->suppressed, bt);
	for (unsigned i = 0; i < d->n; i++) {
		const le_live *l = &d->cur[i];
		buf_printf(b, "%s[%u,%d,%" PRIu64 ",%" PRIu64 ",%" PRIu64
		           ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
		           ",%" PRIu64 ",%.0f,%.0f,%.0f,%.0f,%d]",
		           i ? "," : "", i, l->state, l->accepted, l->written,
		           l->dropped, l->bytes_written, l->ring_bytes,
		           l->ring_size, l->segments, l->disk_bytes,
		           le_live_quantile(&l->write, 0.5),
		           le_live_quantile(&l->write, 0.99),
		           le_live_quantile(&l->sync, 0.5),
		           le_live_quantile(&l->sync, 0.99), l->failing);
	}
	buf_put(b, "],\"levels\":[", 12);
	for (int lv = 0; lv <= LE_FATAL; lv++) {
		uint64_t n = 0;
		for (unsigned i = 0; i < d->n; i++)
			n += d->cur[i].level_records[lv];
		buf_printf(b, "%s%" PRIu64, lv ? "," : "", n);
	}
	buf_put(b, "]}", 2);
}

static void rec_json(struct buf *b, const struct tail_rec *t)
{
	buf_printf(b, "[%u,%u,%" PRIu64 ",%" PRIu64 ",%d,%u,\"", t->dir,
	           t->shard, t->seq, t->ts_ns / 1000000u, t->level, t->flags);
	buf_json_str(b, t->msg, t->len);
	buf_put(b, "\",\"", 3);
	buf_json_str(b, t->logger, t->logger_len);
	buf_put(b, "\",", 2);
	if (t->fields_len < 0)
		buf_put(b, "null", 4);
	else
		buf_put(b, t->fields, (size_t)t->fields_len);
	buf_put(b, "]", 1);
}

/* Is t of logger want or of one of its children? */
static int of_logger(const struct tail_rec *t, const char *want)
{
	size_t n = strlen(want);
	if (!n)
		return t->logger_len == 0;
	return t->logger_len >= n && !memcmp(t->logger, want, n) &&
	       (t->logger_len == n || t->logger[n] == '.');
}

/* The n newest records of the ring (of logger, unless NULL), oldest
 * first. */
static void ring_json(struct buf *b, const struct frames *f, unsigned n,
                      const char *logger)
{
	int first = 1;
	if (n > f->ring_n)
		n = f->ring_n;
	for (unsigned j = f->ring_n - n; j < f->ring_n; j++) {
		const struct tail_rec *t = &f->ring[(f->ring_head + j) % TAIL_RING];
		if (logger && !of_logger(t, logger))
			continue;
		if (!first)
			buf_put(b, ",", 1);
		first = 0;
		rec_json(b, t);
	}
}

/* A sample of every directory (HIST_WORDS each) at t_ms, over the
 * oldest when the ring is full. */
static void hist_add(struct frames *f, uint64_t t_ms)
{
	size_t stride = 1 + (size_t)f->ndirs * HIST_WORDS;
	unsigned at = (f->hist_head + f->hist_n) % HIST_N;
	if (f->hist_n < HIST_N)
		f->hist_n++;
	else
		f->hist_head = (f->hist_head + 1) % HIST_N;
	uint64_t *w = f->hist + at * stride;
	memset(w, 0, stride * sizeof *w);
	w[0] = t_ms;
	for (int k = 0; k < f->ndirs; k++) {
		const struct live_dir *d = &f->dirs[k].live;
		uint64_t *o = w + 1 + (size_t)k * HIST_WORDS;
		for (unsigned i = 0; d->rc == 0 && i < d->n; i++) {
			const le_live *l = &d->cur[i];
			double p99 = le_live_quantile(&l->write, 0.99);
			o[0] += l->written;
			o[1] += l->bytes_written;
			o[2] += l->dropped;
			if (p99 > (double)o[4])
				o[4] = (uint64_t)p99;
			o[5] += l->level_records[LE_ERROR] +
			        l->level_records[LE_FATAL];
		}
		o[3] = d->rc == 0 && d->engine ? d->engine->queue_records : 0;
	}
}

void frames_build(struct frames *f, struct buf *out, const char *extra)
{
	struct timespec now;

	f->fresh = 0;
	for (int k = 0; k < f->ndirs; k++) {
		struct live_dir *d = &f->dirs[k].live;
		live_dir_read(d);
		for (unsigned i = 0; d->rc == 0 && i < d->n; i++)
			follow(f, k, i);
	}
	clock_gettime(CLOCK_REALTIME, &now);
	uint64_t t_ms = (uint64_t)now.tv_sec * 1000 +
	                (uint64_t)now.tv_nsec / 1000000;
	hist_add(f, t_ms);
	buf_printf(out, "{\"seq\":%" PRIu64 ",\"t\":%" PRIu64 ",\"dirs\":[",
	           ++f->seq, t_ms);
	for (int k = 0; k < f->ndirs; k++) {
		if (k)
			buf_put(out, ",", 1);
		dir_json(out, &f->dirs[k].live);
	}
	buf_put(out, "],\"tail\":[", 10);
	ring_json(out, f, f->fresh < TAIL_PER_FRAME ? f->fresh : TAIL_PER_FRAME,
	          NULL);
	buf_printf(out, "],\"skipped\":%" PRIu64, f->skipped);
	if (extra && *extra) {
		buf_put(out, ",", 1);
		buf_put(out, extra, strlen(extra));
	}
	buf_put(out, "}", 1);
}

void frames_tail_json(const struct frames *f, struct buf *out,
                      const char *logger)
{
	buf_put(out, "{\"tail\":[", 9);
	ring_json(out, f, TAIL_RING, logger);
	buf_put(out, "]}", 2);
}

void frames_history_json(const struct frames *f, struct buf *out)
{
	size_t stride = 1 + (size_t)f->ndirs * HIST_WORDS;
	buf_printf(out, "{\"interval_ms\":%d,\"keep_s\":%d,\"fields\":["
	           "\"written\",\"bytes_written\",\"dropped\",\"queue_records\","
	           "\"write_p99_ns\",\"errors\"],\"dirs\":[", HIST_INTERVAL_MS,
	           HIST_KEEP_S);
	for (int k = 0; k < f->ndirs; k++) {
		const char *p = f->dirs[k].live.path;
		buf_put(out, k ? ",\"" : "\"", k ? 2 : 1);
		buf_json_str(out, p, strlen(p));
		buf_put(out, "\"", 1);
	}
	buf_put(out, "],\"samples\":[", 13);
	for (unsigned j = 0; j < f->hist_n; j++) {
		const uint64_t *w = f->hist + ((f->hist_head + j) % HIST_N) * stride;
		buf_printf(out, "%s[%" PRIu64, j ? "," : "", w[0]);
		for (int k = 0; k < f->ndirs; k++) {
			const uint64_t *o = w + 1 + (size_t)k * HIST_WORDS;
			buf_put(out, ",[", 2);
			for (int i = 0; i < HIST_WORDS; i++)
				buf_printf(out, "%s%" PRIu64, i ? "," : "", o[i]);
			buf_put(out, "]", 1);
		}
		buf_put(out, "]", 1);
	}
	buf_put(out, "]}", 2);
}
