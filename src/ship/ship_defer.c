/*
 * ship_defer.c -- deferred frames on their way to another store
 * (docs/INTERFACES.md, "Forwarding", deferred records).  A deferred frame
 * names its descriptor by R, the offset of a frame that carries it; the
 * offset is the origin segment's, and means nothing once the frame is in
 * a message or in a collector's segment.  So each side relinks: the
 * forwarder makes every back-reference of a message name a frame of the
 * same message (Le-Pos + its body offset), and the collector makes every
 * one of its segments name a frame of that segment.  Where the output has
 * no frame carrying the descriptor yet, the frame takes the descriptor
 * inline, and later frames of its call site point at it.
 *
 * Descriptors are matched by their bytes, not by where they came from, so
 * one table serves both sides and a collector's segment holds each call
 * site's descriptor once, whichever origin segments its frames came from.
 */
#include "ship/ship.h"

#include <stdlib.h>
#include <string.h>

#include "base/crc32c.h"
#include "record/defer.h"

struct le__rl_ent {
	uint32_t crc;  /* of the descriptor; 0 marks a free entry */
	uint32_t dlen;
	uint64_t at;   /* R naming the output frame that carries it */
	unsigned char *d;
};

static uint32_t desc_key(const unsigned char *d, size_t dlen)
{
	uint32_t c = le__crc32c_extend(0, d, dlen);
	return c ? c : 1;
}

static struct le__rl_ent *rl_find(le__relink *rl, const unsigned char *d,
                                  size_t dlen, uint32_t key)
{
	if (!rl->cap)
		return NULL;
	for (size_t i = key & (rl->cap - 1); rl->e[i].crc;
	     i = (i + 1) & (rl->cap - 1))
		if (rl->e[i].crc == key && rl->e[i].dlen == dlen &&
		    !memcmp(rl->e[i].d, d, dlen))
			return &rl->e[i];
	return NULL;
}

/* Note that the output frame R = at carries d.  Past the bounds it is
 * not noted: later frames of that call site carry the descriptor too. */
static void rl_add(le__relink *rl, const unsigned char *d, size_t dlen,
                   uint32_t key, uint64_t at)
{
	if (at >= LE_DEFER_INLINE || rl->n >= LE_RELINK_MAX ||
	    rl->bytes + dlen > LE_RELINK_BYTES)
		return;
	if (2 * (rl->n + 1) > rl->cap) {
		size_t nc = rl->cap ? 2 * rl->cap : 64;
		struct le__rl_ent *ne = calloc(nc, sizeof *ne);
		if (!ne)
			return;
		for (size_t i = 0; i < rl->cap; i++) {
			if (!rl->e[i].crc)
				continue;
			size_t j = rl->e[i].crc & (nc - 1);
			while (ne[j].crc)
				j = (j + 1) & (nc - 1);
			ne[j] = rl->e[i];
		}
		free(rl->e);
		rl->e = ne;
		rl->cap = nc;
	}
	unsigned char *copy = malloc(dlen);
	if (!copy)
		return;
	memcpy(copy, d, dlen);
	size_t j = key & (rl->cap - 1);
	while (rl->e[j].crc)
		j = (j + 1) & (rl->cap - 1);
	rl->e[j] = (struct le__rl_ent){key, (uint32_t)dlen, at, copy};
	rl->n++;
	rl->bytes += dlen;
}

void le__relink_reset(le__relink *rl)
{
	for (size_t i = 0; i < rl->cap; i++) {
		free(rl->e[i].d);
		rl->e[i] = (struct le__rl_ent){0};
	}
	rl->n = rl->bytes = 0;
}

void le__relink_free(le__relink *rl)
{
	le__relink_reset(rl);
	free(rl->e);
	memset(rl, 0, sizeof *rl);
}

int le__frame_deferred(const unsigned char *fr, uint32_t fields)
{
	return fr[4 + ((fields & LE_FIELD_CRC) ? 4 : 0)] & LE_REC_DEFERRED;
}

size_t le__relink_frame(le__relink *rl, const unsigned char *fr, size_t n,
                        uint32_t fields, uint64_t at, le__rl_find *find,
                        void *arg, unsigned char *out)
{
	le__frame f;
	const char *why;
	uint32_t ref;
	const unsigned char *d, *args;
	size_t dlen, alen;

	if (!le__frame_deferred(fr, fields) ||
	    le__frame_decode(fr, n, fields, LE_FRAME_MAX, &f, &why) !=
	            LE_FRAME_OK ||
	    le__defer_split_seg(f.payload, f.len, &ref, &d, &dlen, &args,
	                        &alen, &why) < 0)
		return 0; /* not deferred, or read as undecodable wherever */
	size_t head = (size_t)(f.payload - fr); /* through the field block */
	if (d) {
		uint32_t key = desc_key(d, dlen);
		if (!rl_find(rl, d, dlen, key))
			rl_add(rl, d, dlen, key, at);
		return 0;
	}
	uint64_t to = 0; /* no frame at 0: a reader says "no descriptor" */
	d = find(arg, ref, &dlen, &why);
	if (d) {
		uint32_t key = desc_key(d, dlen);
		struct le__rl_ent *e = rl_find(rl, d, dlen, key);
		if (!e) {
			/* The first of its call site here: it carries it. */
			size_t len = head + 4 + dlen + alen;
			memcpy(out, fr, head);
			le__put32(out + head, LE_DEFER_INLINE);
			memcpy(out + head + 4, d, dlen);
			memcpy(out + head + 4 + dlen, args, alen);
			le__put32(out, (uint32_t)len - 4);
			if (fields & LE_FIELD_CRC)
				le__frame_seal(&out, 1);
			rl_add(rl, d, dlen, key, at);
			return len;
		}
		to = e->at;
	}
	if (to == ref)
		return 0;
	memcpy(out, fr, n);
	le__put32(out + head, (uint32_t)to);
	if (fields & LE_FIELD_CRC)
		le__frame_seal(&out, 1);
	return n;
}
