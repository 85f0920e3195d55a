/*
 * test_fmt.c -- le__vfmt (src/base/fmt.c), le_logf's formatter: for every
 * format it accepts it must print what glibc's vsnprintf prints, byte for
 * byte, with the same return value, at every capacity; it must decline
 * (LE__FMT_UNHANDLED) what it does not do, and le__vsnprintf must then
 * give vsnprintf's answer; and the formats logs use must not be declined,
 * or le_logf takes glibc's slow path for them.  Every case runs through
 * both and compares the return values and the whole buffers (filled with
 * a marker byte first, so a stray write past the NUL shows).  Random
 * cases: tests/unit/fmt_gen.h; LE_FMT_SEED and LE_FMT_CASES change their
 * seed and number.
 */
#include "harness.h"

#include <float.h>
#include <limits.h>
#include <stdarg.h>
#include <wchar.h>

#include "base/fmt.h"
#include "fmt_gen.h"
#include "logengine.h"
#include "logtest.h"

/* Both ways at capacity cap; exits the test on any difference.
 * @return 1 when le__vfmt did it, 0 when it declined. */
static int vsame(int line, size_t cap, const char *fmt, va_list ap)
{
	static char a[FG_BUF], b[FG_BUF];
	va_list a1, a2, a3;

	va_copy(a1, ap);
	va_copy(a2, ap);
	va_copy(a3, ap);
	memset(a, 0x5a, sizeof a);
	memset(b, 0x5a, sizeof b);
	int na = le__vfmt(a, cap, fmt, a1);
	int declined = na == LE__FMT_UNHANDLED;
	if (declined) {
		memset(a, 0x5a, sizeof a);
		na = le__vsnprintf(a, cap, fmt, a2);
	}
	int nb = vsnprintf(b, cap, fmt, a3);
	va_end(a1);
	va_end(a2);
	va_end(a3);
	if (na != nb || memcmp(a, b, sizeof a) != 0) {
		int show = cap < 300 ? (int)cap : 300;
		fprintf(stderr, "  line %d: \"%s\" cap %zu%s:\n    ours  %d "
		        "\"%.*s\"\n    glibc %d \"%.*s\"\n", line, fmt, cap,
		        declined ? " (declined)" : "", na, show, a, nb, show, b);
		_exit(1);
	}
	return !declined;
}

static int same_at(int line, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = vsame(line, FG_BUF, fmt, ap);
	va_end(ap);
	return r;
}

/* Every capacity from 0 to the output's length + 1. */
static void every_cap_at(int line, const char *fmt, ...)
{
	va_list ap, aq;
	va_start(ap, fmt);
	va_copy(aq, ap);
	int len = vsnprintf(NULL, 0, fmt, aq);
	va_end(aq);
	CHECK(len >= 0 && len < FG_BUF);
	for (size_t cap = 0; cap <= (size_t)len + 1; cap++)
		vsame(line, cap, fmt, ap);
	va_end(ap);
}

#define SAME(...) same_at(__LINE__, __VA_ARGS__)
/* the same bytes, and le__vfmt did it itself / declined it */
#define FAST(...) CHECK(same_at(__LINE__, __VA_ARGS__) == 1)
#define SLOW(...) CHECK(same_at(__LINE__, __VA_ARGS__) == 0)
#define EVERY_CAP(...) every_cap_at(__LINE__, __VA_ARGS__)

static uint64_t env_u64(const char *name, uint64_t dflt)
{
	const char *s = getenv(name);
	return s && *s ? strtoull(s, NULL, 0) : dflt;
}

/* ---- the fast path is taken ---- */

TEST(benchmark_format_is_not_left_to_vsnprintf)
{
	const char *f = "Logging int: %d, int: %d, double: %f";
	for (int i = -2000; i < 200000; i += 7)
		FAST(f, i, i * 7919, i * 0.001 + 0.5);
	FAST(f, INT_MIN, INT_MAX, -1e15);
	FAST(f, 0, 0, 0.0);
}

TEST(common_formats_are_not_left_to_vsnprintf)
{
	int x = 0;
	FAST("%d", 42);
	FAST("%i", -42);
	FAST("%u", 42u);
	FAST("%s", "text");
	FAST("%f", 3.14159);
	FAST("%.3f", 2.0 / 3);
	FAST("%5.2f", -1.005);
	FAST("%.1f ms", 12.25);
	FAST("%x", 0xdeadbeefu);
	FAST("%08X", 0xbeefu);
	FAST("%p", (void *)&x);
	FAST("%zu", (size_t)12345);
	FAST("%zd", (ssize_t)-12345);
	FAST("%lld", LLONG_MIN);
	FAST("%llu", ULLONG_MAX);
	FAST("%ld %lu %lx", -1L, ULONG_MAX, 0xabcUL);
	FAST("%jd %td", (intmax_t)-3, (ptrdiff_t)-4);
	FAST("%c%c", 'o', 'k');
	FAST("%-10s|%10s|", "left", "right");
	FAST("%.*s", 3, "truncated");
	FAST("%*d", 6, 42);
	FAST("%5d%%", 99);
	FAST("req %s took %.1f ms (%d bytes)", "GET /", 12.5, 1024);
	FAST("%F", 1.5);
	FAST("%lf", 1.5);
	FAST("no conversions at all");
	FAST("");
}

/* ---- integers ---- */

/* Call with the value as the type that conversion and length read. */
static int same_int(int line, const char *fmt, const char *len, char conv,
                    long long v)
{
	int sgn = conv == 'd' || conv == 'i';
	if (!strcmp(len, "ll"))
		return sgn ? same_at(line, fmt, v)
		           : same_at(line, fmt, (unsigned long long)v);
	if (*len == 'l' || *len == 'j' || *len == 'z' || *len == 't')
		return sgn ? same_at(line, fmt, (long)v)
		           : same_at(line, fmt, (unsigned long)v);
	return sgn ? same_at(line, fmt, (int)v) : same_at(line, fmt, (unsigned)v);
}

/* The flags of bit set fl (0-31), as text in buf. */
static const char *flags_of(int fl, char *buf)
{
	char *p = buf;
	for (int b = 0; b < 5; b++)
		if (fl >> b & 1)
			*p++ = "-+ #0"[b];
	*p = '\0';
	return buf;
}

static const long long ivals[] = {
	0, 1, -1, 7, 8, 9, 10, 255, 256, -128, 65535, 65536, 123456789,
	INT_MAX, INT_MIN, UINT_MAX, LLONG_MAX, LLONG_MIN, 1000000000000LL};
#define NIVALS (sizeof ivals / sizeof ivals[0])

TEST(integer_flags_widths_precisions_match_glibc)
{
	static const char *const widths[] = {"", "1", "5", "12", "25"};
	static const char *const precs[] = {"", ".", ".0", ".1", ".3", ".12",
	                                    ".25"};
	char fmt[64], flags[8];
	for (int fl = 0; fl < 32; fl++) {
		flags_of(fl, flags);
		for (size_t w = 0; w < 5; w++)
			for (size_t pr = 0; pr < 7; pr++)
				for (const char *c = "diuoxX"; *c; c++) {
					snprintf(fmt, sizeof fmt, "[%%%s%s%s%c]",
					         flags, widths[w], precs[pr], *c);
					for (size_t v = 0; v < NIVALS; v++)
						CHECK(same_int(__LINE__, fmt, "",
						               *c, ivals[v]));
				}
	}
}

TEST(integer_length_modifiers_match_glibc)
{
	static const char *const lens[] = {"hh", "h", "l", "ll", "j", "z",
	                                   "t"};
	static const char *const specs[] = {"", "-", "+", " ", "#", "0", "08",
	                                    "-8", "+.5", "#.0", ".0", "#12.4"};
	char fmt[64];
	for (size_t l = 0; l < 7; l++)
		for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++)
			for (const char *c = "diuoxX"; *c; c++) {
				snprintf(fmt, sizeof fmt, "<%%%s%s%c>", specs[s],
				         lens[l], *c);
				for (size_t v = 0; v < NIVALS; v++)
					CHECK(same_int(__LINE__, fmt, lens[l], *c,
					               ivals[v]));
			}
}

TEST(integer_limits_and_zero_print_exactly)
{
	FAST("%d %d", INT_MIN, INT_MAX);
	FAST("%lld %lld", LLONG_MIN, LLONG_MAX);
	FAST("%llu %llx %llX %llo %#llo", ULLONG_MAX, ULLONG_MAX, ULLONG_MAX,
	     ULLONG_MAX, ULLONG_MAX);
	FAST("%ju %jx", UINTMAX_MAX, UINTMAX_MAX);
	FAST("%zd %zu", (ssize_t)-1, SIZE_MAX);
	FAST("%hhd %hhu %hhx", 200, -1, 0x1ff);
	FAST("%hd %hu", 70000, -1);
	/* precision 0 prints 0 as nothing; %#o still prints its 0 */
	FAST("[%.0d][%.0u][%.0x][%.0o][%#.0o][%#.0x][%#.0X]", 0, 0u, 0u, 0u,
	     0u, 0u, 0u);
	FAST("[%#o][%#x][%#X][%#5.3o][%#.1o][%#.2o]", 0u, 0u, 0u, 8u, 8u, 8u);
	FAST("[%+.0d][% .0i][%+5.0d][%-+5.0d]", 0, 0, 0, 0);
	FAST("[%+u][% x][%+o]", 5u, 10u, 8u); /* + and space: signed only */
	FAST("[%010.0d][%010.3d][%-010d][%0-10d]", 0, -5, 7, 7);
	FAST("[%#010x][%-#010x][%#010o][%#-8.3x]", 255u, 255u, 8u, 1u);
}

TEST(star_widths_and_precisions_match_glibc)
{
	FAST("[%*d][%-*d][%*d]", 5, 42, 5, 42, -5, 42);
	FAST("[%0*d][%0*d]", 6, -42, -6, -42); /* negative: the - flag */
	FAST("[%.*d][%.*d][%.*d]", 5, 42, -1, 42, 0, 0);
	FAST("[%*.*f][%-*.*f]", 10, 3, 3.14159, 10, 3, 3.14159);
	FAST("[%.*s][%.*s][%.*s]", 3, "abcdef", -1, "abcdef", 0, "abcdef");
	FAST("[%*s]", 1 << 20, "x"); /* the largest handled */
	SLOW("[%*s]", (1 << 20) + 1, "x");
	SLOW("[%*s]", -(1 << 20) - 1, "x");
	SLOW("[%.*d]", (1 << 20) + 1, 1);
	SLOW("[%1048577d]", 1);
	SLOW("[%.1048577d]", 1);
	SLOW("[%2147483648d]", 1); /* glibc: -1, EOVERFLOW */
}

/* ---- strings, characters, pointers, text ---- */

TEST(strings_and_characters_match_glibc)
{
	static const char ab[2] = {'a', 'b'}; /* no NUL: %.2s stops */
	static const char *const ss[] = {"", "x", "hello", "h\xc3\xa9llo",
	                                 NULL};
	char fmt[64];
	for (size_t i = 0; i < 5; i++) {
		for (int p = -1; p <= 8; p++)
			for (int w = 0; w <= 12; w += 4) {
				if (p < 0)
					snprintf(fmt, sizeof fmt, "[%%%ds|%%-%ds]",
					         w, w);
				else
					snprintf(fmt, sizeof fmt,
					         "[%%%d.%ds|%%-%d.%ds]", w, p, w,
					         p);
				FAST(fmt, ss[i], ss[i]);
			}
		FAST("[%05s][%-05s][%.0s][%s]", ss[i], ss[i], ss[i], ss[i]);
	}
	FAST("[%.2s]", ab);
	FAST("[%c][%c][%c][%c]", 'x', 0, 255, -1); /* a NUL in the middle */
	FAST("[%5c][%-5c][%05c][%.0c]", 'x', 'x', 'x', 'x');
}

TEST(pointers_match_glibc)
{
	int x;
	void *ps[] = {NULL, &x, (void *)1, (void *)0x10, (void *)UINTPTR_MAX};
	for (size_t i = 0; i < 5; i++)
		FAST("[%p][%20p][%-20p][%020p][%.3p][%.0p][%+p][% p][%#p]",
		     ps[i], ps[i], ps[i], ps[i], ps[i], ps[i], ps[i], ps[i],
		     ps[i]);
}

TEST(percent_signs_and_plain_text_match_glibc)
{
	char big[900];
	memset(big, 'q', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	FAST("%%");
	FAST("100%%");
	FAST("%%d%%s%%%d%%", 5);
	FAST(big); /* longer than the buffer: cut, counted */
	EVERY_CAP("abc%%def");
}

/* ---- doubles ---- */

/* x at every precision from 0 to max, as %f and %F. */
static void all_precisions(int line, double x, int max)
{
	char fmt[64];
	for (int p = 0; p <= max; p++) {
		snprintf(fmt, sizeof fmt, "%%.%df %%.%dF", p, p);
		same_at(line, fmt, x, x);
	}
}

TEST(doubles_round_ties_half_to_even_like_glibc)
{
	static const double ties[] = {0.5, 1.5, 2.5, 3.5, -0.5, -2.5, 0.125,
	                              0.375, 0.625, 0.875, 1e15 + 0.5,
	                              4503599627370495.5, 0.0625, 1023.75};
	for (size_t i = 0; i < sizeof ties / sizeof ties[0]; i++)
		all_precisions(__LINE__, ties[i], 19);
	/* m / 2^j (m odd) is a tie at precision j - 1; and one ulp on
	 * either side of it is not */
	for (int j = 1; j <= 60; j++)
		for (uint64_t m = 1; m < 2000; m += 2 * (j % 7) + 38) {
			double x = (double)m / (double)(UINT64_C(1) << j);
			char fmt[64];
			snprintf(fmt, sizeof fmt, "%%.%df", j - 1 > 19 ? 19 : j - 1);
			FAST(fmt, x);
			FAST(fmt, fg_from_bits(fg_bits(x) + 1));
			FAST(fmt, fg_from_bits(fg_bits(x) - 1));
			FAST(fmt, -x);
		}
}

TEST(doubles_near_decimal_boundaries_match_glibc)
{
	/* n / 1000 + 0.0005 is a decimal tie that binary cannot hold: which
	 * side it lands on decides the digit */
	for (int n = 0; n < 20000; n++) {
		double x = n / 1000.0 + 0.0005;
		FAST("%.3f %.2f %.1f %.0f %.4f", x, x, x, x, x);
		FAST("%.3f", fg_from_bits(fg_bits(x) + 1));
		FAST("%.3f", fg_from_bits(fg_bits(x) - 1));
	}
	for (int n = 0; n < 1000; n++) /* 0.999.. carries into the integer */
		FAST("%.2f %.0f %.5f", 9.995 + n, 0.5 + n, 99.999995 + n);
}

TEST(doubles_at_the_edges_match_glibc)
{
	static const double edge[] = {
		0.0, -0.0, DBL_MIN, -DBL_MIN, DBL_MAX, -DBL_MAX, DBL_TRUE_MIN,
		0x1p-1022 - 0x1p-1074 /* largest subnormal */, 0x1p-71,
		0x1p-72, 0x1p-64, 0x1p-63, 0x1p52, 0x1p53, 0x1p53 + 2, 0x1p63,
		0x1p64, 0x1p64 - 0x1p11, 0x1p64 + 0x1p12, 0x1p65, 0x1p100, 1e22,
		1e23, 1e100, 1e300, 1e-300, 0.1, 0.2, 0.3, 1.0 / 3};
	for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++) {
		all_precisions(__LINE__, edge[i], 25);
		SAME("%.40f|%.100f|%.330f", edge[i], edge[i], edge[i]);
		FAST("%#.0f|%+.0f|% .1f|%40.2f|%-40.2f|%040.2f", edge[i],
		     edge[i], edge[i], edge[i], edge[i], edge[i]);
	}
	FAST("%f %F %f %F", 1.0 / 0.0, 1.0 / 0.0, -1.0 / 0.0, -1.0 / 0.0);
	FAST("%f %F %f %F", 0.0 / 0.0, 0.0 / 0.0, -(0.0 / 0.0),
	     -(0.0 / 0.0));
	FAST("[%08f][%-8F][%+f][% f][%+08.3f][%#f]", 1.0 / 0.0, -(0.0 / 0.0),
	     0.0 / 0.0, 1.0 / 0.0, -1.0 / 0.0, 0.0 / 0.0);
	FAST("%f", fg_from_bits(0x7ff0000000000001u)); /* a nan's payload */
	FAST("%f", fg_from_bits(0xfff8000000000123u));
}

TEST(double_flags_and_widths_match_glibc)
{
	static const double vals[] = {0.0, -0.0, 1.5, -2.25, 123.456,
	                              -0.0001, 1e10, 1.0 / 0.0, -(0.0 / 0.0)};
	static const char *const widths[] = {"", "1", "8", "15"};
	static const char *const precs[] = {"", ".", ".0", ".2", ".10"};
	char fmt[64], flags[8];
	for (int fl = 0; fl < 32; fl++) {
		flags_of(fl, flags);
		for (size_t w = 0; w < 4; w++)
			for (size_t pr = 0; pr < 5; pr++)
				for (size_t v = 0; v < sizeof vals / sizeof vals[0];
				     v++) {
					snprintf(fmt, sizeof fmt,
					         "[%%%s%s%sf][%%%s%s%sF]", flags,
					         widths[w], precs[pr], flags,
					         widths[w], precs[pr]);
					FAST(fmt, vals[v], vals[v]);
				}
	}
}

/* Declined only where src/base/fmt.c says: a precision above 21 for
 * 0 < |x| < 2^-72. */
static void check_reach(double x, int prec, int handled)
{
	int tiny = x != 0 && x < 0x1p-72 && x > -0x1p-72;
	int finite = x - x == 0;
	if (!handled && !(finite && prec > 21 && tiny)) {
		fprintf(stderr, "  %.17g at precision %d declined\n", x, prec);
		_exit(1);
	}
}

TEST(doubles_are_declined_only_where_documented)
{
	FAST("%.21f", 0x1p-80); /* all zeros */
	SLOW("%.22f", 0x1p-80);
	SLOW("%.25f", -1e-300);
	FAST("%.25f", 0x1p-72);
	SLOW("%.25f", 0x1.fffffffffffffp-73);
	FAST("%.6f %.19f %.40f", 0x1p-20, 0x1p-11, 0x1.8p-12); /* k > 63 */
	FAST("%.300f", 0.0);
	FAST("%.300f", 0.1);
	FAST("%.60f", DBL_MAX);
	SLOW("%Lf", 1.5L); /* long double: vsnprintf's */
}

TEST(random_doubles_match_glibc)
{
	struct fg_src r = {.state = env_u64("LE_FMT_SEED", 1) ^ 0xd0b1e};
	long n = (long)env_u64("LE_FMT_CASES", 400000), declined = 0;
	char fmt[64];
	for (long i = 0; i < n; i++) {
		double x = fg_double(&r);
		int prec = fg_below(&r, 8) ? (int)fg_below(&r, 21)
		                           : 21 + (int)fg_below(&r, 60);
		snprintf(fmt, sizeof fmt, "%%%s%d.%d%c",
		         fg_below(&r, 4) ? "" : "+", (int)fg_below(&r, 3) * 9,
		         prec, fg_below(&r, 4) ? 'f' : 'F');
		int handled = same_at(__LINE__, fmt, x);
		check_reach(x, prec, handled);
		declined += !handled;
	}
	printf("  %ld doubles, %ld declined\n", n, declined);
}

/* le__fmt_f, the compiled deferred texts' %f: snprintf's bytes wherever
 * it does not decline, and it declines only outside its usual case. */
TEST(fmt_f_prints_what_snprintf_prints)
{
	struct fg_src r = {.state = env_u64("LE_FMT_SEED", 1) ^ 0xf00f};
	long n = (long)env_u64("LE_FMT_CASES", 400000) / 2, declined = 0;
	char a[LE__FMT_F_MAX + 8], b[400];
	for (long i = 0; i < n; i++) {
		double x = i < 4 ? (double[]){0.0, -0.0, 0.5, -1e19}[i]
		                 : fg_double(&r);
		int prec = (int)fg_below(&r, 21);
		int na = le__fmt_f(a, x, prec);
		int nb = snprintf(b, sizeof b, "%.*f", prec, x);
		double ax = x < 0 ? -x : x;
		int usual = x - x == 0 && ax < 0x1p64 && (ax >= 0x1p-11 ||
		            ax == 0) && prec <= 19;
		if (na < 0 && !usual) {
			declined++;
			continue;
		}
		if (na != nb || memcmp(a, b, (size_t)nb)) {
			fprintf(stderr, "  %.17g at %d: \"%.*s\" (%d), snprintf "
			        "\"%s\" (%d)\n", x, prec, na < 0 ? 0 : na, a, na,
			        b, nb);
			_exit(1);
		}
	}
	printf("  %ld doubles, %ld outside the usual case\n", n, declined);
}

/* The i-th edge: 10^(i / 4) - 1 + i % 4. */
static uint64_t edge(long i)
{
	uint64_t p = 1;
	for (long k = 0; k < i / 4; k++)
		p *= 10;
	return p - 1 + (uint64_t)(i % 4);
}

/* le__dec_fixed, every number's digits: each width's edges (10^k - 1,
 * 10^k, 10^k + 1, each pair's carries) and random values, as %0*llu. */
TEST(dec_fixed_writes_every_width_exactly)
{
	struct fg_src r = {.state = env_u64("LE_FMT_SEED", 1) ^ 0xdec};
	char a[24], b[24];
	for (int n = 0; n <= 20; n++) {
		uint64_t lim = n == 20 ? UINT64_MAX : 1;
		for (int i = 0; i < n && n < 20; i++)
			lim *= 10;
		for (long i = 0; i < 20000; i++) {
			uint64_t v = fg_u64(&r);
			if (i < 80) /* 10^k - 1 .. 10^k + 2, every k */
				v = edge(i);
			if (n < 20)
				v = n ? v % lim : 0;
			le__dec_fixed(v, a + n, n);
			snprintf(b, sizeof b, "%0*llu", n, (unsigned long long)v);
			if (n && memcmp(a, b, (size_t)n)) {
				fprintf(stderr, "  %llu at %d: %.*s\n",
				        (unsigned long long)v, n, n, a);
				_exit(1);
			}
		}
	}
}

/* ---- everything at once ---- */

TEST(truncation_at_every_cap_matches_glibc)
{
	EVERY_CAP("Logging int: %d, int: %d, double: %f", -12345, 678, 9.75);
	EVERY_CAP("%-12s|%12s|%.3s", "left", "right", "precision");
	EVERY_CAP("[%#010x][%+.3d][%o]", 255u, 7, 8u);
	EVERY_CAP("%.20f %F %e", 0.1, -(0.0 / 0.0), 2.5); /* %e: declined */
	EVERY_CAP("%s%c%s", "nul:", 0, ":after");
	EVERY_CAP("%p %p", NULL, (void *)0x1234);
	EVERY_CAP("%.0f|%40.10f", 1e23, -DBL_MIN);
	/* cap 0 may come with no buffer at all */
	CHECK_EQ(fg_run(le__vfmt, NULL, 0, "%d %s %.0d %f", 1, "two", 0, 3.0),
	         snprintf(NULL, 0, "%d %s %.0d %f", 1, "two", 0, 3.0));
}

TEST(random_formats_match_glibc)
{
	struct fg_src r = {.state = env_u64("LE_FMT_SEED", 1)};
	long n = (long)env_u64("LE_FMT_CASES", 400000);
	long done = 0, declined = 0, junk = 0, raw = 0;
	struct fmt_case c;
	char why[1024];
	for (long i = 0; i < n; i++) {
		fg_case(&r, &c);
		size_t cap = fg_below(&r, 4) ? FG_BUF : fg_below(&r, 80);
		int rc = fg_check(&c, cap, why, sizeof why);
		if (rc < 0) {
			fprintf(stderr, "  case %ld: %s\n", i, why);
			_exit(1);
		}
		junk += c.kind == FG_JUNK;
		raw += c.kind == FG_RAW && rc == 1;
		declined += rc == 0 && c.kind != FG_JUNK;
		done += rc == 1;
	}
	printf("  %ld cases: %ld done here (%ld of random bytes), %ld "
	       "declined, %ld junk declined\n", n, done, raw, declined, junk);
	CHECK(done > n / 2);
}

/* ---- what is left to vsnprintf ---- */

TEST(unhandled_conversions_are_declined_and_left_to_vsnprintf)
{
	int pos = 0;
	SLOW("%e %E %g %G %a %A", 1.5, 1.5, 1.5, 1.5, 1.5, 1.5);
	SLOW("%d %s %e", 1, "then", 2.0); /* declined after writing */
	SLOW("abc%n", &pos);
	CHECK_EQ(pos, 3);
	errno = ENOENT;
	SLOW("%m");
	SLOW("%lc %ls", (wint_t)L'x', L"wide");
	SLOW("%Lf %llf", 1.5L, 2.5L);
	SLOW("%'d", 1234567); /* and I, in fmt_gen.h's junk */
	SLOW("%1$d %1$d", 7);
	SLOW("%5%");
	SLOW("%hc %zp %qd %Zd", 'x', (void *)1, 5LL, (size_t)6);
	SLOW("%");
	SLOW("100%");
	SLOW("%y");
	SLOW("%hhhd", 1);
}

#if defined(__x86_64__)
/* As fesetround does (the tests do not link libm): the x87 control word,
 * which glibc's printf reads, and MXCSR, which float arithmetic uses.
 * rc: 0 nearest, 1 down, 2 up, 3 toward zero. */
static void set_x87(unsigned rc)
{
	unsigned short cw;
	__asm__ volatile("fnstcw %0" : "=m"(cw));
	cw = (unsigned short)((cw & ~0xc00u) | rc << 10);
	__asm__ volatile("fldcw %0" : : "m"(cw));
}

static void set_sse(unsigned rc)
{
	unsigned mx;
	__asm__ volatile("stmxcsr %0" : "=m"(mx));
	mx = (mx & ~0x6000u) | rc << 13;
	__asm__ volatile("ldmxcsr %0" : : "m"(mx));
}

static void set_rounding(unsigned rc)
{
	set_x87(rc);
	set_sse(rc);
}
#endif

TEST(rounding_mode_other_than_nearest_is_left_to_vsnprintf)
{
#if defined(__x86_64__)
	char buf[32];
	for (unsigned rc = 1; rc <= 3; rc++) {
		set_rounding(rc);
		SLOW("%.2f %.0f %f", 0.125, 2.5, 1.0 / 3);
		FAST("%d %s", 1, "integers do not care");
	}
	set_rounding(2);
	snprintf(buf, sizeof buf, "%.2f", 0.125); /* glibc honours it */
	CHECK(strcmp(buf, "0.13") == 0);
	set_rounding(0);
	set_x87(2); /* what glibc's printf reads, alone */
	SLOW("%.2f %.0f %f", 0.125, 2.5, 1.0 / 3);
	set_x87(0);
	set_sse(2); /* what it does not */
	SAME("%.2f %.0f %f", 0.125, 2.5, 1.0 / 3);
	set_sse(0);
	FAST("%.2f %.0f %f", 0.125, 2.5, 1.0 / 3);
#else
	printf("  (not x86-64: skipped)\n");
#endif
}

/* ---- in le_logf ---- */

static char got[8][2048];

static void keep(const le_record *r, void *arg)
{
	int *i = arg;
	CHECK(*i < 8 && r->len < sizeof got[0]);
	memcpy(got[*i], r->payload, r->len);
	got[(*i)++][r->len] = '\0';
}

TEST(le_logf_records_what_snprintf_prints)
{
	char dir[256], want[2048];
	le_config c;
	le_engine *e;
	le_config_init(&c);
	c.dir = t_tmpdir(dir);
	c.durability = LE_SYNC_NONE;
	CHECK_RC(le_open(&e, &c));
	/* fast; declined; past le_logf's 512-byte buffer, both ways */
	CHECK_RC(le_logf(e, LE_INFO, "int %d double %f", -7, 2.5));
	CHECK_RC(le_logf(e, LE_INFO, "%g and %d", 1e-5, 3));
	CHECK_RC(le_logf(e, LE_INFO, "%-700d|%.3f", 12, 0.0005));
	CHECK_RC(le_logf(e, LE_INFO, "%-700e|%d", 1.5, 9));
	CHECK_RC(le_close(e));
	int n = 0;
	CHECK_EQ(read_all(dir, LE_RECOVER_ABSOLUTE, keep, &n), 4);
	snprintf(want, sizeof want, "int %d double %f", -7, 2.5);
	CHECK(strcmp(got[0], want) == 0);
	snprintf(want, sizeof want, "%g and %d", 1e-5, 3);
	CHECK(strcmp(got[1], want) == 0);
	snprintf(want, sizeof want, "%-700d|%.3f", 12, 0.0005);
	CHECK(strcmp(got[2], want) == 0);
	snprintf(want, sizeof want, "%-700e|%d", 1.5, 9);
	CHECK(strcmp(got[3], want) == 0);
	t_rmrf(dir);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	RUN(benchmark_format_is_not_left_to_vsnprintf);
	RUN(common_formats_are_not_left_to_vsnprintf);
	RUN(integer_flags_widths_precisions_match_glibc);
	RUN(integer_length_modifiers_match_glibc);
	RUN(integer_limits_and_zero_print_exactly);
	RUN(star_widths_and_precisions_match_glibc);
	RUN(strings_and_characters_match_glibc);
	RUN(pointers_match_glibc);
	RUN(percent_signs_and_plain_text_match_glibc);
	RUN(doubles_round_ties_half_to_even_like_glibc);
	RUN(doubles_near_decimal_boundaries_match_glibc);
	RUN(doubles_at_the_edges_match_glibc);
	RUN(fmt_f_prints_what_snprintf_prints);
	RUN(dec_fixed_writes_every_width_exactly);
	RUN(double_flags_and_widths_match_glibc);
	RUN(doubles_are_declined_only_where_documented);
	RUN(random_doubles_match_glibc);
	RUN(truncation_at_every_cap_matches_glibc);
	RUN(random_formats_match_glibc);
	RUN(unhandled_conversions_are_declined_and_left_to_vsnprintf);
	RUN(rounding_mode_other_than_nearest_is_left_to_vsnprintf);
	RUN(le_logf_records_what_snprintf_prints);
	return t_done();
}
