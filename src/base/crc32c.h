/*
 * crc32c.h -- CRC-32C (Castagnoli, polynomial 0x1EDC6F41, reflected 0x82F63B78).
 *
 * le__crc32c_extend() picks, once, the fastest implementation the CPU has:
 * the SSE4.2 crc32 instruction on x86-64, the CRC extension on arm64, or a
 * portable slicing-by-8 table.  All three give identical results; the unit
 * tests check each against the RFC 3720 (iSCSI) B.4 vectors.
 */
#ifndef LE_CRC32C_H
#define LE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* crc of buf continuing from crc (start with 0). */
uint32_t le__crc32c_extend(uint32_t crc, const void *buf, size_t len);

/* The portable implementation, always available (tests compare). */
uint32_t le__crc32c_sw(uint32_t crc, const void *buf, size_t len);

/* The hardware implementation, or NULL when the CPU lacks it. */
typedef uint32_t (*le__crc32c_fn)(uint32_t, const void *, size_t);
le__crc32c_fn le__crc32c_hw(void);

/* Most buffers le__crc32c_multi takes at once. */
#define LE_CRC_WAYS 8

/*
 * For i < n (n <= LE_CRC_WAYS): crc[i] = CRC of the 4 bytes of pre[i] (as
 * stored little-endian) followed by p[i][0 .. len[i]), continuing from
 * crc[i].  The crc32 instruction has a latency of three cycles and a
 * throughput of one a cycle (two on Zen 5), so one buffer keeps it a third
 * busy or less; eight independent buffers (eight frames of a batch) run
 * side by side over their common length.  The prefix word is a frame's size
 * word, which the CRC covers but which is not contiguous with the rest (the
 * crc word sits between).
 */
void le__crc32c_multi(uint32_t *crc, const uint32_t *pre,
                      const unsigned char *const *p, const size_t *len,
                      int n);

/*
 * The same for LE_CRC_WAYS buffers of one length and one prefix, evenly
 * spaced: buffer i is p + i * stride (the writer's frames of one size,
 * back to back).  Every address then comes from two pointers and the
 * stride, so the eight chains, the pointers and the loop bound all stay in
 * registers, where le__crc32c_multi's array of pointers does not fit.
 * Each crc[i] starts from 0.  @return 1, or 0 when the CPU has no crc32
 * instruction (crc untouched: use le__crc32c_multi).
 */
int le__crc32c_strided(uint32_t *crc, uint32_t pre, const unsigned char *p,
                       ptrdiff_t stride, size_t len);

/* Name of the implementation in use: "sse4.2", "armv8-crc" or "software". */
const char *le__crc32c_impl(void);

/*
 * Stored CRCs are masked, as LevelDB does, so that the CRC of a byte string
 * that itself contains embedded CRCs does not degenerate.
 */
static inline uint32_t le__crc_mask(uint32_t crc)
{
	return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

static inline uint32_t le__crc_unmask(uint32_t m)
{
	uint32_t rot = m - 0xa282ead8u;
	return (rot >> 17) | (rot << 15);
}

#endif
