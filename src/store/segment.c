/*
 * segment.c -- listing and scanning segment files; checkpoints (their
 * names are segname.c's).
 *
 * The scanner is the one place that turns file bytes into frames.  Its
 * window grows only to hold one frame whose size word has passed the range
 * check (<= LE_FRAME_MAX) and fits in the file, so no damaged size word can
 * make it allocate more than LE_FRAME_MAX + the window.
 */
#define _GNU_SOURCE
#include "store/segment.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "base/os.h"
#include "store/seg_zst.h"

/* The window starts small (a reader keeps one scanner per shard, and a
 * collector's store may have thousands) and doubles on each refill up to
 * WINDOW_MAX, or the scanner's win_max, so a long sequential scan still
 * reads in large steps. */
#define WINDOW_MIN (16u << 10)
#define WINDOW_MAX (1u << 20)

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* Parse exactly 16 lower-case hex digits followed by ".seg" or, an
 * archived segment, ".seg.zst". */
static int parse_seg_name(const char *name, uint64_t *idx)
{
	uint64_t v = 0;
	for (int i = 0; i < 16; i++) {
		char c = name[i];
		if (c >= '0' && c <= '9')
			v = v << 4 | (uint64_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v = v << 4 | (uint64_t)(c - 'a' + 10);
		else
			return 0;
	}
	if (strcmp(name + 16, ".seg") != 0 &&
	    strcmp(name + 16, ".seg" LE_ZST_SUFFIX) != 0)
		return 0;
	*idx = v;
	return 1;
}

/* Collect numbers parsed from directory entries into a sorted array. */
struct num_list {
	int (*parse)(const char *, uint64_t *);
	uint64_t *v;
	size_t len, cap;
};

static int collect_num(void *arg, const char *name, unsigned type)
{
	struct num_list *l = arg;
	uint64_t x;
	(void)type;
	if (!l->parse(name, &x))
		return 0;
	if (l->len == l->cap) {
		size_t nc = l->cap ? l->cap * 2 : 16;
		uint64_t *nv = realloc(l->v, nc * sizeof *nv);
		if (!nv)
			return LE_ENOMEM;
		l->v = nv;
		l->cap = nc;
	}
	l->v[l->len++] = x;
	return 0;
}

static int list_dir(const char *dir, int depth,
                    int (*parse)(const char *, uint64_t *), uint64_t **out,
                    size_t *n)
{
	struct num_list l = {parse, NULL, 0, 0};

	*out = NULL;
	*n = 0;
	int fd = le__open_in(dir, depth, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		return fd;
	int rc = le__dir_each(fd, collect_num, &l);
	le__close(fd);
	if (rc < 0) {
		free(l.v);
		return rc;
	}
	uint64_t *v = l.v;
	size_t len = l.len;
	if (len)
		qsort(v, len, sizeof *v, cmp_u64);
	/* A segment and its archive (a crash between the archive's rename
	 * and the segment's unlink) are one segment. */
	size_t w = 0;
	for (size_t i = 0; i < len; i++)
		if (w == 0 || v[w - 1] != v[i])
			v[w++] = v[i];
	len = w;
	*out = v;
	*n = len;
	return 0;
}

int le__seg_base(const char *shard_dir, uint64_t index, uint64_t *base)
{
	char path[LE_PATH_MAX];
	unsigned char h[LE_SEG_HDR];
	le__seg_hdr hdr;
	uint64_t len;
	int archived;
	int rc = le__seg_path(path, sizeof path, shard_dir, index);

	if (rc < 0)
		return rc;
	ssize_t got = le__seg_head(path, h, sizeof h, &len, &archived);
	if (got != LE_SEG_HDR)
		return got < 0 ? (int)got : LE_ECORRUPT;
	if (le__seg_hdr_decode(h, &hdr) < 0)
		return LE_ECORRUPT;
	*base = hdr.base_seq;
	return 0;
}

int le__seg_list(const char *shard_dir, uint64_t **out, size_t *n)
{
	return list_dir(shard_dir, LE_IN_DIR, parse_seg_name, out, n);
}

/* "shard-" and the number le__shard_dir writes: three digits below 1000
 * (shard-007), no leading zero above (shard-1000), below
 * LE_SHARD_DIRS_MAX; so each number has one name. */
static int parse_shard_name(const char *name, uint64_t *shard)
{
	uint64_t v = 0;
	size_t len = strlen(name);

	if (strncmp(name, "shard-", 6) != 0 || len < 9 || len > 11)
		return 0;
	for (size_t i = 6; i < len; i++) {
		if (name[i] < '0' || name[i] > '9')
			return 0;
		v = v * 10 + (uint64_t)(name[i] - '0');
	}
	if (v >= LE_SHARD_DIRS_MAX || (len > 9 && name[6] == '0'))
		return 0;
	*shard = v;
	return 1;
}

int le__shard_list(const char *dir, uint32_t **out, size_t *n)
{
	uint64_t *v;
	int rc = list_dir(dir, LE_IN_ROOT, parse_shard_name, &v, n);
	*out = NULL;
	if (rc < 0)
		return rc;
	if (*n == 0) {
		free(v);
		return 0;
	}
	uint32_t *s = malloc(*n * sizeof *s);
	if (!s) {
		free(v);
		return LE_ENOMEM;
	}
	for (size_t i = 0; i < *n; i++)
		s[i] = (uint32_t)v[i];
	free(v);
	*out = s;
	return 0;
}

/* ---- scanner ---- */

int le__scan_open(le__scan *s, const char *path, uint32_t expect_shard,
                  const char **why)
{
	unsigned char h[LE_SEG_HDR];
	struct stat st;
	int rc;

	memset(s, 0, sizeof *s);
	*why = "";
	s->fd = le__seg_open_read(path, &s->archived, why);
	if (s->fd < 0) {
		if (s->fd == LE_ECORRUPT && !**why)
			*why = "archive damaged";
		return s->fd;
	}
	if ((rc = le__fstat(s->fd, &st)) < 0)
		goto fail;
	s->file_len = (uint64_t)st.st_size;
	ssize_t got = le__pread_full(s->fd, h, sizeof h, 0);
	if (got < 0) {
		rc = (int)got;
		goto fail;
	}
	if (got < LE_SEG_HDR) {
		*why = "segment header cut short";
		rc = LE_ECORRUPT;
		goto fail;
	}
	rc = le__seg_hdr_decode(h, &s->hdr);
	if (rc < 0) {
		*why = rc == LE_EVERSION ? "unknown format version"
		                         : "segment header damaged";
		goto fail;
	}
	if (expect_shard != UINT32_MAX && s->hdr.shard != expect_shard) {
		*why = "segment header names another shard";
		rc = LE_ECORRUPT;
		goto fail;
	}
	s->cap = WINDOW_MIN;
	s->buf = malloc(s->cap);
	if (!s->buf) {
		rc = LE_ENOMEM;
		goto fail;
	}
	s->off = LE_SEG_HDR;
	s->next_seq = s->hdr.base_seq;
	return 0;
fail:
	le__close(s->fd);
	s->fd = -1;
	return rc;
}

int le__all_zero(int fd, uint64_t off, uint64_t len)
{
	unsigned char buf[4096];

	while (len > 0) {
		size_t want = len < sizeof buf ? (size_t)len : sizeof buf;
		ssize_t got = le__pread_full(fd, buf, want, off);
		if (got <= 0)
			return got < 0 ? (int)got : 1;
		for (ssize_t i = 0; i < got; i++)
			if (buf[i])
				return 0;
		off += (uint64_t)got;
		len -= (uint64_t)got;
	}
	return 1;
}

/*
 * Was this segment's header never completely written?  True when the file
 * is shorter than a header, or the header does not decode and only zeros
 * follow it: what a writer between creating a segment (maybe preallocated)
 * and writing its header shows, and what a crash there leaves, with no
 * frame lost.  A header that decodes (right format, wrong shard or index)
 * was written on purpose somewhere else, so it is never torn.  @return 1
 * torn, 2 a header that decodes, 0 neither, -errno; *size the file size.
 */
static int torn_header(const char *path, uint64_t *size)
{
	unsigned char h[LE_SEG_HDR];
	le__seg_hdr hdr;
	struct stat st;
	ssize_t got;
	int rc, fd = le__open_in(path, LE_IN_SHARD, O_RDONLY, 0);

	*size = 0;
	if (fd < 0)
		return fd;
	rc = le__fstat(fd, &st);
	if (rc < 0)
		goto out;
	*size = (uint64_t)st.st_size;
	got = le__pread_full(fd, h, sizeof h, 0);
	if (got < 0)
		rc = (int)got;
	else if (got < LE_SEG_HDR)
		rc = 1;
	else if ((rc = le__seg_hdr_decode(h, &hdr)) == LE_ECORRUPT)
		rc = le__all_zero(fd, LE_SEG_HDR,
		                  (uint64_t)st.st_size - LE_SEG_HDR);
	else
		rc = rc == 0 ? 2 : 0;
out:
	le__close(fd);
	return rc;
}

/* One page: a file whose first write never reached the disk shows at
 * most this much (the size a crash may keep, zeros in it). */
#define UNBORN_MAX 4096u

int le__seg_unborn(const char *path)
{
	unsigned char h[LE_SEG_HDR];
	struct stat st;
	int r = 0, fd = le__open_in(path, LE_IN_SHARD, O_RDONLY, 0);

	if (fd < 0)
		return 0;
	if (le__fstat(fd, &st) == 0) {
		if (st.st_size < (off_t)LE_SEG_HDR)
			/* cut inside the header: no frame can be in it */
			r = le__pread_full(fd, h, sizeof h, 0) >= 0;
		else if (st.st_size <= (off_t)UNBORN_MAX)
			r = le__all_zero(fd, 0, (uint64_t)st.st_size) == 1;
	}
	le__close(fd);
	return r;
}

int le__scan_open_newest(le__scan *s, const char *path, uint32_t expect_shard,
                         const char **why, int *torn, uint64_t *size)
{
	int rc;

	/* A look between the writer's create and its header write finds
	 * no header.  The second look, torn_header's, is the one acted on:
	 * a header that decodes by then was being written, and the file is
	 * opened again. */
	for (int look = 0;; look++) {
		*torn = 0;
		*size = 0;
		rc = le__scan_open(s, path, expect_shard, why);
		if (rc != LE_ECORRUPT || s->archived)
			return rc;
		int t = torn_header(path, size);
		if (t < 0)
			return t;
		if (t != 2 || look == 2) { /* 2 again: another shard's */
			*torn = t == 1;
			return rc;
		}
	}
}

void le__scan_close(le__scan *s)
{
	if (s->fd >= 0)
		le__close(s->fd);
	free(s->buf);
	s->buf = NULL;
	s->fd = -1;
}

/* Make file bytes [off, off + need) resident in the window (need is
 * already clipped to the file).  @return 0 or -errno / LE_ENOMEM. */
static int window(le__scan *s, uint64_t off, size_t need)
{
	if (off >= s->win_off && off + need <= s->win_off + s->win_len)
		return 0;
	size_t max = s->win_max ? s->win_max : WINDOW_MAX;
	size_t want_cap = s->cap < max && s->win_len ? s->cap * 2 : s->cap;
	if (want_cap < need)
		want_cap = need;
	if (want_cap > s->cap) {
		unsigned char *nb = realloc(s->buf, want_cap);
		if (!nb)
			return LE_ENOMEM;
		s->buf = nb;
		s->cap = want_cap;
	}
	uint64_t left = s->file_len - off;
	size_t want = left < s->cap ? (size_t)left : s->cap;
	ssize_t got = le__pread_full(s->fd, s->buf, want, off);
	if (got < 0)
		return (int)got;
	s->win_off = off;
	s->win_len = (size_t)got;
	return 0;
}

/* Decode at off without moving; expects seq >= min_seq when present. */
static int peek(le__scan *s, uint64_t off, le__frame *f, const char **why)
{
	uint32_t fields = s->hdr.fields;
	uint64_t left = off < s->file_len ? s->file_len - off : 0;
	size_t first = left < LE_FRAME_FIXED_MAX ? (size_t)left
	                                         : LE_FRAME_FIXED_MAX;
	int rc = window(s, off, first);
	if (rc < 0)
		return rc;
	if (first >= 4) {
		uint64_t total = (uint64_t)le__get32(s->buf + (off - s->win_off)) + 4;
		if (total <= (uint64_t)LE_FRAME_MAX + 4) {
			size_t need = total < left ? (size_t)total : (size_t)left;
			rc = window(s, off, need);
			if (rc < 0)
				return rc;
		}
	}
	size_t avail = (size_t)(s->win_off + s->win_len - off);
	if (avail > left)
		avail = (size_t)left;
	rc = le__frame_decode_v(s->buf + (off - s->win_off), avail,
	                        s->hdr.version, fields, LE_FRAME_MAX, f, why);
	if (rc != LE_FRAME_OK)
		return rc;
	if ((fields & LE_FIELD_SHARD) && f->shard != s->hdr.shard) {
		*why = "frame names another shard";
		return LE_FRAME_BAD;
	}
	return LE_FRAME_OK;
}

int le__scan_peek(le__scan *s, le__frame *f, const char **why)
{
	int rc = peek(s, s->off, f, why);
	if (rc == LE_FRAME_OK && !(s->hdr.fields & LE_FIELD_SEQUENCE))
		f->seq = s->next_seq;
	return rc;
}

int le__scan_next(le__scan *s, le__frame *f, const char **why)
{
	int rc = peek(s, s->off, f, why);
	if (rc != LE_FRAME_OK)
		return rc;
	if (s->hdr.fields & LE_FIELD_SEQUENCE) {
		if (f->seq != s->next_seq) {
			*why = "sequence number out of order "
			       "(frame copied from elsewhere?)";
			return LE_FRAME_BAD;
		}
	} else {
		f->seq = s->next_seq;
	}
	s->off += (uint64_t)f->size + 4;
	s->next_seq++;
	s->frames++;
	return LE_FRAME_OK;
}

int64_t le__scan_many(le__scan *s, uint64_t max_bytes, uint64_t *bytes)
{
	uint64_t left = s->off < s->file_len ? s->file_len - s->off : 0;
	uint64_t want = left < max_bytes ? left : max_bytes;
	size_t used;

	*bytes = 0;
	if (want > (s->win_max ? s->win_max : WINDOW_MAX))
		want = s->win_max ? s->win_max : WINDOW_MAX;
	if (want < 4)
		return 0;
	int rc = window(s, s->off, (size_t)want);
	if (rc < 0)
		return rc;
	size_t at = (size_t)(s->off - s->win_off);
	size_t avail = s->win_len - at;
	uint64_t seq = s->next_seq;
	uint64_t n = le__frames_check(s->buf + at, avail < want ? avail
	                                                       : (size_t)want,
	                              s->hdr.version, s->hdr.fields,
	                              s->hdr.shard, (size_t)want, &seq, &used);
	s->off += used;
	s->next_seq += n;
	s->frames += n;
	*bytes = used;
	return (int64_t)n;
}

int le__scan_resync(le__scan *s)
{
	le__frame f;
	const char *why;

	for (uint64_t off = s->off + 1; off + 5 <= s->file_len; off++) {
		int rc = peek(s, off, &f, &why);
		if (rc < 0)
			return rc;
		if (rc != LE_FRAME_OK)
			continue;
		if ((s->hdr.fields & LE_FIELD_SEQUENCE) && f.seq < s->next_seq)
			continue;
		s->off = off;
		if (s->hdr.fields & LE_FIELD_SEQUENCE)
			s->next_seq = f.seq;
		return 1;
	}
	return 0;
}

/* ---- checkpoint ---- */

int le__ckpt_read(const char *shard_dir, le__ckpt *c)
{
	char path[LE_PATH_MAX];
	unsigned char buf[LE_CKPT_FILE_BYTES];
	int n = snprintf(path, sizeof path, "%s/CHECKPOINT", shard_dir);
	if (n < 0 || (size_t)n >= sizeof path)
		return -ENAMETOOLONG;
	int fd = le__open_in(path, LE_IN_SHARD, O_RDONLY, 0);
	if (fd < 0)
		return fd;
	memset(buf, 0, sizeof buf);
	ssize_t got = le__pread_full(fd, buf, sizeof buf, 0);
	le__close(fd);
	if (got < 0)
		return (int)got;
	/* Read a short file as the writer will leave it: its first write
	 * past the end turns the missing bytes into zeros.  A slot cut
	 * inside its trailing zero bytes (its CRC's high byte is zero one
	 * time in 256) decodes then, with a generation above the one the
	 * writer just wrote had it been ignored here: a stale checkpoint
	 * would shadow the fresh one (test_badinput's checkpoint_cut). */
	return le__ckpt_pick(buf, sizeof buf, c);
}

int le__ckpt_write(int fd, const le__ckpt *c)
{
	unsigned char slot[LE_CKPT_SLOT];
	le__ckpt_encode(slot, c);
	return le__pwrite_all(fd, slot, sizeof slot,
	                      (c->gen % 2) ? LE_CKPT_SLOT1_OFF : 0);
}
