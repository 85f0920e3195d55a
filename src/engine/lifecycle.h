/*
 * lifecycle.h -- the engines of this process as fork and a crash see
 * them (lifecycle.c).
 */
#ifndef LE_LIFECYCLE_H
#define LE_LIFECYCLE_H

#include "logengine.h"

/* Count e among the live engines (fork handlers, the crash handler).
 * @return 0 or an error. */
int le__register(le_engine *e);
void le__unregister(le_engine *e);
/* Install the crash handler once per process.  @return 0 or an error. */
int le__crash_install(void);

#endif
