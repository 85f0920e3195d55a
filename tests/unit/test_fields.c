/*
 * test_fields.c -- typed fields: the field block's bytes (the vectors of
 * docs/FORMAT.md), its checks, how every output prints it, the reader
 * API, truncation, and version 1 segments read beside version 2 ones.
 */
#include "harness.h"

#include <math.h>

#include "logengine.h"
#include "logtest.h"
#include "record/fields.h"
#include "record/format.h"
#include "segfile.h"
#include "sink/stream.h"
#include "sink/syslog.h"

/* docs/FORMAT.md, "Test vectors". */
static const char *PAYLOAD_VEC =
	"20000000 01047573 65720300 0000626f\n"
	"62020470 6f727490 1f000000 00000005\n"
	"026f6b01 6c6f6769 6e";
static const char *FRAME_VEC =
	"41000000 4a8a485d 04020200 64000000\n"
	"00000000 158b4a2c 2be67c18 20000000\n"
	"01047573 65720300 0000626f 62020470\n"
	"6f727490 1f000000 00000005 026f6b01\n"
	"6c6f6769 6e";
static const char *HDR_V2_VEC =
	"4c4f4745 4e475347 02004000 1f000000\n"
	"02000000 00000000 07000000 00000000\n"
	"64000000 00000000 00beee24 2be67c18\n"
	"00000000 00000000 00000000 b646b91a";
#define VEC_TS 1764538227123456789ull

/* user="bob", port=8080, ok=true, then "login": the vector's payload. */
static size_t vec_payload(unsigned char *out, size_t cap)
{
	le_field f[] = {LE_STR("user", "bob"), LE_I64("port", 8080),
	                LE_BOOL("ok", 1)};
	le__fieldset fs = {.f = f, .n = 3};
	size_t b = le__fields_encode(out, cap, &fs);
	CHECK_EQ(b, (size_t)le__fields_size(&fs));
	memcpy(out + b, "login", 5);
	return b + 5;
}

TEST(field_block_and_frame_match_format_md_vectors)
{
	unsigned char want[256], got[256], fr[256];
	size_t n;

	n = t_unhex(PAYLOAD_VEC, want);
	CHECK_EQ(vec_payload(got, sizeof got), n);
	CHECK(memcmp(got, want, n) == 0);
	uint32_t k = le__frame_encode(fr, LE_FIELD_ALL, LE_REC_FIELDS, LE_INFO,
	                              2, 100, VEC_TS, got, (uint32_t)n);
	n = t_unhex(FRAME_VEC, want);
	CHECK_EQ(k, n);
	CHECK(memcmp(fr, want, n) == 0);

	le__frame f;
	const char *why;
	CHECK_EQ(le__frame_decode(fr, k, LE_FIELD_ALL, LE_FRAME_MAX, &f, &why),
	         LE_FRAME_OK);
	CHECK_EQ(f.len, 5);
	CHECK(memcmp(f.payload, "login", 5) == 0);
	CHECK_EQ(f.fields_len, 32);
	CHECK(f.fields == fr + 32);

	le__seg_hdr h = {.version = 2, .fields = LE_FIELD_ALL, .shard = 2,
	                 .index = 7, .base_seq = 100,
	                 .created_ns = 1764538227000000000ull};
	le__seg_hdr_encode(got, &h);
	n = t_unhex(HDR_V2_VEC, want);
	CHECK_EQ(n, 64);
	CHECK(memcmp(got, want, 64) == 0);
	CHECK_EQ(le__seg_hdr_decode(got, &h), 0);
	CHECK_EQ(h.version, 2);
}

TEST(fields_flag_in_a_version_1_segment_is_damage)
{
	unsigned char fr[256], pay[128];
	size_t n = vec_payload(pay, sizeof pay);
	uint32_t k = le__frame_encode(fr, LE_FIELD_ALL, LE_REC_FIELDS, LE_INFO,
	                              2, 100, VEC_TS, pay, (uint32_t)n);
	le__frame f;
	const char *why = "";
	CHECK_EQ(le__frame_decode_v(fr, k, 1, LE_FIELD_ALL, LE_FRAME_MAX, &f,
	                            &why),
	         LE_FRAME_BAD);
	CHECK_STR_EQ(why, "unknown record flags");
	CHECK_EQ(le__frame_decode_v(fr, k, 2, LE_FIELD_ALL, LE_FRAME_MAX, &f,
	                            &why),
	         LE_FRAME_OK);
}

/* Every way a block can be malformed makes the frame invalid, even with
 * its CRC right (the CRC is computed over the bad block). */
TEST(malformed_field_blocks_are_refused_with_a_valid_crc)
{
	unsigned char pay[128], bad[128], fr[256];
	size_t n = vec_payload(pay, sizeof pay);
	/* The vector's payload: B at 0; "user" type at 4, key length 5,
	 * string length 10..13; "port" at 17; "ok" at 31, its bool at 35;
	 * "login" at 36. */
	struct {
		size_t off;
		unsigned char v;
	} cut[] = {
		{0, 0x21},  /* B one past the fields: the message's first byte */
		{0, 0xff},  /* B past the payload */
		{4, 0x07},  /* unknown type */
		{4, 0x00},  /* type 0 */
		{5, 0x00},  /* empty key */
		{11, 0x09}, /* string length past its field */
		{35, 0x02}, /* bool 2 */
	};
	for (size_t i = 0; i < sizeof cut / sizeof cut[0]; i++) {
		memcpy(bad, pay, n);
		bad[cut[i].off] = cut[i].v;
		uint32_t k = le__frame_encode(fr, LE_FIELD_ALL, LE_REC_FIELDS,
		                              LE_INFO, 2, 100, VEC_TS, bad,
		                              (uint32_t)n);
		le__frame f;
		const char *why;
		if (le__frame_decode(fr, k, LE_FIELD_ALL, LE_FRAME_MAX, &f,
		                     &why) != LE_FRAME_BAD) {
			fprintf(stderr, "  case %zu decoded\n", i);
			CHECK(0);
		}
	}
	/* A block with no field at all is not one the writer makes. */
	memset(bad, 0, 4);
	memcpy(bad + 4, "m", 1);
	uint32_t k = le__frame_encode(fr, LE_FIELD_ALL, LE_REC_FIELDS, LE_INFO,
	                              2, 100, VEC_TS, bad, 5);
	le__frame f;
	const char *why;
	CHECK_EQ(le__frame_decode(fr, k, LE_FIELD_ALL, LE_FRAME_MAX, &f, &why),
	         LE_FRAME_BAD);
}

/* The printed forms of docs/FORMAT.md, "Test vectors". */
TEST(fields_print_as_format_md_says)
{
	unsigned char b[512], out[2048];
	le_field g[] = {LE_STR("s", "a \"b\"\n"), LE_I64("neg", -1),
	                LE_U64("max", UINT64_MAX), LE_F64("d", 0.1),
	                LE_F64("inf", INFINITY), LE_BOOL("t", 0),
	                LE_BYTES("raw", "\x00\x01\xfe\xff", 4),
	                LE_STR("a b", "")};
	le__fieldset gs = {.f = g, .n = 8};
	size_t n = le__fields_encode(b, sizeof b, &gs);
	size_t k = le__fields_format(out, sizeof out, LE__FMT_TEXT, b + 4, n - 4);
	out[k] = 0;
	CHECK_STR_EQ((char *)out,
	             " s=\"a \\\"b\\\"\\n\" neg=-1 max=18446744073709551615 "
	             "d=0.1 inf=+Inf t=false raw=AAH+/w== a\\x20b=\"\"");
	k = le__fields_format(out, sizeof out, LE__FMT_JSON, b + 4, n - 4);
	out[k] = 0;
	CHECK_STR_EQ((char *)out,
	             ",\"fields\":{\"s\":\"a \\\"b\\\"\\u000a\",\"neg\":-1,"
	             "\"max\":18446744073709551615,\"d\":0.1,"
	             "\"inf\":\"Infinity\",\"t\":false,\"raw\":\"AAH+/w==\","
	             "\"a b\":\"\"}");
	k = le__fields_format(out, sizeof out, LE__FMT_SD, b + 4, n - 4);
	out[k] = 0;
	CHECK_STR_EQ((char *)out,
	             "[fields@32473 s=\"a \\\"b\\\"\n\" neg=\"-1\" "
	             "max=\"18446744073709551615\" d=\"0.1\" inf=\"+Inf\" "
	             "t=\"false\" raw=\"AAH+/w==\" a_b=\"\"]");
}

TEST(json_fields_escape_what_json_cannot_hold)
{
	unsigned char b[512], out[2048];
	/* a control byte, a bare invalid UTF-8 byte, valid UTF-8, a quote
	 * and a backslash, in a key and in a value; NaN, -0.5e-300 */
	le_field g[] = {LE_STR("k\x01\"", "\xff\xc3\xa9\\"),
	                LE_F64("nan", NAN), LE_F64("tiny", -0.5e-300),
	                LE_F64("big", 1e21), LE_I64("min", INT64_MIN)};
	le__fieldset gs = {.f = g, .n = 5};
	size_t n = le__fields_encode(b, sizeof b, &gs);
	size_t k = le__fields_format(out, sizeof out, LE__FMT_JSON, b + 4, n - 4);
	out[k] = 0;
	CHECK_STR_EQ((char *)out,
	             ",\"fields\":{\"k\\u0001\\\"\":\"\\u00ff\xc3\xa9\\\\\","
	             "\"nan\":\"NaN\",\"tiny\":-5e-301,\"big\":1e+21,"
	             "\"min\":-9223372036854775808}");
	k = le__fields_format(out, sizeof out, LE__FMT_TEXT, b + 4, n - 4);
	out[k] = 0;
	CHECK_STR_EQ((char *)out, " k\\x01\\x22=\"\\xff\xc3\xa9\\\\\" nan=NaN "
	                          "tiny=-5e-301 big=1e+21 "
	                          "min=-9223372036854775808");
}

/* Each case is a byte string, the length le_utf8_len may look at, and the
 * length it must say: 0 wherever a reader could be fooled into taking an
 * invalid byte for text. */
struct utf8_case {
	const char *s;
	size_t len, want;
};

static void check_utf8_cases(const struct utf8_case *c, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		size_t got = le_utf8_len(c[i].s, c[i].len);
		if (got != c[i].want)
			fprintf(stderr, "  case %zu: got %zu want %zu\n", i,
			        got, c[i].want);
		CHECK_EQ(got, c[i].want);
	}
}

TEST(utf8_len_takes_every_valid_length_and_its_edges)
{
	static const struct utf8_case c[] = {
	    {"a", 1, 1},                /* ASCII */
	    {"\x01", 1, 1},             /* a control byte is ASCII too */
	    {"\x7f", 1, 1},
	    {"\xc2\x80", 2, 2},         /* U+0080, the first of two bytes */
	    {"\xdf\xbf", 2, 2},         /* U+07FF */
	    {"\xe0\xa0\x80", 3, 3},     /* U+0800, the first of three */
	    {"\xe2\x82\xac", 3, 3},     /* U+20AC, the euro sign */
	    {"\xed\x9f\xbf", 3, 3},     /* U+D7FF, just below surrogates */
	    {"\xee\x80\x80", 3, 3},     /* U+E000, just above them */
	    {"\xef\xbf\xbf", 3, 3},     /* U+FFFF */
	    {"\xf0\x90\x80\x80", 4, 4}, /* U+10000, the first of four */
	    {"\xf4\x8f\xbf\xbf", 4, 4}, /* U+10FFFF, the last */
	    {"\xc3\xa9zz", 4, 2},       /* only the first character counts */
	    {"ab", 2, 1},
	};
	check_utf8_cases(c, sizeof c / sizeof c[0]);
}

TEST(utf8_len_refuses_overlongs_surrogates_and_past_u10ffff)
{
	static const struct utf8_case c[] = {
	    {"\xc0\x80", 2, 0},         /* U+0000 overlong in two */
	    {"\xc1\xbf", 2, 0},         /* U+007F overlong in two */
	    {"\xe0\x80\x80", 3, 0},     /* overlong in three */
	    {"\xe0\x9f\xbf", 3, 0},     /* U+07FF overlong in three */
	    {"\xf0\x80\x80\x80", 4, 0}, /* overlong in four */
	    {"\xf0\x8f\xbf\xbf", 4, 0}, /* U+FFFF overlong in four */
	    {"\xed\xa0\x80", 3, 0},     /* U+D800, the first surrogate */
	    {"\xed\xbf\xbf", 3, 0},     /* U+DFFF, the last */
	    {"\xf4\x90\x80\x80", 4, 0}, /* U+110000 */
	    {"\xf5\x80\x80\x80", 4, 0}, /* a lead byte past F4 */
	    {"\xff", 1, 0},             /* never in UTF-8 */
	    {"\xfe", 1, 0},
	};
	check_utf8_cases(c, sizeof c / sizeof c[0]);
}

TEST(utf8_len_refuses_stray_continuations_and_cut_sequences)
{
	static const struct utf8_case c[] = {
	    {"\x80", 1, 0},             /* a continuation byte alone */
	    {"\xbf\xbf", 2, 0},
	    {"\xc3", 1, 0},             /* cut by the end of the bytes */
	    {"\xe2\x82", 2, 0},
	    {"\xf0\x9f\x98", 3, 0},
	    {"\xe2\x82\xac", 2, 0},     /* whole, but len cuts it */
	    {"\xe2\x82\x41", 3, 0},     /* cut by an ASCII byte */
	    {"\xf0\x9f\xc0\x80", 4, 0}, /* cut by a lead byte */
	    {"\xc3\xa9", 0, 0},         /* nothing to look at */
	    {"a", 0, 0},
	};
	check_utf8_cases(c, sizeof c / sizeof c[0]);
}

/* A buffer too small for every field gets the first ones whole, and the
 * JSON object and the SD element still close. */
TEST(small_output_leaves_out_whole_fields_and_stays_well_formed)
{
	unsigned char b[512], out[512];
	le_field g[] = {LE_STR("a", "1"), LE_STR("b", "22"), LE_STR("c", "333")};
	le__fieldset gs = {.f = g, .n = 3};
	size_t n = le__fields_encode(b, sizeof b, &gs);
	size_t k = le__fields_format(out, 11 + 6 * 8 + 1, LE__FMT_JSON, b + 4,
	                             n - 4);
	out[k] = 0;
	CHECK_STR_EQ((char *)out, ",\"fields\":{\"a\":\"1\"}");
	k = le__fields_format(out, 14 + 6 * 8 + 1, LE__FMT_SD, b + 4, n - 4);
	out[k] = 0;
	CHECK_STR_EQ((char *)out, "[fields@32473 a=\"1\"]");
	CHECK_EQ(le__fields_format(out, 5, LE__FMT_SD, b + 4, n - 4), 0);
}

TEST(stream_lines_print_fields_after_the_message)
{
	unsigned char pay[128], out[1024];
	size_t n = vec_payload(pay, sizeof pay);
	size_t k = le__stream_format(out, sizeof out, LE_STREAM_TEXT, VEC_TS,
	                             LE_WARN, 2, 100, LE_REC_FIELDS, pay,
	                             (uint32_t)n);
	out[k] = 0;
	CHECK_STR_EQ((char *)out, "2025-11-30T21:30:27.123456789Z WARN  login "
	                          "user=bob port=8080 ok=true\n");
	k = le__stream_format(out, sizeof out, LE_STREAM_JSON, VEC_TS, LE_WARN,
	                      2, 100, LE_REC_FIELDS, pay, (uint32_t)n);
	out[k] = 0;
	CHECK_STR_EQ((char *)out,
	             "{\"seq\":100,\"ts\":\"2025-11-30T21:30:27.123456789Z\","
	             "\"level\":\"WARN\",\"shard\":2,\"msg\":\"login\","
	             "\"fields\":{\"user\":\"bob\",\"port\":8080,\"ok\":true}}\n");
	/* the bound a port reserves holds the worst case: every byte of
	 * every value escaped */
	unsigned char junk[64], big[4096];
	memset(junk, 0x01, sizeof junk);
	le_field f[] = {LE_BYTES("x", junk, 64)};
	f[0].type = LE_FT_STRING;
	le__fieldset fs = {.f = f, .n = 1};
	n = le__fields_encode(pay, sizeof pay, &fs);
	memcpy(pay + n, junk, 8);
	k = le__stream_format(big, le__stream_line_max(n + 8), LE_STREAM_JSON,
	                      VEC_TS, LE_WARN, 2, 100, LE_REC_FIELDS, pay,
	                      (uint32_t)n + 8);
	CHECK(k <= le__stream_line_max(n + 8));
	CHECK(k > 64 * 6);
	CHECK_EQ(big[k - 1], '\n');
	CHECK_EQ(big[k - 2], '}');
	CHECK_EQ(big[k - 3], '}');
}

TEST(syslog_message_matches_format_md_vector)
{
	unsigned char pay[128], out[1024];
	size_t n = vec_payload(pay, sizeof pay);
	le__syslog_id id = {.facility = 1};
	strcpy(id.tail, " h app 42 - ");
	id.tail_len = strlen(id.tail);
	le__rec r = {.payload = pay, .len = (uint32_t)n, .level = LE_WARN,
	             .flags = LE_REC_FIELDS, .ts = VEC_TS};
	size_t k = le__syslog_format(out, sizeof out, &id, &r);
	out[k] = 0;
	CHECK_STR_EQ((char *)out, "<12>1 2025-11-30T21:30:27.123456Z h app 42 - "
	                          "[fields@32473 user=\"bob\" port=\"8080\" "
	                          "ok=\"true\"] login");
	CHECK_EQ(k, 98);
	/* without fields: "-"; a marker at its own level */
	r.payload = (const unsigned char *)"3 records dropped";
	r.len = 17;
	r.flags = LE_REC_MARKER;
	r.level = LE_ERROR;
	k = le__syslog_format(out, sizeof out, &id, &r);
	out[k] = 0;
	CHECK_STR_EQ((char *)out, "<11>1 2025-11-30T21:30:27.123456Z h app 42 - "
	                          "- 3 records dropped");
}

TEST(syslog_identity_is_cut_to_printable_ascii)
{
	le__syslog_id id;
	le__syslog_id_init(&id, 23, "my app\x01", 7);
	CHECK_EQ(id.facility, 23);
	CHECK(strstr(id.tail, " my_app_ 7 - ") != NULL);
	char long_app[100];
	memset(long_app, 'a', 99);
	long_app[99] = 0;
	le__syslog_id_init(&id, 1, long_app, 7);
	char want[64];
	memset(want, 'a', 48);
	strcpy(want + 48, " 7 - ");
	CHECK(strstr(id.tail, want) != NULL);
	CHECK(strstr(id.tail, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa") ==
	      NULL);
}

/* ---- through the engine and the reader ---- */

static char dir[256];

static le_engine *open_dir(uint32_t max_rec, int oversize)
{
	le_config c;
	le_config_init(&c);
	c.dir = t_tmpdir(dir);
	c.durability = LE_SYNC_NONE;
	if (max_rec)
		c.max_record_bytes = max_rec;
	c.oversize = oversize;
	return t_open(&c);
}

struct seen {
	int n;
	char text[8][512];
	le_record rec[8];
};

static void collect(const le_record *r, void *arg)
{
	struct seen *s = arg;
	if (s->n >= 8)
		return;
	char *t = s->text[s->n];
	int k = snprintf(t, 512, "%.*s|", (int)r->len, (const char *)r->payload);
	size_t pos = 0;
	le_field f;
	int rc;
	while ((rc = le_record_field(r, &pos, &f)) == 1) {
		k += snprintf(t + k, 512 - (size_t)k, "%.*s:%u:", (int)f.key_len,
		              f.key, f.type);
		switch (f.type) {
		case LE_FT_STRING:
		case LE_FT_BYTES:
			k += snprintf(t + k, 512 - (size_t)k, "%.*s;",
			              (int)f.v.str.len, (const char *)f.v.str.ptr);
			break;
		case LE_FT_INT64:
			k += snprintf(t + k, 512 - (size_t)k, "%lld;",
			              (long long)f.v.i64);
			break;
		case LE_FT_UINT64:
			k += snprintf(t + k, 512 - (size_t)k, "%llu;",
			              (unsigned long long)f.v.u64);
			break;
		case LE_FT_DOUBLE:
			k += snprintf(t + k, 512 - (size_t)k, "%g;", f.v.f64);
			break;
		case LE_FT_BOOL:
			k += snprintf(t + k, 512 - (size_t)k, "%d;", f.v.b);
			break;
		}
	}
	CHECK_EQ(rc, 0);
	s->rec[s->n++] = *r;
}

TEST(fields_logged_read_back_typed_in_order)
{
	le_engine *e = open_dir(0, LE_OVERSIZE_TRUNCATE);
	CHECK_RC(le_logf_kv(e, LE_INFO,
	                    LE_FIELDS(LE_STR("user", "bob"), LE_I64("n", -3),
	                              LE_U64("u", UINT64_MAX),
	                              LE_F64("d", 2.5), LE_BOOL("b", 1),
	                              LE_BYTES("raw", "xy", 2)),
	                    "hello %d", 7));
	CHECK_RC(le_logf(e, LE_WARN, "plain"));
	CHECK_RC(le_logf_kv(e, LE_INFO, NULL, 0, "none"));
	CHECK_RC(le_close(e));
	struct seen s = {0};
	CHECK_EQ(read_all(dir, LE_RECOVER_ABSOLUTE, collect, &s), 3);
	CHECK_STR_EQ(s.text[0], "hello 7|user:1:bob;n:2:-3;"
	                        "u:3:18446744073709551615;d:4:2.5;b:5:1;"
	                        "raw:6:xy;");
	CHECK_EQ(s.rec[0].flags, LE_REC_FIELDS);
	CHECK_EQ(s.rec[0].len, 7);
	CHECK_STR_EQ(s.text[1], "plain|");
	CHECK(s.rec[1].fields == NULL && s.rec[1].fields_len == 0);
	CHECK_STR_EQ(s.text[2], "none|");
	CHECK_EQ(s.rec[2].flags, 0);
	t_rmrf(dir);
}

TEST(bad_field_arguments_are_refused)
{
	le_engine *e = open_dir(0, LE_OVERSIZE_TRUNCATE);
	le_field f = LE_I64("x", 1);
	f.type = 9;
	CHECK_EQ(le_logf_kv(e, LE_INFO, &f, 1, "m"), LE_EINVAL);
	CHECK_EQ(le_logf_kv(e, LE_INFO, NULL, 1, "m"), LE_EINVAL);
	CHECK_EQ(le_logf_kv(e, LE_INFO, &f, LE_FIELDS_MAX + 1, "m"), LE_EINVAL);
	/* lenient where nothing is ambiguous: an empty key, a key over 255
	 * bytes, a NULL string */
	char longkey[300];
	memset(longkey, 'k', 299);
	longkey[299] = 0;
	CHECK_RC(le_logf_kv(e, LE_INFO,
	                    LE_FIELDS(LE_STR("", "v"), LE_STR(longkey, NULL)),
	                    "m"));
	CHECK_RC(le_close(e));
	struct seen s = {0};
	CHECK_EQ(read_all(dir, LE_RECOVER_ABSOLUTE, collect, &s), 1);
	char want[400];
	snprintf(want, sizeof want, "m|_:1:v;%.255s:1:;", longkey);
	CHECK_STR_EQ(s.text[0], want);
	t_rmrf(dir);
}

/* max_record_bytes cuts the message first, then whole fields from the
 * end; the block stays valid and the record is flagged. */
TEST(oversize_records_lose_message_then_whole_fields)
{
	le_engine *e = open_dir(64, LE_OVERSIZE_TRUNCATE);
	char msg[100];
	memset(msg, 'm', 99);
	msg[99] = 0;
	/* fields: 4 + (2+1+4+10) + (2+1+8) = 32 bytes; 32 left for text */
	CHECK_RC(le_logf_kv(e, LE_INFO,
	                    LE_FIELDS(LE_STR("a", "0123456789"), LE_I64("b", 5)),
	                    "%s", msg));
	/* fields alone 4 + 17 + 11 + (2+1+4+40) = 79 > 64: the last goes */
	CHECK_RC(le_logf_kv(e, LE_INFO,
	                    LE_FIELDS(LE_STR("a", "0123456789"), LE_I64("b", 5),
	                              LE_STR("c", "0123456789012345678901234"
	                                          "567890123456789")),
	                    "xyz"));
	CHECK_RC(le_close(e));
	struct seen s = {0};
	CHECK_EQ(read_all(dir, LE_RECOVER_ABSOLUTE, collect, &s), 2);
	CHECK_EQ(s.rec[0].len, 32);
	CHECK_EQ(s.rec[0].flags, LE_REC_FIELDS | LE_REC_TRUNCATED);
	CHECK(strstr(s.text[0], "|a:1:0123456789;b:2:5;") != NULL);
	CHECK_STR_EQ(s.text[1], "xyz|a:1:0123456789;b:2:5;");
	CHECK_EQ(s.rec[1].flags, LE_REC_FIELDS | LE_REC_TRUNCATED);

	e = open_dir(64, LE_OVERSIZE_REJECT);
	CHECK_EQ(le_logf_kv(e, LE_INFO, LE_FIELDS(LE_STR("a", msg)), "x"),
	         LE_ETOOBIG);
	le_stats st;
	CHECK_RC(le_close_stats(e, &st));
	CHECK_EQ(st.rejected, 1);
	t_rmrf(dir);
}

TEST(record_fields_format_refuses_a_short_buffer)
{
	le_engine *e = open_dir(0, LE_OVERSIZE_TRUNCATE);
	CHECK_RC(le_logf_kv(e, LE_INFO, LE_FIELDS(LE_STR("k", "v w")), "m"));
	CHECK_RC(le_close(e));
	struct seen s = {0};
	CHECK_EQ(read_all(dir, LE_RECOVER_ABSOLUTE, collect, &s), 1);
	char buf[256];
	/* the reader's pointers are gone; the block is in the segment: read
	 * it again to format it */
	le_reader *r;
	le_record rec;
	CHECK_RC(le_reader_open(&r, dir, NULL));
	CHECK_EQ(le_reader_next(r, &rec), 1);
	size_t need = LE_FIELDS_TEXT_MAX(rec.fields_len);
	CHECK_EQ(le_record_fields_format(&rec, LE_STREAM_TEXT, buf, need - 1),
	         LE_EINVAL);
	CHECK_EQ(le_record_fields_format(&rec, LE_STREAM_TEXT, buf, need), 8);
	CHECK_STR_EQ(buf, " k=\"v w\"");
	CHECK_EQ(le_record_fields_format(&rec, LE_STREAM_JSON, buf, need), 21);
	CHECK_STR_EQ(buf, ",\"fields\":{\"k\":\"v w\"}");
	CHECK_EQ(le_record_fields_format(&rec, 7, buf, need), LE_EINVAL);
	le_reader_close(r);
	t_rmrf(dir);
}

/* A program built against the header before fields has a smaller
 * le_record: the reader writes none of the new members into it. */
TEST(reader_writes_no_byte_past_an_older_programs_record)
{
	le_engine *e = open_dir(0, LE_OVERSIZE_TRUNCATE);
	CHECK_RC(le_logf_kv(e, LE_INFO, LE_FIELDS(LE_I64("k", 1)), "m"));
	CHECK_RC(le_close(e));
	size_t old = offsetof(le_record, offset) + sizeof(uint64_t);
	struct {
		le_record r;
		unsigned char pad[64];
	} big;
	unsigned char *canary = (unsigned char *)&big + old;
	le_reader *r;
	memset(&big, 0xA5, sizeof big);
	CHECK_RC(le_reader_open(&r, dir, NULL));
	CHECK_EQ(le_reader_next_sized(r, &big.r, old), 1);
	for (size_t i = 0; i < sizeof big - old; i++)
		CHECK_EQ(canary[i], 0xA5);
	CHECK_EQ(big.r.len, 1); /* the message, as before */
	le_reader_close(r);
	/* a newer program's larger one: what this library does not fill
	 * reads 0 */
	memset(&big, 0xA5, sizeof big);
	CHECK_RC(le_reader_open(&r, dir, NULL));
	CHECK_EQ(le_reader_next_sized(r, &big.r, sizeof big), 1);
	CHECK(big.r.fields != NULL && big.r.fields_len == 11);
	for (size_t i = 0; i < sizeof big.pad; i++)
		CHECK_EQ(big.pad[i], 0);
	CHECK_EQ(le_reader_next_sized(r, &big.r, old - 1), LE_EINVAL);
	le_reader_close(r);
	t_rmrf(dir);
}

/* A log directory a version 1 library wrote is read as before, and an
 * engine opening it starts a version 2 segment rather than append. */
TEST(version_1_segments_are_still_read_and_never_appended_to)
{
	char sdir[300];
	t_tmpdir(dir);
	snprintf(sdir, sizeof sdir, "%s/shard-000", dir);
	CHECK(mkdir(sdir, 0777) == 0);
	t_seg s;
	t_seg_begin(&s, LE_FIELD_ALL, 0, 1, 1);
	le__seg_hdr h = {.version = 1, .fields = LE_FIELD_ALL, .shard = 0,
	                 .index = 1, .base_seq = 1, .created_ns = 1};
	le__seg_hdr_encode(s.buf, &h);
	t_seg_add(&s, LE_INFO, 10, "old one");
	t_seg_add(&s, LE_WARN, 11, "old two");
	t_seg_save(&s, dir);
	t_seg_free(&s);

	le_config c;
	le_config_init(&c);
	c.dir = dir;
	c.durability = LE_SYNC_NONE;
	le_engine *e;
	CHECK_RC(le_open(&e, &c));
	CHECK_RC(le_logf_kv(e, LE_INFO, LE_FIELDS(LE_I64("k", 1)), "new"));
	CHECK_RC(le_close(e));
	struct seen got = {0};
	CHECK_EQ(read_all(dir, LE_RECOVER_ABSOLUTE, collect, &got), 3);
	CHECK_STR_EQ(got.text[0], "old one|");
	CHECK_STR_EQ(got.text[1], "old two|");
	CHECK_STR_EQ(got.text[2], "new|k:2:1;");
	char p1[400], p2[400];
	snprintf(p1, sizeof p1, "%s/0000000000000001.seg", sdir);
	snprintf(p2, sizeof p2, "%s/0000000000000002.seg", sdir);
	size_t n;
	unsigned char *b = t_slurp(p1, &n);
	CHECK(b && le__get16(b + 8) == 1);
	free(b);
	b = t_slurp(p2, &n);
	CHECK(b && le__get16(b + 8) == 2);
	free(b);
	t_rmrf(dir);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	RUN(field_block_and_frame_match_format_md_vectors);
	RUN(fields_flag_in_a_version_1_segment_is_damage);
	RUN(malformed_field_blocks_are_refused_with_a_valid_crc);
	RUN(fields_print_as_format_md_says);
	RUN(json_fields_escape_what_json_cannot_hold);
	RUN(small_output_leaves_out_whole_fields_and_stays_well_formed);
	RUN(utf8_len_takes_every_valid_length_and_its_edges);
	RUN(utf8_len_refuses_overlongs_surrogates_and_past_u10ffff);
	RUN(utf8_len_refuses_stray_continuations_and_cut_sequences);
	RUN(stream_lines_print_fields_after_the_message);
	RUN(syslog_message_matches_format_md_vector);
	RUN(syslog_identity_is_cut_to_printable_ascii);
	RUN(fields_logged_read_back_typed_in_order);
	RUN(bad_field_arguments_are_refused);
	RUN(oversize_records_lose_message_then_whole_fields);
	RUN(record_fields_format_refuses_a_short_buffer);
	RUN(version_1_segments_are_still_read_and_never_appended_to);
	RUN(reader_writes_no_byte_past_an_older_programs_record);
	return t_done();
}
