/*
 * dflt.h -- the default engine (le_set_default): where a NULL engine or
 * logger handed to a logging call goes.
 */
#ifndef LE_ENGINE_DFLT_H
#define LE_ENGINE_DFLT_H

#include "logengine.h"

/* e, or the default engine when e is NULL (NULL when there is none). */
le_engine *le__engine_or_default(le_engine *e);

/* h, or the default engine's head when h is NULL; NULL when h is NULL
 * and there is no default engine (or h is the stand-in head
 * le_default_head returns then). */
struct le__head *le__head_or_default(struct le__head *h);

/* le_close of e: e is no longer the default engine (if it was). */
void le__default_forget(le_engine *e);

#endif
