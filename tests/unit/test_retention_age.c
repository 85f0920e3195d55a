/*
 * test_retention_age.c -- retention_age_ms deletes the sealed segments
 * last written longer ago than it, oldest first, without a rotation to
 * trigger it, and never the active segment or a newer one.
 */
#include "harness.h"

#include "logengine.h"
#include "logtest.h"

static char dir[256];

static int segments(void)
{
	char sd[400];
	snprintf(sd, sizeof sd, "%s/shard-000", dir);
	DIR *d = opendir(sd);
	struct dirent *de;
	int n = 0;
	while (d && (de = readdir(d))) {
		size_t l = strlen(de->d_name);
		n += l > 4 && !strcmp(de->d_name + l - 4, ".seg");
	}
	if (d)
		closedir(d);
	return n;
}

static void write_n(le_engine *e, const char *what, int n)
{
	char b[128];
	for (int i = 0; i < n; i++) {
		int k = snprintf(b, sizeof b, "%s %d .................................", what, i);
		CHECK_EQ(le_write(e, 0, LE_INFO, b, (size_t)k), 0);
	}
	CHECK_RC(le_flush(e, 5000));
}

/* An engine on a new dir with segments of 8 KiB (about 130 records),
 * retention_age_ms age_ms (0: none). */
static le_engine *open_small_segments(uint32_t age_ms)
{
	le_config c;
	le_engine *e;

	t_tmpdir(dir);
	le_config_init(&c);
	c.dir = dir;
	c.durability = LE_SYNC_NONE;
	c.segment_bytes = 8192;
	c.flush_ms = 5;
	c.retention_age_ms = age_ms;
	CHECK_RC(le_open(&e, &c));
	return e;
}

/* counts[0]: "old" records left, counts[1]: "new" ones */
static void count_kinds(const le_record *r, void *arg)
{
	long *counts = arg;
	if (r->flags & LE_REC_MARKER)
		return;
	counts[r->len >= 3 && !memcmp(r->payload, "new", 3)]++;
}

TEST(segments_older_than_the_age_limit_go_and_newer_ones_stay)
{
	le_engine *e = open_small_segments(3000);
	write_n(e, "old", 600); /* several sealed segments */
	int before = segments();
	CHECK(before >= 3);
	usleep(3500000); /* the old ones are now past the limit */
	write_n(e, "new", 600);
	int during = segments();
	/* the writer looks every second: the old ones go (and only they:
	 * the new ones are far from 3 s old when it is seen) */
	le_stats st;
	for (int i = 0; i < 100; i++) {
		le_stats_get(e, &st);
		if (st.segments_deleted >= (uint64_t)before - 1)
			break;
		usleep(20000);
	}
	printf("  (%d segments before, %d after the new records, %d now; "
	       "%" PRIu64 " deleted)\n", before, during, segments(),
	       st.segments_deleted);
	fflush(stdout);
	CHECK(st.segments_deleted >= (uint64_t)before - 1);
	CHECK_EQ(le_close(e), 0);
	/* every new record is left, and of the old ones only those of the
	 * segment that was active when the new ones began (a few dozen: a
	 * segment holds about 130) */
	long counts[2] = {0, 0};
	CHECK(read_all(dir, LE_RECOVER_ABSOLUTE, count_kinds, counts) >= 0);
	CHECK_EQ(counts[1], 600);
	CHECK(counts[0] < 200);
	t_rmrf(dir);
}

TEST(no_age_limit_keeps_every_segment)
{
	le_engine *e = open_small_segments(0);
	write_n(e, "old", 600);
	usleep(1200000);
	write_n(e, "new", 10);
	le_stats st;
	le_stats_get(e, &st);
	CHECK_EQ(st.segments_deleted, 0);
	CHECK_EQ(le_close(e), 0);
	CHECK_EQ(count_records(dir), 610);
	t_rmrf(dir);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	RUN(segments_older_than_the_age_limit_go_and_newer_ones_stay);
	RUN(no_age_limit_keeps_every_segment);
	return t_done();
}
