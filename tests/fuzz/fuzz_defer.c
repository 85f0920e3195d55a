/*
 * fuzz_defer.c -- libFuzzer target for the decoder of deferred records
 * (src/record/defer.c; docs/FORMAT.md, "Deferred records"): the payload of a
 * segment's deferred frame, its descriptor and its argument block.
 *
 * Input layout: byte 0 the capacity of the text (1-127, or the whole
 * buffer when bit 7 is set); byte 1 picks one of FORMATS, the descriptor
 * used when the payload carries none; the rest is the payload as a
 * segment holds it: u32 R, the descriptor when R has bit 31, the
 * argument block.
 *
 * Invariants (abort() on violation, so libFuzzer keeps the input):
 *   - the decoder reads no byte outside the input (ASan) and writes none
 *     outside the text's capacity (a guard zone of marker bytes);
 *   - a text it makes is NUL-terminated at min(length, cap - 1);
 *   - a payload it refuses says why.
 * The seeds are payloads the encoder made (mkcorpus.c); that their text
 * is snprintf's is tests/unit/test_deferred.c's corpus check.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record/defer.h"
#include "record/format.h"

#define BUF 4096
#define GUARD 64

static const char *const FORMATS[] = {
	"Logging int: %d, int: %d, double: %f",
	"%s|%10s|%-10s|%.2s|%.*s|%*.*s|%s",
	"%p %lld %lu %hhd %hd %zu %c %%",
	"%+08.3e %-#12x %G %a %.0f % i",
	"plain",
};
#define NFORMATS (sizeof FORMATS / sizeof FORMATS[0])

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char out[BUF + GUARD];
	unsigned char d[512];
	uint32_t ref;
	const unsigned char *desc, *args;
	size_t dlen, alen;
	const char *why = NULL;
	le__desc de;

	if (size < 2)
		return 0;
	size_t cap = (data[0] & 0x80) ? BUF : (data[0] & 0x7f) + 1u;
	const char *f = FORMATS[data[1] % NFORMATS];
	/* the payload in a buffer of its own size, so ASan sees overreads */
	size_t plen = size - 2;
	unsigned char *p = malloc(plen ? plen : 1);
	memcpy(p, data + 2, plen);
	if (le__defer_split_seg(p, plen, &ref, &desc, &dlen, &args, &alen,
	                        &why) < 0) {
		if (!why)
			abort();
		free(p);
		return 0;
	}
	if (desc) {
		if (!le__desc_decode(desc, dlen, &de, &why))
			abort(); /* split_seg decoded it */
	} else {
		size_t n = le__desc_encode(d, sizeof d, LE_INFO, 1, f,
		                           strlen(f), "f.c", 3);
		if (!n || le__desc_decode(d, n, &de, &why) != n)
			abort();
	}
	memset(out, 0x5a, sizeof out);
	why = NULL;
	long n = le__defer_text(&de, args, alen, out, cap, &why);
	if (n < 0 && !why)
		abort();
	if (n >= 0) {
		size_t end = (size_t)n < cap - 1 ? (size_t)n : cap - 1;
		if (out[end] != 0)
			abort();
	}
	for (size_t i = cap; i < sizeof out; i++)
		if (out[i] != 0x5a)
			abort();
	free(p);
	return 0;
}
