/*
 * test_minlevel.c -- LE_MIN_LEVEL, defined before the header as a user
 * does, removes the lower level macros at compile time: their arguments
 * are never evaluated and nothing is logged, whatever the thresholds say
 * at run time; the levels at and above it work as always.
 */
#define LE_MIN_LEVEL LE_WARN
#include "harness.h"

#include "logengine.h"
#include "logtest.h"

static int evaluated;
static int bump(void)
{
	return ++evaluated;
}

TEST(calls_below_le_min_level_compile_to_nothing)
{
	char dir[256];
	le_config c;
	le_config_init(&c);
	c.dir = t_tmpdir(dir);
	c.durability = LE_SYNC_NONE;
	c.levels = "trace"; /* the run-time threshold lets everything by */
	unsetenv("LOGENGINE_LEVEL");
	le_engine *e;
	CHECK_RC(le_open(&e, &c));
	le_logger *lg = le_logger_get(e, "x");
	le_trace(e, "%d", bump());
	le_debug(lg, "%d", bump());
	le_info(e, "%d", bump());
	le_info_kv(lg, LE_FIELDS(LE_I64("n", bump())), "%d", bump());
	CHECK_EQ(evaluated, 0);
	le_warn(e, "%d", bump());
	le_error_kv(lg, LE_FIELDS(LE_I64("n", bump())), "m");
	le_fatal(e, "%d", bump());
	CHECK_EQ(evaluated, 3);
	CHECK_RC(le_close(e));
	CHECK_EQ(count_records(dir), 3);
	t_rmrf(dir);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	RUN(calls_below_le_min_level_compile_to_nothing);
	return t_done();
}
