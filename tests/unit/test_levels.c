/*
 * test_levels.c -- the level macros, named loggers and their thresholds:
 * inheritance from the nearest parent, le_set_level at run time,
 * LOGENGINE_LEVEL and le_config.levels in spdlog's syntax, the bounded
 * logger table, the call site as fields, and the checks the compiler
 * makes (format, logger type), in C and C++.
 */
#include "harness.h"

#include <pthread.h>
#include <stdatomic.h>

#include "logengine.h"
#include "logtest.h"

static char dir[256];

static int open_cfg(le_engine **e, const char *levels, uint32_t max_loggers,
                    int source_location)
{
	le_config c;
	le_config_init(&c);
	c.dir = t_tmpdir(dir);
	c.durability = LE_SYNC_NONE;
	c.levels = levels;
	if (max_loggers)
		c.max_loggers = max_loggers;
	c.source_location = source_location;
	return le_open(e, &c);
}

static le_engine *open_e(void)
{
	le_engine *e;
	unsetenv("LOGENGINE_LEVEL");
	int rc = open_cfg(&e, NULL, 0, 0);
	if (rc < 0) {
		fprintf(stderr, "  le_open: %s (%s)\n", le_strerror(rc),
		        le_errmsg());
		_exit(1);
	}
	return e;
}

/* "msg[logger]" of each record, joined with spaces. */
struct text {
	char s[4096];
	size_t n;
};

static void add_text(const le_record *r, void *arg)
{
	struct text *t = arg;
	char lg[160];
	t_logger_tag(r, lg, sizeof lg);
	t->n += (size_t)snprintf(t->s + t->n, sizeof t->s - t->n, "%s%.*s%s",
	                         t->n ? " " : "", (int)r->len,
	                         (const char *)r->payload, lg);
}

static const char *close_and_read(le_engine *e, struct text *t)
{
	CHECK_RC(le_close(e));
	memset(t, 0, sizeof *t);
	CHECK(read_all(dir, LE_RECOVER_ABSOLUTE, add_text, t) >= 0);
	return t->s;
}

TEST(root_threshold_is_info_and_applies_to_the_engine)
{
	le_engine *e = open_e();
	struct text t;
	le_trace(e, "t");
	le_debug(e, "d");
	le_info(e, "i %d", 1);
	le_warn(e, "w");
	le_error(e, "e");
	le_fatal(e, "f"); /* returns: the program goes on */
	le_logger *root = le_logger_get(e, NULL);
	le_debug(root, "rd");
	le_info(root, "ri"); /* the root as a logger: no name on it */
	CHECK_EQ(le_get_level(e, NULL), LE_INFO);
	CHECK_STR_EQ(close_and_read(e, &t), "i 1 w e f ri");
	t_rmrf(dir);
}

TEST(loggers_inherit_from_the_nearest_configured_parent)
{
	le_engine *e = open_e();
	struct text t;
	le_logger *http = le_logger_get(e, "net.http");
	le_logger *net = le_logger_get(e, "net");
	le_logger *netx = le_logger_get(e, "netx");
	CHECK(http && net && netx);
	CHECK(le_logger_get(e, "net.http") == http);
	CHECK_STR_EQ(le_logger_name(http), "net.http");
	le_debug(http, "a"); /* root: info */
	CHECK_RC(le_set_level(e, "net", LE_DEBUG));
	le_debug(http, "b");
	le_debug(netx, "c"); /* "netx" is not under "net" */
	le_trace(net, "d");
	CHECK_RC(le_set_level(e, "net.http", LE_ERROR));
	le_warn(http, "e");
	le_debug(net, "f");
	CHECK_RC(le_set_level(e, "net.http", -1)); /* inherits again */
	le_debug(http, "g");
	CHECK_RC(le_set_level(e, NULL, LE_OFF));
	le_fatal(e, "h");
	le_fatal(netx, "i");
	le_debug(http, "j"); /* "net" still debug */
	/* a logger made after the level was set gets it */
	CHECK_RC(le_set_level(e, "db.pool", LE_TRACE));
	le_logger *conn = le_logger_get(e, "db.pool.conn");
	le_trace(conn, "k");
	CHECK_EQ(le_get_level(e, "db.pool.conn.x"), LE_TRACE);
	CHECK_EQ(le_get_level(e, "db"), LE_OFF);
	CHECK_STR_EQ(close_and_read(e, &t),
	             "b[net.http] f[net] g[net.http] j[net.http] "
	             "k[db.pool.conn]");
	t_rmrf(dir);
}

static int evaluated;
static int bump(void)
{
	return ++evaluated;
}

TEST(arguments_of_a_call_below_the_threshold_are_not_evaluated)
{
	le_engine *e = open_e();
	le_logger *lg = le_logger_get(e, "quiet");
	CHECK_RC(le_set_level(e, "quiet", LE_ERROR));
	le_info(lg, "%d", bump());
	le_warn_kv(lg, LE_FIELDS(LE_I64("n", bump())), "%d", bump());
	CHECK_EQ(evaluated, 0);
	le_error(lg, "%d", bump());
	CHECK_EQ(evaluated, 1);
	CHECK_RC(le_close(e));
	t_rmrf(dir);
}

TEST(level_names_parse_as_spdlog_spells_them)
{
	CHECK_EQ(le_level_parse("trace"), LE_TRACE);
	CHECK_EQ(le_level_parse("DEBUG"), LE_DEBUG);
	CHECK_EQ(le_level_parse("Info"), LE_INFO);
	CHECK_EQ(le_level_parse("warn"), LE_WARN);
	CHECK_EQ(le_level_parse("warning"), LE_WARN);
	CHECK_EQ(le_level_parse("err"), LE_ERROR);
	CHECK_EQ(le_level_parse("error"), LE_ERROR);
	CHECK_EQ(le_level_parse("critical"), LE_FATAL);
	CHECK_EQ(le_level_parse("fatal"), LE_FATAL);
	CHECK_EQ(le_level_parse("off"), LE_OFF);
	CHECK_EQ(le_level_parse("verbose"), LE_EINVAL);
	CHECK_EQ(le_level_parse(""), LE_EINVAL);
	CHECK_EQ(le_level_parse(NULL), LE_EINVAL);
}

TEST(logengine_level_sets_thresholds_at_open_and_wins_over_config)
{
	le_engine *e;
	setenv("LOGENGINE_LEVEL", " warn , net=debug,db.pool = off,,", 1);
	CHECK_RC(open_cfg(&e, "trace,net=error,cache=debug", 0, 0));
	CHECK_EQ(le_get_level(e, NULL), LE_WARN);
	CHECK_EQ(le_get_level(e, "net.http"), LE_DEBUG);
	CHECK_EQ(le_get_level(e, "db.pool.x"), LE_OFF);
	CHECK_EQ(le_get_level(e, "db"), LE_WARN);
	CHECK_EQ(le_get_level(e, "cache"), LE_DEBUG); /* config's, kept */
	struct text t;
	le_logger *lg = le_logger_get(e, "net.http");
	le_debug(lg, "seen");
	le_info(e, "unseen");
	CHECK_STR_EQ(close_and_read(e, &t), "seen[net.http]");
	t_rmrf(dir);
}

/* Run open_cfg with stderr in a file; the file's text into err. */
static int open_catching_stderr(le_engine **e, const char *levels,
                                char *err, size_t cap)
{
	int saved;
	FILE *f = t_stderr_catch(&saved);
	int rc = open_cfg(e, levels, 0, 0);
	t_stderr_release(f, saved, err, cap);
	return rc;
}

/* Each bad item is left out, reported on one line of stderr naming the
 * variable and the item, and counted; the rest applies and le_open
 * succeeds: a typo never stops a service from starting. */
TEST(bad_logengine_level_is_reported_and_defaults_apply)
{
	static const struct {
		const char *value, *says;
		int root, net; /* thresholds after le_open */
	} bad[] = {
		{"verbose", "LOGENGINE_LEVEL: \"verbose\" is not a level",
		 LE_INFO, LE_INFO},
		{"warn,net=loud", "\"loud\" is not a level (trace, debug, "
		                  "info, warn, error, fatal or off) for logger "
		                  "net", LE_WARN, LE_WARN},
		{"=debug", "LOGENGINE_LEVEL: \"=debug\" names no logger",
		 LE_INFO, LE_INFO},
		{"n et=info,net=error", "LOGENGINE_LEVEL: \"n et\" is not a "
		                        "logger name", LE_INFO, LE_ERROR},
		{"net..x=info", "\"net..x\" is not a logger name", LE_INFO,
		 LE_INFO},
		{"net=", "\"\" is not a level", LE_INFO, LE_INFO},
	};
	char err[1024];
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		le_engine *e = NULL;
		le_stats st;
		setenv("LOGENGINE_LEVEL", bad[i].value, 1);
		CHECK_RC(open_catching_stderr(&e, NULL, err, sizeof err));
		CHECK(e != NULL);
		if (!strstr(le_errmsg(), bad[i].says) ||
		    !strstr(err, bad[i].says) || strchr(err, '\n') !=
		    err + strlen(err) - 1) {
			fprintf(stderr, "  %s: errmsg \"%s\", stderr \"%s\"\n",
			        bad[i].value, le_errmsg(), err);
			CHECK(0);
		}
		CHECK_RC(le_stats_get(e, &st));
		CHECK_EQ(st.config_errors, 1);
		CHECK_EQ(le_get_level(e, NULL), bad[i].root);
		CHECK_EQ(le_get_level(e, "net"), bad[i].net);
		le_warn(e, "still logs");
		CHECK_RC(le_close(e));
		t_rmrf(dir);
	}
	unsetenv("LOGENGINE_LEVEL");
	le_engine *e = NULL;
	le_stats st;
	CHECK_RC(open_catching_stderr(&e, "info,x=nope", err, sizeof err));
	CHECK(strstr(err, "levels: \"nope\" is not a level") != NULL);
	CHECK(le_stats_get(e, &st) == 0 && st.config_errors == 1);
	CHECK_RC(le_close(e));
	t_rmrf(dir);
}

TEST(logger_table_is_bounded_by_max_loggers)
{
	le_engine *e;
	unsetenv("LOGENGINE_LEVEL");
	CHECK_RC(open_cfg(&e, NULL, 3, 0));
	le_logger *a = le_logger_get(e, "a");
	CHECK(a && le_logger_get(e, "b") && le_logger_get(e, "c"));
	/* no room: the root logger, never NULL, and le_errmsg says so */
	CHECK(le_logger_get(e, "d") == le_logger_get(e, ""));
	CHECK(le_logger_get(e, "d") != NULL);
	CHECK(strstr(le_errmsg(), "max_loggers: all 3 entries") != NULL);
	CHECK(strstr(le_errmsg(), "logging as the root logger") != NULL);
	CHECK(le_logger_get(e, "a") == a); /* existing ones still found */
	CHECK(le_logger_get(e, "") != NULL); /* the root is not counted */
	CHECK_EQ(le_set_level(e, "e", LE_DEBUG), LE_ENOMEM);
	CHECK_RC(le_set_level(e, "a", LE_DEBUG));
	CHECK_RC(le_set_level(e, "e", -1)); /* removing nothing needs no room */
	CHECK_RC(le_close(e));
	t_rmrf(dir);
}

TEST(any_logger_name_gives_a_usable_logger_and_levels_are_checked)
{
	le_engine *e = open_e();
	CHECK(le_logger_get(e, NULL) == le_logger_get(e, ""));
	CHECK_STR_EQ(le_logger_name(le_logger_get(e, NULL)), "");
	CHECK(le_logger_get(e, "a.b-c_D9") != NULL);
	static const struct {
		const char *name, *clean;
	} bad[] = {{".a", "a"},     {"a.", "a"},   {"a..b", "a.b"},
	           {"a b", "a_b"},  {"a/b", "a_b"}, {"\xc3\xa9", "__"},
	           {"net/http", "net_http"}};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		le_logger *lg = le_logger_get(e, bad[i].name);
		CHECK(lg != NULL);
		CHECK(strstr(le_errmsg(), "not a dotted path") != NULL);
		CHECK_STR_EQ(le_logger_name(lg), bad[i].clean);
		CHECK(le_logger_get(e, bad[i].clean) == lg);
	}
	CHECK(le_logger_get(e, "...") == le_logger_get(e, NULL));
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		CHECK_EQ(le_set_level(e, bad[i].name, LE_INFO), LE_EINVAL);
		CHECK_EQ(le_get_level(e, bad[i].name), LE_EINVAL);
	}
	char name[LE_LOGGER_NAME_MAX + 2];
	memset(name, 'n', sizeof name - 1);
	name[LE_LOGGER_NAME_MAX] = 0;
	CHECK(le_logger_get(e, name) != NULL);
	name[LE_LOGGER_NAME_MAX] = 'n';
	name[LE_LOGGER_NAME_MAX + 1] = 0;
	le_logger *cut = le_logger_get(e, name); /* cut to the limit */
	CHECK(cut != NULL);
	CHECK_EQ(strlen(le_logger_name(cut)), LE_LOGGER_NAME_MAX);
	CHECK_EQ(le_set_level(e, NULL, -1), LE_EINVAL); /* the root keeps one */
	CHECK_EQ(le_set_level(e, "a", LE_OFF + 1), LE_EINVAL);
	CHECK_EQ(le_set_level(NULL, "a", LE_INFO), LE_EINVAL);
	CHECK(le_logger_get(NULL, "a") == NULL);
	CHECK_RC(le_close(e));
	t_rmrf(dir);
}

struct site_seen {
	char file[256], func[64];
	int64_t line;
	int n;
};

static void site_of(const le_record *r, void *arg)
{
	struct site_seen *s = arg;
	size_t pos = 0;
	le_field f;
	s->n = 0;
	while (le_record_field(r, &pos, &f) == 1) {
		s->n++;
		if (f.key_len == 9 && !memcmp(f.key, "code.file", 9))
			snprintf(s->file, sizeof s->file, "%.*s",
			         (int)f.v.str.len, (const char *)f.v.str.ptr);
		if (f.key_len == 9 && !memcmp(f.key, "code.func", 9))
			snprintf(s->func, sizeof s->func, "%.*s",
			         (int)f.v.str.len, (const char *)f.v.str.ptr);
		if (f.key_len == 9 && !memcmp(f.key, "code.line", 9))
			s->line = f.v.i64;
	}
}

TEST(source_location_fields_name_the_call)
{
	le_engine *e;
	unsetenv("LOGENGINE_LEVEL");
	CHECK_RC(open_cfg(&e, NULL, 0, 1));
	int line = __LINE__ + 1;
	le_warn_kv(le_logger_get(e, "x"), LE_FIELDS(LE_BOOL("b", 0)), "here");
	CHECK_RC(le_close(e));
	struct site_seen s = {0};
	CHECK_EQ(read_all(dir, LE_RECOVER_ABSOLUTE, site_of, &s), 1);
	CHECK_STR_EQ(s.file, __FILE__);
	CHECK_STR_EQ(s.func, "source_location_fields_name_the_call");
	CHECK_EQ(s.line, line);
	CHECK_EQ(s.n, 5); /* logger, b, code.file, code.line, code.func */
	/* off (the default): none */
	e = open_e();
	le_warn(e, "bare");
	CHECK_RC(le_close(e));
	memset(&s, 0, sizeof s);
	CHECK_EQ(read_all(dir, LE_RECOVER_ABSOLUTE, site_of, &s), 1);
	CHECK_EQ(s.n, 0);
	t_rmrf(dir);
}

TEST(severity_numbers_match_syslog_and_opentelemetry)
{
	static const int sys[] = {7, 7, 6, 4, 3, 2}, otel[] = {1, 5, 9, 13, 17, 21};
	for (int l = LE_TRACE; l <= LE_FATAL; l++) {
		CHECK_EQ(le_level_syslog(l), sys[l]);
		CHECK_EQ(le_level_otel(l), otel[l]);
	}
	CHECK_EQ(le_level_syslog(LE_OFF), -1);
	CHECK_EQ(le_level_otel(-1), -1);
}

/* le_set_level stores while other threads' macros load: with a lock on
 * neither side (TSan checks the pair is atomic). */
static _Atomic int stop_flag;
static void *spin_log(void *arg)
{
	le_logger *lg = arg;
	while (!atomic_load_explicit(&stop_flag, memory_order_relaxed))
		le_debug(lg, "x");
	return NULL;
}

TEST(levels_change_while_other_threads_log)
{
	le_engine *e = open_e();
	le_logger *lg = le_logger_get(e, "hot");
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		CHECK(pthread_create(&t[i], NULL, spin_log, lg) == 0);
	for (int i = 0; i < 50; i++) {
		le_stats a, b;
		CHECK_RC(le_stats_get(e, &a));
		CHECK_RC(le_set_level(e, "hot", i & 1 ? LE_DEBUG : LE_INFO));
		usleep(100);
		/* while debug is on, the loggers' calls get through (on a
		 * loaded machine, once they are scheduled at all) */
		for (int k = 0; (i & 1) && k < 2000; k++) {
			CHECK_RC(le_stats_get(e, &b));
			if (b.accepted > a.accepted)
				break;
			usleep(1000);
		}
	}
	CHECK_RC(le_set_level(e, "hot", LE_INFO));
	atomic_store(&stop_flag, 1);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	le_stats st;
	CHECK_RC(le_close_stats(e, &st));
	CHECK(st.accepted > 0); /* some got through while debug was on */
	t_rmrf(dir);
}

/* ---- what the compiler checks ---- */

/* Compile src (language "c" or "c++") with the project's header; @return
 * the compiler's exit status (0: it compiled). */
static int try_compile(const char *lang, const char *src)
{
	char path[300], cmd[800];
	t_tmpdir(dir);
	snprintf(path, sizeof path, "%s/t.%s", dir,
	         strcmp(lang, "c") ? "cc" : "c");
	CHECK(t_spit(path, src, strlen(src)) == 0);
	const char *cc = strcmp(lang, "c") ? "c++ -std=c++17" : "cc -std=c11";
	snprintf(cmd, sizeof cmd,
	         "%s -Wall -Wextra -Werror -Iinclude -fsyntax-only %s "
	         "2>/dev/null",
	         cc, path);
	int st = system(cmd);
	t_rmrf(dir);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#define PRELUDE                                                               \
	"#include \"logengine.h\"\n"                                          \
	"void f(le_engine *e, le_logger *l, int i, const char *s);\n"          \
	"void f(le_engine *e, le_logger *l, int i, const char *s) {\n"

TEST(macros_check_format_and_logger_type_at_compile_time)
{
	/* the check itself works: a good program compiles */
	CHECK_EQ(try_compile("c", PRELUDE "le_info(e, \"%d %s\", i, s);\n"
	                                  "le_debug(l, \"x\");\n"
	                                  "le_warn_kv(l, LE_FIELDS(LE_STR(\"k\", s),"
	                                  " LE_I64(\"n\", i)), \"%s\", s); }\n"),
	         0);
	/* NULL itself names the default engine (le_set_default) */
	CHECK_EQ(try_compile("c", "#include <stddef.h>\n" PRELUDE
	                          "le_info(NULL, \"%d\", i); le_warn_kv(NULL, "
	                          "LE_FIELDS(LE_STR(\"k\", s)), \"x\");"
	                          " (void)e; (void)l; }\n"),
	         0);
	CHECK(try_compile("c", PRELUDE "le_info(e, \"%s\", i); (void)l; (void)s; }\n"));
	CHECK(try_compile("c", PRELUDE "le_info(l, \"%d\"); (void)e; (void)i; (void)s; }\n"));
	CHECK(try_compile("c", PRELUDE "le_info((int *)0, \"x\"); (void)e; (void)l;"
	                             " (void)i; (void)s; }\n"));
	CHECK(try_compile("c", PRELUDE "le_info_kv(l, LE_FIELDS(LE_I64(\"n\", i)),"
	                             " \"%s\", i); (void)e; (void)s; }\n"));
	/* the rate-limited forms check the same */
	CHECK_EQ(try_compile("c", PRELUDE "le_warn_every(l, 1000, 10, \"%d %s\","
	                                  " i, s); le_log_every(e, LE_INFO, 5, 1,"
	                                  " s); }\n"),
	         0);
	CHECK(try_compile("c", PRELUDE "le_warn_every(l, 1000, 10, \"%s\", i);"
	                             " (void)e; (void)s; }\n"));
}

TEST(macros_compile_in_cplusplus_too)
{
	CHECK_EQ(try_compile("c++", PRELUDE "le_info(e, \"%d %s\", i, s);\n"
	                                    "le_debug(l, \"x\");\n"
	                                    "le_field fs[] = {LE_STR(\"k\", s)};\n"
	                                    "le_warn_kv(l, fs, 1, \"%d\", i); }\n"),
	         0);
	CHECK(try_compile("c++", PRELUDE "le_info(l, \"%s\", i); (void)e; (void)s; }\n"));
	CHECK_EQ(try_compile("c++", PRELUDE "le_info(nullptr, \"%d\", i);"
	                            " (void)e; (void)l; (void)s; }\n"),
	         0);
	CHECK_EQ(try_compile("c++", PRELUDE "le_warn_every(l, 1000, 10, \"%d\","
	                            " i); le_log_every(e, LE_INFO, 5, 1, \"%s\","
	                            " s); }\n"),
	         0);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	RUN(root_threshold_is_info_and_applies_to_the_engine);
	RUN(loggers_inherit_from_the_nearest_configured_parent);
	RUN(arguments_of_a_call_below_the_threshold_are_not_evaluated);
	RUN(level_names_parse_as_spdlog_spells_them);
	RUN(logengine_level_sets_thresholds_at_open_and_wins_over_config);
	RUN(bad_logengine_level_is_reported_and_defaults_apply);
	RUN(logger_table_is_bounded_by_max_loggers);
	RUN(any_logger_name_gives_a_usable_logger_and_levels_are_checked);
	RUN(source_location_fields_name_the_call);
	RUN(severity_numbers_match_syslog_and_opentelemetry);
	RUN(levels_change_while_other_threads_log);
	RUN(macros_check_format_and_logger_type_at_compile_time);
	RUN(macros_compile_in_cplusplus_too);
	return t_done();
}
