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

/*
 * One conversion parsed once and formatted many times from values, as
 * le__vfmt formats it (the deferred records' readers: the format is known
 * before the values, which come from an argument block, not a va_list).
 * Fields are le__vfmt's: flags F_*, width, prec (-1: none), the length
 * modifier, the conversion letter; a '*' leaves LE__FSPEC_STAR.
 */
#define LE__FSPEC_STAR (-2)
typedef struct le__fspec {
	unsigned flags;
	int width;
	int prec;
	int len;
	char conv;
} le__fspec;

/* A conversion's value: an integer as its argument's type passes it (an
 * int-sized one in the low 32 bits, the rest zero), a pointer's bits, a
 * double, or a string (NULL allowed). */
typedef union le__fval {
	uint64_t u;
	double d;
	const char *s;
} le__fval;

/* Parse the conversion at f, just past its '%' (read up to its letter).
 * @return the byte after it, or NULL when le__vfmt leaves it to
 * vsnprintf (then so must the caller). */
const char *le__fspec_parse(const char *f, le__fspec *sp);

/* Resolve sp's '*' width and precision with w and p (read from the
 * arguments in that order; each used only where sp has a star).
 * @return 0, or -1 where le__vfmt leaves the call to vsnprintf. */
int le__fspec_star(le__fspec *sp, int w, int p);

/* v formatted by sp (its stars resolved) into buf as le__vfmt(buf, cap,
 * "%<sp>", v) would.  @return its whole length, or LE__FMT_UNHANDLED
 * (a %f outside le__vfmt's cases: locale, rounding mode). */
int le__fspec_put(char *buf, size_t cap, const le__fspec *sp, le__fval v);

/* A finite x as le__vfmt(w, cap, "%.<prec>f", x) prints it, no flag nor
 * width, at w (room for LE__FMT_F_MAX bytes; no NUL), when it is the usual
 * case: |x| < 2^64 and not below 2^-11 (0 is), prec <= 19, the C radix
 * point and rounding to nearest.  @return its length, or -1 for the other
 * cases (le__fspec_put makes them). */
#define LE__FMT_F_MAX 41 /* '-', 20 digits, '.', 19 digits */
int le__fmt_f(char *w, double x, int prec);

/* Decimal digits of v (1 for 0). */
int le__ndec(uint64_t v);

/* Exactly n digits of v < 10^n, leading zeros included, ending at end
 * (the sink's timestamps and numbers use it too). */
void le__dec_fixed(uint64_t v, char *end, int n);

#endif
