/*
 * test_layers.c -- the library's files call down, never back up: no file
 * of src/ calls a function of a file that (directly or not) calls it.  A
 * circle would mean two files that can only be understood, and changed,
 * together.  Read from the objects' symbol tables (nm): an edge A -> B for
 * every symbol A uses and B defines.  The test first proves it finds a
 * circle in a graph that has one.
 */
#include "harness.h"

#define MAX_OBJ 64
#define MAX_SYM 4096

static char obj[MAX_OBJ][512];
static int nobj;
static struct {
	char name[256];
	int def;
} sym[MAX_SYM];
static int nsym;
static unsigned char edge[MAX_OBJ][MAX_OBJ];

static int obj_id(const char *path)
{
	const char *b = strrchr(path, '/');
	b = b ? b + 1 : path;
	for (int i = 0; i < nobj; i++)
		if (!strcmp(obj[i], b))
			return i;
	CHECK(nobj < MAX_OBJ);
	snprintf(obj[nobj], sizeof obj[nobj], "%s", b);
	return nobj++;
}

/* "path:addr T name" or "path:         U name" lines of nm -A. */
static void read_nm(const char *objdir, int undefined)
{
	char cmd[512], line[512];
	snprintf(cmd, sizeof cmd, "nm -A %s %s/*/*.o 2>/dev/null", undefined ? "-u" : "--defined-only",
	         objdir);
	FILE *p = popen(cmd, "r");
	CHECK(p != NULL);
	while (fgets(line, sizeof line, p)) {
		char *colon = strchr(line, ':');
		if (!colon)
			continue;
		*colon = 0;
		char type[8], name[256];
		if (undefined ? sscanf(colon + 1, " %7s %255s", type, name) != 2
		              : sscanf(colon + 1, "%*s %7s %255s", type, name) != 2)
			continue;
		int o = obj_id(line);
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
			if (!strcmp(sym[i].name, name) && sym[i].def != o)
				edge[o][sym[i].def] = 1;
	}
	pclose(p);
}

static int state[MAX_OBJ], path[MAX_OBJ], npath;

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
			for (; i < npath; i++)
				k += (size_t)snprintf(out + k, cap - k, "%s -> ",
				                      obj[path[i]]);
			snprintf(out + k, cap - k, "%s", obj[w]);
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

TEST(the_circle_finder_finds_a_planted_circle)
{
	char why[1024];
	memset(edge, 0, sizeof edge);
	nobj = 3;
	strcpy(obj[0], "a.o");
	strcpy(obj[1], "b.o");
	strcpy(obj[2], "c.o");
	edge[0][1] = edge[1][2] = 1;
	CHECK(!circle(3, why, sizeof why));
	edge[2][0] = 1;
	CHECK(circle(3, why, sizeof why));
	CHECK_STR_EQ(why, "a.o -> b.o -> c.o -> a.o");
}

TEST(no_file_of_the_library_calls_back_into_one_that_calls_it)
{
	char objdir[256], why[2048];
	const char *b = getenv("BUILD");
	snprintf(objdir, sizeof objdir, "%s/obj/lib", b ? b : "build");
	memset(edge, 0, sizeof edge);
	nobj = nsym = 0;
	read_nm(objdir, 0);
	read_nm(objdir, 1);
	fprintf(stderr, "  (%d objects, %d library symbols)\n", nobj, nsym);
	CHECK(nobj >= 10 && nsym >= 50); /* the objects were found */
	if (circle(nobj, why, sizeof why))
		fprintf(stderr, "  circle: %s\n", why);
	CHECK(!circle(nobj, why, sizeof why));
}

/* The CLI's commands use the public API only, so that what they do any
 * program can do; the collector's side of the spool (collect,
 * ship_common) is the exception, by name. */
TEST(cli_commands_use_only_the_public_api)
{
	static const char *const allowed[] = {"collect.o", "ship_common.o"};
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
		int ok = 0;
		for (size_t k = 0; k < sizeof allowed / sizeof *allowed; k++)
			ok |= !strcmp(base, allowed[k]);
		if (!ok && strstr(colon + 1, " le__")) {
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
	RUN(no_file_of_the_library_calls_back_into_one_that_calls_it);
	RUN(cli_commands_use_only_the_public_api);
	return t_done();
}
