/*
 * test_abi.c -- the library's public boundary as a program outside the tree
 * sees it: the shared library exports the functions include/logengine.h
 * marks LE_API and nothing else (no le__ internal, no writable global), it
 * is built as liblogengine.so.0.MINOR.PATCH with its SONAME and links, a
 * program built the way README.md says starts and logs, and le_config and
 * le_stats grow without breaking programs built against a smaller one
 * (src/engine/abi.c): one compiled with an older, smaller layout runs with this
 * library, which reads and writes no byte past the sizes it was given.
 *
 * Outside programs are built with $LE_CC (make check sets it to the
 * compiler with the build's sanitizer flags) against $BUILD; run from the
 * top of the tree.
 */
#include "harness.h"
#include "system/sys.h"

#include <ctype.h>
#include <stddef.h>

#include "logengine.h"

#define MAX_SYMS 1024 /* room for every symbol of the internal archive */

typedef struct symset {
	char *name[MAX_SYMS];
	int n;
} symset;

static void sym_add(symset *s, const char *name, size_t len)
{
	CHECK(s->n < MAX_SYMS);
	s->name[s->n++] = strndup(name, len);
}

static int sym_has(const symset *s, const char *name)
{
	for (int i = 0; i < s->n; i++)
		if (!strcmp(s->name[i], name))
			return 1;
	return 0;
}

/* The functions and variables the header exports: every line that starts
 * with "LE_API", the identifier before its first '(' (a function) or,
 * when a ';' comes first, before that (a variable). */
static void header_api(symset *s)
{
	char *h = t_slurp_text("include/logengine.h");
	for (char *p = strstr(h, "\nLE_API "); p; p = strstr(p + 1, "\nLE_API ")) {
		char *paren = strpbrk(p, "(;"), *end = paren;
		CHECK(paren);
		while (end > p && (end[-1] == '_' || isalnum((unsigned char)end[-1])))
			end--;
		sym_add(s, end, (size_t)(paren - end));
	}
	free(h);
	CHECK(s->n >= 18); /* the parse found the API */
	CHECK(sym_has(s, "le_open"));
}

/* Names in the third column of `nm` output (defined symbols). */
static void nm_defined(symset *s, const char *args, const char *file)
{
	T_SH_OK("nm %s '%s' | awk 'NF == 3 { print $3 }' | sort -u", args, file);
	for (char *p = t_sh_out, *nl; *p; p = nl + 1) {
		nl = strchr(p, '\n');
		if (!nl)
			break;
		if (nl > p)
			sym_add(s, p, (size_t)(nl - p));
	}
}

/* Every symbol of `got` is in the header, and every header function is in
 * `got`; says which are not. */
static void check_same(const symset *got, const symset *api, const char *what)
{
	int bad = 0;
	for (int i = 0; i < got->n; i++)
		if (!sym_has(api, got->name[i])) {
			fprintf(stderr, "  %s exports %s, not in logengine.h\n",
			        what, got->name[i]);
			bad = 1;
		}
	for (int i = 0; i < api->n; i++)
		if (!sym_has(got, api->name[i])) {
			fprintf(stderr, "  %s lacks %s\n", what, api->name[i]);
			bad = 1;
		}
	CHECK(!bad);
}

TEST(shared_library_exports_the_header_functions_and_nothing_else)
{
	symset api = {0}, so = {0};
	char path[512];

	header_api(&api);
	snprintf(path, sizeof path, "%s/liblogengine.so", t_build_dir());
	nm_defined(&so, "-D --defined-only", path);
	for (int i = 0; i < so.n; i++)
		if (!strncmp(so.name[i], "le__", 4))
			fprintf(stderr, "  internal %s exported\n", so.name[i]);
	check_same(&so, &api, path);
}

/* The installed archive hides the internals too: a program linked
 * statically can neither call them nor clash with them. */
TEST(public_archive_defines_only_the_header_functions)
{
	symset api = {0}, a = {0};
	char path[512];

	header_api(&api);
	snprintf(path, sizeof path, "%s/liblogengine.a", t_build_dir());
	nm_defined(&a, "-g --defined-only", path);
	check_same(&a, &api, path);
}

/* The detector above can fail: the internal archive, which tests link,
 * defines le__ functions and the hooks tests reach the OS table with. */
TEST(internal_archive_is_the_one_with_le__internals)
{
	symset a = {0};
	char path[512];

	snprintf(path, sizeof path, "%s/liblogengine-internal.a",
	         t_build_dir());
	nm_defined(&a, "-g --defined-only", path);
	CHECK(sym_has(&a, "le__os_install"));
	CHECK(sym_has(&a, "le__open"));
	CHECK(!sym_has(&a, "le__os_table")); /* private to os.c */
}

TEST(shared_library_is_versioned_file_with_soname_and_links)
{
	char want[64], path[512], link[256];
	ssize_t n;
	const char *b = t_build_dir();

	snprintf(want, sizeof want, "liblogengine.so.0.%d.%d",
	         LE_VERSION_MINOR, LE_VERSION_PATCH);
	snprintf(path, sizeof path, "%s/liblogengine.so", b);
	n = readlink(path, link, sizeof link - 1);
	CHECK(n > 0);
	link[n] = '\0';
	CHECK_STR_EQ(link, "liblogengine.so.0");
	snprintf(path, sizeof path, "%s/liblogengine.so.0", b);
	n = readlink(path, link, sizeof link - 1);
	CHECK(n > 0);
	link[n] = '\0';
	CHECK_STR_EQ(link, want);
	snprintf(path, sizeof path, "%s/%s", b, want);
	struct stat st;
	CHECK(lstat(path, &st) == 0 && S_ISREG(st.st_mode));
	T_SH_OK("readelf -d '%s' | grep SONAME", path);
	CHECK(strstr(t_sh_out, "[liblogengine.so.0]"));
}

/* A program that logs, closes and reads its records back, printing
 * "ok N". */
static const char prog_c[] =
	"#include <stdio.h>\n"
	"#include \"logengine.h\"\n"
	"int main(int argc, char **argv)\n"
	"{\n"
	"	le_config cfg;\n"
	"	le_engine *e;\n"
	"	le_reader *r;\n"
	"	le_record rec;\n"
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
	"	for (int i = 0; i < 1000; i++)\n"
	"		if (le_logf(e, LE_INFO, \"record %d\", i) < 0)\n"
	"			return 1;\n"
	"	le_stats st;\n"
	"	if (le_close_stats(e, &st) < 0 || st.written != 1000)\n"
	"		return 1;\n"
	"	if (le_reader_open(&r, argv[1], NULL) < 0)\n"
	"		return 1;\n"
	"	while (le_reader_next(r, &rec) == 1)\n"
	"		n++;\n"
	"	le_reader_close(r);\n"
	"	printf(\"ok %ld %s\\n\", n, le_version());\n"
	"	return 0;\n"
	"}\n";

TEST(program_linked_as_the_readme_says_runs)
{
	char tmp[256];
	const char *b = t_build_dir();

	t_tmpdir(tmp);
	t_write_file(tmp, "prog.c", prog_c);
	/* README: cc prog.c -Iinclude -Lbuild -llogengine */
	T_SH_OK("%s %s/prog.c -Iinclude -L%s -llogengine -o %s/prog", t_cc(),
	        tmp, b, tmp);
	T_SH_OK("readelf -d %s/prog | grep NEEDED", tmp);
	CHECK(strstr(t_sh_out, "[liblogengine.so.0]")); /* the shared one */
	T_SH_OK("LD_LIBRARY_PATH=%s %s/prog %s/logs", b, tmp, tmp);
	char want[64];
	snprintf(want, sizeof want, "ok 1000 %s\n", LE_VERSION_STRING);
	CHECK_STR_EQ(t_sh_out, want);
	t_rmrf(tmp);
}

/* The header alone, under the strictest flags a user may build with, in
 * C99 and in C++. */
TEST(public_header_compiles_alone_in_strict_c99_and_cxx)
{
	char tmp[256];

	t_tmpdir(tmp);
	t_write_file(tmp, "h.c", "#include \"logengine.h\"\n"
	                         "int main(void) { return !le_version(); }\n");
	T_SH_OK("%s -std=c99 -Wall -Wextra -Wpedantic -Werror -Iinclude "
	        "-fsyntax-only %s/h.c", t_cc(), tmp);
	if (t_have("c++"))
		T_SH_OK("c++ -x c++ -std=c++11 -Wall -Wextra -Wpedantic "
		        "-Werror -Iinclude -fsyntax-only %s/h.c", tmp);
	t_rmrf(tmp);
}

/*
 * A program compiled against an older logengine.h, whose le_config and
 * le_stats were prefixes of today's.  Its le_config ends where a page
 * the process may not touch begins, so a library that read past the
 * size it was given would die of SIGSEGV; its le_stats is followed by
 * canary bytes.  Prints "ok" when every check passed.
 */
static const char old_prog_c[] =
	"#define _DEFAULT_SOURCE\n"
	"#include <stddef.h>\n"
	"#include <stdio.h>\n"
	"#include <string.h>\n"
	"#include <sys/mman.h>\n"
	"#include <unistd.h>\n"
	"#include \"logengine.h\"\n"
	"#define CONFIG(X) X(size_t, struct_size) X(const char *, dir) \\\n"
	"	X(int, create_dir) X(unsigned, shards) \\\n"
	"	X(uint32_t, queue_capacity) X(uint64_t, queue_capacity_bytes) \\\n"
	"	X(uint32_t, max_record_bytes) X(int, overflow) X(int, oversize) \\\n"
	"	X(uint32_t, fields) X(uint64_t, segment_bytes) \\\n"
	"	X(uint32_t, segment_max_age_ms) X(uint64_t, retention_bytes) \\\n"
	"	X(uint32_t, batch_size) X(uint32_t, flush_ms) \\\n"
	"	X(uint32_t, max_pending_bytes) X(int, durability) \\\n"
	"	X(uint32_t, sync_ms) X(uint32_t, checkpoint_ms) \\\n"
	"	X(int, direct_io) X(int, mapped_queue)\n"
	"#define STATS(X) X(uint64_t, accepted) X(uint64_t, dropped) \\\n"
	"	X(uint64_t, dropped_full)\n"
	"#define FIELD(t, f) t f;\n"
	"typedef struct { CONFIG(FIELD) } old_config;\n"
	"typedef struct { STATS(FIELD) } old_stats;\n"
	"/* A prefix: every field where today's struct has it, and today's\n"
	" * has more after the last (else this tests nothing). */\n"
	"#define SAME_C(t, f) _Static_assert(offsetof(old_config, f) == \\\n"
	"	offsetof(le_config, f), #f);\n"
	"#define SAME_S(t, f) _Static_assert(offsetof(old_stats, f) == \\\n"
	"	offsetof(le_stats, f), #f);\n"
	"CONFIG(SAME_C)\n"
	"STATS(SAME_S)\n"
	"_Static_assert(sizeof(old_config) < sizeof(le_config), \"smaller\");\n"
	"_Static_assert(sizeof(old_stats) < sizeof(le_stats), \"smaller\");\n"
	"#define FAIL(...) do { printf(__VA_ARGS__); printf(\"\\n\"); \\\n"
	"	return 1; } while (0)\n"
	"static int canary_intact(const unsigned char *c, size_t n)\n"
	"{\n"
	"	for (size_t i = 0; i < n; i++)\n"
	"		if (c[i] != 0xA5)\n"
	"			return 0;\n"
	"	return 1;\n"
	"}\n"
	"int main(int argc, char **argv)\n"
	"{\n"
	"	long pg = sysconf(_SC_PAGESIZE);\n"
	"	char *m = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE,\n"
	"	               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);\n"
	"	if (argc < 2 || m == MAP_FAILED || mprotect(m + pg, pg, PROT_NONE))\n"
	"		FAIL(\"setup\");\n"
	"	old_config *oc = (old_config *)(m + pg - sizeof *oc);\n"
	"	memset(oc, 0xA5, sizeof *oc);\n"
	"	/* What the old header's le_config_init(&cfg) expands to. */\n"
	"	le_config_init_sized((le_config *)oc, sizeof *oc);\n"
	"	if (oc->struct_size != sizeof *oc || oc->shards != 1 ||\n"
	"	    oc->queue_capacity != 8192 || oc->mapped_queue != 1)\n"
	"		FAIL(\"le_config_init: defaults not set\");\n"
	"	oc->dir = argv[1];\n"
	"	oc->create_dir = 1;\n"
	"	le_engine *e;\n"
	"	if (le_open(&e, (const le_config *)oc) != 0)\n"
	"		FAIL(\"le_open: %s\", le_errmsg());\n"
	"	for (int i = 0; i < 100; i++)\n"
	"		if (le_write(e, 0, LE_INFO, \"rec\", 3) != 0)\n"
	"			FAIL(\"le_write %d\", i);\n"
	"	if (le_flush(e, 10000) != 0)\n"
	"		FAIL(\"le_flush\");\n"
	"	struct { old_stats s; unsigned char canary[64]; } st, fin;\n"
	"	memset(&st, 0xA5, sizeof st);\n"
	"	memset(&fin, 0xA5, sizeof fin);\n"
	"	/* What the old header's le_stats_get(e, &st.s) expands to. */\n"
	"	if (le_stats_get_sized(e, (le_stats *)&st.s, sizeof st.s) != 0)\n"
	"		FAIL(\"le_stats_get\");\n"
	"	if (!canary_intact(st.canary, sizeof st.canary))\n"
	"		FAIL(\"le_stats_get wrote past the caller's le_stats\");\n"
	"	if (st.s.accepted != 100 || st.s.dropped != 0)\n"
	"		FAIL(\"stats: accepted %llu dropped %llu\",\n"
	"		     (unsigned long long)st.s.accepted,\n"
	"		     (unsigned long long)st.s.dropped);\n"
	"	if (le_close_stats_sized(e, (le_stats *)&fin.s, sizeof fin.s))\n"
	"		FAIL(\"le_close_stats\");\n"
	"	if (!canary_intact(fin.canary, sizeof fin.canary))\n"
	"		FAIL(\"le_close_stats wrote past the caller's le_stats\");\n"
	"	if (fin.s.accepted != 100)\n"
	"		FAIL(\"close stats: accepted %llu\",\n"
	"		     (unsigned long long)fin.s.accepted);\n"
	"	/* store, a field past the old struct, took its default (1):\n"
	"	 * the records are in segment files. */\n"
	"	le_reader *r;\n"
	"	le_record rec;\n"
	"	int n = 0;\n"
	"	if (le_reader_open(&r, argv[1], NULL) != 0)\n"
	"		FAIL(\"le_reader_open\");\n"
	"	while (le_reader_next(r, &rec) == 1)\n"
	"		n++;\n"
	"	le_reader_close(r);\n"
	"	if (n != 100)\n"
	"		FAIL(\"%d records read back\", n);\n"
	"	printf(\"ok\\n\");\n"
	"	return 0;\n"
	"}\n";

TEST(program_built_with_older_smaller_structs_runs_with_this_library)
{
	char tmp[256];
	const char *b = t_build_dir();

	t_tmpdir(tmp);
	t_write_file(tmp, "old.c", old_prog_c);
	T_SH_OK("%s -std=c11 -Wall -Wextra -Werror %s/old.c -Iinclude -L%s "
	        "-llogengine -o %s/old", t_cc(), tmp, b, tmp);
	T_SH_OK("LD_LIBRARY_PATH=%s %s/old %s/logs", b, tmp, tmp);
	CHECK_STR_EQ(t_sh_out, "ok\n");
	t_rmrf(tmp);
}

/* A le_config larger than this library's, as a program built against a
 * newer header passes: fields it leaves at their default (zero) are
 * fine; one it set is refused, by name, not silently ignored. */
typedef struct newer_config {
	le_config c;
	uint64_t later[4];
} newer_config;

TEST(newer_config_is_refused_only_when_it_sets_a_field_unknown_here)
{
	char dir[256];
	newer_config n;
	le_engine *e;

	memset(&n, 0xA5, sizeof n);
	le_config_init_sized(&n.c, sizeof n);
	CHECK_EQ(n.c.struct_size, sizeof n);
	for (int i = 0; i < 4; i++)
		CHECK_EQ(n.later[i], 0); /* init zeroes what it does not know */
	n.c.dir = t_tmpdir(dir);
	CHECK_EQ(le_open(&e, &n.c), 0);
	CHECK_EQ(le_close(e), 0);

	n.later[2] = 7;
	CHECK_EQ(le_open(&e, &n.c), LE_EINVAL);
	CHECK(e == NULL);
	CHECK(strstr(le_errmsg(), "struct_size"));
	CHECK(strstr(le_errmsg(), "newer logengine.h"));
	t_rmrf(dir);
}

TEST(config_not_filled_by_le_config_init_is_refused_naming_struct_size)
{
	char dir[256];
	le_config c;
	le_engine *e;

	le_config_init(&c);
	c.dir = t_tmpdir(dir);
	c.struct_size = 0; /* as in `le_config c = {0};` filled by hand */
	CHECK_EQ(le_open(&e, &c), LE_EINVAL);
	CHECK(strstr(le_errmsg(), "struct_size"));
	CHECK(strstr(le_errmsg(), "le_config_init"));
	t_rmrf(dir);
}

/* reserved_ is kept for a later setting: a program cannot put a value
 * there today that a later library would read as one. */
TEST(config_with_reserved_field_set_is_refused)
{
	char dir[256];
	le_config c;
	le_engine *e;

	le_config_init(&c);
	c.dir = t_tmpdir(dir);
	c.reserved_ = 1;
	CHECK_EQ(le_open(&e, &c), LE_EINVAL);
	CHECK(strstr(le_errmsg(), "reserved_"));
	t_rmrf(dir);
}

/* A newer program's larger le_stats: the counters this library does not
 * keep read 0, not whatever was in the caller's memory. */
TEST(newer_stats_have_counters_unknown_here_zeroed)
{
	char dir[256];
	le_config c;
	le_engine *e;
	struct {
		le_stats s;
		uint64_t later[4];
	} st, fin;

	le_config_init(&c);
	c.dir = t_tmpdir(dir);
	CHECK_RC(le_open(&e, &c));
	CHECK_RC(le_write(e, 0, LE_INFO, "x", 1));
	CHECK_RC(le_flush(e, 10000));
	memset(&st, 0xA5, sizeof st);
	CHECK_EQ(le_stats_get_sized(e, &st.s, sizeof st), 0);
	CHECK_EQ(st.s.accepted, 1);
	for (int i = 0; i < 4; i++)
		CHECK_EQ(st.later[i], 0);
	memset(&fin, 0xA5, sizeof fin);
	CHECK_EQ(le_close_stats_sized(e, &fin.s, sizeof fin), 0);
	CHECK_EQ(fin.s.written, 1);
	for (int i = 0; i < 4; i++)
		CHECK_EQ(fin.later[i], 0);
	t_rmrf(dir);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	RUN(shared_library_exports_the_header_functions_and_nothing_else);
	RUN(public_archive_defines_only_the_header_functions);
	RUN(internal_archive_is_the_one_with_le__internals);
	RUN(shared_library_is_versioned_file_with_soname_and_links);
	RUN(program_linked_as_the_readme_says_runs);
	RUN(public_header_compiles_alone_in_strict_c99_and_cxx);
	RUN(program_built_with_older_smaller_structs_runs_with_this_library);
	RUN(newer_config_is_refused_only_when_it_sets_a_field_unknown_here);
	RUN(config_not_filled_by_le_config_init_is_refused_naming_struct_size);
	RUN(config_with_reserved_field_set_is_refused);
	RUN(newer_stats_have_counters_unknown_here_zeroed);
	return t_done();
}
