/*
 * kinds.h -- the table of line outputs (linesink.h) an engine may open:
 * the engine walks it, so that it names none of them.
 */
#ifndef LE_KINDS_H
#define LE_KINDS_H

#include "sink/linesink.h"

#define LE_LINEKINDS 2

/* sink_stream.c's and sink_syslog.c's kinds, in that order. */
extern const le__linekind *const le__linekinds[LE_LINEKINDS];

#endif
