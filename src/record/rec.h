/*
 * rec.h -- one record of a batch as the writer hands it to every sink:
 * its payload where it lies (a ring slot, the writer's marker text) and
 * what the writer learned of it (sequence, time, a deferred record's call
 * site).  A record's bytes are laid out in format.h; this is the view.
 */
#ifndef LE_REC_H
#define LE_REC_H

#include <stddef.h>
#include <stdint.h>

/* One record of a batch, as every sink sees it. */
typedef struct le__rec {
	const unsigned char *payload; /* in the ring slot, or the writer's
	                                 marker text: valid until release */
	uint32_t len;
	uint8_t level;                /* LE_TRACE..LE_FATAL */
	uint8_t flags;                /* LE_REC_* */
	uint64_t seq;                 /* the shard's sequence number */
	uint64_t ts;                  /* ns since the epoch, UTC; never
	                                 before the shard's previous record */
	/* LE_REC_DEFERRED (defer.h): the payload is [field block] u32 site
	 * number, arguments; the writer found the site's descriptor.
	 * Unset (stale) in a record without the flag: never read there. */
	const unsigned char *desc;    /* in the shard's SITES mapping */
	uint32_t dlen;                /* its bytes */
	uint32_t site;                /* the site number */
	uint32_t dfb;                 /* payload bytes before the number */
} le__rec;

/* A deferred record as a plain one for an output of lines (stream,
 * syslog): *out is r with the field block and then the text in buf (cap
 * bytes, at least 2: the text is cut to cap - 1 - the block, and flagged
 * LE_REC_TRUNCATED).  A record that is not deferred: *out = *r.
 * (defer.c) */
void le__rec_plain(const le__rec *r, le__rec *out, unsigned char *buf,
                   size_t cap);

#endif
