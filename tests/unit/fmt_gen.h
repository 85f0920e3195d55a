/*
 * fmt_gen.h -- printf cases for checking le__vfmt (src/base/fmt.c) against
 * glibc's snprintf, drawn from a stream of numbers: test_fmt.c draws from
 * a seeded generator, tests/fuzz/fuzz_fmt.c from the fuzzer's input.
 *
 * A case is a format and its arguments, typed as the format reads them:
 *   one     literal text, one conversion (random flags, width, precision,
 *           length, '*' arguments), literal text;
 *   many    six conversions in a row with literal text between, reading an
 *           int, a double, a string, a long long, an unsigned long and a
 *           pointer, in that order (no '*');
 *   junk    a conversion with a byte le__vfmt must never accept (' I $ q L
 *           Z, or the format ending in '%'): only le__vfmt runs, and must
 *           answer LE__FMT_UNHANDLED;
 *   raw     up to three conversions of random bytes of printf's alphabet,
 *           whatever they mean, passed nine pointers to zeros and six
 *           doubles: when le__vfmt accepts one, glibc must read it the
 *           same way (x86-64 and arm64 read an int from a pointer's slot
 *           alike, so both sides see the same values); when it declines,
 *           glibc is not asked (the bytes may say %n or %1$).
 * Values lean to where printf goes wrong: integer limits, doubles that are
 * exact ties at the precision asked, their neighbours one ulp away, powers
 * of two, subnormals, inf and nan, and random bit patterns.
 *
 * fg_check() formats a case with le__vfmt and with snprintf into buffers
 * full of a marker byte, with the capacity given, and compares the return
 * values and every byte of the buffers (so a byte written past the NUL or
 * past cap is a difference too).  When le__vfmt declines, le__vsnprintf
 * must then match snprintf.
 */
#ifndef LE_FMT_GEN_H
#define LE_FMT_GEN_H

#include <float.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "base/fmt.h"

/* The length modifiers j z t read long-sized types: those here are the
 * very types the arguments are passed as. */
_Static_assert(sizeof(long) == 8 && sizeof(size_t) == sizeof(long) &&
               sizeof(ptrdiff_t) == sizeof(long) &&
               sizeof(intmax_t) == sizeof(long), "an LP64 C library");

#define FG_BUF 1024 /* output buffers: every case fits but '*' widths */

/* Where the numbers come from: a seeded splitmix64, or bytes (zeros once
 * they run out, so every draw has an answer). */
struct fg_src {
	uint64_t state;
	const uint8_t *p; /* NULL: use state */
	size_t n;
};

static uint64_t fg_u64(struct fg_src *r)
{
	uint64_t v = 0;
	if (!r->p) {
		uint64_t z = (r->state += 0x9e3779b97f4a7c15u);
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
		return z ^ (z >> 31);
	}
	for (int i = 0; i < 8 && r->n; i++, r->n--)
		v = v << 8 | *r->p++;
	return v;
}

/* A number below n (n <= 256 takes one byte of a byte source). */
static unsigned fg_below(struct fg_src *r, unsigned n)
{
	if (r->p && n <= 256) {
		unsigned b = r->n ? *r->p : 0;
		if (r->n)
			r->p++, r->n--;
		return b % n;
	}
	return (unsigned)(fg_u64(r) % n);
}

enum { FG_INT, FG_UINT, FG_LONG, FG_ULONG, FG_LLONG, FG_ULLONG, FG_DOUBLE,
       FG_STR, FG_PTR };

struct fg_arg {
	int cls;     /* FG_*: the type passed */
	int nstar;   /* '*' arguments (ints) before it */
	int star[2];
	long long i; /* the value, by cls */
	unsigned long long u;
	double d;
	const char *s;
	void *ptr;
	int prec;    /* precision asked (-1 none), for the test's checks */
	char conv;
};

struct fmt_case {
	char fmt[512];
	int kind;             /* FG_ONE, FG_MANY, FG_JUNK, FG_RAW */
	struct fg_arg arg[6]; /* FG_ONE and FG_JUNK: arg[0]; FG_RAW: .d */
};

enum { FG_ONE, FG_MANY, FG_JUNK, FG_RAW };

static char fg_zeros[64]; /* what FG_RAW's pointers point to */

/* Conversions, their length modifiers and the type they read; the last
 * ones are left to vsnprintf by le__vfmt. */
static const struct fg_conv {
	char conv;
	const char *len;
	int cls;
} fg_convs[] = {
	{'d', "", FG_INT}, {'d', "hh", FG_INT}, {'d', "h", FG_INT},
	{'d', "l", FG_LONG}, {'d', "ll", FG_LLONG}, {'d', "j", FG_LONG},
	{'d', "z", FG_LONG}, {'d', "t", FG_LONG}, {'i', "", FG_INT},
	{'i', "hh", FG_INT}, {'i', "ll", FG_LLONG},
	{'u', "", FG_UINT}, {'u', "hh", FG_UINT}, {'u', "h", FG_UINT},
	{'u', "l", FG_ULONG}, {'u', "ll", FG_ULLONG}, {'u', "z", FG_ULONG},
	{'u', "j", FG_ULONG}, {'u', "t", FG_ULONG},
	{'o', "", FG_UINT}, {'o', "hh", FG_UINT}, {'o', "l", FG_ULONG},
	{'o', "ll", FG_ULLONG}, {'x', "", FG_UINT}, {'x', "h", FG_UINT},
	{'x', "l", FG_ULONG}, {'x', "ll", FG_ULLONG}, {'x', "z", FG_ULONG},
	{'X', "", FG_UINT}, {'X', "hh", FG_UINT}, {'X', "ll", FG_ULLONG},
	{'c', "", FG_INT}, {'s', "", FG_STR}, {'p', "", FG_PTR},
	{'f', "", FG_DOUBLE}, {'f', "", FG_DOUBLE}, {'f', "", FG_DOUBLE},
	{'f', "l", FG_DOUBLE}, {'F', "", FG_DOUBLE},
	{'e', "", FG_DOUBLE}, {'g', "", FG_DOUBLE}, {'G', "", FG_DOUBLE},
	{'a', "", FG_DOUBLE}, {'E', "", FG_DOUBLE},
};
#define FG_NCONV (sizeof fg_convs / sizeof fg_convs[0])

static const char *const fg_strs[] = {
	NULL, "", "a", "hello", "hello, world", "tab\there", "caf\xc3\xa9",
	"%d %s %f (not a format here)",
	"a string longer than most widths asked for, "
	"to be cut by precisions and caps of every size: "
	"0123456789abcdefghijklmnopqrstuvwxyz0123456789"};

static long long fg_int(struct fg_src *r)
{
	static const long long edge[] = {
		0, 1, -1, 7, 8, 9, 10, 99, 100, 127, 128, 255, 256, -128, -129,
		32767, 32768, 65535, 65536, INT_MAX, INT_MIN, UINT_MAX,
		(long long)UINT_MAX + 1, LLONG_MAX, LLONG_MIN, 999999999,
		1000000000, 9999999999999999LL, 10000000000000000LL};
	uint64_t b = fg_u64(r);
	switch (fg_below(r, 4)) {
	case 0: return edge[b % (sizeof edge / sizeof edge[0])];
	case 1: return (long long)(b % 2001) - 1000;
	case 2: return (long long)(b >> fg_below(r, 64)); /* any length */
	}
	return (long long)b;
}

static double fg_from_bits(uint64_t b)
{
	double d;
	memcpy(&d, &b, sizeof d);
	return d;
}

static uint64_t fg_bits(double d)
{
	uint64_t b;
	memcpy(&b, &d, sizeof b);
	return b;
}

static double fg_double(struct fg_src *r)
{
	static const double edge[] = {
		0.0, -0.0, 0.5, 1.5, 2.5, -2.5, 0.125, 0.375, 9.5, 0.05, 0.15,
		0.1, 1.0 / 3, 2.0 / 3, 1e15 + 0.5, 1e16, 123456.789, 1e22, 1e23,
		9007199254740992.0, 9223372036854775808.0, 18446744073709551616.0,
		18446744073709549568.0, 1.7976931348623157e308,
		2.2250738585072014e-308, 4.9406564584124654e-324, 1e-300, 1e-20,
		0x1p-71, 0x1p-72, 0.000244140625, 1e100};
	uint64_t b = fg_u64(r);
	double x;
	switch (fg_below(r, 9)) {
	case 0: /* any bit pattern: subnormals, inf, nan included */
		return fg_from_bits(b);
	case 1: /* decimal-ish, as programs compute them */
		x = (double)((long long)(b % 2000000001) - 1000000000);
		for (unsigned k = fg_below(r, 12); k; k--)
			x /= 10;
		return x;
	case 2: /* odd / 2^j: a tie at precision j - 1 */
		return (double)(2 * (b % 1000000) + 1) /
		       (double)(UINT64_C(1) << (1 + fg_below(r, 40)));
	case 3: /* a tie's neighbour */
		x = (double)(2 * (b % 100000) + 1) /
		    (double)(UINT64_C(1) << (1 + fg_below(r, 30)));
		return fg_from_bits(fg_bits(x) + (b >> 63 ? 1 : -1));
	case 4: /* a power of two, or one ulp below */
		x = fg_from_bits((uint64_t)(1 + fg_below(r, 2046)) << 52);
		return b & 1 ? fg_from_bits(fg_bits(x) - 1) : x;
	case 5: /* an integer */
		return (double)((long long)b >> fg_below(r, 64));
	case 6:
		return fg_from_bits(fg_bits(edge[b % (sizeof edge /
		                                      sizeof edge[0])]) ^
		                    (b >> 63 << 63));
	case 7: /* inf and nans, signed */
		return fg_from_bits((b & 0x800fffffffffffffu) |
		                    0x7ff0000000000000u);
	}
	return (double)(b % 100000) / 100; /* cents */
}

/* Literal text: letters, spaces, punctuation, "%%", UTF-8. */
static char *fg_text(struct fg_src *r, char *f)
{
	static const char *const bits[] = {"a", "Z", " ", ", ", "=", ":",
	                                   "%%", "\xc3\xa9", "\t", "0"};
	for (unsigned n = fg_below(r, 6); n; n--) {
		const char *s = bits[fg_below(r, 10)];
		memcpy(f, s, strlen(s));
		f += strlen(s);
	}
	return f;
}

static char *fg_num(char *f, int v)
{
	return f + sprintf(f, "%d", v);
}

/*
 * One conversion of fg_convs[ci] at f, its value and '*' arguments in a;
 * star: '*' allowed.  @return the end of what it wrote.
 */
static char *fg_spec(struct fg_src *r, char *f, unsigned ci, int star,
                     struct fg_arg *a)
{
	const struct fg_conv *cv = &fg_convs[ci];
	memset(a, 0, sizeof *a);
	a->cls = cv->cls;
	a->conv = cv->conv;
	a->prec = -1;
	*f++ = '%';
	/* zero choices make the bare conversion */
	for (unsigned n = fg_below(r, 4) == 3 ? 1 + fg_below(r, 4) : 0; n; n--)
		*f++ = "-+ #0"[fg_below(r, 5)];
	switch (fg_below(r, 8)) { /* width */
	case 1: case 2: f = fg_num(f, (int)fg_below(r, 30) + 1); break;
	case 3: f = fg_num(f, 100 + (int)fg_below(r, 300)); break;
	case 4:
		if (!star)
			break;
		*f++ = '*';
		/* past 2^20 le__vfmt declines (glibc is slow on INT_MIN) */
		a->star[a->nstar++] = fg_below(r, 1024) ? (int)fg_below(r, 61) - 30
		                    : fg_below(r, 2) ? -(1 << 20) - 1 : 1 << 20;
		break;
	}
	switch (fg_below(r, 8)) { /* precision */
	case 1: case 2: case 3:
		a->prec = (int)fg_below(r, 21);
		f = fg_num(stpcpy(f, "."), a->prec);
		break;
	case 4:
		a->prec = 0;
		*f++ = '.';
		break;
	case 5:
		a->prec = 21 + (int)fg_below(r, 100);
		f = fg_num(stpcpy(f, "."), a->prec);
		break;
	case 6:
		if (!star)
			break;
		f = stpcpy(f, ".*");
		a->star[a->nstar] = (int)fg_below(r, 31) - 5;
		a->prec = a->star[a->nstar] < 0 ? -1 : a->star[a->nstar];
		a->nstar++;
		break;
	}
	f = stpcpy(f, cv->len);
	*f++ = cv->conv;
	switch (a->cls) {
	case FG_INT: case FG_LONG: case FG_LLONG: a->i = fg_int(r); break;
	case FG_UINT: case FG_ULONG: case FG_ULLONG:
		a->u = (unsigned long long)fg_int(r);
		break;
	case FG_DOUBLE: a->d = fg_double(r); break;
	case FG_STR:
		a->s = fg_strs[fg_below(r, sizeof fg_strs / sizeof fg_strs[0])];
		break;
	case FG_PTR:
		a->ptr = fg_below(r, 4) ? (void *)(uintptr_t)fg_u64(r) : NULL;
		break;
	}
	return f;
}

/* A conversion of class cls, chosen among fg_convs. */
static unsigned fg_pick(struct fg_src *r, int cls)
{
	unsigned n = 0, k;
	for (unsigned i = 0; i < FG_NCONV; i++)
		n += fg_convs[i].cls == cls;
	k = fg_below(r, n);
	for (unsigned i = 0;; i++)
		if (fg_convs[i].cls == cls && k-- == 0)
			return i;
}

static void fg_case(struct fg_src *r, struct fmt_case *c)
{
	static const int many[6] = {FG_INT, FG_DOUBLE, FG_STR, FG_LLONG,
	                            FG_ULONG, FG_PTR};
	char *f = c->fmt;

	switch (fg_below(r, 16)) {
	case 0: case 1: c->kind = FG_MANY; break;
	case 2: c->kind = FG_JUNK; break;
	case 3: case 4: c->kind = FG_RAW; break;
	default: c->kind = FG_ONE;
	}
	f = fg_text(r, f);
	if (c->kind == FG_RAW) {
		for (int i = 0; i < 6; i++)
			c->arg[i].d = fg_double(r);
		for (unsigned n = 1 + fg_below(r, 3); n; n--) {
			*f++ = '%';
			for (unsigned k = fg_below(r, 7); k; k--)
				*f++ = "-+ #0123456789*.hljztLqZ'I$"[fg_below(r, 27)];
			*f++ = "diuoxXcspfFeEgGaAnm%k"[fg_below(r, 21)];
			f = fg_text(r, f);
		}
	} else if (c->kind == FG_MANY) {
		for (int i = 0; i < 6; i++) {
			f = fg_spec(r, f, fg_pick(r, many[i]), 0, &c->arg[i]);
			f = fg_text(r, f);
		}
	} else {
		char *spec = f;
		f = fg_spec(r, f, fg_below(r, FG_NCONV), 1, &c->arg[0]);
		if (c->kind == FG_JUNK) { /* a byte in the spec, or a '%' */
			/* after the '%', before the conversion */
			size_t at = 1 + fg_below(r, (unsigned)(f - spec) - 1);
			if (fg_below(r, 8) == 0) {
				*f++ = '%';
			} else {
				memmove(spec + at + 1, spec + at,
				        (size_t)(f - spec) - at);
				spec[at] = "'I$qLZ"[fg_below(r, 6)];
				f++;
			}
			*f = '\0';
			return;
		}
		f = fg_text(r, f);
	}
	*f = '\0';
}

/* le__vfmt, le__vsnprintf or vsnprintf */
typedef int fg_vfn(char *, size_t, const char *, va_list);

static int fg_run(fg_vfn *vfn, char *buf, size_t cap, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vfn(buf, cap, fmt, ap);
	va_end(ap);
	return n;
}

/* Call vfn on c's format and arguments, passed as their own types. */
static int fg_call(fg_vfn *vfn, char *buf, size_t cap,
                   const struct fmt_case *c)
{
	const struct fg_arg *a = c->arg;
	const char *f = c->fmt;
#define FG_CALL(v)                                                            \
	(a->nstar == 0 ? fg_run(vfn, buf, cap, f, v)                          \
	 : a->nstar == 1 ? fg_run(vfn, buf, cap, f, a->star[0], v)            \
	                 : fg_run(vfn, buf, cap, f, a->star[0], a->star[1], v))
	if (c->kind == FG_MANY)
		return fg_run(vfn, buf, cap, f, (int)a[0].i, a[1].d, a[2].s,
		              a[3].i, (unsigned long)a[4].u, a[5].ptr);
	if (c->kind == FG_RAW) {
		char *z = fg_zeros;
		memset(fg_zeros, 0, sizeof fg_zeros);
		return fg_run(vfn, buf, cap, f, z, z, z, z, z, z, z, z, z,
		              a[0].d, a[1].d, a[2].d, a[3].d, a[4].d, a[5].d);
	}
	switch (a->cls) {
	case FG_INT: return FG_CALL((int)a->i);
	case FG_UINT: return FG_CALL((unsigned)a->u);
	case FG_LONG: return FG_CALL((long)a->i);
	case FG_ULONG: return FG_CALL((unsigned long)a->u);
	case FG_LLONG: return FG_CALL(a->i);
	case FG_ULLONG: return FG_CALL(a->u);
	case FG_DOUBLE: return FG_CALL(a->d);
	case FG_STR: return FG_CALL(a->s);
	}
	return FG_CALL(a->ptr);
#undef FG_CALL
}

/*
 * Format c with le__vfmt and snprintf, capacity cap <= FG_BUF.
 * @return 1: le__vfmt did it, identically; 0: it declined (and
 *         le__vsnprintf matched snprintf); -1: a difference, described
 *         in why (why_cap bytes).
 */
static int fg_check(const struct fmt_case *c, size_t cap, char *why,
                    size_t why_cap)
{
	static char a[FG_BUF], b[FG_BUF];
	memset(a, 0x5a, sizeof a);
	memset(b, 0x5a, sizeof b);
	int na = fg_call(le__vfmt, a, cap, c);
	if (c->kind == FG_RAW && na == LE__FMT_UNHANDLED)
		return 0;
	if (c->kind == FG_JUNK) {
		if (na == LE__FMT_UNHANDLED)
			return 0;
		snprintf(why, why_cap, "junk format \"%s\" accepted: %d",
		         c->fmt, na);
		return -1;
	}
	int declined = na == LE__FMT_UNHANDLED;
	if (declined) { /* then the wrapper must do what snprintf does */
		memset(a, 0x5a, sizeof a);
		na = fg_call(le__vsnprintf, a, cap, c);
	}
	int nb = fg_call(vsnprintf, b, cap, c);
	if (na == nb && memcmp(a, b, sizeof a) == 0)
		return !declined;
	size_t at = 0;
	while (at < sizeof a && a[at] == b[at])
		at++;
	snprintf(why, why_cap, "\"%s\" cap %zu%s: returns %d vs glibc %d; "
	         "first difference at byte %zu: \"%.*s\" vs \"%.*s\"", c->fmt,
	         cap, declined ? " (after declining)" : "", na, nb, at,
	         (int)(cap < 200 ? cap : 200), a, (int)(cap < 200 ? cap : 200),
	         b);
	return -1;
}

#endif
