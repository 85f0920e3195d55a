/*
 * reader_follow.c -- le_reader_follow and le_reader_wait: reading a live
 * log.
 *
 * At the end of what is written, a cursor in its shard's last segment goes
 * idle instead of done, and whatever stands there (nothing, a frame being
 * written, zeros of a padded block) is looked at again later.
 * le_reader_wait sleeps on inotify (or polls), then looks again: the
 * directory is listed anew when a segment appeared or went, the open
 * segment's size is taken again, and its read window dropped.  A segment
 * is only ever left once a later one exists: the writer seals a segment
 * (every byte written) before it creates the next, so the old one is then
 * final and read with the plain rules of reader_scan.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/os.h"
#include "read/reader.h"

#define FOLLOW_POLL_MS 50      /* without inotify: how often to look */
#define FOLLOW_RELIST_MS 1000  /* with inotify: list anyway this often */
#define MS 1000000ull

/* Watch dir (or a shard directory) for what follow needs to see. */
static int watch(le_reader *r, const char *dir, int shard_dir)
{
	uint32_t mask = IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM;
	if (shard_dir)
		mask |= IN_MODIFY;
	return r->ifd < 0 ? -1 : inotify_add_watch(r->ifd, dir, mask);
}

int le_reader_follow(le_reader *r, uint32_t reorder_ms)
{
	/* Before anything is read: a plain read leaves a shard's last
	 * segment for good at its end, where following must wait. */
	if (!r || r->positioned)
		return LE_EINVAL;
	r->follow = 1;
	r->reorder_ns = (uint64_t)reorder_ms * MS;
	const char *poll_env = getenv("LE_READER_POLL");
	if (!poll_env || !*poll_env || !strcmp(poll_env, "0"))
		r->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	r->dir_wd = watch(r, r->dir, 0);
	for (size_t i = 0; i < r->ncur; i++)
		r->cur[i].wd = watch(r, r->cur[i].dir, 1);
	r->relisted_mono = le__mono_ns();
	return 0;
}

/* Shards whose directory appeared since the last look (a bitmap of those
 * read already keeps this linear in the shard directories). */
static int add_shards(le_reader *r)
{
	uint32_t *shards;
	size_t n;
	unsigned char *have;
	int rc = le__shard_list(r->dir, &shards, &n);

	if (rc < 0 || r->opts.shard >= 0)
		return rc == -ENOENT ? 0 : rc;
	if (!(have = calloc(LE_SHARD_DIRS_MAX / 8 + 1, 1))) {
		free(shards);
		return LE_ENOMEM;
	}
	for (size_t j = 0; j < r->ncur; j++) {
		uint32_t sh = r->cur[j].shard;
		have[sh / 8] |= (unsigned char)(1u << (sh % 8));
	}
	for (size_t i = 0; rc == 0 && i < n; i++) {
		if (have[shards[i] / 8] >> (shards[i] % 8) & 1)
			continue;
		if ((rc = le__rd_cursors_reserve(r, r->ncur + 1)) < 0)
			break;
		struct cursor *c = &r->cur[r->ncur];
		rc = le__rd_cursor_init(c, r->dir, shards[i]);
		if (rc < 0) {
			le__rd_cursor_free(c);
			break;
		}
		c->wd = watch(r, c->dir, 1);
		r->ncur++;
	}
	free(have);
	free(shards);
	return rc;
}

/* List c's segments again.  The open segment stays in the list even once
 * deleted (we hold it open and read it to its end). */
static int relist(struct cursor *c)
{
	uint64_t *v;
	size_t n;
	int rc = le__seg_list(c->dir, &v, &n);

	if (rc == -ENOENT) {
		v = NULL;
		n = 0;
	} else if (rc < 0) {
		return rc;
	}
	c->oldest = n ? v[0] : UINT64_MAX;
	size_t at = 0;
	while (at < n && v[at] < c->next_index)
		at++;
	if (c->open && (at == n || v[at] != c->next_index)) {
		uint64_t *nv = realloc(v, (n + 1) * sizeof *nv);
		if (!nv) {
			free(v);
			return LE_ENOMEM;
		}
		v = nv;
		memmove(v + at + 1, v + at, (n - at) * sizeof *v);
		v[at] = c->next_index;
		n++;
	}
	free(c->segs);
	c->segs = v;
	c->nseg = n;
	c->iseg = at;
	c->relist = 0;
	return 0;
}

/* Look again at an idle shard: its directory (when asked), then the open
 * segment's size, with its read window dropped (bytes of a block the
 * writer rewrites in place, O_DIRECT, change under an unchanged size). */
int le__rd_refresh(struct cursor *c, int list)
{
	struct stat st;
	int rc = 0;

	if (list || c->relist)
		rc = relist(c);
	if (rc == 0 && c->open && le__fstat(c->scan.fd, &st) == 0) {
		c->scan.file_len = (uint64_t)st.st_size;
		c->scan.win_len = 0;
		c->scan.win_off = 0;
	}
	c->idle = 0;
	return rc;
}

/* Read what inotify has; mark the shards whose directory changed. */
static void drain_events(le_reader *r)
{
	char buf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));
	ssize_t n;

	while ((n = read(r->ifd, buf, sizeof buf)) > 0) {
		for (char *p = buf; p < buf + n;) {
			struct inotify_event *ev = (struct inotify_event *)p;
			p += sizeof *ev + ev->len;
			if (ev->mask & IN_Q_OVERFLOW) {
				r->shards_changed = 1;
				for (size_t i = 0; i < r->ncur; i++)
					r->cur[i].relist = 1;
				continue;
			}
			if (ev->wd == r->dir_wd) {
				r->shards_changed = 1;
				continue;
			}
			if (!(ev->mask & (IN_CREATE | IN_MOVED_TO | IN_DELETE |
			                  IN_MOVED_FROM)))
				continue;
			for (size_t i = 0; i < r->ncur; i++)
				if (r->cur[i].wd == ev->wd)
					r->cur[i].relist = 1;
		}
	}
}

int le_reader_wait(le_reader *r, int timeout_ms)
{
	if (!r || !r->follow)
		return LE_EINVAL;
	if (r->err)
		return r->err;
	uint64_t now = le__mono_ns();
	int64_t wait = timeout_ms;
	if (r->hold_until) {
		int64_t due_ms = r->hold_until > now
		                         ? (int64_t)((r->hold_until - now +
		                                      MS - 1) / MS)
		                         : 0;
		if (wait < 0 || due_ms < wait)
			wait = due_ms;
	}
	int64_t cap = r->ifd >= 0 ? FOLLOW_RELIST_MS : FOLLOW_POLL_MS;
	if (wait < 0 || wait > cap)
		wait = cap;
	int list_all = r->ifd < 0;
	if (r->ifd >= 0) {
		struct pollfd pfd = {r->ifd, POLLIN, 0};
		int n = poll(&pfd, 1, (int)wait);
		if (n < 0 && errno == EINTR)
			return -EINTR;
		if (n > 0)
			drain_events(r);
	} else if (wait > 0) {
		struct timespec ts = {wait / 1000, (long)(wait % 1000) * 1000000L};
		if (nanosleep(&ts, NULL) < 0 && errno == EINTR)
			return -EINTR;
	}
	now = le__mono_ns();
	if (now - r->relisted_mono >= FOLLOW_RELIST_MS * MS) {
		list_all = 1; /* in case an event was missed */
		r->relisted_mono = now;
	}
	int rc = 0;
	if (list_all || r->shards_changed) {
		r->shards_changed = 0;
		rc = add_shards(r);
	}
	for (size_t i = 0; rc == 0 && i < r->ncur; i++)
		if (r->cur[i].idle)
			rc = le__rd_refresh(&r->cur[i], list_all);
	if (rc < 0)
		r->err = rc;
	return rc < 0 ? rc : 1;
}
