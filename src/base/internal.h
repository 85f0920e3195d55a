/*
 * internal.h -- declarations shared between the library's files that are
 * not part of the public API (prefix le__).
 */
#ifndef LE_INTERNAL_H
#define LE_INTERNAL_H

#include <string.h>

#include "logengine.h"

/* Set / clear the calling thread's le_errmsg() text. */
void le__seterr(const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 1, 2)))
#endif
	;
void le__clearerr(void);

/* A public struct that grows (abi.c) handed out in the caller's size:
 * copy `have` bytes of ours into its `size`, and zero the rest of its
 * struct when it is larger. */
static inline void le__copy_sized(void *dst, size_t size, const void *src,
                                  size_t have)
{
	memcpy(dst, src, size < have ? size : have);
	if (size > have)
		memset((char *)dst + have, 0, size - have);
}

#endif
