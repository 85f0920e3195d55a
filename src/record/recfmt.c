/*
 * recfmt.c -- records' parts as text, one way for every output: the
 * fields of a record (text key=value, a JSON object, RFC 5424 structured
 * data), JSON string escaping, RFC 3339 timestamps, and the severity
 * numbers of syslog and OpenTelemetry.  The stream sink, the syslog sink
 * and logengine cat (through le_record_fields_format) all print through
 * here, so a field reads the same wherever it goes.  The rules are in
 * docs/FORMAT.md, "Field block".
 *
 * Every writer here is given its room and checks it before writing: a
 * field goes out whole or not at all (its worst case, six output bytes
 * per encoded byte, is what it must find free), so output cut by a small
 * buffer is still well formed.
 */
#define _GNU_SOURCE
#include "record/fields.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/fmt.h"

static const char hex[] = "0123456789abcdef";

/* The table of RFC 3629: a lead byte fixes the length, and for four lead
 * bytes the range of the second byte narrows, which refuses overlong forms
 * (E0, F0), surrogates (ED) and code points past U+10FFFF (F4).  C0, C1
 * and F5..FF never lead; 80..BF only continue. */
size_t le_utf8_len(const void *s, size_t len)
{
	const unsigned char *p = s;
	unsigned c, lo = 0x80, hi = 0xbf;
	size_t n;

	if (!p || len == 0)
		return 0;
	c = p[0];
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	else
		return 0;
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	if (len < n || p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return n;
}

size_t le__json_escape(unsigned char *o, size_t cap, const unsigned char *p,
                       size_t n)
{
	size_t w = 0;

	for (size_t i = 0; i < n && w + 12 < cap;) {
		unsigned c = p[i];
		size_t k;
		if (c == '"' || c == '\\') {
			o[w++] = '\\';
			o[w++] = (unsigned char)c;
			i++;
		} else if (c >= 0x20 && c < 0x7f) {
			o[w++] = (unsigned char)c;
			i++;
		} else if (c >= 0x80 && (k = le_utf8_len(p + i, n - i)) > 0) {
			memcpy(o + w, p + i, k);
			w += k;
			i += k;
		} else {
			memcpy(o + w, "\\u00", 4);
			o[w + 4] = (unsigned char)hex[c >> 4];
			o[w + 5] = (unsigned char)hex[c & 15];
			w += 6;
			i++;
		}
	}
	return w;
}

/* ---- timestamps ---- */

static _Thread_local struct {
	uint64_t sec;
	char text[64]; /* "YYYY-MM-DDTHH:MM:SS.", 20 used */
} ts_cache = {UINT64_MAX, ""};

size_t le__put_ts(char *out, uint64_t ns, int frac)
{
	uint64_t sec = ns / 1000000000u;
	if (sec != ts_cache.sec) {
		time_t t = (time_t)sec;
		struct tm tm;
		gmtime_r(&t, &tm);
		snprintf(ts_cache.text, sizeof ts_cache.text,
		         "%04d-%02d-%02dT%02d:%02d:%02d.", tm.tm_year + 1900,
		         tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
		         tm.tm_sec);
		ts_cache.sec = sec;
	}
	memcpy(out, ts_cache.text, 20);
	uint64_t f = ns % 1000000000u;
	if (frac == 6)
		f /= 1000;
	le__dec_fixed(f, out + 20 + frac, frac);
	out[20 + frac] = 'Z';
	return (size_t)(21 + frac);
}

/* ---- values ---- */

/* A bounded output: every put checked against the room left. */
typedef struct obuf {
	unsigned char *p;
	size_t cap, len;
} obuf;

static void put(obuf *o, const void *s, size_t n)
{
	if (n > o->cap - o->len)
		n = o->cap - o->len;
	memcpy(o->p + o->len, s, n);
	o->len += n;
}

static void putc1(obuf *o, unsigned char c)
{
	if (o->len < o->cap)
		o->p[o->len++] = c;
}

static void put_hexbyte(obuf *o, unsigned char c)
{
	unsigned char b[4] = {'\\', 'x', (unsigned char)hex[c >> 4],
	                      (unsigned char)hex[c & 15]};
	put(o, b, 4);
}

static void put_u64(obuf *o, uint64_t v)
{
	char d[20];
	int n = le__ndec(v);
	le__dec_fixed(v, d + n, n);
	put(o, d, (size_t)n);
}

static void put_i64(obuf *o, int64_t v)
{
	if (v < 0) {
		putc1(o, '-');
		put_u64(o, (uint64_t)0 - (uint64_t)v);
	} else {
		put_u64(o, (uint64_t)v);
	}
}

/*
 * The shortest of %.15g, %.16g, %.17g that reads back as v: 0.1 prints
 * as 0.1, not 0.10000000000000001.  Whatever the program's LC_NUMERIC,
 * the decimal point is written '.'.  Not a number, and the infinities,
 * are the caller's.
 */
static void put_double(obuf *o, double v)
{
	char b[40];
	int n = 0;
	for (int prec = 15; prec <= 17; prec++) {
		n = snprintf(b, sizeof b, "%.*g", prec, v);
		if (strtod(b, NULL) == v)
			break;
	}
	for (int i = 0; i < n; i++)
		if (b[i] != '-' && b[i] != '+' && b[i] != 'e' &&
		    (b[i] < '0' || b[i] > '9'))
			b[i] = '.';
	put(o, b, (size_t)n);
}

static void put_base64(obuf *o, const unsigned char *p, size_t n)
{
	static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	                          "abcdefghijklmnopqrstuvwxyz0123456789+/";
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16;
		if (i + 1 < n)
			v |= (uint32_t)p[i + 1] << 8;
		if (i + 2 < n)
			v |= p[i + 2];
		unsigned char q[4] = {(unsigned char)b64[v >> 18],
		                      (unsigned char)b64[(v >> 12) & 63],
		                      i + 1 < n ? (unsigned char)b64[(v >> 6) & 63]
		                                : '=',
		                      i + 2 < n ? (unsigned char)b64[v & 63] : '='};
		put(o, q, 4);
	}
}

/* ---- one style each ---- */

/* Text: a byte that goes out as it is, bare (not in quotes). */
static int bare_ok(unsigned c)
{
	return c > 0x20 && c < 0x7f && c != '"' && c != '=' && c != '\\';
}

/* Text: the bytes at p that go out bare, 0 if p[0] does not. */
static size_t bare_len(const unsigned char *p, size_t n)
{
	return p[0] >= 0x80 ? le_utf8_len(p, n) : (size_t)bare_ok(p[0]);
}

/* Text: p as it is when every character is bare_ok or valid multi-byte
 * UTF-8 (and p is not empty), else in quotes with escapes.  Keys are
 * never quoted (quote = 0): what is not bare is escaped \xNN. */
static void text_str(obuf *o, const unsigned char *p, size_t n, int quote)
{
	size_t i, k;
	int bare = n > 0 || !quote;

	for (i = 0; i < n && bare && quote; i += k) {
		k = bare_len(p + i, n - i);
		bare = k > 0;
	}
	if (bare) {
		for (i = 0; i < n; i += k) {
			k = bare_len(p + i, n - i);
			if (k)
				put(o, p + i, k);
			else
				put_hexbyte(o, p[i]), k = 1;
		}
		return;
	}
	putc1(o, '"');
	for (i = 0; i < n; i += k) {
		unsigned c = p[i];
		k = 1;
		if (c == '"' || c == '\\') {
			putc1(o, '\\');
			putc1(o, (unsigned char)c);
		} else if (c == '\n') {
			put(o, "\\n", 2);
		} else if (c == '\r') {
			put(o, "\\r", 2);
		} else if (c == '\t') {
			put(o, "\\t", 2);
		} else if (c >= 0x20 && c < 0x7f) {
			putc1(o, (unsigned char)c);
		} else if (c >= 0x80 && (k = le_utf8_len(p + i, n - i)) > 0) {
			put(o, p + i, k);
		} else {
			put_hexbyte(o, (unsigned char)c);
			k = 1;
		}
	}
	putc1(o, '"');
}

static void json_str(obuf *o, const unsigned char *p, size_t n)
{
	putc1(o, '"');
	/* le__json_escape stops 12 bytes short of its room: the field's
	 * bound (fields_format) leaves more than that. */
	o->len += le__json_escape(o->p + o->len, o->cap - o->len, p, n);
	putc1(o, '"');
}

/* SD-NAME: printable US-ASCII but '=', ' ', ']', '"', at most 32. */
static void sd_name(obuf *o, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n && i < 32; i++) {
		unsigned c = p[i];
		int ok = c > 0x20 && c < 0x7f && c != '=' && c != ']' &&
		         c != '"';
		putc1(o, ok ? (unsigned char)c : '_');
	}
}

/* PARAM-VALUE: UTF-8 with '"', '\' and ']' escaped by a backslash; a
 * byte that is not UTF-8 as the text \xNN. */
static void sd_value(obuf *o, const unsigned char *p, size_t n)
{
	size_t k;
	for (size_t i = 0; i < n; i += k) {
		unsigned c = p[i];
		k = 1;
		if (c == '"' || c == '\\' || c == ']') {
			putc1(o, '\\');
			putc1(o, (unsigned char)c);
		} else if (c < 0x80) {
			putc1(o, (unsigned char)c);
		} else if ((k = le_utf8_len(p + i, n - i)) > 0) {
			put(o, p + i, k);
		} else {
			put_hexbyte(o, (unsigned char)c);
			k = 1;
		}
	}
}

/* A value that is not a string, as text (JSON spells the non-finite
 * doubles as strings: it has no such numbers). */
static void scalar(obuf *o, const le_field *f, int style)
{
	switch (f->type) {
	case LE_FT_INT64:
		put_i64(o, f->v.i64);
		break;
	case LE_FT_UINT64:
		put_u64(o, f->v.u64);
		break;
	case LE_FT_BOOL:
		if (f->v.b)
			put(o, "true", 4);
		else
			put(o, "false", 5);
		break;
	case LE_FT_DOUBLE: {
		double d = f->v.f64;
		const char *s = NULL;
		if (isnan(d))
			s = style == LE__FMT_JSON ? "\"NaN\"" : "NaN";
		else if (isinf(d) && d > 0)
			s = style == LE__FMT_JSON ? "\"Infinity\"" : "+Inf";
		else if (isinf(d))
			s = style == LE__FMT_JSON ? "\"-Infinity\"" : "-Inf";
		if (s)
			put(o, s, strlen(s));
		else
			put_double(o, d);
		break;
	}
	}
}

static void one_field(obuf *o, const le_field *f, int style, int first)
{
	const unsigned char *k = (const unsigned char *)f->key;
	const unsigned char *s = f->v.str.ptr;
	size_t n = f->v.str.len;
	int is_str = f->type == LE_FT_STRING, is_bytes = f->type == LE_FT_BYTES;

	if (style == LE__FMT_JSON) {
		if (!first)
			putc1(o, ',');
		json_str(o, k, f->key_len);
		putc1(o, ':');
		if (is_str)
			json_str(o, s, n);
	} else if (style == LE__FMT_SD) {
		putc1(o, ' ');
		sd_name(o, k, f->key_len);
		put(o, "=\"", 2);
		if (is_str)
			sd_value(o, s, n);
	} else {
		putc1(o, ' ');
		text_str(o, k, f->key_len, 0);
		putc1(o, '=');
		if (is_str)
			text_str(o, s, n, 1);
		else if (is_bytes && !n)
			put(o, "\"\"", 2);
	}
	if (is_bytes) {
		if (style == LE__FMT_JSON)
			putc1(o, '"');
		put_base64(o, s, n);
		if (style == LE__FMT_JSON)
			putc1(o, '"');
	} else if (!is_str) {
		scalar(o, f, style);
	}
	if (style == LE__FMT_SD)
		putc1(o, '"');
}

size_t le__fields_format(unsigned char *out, size_t cap, int style,
                         const unsigned char *b, size_t len)
{
	obuf o = {out, cap, 0};
	size_t pos = 0, at = 0, close = 1;
	le_field f;

	if (style == LE__FMT_JSON) {
		if (cap < 12 + close)
			return 0;
		put(&o, ",\"fields\":{", 11);
	} else if (style == LE__FMT_SD) {
		if (cap < sizeof LE_SYSLOG_SD_ID + close)
			return 0;
		putc1(&o, '[');
		put(&o, LE_SYSLOG_SD_ID, sizeof LE_SYSLOG_SD_ID - 1);
	} else {
		close = 0;
	}
	for (int first = 1; le__field_next(b, len, &pos, &f) == 1; first = 0) {
		/* Its worst case: six output bytes per encoded byte. */
		if (6 * (pos - at) + close > cap - o.len)
			break;
		one_field(&o, &f, style, first);
		at = pos;
	}
	if (style == LE__FMT_JSON)
		putc1(&o, '}');
	else if (style == LE__FMT_SD)
		putc1(&o, ']');
	return o.len;
}

int le_record_fields_format(const le_record *rec, int format, char *buf,
                            size_t cap)
{
	if (!rec || !buf || format < LE_STREAM_RAW || format > LE_STREAM_JSON ||
	    cap < LE_FIELDS_TEXT_MAX(rec->fields_len))
		return LE_EINVAL;
	size_t n = 0;
	if (rec->fields_len) {
		const char *why;
		if (le__fields_check(rec->fields, rec->fields_len, &why) < 0)
			return LE_ECORRUPT;
		n = le__fields_format((unsigned char *)buf, cap - 1,
		                      format == LE_STREAM_JSON ? LE__FMT_JSON
		                                               : LE__FMT_TEXT,
		                      rec->fields, rec->fields_len);
	}
	buf[n] = '\0';
	return (int)n;
}

/* ---- severity ---- */

int le_level_syslog(int level)
{
	static const int sev[] = {7, 7, 6, 4, 3, 2};
	return level >= LE_TRACE && level <= LE_FATAL ? sev[level] : -1;
}

int le_level_otel(int level)
{
	return level >= LE_TRACE && level <= LE_FATAL
	               ? (level == LE_TRACE ? 1 : 1 + 4 * level)
	               : -1;
}
