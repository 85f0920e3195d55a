/*
 * livedir.c -- reading a directory's live pages, rates between two
 * readings, and the small text buffer serve and stats --live write into.
 */
#define _GNU_SOURCE
#include "livedir.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t live_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int live_dir_init(struct live_dir *d, const char *path)
{
	memset(d, 0, sizeof *d);
	d->path = path;
	d->cur = calloc(LIVE_MAX_SHARDS, sizeof *d->cur);
	d->prev = calloc(LIVE_MAX_SHARDS, sizeof *d->prev);
	return d->cur && d->prev && le_live_open(&d->h, path) == 0 ? 0 : -1;
}

void live_dir_free(struct live_dir *d)
{
	free(d->cur);
	free(d->prev);
	le_live_close(d->h);
	d->cur = d->prev = NULL;
	d->h = NULL;
}

/* Which engine state a directory shows: a shard running says the engine
 * runs; otherwise the most telling of the rest. */
static int rank(int state)
{
	static const int r[] = {
		[LE_LIVE_NONE] = 0, [LE_LIVE_CLOSED] = 1, [LE_LIVE_DEAD] = 2,
		[LE_LIVE_STALE] = 3, [LE_LIVE_RUNNING] = 4,
	};
	return state >= 0 && state <= LE_LIVE_DEAD ? r[state] : 0;
}

void live_dir_read(struct live_dir *d)
{
	le_live *t = d->prev;
	unsigned prev_n = d->n;

	d->prev = d->cur;
	d->cur = t;
	d->t_prev = d->t_cur;
	d->have_prev = d->rc == 0 && prev_n > 0;
	d->t_cur = live_mono_ns();
	d->rc = le_live_get(d->h, 0, &d->cur[0]);
	d->n = 0;
	d->state = LE_LIVE_NONE;
	d->engine = NULL;
	if (d->rc < 0)
		return;
	unsigned n = d->cur[0].nshards;
	if (n < 1 || n > LIVE_MAX_SHARDS)
		n = 1;
	d->n = n;
	for (unsigned i = 1; i < n; i++)
		if (le_live_get(d->h, i, &d->cur[i]) < 0) {
			memset(&d->cur[i], 0, sizeof d->cur[i]);
			d->cur[i].shard = i;
		}
	for (unsigned i = 0; i < n; i++) {
		if (rank(d->cur[i].state) > rank(d->state))
			d->state = d->cur[i].state;
		if (!d->engine || d->cur[i].updated_ns > d->engine->updated_ns)
			d->engine = &d->cur[i];
	}
	if (n != prev_n)
		d->have_prev = 0;
}

double live_rate(const struct live_dir *d, size_t off, unsigned shard)
{
	if (!d->have_prev || shard >= d->n || d->t_cur <= d->t_prev)
		return 0;
	uint64_t a, b;
	memcpy(&a, (const char *)&d->prev[shard] + off, sizeof a);
	memcpy(&b, (const char *)&d->cur[shard] + off, sizeof b);
	if (b < a) /* a new engine started: counters from 0 */
		return 0;
	return (double)(b - a) * 1e9 / (double)(d->t_cur - d->t_prev);
}

const char *live_state_name(int state)
{
	switch (state) {
	case LE_LIVE_RUNNING:
		return "running";
	case LE_LIVE_STALE:
		return "stale";
	case LE_LIVE_CLOSED:
		return "stopped";
	case LE_LIVE_DEAD:
		return "dead";
	default:
		return "none";
	}
}

/* ---- buffer ---- */

void buf_init(struct buf *b, size_t max)
{
	memset(b, 0, sizeof *b);
	b->max = max;
}

void buf_free(struct buf *b)
{
	free(b->p);
	memset(b, 0, sizeof *b);
}

static int reserve(struct buf *b, size_t n)
{
	if (b->len + n + 1 <= b->cap)
		return 0;
	if (b->len + n + 1 > b->max) {
		b->full = 1;
		return -1;
	}
	size_t cap = b->cap ? b->cap : 4096;
	while (cap < b->len + n + 1)
		cap *= 2;
	if (cap > b->max)
		cap = b->max;
	char *p = realloc(b->p, cap);
	if (!p) {
		b->full = 1;
		return -1;
	}
	b->p = p;
	b->cap = cap;
	return 0;
}

void buf_put(struct buf *b, const void *p, size_t n)
{
	if (reserve(b, n) < 0)
		return;
	memcpy(b->p + b->len, p, n);
	b->len += n;
	b->p[b->len] = '\0';
}

void buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	char small[512];

	va_start(ap, fmt);
	int n = vsnprintf(small, sizeof small, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n < sizeof small) {
		buf_put(b, small, (size_t)n);
		return;
	}
	if (reserve(b, (size_t)n) < 0)
		return;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

void buf_json_str(struct buf *b, const void *s, size_t n)
{
	const unsigned char *p = s;
	size_t i = 0;

	while (i < n) {
		size_t k = le_utf8_len(p + i, n - i);
		unsigned c = p[i];
		if (k > 1 || (k == 1 && c >= 0x20 && c != '"' && c != '\\' &&
		              c != 0x7f)) {
			buf_put(b, p + i, k);
			i += k;
		} else if (c == '"' || c == '\\') {
			char e[2] = {'\\', (char)c};
			buf_put(b, e, 2);
			i++;
		} else {
			buf_printf(b, "\\u%04x", c);
			i++;
		}
	}
}
