/*
 * test_bench.c -- the benchmark suite's smoke test: the driver ($LE_BENCH,
 * else $BUILD/bench) run as `make bench` runs it, but for a few thousand
 * records, once.  Checks what would make its numbers meaningless: a
 * competitor whose files lack records, a lossy run not called invalid,
 * JSON that does not parse or lacks a figure, a soak without intervals.
 * No number is asserted: these machines are too noisy for that.
 */
#include "harness.h"

#include <ctype.h>

/* ---- a small JSON reader: parse into a tree, look values up by path ---- */

enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

typedef struct jv {
	int type;
	double num;      /* J_NUM, J_BOOL */
	char *str;       /* J_STR; the key, for members of an object */
	char *key;
	struct jv *kids; /* J_ARR, J_OBJ: nkids children */
	int nkids;
} jv;

static const char *jp;

static void jws(void)
{
	while (isspace((unsigned char)*jp))
		jp++;
}

static int jparse(jv *v);

static char *jstring(void)
{
	if (*jp != '"')
		return NULL;
	const char *s = ++jp;
	while (*jp && *jp != '"')
		jp += *jp == '\\' && jp[1] ? 2 : 1;
	if (*jp != '"')
		return NULL;
	char *out = strndup(s, (size_t)(jp - s));
	jp++;
	return out;
}

static int jlist(jv *v, char close, int keyed)
{
	jp++;
	jws();
	if (*jp == close) {
		jp++;
		return 0;
	}
	for (;;) {
		v->kids = realloc(v->kids,
		                  (size_t)(v->nkids + 1) * sizeof *v->kids);
		jv *k = &v->kids[v->nkids++];
		memset(k, 0, sizeof *k);
		jws();
		if (keyed) {
			if (!(k->key = jstring()))
				return -1;
			jws();
			if (*jp++ != ':')
				return -1;
		}
		if (jparse(k) < 0)
			return -1;
		jws();
		if (*jp == ',') {
			jp++;
			continue;
		}
		if (*jp++ != close)
			return -1;
		return 0;
	}
}

static int jparse(jv *v)
{
	char *end;

	jws();
	if (*jp == '{')
		return v->type = J_OBJ, jlist(v, '}', 1);
	if (*jp == '[')
		return v->type = J_ARR, jlist(v, ']', 0);
	if (*jp == '"')
		return v->type = J_STR, (v->str = jstring()) ? 0 : -1;
	if (!strncmp(jp, "true", 4) || !strncmp(jp, "null", 4)) {
		v->type = *jp == 't' ? J_BOOL : J_NULL;
		v->num = *jp == 't';
		jp += 4;
		return 0;
	}
	if (!strncmp(jp, "false", 5)) {
		v->type = J_BOOL;
		jp += 5;
		return 0;
	}
	v->type = J_NUM;
	v->num = strtod(jp, &end);
	if (end == jp)
		return -1;
	jp = end;
	return 0;
}

/* Parse a whole file; fails the test if it is not one JSON value. */
static jv *jload(const char *path)
{
	size_t len;
	char *text = (char *)t_slurp(path, &len);
	jv *v = calloc(1, sizeof *v);

	if (!text) {
		fprintf(stderr, "  %s: cannot read\n", path);
		_exit(1);
	}
	text[len] = '\0';
	jp = text;
	if (jparse(v) < 0 || (jws(), *jp)) {
		fprintf(stderr, "  %s: not JSON near byte %ld\n", path,
		        (long)(jp - text));
		_exit(1);
	}
	return v;
}

static jv *jget(jv *v, const char *key)
{
	for (int i = 0; v && v->type == J_OBJ && i < v->nkids; i++)
		if (!strcmp(v->kids[i].key, key))
			return &v->kids[i];
	return NULL;
}

/* A number that must be there. */
static double jnum(jv *v, const char *key)
{
	jv *k = jget(v, key);
	if (!k || (k->type != J_NUM && k->type != J_BOOL)) {
		fprintf(stderr, "  missing number \"%s\"\n", key);
		_exit(1);
	}
	return k->num;
}

/* ---- running the driver ---- */

static const char *driver(void)
{
	return t_build_tool("LE_BENCH", "bench");
}

static char out_dir[256], work_dir[256], log_path[300];

/* Run the driver with args; output in log_path.  @return exit status. */
static int bench(const char *args)
{
	char cmd[2048];

	if (access(driver(), X_OK) != 0) {
		t_need("bench"); /* spdlog and glog: make check builds it then */
		fprintf(stderr, "  %s: not built (make %s)\n", driver(),
		        driver());
		_exit(1);
	}
	t_tmpdir(out_dir);
	t_tmpdir(work_dir);
	snprintf(log_path, sizeof log_path, "%s/log", work_dir);
	snprintf(cmd, sizeof cmd,
	         "'%s' --out '%s' --work '%s/w' --quiet %s >'%s' 2>&1",
	         driver(), out_dir, work_dir, args, log_path);
	int st = system(cmd);
	CHECK(st != -1 && WIFEXITED(st));
	return WEXITSTATUS(st);
}

static void show_log(void)
{
	size_t len;
	char *t = (char *)t_slurp(log_path, &len);
	if (t) {
		fwrite(t, 1, len, stderr);
		free(t);
	}
}

static jv *result_file(const char *name)
{
	char path[600];
	snprintf(path, sizeof path, "%s/latest/%s", out_dir, name);
	return jload(path);
}

static void cleanup(void)
{
	t_rmrf(out_dir);
	t_rmrf(work_dir);
}

static const char *const targets[] = {"logengine", "spdlog", "glog", "raw"};

/* A figure that is a number, or null where the run did not time calls. */
static int jfigure(jv *v, const char *key)
{
	jv *k = jget(v, key);
	CHECK(k && (k->type == J_NUM || k->type == J_NULL));
	return k->type == J_NUM;
}

/* One competitor's results at one point: the figures are there, and valid
 * says whether each run found all its records. */
static void check_result(jv *r, const char *target, long records,
                         int timed, int want_valid, int drops)
{
	static const char *const figures[] = {
		"msgs_per_s", "mb_per_s", "cpu_s", "rss_mb", "dropped",
		"bytes", "records_found", "page_faults"};
	static const char *const latencies[] = {
		"p50_ns", "p99_ns", "p999_ns", "max_ns"};
	jv *name = jget(r, "target");

	CHECK(name && !strcmp(name->str, target));
	CHECK_EQ(jnum(r, "valid"), want_valid);
	jv *runs = jget(r, "runs");
	CHECK(runs && runs->type == J_ARR && runs->nkids == 1);
	jv *run = &runs->kids[0];
	for (size_t f = 0; f < 8; f++)
		jnum(run, figures[f]);
	for (size_t f = 0; f < 4; f++)
		CHECK_EQ(jfigure(run, latencies[f]), timed);
	CHECK(jget(r, "median") && jget(r, "min") && jget(r, "max"));
	if (!want_valid) {
		CHECK(jnum(run, "records_found") < records);
		CHECK(jget(run, "why"));
		return;
	}
	/* overflow drop (the burst point): what was not dropped is found */
	CHECK_EQ(jnum(run, "records_found") + (drops ? jnum(run, "dropped") : 0),
	         records);
	if (!drops)
		CHECK_EQ(jnum(run, "dropped"), 0);
	CHECK(jnum(run, "msgs_per_s") > 0);
	CHECK(jnum(run, "bytes") > 0);
	if (timed) {
		CHECK(jnum(run, "p50_ns") <= jnum(run, "p999_ns"));
		CHECK(jnum(run, "p999_ns") <= jnum(run, "max_ns"));
	}
}

/* Every point of a preset's file; the first has all four competitors
 * (others may be logengine's or the raw baseline's alone). */
static void check_points(jv *doc, long records, int want_valid)
{
	jv *pts = jget(doc, "points");
	CHECK(pts && pts->type == J_ARR && pts->nkids >= 1);
	CHECK(jget(doc, "machine") && jget(jget(doc, "machine"), "cpus"));
	for (int i = 0; i < pts->nkids; i++) {
		jv *pt = &pts->kids[i];
		jv *res = jget(pt, "results");
		int timed = !jnum(pt, "untimed");
		jv *ov = jget(jget(pt, "logengine"), "overflow");
		int drops = ov && ov->type == J_STR && !strcmp(ov->str, "drop");
		long want = drops ? (long)jnum(pt, "records") : records;
		CHECK(res && res->type == J_ARR && res->nkids >= 1);
		if (!drops) /* the burst point has more records */
			CHECK_EQ(jnum(pt, "records"), records);
		if (i == 0)
			CHECK_EQ(res->nkids, 4);
		for (int r = 0; r < res->nkids; r++) {
			jv *name = jget(&res->kids[r], "target");
			int t = 0;
			CHECK(name && name->type == J_STR);
			while (t < 4 && strcmp(name->str, targets[t]))
				t++;
			CHECK(t < 4);
			check_result(&res->kids[r], targets[t], want,
			             timed, want_valid, drops);
		}
	}
}

TEST(every_competitor_writes_and_counts_all_its_records)
{
	int rc = bench("--only compare,formatted -n 3000 -r 1");
	if (rc != 0)
		show_log();
	CHECK_EQ(rc, 0);
	check_points(result_file("compare.json"), 3000, 1);
	check_points(result_file("formatted.json"), 3000, 1);
	cleanup();
}

/* The three-field preset runs the two competitors that have a structured
 * call, and each keeps every record. */
TEST(kv_preset_counts_every_record_of_logengine_and_spdlog)
{
	int rc = bench("--only kv -n 3000 -r 1");
	if (rc != 0)
		show_log();
	CHECK_EQ(rc, 0);
	jv *doc = result_file("kv.json");
	jv *pts = jget(doc, "points");
	CHECK(pts && pts->type == J_ARR && pts->nkids == 2);
	for (int i = 0; i < pts->nkids; i++) {
		jv *pt = &pts->kids[i];
		jv *res = jget(pt, "results");
		jv *w = jget(pt, "workload");
		CHECK(w && w->type == J_STR && !strcmp(w->str, "kv"));
		CHECK(res && res->type == J_ARR && res->nkids == 2);
		for (int r = 0; r < 2; r++)
			check_result(&res->kids[r], targets[r], 3000,
			             !jnum(pt, "untimed"), 1, 0);
	}
	cleanup();
}

TEST(run_whose_files_lack_records_is_invalid)
{
	int rc = bench("--only compare -n 3000 -r 1 --damage");
	CHECK_EQ(rc, 1);
	check_points(result_file("compare.json"), 3000, 0);
	size_t len;
	char *log = (char *)t_slurp(log_path, &len);
	CHECK(log);
	log[len] = '\0';
	CHECK(strstr(log, "INVALID RUN"));
	cleanup();
}

/* Run the suite with args; its BENCH.md, NUL-terminated. */
static char *bench_md(const char *args)
{
	char path[600];
	size_t len;

	CHECK_EQ(bench(args), 0);
	snprintf(path, sizeof path, "%s/latest/BENCH.md", out_dir);
	char *md = (char *)t_slurp(path, &len);
	CHECK(md);
	md[len] = '\0';
	return md;
}

TEST(markdown_table_names_every_competitor_and_target)
{
	char *md = bench_md("--only compare,formatted -n 2000 -r 1");
	for (int t = 0; t < 4; t++) {
		char row[40];
		snprintf(row, sizeof row, "| %s |", targets[t]);
		CHECK(strstr(md, row));
	}
	CHECK(strstr(md, "## compare"));
	CHECK(strstr(md, "## formatted"));
	CHECK(strstr(md, "at least 10x spdlog"));
	CHECK(strstr(md, "le_logf throughput at least 3x"));
	cleanup();
}

/* With repeats, each judged target of compare also counts the paired
 * repeats (logengine's repeat r against the peer's repeat r) that met it:
 * three lines, each "(k of 2 paired repeats)" with k <= 2. */
TEST(judged_targets_count_the_paired_repeats_that_met_them)
{
	char *md = bench_md("--only compare -n 2000 -r 2");
	int lines = 0;
	for (char *p = md; (p = strstr(p, " paired repeats)")); p++) {
		char *open = p;
		while (open > md && *open != '(')
			open--;
		int k = -1, n = -1;
		CHECK(sscanf(open, "(%d of %d", &k, &n) == 2);
		CHECK_EQ(n, 2);
		CHECK(k >= 0 && k <= 2);
		lines++;
	}
	CHECK_EQ(lines, 3); /* 10x spdlog, 2x raw, p99.9 under spdlog's p50 */
	cleanup();
}

/* The producers preset: 1/2/4/8 producers on 1 and 2 shards, untimed
 * and timed (16 rows), judged against the single producer on one shard
 * with its paired repeats counted. */
TEST(producers_preset_runs_every_point_and_judges_the_lowest)
{
	char *md = bench_md("--only producers -n 4000 -r 2");
	for (int t = 1; t <= 8; t *= 2)
		for (int sh = 1; sh <= 2; sh++) {
			char row[64];
			snprintf(row, sizeof row, "| producers=%d shards=%d, not "
			         "timed |", t, sh);
			CHECK(strstr(md, row));
			snprintf(row, sizeof row, "| producers=%d shards=%d |",
			         t, sh);
			CHECK(strstr(md, row));
		}
	const char *judged = strstr(md, "no configuration below the single "
	                                "producer's rate");
	CHECK(judged);
	CHECK(strstr(judged, " paired repeats)"));
	CHECK(strstr(md, "highest p99.9 of the timed points"));
	cleanup();
}

TEST(soak_reports_every_interval_and_accounts_for_every_record)
{
	int rc = bench("--only soak --soak 1 --soak-interval 0.25 "
	               "--soak-rate 20000");
	if (rc != 0)
		show_log();
	CHECK_EQ(rc, 0);
	jv *doc = result_file("soak-logengine.json");
	CHECK_EQ(jnum(doc, "valid"), 1);
	jv *iv = jget(doc, "intervals");
	CHECK(iv && iv->type == J_ARR);
	CHECK_EQ(iv->nkids, 4);
	for (int i = 0; i < iv->nkids; i++) {
		CHECK(jnum(&iv->kids[i], "records") > 0);
		CHECK(jnum(&iv->kids[i], "rss_mb") > 0);
		jnum(&iv->kids[i], "msgs_per_s");
		jnum(&iv->kids[i], "p99_ns");
		jnum(&iv->kids[i], "p999_ns");
	}
	jv *tot = jget(doc, "total");
	CHECK(jnum(tot, "records") > 0);
	CHECK_EQ(jnum(tot, "written") + jnum(tot, "dropped"),
	         jnum(tot, "records"));
	cleanup();
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	RUN(every_competitor_writes_and_counts_all_its_records);
	RUN(kv_preset_counts_every_record_of_logengine_and_spdlog);
	RUN(run_whose_files_lack_records_is_invalid);
	RUN(markdown_table_names_every_competitor_and_target);
	RUN(judged_targets_count_the_paired_repeats_that_met_them);
	RUN(producers_preset_runs_every_point_and_judges_the_lowest);
	RUN(soak_reports_every_interval_and_accounts_for_every_record);
	return t_done();
}
