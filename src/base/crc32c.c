/*
 * crc32c.c -- CRC-32C, hardware when the CPU has it, tables otherwise.
 *
 * The software path is slicing-by-8: eight 256-entry tables built once,
 * eight input bytes per step.  The hardware paths use the crc32 instruction
 * on 8 bytes at a time; the instruction computes exactly the reflected
 * Castagnoli CRC with no pre/post inversion, so we invert around it as the
 * table path does.  Selection happens on first use (a benign race: every
 * thread computes the same answer and stores the same pointer).
 */
#include "base/crc32c.h"

#include <stdatomic.h>
#include <string.h>

#define POLY 0x82f63b78u

static uint32_t table[8][256];
static atomic_int table_ready;

static void table_init(void)
{
	for (uint32_t n = 0; n < 256; n++) {
		uint32_t c = n;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ POLY : c >> 1;
		table[0][n] = c;
	}
	for (uint32_t n = 0; n < 256; n++)
		for (int k = 1; k < 8; k++)
			table[k][n] = (table[k - 1][n] >> 8) ^
			              table[0][table[k - 1][n] & 0xff];
	atomic_store_explicit(&table_ready, 1, memory_order_release);
}

uint32_t le__crc32c_sw(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;

	if (!atomic_load_explicit(&table_ready, memory_order_acquire))
		table_init(); /* idempotent: same values from every thread */
	crc = ~crc;
	while (len && ((uintptr_t)p & 7)) {
		crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xff];
		len--;
	}
	while (len >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		w ^= crc; /* little-endian: low 4 bytes meet the crc */
		crc = table[7][w & 0xff] ^ table[6][(w >> 8) & 0xff] ^
		      table[5][(w >> 16) & 0xff] ^ table[4][(w >> 24) & 0xff] ^
		      table[3][(w >> 32) & 0xff] ^ table[2][(w >> 40) & 0xff] ^
		      table[1][(w >> 48) & 0xff] ^ table[0][w >> 56];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xff];
	return ~crc;
}

#if defined(__x86_64__)
#include <cpuid.h>
#include <nmmintrin.h>

/* Unaligned 8-byte loads cost nothing extra on x86-64, so there is no
 * byte-wise prologue: frames start at any offset, and a prologue of up to 7
 * dependent crc32b steps was a third of the cost of a 150-byte frame. */
__attribute__((target("sse4.2")))
static uint32_t crc_hw(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;
	uint64_t c = ~crc;

	while (len >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		c = _mm_crc32_u64(c, w);
		p += 8;
		len -= 8;
	}
	uint32_t c32 = (uint32_t)c;
	if (len & 4) {
		uint32_t w;
		memcpy(&w, p, 4);
		c32 = _mm_crc32_u32(c32, w);
		p += 4;
	}
	if (len & 2) {
		uint16_t w;
		memcpy(&w, p, 2);
		c32 = _mm_crc32_u16(c32, w);
		p += 2;
	}
	if (len & 1)
		c32 = _mm_crc32_u8(c32, *p);
	return ~c32;
}

/* Frames [0, N) over their first m bytes, side by side: N independent
 * chains of crc32 instructions (N is a constant where it is inlined, so
 * the chains live in registers).  @return the bytes done, m rounded down
 * to 8. */
__attribute__((target("sse4.2"), always_inline)) static inline size_t
side_by_side(uint64_t *c, const unsigned char *const *p, size_t m, const int N)
{
	uint64_t x[LE_CRC_WAYS];
	size_t o = 0;

#pragma GCC unroll 8
	for (int i = 0; i < N; i++)
		x[i] = c[i];
	for (; o + 8 <= m; o += 8) {
#pragma GCC unroll 8
		for (int i = 0; i < N; i++) {
			uint64_t w;
			memcpy(&w, p[i] + o, 8);
			x[i] = _mm_crc32_u64(x[i], w);
		}
	}
#pragma GCC unroll 8
	for (int i = 0; i < N; i++)
		c[i] = x[i];
	return o;
}

__attribute__((target("sse4.2")))
static void multi_hw(uint32_t *crc, const uint32_t *pre,
                     const unsigned char *const *p, const size_t *len, int n)
{
	size_t m = len[0], o = 0;
	uint64_t c[LE_CRC_WAYS];
	int same = 1;

	if (n > 4 && n < LE_CRC_WAYS) { /* a batch's last frames */
		multi_hw(crc, pre, p, len, 4);
		multi_hw(crc + 4, pre + 4, p + 4, len + 4, n - 4);
		return;
	}
	for (int i = 0; i < n; i++) {
		c[i] = _mm_crc32_u32(~crc[i], pre[i]);
		if (len[i] < m)
			m = len[i];
	}
	for (int i = 0; i < n; i++)
		same &= len[i] == m;
	/* The instruction's latency is three cycles and recent cores issue
	 * one or two a cycle, so it takes three to six independent chains
	 * to keep it busy: eight frames at once cover both. */
	if (n == LE_CRC_WAYS)
		o = side_by_side(c, p, m, LE_CRC_WAYS);
	else if (n == 4)
		o = side_by_side(c, p, m, 4);
	/* All of one length (the writer's usual case: records of one size)
	 * finish their last < 8 bytes side by side, inline: a crc_hw call per
	 * frame for its tail cost as much as the main loop (put + seal of a
	 * 156-byte frame in L1: 58-68 TSC cycles that way, 38-45 this way). */
	if ((n == 4 || n == LE_CRC_WAYS) && same) {
		for (int i = 0; i < n; i++) {
			uint32_t d = (uint32_t)c[i], w;
			size_t k = o;
			if (m - k >= 4) {
				memcpy(&w, p[i] + k, 4);
				d = _mm_crc32_u32(d, w);
				k += 4;
			}
			for (; k < m; k++)
				d = _mm_crc32_u8(d, p[i][k]);
			crc[i] = ~d;
		}
		return;
	}
	for (int i = 0; i < n; i++)
		crc[i] = crc_hw(~(uint32_t)c[i], p[i] + o, len[i] - o);
}
#define HAVE_MULTI_HW 1

static inline uint64_t ld64(const unsigned char *p)
{
	uint64_t w;
	memcpy(&w, p, 8);
	return w;
}

static inline uint32_t ld32(const unsigned char *p)
{
	uint32_t w;
	memcpy(&w, p, 4);
	return w;
}

static inline uint16_t ld16(const unsigned char *p)
{
	uint16_t w;
	memcpy(&w, p, 2);
	return w;
}

/* Eight chains over a and b = a + 4 * s, each at a, a + s, a + 2s, a + 3s:
 * the four offsets are addressing modes of two pointers, so nothing is
 * reloaded or spilled in the loop (8 chains + 5 registers of 16). */
__attribute__((target("sse4.2")))
static void strided_hw(uint32_t *crc, uint32_t pre, const unsigned char *a,
                       ptrdiff_t s, size_t len)
{
	const ptrdiff_t s3 = 3 * s;
	const unsigned char *b = a + 4 * s, *end = a + (len & ~(size_t)7);
	uint64_t c = _mm_crc32_u32(~0u, pre);
	uint64_t x0 = c, x1 = c, x2 = c, x3 = c, x4 = c, x5 = c, x6 = c, x7 = c;

	for (; a < end; a += 8, b += 8) {
		x0 = _mm_crc32_u64(x0, ld64(a));
		x1 = _mm_crc32_u64(x1, ld64(a + s));
		x2 = _mm_crc32_u64(x2, ld64(a + 2 * s));
		x3 = _mm_crc32_u64(x3, ld64(a + s3));
		x4 = _mm_crc32_u64(x4, ld64(b));
		x5 = _mm_crc32_u64(x5, ld64(b + s));
		x6 = _mm_crc32_u64(x6, ld64(b + 2 * s));
		x7 = _mm_crc32_u64(x7, ld64(b + s3));
	}
	/* The last len % 8 bytes, every chain at once: one test each, not
	 * one per chain. */
	uint64_t x[LE_CRC_WAYS] = {x0, x1, x2, x3, x4, x5, x6, x7};
	size_t o = 0;
	len &= 7;
	if (len & 4) {
#pragma GCC unroll 8
		for (int i = 0; i < LE_CRC_WAYS; i++)
			x[i] = _mm_crc32_u32((uint32_t)x[i], ld32(a + i * s));
		o = 4;
	}
	if (len & 2) {
#pragma GCC unroll 8
		for (int i = 0; i < LE_CRC_WAYS; i++)
			x[i] = _mm_crc32_u16((uint32_t)x[i], ld16(a + i * s + o));
		o += 2;
	}
	if (len & 1) {
#pragma GCC unroll 8
		for (int i = 0; i < LE_CRC_WAYS; i++)
			x[i] = _mm_crc32_u8((uint32_t)x[i], a[i * s + (ptrdiff_t)o]);
	}
	for (int i = 0; i < LE_CRC_WAYS; i++)
		crc[i] = ~(uint32_t)x[i];
}

static int hw_present(void)
{
	unsigned a, b, c, d;
	if (!__get_cpuid(1, &a, &b, &c, &d))
		return 0;
	return (c & bit_SSE4_2) != 0;
}
#define HW_NAME "sse4.2"

#elif defined(__aarch64__)
#include <arm_acle.h>
#include <sys/auxv.h>
#ifndef HWCAP_CRC32
#define HWCAP_CRC32 (1 << 7)
#endif

__attribute__((target("+crc")))
static uint32_t crc_hw(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;
	uint32_t c = ~crc;

	while (len && ((uintptr_t)p & 7)) {
		c = __crc32cb(c, *p++);
		len--;
	}
	while (len >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		c = __crc32cd(c, w);
		p += 8;
		len -= 8;
	}
	while (len--)
		c = __crc32cb(c, *p++);
	return ~c;
}

static int hw_present(void)
{
	return (getauxval(AT_HWCAP) & HWCAP_CRC32) != 0;
}
#define HW_NAME "armv8-crc"
#endif

le__crc32c_fn le__crc32c_hw(void)
{
#ifdef HW_NAME
	if (hw_present())
		return crc_hw;
#endif
	return NULL;
}

static _Atomic(le__crc32c_fn) impl;

static le__crc32c_fn pick(void)
{
	le__crc32c_fn f = le__crc32c_hw();
	if (!f)
		f = le__crc32c_sw;
	atomic_store_explicit(&impl, f, memory_order_relaxed);
	return f;
}

uint32_t le__crc32c_extend(uint32_t crc, const void *buf, size_t len)
{
	le__crc32c_fn f = atomic_load_explicit(&impl, memory_order_relaxed);
	if (!f)
		f = pick();
	return f(crc, buf, len);
}

void le__crc32c_multi(uint32_t *crc, const uint32_t *pre,
                      const unsigned char *const *p, const size_t *len,
                      int n)
{
#ifdef HAVE_MULTI_HW
	if (atomic_load_explicit(&impl, memory_order_relaxed) == crc_hw) {
		multi_hw(crc, pre, p, len, n);
		return;
	}
#endif
	for (int i = 0; i < n; i++) {
		unsigned char b[4] = {(unsigned char)pre[i],
		                      (unsigned char)(pre[i] >> 8),
		                      (unsigned char)(pre[i] >> 16),
		                      (unsigned char)(pre[i] >> 24)};
		crc[i] = le__crc32c_extend(crc[i], b, 4);
		crc[i] = le__crc32c_extend(crc[i], p[i], len[i]);
	}
}

int le__crc32c_strided(uint32_t *crc, uint32_t pre, const unsigned char *p,
                       ptrdiff_t stride, size_t len)
{
#ifdef HAVE_MULTI_HW
	_Static_assert(LE_CRC_WAYS == 8, "strided_hw runs eight chains");
	if (atomic_load_explicit(&impl, memory_order_relaxed) == crc_hw) {
		strided_hw(crc, pre, p, stride, len);
		return 1;
	}
#else
	(void)crc, (void)pre, (void)p, (void)stride, (void)len;
#endif
	return 0;
}

const char *le__crc32c_impl(void)
{
#ifdef HW_NAME
	if (le__crc32c_hw())
		return HW_NAME;
#endif
	return "software";
}
