/*
 * ratelimit.h -- the _every macros' call sites (ratelimit.c): the engine's
 * registry of them, its coarse clock, and their summaries at le_close.
 */
#ifndef LE_RATELIMIT_H
#define LE_RATELIMIT_H

#include <stdatomic.h>
#include <stdint.h>

#include "logengine.h"

/* Sites an engine resets and summarises at le_close; one past them
 * still works, and its last count waits for its next record. */
#define LE_RL_SITES 1024

typedef struct le__rlreg {
	uint64_t gen;                     /* [const] this engine's number,
	                                     unique in the process */
	_Atomic uint32_t n;               /* sites registered (may pass
	                                     LE_RL_SITES: those are not) */
	le__rsite *_Atomic tab[LE_RL_SITES];
	_Atomic uint64_t suppressed;      /* le_stats.suppressed */
	_Atomic uint64_t summaries;       /* le_stats.suppressed_summaries */
} le__rlreg;

/* Number the registry (le_open). */
void le__rl_init(le__rlreg *r);
/* A writer's pass at CLOCK_MONOTONIC `mono`: move le_every_clock on
 * (stored at most once a millisecond, so the line the suppressed calls
 * read stays in their caches). */
void le__rl_tick(uint64_t mono);
/* le_close, while records are still accepted: write each registered
 * site's pending summary and close its window, so that the next engine
 * to use the site starts it afresh. */
void le__rl_close(le_engine *e);

#endif
