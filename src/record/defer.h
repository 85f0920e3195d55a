/*
 * defer.h -- deferred records: a call site's descriptor (its format, file,
 * line, level) and its arguments copied raw, made into text later.  The
 * byte layouts are in docs/FORMAT.md, "Deferred records":
 *
 *   descriptor   u16 D | u8 version | u8 level | u32 line | u16 F | u16 N
 *                | format (F) | file (N)                   D = 12 + F + N
 *   arguments    per conversion: [i32 *width] [i32 *prec] value
 *                value: i32 (d i u o x X c; none/hh/h), i64 (l ll j z t),
 *                f64 (f F e E g G a A), u64 (p),
 *                u32 L + L bytes (s; L = 0xffffffff: NULL)
 *   queue slot   [field block] u32 site number, arguments
 *   segment      [field block] u32 R, [descriptor when R has bit 31],
 *                arguments; R without bit 31: the offset of the frame in
 *                the same segment that holds the descriptor
 *
 * This file is the codec only: the plan a call site's format compiles to,
 * the capture of a va_list into an argument block, and the text of a
 * descriptor and a block.  No engine state; sites.c registers call sites,
 * submit.c captures, the sinks and readers make the text.
 */
#ifndef LE_DEFER_H
#define LE_DEFER_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/fmt.h"
#include "logengine.h"

#define LE_DESC_VERSION 1
#define LE_DESC_FIXED 12
#define LE_DESC_MAX 65535u
#define LE_DEFER_INLINE 0x80000000u  /* R: a descriptor follows */
#define LE_DEFER_NULLSTR 0xffffffffu /* %s of a NULL pointer */

/* What the hot path does with each argument, in order (le__dplan.op). */
enum {
	LE_OP_I32 = 1, /* int: 4 bytes (a '*' too) */
	LE_OP_I64,     /* long, long long, size_t ...: 8 bytes */
	LE_OP_F64,     /* double: 8 bytes */
	LE_OP_PTR,     /* void *: 8 bytes */
	LE_OP_STR,     /* char *: u32 length, bytes to the NUL */
	LE_OP_STRP,    /* the same, at most prec[i] bytes */
	LE_OP_STRSP,   /* the same, at most the '*' precision just before */
	LE_OP_STAR     /* a '*' width or precision: an int, 4 bytes, of at
	                  most LE_DEFER_FIELD_MAX either way */
};
/* A '*' past this formats at the call: far past any record's room, and
 * glibc would count out every byte of it. */
#define LE_DEFER_FIELD_MAX (1 << 20)

/* A call site's compiled format: lives in its le__dsite's priv_ words. */
typedef struct le__dplan {
	uint8_t nops;
	uint8_t op[LE_DEFER_ARGS_MAX];
	uint8_t fixed_only; /* no string, no '*': the block is `fixed`
	                       bytes whatever the values (le__dargs_copy) */
	uint8_t pad_[2];
	int32_t prec[LE_DEFER_ARGS_MAX]; /* LE_OP_STRP: the precision */
	uint32_t fixed;  /* argument bytes not counting string bytes */
	uint32_t dlen;   /* bytes of the site's descriptor (sites.c sets
	                    it): a segment's frame may carry it */
} le__dplan;

/*
 * Compile fmt into a plan, checking it against the kinds of the arguments
 * the call passes (LE_K_*, from _Generic in the macros; NULL: not
 * checked).  @return 0, or -1 when the call must be formatted at once: a
 * conversion outside "Deferred records", more than LE_DEFER_ARGS_MAX
 * arguments, or an argument whose kind is not the one the conversion
 * reads.
 */
int le__dplan_make(le__dplan *p, const char *fmt, const uint8_t *kinds,
                   int nkinds);

/*
 * Capture: read the plan's arguments from ap into v (their values) and
 * the strings' pointers and lengths (at most max bytes each).
 * @return the argument block's bytes, or SIZE_MAX past `max` in all or
 * for a '*' above LE_DEFER_FIELD_MAX.
 */
typedef struct le__dargs {
	uint64_t v[LE_DEFER_ARGS_MAX];
	uint32_t len[LE_DEFER_ARGS_MAX];
} le__dargs;
size_t le__dargs_read(const le__dplan *p, le__dargs *a, va_list ap,
                      size_t max);
/* Write the block le__dargs_read measured at out.  @return its bytes. */
size_t le__dargs_put(const le__dplan *p, const le__dargs *a,
                     unsigned char *out);
/* A fixed_only plan's block straight from ap into out (p->fixed bytes):
 * one pass, no copy in between. */
static inline void le__dargs_copy(const le__dplan *p, va_list ap,
                                  unsigned char *out)
{
	for (unsigned i = 0; i < p->nops; i++) {
		uint64_t v;
		switch (p->op[i]) {
		case LE_OP_I32: {
			uint32_t x = (uint32_t)va_arg(ap, int);
			memcpy(out, &x, 4); /* little-endian hosts only: sites.c */
			out += 4;
			continue;
		}
		case LE_OP_I64:
			v = (uint64_t)va_arg(ap, long long);
			break;
		case LE_OP_F64: {
			double d = va_arg(ap, double);
			memcpy(&v, &d, 8);
			break;
		}
		default:
			v = (uint64_t)(uintptr_t)va_arg(ap, void *);
		}
		memcpy(out, &v, 8);
		out += 8;
	}
}

/* Encode a descriptor at out (cap bytes).  @return D, or 0 when it
 * exceeds cap or LE_DESC_MAX. */
size_t le__desc_encode(unsigned char *out, size_t cap, int level, int line,
                       const char *fmt, size_t flen, const char *file,
                       size_t nlen);

typedef struct le__desc {
	int level;
	uint32_t line;
	const char *fmt, *file;
	size_t flen, nlen;
} le__desc;

/* Decode the descriptor at p (avail bytes).  @return D, or 0 when it does
 * not decode (*why). */
size_t le__desc_decode(const unsigned char *p, size_t avail, le__desc *d,
                       const char **why);

/*
 * The text of a descriptor and an argument block, as snprintf makes it of
 * the format and those arguments: at most cap - 1 bytes and a NUL at out
 * (cap >= 1).  @return the text's whole length (more than cap - 1: cut),
 * or -1 when the block does not match the format (*why).
 */
long le__defer_text(const le__desc *d, const unsigned char *args,
                    size_t alen, char *out, size_t cap, const char **why);

/*
 * A descriptor's format compiled once (le__dtext_make), so that a reader
 * makes each record's text from its argument block without parsing the
 * format again nor a printf call per argument (le__dtext_run): literal
 * runs copied, bare %d %i %u %s written inline, a double's %f %F with no
 * flag nor width by le__fmt_f, the other conversions through
 * le__fspec_put.  The same bytes as le__defer_text, which remains
 * the reference: whatever the compiled form does not cover, it makes.
 */
#define LE_DTEXT_CONVS 24
typedef struct le__dtext {
	const char *fmt;       /* the descriptor's format, flen bytes: the
	                          literal text (it outlives this) */
	size_t flen;
	uint32_t n;            /* conversions in c[] */
	uint32_t tail;         /* literal text after the last: fmt[tail..) */
	struct le__dtconv {
		uint32_t lit, lit_len; /* literal before it, in fmt */
		uint8_t type;          /* defer.c's T_* */
		uint8_t wstar, pstar;  /* '*' width, '.*' precision */
		uint8_t bare;          /* no flag, width nor precision;
		                          2: and an int's %d %i, 3: %u;
		                          4: a double's %f %F, no flag
		                          nor width */
		le__fspec sp;
	} c[LE_DTEXT_CONVS];
	int pad;               /* fmt may be read LE_DTEXT_PAD bytes past
	                          its end (the caller's copy has them) */
	uint32_t most;         /* the longest text when every conversion is
	                          an int's or a double's bare one (0: not
	                          so), from exactly `need` argument bytes */
	uint32_t need;
} le__dtext;
#define LE_DTEXT_PAD 32

/* Compile d's format into t.  @return 0, or -1 when le__defer_text must
 * make its texts: a conversion records cannot take or le__vfmt leaves to
 * vsnprintf, or more than LE_DTEXT_CONVS conversions. */
int le__dtext_make(le__dtext *t, const le__desc *d);

/* The text of the argument block args[0..alen) by t, at out (cap bytes,
 * NUL-terminated).  @return its length, or -1 when le__defer_text must
 * make it: the block does not match the format (its error says how), the
 * text does not fit in cap - 1 bytes, or a value le__vfmt leaves to
 * vsnprintf. */
long le__dtext_run(const le__dtext *t, const unsigned char *args,
                   size_t alen, char *out, size_t cap);

/*
 * The parts of a deferred payload (after any field block): in a segment
 * (R, the inline descriptor, the arguments) or in a queue slot (the site
 * number, the arguments).  @return 0 or -1 (*why).
 */
int le__defer_split_seg(const unsigned char *p, size_t len, uint32_t *ref,
                        const unsigned char **desc, size_t *dlen,
                        const unsigned char **args, size_t *alen,
                        const char **why);

/*
 * Readers (defer_read.c): the text of deferred frames of one shard's
 * segments, with the descriptors found so far in the current segment
 * (keyed by the offset of the frame that holds each) and the buffer the
 * text is made in.  Owned by one reader cursor; le__dcache_free releases
 * it.
 */
typedef struct le__dcache {
	uint64_t seg;             /* segment index + 1 the entries are of */
	struct le__dent {
		uint32_t off;     /* frame offset + 1; 0: empty */
		uint32_t len;
		unsigned char *d;
		le__dtext *t;     /* d's format compiled, owned; NULL:
		                     not yet, or (dt < 0) it cannot be */
		int dt;
	} *e;
	size_t cap, n;            /* entries (a power of two), in use */
	char *text;
	size_t text_cap;
	unsigned char *frame;     /* a frame read back for its descriptor */
	size_t frame_cap;
} le__dcache;

/*
 * The text of the deferred payload p[0..len) (after any field block) of
 * the frame at offset `at` of segment `seg` (index), whose file is fd
 * (version and fields from its header): *text (valid until the next call)
 * and its length; LE_REC_TRUNCATED in *flags when cut to
 * LE_MAX_RECORD_LIMIT.  @return the length, or -1 when the frame does not
 * decode (*why; *text then says so: "[undecodable deferred record: why]").
 */
long le__dcache_text(le__dcache *c, int fd, uint64_t seg, uint32_t version,
                     uint32_t fields, uint64_t at, const unsigned char *p,
                     size_t len, const char **text, uint32_t *flags,
                     const char **why);
/* The descriptor the deferred frame at `off` of segment `seg` (open as
 * fd) carries, kept in c; NULL (*why) when that frame holds none. */
const unsigned char *le__dcache_desc(le__dcache *c, int fd, uint64_t seg,
                                    uint32_t version, uint32_t fields,
                                    uint32_t off, size_t *dlen,
                                    const char **why);
void le__dcache_free(le__dcache *c);

#endif
