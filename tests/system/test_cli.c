/*
 * test_cli.c -- the logengine tool, run as a user runs it: cat (text and
 * JSON, escaping, closed pipes), verify (exit status, offsets), stats, and
 * usage errors.  The binary is $LE_CLI, else $BUILD/logengine (BUILD
 * defaults to "build"); run from the top of the tree.
 */
#include "unit/segfile.h"

#include "logengine.h"

#define ALL LE_FIELD_ALL
#define TS0 1796074227000000000ull /* 2026-11-30T21:30:27Z */

static const char *cli(void)
{
	return t_build_tool("LE_CLI", "logengine");
}

/* Output of the last run(), NUL-terminated, in the child's memory. */
static char *out_text, *err_text;

/* Run "logengine ARGS" (ARGS already shell-quoted) in dir's scratch area;
 * stdout and stderr land in out_text / err_text.  @return exit status. */
static int run(const char *scratch, const char *args)
{
	char cmd[4096], o[300], e[300];
	int st;

	if (access(cli(), X_OK) != 0) {
		fprintf(stderr, "  %s: not built (set LE_CLI or BUILD)\n", cli());
		_exit(1);
	}
	snprintf(o, sizeof o, "%s/out", scratch);
	snprintf(e, sizeof e, "%s/err", scratch);
	snprintf(cmd, sizeof cmd, "'%s' %s >'%s' 2>'%s'", cli(), args, o, e);
	st = system(cmd);
	CHECK(st != -1 && WIFEXITED(st));
	free(out_text);
	free(err_text);
	out_text = t_slurp_text(o);
	err_text = t_slurp_text(e);
	return WEXITSTATUS(st);
}

/* Two directories per test: the log, and a scratch one for output. */
static void dirs(char *log, char *scratch)
{
	t_tmpdir(log);
	t_tmpdir(scratch);
}

/* ---- cat ---- */

TEST(cat_text_prints_records_oldest_first)
{
	char log[256], tmp[256], args[600];
	t_seg a, b;

	dirs(log, tmp);
	t_seg_begin(&a, ALL, 0, 1, 1);
	t_seg_add(&a, LE_INFO, TS0 + 123456789, "hello");
	t_seg_add(&a, LE_ERROR, TS0 + 2000000000, "third");
	t_seg_add_ex(&a, LE_REC_MARKER, LE_WARN, TS0 + 3000000000u,
	             "5 records dropped", 17);
	const char *odd = "tab\there\x01\xff\\ ok \xc3\xa9";
	t_seg_add_ex(&a, LE_REC_TRUNCATED, LE_DEBUG, TS0 + 4000000000u, odd,
	             strlen(odd));
	t_seg_save(&a, log);
	t_seg_begin(&b, ALL, 1, 1, 1);
	t_seg_add(&b, LE_WARN, TS0 + 1000000000, "second");
	t_seg_save(&b, log);

	snprintf(args, sizeof args, "cat -o text '%s'", log);
	CHECK_EQ(run(tmp, args), 0);
	const char *want =
		"2026-11-30T21:30:27.123456789Z INFO  [0:1] hello\n"
		"2026-11-30T21:30:28.000000000Z WARN  [1:1] second\n"
		"2026-11-30T21:30:29.000000000Z ERROR [0:2] third\n"
		"2026-11-30T21:30:30.000000000Z WARN  [0:3] {marker} "
		"5 records dropped\n"
		"2026-11-30T21:30:31.000000000Z DEBUG [0:4] {truncated} "
		"tab\\x09here\\x01\\xff\\\\ ok \xc3\xa9\n";
	if (strcmp(out_text, want) != 0)
		fprintf(stderr, "  got:\n%s  want:\n%s", out_text, want);
	CHECK(strcmp(out_text, want) == 0);
	CHECK_EQ(strlen(err_text), 0);
	t_seg_free(&a);
	t_seg_free(&b);
	t_rmrf(log);
	t_rmrf(tmp);
}

/* Recorded history (the flight recorder's records, a leading field
 * "le.backtrace" = true): "{backtrace}" in text, "backtrace":true in
 * JSON, the field itself not printed; --backtrace hides or keeps only
 * them. */
TEST(cat_shows_recorded_history_and_backtrace_filters_it)
{
	char log[256], tmp[256], args[600];
	unsigned char p[64];
	t_seg a;

	dirs(log, tmp);
	memcpy(p, "\x0f\0\0\0\x05\x0c" "le.backtrace" "\x01" "kept", 4 + 15 + 4);
	t_seg_begin(&a, ALL, 0, 1, 1);
	t_seg_add_ex(&a, LE_REC_FIELDS, LE_DEBUG, TS0, (const char *)p, 23);
	t_seg_add(&a, LE_ERROR, TS0 + 1000000000, "boom");
	t_seg_save(&a, log);
	snprintf(args, sizeof args, "cat -o text '%s'", log);
	CHECK_EQ(run(tmp, args), 0);
	CHECK_STR_EQ(out_text,
	             "2026-11-30T21:30:27.000000000Z DEBUG [0:1] {backtrace} "
	             "kept\n"
	             "2026-11-30T21:30:28.000000000Z ERROR [0:2] boom\n");
	snprintf(args, sizeof args, "cat -o json '%s'", log);
	CHECK_EQ(run(tmp, args), 0);
	CHECK(strstr(out_text, "\"backtrace\":true,\"msg\":\"kept\"}\n") != NULL);
	CHECK(!strstr(out_text, "le.backtrace") && !strstr(out_text, "fields"));
	snprintf(args, sizeof args, "cat -o cat --backtrace=hide '%s'", log);
	CHECK_EQ(run(tmp, args), 0);
	CHECK_STR_EQ(out_text, "boom\n");
	snprintf(args, sizeof args, "cat -o cat --backtrace=only '%s'", log);
	CHECK_EQ(run(tmp, args), 0);
	CHECK_STR_EQ(out_text, "kept\n");
	snprintf(args, sizeof args, "cat --backtrace=maybe '%s'", log);
	CHECK_EQ(run(tmp, args), 2);
	t_seg_free(&a);
	t_rmrf(log);
	t_rmrf(tmp);
}

/* Does python's json module read every line of path back to the records
 * written?  Skipped (true) where python3 is missing. */
static int python_accepts(const char *path)
{
	char cmd[1024];
	if (!t_which("python3"))
		return 1;
	snprintf(cmd, sizeof cmd,
	         "python3 -c 'import json,sys\n"
	         "ls=open(sys.argv[1],\"rb\").read().decode(\"utf-8\")"
	         ".splitlines()\n"
	         "r={d[\"seq\"]:d for d in map(json.loads,ls)}\n"
	         "assert r[1][\"msg\"]==\"q\\\"b\\\\s\\n\\x01\\xff\\u00e9\"\n"
	         "assert r[1][\"level\"]==\"INFO\" and r[7][\"level\"] is None\n"
	         "assert r[2][\"marker\"] is True and r[2][\"truncated\"]\n"
	         "' '%s'", path);
	return system(cmd) == 0;
}

TEST(cat_json_has_required_keys_and_escapes)
{
	char log[256], tmp[256], args[600], path[300];
	t_seg a, b;

	dirs(log, tmp);
	t_seg_begin(&a, ALL, 0, 1, 1);
	/* quote, backslash, newline, 0x01, invalid 0xFF, valid e-acute */
	t_seg_add(&a, LE_INFO, TS0 + 123456789, "q\"b\\s\n\x01\xff\xc3\xa9");
	t_seg_add_ex(&a, LE_REC_MARKER | LE_REC_TRUNCATED, LE_WARN, TS0 + 5,
	             "m", 1);
	t_seg_save(&a, log);
	t_seg_begin(&b, ALL & ~LE_FIELD_LEVEL, 1, 1, 7);
	t_seg_add(&b, 0, TS0 + 9, "no level");
	t_seg_save(&b, log);

	snprintf(args, sizeof args, "cat -o json '%s'", log);
	CHECK_EQ(run(tmp, args), 0);
	/* Merge order: shard 1's record (ts+9) leads; shard 0's second
	 * record (ts+5) still follows its first, as in its file. */
	const char *want =
		"{\"seq\":7,\"ts\":\"2026-11-30T21:30:27.000000009Z\","
		"\"level\":null,\"shard\":1,\"msg\":\"no level\"}\n"
		"{\"seq\":1,\"ts\":\"2026-11-30T21:30:27.123456789Z\","
		"\"level\":\"INFO\",\"shard\":0,"
		"\"msg\":\"q\\\"b\\\\s\\u000a\\u0001\\u00ff\xc3\xa9\"}\n"
		"{\"seq\":2,\"ts\":\"2026-11-30T21:30:27.000000005Z\","
		"\"level\":\"WARN\",\"shard\":0,\"truncated\":true,"
		"\"marker\":true,\"msg\":\"m\"}\n";
	if (strcmp(out_text, want) != 0)
		fprintf(stderr, "  got:\n%s  want:\n%s", out_text, want);
	CHECK(strcmp(out_text, want) == 0);
	CHECK_EQ(strlen(err_text), 0);

	/* And a real JSON parser reads back the same code points. */
	snprintf(path, sizeof path, "%s/out", tmp);
	CHECK(python_accepts(path));
	t_seg_free(&a);
	t_seg_free(&b);
	t_rmrf(log);
	t_rmrf(tmp);
}

/* The escaping rule, written from logengine(1) (-o) rather than from
 * output.c: a byte sequence that is valid UTF-8 (no overlong form, no
 * surrogate, nothing past U+10FFFF) passes; JSON escapes '"' and '\' with a
 * backslash and every other byte below 0x20, 0x7f and each byte of invalid
 * UTF-8 as \u00XX; text escapes '\' as \\ and the same bytes as \xNN.
 * ref_utf8: the length of the valid sequence at p, 0 if none; ref_escape:
 * the escaped text in out, @return its length. */
static size_t ref_utf8(const unsigned char *p, size_t n)
{
	static const struct {
		unsigned char lo, hi;
		int len;
		uint32_t min;
	} lead[] = {{0xc0, 0xdf, 2, 0x80}, {0xe0, 0xef, 3, 0x800},
	            {0xf0, 0xf7, 4, 0x10000}};
	for (size_t k = 0; k < 3; k++) {
		if (p[0] < lead[k].lo || p[0] > lead[k].hi)
			continue;
		size_t len = (size_t)lead[k].len;
		if (n < len)
			return 0;
		uint32_t cp = p[0] & (0x7f >> len);
		for (size_t i = 1; i < len; i++) {
			if ((p[i] & 0xc0) != 0x80)
				return 0;
			cp = cp << 6 | (p[i] & 0x3f);
		}
		if (cp < lead[k].min || cp > 0x10ffff ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
		return len;
	}
	return 0;
}

static size_t ref_escape(char *out, const unsigned char *p, size_t n,
                         int json)
{
	size_t o = 0;
	for (size_t i = 0; i < n;) {
		unsigned c = p[i];
		size_t u = c >= 0x80 ? ref_utf8(p + i, n - i) : 0;
		if (u) {
			memcpy(out + o, p + i, u);
			o += u;
			i += u;
			continue;
		}
		if (c == '\\' || (json && c == '"'))
			o += (size_t)sprintf(out + o, "\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			o += (size_t)sprintf(out + o, json ? "\\u%04x" : "\\x%02x",
			                     c);
		else
			out[o++] = (char)c;
		i++;
	}
	out[o] = 0;
	return o;
}

/* Payloads built from pieces that need escaping, valid and invalid UTF-8
 * (cut short too), between runs of plain ASCII of every length, so that
 * each lands at every position of the escaper's 8- and 16-byte blocks. */
static size_t odd_payload(unsigned char *p, uint64_t *rnd)
{
	static const char *const piece[] = {
		"\"", "\\", "\n", "\x01", "\x1f", "\x7f", " ", "~",
		"\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xf4\x8f\xbf\xbf",
		"\x80", "\xbf", "\xc0\xaf", "\xc1\xbf", "\xe0\x80\xaf",
		"\xed\xa0\x80", "\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\xf8",
		"\xff", "\xe2\x82", "\xf0\x9f\x98", "\xc3",
	};
	size_t n = 0, npieces = sizeof piece / sizeof piece[0];
	int parts = (int)((*rnd >> 40) % 7);
	for (int k = 0; k < parts; k++) {
		*rnd = *rnd * 6364136223846793005ull + 1442695040888963407ull;
		size_t run = (size_t)(*rnd >> 33) % 40;
		for (size_t i = 0; i < run; i++)
			p[n + i] = (unsigned char)('a' + (n + i) % 26);
		n += run;
		const char *s = piece[(*rnd >> 20) % npieces];
		memcpy(p + n, s, strlen(s));
		n += strlen(s);
	}
	*rnd = *rnd * 6364136223846793005ull + 1442695040888963407ull;
	size_t run = (size_t)(*rnd >> 33) % 20;
	for (size_t i = 0; i < run; i++)
		p[n++] = 'z';
	return n;
}

TEST(json_and_text_escape_every_payload_as_documented)
{
	enum { N = 3000 };
	char log[256], tmp[256], args[600];
	static unsigned char pay[N][512];
	static size_t len[N];
	uint64_t rnd = 42;
	t_seg s;

	dirs(log, tmp);
	t_seg_begin(&s, ALL, 0, 1, 1);
	for (int i = 0; i < N; i++) {
		len[i] = odd_payload(pay[i], &rnd);
		t_seg_add_ex(&s, 0, LE_INFO, TS0 + (uint64_t)i, pay[i], len[i]);
	}
	t_seg_save(&s, log);
	t_seg_free(&s);
	for (int json = 0; json <= 1; json++) {
		snprintf(args, sizeof args, "cat -o %s '%s'",
		         json ? "json" : "cat", log);
		CHECK_EQ(run(tmp, args), 0);
		char *line = out_text, want[4096];
		int bad = 0, i;
		for (i = 0; i < N && *line; i++) {
			char *end = strchr(line, '\n');
			CHECK(end != NULL);
			*end = 0;
			const char *msg = line;
			size_t mlen = strlen(line);
			if (json) { /* "msg":"...", the last key */
				msg = strstr(line, "\"msg\":\"");
				CHECK(msg != NULL && mlen >= 2 &&
				      !strcmp(line + mlen - 2, "\"}"));
				msg += 7;
				mlen = (size_t)(line + mlen - 2 - msg);
			}
			size_t wl = ref_escape(want, pay[i], len[i], json);
			if ((wl != mlen || memcmp(want, msg, wl)) && bad++ < 3)
				fprintf(stderr, "  record %d (-o %s):\n  got  %.*s\n"
				        "  want %s\n", i, json ? "json" : "cat",
				        (int)mlen, msg, want);
			line = end + 1;
		}
		CHECK_EQ(bad, 0);
		CHECK_EQ(i, N);
		CHECK(*line == 0); /* one line per record, none more */
	}
	t_rmrf(log);
	t_rmrf(tmp);
}

/* Sequence numbers of every width print in full (the digits are made two
 * at a time, nine per block). */
TEST(json_prints_sequence_numbers_of_every_width)
{
	static const uint64_t base[] = {1, 99999998, 999999998,
	                                10000000000000000000ull,
	                                UINT64_MAX - 3};
	char log[256], tmp[256], args[600], want[64];
	t_seg s;

	dirs(log, tmp);
	for (uint32_t k = 0; k < 5; k++) {
		t_seg_begin(&s, ALL, k, 1, base[k]);
		for (uint64_t i = 0; i < 4; i++)
			t_seg_add(&s, LE_INFO, TS0 + i, "n");
		t_seg_save(&s, log);
		t_seg_free(&s);
	}
	snprintf(args, sizeof args, "cat -o json '%s'", log);
	CHECK_EQ(run(tmp, args), 0);
	for (uint32_t k = 0; k < 5; k++)
		for (uint64_t i = 0; i < 4; i++) {
			snprintf(want, sizeof want, "{\"seq\":%" PRIu64 ",",
			         base[k] + i);
			CHECK(strstr(out_text, want) != NULL);
			snprintf(want, sizeof want, "\"shard\":%" PRIu32 ",", k);
			CHECK(strstr(out_text, want) != NULL);
		}
	t_rmrf(log);
	t_rmrf(tmp);
}

/*
 * A deferred record's text is made by the reader (a format compiled once
 * per descriptor), a plain record's by snprintf at the call: the same
 * text must print the same in every format.  Each case goes in twice,
 * through le_info and as le_write of snprintf's text, and cat's lines are
 * compared pairwise from the message on (json: "msg", short: past "] ").
 */
#define BOTH(e, fmt, ...)                                                    \
	do {                                                                 \
		char line_[512];                                             \
		int n_ = snprintf(line_, sizeof line_, fmt, __VA_ARGS__);    \
		le_info(e, fmt, __VA_ARGS__);                                \
		CHECK_EQ(le_write(e, 0, LE_INFO, line_, (uint32_t)n_), 0);   \
	} while (0)

static void log_both(const char *dir, int n)
{
	static const char *const strs[] = {"plain", "q\"uote", "back\\slash",
	                                   "tab\tnl\n\x01", "\xc3\xa9t\xc3\xa9",
	                                   "bad \xff\xfe", ""};
	le_config c;
	le_engine *e;

	le_config_init(&c);
	c.dir = dir;
	c.durability = LE_SYNC_NONE;
	CHECK_EQ(le_open(&e, &c), 0);
	for (int i = 0; i < n; i++) {
		const char *s = strs[i % 7];
		long long big = (long long)i * -987654321987ll;
		BOTH(e, "Logging int: %d, int: %d, double: %f", i, 2 * i,
		     i / 2.0);
		BOTH(e, "u=%u x=%x s=%s %%", (unsigned)i * 2654435761u, i, s);
		BOTH(e, "[%5d|%-6s|%+.2f|%08.3f]", -i, s, i * -1.25, i / 7.0);
		BOTH(e, "%lld %zu %c %.3s", big, (size_t)i << 40, 'A' + i % 26,
		     s);
		BOTH(e, "%*d %.*f %e", i % 9, i, i % 5, i * 1e-3, i * 1e10);
	}
	CHECK_EQ(le_close(e), 0);
}

/* Lines of out_text, pairwise equal from the first `from` on. */
static void pairs_equal(const char *from, int want_lines)
{
	char *save = NULL;
	int n = 0;
	const char *prev = NULL;
	for (char *l = strtok_r(out_text, "\n", &save); l;
	     l = strtok_r(NULL, "\n", &save), n++) {
		const char *m = strstr(l, from);
		CHECK(m != NULL);
		if (n % 2 && strcmp(prev, m) != 0) {
			fprintf(stderr, "  line %d: \"%s\" against \"%s\"\n", n,
			        m, prev);
			CHECK(0);
		}
		prev = m;
	}
	CHECK_EQ(n, want_lines);
}

TEST(deferred_records_print_as_snprintfs_text_in_json_and_short)
{
	char log[256], tmp[256], args[600];
	le_reader *r;
	le_record rec;
	int deferred = 0;

	dirs(log, tmp);
	log_both(log, 300);
	CHECK_EQ(le_reader_open(&r, log, NULL), 0);
	while (le_reader_next(r, &rec) > 0)
		deferred += (rec.flags & LE_REC_DEFERRED) != 0;
	le_reader_close(r);
	CHECK(deferred >= 300 * 4); /* the detector: most went deferred */
	snprintf(args, sizeof args, "cat -o json '%s'", log);
	CHECK_EQ(run(tmp, args), 0);
	pairs_equal("\"msg\":", 300 * 5 * 2);
	snprintf(args, sizeof args, "cat -o short '%s'", log);
	CHECK_EQ(run(tmp, args), 0);
	pairs_equal("] ", 300 * 5 * 2);
	t_rmrf(log);
	t_rmrf(tmp);
}

TEST(cat_on_corruption_exits_1_naming_file_and_offset)
{
	char log[256], tmp[256], args[600], path[512], want[700];
	t_seg s;

	dirs(log, tmp);
	t_seg_begin(&s, ALL, 0, 1, 1);
	size_t off[6];
	for (int i = 0; i < 6; i++)
		off[i] = t_seg_add(&s, LE_INFO, TS0 + (uint64_t)i, "record");
	s.buf[off[3] + 10] ^= 0x20;
	t_seg_save(&s, log);
	t_seg_path(path, sizeof path, log, 0, 1);

	snprintf(args, sizeof args, "cat -o text '%s'", log);
	CHECK_EQ(run(tmp, args), 1);
	snprintf(want, sizeof want, "%s: offset %zu: ", path, off[3]);
	CHECK(strstr(err_text, want));
	CHECK(strstr(out_text, "[0:3] record\n"));
	CHECK(!strstr(out_text, "[0:4]"));

	/* skip reads on, and the damage still decides the status */
	snprintf(args, sizeof args, "cat -o text --mode skip '%s'", log);
	CHECK_EQ(run(tmp, args), 1);
	CHECK(strstr(err_text, want));
	CHECK(strstr(out_text, "[0:5] record\n"));
	CHECK(!strstr(out_text, "[0:4]"));

	snprintf(args, sizeof args, "cat -o text --mode point '%s'", log);
	CHECK_EQ(run(tmp, args), 0);
	CHECK(!strstr(out_text, "[0:5]"));
	t_seg_free(&s);
	t_rmrf(log);
	t_rmrf(tmp);
}

TEST(cat_into_closed_pipe_exits_quietly)
{
	char log[256], tmp[256], cmd[2048], p[300];
	t_seg s;

	dirs(log, tmp);
	t_seg_begin(&s, ALL, 0, 1, 1);
	for (int i = 0; i < 30000; i++) { /* ~3 MB of text, pipes hold 64K */
		snprintf(p, sizeof p, "record %06d with some padding to make "
		         "the line longer than fifty bytes", i);
		t_seg_add(&s, LE_INFO, TS0 + (uint64_t)i, p);
	}
	t_seg_save(&s, log);
	CHECK(access(cli(), X_OK) == 0);
	snprintf(cmd, sizeof cmd,
	         "{ '%s' cat '%s' 2>'%s/err'; echo $? >'%s/rc'; } | head -n 1 "
	         ">/dev/null", cli(), log, tmp, tmp);
	CHECK(system(cmd) == 0);
	snprintf(p, sizeof p, "%s/rc", tmp);
	char *rc = t_slurp_text(p);
	snprintf(p, sizeof p, "%s/err", tmp);
	char *err = t_slurp_text(p);
	if (*err)
		fprintf(stderr, "  stderr: %s\n", err);
	CHECK(strcmp(rc, "0\n") == 0);
	CHECK_EQ(strlen(err), 0);
	free(rc);
	free(err);
	t_seg_free(&s);
	t_rmrf(log);
	t_rmrf(tmp);
}

/* ---- verify ---- */

TEST(verify_exits_0_on_clean_and_1_with_offset_on_flip)
{
	char log[256], tmp[256], args[600], path[512], want[700];
	t_seg s;

	dirs(log, tmp);
	t_seg_begin(&s, ALL, 0, 1, 1);
	size_t off[8];
	for (int i = 0; i < 8; i++)
		off[i] = t_seg_add(&s, LE_INFO, TS0 + (uint64_t)i, "payload");
	t_seg_save(&s, log);
	t_seg_path(path, sizeof path, log, 0, 1);
	snprintf(args, sizeof args, "verify '%s'", log);

	CHECK_EQ(run(tmp, args), 0);
	CHECK(strstr(out_text, "8 records"));
	CHECK(strstr(out_text, " 0 problems"));

	s.buf[off[5] + 14] ^= 0x01;
	t_seg_save(&s, log);
	CHECK_EQ(run(tmp, args), 1);
	snprintf(want, sizeof want, "%s: offset %zu: checksum mismatch", path,
	         off[5]);
	if (!strstr(out_text, want))
		fprintf(stderr, "  got: %s  want: %s\n", out_text, want);
	CHECK(strstr(out_text, want));
	CHECK(strstr(out_text, "7 records"));
	CHECK(strstr(out_text, " 1 problems"));
	t_seg_free(&s);
	t_rmrf(log);
	t_rmrf(tmp);
}

TEST(verify_reports_torn_tail_and_gap)
{
	char log[256], tmp[256], args[600];
	t_seg s;

	dirs(log, tmp);
	t_seg_begin(&s, ALL, 0, 1, 1);
	for (int i = 0; i < 4; i++)
		t_seg_add(&s, LE_INFO, TS0 + (uint64_t)i, "payload");
	t_seg_save(&s, log);
	t_seg_free(&s);
	t_seg_begin(&s, ALL, 0, 2, 10); /* 5..9 missing */
	for (int i = 0; i < 4; i++)
		t_seg_add(&s, LE_INFO, TS0 + 10 + (uint64_t)i, "payload");
	t_seg_save_len(&s, log, s.len - 3);
	snprintf(args, sizeof args, "verify '%s'", log);
	CHECK_EQ(run(tmp, args), 1);
	CHECK(strstr(out_text, "sequence gap: expected 5, segment starts at "
	                       "10"));
	CHECK(strstr(out_text, "torn tail"));
	CHECK(strstr(out_text, "7 records"));
	CHECK(strstr(out_text, " 2 problems"));
	t_seg_free(&s);
	t_rmrf(log);
	t_rmrf(tmp);
}

TEST(missing_dir_exits_2)
{
	char tmp[256], args[600];
	static const char *const cmds[] = {"cat", "verify", "stats"};

	t_tmpdir(tmp);
	for (int i = 0; i < 3; i++) {
		snprintf(args, sizeof args, "%s '%s/missing'", cmds[i], tmp);
		CHECK_EQ(run(tmp, args), 2);
		CHECK(strstr(err_text, "missing"));
	}
	t_rmrf(tmp);
}

/* ---- stats ---- */

/* The row of stats output that starts with name; fields parsed. */
static int stats_row(const char *name, unsigned long long *segs,
                     unsigned long long *recs, unsigned long long *bytes,
                     char *fseq, char *lseq, char *fts, char *lts)
{
	const char *line = out_text;
	size_t nl = strlen(name);
	while (line && *line) {
		if (strncmp(line, name, nl) == 0 && line[nl] == ' ')
			return sscanf(line + nl, "%llu %llu %llu %31s %31s %63s "
			              "%63s", segs, recs, bytes, fseq, lseq, fts,
			              lts) == 7;
		line = strchr(line, '\n');
		if (line)
			line++;
	}
	return 0;
}

TEST(stats_counts_records_per_shard)
{
	char log[256], tmp[256], args[600], fseq[32], lseq[32], fts[64],
		lts[64];
	unsigned long long segs, recs, bytes;
	uint64_t sizes[2] = {0, 0};
	t_seg s;

	dirs(log, tmp);
	for (int k = 0; k < 2; k++) { /* shard 0: records 1..3, 4..7 */
		t_seg_begin(&s, ALL, 0, 1 + (uint64_t)k, k ? 4 : 1);
		for (int i = 0; i < 3 + k; i++)
			t_seg_add(&s, LE_INFO,
			          TS0 + (uint64_t)(k * 3 + i) * 1000000000u, "r");
		t_seg_save(&s, log);
		sizes[0] += s.len;
		t_seg_free(&s);
	}
	t_seg_begin(&s, ALL, 2, 5, 100); /* shard 2: records 100..104 */
	for (int i = 0; i < 5; i++)
		t_seg_add(&s, LE_INFO, TS0 + 500 + (uint64_t)i, "shard two");
	t_seg_save(&s, log);
	sizes[1] = s.len;
	t_seg_free(&s);

	snprintf(args, sizeof args, "stats '%s'", log);
	CHECK_EQ(run(tmp, args), 0);
	CHECK(strstr(out_text, "segments"));
	CHECK(stats_row("0", &segs, &recs, &bytes, fseq, lseq, fts, lts));
	CHECK_EQ(segs, 2);
	CHECK_EQ(recs, 7);
	CHECK_EQ(bytes, sizes[0]);
	CHECK(strcmp(fseq, "1") == 0 && strcmp(lseq, "7") == 0);
	CHECK(strcmp(fts, "2026-11-30T21:30:27.000000000Z") == 0);
	CHECK(strcmp(lts, "2026-11-30T21:30:33.000000000Z") == 0);
	CHECK(stats_row("2", &segs, &recs, &bytes, fseq, lseq, fts, lts));
	CHECK_EQ(segs, 1);
	CHECK_EQ(recs, 5);
	CHECK_EQ(bytes, sizes[1]);
	CHECK(strcmp(fseq, "100") == 0 && strcmp(lseq, "104") == 0);
	CHECK(!stats_row("1", &segs, &recs, &bytes, fseq, lseq, fts, lts));
	CHECK(stats_row("total", &segs, &recs, &bytes, fseq, lseq, fts, lts));
	CHECK_EQ(segs, 3);
	CHECK_EQ(recs, 12);
	CHECK_EQ(bytes, sizes[0] + sizes[1]);
	CHECK(strcmp(fts, "2026-11-30T21:30:27.000000000Z") == 0);
	CHECK(strcmp(lts, "2026-11-30T21:30:33.000000000Z") == 0);
	t_rmrf(log);
	t_rmrf(tmp);
}

/* ---- usage ---- */

TEST(usage_errors_exit_2)
{
	char tmp[256], args[600];
	static const char *const bad[] = {
		"",           "bogus",       "cat",        "cat -o xml %s",
		"cat --mode nope %s", "verify %s %s", "cat --frobnicate %s",
		"cat -o",     "stats -o json %s", "verify --mode skip %s",
	};

	t_tmpdir(tmp);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		snprintf(args, sizeof args, bad[i], tmp, tmp);
		CHECK_EQ(run(tmp, args), 2);
		CHECK(strlen(err_text) > 0);
	}
	t_rmrf(tmp);
}

TEST(version_and_help_exit_0)
{
	char tmp[256], want[64];

	t_tmpdir(tmp);
	CHECK_EQ(run(tmp, "--version"), 0);
	snprintf(want, sizeof want, "logengine %s\n", LE_VERSION_STRING);
	CHECK(strcmp(out_text, want) == 0);
	CHECK_EQ(run(tmp, "help"), 0);
	CHECK(strstr(out_text, "verify"));
	CHECK(strstr(out_text, "\\u00XX"));
	t_rmrf(tmp);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	RUN(cat_text_prints_records_oldest_first);
	RUN(cat_json_has_required_keys_and_escapes);
	RUN(json_and_text_escape_every_payload_as_documented);
	RUN(json_prints_sequence_numbers_of_every_width);
	RUN(deferred_records_print_as_snprintfs_text_in_json_and_short);
	RUN(cat_on_corruption_exits_1_naming_file_and_offset);
	RUN(cat_into_closed_pipe_exits_quietly);
	RUN(verify_exits_0_on_clean_and_1_with_offset_on_flip);
	RUN(verify_reports_torn_tail_and_gap);
	RUN(missing_dir_exits_2);
	RUN(stats_counts_records_per_shard);
	RUN(usage_errors_exit_2);
	RUN(version_and_help_exit_0);
	RUN(cat_shows_recorded_history_and_backtrace_filters_it);
	return t_done();
}
