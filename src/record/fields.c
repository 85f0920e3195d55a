/*
 * fields.c -- the field block: sizing and encoding on the hot path (no
 * malloc, no system call, work bounded by the fields given), checking and
 * decoding for the codec and the reader.  Layout at the top of fields.h
 * and in docs/FORMAT.md, "Field block".
 *
 * Both encoding passes (size, then put) walk the same fields with the same
 * rules, so the bytes reserved in the queue slot are exactly the bytes
 * written into it.
 */
#include "record/fields.h"

#include <string.h>

#include "record/format.h"

/* Value bytes of a type, and whether it carries a u32 length first. */
static size_t fixed_value(uint32_t type)
{
	switch (type) {
	case LE_FT_INT64:
	case LE_FT_UINT64:
	case LE_FT_DOUBLE:
		return 8;
	case LE_FT_BOOL:
		return 1;
	default:
		return 0;
	}
}

static int known_type(uint32_t type)
{
	return type >= LE_FT_STRING && type <= LE_FT_BYTES;
}

static int has_len(uint32_t type)
{
	return type == LE_FT_STRING || type == LE_FT_BYTES;
}

/* The key as stored: cut to 255 bytes; a missing or empty one is "_". */
static const char *key_of(const le_field *f, uint32_t *klen)
{
	if (!f->key || !f->key_len) {
		*klen = 1;
		return "_";
	}
	*klen = f->key_len > LE_FIELD_KEY_MAX ? LE_FIELD_KEY_MAX : f->key_len;
	return f->key;
}

/* A string or bytes value's length as stored (NULL: empty). */
static size_t str_len(const le_field *f)
{
	return f->v.str.ptr ? f->v.str.len : 0;
}

size_t le__field_size(const le_field *f)
{
	uint32_t klen;
	key_of(f, &klen);
	if (has_len(f->type))
		return 2 + klen + 4 + str_len(f);
	return 2 + klen + fixed_value(f->type);
}

size_t le__field_put(unsigned char *out, const le_field *f)
{
	uint32_t klen;
	const char *key = key_of(f, &klen);
	unsigned char *p = out;

	*p++ = (unsigned char)f->type;
	*p++ = (unsigned char)klen;
	memcpy(p, key, klen);
	p += klen;
	switch (f->type) {
	case LE_FT_STRING:
	case LE_FT_BYTES: {
		size_t n = str_len(f);
		le__put32(p, (uint32_t)n);
		if (n)
			memcpy(p + 4, f->v.str.ptr, n);
		p += 4 + n;
		break;
	}
	case LE_FT_INT64:
		le__put64(p, (uint64_t)f->v.i64);
		p += 8;
		break;
	case LE_FT_UINT64:
		le__put64(p, f->v.u64);
		p += 8;
		break;
	case LE_FT_DOUBLE: {
		uint64_t bits;
		memcpy(&bits, &f->v.f64, 8);
		le__put64(p, bits);
		p += 8;
		break;
	}
	case LE_FT_BOOL:
		*p++ = f->v.b != 0;
		break;
	}
	return (size_t)(p - out);
}

/* The call site's fields, built on the stack (no copy of the strings). */
static size_t site_fields(const le__site *s, le_field out[3])
{
	if (!s)
		return 0;
	out[0] = (le_field){.key = "code.file", .key_len = 9,
	                    .type = LE_FT_STRING,
	                    .v.str = {s->file, s->file_len}};
	out[1] = (le_field){.key = "code.line", .key_len = 9,
	                    .type = LE_FT_INT64, .v.i64 = s->line};
	out[2] = (le_field){.key = "code.func", .key_len = 9,
	                    .type = LE_FT_STRING,
	                    .v.str = {s->func, s->func_len}};
	return 3;
}

int64_t le__fields_size(const le__fieldset *fs)
{
	le_field site[3];
	size_t ns = site_fields(fs->site, site);
	uint64_t b = fs->pre_len;

	for (size_t i = 0; i < fs->n; i++) {
		if (!known_type(fs->f[i].type))
			return -1;
		b += le__field_size(&fs->f[i]);
	}
	for (size_t i = 0; i < ns; i++)
		b += le__field_size(&site[i]);
	return b ? (int64_t)(4 + b) : 0;
}

/*
 * Walk fs's fields in order while they fit in cap (with the length
 * word), putting each at out when out is not NULL.  The first one that
 * does not fit ends the walk: fields are dropped from the end, whole.
 */
static size_t walk(unsigned char *out, size_t cap, const le__fieldset *fs)
{
	le_field site[3];
	size_t ns = site_fields(fs->site, site), b = 4;

	if (cap < 4)
		return 0;
	if (fs->pre_len) {
		if (b + fs->pre_len > cap)
			return 0;
		if (out)
			memcpy(out + b, fs->pre, fs->pre_len);
		b += fs->pre_len;
	}
	for (size_t i = 0; i < fs->n + ns; i++) {
		const le_field *f = i < fs->n ? &fs->f[i] : &site[i - fs->n];
		size_t k = le__field_size(f);
		if (b + k > cap)
			break;
		if (out)
			le__field_put(out + b, f);
		b += k;
	}
	if (b == 4)
		return 0;
	if (out)
		le__put32(out, (uint32_t)(b - 4));
	return b;
}

size_t le__fields_fit(const le__fieldset *fs, size_t cap)
{
	return walk(NULL, cap, fs);
}

size_t le__fields_encode(unsigned char *out, size_t cap,
                         const le__fieldset *fs)
{
	return walk(out, cap, fs);
}

/* ---- decoding ---- */

int le__fields_split(const unsigned char *p, size_t len,
                     const unsigned char **fields, size_t *flen,
                     const unsigned char **msg, size_t *mlen)
{
	if (len < 4)
		return -1;
	uint32_t b = le__get32(p);
	if (b > len - 4)
		return -1;
	*fields = p + 4;
	*flen = b;
	*msg = p + 4 + b;
	*mlen = len - 4 - b;
	return 0;
}

int le__field_next(const unsigned char *b, size_t len, size_t *pos,
                   le_field *out)
{
	size_t at = *pos;

	if (at >= len)
		return 0;
	if (len - at < 2)
		return -1;
	uint32_t type = b[at], klen = b[at + 1];
	if (!known_type(type) || klen == 0 || len - at - 2 < klen)
		return -1;
	memset(out, 0, sizeof *out);
	out->type = type;
	out->key = (const char *)b + at + 2;
	out->key_len = klen;
	at += 2 + klen;
	size_t left = len - at;
	if (has_len(type)) {
		if (left < 4 || le__get32(b + at) > left - 4)
			return -1;
		out->v.str.len = le__get32(b + at);
		out->v.str.ptr = b + at + 4;
		at += 4 + out->v.str.len;
	} else {
		size_t k = fixed_value(type);
		if (left < k)
			return -1;
		if (type == LE_FT_BOOL) {
			if (b[at] > 1)
				return -1;
			out->v.b = b[at];
		} else {
			uint64_t v = le__get64(b + at);
			memcpy(&out->v, &v, 8); /* i64, u64 or the double's bits */
		}
		at += k;
	}
	*pos = at;
	return 1;
}

int le__fields_check(const unsigned char *b, size_t len, const char **why)
{
	size_t pos = 0;
	le_field f;
	int rc;

	if (len == 0) {
		*why = "empty field block";
		return -1;
	}
	while ((rc = le__field_next(b, len, &pos, &f)) == 1)
		;
	if (rc < 0) {
		*why = "field block does not decode";
		return -1;
	}
	return 0;
}

/* ---- the public reader side ---- */

int le_record_field(const le_record *rec, size_t *pos, le_field *out)
{
	if (!rec || !pos || !out)
		return LE_EINVAL;
	if (!rec->fields || !rec->fields_len)
		return 0;
	int rc = le__field_next(rec->fields, rec->fields_len, pos, out);
	return rc < 0 ? LE_ECORRUPT : rc;
}

int le__fields_unmark(const unsigned char **b, size_t *len)
{
	if (!*b || *len < LE_BT_FIELD_LEN ||
	    memcmp(*b, LE_BT_FIELD, LE_BT_FIELD_LEN) != 0)
		return 0;
	*b += LE_BT_FIELD_LEN;
	*len -= LE_BT_FIELD_LEN;
	return 1;
}

void le__rec_backtrace(le_record *rec)
{
	const unsigned char *b = rec->fields;
	size_t len = rec->fields_len;

	if (!le__fields_unmark(&b, &len))
		return;
	rec->flags |= LE_REC_BACKTRACE;
	rec->fields_len = len;
	rec->fields = len ? b : NULL;
	if (!len)
		rec->flags &= ~LE_REC_FIELDS;
}
