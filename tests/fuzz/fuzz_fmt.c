/*
 * fuzz_fmt.c -- libFuzzer target for le__vfmt (src/base/fmt.c), le_logf's
 * formatter, against glibc's snprintf.
 *
 * Input layout: the choices tests/unit/fmt_gen.h reads to build printf
 * cases (one byte for a small choice, eight for a value, zeros past the
 * end), one case after another while bytes remain, at most 16; after each
 * case the capacity: one byte, the whole buffer unless it is a multiple
 * of 4, and then one more byte for a capacity of 0-79.  A case is
 * a conversion with random flags, width, precision, length and '*'
 * arguments between literal text; six conversions in a row; a conversion
 * le__vfmt must refuse; or up to three conversions of random printf bytes.
 *
 * Invariants (abort() on violation, so libFuzzer keeps the input):
 *   - when le__vfmt accepts a case, its return value and every byte of
 *     the buffer (marker bytes past the output included) equal snprintf's;
 *   - when it declines, le__vsnprintf's equal snprintf's;
 *   - a conversion with ' I $ q L Z in it, or a trailing '%', is declined.
 *
 * A case whose output passes LONG_OUT bytes (a width near 2^20, le__vfmt's
 * limit) is not compared: glibc pads it a few bytes at a time, a
 * millisecond for each, and a corpus keeps such inputs for their rare
 * branches, until they take most of the time.  test_fmt checks those
 * widths on both sides of the limit.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../unit/fmt_gen.h"

#define LONG_OUT (64u << 10)

/* Output past LONG_OUT: by le__vfmt's count (cap 0 writes nothing), or
 * a '*' width too large for it, which glibc would then pad. */
static int long_output(const struct fmt_case *c)
{
	char none[1];
	if (c->kind == FG_JUNK)
		return 0; /* declined, and glibc is not asked */
	int n = fg_call(le__vfmt, none, 0, c);
	if (n != LE__FMT_UNHANDLED)
		return n > (int)LONG_OUT;
	for (int i = 0; c->kind == FG_ONE && i < c->arg[0].nstar; i++)
		if (c->arg[0].star[i] > (int)LONG_OUT ||
		    c->arg[0].star[i] < -(int)LONG_OUT)
			return 1;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fg_src r = {.p = data, .n = size};
	struct fmt_case c;
	char why[1024];

	for (int i = 0; i < 16 && r.n; i++) {
		fg_case(&r, &c);
		size_t cap = fg_below(&r, 4) ? FG_BUF : fg_below(&r, 80);
		if (long_output(&c))
			continue;
		if (fg_check(&c, cap, why, sizeof why) < 0) {
			fprintf(stderr, "fuzz_fmt: %s\n", why);
			abort();
		}
	}
	return 0;
}
