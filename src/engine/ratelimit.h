/*
 * ratelimit.h -- the _every macros' call sites (ratelimit.c): the engine's
 * registry of them (rlreg.h), the coarse clock, and their summaries at
 * le_close.
 */
#ifndef LE_RATELIMIT_H
#define LE_RATELIMIT_H

#include <stdint.h>

#include "engine/rlreg.h"

/* Number the registry (le_open). */
void le__rl_init(le__rlreg *r);
/* A writer's pass at CLOCK_MONOTONIC `mono`: move le_every_clock on
 * (stored at most once a millisecond, so the line the suppressed calls
 * read stays in their caches). */
void le__rl_tick(uint64_t mono);
/* Shard 0's writer, after each tick: write the summary of every
 * registered site whose window ended (LE_RL_SETTLE_NS ago) with calls
 * not told, and close the window.  One load when there is none. */
void le__rl_sweep(le_engine *e);
/* Shard 0's writer, before a sleep: ns until the sweep has work
 * (UINT64_MAX: none). */
uint64_t le__rl_wait(le_engine *e, uint64_t now);
/* le_close, while records are still accepted: write each registered
 * site's pending summary and close its window, so that the next engine
 * to use the site starts it afresh. */
void le__rl_close(le_engine *e);

#endif
