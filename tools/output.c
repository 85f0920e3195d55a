/*
 * output.c -- a record as cat and tail print it, in each -o format.
 *
 * Every format is one record per line, except json-pretty, verbose (a
 * line per field) and export (journald's, export.c).  Text formats
 * escape control bytes, invalid UTF-8 and the backslash (\xNN, \\), so a
 * payload can never break a line; JSON escapes ", \ and control bytes,
 * and writes each byte that is not valid UTF-8 as \u00XX of its value, so
 * the output is always valid UTF-8 JSON.  raw is the payload's bytes
 * as they are, then a newline.  A record without a timestamp (the field
 * was off) shows "-" for its time, and null in JSON.  On a terminal, text
 * lines are coloured by level as journalctl colours by priority.
 *
 * Lines are built in one buffer, written to stdout in batches of
 * OUT_BATCH bytes (out_flush before anything else goes to stdout or
 * stderr); the date part of a timestamp is formatted once per second of
 * log time.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "cli.h"

static const struct {
	const char *name;
	int fmt;
} formats[] = {
	{"short", OUT_SHORT},
	{"short-precise", OUT_SHORT_PRECISE},
	{"short-iso", OUT_SHORT_ISO},
	{"short-iso-precise", OUT_SHORT_ISO_PRECISE},
	{"short-unix", OUT_SHORT_UNIX},
	{"text", OUT_TEXT},
	{"json", OUT_JSON},
	{"json-pretty", OUT_JSON_PRETTY},
	{"cat", OUT_CAT},
	{"raw", OUT_RAW},
	{"verbose", OUT_VERBOSE},
	{"export", OUT_EXPORT},
};

int out_parse(const char *name)
{
	for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
		if (!strcmp(name, formats[i].name))
			return formats[i].fmt;
	return -1;
}

const char *out_names(void)
{
	return "short, short-precise, short-iso, short-iso-precise, "
	       "short-unix, text, json, json-pretty, cat, raw, verbose, export";
}

/* ---- the line buffer ----
 *
 * out_record reserves room for the longest line the record can make
 * (escaping writes at most 6 bytes per payload byte), so the appends below
 * never check: the per-byte and per-field cost is the copy alone. */

#define FIXED_ROOM 1024 /* every field but the payload and the cursor */

static void reserve(struct out *o, size_t more)
{
	if (o->len + more <= o->cap)
		return;
	size_t nc = o->cap ? o->cap : 4096;
	while (nc < o->len + more)
		nc *= 2;
	char *nb = realloc(o->buf, nc);
	if (!nb) {
		fprintf(stderr, "%s: out of memory\n", prog);
		exit(EXIT_USAGE);
	}
	o->buf = nb;
	o->cap = nc;
}

static inline void add(struct out *o, const void *p, size_t n)
{
	memcpy(o->buf + o->len, p, n);
	o->len += n;
}

/* a string literal, its length known at compile time */
#define ADDL(o, lit) add((o), (lit), sizeof(lit) - 1)

static inline void adds(struct out *o, const char *s)
{
	add(o, s, strlen(s));
}

static inline void addc(struct out *o, char c)
{
	o->buf[o->len++] = c;
}

/* "00" .. "99": numbers go out two digits per division. */
static const char pairs[] =
	"00010203040506070809101112131415161718192021222324252627282930313233"
	"34353637383940414243444546474849505152535455565758596061626364656667"
	"6869707172737475767778798081828384858687888990919293949596979899";

/* v's last `width` digits (at most 9: 32-bit divisions), ending at end,
 * written backwards.  Inlined: a constant width unrolls the loop. */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline void digits_back(char *end, uint32_t v, int width)
{
	while (width >= 2) {
		uint32_t k = v % 100 * 2;
		v /= 100;
		end -= 2;
		memcpy(end, pairs + k, 2);
		width -= 2;
	}
	if (width)
		end[-1] = (char)('0' + v % 10);
}

static void add_u64(struct out *o, uint64_t v)
{
	static const uint32_t p10[] = {1, 10, 100, 1000, 10000, 100000,
	                               1000000, 10000000, 100000000,
	                               1000000000};
	if (v < 10) { /* a shard, a level: one digit */
		addc(o, (char)('0' + v));
		return;
	}
	if (v >= 1000000000) { /* the digits above the last nine first */
		add_u64(o, v / 1000000000);
		digits_back(o->buf + o->len + 9, (uint32_t)(v % 1000000000), 9);
		o->len += 9;
		return;
	}
	/* digits from the bit length (log10 2 ~ 1233 / 4096), then one
	 * comparison */
	uint32_t x = (uint32_t)v;
	int t = (32 - __builtin_clz(x | 1)) * 1233 >> 12;
	int n = t + (x >= p10[t]);
	n += !n;
	digits_back(o->buf + o->len + n, x, n);
	o->len += (size_t)n;
}

/* v as exactly `width` digits (width at most 9) */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline void add_fixed(struct out *o, uint64_t v, int width)
{
	digits_back(o->buf + o->len + width, (uint32_t)v, width);
	o->len += (size_t)width;
}

/* ---- escaping ---- */

static const char hex[] = "0123456789abcdef";

/* Bytes at p (n of them) that are printable ASCII other than '\\' and,
 * for JSON, '"': they go out as they are.  Eight at a time: a byte is
 * below 0x20 or above 0x7e, or equal to one of the two, exactly when its
 * high bit survives the usual has-zero / has-less tests. */
static size_t plain_run(const unsigned char *p, size_t n, int json)
{
	const uint64_t ones = 0x0101010101010101ull, highs = ones * 0x80;
	const uint64_t bs = ones * '\\', q = ones * '"';
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		uint64_t x;
		memcpy(&x, p + i, 8);
		uint64_t lt20 = (x - ones * 0x20) & ~x;      /* byte < 0x20 */
		uint64_t gt7e = (x + ones * 0x01) | x;       /* >= 0x7f */
		uint64_t eb = (x ^ bs), eq = (x ^ q);
		uint64_t zb = (eb - ones) & ~eb;             /* == '\\' */
		uint64_t zq = json ? (eq - ones) & ~eq : 0;  /* == '"' */
		if ((lt20 | gt7e | zb | zq) & highs)
			break;
	}
	while (i < n && p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\' &&
	       (!json || p[i] != '"'))
		i++;
	return i;
}

/*
 * Copy the run of bytes at p that go out as they are (plain_run) to d.
 * @return its length.  With SSE2, sixteen bytes are stored before they are
 * looked at: up to 15 bytes past the run land in d, which is harmless, for
 * out_record reserved 6 bytes per payload byte and the escapes that follow
 * overwrite them.  Loads never pass p + n (the payload may end a page).
 */
static size_t copy_plain(char *d, const unsigned char *p, size_t n, int json)
{
	size_t i = 0;
#if defined(__SSE2__)
	const __m128i sp = _mm_set1_epi8(0x20), del = _mm_set1_epi8(0x7f),
	              bs = _mm_set1_epi8('\\'),
	              q = _mm_set1_epi8(json ? '"' : '\\');
	for (; i + 16 <= n; i += 16) {
		__m128i x = _mm_loadu_si128((const __m128i *)(const void *)(p + i));
		_mm_storeu_si128((__m128i *)(void *)(d + i), x);
		/* a signed compare: bytes 0x80-0xff are below 0x20 too */
		__m128i esc = _mm_or_si128(
			_mm_or_si128(_mm_cmplt_epi8(x, sp), _mm_cmpeq_epi8(x, del)),
			_mm_or_si128(_mm_cmpeq_epi8(x, bs), _mm_cmpeq_epi8(x, q)));
		unsigned m = (unsigned)_mm_movemask_epi8(esc);
		if (m)
			return i + (size_t)__builtin_ctz(m);
	}
	if (i < n && n >= 16) {
		/* the last sixteen bytes, overlapping those looked at: the
		 * tail in one step, loads still within p[0..n) */
		size_t b = n - 16;
		__m128i x = _mm_loadu_si128((const __m128i *)(const void *)(p + b));
		__m128i esc = _mm_or_si128(
			_mm_or_si128(_mm_cmplt_epi8(x, sp), _mm_cmpeq_epi8(x, del)),
			_mm_or_si128(_mm_cmpeq_epi8(x, bs), _mm_cmpeq_epi8(x, q)));
		unsigned m = (unsigned)_mm_movemask_epi8(esc) >> (i - b);
		if (!m) {
			_mm_storeu_si128((__m128i *)(void *)(d + b), x);
			return n;
		}
		/* bytes i .. the first to escape go as they are: stored
		 * from the load, the rest of it overwritten after */
		_mm_storeu_si128((__m128i *)(void *)(d + b), x);
		return i + (size_t)__builtin_ctz(m);
	}
#endif
	size_t k = plain_run(p + i, n - i, json);
	if (k)
		memcpy(d + i, p + i, k);
	return i + k;
}

/* Payload bytes, escaped for text (json 0) or a JSON string (json 1). */
static void add_escaped(struct out *o, const unsigned char *p, size_t len,
                        int json)
{
	size_t i = 0;

	while (i < len) {
		size_t j = i + copy_plain(o->buf + o->len, p + i, len - i, json);
		o->len += j - i;
		if (j == len)
			break;
		size_t n = p[j] >= 0x80 ? le_utf8_len(p + j, len - j) : 0;
		if (n > 0) {
			add(o, p + j, n);
			i = j + n;
			continue;
		}
		if (p[j] == '\\' || p[j] == '"') {
			char e[2] = {'\\', (char)p[j]};
			add(o, e, 2);
		} else if (json) {
			char e[6] = {'\\', 'u', '0', '0', hex[p[j] >> 4],
			             hex[p[j] & 15]};
			add(o, e, 6);
		} else {
			char e[4] = {'\\', 'x', hex[p[j] >> 4], hex[p[j] & 15]};
			add(o, e, 4);
		}
		i = j + 1;
	}
}

/* ---- time ---- */

/* The date and time to the second of s (UTC or local) in format fmt,
 * kept for the next record of the same second.  Also the UTC offset. */
static const struct out_cache *when(struct out *o, int which, time_t s,
                                    long *gmtoff)
{
	struct out_cache *c = &o->cache[which];
	if (c->valid && c->sec == s) {
		*gmtoff = c->gmtoff;
		return c;
	}
	static const char *const fmts[] = {
		[CACHE_RFC3339] = "%Y-%m-%dT%H:%M:%S",
		[CACHE_SHORT] = "%b %d %H:%M:%S",
		[CACHE_ISO] = "%Y-%m-%dT%H:%M:%S",
	};
	struct tm tm;
	int utc = which == CACHE_RFC3339 || o->utc;
	if (utc ? !gmtime_r(&s, &tm) : !localtime_r(&s, &tm))
		memset(&tm, 0, sizeof tm);
	c->len = strftime(c->text, sizeof c->text, fmts[which], &tm);
	if (!c->len)
		c->text[0] = '\0';
	c->gmtoff = utc ? 0 : tm.tm_gmtoff;
	c->sec = s;
	c->valid = 1;
	*gmtoff = c->gmtoff;
	return c;
}

static void add_when(struct out *o, int which, time_t s, long *gmtoff)
{
	const struct out_cache *c = when(o, which, s, gmtoff);
	/* a fixed-size copy (no call): the text is shorter than 32 bytes,
	 * and what lies past it is overwritten next */
	memcpy(o->buf + o->len, c->text, 32);
	o->len += c->len < 32 ? c->len : 0;
	if (c->len >= 32)
		add(o, c->text, c->len);
}

static void add_zone(struct out *o, long off)
{
	char sign = off < 0 ? '-' : '+';
	if (off < 0)
		off = -off;
	addc(o, sign);
	add_fixed(o, (uint64_t)(off / 3600), 2);
	addc(o, ':');
	add_fixed(o, (uint64_t)(off / 60 % 60), 2);
}

/* The time column of a text format. */
static void add_time(struct out *o, uint64_t ns)
{
	time_t s = (time_t)(ns / 1000000000u);
	uint64_t frac = ns % 1000000000u;
	long off;

	if (ns == 0) {
		addc(o, '-');
		return;
	}
	switch (o->fmt) {
	case OUT_SHORT:
	case OUT_SHORT_PRECISE:
		add_when(o, CACHE_SHORT, s, &off);
		if (o->fmt == OUT_SHORT_PRECISE) {
			addc(o, '.');
			add_fixed(o, frac / 1000, 6);
		}
		break;
	case OUT_SHORT_ISO:
	case OUT_SHORT_ISO_PRECISE:
		add_when(o, CACHE_ISO, s, &off);
		if (o->fmt == OUT_SHORT_ISO_PRECISE) {
			addc(o, '.');
			add_fixed(o, frac / 1000, 6);
		}
		add_zone(o, off);
		break;
	case OUT_SHORT_UNIX:
		add_u64(o, (uint64_t)s);
		addc(o, '.');
		add_fixed(o, frac / 1000, 6);
		break;
	default: /* text, json: RFC 3339 UTC, nanoseconds */
		add_when(o, CACHE_RFC3339, s, &off);
		addc(o, '.');
		add_fixed(o, frac, 9);
		addc(o, 'Z');
	}
}

/* ---- formats ---- */

/* Padded to 8 bytes: copied whole, the length added after. */
static const struct {
	char s[8];
	size_t len;
} level_str[] = {
	{"TRACE", 5}, {"DEBUG", 5}, {"INFO", 4}, {"WARN", 4}, {"ERROR", 5},
	{"FATAL", 5},
};

static const char *level_or_dash(int level)
{
	return level < 0 ? "-" : le_level_name(level);
}

static void add_level(struct out *o, int level)
{
	if (level >= 0 && level <= LE_FATAL) {
		memcpy(o->buf + o->len, level_str[level].s, 8);
		o->len += level_str[level].len;
	}
	else
		adds(o, le_level_name(level));
}

/* The record's typed fields as the library prints them everywhere (the
 * stream sink, syslog): " key=value ..." or ,"fields":{...}. */
static void add_fields(struct out *o, const le_record *r, int format)
{
	if (!r->fields_len)
		return;
	size_t need = LE_FIELDS_TEXT_MAX(r->fields_len);
	reserve(o, need);
	int n = le_record_fields_format(r, format, (char *)o->buf + o->len, need);
	if (n > 0)
		o->len += (size_t)n;
}

/* ---- colours ----
 *
 * journalctl's, by syslog priority: emerg to err bold red, warning bold
 * yellow, notice bold, info plain, debug grey.  Ours: fatal and error
 * bold red, warn bold yellow, info plain, debug and trace grey (there is
 * no notice level).  The line is coloured from the level on; the time
 * is not. */
#define GREY "\x1b[0;38;5;245m"
#define BOLD_YELLOW "\x1b[0;1;33m"
#define BOLD_RED "\x1b[0;1;31m"
#define COLOR(c) {c, sizeof c - 1}
static const struct {
	const char *s;
	size_t len;
} colors[] = {
	[LE_TRACE] = COLOR(GREY),
	[LE_DEBUG] = COLOR(GREY),
	[LE_INFO] = COLOR(""),
	[LE_WARN] = COLOR(BOLD_YELLOW),
	[LE_ERROR] = COLOR(BOLD_RED),
	[LE_FATAL] = COLOR(BOLD_RED),
};
#define COLOR_OFF "\x1b[0m"

/* Start the level's colour.  @return 1 when a colour was started. */
static int color_on(struct out *o, int level)
{
	if (!o->color || level < 0 || level > LE_FATAL || !colors[level].len)
		return 0;
	add(o, colors[level].s, colors[level].len);
	return 1;
}

static void text_line(struct out *o, const le_record *r)
{
	size_t at;
	add_time(o, r->ts_ns);
	addc(o, ' ');
	int colored = color_on(o, r->level);
	at = o->len;
	if (r->level < 0)
		adds(o, level_or_dash(r->level));
	else
		add_level(o, r->level);
	while (o->len < at + 5)
		addc(o, ' ');
	ADDL(o, " [");
	if (r->host) { /* a collector's store: host/shard:seq at the origin */
		adds(o, r->host);
		addc(o, '/');
		add_u64(o, r->origin_shard);
		addc(o, ':');
		add_u64(o, r->origin_seq);
	} else {
		add_u64(o, r->shard);
		addc(o, ':');
		add_u64(o, r->seq);
	}
	ADDL(o, "] ");
	if (r->flags & LE_REC_MARKER)
		ADDL(o, "{marker} ");
	if (r->flags & LE_REC_TRUNCATED)
		ADDL(o, "{truncated} ");
	if (r->flags & LE_REC_BACKTRACE)
		ADDL(o, "{backtrace} ");
	add_escaped(o, r->payload, r->len, 0);
	add_fields(o, r, LE_STREAM_TEXT);
	if (colored)
		ADDL(o, COLOR_OFF);
	addc(o, '\n');
}

/* ---- --output-fields ---- */

/* Is name (len bytes) one of --output-fields's?  All are without it. */
static int keep_n(const struct out *o, const char *name, size_t len)
{
	if (!o->only)
		return 1;
	for (size_t i = 0; i < o->n_only; i++)
		if (strlen(o->only[i]) == len && !memcmp(o->only[i], name, len))
			return 1;
	return 0;
}

static inline int keep(const struct out *o, const char *name)
{
	return !o->only || keep_n(o, name, strlen(name));
}

/* The separators of a JSON object: compact or pretty. */
struct json_style {
	const char *open, *sep, *key_sep, *close;
	size_t open_len, sep_len, key_sep_len, close_len;
};
#define STYLE(a, b, c, d) {a, b, c, d, sizeof a - 1, sizeof b - 1, \
		sizeof c - 1, sizeof d - 1}
static const struct json_style compact = STYLE("{", ",", ":", "}\n");
static const struct json_style pretty = STYLE("{\n\t", ",\n\t", " : ",
                                              "\n}\n");

/* The end of the member of a compact JSON object that starts at t[i]:
 * the ',' or '}' after it (values are scalars or strings). */
static size_t member_end(const char *t, size_t len, size_t i)
{
	int in_str = 0;
	for (; i < len; i++) {
		if (in_str && t[i] == '\\')
			i++;
		else if (t[i] == '"')
			in_str = !in_str;
		else if (!in_str && (t[i] == ',' || t[i] == '}'))
			break;
	}
	return i;
}

/* The end of the key ("...") of a member starting at t[i]: its ':'. */
static size_t key_end(const char *t, size_t i)
{
	for (i++; t[i] != '"'; i++)
		if (t[i] == '\\')
			i++;
	return i + 1;
}

/*
 * The "fields" object of a record, in style js, with only the keys
 * --output-fields names when it names some but not "fields".
 * le_record_fields_format writes the compact object
 * (,"fields":{"k":v,...}); it is copied member by member, so that
 * json-pretty indents it and a filter leaves members out, while the
 * values stay exactly as every other output writes them.
 */
static void json_typed_fields(struct out *o, const le_record *r,
                              const struct json_style *js, int pretty_style)
{
	int all = keep(o, "fields");
	if (!r->fields_len)
		return;
	if (!pretty_style && all) {
		add_fields(o, r, LE_STREAM_JSON);
		return;
	}
	size_t need = LE_FIELDS_TEXT_MAX(r->fields_len);
	if (o->aux_cap < need) {
		free(o->aux);
		o->aux_cap = need;
		o->aux = malloc(need);
		if (!o->aux) {
			fprintf(stderr, "%s: out of memory\n", prog);
			exit(EXIT_USAGE);
		}
	}
	int n = le_record_fields_format(r, LE_STREAM_JSON, o->aux, need);
	const char *t = o->aux;
	size_t len = n > 0 ? (size_t)n : 0, i = strlen(",\"fields\":{");
	int first = 1;
	reserve(o, 2 * len + 64);
	while (i < len && t[i] != '}') {
		size_t e = member_end(t, len, i), k = key_end(t, i);
		if (!all && !keep_n(o, t + i + 1, k - i - 2)) {
			i = e + 1;
			continue;
		}
		if (first) {
			add(o, js->sep, js->sep_len);
			ADDL(o, "\"fields\"");
			add(o, js->key_sep, js->key_sep_len);
			addc(o, '{');
		} else {
			addc(o, ',');
		}
		if (pretty_style)
			ADDL(o, "\n\t\t");
		add(o, t + i, k - i);
		add(o, js->key_sep, js->key_sep_len);
		add(o, t + k + 1, e - k - 1);
		first = 0;
		i = e + 1;
	}
	if (!first && pretty_style)
		ADDL(o, "\n\t}");
	else if (!first)
		addc(o, '}');
}

/* The fields of a JSON object, in the stream sink's order (INTERFACES.md,
 * "Stream lines"), then the cursor when there is one.  Inlined into each
 * caller, so that the separators of a style are constants (copies of a
 * known size, no call). */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline void json_fields(struct out *o, const le_record *r,
                        const struct json_style *js, const char *cursor)
{
	/* compact: the separators and the key in one constant copy */
#define KEY(first, k) do { if (js == &compact && (first)) \
			ADDL(o, "\"" k "\":"); \
		else if (js == &compact) \
			ADDL(o, ",\"" k "\":"); \
		else { if (!(first)) add(o, js->sep, js->sep_len); \
			ADDL(o, "\"" k "\""); \
			add(o, js->key_sep, js->key_sep_len); } \
	} while (0)
	add(o, js->open, js->open_len);
	KEY(1, "seq"); /* seq, ts and the cursor are never filtered out */
	add_u64(o, r->seq);
	KEY(0, "ts");
	if (r->ts_ns) {
		addc(o, '"');
		add_time(o, r->ts_ns);
		addc(o, '"');
	} else {
		ADDL(o, "null");
	}
	if (keep(o, "level")) {
		KEY(0, "level");
		if (r->level < 0) {
			ADDL(o, "null");
		} else {
			addc(o, '"');
			add_level(o, r->level);
			addc(o, '"');
		}
	}
	if (keep(o, "shard")) {
		KEY(0, "shard");
		add_u64(o, r->shard);
	}
	if (r->host && keep(o, "host")) { /* [A-Za-z0-9._-]: no escapes */
		KEY(0, "host");
		addc(o, '"');
		adds(o, r->host);
		addc(o, '"');
		KEY(0, "origin_shard");
		add_u64(o, r->origin_shard);
		KEY(0, "origin_seq");
		add_u64(o, r->origin_seq);
	}
	if ((r->flags & LE_REC_TRUNCATED) && keep(o, "truncated")) {
		KEY(0, "truncated");
		ADDL(o, "true");
	}
	if ((r->flags & LE_REC_MARKER) && keep(o, "marker")) {
		KEY(0, "marker");
		ADDL(o, "true");
	}
	if ((r->flags & LE_REC_BACKTRACE) && keep(o, "backtrace")) {
		KEY(0, "backtrace");
		ADDL(o, "true");
	}
	if (keep(o, "msg")) {
		KEY(0, "msg");
		addc(o, '"');
		add_escaped(o, r->payload, r->len, 1);
		addc(o, '"');
	}
	json_typed_fields(o, r, js, js == &pretty); /* ,"fields":{...} */
	if (cursor) {
		KEY(0, "cursor");
		addc(o, '"');
		adds(o, cursor);
		addc(o, '"');
	}
	add(o, js->close, js->close_len);
#undef KEY
}

/* ---- verbose and export ---- */

/* Can a value go out as NAME=VALUE in the export format: valid UTF-8,
 * no control character but TAB? */
static int export_plain(const unsigned char *p, size_t len)
{
	for (size_t i = 0; i < len;) {
		if (p[i] >= 0x80) {
			size_t n = le_utf8_len(p + i, len - i);
			if (!n)
				return 0;
			i += n;
		} else if (p[i] < 0x20 && p[i] != '\t') {
			return 0;
		} else {
			i++;
		}
	}
	return 1;
}

/* One field in the export format: NAME=VALUE\n, or binary-safe: NAME\n,
 * the length as 64-bit little endian, the bytes, \n. */
static void export_field(void *arg, const char *name, const void *val,
                         size_t len)
{
	struct out *o = arg;
	if (!keep(o, name))
		return;
	reserve(o, strlen(name) + len + 16);
	adds(o, name);
	if (export_plain(val, len)) {
		addc(o, '=');
	} else {
		unsigned char le[8];
		addc(o, '\n');
		for (int i = 0; i < 8; i++)
			le[i] = (unsigned char)((uint64_t)len >> (8 * i));
		add(o, le, 8);
	}
	add(o, val, len);
	addc(o, '\n');
}

/* One field in -o verbose: four blanks, NAME=VALUE, escaped as text. */
static void verbose_field(void *arg, const char *name, const void *val,
                          size_t len)
{
	struct out *o = arg;
	if (!keep(o, name))
		return;
	reserve(o, strlen(name) + 6 * len + 16);
	ADDL(o, "    ");
	adds(o, name);
	addc(o, '=');
	add_escaped(o, val, len, 0);
	addc(o, '\n');
}

/* journald's metadata, then the fields; a blank line ends the entry.
 * journald keeps microseconds. */
static void export_record(struct out *o, const le_record *r,
                          const char *cursor)
{
	if (cursor) {
		ADDL(o, "__CURSOR=");
		adds(o, cursor);
		addc(o, '\n');
	}
	if (r->ts_ns) {
		ADDL(o, "__REALTIME_TIMESTAMP=");
		add_u64(o, r->ts_ns / 1000);
		addc(o, '\n');
	}
	export_fields(r, export_field, o);
	reserve(o, 1);
	addc(o, '\n');
}

/* journalctl -o verbose: the time to the microsecond and the cursor (or
 * [shard:seq]), then each field on a line of its own. */
static void verbose_record(struct out *o, const le_record *r,
                           const char *cursor)
{
	char when[96];
	time_t s = (time_t)(r->ts_ns / 1000000000u);
	struct tm tm;
	size_t n = 0;

	if (r->ts_ns && (o->utc ? gmtime_r(&s, &tm) : localtime_r(&s, &tm)))
		n = strftime(when, sizeof when, "%a %Y-%m-%d %H:%M:%S", &tm);
	if (n) {
		add(o, when, n);
		n = strftime(when, sizeof when, o->utc ? " UTC" : " %Z", &tm);
		addc(o, '.');
		add_fixed(o, r->ts_ns % 1000000000u / 1000, 6);
		add(o, when, n);
	} else {
		addc(o, '-');
	}
	ADDL(o, " [");
	if (cursor) {
		adds(o, cursor);
	} else {
		add_u64(o, r->shard);
		addc(o, ':');
		add_u64(o, r->seq);
	}
	ADDL(o, "]\n");
	export_fields(r, verbose_field, o);
}

/* Lines gather in o->buf and go to stdout's file this many bytes at a
 * time, with write(): each line is copied once, stdio's buffer is passed
 * over (after it is flushed, so that what was printed before stays
 * first).  A failed write is out_err, as out_failed would record it. */
#define OUT_BATCH (256u << 10)

void out_flush(struct out *o)
{
	const char *p = o->buf;
	size_t left = o->len;

	o->len = 0;
	if (!left || out_err)
		return;
	if (fflush(stdout) != 0) {
		out_failed();
		return;
	}
	while (left) {
		ssize_t n = write(fileno(stdout), p, left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			out_err = n < 0 ? errno : EIO;
			return;
		}
		p += n;
		left -= (size_t)n;
	}
}

void out_record(struct out *o, const le_record *r, const char *cursor)
{
	reserve(o, 6 * r->len + FIXED_ROOM + (cursor ? strlen(cursor) : 0));
	switch (o->fmt) {
	case OUT_JSON:
		json_fields(o, r, &compact, cursor);
		break;
	case OUT_JSON_PRETTY:
		json_fields(o, r, &pretty, cursor);
		break;
	case OUT_CAT: {
		int colored = color_on(o, r->level);
		add_escaped(o, r->payload, r->len, 0);
		if (colored)
			ADDL(o, COLOR_OFF);
		addc(o, '\n');
		break;
	}
	case OUT_VERBOSE:
		verbose_record(o, r, cursor);
		break;
	case OUT_EXPORT:
		export_record(o, r, cursor);
		break;
	case OUT_RAW:
		add(o, r->payload, r->len);
		addc(o, '\n');
		break;
	default:
		text_line(o, r);
	}
	if (o->len >= OUT_BATCH)
		out_flush(o);
}

void out_free(struct out *o)
{
	free(o->buf);
	free(o->aux);
	o->aux = NULL;
	o->aux_cap = 0;
	o->buf = NULL;
	o->len = o->cap = 0;
}
