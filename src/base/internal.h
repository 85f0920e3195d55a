/*
 * internal.h -- declarations shared between the library's files that are
 * not part of the public API (prefix le__).
 */
#ifndef LE_INTERNAL_H
#define LE_INTERNAL_H

#include "logengine.h"

/* Set / clear the calling thread's le_errmsg() text. */
void le__seterr(const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 1, 2)))
#endif
	;
void le__clearerr(void);

#endif
