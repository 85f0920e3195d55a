/*
 * reader_open.c -- le_reader_open and le_reader_close: a cursor for each
 * shard directory of a log directory (or the one asked for), its segments
 * listed, the format version checked before any record is returned.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/internal.h"
#include "base/os.h"
#include "read/reader.h"
#include "store/seg_zst.h"
#include "ship/ship.h"

/* Room for "/" + 16 hex digits + ".seg.zst" + NUL after a shard
 * directory. */
#define SEG_NAME_ROOM 32

void le_reader_opts_init(le_reader_opts *o)
{
	memset(o, 0, sizeof *o);
	o->mode = LE_RECOVER_TOLERATE_TAIL;
	o->shard = -1;
}

/* ---- open / close ---- */

/* Refuse at open a directory a newer library wrote, rather than after
 * returning part of it: look at the first segment's header only. */
static int check_version(struct cursor *c)
{
	unsigned char h[LE_SEG_HDR];
	le__seg_hdr hdr;
	uint64_t len;
	int archived;

	if (c->nseg == 0 ||
	    le__seg_path(c->path, c->path_cap, c->dir, c->segs[0]) < 0)
		return 0;
	ssize_t got = le__seg_head(c->path, h, sizeof h, &len, &archived);
	if (got < LE_SEG_HDR || le__seg_hdr_decode(h, &hdr) != LE_EVERSION)
		return 0; /* damage and I/O errors surface in le_reader_next */
	le__seterr("%s: format version %" PRIu32 " (this library reads %d "
	           "to %d)", c->path, hdr.version, LE_SEG_VERSION_MIN,
	           LE_SEG_VERSION);
	return LE_EVERSION;
}

/* A shard of a collector's store holds another host's shard: its ORIGIN
 * file says which, and its segments carry that shard's number. */
static int origin_init(struct cursor *c)
{
	le__origin o;

	c->seg_shard = c->shard;
	if (le__origin_read(c->dir, &o) != 0)
		return 0; /* none (or unreadable): a local shard */
	c->host = strdup(o.host);
	c->seg_shard = o.shard;
	c->late = o.kind == LE_ORIGIN_LATE;
	return c->host ? 0 : LE_ENOMEM;
}

int le__rd_cursor_init(struct cursor *c, const char *dir, uint32_t shard)
{
	char sdir[LE_PATH_MAX];
	int rc = le__shard_dir(sdir, sizeof sdir, dir, shard);

	memset(c, 0, sizeof *c);
	c->shard = shard;
	c->wd = -1;
	if (rc < 0)
		return rc;
	c->dir = strdup(sdir);
	c->path_cap = strlen(sdir) + SEG_NAME_ROOM;
	c->path = calloc(1, c->path_cap);
	if (!c->dir || !c->path)
		return LE_ENOMEM;
	snprintf(c->path, c->path_cap, "%s", c->dir);
	rc = origin_init(c);
	if (rc < 0)
		return rc;
	rc = le__seg_list(c->dir, &c->segs, &c->nseg);
	if (rc < 0) {
		le__seterr("%s: %s", c->dir, le_strerror(rc));
		return rc;
	}
	c->oldest = c->nseg ? c->segs[0] : UINT64_MAX;
	return check_version(c);
}

void le__rd_cursor_free(struct cursor *c)
{
	le__rd_seg_close(c);
	free(c->segs);
	free(c->path);
	free(c->dir);
	free(c->host);
	le__dcache_free(&c->dc);
}

/* Keep only opts->shard in the list; -ENOENT when it is not there. */
static int pick_shard(uint32_t *shards, size_t *n, int want)
{
	for (size_t i = 0; i < *n; i++) {
		if (shards[i] == (uint32_t)want) {
			shards[0] = shards[i];
			*n = 1;
			return 0;
		}
	}
	return -ENOENT;
}

static int check_opts(const le_reader_opts *o)
{
	if (o->mode < LE_RECOVER_TOLERATE_TAIL || o->mode > LE_RECOVER_SKIP) {
		le__seterr("mode: %d is not an enum le_recovery value",
		           o->mode);
		return LE_EINVAL;
	}
	if (o->shard < -1 || o->shard >= LE_SHARD_DIRS_MAX) {
		le__seterr("shard: must be -1 or 0..%d", LE_SHARD_DIRS_MAX - 1);
		return LE_EINVAL;
	}
	return 0;
}

/* Room for n cursors. */
int le__rd_cursors_reserve(le_reader *r, size_t n)
{
	if (n <= r->cap)
		return 0;
	struct cursor *nc = realloc(r->cur, n * sizeof *nc);
	if (!nc)
		return LE_ENOMEM;
	r->cur = nc;
	r->cap = n;
	return 0;
}

int le_reader_open(le_reader **out, const char *dir,
                   const le_reader_opts *opts)
{
	le_reader_opts def;
	le_reader *r = NULL;
	uint32_t *shards = NULL;
	size_t n = 0;
	int rc;

	le__clearerr();
	if (!out || !dir) {
		le__seterr("%s: must not be NULL", out ? "dir" : "out");
		return LE_EINVAL;
	}
	*out = NULL;
	if (!opts) {
		le_reader_opts_init(&def);
		opts = &def;
	}
	rc = check_opts(opts);
	if (rc < 0)
		return rc;
	rc = LE_ENOMEM;
	r = calloc(1, sizeof *r);
	if (!r || !(r->dir = strdup(dir)))
		goto fail;
	r->opts = *opts;
	r->last = -1;
	r->ifd = r->dir_wd = -1;
	rc = le__shard_list(dir, &shards, &n);
	if (rc < 0) {
		le__seterr("%s: %s", dir, le_strerror(rc));
		goto fail;
	}
	if (opts->shard >= 0 && (rc = pick_shard(shards, &n, opts->shard))) {
		le__seterr("%s/shard-%03d: no such shard directory", dir,
		           opts->shard);
		goto fail;
	}
	if ((rc = le__rd_cursors_reserve(r, n ? n : 1)) < 0)
		goto fail;
	for (; r->ncur < n; r->ncur++) {
		rc = le__rd_cursor_init(&r->cur[r->ncur], dir, shards[r->ncur]);
		if (rc < 0) {
			r->ncur++; /* so that close frees what it holds */
			goto fail;
		}
	}
	free(shards);
	*out = r;
	return 0;
fail:
	free(shards);
	le_reader_close(r);
	return rc;
}

void le_reader_close(le_reader *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->ncur; i++)
		le__rd_cursor_free(&r->cur[i]);
	if (r->ifd >= 0)
		close(r->ifd);
	free(r->cur);
	free(r->heap);
	free(r->dir);
	free(r);
}
