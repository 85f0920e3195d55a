/*
 * test_fuzz_smoke.c -- a short run of every libFuzzer target (tests/fuzz/)
 * as part of `make check`: each decoder fuzzer starts from its checked-in
 * seed corpus (valid inputs, the classic damage, and the known traps of
 * recovery) and runs a few thousand mutations with a fixed seed, so the
 * run is the same every time for the same sources.  Longer runs are
 * `make fuzz-long`.
 *
 * The fuzzers need clang and its libFuzzer runtime (scripts/deps.sh fuzz,
 * which make check runs as root, as CI does); without them each test is
 * skipped, saying so.  Run from the top of the tree (make check does); the
 * binaries go to $BUILD/fuzz/.
 */
#include "harness.h"

#define SEED_DIR "tests/fuzz/corpus"

static const char *build_dir(void)
{
	const char *b = getenv("BUILD");
	if (b && strlen(b) > 200) {
		fprintf(stderr, "  BUILD=%s: path too long\n", b);
		_exit(1);
	}
	return b && *b ? b : "build";
}

/* Run cmd through the shell with make's own variables removed: a make
 * started from inside `make check` must not try to join its jobserver. */
static int sh(const char *cmd)
{
	unsetenv("MAKEFLAGS");
	unsetenv("MFLAGS");
	unsetenv("MAKELEVEL");
	int st = system(cmd);
	if (st == -1 || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

static int have_clang(void)
{
	return t_which("clang") != NULL;
}

/* Build all fuzz targets (make fuzz-build); output to $BUILD/fuzz/build.log */
TEST(fuzzers_build_with_clang)
{
	char cmd[1024];

	CHECK(access(SEED_DIR, R_OK) == 0); /* run from the top of the tree */
	t_need("fuzz");
	CHECK(have_clang());
	/* A cold clang build of the library and six targets with ASan,
	 * UBSan and coverage: minutes, not the harness's two, on a busy
	 * 2-core machine.  A hang still ends. */
	alarm(900);
	/* In parallel: a clang build of the library with ASan, UBSan and
	 * coverage is most of this binary's time. */
	snprintf(cmd, sizeof cmd, "mkdir -p '%s/fuzz' && make -s "
	         "-j\"$(nproc 2>/dev/null || echo 2)\" BUILD='%s' fuzz-build "
	         ">'%s/fuzz/build.log' 2>&1", build_dir(), build_dir(),
	         build_dir());
	int rc = sh(cmd);
	if (rc != 0) {
		snprintf(cmd, sizeof cmd, "tail -n 30 '%s/fuzz/build.log' >&2",
		         build_dir());
		sh(cmd);
	}
	CHECK_EQ(rc, 0);
}

/*
 * Run one fuzzer: its seeds, a fresh scratch corpus (so that what earlier
 * long runs found does not make this one slower or different), `runs`
 * mutations with seed 1, at most 20 s.  A crash, leak, sanitizer report
 * or broken invariant makes libFuzzer exit non-zero and leaves the input
 * in $BUILD/fuzz/crash/.  The log's last lines are shown on failure.
 */
static void run_fuzzer(const char *target, int runs, int max_len)
{
	char bin[256], cmd[4096], work[256], log[256];
	const char *b = build_dir();

	snprintf(bin, sizeof bin, "%s/fuzz/fuzz_%s", b, target);
	t_need("fuzz");
	if (access(bin, X_OK) != 0) {
		fprintf(stderr, "  %s: not built (fuzzers_build_with_clang "
		        "failed?)\n", bin);
		CHECK(access(bin, X_OK) == 0);
	}
	snprintf(work, sizeof work, "%s/fuzz/smoke-%s", b, target);
	snprintf(log, sizeof log, "%s/fuzz/smoke-%s.log", b, target);
	snprintf(cmd, sizeof cmd,
	         "rm -rf '%s' && mkdir -p '%s' '%s/fuzz/crash' && "
	         /* fuzz_segment writes files on every run: RAM if we can */
	         "{ [ -d /dev/shm ] && [ -w /dev/shm ] && "
	         "export TMPDIR=/dev/shm; true; } && "
	         "'%s' -seed=1 -runs=%d -max_total_time=20 -max_len=%d "
	         "-print_final_stats=1 -artifact_prefix='%s/fuzz/crash/%s-' "
	         "'%s' '" SEED_DIR "/%s' >'%s' 2>&1",
	         work, work, b, bin, runs, max_len, b, target, work, target,
	         log);
	int rc = sh(cmd);
	snprintf(cmd, sizeof cmd, "grep -h -E '^stat::number_of_executed_units"
	         "|^Done' '%s' | sed 's/^/  /'", log);
	sh(cmd);
	if (rc != 0) {
		snprintf(cmd, sizeof cmd, "grep -v '^    #' '%s' | tail -n 25 "
		         ">&2", log);
		sh(cmd);
	}
	CHECK_EQ(rc, 0);
}

TEST(fuzz_frame_runs_clean)
{
	run_fuzzer("frame", 30000, 4096);
}

TEST(fuzz_checkpoint_runs_clean)
{
	run_fuzzer("checkpoint", 30000, 1200);
}

TEST(fuzz_segment_runs_clean)
{
	run_fuzzer("segment", 5000, 8192);
}

TEST(fuzz_recover_runs_clean)
{
	run_fuzzer("recover", 1500, 8192);
}

TEST(fuzz_fmt_runs_clean)
{
	run_fuzzer("fmt", 30000, 1024);
}

TEST(fuzz_queue_runs_clean)
{
	run_fuzzer("queue", 400, 8261);
}

TEST(fuzz_defer_runs_clean)
{
	run_fuzzer("defer", 30000, 2048);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	RUN(fuzzers_build_with_clang);
	RUN(fuzz_frame_runs_clean);
	RUN(fuzz_checkpoint_runs_clean);
	RUN(fuzz_segment_runs_clean);
	RUN(fuzz_recover_runs_clean);
	RUN(fuzz_fmt_runs_clean);
	RUN(fuzz_queue_runs_clean);
	RUN(fuzz_defer_runs_clean);
	return t_done();
}
