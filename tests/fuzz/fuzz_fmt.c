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
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../unit/fmt_gen.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fg_src r = {.p = data, .n = size};
	struct fmt_case c;
	char why[1024];

	for (int i = 0; i < 16 && r.n; i++) {
		fg_case(&r, &c);
		size_t cap = fg_below(&r, 4) ? FG_BUF : fg_below(&r, 80);
		if (fg_check(&c, cap, why, sizeof why) < 0) {
			fprintf(stderr, "fuzz_fmt: %s\n", why);
			abort();
		}
	}
	return 0;
}
