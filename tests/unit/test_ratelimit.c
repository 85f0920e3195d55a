/*
 * test_ratelimit.c -- the _every macros: at most `burst` records of a call
 * site per window, the rest counted into one "N similar records
 * suppressed" record, exactly; windows that open again; racing threads;
 * limits per logger from le_set_ratelimit and LOGENGINE_RATELIMIT, bad
 * values reported; NULL handles.
 */
#include "harness.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "logengine.h"
#include "logtest.h"

static char dir[256];

static le_engine *open_e(void)
{
	le_config c;

	le_config_init(&c);
	c.dir = t_tmpdir(dir);
	c.durability = LE_SYNC_NONE;
	c.flush_ms = 5; /* the writers move the window clock on this often */
	return t_open(&c);
}

/* What the log holds: records whose text starts with `prefix`, and the
 * summaries, with the sum of their "suppressed" fields. */
struct tally {
	const char *prefix;
	long records, summaries;
	uint64_t suppressed;
	char last_summary[256];
	char order[64]; /* 'r' record, 's' summary, first 63 */
	long run, most_run; /* records since the last summary; most of those */
};

static void tally_rec(const le_record *r, void *arg)
{
	struct tally *t = arg;
	size_t pos = 0, n = strlen(t->order);
	le_field f;
	uint64_t s = 0;
	int is_summary = 0;

	while (le_record_field(r, &pos, &f) == 1)
		if (f.key_len == 10 && !memcmp(f.key, "suppressed", 10)) {
			is_summary = 1;
			s = f.v.u64;
		}
	if (is_summary) {
		t->summaries++;
		t->suppressed += s;
		t->run = 0;
		snprintf(t->last_summary, sizeof t->last_summary, "%.*s",
		         (int)r->len, (const char *)r->payload);
	} else if (r->len >= strlen(t->prefix) &&
	           !memcmp(r->payload, t->prefix, strlen(t->prefix))) {
		t->records++;
		if (++t->run > t->most_run)
			t->most_run = t->run;
	} else {
		return;
	}
	if (n < sizeof t->order - 1)
		t->order[n] = is_summary ? 's' : 'r';
}

/* Close e, then tally its log into t, and into t2 too when not NULL. */
static void close_and_tally(le_engine *e, le_stats *st, struct tally *t,
                            struct tally *t2)
{
	CHECK_RC(le_close_stats(e, st));
	CHECK(read_all(dir, LE_RECOVER_ABSOLUTE, tally_rec, t) >= 0);
	if (t2)
		CHECK(read_all(dir, LE_RECOVER_ABSOLUTE, tally_rec, t2) >= 0);
}

static void warn_burst10(le_engine *e, int i)
{
	le_warn_every(e, 60000, 10, "tick %d", i);
}

/* `calls` calls of warn_burst10 on a new engine, closed and read. */
static struct tally burst10(int calls, le_stats *st)
{
	struct tally t = {.prefix = "tick"};
	le_engine *e = open_e();
	for (int i = 0; i < calls; i++)
		warn_burst10(e, i);
	close_and_tally(e, st, &t, NULL);
	t_rmrf(dir);
	return t;
}

/* The first 10 of 1,000 calls pass; the other 990 are one summary at
 * close, counted exactly, and le_stats says the same. */
TEST(burst_passes_then_the_rest_are_counted_in_one_summary)
{
	le_stats st;
	struct tally t = burst10(1000, &st);
	CHECK_EQ(t.records, 10);
	CHECK_EQ(t.summaries, 1);
	CHECK_EQ(t.suppressed, 990);
	CHECK(strstr(t.last_summary, "990 similar records suppressed at ") ==
	      t.last_summary);
	CHECK(strstr(t.last_summary, "test_ratelimit.c:") != NULL);
	CHECK_STR_EQ(t.order, "rrrrrrrrrrs");
	CHECK_EQ(st.suppressed, 990);
	CHECK_EQ(st.suppressed_summaries, 1);
}

/* Calls of the site in a 50 ms window until a record passes again: that
 * record follows a summary of every call suppressed before it. */
static void warn_burst2(le_engine *e)
{
	le_warn_every(e, 50, 2, "window");
}

TEST(the_window_opens_again_after_its_interval_with_the_summary_first)
{
	le_engine *e = open_e();
	le_stats st;
	uint64_t calls = 0;
	struct timespec ms = {0, 1000000};
	for (int i = 0; i < 5; i++, calls++)
		warn_burst2(e);
	/* poll until a third record is accepted (the summary makes 4) */
	for (int k = 0; k < 20000; k++, calls++) {
		CHECK_RC(le_stats_get(e, &st));
		if (st.accepted >= 4)
			break;
		warn_burst2(e);
		nanosleep(&ms, NULL);
	}
	struct tally t = {.prefix = "window"};
	close_and_tally(e, &st, &t, NULL);
	CHECK_STR_EQ(t.order, "rrsr");
	CHECK_EQ(t.suppressed, calls - 3);
	CHECK_EQ(st.suppressed, calls - 3);
	t_rmrf(dir);
}

static void site_a(le_engine *e)
{
	le_info_every(e, 60000, 3, "site a");
}

static void site_b(le_engine *e)
{
	le_info_every(e, 60000, 5, "site b");
}

TEST(two_call_sites_are_limited_apart)
{
	le_engine *e = open_e();
	for (int i = 0; i < 100; i++) {
		site_a(e);
		site_b(e);
	}
	struct tally a = {.prefix = "site a"}, b = {.prefix = "site b"};
	le_stats st;
	close_and_tally(e, &st, &a, &b);
	CHECK_EQ(a.records, 3);
	CHECK_EQ(b.records, 5);
	CHECK_EQ(a.summaries, 2); /* the tally counts both sites' summaries */
	CHECK_EQ(a.suppressed, 97 + 95);
	t_rmrf(dir);
}

#define RACERS 4
#define RACE_CALLS 200000

static le_engine *race_e;

static void *racer(void *arg)
{
	(void)arg;
	for (int i = 0; i < RACE_CALLS; i++)
		le_warn_every(race_e, 60000, 10, "race %d", i);
	return NULL;
}

/* Four threads on one site in one window: at most burst + 3 records
 * pass, and every other call is in the summary. */
TEST(racing_threads_let_through_at_most_burst_plus_threads_and_count_all)
{
	pthread_t th[RACERS];
	race_e = open_e();
	for (int i = 0; i < RACERS; i++)
		CHECK(pthread_create(&th[i], NULL, racer, NULL) == 0);
	for (int i = 0; i < RACERS; i++)
		pthread_join(th[i], NULL);
	struct tally t = {.prefix = "race"};
	le_stats st;
	close_and_tally(race_e, &st, &t, NULL);
	CHECK(t.records >= 10 && t.records <= 10 + RACERS - 1);
	CHECK_EQ(t.suppressed + (uint64_t)t.records,
	         (uint64_t)RACERS * RACE_CALLS);
	t_rmrf(dir);
}

static _Atomic uint64_t window_calls;
static uint64_t race_until;

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *window_racer(void *arg)
{
	uint64_t n = 0;
	(void)arg;
	while (mono_ns() < race_until)
		for (int i = 0; i < 1000; i++, n++)
			le_warn_every(race_e, 20, 5, "windows %d", i);
	atomic_fetch_add(&window_calls, n);
	return NULL;
}

/* RACERS threads of fn on a new engine (race_e) for 300 ms, adding
 * their calls to window_calls; then the log tallied into t. */
static void race(void *(*fn)(void *), struct tally *t, le_stats *st)
{
	pthread_t th[RACERS];
	atomic_store(&window_calls, 0);
	race_e = open_e();
	race_until = mono_ns() + 300 * 1000000ull;
	for (int i = 0; i < RACERS; i++)
		CHECK(pthread_create(&th[i], NULL, fn, NULL) == 0);
	for (int i = 0; i < RACERS; i++)
		pthread_join(th[i], NULL);
	close_and_tally(race_e, st, t, NULL);
}

/* Four threads through many 20-ms windows of 5: the records between two
 * summaries (one window's, and the racers' of the window before) are at
 * most 5 + 3, and every call is a record or counted. */
TEST(racing_threads_keep_the_bound_in_every_window)
{
	struct tally t = {.prefix = "windows"};
	le_stats st;
	race(window_racer, &t, &st);
	CHECK(t.summaries >= 3); /* windows opened again under the load */
	CHECK(t.most_run <= 5 + RACERS - 1);
	CHECK_EQ(t.suppressed + (uint64_t)t.records,
	         (uint64_t)atomic_load(&window_calls));
	t_rmrf(dir);
}

/* A tally of what the log holds now, read while e still writes to it
 * (a batch half written is a torn tail for now). */
static struct tally tally_now(const char *prefix)
{
	struct tally t = {.prefix = prefix};
	CHECK(read_all(dir, LE_RECOVER_TOLERATE_TAIL, tally_rec, &t) >= 0);
	return t;
}

static void warn_flood(le_engine *e, int i)
{
	le_warn_every(e, 1500, 5, "flood %d", i);
}

/* A flood that stops within its window and no call of the site after
 * it: the summary is in the log soon after the window ends, from the
 * writer's sweep, not at le_close; and only once.  The window outlasts
 * the writer's wait before it sleeps long (about a second), so a sweep
 * that slept through the window's end would come seconds late. */
TEST(a_flood_that_stops_is_summarised_when_its_window_ends)
{
	le_engine *e = open_e();
	uint64_t t0 = mono_ns();
	for (int i = 0; i < 20000; i++)
		warn_flood(e, i);
	struct tally t;
	for (;;) {
		t = tally_now("flood");
		if (t.summaries)
			break;
		CHECK(mono_ns() - t0 < 5000 * 1000000ull);
		usleep(1000);
	}
	uint64_t ms = (mono_ns() - t0) / 1000000u;
	printf("  summary %llu ms after the flood's first call (window 1500)\n",
	       (unsigned long long)ms);
	CHECK(ms >= 1500); /* never before the window's end */
	CHECK_STR_EQ(t.order, "rrrrrs");
	CHECK_EQ(t.suppressed, 20000 - 5);
	le_stats st;
	struct tally after = {.prefix = "flood"};
	close_and_tally(e, &st, &after, NULL);
	CHECK_STR_EQ(after.order, "rrrrrs"); /* le_close had nothing more */
	CHECK_EQ(st.suppressed, 20000 - 5);
	CHECK_EQ(st.suppressed_summaries, 1);
	t_rmrf(dir);
}

static void *pausing_racer(void *arg)
{
	struct timespec pause = {0, 20 * 1000000};
	uint64_t n = 0;
	(void)arg;
	/* the pauses, longer than a window and its settling time, let the
	 * sweep tell windows while the other racers call */
	while (mono_ns() < race_until) {
		for (int i = 0; i < 500; i++, n++)
			le_warn_every(race_e, 5, 3, "pausing %d", i);
		nanosleep(&pause, NULL);
	}
	atomic_fetch_add(&window_calls, n);
	return NULL;
}

/* Racers that call and pause, through many 5-ms windows: windows are
 * told by the sweep and by calls, each call still a record or in
 * exactly one summary. */
TEST(racing_threads_and_the_sweep_count_every_call_once)
{
	struct tally t = {.prefix = "pausing"};
	le_stats st;
	race(pausing_racer, &t, &st);
	CHECK(t.summaries >= 3);
	CHECK_EQ(t.suppressed + (uint64_t)t.records,
	         (uint64_t)atomic_load(&window_calls));
	CHECK_EQ(st.suppressed, t.suppressed);
	CHECK_EQ(st.suppressed_summaries, (uint64_t)t.summaries);
	t_rmrf(dir);
}

static void net_site(le_logger *lg, int i)
{
	le_info_every(lg, 60000, 100, "net %d", i);
}

/* A logger's limit wins over the call's, for its children too; 0 lets
 * every record pass; -1 gives the call's back. */
TEST(a_loggers_limit_overrides_the_calls_and_is_inherited)
{
	le_engine *e = open_e();
	int ms = -5, burst = -5;
	CHECK_EQ(le_get_ratelimit(e, "net.http", &ms, &burst), 0);
	CHECK_RC(le_set_ratelimit(e, "net", 60000, 3));
	CHECK_EQ(le_get_ratelimit(e, "net.http", &ms, &burst), 1);
	CHECK(ms == 60000 && burst == 3);
	le_logger *lg = le_logger_get(e, "net.http");
	for (int i = 0; i < 50; i++)
		net_site(lg, i);
	CHECK_EQ(le_set_ratelimit(e, "net", -2, 3), LE_EINVAL);
	CHECK_EQ(le_set_ratelimit(e, "n et", 10, 3), LE_EINVAL);
	CHECK_RC(le_set_ratelimit(e, "net", 0, 0));
	CHECK_EQ(le_get_ratelimit(e, "net.http", &ms, &burst), 1);
	CHECK_EQ(ms, 0);
	for (int i = 0; i < 20; i++)
		le_info_every(lg, 60000, 1, "unlimited %d", i);
	CHECK_RC(le_set_ratelimit(e, "net", -1, 0));
	CHECK_EQ(le_get_ratelimit(e, "net.http", NULL, NULL), 0);
	struct tally t = {.prefix = "net"}, u = {.prefix = "unlimited"};
	le_stats st;
	close_and_tally(e, &st, &t, &u);
	CHECK_EQ(t.records, 3);
	CHECK_EQ(t.suppressed, 47);
	CHECK_EQ(u.records, 20);
	t_rmrf(dir);
}

static void root_site(le_engine *e, int i)
{
	le_error_every(e, 60000, 100, "root %d", i);
}

TEST(logengine_ratelimit_sets_limits_at_open)
{
	setenv("LOGENGINE_RATELIMIT", " 2/1m , db=off,net=4/250ms ", 1);
	le_engine *e = open_e();
	int ms, burst;
	CHECK_EQ(le_get_ratelimit(e, NULL, &ms, &burst), 1);
	CHECK(ms == 60000 && burst == 2);
	CHECK_EQ(le_get_ratelimit(e, "db.x", &ms, &burst), 1);
	CHECK_EQ(ms, 0);
	CHECK_EQ(le_get_ratelimit(e, "net", &ms, &burst), 1);
	CHECK(ms == 250 && burst == 4);
	for (int i = 0; i < 30; i++)
		root_site(e, i);
	struct tally t = {.prefix = "root"};
	le_stats st;
	close_and_tally(e, &st, &t, NULL);
	CHECK_EQ(t.records, 2);
	CHECK_EQ(t.suppressed, 28);
	CHECK_EQ(st.config_errors, 0);
	unsetenv("LOGENGINE_RATELIMIT");
	t_rmrf(dir);
}

/* Each bad item is left out, on a line of stderr and in le_errmsg, and
 * counted; the limits stay the calls' own. */
TEST(bad_logengine_ratelimit_is_reported_and_defaults_kept)
{
	static const char *const bad[] = {
		"lots", "5/0", "5/1h", "=5/1s", "n et=1/1s", "-1/1s",
		"5/99999999999", "5/", "/1s",
	};
	char err[1024];
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		int saved;
		le_stats st;
		setenv("LOGENGINE_RATELIMIT", bad[i], 1);
		FILE *f = t_stderr_catch(&saved);
		le_engine *e = open_e();
		t_stderr_release(f, saved, err, sizeof err);
		if (!strstr(err, "LOGENGINE_RATELIMIT: ") ||
		    !strstr(le_errmsg(), "LOGENGINE_RATELIMIT: ")) {
			fprintf(stderr, "  %s: errmsg \"%s\", stderr \"%s\"\n",
			        bad[i], le_errmsg(), err);
			CHECK(0);
		}
		CHECK_RC(le_stats_get(e, &st));
		CHECK_EQ(st.config_errors, 1);
		CHECK_EQ(le_get_ratelimit(e, NULL, NULL, NULL), 0);
		CHECK_RC(le_close(e));
		t_rmrf(dir);
	}
	unsetenv("LOGENGINE_RATELIMIT");
}

static int evaluated;
static int bump(void)
{
	return ++evaluated;
}

/* NULL with no default engine: nothing, no argument evaluated; with
 * one, its root logger, limited as any other. */
TEST(null_logger_is_safe_and_goes_to_the_default_engine)
{
	for (int i = 0; i < 5; i++)
		le_warn_every(NULL, 60000, 1, "none %d", bump());
	CHECK_EQ(evaluated, 0);
	CHECK_EQ(le_every_at(NULL, NULL, 1, 1), 0);
	le_engine *e = open_e();
	CHECK_RC(le_set_default(e));
	for (int i = 0; i < 5; i++)
		le_warn_every(NULL, 60000, 1, "dflt %d", bump());
	CHECK_EQ(evaluated, 1);
	struct tally t = {.prefix = "dflt"};
	le_stats st;
	close_and_tally(e, &st, &t, NULL);
	CHECK_EQ(t.records, 1);
	CHECK_EQ(t.suppressed, 4);
	t_rmrf(dir);
}

/* A site's window belongs to the engine it opened on: the next engine
 * starts it afresh (le_close reset it). */
TEST(a_new_engine_starts_each_site_afresh)
{
	for (int round = 0; round < 2; round++) {
		le_stats st;
		struct tally t = burst10(30, &st);
		CHECK_EQ(t.records, 10);
		CHECK_EQ(t.suppressed, 20);
	}
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	t_allow_jobs();
	RUN(burst_passes_then_the_rest_are_counted_in_one_summary);
	RUN(the_window_opens_again_after_its_interval_with_the_summary_first);
	RUN(two_call_sites_are_limited_apart);
	RUN(racing_threads_let_through_at_most_burst_plus_threads_and_count_all);
	RUN(racing_threads_keep_the_bound_in_every_window);
	RUN(a_flood_that_stops_is_summarised_when_its_window_ends);
	RUN(racing_threads_and_the_sweep_count_every_call_once);
	RUN(a_loggers_limit_overrides_the_calls_and_is_inherited);
	RUN(logengine_ratelimit_sets_limits_at_open);
	RUN(bad_logengine_ratelimit_is_reported_and_defaults_kept);
	RUN(null_logger_is_safe_and_goes_to_the_default_engine);
	RUN(a_new_engine_starts_each_site_afresh);
	return t_done();
}
