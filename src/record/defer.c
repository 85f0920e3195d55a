/*
 * defer.c -- the codec of deferred records (defer.h; docs/FORMAT.md,
 * "Deferred records").
 *
 * One parser reads a format for both sides: le__dplan_make (once per call
 * site, when it first logs) compiles it to the list of argument reads the
 * hot path makes, and le__defer_text (in the writer, in readers) walks it
 * again beside the argument block.  The text of each conversion is made
 * by le__vsnprintf (fmt.c) from the conversion's own bytes and the value
 * read back, so it is snprintf's text by construction: the parser decides
 * only how many bytes each argument takes, never how it prints.  The one
 * rewrite is %s, whose bytes are not NUL-terminated in the block: its
 * precision becomes ".*" with the stored length (never more than the
 * precision asked, so the same bytes print).
 *
 * The decoder trusts nothing: every length is checked against the bytes
 * that exist before it is used (tests/fuzz/fuzz_defer.c).  Readers find
 * a frame's descriptor in its segment with defer_read.c.
 */
#define _GNU_SOURCE
#include "record/defer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fmt.h"
#include "record/format.h"
#include "base/os.h"
#include "record/rec.h"

#define SPEC_MAX 48   /* a conversion's bytes, rebuilt: flags, width, prec */
#define FLAGS_MAX 8   /* flag bytes in one conversion */
#define DIGITS_MAX 7  /* digits of a width or precision */
#define FIELD_MAX LE_DEFER_FIELD_MAX /* larger ones format at the call */

enum { T_PCT = 0, T_I32, T_I64, T_F64, T_PTR, T_STR };

/* One conversion, as the parser read it. */
struct conv {
	size_t start, end;   /* fmt[start] == '%' .. past the conversion */
	size_t flags_end;    /* past the flags */
	size_t width_end;    /* past the width */
	int wstar, pstar;    /* '*' width, '.*' precision */
	int prec;            /* -1: none; else the literal precision */
	int type;            /* T_* */
};

static int is_flag(char c)
{
	return c == '-' || c == '+' || c == ' ' || c == '#' || c == '0';
}

static int digits(const char *f, size_t n, size_t *i, int *out)
{
	int v = 0, k = 0;
	while (*i < n && f[*i] >= '0' && f[*i] <= '9') {
		if (++k > DIGITS_MAX)
			return -1;
		v = v * 10 + (f[(*i)++] - '0');
	}
	if (v > FIELD_MAX)
		return -1;
	*out = v;
	return k;
}

/* The conversion's type from its length modifier and letter, or -1. */
static int conv_type(const char *lm, size_t lml, char c)
{
	int none = lml == 0, ln = lml == 1 && lm[0] == 'l';
	int small = none || (lml == 1 && lm[0] == 'h') ||
	            (lml == 2 && lm[0] == 'h' && lm[1] == 'h');
	int wide = ln || (lml == 2 && lm[0] == 'l' && lm[1] == 'l') ||
	           (lml == 1 && (lm[0] == 'j' || lm[0] == 'z' || lm[0] == 't'));

	switch (c) {
	case 'd': case 'i': case 'u': case 'o': case 'x': case 'X':
		return small ? T_I32 : wide ? T_I64 : -1;
	case 'c':
		return none ? T_I32 : -1;
	case 's':
		return none ? T_STR : -1;
	case 'p':
		return none ? T_PTR : -1;
	case 'f': case 'F': case 'e': case 'E': case 'g': case 'G':
	case 'a': case 'A':
		return none || ln ? T_F64 : -1;
	}
	return -1;
}

/*
 * The next conversion at or after *pos in f[0..n): 1 (c filled, *pos past
 * it; the literal text is f[old *pos .. c->start)), 0 at the end (no
 * conversion left), -1 for one deferred records do not take.
 */
static int conv_next(const char *f, size_t n, size_t *pos, struct conv *c)
{
	const char *pc = memchr(f + *pos, '%', n - *pos);
	if (!pc)
		return 0;
	size_t i = (size_t)(pc - f) + 1;
	memset(c, 0, sizeof *c);
	c->start = i - 1;
	c->prec = -1;
	if (i < n && f[i] == '%') {
		c->type = T_PCT;
		c->end = c->flags_end = c->width_end = i + 1;
		*pos = i + 1;
		return 1;
	}
	int k = 0, v;
	while (i < n && is_flag(f[i])) {
		if (++k > FLAGS_MAX)
			return -1;
		i++;
	}
	c->flags_end = i;
	if (i < n && f[i] == '*') {
		c->wstar = 1;
		i++;
	} else if (digits(f, n, &i, &v) < 0) {
		return -1;
	}
	c->width_end = i;
	if (i < n && f[i] == '.') {
		i++;
		if (i < n && f[i] == '*') {
			c->pstar = 1;
			i++;
		} else if (digits(f, n, &i, &c->prec) < 0) {
			return -1;
		}
	}
	size_t lm = i;
	while (i < n && i - lm < 2 &&
	       (f[i] == 'h' || f[i] == 'l' || f[i] == 'j' || f[i] == 'z' ||
	        f[i] == 't'))
		i++;
	if (i >= n)
		return -1;
	c->type = conv_type(f + lm, i - lm, f[i]);
	if (c->type < 0)
		return -1;
	c->end = i + 1;
	*pos = i + 1;
	return 1;
}

static int kind_ok(int op, int kind)
{
	switch (op) {
	case LE_OP_I32: case LE_OP_STAR: return kind == LE_K_I32;
	case LE_OP_I64: return kind == LE_K_I64;
	case LE_OP_F64: return kind == LE_K_F64;
	case LE_OP_PTR: return kind == LE_K_PTR || kind == LE_K_STR;
	}
	return kind == LE_K_STR; /* the string ops */
}

static int add_op(le__dplan *p, int op, int32_t prec)
{
	static const uint8_t bytes[] = {0, 4, 8, 8, 8, 4, 4, 4, 4};
	if (p->nops >= LE_DEFER_ARGS_MAX)
		return -1;
	p->prec[p->nops] = prec;
	p->op[p->nops++] = (uint8_t)op;
	p->fixed += bytes[op];
	return 0;
}

int le__dplan_make(le__dplan *p, const char *fmt, const uint8_t *kinds,
                   int nkinds)
{
	static const uint8_t op_of[] = {0, LE_OP_I32, LE_OP_I64, LE_OP_F64,
	                                LE_OP_PTR, LE_OP_STR};
	size_t n = strlen(fmt), pos = 0;
	struct conv c;
	int rc;

	memset(p, 0, sizeof *p);
	if (n > LE_DESC_MAX - LE_DESC_FIXED)
		return -1;
	while ((rc = conv_next(fmt, n, &pos, &c)) == 1) {
		if (c.type == T_PCT)
			continue;
		if ((c.wstar && add_op(p, LE_OP_STAR, 0) < 0) ||
		    (c.pstar && add_op(p, LE_OP_STAR, 0) < 0))
			return -1;
		int op = op_of[c.type];
		if (op == LE_OP_STR && c.pstar)
			op = LE_OP_STRSP;
		else if (op == LE_OP_STR && c.prec >= 0)
			op = LE_OP_STRP;
		if (add_op(p, op, c.prec) < 0)
			return -1;
	}
	if (rc < 0)
		return -1;
	p->fixed_only = 1;
	for (unsigned i = 0; i < p->nops; i++)
		if (p->op[i] != LE_OP_I32 && p->op[i] != LE_OP_I64 &&
		    p->op[i] != LE_OP_F64 && p->op[i] != LE_OP_PTR)
			p->fixed_only = 0;
	if (kinds) {
		if (nkinds != p->nops)
			return -1;
		for (int i = 0; i < nkinds; i++)
			if (!kind_ok(p->op[i], kinds[i]))
				return -1;
	}
	return 0;
}

size_t le__dargs_read(const le__dplan *p, le__dargs *a, va_list ap,
                      size_t max)
{
	size_t total = p->fixed;
	int32_t star = 0;

	for (unsigned i = 0; i < p->nops; i++) {
		const char *s;
		size_t lim = max;
		switch (p->op[i]) {
		case LE_OP_STAR:
			star = va_arg(ap, int);
			if (star > FIELD_MAX || star < -FIELD_MAX)
				return SIZE_MAX;
			a->v[i] = (uint32_t)star;
			continue;
		case LE_OP_I32:
			a->v[i] = (uint32_t)va_arg(ap, int);
			continue;
		case LE_OP_I64:
			a->v[i] = (uint64_t)va_arg(ap, long long);
			continue;
		case LE_OP_F64: {
			double d = va_arg(ap, double);
			memcpy(&a->v[i], &d, sizeof d);
			continue;
		}
		case LE_OP_PTR:
			a->v[i] = (uint64_t)(uintptr_t)va_arg(ap, void *);
			continue;
		case LE_OP_STRP:
			if ((size_t)p->prec[i] < lim)
				lim = (size_t)p->prec[i];
			break;
		case LE_OP_STRSP:
			if (star >= 0 && (size_t)star < lim)
				lim = (size_t)star;
			break;
		}
		s = va_arg(ap, const char *);
		a->v[i] = (uint64_t)(uintptr_t)s;
		if (!s) {
			a->len[i] = LE_DEFER_NULLSTR;
			continue;
		}
		/* one byte past max: a string longer than the record */
		size_t l = strnlen(s, lim < max ? lim : max + 1);
		a->len[i] = (uint32_t)l;
		total += l;
	}
	return total > max ? SIZE_MAX : total;
}

size_t le__dargs_put(const le__dplan *p, const le__dargs *a,
                     unsigned char *out)
{
	unsigned char *o = out;

	for (unsigned i = 0; i < p->nops; i++) {
		switch (p->op[i]) {
		case LE_OP_I32: case LE_OP_STAR:
			le__put32(o, (uint32_t)a->v[i]);
			o += 4;
			break;
		case LE_OP_I64: case LE_OP_F64: case LE_OP_PTR:
			le__put64(o, a->v[i]);
			o += 8;
			break;
		default:
			le__put32(o, a->len[i]);
			o += 4;
			if (a->len[i] != LE_DEFER_NULLSTR) {
				memcpy(o, (const void *)(uintptr_t)a->v[i],
				       a->len[i]);
				o += a->len[i];
			}
		}
	}
	return (size_t)(o - out);
}

size_t le__desc_encode(unsigned char *out, size_t cap, int level, int line,
                       const char *fmt, size_t flen, const char *file,
                       size_t nlen)
{
	size_t skip = nlen > 1024 ? nlen - 1024 : 0;
	nlen -= skip; /* the file name is for people: keep its end */
	size_t d = LE_DESC_FIXED + flen + nlen;
	if (d > cap || d > LE_DESC_MAX)
		return 0;
	le__put16(out, (uint16_t)d);
	out[2] = LE_DESC_VERSION;
	out[3] = (unsigned char)level;
	le__put32(out + 4, (uint32_t)line);
	le__put16(out + 8, (uint16_t)flen);
	le__put16(out + 10, (uint16_t)nlen);
	memcpy(out + LE_DESC_FIXED, fmt, flen);
	memcpy(out + LE_DESC_FIXED + flen, file + skip, nlen);
	return d;
}

size_t le__desc_decode(const unsigned char *p, size_t avail, le__desc *d,
                       const char **why)
{
	if (avail < LE_DESC_FIXED) {
		*why = "descriptor runs past the record";
		return 0;
	}
	size_t len = le__get16(p), flen = le__get16(p + 8),
	       nlen = le__get16(p + 10);
	if (len > avail || len != LE_DESC_FIXED + flen + nlen) {
		*why = "descriptor length does not add up";
		return 0;
	}
	if (p[2] != LE_DESC_VERSION || p[3] > LE_FATAL) {
		*why = "descriptor version or level unknown";
		return 0;
	}
	d->level = p[3];
	d->line = le__get32(p + 4);
	d->fmt = (const char *)p + LE_DESC_FIXED;
	d->flen = flen;
	d->file = d->fmt + flen;
	d->nlen = nlen;
	return len;
}

int le__defer_split_seg(const unsigned char *p, size_t len, uint32_t *ref,
                        const unsigned char **desc, size_t *dlen,
                        const unsigned char **args, size_t *alen,
                        const char **why)
{
	if (len < 4) {
		*why = "deferred record shorter than its reference";
		return -1;
	}
	*ref = le__get32(p);
	*desc = NULL;
	*dlen = 0;
	p += 4;
	len -= 4;
	if (*ref & LE_DEFER_INLINE) {
		le__desc d;
		size_t n = le__desc_decode(p, len, &d, why);
		if (!n)
			return -1;
		*desc = p;
		*dlen = n;
		p += n;
		len -= n;
	}
	*args = p;
	*alen = len;
	return 0;
}

/* ---- text ---- */

static int pf(char *o, size_t cap, const char *spec, ...)
{
	va_list ap;
	va_start(ap, spec);
	int n = le__vsnprintf(o, cap, spec, ap);
	va_end(ap);
	return n;
}

/* One conversion's text: spec with ns '*' values st[] before the value. */
#define PF(v)                                                                 \
	(ns == 0 ? pf(o, cap, spec, v)                                        \
	 : ns == 1 ? pf(o, cap, spec, st[0], v)                               \
	           : pf(o, cap, spec, st[0], st[1], v))

static int conv_text(char *o, size_t cap, const char *spec, int ns,
                     const int *st, int type, uint64_t v, const char *s)
{
	double d;
	switch (type) {
	case T_I32: return PF((int)(uint32_t)v);
	case T_I64: return PF((long long)v);
	case T_F64:
		memcpy(&d, &v, sizeof d);
		return PF(d);
	case T_PTR: return PF((void *)(uintptr_t)v);
	}
	return PF(s);
}
#undef PF

struct rd {
	const unsigned char *p;
	size_t left;
};

static int take(struct rd *r, size_t n, const unsigned char **out)
{
	if (r->left < n)
		return -1;
	*out = r->p;
	r->p += n;
	r->left -= n;
	return 0;
}

long le__defer_text(const le__desc *d, const unsigned char *args,
                    size_t alen, char *out, size_t cap, const char **why)
{
	const char *f = d->fmt;
	size_t n = d->flen, pos = 0, w = 0, total = 0;
	struct rd r = {args, alen};
	struct conv c;
	char spec[SPEC_MAX];
	int rc;

	out[0] = 0;
	for (;;) {
		size_t lit = pos;
		rc = conv_next(f, n, &pos, &c);
		size_t lend = rc == 1 ? c.start : n;
		if (rc < 0) {
			*why = "format holds a conversion records cannot";
			return -1;
		}
		/* literal text */
		size_t ll = lend - lit, room = cap - 1 - w;
		memcpy(out + w, f + lit, ll < room ? ll : room);
		w += ll < room ? ll : room;
		total += ll;
		if (rc == 0)
			break;
		if (c.type == T_PCT) {
			if (w < cap - 1)
				out[w++] = '%';
			total++;
			continue;
		}
		int st[2], ns = 0;
		const unsigned char *b;
		uint64_t v = 0;
		const char *s = NULL;
		for (int k = 0; k < c.wstar + c.pstar; k++) {
			if (take(&r, 4, &b) < 0)
				goto short_;
			st[ns] = (int)le__get32(b);
			if (st[ns] > FIELD_MAX || st[ns] < -FIELD_MAX) {
				*why = "a '*' width or precision out of range";
				return -1;
			}
			ns++;
		}
		size_t sl = (size_t)(c.width_end - c.start);
		if (c.type == T_STR) {
			if (take(&r, 4, &b) < 0)
				goto short_;
			uint32_t L = le__get32(b);
			if (L != LE_DEFER_NULLSTR) {
				if (take(&r, L, &b) < 0)
					goto short_;
				/* "%" flags width ".*s", the stored length as
				 * the precision */
				if (sl + 4 > SPEC_MAX)
					goto long_;
				memcpy(spec, f + c.start, sl);
				memcpy(spec + sl, ".*s", 4);
				ns = c.wstar;
				st[ns++] = (int)L;
				s = (const char *)b;
				goto emit;
			}
		} else {
			size_t k = c.type == T_I32 ? 4 : 8;
			if (take(&r, k, &b) < 0)
				goto short_;
			v = k == 4 ? le__get32(b) : le__get64(b);
		}
		if (c.end - c.start + 1 > SPEC_MAX)
			goto long_;
		memcpy(spec, f + c.start, c.end - c.start);
		spec[c.end - c.start] = 0;
	emit:;
		int k = conv_text(out + w, cap - w, spec, ns, st, c.type, v, s);
		if (k < 0) {
			*why = "conversion failed";
			return -1;
		}
		w += (size_t)k < cap - 1 - w ? (size_t)k : cap - 1 - w;
		total += (size_t)k;
	}
	out[w] = 0;
	if (r.left) {
		*why = "arguments left over after the format";
		return -1;
	}
	return (long)total;
short_:
	*why = "arguments end before the format";
	return -1;
long_:
	*why = "conversion too long";
	return -1;
}

/* ---- text, compiled ---- */

int le__dtext_make(le__dtext *t, const le__desc *d)
{
	size_t pos = 0, lit = 0;
	struct conv c;
	char spec[SPEC_MAX];
	int rc;

	t->fmt = d->fmt;
	t->flen = d->flen;
	t->n = 0;
	t->pad = 0;
	t->most = (uint32_t)d->flen;
	t->need = 0;
	while ((rc = conv_next(d->fmt, d->flen, &pos, &c)) == 1) {
		struct le__dtconv *k = &t->c[t->n];
		size_t sl = c.end - c.start;
		if (t->n == LE_DTEXT_CONVS || sl + 4 > SPEC_MAX)
			return -1;
		*k = (struct le__dtconv){(uint32_t)lit, (uint32_t)(c.start - lit),
		                         (uint8_t)c.type, (uint8_t)c.wstar,
		                         (uint8_t)c.pstar, 0, {0}};
		lit = pos;
		t->n++;
		if (c.type == T_PCT)
			continue;
		memcpy(spec, d->fmt + c.start + 1, sl - 1);
		spec[sl - 1] = 0;
		if (le__fspec_parse(spec, &k->sp) != spec + sl - 1)
			return -1;
		k->bare = !k->sp.flags && !k->sp.width && k->sp.prec < 0 &&
		          !c.wstar && !c.pstar;
		if (k->bare && c.type == T_I32 && !k->sp.len)
			k->bare += k->sp.conv == 'u' ? 2 : k->sp.conv == 'd' ||
			           k->sp.conv == 'i';
		if (c.type == T_F64 && !k->sp.flags && !k->sp.width &&
		    !c.wstar && !c.pstar)
			k->bare = 4; /* parse took only %f %F */
		t->most += k->bare == 4 ? LE__FMT_F_MAX : 11;
		t->need += k->bare == 4 ? 8 : 4;
		if (k->bare < 2 || t->most > UINT32_MAX / 2)
			t->most = UINT32_MAX / 2;
	}
	t->tail = (uint32_t)lit;
	if (t->most == UINT32_MAX / 2)
		t->most = 0;
	return rc;
}

/* One '*' value from r into *v.  @return 0, or -1 (short, or out of the
 * range le__defer_text accepts). */
static int star(struct rd *r, int *v)
{
	const unsigned char *b;
	if (take(r, 4, &b) < 0)
		return -1;
	*v = (int)le__get32(b);
	return *v > FIELD_MAX || *v < -FIELD_MAX ? -1 : 0;
}

/* v's digits (and a '-' when neg) at w, which has room for them.
 * @return the bytes written. */
static size_t dec(char *w, uint64_t v, int neg)
{
	int n = le__ndec(v);
	w[0] = '-';
	le__dec_fixed(v, w + neg + n, n);
	return (size_t)(neg + n);
}

/* An int's bare %d %i (bare 2) or %u (bare 3) of the 4 bytes at b, at w
 * (11 bytes of room).  @return the bytes written. */
static size_t put_i32(char *w, const unsigned char *b, int bare)
{
	int32_t x = (int32_t)le__get32(b);

	if (bare == 3)
		return dec(w, (uint32_t)x, 0);
	return dec(w, x < 0 ? 0 - (uint64_t)x : (uint64_t)x, x < 0);
}

/* A double's bare %f %F (k->bare 4) of the 8 bytes at b by le__fmt_f, at
 * w (LE__FMT_F_MAX bytes of room).  @return its length, or -1 when it is
 * not le__fmt_f's. */
static int put_f64(char *w, const unsigned char *b,
                   const struct le__dtconv *k)
{
	uint64_t u = le__get64(b);
	double x;

	memcpy(&x, &u, sizeof x);
	return le__fmt_f(w, x, k->sp.prec < 0 ? 6 : k->sp.prec);
}

/* One conversion k of t, its arguments taken from r, at w (room bytes
 * free).  @return the bytes written, or -1 (le__dtext_run's cases). */
static long dconv(const struct le__dtconv *k, struct rd *r, char *w,
                  size_t room)
{
	const unsigned char *b;
	le__fspec sp = k->sp;
	int sw = 0, spr = 0;
	le__fval v;

	if ((k->wstar && star(r, &sw) < 0) || (k->pstar && star(r, &spr) < 0))
		return -1;
	if (k->type == T_STR) {
		if (take(r, 4, &b) < 0)
			return -1;
		uint32_t L = le__get32(b);
		v.s = NULL;
		if (L != LE_DEFER_NULLSTR) {
			/* le__defer_text prints the stored bytes with their
			 * length as the precision, whatever the format's */
			if (take(r, L, &b) < 0)
				return -1;
			v.s = (const char *)b;
			spr = (int)L;
			sp.prec = LE__FSPEC_STAR;
			if (k->bare && !k->wstar) {
				size_t n = strnlen(v.s, L);
				if (n > room)
					return -1;
				memcpy(w, v.s, n);
				return (long)n;
			}
		}
	} else {
		size_t n = k->type == T_I32 ? 4 : 8;
		if (take(r, n, &b) < 0)
			return -1;
		v.u = n == 4 ? le__get32(b) : le__get64(b);
	}
	if (le__fspec_star(&sp, sw, spr) < 0)
		return -1;
	int n = le__fspec_put(w, room + 1, &sp, v);
	return n < 0 || (size_t)n > room ? -1 : n;
}

/* The literal fmt[at..at + n) to w (room bytes free): up to 32 bytes as
 * two fixed 16-byte copies when fmt is padded and w has the room (what
 * lands past n is overwritten next, or past the text's end). */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline int lit(const le__dtext *t, uint32_t at, uint32_t n, char *w,
                      size_t room)
{
	if (room < n)
		return -1;
	if (t->pad && n <= 32 && room >= 32) {
		memcpy(w, t->fmt + at, 16);
		memcpy(w + 16, t->fmt + at + 16, 16);
	} else {
		memcpy(w, t->fmt + at, n);
	}
	return 0;
}

/* le__dtext_run's common case, t->most set and out with room for it and
 * a 32-byte literal copy past it, the block t->need bytes: nothing to
 * check but the doubles.  @return the length, or -1 when a double is not
 * le__fmt_f's (le__dtext_run's own loop makes the text then). */
static long run_sized(const le__dtext *t, const unsigned char *a, char *out)
{
	char *w = out;

	for (uint32_t i = 0; i < t->n; i++) {
		const struct le__dtconv *k = &t->c[i];
		lit(t, k->lit, k->lit_len, w, (size_t)k->lit_len + 32);
		w += k->lit_len;
		if (k->type == T_PCT) {
			*w++ = '%';
		} else if (k->bare == 4) {
			int n = put_f64(w, a, k);
			if (n < 0)
				return -1;
			w += n;
			a += 8;
		} else {
			w += put_i32(w, a, k->bare);
			a += 4;
		}
	}
	lit(t, t->tail, (uint32_t)(t->flen - t->tail), w,
	    t->flen - t->tail + 32);
	w += t->flen - t->tail;
	*w = 0;
	return w - out;
}

long le__dtext_run(const le__dtext *t, const unsigned char *args,
                   size_t alen, char *out, size_t cap)
{
	struct rd r = {args, alen};
	char *w = out, *end = out + cap - 1;
	long sized;

	if (t->most && t->pad && alen == t->need && cap > t->most + 32 &&
	    (sized = run_sized(t, args, out)) >= 0)
		return sized;

	for (uint32_t i = 0; i < t->n; i++) {
		const struct le__dtconv *k = &t->c[i];
		const unsigned char *b;
		if (lit(t, k->lit, k->lit_len, w, (size_t)(end - w)) < 0)
			return -1;
		w += k->lit_len;
		if (k->type == T_PCT) {
			if (w == end)
				return -1;
			*w++ = '%';
			continue;
		}
		if ((k->bare == 2 || k->bare == 3) && end - w >= 11 &&
		    take(&r, 4, &b) == 0) {
			/* an int's %d %i %u: its digits straight in */
			w += put_i32(w, b, k->bare);
			continue;
		}
		if (k->bare == 4 && end - w >= LE__FMT_F_MAX && r.left >= 8) {
			/* a double's %f %F: le__fmt_f's usual case in place */
			int n = put_f64(w, r.p, k);
			if (n >= 0) {
				r.p += 8;
				r.left -= 8;
				w += n;
				continue;
			}
		}
		long n = dconv(k, &r, w, (size_t)(end - w));
		if (n < 0)
			return -1;
		w += n;
	}
	uint32_t tl = (uint32_t)(t->flen - t->tail);
	if (r.left || lit(t, t->tail, tl, w, (size_t)(end - w)) < 0)
		return -1;
	w += tl;
	*w = 0;
	return w - out;
}

void le__rec_plain(const le__rec *r, le__rec *out, unsigned char *buf,
                   size_t cap)
{
	le__desc d;
	const char *why;
	size_t fb = r->dfb;

	*out = *r;
	if (!(r->flags & LE_REC_DEFERRED))
		return;
	out->flags &= ~LE_REC_DEFERRED;
	out->desc = NULL;
	out->payload = buf;
	if (fb + 4 > r->len || fb + 2 > cap ||
	    !le__desc_decode(r->desc, r->dlen, &d, &why)) {
		why = "no descriptor";
		goto bad;
	}
	memcpy(buf, r->payload, fb);
	long n = le__defer_text(&d, r->payload + fb + 4, r->len - fb - 4,
	                        (char *)buf + fb, cap - fb, &why);
	if (n < 0)
		goto bad;
	if ((size_t)n > cap - fb - 1) {
		n = (long)(cap - fb - 1);
		out->flags |= LE_REC_TRUNCATED;
	}
	out->len = (uint32_t)(fb + (size_t)n);
	return;
bad:
	out->flags &= ~LE_REC_FIELDS;
	out->len = (uint32_t)snprintf((char *)buf, cap,
	                              "[undecodable deferred record: %s]", why);
	if (out->len > cap - 1)
		out->len = (uint32_t)(cap - 1);
}
