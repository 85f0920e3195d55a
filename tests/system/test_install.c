/*
 * test_install.c -- `make install` as a user (or a package build) runs it:
 * everything under DESTDIR/PREFIX, and a program outside the tree built
 * only against the installed files runs, three ways: cc with pkg-config,
 * CMake with find_package(logengine), and linked statically (pkg-config
 * --static).  `make uninstall` leaves nothing behind.  The man pages
 * install and cover the whole API, `man le_open` (any API name) opens
 * logengine(3), and every C example of README.md and of logengine(3)'s
 * EXAMPLES builds against the installed library and runs as written.
 *
 * Installs with `make install BUILD=$BUILD DESTDIR=<a fresh directory>`
 * from the top of the tree (make check runs there, after building);
 * outside programs are built with $LE_CC.  pkg-config and CMake come from
 * scripts/deps.sh packaging: without them the tests that need them are
 * skipped.
 */
#include "harness.h"
#include "system/sys.h"

#include <ctype.h>

#include "logengine.h"

#define PREFIX "/usr/local" /* the Makefile's default */

/* A fresh DESTDIR in tmp/root with the tree installed in it. */
static void install_into(const char *tmp, const char *extra)
{
	T_SH_OK("make --no-print-directory -s BUILD='%s' DESTDIR='%s/root' "
	        "%s install", t_build_dir(), tmp, extra);
}

/* A program that logs through one engine, reads the records back and
 * prints "ok N VERSION". */
static const char prog_c[] =
	"#include <stdio.h>\n"
	"#include <logengine.h>\n"
	"int main(int argc, char **argv)\n"
	"{\n"
	"	le_config cfg;\n"
	"	le_engine *e;\n"
	"	le_reader *r;\n"
	"	le_record rec;\n"
	"	le_stats st;\n"
	"	long n = 0;\n"
	"	if (argc < 2)\n"
	"		return 2;\n"
	"	le_config_init(&cfg);\n"
	"	cfg.dir = argv[1];\n"
	"	cfg.create_dir = 1;\n"
	"	if (le_open(&e, &cfg) < 0) {\n"
	"		fprintf(stderr, \"le_open: %s\\n\", le_errmsg());\n"
	"		return 1;\n"
	"	}\n"
	"	for (int i = 0; i < 500; i++)\n"
	"		le_logf(e, LE_INFO, \"outside %d\", i);\n"
	"	if (le_close_stats(e, &st) < 0 || st.written != 500)\n"
	"		return 1;\n"
	"	if (le_reader_open(&r, argv[1], NULL) < 0)\n"
	"		return 1;\n"
	"	while (le_reader_next(r, &rec) == 1)\n"
	"		n++;\n"
	"	le_reader_close(r);\n"
	"	printf(\"ok %ld %s\\n\", n, le_version());\n"
	"	return 0;\n"
	"}\n";

static void check_prog_output(void)
{
	char want[64];
	snprintf(want, sizeof want, "ok 500 %s\n", LE_VERSION_STRING);
	CHECK_STR_EQ(t_sh_out, want);
}

/* pkg-config reading the staged tree: its .pc from there, and every -I
 * and -L it prints moved under DESTDIR (the sysroot). */
#define PKG_ENV "export PKG_CONFIG_PATH=%s/root" PREFIX "/lib/pkgconfig " \
                "PKG_CONFIG_SYSROOT_DIR=%s/root; "

static void check_link(const char *tmp, const char *name, const char *want)
{
	char path[600], got[256];
	snprintf(path, sizeof path, "%s/root" PREFIX "/lib/%s", tmp, name);
	ssize_t n = readlink(path, got, sizeof got - 1);
	CHECK(n > 0);
	got[n] = '\0';
	CHECK_STR_EQ(got, want);
}

TEST(install_puts_every_file_under_destdir_and_prefix)
{
	static const char *const files[] = {
		"bin/logengine", "include/logengine.h", "lib/liblogengine.a",
		"lib/pkgconfig/logengine.pc",
		"lib/cmake/logengine/logengineConfig.cmake",
		"lib/cmake/logengine/logengineConfigVersion.cmake",
		"share/man/man1/logengine.1", "share/man/man3/logengine.3",
		"share/man/man5/logengine-format.5",
		"share/bash-completion/completions/logengine",
	};
	char tmp[256], sofile[64];

	t_tmpdir(tmp);
	install_into(tmp, "");
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
		T_SH_OK("test -f '%s/root" PREFIX "/%s'", tmp, files[i]);
	}
	snprintf(sofile, sizeof sofile, "liblogengine.so.0.%d.%d",
	         LE_VERSION_MINOR, LE_VERSION_PATCH);
	T_SH_OK("test -f '%s/root" PREFIX "/lib/%s' && "
	        "test ! -L '%s/root" PREFIX "/lib/%s'", tmp, sofile, tmp,
	        sofile);
	check_link(tmp, "liblogengine.so.0", sofile);
	check_link(tmp, "liblogengine.so", "liblogengine.so.0");
	/* The header as it is in the tree: nothing generated into it. */
	T_SH_OK("cmp include/logengine.h '%s/root" PREFIX
	        "/include/logengine.h'", tmp);
	/* Nothing outside PREFIX. */
	T_SH_OK("cd '%s/root' && find . -mindepth 1 -maxdepth 1", tmp);
	CHECK_STR_EQ(t_sh_out, "./usr\n");
	T_SH_OK("'%s/root" PREFIX "/bin/logengine' --version", tmp);
	CHECK(strstr(t_sh_out, LE_VERSION_STRING));
	t_rmrf(tmp);
}

TEST(install_honours_prefix_and_directories)
{
	char tmp[256];

	t_tmpdir(tmp);
	install_into(tmp, "PREFIX=/opt/le MANDIR=/opt/le/man");
	T_SH_OK("test -f '%s/root/opt/le/lib/liblogengine.a' && "
	        "test -f '%s/root/opt/le/man/man3/logengine.3' && "
	        "test ! -e '%s/root/usr'", tmp, tmp, tmp);
	T_SH_OK("grep '^prefix=' '%s/root/opt/le/lib/pkgconfig/logengine.pc'",
	        tmp);
	CHECK_STR_EQ(t_sh_out, "prefix=/opt/le\n");
	t_rmrf(tmp);
}

TEST(uninstall_removes_every_file_install_put)
{
	char tmp[256];

	t_tmpdir(tmp);
	install_into(tmp, "");
	T_SH_OK("make --no-print-directory -s BUILD='%s' DESTDIR='%s/root' "
	        "uninstall", t_build_dir(), tmp);
	T_SH_OK("find '%s/root' ! -type d", tmp);
	CHECK_STR_EQ(t_sh_out, "");
	t_rmrf(tmp);
}

TEST(program_built_with_pkg_config_runs)
{
	char tmp[256];

	t_need("packaging");
	t_tmpdir(tmp);
	install_into(tmp, "");
	t_write_file(tmp, "prog.c", prog_c);
	T_SH_OK(PKG_ENV "pkg-config --modversion logengine", tmp, tmp);
	CHECK(!strncmp(t_sh_out, LE_VERSION_STRING,
	               strlen(LE_VERSION_STRING)));
	/* Run outside the tree, so nothing of it is found by accident. */
	T_SH_OK("cd '%s' && " PKG_ENV "%s prog.c -o prog "
	        "$(pkg-config --cflags --libs logengine)", tmp, tmp, tmp,
	        t_cc());
	T_SH_OK("readelf -d '%s/prog' | grep NEEDED", tmp);
	CHECK(strstr(t_sh_out, "[liblogengine.so.0]"));
	T_SH_OK("LD_LIBRARY_PATH='%s/root" PREFIX "/lib' '%s/prog' '%s/logs'",
	        tmp, tmp, tmp);
	check_prog_output();
	t_rmrf(tmp);
}

/* The C compiler and its flags for CMake, from $LE_CC ("cc -fsanitize=x"
 * gives CMAKE_C_COMPILER=cc, the rest as flags for compile and link). */
static void cmake_cc(char *cc, size_t cc_cap, char *flags, size_t fl_cap)
{
	const char *all = t_cc(), *sp = strchr(all, ' ');
	size_t n = sp ? (size_t)(sp - all) : strlen(all);
	snprintf(cc, cc_cap, "%.*s", (int)n, all);
	snprintf(flags, fl_cap, "%s", sp ? sp + 1 : "");
}

static int cmake_configure(const char *tmp, const char *find)
{
	char cc[256], flags[512], lists[512];

	cmake_cc(cc, sizeof cc, flags, sizeof flags);
	snprintf(lists, sizeof lists,
	         "cmake_minimum_required(VERSION 3.13)\n"
	         "project(outside C)\n"
	         "%s\n"
	         "add_executable(prog prog.c)\n"
	         "target_link_libraries(prog PRIVATE logengine::logengine)\n",
	         find);
	t_write_file(tmp, "CMakeLists.txt", lists);
	return t_sh("rm -rf '%s/bld' && cmake -S '%s' -B '%s/bld' "
	            "-DCMAKE_PREFIX_PATH='%s/root" PREFIX "' "
	            "-DCMAKE_C_COMPILER='%s' -DCMAKE_C_FLAGS='%s' "
	            "-DCMAKE_EXE_LINKER_FLAGS='%s'", tmp, tmp, tmp, tmp, cc,
	            flags, flags);
}

TEST(program_built_with_cmake_find_package_runs)
{
	char tmp[256], find[128];

	t_need("packaging");
	t_tmpdir(tmp);
	install_into(tmp, "");
	t_write_file(tmp, "prog.c", prog_c);
	snprintf(find, sizeof find, "find_package(logengine %d.%d REQUIRED)",
	         LE_VERSION_MAJOR, LE_VERSION_MINOR);
	if (cmake_configure(tmp, find) != 0) {
		fprintf(stderr, "%s\n", t_sh_out);
		CHECK(0);
	}
	T_SH_OK("cmake --build '%s/bld'", tmp);
	T_SH_OK("readelf -d '%s/bld/prog' | grep NEEDED", tmp);
	CHECK(strstr(t_sh_out, "[liblogengine.so.0]"));
	T_SH_OK("LD_LIBRARY_PATH='%s/root" PREFIX "/lib' '%s/bld/prog' "
	        "'%s/logs'", tmp, tmp, tmp);
	check_prog_output();
	t_rmrf(tmp);
}

/* The version file says no to a major version it is not. */
TEST(cmake_find_package_refuses_another_major_version)
{
	char tmp[256], find[128];

	t_need("packaging");
	t_tmpdir(tmp);
	install_into(tmp, "");
	t_write_file(tmp, "prog.c", prog_c);
	snprintf(find, sizeof find, "find_package(logengine %d.0 REQUIRED)",
	         LE_VERSION_MAJOR + 1);
	CHECK(cmake_configure(tmp, find) != 0);
	char seen[64];
	snprintf(seen, sizeof seen, "version: %s", LE_VERSION_STRING);
	CHECK(strstr(t_sh_out, "compatible with requested version"));
	CHECK(strstr(t_sh_out, seen)); /* found, and turned down */
	t_rmrf(tmp);
}

/*
 * Linked statically: the program carries the library and runs with the
 * shared one gone.  pkg-config --static adds what the archive needs
 * (Libs.private); the archive is chosen with -Bstatic for it alone, and,
 * without a sanitizer (whose runtimes cannot be linked statically), a
 * fully static program is built too.
 */
TEST(program_linked_statically_with_pkg_config_static_runs)
{
	char tmp[256];

	t_need("packaging");
	t_tmpdir(tmp);
	install_into(tmp, "");
	t_write_file(tmp, "prog.c", prog_c);
	T_SH_OK("cd '%s' && " PKG_ENV "%s prog.c -o prog $(pkg-config "
	        "--cflags logengine) -Wl,-Bstatic $(pkg-config --static "
	        "--libs logengine) -Wl,-Bdynamic", tmp, tmp, tmp, t_cc());
	T_SH_OK("rm '%s/root" PREFIX "/lib/'liblogengine.so*", tmp);
	T_SH_OK("readelf -d '%s/prog' | grep NEEDED", tmp);
	CHECK(!strstr(t_sh_out, "liblogengine"));
	T_SH_OK("'%s/prog' '%s/logs'", tmp, tmp);
	check_prog_output();
	if (!strstr(t_cc(), "-fsanitize")) {
		T_SH_OK("cd '%s' && " PKG_ENV "%s -static prog.c -o sprog "
		        "$(pkg-config --static --cflags --libs logengine)",
		        tmp, tmp, tmp, t_cc());
		T_SH_OK("'%s/sprog' '%s/slogs'", tmp, tmp);
		check_prog_output();
	}
	t_rmrf(tmp);
}

/* Names in the man page's .SS headings ("le_close, le_close_stats"). */
static int in_ss_heading(const char *page, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = strstr(page, "\n.SS "); p;
	     p = strstr(p + 1, "\n.SS ")) {
		const char *end = strchr(p + 1, '\n');
		for (const char *q = p + 5; q && q < end; q++) {
			q = strstr(q, name);
			if (!q || q >= end)
				break;
			if ((q[-1] == ' ' || q[-1] == ',') &&
			    (q[n] == ',' || q[n] == '\n' || q[n] == ' '))
				return 1;
		}
	}
	return 0;
}

/* The names of the API: every function the header exports (LE_API; not
 * a variable, whose ';' comes before any '(') and every function-like
 * macro ("#define le_x("), in the header's order, some twice; returns
 * how many (at most cap). */
static int api_names(char (*names)[64], int cap)
{
	char *h = t_slurp_text("include/logengine.h");
	int n = 0;

	for (char *p = h; n < cap && (p = strstr(p, "\n")) != NULL; p++) {
		const char *s = p + 1, *name;
		if (!strncmp(s, "LE_API ", 7))
			name = strpbrk(s, "(;");
		else if (!strncmp(s, "#define le_", 11))
			name = strchr(s + 8, '(');
		else
			continue;
		if (*name == ';')
			continue;
		const char *e = name;
		while (e > s && (isalnum((unsigned char)e[-1]) || e[-1] == '_'))
			e--;
		snprintf(names[n++], 64, "%.*s", (int)(name - e), e);
	}
	free(h);
	return n;
}

/*
 * logengine(3) documents every function the header exports (LE_API) and
 * every function-like macro of the API, in its SYNOPSIS and with an entry
 * of its own; and every page renders without a warning.
 */
TEST(man_pages_render_and_logengine3_documents_every_function)
{
	static char names[256][64];
	char *page = t_slurp_text("docs/logengine.3");
	char *syn = strstr(page, "\n.SH SYNOPSIS"), *syn_end;
	int bad = 0, n = api_names(names, 256);

	CHECK(syn);
	syn_end = strstr(syn + 1, "\n.SH ");
	CHECK(syn_end);
	for (int i = 0; i < n; i++) {
		const char *fn = names[i];
		char call[70];
		snprintf(call, sizeof call, " %.63s(", fn);
		char save = *syn_end;
		*syn_end = '\0';
		int in_syn = strstr(syn, call) != NULL ||
		             strstr(syn, call + 1) != NULL;
		*syn_end = save;
		if (!in_syn || !in_ss_heading(page, fn)) {
			fprintf(stderr, "  logengine.3: %s has no %s\n", fn,
			        in_syn ? ".SS entry" : "SYNOPSIS line");
			bad = 1;
		}
	}
	CHECK(n >= 21); /* the parse found the API */
	CHECK(!bad);
	T_SH_OK("make --no-print-directory -s BUILD='%s' "
	        "'%s/man/logengine-format.5'", t_build_dir(), t_build_dir());
	static const char *const pages[] = {"docs/logengine.1",
	                                    "docs/logengine.3", NULL};
	for (int i = 0; i < 3; i++) {
		char path[300];
		if (pages[i] == NULL)
			snprintf(path, sizeof path, "%s/man/logengine-format.5",
			         t_build_dir());
		else
			snprintf(path, sizeof path, "%s", pages[i]);
		T_SH_OK("groff -t -man -ww -z '%s'", path);
		if (t_sh_out[0])
			fprintf(stderr, "  %s:\n%s", path, t_sh_out);
		CHECK_STR_EQ(t_sh_out, "");
	}
	free(page);
}

/* `man le_open` opens logengine(3): install puts a .so link page for every
 * name of the API, which man follows, and uninstall takes them away. */
TEST(man_finds_logengine3_under_every_function_name)
{
	static char names[256][64];
	char tmp[256], *want = ".so man3/logengine.3\n";
	int n = api_names(names, 256);

	t_need("packaging"); /* man itself */
	CHECK(n >= 21);
	t_tmpdir(tmp);
	install_into(tmp, "");
	for (int i = 0; i < n; i++) {
		char path[512];
		snprintf(path, sizeof path, "%s/root" PREFIX
		         "/share/man/man3/%.63s.3", tmp, names[i]);
		size_t len;
		char *got = (char *)t_slurp(path, &len);
		if (!got || strcmp(got, want))
			fprintf(stderr, "  no link page %s\n", path);
		CHECK(got && !strcmp(got, want));
		free(got);
	}
	T_SH_OK("MANPAGER=cat man -M '%s/root" PREFIX "/share/man' le_open",
	        tmp);
	CHECK(strstr(t_sh_out, "le_open"));
	CHECK(strstr(t_sh_out, "LOGENGINE(3)"));
	T_SH_OK("make --no-print-directory -s BUILD='%s' DESTDIR='%s/root' "
	        "uninstall", t_build_dir(), tmp);
	T_SH_OK("find '%s/root' -name 'le_*'", tmp);
	CHECK_STR_EQ(t_sh_out, "");
	t_rmrf(tmp);
}

/* logengine-format(5) is FORMAT.md and INTERFACES.md: every section of
 * those is a section of the page, in their order. */
TEST(format_man_page_has_every_section_of_format_md)
{
	char path[300];

	T_SH_OK("make --no-print-directory -s BUILD='%s' "
	        "'%s/man/logengine-format.5'", t_build_dir(), t_build_dir());
	snprintf(path, sizeof path, "%s/man/logengine-format.5",
	         t_build_dir());
	char *man = t_slurp_text(path), *at = man;
	int n = 0;
	const char *docs[] = {"docs/FORMAT.md", "docs/INTERFACES.md"};
	for (int d = 0; d < 2; d++) {
		char *md = t_slurp_text(docs[d]);
		for (char *p = strstr(md, "\n## "); p;
		     p = strstr(p + 1, "\n## ")) {
			char want[200];
			int len = (int)strcspn(p + 4, "\n");
			snprintf(want, sizeof want, "\n.SH %.*s\n", len, p + 4);
			for (char *c = want; *c; c++)
				*c = (char)toupper((unsigned char)*c);
			char *got = strstr(at, want);
			if (!got) {
				fprintf(stderr, "  %s: no section %s (in order)",
				        docs[d], want + 1);
				CHECK(0);
			}
			at = got + 1;
			n++;
		}
		free(md);
	}
	CHECK(n >= 10);
	free(man);
}

/* The text between each open and the close after it, from start up to
 * stop (NULL: the end), as the files of dir/ex-N.c from N = *count on;
 * roff's escapes (\e, \-, \&) are undone when roff is set. */
static void extract_blocks(const char *text, const char *start,
                           const char *stop, const char *open,
                           const char *close, int roff, const char *dir,
                           int *count)
{
	const char *p = strstr(text, start);
	CHECK(p);
	const char *end = stop ? strstr(p + 1, stop) : NULL;
	if (!end)
		end = p + strlen(p);
	while ((p = strstr(p, open)) != NULL && p < end) {
		p += strlen(open);
		const char *q = strstr(p, close);
		CHECK(q && q < end);
		char name[32], *code = malloc((size_t)(q - p) + 1), *o = code;
		CHECK(code);
		for (const char *c = p; c < q; c++) {
			if (roff && c[0] == '\\' && c[1] == 'e')
				*o++ = '\\', c++;
			else if (roff && c[0] == '\\' &&
			         (c[1] == '-' || c[1] == '&'))
				*o++ = c[1] == '-' ? '-' : c[2], c += c[1] == '&' ? 2 : 1;
			else
				*o++ = *c;
		}
		*o = '\0';
		snprintf(name, sizeof name, "ex-%d.c", (*count)++);
		t_write_file(dir, name, code);
		free(code);
		p = q;
	}
}

/*
 * Every C example of README.md and of logengine(3)'s EXAMPLES compiles
 * against the installed library as it is written (-Wall -Wextra -Werror)
 * and runs, from a directory of its own, to exit 0; every directory it
 * made there (a log it wrote, a collector's store) holds records that
 * `logengine cat` reads, and one that names a log (cfg.dir) made one.
 */
TEST(readme_and_man_page_c_examples_compile_and_run_as_written)
{
	char tmp[256], dir[300];
	char *readme = t_slurp_text("README.md");
	char *man = t_slurp_text("docs/logengine.3");
	int n = 0;

	t_tmpdir(tmp);
	install_into(tmp, "");
	snprintf(dir, sizeof dir, "%s/ex", tmp);
	CHECK(mkdir(dir, 0755) == 0);
	extract_blocks(readme, "", NULL, "\n```c\n", "```\n", 0, dir, &n);
	int in_readme = n;
	extract_blocks(man, "\n.SH EXAMPLES\n", "\n.SH ", "\n.EX\n",
	               "\n.EE\n", 1, dir, &n);
	CHECK(in_readme >= 1 && n > in_readme);
	for (int i = 0; i < n; i++) {
		char path[400];
		snprintf(path, sizeof path, "%s/ex-%d.c", dir, i);
		char *src = t_slurp_text(path);
		fprintf(stderr, "  %s example %d\n", i < in_readme ?
		        "README.md" : "logengine.3", i);
		T_SH_OK("cd '%s' && mkdir run-%d && %s -std=c11 -Wall -Wextra "
		        "-Werror -I'%s/root" PREFIX "/include' ex-%d.c -o "
		        "run-%d/prog -L'%s/root" PREFIX "/lib' -llogengine",
		        dir, i, t_cc(), tmp, i, i, tmp);
		T_SH_OK("cd '%s/run-%d' && LD_LIBRARY_PATH='%s/root" PREFIX
		        "/lib' ./prog", dir, i, tmp);
		/* Every directory it made is a log with records in it. */
		T_SH_OK("cd '%s/run-%d' && for d in */; do '%s/root" PREFIX
		        "/bin/logengine' cat -q \"$d\" | wc -l; done", dir, i,
		        tmp);
		CHECK(!strstr(src, "cfg.dir = \"") || atoi(t_sh_out) >= 1);
		for (char *l = t_sh_out; *l; l = strchr(l, '\n') + 1)
			CHECK(atoi(l) >= 1);
		free(src);
	}
	free(readme);
	free(man);
	t_rmrf(tmp);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	RUN(install_puts_every_file_under_destdir_and_prefix);
	RUN(install_honours_prefix_and_directories);
	RUN(uninstall_removes_every_file_install_put);
	RUN(program_built_with_pkg_config_runs);
	RUN(program_built_with_cmake_find_package_runs);
	RUN(cmake_find_package_refuses_another_major_version);
	RUN(program_linked_statically_with_pkg_config_static_runs);
	RUN(man_pages_render_and_logengine3_documents_every_function);
	RUN(format_man_page_has_every_section_of_format_md);
	RUN(man_finds_logengine3_under_every_function_name);
	RUN(readme_and_man_page_c_examples_compile_and_run_as_written);
	return t_done();
}
