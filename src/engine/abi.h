/*
 * abi.h -- the public structs that grow (le_config, le_stats) between the
 * sizes a program was compiled with and the library's own: abi.c takes a
 * caller's le_config in (le_open), and hands le_stats out, in the
 * caller's size.  engine.c does the work on full-size structs.
 */
#ifndef LE_ABI_H
#define LE_ABI_H

#include "logengine.h"

/* engine.c, on full-size structs: le_open, le_stats_get and
 * le_close_stats (and config.c: the defaults, config.h).  abi.c calls
 * these (engine.c never calls abi.c: files call down, not back up). */
int le__engine_open(le_engine **out, const le_config *cfg);
int le__stats_get(le_engine *e, le_stats *o);
int le__close_stats(le_engine *e, le_stats *final);

#endif
