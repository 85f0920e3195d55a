/*
 * test_footprint.c -- an engine that is given little to do costs little:
 * wake-ups, memory, disk and descriptors follow use.  Each test is named
 * after what would break; none times a call: they count context
 * switches, resident pages, disk blocks and descriptors.
 */
#include "harness.h"

#include <dirent.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "logengine.h"
#include "engine/shard.h" /* the writer's idle word */
#include "base/os.h"
#include "logtest.h"

static char dir[256];

/* Voluntary context switches of every thread of this process so far. */
static long long voluntary_switches(void)
{
	long long sum = 0;
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;

	CHECK(d != NULL);
	while ((de = readdir(d))) {
		char path[300], line[256];
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof path, "/proc/self/task/%s/status",
		         de->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue; /* a thread that just ended */
		while (fgets(line, sizeof line, f))
			if (!strncmp(line, "voluntary_ctxt_switches:", 24))
				sum += atoll(line + 24);
		fclose(f);
	}
	closedir(d);
	return sum;
}

/* Wait (up to 10 s, else fail) until shard 0's writer has gone idle. */
static void writer_idle(le_engine *e)
{
	uint64_t t0 = le__mono_ns();
	while (!atomic_load(&e->shards[0].idle)) {
		CHECK(le__mono_ns() - t0 < 10000000000u);
		usleep(10000);
	}
}

static int written_two(const le_stats *st)
{
	return st->written >= 2;
}

/*
 * An engine with nothing to log must let the machine sleep: a writer
 * that looked at its queue every flush_ms woke 20 times a second.  Once
 * idle, every thread of the process together (the writer, the sync
 * thread, this one) may wake at most once a second.
 */
TEST(idle_engine_wakes_at_most_once_a_second)
{
	le_config c;
	le_config_init(&c);
	c.dir = t_tmpdir(dir);
	le_engine *e = t_open(&c);
	CHECK_EQ(le_write(e, 0, LE_INFO, "one", 3), 0);
	CHECK_EQ(le_flush(e, 5000), 0);
	writer_idle(e);
	const int secs = 3;
	long long a = voluntary_switches();
	sleep(secs); /* the window measured, not a synchronisation */
	long long n = voluntary_switches() - a;
	fprintf(stderr, "  (%lld voluntary context switches in %d s)\n", n,
	        secs);
	CHECK(n <= secs); /* the sleep itself is one */
	CHECK_EQ(le_close(e), 0);
	t_rmrf(dir);
}

/*
 * An idle writer sleeps for seconds; a record that came then must still
 * be written within flush_ms: its producer wakes the writer.  A lost
 * wake-up shows as the whole idle sleep.
 */
TEST(a_record_wakes_an_idle_writer_within_flush_ms)
{
	le_config c;
	le_config_init(&c);
	c.dir = t_tmpdir(dir);
	c.flush_ms = 100;
	le_engine *e = t_open(&c);
	CHECK_EQ(le_write(e, 0, LE_INFO, "one", 3), 0);
	CHECK_EQ(le_flush(e, 5000), 0);
	writer_idle(e);
	uint64_t t0 = le__mono_ns();
	CHECK_EQ(le_write(e, 0, LE_INFO, "two", 3), 0);
	le_stats st;
	for (;;) {
		le_stats_get(e, &st);
		if (written_two(&st))
			break;
		CHECK(le__mono_ns() - t0 < 20000000000u);
		usleep(1000);
	}
	double ms = (double)(le__mono_ns() - t0) / 1e6;
	fprintf(stderr, "  (written %.0f ms after le_write; flush_ms 100)\n",
	        ms);
	CHECK(ms < 2000); /* the idle sleep is 10 s */
	CHECK_EQ(le_close(e), 0);
	t_rmrf(dir);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	RUN(idle_engine_wakes_at_most_once_a_second);
	RUN(a_record_wakes_an_idle_writer_within_flush_ms);
	return t_done();
}
