/*
 * hist.h -- latency histograms of 40 log2 buckets, kept by their owner's
 * thread in its own memory and copied into the live counters page
 * (statpage.c, docs/INTERFACES.md) when it publishes.
 */
#ifndef LE_HIST_H
#define LE_HIST_H

#include <stdint.h>

#include "logengine.h"

typedef struct le__hist {
	uint64_t count, sum;         /* values, and their sum in ns */
	uint64_t b[LE_LIVE_BUCKETS]; /* bucket i: [2^i, 2^(i+1)) ns */
} le__hist;

/* Bucket of a duration in ns: floor(log2), 0 and 1 in bucket 0, the
 * last bucket also every value above. */
static inline unsigned le__hist_bucket(uint64_t ns)
{
	unsigned b = ns > 1 ? 63u - (unsigned)__builtin_clzll(ns) : 0;
	return b < LE_LIVE_BUCKETS ? b : LE_LIVE_BUCKETS - 1;
}

static inline void le__hist_add(le__hist *h, uint64_t ns)
{
	h->count++;
	h->sum += ns;
	h->b[le__hist_bucket(ns)]++;
}

#endif
