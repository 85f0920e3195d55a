/*
 * kinds.c -- the table of line outputs (kinds.h).
 */
#include "sink/kinds.h"

#include "sink/stream.h"
#include "sink/syslog.h"

const le__linekind *const le__linekinds[LE_LINEKINDS] = {
	&le__stream_kind,
	&le__syslog_kind,
};
