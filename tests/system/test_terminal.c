/*
 * test_terminal.c -- `logengine cat` and `tail` at a terminal, with
 * journalctl's habits: colours by level on a terminal and never in a
 * pipe, the pager, -t/-u for loggers, -o verbose, --output-fields,
 * json-pretty, and -o export read back by journald's own tools: the
 * export is fed to systemd-journal-remote and the journal file it writes
 * is read with journalctl, every record compared with what le_reader
 * reads from the log.  The small errors too: -n with a word that is not a
 * number, tail on a log not yet written.
 *
 * A terminal is a pseudo-terminal that script(1) opens; a pipe is a file.
 * The CLI is $LE_CLI, else $BUILD/logengine; run from the top of the
 * tree.  LE_EXPORT_RECORDS=N sets the records of the export test (the
 * goal measurement is 100000; make check uses a few thousand).
 */
#include "unit/segfile.h"
#include "system/sys.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "logengine.h"

#define JOURNAL_REMOTE "/lib/systemd/systemd-journal-remote"

static char cli_path[1024];

/* The CLI, as an absolute path (script's shell and the pager's PATH do
 * not matter then). */
static const char *cli(void)
{
	if (!cli_path[0]) {
		const char *c = t_build_tool("LE_CLI", "logengine");
		char *abs = realpath(c, NULL);
		if (abs)
			snprintf(cli_path, sizeof cli_path, "%s", abs);
		free(abs);
		if (!abs || access(cli_path, X_OK) != 0) {
			fprintf(stderr, "  %s: not built (set LE_CLI or BUILD)\n",
			        c);
			_exit(1);
		}
	}
	return cli_path;
}

/* Log one record at a level through a logger (the level macros take a
 * constant level: one each). */
static void log_at(le_logger *lg, int level, const le_field *f, size_t n,
                   const char *msg)
{
	switch (level) {
	case LE_TRACE: le_trace_kv(lg, f, n, "%s", msg); break;
	case LE_DEBUG: le_debug_kv(lg, f, n, "%s", msg); break;
	case LE_INFO: le_info_kv(lg, f, n, "%s", msg); break;
	case LE_WARN: le_warn_kv(lg, f, n, "%s", msg); break;
	case LE_ERROR: le_error_kv(lg, f, n, "%s", msg); break;
	default: le_fatal_kv(lg, f, n, "%s", msg); break;
	}
}

static le_engine *open_log(const char *dir, unsigned shards)
{
	le_config c;
	le_engine *e;
	le_config_init(&c);
	c.dir = dir;
	c.shards = shards;
	c.durability = LE_SYNC_NONE;
	c.levels = "trace";
	c.create_dir = 1;
	CHECK_RC(le_open(&e, &c));
	return e;
}

/* Six records, one per level (trace first), "lvl-N", through the
 * loggers root, db, db.pool, dbx, net, db in turn. */
static void six_levels(const char *dir)
{
	static const char *const names[] = {"", "db", "db.pool", "dbx", "net",
	                                    "db"};
	le_engine *e = open_log(dir, 1);
	for (int l = LE_TRACE; l <= LE_FATAL; l++) {
		char msg[16];
		snprintf(msg, sizeof msg, "lvl-%d", l);
		log_at(le_logger_get(e, names[l]), l, NULL, 0, msg);
	}
	CHECK_RC(le_close(e));
}

/* Run the printf-formatted shell command on a pseudo-terminal; what it
 * wrote to the terminal is in t_sh_out. */
static int on_tty(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

static int on_tty(const char *fmt, ...)
{
	char cmd[4096], q[6000];
	size_t k = 0;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	for (const char *p = cmd; *p && k + 5 < sizeof q; p++) {
		if (*p == '\'') { /* into script's single-quoted argument */
			memcpy(q + k, "'\\''", 4);
			k += 4;
		} else {
			q[k++] = *p;
		}
	}
	q[k] = '\0';
	return t_sh("TERM=xterm script -qfec '%s' /dev/null </dev/null", q);
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int has(const char *hay, const char *needle)
{
	return strstr(hay, needle) != NULL;
}

/* ---- colours ---- */

#define RED "\x1b[0;1;31m"
#define YELLOW "\x1b[0;1;33m"
#define GREY "\x1b[0;38;5;245m"
#define OFF "\x1b[0m"

TEST(colours_follow_the_level_on_a_terminal_and_never_in_a_pipe)
{
	char log[256];
	if (!t_have("script"))
		T_SKIP("script (util-linux)");
	t_tmpdir(log);
	six_levels(log);
	CHECK_EQ(on_tty("'%s' cat --no-pager -o cat '%s'", cli(), log), 0);
	CHECK(has(t_sh_out, GREY "lvl-0" OFF));
	CHECK(has(t_sh_out, GREY "lvl-1" OFF));
	CHECK(has(t_sh_out, "\nlvl-2\r\n") || !strncmp(t_sh_out, "lvl-2", 5));
	CHECK(has(t_sh_out, YELLOW "lvl-3" OFF));
	CHECK(has(t_sh_out, RED "lvl-4" OFF));
	CHECK(has(t_sh_out, RED "lvl-5" OFF));
	/* short: from the level on */
	CHECK_EQ(on_tty("'%s' cat --no-pager '%s'", cli(), log), 0);
	CHECK(has(t_sh_out, RED "ERROR [0:5] lvl-4 logger=net" OFF));
	/* tail's lines too */
	CHECK_EQ(on_tty("'%s' tail --no-follow -o cat '%s'", cli(),
	         log), 0);
	CHECK(has(t_sh_out, RED "lvl-5" OFF));
	/* off: NO_COLOR, --no-color, and a pipe */
	CHECK_EQ(on_tty("NO_COLOR=1 '%s' cat --no-pager '%s'", cli(),
	         log), 0);
	CHECK(has(t_sh_out, "lvl-4") && !has(t_sh_out, "\x1b"));
	CHECK_EQ(on_tty("'%s' cat --no-color --no-pager '%s'", cli(),
	         log), 0);
	CHECK(has(t_sh_out, "lvl-4") && !has(t_sh_out, "\x1b"));
	CHECK_EQ(t_sh("'%s' cat '%s' | cat", cli(), log), 0);
	CHECK(has(t_sh_out, "lvl-4") && !has(t_sh_out, "\x1b"));
	t_rmrf(log);
}

/* ---- the pager ---- */

/* A pager that notes it ran and LESS, and keeps what it was given. */
static void write_pager(const char *dir)
{
	char text[1024];
	snprintf(text, sizeof text, "#!/bin/sh\necho \"LESS=$LESS\" >'%s/ran'\n"
	         "cat >'%s/paged'\n", dir, dir);
	t_write_file(dir, "pager.sh", text);
	T_SH_OK("chmod +x '%s/pager.sh'", dir);
}

TEST(pager_gets_every_record_on_a_terminal_and_never_in_a_pipe)
{
	char log[256], tmp[256], p[300];
	if (!t_have("script"))
		T_SKIP("script (util-linux)");
	t_tmpdir(log);
	t_tmpdir(tmp);
	six_levels(log);
	write_pager(tmp);
	CHECK_EQ(on_tty("unset LESS; LOGENGINE_PAGER='%s/pager.sh' PAGER=false "
	                "'%s' cat -o cat '%s'", tmp, cli(), log), 0);
	snprintf(p, sizeof p, "%s/ran", tmp);
	char *ran = t_slurp_text(p);
	CHECK_STR_EQ(ran, "LESS=FRSXMK\n");
	free(ran);
	snprintf(p, sizeof p, "%s/paged", tmp);
	char *paged = t_slurp_text(p);
	CHECK(has(paged, "lvl-0") && has(paged, RED "lvl-5" OFF));
	free(paged);
	/* $PAGER when LOGENGINE_PAGER is not set; LESS left as it is */
	T_SH_OK("rm -f '%s/ran'", tmp);
	CHECK_EQ(on_tty("unset LOGENGINE_PAGER; LESS=R PAGER='%s/pager.sh' "
	                "'%s' cat '%s'", tmp, cli(), log), 0);
	snprintf(p, sizeof p, "%s/ran", tmp);
	ran = t_slurp_text(p);
	CHECK_STR_EQ(ran, "LESS=R\n");
	free(ran);
	/* never: --no-pager, a pipe, following */
	T_SH_OK("rm -f '%s/ran'", tmp);
	CHECK_EQ(on_tty("LOGENGINE_PAGER='%s/pager.sh' '%s' cat "
	         "--no-pager '%s'", tmp, cli(), log), 0);
	CHECK(has(t_sh_out, "lvl-5"));
	CHECK_EQ(t_sh("LOGENGINE_PAGER='%s/pager.sh' '%s' cat '%s' | cat", tmp,
	              cli(), log), 0);
	CHECK(has(t_sh_out, "lvl-5"));
	CHECK_EQ(on_tty("LOGENGINE_PAGER='%s/pager.sh' '%s' cat -f "
	         "-n +6 '%s'", tmp, cli(), log), 0);
	CHECK(has(t_sh_out, "lvl-5"));
	CHECK(access(p, F_OK) != 0);
	t_rmrf(log);
	t_rmrf(tmp);
}

/* A pager that cannot be run, and no less: the records reach the
 * terminal all the same. */
TEST(a_pager_that_cannot_start_leaves_the_output_on_the_terminal)
{
	char log[256];
	if (!t_have("script"))
		T_SKIP("script (util-linux)");
	t_tmpdir(log);
	six_levels(log);
	CHECK_EQ(on_tty("PATH=/nonexistent LOGENGINE_PAGER="
	         "no-such-pager '%s' cat -o cat '%s'", cli(), log), 0);
	for (int l = 0; l < 6; l++) {
		char want[16];
		snprintf(want, sizeof want, "lvl-%d", l);
		CHECK(has(t_sh_out, want));
	}
	t_rmrf(log);
}

/* ---- loggers ---- */

TEST(identifier_and_unit_select_a_logger_and_its_children)
{
	char log[256];
	t_tmpdir(log);
	six_levels(log);
	CHECK_EQ(t_sh("'%s' cat -o cat -t db '%s'", cli(), log), 0);
	CHECK_STR_EQ(t_sh_out, "lvl-1\nlvl-2\nlvl-5\n");
	CHECK_EQ(t_sh("'%s' cat -o cat --unit=net -t dbx '%s'", cli(), log), 0);
	CHECK_STR_EQ(t_sh_out, "lvl-3\nlvl-4\n");
	CHECK_EQ(t_sh("'%s' cat -o cat -u db.pool '%s'", cli(), log), 0);
	CHECK_STR_EQ(t_sh_out, "lvl-2\n");
	/* with -n (a counting pass) and -r */
	CHECK_EQ(t_sh("'%s' cat -o cat -n 2 --identifier db '%s'", cli(), log),
	         0);
	CHECK_STR_EQ(t_sh_out, "lvl-2\nlvl-5\n");
	CHECK_EQ(t_sh("'%s' cat -o cat -r -t db '%s'", cli(), log), 0);
	CHECK_STR_EQ(t_sh_out, "lvl-5\nlvl-2\nlvl-1\n");
	/* logger=NAME is that logger alone */
	CHECK_EQ(t_sh("'%s' cat -o cat '%s' logger=db", cli(), log), 0);
	CHECK_STR_EQ(t_sh_out, "lvl-1\nlvl-5\n");
	CHECK_EQ(t_sh("'%s' cat -o cat -t nosuch '%s'", cli(), log), 0);
	CHECK_STR_EQ(t_sh_out, "");
	t_rmrf(log);
}

/* ---- formats ---- */

/* One record with typed fields, a logger and a message with a newline. */
static void fields_log(const char *dir)
{
	le_engine *e = open_log(dir, 1);
	le_logger *lg = le_logger_get(e, "db.pool");
	log_at(lg, LE_WARN, LE_FIELDS(LE_STR("user", "bob"),
	                              LE_I64("status", 503),
	                              LE_STR("message", "kept")),
	       "slow\nquery");
	CHECK_RC(le_close(e));
}

/* fields_log in a new directory log, and `cat OPTS` on it. */
static void fields_cat(char *log, const char *opts)
{
	t_tmpdir(log);
	fields_log(log);
	CHECK_EQ(t_sh("TZ=UTC '%s' cat %s '%s'", cli(), opts, log), 0);
}

TEST(verbose_prints_every_field_one_a_line)
{
	char log[256];
	fields_cat(log, "-o verbose");
	/* the time: "Mon 2026-12-07 15:03:28.123456 UTC" */
	const char *nl = strchr(t_sh_out, '\n');
	CHECK(nl && nl - t_sh_out > 34 && has(t_sh_out, " UTC [0:1]\n"));
	CHECK_STR_EQ(nl + 1,
	             "    PRIORITY=4\n"
	             "    SYSLOG_IDENTIFIER=db.pool\n"
	             "    MESSAGE=slow\\x0aquery\n"
	             "    LOGENGINE_LEVEL=WARN\n"
	             "    LOGENGINE_SHARD=0\n"
	             "    LOGENGINE_SEQ=1\n"
	             "    USER=bob\n"
	             "    STATUS=503\n"
	             "    F_MESSAGE=kept\n");
	t_rmrf(log);
}

TEST(json_pretty_indents_the_fields_object)
{
	char log[256];
	fields_cat(log, "-o json-pretty");
	const char *f = strstr(t_sh_out, "\t\"msg\" : ");
	CHECK(f);
	CHECK_STR_EQ(f, "\t\"msg\" : \"slow\\u000aquery\",\n"
	                "\t\"fields\" : {\n"
	                "\t\t\"logger\" : \"db.pool\",\n"
	                "\t\t\"user\" : \"bob\",\n"
	                "\t\t\"status\" : 503,\n"
	                "\t\t\"message\" : \"kept\"\n"
	                "\t}\n"
	                "}\n");
	/* what python's json reads is what -o json wrote */
	if (t_have("python3"))
		T_SH_OK("'%s' cat -o json-pretty '%s' | python3 -c 'import json,"
		        "sys; d = json.load(sys.stdin); assert d[\"fields\"]"
		        "[\"status\"] == 503, d'", cli(), log);
	t_rmrf(log);
}

TEST(output_fields_restricts_json_verbose_and_export)
{
	char log[256];
	fields_cat(log, "-o json --output-fields=msg,user");
	const char *ts = strstr(t_sh_out, ",\"ts\":\"");
	CHECK(!strncmp(t_sh_out, "{\"seq\":1,\"ts\":\"", 15) && ts);
	CHECK_STR_EQ(strstr(ts + 1, "\",") + 1,
	             ",\"msg\":\"slow\\u000aquery\",\"fields\":{\"user\":\"bob\"}}\n");
	CHECK_EQ(t_sh("'%s' cat -o json --output-fields=level '%s'", cli(), log),
	         0);
	CHECK(has(t_sh_out, "\"level\":\"WARN\"}\n") && !has(t_sh_out, "msg"));
	CHECK_EQ(t_sh("'%s' cat -o verbose --output-fields=PRIORITY,USER '%s'",
	              cli(), log), 0);
	CHECK_STR_EQ(strchr(t_sh_out, '\n') + 1,
	             "    PRIORITY=4\n    USER=bob\n");
	CHECK_EQ(t_sh("'%s' cat -o export --output-fields=STATUS '%s'", cli(),
	              log), 0);
	CHECK(!strncmp(t_sh_out, "__REALTIME_TIMESTAMP=", 21));
	CHECK_STR_EQ(strchr(t_sh_out, '\n') + 1, "STATUS=503\n\n");
	t_rmrf(log);
}

/* ---- export, read back by journald's tools ---- */

/* A journal entry: its fields (name, value, length), at most MAX_JF. */
#define MAX_JF 64
struct jentry {
	int n;
	char name[MAX_JF][72];
	const unsigned char *val[MAX_JF];
	size_t len[MAX_JF];
};

/* Parse the next entry of an export stream at *p (end e).  @return 1, 0
 * at the end, -1 malformed. */
static int next_entry(const unsigned char **p, const unsigned char *e,
                      struct jentry *je)
{
	const unsigned char *s = *p;
	je->n = 0;
	while (s < e && *s == '\n')
		s++;
	if (s >= e)
		return 0;
	while (s < e && *s != '\n') {
		const unsigned char *nl = memchr(s, '\n', (size_t)(e - s));
		const unsigned char *eq = memchr(s, '=', (size_t)(e - s));
		if (!nl || je->n == MAX_JF)
			return -1;
		int i = je->n++;
		if (eq && eq < nl) { /* NAME=VALUE */
			snprintf(je->name[i], sizeof je->name[i], "%.*s",
			         (int)(eq - s), s);
			je->val[i] = eq + 1;
			je->len[i] = (size_t)(nl - eq - 1);
			s = nl + 1;
			continue;
		}
		/* NAME, then a 64-bit little-endian length, the bytes, \n */
		snprintf(je->name[i], sizeof je->name[i], "%.*s", (int)(nl - s),
		         s);
		if (e - nl < 9)
			return -1;
		uint64_t len = 0;
		for (int b = 7; b >= 0; b--)
			len = len << 8 | nl[1 + b];
		if ((uint64_t)(e - nl - 9) < len + 1)
			return -1;
		je->val[i] = nl + 9;
		je->len[i] = (size_t)len;
		s = nl + 9 + len + 1;
	}
	*p = s;
	return 1;
}

/* Does the entry hold name=value (len bytes), exactly once? */
static int jhas(const struct jentry *je, const char *name, const void *v,
                size_t len)
{
	int n = 0;
	for (int i = 0; i < je->n; i++)
		n += !strcmp(je->name[i], name) && je->len[i] == len &&
		     !memcmp(je->val[i], v, len);
	return n == 1;
}

static int jhas_s(const struct jentry *je, const char *name, const char *v)
{
	return jhas(je, name, v, strlen(v));
}

/* What the export must hold beyond journald's own fields, by the
 * record's typed field key: its journal name. */
static const char *const jnames[][2] = {
	{"user", "USER"}, {"status", "STATUS"}, {"ratio", "RATIO"},
	{"ok", "OK"}, {"blob", "BLOB"}, {"message", "F_MESSAGE"},
	{"9lives", "F_9LIVES"}, {"code.file", "CODE_FILE"},
	{"_trusted", "F__TRUSTED"},
};

static const char *jname_of(const char *key, size_t len)
{
	for (size_t i = 0; i < sizeof jnames / sizeof jnames[0]; i++)
		if (strlen(jnames[i][0]) == len && !memcmp(jnames[i][0], key, len))
			return jnames[i][1];
	return NULL;
}

/* The records of the export test: level i % 6, loggers in turn, fields
 * of every type, messages with a newline, a control byte, invalid UTF-8,
 * a tab, and plain ones. */
static void export_log(const char *dir, int n)
{
	static const char *const loggers[] = {"", "db", "db.pool", "net.http"};
	static const char *const msgs[] = {
		"plain %d", "two\nlines %d", "bell\a %d", "bad \xff utf-8 %d",
		"tab\there %d", "caf\xc3\xa9 %d",
	};
	static const unsigned char blob[] = {0, 1, 2, 0xff, '\n', 'x'};
	le_engine *e = open_log(dir, 2);
	le_logger *lg[4];
	for (int i = 0; i < 4; i++)
		lg[i] = le_logger_get(e, loggers[i]);
	for (int i = 0; i < n; i++) {
		char msg[64];
		snprintf(msg, sizeof msg, msgs[i % 6], i);
		le_field f[] = {
			LE_STR("user", i % 3 ? "bob" : "amy\nnewline"),
			LE_I64("status", 200 + i % 7),
			LE_F64("ratio", 0.5 * (i % 5)),
			LE_BOOL("ok", i & 1),
			LE_BYTES("blob", blob, sizeof blob),
			LE_STR("message", "kept"),
			LE_U64("9lives", (uint64_t)i * 1000003u),
			LE_STR("code.file", "x.c"),
			LE_STR("_trusted", "no"),
		};
		size_t nf = (size_t)(i % 10); /* 0 .. all 9 fields */
		if (nf > 9)
			nf = 9;
		log_at(lg[i % 4], i % 6, f, nf, msg);
		if (i % 4096 == 4095)
			le_flush(e, -1);
	}
	CHECK_RC(le_close(e));
}

/* Compare one journal entry with record r.  @return the differences
 * (each printed). */
static int compare(const struct jentry *je, const le_record *r)
{
	static const int prio[] = {7, 7, 6, 4, 3, 2};
	char want[64];
	int bad = 0, expected = 6; /* the fields below */
	size_t pos = 0;
	le_field f;

#define DIFF(what) do { bad++; fprintf(stderr, "  shard %u seq %llu: %s\n", \
		r->shard, (unsigned long long)r->seq, what); } while (0)
	snprintf(want, sizeof want, "%llu", (unsigned long long)(r->ts_ns / 1000));
	if (!jhas_s(je, "__REALTIME_TIMESTAMP", want))
		DIFF("time");
	snprintf(want, sizeof want, "%d", prio[r->level]);
	if (!jhas_s(je, "PRIORITY", want))
		DIFF("priority");
	if (!jhas(je, "MESSAGE", r->payload, r->len))
		DIFF("message");
	if (!jhas_s(je, "LOGENGINE_LEVEL", le_level_name(r->level)))
		DIFF("level");
	while (le_record_field(r, &pos, &f) == 1) {
		char buf[64];
		const void *v = buf;
		size_t len;
		const char *name = jname_of(f.key, f.key_len);
		switch (f.type) {
		case LE_FT_STRING:
		case LE_FT_BYTES:
			v = f.v.str.ptr;
			len = f.v.str.len;
			break;
		case LE_FT_INT64:
			len = (size_t)snprintf(buf, sizeof buf, "%lld",
			                       (long long)f.v.i64);
			break;
		case LE_FT_UINT64:
			len = (size_t)snprintf(buf, sizeof buf, "%llu",
			                       (unsigned long long)f.v.u64);
			break;
		case LE_FT_DOUBLE:
			len = (size_t)snprintf(buf, sizeof buf, "%g", f.v.f64);
			break;
		default:
			len = (size_t)snprintf(buf, sizeof buf, "%s",
			                       f.v.b ? "true" : "false");
		}
		if (f.key_len == 6 && !memcmp(f.key, "logger", 6))
			name = "SYSLOG_IDENTIFIER";
		if (!name || !jhas(je, name, v, len)) {
			snprintf(want, sizeof want, "field %.*s", (int)f.key_len,
			         f.key);
			DIFF(want);
		}
		expected++;
	}
	/* nothing more but journald's own (__CURSOR, _BOOT_ID, ...) */
	int ours = 0;
	for (int i = 0; i < je->n; i++)
		ours += je->name[i][0] != '_' || !strcmp(je->name[i],
		                                         "__REALTIME_TIMESTAMP");
	if (ours != expected) {
		snprintf(want, sizeof want, "%d fields, %d expected", ours,
		         expected);
		DIFF(want);
	}
#undef DIFF
	return bad;
}

/*
 * cat -o export | systemd-journal-remote, then journalctl --file -o
 * export: each record the library reads from the log comes back with its
 * time (to the microsecond, journald's unit), priority, message and
 * fields, byte for byte, and nothing else.  journalctl's export is read
 * rather than its JSON, whose text cannot tell a byte 0xff from U+00FF.
 */
TEST(export_is_read_back_by_journalctl_with_every_field)
{
	char log[256], tmp[256], p[300];
	const char *nv = getenv("LE_EXPORT_RECORDS");
	int n = nv ? atoi(nv) : 3000;
	t_need("journal");
	t_tmpdir(log);
	t_tmpdir(tmp);
	export_log(log, n);
	T_SH_OK("'%s' cat -o export '%s' | %s -o '%s/out.journal' -", cli(),
	        log, JOURNAL_REMOTE, tmp);
	T_SH_OK("journalctl --file '%s/*.journal' -o export --no-pager "
	        ">'%s/back'", tmp, tmp);
	snprintf(p, sizeof p, "%s/back", tmp);
	size_t blen;
	unsigned char *back = t_slurp(p, &blen);
	CHECK(back);

	/* the records by shard and sequence (2 shards, seq from 1) */
	struct jentry *je = malloc(sizeof *je);
	unsigned char *seen = calloc(2 * ((size_t)n + 2), 1);
	CHECK(je && seen);
	le_reader *rd;
	CHECK_RC(le_reader_open(&rd, log, NULL));
	const unsigned char *at = back, *e = back + blen;
	le_record r;
	int bad = 0, entries = 0, rc;
	while ((rc = next_entry(&at, e, je)) == 1) {
		/* journal order is the export's, which is cat's */
		CHECK_EQ(le_reader_next(rd, &r), 1);
		bad += compare(je, &r);
		CHECK(r.shard < 2 && r.seq <= (uint64_t)n + 1);
		bad += seen[r.shard * ((size_t)n + 2) + r.seq]++ != 0;
		entries++;
	}
	CHECK_EQ(rc, 0);
	CHECK_EQ(le_reader_next(rd, &r), 0);
	printf("  export: %d records, %d read back by journalctl, %d "
	       "differences\n", n, entries, bad);
	fflush(stdout); /* before a CHECK below can _exit */
	CHECK_EQ(entries, n);
	CHECK_EQ(bad, 0);
	le_reader_close(rd);
	free(je);
	free(seen);
	free(back);
	t_rmrf(log);
	t_rmrf(tmp);
}

/* ---- small errors ---- */

TEST(n_with_a_word_that_is_not_a_number_says_so)
{
	char log[256];
	t_tmpdir(log);
	six_levels(log);
	CHECK_EQ(t_sh("'%s' cat -n abc '%s'", cli(), log), 2);
	CHECK(has(t_sh_out, "-n: 'abc' is not a number"));
	CHECK(!has(t_sh_out, "FIELD=VALUE"));
	CHECK_EQ(t_sh("'%s' cat --lines=abc '%s'", cli(), log), 2);
	CHECK(has(t_sh_out, "-n: 'abc' is not a number"));
	/* -n then DIR: ten; -n N DIR, -n all */
	CHECK_EQ(t_sh("'%s' cat -o cat -n '%s'", cli(), log), 0);
	CHECK(has(t_sh_out, "lvl-0"));
	CHECK_EQ(t_sh("'%s' cat -o cat -n 1 '%s'", cli(), log), 0);
	CHECK_STR_EQ(t_sh_out, "lvl-5\n");
	/* a match after -n is a match */
	CHECK_EQ(t_sh("'%s' cat -o cat -n '%s' LEVEL=fatal", cli(), log), 0);
	CHECK_STR_EQ(t_sh_out, "lvl-5\n");
	t_rmrf(log);
}

TEST(help_says_logger_and_record_fields_match)
{
	CHECK_EQ(t_sh("'%s' cat --help", cli()), 0);
	CHECK(has(t_sh_out, "logger (logger=db"));
	CHECK(has(t_sh_out, "any field of the records by its"));
	CHECK(has(t_sh_out, "-t, --identifier=NAME"));
	CHECK_EQ(t_sh("grep -q '^\\.BI logger= NAME' docs/logengine.1"), 0);
	CHECK_EQ(t_sh("grep -q 'and every typed field of the records' "
	              "docs/logengine.1"), 0);
}

/* tail on a directory no engine has written yet waits for it: started
 * first, it prints the record written after. */
TEST(tail_waits_for_a_log_not_yet_written)
{
	char base[256], log[300], out[300];
	t_tmpdir(base);
	snprintf(log, sizeof log, "%s/later", base);
	snprintf(out, sizeof out, "%s/out", base);
	CHECK_EQ(t_spit(out, "", 0), 0); /* there before the child writes */
	fflush(NULL);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		int fd = open(out, O_WRONLY | O_APPEND);
		dup2(fd, 1);
		dup2(fd, 2);
		/* timeout: a failed test leaves no tail behind */
		execlp("timeout", "timeout", "60", cli(), "tail", "-o", "cat", log,
		       (char *)NULL);
		_exit(127);
	}
	/* it is waiting: it said so */
	uint64_t deadline = now_ms() + 10000;
	char *text = NULL;
	while (now_ms() < deadline) {
		free(text);
		text = t_slurp_text(out);
		if (text && has(text, "waiting"))
			break;
		CHECK(waitpid(pid, NULL, WNOHANG) == 0);
		usleep(10000);
	}
	CHECK(text && has(text, "no log yet: waiting"));
	le_engine *e = open_log(log, 1);
	le_warn(e, "written after tail started");
	CHECK_RC(le_close(e));
	deadline = now_ms() + 10000;
	while (now_ms() < deadline && !has(text, "written after")) {
		free(text);
		text = t_slurp_text(out);
		usleep(10000);
	}
	CHECK(has(text, "written after tail started\n"));
	kill(pid, SIGINT);
	int st;
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	free(text);
	t_rmrf(base);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	RUN(colours_follow_the_level_on_a_terminal_and_never_in_a_pipe);
	RUN(pager_gets_every_record_on_a_terminal_and_never_in_a_pipe);
	RUN(a_pager_that_cannot_start_leaves_the_output_on_the_terminal);
	RUN(identifier_and_unit_select_a_logger_and_its_children);
	RUN(verbose_prints_every_field_one_a_line);
	RUN(json_pretty_indents_the_fields_object);
	RUN(output_fields_restricts_json_verbose_and_export);
	RUN(export_is_read_back_by_journalctl_with_every_field);
	RUN(n_with_a_word_that_is_not_a_number_says_so);
	RUN(help_says_logger_and_record_fields_match);
	RUN(tail_waits_for_a_log_not_yet_written);
	return t_done();
}
