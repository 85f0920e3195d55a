/*
 * engine.h -- engine.c's work on full-size public structs: le_open,
 * le_stats_get and le_close_stats.  abi.c takes a caller's le_config in
 * and hands le_stats out in the caller's size, and calls these; engine.c
 * never calls abi.c (files call down, not back up).
 */
#ifndef LE_ENGINE_H
#define LE_ENGINE_H

#include "logengine.h"

int le__engine_open(le_engine **out, const le_config *cfg);
int le__stats_get(le_engine *e, le_stats *o);
int le__close_stats(le_engine *e, le_stats *final);

#endif
