/*
 * test_hostile.c -- a log directory someone else could write into.
 *
 * Whatever stands inside the log directory where the engine expects its
 * own file or directory -- a symbolic link to a file of someone else's, a
 * FIFO, a hard link into another log -- is refused with a message naming
 * it, and what it pointed at is left byte for byte as it was; nothing
 * blocks (each test runs under a short alarm).  Files and directories are
 * created private to the owner and its group even under umask 000.
 */
#include "harness.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>

#include "logengine.h"
#include "logtest.h"
#include "base/os.h"

#define HANG_S 20 /* a test still running after this has hung */

static char base[256], dir[300], victim[300];

static void setup(void)
{
	alarm(HANG_S);
	t_tmpdir(base);
	snprintf(dir, sizeof dir, "%s/log", base);
	snprintf(victim, sizeof victim, "%s/victim", base);
	CHECK_EQ(mkdir(dir, 0700), 0);
	CHECK_EQ(t_spit(victim, "precious\n", 9), 0);
}

static void mkshard(void)
{
	char p[400];
	snprintf(p, sizeof p, "%s/shard-000", dir);
	CHECK_EQ(mkdir(p, 0700), 0);
}

static le_config small_cfg(const char *d)
{
	le_config c;
	le_config_init(&c);
	c.dir = d;
	c.durability = LE_SYNC_NONE;
	c.queue_capacity = 256;
	c.queue_capacity_bytes = 64u << 10;
	c.max_record_bytes = 1024;
	c.segment_bytes = 1u << 20;
	return c;
}

/* Write n records "r0".."r{n-1}" into d and close. */
static void make_log(const char *d, int n)
{
	le_config c = small_cfg(d);
	le_engine *e;
	char b[32];
	c.create_dir = 1;
	CHECK_RC(le_open(&e, &c));
	for (int i = 0; i < n; i++) {
		int len = snprintf(b, sizeof b, "r%d", i);
		CHECK_RC(le_write(e, 0, LE_INFO, b, (size_t)len));
	}
	CHECK_RC(le_close(e));
}

/* le_open on dir must fail with LE_EUNSAFE and a message holding what. */
static void open_refused(const char *what)
{
	le_config c = small_cfg(dir);
	le_engine *e = (le_engine *)1;
	int rc = le_open(&e, &c);
	if (rc != LE_EUNSAFE || !strstr(le_errmsg(), what))
		fprintf(stderr, "  le_open: %s (%s); wanted \"%s\"\n",
		        le_strerror(rc), le_errmsg(), what);
	CHECK_EQ(rc, LE_EUNSAFE);
	CHECK(strstr(le_errmsg(), what) != NULL);
	CHECK(e == NULL);
}

static void victim_untouched(void)
{
	size_t len;
	unsigned char *b = t_slurp(victim, &len);
	CHECK(b != NULL);
	CHECK_EQ(len, 9);
	CHECK(memcmp(b, "precious\n", 9) == 0);
	free(b);
}

static void plant_link(const char *name, const char *target)
{
	char p[400];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	CHECK_EQ(symlink(target, p), 0);
}

/* path holds the len bytes of before still (which is freed). */
static void check_unchanged(const char *path, unsigned char *before,
                            size_t len)
{
	size_t now = 0;
	unsigned char *after = t_slurp(path, &now);
	CHECK(after && before);
	CHECK_EQ(now, len);
	CHECK(memcmp(before, after, len) == 0);
	free(before);
	free(after);
}

TEST(symlinked_queue_is_refused_and_its_target_untouched)
{
	setup();
	mkshard();
	plant_link("shard-000/QUEUE", victim);
	open_refused("shard-000/QUEUE is a symbolic link; refusing to follow");
	victim_untouched();
	t_rmrf(base);
}

TEST(symlinked_checkpoint_is_refused_and_its_target_untouched)
{
	setup();
	mkshard();
	plant_link("shard-000/CHECKPOINT", victim);
	open_refused("shard-000/CHECKPOINT is a symbolic link");
	victim_untouched();
	t_rmrf(base);
}

TEST(symlinked_lock_is_refused_and_its_target_untouched)
{
	setup();
	plant_link("LOCK", victim);
	open_refused("LOCK is a symbolic link");
	victim_untouched();
	t_rmrf(base);
}

/* A segment linked into another log: its "torn tail" is not cut and no
 * record is appended to it. */
TEST(symlinked_segment_into_another_log_is_left_alone)
{
	char other[300], seg[400];
	size_t len = 0;

	setup();
	snprintf(other, sizeof other, "%s/other", base);
	make_log(other, 10);
	snprintf(seg, sizeof seg, "%s/shard-000/0000000000000001.seg", other);
	/* a "torn tail" for recovery to cut */
	int fd = open(seg, O_WRONLY | O_APPEND);
	CHECK(fd >= 0);
	CHECK_EQ(write(fd, "\1\2\3", 3), 3);
	close(fd);
	unsigned char *before = t_slurp(seg, &len);
	mkshard();
	plant_link("shard-000/0000000000000001.seg", seg);
	open_refused("shard-000/0000000000000001.seg is a symbolic link");
	check_unchanged(seg, before, len);
	t_rmrf(base);
}

TEST(symlinked_shard_directory_is_refused)
{
	char elsewhere[300];
	struct stat st;

	setup();
	snprintf(elsewhere, sizeof elsewhere, "%s/elsewhere", base);
	CHECK_EQ(mkdir(elsewhere, 0700), 0);
	plant_link("shard-000", elsewhere);
	open_refused("shard-000 is a symbolic link");
	/* nothing was made in the directory it points to */
	char p[400];
	snprintf(p, sizeof p, "%s/QUEUE", elsewhere);
	CHECK(stat(p, &st) < 0 && errno == ENOENT);
	snprintf(p, sizeof p, "%s/CHECKPOINT", elsewhere);
	CHECK(stat(p, &st) < 0 && errno == ENOENT);
	t_rmrf(base);
}

/* A segment with a second name elsewhere (cp -al, ln): appending to it or
 * cutting it would change the other log too. */
TEST(hard_linked_segment_is_not_written_through)
{
	char other[300], seg[400], p[400];
	size_t len = 0;

	setup();
	snprintf(other, sizeof other, "%s/other", base);
	make_log(other, 10);
	snprintf(seg, sizeof seg, "%s/shard-000/0000000000000001.seg", other);
	unsigned char *before = t_slurp(seg, &len);
	mkshard();
	snprintf(p, sizeof p, "%s/shard-000/0000000000000001.seg", dir);
	CHECK_EQ(link(seg, p), 0);
	open_refused("shard-000/0000000000000001.seg has 2 hard links");
	check_unchanged(seg, before, len);
	t_rmrf(base);
}

/* The log directory itself may be a link: the user named that path. */
TEST(log_directory_given_as_a_symlink_is_used)
{
	char real[300], link_[300];

	setup();
	snprintf(real, sizeof real, "%s/real", base);
	snprintf(link_, sizeof link_, "%s/link", base);
	CHECK_EQ(mkdir(real, 0700), 0);
	CHECK_EQ(symlink(real, link_), 0);
	make_log(link_, 5);
	CHECK_EQ(count_records(real), 5);
	t_rmrf(base);
}

static void plant_fifo(const char *name)
{
	char p[400];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	CHECK_EQ(mkfifo(p, 0600), 0);
}

TEST(fifo_in_place_of_a_segment_fails_open_instead_of_hanging)
{
	setup();
	make_log(dir, 3);
	plant_fifo("shard-000/0000000000000002.seg");
	open_refused("shard-000/0000000000000002.seg is a FIFO");
	t_rmrf(base);
}

TEST(fifo_in_place_of_the_checkpoint_fails_open_instead_of_hanging)
{
	setup();
	mkshard();
	plant_fifo("shard-000/CHECKPOINT");
	open_refused("shard-000/CHECKPOINT is a FIFO");
	t_rmrf(base);
}

TEST(fifo_in_place_of_the_queue_fails_open_instead_of_hanging)
{
	setup();
	mkshard();
	plant_fifo("shard-000/QUEUE");
	open_refused("shard-000/QUEUE is a FIFO");
	t_rmrf(base);
}

/* ---- the command line ---- */

/* `logengine ARGS dir` under timeout: its exit status (124: it hung);
 * its stderr in err. */
static int cli(const char *args, char *err, size_t cap)
{
	char cmd[2048], ef[400];
	snprintf(ef, sizeof ef, "%s/stderr", base);
	snprintf(cmd, sizeof cmd, "timeout 10 %s %s '%s' >/dev/null 2>'%s'",
	         t_build_tool("LE_CLI", "logengine"), args, dir, ef);
	int st = system(cmd);
	size_t len = 0;
	unsigned char *b = t_slurp(ef, &len);
	snprintf(err, cap, "%s", b ? (char *)b : "");
	free(b);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void cli_returns(const char *args, const char *named)
{
	char err[2048];
	int rc = cli(args, err, sizeof err);
	if (rc == 124 || (named && !strstr(err, named)))
		fprintf(stderr, "  logengine %s: exit %d: %s", args, rc, err);
	CHECK(rc != 124);
	if (named)
		CHECK(strstr(err, named) != NULL);
}

TEST(fifo_segment_makes_cat_verify_stats_recover_fail_instead_of_hanging)
{
	const char *fifo = "shard-000/0000000000000002.seg is a FIFO";
	setup();
	make_log(dir, 3);
	plant_fifo("shard-000/0000000000000002.seg");
	cli_returns("cat", fifo);
	cli_returns("verify", fifo);
	cli_returns("stats", fifo);
	cli_returns("recover", fifo);
	CHECK(cli("recover", (char[8]){0}, 8) != 0);
	cli_returns("vacuum --vacuum-size 1", fifo);
	CHECK(cli("vacuum --vacuum-size 1", (char[8]){0}, 8) != 0);
	t_rmrf(base);
}

/* vacuum stats and deletes segments: a symbolic link in place of one is
 * refused, not followed (its target, in another log, keeps its size and
 * its records), and nothing of that shard is deleted. */
TEST(vacuum_refuses_a_symlinked_segment_and_deletes_nothing_of_its_shard)
{
	char other[300], seg[400], target[400];
	struct stat before, after;

	setup();
	make_log(dir, 3);
	snprintf(other, sizeof other, "%s/other", base);
	make_log(other, 3);
	snprintf(seg, sizeof seg, "%s/shard-000/0000000000000002.seg", dir);
	snprintf(target, sizeof target, "%s/shard-000/0000000000000001.seg",
	         other);
	CHECK_EQ(symlink(target, seg), 0);
	CHECK_EQ(stat(target, &before), 0);
	cli_returns("vacuum --vacuum-size 1",
	            "shard-000/0000000000000002.seg is a symbolic link");
	CHECK(cli("vacuum --vacuum-size 1", (char[8]){0}, 8) != 0);
	CHECK_EQ(stat(target, &after), 0);
	CHECK_EQ(after.st_size, before.st_size);
	snprintf(seg, sizeof seg, "%s/shard-000/0000000000000001.seg", dir);
	CHECK_EQ(access(seg, F_OK), 0); /* the oldest of that shard stays */
	t_rmrf(base);
}

TEST(fifo_checkpoint_makes_cat_verify_stats_recover_return)
{
	setup();
	make_log(dir, 3);
	char p[400];
	snprintf(p, sizeof p, "%s/shard-000/CHECKPOINT", dir);
	CHECK_EQ(unlink(p), 0);
	plant_fifo("shard-000/CHECKPOINT");
	cli_returns("cat", NULL);
	cli_returns("verify", NULL);
	cli_returns("stats", NULL);
	cli_returns("recover", "shard-000/CHECKPOINT is a FIFO");
	t_rmrf(base);
}

/* The report's reproduction: recover must not write a queue into the
 * file a planted QUEUE link names. */
TEST(recover_refuses_a_symlinked_queue_and_leaves_its_target)
{
	setup();
	mkshard();
	plant_link("shard-000/QUEUE", victim);
	cli_returns("recover", "shard-000/QUEUE is a symbolic link");
	CHECK(cli("recover", (char[8]){0}, 8) != 0);
	victim_untouched();
	t_rmrf(base);
}

/* vacuum deletes what it lists: a shard directory linked into another
 * log must not be listed. */
TEST(vacuum_refuses_a_symlinked_shard_directory)
{
	char other[300], sd[400];
	setup();
	snprintf(other, sizeof other, "%s/other", base);
	le_config c = small_cfg(other);
	c.create_dir = 1;
	c.segment_bytes = 4096; /* several sealed segments */
	le_engine *e;
	char b[200];
	memset(b, 'x', sizeof b);
	CHECK_RC(le_open(&e, &c));
	for (int i = 0; i < 200; i++)
		CHECK_RC(le_write(e, 0, LE_INFO, b, sizeof b));
	CHECK_RC(le_close(e));
	long before = count_records(other);
	CHECK(before == 200);
	snprintf(sd, sizeof sd, "%s/shard-000", other);
	plant_link("shard-000", sd);
	char err[2048];
	int rc = cli("vacuum --size 1", err, sizeof err);
	CHECK(rc != 0 && rc != 124);
	CHECK(strstr(err, "shard-000 is a symbolic link") != NULL);
	CHECK_EQ(count_records(other), before);
	t_rmrf(base);
}

/* A hard link into another log shows that log's records as this one's:
 * readers refuse the segment by name (exit 2, a problem of verify). */
TEST(hard_linked_segment_from_another_log_is_refused_by_cat_and_verify)
{
	char other[300], seg[400], p[400], err[2048];
	const char *named = "shard-000/0000000000000001.seg has 2 hard links";

	setup();
	snprintf(other, sizeof other, "%s/other", base);
	make_log(other, 10);
	snprintf(seg, sizeof seg, "%s/shard-000/0000000000000001.seg", other);
	mkshard();
	snprintf(p, sizeof p, "%s/shard-000/0000000000000001.seg", dir);
	CHECK_EQ(link(seg, p), 0);
	cli_returns("cat", named);
	CHECK(cli("cat", err, sizeof err) != 0);
	cli_returns("verify", named);
	CHECK(cli("verify", err, sizeof err) != 0);
	CHECK_EQ(unlink(p), 0);
	CHECK_EQ(count_records(other), 10); /* one name again: read as before */
	t_rmrf(base);
}

/* The log's own files keep one name through sealing and archiving, so
 * the check above refuses nothing of theirs. */
TEST(archived_log_reads_whole_with_no_file_refused)
{
	le_config c = small_cfg(dir);
	le_engine *e;
	char b[200], err[2048];

	setup();
	c.segment_bytes = 4096;
	c.archive_keep_segments = 1;
	memset(b, 'x', sizeof b);
	c.create_dir = 1;
	CHECK_RC(le_open(&e, &c));
	for (int i = 0; i < 200; i++)
		CHECK_RC(le_write(e, 0, LE_INFO, b, sizeof b));
	CHECK_RC(le_flush(e, 5000));
	char z[400];
	snprintf(z, sizeof z, "%s/shard-000/0000000000000001.seg.zst", dir);
	for (int i = 0; i < 1000 && access(z, F_OK) != 0; i++)
		usleep(10000); /* polls the archiver, 10 s at most */
	CHECK_EQ(access(z, F_OK), 0);
	CHECK_RC(le_close(e));
	CHECK_EQ(count_records(dir), 200);
	CHECK_EQ(cli("verify", err, sizeof err), 0);
	t_rmrf(base);
}

/* The live page is optional: le_open succeeds without it, but says
 * which file it refused and that the page is off, and counts it. */
static void stats_page_refused(void (*make)(const char *path),
                               const char *what)
{
	char p[400];
	le_config c = small_cfg(dir);
	le_engine *e;
	le_stats st;

	setup();
	mkshard();
	snprintf(p, sizeof p, "%s/shard-000/STATS", dir);
	make(p);
	CHECK_RC(le_open(&e, &c));
	if (!strstr(le_errmsg(), what) || !strstr(le_errmsg(), "page"))
		fprintf(stderr, "  le_errmsg: \"%s\"\n", le_errmsg());
	CHECK(strstr(le_errmsg(), what) != NULL);
	CHECK(strstr(le_errmsg(), "live page of shard 0 is off") != NULL);
	CHECK_RC(le_write(e, 0, LE_INFO, "x", 1));
	CHECK_RC(le_stats_get(e, &st));
	CHECK_EQ(st.live_pages_off, 1);
	CHECK_RC(le_close(e));
	CHECK_EQ(count_records(dir), 1);
	victim_untouched();
	t_rmrf(base);
}

static void make_link(const char *p) { CHECK_EQ(symlink(victim, p), 0); }
static void make_fifo(const char *p) { CHECK_EQ(mkfifo(p, 0600), 0); }
static void make_device(const char *p)
{
	CHECK_EQ(mknod(p, S_IFCHR | 0600, makedev(1, 3)), 0);
}

static void make_socket(const char *p) { CHECK_EQ(t_mksocket(p), 0); }

TEST(stats_page_refused_by_name_and_counted_as_off)
{
	stats_page_refused(make_link, "shard-000/STATS is a symbolic link");
	stats_page_refused(make_fifo, "shard-000/STATS is a FIFO");
	stats_page_refused(make_socket, "shard-000/STATS is a socket");
	if (geteuid() != 0) {
		printf("  device: skipped, mknod needs root\n");
		return;
	}
	stats_page_refused(make_device, "shard-000/STATS is a character");
}

TEST(intact_engine_has_its_live_page)
{
	le_config c = small_cfg(dir);
	le_engine *e;
	le_stats st;

	setup();
	CHECK_RC(le_open(&e, &c));
	CHECK_EQ(le_errmsg()[0], '\0');
	CHECK_RC(le_stats_get(e, &st));
	CHECK_EQ(st.live_pages_off, 0);
	CHECK_RC(le_close(e));
	t_rmrf(base);
}

/* ---- a failed open ---- */

/* What a file system without O_DIRECT does: the file is created, then
 * the open fails. */
static int no_direct_openat(int dfd, const char *name, int flags, mode_t m)
{
	if (!(flags & O_DIRECT))
		return le__os_real.openat(dfd, name, flags, m);
	int fd = le__os_real.openat(dfd, name, flags & ~O_DIRECT, m);
	if (fd >= 0)
		close(fd);
	errno = EINVAL;
	return -1;
}

TEST(failed_open_leaves_no_empty_segment_behind)
{
	setup();
	le__os t = le__os_real;
	t.openat = no_direct_openat;
	le__os_install(&t);
	le_config c = small_cfg(dir);
	c.direct_io = 1;
	le_engine *e;
	CHECK(le_open(&e, &c) < 0);
	CHECK(strstr(le_errmsg(), "direct_io") != NULL);
	le__os_install(NULL);
	char p[400];
	struct stat st;
	snprintf(p, sizeof p, "%s/shard-000/0000000000000001.seg", dir);
	CHECK(stat(p, &st) < 0 && errno == ENOENT);
	char err[512];
	CHECK_EQ(cli("verify", err, sizeof err), 0);
	t_rmrf(base);
}

TEST(close_of_null_is_a_no_op)
{
	CHECK_EQ(le_close(NULL), 0);
	CHECK_EQ(le_close_stats(NULL, NULL), 0);
}

/* ---- modes ---- */

static unsigned mode_of(const char *rel)
{
	char p[400];
	struct stat st;
	snprintf(p, sizeof p, "%s/%s", dir, rel);
	CHECK_EQ(lstat(p, &st), 0);
	return (unsigned)st.st_mode & 07777;
}

static void check_modes(unsigned dmode, unsigned fmode)
{
	CHECK_EQ(mode_of(""), dmode);
	CHECK_EQ(mode_of("shard-000"), dmode);
	CHECK_EQ(mode_of("LOCK"), fmode);
	CHECK_EQ(mode_of("shard-000/QUEUE"), fmode);
	CHECK_EQ(mode_of("shard-000/CHECKPOINT"), fmode);
	CHECK_EQ(mode_of("shard-000/STATS"), fmode);
	CHECK_EQ(mode_of("shard-000/0000000000000001.seg"), fmode);
	CHECK_EQ(mode_of("lines.log"), fmode); /* stream_path: every payload */
}

/* The engine of the mode tests, with the line file in dir beside the
 * segments, as the README suggests. */
static void log_one_with_lines(le_config *c)
{
	char lines[400];
	le_engine *e;

	snprintf(lines, sizeof lines, "%s/lines.log", dir);
	c->create_dir = 1;
	c->stream_path = lines;
	CHECK_RC(le_open(&e, c));
	CHECK_RC(le_write(e, 0, LE_INFO, "x", 1));
	CHECK_RC(le_close(e));
}

TEST(files_are_private_by_default_even_under_umask_000)
{
	t_tmpdir(base);
	snprintf(dir, sizeof dir, "%s/log", base);
	umask(0);
	le_config c = small_cfg(dir);
	log_one_with_lines(&c);
	check_modes(0750, 0640);
	t_rmrf(base);
}

TEST(configured_modes_are_used)
{
	t_tmpdir(base);
	snprintf(dir, sizeof dir, "%s/log", base);
	umask(0);
	le_config c = small_cfg(dir);
	c.dir_mode = 0700;
	c.file_mode = 0600;
	log_one_with_lines(&c);
	check_modes(0700, 0600);
	t_rmrf(base);
}

TEST(a_mode_the_owner_cannot_use_is_refused_by_name)
{
	le_config c = small_cfg("/nonexistent");
	le_engine *e;
	c.file_mode = 0440;
	CHECK_EQ(le_open(&e, &c), LE_EINVAL);
	CHECK(strstr(le_errmsg(), "file_mode") != NULL);
	c.file_mode = 0;
	c.dir_mode = 01750;
	CHECK_EQ(le_open(&e, &c), LE_EINVAL);
	CHECK(strstr(le_errmsg(), "dir_mode") != NULL);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	RUN(symlinked_queue_is_refused_and_its_target_untouched);
	RUN(symlinked_checkpoint_is_refused_and_its_target_untouched);
	RUN(symlinked_lock_is_refused_and_its_target_untouched);
	RUN(symlinked_segment_into_another_log_is_left_alone);
	RUN(symlinked_shard_directory_is_refused);
	RUN(hard_linked_segment_is_not_written_through);
	RUN(log_directory_given_as_a_symlink_is_used);
	RUN(fifo_in_place_of_a_segment_fails_open_instead_of_hanging);
	RUN(fifo_in_place_of_the_checkpoint_fails_open_instead_of_hanging);
	RUN(fifo_in_place_of_the_queue_fails_open_instead_of_hanging);
	RUN(fifo_segment_makes_cat_verify_stats_recover_fail_instead_of_hanging);
	RUN(fifo_checkpoint_makes_cat_verify_stats_recover_return);
	RUN(recover_refuses_a_symlinked_queue_and_leaves_its_target);
	RUN(vacuum_refuses_a_symlinked_shard_directory);
	RUN(vacuum_refuses_a_symlinked_segment_and_deletes_nothing_of_its_shard);
	RUN(hard_linked_segment_from_another_log_is_refused_by_cat_and_verify);
	RUN(archived_log_reads_whole_with_no_file_refused);
	RUN(stats_page_refused_by_name_and_counted_as_off);
	RUN(intact_engine_has_its_live_page);
	RUN(failed_open_leaves_no_empty_segment_behind);
	RUN(close_of_null_is_a_no_op);
	RUN(files_are_private_by_default_even_under_umask_000);
	RUN(configured_modes_are_used);
	RUN(a_mode_the_owner_cannot_use_is_refused_by_name);
	return t_done();
}
