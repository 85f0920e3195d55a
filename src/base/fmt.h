/*
 * fmt.h -- printf formatting for le_logf: glibc's vsnprintf output, byte
 * for byte, at a fraction of its cost, for the conversions logs use; the
 * rest is left to vsnprintf (src/base/fmt.c says what is done and how).
 */
#ifndef LE_FMT_H
#define LE_FMT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* le__vfmt's answer for a format it leaves to vsnprintf. */
#define LE__FMT_UNHANDLED (-2)

/*
 * Format as glibc's vsnprintf(buf, cap, fmt, ap) does, byte for byte:
 * store at most cap bytes, the last of them a NUL (nothing when cap is 0;
 * buf may then be NULL).  No malloc, no system call; thread-safe.
 * @return the length of the whole output (not counting the NUL), as
 *         vsnprintf does, or LE__FMT_UNHANDLED when fmt holds something
 *         this formatter leaves to vsnprintf (the list is at the top of
 *         fmt.c).  Then buf holds part of the output and ap may have been
 *         consumed: redo the call with vsnprintf on a va_copy taken before
 *         this one (le__vsnprintf does).
 */
int le__vfmt(char *buf, size_t cap, const char *fmt, va_list ap);

/* vsnprintf, through le__vfmt when it can: same bytes, same @return
 * (negative only when vsnprintf fails); ap is left as vsnprintf leaves
 * it. */
int le__vsnprintf(char *buf, size_t cap, const char *fmt, va_list ap);

/* Decimal digits of v (1 for 0). */
int le__ndec(uint64_t v);

/* Exactly n digits of v < 10^n, leading zeros included, ending at end
 * (the sink's timestamps and numbers use it too). */
void le__dec_fixed(uint64_t v, char *end, int n);

#endif
