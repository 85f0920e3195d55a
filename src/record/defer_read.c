/*
 * defer_read.c -- deferred records as readers meet them in a segment
 * (docs/FORMAT.md, "Deferred records"): a frame names its call site's
 * descriptor by the offset of the frame that carries it, so a reader
 * keeps the descriptors of the segment it reads (le__dcache), finds one
 * it has not seen by reading that frame, and makes the text with
 * le__defer_text (defer.c).  Nothing read from the file is trusted: a
 * frame that does not lead to a descriptor gives an "undecodable" text,
 * never a crash.
 */
#define _GNU_SOURCE
#include "record/defer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record/format.h"
#include "base/os.h"

static struct le__dent *dent_find(le__dcache *c, uint32_t off)
{
	if (!c->cap)
		return NULL;
	size_t m = c->cap - 1, i = (off * 2654435761u) & m;
	for (; c->e[i].off; i = (i + 1) & m)
		if (c->e[i].off == off + 1)
			return &c->e[i];
	return NULL;
}

static void dcache_clear(le__dcache *c)
{
	for (size_t i = 0; i < c->cap; i++) {
		free(c->e[i].d);
		free(c->e[i].t);
		c->e[i] = (struct le__dent){0, 0, NULL, NULL, 0};
	}
	c->n = 0;
}

static int dent_add(le__dcache *c, uint32_t off, const unsigned char *d,
                    size_t len)
{
	if (2 * (c->n + 1) > c->cap) {
		size_t nc = c->cap ? 2 * c->cap : 64;
		struct le__dent *ne = calloc(nc, sizeof *ne), *old = c->e;
		if (!ne)
			return -1;
		size_t oc = c->cap;
		c->e = ne;
		c->cap = nc;
		for (size_t i = 0; i < oc; i++) {
			if (!old[i].off)
				continue;
			size_t j = ((old[i].off - 1) * 2654435761u) & (nc - 1);
			while (ne[j].off)
				j = (j + 1) & (nc - 1);
			ne[j] = old[i];
		}
		free(old);
	}
	/* padded: the compiled format reads its literals in whole 16-byte
	 * copies (le__dtext.pad) */
	unsigned char *copy = malloc(len + LE_DTEXT_PAD);
	if (!copy)
		return -1;
	memcpy(copy, d, len);
	memset(copy + len, 0, LE_DTEXT_PAD);
	size_t j = (off * 2654435761u) & (c->cap - 1);
	while (c->e[j].off)
		j = (j + 1) & (c->cap - 1);
	c->e[j] = (struct le__dent){off + 1, (uint32_t)len, copy, NULL, 0};
	c->n++;
	return 0;
}

/* The descriptor held by the deferred frame at `off` of fd. */
static const unsigned char *desc_at(le__dcache *c, int fd, uint32_t version,
                                    uint32_t fields, uint32_t off,
                                    size_t *dlen, const char **why)
{
	unsigned char w[4];
	le__frame f;

	if (le__pread_full(fd, w, 4, off) != 4) {
		*why = "descriptor frame past the end of the file";
		return NULL;
	}
	uint64_t n = (uint64_t)le__get32(w) + 4;
	if (n > LE_FRAME_MAX) {
		*why = "descriptor frame too large";
		return NULL;
	}
	if (n > c->frame_cap) {
		unsigned char *b = realloc(c->frame, n);
		if (!b) {
			*why = "out of memory";
			return NULL;
		}
		c->frame = b;
		c->frame_cap = n;
	}
	if (le__pread_full(fd, c->frame, n, off) != (ssize_t)n ||
	    le__frame_decode_v(c->frame, n, version, fields, LE_FRAME_MAX, &f,
	                       why) != LE_FRAME_OK) {
		*why = "no valid frame where the record's descriptor should be";
		return NULL;
	}
	uint32_t ref;
	const unsigned char *d, *a;
	size_t alen;
	if (!(f.flags & LE_REC_DEFERRED) ||
	    le__defer_split_seg(f.payload, f.len, &ref, &d, dlen, &a, &alen,
	                        why) < 0 || !d) {
		*why = "the frame the record points at holds no descriptor";
		return NULL;
	}
	if (dent_add(c, off, d, *dlen) < 0) {
		*why = "out of memory";
		return NULL;
	}
	return dent_find(c, off)->d;
}

const unsigned char *le__dcache_desc(le__dcache *c, int fd, uint64_t seg,
                                    uint32_t version, uint32_t fields,
                                    uint32_t off, size_t *dlen,
                                    const char **why)
{
	if (c->seg != seg + 1) {
		dcache_clear(c);
		c->seg = seg + 1;
	}
	struct le__dent *e = dent_find(c, off);
	if (e) {
		*dlen = e->len;
		return e->d;
	}
	return desc_at(c, fd, version, fields, off, dlen, why);
}

static long undecodable(le__dcache *c, const char **text, const char *why)
{
	static char fallback[] = "[undecodable deferred record]";
	if (c->text_cap < 128) {
		char *t = realloc(c->text, 128);
		if (!t) {
			*text = fallback;
			return (long)sizeof fallback - 1;
		}
		c->text = t;
		c->text_cap = 128;
	}
	int n = snprintf(c->text, c->text_cap,
	                 "[undecodable deferred record: %s]", why);
	*text = c->text;
	return n < (int)c->text_cap ? n : (long)c->text_cap - 1;
}

/* The text of args by e's descriptor, compiled the first time (the
 * cache's entries live as long as their segment is read, so a format is
 * parsed once per segment).  @return its length, or -1 when
 * le__defer_text must make it (le__dtext_run). */
static long text_compiled(le__dcache *c, struct le__dent *e,
                          const unsigned char *args, size_t alen)
{
	if (!e->dt) {
		le__desc desc;
		const char *why;
		e->dt = -1;
		if (!le__desc_decode(e->d, e->len, &desc, &why) ||
		    !(e->t = malloc(sizeof *e->t)))
			return -1;
		e->dt = le__dtext_make(e->t, &desc) == 0 ? 1 : -1;
		e->t->pad = 1; /* dent_add's copy */
	}
	if (e->dt < 0)
		return -1;
	if (!c->text_cap) {
		if (!(c->text = malloc(4096)))
			return -1;
		c->text_cap = 4096;
	}
	return le__dtext_run(e->t, args, alen, c->text, c->text_cap);
}

long le__dcache_text(le__dcache *c, int fd, uint64_t seg, uint32_t version,
                     uint32_t fields, uint64_t at, const unsigned char *p,
                     size_t len, const char **text, uint32_t *flags,
                     const char **why)
{
	uint32_t ref;
	const unsigned char *d, *args;
	size_t dlen, alen;
	le__desc desc;

	if (c->seg != seg + 1) {
		dcache_clear(c);
		c->seg = seg + 1;
	}
	if (le__defer_split_seg(p, len, &ref, &d, &dlen, &args, &alen, why) < 0)
		goto bad;
	struct le__dent *e = NULL;
	if (d) {
		if (at < LE_DEFER_INLINE && !(e = dent_find(c, (uint32_t)at)) &&
		    dent_add(c, (uint32_t)at, d, dlen) == 0)
			e = dent_find(c, (uint32_t)at);
	} else {
		e = dent_find(c, ref);
		if (e) {
			d = e->d;
			dlen = e->len;
		} else {
			d = desc_at(c, fd, version, fields, ref, &dlen, why);
			if (!d)
				goto bad;
			e = dent_find(c, ref);
		}
	}
	long fast = e ? text_compiled(c, e, args, alen) : -1;
	if (fast >= 0) {
		*text = c->text;
		return fast;
	}
	if (!le__desc_decode(d, dlen, &desc, why))
		goto bad;
	for (;;) {
		if (!c->text_cap) {
			c->text = malloc(4096);
			if (!c->text) {
				*why = "out of memory";
				goto bad;
			}
			c->text_cap = 4096;
		}
		long n = le__defer_text(&desc, args, alen, c->text, c->text_cap,
		                        why);
		if (n < 0)
			goto bad;
		if ((size_t)n < c->text_cap) {
			*text = c->text;
			return n;
		}
		if (c->text_cap > LE_MAX_RECORD_LIMIT) {
			*flags |= LE_REC_TRUNCATED;
			*text = c->text;
			return (long)c->text_cap - 1;
		}
		size_t nc = (size_t)n + 1 < LE_MAX_RECORD_LIMIT + 1
		                    ? (size_t)n + 1 : LE_MAX_RECORD_LIMIT + 1;
		char *t = realloc(c->text, nc);
		if (!t) {
			*why = "out of memory";
			goto bad;
		}
		c->text = t;
		c->text_cap = nc;
	}
bad:
	undecodable(c, text, *why);
	return -1;
}

void le__dcache_free(le__dcache *c)
{
	dcache_clear(c);
	free(c->e);
	free(c->text);
	free(c->frame);
	memset(c, 0, sizeof *c);
}
