/*
 * rlreg.h -- an engine's registry of the _every macros' call sites and
 * its counts of what they suppressed: a member of le_engine (shard.h),
 * worked on by ratelimit.c alone.
 */
#ifndef LE_RLREG_H
#define LE_RLREG_H

#include <stdatomic.h>
#include <stdint.h>

#include "logengine.h"

/* Sites an engine resets and summarises at le_close, and whose ended
 * windows its sweep tells (ratelimit.c).  One past them still works; its
 * count waits for its next record that passes, on this engine or on the
 * next one to use the site. */
#define LE_RL_SITES 1024

typedef struct le__rlreg {
	uint64_t gen;                     /* [const] this engine's number,
	                                     unique in the process */
	_Atomic uint32_t n;               /* sites registered (may pass
	                                     LE_RL_SITES: those are not) */
	le__rsite *_Atomic tab[LE_RL_SITES];
	/* le_every_clock value from which the sweep has work: the earliest
	 * end, plus LE_RL_SETTLE_NS, of a window with suppressed calls it
	 * has not told (UINT64_MAX: none).  Lowered by the slow path of
	 * the window's first suppressed calls, taken and set again by the
	 * sweep (shard 0's writer). */
	_Atomic uint64_t due;
	_Atomic uint64_t suppressed;      /* le_stats.suppressed */
	_Atomic uint64_t summaries;       /* le_stats.suppressed_summaries */
} le__rlreg;

#endif
