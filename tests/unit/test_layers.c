/*
 * test_layers.c -- the library's files call and include down, never back
 * up.  Two checks over one graph of modules (a module is src/FOLDER/NAME:
 * its .c, its .h and its object):
 *
 *   circles   no module reaches itself through the arrows "includes"
 *             (the #include lines of src/) and "calls" (a symbol its
 *             object uses that another defines, read with nm).  A circle
 *             means files that can only be understood, and changed,
 *             together.
 *   layers    no arrow runs from a folder to one above it, in the order
 *             src/README.md lists the folders (the one copy of that
 *             order: this test reads it from there).
 *
 * Each check first proves it fires on a planted fault: a circle in a
 * small graph, and an upward include in a small tree written for it.
 */
#include "harness.h"

#include <dirent.h>

#define MAX_MOD 128
#define MAX_SYM 4096
#define MAX_LAYER 16

static char mod[MAX_MOD][64]; /* "folder/name" */
static int nmod;
static struct {
	char name[256];
	int def;
} sym[MAX_SYM];
static int nsym;
static unsigned char edge[MAX_MOD][MAX_MOD];
/* the first reason seen for each arrow, for the report */
static char why_edge[MAX_MOD][MAX_MOD][96];
static char layer[MAX_LAYER][32];
static int nlayer;

/* The module of a path ".../FOLDER/NAME.ext", created on first sight. */
static int mod_id(const char *path)
{
	char m[64];
	const char *b = strrchr(path, '/'), *d = b;
	CHECK(b != NULL);
	while (d > path && d[-1] != '/')
		d--; /* back to the folder's name */
	const char *dot = strrchr(b, '.');
	int len = (int)((dot ? dot : b + strlen(b)) - d);
	snprintf(m, sizeof m, "%.*s", len, d);
	for (int i = 0; i < nmod; i++)
		if (!strcmp(mod[i], m))
			return i;
	CHECK(nmod < MAX_MOD);
	snprintf(mod[nmod], sizeof mod[nmod], "%s", m);
	return nmod++;
}

static void add_edge(int from, int to, const char *why)
{
	if (from == to || edge[from][to])
		return;
	edge[from][to] = 1;
	snprintf(why_edge[from][to], sizeof why_edge[from][to], "%s", why);
}

/* "path:addr T name" or "path:         U name" lines of nm -A. */
/* 1 when object path ".../obj/lib/FOLDER/NAME.o" has its source,
 * src/FOLDER/NAME.c: a build directory keeps the objects of files that
 * were moved or deleted since, and they are no part of the library. */
static int from_source(const char *path)
{
	char src[512];
	const char *lib = strstr(path, "/obj/lib/");
	size_t len = strlen(path);
	if (!lib || len < 2)
		return 1;
	snprintf(src, sizeof src, "src/%.*s.c", (int)(path + len - 2 - (lib + 9)),
	         lib + 9);
	return access(src, F_OK) == 0;
}

static void read_nm(const char *objdir, int undefined)
{
	char cmd[512], line[512];
	snprintf(cmd, sizeof cmd, "nm -A %s %s/*/*.o 2>/dev/null",
	         undefined ? "-u" : "--defined-only", objdir);
	FILE *p = popen(cmd, "r");
	CHECK(p != NULL);
	while (fgets(line, sizeof line, p)) {
		char *colon = strchr(line, ':');
		if (!colon)
			continue;
		*colon = 0;
		if (!from_source(line))
			continue; /* left by a file since moved or deleted */
		char type[8], name[256], why[96];
		if (undefined ? sscanf(colon + 1, " %7s %255s", type, name) != 2
		              : sscanf(colon + 1, "%*s %7s %255s", type, name) != 2)
			continue;
		int o = mod_id(line);
		if (strncmp(name, "le_", 3) != 0)
			continue; /* libc and the like */
		if (!undefined) {
			if (type[0] != 'T' && type[0] != 'D' && type[0] != 'B' &&
			    type[0] != 'R')
				continue;
			CHECK(nsym < MAX_SYM);
			snprintf(sym[nsym].name, sizeof sym[nsym].name, "%s", name);
			sym[nsym++].def = o;
			continue;
		}
		for (int i = 0; i < nsym; i++)
			if (!strcmp(sym[i].name, name) && sym[i].def != o) {
				snprintf(why, sizeof why, "%s.o calls %.60s", mod[o], name);
				add_edge(o, sym[i].def, why);
			}
	}
	pclose(p);
}

/* Every `#include "folder/name.h"` of srcdir/FOLDER/NAME.[ch] that names a
 * file of srcdir: an arrow between their modules.  @return files read. */
static int read_includes(const char *srcdir)
{
	char cmd[512], line[1024];
	int files = 0;
	snprintf(cmd, sizeof cmd,
	         "cd '%s' && for f in */*.c */*.h; do [ -f \"$f\" ] && "
	         "{ echo \"$f:\"; grep '^#include \"' \"$f\"; }; done",
	         srcdir);
	FILE *p = popen(cmd, "r");
	CHECK(p != NULL);
	int from = -1;
	char file[256] = "";
	while (fgets(line, sizeof line, p)) {
		char inc[256], path[600], why[96];
		size_t n = strlen(line);
		if (n > 1 && line[n - 2] == ':') { /* "folder/name.c:" */
			line[n - 2] = 0;
			snprintf(file, sizeof file, "%.200s", line);
			from = mod_id(file);
			files++;
			continue;
		}
		if (from < 0 || sscanf(line, "#include \"%255[^\"]\"", inc) != 1)
			continue;
		snprintf(path, sizeof path, "%s/%s", srcdir, inc);
		if (!strchr(inc, '/') || access(path, F_OK) != 0)
			continue; /* logengine.h, or not a file of src/ */
		snprintf(why, sizeof why, "src/%.40s includes %.40s", file, inc);
		add_edge(from, mod_id(inc), why);
	}
	pclose(p);
	return files;
}

/* The layers, bottom first, from srcdir/README.md: its numbered lines
 * that begin with a folder's name, slash included, in bold.  @return how
 * many. */
static int read_layers(const char *srcdir)
{
	char path[300], line[512], name[32];
	int n;
	snprintf(path, sizeof path, "%s/README.md", srcdir);
	FILE *f = fopen(path, "r");
	CHECK(f != NULL);
	nlayer = 0;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "%d. **%31[a-z]/**", &n, name) == 2) {
			CHECK(nlayer < MAX_LAYER);
			snprintf(layer[nlayer++], sizeof layer[0], "%s", name);
		}
	fclose(f);
	return nlayer;
}

/* A module's layer: its folder's place in the README (-1: not listed). */
static int rank(int m)
{
	size_t len = strcspn(mod[m], "/");
	for (int i = 0; i < nlayer; i++)
		if (strlen(layer[i]) == len && !strncmp(layer[i], mod[m], len))
			return i;
	return -1;
}

/* Print every arrow from a folder to one above it (or to or from a folder
 * the README does not list).  @return how many. */
static int upward(void)
{
	int bad = 0;
	for (int a = 0; a < nmod; a++)
		for (int b = 0; b < nmod; b++) {
			if (!edge[a][b] || (rank(a) >= rank(b) && rank(b) >= 0))
				continue;
			fprintf(stderr, "  upward: %s (%s above %.*s)\n",
			        why_edge[a][b], mod[b], (int)strcspn(mod[a], "/"),
			        mod[a]);
			bad++;
		}
	return bad;
}

static int state[MAX_MOD], path[MAX_MOD], npath, cstart;

/* Depth first; on a back edge, the circle is path[from..] plus v. */
static int find_circle(int v, int n, char *out, size_t cap)
{
	state[v] = 1;
	path[npath++] = v;
	for (int w = 0; w < n; w++) {
		if (!edge[v][w])
			continue;
		if (state[w] == 1) {
			size_t k = 0;
			int i = 0;
			while (path[i] != w)
				i++;
			cstart = i;
			for (; i < npath; i++)
				k += (size_t)snprintf(out + k, cap - k, "%s -> ",
				                      mod[path[i]]);
			snprintf(out + k, cap - k, "%s", mod[w]);
			return 1;
		}
		if (state[w] == 0 && find_circle(w, n, out, cap))
			return 1;
	}
	npath--;
	state[v] = 2;
	return 0;
}

static int circle(int n, char *out, size_t cap)
{
	memset(state, 0, sizeof state);
	npath = 0;
	for (int v = 0; v < n; v++)
		if (state[v] == 0 && find_circle(v, n, out, cap))
			return 1;
	return 0;
}

/* Print each arrow of a circle with its reason. */
static void explain_circle(void)
{
	for (int i = cstart; i < npath; i++) {
		int a = path[i], b = path[i + 1 < npath ? i + 1 : cstart];
		if (edge[a][b])
			fprintf(stderr, "    %s\n", why_edge[a][b]);
	}
}

static void reset(void)
{
	memset(edge, 0, sizeof edge);
	nmod = nsym = 0;
}

static void write_file(const char *dir, const char *name, const char *text)
{
	char p[512];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	CHECK_EQ(t_spit(p, text, strlen(text)), 0);
}

TEST(the_circle_finder_finds_a_planted_circle)
{
	char why[1024];
	reset();
	nmod = 3;
	strcpy(mod[0], "x/a");
	strcpy(mod[1], "x/b");
	strcpy(mod[2], "x/c");
	edge[0][1] = edge[1][2] = 1;
	CHECK(!circle(3, why, sizeof why));
	edge[2][0] = 1;
	CHECK(circle(3, why, sizeof why));
	CHECK_STR_EQ(why, "x/a -> x/b -> x/c -> x/a");
}

/* A tree of two layers where the lower one's file includes the upper
 * one's header, and the upper one's file includes it back: the include
 * graph has the circle and the layer check names the upward include. */
TEST(the_layer_check_finds_a_planted_upward_include)
{
	char dir[256], sub[300], why[1024];
	t_tmpdir(dir);
	snprintf(sub, sizeof sub, "%s/low", dir);
	CHECK_EQ(mkdir(sub, 0755), 0);
	snprintf(sub, sizeof sub, "%s/high", dir);
	CHECK_EQ(mkdir(sub, 0755), 0);
	write_file(dir, "README.md", "# layers\n\n1. **low/**: below.\n"
	                             "2. **high/**: above.\n");
	write_file(dir, "low/a.c", "#include \"low/a.h\"\n");
	write_file(dir, "low/a.h", "#include <stdint.h>\n");
	write_file(dir, "high/b.h", "#include \"low/a.h\"\n");
	reset();
	CHECK_EQ(read_layers(dir), 2);
	CHECK_EQ(read_includes(dir), 3);
	CHECK_EQ(upward(), 0);
	CHECK(!circle(nmod, why, sizeof why));
	write_file(dir, "low/a.c", "#include \"low/a.h\"\n#include \"high/b.h\"\n");
	reset();
	read_includes(dir);
	CHECK_EQ(upward(), 1);
	CHECK_STR_EQ(why_edge[mod_id("low/a")][mod_id("high/b")],
	             "src/low/a.c includes high/b.h");
	CHECK(circle(nmod, why, sizeof why));
	t_rmrf(dir);
}

/* Both graphs of the real library: objects from $BUILD/obj/lib, sources
 * from src/. */
static void read_library(void)
{
	char objdir[256];
	const char *b = getenv("BUILD");
	snprintf(objdir, sizeof objdir, "%s/obj/lib", b ? b : "build");
	reset();
	read_nm(objdir, 0);
	int objs = nmod;
	read_nm(objdir, 1);
	int files = read_includes("src");
	fprintf(stderr, "  (%d objects, %d library symbols, %d source files)\n",
	        objs, nsym, files);
	CHECK(objs >= 10 && nsym >= 50 && files >= 50); /* they were found */
}

TEST(no_file_of_the_library_calls_or_includes_back_into_one_that_uses_it)
{
	char why[2048];
	int n = 0;
	read_library();
	/* Each circle found is printed and broken at its closing arrow, so
	 * that the next search finds another: all of them are named. */
	while (n < 50 && circle(nmod, why, sizeof why)) {
		fprintf(stderr, "  circle: %s\n", why);
		explain_circle();
		edge[path[npath - 1]][path[cstart]] = 0;
		n++;
	}
	CHECK_EQ(n, 0);
}

/* Every folder of src/ is a layer of src/README.md, and no file includes
 * or calls into a folder above its own. */
TEST(no_folder_includes_or_calls_a_folder_above_it)
{
	read_library();
	CHECK(read_layers("src") >= 5);
	DIR *d = opendir("src");
	CHECK(d != NULL);
	struct dirent *de;
	int unlisted = 0;
	while ((de = readdir(d))) {
		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		int found = 0;
		for (int i = 0; i < nlayer; i++)
			found |= !strcmp(layer[i], de->d_name);
		if (!found) {
			fprintf(stderr, "  src/%s/ is not a layer of src/README.md\n",
			        de->d_name);
			unlisted++;
		}
	}
	closedir(d);
	CHECK_EQ(unlisted, 0);
	CHECK_EQ(upward(), 0);
}

/* The CLI's commands use the public API only, so that what they do any
 * program can do, with no exception: forward and collect are transport
 * glue over the public spool and collector (le_spool_*, le_collector_*). */
TEST(cli_commands_use_only_the_public_api)
{
	char cmd[512], line[512];
	const char *b = getenv("BUILD");
	int objs = 0, bad = 0;
	snprintf(cmd, sizeof cmd, "nm -A -u %s/obj/tools/*.o 2>/dev/null",
	         b ? b : "build");
	FILE *p = popen(cmd, "r");
	CHECK(p != NULL);
	char last[512] = "";
	while (fgets(line, sizeof line, p)) {
		char *colon = strchr(line, ':');
		if (!colon)
			continue;
		*colon = 0;
		if (strcmp(line, last)) {
			objs++;
			snprintf(last, sizeof last, "%s", line);
		}
		const char *base = strrchr(line, '/');
		base = base ? base + 1 : line;
		if (strstr(colon + 1, " le__")) {
			fprintf(stderr, "  %s uses %s", base, colon + 1);
			bad++;
		}
	}
	pclose(p);
	CHECK(objs >= 5);
	CHECK_EQ(bad, 0);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	RUN(the_circle_finder_finds_a_planted_circle);
	RUN(the_layer_check_finds_a_planted_upward_include);
	RUN(no_file_of_the_library_calls_or_includes_back_into_one_that_uses_it);
	RUN(no_folder_includes_or_calls_a_folder_above_it);
	RUN(cli_commands_use_only_the_public_api);
	return t_done();
}
