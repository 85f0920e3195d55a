/*
 * livedir.h -- the live pages of one log directory, for `stats --live`
 * and `serve`: read through le_live_get only (the public API), shard 0
 * first, whose page says how many shards the engine has, so that only
 * the live set is read: no directory listing, nothing that grows with
 * the segments kept.
 */
#ifndef LE_TOOLS_LIVEDIR_H
#define LE_TOOLS_LIVEDIR_H

#include <stddef.h>
#include <stdint.h>

#include "logengine.h"

#define LIVE_MAX_DIRS 64
#define LIVE_MAX_SHARDS 256 /* shard-000 .. shard-255 (le_config.shards) */

struct live_dir {
	const char *path;
	le_live_dir *h;     /* the pages, kept mapped (le_live_open) */
	int rc;             /* of reading shard 0: 0, -ENOENT (no page), ... */
	int state;          /* enum le_live_state of the engine (below) */
	unsigned n;         /* shards read: the engine's count */
	le_live *cur;       /* [LE_MAX_SHARDS]: this reading */
	le_live *prev;      /* the reading before, for rates */
	int have_prev;
	uint64_t t_cur, t_prev; /* CLOCK_MONOTONIC ns of the readings */
	const le_live *engine; /* the shard published last: engine-wide words */
};

/* @return 0, or -1 (out of memory). */
int live_dir_init(struct live_dir *d, const char *path);
void live_dir_free(struct live_dir *d);

/* Read every live shard of d; the previous reading becomes d->prev.
 * The engine's state: running if any shard runs, else stale, dead,
 * closed, none (in that order). */
void live_dir_read(struct live_dir *d);

/* Per second, between the two last readings (0 without one). */
double live_rate(const struct live_dir *d, size_t field_off, unsigned shard);
#define LIVE_RATE(d, field, shard) \
	live_rate((d), offsetof(le_live, field), (shard))

const char *live_state_name(int state); /* "running", "stopped", ... */

uint64_t live_mono_ns(void);

/* A growable text buffer (stops growing at cap: bounded output). */
struct buf {
	char *p;
	size_t len, cap, max;
	int full;           /* something did not fit under max */
};
void buf_init(struct buf *b, size_t max);
void buf_free(struct buf *b);
void buf_printf(struct buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void buf_put(struct buf *b, const void *p, size_t n);
/* s as the inside of a JSON string: valid UTF-8 kept, '"' '\' and
 * control bytes escaped, every byte of an invalid sequence as \u00XX. */
void buf_json_str(struct buf *b, const void *s, size_t n);

#endif
