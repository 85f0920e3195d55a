/*
 * fmt.c -- le__vfmt: le_logf's printf formatting, byte-identical to
 * glibc's vsnprintf for the conversions logs use, at a fraction of its
 * cost.  glibc spends a short line's time in general machinery (a FILE
 * per snprintf, locale look-ups, and for %f the multi-precision
 * __printf_fp); here each conversion is a few integer operations straight
 * into the caller's buffer, with no malloc and no system call.
 *
 * Done here:
 *   flags        - + space # 0
 *   width        digits, or * (a negative * is the - flag)
 *   precision    .digits, or .* (a negative .* is no precision)
 *   length       hh h l ll j z t on d i u o x X; l on f F
 *   conversions  d i u o x X c s p f F, and %%
 * Left to vsnprintf (le__vfmt returns LE__FMT_UNHANDLED): e E g G a A n m,
 * %lc %ls, long double (%Lf, and glibc's %llf), the ' and I flags,
 * positional arguments (%1$d), odd forms (%5%, %hc), a width or precision
 * above FIELD_MAX, output above INT_MAX; %f in a rounding mode other than
 * to nearest (glibc honours fesetround), in a locale whose decimal point
 * is not '.', or of 0 < |x| < 2^-72 with a precision above 21; and all of
 * it on a C library other than glibc, whose bytes are what is promised.
 *
 * glibc's own answers, kept: a NULL %s prints "(null)" when the precision
 * allows 6 bytes, else nothing; a NULL %p prints "(nil)" whatever the
 * precision; %p is %#lx and takes the + and space flags; + and space are
 * ignored by u o x X; the 0 flag pads %c and %s with spaces, integers only
 * without a precision, and "inf", "-nan", "INF" never; %#o of 0 is "0"
 * even at precision 0, %#x of 0 is "0" and at precision 0 nothing.
 *
 * %f is exact, as glibc's is: the binary value, rounded half to even at
 * the last digit asked.  A finite double is m * 2^e, m < 2^53; p is the
 * precision:
 *   e >= 0        an integer: m << e in 64 bits up to e = 11 (fmt_fixed),
 *                 beyond that a 1024-bit number divided by 10^9 over and
 *                 over (big_dec);
 *   -63 <= e < 0  with k = -e, integer part m >> k, fraction frac / 2^k
 *   and p <= 19   (frac < 2^k): the decimals are q = frac * 10^p >> k,
 *                 and the remainder r below bit k rounds them: up when
 *                 r > 2^(k-1), to even when equal (frac_short).  frac *
 *                 10^p < 2^63 * 2^64: one 64x64->128 bit product;
 *   the rest      (|x| < 2^-11, or p > 19): a digit at a time, frac *= 10
 *                 and what passes bit k, exact while that fits 128 bits
 *                 (k <= 124), zeros once frac is 0 (frac_long).  Past
 *                 k = 124, |x| < 2^-72 and the first 21 decimals are 0.
 * No floating-point operation touches the value: nothing is rounded twice.
 *
 * le__fspec_parse and le__fspec_put split a conversion's work in two:
 * parsed once, then formatted from a value rather than a va_list, by the
 * same code (convert_val) le__vfmt's conversions go through; deferred
 * records' readers format each record's arguments that way.
 *
 * A conversion is parsed in full before it writes, so -2 never follows
 * output of the conversion it is about; but earlier conversions have
 * written and taken their arguments by then, which is why the caller
 * redoes the whole call (le__vsnprintf does).  Whether %f is reached
 * depends on the value, so no scan ahead could settle -2 for every call;
 * and one would cost the formats that are done here a second pass.
 *
 * One file, past 700 lines: every conversion writes through the same
 * static output helpers (put, fill, open_field), which the compiler
 * inlines into each; split, they would become calls on le_logf's path.
 */
#define _GNU_SOURCE
#include "base/fmt.h"

#include <stdio.h>

#if defined(__GLIBC__) && defined(__SIZEOF_INT128__)

#include <langinfo.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

typedef unsigned __int128 u128;

enum { F_LEFT = 1, F_PLUS = 2, F_SPACE = 4, F_ALT = 8, F_ZERO = 16 };
enum { LEN_NONE, LEN_HH, LEN_H, LEN_L, LEN_LL, LEN_J, LEN_Z, LEN_T };

#define STAR (-2)            /* width or precision from the argument list */
#define FIELD_MAX (1 << 20)  /* larger widths and precisions: vsnprintf */

/* A conversion (le__fspec, fmt.h): flags F_*; width 0..FIELD_MAX, or STAR
 * until its argument is read; prec -1 (none), 0..FIELD_MAX, or STAR; len
 * LEN_*; conv one of d i u o x X c s p f F. */
_Static_assert(STAR == LE__FSPEC_STAR, "one star");

/* Where output goes: the first lim bytes into buf, the rest counted. */
struct out {
	char *buf;
	size_t lim; /* cap - 1 (room for the NUL), or 0 */
	size_t len; /* bytes produced so far, stored or not */
};

static const char dig2[201] =
	"0001020304050607080910111213141516171819"
	"2021222324252627282930313233343536373839"
	"4041424344454647484950515253545556575859"
	"6061626364656667686970717273747576777879"
	"8081828384858687888990919293949596979899";

static const uint64_t pow10[20] = {
	1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000,
	1000000000, 10000000000u, 100000000000u, 1000000000000u,
	10000000000000u, 100000000000000u, 1000000000000000u,
	10000000000000000u, 100000000000000000u, 1000000000000000000u,
	10000000000000000000u};

static void put(struct out *o, const char *s, size_t n)
{
	if (n && o->len < o->lim) {
		size_t room = o->lim - o->len;
		memcpy(o->buf + o->len, s, n < room ? n : room);
	}
	o->len += n;
}

static void put1(struct out *o, char c)
{
	if (o->len < o->lim)
		o->buf[o->len] = c;
	o->len++;
}

static void fill(struct out *o, int c, size_t n)
{
	if (n && o->len < o->lim) {
		size_t room = o->lim - o->len;
		memset(o->buf + o->len, c, n < room ? n : room);
	}
	o->len += n;
}

/* Where the n bytes of a field's body are to be written: straight into
 * buf when they all fit, else into tmp, for done() to copy what fits. */
static char *at(struct out *o, size_t n, char *tmp)
{
	return o->len + n <= o->lim ? o->buf + o->len : tmp;
}

static void done(struct out *o, const char *d, size_t n, const char *tmp)
{
	if (d == tmp)
		put(o, tmp, n);
	else
		o->len += n;
}

/*
 * Start a field of pre (sign, 0x), zeros, and n bytes of body: write the
 * width's padding in front (spaces, or with zpad and the 0 flag zeros
 * after pre: glibc lets the 0 flag pad numbers only), then pre and the
 * zeros.  @return the spaces owed after the body (the - flag).
 */
static size_t open_field(struct out *o, const le__fspec *sp,
                         const char *pre, size_t plen, size_t zeros,
                         size_t n, int zpad)
{
	size_t w = plen + zeros + n;
	size_t pad = (size_t)sp->width > w ? (size_t)sp->width - w : 0;

	if (!(sp->flags & F_LEFT)) {
		if (zpad && (sp->flags & F_ZERO))
			zeros += pad;
		else
			fill(o, ' ', pad);
		pad = 0;
	}
	for (size_t i = 0; i < plen; i++)
		put1(o, pre[i]);
	fill(o, '0', zeros);
	return pad;
}

/* Decimal digits in v (1 for 0): log10 from the bit length, then one
 * comparison. */
int le__ndec(uint64_t v)
{
	int t = (64 - __builtin_clzll(v | 1)) * 1233 >> 12;
	return t + (t == 0 || v >= pow10[t]);
}

/* 2^57 / 10^k rounded up (k even, 0..8): v * it >> 25 is v / 10^k in 32.32
 * fixed point, a little above it (the + 1 below), so the integer part and
 * each "fraction times 100" are v's next digits exactly: for v < 10^(k+2),
 * checked for every such v (at most 10^9), the product below 2^64. */
static const uint64_t dec_magic[5] = {
	UINT64_C(144115188075855873), UINT64_C(1441151880758559),
	UINT64_C(14411518807586), UINT64_C(144115188076), UINT64_C(1441151881)};

/* Exactly n digits of v < 10^n, leading zeros included, ending at end;
 * the first 9 by one multiplication and then one per pair, no division. */
void le__dec_fixed(uint64_t v, char *end, int n)
{
	for (; n > 9; n -= 2, v /= 100)
		memcpy(end -= 2, dig2 + v % 100 * 2, 2);
	if (n <= 0)
		return;
	char *d = end - n;
	uint64_t y = (v * dec_magic[(n - 1) >> 1] >> 25) + 1;
	if (n & 1) {
		*d++ = (char)('0' + (y >> 32));
	} else {
		memcpy(d, dig2 + (y >> 32) * 2, 2);
		d += 2;
	}
	for (; d < end; d += 2) {
		y = (uint32_t)y * UINT64_C(100);
		memcpy(d, dig2 + (y >> 32) * 2, 2);
	}
}

/* Sign of a signed conversion into pre; @return its length. */
static size_t sign(char *pre, int neg, unsigned flags)
{
	pre[0] = neg ? '-' : flags & F_PLUS ? '+' : flags & F_SPACE ? ' ' : 0;
	return pre[0] != 0;
}

/* The sign sgn (0: none) and the digits of v, straight into buf: d i u
 * with no width and no precision, most integers in logs. */
static void put_dec(struct out *o, uint64_t v, char sgn)
{
	char tmp[21];
	int n = le__ndec(v);
	size_t len = (size_t)n + (sgn != 0);
	char *d = at(o, len, tmp);

	d[0] = sgn; /* a digit overwrites it when there is no sign */
	le__dec_fixed(v, d + len, n);
	done(o, d, len, tmp);
}

/* d i (magnitude v, sign neg), u o x X, and p of a non-NULL pointer. */
static void fmt_int(struct out *o, const le__fspec *sp, uint64_t v, int neg)
{
	char pre[3], tmp[26], c = sp->conv; /* pre, 22 octal digits, # 0 */
	int shift = c == 'o' ? 3 : c == 'x' || c == 'X' || c == 'p' ? 4 : 0;
	int bits = 64 - __builtin_clzll(v | 1);
	int n = shift ? (bits + shift - 1) / shift : le__ndec(v);
	size_t plen = 0, owed = 0;

	if (c == 'd' || c == 'i' || c == 'p')
		plen = sign(pre, neg, sp->flags);
	if (c == 'p' || (shift == 4 && (sp->flags & F_ALT) && v)) {
		pre[plen++] = '0';
		pre[plen++] = c == 'X' ? 'X' : 'x';
	}
	if (!v && !sp->prec) /* precision 0 prints 0 as nothing */
		n = 0;
	/* %#o starts with a 0, unless the precision's zeros supply one */
	int mark = c == 'o' && (sp->flags & F_ALT) &&
	           (v ? sp->prec <= n : n == 0);
	n += mark;
	size_t zeros = sp->prec > n ? (size_t)(sp->prec - n) : 0;
	if (sp->width || zeros) { /* else pre goes with the digits */
		owed = open_field(o, sp, pre, plen, zeros, (size_t)n,
		                  sp->prec < 0);
		plen = 0;
	}
	char *d = at(o, plen + (size_t)n, tmp);
	for (size_t i = 0; i < plen; i++)
		*d++ = pre[i];
	if (shift) {
		const char *digits = c == 'X' ? "0123456789ABCDEF"
		                              : "0123456789abcdef";
		for (char *e = d + n; e > d + mark; v >>= shift)
			*--e = digits[v & ((1u << shift) - 1)];
	} else {
		le__dec_fixed(v, d + n, n);
	}
	if (mark)
		d[0] = '0';
	done(o, d - plen, plen + (size_t)n, tmp);
	fill(o, ' ', owed);
}

/* Bytes of body: a string, a character, "(nil)". */
static void fmt_bytes(struct out *o, const le__fspec *sp, const char *s,
                      size_t n)
{
	size_t owed = open_field(o, sp, NULL, 0, 0, n, 0);
	put(o, s, n);
	fill(o, ' ', owed);
}

static void fmt_str(struct out *o, const le__fspec *sp, const char *s)
{
	if (!s) /* glibc: all of "(null)" or nothing */
		s = sp->prec < 0 || sp->prec >= 6 ? "(null)" : "";
	fmt_bytes(o, sp, s, sp->prec < 0 ? strlen(s)
	                                 : strnlen(s, (size_t)sp->prec));
}

/* Is the rounding mode to nearest?  glibc's %f rounds in the current
 * mode (fesetround), this file only to nearest.  On x86 glibc reads the
 * x87 control word (not MXCSR: _mm_setcsr alone does not change printf);
 * elsewhere float arithmetic tells: 1 + 3/4 ulp rounds up and 1 + 1/4 ulp
 * down only to nearest. */
static int rounds_to_nearest(void)
{
#if defined(__x86_64__) || defined(__i386__)
	unsigned short cw;
	__asm__ volatile("fnstcw %0" : "=m"(cw));
	return (cw & 0xc00) == 0;
#else
	volatile float one = 1.0f;
	float o = one, up = o + 0x1.8p-24f, down = o + 0x1p-25f;
	uint32_t u, d;
	memcpy(&u, &up, sizeof u);
	memcpy(&d, &down, sizeof d);
	return u == 0x3f800001 && d == 0x3f800000; /* 1 + ulp, 1 */
#endif
}

/* The digits of m * 2^e, m < 2^53, 12 <= e <= 971 (2^64 <= it <= DBL_MAX,
 * at most 309 digits), ending at end; @return their start. */
static char *big_dec(uint64_t m, int e, char *end)
{
	uint32_t w[34] = {0}; /* 32-bit limbs, least significant first */
	u128 v = (u128)m << (e % 32);
	int n = e / 32 + 3;

	w[e / 32] = (uint32_t)v;
	w[e / 32 + 1] = (uint32_t)(v >> 32);
	w[e / 32 + 2] = (uint32_t)(v >> 64);
	while (n) { /* divide by 10^9: the remainder is the next 9 digits */
		uint64_t r = 0;
		for (int i = n; i-- > 0;) {
			uint64_t cur = r << 32 | w[i];
			w[i] = (uint32_t)(cur / 1000000000);
			r = cur % 1000000000;
		}
		while (n && !w[n - 1])
			n--;
		int k = n ? 9 : le__ndec(r);
		le__dec_fixed(r, end, k);
		end -= k;
	}
	return end;
}

/* The first prec <= 19 decimals of frac / 2^k (frac < 2^k, 1 <= k <= 63),
 * rounded half to even, as a number; a carry out of them goes to *ip. */
static uint64_t frac_short(uint64_t frac, int k, int prec, uint64_t *ip)
{
	u128 p = (u128)frac * pow10[prec];
	uint64_t lo = (uint64_t)p, hi = (uint64_t)(p >> 64);
	uint64_t q = lo >> k | hi << (63 - k) << 1; /* p >> k */
	uint64_t r = lo & ((UINT64_C(1) << k) - 1), half = UINT64_C(1) << (k - 1);
	/* the last digit kept is q's, or at precision 0 *ip's */
	if ((r > half || (r == half && ((prec ? q : *ip) & 1))) &&
	    ++q == pow10[prec]) {
		q = 0;
		++*ip;
	}
	return q;
}

/* The same for any k and prec, a digit at a time while any fraction is
 * left.  @return how many digits were stored at d (the rest are zeros),
 * or -1 when frac * 10 could overflow 128 bits (k > 124) and the digits
 * are not all 0: above precision 21 (frac / 2^k < 2^53 / 2^125 = 2^-72,
 * and 10^21 * 2^-72 < 1/2). */
static int frac_long(uint64_t frac, int k, int prec, uint64_t *ip, char *d)
{
	if (!frac || k > 124)
		return !frac || prec <= 21 ? 0 : -1;
	u128 f = frac, mask = ((u128)1 << k) - 1, half = (u128)1 << (k - 1);
	int n = 0;
	while (n < prec && f) {
		f *= 10;
		d[n++] = (char)('0' + (int)(f >> k));
		f &= mask;
	}
	if (f > half || (f == half && (d[n - 1] & 1))) { /* '0' is even */
		int i = n;
		while (i > 0 && d[i - 1] == '9')
			d[--i] = '0';
		if (i)
			d[i - 1]++;
		else
			++*ip;
	}
	return n;
}

/* %f %F of inf and nan: spaces only, whatever the flags. */
static void fmt_special(struct out *o, const le__fspec *sp, char sgn,
                        int nan)
{
	int up = sp->conv == 'F';
	size_t owed = open_field(o, sp, &sgn, sgn != 0, 0, 3, 0);
	put(o, nan ? (up ? "NAN" : "nan") : (up ? "INF" : "inf"), 3);
	fill(o, ' ', owed);
}

/* m * 2^e, e <= 11, as *ip + frac / 2^-e.  @return frac (< 2^53). */
static uint64_t split(uint64_t m, int e, uint64_t *ip)
{
	if (e >= 0) {
		*ip = m << e;
		return 0;
	}
	*ip = e > -64 ? m >> -e : 0;
	return e > -64 ? m & ((UINT64_C(1) << -e) - 1) : m;
}

/* %f's usual case, |x| < 2^64 and a precision <= 19: the sign, ip, '.'
 * and the prec digits of q, straight into buf. */
static void fmt_fixed(struct out *o, const le__fspec *sp, char sgn,
                      uint64_t ip, uint64_t q, int prec)
{
	char tmp[41]; /* sign, 20 digits, '.', 19 digits */
	size_t plen = sgn != 0, owed = 0;
	int nint = le__ndec(ip), dot = prec || (sp->flags & F_ALT);
	size_t n = (size_t)(nint + dot + prec);

	if (sp->width) { /* else the sign goes with the digits */
		owed = open_field(o, sp, &sgn, plen, 0, n, 1);
		plen = 0;
	}
	char *d = at(o, plen + n, tmp);
	d[0] = sgn; /* a digit overwrites it when there is none */
	le__dec_fixed(ip, d + plen + nint, nint);
	if (dot)
		d[plen + (size_t)nint] = '.';
	le__dec_fixed(q, d + plen + n, prec);
	done(o, d, plen + n, tmp);
	fill(o, ' ', owed);
}

/* %f's rare cases: |x| >= 2^64 (big_dec), |x| < 2^-11 (k > 63), or a
 * precision above 19: digits one at a time, zeros past them.  @return -1
 * where frac_long cannot. */
static int fmt_wide(struct out *o, const le__fspec *sp, char sgn,
                    uint64_t m, int e, int prec)
{
	char txt[456], *dot = txt + 320, *s; /* 309 digits '.' 124 digits */
	uint64_t ip = 0;
	int nfrac = 0;

	if (e > 11) {
		s = big_dec(m, e, dot);
	} else {
		nfrac = frac_long(split(m, e, &ip), -e, prec, &ip, dot + 1);
		if (nfrac < 0)
			return -1;
		s = dot - le__ndec(ip);
		le__dec_fixed(ip, dot, (int)(dot - s));
	}
	*dot = '.';
	size_t n = (size_t)(dot - s), tail = (size_t)(prec - nfrac);
	if (prec || (sp->flags & F_ALT))
		n += 1 + (size_t)nfrac;
	size_t owed = open_field(o, sp, &sgn, sgn != 0, 0, n + tail, 1);
	put(o, s, n);
	fill(o, '0', tail);
	fill(o, ' ', owed);
	return 0;
}

/* Does %f print as this file prints it: '.' the thread's radix point,
 * rounding to nearest? */
static int plain_locale(void)
{
	const char *point = nl_langinfo(RADIXCHAR); /* the thread's locale */
	return point[0] == '.' && !point[1] && rounds_to_nearest();
}

/* The finite double of bits as m * 2^e, m its 53-bit mantissa (the
 * implicit bit set, subnormals as they are).  @return e. */
static inline int mant_exp(uint64_t bits, uint64_t *m)
{
	int bexp = (int)(bits >> 52 & 0x7ff);

	*m = bits & ((UINT64_C(1) << 52) - 1);
	if (bexp)
		*m |= UINT64_C(1) << 52;
	else
		bexp = 1; /* subnormal */
	return *m ? bexp - 1075 : 0; /* 0 is m << 0 as well as any */
}

/* m * 2^e (mant_exp) as *ip and the prec decimals *q of its magnitude,
 * rounded as %f rounds, when it is %f's usual case (|x| < 2^64, |x| >=
 * 2^-11 or 0, prec <= 19).  @return 0, or -1 for fmt_wide's cases. */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline int short_parts(uint64_t m, int e, int prec, uint64_t *ip,
                              uint64_t *q)
{
	if (e > 11 || e < -63 || prec > 19)
		return -1;
	*q = 0;
	if (e < 0) {
		*ip = m >> -e;
		*q = frac_short(m & ((UINT64_C(1) << -e) - 1), -e, prec, ip);
	} else {
		*ip = m << e;
	}
	return 0;
}

/* %f %F.  @return 0, or -1 for what is left to vsnprintf. */
static int fmt_double(struct out *o, const le__fspec *sp, double x)
{
	uint64_t bits, ip;
	int prec = sp->prec < 0 ? 6 : sp->prec;
	char sgn;

	memcpy(&bits, &x, sizeof bits);
	sign(&sgn, (int)(bits >> 63), sp->flags); /* -0.0 and -nan too */
	if ((bits >> 52 & 0x7ff) == 0x7ff) {
		fmt_special(o, sp, sgn, (bits & ((UINT64_C(1) << 52) - 1)) != 0);
		return 0;
	}
	if (!plain_locale())
		return -1;
	uint64_t m, q;
	int e = mant_exp(bits, &m);
	if (short_parts(m, e, prec, &ip, &q) < 0)
		return fmt_wide(o, sp, sgn, m, e, prec);
	fmt_fixed(o, sp, sgn, ip, q, prec);
	return 0;
}

int le__fmt_f(char *w, double x, int prec)
{
	uint64_t bits, ip, q, m;

	memcpy(&bits, &x, sizeof bits);
	if ((bits >> 52 & 0x7ff) == 0x7ff || !plain_locale())
		return -1;
	int e = mant_exp(bits, &m);
	if (short_parts(m, e, prec, &ip, &q) < 0)
		return -1;
	size_t neg = bits >> 63;
	int nint = le__ndec(ip);
	w[0] = '-'; /* a digit overwrites it when x is positive */
	le__dec_fixed(ip, w + neg + nint, nint);
	char *d = w + neg + nint;
	if (!prec)
		return (int)(d - w);
	*d = '.';
	le__dec_fixed(q, d + 1 + prec, prec);
	return (int)(d + 1 + prec - w);
}

/* Read digits at *f into *v; @return -1 past FIELD_MAX. */
static int num(const char **f, int *v)
{
	int n = 0;
	for (; **f >= '0' && **f <= '9'; (*f)++)
		if ((n = n * 10 + (**f - '0')) > FIELD_MAX)
			return -1;
	*v = n;
	return 0;
}

/* Is c a conversion done here: one of d i u o x X c s p f F? */
static int is_conv(char c)
{
#define CONV_BIT(c) (UINT64_C(1) << ((c) - 'F'))
	static const uint64_t set =
	        CONV_BIT('d') | CONV_BIT('i') | CONV_BIT('u') | CONV_BIT('o') |
	        CONV_BIT('x') | CONV_BIT('X') | CONV_BIT('c') | CONV_BIT('s') |
	        CONV_BIT('p') | CONV_BIT('f') | CONV_BIT('F');
#undef CONV_BIT
	return c >= 'F' && c <= 'x' && (set >> (c - 'F') & 1);
}

/* Parse a conversion; f is past its '%'.  @return the byte after it, or
 * NULL for what is left to vsnprintf. */
static const char *parse(const char *f, le__fspec *sp)
{
	static const le__fspec bare = {.prec = -1, .len = LEN_NONE};

	if (is_conv(*f)) { /* most are: %d, %s, %f */
		*sp = bare;
		sp->conv = *f;
		return f + 1;
	}
	for (sp->flags = 0;; f++) {
		switch (*f) {
		case '-': sp->flags |= F_LEFT; continue;
		case '+': sp->flags |= F_PLUS; continue;
		case ' ': sp->flags |= F_SPACE; continue;
		case '#': sp->flags |= F_ALT; continue;
		case '0': sp->flags |= F_ZERO; continue;
		}
		break;
	}
	sp->width = 0;
	if (*f == '*')
		sp->width = STAR, f++;
	else if (num(&f, &sp->width) < 0)
		return NULL;
	sp->prec = -1;
	if (*f == '.') {
		if (*++f == '*')
			sp->prec = STAR, f++;
		else if (num(&f, &sp->prec) < 0)
			return NULL;
	}
	switch (*f) {
	case 'h': sp->len = *++f == 'h' ? (f++, LEN_HH) : LEN_H; break;
	case 'l': sp->len = *++f == 'l' ? (f++, LEN_LL) : LEN_L; break;
	case 'j': sp->len = LEN_J, f++; break;
	case 'z': sp->len = LEN_Z, f++; break;
	case 't': sp->len = LEN_T, f++; break;
	default: sp->len = LEN_NONE;
	}
	sp->conv = *f;
	if (!is_conv(*f) || (sp->len != LEN_NONE && !strchr("diuoxXfF", *f)))
		return NULL; /* %lc %ls are wide; %hc %zp and such, odd */
	if ((*f == 'f' || *f == 'F') && sp->len != LEN_NONE && sp->len != LEN_L)
		return NULL; /* %lf is a double; %llf, %Lf long double */
	return f + 1;
}

/* Arguments as their length modifiers have them passed: z is size_t or
 * the signed type of its width (ssize_t), t ptrdiff_t or the unsigned
 * type of its width (size_t, on every glibc target).  An argument is read
 * as its width's bits (raw_arg), then cast as its modifier says (as_u,
 * as_s), so that a value from a va_list and one from an argument block
 * (le__fspec_put) print alike. */
_Static_assert(sizeof(size_t) == sizeof(ptrdiff_t), "z and t alike");
_Static_assert(sizeof(uintmax_t) == 8 && sizeof(void *) <= 8 &&
               sizeof(long) == 8, "integers are formatted in 64 bits");

static uint64_t raw_arg(va_list *ap, int len)
{
	if (len == LEN_NONE || len == LEN_HH || len == LEN_H)
		return va_arg(*ap, unsigned);
	return va_arg(*ap, unsigned long long);
}

static uint64_t as_u(uint64_t raw, int len)
{
	switch (len) {
	case LEN_NONE: return (uint32_t)raw;
	case LEN_HH: return (unsigned char)raw;
	case LEN_H: return (unsigned short)raw;
	}
	return raw;
}

static int64_t as_s(uint64_t raw, int len)
{
	switch (len) {
	case LEN_NONE: return (int32_t)(uint32_t)raw;
	case LEN_HH: return (signed char)raw;
	case LEN_H: return (short)raw;
	}
	return (int64_t)raw;
}

int le__fspec_star(le__fspec *sp, int w, int p)
{
	if (sp->width == STAR) {
		if (w < -FIELD_MAX || w > FIELD_MAX)
			return -1;
		if (w < 0)
			sp->flags |= F_LEFT;
		sp->width = w < 0 ? -w : w;
	}
	if (sp->prec == STAR) {
		if (p > FIELD_MAX)
			return -1;
		sp->prec = p < 0 ? -1 : p;
	}
	return 0;
}

/* Write the field of value v (sp's stars resolved).  @return 0, or -1
 * for what is left to vsnprintf. */
static int convert_val(struct out *o, const le__fspec *sp, le__fval v)
{
	int plain = !sp->width && sp->prec < 0;
	char sgn;
	switch (sp->conv) {
	case 'd': case 'i': {
		int64_t x = as_s(v.u, sp->len);
		uint64_t u = x < 0 ? 0 - (uint64_t)x : (uint64_t)x;
		sign(&sgn, x < 0, sp->flags);
		if (plain)
			put_dec(o, u, sgn);
		else
			fmt_int(o, sp, u, x < 0);
		return 0;
	}
	case 'u':
		if (plain)
			put_dec(o, as_u(v.u, sp->len), 0);
		else
			fmt_int(o, sp, as_u(v.u, sp->len), 0);
		return 0;
	case 'c': {
		char c = (char)(unsigned char)v.u;
		fmt_bytes(o, sp, &c, 1);
		return 0;
	}
	case 's':
		fmt_str(o, sp, v.s);
		return 0;
	case 'p':
		if (v.u)
			fmt_int(o, sp, v.u, 0);
		else /* whatever the precision */
			fmt_bytes(o, sp, "(nil)", 5);
		return 0;
	case 'f': case 'F':
		return fmt_double(o, sp, v.d);
	}
	fmt_int(o, sp, as_u(v.u, sp->len), 0);
	return 0;
}

/* Read the * arguments, then the value, and write the field.  @return 0,
 * or -1 for what is left to vsnprintf. */
static int convert(struct out *o, le__fspec *sp, va_list *ap)
{
	int w = sp->width == STAR ? va_arg(*ap, int) : 0;
	int p = sp->prec == STAR ? va_arg(*ap, int) : 0;
	le__fval v;

	if (le__fspec_star(sp, w, p) < 0)
		return -1;
	switch (sp->conv) {
	case 's': v.s = va_arg(*ap, const char *); break;
	case 'p': v.u = (uintptr_t)va_arg(*ap, const void *); break;
	case 'f': case 'F': v.d = va_arg(*ap, double); break;
	default: v.u = raw_arg(ap, sp->len);
	}
	return convert_val(o, sp, v);
}

static int run(struct out *o, const char *fmt, va_list *ap)
{
	static const le__fspec bare_f = {.prec = -1, .conv = 'f'};
	const char *pc, *s;
	le__fspec sp;
	int v;

	while ((pc = strchr(fmt, '%'))) {
		put(o, fmt, (size_t)(pc - fmt));
		fmt = pc + 2;
		switch (pc[1]) { /* the bare conversions most are, directly */
		case 'd': case 'i':
			v = va_arg(*ap, int);
			put_dec(o, v < 0 ? 0 - (uint64_t)v : (uint64_t)v,
			        v < 0 ? '-' : 0);
			continue;
		case 'u':
			put_dec(o, va_arg(*ap, unsigned), 0);
			continue;
		case 's':
			s = va_arg(*ap, const char *);
			s = s ? s : "(null)";
			put(o, s, strlen(s));
			continue;
		case 'f':
			if (fmt_double(o, &bare_f, va_arg(*ap, double)) < 0)
				return -1;
			continue;
		case '%':
			put1(o, '%');
			continue;
		}
		if (!(fmt = parse(pc + 1, &sp)) || convert(o, &sp, ap) < 0)
			return -1;
	}
	put(o, fmt, strlen(fmt));
	return 0;
}

int le__vfmt(char *buf, size_t cap, const char *fmt, va_list ap)
{
	static char none; /* buf may be NULL when cap is 0: never written */
	struct out o = {cap ? buf : &none, cap ? cap - 1 : 0, 0};
	va_list aq; /* a copy, so that helpers can take its address */

	va_copy(aq, ap);
	int rc = run(&o, fmt, &aq);
	va_end(aq);
	if (rc < 0 || o.len > INT_MAX) /* vsnprintf: -1, EOVERFLOW */
		return LE__FMT_UNHANDLED;
	if (cap)
		buf[o.len < o.lim ? o.len : o.lim] = '\0';
	return (int)o.len;
}

const char *le__fspec_parse(const char *f, le__fspec *sp)
{
	return parse(f, sp);
}

int le__fspec_put(char *buf, size_t cap, const le__fspec *sp, le__fval v)
{
	static char none; /* as le__vfmt's */
	struct out o = {cap ? buf : &none, cap ? cap - 1 : 0, 0};

	if (convert_val(&o, sp, v) < 0 || o.len > INT_MAX)
		return LE__FMT_UNHANDLED;
	if (cap)
		buf[o.len < o.lim ? o.len : o.lim] = '\0';
	return (int)o.len;
}

#else /* not glibc, or no 128-bit integers: the C library does it all */

int le__vfmt(char *buf, size_t cap, const char *fmt, va_list ap)
{
	(void)buf, (void)cap, (void)fmt, (void)ap;
	return LE__FMT_UNHANDLED;
}

const char *le__fspec_parse(const char *f, le__fspec *sp)
{
	(void)f, (void)sp;
	return NULL;
}

int le__fspec_star(le__fspec *sp, int w, int p)
{
	(void)sp, (void)w, (void)p;
	return -1;
}

int le__fspec_put(char *buf, size_t cap, const le__fspec *sp, le__fval v)
{
	(void)buf, (void)cap, (void)sp, (void)v;
	return LE__FMT_UNHANDLED;
}

#endif

int le__vsnprintf(char *buf, size_t cap, const char *fmt, va_list ap)
{
	va_list aq;

	va_copy(aq, ap);
	int n = le__vfmt(buf, cap, fmt, aq);
	va_end(aq);
	return n == LE__FMT_UNHANDLED ? vsnprintf(buf, cap, fmt, ap) : n;
}
