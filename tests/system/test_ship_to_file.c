/*
 * test_ship_to_file.c -- examples/ship_to_file.c, the forwarder a user
 * writes on the public spool, holds its promise: killed with SIGKILL at
 * any moment while it ships and started again, it leaves every record of
 * the log in its output exactly once and in order.
 */
#include "harness.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "logengine.h"
#include "record/format.h"

#define SHARDS 2
#define RECORDS 200000 /* per shard */

/* The example's block header (examples/ship_to_file.c, struct blk). */
struct blk {
	char magic[4];
	uint32_t shard, len, lost;
	uint64_t first, count;
};

static const char *example(void)
{
	return t_build_tool("LE_SHIP_TO_FILE", "examples/ship_to_file");
}

/* RECORDS records "s<shard> r<n>" per shard, in segments of 256 KiB. */
static void write_log(const char *dir)
{
	le_config cfg;
	le_engine *e;
	char msg[64];

	le_config_init(&cfg);
	cfg.dir = dir;
	cfg.shards = SHARDS;
	cfg.segment_bytes = 256 << 10;
	cfg.overflow = LE_OVERFLOW_BLOCK;
	CHECK_RC(le_open(&e, &cfg));
	for (int n = 1; n <= RECORDS; n++)
		for (unsigned s = 0; s < SHARDS; s++) {
			int len = snprintf(msg, sizeof msg, "s%u r%d", s, n);
			CHECK_RC(le_write(e, s, LE_INFO, msg, (size_t)len));
		}
	CHECK_RC(le_close(e));
}

/* Run the example on dir into out; its stderr into err (NULL: the
 * test's own). */
static pid_t start(const char *dir, const char *out, int once,
                   const char *err)
{
	pid_t pid = fork();

	CHECK(pid >= 0);
	if (pid == 0) {
		if (err && !freopen(err, "w", stderr))
			_exit(126);
		execl(example(), "ship_to_file", dir, out, once ? "--once" : NULL,
		      (char *)NULL);
		_exit(127);
	}
	return pid;
}

static off_t size_of(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? st.st_size : 0;
}

/* Start it, wait until it has written more, kill it at a random moment
 * after that.  @return 1 killed while shipping, 0 it had finished. */
static int kill_while_shipping(const char *dir, const char *out)
{
	off_t before = size_of(out);
	pid_t pid = start(dir, out, 1, NULL);
	int st;

	while (size_of(out) <= before) {
		if (waitpid(pid, &st, WNOHANG) == pid) {
			CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
			return 0; /* nothing was left to ship */
		}
		usleep(200); /* polling the condition, not synchronising */
	}
	usleep((useconds_t)(rand() % 1000)); /* the random moment */
	kill(pid, SIGKILL);
	CHECK(waitpid(pid, &st, 0) == pid);
	return WIFSIGNALED(st);
}

/* Every frame of out, checked: each shard's records 1..RECORDS, each once
 * and in order, with the payload written. */
static void check_output(const char *out)
{
	size_t len, off = 0;
	unsigned char *p = t_slurp(out, &len);
	uint64_t next[SHARDS] = {1, 1};
	char want[64];

	CHECK(p != NULL);
	while (off + sizeof(struct blk) <= len) {
		struct blk b;
		memcpy(&b, p + off, sizeof b);
		CHECK(!memcmp(b.magic, "LESF", 4) && b.shard < SHARDS);
		CHECK_EQ(b.lost, 0u);
		CHECK_EQ(b.first, next[b.shard]);
		off += sizeof b;
		CHECK(b.len <= len - off); /* a block ends inside the file */
		for (size_t end = off + b.len; off < end;) {
			le__frame f;
			const char *why;
			CHECK_EQ(le__frame_decode(p + off, end - off, LE_FIELD_ALL,
			                          LE_FRAME_MAX, &f, &why),
			         LE_FRAME_OK);
			CHECK_EQ(f.seq, next[b.shard]);
			int n = snprintf(want, sizeof want, "s%u r%" PRIu64,
			                 b.shard, f.seq);
			CHECK(f.len == (uint32_t)n && !memcmp(f.payload, want, f.len));
			next[b.shard]++;
			off += (size_t)f.size + 4;
		}
	}
	CHECK_EQ(off, len);
	for (unsigned s = 0; s < SHARDS; s++)
		CHECK_EQ(next[s], (uint64_t)RECORDS + 1);
	free(p);
}

TEST(forwarder_killed_at_random_moments_writes_every_record_once_in_order)
{
	char dir[256], out[300];
	int kills = 0, st;

	t_tmpdir(dir);
	snprintf(out, sizeof out, "%s/shipped", dir);
	write_log(dir);
	srand((unsigned)getpid());
	for (int i = 0; i < 30; i++)
		kills += kill_while_shipping(dir, out);
	pid_t pid = start(dir, out, 1, NULL);
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	fprintf(stderr, "  (%d kills while shipping)\n", kills);
	CHECK(kills >= 10); /* the kills did come while it shipped */
	check_output(out);
	t_rmrf(dir);
}

TEST(a_second_forwarder_on_the_same_shard_is_refused)
{
	char dir[256], out[300], err[300];
	le_spool *sp, *again;
	int st;

	t_tmpdir(dir);
	snprintf(out, sizeof out, "%s/shipped", dir);
	snprintf(err, sizeof err, "%s/err", dir);
	write_log(dir);
	CHECK_RC(le_spool_open(&sp, dir, 0, 0));
	CHECK_EQ(le_spool_open(&again, dir, 0, 0), LE_EBUSY);
	pid_t pid = start(dir, out, 1, err);
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1);
	/* exit 1 is any failure: the refusal must be the one it gave */
	char *msg = t_slurp_text(err);
	CHECK(msg && strstr(msg, le_strerror(LE_EBUSY)) != NULL);
	free(msg);
	CHECK_EQ(size_of(out), 0); /* and it shipped nothing */
	le_spool_close(sp);
	t_rmrf(dir);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	RUN(forwarder_killed_at_random_moments_writes_every_record_once_in_order);
	RUN(a_second_forwarder_on_the_same_shard_is_refused);
	return t_done();
}
