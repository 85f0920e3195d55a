/*
 * test_user_program.c -- the library as a user meets it: a program outside
 * the tree, built only against the installed files (pkg-config), logs with
 * the level macros through named loggers with typed fields, compiled with
 * LE_MIN_LEVEL and run under LOGENGINE_LEVEL; the installed `logengine cat
 * -o json` reads its records back with their fields.  A bad
 * LOGENGINE_LEVEL item is named on stderr and left out; the program runs.
 */
#include "harness.h"
#include "system/sys.h"

#include "logengine.h"

#define PREFIX "/usr/local"

/* pkg-config reading the staged tree (as tests/system/test_install.c). */
#define PKG_ENV "export PKG_CONFIG_PATH=%s/root" PREFIX "/lib/pkgconfig " \
                "PKG_CONFIG_SYSROOT_DIR=%s/root; "

static const char user_c[] =
	"#define LE_MIN_LEVEL LE_DEBUG\n"
	"#include <stdio.h>\n"
	"#include <logengine.h>\n"
	"static int evaluated;\n"
	"static int side(void) { return ++evaluated; }\n"
	"int main(int argc, char **argv)\n"
	"{\n"
	"	le_config cfg;\n"
	"	le_engine *e;\n"
	"	if (argc < 2)\n"
	"		return 2;\n"
	"	le_config_init(&cfg);\n"
	"	cfg.dir = argv[1];\n"
	"	cfg.create_dir = 1;\n"
	"	if (le_open(&e, &cfg) < 0) {\n"
	"		fprintf(stderr, \"le_open: %s\\n\", le_errmsg());\n"
	"		return 1;\n"
	"	}\n"
	"	le_logger *http = le_logger_get(e, \"net.http\");\n"
	"	le_logger *db = le_logger_get(e, \"db\");\n"
	"	for (int i = 0; i < 3; i++)\n"
	"		le_info_kv(http, LE_FIELDS(LE_STR(\"user\", \"bob \\\"b\\\"\"),\n"
	"		                           LE_I64(\"status\", 200 + i),\n"
	"		                           LE_F64(\"ms\", 1.5 * i),\n"
	"		                           LE_BOOL(\"cached\", i & 1)),\n"
	"		           \"GET /item/%d\", i);\n"
	"	le_debug(http, \"net debug %d\", side());\n"
	"	le_debug(db, \"db debug %d\", side());\n"
	"	le_trace(http, \"trace %d\", side());\n"
	"	le_warn(e, \"root warn\");\n"
	"	if (le_close(e) < 0)\n"
	"		return 1;\n"
	"	printf(\"evaluated %d\\n\", evaluated);\n"
	"	return 0;\n"
	"}\n";

TEST(outside_program_logs_with_macros_loggers_and_fields_read_back_by_cat)
{
	char tmp[256];

	t_need("packaging"); /* pkg-config */
	t_tmpdir(tmp);
	T_SH_OK("make --no-print-directory -s BUILD='%s' DESTDIR='%s/root' "
	        "install", t_build_dir(), tmp);
	t_write_file(tmp, "user.c", user_c);
	T_SH_OK("cd '%s' && " PKG_ENV "%s -Wall -Wextra -Werror user.c -o user "
	        "$(pkg-config --cflags --libs logengine)", tmp, tmp, tmp,
	        t_cc());
	/* net at debug by the environment; db (and the root) at info;
	 * trace compiled out: only the net debug call's side() ran. */
	T_SH_OK("LD_LIBRARY_PATH='%s/root" PREFIX "/lib' "
	        "LOGENGINE_LEVEL='info,net=debug' '%s/user' '%s/logs'",
	        tmp, tmp, tmp);
	CHECK_STR_EQ(t_sh_out, "evaluated 1\n");
	T_SH_OK("LD_LIBRARY_PATH='%s/root" PREFIX "/lib' '%s/root" PREFIX
	        "/bin/logengine' cat -o json '%s/logs'", tmp, tmp, tmp);
	static const char *const want[] = {
		"\"level\":\"INFO\",\"shard\":0,\"msg\":\"GET /item/0\","
		"\"fields\":{\"logger\":\"net.http\",\"user\":\"bob \\\"b\\\"\","
		"\"status\":200,\"ms\":0,\"cached\":false}}",
		"\"msg\":\"GET /item/1\",\"fields\":{\"logger\":\"net.http\","
		"\"user\":\"bob \\\"b\\\"\",\"status\":201,\"ms\":1.5,"
		"\"cached\":true}}",
		"\"msg\":\"GET /item/2\",\"fields\":{\"logger\":\"net.http\","
		"\"user\":\"bob \\\"b\\\"\",\"status\":202,\"ms\":3,"
		"\"cached\":false}}",
		"\"level\":\"DEBUG\",\"shard\":0,\"msg\":\"net debug 1\","
		"\"fields\":{\"logger\":\"net.http\"}}",
		"\"level\":\"WARN\",\"shard\":0,\"msg\":\"root warn\"}",
	};
	const char *at = t_sh_out;
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		const char *hit = strstr(at, want[i]);
		if (!hit)
			fprintf(stderr, "  missing, in order: %s\n%s\n", want[i],
			        t_sh_out);
		CHECK(hit);
		at = hit + strlen(want[i]);
	}
	int lines = 0;
	for (const char *p = t_sh_out; *p; p++)
		lines += *p == '\n';
	CHECK_EQ(lines, 5);

	/* A LOGENGINE_LEVEL item that does not parse: le_open says which
	 * on stderr, leaves it out and the program runs (net at info). */
	T_SH_OK("LD_LIBRARY_PATH='%s/root" PREFIX "/lib' "
	        "LOGENGINE_LEVEL='info,net=loud' '%s/user' '%s/logs2'",
	        tmp, tmp, tmp);
	CHECK(strstr(t_sh_out, "LOGENGINE_LEVEL: \"loud\" is not a level"));
	CHECK(strstr(t_sh_out, "evaluated 0\n") != NULL);
	t_rmrf(tmp);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	unsetenv("LOGENGINE_LEVEL");
	RUN(outside_program_logs_with_macros_loggers_and_fields_read_back_by_cat);
	return t_done();
}
