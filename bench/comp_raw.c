/*
 * comp_raw.c -- the machine's own limit: each producer thread copies its
 * records into a 1 MiB buffer of its own and write()s the buffer to a file
 * of its own when full.  No queue, no thread hand-off, no framing, no
 * lock: what is left is memcpy and the page-cache write, which every
 * logger also pays.  Formatted records are snprintf'd straight into the
 * buffer, one line each.
 *
 * Counting: raw records have no delimiter, so a file must hold exactly
 * records x payload bytes; formatted ones are counted as lines.  In a soak
 * a file that passes 1 GiB starts again from offset 0 (disk bounded).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

#define BUF_CAP (1u << 20)
#define SOAK_FILE_MAX (1ull << 30)

struct raw_out {
	int fd;
	size_t len;       /* bytes in buf */
	uint64_t file;    /* bytes in the file */
	char *buf;        /* BUF_CAP + room for one record */
	char pad[64];     /* keep producers' fields off each other's lines */
};

struct raw_state {
	int threads, soak;
	uint32_t max_rec;
	struct raw_out *out;
};

static int raw_open(const struct bench_cfg *cfg, void **st)
{
	struct raw_state *s = calloc(1, sizeof *s);
	char path[600];

	if (!s)
		return -ENOMEM;
	s->threads = cfg->threads;
	s->soak = cfg->soak;
	s->max_rec = cfg->payload > 4096 ? cfg->payload : 4096;
	s->out = calloc((size_t)cfg->threads, sizeof *s->out);
	if (!s->out)
		return -ENOMEM;
	for (int i = 0; i < cfg->threads; i++) {
		struct raw_out *o = &s->out[i];
		snprintf(path, sizeof path, "%s/raw-%d.out", cfg->dir, i);
		o->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		o->buf = malloc(BUF_CAP + s->max_rec);
		if (o->fd < 0 || !o->buf) {
			perror(path);
			return -errno;
		}
		memset(o->buf, 0xff, BUF_CAP + s->max_rec); /* fault it in */
	}
	*st = s;
	return 0;
}

static int drain(struct raw_state *s, struct raw_out *o)
{
	size_t off = 0;

	while (off < o->len) {
		ssize_t n = write(o->fd, o->buf + off, o->len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			perror("raw: write");
			return -1;
		}
		off += (size_t)n;
	}
	o->file += o->len;
	o->len = 0;
	if (s->soak && o->file > SOAK_FILE_MAX) {
		if (ftruncate(o->fd, 0) < 0 || lseek(o->fd, 0, SEEK_SET) < 0)
			return -1;
		o->file = 0;
	}
	return 0;
}

static int raw_log(void *st, int tid, uint64_t key, const char *p,
                   uint32_t len)
{
	struct raw_state *s = st;
	struct raw_out *o = &s->out[tid];

	(void)key;
	memcpy(o->buf + o->len, p, len);
	o->len += len;
	if (o->len >= BUF_CAP)
		return drain(s, o);
	return 0;
}

static int raw_log_fmt(void *st, int tid, int a, int b, double d)
{
	struct raw_state *s = st;
	struct raw_out *o = &s->out[tid];
	int n = snprintf(o->buf + o->len, s->max_rec, BENCH_FMT "\n", a, b, d);

	if (n < 0 || (uint32_t)n >= s->max_rec)
		return -1;
	o->len += (size_t)n;
	if (o->len >= BUF_CAP)
		return drain(s, o);
	return 0;
}

static int raw_finish(void *st, struct bench_finish *out)
{
	struct raw_state *s = st;
	int rc = 0;

	for (int i = 0; i < s->threads; i++) {
		if (drain(s, &s->out[i]) < 0)
			rc = -1;
		close(s->out[i].fd);
		free(s->out[i].buf);
	}
	free(s->out);
	free(s);
	out->dropped = 0;
	return rc;
}

static int raw_count(const struct bench_cfg *cfg, struct bench_count *out)
{
	long lines = 0;
	int rc = bench_scan_files(cfg->dir, NULL, &out->bytes,
	                          cfg->workload == BENCH_FORMATTED ? &lines
	                                                           : NULL,
	                          NULL);
	if (rc < 0) {
		snprintf(out->why, sizeof out->why, "scan: %s", strerror(-rc));
		return rc;
	}
	if (cfg->workload == BENCH_FORMATTED) {
		out->records = lines;
		return 0;
	}
	/* Fixed-size records: whole records only. */
	out->records = (long)(out->bytes / cfg->payload);
	if (out->bytes % cfg->payload)
		snprintf(out->why, sizeof out->why,
		         "%llu bytes is not a whole number of %u-byte records",
		         (unsigned long long)out->bytes, cfg->payload);
	return 0;
}

const struct competitor bench_raw = {
	.name = "raw",
	.version = "write(2)",
	.open = raw_open,
	.log = raw_log,
	.log_fmt = raw_log_fmt,
	.finish = raw_finish,
	.count = raw_count,
};
